//! The fan-out queue's consumer: a batch of fan-outs, each expanded inside the invocation's
//! time. Per message:
//!
//! - expanded, continued in a new message before the deadline, or paced (the rest queued to
//!   be seen a minute later) -> acknowledged;
//! - no time left to start it -> queued again as it is and acknowledged (no receive counted);
//! - the table or a queue failed -> reported for redelivery: it resumes where it was sent
//!   from, so at most one page of reasons is sent twice (refresh.fifo deduplicates them);
//! - not a fan-out -> reported, until the queue's redrive moves it to its dead-letter queue.
//!
//! On a fan-out's last receive before that redrive (`ApproximateReceiveCount` at the queue's
//! `maxReceiveCount`), the fan-out is marked given up before anything else: a timeout or a
//! crash of this receive would move it to the dead-letter queue without any code of ours, and
//! the sweep sends a marked fan-out again. Its completed expansion clears the mark. A mark
//! that cannot be written fails the message like any table failure.

use super::{CodeIndex, Expanded, Expander};
use crate::batch::{is_last_receive, PartialBatch, Received};
use crate::dirty::FanOutMarks;
use crate::reasons::{FanOut, FanOutQueue, ReasonQueue};
use crate::{telemetry, Clock};

/// Consumes one batch of the fan-out queue (`max_receives` its `maxReceiveCount`) with
/// `time_left_ms` to spend on it, on `clock`, the clock the invocation's deadline is on; the
/// answer names the messages to redeliver.
pub async fn consume<I, R, Q, M>(
    expander: &Expander<I, R, Q, M>,
    max_receives: u32,
    clock: Clock,
    messages: &[Received<'_>],
    time_left_ms: u64,
) -> PartialBatch
where
    I: CodeIndex,
    R: ReasonQueue,
    Q: FanOutQueue,
    M: FanOutMarks,
{
    let deadline_ms = clock().saturating_add(time_left_ms);
    let out_of_time = || clock() >= deadline_ms;
    let mut batch = PartialBatch::default();
    for message in messages {
        let Received {
            message_id: id,
            group,
            body,
            receive_count,
        } = *message;
        let fan_out = match serde_json::from_str::<FanOut>(body) {
            Ok(fan_out) => fan_out,
            Err(error) => {
                tracing::error!(message_id = id, error = %error, "not a fan-out; left to the queue's redrive");
                batch.fail(group, id);
                continue;
            }
        };
        let began_ms = clock();
        let last_receive = is_last_receive(receive_count, max_receives);
        let outcome = async {
            if last_receive {
                expander.mark_given_up(&fan_out, began_ms).await?;
            }
            if out_of_time() {
                expander.postpone(&fan_out).await.map(|()| None)
            } else {
                expander
                    .expand(&fan_out, began_ms, out_of_time)
                    .await
                    .map(Some)
            }
        }
        .await;
        match outcome {
            Ok(Some(Expanded::Done { reasons })) => {
                telemetry::fan_out_reasons(reasons as u64);
                tracing::info!(message_id = id, tenant = %fan_out.tenant, fact_key = %fan_out.fact_key, reasons, "fan-out done");
            }
            // The expander logged whether the rest continues now or a minute later.
            Ok(Some(
                Expanded::Continued {
                    reasons,
                    sent_through,
                }
                | Expanded::Paced {
                    reasons,
                    sent_through,
                },
            )) => {
                telemetry::fan_out_reasons(reasons as u64);
                tracing::info!(message_id = id, tenant = %fan_out.tenant, fact_key = %fan_out.fact_key, reasons, sent_through = %sent_through, "fan-out continues in a new message");
            }
            Ok(None) => {
                tracing::info!(message_id = id, tenant = %fan_out.tenant, fact_key = %fan_out.fact_key, "no time left to start; queued again");
            }
            Err(error) => {
                tracing::warn!(message_id = id, tenant = %fan_out.tenant, fact_key = %fan_out.fact_key, error = %error, "fan-out failed; redelivered");
                batch.fail(group, id);
            }
        }
    }
    batch
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fakes::{InMemoryQueues, InMemoryStore};
    use crate::ids::TenantId;
    use crate::ids::{CodeId, StaffId};
    use crate::reasons::{Cause, Source};
    use std::sync::atomic::{AtomicU64, Ordering};

    const NOW: u64 = 1_796_000_000_000;

    fn fixed() -> u64 {
        NOW
    }

    /// Tenant `t1` with 250 codes seated by `alice`, and the fan-out of her change.
    fn world() -> (InMemoryStore, FanOut) {
        let store = InMemoryStore::default();
        let tenant = TenantId::parse("t1").expect("valid");
        let alice = StaffId::parse("alice").expect("valid");
        let codes: Vec<CodeId> = (0..250)
            .map(|n| CodeId::parse(&format!("c{n:04}")).expect("valid"))
            .collect();
        store.seat(&tenant, &alice, &codes.iter().collect::<Vec<_>>());
        let fan_out = FanOut::new(
            tenant,
            vec![Source::Staff { staff: alice }],
            Cause::StaffChanged,
            42,
            "staff:alice:42".into(),
        );
        (store, fan_out)
    }

    fn message<'a>(id: &'a str, body: &'a str, receive_count: u32) -> Received<'a> {
        Received {
            message_id: id,
            group: "",
            body,
            receive_count,
        }
    }

    #[tokio::test]
    async fn with_no_time_left_every_fan_out_is_queued_again_unexpanded_and_none_reported() {
        let (store, fan_out) = world();
        let queues = InMemoryQueues::default();
        let expander = Expander::new(store.clone(), queues.clone(), queues.clone(), store);
        let body = serde_json::to_string(&fan_out).expect("JSON");
        let batch = [message("m1", &body, 1), message("m2", &body, 1)];

        let failures = consume(&expander, 5, fixed, &batch, 0).await.failures();

        assert!(failures.is_empty());
        assert!(queues.reasons().is_empty());
        assert_eq!(queues.fan_outs(), [fan_out.clone(), fan_out]);
    }

    #[tokio::test]
    async fn a_fan_out_whose_time_runs_out_after_a_page_continues_in_a_new_message() {
        // Each reading of this clock is a millisecond later: the deadline is read first, then
        // the start, then the check before starting, then the check before the second page.
        fn stepping() -> u64 {
            static NEXT: AtomicU64 = AtomicU64::new(NOW);
            NEXT.fetch_add(1, Ordering::SeqCst)
        }
        let (store, fan_out) = world();
        let queues = InMemoryQueues::default();
        let expander = Expander::new(store.clone(), queues.clone(), queues.clone(), store);
        let body = serde_json::to_string(&fan_out).expect("JSON");

        let failures = consume(&expander, 5, stepping, &[message("m1", &body, 1)], 3)
            .await
            .failures();

        assert!(failures.is_empty());
        assert_eq!(queues.reasons().len(), super::super::PAGE);
        let last = CodeId::parse("c0099").expect("valid");
        assert_eq!(queues.fan_outs(), [fan_out.resumed_after(&last)]);
    }

    #[tokio::test]
    async fn a_fan_out_whose_last_receive_cannot_be_marked_is_reported_and_not_expanded() {
        let (index, fan_out) = world();
        let marks = InMemoryStore::default();
        marks.set_unavailable(true);
        let queues = InMemoryQueues::default();
        let expander = Expander::new(index, queues.clone(), queues.clone(), marks);
        let body = serde_json::to_string(&fan_out).expect("JSON");

        let failures = consume(&expander, 5, fixed, &[message("m1", &body, 5)], 60_000)
            .await
            .failures();

        assert_eq!(failures, ["m1"]);
        assert!(queues.reasons().is_empty() && queues.fan_outs().is_empty());
    }

    #[tokio::test]
    async fn a_message_that_is_not_a_fan_out_is_reported_and_the_next_is_expanded() {
        let (store, fan_out) = world();
        let queues = InMemoryQueues::default();
        let expander = Expander::new(store.clone(), queues.clone(), queues.clone(), store);
        let body = serde_json::to_string(&fan_out).expect("JSON");
        let batch = [message("m1", "{}", 1), message("m2", &body, 1)];

        let failures = consume(&expander, 5, fixed, &batch, 60_000)
            .await
            .failures();

        assert_eq!(failures, ["m1"]);
        assert_eq!(queues.reasons().len(), 250);
    }
}
