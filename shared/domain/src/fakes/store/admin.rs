//! The admin API's ports, and those it shares with the other functions.

use super::{land, seats, InMemoryStore, NEW_STAFF};
use crate::admin::{
    AdminStore, CodeAdds, CodeSummary, ProfileWrite, StaffChange, StaffRecord, StaffUpdate,
    StoredProfile, VersionedCode,
};
use crate::codes::{CodeFacts, CodeSnapshot, StoredCode};
use crate::facts::QuotaLedger;
use crate::facts::{StaffLedger, TenantProfiles};
use crate::fanout::CodeIndex;
use crate::ids::TenantId;
use crate::ids::{CodeId, DepartmentId, StaffId};
use crate::lanes::CodeAge;
use crate::membership::{candidates, AddCounts, CodeConfig, Employment, WeeklySchedule};
use crate::owed::replan;
use crate::reasons::Source;
use crate::schedules::{DueWriter, Minute, Subject};
use crate::tenants::TenantProfile;
use crate::StoreError;
use std::collections::{BTreeSet, HashMap};

#[async_trait::async_trait]
impl TenantProfiles for InMemoryStore {
    async fn profile(&self, tenant: &TenantId) -> Result<Option<TenantProfile>, StoreError> {
        Ok(self.available()?.profiles.get(tenant).cloned())
    }
}

#[async_trait::async_trait]
impl crate::tenants::CallbackSettingsSource for InMemoryStore {
    async fn callback_settings(
        &self,
        tenant: &TenantId,
    ) -> Result<Option<crate::tenants::CallbackSettings>, StoreError> {
        Ok(self
            .available()?
            .profiles
            .get(tenant)
            .map(TenantProfile::callback_settings))
    }
}

#[async_trait::async_trait]
impl CodeFacts for InMemoryStore {
    async fn snapshot(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        now_ms: u64,
    ) -> Result<Option<CodeSnapshot>, StoreError> {
        let mut tables = self.available()?;
        if !tables.history_off {
            tables.snapshots_read.push(code.clone());
        }
        if tables.unreadable_codes.contains(code) {
            return Err(StoreError::new(
                "table",
                "the fake code item is switched off",
            ));
        }
        let key = (tenant.clone(), code.clone());
        let (Some(profile), Some(stored)) = (tables.profiles.get(tenant), tables.codes.get(&key))
        else {
            return Ok(None);
        };
        let config = &stored.code.config;
        let departments: HashMap<DepartmentId, BTreeSet<StaffId>> = config
            .departments
            .iter()
            .filter_map(|d| {
                let members = tables.departments.get(&(tenant.clone(), d.clone()))?;
                Some((d.clone(), members.clone()))
            })
            .collect();
        let expanded = candidates(config, &departments);
        let people: Vec<&StaffId> = expanded.iter().chain(&config.fallback).collect();
        let staff = people
            .iter()
            .filter_map(|s| {
                let facts = tables.staff.get(&(tenant.clone(), (*s).clone()))?;
                Some(((*s).clone(), facts.clone()))
            })
            .collect();
        // A fixture's counts (`set_today`) stand for the counters on the snapshot's day; without
        // one, the counters the counted adds incremented, as the table reads them.
        let day = crate::tenants::tenant_day(now_ms, profile.timezone);
        let today = people
            .iter()
            .filter_map(|s| {
                let fixture = tables
                    .today
                    .get(&(tenant.clone(), code.clone(), (*s).clone()));
                let counts = match fixture {
                    Some(counts) => *counts,
                    None => tables.adds.counts(tenant, code, s, &day),
                };
                (counts != AddCounts::default()).then(|| ((*s).clone(), counts))
            })
            .collect();
        Ok(Some(CodeSnapshot {
            profile: profile.clone(),
            code: stored.code.clone(),
            staff,
            adds: today,
            departments,
            now_ms,
            last_pushed: tables.pushed.get(&key).cloned(),
            dirty_since_ms: tables.dirty.get(&key).map(|(at, _)| *at),
            links: people
                .iter()
                .filter_map(|s| {
                    let link = tables.links.get(&(tenant.clone(), (*s).clone()))?;
                    Some(((*s).clone(), link.url.clone()))
                })
                .collect(),
            lease: crate::codes::LeaseSeen {
                acquisitions: tables.lease_acquisitions.get(&key).copied().unwrap_or(0),
                held_until_ms: tables.leases.get(&key).map_or(0, |l| l.expires_at_ms),
            },
            age: tables.ages.get(&key).copied().unwrap_or_default(),
            tenant_paused: tables.pauses.get(tenant).cloned(),
        }))
    }
}

