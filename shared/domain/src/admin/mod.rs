//! The admin API: tenant admins (through the platform's backend) set up tenants, staff and
//! codes. Like every observer of a business fact (docs/rules.md rule 2), it writes the fact first and
//! then emits one refresh reason per code the fact may change; it never pushes a list itself,
//! because the refresh function is the single writer of each code's WeCom list (rule 3).
//!
//! The one WeCom call made here is the creation of a code's contact way, which must exist
//! before the refresh function has anything to update. It is created with the code's current
//! recompute, and its `config_id` is stored with a conditional write so two racing creations
//! keep exactly one contact way.

pub mod commands;
mod error;
mod ports;
mod reads;
mod views;

pub use commands::{
    CodePatch, DeleteCode, GetCode, GetDepartment, GetDrift, GetStaff, GetTenant, ListCodes,
    PageRequest, Patch, PutCode, PutDepartment, PutStaff, PutTenant, ResumeRepair, ScheduleEdit,
    SwitchesPatch, TenantPatch,
};
pub use error::AdminError;
pub use ports::{
    AdminStore, CodeAdds, CodeSummary, ContactWays, ProfileWrite, SecretsChanged, StaffChange,
    StaffRecord, StaffUpdate, StoredProfile, VersionedCode,
};
pub use views::{
    exclusion_name, AddsAgainst, CodeAnswer, CodePage, CodeStatus, CodeSummaryView, DeletedCode,
    DepartmentAnswer, DepartmentView, ExcludedMember, LastPushed, PausedView, PreviousKeysView,
    Resumed, RoutingOutcome, SecretState, SecretsView, StaffAnswer, StaffCodeView, StaffCodesPage,
    StaffView, TenantAnswer, TenantView,
};

use crate::budget::{Spend, WeComBudget, ADD_CONTACT_WAY, DEL_CONTACT_WAY};
use crate::codes::CodeSnapshot;
use crate::ids::TenantId;
use crate::ids::{CodeId, StaffId};
use crate::membership::{self, StaffFacts};
use crate::reasons::{Cause, Fact, FanOut, FanOutQueue, ReasonQueue, Source};
use crate::schedules::{plan, Subject};
use crate::sweep::CreationIntent;
use crate::tenants::{KeyRotation, TenantProfile};
use crate::wecom::contact_way::{ContactWayKind, ContactWayScene, CorpCredentials, NewContactWay};
use crate::wecom::errors::{FailureClass, WeComError};
use crate::Clock;
use crate::StoreError;
use std::sync::Arc;

pub struct Admin<S, Q, W> {
    store: S,
    reasons: Q,
    fan_outs: Arc<dyn FanOutQueue>,
    contact_ways: W,
    clock: Clock,
    budget: Option<Arc<dyn WeComBudget>>,
    key_rotation: KeyRotation,
}

impl<S: AdminStore, Q: ReasonQueue, W: ContactWays> Admin<S, Q, W> {
    /// `reasons` takes the one reason of a code edit; `fan_outs` every fact that reaches more
    /// codes than one, expanded after the answer by the fan-out function.
    pub fn new(
        store: S,
        reasons: Q,
        fan_outs: impl FanOutQueue + 'static,
        contact_ways: W,
        clock: Clock,
    ) -> Self {
        Self {
            store,
            reasons,
            fan_outs: Arc::new(fan_outs),
            contact_ways,
            clock,
            budget: None,
            key_rotation: KeyRotation::default(),
        }
    }

    /// How long a tenant's replaced callback keys are kept (`KeyRotation`): a second
    /// rotation within it is refused, and `GET /tenants/{tenant}` shows until when.
    #[must_use]
    pub fn with_key_rotation(mut self, rotation: KeyRotation) -> Self {
        self.key_rotation = rotation;
        self
    }

    /// Spends the tenant's WeCom budget (the one the refresh function spends, per API) before
    /// creating or deleting a contact way.
    #[must_use]
    pub fn with_budget(mut self, budget: impl WeComBudget + 'static) -> Self {
        self.budget = Some(Arc::new(budget));
        self
    }

