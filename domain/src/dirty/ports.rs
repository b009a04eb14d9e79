//! Where the dirty set is kept.

use super::DirtyWhy;
use crate::membership::CodeId;
use crate::tenants::TenantId;
use crate::StoreError;

/// Marks codes dirty and clears them; the sweep's view of the set is `sweep::DirtyIndex`.
#[async_trait::async_trait]
pub trait DirtyMarks: Send + Sync {
    /// Marks the code dirty as of `at_ms` (a later mark replaces an earlier one's time and
    /// why, and makes it due for a resync at once).
    async fn mark_dirty(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        why: DirtyWhy,
        at_ms: u64,
    ) -> Result<(), StoreError>;

    /// Removes the code's mark if it was made before `began_ms`, in one conditional write.
    /// Answers why the removed mark was made (`Some(None)` for an unknown label), or `None`
    /// when no mark was removed.
    async fn clear_dirty(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        began_ms: u64,
    ) -> Result<Option<Option<DirtyWhy>>, StoreError>;

    /// Counts one repair of a difference the read-back found, in the tenant's drift report
    /// for `day`.
    async fn count_repaired(&self, tenant: &TenantId, day: &str) -> Result<(), StoreError>;
}
