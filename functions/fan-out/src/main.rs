//! Wiring only: configuration, clients and adapters are built once per container.

mod config;
mod handler;

use adapters::dynamodb::DynamoStore;
use adapters::sqs::{SqsFanOutQueue, SqsReasonQueue};
use domain::fanout::Expander;
use lambda_runtime::{run, service_fn, Error};

#[tokio::main]
async fn main() -> Result<(), Error> {
    adapters::logging::init();
    let metrics = adapters::metrics::init("fan-out")?;
    let config = config::Config::from_env()?;
    let aws = adapters::aws::load_config().await;
    let store = DynamoStore::new(aws_sdk_dynamodb::Client::new(&aws), config.table_name)
        .with_secrets(adapters::secrets::envelope_from_env(&aws));
    let sqs = aws_sdk_sqs::Client::new(&aws);
    let continuations = SqsFanOutQueue::new(sqs.clone(), config.fan_out_queue_url);
    let expander = Expander::new(
        store.clone(),
        SqsReasonQueue::new(sqs, config.refresh_queue_url),
        continuations,
        store,
    )
    .paced(config.pace_per_minute);
    let max_receives = config.max_receives;
    run(service_fn(|event| {
        metrics.measured(handler::handle(&expander, max_receives, event))
    }))
    .await
}
