//! The inbox queue's consumer (the record-facts function): a batch of stored callbacks, each
//! archived, then recorded as facts. It sits above `facts` and `replay`, which it joins
//! (the archive belongs to replay, which records through `facts` in turn).
//!
//! Per message: the stored callback archived first (rule 10; a failure to archive redelivers
//! it like any store failure); then a fact written (or found already written) and its reason
//! sent -> success; a store or queue failure -> reported for redelivery, with the rest of its
//! group (FIFO order); a poison message (unknown tenant, fails verification, unparseable) can
//! never succeed, so it is moved to the dead-letter queue with its class and acknowledged
//! instead of being retried. On a message's last receive before the queue's own redrive its
//! code is marked dirty before its work (rule 11).

use crate::batch::{is_last_receive, DeadLetters, PartialBatch, Received};
use crate::dirty::DirtyWhy;
use crate::facts::{
    CountOutcome, FactLedger, FactOutcome, FactRecorder, FactsError, QuotaNotifier, TenantProfiles,
};
use crate::intake::InboxMessage;
use crate::reasons::ReasonQueue;
use crate::replay::{Archiving, CallbackArchive};

/// What the inbox's consumer needs from the outside world, named once: the fact recorder's
/// ports, the dead-letter queue and the callback archive.
pub trait InboxPorts {
    type Tenants: TenantProfiles;
    type Ledger: FactLedger;
    type Reasons: ReasonQueue;
    type Notifier: QuotaNotifier;
    type DeadLetters: DeadLetters;
    type Archive: CallbackArchive;
}

/// The inbox's `maxReceiveCount`, where poison goes, and the archive every message is kept in.
pub struct InboxExits<D, A> {
    pub dead_letters: D,
    pub max_receives: u32,
    pub archive: Archiving<A>,
}

/// The inbox queue's consumer: the fact recorder and the inbox's exits.
pub struct InboxConsumer<P: InboxPorts> {
    pub recorder: FactRecorder<P::Tenants, P::Ledger, P::Reasons, P::Notifier>,
    pub exits: InboxExits<P::DeadLetters, P::Archive>,
}

