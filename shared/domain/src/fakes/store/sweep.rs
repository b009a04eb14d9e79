//! The sweep's records: the dirty set by due time, its lease and cursor, the tenants'
//! registry, each tenant's sample cursor, drift reports and guard; the fan-outs given up.

use super::{CodeDrift, InMemoryStore, StaffKey, Tables};
use crate::dirty::{DirtyMark, DirtyWhy, FanOutMark, FanOutMarks, StaleSuspect};
use crate::ids::TenantId;
use crate::ids::{CodeId, StaffId};
use crate::membership::Employment;
use crate::membership::StaffFacts;
use crate::reasons::FanOut;
use crate::sweep::{
    CreationIntent, CreationIntents, DirtyIndex, DriftCounts, DriftLedger, DriftReport,
    FanOutIndex, GuardTrip, LeavingStaff, LinkRetirements, SweepRuns, TenantRegistry,
};
use crate::StoreError;
use std::collections::BTreeMap;

#[async_trait::async_trait]
impl DirtyIndex for InMemoryStore {
    async fn due_marks(&self, now_ms: u64, limit: usize) -> Result<Vec<DirtyMark>, StoreError> {
        let tables = self.available()?;
        let mut due: Vec<DirtyMark> = tables
            .dirty
            .iter()
            .filter_map(|((tenant, code), (at, why))| {
                let (resyncs, due_at_ms) = tables.dirty_due.get(&(tenant.clone(), code.clone()))?;
                (*due_at_ms <= now_ms).then(|| DirtyMark {
                    tenant: tenant.clone(),
                    code: code.clone(),
                    marked_at_ms: *at,
                    why: Some(*why),
                    resyncs: *resyncs,
                    due_at_ms: *due_at_ms,
                    suspect: tables
                        .dirty_suspects
                        .get(&(tenant.clone(), code.clone()))
                        .copied(),
                })
            })
            .collect();
        due.sort_by(|a, b| {
            (a.due_at_ms, &a.tenant, &a.code).cmp(&(b.due_at_ms, &b.tenant, &b.code))
        });
        due.truncate(limit);
        Ok(due)
    }

    async fn resync_sent(
        &self,
        mark: &DirtyMark,
        resyncs: u32,
        next_due_ms: u64,
    ) -> Result<(), StoreError> {
        let mut tables = self.available()?;
        let key = (mark.tenant.clone(), mark.code.clone());
        if tables.dirty.get(&key).map(|(at, _)| *at) == Some(mark.marked_at_ms) {
            tables.dirty_suspects.remove(&key);
            tables.dirty_due.insert(key, (resyncs, next_due_ms));
        }
        Ok(())
    }

    async fn mark_suspect(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        suspect: StaleSuspect,
        at_ms: u64,
        due_ms: u64,
    ) -> Result<(), StoreError> {
        let mut tables = self.available()?;
        let key = (tenant.clone(), code.clone());
        if tables.dirty.contains_key(&key) {
            return Ok(());
        }
        if !tables.history_off {
            tables.marks.dirty.push((code.clone(), DirtyWhy::Stale));
        }
        tables.dirty.insert(key.clone(), (at_ms, DirtyWhy::Stale));
        tables.dirty_due.insert(key.clone(), (0, due_ms));
        tables.dirty_suspects.insert(key, suspect);
        Ok(())
    }

    async fn drop_mark(&self, mark: &DirtyMark) -> Result<(), StoreError> {
        let mut tables = self.available()?;
        let key = (mark.tenant.clone(), mark.code.clone());
        if tables.dirty.get(&key).map(|(at, _)| *at) == Some(mark.marked_at_ms) {
            tables.dirty.remove(&key);
            tables.dirty_due.remove(&key);
            tables.dirty_suspects.remove(&key);
        }
        Ok(())
    }
}

