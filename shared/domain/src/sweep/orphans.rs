//! Step 4 of a run (see `super`): contact ways WeCom created for a code but never recorded,
//! found through their creation intents and deleted.

use super::{
    ContactWayReader, CreationIntent, CreationIntents, OrphanFinder, Run, Sweep, SweepPorts,
    MARKS_PER_PAGE,
};
use crate::budget::{DEL_CONTACT_WAY, GET_CONTACT_WAY};
use crate::codes::CodeFacts;
use crate::facts::TenantProfiles;
use crate::wecom::errors::FailureClass;
use crate::StoreError;

/// A creation intent older than this belongs to a request that has ended: API Gateway gives up
/// on a request after 29 s, and the admin function's timeout is shorter.
pub const INTENT_GRACE_MS: u64 = 2 * 60_000;

/// The search around an intent's time: WeCom stamps a creation with its own clock.
const INTENT_WINDOW_SECS: u64 = 120;

impl<P: SweepPorts> Sweep<P> {
    /// Step 4: the contact ways of creations whose request ended without recording them, a
    /// page of intents at a time until none is left or the time is up. An intent the sweep
    /// cannot settle yet (WeCom failed, no budget) stays, and the pages after it are read all
    /// the same: one tenant's stuck intents never hold up another's.
    pub(super) async fn delete_orphans(&self, run: &mut Run) -> Result<(), StoreError> {
        let before_ms = self.now_ms().saturating_sub(INTENT_GRACE_MS);
        let mut after: Option<CreationIntent> = None;
        while !self.out_of_time(run) {
            let page = self
                .store
                .stale_intents(before_ms, after.as_ref(), MARKS_PER_PAGE)
                .await?;
            for intent in &page {
                if self.out_of_time(run) {
                    break;
                }
                if self.orphans_of(run, intent).await? {
                    self.store.clear_intent(intent).await?;
                }
            }
            if page.len() < MARKS_PER_PAGE {
                break;
            }
            after = page.last().cloned();
        }
        Ok(())
    }

    /// Deletes every contact way WeCom made for `intent` around its time: its `state` is the
    /// code's id and its `remark` the intent's marker (so it is ours, made by this creation),
    /// and it is not the code's recorded one. `false` when it could not look (WeCom failed,
    /// no budget): the intent stays for the next run.
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
        let marker = intent.marker();
        let corp = profile.credentials(tenant);
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
            match self.wecom.contact_way(&corp, &config_id).await {
                // A contact way of another creation, or of another tool using the same state.
                Ok(way) if way.state == code.as_str() && way.remark == marker => {}
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
}
