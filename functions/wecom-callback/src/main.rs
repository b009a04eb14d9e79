//! Wiring only: configuration, clients and adapters are built once per container.

mod config;
mod handler;

use adapters::dynamodb::DynamoStore;
use adapters::sqs::SqsInbox;
use aws_config::timeout::TimeoutConfig;
use domain::intake::Intake;
use domain::tenants::cache::CachedCallbackSettings;
use lambda_http::{run, service_fn, Error};
use std::time::Duration;

#[tokio::main]
async fn main() -> Result<(), Error> {
    adapters::logging::init();
    let metrics = adapters::metrics::init("wecom-callback")?;
    let config = config::Config::from_env()?;
    let aws = adapters::aws::load_config().await;
    let tenants = CachedCallbackSettings::new(
        DynamoStore::new(aws_sdk_dynamodb::Client::new(&aws), config.table_name)
            .with_secrets(adapters::secrets::envelope_from_env(&aws)),
        config.tenant_cache_ttl,
    );
    // WeCom gives up after 5 s; answering 503 in time lets its retry start sooner than a
    // silent timeout would.
    let sqs_config = aws_sdk_sqs::config::Builder::from(&aws)
        .timeout_config(
            TimeoutConfig::builder()
                .operation_timeout(Duration::from_secs(3))
                .build(),
        )
        .build();
    let inbox = SqsInbox::new(
        aws_sdk_sqs::Client::from_conf(sqs_config),
        config.inbox_queue_url,
    );
    let intake =
        Intake::new(tenants, inbox, config.max_age_secs).with_key_overlap(config.key_overlap_ms);
    run(service_fn(|request| {
        metrics.measured(handler::handle(&intake, request))
    }))
    .await
}