    async fn spend(&self, tenant: &TenantId, api: &'static str) -> Result<(), AdminError> {
        let Some(budget) = &self.budget else {
            return Ok(());
        };
        match budget.spend(tenant, api, (self.clock)()).await? {
            Spend::Granted => Ok(()),
            Spend::Exhausted { retry_after_ms, .. } => {
                tracing::info!(
                    api,
                    retry_after_ms,
                    "no WeCom budget left; refused with 429"
                );
                Err(AdminError::Budget {
                    api,
                    retry_after_ms,
                })
            }
        }
    }

    /// What WeCom's refusal of `api` for `tenant` answers the caller. A 45009 (or 45033)
    /// holds the tenant's budget of `api` for the window WeCom says is spent (the minute, or
    /// the hour when the minute did not help: `budget::window_to_hold`), as the refresh does,
    /// and is answered 429 with the time it reopens: the next request waits without a call.
    async fn refused(&self, tenant: &TenantId, api: &'static str, error: WeComError) -> AdminError {
        tracing::warn!(api, class = %error.class(), errcode = error.errcode(), error = %error, "WeCom refused the call");
        let (Some(budget), WeComError::Throttled { .. }) = (&self.budget, &error) else {
            return AdminError::WeCom(error);
        };
        match budget.hold(tenant, api, (self.clock)()).await {
            Ok(Spend::Exhausted { retry_after_ms, .. }) => AdminError::Budget {
                api,
                retry_after_ms,
            },
            Ok(Spend::Granted) => AdminError::WeCom(error),
            Err(store) => {
                tracing::warn!(error = %store, "the WeCom budget was not held after a 45009");
                AdminError::WeCom(error)
            }
        }
    }

    /// Applies the patch to the tenant's profile (creating it), claiming its corp id for the
    /// tenant. When the company cap or the timezone (which decides "today") changed, every
    /// code of the tenant is sent for a recompute.
    #[tracing::instrument(skip_all, fields(tenant = %command.tenant))]
    pub async fn put_tenant(&self, command: PutTenant) -> Result<TenantAnswer, AdminError> {
        let PutTenant { tenant, patch } = command;
        let now_ms = (self.clock)();
        let (previous, next) = self.store_profile(&tenant, patch, now_ms).await?;
        let profile = &next.profile;
        // The schedule tick's due items follow the zone: the next midnight always, and on a
        // new zone the shift edges (due at once, so the tick computes them in the new zone; a
        // tenant without schedules has its item deleted by that run).
        let midnight = plan::next_midnight(profile.timezone, now_ms);
        self.store
            .set_due(&tenant, &Subject::Midnight, midnight, now_ms)
            .await?;
        if previous
            .as_ref()
            .is_some_and(|p| p.timezone != profile.timezone)
        {
            self.store
                .set_due(&tenant, &Subject::Shifts, plan::asap(now_ms), now_ms)
                .await?;
        }
        let rules_changed = previous.is_some_and(|p| {
            p.company_daily_cap != profile.company_daily_cap || p.timezone != profile.timezone
        });
        let fan_out = if rules_changed {
            let fan_out = FanOut::new(
                tenant.clone(),
                vec![Source::Tenant],
                Cause::Requested,
                now_ms,
                format!("tenant-rules:{now_ms}"),
            );
            self.fan_outs.send(&fan_out).await?;
            Some(fan_out.fact_key)
        } else {
            None
        };
        // A paused tenant whose credentials were just changed is probed by the next sweep run,
        // not after its backoff: the change may be the fix.
        if let Some(pause) = self.store.pause_of(&tenant).await? {
            self.store
                .update_pause(&tenant, &pause.probe_now(now_ms))
                .await?;
        }
        tracing::info!(corp_id = %profile.corp_id, timezone = %profile.timezone, company_daily_cap = ?profile.company_daily_cap, version = next.version, fan_out = ?fan_out, previous_callback_keys_replaced_at_ms = ?profile.previous_callback.as_ref().map(|p| p.replaced_at_ms), "tenant profile stored");
        Ok(TenantAnswer {
            tenant,
            corp_id: profile.corp_id.clone(),
            timezone: profile.timezone.name().to_owned(),
            company_daily_cap: profile.company_daily_cap,
            version: next.version,
            fan_out,
        })
    }

