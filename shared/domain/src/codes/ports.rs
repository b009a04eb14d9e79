//! What a code's readers need from the store: everything a recompute of one code reads.

use super::CodeSnapshot;
use crate::ids::CodeId;
use crate::ids::TenantId;
use crate::StoreError;

/// Reads a code's facts.
#[async_trait::async_trait]
pub trait CodeFacts: Send + Sync {
    /// Strongly consistent reads of everything the recompute needs for the tenant's day at
    /// `now_ms`. `Ok(None)` when the tenant or the code does not exist.
    async fn snapshot(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        now_ms: u64,
    ) -> Result<Option<CodeSnapshot>, StoreError>;

    /// `snapshot` of each of `codes`, in their order, as of one moment after every reason of
    /// theirs was sent: an adapter reads what the codes share once for all of them (a
    /// tenant's profile, a staff member's facts and day's adds across codes), since one read
    /// made after all their reasons serves each as well as its own would; a shared read that
    /// fails fails every code it was for. This one reads each code on its own.
    async fn snapshots(
        &self,
        codes: &[(&TenantId, &CodeId)],
        now_ms: u64,
    ) -> Vec<Result<Option<CodeSnapshot>, StoreError>> {
        let mut read = Vec::with_capacity(codes.len());
        for (tenant, code) in codes {
            read.push(self.snapshot(tenant, code, now_ms).await);
        }
        read
    }
}
