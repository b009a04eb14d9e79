//! WeCom's wire formats: callback crypto, callback envelopes and event payloads, the contact
//! way's requests and answers, and the classes of its errors.

pub mod acquisition;
pub mod callback;
pub mod contact_way;
pub mod crypto;
pub mod errors;
#[cfg(any(test, feature = "test-util"))]
pub mod reference_vectors;
