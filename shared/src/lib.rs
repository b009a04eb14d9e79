//! qrsync's library crate.
//!
//! - `wecom`: WeCom's wire formats (callback crypto, envelopes, events).
//! - `intake`: MISSION rule 1, the callback function's verify, persist, answer.
//! - `membership`: MISSION's membership rules, the pure recompute of a code's list.
//! - `tenants`: tenant ids and the settings that authenticate their callbacks.
//! - `ports`: the traits the domain needs; `adapters`: DynamoDB, SQS and in-memory versions.
//! - `http`: how domain errors become HTTP answers, shared by every HTTP function.

pub mod adapters;
pub mod admin;
pub mod http;
pub mod intake;
pub mod membership;
pub mod ports;
pub mod tenants;
pub mod wecom;
