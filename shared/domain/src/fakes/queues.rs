//! The queues and the bus: refresh reasons, fan-outs, retries, dead letters and
//! notifications, recorded in one `InMemoryQueues`.

use super::InMemoryStore;
use crate::batch::DeadLetters;
use crate::facts::{QuotaNotifier, StaffQuotaReached};
use crate::fanout::Expander;
use crate::reasons::{FanOut, FanOutQueue, ReasonQueue, RefreshReason};
use crate::refresh::retry::{RetriedReason, RetryDelay};
use crate::refresh::{Destination, Requeue, RetryQueues, Unsent};
use crate::StoreError;
use std::collections::HashSet;
use std::sync::{Arc, Mutex, MutexGuard};

#[derive(Default)]
struct Queued {
    /// Every reason sent, and the ones refresh.fifo keeps (deduplicated by id).
    sends: Vec<RefreshReason>,
    reasons: Vec<RefreshReason>,
    ids: HashSet<String>,
    /// How many more reasons are taken before every send fails (`None`: no limit).
    sends_left: Option<usize>,
    fan_outs: Vec<FanOut>,
    /// Fan-outs sent to be seen later, with their delay in seconds.
    fan_outs_later: Vec<(FanOut, u32)>,
    /// Fan-out sends fail while on (reasons are `sends_left`'s).
    fan_outs_off: bool,
    delayed: Vec<(RetriedReason, RetryDelay)>,
    forwarded: Vec<RetriedReason>,
    slowed: Vec<RetriedReason>,
    /// How many requeues each `RetryQueues::send_all` carried.
    requeue_calls: Vec<usize>,
    /// Requeues of these codes are not sent.
    requeues_refused_for: HashSet<String>,
    parked: Vec<(String, String)>,
    published: Vec<StaffQuotaReached>,
    replay_pages: Vec<crate::replay::Page>,
    /// How long each reason's send takes (on tokio's clock), and the most ever in flight.
    send_latency: Option<std::time::Duration>,
    sends_in_flight: usize,
    most_sends_in_flight: usize,
}

/// Every queue and the notification bus. Clones share what was sent. A fan-out is only
/// recorded, unless the queue expands fan-outs (`expanding_through`).
#[derive(Clone, Default)]
pub struct InMemoryQueues {
    queued: Arc<Mutex<Queued>>,
    /// Expands each fan-out at once through this index into this queue's reasons, as the
    /// fan-out function does after the answer, so a test sees the reasons a fact reaches.
    index: Option<InMemoryStore>,
}

impl InMemoryQueues {
    fn queued(&self) -> MutexGuard<'_, Queued> {
        self.queued.lock().expect("fake queue lock")
    }

    /// These queues (sharing what is sent), expanding every fan-out at once through `index`.
    pub fn expanding_through(&self, index: InMemoryStore) -> Self {
        Self {
            queued: Arc::clone(&self.queued),
            index: Some(index),
        }
    }

    /// Each later reason's send takes `latency` before it is answered.
    pub fn take_for_each_send(&self, latency: std::time::Duration) {
        self.queued().send_latency = Some(latency);
    }

    /// The most reasons' sends that were in flight at once.
    pub fn most_sends_in_flight(&self) -> usize {
        self.queued().most_sends_in_flight
    }

    /// Reasons sending fails while on.
    pub fn set_unavailable(&self, unavailable: bool) {
        self.queued().sends_left = unavailable.then_some(0);
    }

    /// Fan-out sending fails while on.
    pub fn set_fan_outs_unavailable(&self, unavailable: bool) {
        self.queued().fan_outs_off = unavailable;
    }

    /// After `reasons` more reasons are taken every send fails; `None` heals it.
    pub fn fail_reasons_after(&self, reasons: Option<usize>) {
        self.queued().sends_left = reasons;
    }

    /// The reasons refresh.fifo holds: deduplicated by id, as SQS FIFO does.
    pub fn reasons(&self) -> Vec<RefreshReason> {
        self.queued().reasons.clone()
    }

    /// Every reason sent, duplicates included.
    pub fn sends(&self) -> Vec<RefreshReason> {
        self.queued().sends.clone()
    }

    pub fn clear_reasons(&self) {
        let mut queued = self.queued();
        queued.sends.clear();
        queued.reasons.clear();
        queued.ids.clear();
    }

    pub fn fan_outs(&self) -> Vec<FanOut> {
        self.queued().fan_outs.clone()
    }

    /// Fan-outs sent to be seen later (`FanOutQueue::send_after`), with their delay.
    pub fn fan_outs_later(&self) -> Vec<(FanOut, u32)> {
        self.queued().fan_outs_later.clone()
    }

    /// Reasons sent to a retry queue, with its delay.
    pub fn delayed(&self) -> Vec<(RetriedReason, RetryDelay)> {
        self.queued().delayed.clone()
    }

    /// Reasons sent back to refresh.fifo.
    pub fn forwarded(&self) -> Vec<RetriedReason> {
        self.queued().forwarded.clone()
    }

    /// Reasons republished to the slow lane.
    pub fn slowed(&self) -> Vec<RetriedReason> {
        self.queued().slowed.clone()
    }

    /// How many requeues each `RetryQueues::send_all` carried, call by call.
    pub fn requeue_calls(&self) -> Vec<usize> {
        self.queued().requeue_calls.clone()
    }

    /// Requeues of `code` are refused from now on (the others of the same call are sent).
    pub fn refuse_requeues_of(&self, code: &str) {
        self.queued().requeues_refused_for.insert(code.to_owned());
    }

    /// Messages moved to a dead-letter queue: their id and failure class.
    /// Replay pages queued (`replay::ReplayPages`).
    pub fn replay_pages(&self) -> Vec<crate::replay::Page> {
        self.queued().replay_pages.clone()
    }

    pub fn parked(&self) -> Vec<(String, String)> {
        self.queued().parked.clone()
    }

    /// The notifications published.
    pub fn published(&self) -> Vec<StaffQuotaReached> {
        self.queued().published.clone()
    }
}

