//! What the tenants module needs from the outside world.

use super::CallbackSettings;
use crate::ids::TenantId;
use crate::StoreError;

/// Where the callback reads a tenant's settings to verify its callbacks. `Ok(None)` means
/// the tenant does not exist.
#[async_trait::async_trait]
pub trait CallbackSettingsSource: Send + Sync {
    async fn callback_settings(
        &self,
        tenant: &TenantId,
    ) -> Result<Option<CallbackSettings>, StoreError>;
}
