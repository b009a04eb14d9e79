//! Step 1, fan-outs (see `super`): the due fan-out marks, each fan-out sent to the fan-out
//! queue again.

use super::{FanOutIndex, Run, Sweep, SweepPorts, SweepReport, MARKS_PER_PAGE};
use crate::dirty::{next_resync_at, DirtyWhy, FanOutMark};
use crate::ids::TenantId;
use crate::reasons::{FanOut, FanOutQueue};
use crate::StoreError;
use std::collections::HashSet;

impl<P: SweepPorts> Sweep<P> {
    /// Step 1, fan-outs: every due fan-out mark, a page at a time, sent to the fan-out queue
    /// again. Not held by a tripped guard: a fan-out only tells codes of a fact, as any new
    /// fact would, and the single writer's lists follow the facts; the guard holds the
    /// sweep's own pushes past the record (`resync`), which a fan-out's reasons are not.
    pub(super) async fn resend_fan_outs(&self, run: &mut Run) -> Result<(), StoreError> {
        let mut seen: HashSet<(TenantId, String)> = HashSet::new();
        while !self.out_of_time(run) {
            let marks = self
                .store
                .due_fan_outs(self.now_ms(), MARKS_PER_PAGE)
                .await?;
            let fresh: Vec<FanOutMark> = marks
                .iter()
                .filter(|m| seen.insert((m.fan_out.tenant.clone(), m.fan_out.mark_key())))
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
}
