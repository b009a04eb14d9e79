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
}
