//! What the landing page needs: one counted write on the code's rotation.

use super::Counted;
use crate::ids::CodeId;
use crate::ids::TenantId;
use crate::StoreError;

/// Counts visits against a code's rotation.
#[async_trait::async_trait]
pub trait RotationCounter: Send + Sync {
    /// Adds one visit to the code's rotation record and answers the record as the add left it,
    /// in one atomic request (no read before it): a counted visit and the rotation it was
    /// counted on come from the same write. A starved, native or unknown code counts nothing.
    async fn count_visit(&self, tenant: &TenantId, code: &CodeId) -> Result<Counted, StoreError>;
}
