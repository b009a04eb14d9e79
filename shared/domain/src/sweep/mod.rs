//! The backstop (docs/rules.md rules 8 and 11): a scheduled sweep that finds and repairs what
//! the single writer missed. One run at a time holds the sweep's lease; each run is bounded
//! by its own deadline and leaves a cursor, so a crashed or cut-short run's work is picked
//! up by the next.
//!
//! A run, in order:
//! 1. **Dirty codes** (`crate::dirty`): every mark that is due, by a query. Each code's
//!    contact way is read back (within the tenant's read budget) for the report, then the
//!    code is sent a `resync` reason: the single writer pushes it even if its record says
//!    WeCom has the list, and clears the mark once done. The next resync of a mark is due a
//!    period later, doubling while the code keeps failing.
//!
//!    Then every fan-out mark that is due (a fan-out that gave up on its last receive, by a
//!    query too): the fan-out is sent to the fan-out queue again, from its first code, so
//!    every code it reaches gets a reason and the single writer recomputes each; it is sent
//!    again with the same doubling wait until an expansion that began after the mark
//!    completes and clears it.
//! 2. **Drift read-back**: for each tenant, from the cursor, a sample of its codes (the hour's
//!    read budget spread over the runs, spent from `get_contact_way`'s own per-tenant budget)
//!    is read back and compared with the record and the recompute (`drift::compare`). WeCom
//!    differing from the record marks the code dirty and sends it a resync, through the
//!    single writer. A record behind the facts (`stale`) is what every code with a reason
//!    still queued looks like, so at first sight it is only marked a suspect: due after
//!    `stale_settle_ms`, no resync, carrying its sample's figures; any refresh that begins
//!    after it (the queued reason arriving) clears it. When it comes due (step 1), it is
//!    checked again without WeCom (`drift::record_stale`): caught up, its mark is dropped;
//!    still stale, it is confirmed, and the confirmed of one sample count with that sample's
//!    drifted codes for the guard before any of them is resynced.
//! 3. **Claims that finish** (rule 8): a limit claim of the quota loop whose notification was
//!    never recorded and whose owner's lease has ended (the owning add crashed, or its message
//!    was dead-lettered) is taken over in one conditional write on its owner and lease (a live
//!    claim is never touched) and finished: its codes' reasons, its notification (id: the
//!    claim's id, at least once), its record.
//! 4. **Contact ways never recorded**: a creation intent (recorded before `add_contact_way`,
//!    cleared once the `config_id` is stored) still there after its request ended may hide a
//!    contact way WeCom made when the admin function crashed before recording it. The sweep
//!    lists the corp's contact ways created around the intent's time and deletes those whose
//!    `state` is the code's id but which are not the code's recorded one.
//!
//!    Then the customer-acquisition links (`crate::landing`) of staff who resigned at least
//!    `link_retire_grace_ms` ago: each is taken off its staff item (on condition that they are
//!    still resigned and still hold it, so no later refresh can route to it), then deleted at
//!    WeCom (budgeted); one whose deletion fails waits in the item's retiring slot for the
//!    next run. A rehire before that keeps the link.
//! 5. **The blast-radius guard**: when more than the set share of a tenant's sample differs
//!    from what WeCom holds, or does once its stale records are confirmed, the likely cause is
//!    a bug (in the recompute or the push), not noise. The tenant's repair stops (its marks
//!    stay, no resync is sent), its report says so and an alert is raised, until an operator
//!    resumes it.

mod drift;
mod ports;
#[cfg(test)]
mod tests;

pub use drift::{
    compare, guard_trips, record_stale, sample_size, Difference, DriftCounts, DriftReport,
    GuardTrip,
};
pub use ports::{
    ContactWayReader, CreationIntent, CreationIntents, DirtyIndex, DriftLedger, FanOutIndex,
    LeavingStaff, LinkRetirements, OrphanFinder, SweepRuns, TenantRegistry,
};

use crate::budget::{Spend, WeComBudget, DELETE_LINK, DEL_CONTACT_WAY, GET_CONTACT_WAY};
use crate::codes::{CodeFacts, CodeSnapshot};
use crate::dirty::{next_resync_at, DirtyMark, DirtyMarks, DirtyWhy, FanOutMark, StaleSuspect};
use crate::facts::{
    finish_claim, LimitClaim, QuotaLedger, QuotaNotifier, StaffLedger, TenantProfiles,
};
use crate::ids::CodeId;
use crate::reasons::{Cause, FanOut, FanOutQueue, ReasonQueue, RefreshReason};
use crate::refresh::AcquisitionLinks;
use crate::tenants::{tenant_day, TenantId, Timezone};
use crate::wecom::errors::FailureClass;
use crate::{Clock, StoreError};
use futures::StreamExt;
use std::collections::{HashMap, HashSet};
use std::time::Duration;

