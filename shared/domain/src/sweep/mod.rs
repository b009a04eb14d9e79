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
//!    is read back and compared with the record and the recompute (`drift::compare`: users as
//!    a set, and no department). An answer without its user list is a failed read, not drift.
//!    WeCom differing from the record marks the code dirty and sends it a resync, through the
//!    single writer. The day's report counts each differing code once (`record_read`). A record behind the facts (`stale`) is what every code with a reason
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
//!    cleared once the `config_id` is stored, or WeCom refused the creation) still there after
//!    its request ended may hide a contact way WeCom made when the admin function crashed
//!    before recording it. The sweep reads the intents a page at a time, lists the corp's
//!    contact ways created around each intent's time and deletes those whose `state` is the
//!    code's id and whose `remark` is the intent's marker (`CreationIntent::marker`: ours, not
//!    another tool's of the same state) but which are not the code's recorded one.
//!
//!    Then the customer-acquisition links (`crate::landing`) of staff who resigned at least
//!    `link_retire_grace_ms` ago: each is taken off its staff item (on condition that they are
//!    still resigned and still hold it, so no later refresh can route to it), then deleted at
//!    WeCom (budgeted); one whose deletion fails waits in the item's retiring slot for the
//!    next run. A rehire before that keeps the link.
//! 5. **The blast-radius guard**: when more than the set share of a tenant's sample differs
//!    from what WeCom holds, or does once its stale records are confirmed, the likely cause is
//!    a bug (in the recompute or the push) or a bad moment at WeCom, not noise. The tenant's
//!    repair stops (its marks stay, no resync is sent) and the guard keeps the codes that
//!    differed. After `guard_recheck_ms` they are read again: too few still differing lifts
//!    the guard by itself; enough confirms it, and only then is the alert raised, until an
//!    operator resumes it.
//!
//! Each step has its file (`dirty`, `fan_outs`, `sample`, `claims`, `orphans`, `links`); this
//! one runs them in order and holds what they share: the run, its lease and deadline, the
//! read-back, the resync and the guard.

mod claims;
mod dirty;
mod drift;
mod fan_outs;
mod links;
mod orphans;
mod pauses;
mod ports;
mod sample;
#[cfg(test)]
mod tests;

pub use drift::{
    compare, drift_view, guard_trips, record_stale, sample_size, Difference, DriftCounts,
    DriftReport, DriftView, GuardTrip, GUARD_CODES_KEPT,
};
pub use orphans::INTENT_GRACE_MS;
pub use ports::{
    ContactWayReader, CreationIntent, CreationIntents, DirtyIndex, DriftLedger, FanOutIndex,
    LeavingStaff, LinkRetirements, OrphanFinder, SweepRuns, TenantRegistry,
};

use crate::budget::{Spend, WeComBudget, GET_CONTACT_WAY};
use crate::codes::{CodeFacts, CodeSnapshot};
use crate::dirty::{next_resync_at, DirtyMark, DirtyMarks, DirtyWhy};
use crate::facts::{QuotaLedger, QuotaNotifier, StaffLedger, TenantProfiles};
use crate::ids::CodeId;
use crate::ids::TenantId;
use crate::reasons::{Cause, FanOutQueue, ReasonQueue, RefreshReason};
use crate::refresh::AcquisitionLinks;
use crate::tenants::{tenant_day, TenantPauses};
use crate::wecom::errors::FailureClass;
use crate::{Clock, StoreError};
use std::collections::HashMap;
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
        + LinkRetirements
        + TenantPauses;
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
    /// How long after a guard trips the codes that tripped it are read again: a WeCom glitch
    /// that has passed by then lifts the guard without anyone acting; differences that stay
    /// confirm it, and only then is an operator asked to look.
    pub guard_recheck_ms: u64,
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
        guard_recheck_ms: 15 * 60_000,
        lease_grace_ms: 30_000,
        finish_reserve_ms: 3_000,
        stale_settle_ms: 20 * 60_000,
        link_retire_grace_ms: 60 * 60_000,
    };
}