#[async_trait::async_trait]
impl crate::tenants::TenantPauses for InMemoryStore {
    async fn pause(
        &self,
        tenant: &TenantId,
        pause: &crate::tenants::TenantPause,
    ) -> Result<bool, StoreError> {
        let mut tables = self.available()?;
        if tables.pauses.contains_key(tenant) {
            return Ok(false);
        }
        tables.pauses.insert(tenant.clone(), pause.clone());
        Ok(true)
    }

    async fn pause_of(
        &self,
        tenant: &TenantId,
    ) -> Result<Option<crate::tenants::TenantPause>, StoreError> {
        Ok(self.available()?.pauses.get(tenant).cloned())
    }

    async fn paused_tenants(&self) -> Result<Vec<TenantId>, StoreError> {
        Ok(self.available()?.pauses.keys().cloned().collect())
    }

    async fn update_pause(
        &self,
        tenant: &TenantId,
        pause: &crate::tenants::TenantPause,
    ) -> Result<(), StoreError> {
        let mut tables = self.available()?;
        if let Some(current) = tables.pauses.get_mut(tenant) {
            if current.since_ms == pause.since_ms {
                *current = pause.clone();
            }
        }
        Ok(())
    }

    async fn lift_pause(&self, tenant: &TenantId, since_ms: u64) -> Result<bool, StoreError> {
        let mut tables = self.available()?;
        if tables
            .pauses
            .get(tenant)
            .is_some_and(|pause| pause.since_ms == since_ms)
        {
            tables.pauses.remove(tenant);
            return Ok(true);
        }
        Ok(false)
    }
}

#[async_trait::async_trait]
impl DueWriter for InMemoryStore {
    async fn set_due(
        &self,
        tenant: &TenantId,
        subject: &Subject,
        minute: Minute,
        now_ms: u64,
    ) -> Result<(), StoreError> {
        let mut tables = self.available()?;
        let key = (tenant.clone(), subject.clone());
        let through = tables.due.get(&key).map_or(now_ms, |(_, through)| through);
        tables.due.insert(key, minute, through);
        Ok(())
    }
}

#[async_trait::async_trait]
impl AdminStore for InMemoryStore {
    async fn set_schedule(
        &self,
        tenant: &TenantId,
        staff: &StaffId,
        schedule: Option<&WeeklySchedule>,
        at_ms: u64,
    ) -> Result<bool, StoreError> {
        let mut tables = self.available()?;
        let key = (tenant.clone(), staff.clone());
        if tables
            .schedule_at_ms
            .get(&key)
            .is_some_and(|&set| set > at_ms)
        {
            return Ok(false);
        }
        tables.schedule_at_ms.insert(key.clone(), at_ms);
        tables.staff.entry(key).or_insert(NEW_STAFF).schedule = schedule.cloned();
        Ok(true)
    }

    async fn stored_profile(&self, tenant: &TenantId) -> Result<Option<StoredProfile>, StoreError> {
        let tables = self.available()?;
        Ok(tables.profiles.get(tenant).map(|profile| {
            let (version, secrets_changed_at_ms) =
                tables.profile_meta.get(tenant).copied().unwrap_or_default();
            StoredProfile {
                profile: profile.clone(),
                version,
                secrets_changed_at_ms,
            }
        }))
    }

    async fn put_profile(
        &self,
        tenant: &TenantId,
        next: &StoredProfile,
        previous: Option<&StoredProfile>,
    ) -> Result<ProfileWrite, StoreError> {
        let mut tables = self.available()?;
        let stored_version = tables
            .profiles
            .contains_key(tenant)
            .then(|| tables.profile_meta.get(tenant).map_or(0, |m| m.0));
        if stored_version != previous.map(|p| p.version) {
            return Ok(ProfileWrite::Raced);
        }
        let corp_id = &next.profile.corp_id;
        if tables
            .corp_claims
            .get(corp_id)
            .is_some_and(|holder| holder != tenant)
        {
            return Ok(ProfileWrite::CorpIdTaken);
        }
        if let Some(previous) = previous.filter(|p| &p.profile.corp_id != corp_id) {
            tables.corp_claims.remove(&previous.profile.corp_id);
        }
        tables.corp_claims.insert(corp_id.clone(), tenant.clone());
        tables.profiles.insert(tenant.clone(), next.profile.clone());
        tables
            .profile_meta
            .insert(tenant.clone(), (next.version, next.secrets_changed_at_ms));
        Ok(ProfileWrite::Stored)
    }