    /// Reads the stored profile, applies the patch and writes the result conditioned on the
    /// version read; a concurrent write in between makes it read and apply again (a few
    /// times, then 409). Answers the profile before (if any) and the one stored.
    async fn store_profile(
        &self,
        tenant: &TenantId,
        patch: TenantPatch,
        now_ms: u64,
    ) -> Result<(Option<TenantProfile>, StoredProfile), AdminError> {
        const ATTEMPTS: usize = 3;
        for _ in 0..ATTEMPTS {
            let previous = self.store.stored_profile(tenant).await?;
            let profile = patch.clone().apply(
                previous.as_ref().map(|p| &p.profile),
                now_ms,
                self.key_rotation,
            )?;
            let next = StoredProfile {
                secrets_changed_at_ms: secrets_changed(previous.as_ref(), &profile, now_ms),
                version: previous.as_ref().map_or(1, |p| p.version + 1),
                profile,
            };
            match self
                .store
                .put_profile(tenant, &next, previous.as_ref())
                .await?
            {
                ProfileWrite::Stored => return Ok((previous.map(|p| p.profile), next)),
                ProfileWrite::CorpIdTaken => {
                    return Err(AdminError::CorpIdTaken {
                        corp_id: next.profile.corp_id,
                    })
                }
                ProfileWrite::Raced => {
                    tracing::info!("the profile changed since it was read; applying again");
                }
            }
        }
        Err(AdminError::Conflict {
            what: format!("tenant {tenant}"),
        })
    }

    /// Writes the staff member's facts (and departments, when given), then sends a reason to
    /// every code that may route to them (as member, fallback or through a department it
    /// lists) and to every code listing a department they just left. A resignation therefore
    /// reaches every code they could be on.
    #[tracing::instrument(skip_all, fields(tenant = %command.tenant, staff = %command.staff))]
    pub async fn put_staff(&self, command: PutStaff) -> Result<StaffAnswer, AdminError> {
        let PutStaff {
            tenant,
            staff,
            change,
            departments,
            schedule,
        } = command;
        // A staff member of a tenant that does not exist is refused before anything is written.
        self.existing_profile(&tenant).await?;
        let now_ms = (self.clock)();
        // The staff write first: it is the one that may be refused (a resignation is final),
        // and a refused request must change nothing.
        let facts = match self
            .store
            .update_staff(&tenant, &staff, &change, now_ms)
            .await?
        {
            StaffUpdate::Stored(facts) => facts,
            StaffUpdate::ResignationIsFinal => {
                return Err(AdminError::Resigned {
                    staff: staff.to_string(),
                })
            }
        };
        let facts = match &schedule {
            Some(edit) => {
                self.apply_schedule(&tenant, &staff, edit, now_ms).await?;
                StaffFacts {
                    schedule: match edit {
                        ScheduleEdit::Set(schedule) => Some(schedule.clone()),
                        ScheduleEdit::Remove => None,
                    },
                    ..facts
                }
            }
            None => facts,
        };
        let changed = match &departments {
            Some(wanted) => {
                self.store
                    .set_staff_departments(&tenant, &staff, wanted, now_ms)
                    .await?
            }
            None => Vec::new(),
        };
        // The codes of departments joined are among the staff member's codes already; the
        // ones of departments left are not, any more.
        let mut sources = vec![Source::Staff {
            staff: staff.clone(),
        }];
        sources.extend(changed.iter().map(|department| Source::Department {
            department: department.clone(),
        }));
        let fan_out = FanOut::new(
            tenant.clone(),
            sources,
            Cause::StaffChanged,
            now_ms,
            format!("staff:{staff}:{now_ms}"),
        );
        self.fan_outs.send(&fan_out).await?;
        tracing::info!(online = facts.online, employment = ?facts.employment, departments_changed = changed.len(), fan_out = %fan_out.fact_key, "staff facts stored");
        Ok(StaffAnswer {
            staff,
            online: facts.online,
            employment: facts.employment,
            departments: departments.map(|d| d.into_iter().collect()),
            rejected_by_wecom: facts.rejected_by_wecom,
            schedule: facts.schedule,
            fan_out: fan_out.fact_key,
        })
    }