#[async_trait::async_trait]
impl ReasonQueue for InMemoryQueues {
    async fn send(&self, reason: &RefreshReason) -> Result<(), StoreError> {
        let latency = {
            let mut queued = self.queued();
            queued.sends_in_flight += 1;
            queued.most_sends_in_flight = queued.most_sends_in_flight.max(queued.sends_in_flight);
            queued.send_latency
        };
        if let Some(latency) = latency {
            tokio::time::sleep(latency).await;
        }
        let mut queued = self.queued();
        queued.sends_in_flight -= 1;
        if let Some(left) = &mut queued.sends_left {
            if *left == 0 {
                return Err(StoreError::new(
                    "refresh queue",
                    "the fake queue is switched off",
                ));
            }
            *left -= 1;
        }
        queued.sends.push(reason.clone());
        if queued.ids.insert(reason.deduplication_id()) {
            queued.reasons.push(reason.clone());
        }
        Ok(())
    }
}

#[async_trait::async_trait]
impl FanOutQueue for InMemoryQueues {
    async fn send(&self, fan_out: &FanOut) -> Result<(), StoreError> {
        {
            let mut queued = self.queued();
            if queued.fan_outs_off {
                return Err(StoreError::new(
                    "fan-out queue",
                    "the fake queue is switched off",
                ));
            }
            queued.fan_outs.push(fan_out.clone());
        }
        let Some(index) = &self.index else {
            return Ok(());
        };
        let expander = Expander::new(index.clone(), self.clone(), self.clone(), index.clone());
        // The expansion begins now, after every mark the test has made so far.
        expander
            .expand(fan_out, u64::MAX, || false)
            .await
            .map(|_| ())
    }

    /// Kept apart with its delay, and not expanded: a test sees what waits and for how long.
    async fn send_after(&self, fan_out: &FanOut, delay_s: u32) -> Result<(), StoreError> {
        let mut queued = self.queued();
        if queued.fan_outs_off {
            return Err(StoreError::new(
                "fan-out queue",
                "the fake queue is switched off",
            ));
        }
        queued.fan_outs_later.push((fan_out.clone(), delay_s));
        Ok(())
    }
}

#[async_trait::async_trait]
impl RetryQueues for InMemoryQueues {
    async fn send_all(&self, requeues: &[Requeue]) -> Result<(), Unsent> {
        let mut queued = self.queued();
        queued.requeue_calls.push(requeues.len());
        let mut refused = Vec::new();
        for (index, Requeue { to, reason }) in requeues.iter().enumerate() {
            if queued
                .requeues_refused_for
                .contains(reason.reason.code.as_str())
            {
                refused.push(index);
                continue;
            }
            let reason = reason.clone();
            match to {
                Destination::Retry(delay) => queued.delayed.push((reason, *delay)),
                Destination::RefreshQueue => queued.forwarded.push(reason),
                Destination::SlowLane => queued.slowed.push(reason),
            }
        }
        if refused.is_empty() {
            return Ok(());
        }
        Err(Unsent {
            indices: refused,
            error: StoreError::new("retry queue", "the fake queue refused these requeues"),
        })
    }
}

#[async_trait::async_trait]
impl DeadLetters for InMemoryQueues {
    async fn park(
        &self,
        _group: &str,
        message_id: &str,
        _body: &str,
        failure_class: &str,
        _reason: &str,
    ) -> Result<(), StoreError> {
        self.queued()
            .parked
            .push((message_id.to_owned(), failure_class.to_owned()));
        Ok(())
    }
}

#[async_trait::async_trait]
impl QuotaNotifier for InMemoryQueues {
    async fn publish(&self, event: &StaffQuotaReached) -> Result<(), StoreError> {
        self.queued().published.push(event.clone());
        Ok(())
    }
}

#[async_trait::async_trait]
impl crate::replay::ReplayPages for InMemoryQueues {
    async fn send(&self, page: &crate::replay::Page) -> Result<(), StoreError> {
        self.queued().replay_pages.push(page.clone());
        Ok(())
    }
}
