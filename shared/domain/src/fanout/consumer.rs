//! The fan-out queue's consumer: a batch of fan-outs, each expanded inside the invocation's
//! time. Per message:
//!
//! - expanded, or continued in a new message before the deadline -> acknowledged;
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
            Ok(Some(Expanded::Continued {
                reasons,
                sent_through,
            })) => {
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
