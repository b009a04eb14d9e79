//! docs/rules.md rules 3 to 5, the single writer: only this module changes a code's WeCom list and
//! its "last pushed" record. It recomputes from the facts as they are when it runs (so order,
//! duplicates and lost reasons do not matter as long as one later reason arrives), pushes to
//! WeCom first and records second (so the dedupe check never skips a push WeCom did not
//! receive), and makes no call when the list is unchanged.

pub mod consumer;
mod lease;
mod ports;
pub mod retry;

pub use lease::{Acquired, AfterRecord, FencedWrite, Lease, LeaseTimes};
pub use ports::{
    AcquisitionLinks, CodeLeases, CodeRecords, ContactWayPusher, Destination, FailureMarks,
    Requeue, RetryQueues, Unsent,
};

use crate::alerts::GroupRobot;
use crate::budget::{reopens_in, Spend, WeComBudget, Window, CREATE_LINK, UPDATE_CONTACT_WAY};
use crate::codes::{CodeFacts, CodeSnapshot, PushedList};
use crate::dirty::{DirtyMarks, DirtyWhy};
use crate::ids::TenantId;
use crate::ids::{CodeId, StaffId};
use crate::lanes::{Lane, LanePolicy};
use crate::membership::{Membership, RotationSlot};
use crate::reasons::{Cause, FanOut, FanOutQueue, Source};
use crate::telemetry::name as metric;
use crate::tenants::{TenantPause, TenantPauses, Timezone};
use crate::wecom::errors::{FailureClass, WeComError};
use crate::Clock;
use crate::StoreError;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tracing::Instrument;

/// A refresh's outcome and, when the tenant was found, its timezone (its day names the tally).
type Leased = Result<(Outcome, Option<Timezone>), RefreshError>;

/// One completed push, as recorded after WeCom accepted it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushRecord {
    pub users: Vec<StaffId>,
    pub pushed_at_ms: u64,
    pub fallback: bool,
    /// When the facts behind the coalesced reasons were written.
    pub fact_at_ms: Vec<u64>,
    /// The landing page's rotation from the same recompute (sequenced and quota codes).
    pub rotation: Option<Vec<RotationSlot>>,
    /// The code has a page on the landing page, or had one until this push: the record's write
    /// writes the page too (`page`).
    pub on_page: bool,
    /// The lane the push ran as (`Refresher::lane_of`): slow for a quiet code, whichever
    /// queue delivered its reasons.
    pub lane: Lane,
}

/// What a record write of the code's single writer does to the code's page: the page (the
/// rotation visitors are sent by, its round and order key) lives in a home of its own, which
/// the landing function may read and nothing else of the platform's, and it is written only in
/// the same transaction as the code's record, fenced on the writer's lease: never one without
/// the other (docs/design/landing-page.md, "The page's home").
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PageWrite {
    /// A new round of the rotation (a push): its visits counted from one, under a fresh order key.
    NewRound(Vec<RotationSlot>),
    /// The same round with a changed rotation (a quota member's share shrank with an add): its
    /// counter and order key stay.
    SameRound(Vec<RotationSlot>),
    /// Nobody is eligible and there is no fallback: visitors are told nobody is available.
    Starved,
    /// The code no longer rotates (edited to native): visitors are told to scan it in WeChat.
    NotServed,
}

impl PushRecord {
    /// What the push's record write does to the code's page: a new round of its rotation, or,
    /// for a code that stopped rotating, "not served"; nothing for a code that never had one.
    pub fn page(&self) -> Option<PageWrite> {
        match &self.rotation {
            Some(rotation) => Some(PageWrite::NewRound(rotation.clone())),
            None => self.on_page.then_some(PageWrite::NotServed),
        }
    }
}

/// What one refresh did, for the tenant's daily counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    pub reasons: u32,
    pub recomputes: u32,
    pub pushes: u32,
    pub unchanged: u32,
    pub starved: u32,
    /// Requeued because the tenant's budget was spent.
    pub requeued_budget: u32,
    /// Requeued because WeCom answered 45009 or 45033.
    pub requeued_throttled: u32,
    /// Requeued because another writer held the code's lease (or this one lost it).
    pub requeued_lease: u32,
    /// Republished from the fast lane to the slow lane.
    pub to_slow_lane: u32,
    /// Requeued by the slow lane to keep its interval between pushes.
    pub slow_interval_waits: u32,
}

impl Tally {
    /// Nothing counted: no write is owed.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// Adds `other`'s counts to these (a day's total of many refreshes).
    pub fn absorb(&mut self, other: &Tally) {
        let add = |mine: &mut u32, theirs: u32| *mine = mine.saturating_add(theirs);
        add(&mut self.reasons, other.reasons);
        add(&mut self.recomputes, other.recomputes);
        add(&mut self.pushes, other.pushes);
        add(&mut self.unchanged, other.unchanged);
        add(&mut self.starved, other.starved);
        add(&mut self.requeued_budget, other.requeued_budget);
        add(&mut self.requeued_throttled, other.requeued_throttled);
        add(&mut self.requeued_lease, other.requeued_lease);
        add(&mut self.to_slow_lane, other.to_slow_lane);
        add(&mut self.slow_interval_waits, other.slow_interval_waits);
    }
}

/// What the refreshes of one batch did, per tenant and tenant day, written as one update of
/// each tenant's daily tally when the batch is done (`Refresher::record_tallies`), not one per
/// code: a tenant whose codes are refreshed a thousand times a second would otherwise write
/// its tally as often (DynamoDB serves one key at most 1,000 write units a second; the store
/// also spreads a tenant's tally over shards). The batch's put-offs for budget or throttling,
/// every tenant's together, are the platform's minute count: one write per batch.
#[derive(Debug, Default)]
pub struct Tallies(Mutex<Counted>);

#[derive(Debug, Default)]
struct Counted {
    days: BTreeMap<(TenantId, String), Tally>,
    requeues: Requeues,
}

/// Refreshes put off because a budget was spent or WeCom throttled, platform-wide: the
/// operator's "throttled requeues" (`CodeRecords::record_requeues`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Requeues {
    pub budget: u32,
    pub throttled: u32,
}

impl Tallies {
    fn add(&self, tenant: &TenantId, day: String, tally: &Tally) {
        if tally.is_empty() {
            return;
        }
        let mut tallies = self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        tallies
            .days
            .entry((tenant.clone(), day))
            .or_default()
            .absorb(tally);
    }

