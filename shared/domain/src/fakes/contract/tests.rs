//! The contract against the in-memory fakes.

use super::Fixture;
use crate::budget::BudgetLayers;
use crate::fakes::{FakeBudget, InMemoryStore};

struct InMemory {
    store: InMemoryStore,
}

impl Fixture for InMemory {
    type Store = InMemoryStore;
    type Budget = FakeBudget;

    fn store(&self) -> &InMemoryStore {
        &self.store
    }

    fn budget(&self, layers: BudgetLayers) -> FakeBudget {
        FakeBudget::layered(layers)
    }

    fn fail_transactions_after(&self, transactions: Option<usize>) {
        self.store.fail_transactions_after(transactions);
    }
}

async fn in_memory() -> InMemory {
    InMemory {
        store: InMemoryStore::default(),
    }
}

crate::store_contract!(in_memory);
