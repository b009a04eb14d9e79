//! SQS FIFO queues: the inbox (stored callbacks) and the refresh queue (refresh reasons); and
//! the one translation of a received SQS record every consumer function uses.

use aws_lambda_events::event::sqs::SqsMessage;
use domain::batch::Received;
use domain::intake::Inbox;
use domain::intake::InboxMessage;
use domain::reasons::ReasonQueue;
use domain::reasons::RefreshReason;
use domain::refresh::consumer::Inlet;
use domain::refresh::retry::{RequeueQueues, RetryDelay};
use domain::refresh::{Requeue, RetryQueues, Unsent};
use domain::StoreError;

/// A record of an SQS batch as a consumer reads it. A missing attribute reads as empty, and a
/// missing or unreadable `ApproximateReceiveCount` as the first receive: a message must not
/// be taken for its last receive on a guess.
pub fn received(message: &SqsMessage) -> Received<'_> {
    let attribute = |name: &str| message.attributes.get(name).map(String::as_str);
    Received {
        message_id: message.message_id.as_deref().unwrap_or_default(),
        group: attribute("MessageGroupId").unwrap_or_default(),
        body: message.body.as_deref().unwrap_or_default(),
        receive_count: attribute("ApproximateReceiveCount")
            .and_then(|count| count.parse().ok())
            .unwrap_or(1),
    }
}

pub struct SqsInbox {
    client: aws_sdk_sqs::Client,
    queue_url: String,
}

impl SqsInbox {
    pub fn new(client: aws_sdk_sqs::Client, queue_url: String) -> Self {
        Self { client, queue_url }
    }
}

#[async_trait::async_trait]
impl Inbox for SqsInbox {
    #[tracing::instrument(skip_all, fields(group = %message.group_id(), event_key = %message.event_key))]
    async fn persist(&self, message: &InboxMessage) -> Result<(), StoreError> {
        self.client
            .send_message()
            .queue_url(&self.queue_url)
            .message_group_id(message.group_id())
            .message_deduplication_id(message.deduplication_id())
            .message_body(message.to_json())
            .send()
            .await
            .map_err(|e| StoreError::new("inbox queue", e.into_service_error()))?;
        Ok(())
    }
}

/// `ReasonQueue` on refresh.fifo: one message group per code, deduplicated by fact.
pub struct SqsReasonQueue {
    client: aws_sdk_sqs::Client,
    queue_url: String,
}

impl SqsReasonQueue {
    pub fn new(client: aws_sdk_sqs::Client, queue_url: String) -> Self {
        Self { client, queue_url }
    }
}

#[async_trait::async_trait]
impl ReasonQueue for SqsReasonQueue {
    #[tracing::instrument(skip_all, fields(tenant = %reason.tenant, code = %reason.code, cause = ?reason.cause))]
    async fn send(&self, reason: &RefreshReason) -> Result<(), StoreError> {
        self.client
            .send_message()
            .queue_url(&self.queue_url)
            .message_group_id(reason.group_id())
            .message_deduplication_id(reason.deduplication_id())
            .message_body(reason.to_json())
            .send()
            .await
            .map_err(|e| StoreError::new("refresh queue", e.into_service_error()))?;
        Ok(())
    }

    /// Ten per `SendMessageBatch` (SQS's maximum); a fan-out to 150 codes is 15 requests,
    /// sent side by side: each reason is its own code's message group, so nothing orders them,
    /// and a page of a fan-out takes one request's time, not ten.
    #[tracing::instrument(skip_all, fields(reasons = reasons.len()))]
    async fn send_all(&self, reasons: &[RefreshReason]) -> Result<(), StoreError> {
        futures::future::try_join_all(reasons.chunks(10).map(|chunk| self.send_batch(chunk)))
            .await?;
        Ok(())
    }
}

