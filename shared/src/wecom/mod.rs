//! WeCom's wire formats: callback crypto, callback envelopes and event payloads.

pub mod api;
pub mod callback;
pub mod crypto;
#[cfg(any(test, feature = "test-util"))]
pub mod reference_vectors;