/// Marks read per query.
const MARKS_PER_PAGE: usize = 100;

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
    /// Guards tripped (the tenant's repair stops), and guards their re-check settled: still
    /// differing, confirmed (an operator must resume), or no longer, lifted.
    pub guards_tripped: u32,
    pub guards_confirmed: u32,
    pub guards_lifted: u32,
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
    /// Paused tenants probed, and those WeCom served again (resumed).
    pub pauses_probed: u32,
    pub tenants_resumed: u32,
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
        self.guards_confirmed += part.guards_confirmed;
        self.guards_lifted += part.guards_lifted;
        self.budget_refusals += part.budget_refusals;
        self.read_failures += part.read_failures;
        self.claims_finished += part.claims_finished;
        self.orphans_deleted += part.orphans_deleted;
        self.links_retired += part.links_retired;
        self.pauses_probed += part.pauses_probed;
        self.tenants_resumed += part.tenants_resumed;
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
            self.probe_paused(&mut run).await?;
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

    /// Trips the tenant's guard when `differing` of `sampled` codes is more than its share:
    /// records the trip with `codes`, those of them known here (read again at the re-check), and counts
    /// it. `true` when it tripped. No operator is asked yet: a WeCom glitch trips the guard
    /// of many tenants at once, and the re-check lifts each without anyone acting.
    async fn trip_guard_if_due(
        &self,
        report: &mut SweepReport,
        tenant: &TenantId,
        sampled: u32,
        differing: u32,
        codes: &[CodeId],
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
        let now_ms = self.now_ms();
        let trip = GuardTrip {
            tripped_at_ms: now_ms,
            sampled,
            differing,
            codes: codes.iter().take(GUARD_CODES_KEPT).cloned().collect(),
            recheck_at_ms: now_ms.saturating_add(settings.guard_recheck_ms),
            confirmed_at_ms: None,
        };
        self.store.trip_guard(tenant, &trip).await?;
        report.guards_tripped += 1;
        tracing::warn!(tenant = %tenant, sampled, differing, recheck_at_ms = trip.recheck_at_ms, "too much of the tenant's sample differs: its repair stops, and the codes are read again before an operator is asked");
        Ok(true)
    }

    /// The re-check of a guard that is due: its codes read back again. Too few still differ
    /// (a glitch that passed): the guard lifts and the held marks are resynced from the next
    /// run. Enough still differ: it is confirmed and the alert asks an operator to look. A
    /// code not read (no budget, WeCom failed) leaves the re-check to the next run.
    async fn recheck_guard(
        &self,
        report: &mut SweepReport,
        tenant: &TenantId,
        trip: &GuardTrip,
    ) -> Result<(), StoreError> {
        let mut still: Vec<CodeId> = Vec::new();
        for code in &trip.codes {
            // A code deleted since, or without a contact way now, routes nobody wrong.
            let Some(snapshot) = self
                .store
                .snapshot(tenant, code, self.now_ms())
                .await?
                .filter(|snapshot| snapshot.code.config_id.is_some())
            else {
                continue;
            };
            let Some(read) = self.read_back(report, tenant, code, &snapshot).await? else {
                tracing::info!(tenant = %tenant, code = %code, "guard's re-check could not read a code; the next run tries again");
                return Ok(());
            };
            let day = tenant_day(self.now_ms(), snapshot.profile.timezone);
            self.report_read(tenant, &day, code, read.difference)
                .await?;
            if read.difference != Difference::None {
                still.push(code.clone());
            }
        }
        let settings = &self.settings;
        let count = u32::try_from(still.len()).unwrap_or(u32::MAX);
        if trip.still_trips(
            count,
            settings.guard_share_percent,
            settings.guard_min_sample,
        ) {
            if self
                .store
                .confirm_guard(tenant, trip.tripped_at_ms, self.now_ms())
                .await?
            {
                report.guards_confirmed += 1;
                tracing::error!(alert = "drift_guard_tripped", tenant = %tenant, sampled = trip.sampled, differing = trip.differing, still_differing = count, "the tenant's sample still differs on the re-check (a recompute bug?): its repair stays stopped until an operator resumes it");
            }
            return Ok(());
        }
        if self.store.resume(tenant).await? {
            report.guards_lifted += 1;
            tracing::warn!(tenant = %tenant, sampled = trip.sampled, differing = trip.differing, still_differing = count, "the codes that tripped the tenant's guard agree again on the re-check: the guard lifted itself");
        }
        Ok(())
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
        let way = match self
            .wecom
            .contact_way(&snapshot.credentials(tenant), config_id)
            .await
        {
            Ok(way) => way,
            Err(error) => {
                report.read_failures += 1;
                let gone = error.class() == FailureClass::CodeGone;
                tracing::warn!(tenant = %tenant, config_id, error = %error, gone, "contact way not read back");
                return Ok(None);
            }
        };
        // A partial answer says nothing about whom the code routes to: read as an empty list
        // it would count as drift, and one WeCom glitch would trip every tenant's guard.
        let Some(users) = way.users else {
            report.read_failures += 1;
            tracing::warn!(tenant = %tenant, config_id, "WeCom answered the contact way without its user list; not counted, read again by a later sample");
            return Ok(None);
        };
        report.read_back += 1;
        let mut difference = compare(snapshot, &users, &way.party);
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
            tracing::warn!(tenant = %tenant, code = %code, ?difference, wecom = ?users, departments = ?way.party, recorded = ?snapshot.wecom_list(), "read-back found a difference");
        }
        Ok(Some(ReadBack { difference }))
    }

    /// A read of a code that may have differed (a marked code, a guard's) for the tenant's
    /// report of `day`: counted as a read, and the code's latest read recorded, agreeing or not.
    async fn report_read(
        &self,
        tenant: &TenantId,
        day: &str,
        code: &CodeId,
        difference: Difference,
    ) -> Result<(), StoreError> {
        let counts = DriftCounts {
            read: 1,
            ..DriftCounts::default()
        };
        self.store.add_to_report(tenant, day, &counts).await?;
        self.store
            .record_read(tenant, day, code, difference != Difference::None)
            .await
    }

    /// One call's worth of the tenant's budget for `api`; `false` when it is spent.
    async fn spent(&self, tenant: &TenantId, api: &str) -> Result<bool, StoreError> {
        Ok(matches!(
            self.budget.spend(tenant, api, self.now_ms()).await?,
            Spend::Granted
        ))
    }
}
