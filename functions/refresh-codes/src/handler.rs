//! Translates refresh.fifo batches into `Refresher::refresh` calls: one recompute per code
//! however many of its reasons the batch holds (MISSION rule 5, coalescing), and sends each
//! code that did not finish down its path (rules 6 and 9, `domain::refresh::retry`):
//!
//! - throttled (no budget, or WeCom's 45009/45033): one reason requeued through the retry
//!   queue covering the wait, the messages acknowledged: no receive counted, never a DLQ;
//! - transient or token failure: requeued with a growing delay and an attempt count, then
//!   moved to the dead-letter queue with its class and the code marked dirty;
//! - a refusal retrying cannot fix (41041, any other errcode): dead-lettered at once, dirty;
//! - the table or a queue unavailable: the code's messages are reported for redelivery (the
//!   rest of their group with them); on the last receive before the queue's redrive the
//!   code is marked dirty first, since a redriven message passes no code of ours.
//!
//! Messages from a retry queue have served their delay and are forwarded to refresh.fifo
//! unrefreshed: every refresh starts on the fast lane. Messages from the slow lane's queue
//! are refreshed as slow (one push per code per interval). A code the lane policy puts on
//! the slow lane has one reason republished there, and a code put off (slow-lane interval,
//! another writer holding its lease) waits in a retry queue like a throttled one. A message
//! that is not a refresh reason is moved to the dead-letter queue as poison.

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use domain::batch::PartialBatch;
use domain::lanes::Lane;
use domain::ports::DeadLetters;
use domain::refresh::retry::{self, Path, RetriedReason, RetryQueues};
use domain::refresh::{
    Asked, CodeFacts, CodeLeases, CodeRecords, ContactWayPusher, FailureMarks, Outcome,
    RefreshError, Refresher, Requeue, WeComBudget,
};
use lambda_runtime::{Error, LambdaEvent};

/// refresh.fifo's `maxReceiveCount` in `template.yaml`.
const MAX_RECEIVES: u32 = 5;

/// What the handler needs after the last WeCom call ends: the record, the lease's release,
/// the tally, requeueing the codes it did not reach, and its answer. A code's work ends this
/// long before the invocation's deadline.
const FINISH_RESERVE_MS: u64 = 1_500;

/// The host's clock, as the invocation's deadline is.
fn host_clock_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or_default()
}

/// The reasons of one code in this batch, in arrival order.
struct CodeWork<'a> {
    group: &'a str,
    reason: RetriedReason,
    messages: Vec<(&'a str, &'a str)>,
    fact_at_ms: Vec<u64>,
    receive_count: u32,
    lane: Lane,
}

#[tracing::instrument(skip_all, fields(records = event.payload.records.len()))]
pub(crate) async fn handle<F, P, B, D, R>(
    refresher: &Refresher<F, P, B>,
    dead_letters: &D,
    retries: &R,
    event: LambdaEvent<SqsEvent>,
) -> Result<SqsBatchResponse, Error>
where
    F: CodeFacts + CodeRecords + FailureMarks + CodeLeases,
    P: ContactWayPusher,
    B: WeComBudget,
    D: DeadLetters,
    R: RetryQueues,
{
    // The deadline is on the host's clock; the refresher's may carry the operator's offset
    // (`ClockOffsetSeconds`), so what is handed over is the time left, on the refresher's clock.
    let left_ms = event.context.deadline.saturating_sub(host_clock_ms());
    let deadline_ms = refresher
        .now_ms()
        .saturating_add(left_ms)
        .saturating_sub(FINISH_RESERVE_MS);
    let mut batch = PartialBatch::default();
    let mut work: Vec<CodeWork<'_>> = Vec::new();
    for message in &event.payload.records {
        let id = message.message_id.as_deref().unwrap_or_default();
        let group = message
            .attributes
            .get("MessageGroupId")
            .map(String::as_str)
            .unwrap_or_default();
        let body = message.body.as_deref().unwrap_or_default();
        if batch.group_failed(group) {
            batch.fail(group, id);
            continue;
        }
        let reason = match serde_json::from_str::<RetriedReason>(body) {
            Ok(reason) => reason,
            Err(error) => {
                let reason = format!("not a refresh reason: {error}");
                batch
                    .park_poison(dead_letters, group, id, body, &reason)
                    .await;
                continue;
            }
        };
        let source = message.event_source_arn.as_deref().unwrap_or_default();
        if retries.is_retry_queue(source) {
            tracing::info!(code = %reason.reason.code, attempt = reason.attempt, "delay served; back to refresh.fifo");
            if let Err(error) = retries.forward(&reason).await {
                tracing::warn!(error = %error, message_id = id, "retried reason not forwarded; redelivered");
                batch.fail(group, id);
            }
            continue;
        }
        let lane = if retries.is_slow_lane(source) {
            Lane::Slow
        } else {
            Lane::Fast
        };
        let receive_count = message
            .attributes
            .get("ApproximateReceiveCount")
            .and_then(|n| n.parse().ok())
            .unwrap_or(1);
        match work.iter_mut().find(|w| {
            w.reason.reason.tenant == reason.reason.tenant
                && w.reason.reason.code == reason.reason.code
        }) {
            Some(code) => {
                code.messages.push((id, body));
                code.fact_at_ms.push(reason.reason.fact_at_ms);
                code.reason.attempt = code.reason.attempt.max(reason.attempt);
                code.reason.resync |= reason.resync;
                code.receive_count = code.receive_count.max(receive_count);
            }
            None => work.push(CodeWork {
                group,
                fact_at_ms: vec![reason.reason.fact_at_ms],
                reason,
                messages: vec![(id, body)],
                receive_count,
                lane,
            }),
        }
    }
    for code in work {
        refresh_code(
            refresher,
            dead_letters,
            retries,
            &mut batch,
            code,
            deadline_ms,
        )
        .await;
    }
    let mut response = SqsBatchResponse::default();
    response.set_failures(batch.failures());
    Ok(response)
}

