//! What the landing page needs: the code's page and one counted visit on its round.

use super::Counted;
use crate::ids::CodeId;
use crate::ids::TenantId;
use crate::StoreError;

/// Counts visits against a code's rotation.
#[async_trait::async_trait]
pub trait RotationCounter: Send + Sync {
    /// Reads the code's page and adds one visit to its round's counter: the visit's number and
    /// the rotation it was read from. A starved, native or unknown code counts nothing.
    async fn count_visit(&self, tenant: &TenantId, code: &CodeId) -> Result<Counted, StoreError>;
}
