//! Wiring only: configuration, clients and adapters are built once per container.

mod config;
mod handler;

use lambda_runtime::{run, service_fn, Error};
use shared::adapters::dynamodb::DynamoStore;
use shared::adapters::sqs::SqsReasonQueue;
use shared::schedules::{Tick, TickSettings};

#[tokio::main]
async fn main() -> Result<(), Error> {
    shared::logging::init();
    let config = config::Config::from_env()?;
    let aws = aws_config::load_from_env().await;
    let store = DynamoStore::new(aws_sdk_dynamodb::Client::new(&aws), config.table_name);
    let reasons = SqsReasonQueue::new(aws_sdk_sqs::Client::new(&aws), config.refresh_queue_url);
    let tick = Tick::new(
        store.clone(),
        store,
        reasons,
        shared::system_clock,
        TickSettings::DEFAULT,
    );
    run(service_fn(|event| handler::handle(&tick, event))).await
}
