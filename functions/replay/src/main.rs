//! Wiring only: configuration, clients and adapters are built once per container.

mod config;
mod handler;

use adapters::dynamodb::DynamoStore;
use adapters::eventbridge::EventBridgeNotifier;
use adapters::sqs::{SqsReasonQueue, SqsReplayPages};
use domain::facts::FactRecorder;
use domain::replay::Replayer;
use lambda_runtime::{run, service_fn, Error};

#[tokio::main]
async fn main() -> Result<(), Error> {
    adapters::logging::init();
    let metrics = adapters::metrics::init("replay")?;
    let config = config::Config::from_env()?;
    let aws = adapters::aws::load_config().await;
    let sqs = aws_sdk_sqs::Client::new(&aws);
    let store = DynamoStore::new(aws_sdk_dynamodb::Client::new(&aws), config.table_name)
        .with_secrets(adapters::secrets::envelope_from_env(&aws));
    let recorder = FactRecorder::new(
        store.clone(),
        store.clone(),
        SqsReasonQueue::new(sqs.clone(), config.refresh_queue_url),
        EventBridgeNotifier::new(
            aws_sdk_eventbridge::Client::new(&aws),
            config.quota_event_bus,
        ),
        adapters::clock::system_clock,
    )
    .with_owner_lease(config.claim_owner_lease_ms)
    .with_key_rotation(config.key_rotation);
    let replayer = Replayer::new(
        store.clone(),
        store.clone(),
        store,
        recorder,
        adapters::clock::system_clock,
    );
    let pages = SqsReplayPages::new(sqs, config.replay_queue_url);
    run(service_fn(|event| {
        metrics.measured(handler::handle(&replayer, &pages, event))
    }))
    .await
}
