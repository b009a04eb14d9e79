//! Wiring only: configuration, clients and adapters are built once per container.

mod config;
mod handler;

use adapters::dynamodb::{DynamoBudget, DynamoStore};
use adapters::sqs::{QueueInlets, SqsDeadLetters, SqsFanOutQueue, SqsRetryQueues};
use adapters::wecom::{WeComClient, WeComRobot};
use domain::refresh::consumer::{RefreshConsumer, RefreshPorts};
use domain::refresh::Refresher;
use lambda_runtime::{run, service_fn, Error};

/// The refresh's ports on AWS and WeCom.
struct Deployed;

impl RefreshPorts for Deployed {
    type Facts = DynamoStore;
    type Pusher = WeComClient;
    type Budget = DynamoBudget;
    type DeadLetters = SqsDeadLetters;
    type Retries = SqsRetryQueues;
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    adapters::logging::init();
    let metrics = adapters::metrics::init("refresh-codes")?;
    let config = config::Config::from_env()?;
    let aws = adapters::aws::load_config().await;
    let store = DynamoStore::new(aws_sdk_dynamodb::Client::new(&aws), config.table_name)
        .with_pages(config.pages)
        .with_secrets(adapters::secrets::envelope_from_env(&aws));
    // One client per container: its access-token cache is shared by every invocation, and
    // through the table with every other container.
    let wecom = WeComClient::new(config.wecom_api_base_url, config.wecom_timeout)
        .with_token_store(std::sync::Arc::new(store.clone()))
        .routed(&aws, &config.budget.egress, &config.egress_relays)?;
    let budget = DynamoBudget::new(store.clone(), config.budget);
    let sqs = aws_sdk_sqs::Client::new(&aws);
    let mut refresher = Refresher::new(
        store,
        wecom,
        budget,
        adapters::clock::system_clock,
        config.lanes,
        config.lease_times,
    )
    .with_fan_outs(SqsFanOutQueue::new(sqs.clone(), config.fan_out_queue_url));
    // The team's group robot, told once when a tenant is paused: its URL (which holds the
    // robot's key) is read from its secret once per container, never from the configuration.
    if let Some(url) = adapters::secrets::robot_webhook_url(&aws).await? {
        refresher = refresher.with_robot(WeComRobot::new(url, config.wecom_timeout));
    }
    let inlets = QueueInlets::new(
        &config.slow_queue_url,
        config.retry_queue_urls.iter().map(|(_, url)| url.as_str()),
    );
    let consumer = RefreshConsumer::<Deployed> {
        refresher,
        dead_letters: SqsDeadLetters::new(sqs.clone(), config.dead_letter_queue_url),
        retries: SqsRetryQueues::new(
            sqs,
            config.refresh_queue_url,
            config.slow_queue_url,
            config.retry_queue_urls,
        ),
        max_receives: config.max_receives,
    };
    run(service_fn(|event| {
        metrics.measured(handler::handle(&consumer, &inlets, event))
    }))
    .await
}