    async fn update_staff(
        &self,
        tenant: &TenantId,
        staff: &StaffId,
        change: &StaffChange,
        now_ms: u64,
    ) -> Result<StaffUpdate, StoreError> {
        let mut tables = self.available()?;
        let key = (tenant.clone(), staff.clone());
        let facts = tables.staff.entry(key.clone()).or_insert(NEW_STAFF);
        if facts.employment == Employment::Resigned
            && change.employment.is_some_and(|e| e != Employment::Resigned)
        {
            return Ok(StaffUpdate::ResignationIsFinal);
        }
        if let Some(online) = change.online {
            facts.online = online;
        }
        if let Some(employment) = change.employment {
            facts.employment = employment;
        }
        let stored = facts.clone();
        if change.employment == Some(Employment::Resigned) {
            tables.index_resignation(&key, now_ms);
        }
        Ok(StaffUpdate::Stored(stored))
    }

    async fn staff_record(
        &self,
        tenant: &TenantId,
        staff: &StaffId,
    ) -> Result<Option<StaffRecord>, StoreError> {
        let tables = self.available()?;
        let key = (tenant.clone(), staff.clone());
        Ok(tables.staff.get(&key).map(|facts| StaffRecord {
            facts: facts.clone(),
            departments: tables
                .staff_departments
                .get(&key)
                .cloned()
                .unwrap_or_default(),
        }))
    }

    async fn department_members(
        &self,
        tenant: &TenantId,
        department: &DepartmentId,
    ) -> Result<Option<BTreeSet<StaffId>>, StoreError> {
        Ok(self
            .available()?
            .departments
            .get(&(tenant.clone(), department.clone()))
            .cloned())
    }

    async fn codes_page(
        &self,
        tenant: &TenantId,
        after: Option<&CodeId>,
        limit: usize,
    ) -> Result<(Vec<CodeSummary>, bool), StoreError> {
        let tables = self.available()?;
        let mut codes: Vec<CodeSummary> = tables
            .tenant_codes_after(tenant, after, limit.saturating_add(1))
            .into_iter()
            .filter_map(|code| {
                let stored = tables.codes.get(&(tenant.clone(), code.clone()))?;
                Some(CodeSummary {
                    code: code.clone(),
                    family: stored.code.config.family,
                    config_id: stored.code.config_id.clone(),
                    version: stored.version,
                })
            })
            .collect();
        let more = codes.len() > limit;
        codes.truncate(limit);
        Ok((codes, more))
    }

    async fn adds_on_codes(
        &self,
        tenant: &TenantId,
        staff: &StaffId,
        codes: &[CodeId],
        day: &str,
    ) -> Result<Vec<CodeAdds>, StoreError> {
        let mut adds = Vec::with_capacity(codes.len());
        for code in codes {
            let counts = QuotaLedger::counts(self, tenant, code, staff, day).await?;
            let switches = QuotaLedger::code_config(self, tenant, code)
                .await?
                .map(|config| config.switches);
            adds.push(CodeAdds {
                code: code.clone(),
                today: counts.on_code,
                total: counts.on_code_total,
                switches,
            });
        }
        Ok(adds)
    }

    async fn adds_on_all_codes(
        &self,
        tenant: &TenantId,
        staff: &StaffId,
        day: &str,
    ) -> Result<u32, StoreError> {
        Ok(self.available()?.adds.all_codes(tenant, staff, day))
    }

    async fn codes_of_tenant(&self, tenant: &TenantId) -> Result<Vec<CodeId>, StoreError> {
        let tables = self.available()?;
        Ok(tables
            .tenant_codes_after(tenant, None, usize::MAX)
            .into_iter()
            .cloned()
            .collect())
    }

