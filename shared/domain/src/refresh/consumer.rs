//! A batch of refresh-queue messages, consumed (rules 5, 6, 7, 9 and 11 of docs/rules.md):
//! one recompute per code however many of its reasons the batch holds, and every code that
//! did not finish sent down its path.
//!
//! - throttled or put off (no budget, WeCom's 45009/45033, a busy lease, the slow lane's
//!   interval): one reason requeued through the retry queue covering the wait, the messages
//!   acknowledged: no receive counted, never a dead letter;
//! - transient or token failure: requeued with a growing delay and an attempt count, then
//!   moved to the dead-letter queue with its class and the code marked dirty;
//! - a refusal retrying cannot fix (41041, any other errcode): dead-lettered at once, dirty;
//! - the table or a queue unavailable: the code's messages are reported for redelivery (the
//!   rest of their group with them); on the last receive before the queue's own redrive the
//!   code is marked dirty first, since a redriven message passes no code of ours.
//!
//! Messages from a retry queue have served their delay and are forwarded to refresh.fifo
//! unrefreshed: every refresh starts on the fast lane. Messages from the slow lane's queue are
//! refreshed as slow. A message that is not a refresh reason is parked as poison.

use super::retry::{self, Path, RetriedReason};
use super::{
    AcquisitionLinks, CodeLeases, CodeRecords, ContactWayPusher, Destination, FailureMarks,
    Outcome, PutOffCause, RefreshError, RefreshRequest, Refresher, Requeue, RetryQueues, Tallies,
};
use crate::batch::DeadLetters;
use crate::batch::PartialBatch;
use crate::budget::WeComBudget;
use crate::codes::CodeFacts;
use crate::dirty::{DirtyMarks, DirtyWhy};
use crate::lanes::Lane;
use crate::reasons::Cause;
use crate::tenants::TenantPauses;
use crate::wecom::errors::FailureClass;

/// What a refresh-queue consumer needs from the outside world, named once: the ports of the
/// single writer, the dead-letter queue and the retry queues.
pub trait RefreshPorts {
    type Facts: CodeFacts + CodeRecords + FailureMarks + DirtyMarks + CodeLeases + TenantPauses;
    type Pusher: ContactWayPusher + AcquisitionLinks;
    type Budget: WeComBudget;
    type DeadLetters: DeadLetters;
    type Retries: RetryQueues;
}

/// The queue a message came from. The edge tells it from the message's source; nothing here
/// knows a queue's address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inlet {
    /// refresh.fifo: every refresh starts here.
    FastLane,
    /// The slow lane's queue: the code is refreshed as slow.
    SlowLane,
    /// A retry queue: the delay is served, the reason goes back to refresh.fifo.
    RetryQueue,
}

/// One message of a refresh queue, as the consumer needs it.
#[derive(Debug, Clone, Copy)]
pub struct Delivery<'a> {
    pub message_id: &'a str,
    pub group: &'a str,
    pub body: &'a str,
    pub inlet: Inlet,
    /// SQS's `ApproximateReceiveCount` (1 on the first receive).
    pub receive_count: u32,
}

/// The reasons of one code in a batch, merged (rule 5): one recompute serves them all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeWork<'a> {
    pub group: &'a str,
    /// The first reason, carrying the highest attempt and any resync of the others.
    pub reason: RetriedReason,
    /// (message id, body) of every message merged, in arrival order.
    pub messages: Vec<(&'a str, &'a str)>,
    /// When the facts behind each merged reason were written.
    pub fact_at_ms: Vec<u64>,
    pub receive_count: u32,
    pub lane: Lane,
}

impl<'a> CodeWork<'a> {
    fn new(delivery: &Delivery<'a>, mut reason: RetriedReason, lane: Lane) -> Self {
        reason.resync |= reason.reason.cause == Cause::Resync;
        Self {
            group: delivery.group,
            fact_at_ms: vec![reason.reason.fact_at_ms],
            reason,
            messages: vec![(delivery.message_id, delivery.body)],
            receive_count: delivery.receive_count,
            lane,
        }
    }

