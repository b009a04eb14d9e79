//! Translates a batch from the refresh queues into `RefreshConsumer::consume`, where every
//! rule of the refresh lives (`domain::refresh::consumer`): each message's source queue
//! becomes its inlet, the invocation's deadline the time left, and the messages to redeliver
//! the batch response.

use adapters::clock::consumer_time_left_ms;
use adapters::sqs::{received, QueueInlets};
use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent, SqsMessage};
use domain::refresh::consumer::{Delivery, RefreshConsumer, RefreshPorts};
use lambda_runtime::{Error, LambdaEvent};

/// What the consumer needs after the last WeCom call ends: the record, the lease's release,
/// the tally, requeueing the codes it did not reach, and its answer. A code's work ends this
/// long before the invocation's deadline.
const FINISH_RESERVE_MS: u64 = 1_500;

#[tracing::instrument(skip_all, fields(records = event.payload.records.len()))]
pub(crate) async fn handle<P: RefreshPorts>(
    consumer: &RefreshConsumer<P>,
    inlets: &QueueInlets,
    event: LambdaEvent<SqsEvent>,
) -> Result<SqsBatchResponse, Error> {
    // The deadline is on the host's clock; the refresher's may carry the operator's offset
    // (`ClockOffsetSeconds`), so what is handed over is the time left.
    let left_ms = consumer_time_left_ms(event.context.deadline, FINISH_RESERVE_MS);
    let deliveries: Vec<Delivery<'_>> = event
        .payload
        .records
        .iter()
        .map(|message| delivery(message, inlets))
        .collect();
    let batch = consumer.consume(&deliveries, left_ms).await;
    let mut response = SqsBatchResponse::default();
    response.set_failures(batch.failures());
    Ok(response)
}

