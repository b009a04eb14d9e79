//! The domain's queue ports on the simulated SQS (`services::sqs`), each message built as
//! `adapters::sqs` builds it: the body, message group and deduplication id come from the same
//! domain functions the adapter calls (`RefreshReason::group_id`, `deduplication_id`,
//! `to_json`...), and the requests are the adapter's (one `SendMessage` per message, and
//! `SendMessageBatch` of up to ten for a fan-out's reasons). A FIFO queue has no per-message
//! delay: a retry waits in the queue whose `DelaySeconds` is its delay, as in the template.
//!
//! Not carried: the dead-letter queue's message attributes (failure class and reason: a few
//! hundred bytes, which change the bill only for a message near a 64 KB chunk) and the
//! adapter's second `SendMessageBatch` for entries SQS refused (the simulated SQS refuses none).

use crate::services::sqs::{Outgoing, Sqs, SqsError, MAX_BATCH};
use domain::facts::{QuotaNotifier, StaffQuotaReached};
use domain::intake::{Inbox, InboxMessage};
use domain::reasons::{FanOut, FanOutQueue, ReasonQueue, RefreshReason};
use domain::refresh::retry::{RequeueQueues, RetryDelay};
use domain::refresh::{Requeue, RetryQueues, Unsent};
use domain::StoreError;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

fn unavailable(what: &'static str) -> impl Fn(SqsError) -> StoreError {
    move |error| StoreError::new(what, error)
}

/// `ReasonQueue` on refresh.fifo, as `adapters::sqs::SqsReasonQueue`.
#[derive(Clone)]
pub struct SimReasonQueue {
    sqs: Arc<Sqs>,
    queue: String,
}

impl SimReasonQueue {
    pub fn new(sqs: Arc<Sqs>, queue: &str) -> Self {
        Self {
            sqs,
            queue: queue.to_owned(),
        }
    }
}

/// One SQS API call's time (`services::sqs::REQUEST_LATENCY`), waited before it is sent.
async fn call() {
    tokio::time::sleep(crate::services::sqs::REQUEST_LATENCY).await;
}

fn reason_message(reason: &RefreshReason) -> Outgoing {
    Outgoing::new(&reason.group_id(), &reason.to_json()).deduplicated_by(&reason.deduplication_id())
}

#[async_trait::async_trait]
impl ReasonQueue for SimReasonQueue {
    async fn send(&self, reason: &RefreshReason) -> Result<(), StoreError> {
        call().await;
        self.sqs
            .send(&self.queue, reason_message(reason))
            .map_err(unavailable("refresh queue"))?;
        Ok(())
    }

    /// Ten per `SendMessageBatch`, side by side, as the adapter sends them.
    async fn send_all(&self, reasons: &[RefreshReason]) -> Result<(), StoreError> {
        futures::future::try_join_all(reasons.chunks(MAX_BATCH).map(|chunk| async move {
            let messages: Vec<Outgoing> = chunk.iter().map(reason_message).collect();
            call().await;
            self.sqs
                .send_batch(&self.queue, &messages)
                .map_err(unavailable("refresh queue"))
        }))
        .await?;
        Ok(())
    }
}

/// `FanOutQueue` on the standard fan-out queue, as `adapters::sqs::SqsFanOutQueue`: no group,
/// no deduplication id.
#[derive(Clone)]
pub struct SimFanOutQueue {
    sqs: Arc<Sqs>,
    queue: String,
}

impl SimFanOutQueue {
    pub fn new(sqs: Arc<Sqs>, queue: &str) -> Self {
        Self {
            sqs,
            queue: queue.to_owned(),
        }
    }
}

#[async_trait::async_trait]
impl FanOutQueue for SimFanOutQueue {
    async fn send(&self, fan_out: &FanOut) -> Result<(), StoreError> {
        call().await;
        self.sqs
            .send(&self.queue, Outgoing::new("", &fan_out.to_json()))
            .map_err(unavailable("fan-out queue"))?;
        Ok(())
    }

    async fn send_after(&self, fan_out: &FanOut, delay_s: u32) -> Result<(), StoreError> {
        call().await;
        let message = Outgoing::new("", &fan_out.to_json())
            .delayed_by(std::time::Duration::from_secs(u64::from(delay_s)));
        self.sqs
            .send(&self.queue, message)
            .map_err(unavailable("fan-out queue"))?;
        Ok(())
    }
}

/// `DeadLetters` on a FIFO dead-letter queue, as `adapters::sqs::SqsDeadLetters`: the group
/// kept (`unknown` when the message had none), deduplicated by the original message id.
#[derive(Clone)]
pub struct SimDeadLetters {
    sqs: Arc<Sqs>,
    queue: String,
}

impl SimDeadLetters {
    pub fn new(sqs: Arc<Sqs>, queue: &str) -> Self {
        Self {
            sqs,
            queue: queue.to_owned(),
        }
    }
}

