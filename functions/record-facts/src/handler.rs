//! Translates inbox.fifo batches into `domain::inbox::InboxConsumer`, where the per-message policy
//! lives (archive, record, retry, park the poison), and its answer into the batch response.

use adapters::sqs::received;
use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use domain::batch::Received;
use domain::inbox::{InboxConsumer, InboxPorts};
use lambda_runtime::{Error, LambdaEvent};

#[tracing::instrument(skip_all, fields(records = event.payload.records.len()))]
pub(crate) async fn handle<P: InboxPorts>(
    consumer: &InboxConsumer<P>,
    event: LambdaEvent<SqsEvent>,
) -> Result<SqsBatchResponse, Error> {
    let messages: Vec<Received<'_>> = event.payload.records.iter().map(received).collect();
    let batch = consumer.consume(&messages).await;
    let mut response = SqsBatchResponse::default();
    response.set_failures(batch.failures());
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;
    use domain::dirty::DirtyWhy;
    use domain::facts::FactRecorder;
    use domain::fakes::{InMemoryInboxPorts, InMemoryQueues, InMemoryStore};
    use domain::inbox::InboxExits;
    use domain::replay::Archiving;
    use lambda_runtime::Context;

    /// The table, with the sample's tenant and code, and the queues.
    async fn fakes() -> (InMemoryStore, InMemoryQueues) {
        let store = InMemoryStore::default();
        store.insert_reference_tenant();
        store.insert_reference_code().await;
        (store, InMemoryQueues::default())
    }

    fn clock() -> u64 {
        7
    }

    fn sample() -> LambdaEvent<SqsEvent> {
        let path = format!(
            "{}/../../events/sqs-inbox-add-and-poison.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let event = serde_json::from_str(&std::fs::read_to_string(path).expect("sample exists"))
            .expect("an SQS event");
        LambdaEvent::new(event, Context::default())
    }

    fn consumer(
        store: &InMemoryStore,
        queues: &InMemoryQueues,
    ) -> InboxConsumer<InMemoryInboxPorts> {
        InboxConsumer {
            recorder: FactRecorder::new(
                store.clone(),
                store.clone(),
                queues.clone(),
                queues.clone(),
                clock,
            ),
            exits: InboxExits {
                dead_letters: queues.clone(),
                max_receives: 5,
                archive: Archiving::new(store.clone(), 30, clock),
            },
        }
    }

    fn dirty(store: &InMemoryStore) -> Vec<(String, DirtyWhy)> {
        let marks = store.marks().dirty;
        marks
            .into_iter()
            .map(|(c, why)| (c.to_string(), why))
            .collect()
    }

    #[tokio::test]
    async fn a_parked_message_naming_a_code_marks_the_code_dirty() {
        let (store, queues) = fakes().await;
        handle(&consumer(&store, &queues), sample())
            .await
            .expect("handled");
        assert_eq!(
            dirty(&store),
            [("code-1".to_owned(), DirtyWhy::InboxGaveUp)]
        );
    }

    #[tokio::test]
    async fn a_message_on_its_last_receive_marks_its_code_dirty_before_its_work() {
        let (store, queues) = fakes().await;
        let mut event = sample();
        event.payload.records.truncate(1);
        event.payload.records[0]
            .attributes
            .insert("ApproximateReceiveCount".into(), "5".into());
        handle(&consumer(&store, &queues), event)
            .await
            .expect("handled");
        assert_eq!(
            dirty(&store),
            [("code-1".to_owned(), DirtyWhy::LastReceive)]
        );
        assert_eq!(store.counted().len(), 1, "the work still runs");
    }

    #[tokio::test]
    async fn a_callback_that_cannot_be_archived_is_left_for_redelivery_not_recorded() {
        let (store, queues) = fakes().await;
        let mut event = sample();
        event.payload.records.truncate(1);
        store.set_unavailable(true);
        let response = handle(&consumer(&store, &queues), event)
            .await
            .expect("handled");
        store.set_unavailable(false);
        assert_eq!(response.batch_item_failures.len(), 1);
        assert!(store.archived().is_empty() && store.counted().is_empty());
        assert!(queues.sends().is_empty());
    }

    #[tokio::test]
    async fn the_add_is_counted_and_the_poison_message_is_parked_not_retried() {
        let path = format!(
            "{}/../../events/sqs-inbox-add-and-poison.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let event = serde_json::from_str(&std::fs::read_to_string(path).expect("sample exists"))
            .expect("an SQS event");
        let (store, queues) = fakes().await;
        let response = handle(
            &consumer(&store, &queues),
            LambdaEvent::new(event, Context::default()),
        )
        .await
        .expect("handled");

        assert!(
            response.batch_item_failures.is_empty(),
            "nothing is left for redelivery"
        );
        let counted = store.counted();
        assert_eq!(
            (
                counted.len(),
                counted[0].code.as_str(),
                counted[0].staff.as_str()
            ),
            (1, "code-1", "zhangsan")
        );
        assert_eq!(queues.sends().len(), 1);
        let archived = store.archived();
        assert_eq!(
            archived.len(),
            1,
            "the add is archived (the other is no inbox message)"
        );
        assert_eq!(archived[0].1, 30 * 24 * 3600, "kept for the retention");
        assert_eq!(
            queues.parked(),
            [(
                "9a1f0c2e-0001-4c7e-9d3b-000000000002".to_owned(),
                "poison".to_owned()
            )]
        );
    }
}
