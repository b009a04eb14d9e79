//! The domain's ports over the simulated services: each sends what the project's adapter would
//! send (the same requests, message body, group and deduplication id) to the simulated service
//! instead of AWS or WeCom, so the domain's own consumers run at scale. tools/scale/README.md,
//! "The store: requests as the adapter sends them" and "The ports and the functions".

pub mod queues;
pub mod store;
pub mod wecom;
