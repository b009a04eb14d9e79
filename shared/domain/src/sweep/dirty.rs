//! Step 1 of a run (see `super`): the due dirty marks, each read back and resynced through the
//! single writer, and the due stale suspects, settled together.

use super::{
    record_stale, DirtyIndex, DriftCounts, DriftLedger, Run, Sweep, SweepPorts, MARKS_PER_PAGE,
};
use crate::codes::CodeFacts;
use crate::dirty::{DirtyMark, DirtyMarks, StaleSuspect};
use crate::ids::CodeId;
use crate::ids::TenantId;
use crate::tenants::{tenant_day, Timezone};
use crate::StoreError;
use std::collections::HashSet;

impl<P: SweepPorts> Sweep<P> {
    /// Step 1: every due mark, a page at a time, until none is due or the time is up. Due
    /// suspects are gathered over the pages and settled once the pages are done, so the
    /// suspects of one sample (alike in due time, so adjacent in the index) are counted
    /// together even when a page ends among them.
    pub(super) async fn resync_dirty(&self, run: &mut Run) -> Result<(), StoreError> {
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
        // The sample's drifted codes are not kept with its suspects: the re-check reads the
        // confirmed ones and scales what it finds to the whole trip.
        let codes: Vec<CodeId> = confirmed.iter().map(|mark| mark.code.clone()).collect();
        tracing::warn!(tenant = %tenant, confirmed = count, sampled = sample.sample_read, drifted = sample.sample_drifted, "stale records confirmed after their settle period");
        if self
            .trip_guard_if_due(
                &mut run.report,
                tenant,
                sample.sample_read,
                differing,
                &codes,
            )
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
            self.store.count_repaired(tenant, &day, &mark.code).await?;
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
            let day = tenant_day(now_ms, snapshot.profile.timezone);
            self.report_read(&mark.tenant, &day, &mark.code, read.difference)
                .await?;
        }
        self.send_resync(&mut run.report, mark).await
    }
}
