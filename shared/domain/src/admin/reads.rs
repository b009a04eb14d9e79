//! The admin API's reads: a tenant, a staff member, a department, a code's status, pages of
//! codes, and the drift report.

use super::views::{
    exclusion_name, AddsAgainst, CodePage, CodeStatus, CodeSummaryView, DepartmentView,
    ExcludedMember, LastPushed, PausedView, PreviousKeysView, Resumed, RoutingOutcome, SecretState,
    SecretsView, StaffCodeView, StaffCodesPage, StaffView, TenantView,
};
use super::{
    Admin, AdminError, AdminStore, ContactWays, GetCode, GetDepartment, GetDrift, GetStaff,
    GetTenant, ListCodes, ResumeRepair,
};
use crate::membership::{self, Membership};
use crate::reasons::ReasonQueue;
use crate::sweep::{drift_view, DriftView};
use crate::tenants::tenant_day;

impl<S: AdminStore, Q: ReasonQueue, W: ContactWays> Admin<S, Q, W> {
    #[tracing::instrument(skip_all, fields(tenant = %query.tenant))]
    pub async fn tenant(&self, query: GetTenant) -> Result<TenantView, AdminError> {
        let GetTenant { tenant } = query;
        let stored = self
            .store
            .stored_profile(&tenant)
            .await?
            .ok_or_else(|| AdminError::not_found(format!("tenant {tenant}")))?;
        let state = |value: &str, at: u64| SecretState {
            set: !value.is_empty(),
            changed_at_ms: (at > 0).then_some(at),
        };
        let (profile, at) = (&stored.profile, stored.secrets_changed_at_ms);
        let paused = self.store.pause_of(&tenant).await?.map(PausedView::of);
        Ok(TenantView {
            paused,
            corp_id: profile.corp_id.clone(),
            timezone: profile.timezone.name().to_owned(),
            company_daily_cap: profile.company_daily_cap,
            version: stored.version,
            secrets: SecretsView {
                corp_secret: state(&profile.corp_secret, at.corp_secret),
                callback_token: state(&profile.callback_token, at.callback_token),
                encoding_aes_key: state(&profile.encoding_aes_key, at.encoding_aes_key),
                previous_callback_keys: profile
                    .previous_callback
                    .as_ref()
                    .map(|previous| PreviousKeysView {
                        replaced_at_ms: previous.replaced_at_ms,
                        edge_until_ms: self.key_rotation.edge_until(previous),
                        kept_until_ms: self.key_rotation.kept_until(previous),
                    })
                    .filter(|view| (self.clock)() < view.kept_until_ms),
            },
            tenant,
        })
    }

    /// The tenant's drift report for the day asked (its current day by default) and its
    /// blast-radius guard.
    #[tracing::instrument(skip_all, fields(tenant = %query.tenant))]
    pub async fn drift(&self, query: GetDrift) -> Result<DriftView, AdminError> {
        let GetDrift { tenant, day } = query;
        let profile = self.existing_profile(&tenant).await?;
        let day = day.unwrap_or_else(|| tenant_day((self.clock)(), profile.timezone));
        Ok(drift_view(&self.store, &tenant, &day).await?)
    }

    /// Resumes the sweep's repair of a tenant whose guard tripped; `resumed` is false when it
    /// had not tripped.
    #[tracing::instrument(skip_all, fields(tenant = %command.tenant))]
    pub async fn resume_repair(&self, command: ResumeRepair) -> Result<Resumed, AdminError> {
        let ResumeRepair { tenant } = command;
        self.existing_profile(&tenant).await?;
        let resumed = self.store.resume(&tenant).await?;
        if resumed {
            tracing::warn!(
                alert = "drift_repair_resumed",
                "an operator resumed the tenant's repair"
            );
        }
        Ok(Resumed { tenant, resumed })
    }

    #[tracing::instrument(skip_all, fields(tenant = %query.tenant, staff = %query.staff))]
    pub async fn staff(&self, query: GetStaff) -> Result<StaffView, AdminError> {
        let GetStaff { tenant, staff } = query;
        let profile = self.existing_profile(&tenant).await?;
        let record = self
            .store
            .staff_record(&tenant, &staff)
            .await?
            .ok_or_else(|| AdminError::not_found(format!("staff {staff} of tenant {tenant}")))?;
        let day = tenant_day((self.clock)(), profile.timezone);
        let adds = self.store.adds_on_all_codes(&tenant, &staff, &day).await?;
        Ok(StaffView {
            staff,
            employment: record.facts.employment,
            online: record.facts.online,
            rejected_by_wecom: record.facts.rejected_by_wecom,
            schedule: record.facts.schedule,
            departments: record.departments.into_iter().collect(),
            day,
            adds_today_all_codes: AddsAgainst {
                adds,
                limit: profile.company_daily_cap,
            },
        })
    }

    #[tracing::instrument(skip_all, fields(tenant = %query.tenant, department = %query.department))]
    pub async fn department(&self, query: GetDepartment) -> Result<DepartmentView, AdminError> {
        let GetDepartment { tenant, department } = query;
        self.existing_profile(&tenant).await?;
        let members = self
            .store
            .department_members(&tenant, &department)
            .await?
            .ok_or_else(|| {
                AdminError::not_found(format!("department {department} of tenant {tenant}"))
            })?;
        Ok(DepartmentView {
            department,
            members: members.into_iter().collect(),
        })
    }

