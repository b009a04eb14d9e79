//! A code as stored and as read for a recompute: what the refresh, the admin API, the sweep
//! and replay all read, so it sits below all four.

mod ports;
mod snapshot;
mod stored;

pub use ports::CodeFacts;
pub use snapshot::{CodeSnapshot, LeaseSeen, PushedList};
pub use stored::StoredCode;