    async fn code(
        &self,
        tenant: &TenantId,
        code: &CodeId,
    ) -> Result<Option<VersionedCode>, StoreError> {
        Ok(self
            .available()?
            .codes
            .get(&(tenant.clone(), code.clone()))
            .cloned())
    }

    async fn put_code(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        config: &CodeConfig,
        read_version: Option<u64>,
        now_ms: u64,
    ) -> Result<Option<VersionedCode>, StoreError> {
        let mut tables = self.available()?;
        let key = (tenant.clone(), code.clone());
        if let Some(members) = tables.edit_race.remove(&key) {
            if let Some(stored) = tables.codes.get_mut(&key) {
                stored.code.config.members = members;
                stored.version += 1;
            }
        }
        if tables.codes.get(&key).map(|c| c.version) != read_version {
            return Ok(None);
        }
        let age = tables.ages.get(&key).map_or(
            CodeAge {
                created_at_ms: now_ms,
                updated_at_ms: now_ms,
            },
            |age| CodeAge {
                updated_at_ms: now_ms,
                ..*age
            },
        );
        let previous = tables.codes.get(&key).cloned();
        let owed_before = tables.code_owed.get(&key).cloned().unwrap_or_default();
        let stored_seats = previous
            .as_ref()
            .map(|p| seats(&p.code.config))
            .unwrap_or_default();
        let plan = replan(&stored_seats, &owed_before, &seats(config));
        let stored = VersionedCode {
            code: StoredCode {
                config: config.clone(),
                config_id: previous.as_ref().and_then(|p| p.code.config_id.clone()),
                created_with: previous
                    .as_ref()
                    .map(|p| p.code.created_with.clone())
                    .unwrap_or_default(),
            },
            version: previous.as_ref().map_or(1, |p| p.version + 1),
        };
        let answer = stored.clone();
        let (owned_key, index_key) = (key.clone(), key.clone());
        land(
            &mut tables,
            &owed_before,
            plan,
            |tables| {
                tables.ages.insert(key.clone(), age);
                tables.stored_code_id(&key.0, &key.1);
                tables.codes.insert(key, stored);
            },
            |tables| tables.code_owed.entry(owned_key.clone()).or_default(),
            |tables, seat, put| {
                if put {
                    tables.code_index.insert(&index_key, seat.clone());
                } else {
                    tables.code_index.remove(&index_key, seat);
                }
            },
        )?;
        Ok(Some(answer))
    }

    async fn delete_code(&self, tenant: &TenantId, code: &CodeId) -> Result<(), StoreError> {
        let mut tables = self.available()?;
        let key = (tenant.clone(), code.clone());
        tables.codes.remove(&key);
        if let Some(codes) = tables.tenant_codes.get_mut(tenant) {
            codes.remove(code);
        }
        tables.ages.remove(&key);
        tables.code_index.remove_code(&key);
        tables.code_owed.remove(&key);
        tables.pushed.remove(&key);
        tables.pages.remove(&key);
        tables
            .today
            .retain(|(t, c, _), _| !(t == tenant && c == code));
        Ok(())
    }

    async fn set_config_id(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        config_id: &str,
        created_with: &[String],
    ) -> Result<bool, StoreError> {
        let mut tables = self.available()?;
        let key = (tenant.clone(), code.clone());
        let winner = tables.race.remove(&key);
        let Some(stored) = tables.codes.get_mut(&key) else {
            return Ok(false);
        };
        if let Some(winner) = winner {
            stored.code.config_id = Some(winner);
        }
        if stored.code.config_id.is_some() {
            return Ok(false);
        }
        stored.code.config_id = Some(config_id.to_owned());
        stored.code.created_with = created_with
            .iter()
            .filter_map(|u| StaffId::parse(u).ok())
            .collect();
        Ok(true)
    }
}

#[async_trait::async_trait]
impl CodeIndex for InMemoryStore {
    async fn codes_of(
        &self,
        tenant: &TenantId,
        source: &Source,
    ) -> Result<Vec<CodeId>, StoreError> {
        match source {
            Source::Staff { staff } => StaffLedger::codes_of_staff(self, tenant, staff).await,
            Source::Department { department } => {
                StaffLedger::codes_listing_department(self, tenant, department).await
            }
            Source::Tenant => self.codes_of_tenant(tenant).await,
        }
    }
}