impl<P: InboxPorts> InboxConsumer<P> {
    /// Consumes one batch of the inbox; the answer names the messages to redeliver.
    ///
    /// A message group's messages are worked in their order (a failure fails the rest of its
    /// group), and the groups side by side: nothing orders one group's facts against another's
    /// (two adds that count on one item meet in DynamoDB's atomic updates, as they do from two
    /// containers), so a batch takes its longest group's time, not the sum of its messages'.
    pub async fn consume(&self, messages: &[Received<'_>]) -> PartialBatch {
        let mut groups: Vec<Vec<&Received<'_>>> = Vec::new();
        for message in messages {
            match groups
                .iter_mut()
                .find(|group| group[0].group == message.group)
            {
                Some(group) => group.push(message),
                None => groups.push(vec![message]),
            }
        }
        let parts = groups.into_iter().map(|group| self.consume_group(group));
        let mut batch = PartialBatch::default();
        for part in futures::future::join_all(parts).await {
            batch.absorb(part);
        }
        batch
    }

    /// One message group's messages of a batch, in their order.
    async fn consume_group(&self, messages: Vec<&Received<'_>>) -> PartialBatch {
        let (recorder, exits) = (&self.recorder, &self.exits);
        let mut batch = PartialBatch::default();
        for message in messages {
            let Received {
                message_id: id,
                group,
                body,
                receive_count,
            } = *message;
            if batch.group_failed(group) {
                batch.fail(group, id);
                continue;
            }
            if is_last_receive(receive_count, exits.max_receives) {
                recorder.gave_up_on(group, DirtyWhy::LastReceive).await;
            }
            let outcome = match serde_json::from_str::<InboxMessage>(body) {
                Ok(inbox) => match exits.archive.keep(&inbox, group).await {
                    Ok(()) => recorder.record(&inbox).await,
                    Err(error) => Err(FactsError::Store(error)),
                },
                Err(error) => Err(FactsError::Poison(format!("not an inbox message: {error}"))),
            };
            match outcome {
                Ok(FactOutcome::Add {
                    fact,
                    outcome,
                    crossings,
                }) => {
                    let counted = matches!(outcome, CountOutcome::Counted { .. });
                    crate::telemetry::add(&fact.tenant, counted);
                    tracing::info!(message_id = id, tenant = %fact.tenant, code = %fact.code, staff = %fact.staff, ?outcome, crossings = crossings.len(), "add recorded");
                }
                Ok(FactOutcome::StaffChanged { kind, codes }) => {
                    tracing::info!(message_id = id, kind, codes, "contact change recorded")
                }
                Ok(FactOutcome::Ignored { kind }) => {
                    tracing::info!(message_id = id, kind, "event acknowledged")
                }
                Err(FactsError::Poison(reason)) => {
                    recorder.gave_up_on(group, DirtyWhy::InboxGaveUp).await;
                    batch
                        .park_poison(&exits.dead_letters, group, id, body, &reason)
                        .await;
                }
                Err(FactsError::Store(error)) => {
                    tracing::warn!(message_id = id, group, error = ?error, "fact not written; redelivered later");
                    batch.fail(group, id);
                }
            }
        }
        batch
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fakes::{InMemoryInboxPorts, InMemoryQueues, InMemoryStore};

    fn clock() -> u64 {
        7
    }

    /// The table with the sample's tenant and its code `code-1` listing `zhangsan`, the queues,
    /// the recorder and the exits over them.
    async fn world() -> (
        InMemoryStore,
        InMemoryQueues,
        InboxConsumer<InMemoryInboxPorts>,
    ) {
        let store = InMemoryStore::default();
        store.insert_reference_tenant();
        store.insert_reference_code().await;
        let queues = InMemoryQueues::default();
        let recorder = FactRecorder::new(
            store.clone(),
            store.clone(),
            queues.clone(),
            queues.clone(),
            clock,
        );
        let exits = InboxExits {
            dead_letters: queues.clone(),
            max_receives: 5,
            archive: Archiving::new(store.clone(), 30, clock),
        };
        (store, queues, InboxConsumer { recorder, exits })
    }

    /// The stored callback of the sample inbox batch: an add of `zhangsan` by `code-1`.
    fn add_body() -> String {
        let path = format!(
            "{}/../../events/sqs-inbox-add-and-poison.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let sample: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).expect("sample exists"))
                .expect("JSON");
        sample["Records"][0]["body"]
            .as_str()
            .expect("a body")
            .to_owned()
    }

    fn message<'a>(id: &'a str, group: &'a str, body: &'a str) -> Received<'a> {
        Received {
            message_id: id,
            group,
            body,
            receive_count: 1,
        }
    }

    #[tokio::test]
    async fn a_message_behind_a_failed_one_of_its_group_is_reported_unworked_while_other_groups_go_on(
    ) {
        let (_store, queues, consumer) = world().await;
        queues.set_unavailable(true);
        let add = add_body();
        let batch = [
            message("m1", "demo#code#code-1", &add),
            message("m2", "demo#code#code-1", "not json"),
            message("m3", "demo#code#code-2", "not json"),
        ];

        let failures = consumer.consume(&batch).await.failures();

        assert_eq!(failures, ["m1", "m2"], "the reason could not be sent");
        assert_eq!(
            queues.parked(),
            [("m3".to_owned(), "poison".to_owned())],
            "only the other group's poison is worked"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_message_groups_of_a_batch_are_worked_side_by_side() {
        let (store, queues, consumer) = world().await;
        queues.take_for_each_send(std::time::Duration::from_secs(1));
        // The sample's one add, delivered in two groups (as a retried callback may be): each
        // group's message is worked, the add counted once.
        let add = add_body();
        let batch = [
            message("m1", "demo#code#code-1", &add),
            message("m2", "demo#code#code-2", &add),
        ];

        let failures = consumer.consume(&batch).await.failures();

        assert!(failures.is_empty());
        assert_eq!(store.counted().len(), 1, "the add is counted once");
        assert_eq!(queues.sends().len(), 2, "each message sent its reason");
        assert_eq!(
            queues.most_sends_in_flight(),
            2,
            "the second group's reason did not wait for the first's"
        );
    }

    #[tokio::test]
    async fn a_poison_message_is_parked_and_acknowledged_and_its_code_marked_dirty() {
        let (store, queues, consumer) = world().await;

        let batch = [message("m1", "demo#code#code-1", "not json")];
        let failures = consumer.consume(&batch).await.failures();

        assert!(failures.is_empty());
        assert_eq!(queues.parked(), [("m1".to_owned(), "poison".to_owned())]);
        let dirty: Vec<_> = store
            .marks()
            .dirty
            .into_iter()
            .map(|(_, why)| why)
            .collect();
        assert_eq!(dirty, [DirtyWhy::InboxGaveUp]);
    }

    /// The fan-out marked for the demo tenant's given-up messages, if any.
    fn gave_up_fan_out(store: &InMemoryStore) -> Option<crate::dirty::FanOutMark> {
        let tenant = crate::ids::TenantId::parse("demo").expect("valid");
        store.fan_out_mark(&tenant, crate::facts::INBOX_GAVE_UP)
    }

    #[tokio::test]
    async fn a_poison_message_of_a_staff_member_marks_a_fan_out_of_every_code_of_its_tenant() {
        let (store, queues, consumer) = world().await;

        let batch = [message("m1", "demo#staff#zhangsan", "not json")];
        let failures = consumer.consume(&batch).await.failures();

        assert!(failures.is_empty());
        assert_eq!(queues.parked(), [("m1".to_owned(), "poison".to_owned())]);
        let mark = gave_up_fan_out(&store).expect("marked");
        assert_eq!(mark.fan_out.sources, [crate::reasons::Source::Tenant]);
        assert_eq!(mark.why, Some(DirtyWhy::InboxGaveUp));
        assert!(store.marks().dirty.is_empty(), "no code to name");
    }

    #[tokio::test]
    async fn a_tenants_message_on_its_last_receive_marks_a_fan_out_before_its_work() {
        let (store, _queues, consumer) = world().await;
        let add = add_body();
        let mut received = message("m1", "demo#tenant", &add);
        received.receive_count = 5;

        consumer.consume(&[received]).await;

        let mark = gave_up_fan_out(&store).expect("marked");
        assert_eq!(mark.why, Some(DirtyWhy::LastReceive));
        assert_eq!(mark.due_at_ms, 7, "due at once");
    }

    #[tokio::test]
    async fn a_message_of_a_code_id_sqs_refused_marks_nothing() {
        let (store, _queues, consumer) = world().await;
        let batch = [message("m1", "demo#code-sha256#0123abcd", "not json")];

        consumer.consume(&batch).await;

        assert!(store.marks().dirty.is_empty());
        assert_eq!(gave_up_fan_out(&store), None);
    }

    #[tokio::test]
    async fn a_message_before_its_last_receive_leaves_its_code_unmarked() {
        let (store, _queues, consumer) = world().await;
        let add = add_body();
        let mut received = message("m1", "demo#code#code-1", &add);
        received.receive_count = 4;

        let failures = consumer.consume(&[received]).await.failures();

        assert!(failures.is_empty());
        assert!(store.marks().dirty.is_empty());
        assert_eq!(store.counted().len(), 1);
    }
}