    /// Stores (or removes) the staff member's work schedule, then moves the tenant's shift item
    /// to the next minute, where the tick finds the next edge of every schedule, this one's
    /// included (`domain::schedules`). A schedule older than the stored one changes nothing:
    /// its writer moved the item.
    async fn apply_schedule(
        &self,
        tenant: &TenantId,
        staff: &StaffId,
        edit: &ScheduleEdit,
        now_ms: u64,
    ) -> Result<(), StoreError> {
        let schedule = match edit {
            ScheduleEdit::Set(schedule) => Some(schedule),
            ScheduleEdit::Remove => None,
        };
        if !self
            .store
            .set_schedule(tenant, staff, schedule, now_ms)
            .await?
        {
            tracing::info!("a later schedule is stored; this one is dropped");
            return Ok(());
        }
        self.store
            .set_due(tenant, &Subject::Shifts, plan::asap(now_ms), now_ms)
            .await
    }

    /// Replaces the department's members, then sends a reason to every code that lists it
    /// (all of them, not only when someone joined or left: a retry after a failed send must
    /// send them again, and a recompute with nothing changed pushes nothing).
    #[tracing::instrument(skip_all, fields(tenant = %command.tenant, department = %command.department))]
    pub async fn put_department(
        &self,
        command: PutDepartment,
    ) -> Result<DepartmentAnswer, AdminError> {
        let PutDepartment {
            tenant,
            department,
            members,
        } = command;
        self.existing_profile(&tenant).await?;
        let now_ms = (self.clock)();
        let (members, changed) = match members {
            Some(members) => {
                let changed = self
                    .store
                    .set_department_members(&tenant, &department, &members, now_ms)
                    .await?;
                (members, changed)
            }
            // Nothing to set: the answer shows what is stored, and the codes still get their
            // reason (a retry of a request whose send failed must send them).
            None => (
                self.store
                    .department_members(&tenant, &department)
                    .await?
                    .unwrap_or_default(),
                Vec::new(),
            ),
        };
        let fan_out = FanOut::new(
            tenant.clone(),
            vec![Source::Department {
                department: department.clone(),
            }],
            Cause::StaffChanged,
            now_ms,
            format!("department:{department}:{now_ms}"),
        );
        self.fan_outs.send(&fan_out).await?;
        tracing::info!(
            members = members.len(),
            changed = changed.len(),
            fan_out = %fan_out.fact_key,
            "department members stored"
        );
        Ok(DepartmentAnswer {
            department,
            members: members.into_iter().collect(),
            changed,
            fan_out: fan_out.fact_key,
        })
    }

    /// Stores the code's configuration, creates its WeCom contact way if it has none yet,
    /// then sends the code a reason so the refresh function brings WeCom's list in step.
    ///
    /// Fails with `NoEligibleMember` (the configuration stays stored, and the next PUT tries
    /// the creation again) and with `WeCom` when the creation failed.
    #[tracing::instrument(skip_all, fields(tenant = %command.tenant, code = %command.code))]
    pub async fn put_code(&self, command: PutCode) -> Result<CodeAnswer, AdminError> {
        let PutCode {
            tenant,
            code,
            patch,
        } = command;
        self.existing_profile(&tenant).await?;
        let now_ms = (self.clock)();
        let (config, stored) = self.store_code(&tenant, &code, patch, now_ms).await?;
        let (config_id, qr_code, created) = match stored.code.config_id {
            Some(config_id) => (config_id, None, false),
            None => self.create_contact_way(&tenant, &code, now_ms).await?,
        };
        self.reasons
            .send(
                &Fact {
                    tenant: tenant.clone(),
                    cause: Cause::CodeEdited,
                    at_ms: now_ms,
                    key: format!("code:{code}:v{}", stored.version),
                }
                .reason_for(&code),
            )
            .await?;
        tracing::info!(version = stored.version, created, config_id = %config_id, members = config.members.len(), "code stored");
        Ok(CodeAnswer {
            code,
            config_id,
            version: stored.version,
            created,
            qr_code,
        })
    }

