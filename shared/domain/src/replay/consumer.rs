//! The replay queue's consumer: one message is one page of a run. The page's work is
//! idempotent, so a page that fails (the table or a queue unavailable) is reported for
//! redelivery and done again; once it is done, the next page is queued before the message is
//! acknowledged. A message that is not a page is logged and dropped: retrying cannot make it
//! one.

// Through `super`, where the replay names its ports, so this file follows them if they move.
use super::{
    CallbackArchive, CodeFacts, FactLedger, Page, QuotaLedger, QuotaNotifier, ReasonQueue,
    ReplayPages, ReplayReads, ReplayRuns, Replayer, StaffLedger, TenantProfiles,
};
use crate::batch::{PartialBatch, Received};

/// A page message is a few hundred bytes; anything much larger is not one.
pub const MAX_PAGE_BYTES: usize = 16 * 1024;

/// Consumes one batch of the replay queue, queueing each done page's next page on `pages`;
/// the answer names the messages to redeliver.
pub async fn consume<A, R, F, T, L, Q, N, P>(
    replayer: &Replayer<A, R, F, T, L, Q, N>,
    pages: &P,
    messages: &[Received<'_>],
) -> PartialBatch
where
    A: CallbackArchive,
    R: ReplayRuns,
    F: ReplayReads + TenantProfiles + CodeFacts + StaffLedger + QuotaLedger,
    T: TenantProfiles,
    L: FactLedger,
    Q: ReasonQueue,
    N: QuotaNotifier,
    P: ReplayPages,
{
    let mut batch = PartialBatch::default();
    for message in messages {
        let Received {
            message_id: id,
            group,
            body,
            ..
        } = *message;
        if body.len() > MAX_PAGE_BYTES {
            tracing::error!(
                message_id = id,
                bytes = body.len(),
                "not a replay page (too large); dropped"
            );
            continue;
        }
        let page: Page = match serde_json::from_str(body) {
            Ok(page) => page,
            Err(error) => {
                tracing::error!(message_id = id, error = %error, "not a replay page; dropped");
                continue;
            }
        };
        let done = async {
            if let Some(next) = replayer.page(&page).await? {
                pages.send(&next).await?;
            }
            Ok::<(), crate::StoreError>(())
        }
        .await;
        match done {
            Ok(()) => tracing::info!(run = page.run, phase = ?page.phase, "replay page done"),
            Err(error) => {
                tracing::warn!(run = page.run, error = ?error, "replay page failed; redelivered");
                batch.fail(group, id);
            }
        }
    }
    batch
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::FactRecorder;
    use crate::fakes::{InMemoryQueues, InMemoryStore};

    fn clock() -> u64 {
        7
    }

    fn message(body: &str) -> Received<'_> {
        Received {
            message_id: "m1",
            group: "",
            body,
            receive_count: 1,
        }
    }

    /// Consumes `body` alone; answers the messages reported and the pages queued.
    async fn consumed(body: &str) -> (Vec<String>, usize) {
        let store = InMemoryStore::default();
        let queues = InMemoryQueues::default();
        let recorder = FactRecorder::new(
            store.clone(),
            store.clone(),
            queues.clone(),
            queues.clone(),
            clock,
        );
        let replayer = Replayer::new(store.clone(), store.clone(), store, recorder, clock);
        let failures = consume(&replayer, &queues, &[message(body)])
            .await
            .failures();
        (failures, queues.replay_pages().len())
    }

    #[tokio::test]
    async fn a_message_that_is_not_a_page_is_dropped_not_redelivered() {
        assert_eq!(consumed("{\"run\": 1}").await, (vec![], 0));
    }

    #[tokio::test]
    async fn a_message_too_large_to_be_a_page_is_dropped_unread() {
        let large = format!("{{\"pad\": \"{}\"}}", "x".repeat(MAX_PAGE_BYTES));
        assert_eq!(consumed(&large).await, (vec![], 0));
    }
}
