//! The probe of paused tenants (`crate::tenants::TenantPause`, docs/rules.md rule 9): each run,
//! every paused tenant whose probe is due is read once within its read budget, from the
//! address its calls are charged to. WeCom accepting the read (or answering that the contact
//! way is gone, which it only says to a caller it serves) lifts the pause and recomputes every
//! code of the tenant; the same refusal puts the next probe further off.

use super::{ContactWayReader, Run, Sweep, SweepPorts};
use crate::budget::GET_CONTACT_WAY;
use crate::facts::TenantProfiles;
use crate::ids::TenantId;
use crate::reasons::{Cause, FanOut, FanOutQueue, Source};
use crate::tenants::{TenantPause, TenantPauses};
use crate::wecom::errors::FailureClass;
use crate::StoreError;

impl<P: SweepPorts> Sweep<P> {
    /// Probes every paused tenant whose probe is due.
    pub(super) async fn probe_paused(&self, run: &mut Run) -> Result<(), StoreError> {
        for tenant in self.store.paused_tenants().await? {
            if self.out_of_time(run) {
                return Ok(());
            }
            let Some(pause) = self.store.pause_of(&tenant).await? else {
                continue;
            };
            if pause.probe_due(self.now_ms()) {
                self.probe(run, &tenant, &pause).await?;
            }
        }
        Ok(())
    }

    async fn probe(
        &self,
        run: &mut Run,
        tenant: &TenantId,
        pause: &TenantPause,
    ) -> Result<(), StoreError> {
        let Some(profile) = self.store.profile(tenant).await? else {
            // The tenant was deleted while paused: nothing left to resume.
            self.store.lift_pause(tenant, pause.since_ms).await?;
            return Ok(());
        };
        if !self.spent(tenant, GET_CONTACT_WAY).await? {
            run.report.budget_refusals += 1;
            return Ok(());
        }
        let credentials = profile.credentials(tenant);
        run.report.pauses_probed += 1;
        match self
            .wecom
            .contact_way(&credentials, &pause.probe_config_id)
            .await
        {
            Ok(_) => self.resume(run, tenant, pause).await,
            Err(error) if error.class() == FailureClass::CodeGone => {
                self.resume(run, tenant, pause).await
            }
            Err(error) if error.class().pauses_tenant() => {
                let next = pause.after_refused_probe(self.now_ms());
                tracing::warn!(tenant = %tenant, class = %error.class(), probes = next.probes, next_probe_ms = next.next_probe_ms, "the paused tenant's probe was refused again");
                self.store.update_pause(tenant, &next).await
            }
            // Throttled, busy: says nothing about the pause; the next run probes again.
            Err(error) => {
                tracing::warn!(tenant = %tenant, error = %error, "the paused tenant's probe failed; tried again next run");
                Ok(())
            }
        }
    }

    /// Lifts the pause, then recomputes every code of the tenant from its facts: the reasons
    /// dropped while it was paused are covered by the fan-out, sent after the pause is gone
    /// so none of its refreshes can find it paused.
    async fn resume(
        &self,
        run: &mut Run,
        tenant: &TenantId,
        pause: &TenantPause,
    ) -> Result<(), StoreError> {
        if !self.store.lift_pause(tenant, pause.since_ms).await? {
            return Ok(());
        }
        let now_ms = self.now_ms();
        let fan_out = FanOut::new(
            tenant.clone(),
            vec![Source::Tenant],
            Cause::Requested,
            now_ms,
            format!("resumed:{}", pause.since_ms),
        );
        if let Err(error) = self.fan_outs.send(&fan_out).await {
            // Paused again, so the next run probes, resumes and sends once more.
            self.store.pause(tenant, &pause.probe_now(now_ms)).await?;
            return Err(error);
        }
        run.report.tenants_resumed += 1;
        crate::telemetry::tenant_resumed();
        tracing::warn!(
            alert = "tenant_resumed",
            tenant = %tenant,
            address = %pause.address,
            class = %pause.class,
            paused_for_s = now_ms.saturating_sub(pause.since_ms) / 1000,
            "WeCom accepts the tenant again: resumed, every code recomputed"
        );
        Ok(())
    }
}
