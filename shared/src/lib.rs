//! qrsync's library crate. `wecom` holds WeCom's wire formats, `intake` the rules of the
//! callback function (verify, persist, answer), `ports` the traits the domain needs, and
//! `adapters` their DynamoDB, SQS and in-memory implementations.

pub mod wecom;