/// What a sweep needs from the outside world, named once.
pub trait SweepPorts {
    type Store: CodeFacts
        + DirtyMarks
        + DirtyIndex
        + FanOutIndex
        + DriftLedger
        + SweepRuns
        + TenantRegistry
        + QuotaLedger
        + StaffLedger
        + TenantProfiles
        + CreationIntents
        + LinkRetirements;
    type WeCom: ContactWayReader + OrphanFinder + AcquisitionLinks;
    type Budget: WeComBudget;
    type Reasons: ReasonQueue;
    /// Where a fan-out given up is sent again: the fan-out function's own queue.
    type FanOuts: FanOutQueue;
    type Notifier: QuotaNotifier;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SweepSettings {
    /// The schedule's period: the first wait before a mark is resynced again.
    pub period_ms: u64,
    /// `get_contact_way` calls per tenant per hour (dirty codes first, then the sample).
    pub reads_per_tenant_hour: u32,
    /// The guard trips when more than this share (percent) of a tenant's sample differs...
    pub guard_share_percent: u32,
    /// ...in a sample of at least this many codes.
    pub guard_min_sample: u32,
    /// How long a run's lease outlasts its invocation's deadline (the clocks of Lambda and of
    /// the table's writers may differ by this much). Lambda ends an invocation at its deadline,
    /// so a run is never overtaken while it lives, and a run killed there (a timeout, a crash)
    /// frees the lease moments later, not after a fixed quarter hour.
    pub lease_grace_ms: u64,
    /// Time kept back from the deadline to save the cursor and release the lease.
    pub finish_reserve_ms: u64,
    /// How long a stale record seen by the sample waits before it is checked again and, if
    /// still stale, counted for the guard and resynced: longer than a queued reason takes to
    /// reach its code (a backlog waiting for budget, a slow lane's interval).
    pub stale_settle_ms: u64,
    /// How long after a resignation its acquisition link is deleted: by then every code's
    /// record without the member has landed (a refresh takes seconds; the page of a code whose
    /// refresh keeps failing, which is dirty, may send a visitor to the deleted link, which
    /// WeCom answers with its own error page, never to another member), and a rehire within
    /// it keeps the link.
    pub link_retire_grace_ms: u64,
}

impl SweepSettings {
    pub const DEFAULT: Self = Self {
        period_ms: 5 * 60_000,
        reads_per_tenant_hour: 60,
        guard_share_percent: 20,
        guard_min_sample: 5,
        lease_grace_ms: 30_000,
        finish_reserve_ms: 3_000,
        stale_settle_ms: 20 * 60_000,
        link_retire_grace_ms: 60 * 60_000,
    };
}

/// A creation intent older than this belongs to a request that has ended: API Gateway gives up
/// on a request after 29 s, and the admin function's timeout is shorter.
pub const INTENT_GRACE_MS: u64 = 2 * 60_000;
/// The search around an intent's time: WeCom stamps a creation with its own clock.
const INTENT_WINDOW_SECS: u64 = 120;

/// Marks read per query, and tenants per page of the registry.
const MARKS_PER_PAGE: usize = 100;
const TENANTS_PER_PAGE: usize = 50;
/// Tenants sampled at once: each waits on WeCom most of its time.
const TENANTS_IN_FLIGHT: usize = 8;

/// What one run did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct SweepReport {
    /// Another run held the lease: this one did nothing.
    pub held_elsewhere: bool,
    /// The run's deadline came before its work was done; the next run resumes.
    pub out_of_time: bool,
    pub dirty_due: u32,
    pub resyncs_sent: u32,
    /// Marks of codes that no longer exist (deleted, or gone on WeCom), removed.
    pub marks_dropped: u32,
    /// Marks of tenants whose guard has tripped: kept, no resync sent.
    pub held_by_guard: u32,
    /// Fan-out marks due, and the fan-outs sent to the fan-out queue again.
    pub fan_outs_due: u32,
    pub fan_outs_resent: u32,
    pub tenants_sampled: u32,
    /// Contact ways read back (dirty codes and samples) and how many differed.
    pub read_back: u32,
    pub differing: u32,
    /// Differing sampled codes marked dirty and sent a resync.
    pub repairs_started: u32,
    /// Stale records seen by the sample, marked as suspects (no resync yet).
    pub stale_suspects: u32,
    /// Suspects still stale after the settle period (counted for the guard, then resynced
    /// unless it tripped), and suspects no longer stale (their mark dropped).
    pub stale_confirmed: u32,
    pub stale_settled: u32,
    pub guards_tripped: u32,
    /// Reads refused by a tenant's read budget (the rest of its sample waits for the next run).
    pub budget_refusals: u32,
    /// Reads WeCom failed (the code is read again by a later sample).
    pub read_failures: u32,
    /// Stale limit claims taken over and finished.
    pub claims_finished: u32,
    /// Contact ways created for a code but never recorded, found and deleted.
    pub orphans_deleted: u32,
    /// Acquisition links of resigned staff deleted at WeCom (or found already gone).
    pub links_retired: u32,
}

impl SweepReport {
    /// Adds the counts of a part of the run (one tenant's sample).
    fn absorb(&mut self, part: &SweepReport) {
        self.out_of_time |= part.out_of_time;
        self.dirty_due += part.dirty_due;
        self.resyncs_sent += part.resyncs_sent;
        self.marks_dropped += part.marks_dropped;
        self.held_by_guard += part.held_by_guard;
        self.fan_outs_due += part.fan_outs_due;
        self.fan_outs_resent += part.fan_outs_resent;
        self.tenants_sampled += part.tenants_sampled;
        self.read_back += part.read_back;
        self.differing += part.differing;
        self.repairs_started += part.repairs_started;
        self.stale_suspects += part.stale_suspects;
        self.stale_confirmed += part.stale_confirmed;
        self.stale_settled += part.stale_settled;
        self.guards_tripped += part.guards_tripped;
        self.budget_refusals += part.budget_refusals;
        self.read_failures += part.read_failures;
        self.claims_finished += part.claims_finished;
        self.orphans_deleted += part.orphans_deleted;
        self.links_retired += part.links_retired;
    }
}