    /// The refresh its reasons ask for, to be done by `deadline_ms`.
    fn request(&self, deadline_ms: u64) -> RefreshRequest<'_> {
        RefreshRequest {
            tenant: &self.reason.reason.tenant,
            code: &self.reason.reason.code,
            fact_at_ms: &self.fact_at_ms,
            lane: self.lane,
            resync: self.reason.resync,
            deadline_ms,
        }
    }

    fn is_for(&self, reason: &RetriedReason) -> bool {
        self.reason.reason.tenant == reason.reason.tenant
            && self.reason.reason.code == reason.reason.code
    }

    /// Another reason for the same code: its message is acknowledged with the rest, the
    /// highest attempt and any resync carry over.
    fn absorb(&mut self, delivery: &Delivery<'a>, reason: &RetriedReason) {
        self.messages.push((delivery.message_id, delivery.body));
        self.fact_at_ms.push(reason.reason.fact_at_ms);
        self.reason.attempt = self.reason.attempt.max(reason.attempt);
        self.reason.resync |= reason.resync || reason.reason.cause == Cause::Resync;
        self.receive_count = self.receive_count.max(delivery.receive_count);
    }

    fn first_message_id(&self) -> &'a str {
        self.messages.first().map(|(id, _)| *id).unwrap_or_default()
    }

    /// The reason that replaces this code's messages on a queue.
    fn requeued(&self, attempt: u32, resync: bool) -> RetriedReason {
        let mut requeued =
            RetriedReason::requeued(self.reason.reason.clone(), attempt, self.first_message_id());
        requeued.resync = resync;
        requeued
    }

    /// This code's messages replaced by one reason sent to `to`.
    fn requeue_to(&self, to: Destination, attempt: u32, resync: bool) -> Pending<'a> {
        Pending {
            requeue: Requeue {
                to,
                reason: self.requeued(attempt, resync),
            },
            group: self.group,
            messages: self.messages.iter().map(|(id, _)| *id).collect(),
        }
    }
}

/// A reason to requeue at the end of the batch, and the messages it replaces (redelivered if
/// it cannot be sent).
#[derive(Debug)]
struct Pending<'a> {
    requeue: Requeue,
    group: &'a str,
    messages: Vec<&'a str>,
}

/// What a batch requeues, sent together once its codes are refreshed: a retry queue's
/// forwards and the put-offs of a saturated minute are most of the refresh path's messages,
/// and ten to a request is a tenth of the requests and of the round trips.
#[derive(Debug, Default)]
struct Outbox<'a> {
    requeues: Vec<Requeue>,
    replaced: Vec<(&'a str, Vec<&'a str>)>,
}

impl<'a> Outbox<'a> {
    fn push(&mut self, pending: Pending<'a>) {
        self.requeues.push(pending.requeue);
        self.replaced.push((pending.group, pending.messages));
    }
}

/// Adds `reason` to the work of its code, or starts that code's work (rule 5: one recompute
/// per code per batch, whatever the number of its reasons).
pub fn merge<'a>(
    work: &mut Vec<CodeWork<'a>>,
    delivery: &Delivery<'a>,
    reason: RetriedReason,
    lane: Lane,
) {
    match work.iter_mut().find(|code| code.is_for(&reason)) {
        Some(code) => code.absorb(delivery, &reason),
        None => work.push(CodeWork::new(delivery, reason, lane)),
    }
}

pub use crate::batch::is_last_receive;

