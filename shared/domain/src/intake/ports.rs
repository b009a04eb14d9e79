//! What the callback's intake needs from the outside world (the tenant's callback settings
//! come through `tenants::CallbackSettingsSource`).

use super::InboxMessage;
use crate::StoreError;

/// The durable inbox. `persist` returns only after the message is stored (SQS accepted it);
/// a duplicate of a message persisted within the dedupe window is accepted and dropped.
#[async_trait::async_trait]
pub trait Inbox: Send + Sync {
    async fn persist(&self, message: &InboxMessage) -> Result<(), StoreError>;
}
