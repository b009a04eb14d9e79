//! What the fan-out's expansion needs from the outside world.

use crate::ids::CodeId;
use crate::ids::TenantId;
use crate::reasons::Source;
use crate::StoreError;

/// The indexes that answer which codes a source reaches (queries, never a scan).
#[async_trait::async_trait]
pub trait CodeIndex: Send + Sync {
    async fn codes_of(&self, tenant: &TenantId, source: &Source)
        -> Result<Vec<CodeId>, StoreError>;
}
