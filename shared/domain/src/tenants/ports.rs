//! What the tenants module needs from the outside world.

use super::{CallbackSettings, TenantId};
use crate::StoreError;

/// Reads a tenant's callback settings. `Ok(None)` means the tenant does not exist.
#[async_trait::async_trait]
pub trait TenantDirectory: Send + Sync {
    async fn callback_settings(
        &self,
        tenant: &TenantId,
    ) -> Result<Option<CallbackSettings>, StoreError>;
}
