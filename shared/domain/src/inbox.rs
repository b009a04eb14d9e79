//! The inbox queue's consumer (the record-facts function): a batch of stored callbacks, each
//! archived, then recorded as facts. It sits above `facts` and `replay`, which it joins
//! (the archive belongs to replay, which records through `facts` in turn).
//!
//! Per message: the stored callback archived first (rule 10; a failure to archive redelivers
//! it like any store failure); then a fact written (or found already written) and its reason
//! sent -> success; a store or queue failure -> reported for redelivery, with the rest of its
//! group (FIFO order); a poison message (unknown tenant, fails verification, unparseable) can
//! never succeed, so it is moved to the dead-letter queue with its class and acknowledged
//! instead of being retried. On a message's last receive before the queue's own redrive its
//! code is marked dirty before its work (rule 11).

use crate::batch::{is_last_receive, DeadLetters, PartialBatch, Received};
use crate::dirty::DirtyWhy;
use crate::facts::{
    CountOutcome, FactLedger, FactOutcome, FactRecorder, FactsError, QuotaNotifier, TenantProfiles,
};
use crate::intake::InboxMessage;
use crate::reasons::ReasonQueue;
use crate::replay::{Archiving, CallbackArchive};

/// The inbox's `maxReceiveCount`, where poison goes, and the archive every message is kept in.
pub struct InboxExits<D, A> {
    pub dead_letters: D,
    pub max_receives: u32,
    pub archive: Archiving<A>,
}

/// Consumes one batch of the inbox; the answer names the messages to redeliver.
pub async fn consume<T, L, Q, N, D, A>(
    recorder: &FactRecorder<T, L, Q, N>,
    exits: &InboxExits<D, A>,
    messages: &[Received<'_>],
) -> PartialBatch
where
    T: TenantProfiles,
    L: FactLedger,
    Q: ReasonQueue,
    N: QuotaNotifier,
    D: DeadLetters,
    A: CallbackArchive,
{
    let mut batch = PartialBatch::default();
    for message in messages {
        let Received {
            message_id: id,
            group,
            body,
            receive_count,
        } = *message;
        if batch.group_failed(group) {
            batch.fail(group, id);
            continue;
        }
        if is_last_receive(receive_count, exits.max_receives) {
            recorder.gave_up_on(group, DirtyWhy::LastReceive).await;
        }
        let outcome = match serde_json::from_str::<InboxMessage>(body) {
            Ok(inbox) => match exits.archive.keep(&inbox, group).await {
                Ok(()) => recorder.record(&inbox).await,
                Err(error) => Err(FactsError::Store(error)),
            },
            Err(error) => Err(FactsError::Poison(format!("not an inbox message: {error}"))),
        };
        match outcome {
            Ok(FactOutcome::Add {
                fact,
                outcome,
                crossings,
            }) => {
                let counted = matches!(outcome, CountOutcome::Counted { .. });
                crate::telemetry::add(&fact.tenant, counted);
                tracing::info!(message_id = id, tenant = %fact.tenant, code = %fact.code, staff = %fact.staff, ?outcome, crossings = crossings.len(), "add recorded");
            }
            Ok(FactOutcome::StaffChanged { kind, codes }) => {
                tracing::info!(message_id = id, kind, codes, "contact change recorded")
            }
            Ok(FactOutcome::Ignored { kind }) => {
                tracing::info!(message_id = id, kind, "event acknowledged")
            }
            Err(FactsError::Poison(reason)) => {
                recorder.gave_up_on(group, DirtyWhy::InboxGaveUp).await;
                batch
                    .park_poison(&exits.dead_letters, group, id, body, &reason)
                    .await;
            }
            Err(FactsError::Store(error)) => {
                tracing::warn!(message_id = id, group, error = ?error, "fact not written; redelivered later");
                batch.fail(group, id);
            }
        }
    }
    batch
}
