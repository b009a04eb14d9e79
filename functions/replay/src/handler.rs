//! Translates replay-queue messages into `domain::replay::consumer::consume`, where the
//! per-message policy lives (do the page, queue the next, drop what is not a page), and its
//! answer into the batch response.

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use domain::batch::Received;
use domain::codes::CodeFacts;
use domain::facts::{FactLedger, QuotaLedger, QuotaNotifier, StaffLedger, TenantProfiles};
use domain::reasons::ReasonQueue;
use domain::replay::{consumer, CallbackArchive, ReplayPages, ReplayReads, ReplayRuns, Replayer};
use lambda_runtime::{Error, LambdaEvent};

#[tracing::instrument(skip_all, fields(records = event.payload.records.len()))]
pub(crate) async fn handle<A, R, F, T, L, Q, N, P>(
    replayer: &Replayer<A, R, F, T, L, Q, N>,
    pages: &P,
    event: LambdaEvent<SqsEvent>,
) -> Result<SqsBatchResponse, Error>
where
    A: CallbackArchive,
    R: ReplayRuns,
    F: ReplayReads + TenantProfiles + CodeFacts + StaffLedger + QuotaLedger,
    T: TenantProfiles,
    L: FactLedger,
    Q: ReasonQueue,
    N: QuotaNotifier,
    P: ReplayPages,
{
    let messages: Vec<Received<'_>> = event
        .payload
        .records
        .iter()
        .map(adapters::sqs::received)
        .collect();
    let batch = consumer::consume(replayer, pages, &messages).await;
    let mut response = SqsBatchResponse::default();
    response.set_failures(batch.failures());
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;
    use domain::facts::FactRecorder;
    use domain::fakes::{InMemoryQueues, InMemoryStore};
    use domain::intake::InboxMessage;
    use domain::replay::{CallbackArchive, Page, Phase};
    use lambda_runtime::Context;

    type Fixture = Replayer<
        InMemoryStore,
        InMemoryStore,
        InMemoryStore,
        InMemoryStore,
        InMemoryStore,
        InMemoryQueues,
        InMemoryQueues,
    >;

    fn clock() -> u64 {
        1_700_000_000_000
    }

    fn sample() -> LambdaEvent<SqsEvent> {
        let path = format!(
            "{}/../../events/sqs-replay-dry-run-page.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let event = serde_json::from_str(&std::fs::read_to_string(path).expect("sample exists"))
            .expect("an SQS event");
        LambdaEvent::new(event, Context::default())
    }

    /// The sample's tenant, and the add of the inbox sample archived in the sample's window.
    async fn fixture(store: &InMemoryStore, queues: &InMemoryQueues) -> Fixture {
        store.insert_reference_tenant();
        store.insert_reference_code().await;
        let path = format!(
            "{}/../../events/sqs-inbox-add-and-poison.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let inbox: SqsEvent =
            serde_json::from_str(&std::fs::read_to_string(path).expect("sample exists"))
                .expect("an SQS event");
        for record in &inbox.records {
            let Ok(mut message) =
                serde_json::from_str::<InboxMessage>(record.body.as_deref().unwrap_or_default())
            else {
                continue;
            };
            message.received_at_ms = clock() - 60_000;
            let group = record
                .attributes
                .get("MessageGroupId")
                .cloned()
                .unwrap_or_default();
            store
                .keep(&message, &group, u64::MAX / 1000)
                .await
                .expect("kept");
        }
        let recorder = FactRecorder::new(
            store.clone(),
            store.clone(),
            queues.clone(),
            queues.clone(),
            clock,
        );
        Replayer::new(store.clone(), store.clone(), store.clone(), recorder, clock)
    }

    #[tokio::test]
    async fn a_dry_run_page_writes_no_fact_sends_no_reason_and_queues_its_next_page() {
        let (store, queues) = (InMemoryStore::default(), InMemoryQueues::default());
        let replayer = fixture(&store, &queues).await;
        let response = handle(&replayer, &queues, sample()).await.expect("handled");
        assert!(response.batch_item_failures.is_empty());
        assert!(store.counted().is_empty(), "a dry run counts nothing");
        assert!(queues.sends().is_empty(), "a dry run sends no reason");
        let next = queues.replay_pages();
        assert_eq!(next.len(), 1);
        assert_eq!(
            next[0].phase,
            Phase::Codes,
            "the archive is read: codes next"
        );
    }

    #[tokio::test]
    async fn an_applied_page_counts_the_missing_add_and_sends_its_reason() {
        let (store, queues) = (InMemoryStore::default(), InMemoryQueues::default());
        let replayer = fixture(&store, &queues).await;
        let mut event = sample();
        let body = event.payload.records[0].body.take().unwrap_or_default();
        let mut page: Page = serde_json::from_str(&body).expect("a page");
        page.apply = true;
        event.payload.records[0].body = Some(serde_json::to_string(&page).expect("json"));
        handle(&replayer, &queues, event).await.expect("handled");
        assert_eq!(store.counted().len(), 1);
        assert_eq!(queues.sends().len(), 1);
        assert!(queues.replay_pages().is_empty(), "apply has no codes phase");
    }

    #[tokio::test]
    async fn an_event_type_filter_leaves_other_events_out_of_the_run() {
        let (store, queues) = (InMemoryStore::default(), InMemoryQueues::default());
        let replayer = fixture(&store, &queues).await;
        let mut event = sample();
        let body = event.payload.records[0].body.take().unwrap_or_default();
        let mut page: Page = serde_json::from_str(&body).expect("a page");
        page.selection.event_type = Some("change_contact".into());
        event.payload.records[0].body = Some(serde_json::to_string(&page).expect("json"));
        handle(&replayer, &queues, event).await.expect("handled");
        let (_, events, _) = store.replay_run("sample-dry-run").expect("the run");
        assert!(events.is_empty(), "the add is another type: {events:?}");
    }

    #[tokio::test]
    async fn a_dry_run_reports_the_add_it_would_count() {
        let (store, queues) = (InMemoryStore::default(), InMemoryQueues::default());
        let replayer = fixture(&store, &queues).await;
        handle(&replayer, &queues, sample()).await.expect("handled");
        let (status, events, _) = store.replay_run("sample-dry-run").expect("the run");
        assert_eq!(status, Some(domain::replay::RunStatus::Codes));
        assert_eq!(events.len(), 1);
        assert_eq!(
            events[0].outcome,
            domain::replay::EventOutcome::WouldCountAdd
        );
        assert_eq!(events[0].code.as_deref(), Some("code-1"));
    }

    #[tokio::test]
    async fn a_dry_run_does_not_count_an_add_on_a_code_that_does_not_list_its_member() {
        let (store, queues) = (InMemoryStore::default(), InMemoryQueues::default());
        let replayer = fixture(&store, &queues).await;
        let config = domain::membership::CodeConfig {
            family: domain::membership::Family::Native,
            members: vec![domain::ids::StaffId::parse("lisi").expect("valid")],
            departments: vec![],
            fallback: vec![],
            switches: Default::default(),
        };
        let tenant = domain::ids::TenantId::parse("demo").expect("valid");
        let code = domain::ids::CodeId::parse("code-1").expect("valid");
        let read_version = store.stored_code(&tenant, &code).map(|c| c.version);
        domain::admin::AdminStore::put_code(&store, &tenant, &code, &config, read_version, 0)
            .await
            .expect("answered")
            .expect("stored");
        handle(&replayer, &queues, sample()).await.expect("handled");
        let (_, events, _) = store.replay_run("sample-dry-run").expect("the run");
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].outcome, domain::replay::EventOutcome::NoFact);
    }

    /// The sample's first page with `change` made to it.
    fn first_page(change: impl FnOnce(&mut Page)) -> LambdaEvent<SqsEvent> {
        let mut event = sample();
        let body = event.payload.records[0].body.take().unwrap_or_default();
        let mut page: Page = serde_json::from_str(&body).expect("a page");
        change(&mut page);
        event.payload.records[0].body = Some(serde_json::to_string(&page).expect("json"));
        event
    }

    #[tokio::test]
    async fn a_run_keeps_who_started_it_and_its_first_page_again_resumes_it() {
        let (store, queues) = (InMemoryStore::default(), InMemoryQueues::default());
        let replayer = fixture(&store, &queues).await;
        let asked = |page: &mut Page| {
            page.by = "arn:aws:iam::000000000000:user/ops as ann".into();
            page.requested_at_ms = clock() - 1_000;
        };
        handle(&replayer, &queues, first_page(asked))
            .await
            .expect("handled");
        let request = store.replay_request("sample-dry-run").expect("the run");
        assert_eq!(request.by, "arn:aws:iam::000000000000:user/ops as ann");
        assert_eq!(request.requested_at_ms, clock() - 1_000);
        // SQS delivers the same first page again (or it failed halfway and is retried): the
        // same request, so the page is done again and the run goes on.
        let response = handle(&replayer, &queues, first_page(asked))
            .await
            .expect("handled");
        assert!(response.batch_item_failures.is_empty());
        assert_eq!(
            queues.replay_pages().len(),
            2,
            "each delivery queues the next"
        );
        let (_, events, _) = store.replay_run("sample-dry-run").expect("the run");
        assert_eq!(
            events.len(),
            1,
            "the event is one line however often its page runs"
        );
    }

    #[tokio::test]
    async fn another_request_under_a_run_id_that_exists_is_refused_and_the_run_left_alone() {
        let (store, queues) = (InMemoryStore::default(), InMemoryQueues::default());
        let replayer = fixture(&store, &queues).await;
        let first = |page: &mut Page| {
            page.by = "ann".into();
            page.requested_at_ms = 1;
        };
        handle(&replayer, &queues, first_page(first))
            .await
            .expect("handled");
        let before = store.replay_run("sample-dry-run").expect("the run");
        for other in [
            (|page: &mut Page| {
                page.by = "bob".into();
                page.requested_at_ms = 1;
            }) as fn(&mut Page),
            |page| {
                page.by = "ann".into();
                page.requested_at_ms = 2;
            },
            |page| {
                page.by = "ann".into();
                page.requested_at_ms = 1;
                page.apply = true;
            },
            // A page the function refuses (its window is backwards) marks no one else's run.
            |page| {
                page.by = "bob".into();
                page.selection.to_ms = page.selection.from_ms - 1;
            },
        ] {
            let response = handle(&replayer, &queues, first_page(other))
                .await
                .expect("handled");
            assert!(
                response.batch_item_failures.is_empty(),
                "refused, not retried"
            );
        }
        assert_eq!(
            queues.replay_pages().len(),
            1,
            "only the first request goes on"
        );
        assert!(
            store.counted().is_empty(),
            "the apply under the taken id counted nothing"
        );
        let after = store.replay_run("sample-dry-run").expect("the run");
        assert_eq!(
            after, before,
            "the run's status, lines and changes are as they were"
        );
        assert_eq!(
            store.replay_request("sample-dry-run").map(|r| r.by),
            Some("ann".into())
        );
    }

    #[tokio::test]
    async fn a_page_that_cannot_be_done_is_left_for_redelivery() {
        let (store, queues) = (InMemoryStore::default(), InMemoryQueues::default());
        let replayer = fixture(&store, &queues).await;
        store.set_unavailable(true);
        let response = handle(&replayer, &queues, sample()).await.expect("handled");
        assert_eq!(response.batch_item_failures.len(), 1);
        assert!(queues.replay_pages().is_empty());
    }
}
