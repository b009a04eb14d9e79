//! The store contract (`domain::fakes::contract`) against `DynamoStore` and `DynamoBudget` on
//! the deployed table: the same cases the unit tests run against the in-memory fakes, each on
//! a fresh tenant, so the fakes every other unit test relies on answer as the table does.

use adapters::dynamodb::{DynamoBudget, DynamoStore};
use domain::fakes::contract::Fixture;
use domain::refresh::BudgetLimits;
use integration_tests::World;

struct Table {
    store: DynamoStore,
}

impl Fixture for Table {
    type Store = DynamoStore;
    type Budget = DynamoBudget;

    fn store(&self) -> &DynamoStore {
        &self.store
    }

    fn budget(&self, limits: BudgetLimits) -> DynamoBudget {
        DynamoBudget::new(self.store.clone(), limits)
    }
}

/// A client per test: each test has its own runtime, and a client's connections belong to
/// the runtime that opened them.
async fn table() -> Table {
    let world = World::connect().await.expect("the local world is deployed");
    Table {
        store: DynamoStore::new(world.dynamodb.clone(), world.output("TableName").to_owned()),
    }
}

domain::store_contract!(table);
