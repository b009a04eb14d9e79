//! The fact recorder's ledger: adds, limit claims, staff and department facts.

use super::{land, InMemoryStore, Seat, NEW_STAFF};
use crate::facts::StaffLedger;
use crate::facts::{AddFact, AddLedger, ClaimOutcome, CountOutcome, LimitClaim, QuotaLedger};
use crate::ids::TenantId;
use crate::ids::{CodeId, DepartmentId, StaffId};
use crate::membership::{AddCounts, CodeConfig, Employment, StaffFacts};
use crate::owed::replan;
use crate::StoreError;
use std::collections::BTreeSet;

#[async_trait::async_trait]
impl AddLedger for InMemoryStore {
    async fn count_add(&self, add: &AddFact, now_ms: u64) -> Result<CountOutcome, StoreError> {
        let mut tables = self.available()?;
        if tables.add_conflicts_left > 0 {
            tables.add_conflicts_left -= 1;
            return Err(StoreError::conflict(
                "table",
                "the fake table cancelled the add's transaction: TransactionConflict",
            ));
        }
        if let Some(at_ms) = tables.add_claims.get(&add.business_key()) {
            return Ok(CountOutcome::AlreadyCounted { at_ms: *at_ms });
        }
        tables.add_claims.insert(add.business_key(), now_ms);
        tables.adds.count(add);
        if !tables.history_off {
            tables.counted.push(add.clone());
        }
        Ok(CountOutcome::Counted { at_ms: now_ms })
    }

    async fn record_ignored(&self, _: &TenantId, kind: &str) -> Result<(), StoreError> {
        let mut tables = self.available()?;
        if !tables.history_off {
            tables.ignored.push(kind.to_owned());
        }
        Ok(())
    }
}

#[async_trait::async_trait]
impl QuotaLedger for InMemoryStore {
    async fn code_config(
        &self,
        tenant: &TenantId,
        code: &CodeId,
    ) -> Result<Option<CodeConfig>, StoreError> {
        Ok(self
            .available()?
            .codes
            .get(&(tenant.clone(), code.clone()))
            .map(|stored| stored.code.config.clone()))
    }

    async fn counts(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        staff: &StaffId,
        day: &str,
    ) -> Result<AddCounts, StoreError> {
        Ok(self.available()?.adds.counts(tenant, code, staff, day))
    }

    async fn claim_limit(&self, claim: &LimitClaim) -> Result<ClaimOutcome, StoreError> {
        let mut tables = self.available()?;
        let id = claim.id();
        match tables.limit_claims.iter().find(|(c, _)| c.id() == id) {
            Some((held, notified)) if held.owner == claim.owner => Ok(ClaimOutcome::Owned {
                notified: *notified,
            }),
            Some(_) => Ok(ClaimOutcome::TakenByAnother),
            None => {
                tables.limit_claims.push((claim.clone(), false));
                Ok(ClaimOutcome::Owned { notified: false })
            }
        }
    }

    async fn mark_notified(&self, claim: &LimitClaim, _: usize) -> Result<(), StoreError> {
        let id = claim.id();
        let mut tables = self.available()?;
        if let Some((held, notified)) = tables.limit_claims.iter_mut().find(|(c, _)| c.id() == id) {
            if held.owner == claim.owner {
                *notified = true;
            }
        }
        Ok(())
    }

    async fn stale_claims(&self, now_ms: u64, limit: usize) -> Result<Vec<LimitClaim>, StoreError> {
        let tables = self.available()?;
        Ok(tables
            .limit_claims
            .iter()
            .filter(|(claim, notified)| !notified && claim.lease_until_ms < now_ms)
            .map(|(claim, _)| claim.clone())
            .take(limit)
            .collect())
    }

    async fn take_over(
        &self,
        claim: &LimitClaim,
        owner: &str,
        lease_until_ms: u64,
    ) -> Result<bool, StoreError> {
        let id = claim.id();
        let mut tables = self.available()?;
        match tables.limit_claims.iter_mut().find(|(c, _)| c.id() == id) {
            Some((held, false))
                if held.owner == claim.owner && held.lease_until_ms == claim.lease_until_ms =>
            {
                held.owner = owner.to_owned();
                held.lease_until_ms = lease_until_ms;
                Ok(true)
            }
            _ => Ok(false),
        }
    }
}

/// The same table the admin API writes, answering as the DynamoDB table does.
#[async_trait::async_trait]
impl StaffLedger for InMemoryStore {
    async fn set_employment(
        &self,
        tenant: &TenantId,
        staff: &StaffId,
        employment: Employment,
        at_ms: u64,
    ) -> Result<bool, StoreError> {
        let mut tables = self.available()?;
        let key = (tenant.clone(), staff.clone());
        if tables
            .employment_at_ms
            .get(&key)
            .is_some_and(|&set| set > at_ms)
        {
            return Ok(false);
        }
        tables.employment_at_ms.insert(key.clone(), at_ms);
        if employment == Employment::Resigned {
            tables.index_resignation(&key, at_ms);
        }
        tables.staff.entry(key).or_insert(NEW_STAFF).employment = employment;
        Ok(true)
    }