/// A read-back of one code.
struct ReadBack {
    difference: Difference,
}

pub struct Sweep<P: SweepPorts> {
    pub store: P::Store,
    pub wecom: P::WeCom,
    pub budget: P::Budget,
    pub reasons: P::Reasons,
    pub fan_outs: P::FanOuts,
    pub notifier: P::Notifier,
    pub clock: Clock,
    pub settings: SweepSettings,
}

/// What one run carries between its steps.
struct Run {
    deadline_ms: u64,
    /// The run's lease, and the lease of each claim it takes over.
    lease_until_ms: u64,
    report: SweepReport,
    /// Each tenant's guard, read once per run.
    guards: HashMap<TenantId, bool>,
}

impl<P: SweepPorts> Sweep<P> {
    fn now_ms(&self) -> u64 {
        (self.clock)()
    }

    /// One run with `budget` of time: takes the lease (or leaves the work to the run that
    /// holds it), resyncs the due dirty codes, then samples the tenants from the cursor.
    pub async fn run(&self, owner: &str, budget: Duration) -> Result<SweepReport, StoreError> {
        let now_ms = self.now_ms();
        let budget_ms = u64::try_from(budget.as_millis()).unwrap_or(u64::MAX);
        let deadline_ms = now_ms
            .saturating_add(budget_ms)
            .saturating_sub(self.settings.finish_reserve_ms);
        let lease_until_ms = now_ms
            .saturating_add(budget_ms)
            .saturating_add(self.settings.lease_grace_ms);
        let Some(cursor) = self.store.acquire(owner, now_ms, lease_until_ms).await? else {
            return Ok(SweepReport {
                held_elsewhere: true,
                ..SweepReport::default()
            });
        };
        let mut run = Run {
            deadline_ms,
            lease_until_ms,
            report: SweepReport::default(),
            guards: HashMap::new(),
        };
        let walked = async {
            self.resync_dirty(&mut run).await?;
            self.resend_fan_outs(&mut run).await?;
            self.finish_claims(owner, &mut run).await?;
            self.delete_orphans(&mut run).await?;
            self.retire_links(&mut run).await?;
            self.sample_tenants(owner, cursor, &mut run).await
        }
        .await;
        // A lease left behind only delays the next run until it expires.
        if let Err(error) = self.store.release(owner).await {
            tracing::warn!(error = %error, "sweep lease not released; it frees itself");
        }
        walked.map(|()| run.report)
    }

    fn out_of_time(&self, run: &mut Run) -> bool {
        if self.now_ms() >= run.deadline_ms {
            run.report.out_of_time = true;
        }
        run.report.out_of_time
    }

    async fn guarded(&self, run: &mut Run, tenant: &TenantId) -> Result<bool, StoreError> {
        if let Some(tripped) = run.guards.get(tenant) {
            return Ok(*tripped);
        }
        let tripped = self.store.guard(tenant).await?.is_some();
        run.guards.insert(tenant.clone(), tripped);
        Ok(tripped)
    }

    /// Step 1: every due mark, a page at a time, until none is due or the time is up. Due
    /// suspects are gathered over the pages and settled once the pages are done, so the
    /// suspects of one sample (alike in due time, so adjacent in the index) are counted
    /// together even when a page ends among them.
    async fn resync_dirty(&self, run: &mut Run) -> Result<(), StoreError> {
        let mut seen: HashSet<(TenantId, CodeId)> = HashSet::new();
        let mut suspects: Vec<DirtyMark> = Vec::new();
        while !self.out_of_time(run) {
            let marks = self.store.due_marks(self.now_ms(), MARKS_PER_PAGE).await?;
            let fresh: Vec<DirtyMark> = marks
                .iter()
                .filter(|m| seen.insert((m.tenant.clone(), m.code.clone())))
                .cloned()
                .collect();
            // A page of marks this run already handled (their reschedule failed): stop.
            if fresh.is_empty() {
                break;
            }
            for mark in fresh {
                if self.out_of_time(run) {
                    break;
                }
                run.report.dirty_due += 1;
                if mark.suspect.is_some() {
                    suspects.push(mark);
                    continue;
                }
                if let Err(error) = self.resync_mark(run, &mark).await {
                    tracing::warn!(tenant = %mark.tenant, code = %mark.code, error = %error, "dirty code not resynced; the next run tries again");
                }
            }
            if marks.len() < MARKS_PER_PAGE {
                break;
            }
        }
        // One tenant's sample: its suspects were all made at that sample's time.
        let mut samples: Vec<((TenantId, u64), Vec<DirtyMark>)> = Vec::new();
        for mark in suspects {
            let sample = (mark.tenant.clone(), mark.marked_at_ms);
            match samples.iter_mut().find(|(key, _)| *key == sample) {
                Some((_, marks)) => marks.push(mark),
                None => samples.push((sample, vec![mark])),
            }
        }
        for ((tenant, _), marks) in samples {
            if self.out_of_time(run) {
                break;
            }
            if let Err(error) = self.settle_suspects(run, &tenant, &marks).await {
                tracing::warn!(tenant = %tenant, error = %error, "stale suspects not settled; the next run tries again");
            }
        }
        Ok(())
    }