async fn refresh_code<F, P, B, D, R>(
    refresher: &Refresher<F, P, B>,
    dead_letters: &D,
    retries: &R,
    batch: &mut PartialBatch,
    code: CodeWork<'_>,
    deadline_ms: u64,
) where
    F: CodeFacts + CodeRecords + FailureMarks + CodeLeases,
    P: ContactWayPusher,
    B: WeComBudget,
    D: DeadLetters,
    R: RetryQueues,
{
    let (tenant, code_id) = (&code.reason.reason.tenant, &code.reason.reason.code);
    let attempt = code.reason.attempt;
    // After this receive SQS moves the messages to the DLQ without running any code of
    // ours (a timeout, a crash), so the mark comes before the work it may not survive.
    if code.receive_count >= MAX_RECEIVES {
        tracing::warn!(tenant = %tenant, code = %code_id, receive_count = code.receive_count, "last receive before the queue's redrive; code marked dirty first");
        mark_dirty(
            refresher,
            &code,
            domain::wecom::errors::FailureClass::Transient,
        )
        .await;
    }
    let asked = Asked {
        tenant,
        code: code_id,
        fact_at_ms: &code.fact_at_ms,
        lane: code.lane,
        resync: code.reason.resync,
        deadline_ms,
    };
    let mut resync = false;
    let path = match refresher.refresh(asked).await {
        Ok(Outcome::Requeue {
            why: Requeue::OutOfTime,
            ..
        }) => {
            requeue_unreached(retries, batch, &code).await;
            return;
        }
        Ok(Outcome::Requeue {
            why,
            retry_after_ms,
        }) => {
            // Every put-off (budget, 45009, lease, slow-lane interval) waits like a throttled
            // refresh: no failed attempt counted.
            resync = why.needs_resync();
            retry::throttled(retry_after_ms, attempt)
        }
        Ok(Outcome::ToSlowLane) => {
            let first_id = code.messages.first().map(|(id, _)| *id).unwrap_or_default();
            let slow = RetriedReason::requeued(code.reason.reason.clone(), attempt, first_id);
            match retries.to_slow_lane(&slow).await {
                Ok(()) => {
                    tracing::info!(tenant = %tenant, code = %code_id, reasons = code.messages.len(), "quiet code: reasons sent to the slow lane")
                }
                Err(error) => {
                    tracing::warn!(error = %error, "slow lane unreachable; the reasons are redelivered");
                    fail_all(batch, &code);
                }
            }
            return;
        }
        Ok(outcome) => {
            let outcome = match outcome {
                Outcome::Pushed(users) => format!("pushed {} users", users.len()),
                other => format!("{other:?}"),
            };
            tracing::info!(tenant = %tenant, code = %code_id, reasons = code.messages.len(), outcome, "code refreshed");
            return;
        }
        Err(RefreshError::WeCom(error)) => {
            tracing::warn!(tenant = %tenant, code = %code_id, error = %error, class = %error.class(), attempt, "push failed");
            retry::failed(error.class(), attempt)
        }
        Err(RefreshError::Store(error)) => {
            tracing::warn!(tenant = %tenant, code = %code_id, error = %error, "refresh failed; its reasons are redelivered");
            fail_all(batch, &code);
            return;
        }
    };
    match path {
        Path::Requeue { delay, attempt } => {
            let first_id = code.messages.first().map(|(id, _)| *id).unwrap_or_default();
            let mut requeued =
                RetriedReason::requeued(code.reason.reason.clone(), attempt, first_id);
            requeued.resync = resync || code.reason.resync;
            match retries.delay(&requeued, delay).await {
                Ok(()) => {
                    tracing::info!(tenant = %tenant, code = %code_id, delay_s = delay.seconds(), attempt, "reasons requeued with a delay")
                }
                Err(error) => {
                    tracing::warn!(error = %error, "requeue failed; the reasons are redelivered");
                    fail_all(batch, &code);
                }
            }
        }
        Path::DeadLetter(class) => {
            tracing::error!(alert = "refresh_dead_lettered", tenant = %tenant, code = %code_id, class = %class, "reasons moved to the dead-letter queue; code marked dirty");
            mark_dirty(refresher, &code, class).await;
            for (id, body) in &code.messages {
                let parked = dead_letters
                    .park(
                        code.group,
                        id,
                        body,
                        class.as_str(),
                        "refresh failed for good",
                    )
                    .await;
                if let Err(error) = parked {
                    tracing::error!(message_id = id, error = %error, "could not park; redelivered");
                    batch.fail(code.group, id);
                }
            }
        }
    }
}

