//! Wiring only: configuration, clients and adapters are built once per container.

mod config;
mod handler;
mod routes;

use adapters::dynamodb::{DynamoBudget, DynamoStore};
use adapters::sqs::{SqsFanOutQueue, SqsReasonQueue};
use adapters::wecom::WeComClient;
use domain::admin::Admin;
use lambda_http::{run, service_fn, Error};
use std::time::Duration;

/// Per WeCom request. Creating a contact way can take four requests (token, create, and once
/// more each if the token was stale), but the client bounds the whole call to 2.5 s (4 s
/// through an egress relay: `WeComClient::call_bound`), inside the function's 10 s.
const WECOM_TIMEOUT: Duration = Duration::from_secs(2);

#[tokio::main]
async fn main() -> Result<(), Error> {
    adapters::logging::init();
    let metrics = adapters::metrics::init("admin-api")?;
    let config = config::Config::from_env()?;
    let aws = adapters::aws::load_config().await;
    let store = DynamoStore::new(aws_sdk_dynamodb::Client::new(&aws), config.table_name)
        .with_pages(config.pages)
        .with_secrets(adapters::secrets::envelope_from_env(&aws));
    let sqs = aws_sdk_sqs::Client::new(&aws);
    let reasons = SqsReasonQueue::new(sqs.clone(), config.refresh_queue_url);
    let fan_outs = SqsFanOutQueue::new(sqs, config.fan_out_queue_url);
    // Access tokens are shared through the table with the refresh function and every other
    // container: one corp app, one token, refreshed by one worker at a time.
    let wecom = WeComClient::new(config.wecom_api_base_url, WECOM_TIMEOUT)
        .with_token_store(std::sync::Arc::new(store.clone()))
        .routed(&aws, &config.budget.egress, &adapters::env::egress_relays())?;
    let budget = DynamoBudget::new(store.clone(), config.budget);
    let admin = Admin::new(
        store,
        reasons,
        fan_outs,
        wecom,
        adapters::clock::system_clock,
    )
    .with_budget(budget)
    .with_key_rotation(config.key_rotation);
    run(service_fn(|request| {
        metrics.measured(handler::handle(&admin, request))
    }))
    .await
}