#[async_trait::async_trait]
impl domain::batch::DeadLetters for SimDeadLetters {
    async fn park(
        &self,
        group: &str,
        message_id: &str,
        body: &str,
        _failure_class: &str,
        _reason: &str,
    ) -> Result<(), StoreError> {
        let group = if group.is_empty() { "unknown" } else { group };
        call().await;
        self.sqs
            .send(
                &self.queue,
                Outgoing::new(group, body).deduplicated_by(message_id),
            )
            .map_err(unavailable("dead-letter queue"))?;
        Ok(())
    }
}

/// `RetryQueues` on the FIFO delay queues and refresh.fifo, as `adapters::sqs::SqsRetryQueues`:
/// the reason's code group, the retried reason's deduplication id and JSON.
#[derive(Clone)]
pub struct SimRetryQueues {
    sqs: Arc<Sqs>,
    /// The queues' names.
    queues: Arc<RequeueQueues>,
}

impl SimRetryQueues {
    pub fn new(
        sqs: Arc<Sqs>,
        refresh_queue: &str,
        slow_queue: &str,
        retry_queues: Vec<(RetryDelay, String)>,
    ) -> Self {
        let queues = RequeueQueues {
            refresh: refresh_queue.to_owned(),
            slow_lane: slow_queue.to_owned(),
            retries: retry_queues,
        };
        Self {
            sqs,
            queues: Arc::new(queues),
        }
    }

    /// One `SendMessageBatch` (one API call's time) of at most ten requeues to `queue`.
    async fn send_batch(
        &self,
        queue: &str,
        chunk: Vec<(usize, &Requeue)>,
    ) -> Result<(), (Vec<usize>, StoreError)> {
        let messages: Vec<Outgoing> = chunk
            .iter()
            .map(|(_, Requeue { reason, .. })| {
                Outgoing::new(&reason.reason.group_id(), &reason.to_json())
                    .deduplicated_by(&reason.deduplication_id())
            })
            .collect();
        call().await;
        self.sqs
            .send_batch(queue, &messages)
            .map(|_| ())
            .map_err(|error| {
                let indices = chunk.iter().map(|(index, _)| *index).collect();
                (indices, unavailable("retry queue")(error))
            })
    }
}

#[async_trait::async_trait]
impl RetryQueues for SimRetryQueues {
    /// As `adapters::sqs::SqsRetryQueues::send_all`.
    async fn send_all(&self, requeues: &[Requeue]) -> Result<(), Unsent> {
        self.queues
            .send_all(requeues, |queue, chunk| self.send_batch(queue, chunk))
            .await
    }
}

/// `Inbox` on inbox.fifo, as `adapters::sqs::SqsInbox`: one message group per code (or
/// tenant), deduplicated by the event's business key.
#[derive(Clone)]
pub struct SimInbox {
    sqs: Arc<Sqs>,
    queue: String,
}

impl SimInbox {
    pub fn new(sqs: Arc<Sqs>, queue: &str) -> Self {
        Self {
            sqs,
            queue: queue.to_owned(),
        }
    }
}

#[async_trait::async_trait]
impl Inbox for SimInbox {
    async fn persist(&self, message: &InboxMessage) -> Result<(), StoreError> {
        let outgoing = Outgoing::new(&message.group_id(), &message.to_json())
            .deduplicated_by(message.deduplication_id());
        call().await;
        self.sqs
            .send(&self.queue, outgoing)
            .map_err(unavailable("inbox queue"))?;
        Ok(())
    }
}

/// `QuotaNotifier` on the quota event bus, as `adapters::eventbridge::EventBridgeNotifier`:
/// one `PutEvents` per event, counted; the template's rule routes the bus to the stack's own
/// `QuotaNotificationsQueue` unless `QuotaNotificationTargetArn` names another target, so
/// when a queue is given each event also lands there, as EventBridge's envelope. Clones
/// share the count.
#[derive(Clone)]
pub struct QuotaEvents {
    sqs: Arc<Sqs>,
    target_queue: Option<String>,
    put_events: Arc<AtomicU64>,
}

impl QuotaEvents {
    pub fn new(sqs: Arc<Sqs>, target_queue: Option<&str>) -> Self {
        Self {
            sqs,
            target_queue: target_queue.map(str::to_owned),
            put_events: Arc::new(AtomicU64::new(0)),
        }
    }

    /// `PutEvents` requests made (EventBridge bills each).
    pub fn put_events(&self) -> u64 {
        self.put_events.load(Ordering::Relaxed)
    }
}

#[async_trait::async_trait]
impl QuotaNotifier for QuotaEvents {
    async fn publish(&self, event: &StaffQuotaReached) -> Result<(), StoreError> {
        let detail =
            serde_json::to_value(event).map_err(|e| StoreError::new("quota event bus", e))?;
        self.put_events.fetch_add(1, Ordering::Relaxed);
        // PutEvents: one API call, as long as an SQS one [assumption]; the rule's delivery to
        // the queue is EventBridge's, not the caller's.
        call().await;
        if let Some(queue) = &self.target_queue {
            let envelope = serde_json::json!({
                "source": adapters::eventbridge::SOURCE,
                "detail-type": adapters::eventbridge::DETAIL_TYPE,
                "detail": detail,
            });
            self.sqs
                .send(queue, Outgoing::new("", &envelope.to_string()))
                .map_err(unavailable("quota notifications queue"))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