async fn mark_dirty<F, P, B>(
    refresher: &Refresher<F, P, B>,
    code: &CodeWork<'_>,
    class: domain::wecom::errors::FailureClass,
) where
    F: CodeFacts + CodeRecords + FailureMarks + CodeLeases,
    P: ContactWayPusher,
    B: WeComBudget,
{
    let (tenant, code_id) = (&code.reason.reason.tenant, &code.reason.reason.code);
    if let Err(error) = refresher
        .facts()
        .mark_dirty(tenant, code_id, class, refresher.now_ms())
        .await
    {
        tracing::error!(error = %error, tenant = %tenant, code = %code_id, "code not marked dirty");
    }
}

/// A code the invocation had no time left for goes straight back to refresh.fifo, its
/// messages acknowledged: no receive is spent on it and it counts as neither failed nor
/// throttled. The requeued reason's deduplication id comes from the message it replaces, so
/// a redelivered batch requeues it once.
async fn requeue_unreached<R: RetryQueues>(
    retries: &R,
    batch: &mut PartialBatch,
    code: &CodeWork<'_>,
) {
    let first_id = code.messages.first().map(|(id, _)| *id).unwrap_or_default();
    let mut requeued =
        RetriedReason::requeued(code.reason.reason.clone(), code.reason.attempt, first_id);
    requeued.resync = code.reason.resync;
    match retries.forward(&requeued).await {
        Ok(()) => {
            tracing::info!(tenant = %code.reason.reason.tenant, code = %code.reason.reason.code, reasons = code.messages.len(), requeued = "deadline", "no time left in this invocation; reasons back on refresh.fifo")
        }
        Err(error) => {
            tracing::warn!(error = %error, "requeue failed; the reasons are redelivered");
            fail_all(batch, code);
        }
    }
}

