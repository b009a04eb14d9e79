//! Translates refresh.fifo batches into `Refresher::refresh` calls: one recompute per code
//! however many of its reasons the batch holds (MISSION rule 5, coalescing).
//!
//! A code whose refresh fails has all its messages reported for redelivery (they are the
//! rest of its group); other codes carry on. A message that is not a refresh reason is moved
//! to the dead-letter queue as poison.

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use lambda_runtime::{Error, LambdaEvent};
use shared::batch::PartialBatch;
use shared::ports::DeadLetters;
use shared::refresh::{CodeFacts, ContactWayPusher, Outcome, RefreshReason, Refresher};

/// The reasons of one code in this batch, in arrival order.
struct CodeWork<'a> {
    group: &'a str,
    reason: RefreshReason,
    message_ids: Vec<&'a str>,
    fact_at_ms: Vec<u64>,
}

#[tracing::instrument(skip_all, fields(records = event.payload.records.len()))]
pub(crate) async fn handle<F: CodeFacts, P: ContactWayPusher, D: DeadLetters>(
    refresher: &Refresher<F, P>,
    dead_letters: &D,
    event: LambdaEvent<SqsEvent>,
) -> Result<SqsBatchResponse, Error> {
    let mut batch = PartialBatch::default();
    let mut work: Vec<CodeWork<'_>> = Vec::new();
    for message in &event.payload.records {
        let id = message.message_id.as_deref().unwrap_or_default();
        let group = message
            .attributes
            .get("MessageGroupId")
            .map(String::as_str)
            .unwrap_or_default();
        let body = message.body.as_deref().unwrap_or_default();
        match serde_json::from_str::<RefreshReason>(body) {
            Ok(reason) => match work
                .iter_mut()
                .find(|w| w.reason.tenant == reason.tenant && w.reason.code == reason.code)
            {
                Some(code) => {
                    code.message_ids.push(id);
                    code.fact_at_ms.push(reason.fact_at_ms);
                }
                None => work.push(CodeWork {
                    group,
                    fact_at_ms: vec![reason.fact_at_ms],
                    reason,
                    message_ids: vec![id],
                }),
            },
            Err(error) => {
                let reason = format!("not a refresh reason: {error}");
                tracing::error!(
                    message_id = id,
                    group,
                    reason,
                    "poison message moved to the dead-letter queue"
                );
                if dead_letters
                    .park(group, id, body, "poison", &reason)
                    .await
                    .is_err()
                {
                    batch.fail(group, id);
                }
            }
        }
    }
    for code in work {
        let (tenant, code_id) = (&code.reason.tenant, &code.reason.code);
        match refresher.refresh(tenant, code_id, &code.fact_at_ms).await {
            Ok(outcome) => {
                let outcome = match outcome {
                    Outcome::Pushed(users) => format!("pushed {} users", users.len()),
                    other => format!("{other:?}"),
                };
                tracing::info!(tenant = %tenant, code = %code_id, reasons = code.message_ids.len(), outcome, "code refreshed");
            }
            Err(error) => {
                tracing::warn!(tenant = %tenant, code = %code_id, error = %error, "refresh failed; its reasons are redelivered");
                for id in code.message_ids {
                    batch.fail(code.group, id);
                }
            }
        }
    }
    let mut response = SqsBatchResponse::default();
    response.set_failures(batch.failures());
    Ok(response)
}