    fn add_requeues(&self, requeues: Requeues) {
        let mut tallies = self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let total = &mut tallies.requeues;
        total.budget = total.budget.saturating_add(requeues.budget);
        total.throttled = total.throttled.saturating_add(requeues.throttled);
    }

    fn into_counted(self) -> Counted {
        self.0
            .into_inner()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Pushed(Vec<StaffId>),
    /// The recomputed list equals the last pushed one: no call.
    Unchanged,
    /// Nobody eligible and no fallback: nothing pushed, alert raised.
    Starved,
    /// No such tenant or code (deleted, or a reason for a code that never existed).
    CodeNotFound,
    /// The code exists but its contact way is not created yet; its creation sends a reason.
    NotCreated,
    /// WeCom answered 41044: the code is marked gone and dirty, and an alert raised.
    CodeGone,
    /// The operator's `all` switch sheds the code to the slow queue: its reasons are
    /// republished there, nothing read or called.
    ToSlowLane,
    /// The tenant is paused (WeCom refuses its credentials, its address or its app's
    /// permission; `crate::tenants::TenantPause`): nothing called, the reasons dropped. Every
    /// code of the tenant is recomputed from its facts when a probe resumes it.
    Paused,
    /// Not done now and not a failure: the reasons wait `retry_after_ms` in a retry queue.
    PutOff {
        cause: PutOffCause,
        retry_after_ms: u64,
    },
}

/// Why a refresh was put off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PutOffCause {
    /// The tenant's budget for the window is spent (rule 6).
    Budget,
    /// WeCom answered 45009 or 45033.
    Throttled,
    /// Another writer holds the code's lease, or too little of ours is left for a call.
    LeaseBusy,
    /// The lease was taken over while this writer pushed: its record was refused. WeCom may
    /// hold this writer's list rather than the recorded one, so the next refresh pushes even
    /// an unchanged list (`resync`).
    LeaseLost,
    /// The slow lane keeps its interval between two pushes of the code.
    SlowInterval,
    /// Staff WeCom refuses were still being found after several rounds.
    Unsettled,
    /// The invocation's deadline comes before another WeCom call could end: the code goes
    /// back to refresh.fifo at once, neither failed nor throttled.
    OutOfTime,
}

impl PutOffCause {
    /// The next refresh must push even a list the record says WeCom has.
    pub fn needs_resync(self) -> bool {
        self == Self::LeaseLost
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RefreshError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("WeCom refused or failed the push: {0}")]
    WeCom(#[from] WeComError),
}

/// Most WeCom calls one refresh makes while finding which listed staff WeCom refuses; the
/// rest is found by the next refresh (each call is charged to the budget all the same).
const MAX_PROBES: usize = 10;
/// Recompute-and-push rounds after staff were found unusable.
const MAX_ROUNDS: usize = 3;
/// Most acquisition links one refresh creates; the rest are owed to a later one.
const MAX_LINKS_PER_REFRESH: usize = 5;

/// Why one budgeted push did not go through.
enum PushFailure {
    Budget(u64),
    /// Too little of the lease is left to cover a call, or the record was refused.
    Lease(PutOffCause),
    WeCom(WeComError),
    Store(StoreError),
}

impl From<StoreError> for PushFailure {
    fn from(error: StoreError) -> Self {
        Self::Store(error)
    }
}

/// One refresh of one code, as asked by its reasons.
#[derive(Debug, Clone, Copy)]
pub struct RefreshRequest<'a> {
    pub tenant: &'a TenantId,
    pub code: &'a CodeId,
    /// When the facts behind the coalesced reasons were written.
    pub fact_at_ms: &'a [u64],
    /// The lane whose queue delivered the reasons.
    pub lane: Lane,
    /// A writer lost its lease after a push: push even if the record says WeCom has the list.
    pub resync: bool,
    /// When the work must be done (epoch ms): the invocation's deadline less what the handler
    /// needs to requeue and answer. No WeCom call starts that could end after it.
    pub deadline_ms: u64,
}

impl RefreshRequest<'_> {
    /// Whether a call that may take `call_ms` ends before the deadline.
    fn leaves_time_for(&self, now_ms: u64, call_ms: u64) -> bool {
        now_ms.saturating_add(call_ms) < self.deadline_ms
    }
}

/// The refresh of one code while it holds the lease.
struct LeasedRefresh<'a> {
    asked: RefreshRequest<'a>,
    lease: Lease,
    /// The last record write gave the lease back already.
    released: AtomicBool,
}

pub struct Refresher<F, P, B> {
    facts: F,
    pusher: P,
    budget: B,
    clock: Clock,
    lanes: LanePolicy,
    lease_times: LeaseTimes,
    fan_outs: Option<Arc<dyn FanOutQueue>>,
    /// Where a tenant's pause is announced (the team's group robot), if anywhere.
    robot: Option<Arc<dyn GroupRobot>>,
    /// Tenants whose budget refused a push, until their window reopens, with their zone: their
    /// other codes are put off without a read (rule 6 is about spending; this spends nothing
    /// and only saves the reads a refusal would cost again). Per container, never stored.
    budget_spent: Mutex<HashMap<TenantId, (u64, Timezone)>>,
}