#[async_trait::async_trait]
impl FanOutMarks for InMemoryStore {
    async fn mark_fan_out(
        &self,
        fan_out: &FanOut,
        why: DirtyWhy,
        at_ms: u64,
    ) -> Result<(), StoreError> {
        let mut tables = self.available()?;
        let key = (fan_out.tenant.clone(), fan_out.mark_key());
        match tables.fan_out_marks.get_mut(&key) {
            Some(mark) if mark.marked_at_ms > at_ms => {}
            Some(mark) => {
                mark.fan_out = fan_out.clone();
                mark.marked_at_ms = at_ms;
                mark.why = Some(why);
            }
            None => {
                let mark = FanOutMark {
                    fan_out: fan_out.clone(),
                    marked_at_ms: at_ms,
                    why: Some(why),
                    resends: 0,
                    due_at_ms: at_ms,
                };
                tables.fan_out_marks.insert(key, mark);
            }
        }
        Ok(())
    }

    async fn clear_fan_out(&self, fan_out: &FanOut, began_ms: u64) -> Result<bool, StoreError> {
        let mut tables = self.available()?;
        let key = (fan_out.tenant.clone(), fan_out.mark_key());
        if tables
            .fan_out_marks
            .get(&key)
            .is_some_and(|mark| mark.marked_at_ms < began_ms)
        {
            tables.fan_out_marks.remove(&key);
            return Ok(true);
        }
        Ok(false)
    }
}

#[async_trait::async_trait]
impl FanOutIndex for InMemoryStore {
    async fn due_fan_outs(&self, now_ms: u64, limit: usize) -> Result<Vec<FanOutMark>, StoreError> {
        let tables = self.available()?;
        let mut due: Vec<FanOutMark> = tables
            .fan_out_marks
            .values()
            .filter(|mark| mark.due_at_ms <= now_ms)
            .cloned()
            .collect();
        due.sort_by(|a, b| {
            (a.due_at_ms, &a.fan_out.tenant, a.fan_out.mark_key()).cmp(&(
                b.due_at_ms,
                &b.fan_out.tenant,
                b.fan_out.mark_key(),
            ))
        });
        due.truncate(limit);
        Ok(due)
    }

    async fn fan_out_resent(
        &self,
        mark: &FanOutMark,
        resends: u32,
        next_due_ms: u64,
    ) -> Result<(), StoreError> {
        let mut tables = self.available()?;
        let key = (mark.fan_out.tenant.clone(), mark.fan_out.mark_key());
        if let Some(stored) = tables.fan_out_marks.get_mut(&key) {
            if stored.marked_at_ms == mark.marked_at_ms {
                stored.resends = resends;
                stored.due_at_ms = next_due_ms;
            }
        }
        Ok(())
    }
}

#[async_trait::async_trait]
impl SweepRuns for InMemoryStore {
    async fn acquire(
        &self,
        owner: &str,
        now_ms: u64,
        lease_until_ms: u64,
    ) -> Result<Option<Option<TenantId>>, StoreError> {
        let mut tables = self.available()?;
        let sweep = &mut tables.sweep;
        if sweep.owner.as_deref().is_some_and(|o| o != owner) && sweep.lease_until_ms > now_ms {
            return Ok(None);
        }
        sweep.owner = Some(owner.to_owned());
        sweep.lease_until_ms = lease_until_ms;
        Ok(Some(sweep.cursor.clone()))
    }

    async fn save_cursor(&self, owner: &str, after: Option<&TenantId>) -> Result<bool, StoreError> {
        let mut tables = self.available()?;
        if tables.sweep.owner.as_deref() != Some(owner) {
            return Ok(false);
        }
        tables.sweep.cursor = after.cloned();
        Ok(true)
    }

    async fn release(&self, owner: &str) -> Result<(), StoreError> {
        let mut tables = self.available()?;
        if tables.sweep.owner.as_deref() == Some(owner) {
            tables.sweep.owner = None;
            tables.sweep.lease_until_ms = 0;
        }
        Ok(())
    }
}

#[async_trait::async_trait]
impl TenantRegistry for InMemoryStore {
    async fn tenants_after(
        &self,
        after: Option<&TenantId>,
        limit: usize,
    ) -> Result<Vec<TenantId>, StoreError> {
        let tables = self.available()?;
        let mut tenants: Vec<TenantId> = tables
            .profiles
            .keys()
            .filter(|t| after.is_none_or(|after| *t > after))
            .cloned()
            .collect();
        tenants.sort();
        tenants.truncate(limit);
        Ok(tenants)
    }
}

