//! Step 4, links (see `super`): the customer-acquisition links of staff who resigned more than
//! the grace ago, taken off their staff item and deleted at WeCom.

use super::{LeavingStaff, LinkRetirements, Run, Sweep, SweepPorts, MARKS_PER_PAGE};
use crate::budget::DELETE_LINK;
use crate::facts::TenantProfiles;
use crate::refresh::AcquisitionLinks;
use crate::StoreError;

impl<P: SweepPorts> Sweep<P> {
    /// Step 4, links: the acquisition links of staff who resigned before the grace.
    pub(super) async fn retire_links(&self, run: &mut Run) -> Result<(), StoreError> {
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
            let corp = profile.credentials(tenant);
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
}
