//! The schedule tick's cursor and due index, and the facts it reads.

use super::InMemoryStore;
use crate::ids::StaffId;
use crate::ids::TenantId;
use crate::membership::WeeklySchedule;
use crate::schedules::{CursorLease, Due, DueIndex, LimitReached, Minute, ScheduleFacts};
use crate::tenants::Timezone;
use crate::StoreError;

#[async_trait::async_trait]
impl DueIndex for InMemoryStore {
    async fn acquire(
        &self,
        owner: &str,
        now_ms: u64,
        lease_until_ms: u64,
    ) -> Result<CursorLease, StoreError> {
        let mut tables = self.available()?;
        let running = (now_ms..=lease_until_ms).contains(&tables.cursor_lease_until_ms);
        if tables.cursor_owner.is_some() && running {
            return Ok(CursorLease::HeldElsewhere);
        }
        tables.cursor_owner = Some(owner.to_owned());
        tables.cursor_lease_until_ms = lease_until_ms;
        Ok(CursorLease::Acquired {
            next: tables.cursor,
        })
    }

    async fn advance(
        &self,
        owner: &str,
        from: Option<Minute>,
        to: Minute,
    ) -> Result<bool, StoreError> {
        let mut tables = self.available()?;
        if tables.cursor_owner.as_deref() != Some(owner) || tables.cursor != from {
            return Ok(false);
        }
        tables.cursor = Some(to);
        Ok(true)
    }

    async fn release(&self, owner: &str) -> Result<(), StoreError> {
        let mut tables = self.available()?;
        if tables.cursor_owner.as_deref() == Some(owner) {
            tables.cursor_lease_until_ms = 0;
        }
        Ok(())
    }

    async fn due_in(&self, minute: Minute) -> Result<Vec<Due>, StoreError> {
        let mut tables = self.available()?;
        if !tables.history_off {
            tables.minutes_read.push(minute);
        }
        Ok(tables.due.due_in(minute).collect())
    }

    async fn reschedule(
        &self,
        due: &Due,
        next: Option<Minute>,
        handled_through_ms: u64,
    ) -> Result<(), StoreError> {
        let mut tables = self.available()?;
        let key = (due.tenant.clone(), due.subject.clone());
        if tables.due.get(&key).map(|(minute, _)| minute) != Some(due.minute) {
            return Ok(());
        }
        match next {
            Some(next) => tables.due.insert(key, next, handled_through_ms),
            None => tables.due.remove(&key),
        };
        Ok(())
    }
}

#[async_trait::async_trait]
impl ScheduleFacts for InMemoryStore {
    async fn timezone(&self, tenant: &TenantId) -> Result<Option<Timezone>, StoreError> {
        Ok(self.available()?.profiles.get(tenant).map(|p| p.timezone))
    }

    async fn schedules(
        &self,
        tenant: &TenantId,
    ) -> Result<Vec<(StaffId, WeeklySchedule)>, StoreError> {
        let tables = self.available()?;
        let mut found = Vec::new();
        for (staff, facts) in tables.staff_of_tenant(tenant) {
            if let Some(schedule) = &facts.schedule {
                tables.readable(staff)?;
                found.push((staff.clone(), schedule.clone()));
            }
        }
        Ok(found)
    }

    async fn limits_reached(
        &self,
        tenant: &TenantId,
        first_day: &str,
        last_day: &str,
    ) -> Result<Vec<LimitReached>, StoreError> {
        Ok(self
            .available()?
            .limit_claims
            .iter()
            .map(|(claim, _)| claim)
            .filter(|claim| {
                claim.tenant == *tenant
                    && claim.day.as_str() >= first_day
                    && claim.day.as_str() <= last_day
            })
            .map(|claim| LimitReached {
                staff: claim.staff.clone(),
                limit: claim.limit,
                code: claim.code.clone(),
            })
            .collect())
    }
}
