//! The services the simulated day runs against, each with the documented limits that shape
//! qrsync at production scale (tools/scale/README.md, "The simulated services"): SQS FIFO and
//! standard queues, Lambda's SQS event source and concurrency, EventBridge Scheduler's rate
//! schedules, DynamoDB's request units and partitions, and WeCom's rate windows.
//!
//! # Virtual time: tokio's paused clock, not turmoil or madsim
//!
//! Every service here reads and waits on `tokio::time`, and a simulation runs them on a
//! current-thread runtime built with `start_paused(true)`: when every task is waiting, tokio
//! moves the clock straight to the next timer, so a day of waits costs no wall time and the
//! order of events is the same on every run of a seed. That is what the domain needs: its
//! consumers (`Refresher`, `Expander`, `FactRecorder`, `Tick`, `Sweep`) are async code over
//! ports, and the simulation must run that very code, awaiting simulated ports, not a second
//! model of it. turmoil simulates hosts and a network of sockets, and madsim replaces tokio
//! itself at build time (a `--cfg madsim` build of every crate, the AWS SDK included): both
//! solve a problem qrsync's domain does not have, since it reaches its services through
//! traits, never sockets, and both would put a second build or a network between the
//! simulation and the domain code it exists to run.
//!
//! The services share state behind `std::sync::Mutex` (never held across an `.await`), so
//! they are `Send` and `Sync` like the ports the domain's traits ask for; on one thread the
//! locks are never contended.

pub mod clock;
pub mod dynamodb;
pub mod lambda;
pub mod scheduler;
pub mod sqs;
pub mod wecom;
