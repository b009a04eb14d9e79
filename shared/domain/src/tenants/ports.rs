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

/// Where paused tenants are kept (`super::pause`). A pause holds no secret.
#[async_trait::async_trait]
pub trait TenantPauses: Send + Sync {
    /// Pauses `tenant` unless it is paused already: `true` when this call paused it.
    async fn pause(
        &self,
        tenant: &TenantId,
        pause: &super::TenantPause,
    ) -> Result<bool, StoreError>;
    /// The tenant's pause, if it is paused.
    async fn pause_of(&self, tenant: &TenantId) -> Result<Option<super::TenantPause>, StoreError>;
    /// Every paused tenant (a handful: a registry, not a scan of the tenants).
    async fn paused_tenants(&self) -> Result<Vec<TenantId>, StoreError>;
    /// Replaces the tenant's pause with `pause` (its next probe), if it is still the pause
    /// that began at `pause.since_ms`.
    async fn update_pause(
        &self,
        tenant: &TenantId,
        pause: &super::TenantPause,
    ) -> Result<(), StoreError>;
    /// Lifts the pause that began at `since_ms`: `true` when this call lifted it.
    async fn lift_pause(&self, tenant: &TenantId, since_ms: u64) -> Result<bool, StoreError>;
}