#[async_trait::async_trait]
impl DriftLedger for InMemoryStore {
    async fn sample_cursor(&self, tenant: &TenantId) -> Result<Option<CodeId>, StoreError> {
        Ok(self.available()?.sweep.sample_cursors.get(tenant).cloned())
    }

    async fn save_sample_cursor(
        &self,
        tenant: &TenantId,
        after: &CodeId,
    ) -> Result<(), StoreError> {
        self.available()?
            .sweep
            .sample_cursors
            .insert(tenant.clone(), after.clone());
        Ok(())
    }

    async fn codes_after(
        &self,
        tenant: &TenantId,
        after: Option<&CodeId>,
        limit: usize,
    ) -> Result<Vec<CodeId>, StoreError> {
        let tables = self.available()?;
        Ok(tables
            .tenant_codes_after(tenant, after, limit)
            .into_iter()
            .cloned()
            .collect())
    }

    async fn add_to_report(
        &self,
        tenant: &TenantId,
        day: &str,
        counts: &DriftCounts,
    ) -> Result<(), StoreError> {
        let mut tables = self.available()?;
        let report = tables
            .sweep
            .reports
            .entry((tenant.clone(), day.to_owned()))
            .or_default();
        report.read += counts.read;
        report.stale_confirmed += counts.stale_confirmed;
        Ok(())
    }

    async fn record_read(
        &self,
        tenant: &TenantId,
        day: &str,
        code: &CodeId,
        differs: bool,
    ) -> Result<(), StoreError> {
        let mut tables = self.available()?;
        let key = (tenant.clone(), day.to_owned(), code.clone());
        match tables.drift_codes.get_mut(&key) {
            Some(drift) => {
                drift.found |= differs;
                drift.latest_differs = differs;
            }
            None if differs => {
                let drift = CodeDrift {
                    found: true,
                    latest_differs: true,
                    repaired: false,
                };
                tables.drift_codes.insert(key, drift);
            }
            None => {}
        }
        Ok(())
    }

    async fn report(&self, tenant: &TenantId, day: &str) -> Result<DriftReport, StoreError> {
        let tables = self.available()?;
        let key = (tenant.clone(), day.to_owned());
        let counts = tables.sweep.reports.get(&key).copied().unwrap_or_default();
        let codes: Vec<CodeDrift> = tables
            .drift_codes
            .iter()
            .filter(|((t, d, _), _)| t == tenant && d == day)
            .map(|(_, drift)| *drift)
            .collect();
        let count = |keep: fn(&CodeDrift) -> bool| {
            u32::try_from(codes.iter().filter(|c| keep(c)).count()).unwrap_or(u32::MAX)
        };
        Ok(DriftReport {
            day: day.to_owned(),
            read: counts.read,
            differing: count(|c| c.found),
            repaired: count(|c| c.repaired),
            still_differing: count(|c| c.latest_differs),
            stale_confirmed: counts.stale_confirmed,
        })
    }

    async fn guard(&self, tenant: &TenantId) -> Result<Option<GuardTrip>, StoreError> {
        Ok(self.available()?.sweep.guards.get(tenant).cloned())
    }

    async fn trip_guard(&self, tenant: &TenantId, trip: &GuardTrip) -> Result<(), StoreError> {
        self.available()?
            .sweep
            .guards
            .insert(tenant.clone(), trip.clone());
        Ok(())
    }