    /// A page of the tenant's codes (one query of the table).
    #[tracing::instrument(skip_all, fields(tenant = %query.tenant))]
    pub async fn codes(&self, query: ListCodes) -> Result<CodePage, AdminError> {
        let ListCodes { tenant, page, .. } = query;
        self.existing_profile(&tenant).await?;
        let (codes, more) = self
            .store
            .codes_page(&tenant, page.after.as_ref(), page.limit)
            .await?;
        let next_cursor = more
            .then(|| codes.last().map(|c| c.code.to_string()))
            .flatten();
        Ok(CodePage {
            codes: codes
                .into_iter()
                .map(|c| CodeSummaryView {
                    code: c.code,
                    family: c.family,
                    config_id: c.config_id,
                    version: c.version,
                })
                .collect(),
            next_cursor,
        })
    }

    /// A page of the codes that may route to the staff member, each with their adds through
    /// it against its limits. The staff -> codes index is read whole (it is bounded by the
    /// seats a staff member holds), the page's counters in batches.
    #[tracing::instrument(skip_all, fields(tenant = %query.tenant))]
    pub async fn staff_codes(&self, query: ListCodes) -> Result<StaffCodesPage, AdminError> {
        let ListCodes {
            tenant,
            staff,
            page,
        } = query;
        let staff = staff.ok_or_else(|| AdminError::invalid("staff", "is required"))?;
        let profile = self.existing_profile(&tenant).await?;
        if self.store.staff_record(&tenant, &staff).await?.is_none() {
            return Err(AdminError::not_found(format!(
                "staff {staff} of tenant {tenant}"
            )));
        }
        let all = self.store.codes_of_staff(&tenant, &staff).await?;
        let rest: Vec<_> = all
            .into_iter()
            .filter(|code| page.after.as_ref().is_none_or(|after| code > after))
            .collect();
        let more = rest.len() > page.limit;
        let codes: Vec<_> = rest.into_iter().take(page.limit).collect();
        let day = tenant_day((self.clock)(), profile.timezone);
        let adds = self
            .store
            .adds_on_codes(&tenant, &staff, &codes, &day)
            .await?;
        let next_cursor = more.then(|| codes.last().map(|c| c.to_string())).flatten();
        Ok(StaffCodesPage {
            staff,
            day,
            codes: adds
                .into_iter()
                .map(|a| StaffCodeView {
                    adds_today: AddsAgainst {
                        adds: a.today,
                        limit: a.switches.and_then(|s| s.daily_limit),
                    },
                    adds_total: AddsAgainst {
                        adds: a.total,
                        limit: a.switches.and_then(|s| s.add_limit),
                    },
                    code: a.code,
                })
                .collect(),
            next_cursor,
        })
    }

    /// The code's recompute at this moment, compared with what WeCom last accepted.
    #[tracing::instrument(skip_all, fields(tenant = %query.tenant, code = %query.code))]
    pub async fn code_status(&self, query: GetCode) -> Result<CodeStatus, AdminError> {
        let GetCode { tenant, code } = query;
        let not_found = || AdminError::not_found(format!("code {code} of tenant {tenant}"));
        let stored = self
            .store
            .code(&tenant, &code)
            .await?
            .ok_or_else(not_found)?;
        let snapshot = self
            .store
            .snapshot(&tenant, &code, (self.clock)())
            .await?
            .ok_or_else(not_found)?;
        let facts = snapshot.facts();
        let excluded = membership::assess(&facts)
            .into_iter()
            .filter_map(|(staff, exclusion)| {
                exclusion.map(|e| ExcludedMember {
                    staff,
                    reason: exclusion_name(e),
                })
            })
            .collect();
        let recomputed = membership::recompute(&facts);
        let outcome = match recomputed {
            Membership::Members(_) => RoutingOutcome::Members,
            Membership::Fallback(_) => RoutingOutcome::Fallback,
            Membership::Starved => RoutingOutcome::Starved,
        };
        let eligible_now = recomputed.users().unwrap_or_default().to_vec();
        let in_sync = outcome != RoutingOutcome::Starved && snapshot.wecom_has(&eligible_now);
        let starved = snapshot.last_pushed.as_ref().is_some_and(|p| p.starved);
        let pushed_at_ms = snapshot
            .last_pushed
            .as_ref()
            .filter(|p| !p.users.is_empty())
            .map(|p| p.pushed_at_ms);
        let wecom_list = snapshot.wecom_list().to_vec();
        let last_pushed = (!wecom_list.is_empty() || starved).then_some(LastPushed {
            users: wecom_list,
            pushed_at_ms,
            starved,
        });
        Ok(CodeStatus {
            code,
            family: snapshot.code.config.family,
            departments: snapshot.code.config.departments,
            config_id: snapshot.code.config_id,
            version: stored.version,
            eligible_now,
            outcome,
            excluded,
            last_pushed,
            in_sync,
        })
    }
}
