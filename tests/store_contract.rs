//! The store contract (`domain::fakes::contract`) against `DynamoStore` and `DynamoBudget` on
//! the deployed table: the same cases the unit tests run against the in-memory fakes, each on
//! a fresh tenant, so the fakes every other unit test relies on answer as the table does.

use adapters::dynamodb::{DynamoBudget, DynamoStore};
use domain::budget::BudgetLayers;
use domain::fakes::contract::Fixture;
use integration_tests::proxy::FaultProxy;
use integration_tests::World;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// The table, reached through a fault proxy of the test's own so a case can cut edits short
/// on the wire (`Fixture::fail_transactions_after`).
struct Table {
    store: DynamoStore,
    cut: Arc<Cut>,
    _proxy: FaultProxy,
}

/// How many more transactions go through (`None`: all), and how many were sent since.
#[derive(Default)]
struct Cut {
    after: Mutex<Option<usize>>,
    sent: AtomicUsize,
}

impl Fixture for Table {
    type Store = DynamoStore;
    type Budget = DynamoBudget;

    fn store(&self) -> &DynamoStore {
        &self.store
    }

    fn budget(&self, layers: BudgetLayers) -> DynamoBudget {
        DynamoBudget::new(self.store.clone(), layers)
    }

    fn fail_transactions_after(&self, transactions: Option<usize>) {
        *self.cut.after.lock().expect("cut lock") = transactions;
        self.cut.sent.store(0, Ordering::SeqCst);
    }
}

/// A client per test: each test has its own runtime, and a client's connections (and the
/// proxy's task) belong to the runtime that opened them.
async fn table() -> Table {
    let world = World::connect().await.expect("the local world is deployed");
    let endpoint = std::env::var("AWS_ENDPOINT_URL").expect("AWS_ENDPOINT_URL names the world");
    let cut = Arc::new(Cut::default());
    let counted = cut.clone();
    // Retries of a refused transaction are refused too: they come after the allowance.
    let rule = Arc::new(move |target: &str, _: &str| {
        target.ends_with("TransactWriteItems")
            && counted
                .after
                .lock()
                .expect("cut lock")
                .is_some_and(|after| counted.sent.fetch_add(1, Ordering::SeqCst) >= after)
    });
    let proxy = FaultProxy::start(&endpoint, rule)
        .await
        .expect("the fault proxy starts");
    let config = aws_sdk_dynamodb::config::Builder::from(&world.aws)
        .endpoint_url(&proxy.url)
        .build();
    Table {
        store: DynamoStore::new(
            aws_sdk_dynamodb::Client::from_conf(config),
            world.output("TableName").to_owned(),
        )
        .with_pages(world.page_tables()),
        cut,
        _proxy: proxy,
    }
}

domain::store_contract!(table);