    /// The suspects of one tenant's sample, once their settle period is over. Each is checked
    /// again without WeCom (its snapshot recomputed): no longer stale, its mark is dropped;
    /// still stale, it is confirmed. The confirmed count with the sample's drifted codes for
    /// the guard, as they would have had they been known at once; if the guard trips, none
    /// is resynced (they stay as marks the guard holds), else each is resynced as a mark.
    async fn settle_suspects(
        &self,
        run: &mut Run,
        tenant: &TenantId,
        marks: &[DirtyMark],
    ) -> Result<(), StoreError> {
        if self.guarded(run, tenant).await? {
            return self.hold(run, marks.iter()).await;
        }
        let (confirmed, timezone) = self.recheck_suspects(run, tenant, marks).await?;
        if confirmed.is_empty() {
            return Ok(());
        }
        let sample = marks
            .iter()
            .find_map(|mark| mark.suspect)
            .unwrap_or(StaleSuspect {
                sample_read: 0,
                sample_drifted: 0,
            });
        let count = u32::try_from(confirmed.len()).unwrap_or(u32::MAX);
        run.report.stale_confirmed += count;
        if let Some(timezone) = timezone {
            let counts = DriftCounts {
                stale_confirmed: count,
                ..DriftCounts::default()
            };
            let day = tenant_day(self.now_ms(), timezone);
            self.store.add_to_report(tenant, &day, &counts).await?;
        }
        let differing = sample.sample_drifted.saturating_add(count);
        tracing::warn!(tenant = %tenant, confirmed = count, sampled = sample.sample_read, drifted = sample.sample_drifted, "stale records confirmed after their settle period");
        if self
            .trip_guard_if_due(&mut run.report, tenant, sample.sample_read, differing)
            .await?
        {
            run.guards.insert(tenant.clone(), true);
            // Held as plain marks: once resumed, they are resynced, not counted again.
            return self.hold(run, confirmed.into_iter()).await;
        }
        for mark in confirmed {
            self.send_resync(&mut run.report, mark).await?;
            run.report.repairs_started += 1;
        }
        Ok(())
    }