fn delivery<'a>(message: &'a SqsMessage, inlets: &QueueInlets) -> Delivery<'a> {
    let received = received(message);
    Delivery {
        message_id: received.message_id,
        group: received.group,
        body: received.body,
        inlet: inlets.inlet_of(message.event_source_arn.as_deref().unwrap_or_default()),
        receive_count: received.receive_count,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use domain::codes::{CodeSnapshot, StoredCode};
    use domain::dirty::DirtyWhy;
    use domain::fakes::{FakeBudget, FakeWeCom, InMemoryQueues, InMemoryStore};
    use domain::ids::TenantId;
    use domain::ids::{CodeId, StaffId};
    use domain::lanes::{LanePolicy, LaneSwitch};
    use domain::membership::{CodeConfig, Family, StaffFacts, Switches};
    use domain::refresh::retry::RetryDelay;
    use domain::refresh::{Lease, LeaseTimes, Refresher};
    use domain::tenants::TenantProfile;
    use domain::wecom::errors::{FailureClass, WeComError};
    use lambda_runtime::Context;

    /// The sample's codes, `code-1` and `code-2` of tenant `demo`: each lists `alice` (online)
    /// on its contact way `cfg-<code>`.
    const CODES: [&str; 2] = ["code-1", "code-2"];

    fn tenant() -> TenantId {
        TenantId::parse("demo").expect("valid")
    }

    fn code(id: &str) -> CodeId {
        CodeId::parse(id).expect("valid")
    }

    struct Fakes {
        store: InMemoryStore,
        wecom: FakeWeCom,
        budget: FakeBudget,
        queues: InMemoryQueues,
    }

    impl Default for Fakes {
        fn default() -> Self {
            let store = InMemoryStore::default();
            let alice = StaffId::parse("alice").expect("valid");
            for id in CODES {
                let snapshot = CodeSnapshot {
                    profile: TenantProfile {
                        corp_id: "corp".into(),
                        callback_token: "t".into(),
                        encoding_aes_key: "k".into(),
                        previous_callback: None,
                        corp_secret: "s".into(),
                        timezone: Default::default(),
                        company_daily_cap: None,
                    },
                    code: StoredCode {
                        config: CodeConfig {
                            family: Family::Native,
                            members: vec![alice.clone()],
                            departments: vec![],
                            fallback: vec![],
                            switches: Switches::default(),
                        },
                        config_id: Some(format!("cfg-{id}")),
                        created_with: vec![],
                    },
                    staff: [(alice.clone(), StaffFacts::ACTIVE_ONLINE)]
                        .into_iter()
                        .collect(),
                    adds: Default::default(),
                    departments: Default::default(),
                    now_ms: 0,
                    last_pushed: None,
                    dirty_since_ms: None,
                    links: Default::default(),
                    lease: Default::default(),
                    age: Default::default(),
                    tenant_paused: None,
                };
                store.load_snapshot(&tenant(), &code(id), &snapshot);
            }
            Self {
                store,
                wecom: FakeWeCom::default(),
                budget: FakeBudget::default(),
                queues: InMemoryQueues::default(),
            }
        }
    }

    impl Fakes {
        /// The codes whose snapshot was read, in order.
        fn snapshots_read(&self) -> Vec<String> {
            let read = self.store.snapshots_read();
            read.iter().map(ToString::to_string).collect()
        }

        /// The codes marked dirty, with why.
        fn dirty(&self) -> Vec<(String, DirtyWhy)> {
            let dirty = self.store.marks().dirty;
            dirty
                .into_iter()
                .map(|(c, class)| (c.to_string(), class))
                .collect()
        }
    }

    fn sample() -> LambdaEvent<SqsEvent> {
        let path = format!(
            "{}/../../events/sqs-refresh-three-reasons-two-codes.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let event = serde_json::from_str(&std::fs::read_to_string(path).expect("sample exists"))
            .expect("an SQS event");
        LambdaEvent::new(event, context(10_000))
    }

    /// An invocation with `left_ms` of its time left. The refresher's fixed clock stands far
    /// from the host's, as an operator's clock offset puts it: only the time left carries over.
    fn context(left_ms: u64) -> Context {
        let mut context = Context::default();
        context.deadline = adapters::clock::host_clock() + left_ms;
        context
    }

    const CLOCK_MS: u64 = 1;

    fn clock() -> u64 {
        CLOCK_MS
    }

    struct FakePorts;

    impl RefreshPorts for FakePorts {
        type Facts = InMemoryStore;
        type Pusher = FakeWeCom;
        type Budget = FakeBudget;
        type DeadLetters = InMemoryQueues;
        type Retries = InMemoryQueues;
    }

    const MAX_RECEIVES: u32 = 5;

    fn consumer_with(fakes: &Fakes, lanes: LanePolicy) -> RefreshConsumer<FakePorts> {
        let lease = LeaseTimes {
            duration_ms: 8_000,
            call_ms: 3_500,
        };
        RefreshConsumer {
            refresher: Refresher::new(
                fakes.store.clone(),
                fakes.wecom.clone(),
                fakes.budget.clone(),
                clock,
                lanes,
                lease,
            ),
            dead_letters: fakes.queues.clone(),
            retries: fakes.queues.clone(),
            max_receives: MAX_RECEIVES,
        }
    }

    fn consumer(fakes: &Fakes) -> RefreshConsumer<FakePorts> {
        consumer_with(fakes, LanePolicy::all_fast())
    }

    /// The queues of the sample events' stack.
    fn inlets() -> QueueInlets {
        let url =
            |name: &str| format!("https://sqs.ap-east-1.amazonaws.com/123456789012/qrsync-{name}");
        QueueInlets::new(
            &url("refresh-slow.fifo"),
            [
                "refresh-retry-15s.fifo",
                "refresh-retry-60s.fifo",
                "refresh-retry-900s.fifo",
            ]
            .map(url)
            .iter()
            .map(String::as_str),
        )
    }

    fn all_slow() -> LanePolicy {
        LanePolicy {
            switch: LaneSwitch::AllSlow,
            ..LanePolicy::all_fast()
        }
    }

    #[tokio::test]
    async fn reasons_for_one_code_in_a_batch_give_one_recompute() {
        let fakes = Fakes::default();
        let consumer = consumer(&fakes);
        let response = handle(&consumer, &inlets(), sample())
            .await
            .expect("handled");
        assert!(response.batch_item_failures.is_empty());
        assert_eq!(fakes.snapshots_read(), ["code-1", "code-2"]);
        assert_eq!(fakes.wecom.pushes().len(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn the_codes_of_a_batch_are_pushed_side_by_side_and_tallied_in_one_write() {
        let fakes = Fakes::default();
        fakes
            .wecom
            .take_for_each_push(std::time::Duration::from_secs(2));
        let consumer = consumer(&fakes);
        let response = handle(&consumer, &inlets(), sample())
            .await
            .expect("handled");
        assert!(response.batch_item_failures.is_empty());
        assert_eq!(fakes.wecom.pushes().len(), 2);
        assert_eq!(
            fakes.wecom.most_pushes_in_flight(),
            2,
            "the second code's push did not wait for the first's"
        );
        assert_eq!(fakes.store.tally().pushes, 2);
        assert_eq!(
            fakes.store.tally_writes(),
            1,
            "one tally write for the tenant's day, not one per code"
        );
    }

    #[tokio::test]
    async fn when_the_table_fails_for_a_code_all_its_messages_are_reported_and_the_other_code_is_pushed(
    ) {
        let fakes = Fakes::default();
        fakes.store.make_code_unreadable(&code("code-1"), true);
        let consumer = consumer(&fakes);
        let response = handle(&consumer, &inlets(), sample())
            .await
            .expect("handled");
        let failed: Vec<_> = response
            .batch_item_failures
            .iter()
            .map(|f| f.item_identifier.clone())
            .collect();
        assert_eq!(
            failed,
            [
                "7b2e0d3f-0002-4a1b-8c2d-000000000001",
                "7b2e0d3f-0002-4a1b-8c2d-000000000003"
            ]
        );
        assert_eq!(
            fakes.wecom.pushes(),
            [("cfg-code-2".to_owned(), vec!["alice".to_owned()])]
        );
    }

    fn failed_ids(response: &SqsBatchResponse) -> Vec<String> {
        response
            .batch_item_failures
            .iter()
            .map(|f| f.item_identifier.clone())
            .collect()
    }

    #[tokio::test]
    async fn without_budget_each_code_is_requeued_once_with_a_delay_and_nothing_is_failed() {
        let fakes = Fakes {
            budget: FakeBudget::spent_for(40_000),
            ..Fakes::default()
        };
        let consumer = consumer(&fakes);
        let response = handle(&consumer, &inlets(), sample())
            .await
            .expect("handled");
        assert!(
            failed_ids(&response).is_empty(),
            "throttling burns no receive"
        );
        let delayed = fakes.queues.delayed();
        assert_eq!(delayed.len(), 2, "one reason per code");
        assert!(delayed
            .iter()
            .all(|(r, d)| *d == RetryDelay::Seconds60 && r.attempt == 0));
        assert_eq!(
            delayed[0].0.retry_of, "7b2e0d3f-0002-4a1b-8c2d-000000000001",
            "the requeue is deduplicated by the message it replaces"
        );
        assert!(fakes.wecom.pushes().is_empty());
        assert!(fakes.queues.parked().is_empty());
        assert_eq!(
            fakes.queues.requeue_calls(),
            [2],
            "the batch's requeues leave in one send"
        );
    }

    #[tokio::test]
    async fn a_requeue_that_cannot_be_sent_redelivers_its_own_codes_messages_and_no_others() {
        let fakes = Fakes {
            budget: FakeBudget::spent_for(40_000),
            ..Fakes::default()
        };
        fakes.queues.refuse_requeues_of("code-1");
        let consumer = consumer(&fakes);
        let response = handle(&consumer, &inlets(), sample())
            .await
            .expect("handled");
        assert_eq!(
            failed_ids(&response),
            [
                "7b2e0d3f-0002-4a1b-8c2d-000000000001",
                "7b2e0d3f-0002-4a1b-8c2d-000000000003"
            ],
            "code-1's two messages"
        );
        let delayed = fakes.queues.delayed();
        let codes: Vec<&str> = delayed
            .iter()
            .map(|(r, _)| r.reason.code.as_str())
            .collect();
        assert_eq!(codes, ["code-2"]);
    }

    #[tokio::test]
    async fn a_transient_failure_is_requeued_with_its_attempt_count_and_nothing_is_failed() {
        let fakes = Fakes::default();
        let down = WeComError::Transient {
            detail: "down".into(),
        };
        fakes.wecom.fail_pushes_to("cfg-code-1", down);
        let consumer = consumer(&fakes);
        let response = handle(&consumer, &inlets(), sample())
            .await
            .expect("handled");
        assert!(failed_ids(&response).is_empty());
        let delayed = fakes.queues.delayed();
        assert_eq!(delayed.len(), 1);
        assert_eq!(
            (delayed[0].0.attempt, delayed[0].1),
            (1, RetryDelay::Seconds15)
        );
    }

    #[tokio::test]
    async fn a_transient_failure_after_its_last_retry_is_dead_lettered_with_its_class_and_marked_dirty(
    ) {
        let fakes = Fakes::default();
        let down = WeComError::Transient {
            detail: "down".into(),
        };
        fakes.wecom.fail_pushes_to("cfg-code-1", down);
        let consumer = consumer(&fakes);
        let mut event = sample();
        for record in &mut event.payload.records {
            let mut body: serde_json::Value =
                serde_json::from_str(record.body.as_deref().unwrap_or_default()).expect("json");
            body["attempt"] = serde_json::json!(3);
            body["retry_of"] = serde_json::json!("earlier");
            record.body = Some(body.to_string());
        }
        let response = handle(&consumer, &inlets(), event).await.expect("handled");
        assert!(failed_ids(&response).is_empty());
        assert!(fakes.queues.delayed().is_empty());
        let parked = fakes.queues.parked();
        assert_eq!(parked.len(), 2, "both messages of code-1");
        assert!(parked.iter().all(|(_, class)| class == "transient"));
        assert_eq!(
            fakes.dirty(),
            [(
                "code-1".to_owned(),
                DirtyWhy::RefreshFailed(FailureClass::Transient)
            )]
        );
    }

    #[tokio::test]
    async fn a_refusal_retrying_cannot_fix_is_dead_lettered_at_once() {
        let fakes = Fakes::default();
        fakes
            .wecom
            .fail_pushes_to("cfg-code-1", WeComError::ListTooLong);
        let consumer = consumer(&fakes);
        handle(&consumer, &inlets(), sample())
            .await
            .expect("handled");
        assert!(fakes
            .queues
            .parked()
            .iter()
            .all(|(_, class)| class == "list_too_long"));
        assert_eq!(fakes.dirty().len(), 1);
    }

    #[tokio::test]
    async fn codes_the_invocation_has_no_time_left_for_go_back_to_refresh_fifo_unrefreshed_and_acknowledged(
    ) {
        let fakes = Fakes::default();
        let consumer = consumer(&fakes);
        let mut event = sample();
        // Less than one WeCom call (3.5 s) is left once the finishing reserve is set aside.
        event.context = context(FINISH_RESERVE_MS + 3_000);
        let response = handle(&consumer, &inlets(), event).await.expect("handled");
        assert!(failed_ids(&response).is_empty(), "no receive is spent");
        let forwarded = fakes.queues.forwarded();
        let codes: Vec<&str> = forwarded.iter().map(|r| r.reason.code.as_str()).collect();
        assert_eq!(
            codes,
            ["code-1", "code-2"],
            "one reason per code, back on refresh.fifo"
        );
        assert!(forwarded
            .iter()
            .all(|r| !r.retry_of.is_empty() && r.attempt == 0));
        assert!(fakes.wecom.pushes().is_empty());
        assert!(fakes.queues.delayed().is_empty(), "not throttled");
        assert!(fakes.dirty().is_empty(), "not failed");
    }

    #[tokio::test]
    async fn a_message_on_its_last_receive_marks_its_code_dirty_before_the_work_it_may_not_survive()
    {
        let fakes = Fakes::default();
        let consumer = consumer(&fakes);
        let mut event = sample();
        let last = event
            .payload
            .records
            .iter_mut()
            .find(|r| r.body.as_deref().is_some_and(|b| b.contains("code-2")))
            .expect("a reason for code-2");
        last.attributes
            .insert("ApproximateReceiveCount".into(), MAX_RECEIVES.to_string());
        handle(&consumer, &inlets(), event).await.expect("handled");
        assert_eq!(
            fakes.dirty(),
            [("code-2".to_owned(), DirtyWhy::LastReceive)]
        );
        assert_eq!(fakes.wecom.pushes().len(), 2, "the work still runs");
    }

    #[tokio::test]
    async fn a_reason_whose_delay_is_served_goes_back_to_its_group_unrefreshed() {
        let fakes = Fakes::default();
        let consumer = consumer(&fakes);
        let path = format!(
            "{}/../../events/sqs-refresh-retry-served.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let event = serde_json::from_str(&std::fs::read_to_string(path).expect("sample exists"))
            .expect("an SQS event");
        let response = handle(
            &consumer,
            &inlets(),
            LambdaEvent::new(event, context(10_000)),
        )
        .await
        .expect("handled");
        assert!(failed_ids(&response).is_empty());
        let forwarded = fakes.queues.forwarded();
        assert_eq!(forwarded.len(), 1);
        assert_eq!(forwarded[0].attempt, 1, "the attempt count travels on");
        assert!(fakes.snapshots_read().is_empty());
    }

    #[tokio::test]
    async fn the_reasons_of_a_code_the_all_switch_sheds_go_to_the_slow_lane_as_one_message() {
        let fakes = Fakes::default();
        let consumer = consumer_with(&fakes, all_slow());
        let response = handle(&consumer, &inlets(), sample())
            .await
            .expect("handled");
        assert!(failed_ids(&response).is_empty(), "acknowledged");
        let slowed = fakes.queues.slowed();
        let codes: Vec<&str> = slowed.iter().map(|r| r.reason.code.as_str()).collect();
        assert_eq!(codes, ["code-1", "code-2"], "one message per code");
        assert!(fakes.snapshots_read().is_empty());
        assert!(fakes.wecom.pushes().is_empty());
    }

    #[tokio::test]
    async fn reasons_from_the_slow_queue_are_refreshed_there_not_sent_back_to_it() {
        let fakes = Fakes::default();
        let consumer = consumer_with(&fakes, all_slow());
        let mut event = sample();
        for record in &mut event.payload.records {
            record.event_source_arn =
                Some("arn:aws:sqs:ap-east-1:123456789012:qrsync-refresh-slow.fifo".into());
        }
        handle(&consumer, &inlets(), event).await.expect("handled");
        assert!(fakes.queues.slowed().is_empty());
        assert_eq!(fakes.wecom.pushes().len(), 2);
    }

    #[tokio::test]
    async fn a_code_whose_lease_is_held_elsewhere_waits_in_a_retry_queue_without_an_attempt() {
        let fakes = Fakes::default();
        for id in CODES {
            let elsewhere = Lease {
                holder: "another writer".into(),
                expires_at_ms: CLOCK_MS + 5_000,
            };
            fakes
                .store
                .set_code_lease(&tenant(), &code(id), Some(elsewhere));
        }
        let consumer = consumer(&fakes);
        let response = handle(&consumer, &inlets(), sample())
            .await
            .expect("handled");
        assert!(failed_ids(&response).is_empty());
        let delayed = fakes.queues.delayed();
        assert_eq!(delayed.len(), 2);
        assert!(delayed
            .iter()
            .all(|(r, d)| r.attempt == 0 && *d == RetryDelay::Seconds15));
        assert!(fakes.dirty().is_empty());
    }
}
