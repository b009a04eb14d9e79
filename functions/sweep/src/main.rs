//! Wiring only: configuration, clients and adapters are built once per container.

mod config;
mod handler;

use adapters::dynamodb::{DynamoBudget, DynamoStore};
use adapters::eventbridge::EventBridgeNotifier;
use adapters::sqs::{SqsFanOutQueue, SqsReasonQueue};
use adapters::wecom::WeComClient;
use domain::sweep::{Sweep, SweepPorts};
use lambda_runtime::{run, service_fn, Error};

/// The sweep's ports on AWS and WeCom.
struct Deployed;

impl SweepPorts for Deployed {
    type Store = DynamoStore;
    type WeCom = WeComClient;
    type Budget = DynamoBudget;
    type Reasons = SqsReasonQueue;
    type FanOuts = SqsFanOutQueue;
    type Notifier = EventBridgeNotifier;
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    adapters::logging::init();
    let metrics = adapters::metrics::init("sweep")?;
    let config = config::Config::from_env()?;
    let aws = adapters::aws::load_config().await;
    let store = DynamoStore::new(aws_sdk_dynamodb::Client::new(&aws), config.table_name)
        .with_secrets(adapters::secrets::envelope_from_env(&aws));
    let wecom = WeComClient::new(config.wecom_api_base_url, config.wecom_timeout)
        .with_token_store(std::sync::Arc::new(store.clone()))
        .routed(
            &aws,
            &config.read_budget.egress,
            &adapters::env::egress_relays(),
        )?;
    let counted = store.clone();
    let sqs = aws_sdk_sqs::Client::new(&aws);
    let sweep = Sweep::<Deployed> {
        budget: DynamoBudget::new(store.clone(), config.read_budget),
        store,
        wecom,
        reasons: SqsReasonQueue::new(sqs.clone(), config.refresh_queue_url),
        fan_outs: SqsFanOutQueue::new(sqs, config.fan_out_queue_url),
        notifier: EventBridgeNotifier::new(
            aws_sdk_eventbridge::Client::new(&aws),
            config.quota_event_bus,
        ),
        clock: adapters::clock::system_clock,
        settings: config.settings,
    };
    run(service_fn(|event| {
        metrics.measured(handler::handle(&sweep, || counted.requests_sent(), event))
    }))
    .await
}