    /// Checks each suspect again against its facts: the marks still stale, and the tenant's
    /// timezone (for its report's day). A suspect whose code is gone is dropped; one that
    /// caught up without us (a reason that raced the mark, a fact changed back) is dropped and
    /// counted repaired, since the sample counted its difference.
    async fn recheck_suspects<'m>(
        &self,
        run: &mut Run,
        tenant: &TenantId,
        marks: &'m [DirtyMark],
    ) -> Result<(Vec<&'m DirtyMark>, Option<Timezone>), StoreError> {
        let now_ms = self.now_ms();
        let mut confirmed = Vec::new();
        let mut timezone = None;
        for mark in marks {
            let Some(snapshot) = self.store.snapshot(tenant, &mark.code, now_ms).await? else {
                self.store.drop_mark(mark).await?;
                run.report.marks_dropped += 1;
                continue;
            };
            timezone = Some(snapshot.profile.timezone);
            if record_stale(&snapshot) {
                confirmed.push(mark);
                continue;
            }
            let day = tenant_day(now_ms, snapshot.profile.timezone);
            self.store.drop_mark(mark).await?;
            self.store.count_repaired(tenant, &day).await?;
            run.report.stale_settled += 1;
            tracing::info!(tenant = %tenant, code = %mark.code, "stale suspect caught up with its facts; mark dropped");
        }
        Ok((confirmed, timezone))
    }

    /// Keeps marks of a tenant whose guard has tripped for the operator's resume: each is
    /// looked at again a period later, no resync sent.
    async fn hold<'m>(
        &self,
        run: &mut Run,
        marks: impl Iterator<Item = &'m DirtyMark>,
    ) -> Result<(), StoreError> {
        let next_ms = self.now_ms() + self.settings.period_ms;
        for mark in marks {
            self.store.resync_sent(mark, mark.resyncs, next_ms).await?;
            run.report.held_by_guard += 1;
        }
        Ok(())
    }

    /// Trips the tenant's guard when `differing` of `sampled` codes is more than its share:
    /// records the trip, counts it and raises the alert. `true` when it tripped.
    async fn trip_guard_if_due(
        &self,
        report: &mut SweepReport,
        tenant: &TenantId,
        sampled: u32,
        differing: u32,
    ) -> Result<bool, StoreError> {
        let settings = &self.settings;
        if !guard_trips(
            sampled,
            differing,
            settings.guard_share_percent,
            settings.guard_min_sample,
        ) {
            return Ok(false);
        }
        let trip = GuardTrip {
            tripped_at_ms: self.now_ms(),
            sampled,
            differing,
        };
        self.store.trip_guard(tenant, &trip).await?;
        report.guards_tripped += 1;
        tracing::error!(alert = "drift_guard_tripped", tenant = %tenant, sampled, differing, "too much of the tenant's sample differs (a recompute bug?): its repair stops until an operator resumes it");
        Ok(true)
    }

    async fn resync_mark(&self, run: &mut Run, mark: &DirtyMark) -> Result<(), StoreError> {
        let now_ms = self.now_ms();
        let Some(snapshot) = self
            .store
            .snapshot(&mark.tenant, &mark.code, now_ms)
            .await?
        else {
            self.store.drop_mark(mark).await?;
            run.report.marks_dropped += 1;
            return Ok(());
        };
        if self.guarded(run, &mark.tenant).await? {
            // Kept for the operator's resume; looked at again a period later.
            self.store
                .resync_sent(mark, mark.resyncs, now_ms + self.settings.period_ms)
                .await?;
            run.report.held_by_guard += 1;
            return Ok(());
        }
        if let Some(read) = self
            .read_back(&mut run.report, &mark.tenant, &mark.code, &snapshot)
            .await?
        {
            let counts = DriftCounts {
                read: 1,
                differing: u32::from(read.difference != Difference::None),
                ..DriftCounts::default()
            };
            let day = tenant_day(now_ms, snapshot.profile.timezone);
            self.store
                .add_to_report(&mark.tenant, &day, &counts)
                .await?;
        }
        self.send_resync(&mut run.report, mark).await
    }

    async fn send_resync(
        &self,
        report: &mut SweepReport,
        mark: &DirtyMark,
    ) -> Result<(), StoreError> {
        let resyncs = mark.resyncs + 1;
        self.reasons
            .send(&RefreshReason {
                tenant: mark.tenant.clone(),
                code: mark.code.clone(),
                cause: Cause::Resync,
                fact_at_ms: mark.marked_at_ms,
                fact_key: format!("resync:{}:{resyncs}", mark.marked_at_ms),
            })
            .await?;
        let next = next_resync_at(self.now_ms(), self.settings.period_ms, resyncs);
        self.store.resync_sent(mark, resyncs, next).await?;
        report.resyncs_sent += 1;
        tracing::info!(tenant = %mark.tenant, code = %mark.code, why = mark.why.map(DirtyWhy::label), resyncs, "dirty code sent a resync");
        Ok(())
    }

    /// Step 1, fan-outs: every due fan-out mark, a page at a time, sent to the fan-out queue
    /// again. Not held by a tripped guard: a fan-out only tells codes of a fact, as any new
    /// fact would, and the single writer's lists follow the facts; the guard holds the
    /// sweep's own pushes past the record (`resync`), which a fan-out's reasons are not.
    async fn resend_fan_outs(&self, run: &mut Run) -> Result<(), StoreError> {
        let mut seen: HashSet<(TenantId, String)> = HashSet::new();
        while !self.out_of_time(run) {
            let marks = self
                .store
                .due_fan_outs(self.now_ms(), MARKS_PER_PAGE)
                .await?;
            let fresh: Vec<FanOutMark> = marks
                .iter()
                .filter(|m| seen.insert((m.fan_out.tenant.clone(), m.fan_out.fact_key.clone())))
                .cloned()
                .collect();
            // A page of marks this run already sent (their reschedule failed): stop.
            if fresh.is_empty() {
                break;
            }
            for mark in fresh {
                if self.out_of_time(run) {
                    break;
                }
                run.report.fan_outs_due += 1;
                if let Err(error) = self.resend_fan_out(&mut run.report, &mark).await {
                    tracing::warn!(tenant = %mark.fan_out.tenant, fact_key = %mark.fan_out.fact_key, error = %error, "fan-out not sent again; the next run tries again");
                }
            }
            if marks.len() < MARKS_PER_PAGE {
                break;
            }
        }
        Ok(())
    }

    async fn resend_fan_out(
        &self,
        report: &mut SweepReport,
        mark: &FanOutMark,
    ) -> Result<(), StoreError> {
        let resends = mark.resends + 1;
        // From its first code, not from where the part that gave up had got: the codes the
        // fact reaches may have changed since, and a code told twice costs one recompute.
        let fan_out = FanOut {
            sent_through: None,
            ..mark.fan_out.clone()
        };
        self.fan_outs.send(&fan_out).await?;
        let next = next_resync_at(self.now_ms(), self.settings.period_ms, resends);
        self.store.fan_out_resent(mark, resends, next).await?;
        report.fan_outs_resent += 1;
        tracing::info!(tenant = %fan_out.tenant, fact_key = %fan_out.fact_key, why = mark.why.map(DirtyWhy::label), resends, "fan-out given up sent again");
        Ok(())
    }

    /// Reads the code's contact way back, if the tenant's read budget allows, and compares
    /// it. `None` when it was not read (no budget, not created yet, WeCom failed).
    async fn read_back(
        &self,
        report: &mut SweepReport,
        tenant: &TenantId,
        code: &CodeId,
        snapshot: &CodeSnapshot,
    ) -> Result<Option<ReadBack>, StoreError> {
        let Some(config_id) = &snapshot.code.config_id else {
            return Ok(None);
        };
        if let Spend::Exhausted { .. } = self
            .budget
            .spend(tenant, GET_CONTACT_WAY, self.now_ms())
            .await?
        {
            report.budget_refusals += 1;
            return Ok(None);
        }
        let users = match self.wecom.users(&snapshot.credentials(), config_id).await {
            Ok(users) => users,
            Err(error) => {
                report.read_failures += 1;
                let gone = error.class() == FailureClass::CodeGone;
                tracing::warn!(tenant = %tenant, config_id, error = %error, gone, "contact way not read back");
                return Ok(None);
            }
        };
        report.read_back += 1;
        let mut difference = compare(snapshot, &users);
        if difference != Difference::None {
            // A refresh may have pushed between our read of the record and WeCom's answer:
            // a record that moved since is in flight, not drift.
            let now_ms = self.now_ms();
            let again = self.store.snapshot(tenant, code, now_ms).await?;
            let pushed_at = |s: &CodeSnapshot| s.last_pushed.as_ref().map(|p| p.pushed_at_ms);
            if again.is_none_or(|again| pushed_at(&again) != pushed_at(snapshot)) {
                difference = Difference::None;
            }
        }
        if difference != Difference::None {
            report.differing += 1;
            tracing::warn!(tenant = %tenant, code = %code, ?difference, wecom = ?users, recorded = ?snapshot.wecom_list(), "read-back found a difference");
        }
        Ok(Some(ReadBack { difference }))
    }

    /// Step 3: every stale claim, taken over and finished.
    async fn finish_claims(&self, owner: &str, run: &mut Run) -> Result<(), StoreError> {
        let stale = self
            .store
            .stale_claims(self.now_ms(), MARKS_PER_PAGE)
            .await?;
        let taker = format!("sweep:{owner}");
        for claim in stale {
            if self.out_of_time(run) {
                break;
            }
            let lease_until_ms = run.lease_until_ms;
            if !self.store.take_over(&claim, &taker, lease_until_ms).await? {
                continue;
            }
            let taken = LimitClaim {
                owner: taker.clone(),
                lease_until_ms,
                ..claim
            };
            match finish_claim(&self.store, &self.reasons, &self.notifier, &taken, false).await {
                Ok(codes) => {
                    run.report.claims_finished += 1;
                    tracing::warn!(alert = "limit_claim_finished_by_sweep", claim = %taken.id(), codes, "a stale limit claim was taken over and finished");
                }
                // Its lease ends with this run's; the next run after that takes it again.
                Err(error) => {
                    tracing::warn!(claim = %taken.id(), error = %error, "stale limit claim not finished")
                }
            }
        }
        Ok(())
    }

    /// Step 4: the contact ways of creations whose request ended without recording them.
    async fn delete_orphans(&self, run: &mut Run) -> Result<(), StoreError> {
        let before_ms = self.now_ms().saturating_sub(INTENT_GRACE_MS);
        for intent in self.store.stale_intents(before_ms, MARKS_PER_PAGE).await? {
            if self.out_of_time(run) {
                break;
            }
            if self.orphans_of(run, &intent).await? {
                self.store.clear_intent(&intent).await?;
            }
        }
        Ok(())
    }

    /// Deletes every contact way WeCom made for `intent`'s code around its time that is not
    /// the code's recorded one. `false` when it could not look (WeCom failed, no budget):
    /// the intent stays for the next run.
    async fn orphans_of(&self, run: &mut Run, intent: &CreationIntent) -> Result<bool, StoreError> {
        let (tenant, code) = (&intent.tenant, &intent.code);
        let Some(profile) = self.store.profile(tenant).await? else {
            return Ok(true);
        };
        let recorded = self
            .store
            .snapshot(tenant, code, self.now_ms())
            .await?
            .and_then(|snapshot| snapshot.code.config_id);
        let corp = crate::wecom::contact_way::CorpCredentials {
            corp_id: profile.corp_id.clone(),
            corp_secret: profile.corp_secret.clone(),
        };
        let at_secs = intent.started_at_ms / 1000;
        let window = (
            at_secs.saturating_sub(INTENT_WINDOW_SECS),
            at_secs + INTENT_WINDOW_SECS,
        );
        if !self.spent(tenant, GET_CONTACT_WAY).await? {
            return Ok(false);
        }
        let created = match self.wecom.created_between(&corp, window.0, window.1).await {
            Ok(created) => created,
            Err(error) => {
                tracing::warn!(tenant = %tenant, code = %code, error = %error, "contact ways not listed; the intent stays");
                return Ok(false);
            }
        };
        for config_id in created {
            if Some(&config_id) == recorded.as_ref() {
                continue;
            }
            if !self.spent(tenant, GET_CONTACT_WAY).await? {
                return Ok(false);
            }
            match self.wecom.state_of(&corp, &config_id).await {
                Ok(state) if state == code.as_str() => {}
                Ok(_) => continue,
                Err(error) => {
                    tracing::warn!(tenant = %tenant, config_id, error = %error, "contact way not read; the intent stays");
                    return Ok(false);
                }
            }
            if !self.spent(tenant, DEL_CONTACT_WAY).await? {
                return Ok(false);
            }
            match self.wecom.delete(&corp, &config_id).await {
                Ok(()) => {
                    run.report.orphans_deleted += 1;
                    tracing::warn!(alert = "orphan_contact_way_deleted", tenant = %tenant, code = %code, config_id, "a contact way created for the code but never recorded was deleted");
                }
                Err(error) if error.class() == FailureClass::CodeGone => {}
                Err(error) => {
                    tracing::warn!(tenant = %tenant, config_id, error = %error, "orphan contact way not deleted; the intent stays");
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }

    /// Step 4, links: the acquisition links of staff who resigned before the grace.
    async fn retire_links(&self, run: &mut Run) -> Result<(), StoreError> {
        let before_ms = self
            .now_ms()
            .saturating_sub(self.settings.link_retire_grace_ms);
        for leaving in self
            .store
            .resigned_before(before_ms, MARKS_PER_PAGE)
            .await?
        {
            if self.out_of_time(run) {
                break;
            }
            if let Err(error) = self.retire_link(run, &leaving).await {
                tracing::warn!(tenant = %leaving.tenant, staff = %leaving.staff, error = %error, "acquisition link not retired; the next run tries again");
            }
        }
        Ok(())
    }

    /// Detaches the resigned member's link (or takes the one already detached), deletes it at
    /// WeCom and forgets it; a member with nothing to retire leaves the index.
    async fn retire_link(&self, run: &mut Run, leaving: &LeavingStaff) -> Result<(), StoreError> {
        let (tenant, staff) = (&leaving.tenant, &leaving.staff);
        let link_id = match (&leaving.retiring_link_id, &leaving.link_id) {
            (Some(retiring), _) => retiring,
            (None, Some(held)) if leaving.resigned => {
                if !self.store.detach_link(tenant, staff, held).await? {
                    // Rehired, or a newer link: the next run reads them again.
                    return Ok(());
                }
                held
            }
            _ => return self.store.nothing_to_retire(tenant, staff).await,
        };
        if let Some(profile) = self.store.profile(tenant).await? {
            if !self.spent(tenant, DELETE_LINK).await? {
                run.report.budget_refusals += 1;
                return Ok(());
            }
            let corp = crate::wecom::contact_way::CorpCredentials {
                corp_id: profile.corp_id.clone(),
                corp_secret: profile.corp_secret.clone(),
            };
            match self.wecom.delete_link(&corp, link_id).await {
                Ok(()) => {}
                Err(error) if error.is_retryable() => {
                    tracing::warn!(tenant = %tenant, staff = %staff, error = %error, "acquisition link not deleted; the next run tries again");
                    return Ok(());
                }
                // Unknown to WeCom (deleted before, or by hand): nothing is left to delete.
                Err(error) => {
                    tracing::warn!(tenant = %tenant, staff = %staff, class = error.class().as_str(), error = %error, "WeCom refused to delete the acquisition link; it is forgotten");
                }
            }
        }
        self.store.link_retired(tenant, staff, link_id).await?;
        self.store.nothing_to_retire(tenant, staff).await?;
        run.report.links_retired += 1;
        tracing::info!(tenant = %tenant, staff = %staff, "a resigned member's acquisition link was deleted");
        Ok(())
    }

    /// One call's worth of the tenant's budget for `api`; `false` when it is spent.
    async fn spent(&self, tenant: &TenantId, api: &str) -> Result<bool, StoreError> {
        Ok(matches!(
            self.budget.spend(tenant, api, self.now_ms()).await?,
            Spend::Granted
        ))
    }

    /// Step 2: the tenants from the cursor, each sampled once, `TENANTS_IN_FLIGHT` at a
    /// time, until the registry's end or the time is up (the cursor then says where the next
    /// run starts).
    async fn sample_tenants(
        &self,
        owner: &str,
        mut after: Option<TenantId>,
        run: &mut Run,
    ) -> Result<(), StoreError> {
        while !self.out_of_time(run) {
            let tenants = self
                .store
                .tenants_after(after.as_ref(), TENANTS_PER_PAGE)
                .await?;
            let deadline_ms = run.deadline_ms;
            let sampled: Vec<SweepReport> = futures::stream::iter(&tenants)
                .map(|tenant| async move {
                    let mut report = SweepReport::default();
                    if let Err(error) = self.sample_tenant(&mut report, tenant, deadline_ms).await {
                        tracing::warn!(tenant = %tenant, error = %error, "tenant not sampled; the next run tries again");
                    }
                    report
                })
                .buffered(TENANTS_IN_FLIGHT)
                .collect()
                .await;
            for report in &sampled {
                run.report.absorb(report);
            }
            // A tenant cut short by the deadline is sampled again from its own cursor.
            after = tenants.last().cloned().or(after);
            let done = tenants.len() < TENANTS_PER_PAGE && !self.out_of_time(run);
            let cursor = if done { None } else { after.as_ref() };
            if !self.store.save_cursor(owner, cursor).await? {
                tracing::warn!("another run took the sweep's lease; stopping");
                return Ok(());
            }
            if done {
                break;
            }
        }
        Ok(())
    }

    async fn sample_tenant(
        &self,
        report: &mut SweepReport,
        tenant: &TenantId,
        deadline_ms: u64,
    ) -> Result<(), StoreError> {
        if self.store.guard(tenant).await?.is_some() {
            return Ok(());
        }
        report.tenants_sampled += 1;
        let codes = self.sample_of(tenant).await?;
        let sample = self.read_sample(report, tenant, codes, deadline_ms).await?;
        if let Some(code) = &sample.last_read {
            self.store.save_sample_cursor(tenant, code).await?;
        }
        let now_ms = self.now_ms();
        // At first sight only WeCom differing from our record counts for the guard. A record
        // behind the facts is also what every code with a reason still queued looks like (a
        // wave of shift ends, a midnight before the tick, a backlog waiting for budget), so
        // counting it now would stop a busy tenant's repair for nothing. But a recompute bug
        // looks exactly like many stale records, and resyncing them at once would spread it:
        // a stale code is marked a suspect, due after the settle period, and counted for the
        // guard with this sample's figures once it is still stale then (`settle_suspects`).
        let drifted = u32::try_from(
            sample
                .differing
                .iter()
                .filter(|(_, d)| *d == Difference::WeComDiffers)
                .count(),
        )
        .unwrap_or(u32::MAX);
        let tripped = self
            .trip_guard_if_due(report, tenant, sample.counts.read, drifted)
            .await?;
        let suspect = StaleSuspect {
            sample_read: sample.counts.read,
            sample_drifted: drifted,
        };
        for (code, difference) in sample.differing {
            self.act_on_difference(report, tenant, code, difference, tripped, suspect)
                .await?;
        }
        if let Some(timezone) = sample.timezone.filter(|_| sample.counts.read > 0) {
            let day = tenant_day(now_ms, timezone);
            self.store
                .add_to_report(tenant, &day, &sample.counts)
                .await?;
        }
        Ok(())
    }

    /// The codes this run samples of the tenant: from its cursor on, and past the last code
    /// on from the first, at most the sample's size.
    async fn sample_of(&self, tenant: &TenantId) -> Result<Vec<CodeId>, StoreError> {
        let size = sample_size(self.settings.reads_per_tenant_hour, self.settings.period_ms);
        let after = self.store.sample_cursor(tenant).await?;
        let mut codes = self.store.codes_after(tenant, after.as_ref(), size).await?;
        if codes.len() < size && after.is_some() {
            for code in self.store.codes_after(tenant, None, size).await? {
                if codes.len() < size && !codes.contains(&code) {
                    codes.push(code);
                }
            }
        }
        Ok(codes)
    }

    /// Reads the sample's codes back one after another until the deadline or the read budget
    /// stops it, and compares each.
    async fn read_sample(
        &self,
        report: &mut SweepReport,
        tenant: &TenantId,
        codes: Vec<CodeId>,
        deadline_ms: u64,
    ) -> Result<SampleRead, StoreError> {
        let mut sample = SampleRead::default();
        for code in codes {
            if self.now_ms() >= deadline_ms {
                report.out_of_time = true;
                break;
            }
            let Some(snapshot) = self.store.snapshot(tenant, &code, self.now_ms()).await? else {
                sample.last_read = Some(code);
                continue;
            };
            // A dirty code is read back and resynced by step 1; a difference already known
            // is not news, and counting it would trip a resumed guard again at once.
            if snapshot.dirty_since_ms.is_some() {
                sample.last_read = Some(code);
                continue;
            }
            sample.timezone = Some(snapshot.profile.timezone);
            let refusals = report.budget_refusals;
            let read = self.read_back(report, tenant, &code, &snapshot).await?;
            if report.budget_refusals > refusals {
                break;
            }
            sample.last_read = Some(code.clone());
            let Some(read) = read else { continue };
            sample.counts.read += 1;
            if read.difference != Difference::None {
                sample.counts.differing += 1;
                sample.differing.push((code, read.difference));
            }
        }
        Ok(sample)
    }

    /// One sampled code that differed: a stale record becomes a suspect (unless the guard has
    /// tripped); anything else is marked dirty and, unless the guard has tripped, resynced.
    async fn act_on_difference(
        &self,
        report: &mut SweepReport,
        tenant: &TenantId,
        code: CodeId,
        difference: Difference,
        tripped: bool,
        suspect: StaleSuspect,
    ) -> Result<(), StoreError> {
        let now_ms = self.now_ms();
        let why = match difference {
            Difference::WeComDiffers => DirtyWhy::Drift,
            _ => DirtyWhy::Stale,
        };
        if why == DirtyWhy::Stale && !tripped {
            // Any refresh that begins after it (the queued reason arriving) clears it.
            let due_ms = now_ms.saturating_add(self.settings.stale_settle_ms);
            self.store
                .mark_suspect(tenant, &code, suspect, now_ms, due_ms)
                .await?;
            report.stale_suspects += 1;
            tracing::info!(tenant = %tenant, code = %code, due_ms, "stale record marked a suspect; checked again after the settle period");
            return Ok(());
        }
        self.store.mark_dirty(tenant, &code, why, now_ms).await?;
        if tripped {
            return Ok(());
        }
        let mark = DirtyMark {
            tenant: tenant.clone(),
            code,
            marked_at_ms: now_ms,
            why: Some(why),
            resyncs: 0,
            due_at_ms: now_ms,
            suspect: None,
        };
        self.send_resync(report, &mark).await?;
        report.repairs_started += 1;
        Ok(())
    }
}

/// What reading one tenant's sample found.
#[derive(Default)]
struct SampleRead {
    counts: DriftCounts,
    differing: Vec<(CodeId, Difference)>,
    timezone: Option<Timezone>,
    /// Where the tenant's next sample starts after.
    last_read: Option<CodeId>,
}

/// A tenant's drift as an operator reads it: the day's report and the guard.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DriftView {
    pub day: String,
    pub read: u32,
    pub differing: u32,
    pub repaired: u32,
    pub still_differing: u32,
    /// Stale records confirmed: still behind the facts after their settle period.
    pub stale_confirmed: u32,
    /// Set while the tenant's repair is stopped.
    pub guard: Option<GuardTrip>,
}

/// The tenant's drift report for `day` and its guard.
pub async fn drift_view(
    ledger: &impl DriftLedger,
    tenant: &TenantId,
    day: &str,
) -> Result<DriftView, StoreError> {
    let report = ledger.report(tenant, day).await?;
    let guard = ledger.guard(tenant).await?;
    Ok(DriftView {
        day: day.to_owned(),
        read: report.read,
        differing: report.differing,
        repaired: report.repaired,
        still_differing: report.still_differing(),
        stale_confirmed: report.stale_confirmed,
        guard,
    })
}
