//! The domain's ports over the simulated services: what the functions' `main.rs` wire from
//! `adapters`, rebuilt on `crate::services` so the domain's own consumers run at scale.

pub mod store;
