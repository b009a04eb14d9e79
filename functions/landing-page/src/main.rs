//! Wiring only: configuration, the client and the store are built once per container.

mod config;
mod handler;

use adapters::dynamodb::DynamoStore;
use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use domain::landing::LandingPage;
use lambda_http::{run, service_fn, Error};
use std::time::Duration;

#[tokio::main]
async fn main() -> Result<(), Error> {
    adapters::logging::init();
    let metrics = adapters::metrics::init("landing-page")?;
    let config = config::Config::from_env()?;
    let aws = adapters::aws::load_config().await;
    // A visitor waits on these two requests: a stuck one is answered 503 rather than held.
    // No retries: `ADD visits` is not idempotent, and a retry of a write that landed but whose
    // answer was lost would count one visitor twice and skip a slot; the visitor's own reload
    // is the retry. So a visit is exactly one read and one write.
    let dynamodb_config = aws_sdk_dynamodb::config::Builder::from(&aws)
        .retry_config(RetryConfig::disabled())
        .timeout_config(
            TimeoutConfig::builder()
                .operation_timeout(Duration::from_secs(2))
                .build(),
        )
        .build();
    let store = DynamoStore::for_pages(
        aws_sdk_dynamodb::Client::from_conf(dynamodb_config),
        config.pages,
    );
    let page = LandingPage::new(store.clone());
    run(service_fn(|request| {
        metrics.measured(handler::handle(&page, || store.requests_sent(), request))
    }))
    .await
}
