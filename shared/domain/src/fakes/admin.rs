use super::{FakeWeCom, InMemoryQueues, InMemoryStore};
use crate::admin::Admin;
use crate::Clock;

/// The admin commands on one set of fakes, each kept beside them so a test can seed the store
/// and read what was queued and pushed.
pub struct AdminWorld {
    pub store: InMemoryStore,
    pub queue: InMemoryQueues,
    pub wecom: FakeWeCom,
    pub admin: Admin<InMemoryStore, InMemoryQueues, FakeWeCom>,
}

impl AdminWorld {
    /// Empty fakes, with fan-outs expanded through the store as the fan-out function would.
    pub fn new(clock: Clock) -> Self {
        let store = InMemoryStore::default();
        let queue = InMemoryQueues::default();
        let wecom = FakeWeCom::default();
        let admin = Admin::new(
            store.clone(),
            queue.clone(),
            queue.expanding_through(store.clone()),
            wecom.clone(),
            clock,
        );
        Self {
            store,
            queue,
            wecom,
            admin,
        }
    }
}
