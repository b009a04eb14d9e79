//! Step 3 of a run (see `super`): the limit claims whose owner ended before finishing them,
//! taken over and finished (docs/rules.md rule 8).

use super::{Run, Sweep, SweepPorts, MARKS_PER_PAGE};
use crate::facts::{finish_claim, LimitClaim, QuotaLedger};
use crate::StoreError;

impl<P: SweepPorts> Sweep<P> {
    /// Step 3: every stale claim, taken over and finished.
    pub(super) async fn finish_claims(&self, owner: &str, run: &mut Run) -> Result<(), StoreError> {
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
}
