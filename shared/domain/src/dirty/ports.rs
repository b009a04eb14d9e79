//! Where the dirty set is kept.

use super::DirtyWhy;
use crate::ids::CodeId;
use crate::ids::TenantId;
use crate::reasons::FanOut;
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

    /// Records that the difference the read-back found on `code` is repaired, in the
    /// tenant's drift report for `day`: the code counts among the day's repaired codes (once)
    /// and is no longer still differing.
    async fn count_repaired(
        &self,
        tenant: &TenantId,
        day: &str,
        code: &CodeId,
    ) -> Result<(), StoreError>;
}

/// Marks fan-outs given up and clears them; the sweep's view is `sweep::FanOutIndex`. One
/// mark per fact (`FanOut::fact_key`): every part of a fan-out shares it.
#[async_trait::async_trait]
pub trait FanOutMarks: Send + Sync {
    /// Records `fan_out` as given up as of `at_ms` (a later mark replaces an earlier one's
    /// time, why and fan-out, and keeps its due time and resends; an older one changes
    /// nothing). A new mark is due at once.
    async fn mark_fan_out(
        &self,
        fan_out: &FanOut,
        why: DirtyWhy,
        at_ms: u64,
    ) -> Result<(), StoreError>;

    /// Removes the fan-out's mark if it was made before `began_ms`, in one conditional
    /// write; `true` when a mark was removed.
    async fn clear_fan_out(&self, fan_out: &FanOut, began_ms: u64) -> Result<bool, StoreError>;
}