    async fn confirm_guard(
        &self,
        tenant: &TenantId,
        tripped_at_ms: u64,
        at_ms: u64,
    ) -> Result<bool, StoreError> {
        let mut tables = self.available()?;
        match tables.sweep.guards.get_mut(tenant) {
            Some(guard) if guard.tripped_at_ms == tripped_at_ms => {
                guard.confirmed_at_ms = Some(at_ms);
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn resume(&self, tenant: &TenantId) -> Result<bool, StoreError> {
        Ok(self.available()?.sweep.guards.remove(tenant).is_some())
    }
}

#[async_trait::async_trait]
impl CreationIntents for InMemoryStore {
    async fn record_intent(&self, intent: &CreationIntent) -> Result<(), StoreError> {
        self.available()?.sweep.intents.push(intent.clone());
        Ok(())
    }

    async fn clear_intent(&self, intent: &CreationIntent) -> Result<(), StoreError> {
        self.available()?.sweep.intents.retain(|i| i != intent);
        Ok(())
    }

    async fn stale_intents(
        &self,
        before_ms: u64,
        after: Option<&CreationIntent>,
        limit: usize,
    ) -> Result<Vec<CreationIntent>, StoreError> {
        // The table's index order: by time, then tenant, then code.
        let order = |i: &CreationIntent| (i.started_at_ms, i.tenant.clone(), i.code.clone());
        let tables = self.available()?;
        let mut stale: Vec<CreationIntent> = tables
            .sweep
            .intents
            .iter()
            .filter(|i| i.started_at_ms < before_ms)
            .filter(|i| after.is_none_or(|after| order(i) > order(after)))
            .cloned()
            .collect();
        stale.sort_by_key(order);
        stale.truncate(limit);
        Ok(stale)
    }
}

impl Tables {
    /// The staff member resigned at `at_ms`: the one place the resigned-staff index is
    /// written, for every way a resignation arrives (WeCom's `delete_user`, the old id of a
    /// re-keyed user, the admin API), as the table writes it in the same update.
    pub(super) fn index_resignation(&mut self, key: &StaffKey, at_ms: u64) {
        self.sweep.resigned.insert(key.clone(), at_ms);
    }
}

/// Whether the stored staff member is resigned (a member not stored is not).
fn resigned(staff: &BTreeMap<StaffKey, StaffFacts>, key: &StaffKey) -> bool {
    staff
        .get(key)
        .is_some_and(|facts| facts.employment == Employment::Resigned)
}

#[async_trait::async_trait]
impl LinkRetirements for InMemoryStore {
    async fn resigned_before(
        &self,
        before_ms: u64,
        limit: usize,
    ) -> Result<Vec<LeavingStaff>, StoreError> {
        let tables = self.available()?;
        let mut leaving: Vec<(u64, LeavingStaff)> = tables
            .sweep
            .resigned
            .iter()
            .filter(|(_, at_ms)| **at_ms < before_ms)
            .map(|(key, at_ms)| {
                let resigned = resigned(&tables.staff, key);
                let staff = LeavingStaff {
                    tenant: key.0.clone(),
                    staff: key.1.clone(),
                    resigned,
                    link_id: tables.links.get(key).map(|link| link.link_id.clone()),
                    retiring_link_id: tables.sweep.retiring_links.get(key).cloned(),
                };
                (*at_ms, staff)
            })
            .collect();
        leaving.sort_by(|a, b| (a.0, &a.1.staff).cmp(&(b.0, &b.1.staff)));
        leaving.truncate(limit);
        Ok(leaving.into_iter().map(|(_, staff)| staff).collect())
    }

    async fn detach_link(
        &self,
        tenant: &TenantId,
        staff: &StaffId,
        link_id: &str,
    ) -> Result<bool, StoreError> {
        let mut tables = self.available()?;
        let key = (tenant.clone(), staff.clone());
        let resigned = resigned(&tables.staff, &key);
        if !resigned || tables.links.get(&key).map(|l| l.link_id.as_str()) != Some(link_id) {
            return Ok(false);
        }
        tables.links.remove(&key);
        tables.sweep.retiring_links.insert(key, link_id.to_owned());
        Ok(true)
    }

    async fn link_retired(
        &self,
        tenant: &TenantId,
        staff: &StaffId,
        link_id: &str,
    ) -> Result<(), StoreError> {
        let mut tables = self.available()?;
        let key = (tenant.clone(), staff.clone());
        if tables.sweep.retiring_links.get(&key).map(String::as_str) == Some(link_id) {
            tables.sweep.retiring_links.remove(&key);
        }
        Ok(())
    }

    async fn nothing_to_retire(
        &self,
        tenant: &TenantId,
        staff: &StaffId,
    ) -> Result<(), StoreError> {
        let mut tables = self.available()?;
        let key = (tenant.clone(), staff.clone());
        let resigned = resigned(&tables.staff, &key);
        let left_to_retire = tables.sweep.retiring_links.contains_key(&key)
            || (resigned && tables.links.contains_key(&key));
        if !left_to_retire {
            tables.sweep.resigned.remove(&key);
        }
        Ok(())
    }
}
