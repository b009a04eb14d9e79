//! qrsync's adapters: the domain's ports on DynamoDB, SQS, EventBridge and WeCom's HTTP API,
//! and what every function's `main.rs` needs from its process (environment, clock, logging).
//! Nothing here decides a rule; each rule lives in the `domain` crate.

pub mod aws;
pub mod clock;
pub mod coalesce;
pub mod dynamodb;
pub mod env;
pub mod eventbridge;
pub mod logging;
pub mod metrics;
pub mod secrets;
pub mod sqs;
pub mod wecom;
