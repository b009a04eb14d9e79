//! WeCom's wire formats: callback crypto, callback envelopes and event payloads.

pub mod callback;
pub mod crypto;