impl SqsReasonQueue {
    /// One `SendMessageBatch` of at most ten reasons (`send_fifo_batch`).
    async fn send_batch(&self, chunk: &[RefreshReason]) -> Result<(), StoreError> {
        let entries = chunk
            .iter()
            .enumerate()
            .map(|(index, reason)| FifoEntry {
                index,
                group: reason.group_id(),
                deduplication_id: reason.deduplication_id(),
                body: reason.to_json(),
            })
            .collect();
        send_fifo_batch(&self.client, &self.queue_url, entries)
            .await
            .map_err(|(_, why)| StoreError::new("refresh queue", why))
    }
}

/// One message of a `SendMessageBatch` to a FIFO queue; `index` names it to the caller.
struct FifoEntry {
    index: usize,
    group: String,
    deduplication_id: String,
    body: String,
}

/// One `SendMessageBatch` of at most ten entries to a FIFO queue; entries SQS refused are sent
/// again once. `Err` names the entries not sent, and why.
async fn send_fifo_batch(
    client: &aws_sdk_sqs::Client,
    queue_url: &str,
    mut pending: Vec<FifoEntry>,
) -> Result<(), (Vec<usize>, String)> {
    let unsent = |pending: &[FifoEntry], why: String| {
        (pending.iter().map(|entry| entry.index).collect(), why)
    };
    for attempt in 0..2 {
        let entries = pending.iter().map(|entry| {
            aws_sdk_sqs::types::SendMessageBatchRequestEntry::builder()
                .id(entry.index.to_string())
                .message_group_id(&entry.group)
                .message_deduplication_id(&entry.deduplication_id)
                .message_body(&entry.body)
                .build()
        });
        let entries = match entries.collect::<Result<Vec<_>, _>>() {
            Ok(entries) => entries,
            Err(error) => return Err(unsent(&pending, error.to_string())),
        };
        let sent = client
            .send_message_batch()
            .queue_url(queue_url)
            .set_entries(Some(entries))
            .send()
            .await;
        let output = match sent {
            Ok(output) => output,
            Err(error) => return Err(unsent(&pending, error.into_service_error().to_string())),
        };
        let failed: Vec<&str> = output.failed.iter().map(|f| f.id.as_str()).collect();
        pending.retain(|entry| failed.contains(&entry.index.to_string().as_str()));
        if pending.is_empty() {
            return Ok(());
        }
        if attempt == 1 {
            let why = format!("{} messages refused by SendMessageBatch", pending.len());
            return Err(unsent(&pending, why));
        }
    }
    Ok(())
}

/// `FanOutQueue` on a standard queue: fan-outs need no order, and a repeat only resends
/// reasons refresh.fifo deduplicates.
pub struct SqsFanOutQueue {
    client: aws_sdk_sqs::Client,
    queue_url: String,
}

impl SqsFanOutQueue {
    pub fn new(client: aws_sdk_sqs::Client, queue_url: String) -> Self {
        Self { client, queue_url }
    }
}

#[async_trait::async_trait]
impl domain::reasons::FanOutQueue for SqsFanOutQueue {
    #[tracing::instrument(skip_all, fields(tenant = %fan_out.tenant, fact_key = %fan_out.fact_key))]
    async fn send(&self, fan_out: &domain::reasons::FanOut) -> Result<(), StoreError> {
        self.client
            .send_message()
            .queue_url(&self.queue_url)
            .message_body(fan_out.to_json())
            .send()
            .await
            .map_err(|e| StoreError::new("fan-out queue", e.into_service_error()))?;
        Ok(())
    }

    /// `DelaySeconds` on the message: a standard queue delays each message on its own (a
    /// FIFO queue could not), up to 900 s.
    #[tracing::instrument(skip_all, fields(tenant = %fan_out.tenant, fact_key = %fan_out.fact_key))]
    async fn send_after(
        &self,
        fan_out: &domain::reasons::FanOut,
        delay_s: u32,
    ) -> Result<(), StoreError> {
        self.client
            .send_message()
            .queue_url(&self.queue_url)
            .message_body(fan_out.to_json())
            .delay_seconds(i32::try_from(delay_s.min(900)).unwrap_or(900))
            .send()
            .await
            .map_err(|e| StoreError::new("fan-out queue", e.into_service_error()))?;
        Ok(())
    }
}

