//! Translates inbox.fifo batches into `FactRecorder::record` calls.
//!
//! Per message: a fact written (or found already written) and its reason sent -> success;
//! a store or queue failure -> reported for redelivery, with the rest of its group (FIFO
//! order); a poison message (unknown tenant, fails verification, unparseable) can never
//! succeed, so it is moved to the dead-letter queue with its class and acknowledged instead
//! of being retried.

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent, SqsMessage};
use lambda_runtime::{Error, LambdaEvent};
use shared::batch::PartialBatch;
use shared::facts::{AddLedger, FactRecorder, FactsError, ReasonQueue, Recorded, TenantProfiles};
use shared::intake::InboxMessage;
use shared::ports::DeadLetters;

fn attribute<'a>(message: &'a SqsMessage, name: &str) -> &'a str {
    message
        .attributes
        .get(name)
        .map(String::as_str)
        .unwrap_or_default()
}

#[tracing::instrument(skip_all, fields(records = event.payload.records.len()))]
pub(crate) async fn handle<T: TenantProfiles, L: AddLedger, Q: ReasonQueue, D: DeadLetters>(
    recorder: &FactRecorder<T, L, Q>,
    dead_letters: &D,
    event: LambdaEvent<SqsEvent>,
) -> Result<SqsBatchResponse, Error> {
    let mut batch = PartialBatch::default();
    for message in &event.payload.records {
        let id = message.message_id.as_deref().unwrap_or_default();
        let group = attribute(message, "MessageGroupId");
        if batch.group_failed(group) {
            batch.fail(group, id);
            continue;
        }
        let body = message.body.as_deref().unwrap_or_default();
        let outcome = match serde_json::from_str::<InboxMessage>(body) {
            Ok(inbox) => recorder.record(&inbox).await,
            Err(error) => Err(FactsError::Poison(format!("not an inbox message: {error}"))),
        };
        match outcome {
            Ok(Recorded::Add { fact, outcome }) => {
                tracing::info!(message_id = id, tenant = %fact.tenant, code = %fact.code, staff = %fact.staff, ?outcome, "add recorded");
            }
            Ok(Recorded::Ignored { kind }) => {
                tracing::info!(message_id = id, kind, "event acknowledged")
            }
            Err(FactsError::Poison(reason)) => {
                tracing::error!(
                    message_id = id,
                    group,
                    reason,
                    "poison message moved to the dead-letter queue"
                );
                if let Err(error) = dead_letters.park(group, id, body, "poison", &reason).await {
                    tracing::error!(message_id = id, error = ?error, "could not park the poison message; it will be redelivered");
                    batch.fail(group, id);
                }
            }
            Err(FactsError::Store(error)) => {
                tracing::warn!(message_id = id, group, error = ?error, "fact not written; redelivered later");
                batch.fail(group, id);
            }
        }
    }
    let mut response = SqsBatchResponse::default();
    response.set_failures(batch.failures());
    Ok(response)
}
