//! Wiring only: configuration, clients and adapters are built once per container.

mod config;
mod handler;

use adapters::dynamodb::DynamoStore;
use adapters::sqs::{SqsFanOutQueue, SqsReasonQueue};
use domain::schedules::{Tick, TickSettings};
use lambda_runtime::{run, service_fn, Error};

#[tokio::main]
async fn main() -> Result<(), Error> {
    adapters::logging::init();
    let metrics = adapters::metrics::init("schedule-tick")?;
    let config = config::Config::from_env()?;
    let aws = adapters::aws::load_config().await;
    let store = DynamoStore::new(aws_sdk_dynamodb::Client::new(&aws), config.table_name)
        .with_secrets(adapters::secrets::envelope_from_env(&aws));
    let sqs = aws_sdk_sqs::Client::new(&aws);
    let reasons = SqsReasonQueue::new(sqs.clone(), config.refresh_queue_url);
    let fan_outs = SqsFanOutQueue::new(sqs, config.fan_out_queue_url);
    let tick = Tick::new(
        store.clone(),
        store,
        reasons,
        fan_outs,
        adapters::clock::system_clock,
        TickSettings::DEFAULT,
    )
    .waiting_with(|wait| Box::pin(tokio::time::sleep(wait)));
    run(service_fn(|event| {
        metrics.measured(handler::handle(&tick, event))
    }))
    .await
}
