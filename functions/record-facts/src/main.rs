//! Wiring only: configuration, clients and adapters are built once per container.

mod config;
mod handler;

use adapters::dynamodb::DynamoStore;
use adapters::eventbridge::EventBridgeNotifier;
use adapters::sqs::{SqsDeadLetters, SqsReasonQueue};
use domain::facts::FactRecorder;
use domain::inbox::{InboxConsumer, InboxExits, InboxPorts};
use domain::replay::Archiving;
use lambda_runtime::{run, service_fn, Error};

/// The inbox's ports on AWS.
struct Deployed;

impl InboxPorts for Deployed {
    type Tenants = DynamoStore;
    type Ledger = DynamoStore;
    type Reasons = SqsReasonQueue;
    type Notifier = EventBridgeNotifier;
    type DeadLetters = SqsDeadLetters;
    type Archive = DynamoStore;
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    adapters::logging::init();
    let metrics = adapters::metrics::init("record-facts")?;
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
    .with_key_rotation(config.key_rotation)
    .waiting_with(|wait| Box::pin(tokio::time::sleep(wait)));
    let exits = InboxExits {
        dead_letters: SqsDeadLetters::new(sqs, config.dead_letter_queue_url),
        max_receives: config.max_receives,
        archive: Archiving::new(store, config.archive_days, adapters::clock::system_clock),
    };
    let consumer = InboxConsumer::<Deployed> { recorder, exits };
    run(service_fn(|event| {
        metrics.measured(handler::handle(&consumer, event))
    }))
    .await
}
