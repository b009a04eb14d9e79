//! Wiring only: configuration, clients and adapters are built once per container.

mod config;
mod handler;

use lambda_runtime::{run, service_fn, tracing, Error};
use shared::adapters::dynamodb::DynamoStore;
use shared::adapters::sqs::SqsDeadLetters;
use shared::refresh::Refresher;
use shared::wecom::api::WeComClient;

#[tokio::main]
async fn main() -> Result<(), Error> {
    tracing::init_default_subscriber();
    let config = config::Config::from_env()?;
    let aws = aws_config::load_from_env().await;
    let store = DynamoStore::new(aws_sdk_dynamodb::Client::new(&aws), config.table_name);
    // One client per container: its access-token cache is shared by every invocation.
    let wecom = WeComClient::new(config.wecom_api_base_url, config.wecom_timeout);
    let refresher = Refresher::new(store, wecom, shared::system_clock);
    let dead_letters =
        SqsDeadLetters::new(aws_sdk_sqs::Client::new(&aws), config.dead_letter_queue_url);
    run(service_fn(|event| {
        handler::handle(&refresher, &dead_letters, event)
    }))
    .await
}
