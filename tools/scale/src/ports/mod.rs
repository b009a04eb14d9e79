//! The domain's ports over the simulated services: each sends what the project's adapter would
//! send (the same message body, group, deduplication id and requests) to the simulated service
//! instead of AWS or WeCom. tools/scale/README.md, "The ports and the functions".

pub mod queues;
pub mod wecom;
