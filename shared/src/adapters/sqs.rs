//! `Inbox` on an SQS FIFO queue.

use crate::intake::InboxMessage;
use crate::ports::{Inbox, StoreError};

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