    async fn rename_staff(
        &self,
        tenant: &TenantId,
        from: &StaffId,
        to: &StaffId,
        at_ms: u64,
    ) -> Result<Vec<CodeId>, StoreError> {
        let mut tables = self.available()?;
        if !tables.history_off {
            tables.renames.push((from.clone(), to.clone()));
        }
        let (old, new) = ((tenant.clone(), from.clone()), (tenant.clone(), to.clone()));
        if let Some(facts) = tables.staff.remove(&old) {
            tables.staff.insert(new.clone(), facts);
        }
        // As the table keeps it: the old id stays, resigned, and its link is retired.
        tables.staff.insert(
            old.clone(),
            StaffFacts {
                employment: Employment::Resigned,
                ..NEW_STAFF
            },
        );
        tables.index_resignation(&old, at_ms);
        if let Some(at_ms) = tables.employment_at_ms.remove(&old) {
            tables.employment_at_ms.insert(new.clone(), at_ms);
        }
        if let Some(at_ms) = tables.departments_at_ms.remove(&old) {
            tables.departments_at_ms.insert(new.clone(), at_ms);
        }
        if let Some(departments) = tables.staff_departments.remove(&old) {
            for department in &departments {
                if let Some(members) = tables
                    .departments
                    .get_mut(&(tenant.clone(), department.clone()))
                {
                    members.remove(from);
                    members.insert(to.clone());
                }
            }
            tables.staff_departments.insert(new, departments);
        }
        let seat = Seat::Staff(from.clone());
        let codes = tables.codes_seating(tenant, std::slice::from_ref(&seat));
        for code in &codes {
            let key = (tenant.clone(), code.clone());
            tables.code_index.remove(&key, &seat);
            tables.code_index.insert(&key, Seat::Staff(to.clone()));
            if let Some(stored) = tables.codes.get_mut(&key) {
                let config = &mut stored.code.config;
                for id in config.members.iter_mut().chain(config.fallback.iter_mut()) {
                    if id == from {
                        *id = to.clone();
                    }
                }
            }
        }
        Ok(codes)
    }

    async fn set_staff_departments(
        &self,
        tenant: &TenantId,
        staff: &StaffId,
        departments: &BTreeSet<DepartmentId>,
        at_ms: u64,
    ) -> Result<Vec<DepartmentId>, StoreError> {
        let mut tables = self.available()?;
        let key = (tenant.clone(), staff.clone());
        // As the table's write conditioned on the list's time: an older list changes nothing.
        if tables
            .departments_at_ms
            .get(&key)
            .is_some_and(|&set| set > at_ms)
        {
            return Ok(Vec::new());
        }
        tables.departments_at_ms.insert(key.clone(), at_ms);
        tables.staff.entry(key.clone()).or_insert(NEW_STAFF);
        tables.staff_departments.insert(key, departments.clone());
        for department in departments {
            tables
                .departments
                .entry((tenant.clone(), department.clone()))
                .or_default();
        }
        let mut changed: Vec<DepartmentId> = tables
            .departments
            .iter_mut()
            .filter(|((t, _), _)| t == tenant)
            .filter_map(|((_, department), members)| {
                let moved = if departments.contains(department) {
                    members.insert(staff.clone())
                } else {
                    members.remove(staff)
                };
                moved.then(|| department.clone())
            })
            .collect();
        changed.sort();
        Ok(changed)
    }
    async fn set_department_members(
        &self,
        tenant: &TenantId,
        department: &DepartmentId,
        members: &BTreeSet<StaffId>,
        _at_ms: u64,
    ) -> Result<Vec<StaffId>, StoreError> {
        let mut tables = self.available()?;
        let key = (tenant.clone(), department.clone());
        let before = tables.departments.get(&key).cloned().unwrap_or_default();
        let owed_before = tables
            .department_owed
            .get(&key)
            .cloned()
            .unwrap_or_default();
        let plan = replan(&before, &owed_before, members);
        // In id order, joined and left together, as the table's adapter answers.
        let changed: BTreeSet<StaffId> = plan.entries().map(|(staff, _)| staff.clone()).collect();
        let owed_key = key.clone();
        land(
            &mut tables,
            &owed_before,
            plan,
            |tables| {
                tables.departments.insert(key, members.clone());
            },
            |tables| tables.department_owed.entry(owed_key.clone()).or_default(),
            |tables, staff, member| {
                let key = (tenant.clone(), staff.clone());
                // The table's update of a member's departments creates their staff item.
                tables.staff.entry(key.clone()).or_insert(NEW_STAFF);
                let departments = tables.staff_departments.entry(key).or_default();
                if member {
                    departments.insert(department.clone());
                } else {
                    departments.remove(department);
                }
            },
        )?;
        Ok(changed.into_iter().collect())
    }
    async fn codes_of_staff(
        &self,
        tenant: &TenantId,
        staff: &StaffId,
    ) -> Result<Vec<CodeId>, StoreError> {
        // As the table answers: the staff -> codes index, and the department -> codes index of
        // each department the staff member's record lists.
        let tables = self.available()?;
        tables.readable(staff)?;
        let departments = tables
            .staff_departments
            .get(&(tenant.clone(), staff.clone()))
            .cloned()
            .unwrap_or_default();
        let seats: Vec<Seat> = std::iter::once(Seat::Staff(staff.clone()))
            .chain(departments.into_iter().map(Seat::Department))
            .collect();
        Ok(tables.codes_seating(tenant, &seats))
    }
    async fn codes_listing_department(
        &self,
        tenant: &TenantId,
        department: &DepartmentId,
    ) -> Result<Vec<CodeId>, StoreError> {
        let seat = Seat::Department(department.clone());
        Ok(self
            .available()?
            .codes_seating(tenant, std::slice::from_ref(&seat)))
    }
}