/// Where a code's messages go once its refresh has ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NextStep {
    /// Refreshed (pushed, unchanged, starved, gone...): the messages are acknowledged.
    Done,
    /// No time was left in the invocation: straight back to refresh.fifo, neither failed
    /// nor throttled.
    BackToRefreshQueue,
    /// The lane policy calls the code quiet: one reason to the slow lane's queue.
    ToSlowLane,
    /// Through a retry queue, or dead-lettered, as `retry::Path` says.
    Path { path: Path, resync: bool },
    /// The table or a queue failed: every message of the code is redelivered.
    Redeliver,
}

/// The step after a refresh of a code whose reasons carried `attempt` failed attempts and
/// asked for `resync`.
pub fn next_step(result: &Result<Outcome, RefreshError>, attempt: u32, resync: bool) -> NextStep {
    match result {
        Ok(Outcome::PutOff {
            cause: PutOffCause::OutOfTime,
            ..
        }) => NextStep::BackToRefreshQueue,
        // Every put-off (budget, 45009, lease, slow-lane interval) waits like a throttled
        // refresh: no failed attempt counted.
        Ok(Outcome::PutOff {
            cause,
            retry_after_ms,
        }) => NextStep::Path {
            path: retry::throttled(*retry_after_ms, attempt),
            resync: resync || cause.needs_resync(),
        },
        Ok(Outcome::ToSlowLane) => NextStep::ToSlowLane,
        Ok(_) => NextStep::Done,
        Err(RefreshError::WeCom(error)) => NextStep::Path {
            path: retry::failed(error.class(), attempt),
            resync,
        },
        Err(RefreshError::Store(_)) => NextStep::Redeliver,
    }
}

/// A refresh queue's consumer: the single writer and the queues its codes' reasons go to.
pub struct RefreshConsumer<P: RefreshPorts> {
    pub refresher: Refresher<P::Facts, P::Pusher, P::Budget>,
    pub dead_letters: P::DeadLetters,
    pub retries: P::Retries,
    /// The refresh queues' `maxReceiveCount` (template.yaml's `Queues` mapping).
    pub max_receives: u32,
}

impl<P: RefreshPorts> RefreshConsumer<P> {
    /// Consumes one batch with `time_left_ms` of the invocation left; the answer names the
    /// messages to redeliver.
    pub async fn consume(&self, deliveries: &[Delivery<'_>], time_left_ms: u64) -> PartialBatch {
        let deadline_ms = self.refresher.now_ms().saturating_add(time_left_ms);
        let mut batch = PartialBatch::default();
        let mut work: Vec<CodeWork<'_>> = Vec::new();
        let mut outbox = Outbox::default();
        for delivery in deliveries {
            if batch.group_failed(delivery.group) {
                batch.fail(delivery.group, delivery.message_id);
                continue;
            }
            let reason = match serde_json::from_str::<RetriedReason>(delivery.body) {
                Ok(reason) => reason,
                Err(error) => {
                    let why = format!("not a refresh reason: {error}");
                    let (group, id, body) = (delivery.group, delivery.message_id, delivery.body);
                    batch
                        .park_poison(&self.dead_letters, group, id, body, &why)
                        .await;
                    continue;
                }
            };
            let lane = match delivery.inlet {
                Inlet::RetryQueue => {
                    tracing::debug!(code = %reason.reason.code, attempt = reason.attempt, "delay served; back to refresh.fifo");
                    outbox.push(forwarded(delivery, reason));
                    continue;
                }
                Inlet::SlowLane => Lane::Slow,
                Inlet::FastLane => Lane::Fast,
            };
            merge(&mut work, delivery, reason, lane);
        }
        // The codes of a batch are refreshed side by side: each is its own message group and
        // its own lease, so nothing orders them, and one code's WeCom call does not wait on the
        // nine before it (the batch's time, and its billed duration, was their sum). What they
        // share is read once for all (`Refresher::refresh_batch`).
        let last_receives = work
            .iter()
            .filter(|code| is_last_receive(code.receive_count, self.max_receives))
            .map(|code| self.mark_last_receive(code));
        futures::future::join_all(last_receives).await;
        let asks: Vec<RefreshRequest<'_>> =
            work.iter().map(|code| code.request(deadline_ms)).collect();
        let tallies = Tallies::default();
        let results = self.refresher.refresh_batch(&asks, &tallies).await;
        let parts = work
            .into_iter()
            .zip(results)
            .map(|(code, result)| self.refreshed(code, result));
        for (part, pending) in futures::future::join_all(parts).await {
            batch.absorb(part);
            if let Some(pending) = pending {
                outbox.push(pending);
            }
        }
        self.send_requeues(&mut batch, outbox).await;
        self.refresher.record_tallies(tallies).await;
        batch
    }

    /// What one code's refresh leaves of the batch: the messages to redeliver, and the reason
    /// to requeue.
    async fn refreshed<'a>(
        &self,
        code: CodeWork<'a>,
        result: Result<Outcome, RefreshError>,
    ) -> (PartialBatch, Option<Pending<'a>>) {
        let mut part = PartialBatch::default();
        let pending = self.after_refresh(&mut part, code, result).await;
        (part, pending)
    }

