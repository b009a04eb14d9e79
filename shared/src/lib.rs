//! qrsync's library crate.
//!
//! - `wecom`: WeCom's wire formats (callback crypto, envelopes, events).
//! - `intake`: MISSION rule 1, the callback function's verify, persist, answer.
//! - `membership`: MISSION's membership rules, the pure recompute of a code's list.
//! - `facts`: MISSION rules 2 and 8, facts written idempotently (claims by business key), then refresh reasons.
//! - `refresh`: MISSION rules 3 to 5, the single writer of each code's WeCom list.
//! - `tenants`: tenant ids and the settings that authenticate their callbacks.
//! - `ports`: the traits the domain needs; `adapters`: DynamoDB, SQS and in-memory versions.
//! - `batch`: MISSION rule 7, order-safe partial batch responses for FIFO consumers.
//! - `http`: how domain errors become HTTP answers, shared by every HTTP function.

pub mod adapters;
pub mod admin;
pub mod batch;
pub mod env;
pub mod facts;
pub mod http;
mod ids;
pub mod intake;
pub mod membership;
pub mod ports;
pub mod refresh;
pub mod tenants;
pub mod wecom;

/// Milliseconds since the epoch. Domain code takes a `Clock` so tests can fix time.
pub type Clock = fn() -> u64;

pub fn system_clock() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or_default()
}
