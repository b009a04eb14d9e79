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
    /// WeCom answered 45009 to `tenant`'s call of `api` at `now_ms`: marks the window WeCom
    /// means as spent for every worker of the tenant (`super::window_to_hold`) and answers the
    /// refusal to wait on. A store that keeps no windows holds nothing and waits a minute.
    async fn hold(&self, _tenant: &TenantId, _api: &str, now_ms: u64) -> Result<Spend, StoreError> {
        Ok(Spend::Exhausted {
            window: super::Window::Minute,
            retry_after_ms: super::reopens_in(super::Window::Minute, now_ms),
        })
    }

    fn address_of(&self, _tenant: &TenantId) -> String {
        super::SHARED_ADDRESS.to_owned()
    }
}