    /// Sends the batch's requeues; the messages of any not sent are redelivered.
    async fn send_requeues(&self, batch: &mut PartialBatch, outbox: Outbox<'_>) {
        if outbox.requeues.is_empty() {
            return;
        }
        let Err(unsent) = self.retries.send_all(&outbox.requeues).await else {
            return;
        };
        tracing::warn!(error = %unsent.error, unsent = unsent.indices.len(), requeues = outbox.requeues.len(), "requeues not sent; their reasons are redelivered");
        for index in unsent.indices {
            if let Some((group, messages)) = outbox.replaced.get(index) {
                for id in messages {
                    batch.fail(group, id);
                }
            }
        }
    }

    /// A code on its last receive before the queue's own redrive is marked dirty first: a
    /// redriven message passes no code of ours.
    async fn mark_last_receive(&self, code: &CodeWork<'_>) {
        let (tenant, code_id) = (&code.reason.reason.tenant, &code.reason.reason.code);
        tracing::warn!(tenant = %tenant, code = %code_id, receive_count = code.receive_count, "last receive before the queue's redrive; code marked dirty first");
        self.mark_dirty(code, DirtyWhy::LastReceive).await;
    }

    /// Logs at info only what changed WeCom (a push, bounded by the budget); a recompute that
    /// changed nothing and a put-off are debug lines, as they are the bulk at production volume
    /// and the metrics count them (docs/design/refresh.md, "Logs").
    async fn after_refresh<'a>(
        &self,
        batch: &mut PartialBatch,
        code: CodeWork<'a>,
        result: Result<Outcome, RefreshError>,
    ) -> Option<Pending<'a>> {
        let (tenant, code_id) = (&code.reason.reason.tenant, &code.reason.reason.code);
        match &result {
            Ok(Outcome::Pushed(users)) => {
                tracing::info!(tenant = %tenant, code = %code_id, reasons = code.messages.len(), outcome = %format!("pushed {} users", users.len()), "code refreshed");
            }
            Ok(
                outcome @ (Outcome::Unchanged
                | Outcome::Starved
                | Outcome::CodeNotFound
                | Outcome::NotCreated
                | Outcome::CodeGone
                | Outcome::Paused),
            ) => {
                tracing::debug!(tenant = %tenant, code = %code_id, reasons = code.messages.len(), outcome = %format!("{outcome:?}"), "code refreshed");
            }
            Err(RefreshError::WeCom(error)) => {
                crate::telemetry::failure(error.class().as_str());
                tracing::warn!(tenant = %tenant, code = %code_id, error = %error, class = %error.class(), attempt = code.reason.attempt, "push failed");
            }
            Err(RefreshError::Store(error)) => {
                tracing::warn!(tenant = %tenant, code = %code_id, error = %error, "refresh failed; its reasons are redelivered");
            }
            Ok(Outcome::ToSlowLane | Outcome::PutOff { .. }) => {}
        }
        let (attempt, resync) = (code.reason.attempt, code.reason.resync);
        match next_step(&result, attempt, resync) {
            NextStep::Done => None,
            NextStep::Redeliver => {
                fail_all(batch, &code);
                None
            }
            // No time was left: straight back to refresh.fifo, no receive spent, neither
            // failed nor throttled. The requeued reason's deduplication id comes from the
            // message it replaces, so a redelivered batch requeues it once.
            NextStep::BackToRefreshQueue => {
                tracing::info!(tenant = %tenant, code = %code_id, reasons = code.messages.len(), requeued = "deadline", "no time left in this invocation; reasons back on refresh.fifo");
                Some(code.requeue_to(Destination::RefreshQueue, attempt, resync))
            }
            // A resync asked for carries over: the slow lane's refresh must push as well.
            NextStep::ToSlowLane => {
                tracing::debug!(tenant = %tenant, code = %code_id, reasons = code.messages.len(), "quiet code: reasons sent to the slow lane");
                Some(code.requeue_to(Destination::SlowLane, attempt, resync))
            }
            NextStep::Path {
                path: Path::Requeue { delay, attempt },
                resync,
            } => {
                tracing::debug!(tenant = %tenant, code = %code_id, delay_s = delay.seconds(), attempt, "reasons requeued with a delay");
                Some(code.requeue_to(Destination::Retry(delay), attempt, resync))
            }
            NextStep::Path {
                path: Path::DeadLetter(class),
                ..
            } => {
                self.dead_letter(batch, &code, class).await;
                None
            }
        }
    }

    async fn dead_letter(
        &self,
        batch: &mut PartialBatch,
        code: &CodeWork<'_>,
        class: FailureClass,
    ) {
        crate::telemetry::dead_lettered(class.as_str());
        tracing::error!(alert = "refresh_dead_lettered", tenant = %code.reason.reason.tenant, code = %code.reason.reason.code, class = %class, "reasons moved to the dead-letter queue; code marked dirty");
        self.mark_dirty(code, DirtyWhy::RefreshFailed(class)).await;
        for (id, body) in &code.messages {
            let parked = self
                .dead_letters
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

    async fn mark_dirty(&self, code: &CodeWork<'_>, why: DirtyWhy) {
        let (tenant, code_id) = (&code.reason.reason.tenant, &code.reason.reason.code);
        let marked = self
            .refresher
            .store()
            .mark_dirty(tenant, code_id, why, self.refresher.now_ms())
            .await;
        if let Err(error) = marked {
            tracing::error!(error = %error, tenant = %tenant, code = %code_id, "code not marked dirty");
        }
    }
}

/// A retry queue's message, its delay served, on its way back to refresh.fifo as it came.
fn forwarded<'a>(delivery: &Delivery<'a>, reason: RetriedReason) -> Pending<'a> {
    Pending {
        requeue: Requeue {
            to: Destination::RefreshQueue,
            reason,
        },
        group: delivery.group,
        messages: vec![delivery.message_id],
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
    use crate::ids::CodeId;
    use crate::ids::TenantId;
    use crate::reasons::{Cause, RefreshReason};
    use crate::refresh::retry::RetryDelay;
    use crate::wecom::errors::WeComError;
    use crate::StoreError;

    fn reason(code: &str, fact_at_ms: u64, attempt: u32, resync: bool) -> RetriedReason {
        let mut reason = RetriedReason::first(RefreshReason {
            tenant: TenantId::parse("t1").expect("valid"),
            code: CodeId::parse(code).expect("valid"),
            cause: Cause::Requested,
            fact_key: format!("k{fact_at_ms}"),
            fact_at_ms,
        });
        reason.attempt = attempt;
        reason.resync = resync;
        reason
    }

    fn delivery<'a>(id: &'a str, receive_count: u32) -> Delivery<'a> {
        Delivery {
            message_id: id,
            group: "t1#c",
            body: "{}",
            inlet: Inlet::FastLane,
            receive_count,
        }
    }

    #[test]
    fn reasons_for_one_code_merge_into_one_work_keeping_every_message_the_highest_attempt_and_any_resync(
    ) {
        let mut work = Vec::new();
        merge(
            &mut work,
            &delivery("m1", 1),
            reason("c1", 10, 0, false),
            Lane::Fast,
        );
        merge(
            &mut work,
            &delivery("m2", 3),
            reason("c2", 20, 0, false),
            Lane::Fast,
        );
        merge(
            &mut work,
            &delivery("m3", 2),
            reason("c1", 30, 2, true),
            Lane::Fast,
        );
        assert_eq!(work.len(), 2);
        let c1 = &work[0];
        assert_eq!(
            c1.messages.iter().map(|(id, _)| *id).collect::<Vec<_>>(),
            ["m1", "m3"]
        );
        assert_eq!(c1.fact_at_ms, [10, 30]);
        assert_eq!(c1.reason.attempt, 2);
        assert!(c1.reason.resync);
        assert_eq!(c1.receive_count, 2);
        assert_eq!(c1.first_message_id(), "m1");
    }

    #[test]
    fn the_last_receive_is_the_queues_max_receive_count() {
        assert!(!is_last_receive(4, 5));
        assert!(is_last_receive(5, 5));
        assert!(is_last_receive(6, 5));
    }

    #[test]
    fn a_put_off_refresh_waits_without_an_attempt_and_a_lost_lease_asks_for_a_resync() {
        let put_off = Ok(Outcome::PutOff {
            cause: PutOffCause::LeaseLost,
            retry_after_ms: 10_000,
        });
        assert_eq!(
            next_step(&put_off, 1, false),
            NextStep::Path {
                path: Path::Requeue {
                    delay: RetryDelay::Seconds15,
                    attempt: 1
                },
                resync: true
            }
        );
        let budget = Ok(Outcome::PutOff {
            cause: PutOffCause::Budget,
            retry_after_ms: 40_000,
        });
        assert_eq!(
            next_step(&budget, 0, false),
            NextStep::Path {
                path: Path::Requeue {
                    delay: RetryDelay::Seconds60,
                    attempt: 0
                },
                resync: false
            }
        );
    }

    #[test]
    fn a_wecom_failure_follows_its_class_and_a_store_failure_is_redelivered() {
        let transient = Err(RefreshError::WeCom(WeComError::Transient {
            detail: "down".into(),
        }));
        assert_eq!(
            next_step(&transient, 3, false),
            NextStep::Path {
                path: Path::DeadLetter(FailureClass::Transient),
                resync: false
            }
        );
        let too_long = Err(RefreshError::WeCom(WeComError::ListTooLong));
        assert_eq!(
            next_step(&too_long, 0, false),
            NextStep::Path {
                path: Path::DeadLetter(FailureClass::ListTooLong),
                resync: false
            }
        );
        let store = Err(RefreshError::Store(StoreError::new("table", "down")));
        assert_eq!(next_step(&store, 0, false), NextStep::Redeliver);
    }

    #[test]
    fn no_time_left_goes_back_to_the_refresh_queue_and_a_quiet_code_to_the_slow_lane() {
        let out_of_time = Ok(Outcome::PutOff {
            cause: PutOffCause::OutOfTime,
            retry_after_ms: 0,
        });
        assert_eq!(
            next_step(&out_of_time, 0, false),
            NextStep::BackToRefreshQueue
        );
        assert_eq!(
            next_step(&Ok(Outcome::ToSlowLane), 0, false),
            NextStep::ToSlowLane
        );
        assert_eq!(next_step(&Ok(Outcome::Unchanged), 0, false), NextStep::Done);
    }
}