/// `DeadLetters` on a FIFO dead-letter queue. The class and reason travel as message
/// attributes so an operator can filter and replay by class.
pub struct SqsDeadLetters {
    client: aws_sdk_sqs::Client,
    queue_url: String,
}

impl SqsDeadLetters {
    pub fn new(client: aws_sdk_sqs::Client, queue_url: String) -> Self {
        Self { client, queue_url }
    }
}

fn text_attribute(value: &str) -> Result<aws_sdk_sqs::types::MessageAttributeValue, StoreError> {
    aws_sdk_sqs::types::MessageAttributeValue::builder()
        .data_type("String")
        .string_value(value)
        .build()
        .map_err(|e| StoreError::new("dead-letter queue", e))
}

#[async_trait::async_trait]
impl domain::batch::DeadLetters for SqsDeadLetters {
    async fn park(
        &self,
        group: &str,
        message_id: &str,
        body: &str,
        failure_class: &str,
        reason: &str,
    ) -> Result<(), StoreError> {
        // SQS caps message attribute values at 256 KiB, reasons are short; keep them so.
        let reason: String = reason.chars().take(1000).collect();
        let group = if group.is_empty() { "unknown" } else { group };
        self.client
            .send_message()
            .queue_url(&self.queue_url)
            .message_group_id(group)
            .message_deduplication_id(message_id)
            .message_body(body)
            .message_attributes("failure_class", text_attribute(failure_class)?)
            .message_attributes("failure_reason", text_attribute(&reason)?)
            .message_attributes("original_message_id", text_attribute(message_id)?)
            .send()
            .await
            .map_err(|e| StoreError::new("dead-letter queue", e.into_service_error()))?;
        Ok(())
    }
}

/// `RetryQueues` on the FIFO delay queues (one per `RetryDelay`, queue-level `DelaySeconds`:
/// FIFO queues refuse per-message delays) and refresh.fifo.
pub struct SqsRetryQueues {
    client: aws_sdk_sqs::Client,
    /// The queues' URLs.
    queues: RequeueQueues,
}

impl SqsRetryQueues {
    pub fn new(
        client: aws_sdk_sqs::Client,
        refresh_queue_url: String,
        slow_queue_url: String,
        retry_queue_urls: Vec<(RetryDelay, String)>,
    ) -> Self {
        let queues = RequeueQueues {
            refresh: refresh_queue_url,
            slow_lane: slow_queue_url,
            retries: retry_queue_urls,
        };
        Self { client, queues }
    }

    /// One `SendMessageBatch` of at most ten reasons to `queue_url` (`send_fifo_batch`).
    async fn send_batch(
        &self,
        queue_url: &str,
        chunk: Vec<(usize, &Requeue)>,
    ) -> Result<(), (Vec<usize>, StoreError)> {
        let entries = chunk
            .into_iter()
            .map(|(index, Requeue { reason, .. })| FifoEntry {
                index,
                group: reason.reason.group_id(),
                deduplication_id: reason.deduplication_id(),
                body: reason.to_json(),
            })
            .collect();
        send_fifo_batch(&self.client, queue_url, entries)
            .await
            .map_err(|(indices, why)| (indices, StoreError::new("retry queue", why)))
    }
}

/// A queue's name: the last segment of its URL or ARN.
fn queue_name(url_or_arn: &str) -> &str {
    url_or_arn.rsplit(['/', ':']).next().unwrap_or(url_or_arn)
}

/// Tells which refresh queue a message came from, by the queue name in its `eventSourceARN`:
/// the one place that reads a queue's address to route a message.
#[derive(Debug, Clone)]
pub struct QueueInlets {
    slow_lane: String,
    retry_queues: Vec<String>,
}

