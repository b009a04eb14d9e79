//! One in-memory fake of each port, for unit tests here and in the functions (feature
//! `test-util`). A port changed changes its one fake here.
//!
//! - `InMemoryStore`: the table, every store port (`store`);
//! - `InMemoryQueues`: refresh reasons, fan-outs, retries, dead letters, notifications;
//! - `FakeWeCom`: contact ways created, deleted and their lists replaced;
//! - `FakeBudget`: the tenants' WeCom budget;
//! - `InMemoryCallbackSettings` and `InMemoryInbox`: the callback's ports (`intake`);
//! - `FakeKms`: the data keys that seal secrets at rest (`secrets`);
//! - `InMemoryRotations`: the landing page's rotation records (`landing`);
//! - `AdminWorld`: the admin commands on the fakes above;
//! - `contract`: the cases every store must answer alike, run against these fakes and the
//!   DynamoDB adapter.
//!
//! Each records what it was asked and has switches to fail, so a test can assert both.

mod admin;
mod budget;
pub mod contract;
mod intake;
mod landing;
mod queues;
mod secrets;
mod store;
mod wecom;

pub use admin::AdminWorld;

/// The inbox consumer's ports in memory (`crate::inbox::InboxConsumer`).
pub struct InMemoryInboxPorts;

impl crate::inbox::InboxPorts for InMemoryInboxPorts {
    type Tenants = InMemoryStore;
    type Ledger = InMemoryStore;
    type Reasons = InMemoryQueues;
    type Notifier = InMemoryQueues;
    type DeadLetters = InMemoryQueues;
    type Archive = InMemoryStore;
}

pub use budget::{scrambled, FakeBudget};
pub use intake::{InMemoryCallbackSettings, InMemoryInbox};
pub use landing::InMemoryRotations;
pub use queues::InMemoryQueues;
pub use secrets::FakeKms;
pub use store::{InMemoryStore, Marks};
pub use wecom::FakeWeCom;