fn fail_all(batch: &mut PartialBatch, code: &CodeWork<'_>) {
    for (id, _) in &code.messages {
        batch.fail(code.group, id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use domain::lanes::{CodeAge, LanePolicy, LaneSwitch};
    use domain::membership::RotationSlot;
    use domain::membership::{CodeConfig, CodeId, Family, StaffFacts, StaffId, Switches};
    use domain::ports::StoreError;
    use domain::refresh::retry::RetryDelay;
    use domain::refresh::{
        Acquired, CodeSnapshot, Lease, LeaseTimes, PushRecord, Recorded, Spend, StoredCode, Tally,
        Window,
    };
    use domain::tenants::{TenantId, TenantProfile};
    use domain::wecom::contact_way::CorpCredentials;
    use domain::wecom::errors::{FailureClass, WeComError};
    use lambda_runtime::Context;
    use std::sync::Mutex;

    #[derive(Default)]
    struct Fakes {
        snapshots_read: Mutex<Vec<String>>,
        pushes: Mutex<Vec<(String, Vec<String>)>>,
        failing_config: Option<&'static str>,
        failure: Option<WeComError>,
        unreadable_code: Option<&'static str>,
        no_budget: bool,
        parked: Mutex<Vec<(String, String)>>,
        delayed: Mutex<Vec<(RetriedReason, RetryDelay)>>,
        forwarded: Mutex<Vec<RetriedReason>>,
        slowed: Mutex<Vec<RetriedReason>>,
        lease_busy: bool,
        dirty: Mutex<Vec<(String, FailureClass)>>,
    }

    #[async_trait::async_trait]
    impl FailureMarks for &Fakes {
        async fn mark_code_gone(&self, _: &TenantId, _: &CodeId, _: u64) -> Result<(), StoreError> {
            Ok(())
        }
        async fn mark_staff_unusable(
            &self,
            _: &TenantId,
            _: &StaffId,
            _: i64,
            _: u64,
        ) -> Result<(), StoreError> {
            Ok(())
        }
        async fn mark_dirty(
            &self,
            _: &TenantId,
            code: &CodeId,
            class: FailureClass,
            _: u64,
        ) -> Result<(), StoreError> {
            self.dirty
                .lock()
                .expect("lock")
                .push((code.to_string(), class));
            Ok(())
        }
    }

    #[async_trait::async_trait]
    impl WeComBudget for &Fakes {
        async fn spend(&self, _: &TenantId, _: &str, _: u64) -> Result<Spend, StoreError> {
            Ok(if self.no_budget {
                Spend::Exhausted {
                    window: Window::Minute,
                    retry_after_ms: 40_000,
                }
            } else {
                Spend::Granted
            })
        }
    }

    #[async_trait::async_trait]
    impl RetryQueues for &Fakes {
        async fn delay(&self, reason: &RetriedReason, delay: RetryDelay) -> Result<(), StoreError> {
            self.delayed
                .lock()
                .expect("lock")
                .push((reason.clone(), delay));
            Ok(())
        }
        async fn forward(&self, reason: &RetriedReason) -> Result<(), StoreError> {
            self.forwarded.lock().expect("lock").push(reason.clone());
            Ok(())
        }
        fn is_retry_queue(&self, arn: &str) -> bool {
            arn.ends_with("refresh-retry-15s.fifo")
        }
        async fn to_slow_lane(&self, reason: &RetriedReason) -> Result<(), StoreError> {
            self.slowed.lock().expect("lock").push(reason.clone());
            Ok(())
        }
        fn is_slow_lane(&self, arn: &str) -> bool {
            arn.ends_with("refresh-slow.fifo")
        }
    }

    #[async_trait::async_trait]
    impl CodeFacts for &Fakes {
        async fn snapshot(
            &self,
            _: &TenantId,
            code: &CodeId,
            _: u64,
        ) -> Result<Option<CodeSnapshot>, StoreError> {
            self.snapshots_read
                .lock()
                .expect("lock")
                .push(code.to_string());
            if self.unreadable_code == Some(code.as_str()) {
                return Err(StoreError::new("table", "switched off"));
            }
            let alice = StaffId::parse("alice").expect("valid");
            Ok(Some(CodeSnapshot {
                profile: TenantProfile {
                    corp_id: "corp".into(),
                    callback_token: "t".into(),
                    encoding_aes_key: "k".into(),
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
                    config_id: Some(format!("cfg-{code}")),
                    created_with: vec![],
                },
                staff: [(alice, StaffFacts::ACTIVE_ONLINE)].into_iter().collect(),
                adds: Default::default(),
                departments: Default::default(),
                now_ms: 0,
                last_pushed: None,
            }))
        }
    }

    #[async_trait::async_trait]
    impl CodeRecords for &Fakes {
        async fn age(&self, _: &TenantId, _: &CodeId) -> Result<Option<CodeAge>, StoreError> {
            Ok(Some(CodeAge {
                created_at_ms: 0,
                updated_at_ms: 0,
            }))
        }
        async fn record_push(
            &self,
            _: &TenantId,
            _: &CodeId,
            _: &Lease,
            _: &PushRecord,
        ) -> Result<Recorded, StoreError> {
            Ok(Recorded::Written)
        }
        async fn record_starved(
            &self,
            _: &TenantId,
            _: &CodeId,
            _: &Lease,
            _: u64,
        ) -> Result<Recorded, StoreError> {
            Ok(Recorded::Written)
        }
        async fn record_rotation(
            &self,
            _: &TenantId,
            _: &CodeId,
            _: &Lease,
            _: &[StaffId],
            _: &[RotationSlot],
        ) -> Result<Recorded, StoreError> {
            Ok(Recorded::Written)
        }
        async fn record_tally(&self, _: &TenantId, _: &str, _: &Tally) -> Result<(), StoreError> {
            Ok(())
        }
    }

    #[async_trait::async_trait]
    impl CodeLeases for &Fakes {
        async fn acquire(
            &self,
            _: &TenantId,
            _: &CodeId,
            holder: &str,
            now_ms: u64,
            duration_ms: u64,
        ) -> Result<Acquired, StoreError> {
            if self.lease_busy {
                return Ok(Acquired::Busy {
                    retry_after_ms: 5_000,
                });
            }
            Ok(Acquired::Held(Lease {
                holder: holder.to_owned(),
                expires_at_ms: now_ms + duration_ms,
            }))
        }
        async fn release(&self, _: &TenantId, _: &CodeId, _: &Lease) -> Result<(), StoreError> {
            Ok(())
        }
    }

    #[async_trait::async_trait]
    impl ContactWayPusher for &Fakes {
        async fn replace_users(
            &self,
            _: &CorpCredentials,
            config_id: &str,
            users: &[String],
        ) -> Result<(), WeComError> {
            if self.failing_config == Some(config_id) {
                return Err(self.failure.clone().unwrap_or(WeComError::Transient {
                    detail: "down".into(),
                }));
            }
            self.pushes
                .lock()
                .expect("lock")
                .push((config_id.to_owned(), users.to_vec()));
            Ok(())
        }
    }

    #[async_trait::async_trait]
    impl DeadLetters for &Fakes {
        async fn park(
            &self,
            _: &str,
            id: &str,
            _: &str,
            class: &str,
            _: &str,
        ) -> Result<(), StoreError> {
            self.parked
                .lock()
                .expect("lock")
                .push((id.to_owned(), class.to_owned()));
            Ok(())
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
        context.deadline = host_clock_ms() + left_ms;
        context
    }

    const CLOCK_MS: u64 = 1;

    fn clock() -> u64 {
        CLOCK_MS
    }

    type FakeRefresher<'a> = Refresher<&'a Fakes, &'a Fakes, &'a Fakes>;

    fn refresher_with(fakes: &Fakes, lanes: LanePolicy) -> FakeRefresher<'_> {
        let lease = LeaseTimes {
            duration_ms: 8_000,
            call_ms: 3_500,
        };
        Refresher::new(fakes, fakes, fakes, clock, lanes, lease)
    }

    fn refresher(fakes: &Fakes) -> FakeRefresher<'_> {
        refresher_with(fakes, LanePolicy::all_fast())
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
        let refresher = refresher(&fakes);
        let response = handle(&refresher, &&fakes, &&fakes, sample())
            .await
            .expect("handled");
        assert!(response.batch_item_failures.is_empty());
        assert_eq!(
            *fakes.snapshots_read.lock().expect("lock"),
            ["code-1", "code-2"]
        );
        assert_eq!(fakes.pushes.lock().expect("lock").len(), 2);
    }

    #[tokio::test]
    async fn when_the_table_fails_for_a_code_all_its_messages_are_reported_and_the_other_code_is_pushed(
    ) {
        let fakes = Fakes {
            unreadable_code: Some("code-1"),
            ..Fakes::default()
        };
        let refresher = refresher(&fakes);
        let response = handle(&refresher, &&fakes, &&fakes, sample())
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
            *fakes.pushes.lock().expect("lock"),
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
            no_budget: true,
            ..Fakes::default()
        };
        let refresher = refresher(&fakes);
        let response = handle(&refresher, &&fakes, &&fakes, sample())
            .await
            .expect("handled");
        assert!(
            failed_ids(&response).is_empty(),
            "throttling burns no receive"
        );
        let delayed = fakes.delayed.lock().expect("lock");
        assert_eq!(delayed.len(), 2, "one reason per code");
        assert!(delayed
            .iter()
            .all(|(r, d)| *d == RetryDelay::Seconds60 && r.attempt == 0));
        assert_eq!(
            delayed[0].0.retry_of, "7b2e0d3f-0002-4a1b-8c2d-000000000001",
            "the requeue is deduplicated by the message it replaces"
        );
        assert!(fakes.pushes.lock().expect("lock").is_empty());
        assert!(fakes.parked.lock().expect("lock").is_empty());
    }

    #[tokio::test]
    async fn a_transient_failure_is_requeued_with_its_attempt_count_and_nothing_is_failed() {
        let fakes = Fakes {
            failing_config: Some("cfg-code-1"),
            ..Fakes::default()
        };
        let refresher = refresher(&fakes);
        let response = handle(&refresher, &&fakes, &&fakes, sample())
            .await
            .expect("handled");
        assert!(failed_ids(&response).is_empty());
        let delayed = fakes.delayed.lock().expect("lock");
        assert_eq!(delayed.len(), 1);
        assert_eq!(
            (delayed[0].0.attempt, delayed[0].1),
            (1, RetryDelay::Seconds15)
        );
    }

    #[tokio::test]
    async fn a_transient_failure_after_its_last_retry_is_dead_lettered_with_its_class_and_marked_dirty(
    ) {
        let fakes = Fakes {
            failing_config: Some("cfg-code-1"),
            ..Fakes::default()
        };
        let refresher = refresher(&fakes);
        let mut event = sample();
        for record in &mut event.payload.records {
            let mut body: serde_json::Value =
                serde_json::from_str(record.body.as_deref().unwrap_or_default()).expect("json");
            body["attempt"] = serde_json::json!(3);
            body["retry_of"] = serde_json::json!("earlier");
            record.body = Some(body.to_string());
        }
        let response = handle(&refresher, &&fakes, &&fakes, event)
            .await
            .expect("handled");
        assert!(failed_ids(&response).is_empty());
        assert!(fakes.delayed.lock().expect("lock").is_empty());
        let parked = fakes.parked.lock().expect("lock");
        assert_eq!(parked.len(), 2, "both messages of code-1");
        assert!(parked.iter().all(|(_, class)| class == "transient"));
        assert_eq!(
            *fakes.dirty.lock().expect("lock"),
            [("code-1".to_owned(), FailureClass::Transient)]
        );
    }

    #[tokio::test]
    async fn a_refusal_retrying_cannot_fix_is_dead_lettered_at_once() {
        let fakes = Fakes {
            failing_config: Some("cfg-code-1"),
            failure: Some(WeComError::ListTooLong),
            ..Fakes::default()
        };
        let refresher = refresher(&fakes);
        handle(&refresher, &&fakes, &&fakes, sample())
            .await
            .expect("handled");
        assert!(fakes
            .parked
            .lock()
            .expect("lock")
            .iter()
            .all(|(_, class)| class == "list_too_long"));
        assert_eq!(fakes.dirty.lock().expect("lock").len(), 1);
    }

    #[tokio::test]
    async fn codes_the_invocation_has_no_time_left_for_go_back_to_refresh_fifo_unrefreshed_and_acknowledged(
    ) {
        let fakes = Fakes::default();
        let refresher = refresher(&fakes);
        let mut event = sample();
        // Less than one WeCom call (3.5 s) is left once the finishing reserve is set aside.
        event.context = context(FINISH_RESERVE_MS + 3_000);
        let response = handle(&refresher, &&fakes, &&fakes, event)
            .await
            .expect("handled");
        assert!(failed_ids(&response).is_empty(), "no receive is spent");
        let forwarded = fakes.forwarded.lock().expect("lock");
        let codes: Vec<&str> = forwarded.iter().map(|r| r.reason.code.as_str()).collect();
        assert_eq!(
            codes,
            ["code-1", "code-2"],
            "one reason per code, back on refresh.fifo"
        );
        assert!(forwarded
            .iter()
            .all(|r| !r.retry_of.is_empty() && r.attempt == 0));
        assert!(fakes.pushes.lock().expect("lock").is_empty());
        assert!(
            fakes.delayed.lock().expect("lock").is_empty(),
            "not throttled"
        );
        assert!(fakes.dirty.lock().expect("lock").is_empty(), "not failed");
    }

    #[tokio::test]
    async fn a_message_on_its_last_receive_marks_its_code_dirty_before_the_work_it_may_not_survive()
    {
        let fakes = Fakes::default();
        let refresher = refresher(&fakes);
        let mut event = sample();
        let last = event
            .payload
            .records
            .iter_mut()
            .find(|r| r.body.as_deref().is_some_and(|b| b.contains("code-2")))
            .expect("a reason for code-2");
        last.attributes
            .insert("ApproximateReceiveCount".into(), MAX_RECEIVES.to_string());
        handle(&refresher, &&fakes, &&fakes, event)
            .await
            .expect("handled");
        assert_eq!(
            *fakes.dirty.lock().expect("lock"),
            [("code-2".to_owned(), FailureClass::Transient)]
        );
        assert_eq!(
            fakes.pushes.lock().expect("lock").len(),
            2,
            "the work still runs"
        );
    }

    #[tokio::test]
    async fn a_reason_whose_delay_is_served_goes_back_to_its_group_unrefreshed() {
        let fakes = Fakes::default();
        let refresher = refresher(&fakes);
        let path = format!(
            "{}/../../events/sqs-refresh-retry-served.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let event = serde_json::from_str(&std::fs::read_to_string(path).expect("sample exists"))
            .expect("an SQS event");
        let response = handle(
            &refresher,
            &&fakes,
            &&fakes,
            LambdaEvent::new(event, context(10_000)),
        )
        .await
        .expect("handled");
        assert!(failed_ids(&response).is_empty());
        let forwarded = fakes.forwarded.lock().expect("lock");
        assert_eq!(forwarded.len(), 1);
        assert_eq!(forwarded[0].attempt, 1, "the attempt count travels on");
        assert!(fakes.snapshots_read.lock().expect("lock").is_empty());
    }

    #[tokio::test]
    async fn the_reasons_of_a_code_the_policy_calls_quiet_go_to_the_slow_lane_as_one_message() {
        let fakes = Fakes::default();
        let refresher = refresher_with(&fakes, all_slow());
        let response = handle(&refresher, &&fakes, &&fakes, sample())
            .await
            .expect("handled");
        assert!(failed_ids(&response).is_empty(), "acknowledged");
        let slowed = fakes.slowed.lock().expect("lock");
        let codes: Vec<&str> = slowed.iter().map(|r| r.reason.code.as_str()).collect();
        assert_eq!(codes, ["code-1", "code-2"], "one message per code");
        assert!(fakes.snapshots_read.lock().expect("lock").is_empty());
        assert!(fakes.pushes.lock().expect("lock").is_empty());
    }

    #[tokio::test]
    async fn reasons_from_the_slow_queue_are_refreshed_there_not_sent_back_to_it() {
        let fakes = Fakes::default();
        let refresher = refresher_with(&fakes, all_slow());
        let mut event = sample();
        for record in &mut event.payload.records {
            record.event_source_arn =
                Some("arn:aws:sqs:ap-east-1:123456789012:qrsync-refresh-slow.fifo".into());
        }
        handle(&refresher, &&fakes, &&fakes, event)
            .await
            .expect("handled");
        assert!(fakes.slowed.lock().expect("lock").is_empty());
        assert_eq!(fakes.pushes.lock().expect("lock").len(), 2);
    }

    #[tokio::test]
    async fn a_code_whose_lease_is_held_elsewhere_waits_in_a_retry_queue_without_an_attempt() {
        let fakes = Fakes {
            lease_busy: true,
            ..Fakes::default()
        };
        let refresher = refresher(&fakes);
        let response = handle(&refresher, &&fakes, &&fakes, sample())
            .await
            .expect("handled");
        assert!(failed_ids(&response).is_empty());
        let delayed = fakes.delayed.lock().expect("lock");
        assert_eq!(delayed.len(), 2);
        assert!(delayed
            .iter()
            .all(|(r, d)| r.attempt == 0 && *d == RetryDelay::Seconds15));
        assert!(fakes.dirty.lock().expect("lock").is_empty());
    }
}
