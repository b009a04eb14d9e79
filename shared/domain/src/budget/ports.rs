//! The budget's store: one atomic check-and-charge per call.

use super::Spend;
use crate::ids::TenantId;
use crate::StoreError;

/// The shared budget. Implementations must make `spend` one atomic check-and-charge of both
/// windows: this is what keeps concurrent workers under the limits.
#[async_trait::async_trait]
pub trait WeComBudget: Send + Sync {
    /// Takes one call to `api` for `tenant` at `now_ms`, or says which window is exhausted
    /// (then nothing was taken).
    async fn spend(&self, tenant: &TenantId, api: &str, now_ms: u64) -> Result<Spend, StoreError>;

    /// The egress address `tenant`'s calls are charged to (`super::EgressAddresses`): the one
    /// an operator registers as a trusted IP when WeCom answers 60020.
    fn address_of(&self, _tenant: &TenantId) -> String {
        super::SHARED_ADDRESS.to_owned()
    }
}
