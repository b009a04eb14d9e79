//! qrsync's domain: every rule, no AWS SDK, no HTTP client, no Lambda types. The compiler
//! keeps it so: this crate does not depend on them.
//!
//! - `wecom`: WeCom's wire formats (callback crypto, envelopes, events).
//! - `intake`: docs/rules.md rule 1, the callback function's verify, persist, answer.
//! - `membership`: the membership rules of docs/rules.md, the pure recompute of a code's list.
//! - `facts`: docs/rules.md rules 2 and 8, facts written idempotently (claims by business key), then refresh reasons.
//! - `refresh`: docs/rules.md rules 3 to 5, the single writer of each code's WeCom list.
//! - `codes`: a code as stored and as read for a recompute (refresh, admin, sweep and replay).
//! - `budget`: docs/rules.md rule 6, each tenant's budget per WeCom API, spent before each call.
//! - `dirty`: docs/rules.md rule 11, the codes a path gave up on, until a later refresh completes.
//! - `replay`: docs/rules.md rule 10, the archive of stored callbacks and replay (dry run by default).
//! - `sweep`: the backstop on a schedule: dirty codes resynced, WeCom's lists read back.
//! - `lanes`: docs/rules.md "Lanes", the pure policy choosing the fast or slow lane per event.
//! - `landing`: the landing page of sequenced and quota codes, one counted write per visit.
//! - `ids`: the ids of codes, staff and departments, each validated once where it enters.
//! - `tenants`: tenant ids and the settings that authenticate their callbacks.
//! - each module declares the ports it needs in its `ports.rs` (a one-file module at its top);
//!   the `adapters` crate implements them for AWS and WeCom, `fakes` (feature `test-util`) in
//!   memory. `StoreError` is what every port answers when its store or queue fails.
//! - `schedules`: work-schedule edges and the tenant's midnight, due in a minute-bucketed index.
//! - `owed`: index work an edit still owes, so a retried edit finishes what it interrupted.
//! - `batch`: docs/rules.md rule 7, order-safe partial batch responses for FIFO consumers.
//! - `http`: how domain errors become HTTP answers, shared by every HTTP function.
//! - `telemetry`: every metric's name, unit and dimensions, recorded through the `metrics` facade.
//! - `alerts`: an alarm's state change, as the team's WeCom group robot shows it.

pub mod admin;
pub mod alerts;
pub mod batch;
pub mod budget;
pub mod codes;
pub mod dirty;
pub mod facts;
#[cfg(any(test, feature = "test-util"))]
pub mod fakes;
pub mod fanout;
pub mod http;
pub mod ids;
pub mod inbox;
pub mod intake;
pub mod landing;
pub mod lanes;
pub mod membership;
pub mod owed;
pub mod reasons;
pub mod refresh;
pub mod replay;
pub mod schedules;
pub mod secrets;
mod store_error;
pub mod sweep;
pub mod telemetry;
pub mod tenants;
pub mod wecom;

pub use store_error::StoreError;

/// Milliseconds since the epoch. Domain code takes a `Clock` so tests can fix time.
pub type Clock = fn() -> u64;

/// Waits for a while (`tokio::time::sleep` in the functions and in the simulation, which runs
/// it in virtual time). Domain code that waits takes a `Pause` so tests need not.
pub type Pause = fn(std::time::Duration) -> futures::future::BoxFuture<'static, ()>;
