//! Wiring only: configuration, clients and adapters are built once per container.

mod config;
mod handler;

use adapters::dynamodb::{DynamoBudget, DynamoStore};
use adapters::sqs::{SqsDeadLetters, SqsFanOutQueue, SqsRetryQueues};
use adapters::wecom::WeComClient;
use domain::refresh::Refresher;
use lambda_runtime::{run, service_fn, Error};

#[tokio::main]
async fn main() -> Result<(), Error> {
    adapters::logging::init();
    let config = config::Config::from_env()?;
    let aws = aws_config::load_from_env().await;
    let store = DynamoStore::new(aws_sdk_dynamodb::Client::new(&aws), config.table_name);
    let budget = DynamoBudget::new(store.clone(), config.budget);
    // One client per container: its access-token cache is shared by every invocation, and
    // through the table with every other container.
    let wecom = WeComClient::new(config.wecom_api_base_url, config.wecom_timeout)
        .with_token_store(std::sync::Arc::new(store.clone()));
    let sqs = aws_sdk_sqs::Client::new(&aws);
    let refresher = Refresher::new(
        store,
        wecom,
        budget,
        adapters::clock::system_clock,
        config.lanes,
        config.lease_times,
    )
    .with_fan_outs(SqsFanOutQueue::new(sqs.clone(), config.fan_out_queue_url));
    let dead_letters = SqsDeadLetters::new(sqs.clone(), config.dead_letter_queue_url);
    let retries = SqsRetryQueues::new(
        sqs,
        config.refresh_queue_url,
        config.slow_queue_url,
        config.retry_queue_urls,
    );
    run(service_fn(|event| {
        handler::handle(&refresher, &dead_letters, &retries, event)
    }))
    .await
}
