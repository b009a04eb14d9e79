//! The traits the domain needs from the outside world. Adapters in `crate::adapters`
//! implement them for DynamoDB and SQS; `adapters::memory` has fakes for unit tests.

use crate::intake::InboxMessage;
use crate::tenants::{CallbackSettings, TenantId};

/// A storage or queue dependency failed. The cause is kept for the log; callers only learn
/// that the operation can be retried.
#[derive(Debug, thiserror::Error)]
#[error("{what} unavailable")]
pub struct StoreError {
    pub what: &'static str,
    #[source]
    pub source: Box<dyn std::error::Error + Send + Sync>,
}

impl StoreError {
    pub fn new(
        what: &'static str,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Self {
            what,
            source: source.into(),
        }
    }
}

/// Reads a tenant's callback settings. `Ok(None)` means the tenant does not exist.
#[async_trait::async_trait]
pub trait TenantDirectory: Send + Sync {
    async fn callback_settings(
        &self,
        tenant: &TenantId,
    ) -> Result<Option<CallbackSettings>, StoreError>;
}

/// The durable inbox. `persist` returns only after the message is stored (SQS accepted it);
/// a duplicate of a message persisted within the dedupe window is accepted and dropped.
#[async_trait::async_trait]
pub trait Inbox: Send + Sync {
    async fn persist(&self, message: &InboxMessage) -> Result<(), StoreError>;
}

/// A dead-letter queue a consumer moves messages to itself, with their failure class, when
/// retrying cannot help (the queue's own redrive only counts receives).
#[async_trait::async_trait]
pub trait DeadLetters: Send + Sync {
    async fn park(
        &self,
        group: &str,
        message_id: &str,
        body: &str,
        failure_class: &str,
        reason: &str,
    ) -> Result<(), StoreError>;
}