impl<F, P, B> Refresher<F, P, B>
where
    F: CodeFacts + CodeRecords + FailureMarks + DirtyMarks + CodeLeases + TenantPauses,
    P: ContactWayPusher + AcquisitionLinks,
    B: WeComBudget,
{
    pub fn new(
        facts: F,
        pusher: P,
        budget: B,
        clock: Clock,
        lanes: LanePolicy,
        lease_times: LeaseTimes,
    ) -> Self {
        Self {
            facts,
            pusher,
            budget,
            clock,
            lanes,
            lease_times,
            fan_outs: None,
            robot: None,
            budget_spent: Mutex::new(HashMap::new()),
        }
    }

    /// Where a tenant's pause is announced: the team's group robot, once per pause.
    #[must_use]
    pub fn with_robot(mut self, robot: impl GroupRobot + 'static) -> Self {
        self.robot = Some(Arc::new(robot));
        self
    }

    /// Where the fan-out to other codes goes: a staff member WeCom refuses is recomputed away
    /// from every code they sit on, not only the one whose push found out. Expanding it is the
    /// fan-out function's job, so the lease is not spent on a thousand sends.
    #[must_use]
    pub fn with_fan_outs(mut self, fan_outs: impl FanOutQueue + 'static) -> Self {
        self.fan_outs = Some(Arc::new(fan_outs));
        self
    }

    /// The store the refresher reads facts from and records to (its failure marks too).
    pub fn store(&self) -> &F {
        &self.facts
    }

    pub fn now_ms(&self) -> u64 {
        (self.clock)()
    }

    /// One recompute for a code, however many reasons asked for it: lane policy -> lease ->
    /// recompute -> dedupe -> budget -> push -> record (the flow of docs/rules.md).
    pub async fn refresh(&self, asked: RefreshRequest<'_>) -> Result<Outcome, RefreshError> {
        let tallies = Tallies::default();
        let outcome = self.refresh_counted(asked, &tallies).await;
        self.record_tallies(tallies).await;
        outcome
    }

    /// `refresh`, its counts added to `tallies` for the caller to record with the rest of its
    /// batch (`record_tallies`).
    pub async fn refresh_counted(
        &self,
        asked: RefreshRequest<'_>,
        tallies: &Tallies,
    ) -> Result<Outcome, RefreshError> {
        let span = refresh_span(&asked);
        async {
            let now_ms = (self.clock)();
            let result = self.refresh_leased(asked, now_ms).await;
            self.counted(asked, now_ms, result, tallies)
        }
        .instrument(span)
        .await
    }

    /// `refresh_counted` for each code of one batch, side by side, in their order. What the
    /// codes share is read once for all of them (`CodeFacts::snapshots`: a tenant's profile, a
    /// staff member's facts and day's adds), after every reason of the batch was sent; each
    /// code then goes on alone, under its own lease. A code put off before its read (out of
    /// time, its tenant's budget spent, the slow lane) reads nothing.
    pub async fn refresh_batch(
        &self,
        asks: &[RefreshRequest<'_>],
        tallies: &Tallies,
    ) -> Vec<Result<Outcome, RefreshError>> {
        let now_ms = (self.clock)();
        let before = futures::future::join_all(asks.iter().map(|asked| {
            self.before_snapshot(*asked, now_ms)
                .instrument(refresh_span(asked))
        }))
        .await;
        let mut results: Vec<Option<Leased>> = Vec::with_capacity(asks.len());
        let mut reading = Vec::new();
        for (at, before) in before.into_iter().enumerate() {
            match before {
                Ok(None) => {
                    reading.push(at);
                    results.push(None);
                }
                Ok(Some(ended)) => results.push(Some(Ok(ended))),
                Err(error) => results.push(Some(Err(error))),
            }
        }
        let wanted: Vec<(&TenantId, &CodeId)> = reading
            .iter()
            .map(|&at| (asks[at].tenant, asks[at].code))
            .collect();
        let mut snapshots = self.facts.snapshots(&wanted, now_ms).await.into_iter();
        let read: Vec<(usize, Result<Option<CodeSnapshot>, StoreError>)> = reading
            .iter()
            .map(|&at| {
                let snapshot = snapshots.next().unwrap_or_else(|| {
                    Err(StoreError::new(
                        "table",
                        "a snapshot missing from the batch read",
                    ))
                });
                (at, snapshot)
            })
            .collect();
        let rest = futures::future::join_all(read.into_iter().map(|(at, snapshot)| async move {
            let result = match snapshot {
                Ok(snapshot) => {
                    self.after_snapshot(asks[at], now_ms, snapshot)
                        .instrument(refresh_span(&asks[at]))
                        .await
                }
                Err(error) => Err(error.into()),
            };
            (at, result)
        }))
        .await;
        for (at, result) in rest {
            results[at] = Some(result);
        }
        asks.iter()
            .zip(results)
            .map(|(asked, result)| {
                let result = result.unwrap_or_else(|| {
                    Err(StoreError::new("table", "a code of the batch was not refreshed").into())
                });
                let _entered = refresh_span(asked).entered();
                self.counted(*asked, now_ms, result, tallies)
            })
            .collect()
    }

    /// The outcome of one refresh that began at `now_ms`, counted in `tallies` and the
    /// metrics.
    fn counted(
        &self,
        asked: RefreshRequest<'_>,
        now_ms: u64,
        result: Leased,
        tallies: &Tallies,
    ) -> Result<Outcome, RefreshError> {
        let (outcome, timezone) = result?;
        let reasons = u32::try_from(asked.fact_at_ms.len()).unwrap_or(u32::MAX);
        let mut tally = Tally::default();
        match &outcome {
            Outcome::Pushed(_) => {
                tally.reasons = reasons;
                tally.recomputes = 1;
                tally.pushes = 1;
            }
            Outcome::Unchanged => {
                tally.reasons = reasons;
                tally.recomputes = 1;
                tally.unchanged = 1;
            }
            Outcome::Starved => {
                tally.reasons = reasons;
                tally.recomputes = 1;
                tally.starved = 1;
            }
            Outcome::CodeNotFound | Outcome::NotCreated | Outcome::CodeGone | Outcome::Paused => {
                tally.reasons = reasons;
            }
            // Put-off reasons are counted when they are finally refreshed; the put-off itself
            // is counted by why.
            Outcome::ToSlowLane => tally.to_slow_lane = 1,
            Outcome::PutOff { cause, .. } => match cause {
                PutOffCause::Budget => tally.requeued_budget = 1,
                PutOffCause::Throttled => tally.requeued_throttled = 1,
                PutOffCause::LeaseBusy | PutOffCause::LeaseLost => tally.requeued_lease = 1,
                PutOffCause::SlowInterval => tally.slow_interval_waits = 1,
                PutOffCause::Unsettled | PutOffCause::OutOfTime => {}
            },
        }
        crate::telemetry::refreshed(
            asked.tenant,
            &[
                (metric::REFRESH_REASONS, tally.reasons),
                (metric::RECOMPUTES, tally.recomputes),
                (metric::PUSHES, tally.pushes),
                (metric::UNCHANGED_LISTS, tally.unchanged),
                (metric::STARVED_CODES, tally.starved),
                (metric::BUDGET_REFUSALS, tally.requeued_budget),
                (metric::WECOM_THROTTLED, tally.requeued_throttled),
                (metric::BUSY_LEASES, tally.requeued_lease),
                (metric::SLOW_LANE_REPUBLISHES, tally.to_slow_lane),
            ],
        );
        tallies.add_requeues(Requeues {
            budget: tally.requeued_budget,
            throttled: tally.requeued_throttled,
        });
        // Put off before the snapshot (slow lane, lease busy), the tenant's day is unknown and
        // nothing is counted.
        let Some(timezone) = timezone else {
            return Ok(outcome);
        };
        tallies.add(
            asked.tenant,
            crate::tenants::tenant_day(now_ms, timezone),
            &tally,
        );
        Ok(outcome)
    }

    /// Adds what `tallies` counted to each tenant's daily tally item, one write per tenant and
    /// day, and the batch's put-offs to the platform's minute, one write.
    pub async fn record_tallies(&self, tallies: Tallies) {
        let Counted { days, requeues } = tallies.into_counted();
        // Counters are for people; a failure to count must not fail (and so repeat) a push.
        for ((tenant, day), tally) in days {
            if let Err(error) = self.facts.record_tally(&tenant, &day, &tally).await {
                tracing::warn!(tenant = %tenant, error = %error, "refresh tally not recorded");
            }
        }
        if requeues != Requeues::default() {
            let now_ms = self.now_ms();
            if let Err(error) = self.facts.record_requeues(now_ms, requeues).await {
                tracing::warn!(error = %error, "requeue count not recorded");
            }
        }
    }

    /// The refresh up to its outcome, and the tenant's timezone when the tenant was found
    /// (its day names the tally).
    async fn refresh_leased(&self, asked: RefreshRequest<'_>, now_ms: u64) -> Leased {
        if let Some(ended) = self.before_snapshot(asked, now_ms).await? {
            return Ok(ended);
        }
        let snapshot = self
            .facts
            .snapshot(asked.tenant, asked.code, now_ms)
            .await?;
        self.after_snapshot(asked, now_ms, snapshot).await
    }

    /// What ends a refresh before its snapshot is read: too little time left, the tenant's
    /// budget known spent, or the operator's `all` switch shedding the code to the slow
    /// queue. `None` when the snapshot is to be read.
    async fn before_snapshot(
        &self,
        asked: RefreshRequest<'_>,
        now_ms: u64,
    ) -> Result<Option<(Outcome, Option<Timezone>)>, RefreshError> {
        // A code that could not make even one call before the deadline is not started: its
        // lease would only hold the next writer off.
        if !asked.leaves_time_for(now_ms, self.lease_times.call_ms) {
            let outcome = Outcome::PutOff {
                cause: PutOffCause::OutOfTime,
                retry_after_ms: 0,
            };
            return Ok(Some((outcome, None)));
        }
        if let Some((retry_after_ms, timezone)) = self.budget_spent_for(asked.tenant, now_ms) {
            tracing::debug!(
                retry_after_ms,
                "the tenant's budget is spent until its window reopens; requeued unread"
            );
            let outcome = Outcome::PutOff {
                cause: PutOffCause::Budget,
                retry_after_ms,
            };
            return Ok(Some((outcome, Some(timezone))));
        }
        // The operator's `all` switch sheds load before anything is read; the age-based policy
        // is decided from the snapshot, which holds the code's age (`lane_of`).
        if asked.lane == Lane::Fast && self.lanes.sheds(asked.tenant) {
            return Ok(Some((Outcome::ToSlowLane, None)));
        }
        Ok(None)
    }

    /// The refresh from its snapshot on.
    ///
    /// The snapshot is read before the lease: a code whose lease is free and whose recompute
    /// leaves nothing to write (WeCom has the list, the rotation is kept, no mark) is done
    /// without taking it. Otherwise the lease is taken only if nobody took it since the read
    /// (`LeaseSeen::acquisitions`), so no writer pushed in between and the snapshot is as good
    /// as one read under the lease; when somebody did, it is read again under the lease.
    async fn after_snapshot(
        &self,
        asked: RefreshRequest<'_>,
        now_ms: u64,
        snapshot: Option<CodeSnapshot>,
    ) -> Leased {
        let (tenant, code) = (asked.tenant, asked.code);
        let Some(snapshot) = snapshot else {
            return Ok((Outcome::CodeNotFound, None));
        };
        let timezone = snapshot.profile.timezone;
        if snapshot.tenant_paused.is_some() {
            tracing::debug!("the tenant is paused; nothing called");
            return Ok((Outcome::Paused, Some(timezone)));
        }
        if snapshot.lease.free_at(now_ms) && nothing_to_write(asked.resync, &snapshot) {
            return Ok((Outcome::Unchanged, Some(timezone)));
        }
        let probe_config_id = snapshot.code.config_id.clone().unwrap_or_default();
        let holder = Lease::new_holder();
        let duration_ms = self.lease_times.duration_ms;
        let seen = Some(snapshot.lease.acquisitions);
        let (lease, snapshot) = match self
            .facts
            .acquire(tenant, code, &holder, now_ms, duration_ms, seen)
            .await?
        {
            Acquired::LeasedRefresh(lease) => (lease, snapshot),
            Acquired::Busy { retry_after_ms } => return Ok((lease_busy(retry_after_ms), None)),
            Acquired::TakenSince => match self.lease_and_reread(asked, &holder, now_ms).await? {
                Ok(leased) => leased,
                Err(outcome) => return Ok((outcome, None)),
            },
        };
        let held = LeasedRefresh {
            asked,
            lease,
            released: AtomicBool::new(false),
        };
        let result = self.refresh_held(&held, snapshot, now_ms).await;
        self.release(&held).await;
        let result = match result {
            Err(RefreshError::WeCom(error)) if error.class().pauses_tenant() => self
                .pause(tenant, &error, &probe_config_id)
                .await
                .map(|()| (Outcome::Paused, Some(timezone))),
            other => other,
        };
        if let Ok((
            Outcome::PutOff {
                cause: PutOffCause::Budget | PutOffCause::Throttled,
                retry_after_ms,
            },
            _,
        )) = &result
        {
            self.remember_budget_spent(tenant, now_ms + retry_after_ms, timezone);
        }
        result
    }

    async fn refresh_held(
        &self,
        held: &LeasedRefresh<'_>,
        snapshot: CodeSnapshot,
        now_ms: u64,
    ) -> Result<(Outcome, Option<Timezone>), RefreshError> {
        let (tenant, code) = (held.asked.tenant, held.asked.code);
        let timezone = snapshot.profile.timezone;
        let dirty = snapshot.dirty_since_ms.is_some();
        let outcome = self.refresh_snapshot(held, snapshot, now_ms).await?;
        if dirty && matches!(outcome, Outcome::Pushed(_) | Outcome::Starved) {
            self.clear_dirty(tenant, code, now_ms, timezone).await;
        }
        Ok((outcome, Some(timezone)))
    }

    /// The lease taken whoever took it before, and the snapshot read again under it; the
    /// outcome instead when the lease is busy or the code is gone.
    async fn lease_and_reread(
        &self,
        asked: RefreshRequest<'_>,
        holder: &str,
        now_ms: u64,
    ) -> Result<Result<(Lease, CodeSnapshot), Outcome>, RefreshError> {
        let (tenant, code) = (asked.tenant, asked.code);
        let duration_ms = self.lease_times.duration_ms;
        let lease = match self
            .facts
            .acquire(tenant, code, holder, now_ms, duration_ms, None)
            .await?
        {
            Acquired::LeasedRefresh(lease) => lease,
            Acquired::Busy { retry_after_ms } => return Ok(Err(lease_busy(retry_after_ms))),
            Acquired::TakenSince => return Ok(Err(lease_busy(0))),
        };
        let reread = self.facts.snapshot(tenant, code, now_ms).await;
        if let Ok(Some(snapshot)) = reread {
            return Ok(Ok((lease, snapshot)));
        }
        let held = LeasedRefresh {
            asked,
            lease,
            released: AtomicBool::new(false),
        };
        self.release(&held).await;
        match reread {
            Ok(_) => Ok(Err(Outcome::CodeNotFound)),
            Err(error) => Err(error.into()),
        }
    }

    /// Gives the lease back unless a record write did already.
    async fn release(&self, held: &LeasedRefresh<'_>) {
        if held.released.load(Ordering::Relaxed) {
            return;
        }
        let (tenant, code) = (held.asked.tenant, held.asked.code);
        // An unreleased lease only delays the next writer until it expires.
        if let Err(error) = self.facts.release(tenant, code, &held.lease).await {
            tracing::warn!(error = %error, "code lease not released; it expires on its own");
        }
    }

    /// The time left until the tenant's budget window reopens, and its zone, when a refusal
    /// in this container said it was spent.
    fn budget_spent_for(&self, tenant: &TenantId, now_ms: u64) -> Option<(u64, Timezone)> {
        let mut spent = self.budget_spent.lock().unwrap_or_else(|e| e.into_inner());
        match spent.get(tenant) {
            Some(&(until_ms, timezone)) if until_ms > now_ms => Some((until_ms - now_ms, timezone)),
            Some(_) => {
                spent.remove(tenant);
                None
            }
            None => None,
        }
    }

    fn remember_budget_spent(&self, tenant: &TenantId, until_ms: u64, timezone: Timezone) {
        let mut spent = self.budget_spent.lock().unwrap_or_else(|e| e.into_inner());
        spent.insert(tenant.clone(), (until_ms, timezone));
    }

    /// A refresh that began at `began_ms`, after the code's mark, has completed: WeCom holds
    /// the recompute of facts read after the mark (or nobody is eligible, which has its own
    /// alert). A mark made since stays.
    async fn clear_dirty(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        began_ms: u64,
        timezone: Timezone,
    ) {
        match self.facts.clear_dirty(tenant, code, began_ms).await {
            Ok(Some(why)) => {
                tracing::info!(why = why.map(DirtyWhy::label), "dirty mark cleared");
                if why.is_some_and(DirtyWhy::found_by_read_back) {
                    let day = crate::tenants::tenant_day(began_ms, timezone);
                    if let Err(error) = self.facts.count_repaired(tenant, &day, code).await {
                        tracing::warn!(error = %error, "drift repair not counted");
                    }
                }
            }
            Ok(None) => {}
            // The mark stays: the sweep resyncs the code once more, which costs a push at most.
            Err(error) => tracing::warn!(error = %error, "dirty mark not cleared"),
        }
    }

    async fn refresh_snapshot(
        &self,
        held: &LeasedRefresh<'_>,
        mut snapshot: CodeSnapshot,
        now_ms: u64,
    ) -> Result<Outcome, RefreshError> {
        let (tenant, code) = (held.asked.tenant, held.asked.code);
        let Some(config_id) = snapshot.code.config_id.clone() else {
            return Ok(Outcome::NotCreated);
        };
        let mut pushed = None;
        let mut resync = held.asked.resync || snapshot.dirty_since_ms.is_some();
        for _ in 0..MAX_ROUNDS {
            let membership = snapshot.recompute();
            let Some(users) = membership.users() else {
                return self.starved(held, &snapshot, now_ms).await;
            };
            let users = users.to_vec();
            let rotation = match snapshot.rotation(&membership) {
                Some(slots) => Some(self.linked(held, &mut snapshot, slots).await?),
                None => None,
            };
            if !resync && snapshot.wecom_has(&users) {
                if !self
                    .keep_rotation(held, &snapshot, rotation.as_ref())
                    .await?
                {
                    return Ok(lease_lost());
                }
                return Ok(pushed.map_or(Outcome::Unchanged, Outcome::Pushed));
            }
            if let Some(put_off) = self.slow_lane_wait(held, &snapshot, now_ms) {
                return Ok(put_off);
            }
            resync = false;
            let fallback = matches!(membership, Membership::Fallback(_));
            let push = Push {
                held,
                config_id: &config_id,
                fallback,
                rotation,
            };
            // The refresh ends with this push when it is taken: its record gives the lease
            // back. A dirty code's mark is cleared after it, which needs no lease.
            let failure = match self
                .push(&push, &mut snapshot, &users, AfterRecord::Release)
                .await
            {
                Ok(()) => return Ok(Outcome::Pushed(users)),
                Err(failure) => failure,
            };
            let error = match failure {
                PushFailure::WeCom(error) if error.class() == FailureClass::StaffUnusable => error,
                other => return self.settle(tenant, code, other, now_ms).await,
            };
            match self
                .find_unusable(&push, &mut snapshot, &users, &error)
                .await
            {
                Ok(Some(list)) => pushed = Some(list),
                Ok(None) => {}
                Err(failure) => return self.settle(tenant, code, failure, now_ms).await,
            }
        }
        // Still not settled after several rounds: let the next reason carry on.
        Ok(Outcome::PutOff {
            cause: PutOffCause::Unsettled,
            retry_after_ms: 0,
        })
    }

    /// Nobody is eligible and there is no usable fallback: the last list stays, the code is
    /// recorded starved once, and an alert is raised.
    async fn starved(
        &self,
        held: &LeasedRefresh<'_>,
        snapshot: &CodeSnapshot,
        now_ms: u64,
    ) -> Result<Outcome, RefreshError> {
        let (tenant, code) = (held.asked.tenant, held.asked.code);
        tracing::error!(
            alert = "code_starved",
            "nobody is eligible and the code has no usable fallback; the last list stays"
        );
        // A code the landing page serves (or served until now) shows visitors it is starved.
        let on_page = snapshot.code.config.family.rotates()
            || snapshot
                .last_pushed
                .as_ref()
                .is_some_and(|p| p.rotation.is_some());
        if !snapshot.last_pushed.as_ref().is_some_and(|p| p.starved)
            && self
                .facts
                .record_starved(tenant, code, &held.lease, now_ms, on_page)
                .await?
                == FencedWrite::LeaseLost
        {
            return Ok(lease_lost());
        }
        Ok(Outcome::Starved)
    }

    /// WeCom already has the list: only the landing page's rotation may need recording (a
    /// quota member's share shrinks with each add, or the code stopped rotating). `false` when
    /// the lease was lost.
    async fn keep_rotation(
        &self,
        held: &LeasedRefresh<'_>,
        snapshot: &CodeSnapshot,
        rotation: Option<&Vec<RotationSlot>>,
    ) -> Result<bool, RefreshError> {
        let stored = snapshot
            .last_pushed
            .as_ref()
            .and_then(|p| p.rotation.as_ref());
        // Also when the code stopped rotating (edited to native with the same list): its old
        // rotation must not keep routing visitors.
        if rotation == stored {
            return Ok(true);
        }
        let (tenant, code) = (held.asked.tenant, held.asked.code);
        let recorded = self
            .facts
            .record_rotation(
                tenant,
                code,
                &held.lease,
                snapshot.wecom_list(),
                rotation.map(Vec::as_slice),
            )
            .await?;
        Ok(recorded != FencedWrite::LeaseLost)
    }

    /// The rotation with each member's acquisition link, created for members without one (each
    /// creation budgeted, at most `MAX_LINKS_PER_REFRESH`, each within the lease and the
    /// deadline). A member whose link could not be created now is left out of the rotation
    /// (never sent a visitor without a way to count the add), and the code is marked dirty, so
    /// the sweep brings it back through this writer (rule 11).
    async fn linked(
        &self,
        held: &LeasedRefresh<'_>,
        snapshot: &mut CodeSnapshot,
        slots: Vec<RotationSlot>,
    ) -> Result<Vec<RotationSlot>, RefreshError> {
        let (tenant, code) = (held.asked.tenant, held.asked.code);
        let mut created = 0;
        let mut owed: Option<FailureClass> = None;
        let mut linked = Vec::with_capacity(slots.len());
        for mut slot in slots {
            if let Some(url) = snapshot.links.get(&slot.staff) {
                slot.link = Some(url.clone());
                linked.push(slot);
                continue;
            }
            if created >= MAX_LINKS_PER_REFRESH {
                owed.get_or_insert(FailureClass::Throttled);
                continue;
            }
            created += 1;
            match self.create_link(held, snapshot, &slot.staff).await {
                Ok(url) => {
                    snapshot.links.insert(slot.staff.clone(), url.clone());
                    slot.link = Some(url);
                    linked.push(slot);
                }
                Err(PushFailure::Store(error)) => return Err(error.into()),
                Err(failure) => {
                    let class = match failure {
                        PushFailure::WeCom(error) => error.class(),
                        _ => FailureClass::Throttled,
                    };
                    tracing::warn!(staff = %slot.staff, class = class.as_str(), "acquisition link not created; the member is left out of the rotation for now");
                    owed.get_or_insert(class);
                }
            }
        }
        if let Some(class) = owed {
            self.facts
                .mark_dirty(tenant, code, DirtyWhy::RefreshFailed(class), (self.clock)())
                .await?;
        }
        Ok(linked)
    }

    /// One budgeted `create_link` for `staff`, kept on their staff item; answers the URL kept
    /// (another writer's, when it kept one first: ours is deleted again).
    async fn create_link(
        &self,
        held: &LeasedRefresh<'_>,
        snapshot: &CodeSnapshot,
        staff: &StaffId,
    ) -> Result<String, PushFailure> {
        let tenant = held.asked.tenant;
        let now_ms = (self.clock)();
        if !held.asked.leaves_time_for(now_ms, self.lease_times.call_ms)
            || !held.lease.covers(now_ms, self.lease_times.call_ms)
        {
            return Err(PushFailure::Lease(PutOffCause::OutOfTime));
        }
        if let Spend::Exhausted { retry_after_ms, .. } =
            self.budget.spend(tenant, CREATE_LINK, now_ms).await?
        {
            return Err(PushFailure::Budget(retry_after_ms));
        }
        let corp = snapshot.credentials(tenant);
        let link = self
            .pusher
            .create_link(&corp, staff.as_str())
            .await
            .map_err(PushFailure::WeCom)?;
        let kept = self.facts.keep_link(tenant, staff, &link).await?;
        if kept.link_id != link.link_id {
            // Not budgeted, like an orphaned contact way's deletion: a stray link costs more.
            if let Err(error) = self.pusher.delete_link(&corp, &link.link_id).await {
                tracing::warn!(error = %error, "a duplicate acquisition link was not deleted");
            }
        }
        tracing::info!(staff = %staff, "acquisition link created");
        Ok(kept.url)
    }

    /// The lane a refresh runs as: the slow queue's, or the policy's for the code's age. A
    /// quiet code is slow whichever queue its reason came from.
    fn lane_of(&self, held: &LeasedRefresh<'_>, snapshot: &CodeSnapshot, now_ms: u64) -> Lane {
        match held.asked.lane {
            Lane::Slow => Lane::Slow,
            Lane::Fast => self
                .lanes
                .lane_for(held.asked.tenant, Some(snapshot.age), now_ms),
        }
    }

    /// A slow code pushed less than the lane's interval ago is put off until the interval is
    /// over.
    fn slow_lane_wait(
        &self,
        held: &LeasedRefresh<'_>,
        snapshot: &CodeSnapshot,
        now_ms: u64,
    ) -> Option<Outcome> {
        if self.lane_of(held, snapshot, now_ms) != Lane::Slow {
            return None;
        }
        let last = snapshot.last_pushed.as_ref().map(|p| p.pushed_at_ms);
        let wait_ms = self.lanes.slow_wait_ms(last, now_ms)?;
        tracing::debug!(
            wait_ms,
            "slow lane: the code was pushed too recently; requeued"
        );
        Some(Outcome::PutOff {
            cause: PutOffCause::SlowInterval,
            retry_after_ms: wait_ms,
        })
    }

    /// Spends one unit of the tenant's budget, pushes `users`, records the push, and keeps
    /// `snapshot` in step with what WeCom now holds.
    async fn push(
        &self,
        push: &Push<'_>,
        snapshot: &mut CodeSnapshot,
        users: &[StaffId],
        then: AfterRecord,
    ) -> Result<(), PushFailure> {
        let (tenant, code) = (push.held.asked.tenant, push.held.asked.code);
        let now_ms = (self.clock)();
        // A call cut off by the invocation's timeout would leave its reasons to SQS's redrive.
        if !push
            .held
            .asked
            .leaves_time_for(now_ms, self.lease_times.call_ms)
        {
            tracing::info!(
                "the invocation's deadline comes before a WeCom call could end; requeued"
            );
            return Err(PushFailure::Lease(PutOffCause::OutOfTime));
        }
        // A call must end before the lease does, or another writer could take the code and
        // push while this call is still in flight.
        if !push.held.lease.covers(now_ms, self.lease_times.call_ms) {
            tracing::info!("too little of the code's lease is left for a WeCom call; requeued");
            return Err(PushFailure::Lease(PutOffCause::LeaseBusy));
        }
        if let Spend::Exhausted {
            window,
            retry_after_ms,
        } = self
            .budget
            .spend(tenant, UPDATE_CONTACT_WAY, now_ms)
            .await?
        {
            tracing::debug!(?window, retry_after_ms, "no WeCom budget left; requeued");
            return Err(PushFailure::Budget(retry_after_ms));
        }
        let wire: Vec<String> = users.iter().map(|u| u.as_str().to_owned()).collect();
        self.pusher
            .replace_users(&snapshot.credentials(tenant), push.config_id, &wire)
            .await
            .map_err(PushFailure::WeCom)?;
        let record = PushRecord {
            users: users.to_vec(),
            // Completion time: the push latency ends when WeCom accepted.
            pushed_at_ms: (self.clock)(),
            fallback: push.fallback,
            fact_at_ms: push.held.asked.fact_at_ms.to_vec(),
            rotation: push.rotation.clone(),
            on_page: push.rotation.is_some()
                || snapshot
                    .last_pushed
                    .as_ref()
                    .is_some_and(|p| p.rotation.is_some()),
            lane: self.lane_of(push.held, snapshot, now_ms),
        };
        let recorded = self
            .facts
            .record_push(tenant, code, &push.held.lease, &record, then)
            .await?;
        if recorded == FencedWrite::Written && then == AfterRecord::Release {
            push.held.released.store(true, Ordering::Relaxed);
        }
        if recorded == FencedWrite::LeaseLost {
            tracing::warn!(
                "the code's lease was taken over during the push; this writer's record was refused"
            );
            return Err(PushFailure::Lease(PutOffCause::LeaseLost));
        }
        // Per lane the push ran as (a quiet code's is the slow lane's, whichever queue), as
        // its history entry says.
        if let Some(oldest) = record.fact_at_ms.iter().min() {
            let latency_ms = record.pushed_at_ms.saturating_sub(*oldest);
            crate::telemetry::fact_to_push(latency_ms, record.lane);
        }
        snapshot.last_pushed = Some(PushedList {
            users: record.users,
            pushed_at_ms: record.pushed_at_ms,
            starved: false,
            rotation: record.rotation,
        });
        Ok(())
    }

    /// WeCom refused `users` because of some listed user, without saying which (docs/wecom-api.md §6). The
    /// suspects are the users WeCom does not hold yet (it accepted the others before), or
    /// everyone when there are none; they are tried one at a time on top of the others, and
    /// each one WeCom refuses is marked unusable. Answers the list left on WeCom, if any
    /// probe pushed one.
    async fn find_unusable(
        &self,
        push: &Push<'_>,
        snapshot: &mut CodeSnapshot,
        users: &[StaffId],
        error: &WeComError,
    ) -> Result<Option<Vec<StaffId>>, PushFailure> {
        let errcode = error.errcode().unwrap_or_default();
        let held = snapshot.wecom_list().to_vec();
        let added: Vec<StaffId> = users
            .iter()
            .filter(|u| !held.contains(u))
            .cloned()
            .collect();
        let (mut accepted, mut suspects): (Vec<StaffId>, Vec<StaffId>) =
            if added.is_empty() || added.len() == users.len() {
                (Vec::new(), users.to_vec())
            } else {
                let base = users
                    .iter()
                    .filter(|u| !added.contains(u))
                    .cloned()
                    .collect();
                (base, added)
            };
        let mut left_on_wecom = None;
        let mut probes = 0;
        if !accepted.is_empty() {
            probes += 1;
            match self
                .push(push, snapshot, &accepted, AfterRecord::Keep)
                .await
            {
                Ok(()) => left_on_wecom = Some(accepted.clone()),
                Err(PushFailure::WeCom(e)) if e.class() == FailureClass::StaffUnusable => {
                    // The refusal is among the users WeCom held: suspect everyone.
                    accepted.clear();
                    suspects = users.to_vec();
                }
                Err(other) => return Err(other),
            }
        }
        // One suspect on top of an accepted list (or alone) is the one the first push failed on.
        if suspects.len() == 1 {
            self.mark_unusable(push.held, snapshot, &suspects[0], errcode)
                .await?;
            return Ok(left_on_wecom);
        }
        for suspect in suspects {
            if probes >= MAX_PROBES {
                break;
            }
            probes += 1;
            let trial: Vec<StaffId> = users
                .iter()
                .filter(|u| accepted.contains(u) || **u == suspect)
                .cloned()
                .collect();
            match self.push(push, snapshot, &trial, AfterRecord::Keep).await {
                Ok(()) => {
                    accepted = trial.clone();
                    left_on_wecom = Some(trial);
                }
                Err(PushFailure::WeCom(e)) if e.class() == FailureClass::StaffUnusable => {
                    self.mark_unusable(
                        push.held,
                        snapshot,
                        &suspect,
                        e.errcode().unwrap_or(errcode),
                    )
                    .await?;
                }
                Err(other) => return Err(other),
            }
        }
        Ok(left_on_wecom)
    }

    async fn mark_unusable(
        &self,
        held: &LeasedRefresh<'_>,
        snapshot: &mut CodeSnapshot,
        staff: &StaffId,
        errcode: i64,
    ) -> Result<(), StoreError> {
        tracing::error!(
            alert = "staff_unusable",
            staff = %staff,
            errcode,
            "WeCom refuses this staff member on contact ways; they are excluded on this tenant"
        );
        let now_ms = (self.clock)();
        let tenant = held.asked.tenant;
        self.facts
            .mark_staff_unusable(tenant, staff, errcode, now_ms)
            .await?;
        if let Some(facts) = snapshot.staff.get_mut(staff) {
            facts.rejected_by_wecom = true;
        }
        if let Some(fan_outs) = &self.fan_outs {
            // It reaches this code too: one more recompute, which finds the list unchanged.
            let fan_out = FanOut::new(
                tenant.clone(),
                vec![Source::Staff {
                    staff: staff.clone(),
                }],
                Cause::StaffChanged,
                now_ms,
                format!("wecom-refused:{staff}:{errcode}"),
            );
            // The mark is written; a code not told now finds out at its own next push.
            if let Err(error) = fan_outs.send(&fan_out).await {
                tracing::warn!(error = %error, "other codes of an unusable staff member not sent for a recompute");
            }
        }
        Ok(())
    }

    /// Pauses the tenant WeCom refused with `error` (rule 9): of every refresh that meets the
    /// refusal, the first records the pause, logs the alert and tells the group robot; the
    /// others only end.
    async fn pause(
        &self,
        tenant: &TenantId,
        error: &WeComError,
        probe_config_id: &str,
    ) -> Result<(), RefreshError> {
        let pause = TenantPause::new(
            error.class(),
            error.errcode(),
            &self.budget.address_of(tenant),
            probe_config_id,
            (self.clock)(),
        );
        if crate::tenants::pause_tenant(&self.facts, tenant, &pause).await? {
            if let Some(robot) = &self.robot {
                if let Err(failure) = robot.post_markdown(&pause.markdown(tenant)).await {
                    tracing::warn!(error = %failure, "the group robot did not take the pause's alert; the log line stands");
                }
            }
        }
        Ok(())
    }

    /// The outcome of a push that failed for a reason the refresh does not resolve itself.
    async fn settle(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        failure: PushFailure,
        now_ms: u64,
    ) -> Result<Outcome, RefreshError> {
        let error = match failure {
            PushFailure::Budget(retry_after_ms) => {
                return Ok(Outcome::PutOff {
                    cause: PutOffCause::Budget,
                    retry_after_ms,
                })
            }
            PushFailure::Lease(cause) => {
                return Ok(Outcome::PutOff {
                    cause,
                    retry_after_ms: 0,
                })
            }
            PushFailure::Store(error) => return Err(error.into()),
            PushFailure::WeCom(error) => error,
        };
        match error.class() {
            FailureClass::Throttled => {
                // 45009 blocks for the rest of WeCom's window (docs/wecom-api.md §7), which it
                // does not name: the budget holds the window it must be for every worker of the
                // tenant (the minute, or the hour when the minute did not help), so the tenant's
                // codes wait without calls. 45033 is about concurrency, which the next minute
                // relieves as well.
                let now_ms = (self.clock)();
                let (window, retry_after_ms) =
                    match self.budget.hold(tenant, UPDATE_CONTACT_WAY, now_ms).await? {
                        Spend::Exhausted {
                            window,
                            retry_after_ms,
                        } => (window, retry_after_ms),
                        Spend::Granted => (Window::Minute, reopens_in(Window::Minute, now_ms)),
                    };
                tracing::warn!(
                    errcode = error.errcode(),
                    ?window,
                    retry_after_ms,
                    "WeCom throttled the push; the tenant's window is held and the code requeued"
                );
                Ok(Outcome::PutOff {
                    cause: PutOffCause::Throttled,
                    retry_after_ms,
                })
            }
            FailureClass::CodeGone => {
                tracing::error!(
                    alert = "code_gone",
                    errcode = error.errcode(),
                    "WeCom no longer knows this code's contact way; it is not refreshed again"
                );
                self.facts.mark_code_gone(tenant, code, now_ms).await?;
                self.facts
                    .mark_dirty(
                        tenant,
                        code,
                        DirtyWhy::RefreshFailed(FailureClass::CodeGone),
                        now_ms,
                    )
                    .await?;
                Ok(Outcome::CodeGone)
            }
            _ => Err(error.into()),
        }
    }
}

/// What every push of one refresh shares.
struct Push<'a> {
    held: &'a LeasedRefresh<'a>,
    config_id: &'a str,
    fallback: bool,
    rotation: Option<Vec<RotationSlot>>,
}

