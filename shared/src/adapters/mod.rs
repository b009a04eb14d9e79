//! Implementations of the ports: DynamoDB, SQS and WeCom for the deployed functions,
//! in-memory fakes for unit tests.

pub mod dynamodb;
pub mod eventbridge;
#[cfg(any(test, feature = "test-util"))]
pub mod memory;
pub mod sqs;
mod wecom;