    /// Reads the stored configuration, applies the patch and writes the result if the code is
    /// still at the version read; a concurrent edit in between makes it read and apply again
    /// (a few times, then 409), so no edit's field is lost to another's read.
    async fn store_code(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        patch: CodePatch,
        now_ms: u64,
    ) -> Result<(membership::CodeConfig, VersionedCode), AdminError> {
        const ATTEMPTS: usize = 3;
        for _ in 0..ATTEMPTS {
            let before = self.store.code(tenant, code).await?;
            let config = patch
                .clone()
                .apply(before.as_ref().map(|b| &b.code.config))?;
            let read_version = before.map(|b| b.version);
            match self
                .store
                .put_code(tenant, code, &config, read_version, now_ms)
                .await?
            {
                Some(stored) => return Ok((config, stored)),
                None => tracing::info!("the code changed since it was read; applying again"),
            }
        }
        Err(AdminError::Conflict {
            what: format!("code {code} of tenant {tenant}"),
        })
    }

    /// Deletes the code's WeCom contact way, then the code's items. WeCom first: were the
    /// items deleted first, a failed WeCom call would leave a contact way nobody knows of,
    /// still routing customers. A contact way WeCom no longer has (41044) counts as deleted,
    /// so a retry after a failure between the two steps completes the deletion. Reasons still
    /// queued for the code find no code and change nothing.
    #[tracing::instrument(skip_all, fields(tenant = %command.tenant, code = %command.code))]
    pub async fn delete_code(&self, command: DeleteCode) -> Result<DeletedCode, AdminError> {
        let DeleteCode { tenant, code } = command;
        let profile = self.existing_profile(&tenant).await?;
        let stored = self
            .store
            .code(&tenant, &code)
            .await?
            .ok_or_else(|| AdminError::not_found(format!("code {code} of tenant {tenant}")))?;
        let config_id = stored.code.config_id;
        if let Some(config_id) = &config_id {
            let creds = profile.credentials(&tenant);
            self.spend(&tenant, DEL_CONTACT_WAY).await?;
            match self.contact_ways.delete(&creds, config_id).await {
                Ok(()) => {}
                Err(WeComError::CodeGone { errcode }) => {
                    tracing::info!(errcode, config_id, "WeCom has no such contact way any more");
                }
                Err(e) => return Err(self.refused(&tenant, DEL_CONTACT_WAY, e).await),
            }
        }
        self.store.delete_code(&tenant, &code).await?;
        tracing::info!(config_id = ?config_id, "code deleted");
        Ok(DeletedCode { code, config_id })
    }

    async fn existing_profile(&self, tenant: &TenantId) -> Result<TenantProfile, AdminError> {
        self.store
            .profile(tenant)
            .await?
            .ok_or_else(|| AdminError::not_found(format!("tenant {tenant}")))
    }

    /// Creates the contact way with the code's current list and stores its `config_id`.
    /// Answers the stored `config_id`, WeCom's QR code URL and whether this call created it.
    async fn create_contact_way(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        now_ms: u64,
    ) -> Result<(String, Option<String>, bool), AdminError> {
        let snapshot = self
            .store
            .snapshot(tenant, code, now_ms)
            .await?
            .ok_or_else(|| AdminError::not_found(format!("code {code} of tenant {tenant}")))?;
        // Recorded before the call: a crash between WeCom's answer and our record leaves a
        // contact way nobody knows of, which the sweep finds through this intent (and knows
        // for ours by the intent's marker in its remark).
        let intent = CreationIntent {
            tenant: tenant.clone(),
            code: code.clone(),
            started_at_ms: now_ms,
        };
        let way = new_contact_way(&snapshot, code, intent.marker())?;
        let creds = snapshot.credentials(tenant);
        self.spend(tenant, ADD_CONTACT_WAY).await?;
        self.store.record_intent(&intent).await?;
        let created = match self.contact_ways.create(&creds, &way).await {
            Ok(created) => created,
            Err(e) => {
                // A transient failure (a timeout, a dropped connection) may hide a contact way
                // WeCom did create: its intent stays for the sweep. Any answer of WeCom's own
                // says nothing was made, and the intent would only cost the sweep a look.
                if e.class() != FailureClass::Transient {
                    self.clear_intent(&intent).await;
                }
                return Err(self.refused(tenant, ADD_CONTACT_WAY, e).await);
            }
        };
        match self
            .store
            .set_config_id(tenant, code, &created.config_id, &way.users)
            .await
        {
            Ok(true) => {
                self.clear_intent(&intent).await;
                Ok((created.config_id, created.qr_code, true))
            }
            Ok(false) => {
                // Another request stored its contact way first: keep that one, drop ours.
                tracing::info!(ours = %created.config_id, "a concurrent request created the code's contact way first");
                if self.discard(&creds, &created.config_id).await {
                    self.clear_intent(&intent).await;
                }
                let stored = self
                    .store
                    .code(tenant, code)
                    .await?
                    .and_then(|c| c.code.config_id)
                    .ok_or_else(|| {
                        AdminError::not_found(format!("code {code} of tenant {tenant}"))
                    })?;
                Ok((stored, None, false))
            }
            Err(e) => {
                // Unrecorded, the contact way could never be edited; the next PUT makes another.
                if self.discard(&creds, &created.config_id).await {
                    self.clear_intent(&intent).await;
                }
                Err(e.into())
            }
        }
    }