fn lease_busy(retry_after_ms: u64) -> Outcome {
    tracing::debug!(
        retry_after_ms,
        "another writer holds the code's lease; requeued"
    );
    Outcome::PutOff {
        cause: PutOffCause::LeaseBusy,
        retry_after_ms,
    }
}

/// The refresh would write nothing: no resync asked or marked, the contact way exists, WeCom
/// has the recomputed list and the rotation kept is the recomputed one, every member linked.
/// Read without the lease, this is safe: a writer holding the lease would have been seen in
/// the snapshot, and one taking it after the read reads facts newer than this reason's.
pub fn nothing_to_write(resync: bool, snapshot: &CodeSnapshot) -> bool {
    if resync || snapshot.dirty_since_ms.is_some() || snapshot.code.config_id.is_none() {
        return false;
    }
    let membership = snapshot.recompute();
    let Some(users) = membership.users() else {
        return false;
    };
    if !snapshot.wecom_has(users) {
        return false;
    }
    let stored = snapshot
        .last_pushed
        .as_ref()
        .and_then(|p| p.rotation.as_ref());
    match snapshot.rotation(&membership) {
        None => stored.is_none(),
        Some(slots) => {
            let linked: Option<Vec<RotationSlot>> = slots
                .into_iter()
                .map(|mut slot| {
                    slot.link = Some(snapshot.links.get(&slot.staff)?.clone());
                    Some(slot)
                })
                .collect();
            linked.is_some_and(|linked| Some(&linked) == stored)
        }
    }
}

fn lease_lost() -> Outcome {
    tracing::warn!("the code's lease was taken over; this writer's record was refused");
    Outcome::PutOff {
        cause: PutOffCause::LeaseLost,
        retry_after_ms: 0,
    }
}

#[cfg(test)]
mod tests;

/// The span every line of one code's refresh is logged in.
fn refresh_span(asked: &RefreshRequest<'_>) -> tracing::Span {
    tracing::info_span!("refresh", tenant = %asked.tenant, code = %asked.code, reasons = asked.fact_at_ms.len(), lane = ?asked.lane)
}
