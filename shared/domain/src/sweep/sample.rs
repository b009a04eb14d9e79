//! Step 2 of a run (see `super`): the drift read-back, each tenant's sample of its codes from
//! its cursor, read back, compared and acted on.

use super::{
    sample_size, Difference, DirtyIndex, DriftCounts, DriftLedger, Run, Sweep, SweepPorts,
    SweepReport, SweepRuns, TenantRegistry,
};
use crate::codes::CodeFacts;
use crate::dirty::{DirtyMark, DirtyMarks, DirtyWhy, StaleSuspect};
use crate::ids::CodeId;
use crate::ids::TenantId;
use crate::tenants::{tenant_day, Timezone};
use crate::StoreError;
use futures::StreamExt;

/// Tenants per page of the registry.
const TENANTS_PER_PAGE: usize = 50;

/// Tenants sampled at once: each waits on WeCom most of its time.
const TENANTS_IN_FLIGHT: usize = 8;

impl<P: SweepPorts> Sweep<P> {
    /// Step 2: the tenants from the cursor, each sampled once, `TENANTS_IN_FLIGHT` at a
    /// time, until the registry's end or the time is up (the cursor then says where the next
    /// run starts).
    pub(super) async fn sample_tenants(
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
            // Owned ids: a closure over borrowed ones makes the run's future one the compiler
            // cannot prove `Send` for generic ports (rust-lang/rust#102211), which the
            // simulation (tools/scale) spawns.
            let sampled: Vec<SweepReport> = futures::stream::iter(tenants.iter().cloned())
                .map(|tenant| async move {
                    let mut report = SweepReport::default();
                    if let Err(error) = self.sample_tenant(&mut report, &tenant, deadline_ms).await {
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
        if let Some(trip) = self.store.guard(tenant).await? {
            if trip.recheck_due(self.now_ms()) {
                self.recheck_guard(report, tenant, &trip).await?;
            }
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
        let drifted_codes: Vec<CodeId> = sample
            .differing
            .iter()
            .filter(|(_, d)| *d == Difference::WeComDiffers)
            .map(|(code, _)| code.clone())
            .collect();
        let drifted = u32::try_from(drifted_codes.len()).unwrap_or(u32::MAX);
        let tripped = self
            .trip_guard_if_due(report, tenant, sample.counts.read, drifted, &drifted_codes)
            .await?;
        let suspect = StaleSuspect {
            sample_read: sample.counts.read,
            sample_drifted: drifted,
        };
        // Only the codes that differed are recorded one by one, so a clean sample costs its one
        // report write: a sampled code is not marked (marked ones are skipped), so no
        // difference of it stands (its mark would still be there, or its repair recorded).
        if let Some(timezone) = sample.timezone.filter(|_| sample.counts.read > 0) {
            let day = tenant_day(now_ms, timezone);
            self.store
                .add_to_report(tenant, &day, &sample.counts)
                .await?;
            for (code, _) in &sample.differing {
                self.store.record_read(tenant, &day, code, true).await?;
            }
        }
        for (code, difference) in sample.differing {
            self.act_on_difference(report, tenant, code, difference, tripped, suspect)
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