    /// The creation is settled: its contact way is recorded or deleted. An intent left
    /// behind only costs the sweep a look.
    async fn clear_intent(&self, intent: &CreationIntent) {
        if let Err(error) = self.store.clear_intent(intent).await {
            tracing::warn!(error = %error, "creation intent not cleared; the sweep looks once");
        }
    }

    /// Deletes a contact way this request created but could not keep; `false` when WeCom
    /// did not (the creation's intent then stays, for the sweep).
    async fn discard(&self, creds: &CorpCredentials, config_id: &str) -> bool {
        if let Err(e) = self.contact_ways.delete(creds, config_id).await {
            tracing::error!(alert = "orphan_contact_way", config_id, class = %e.class(), error = %e, "could not delete an unrecorded contact way; the sweep tries again");
            return false;
        }
        true
    }
}

/// The secrets' change times after `profile` replaces `previous`: a secret's time moves only
/// when its value does.
fn secrets_changed(
    previous: Option<&StoredProfile>,
    profile: &TenantProfile,
    now_ms: u64,
) -> SecretsChanged {
    let at = |old: Option<(&String, u64)>, new: &String| match old {
        Some((old, at)) if old == new => at,
        _ => now_ms,
    };
    SecretsChanged {
        corp_secret: at(
            previous.map(|p| (&p.profile.corp_secret, p.secrets_changed_at_ms.corp_secret)),
            &profile.corp_secret,
        ),
        callback_token: at(
            previous.map(|p| {
                (
                    &p.profile.callback_token,
                    p.secrets_changed_at_ms.callback_token,
                )
            }),
            &profile.callback_token,
        ),
        encoding_aes_key: at(
            previous.map(|p| {
                (
                    &p.profile.encoding_aes_key,
                    p.secrets_changed_at_ms.encoding_aes_key,
                )
            }),
            &profile.encoding_aes_key,
        ),
    }
}

/// The contact way a code is created with: its current list, its id as the `state`, its
/// creation intent's marker as the `remark`.
fn new_contact_way(
    snapshot: &CodeSnapshot,
    code: &CodeId,
    marker: String,
) -> Result<NewContactWay, AdminError> {
    // WeCom refuses a multi-user contact way without users, and an empty one would route
    // nobody anyway.
    let users = snapshot
        .recompute()
        .users()
        .ok_or_else(|| AdminError::NoEligibleMember {
            code: code.to_string(),
        })?
        .iter()
        .map(|u| u.as_str().to_owned())
        .collect();
    Ok(NewContactWay {
        kind: ContactWayKind::Multi,
        scene: ContactWayScene::QrCode,
        // Add callbacks echo it, which is how the facts function knows the code.
        state: code.as_str().to_owned(),
        users,
        remark: Some(marker),
        // A live QR code exists to be added without friction; WeCom's default too.
        skip_verify: true,
    })
}

#[cfg(test)]
mod schedule_tests;

#[cfg(test)]
mod tests;