impl QueueInlets {
    /// From the queues' URLs, as the function's environment gives them.
    pub fn new<'a>(
        slow_lane_url: &str,
        retry_queue_urls: impl IntoIterator<Item = &'a str>,
    ) -> Self {
        Self {
            slow_lane: queue_name(slow_lane_url).to_owned(),
            retry_queues: retry_queue_urls
                .into_iter()
                .map(|url| queue_name(url).to_owned())
                .collect(),
        }
    }

    /// Any queue other than the slow lane's and the retry queues is refresh.fifo.
    pub fn inlet_of(&self, event_source_arn: &str) -> Inlet {
        let name = queue_name(event_source_arn);
        if self.retry_queues.iter().any(|queue| queue == name) {
            Inlet::RetryQueue
        } else if self.slow_lane == name {
            Inlet::SlowLane
        } else {
            Inlet::FastLane
        }
    }
}

#[async_trait::async_trait]
impl RetryQueues for SqsRetryQueues {
    /// Grouped by queue, ten to a `SendMessageBatch`, the batches side by side: each reason is
    /// its own code's message group, so nothing orders two of them, and a batch's entries keep
    /// their order within a group. Entries SQS refused are sent again once.
    #[tracing::instrument(skip_all, fields(requeues = requeues.len()))]
    async fn send_all(&self, requeues: &[Requeue]) -> Result<(), Unsent> {
        self.queues
            .send_all(requeues, |queue_url, chunk| {
                self.send_batch(queue_url, chunk)
            })
            .await
    }
}

/// `ReplayPages` on the replay queue (standard: a run's pages go one after another, each
/// sent by the page before it).
pub struct SqsReplayPages {
    client: aws_sdk_sqs::Client,
    queue_url: String,
}

impl SqsReplayPages {
    pub fn new(client: aws_sdk_sqs::Client, queue_url: String) -> Self {
        Self { client, queue_url }
    }
}

#[async_trait::async_trait]
impl domain::replay::ReplayPages for SqsReplayPages {
    async fn send(&self, page: &domain::replay::Page) -> Result<(), StoreError> {
        let body = serde_json::to_string(page).map_err(|e| StoreError::new("replay queue", e))?;
        self.client
            .send_message()
            .queue_url(&self.queue_url)
            .message_body(body)
            .send()
            .await
            .map_err(|e| StoreError::new("replay queue", e.into_service_error()))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_reads_its_id_group_body_and_receive_count() {
        let mut message = SqsMessage::default();
        message.message_id = Some("m1".into());
        message.body = Some("{}".into());
        message
            .attributes
            .insert("MessageGroupId".into(), "demo:code-1".into());
        message
            .attributes
            .insert("ApproximateReceiveCount".into(), "3".into());

        assert_eq!(
            received(&message),
            Received {
                message_id: "m1",
                group: "demo:code-1",
                body: "{}",
                receive_count: 3,
            }
        );
    }

    #[test]
    fn a_missing_or_unreadable_receive_count_reads_as_the_first_receive() {
        let mut message = SqsMessage::default();
        assert_eq!(received(&message).receive_count, 1);
        message
            .attributes
            .insert("ApproximateReceiveCount".into(), "many".into());
        assert_eq!(received(&message).receive_count, 1);
        assert_eq!(received(&message).group, "");
    }

    #[test]
    fn a_message_s_inlet_is_told_by_its_queue_name_whatever_the_region_or_account() {
        let inlets = QueueInlets::new(
            "http://127.0.0.1:4566/000000000000/qrsync-local-refresh-slow.fifo",
            ["http://127.0.0.1:4566/000000000000/qrsync-local-refresh-retry-15s.fifo"],
        );
        let arn = |name: &str| format!("arn:aws:sqs:us-east-1:000000000000:{name}");
        assert_eq!(
            inlets.inlet_of(&arn("qrsync-local-refresh-retry-15s.fifo")),
            Inlet::RetryQueue
        );
        assert_eq!(
            inlets.inlet_of(&arn("qrsync-local-refresh-slow.fifo")),
            Inlet::SlowLane
        );
        assert_eq!(
            inlets.inlet_of(&arn("qrsync-local-refresh.fifo")),
            Inlet::FastLane
        );
        assert_eq!(inlets.inlet_of(""), Inlet::FastLane);
    }
}
