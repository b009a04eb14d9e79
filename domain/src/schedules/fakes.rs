//! An in-memory due index, cursor and the facts the tick reads, for unit tests here and in
//! `functions/schedule-tick`.

use super::{CursorLease, Due, DueIndex, DueWriter, LimitReached, Minute, ScheduleFacts, Subject};
use crate::membership::{CodeId, StaffId, WeeklySchedule};
use crate::tenants::{TenantId, Timezone};
use crate::StoreError;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};

#[derive(Default)]
struct State {
    due: BTreeMap<(TenantId, Subject), Minute>,
    cursor: Option<Minute>,
    owner: Option<String>,
    lease_until_ms: u64,
    timezones: HashMap<TenantId, Timezone>,
    schedules: HashMap<(TenantId, StaffId), WeeklySchedule>,
    seats: HashMap<(TenantId, StaffId), Vec<CodeId>>,
    claims: Vec<(TenantId, String, LimitReached)>,
    /// Staff whose codes cannot be read (a storage failure for that item only).
    unreadable: HashSet<StaffId>,
    minutes_read: Vec<Minute>,
}

/// The table, as the tick and the due writers see it. Clones share their contents.
#[derive(Clone, Default)]
pub struct InMemoryDueStore {
    state: Arc<Mutex<State>>,
}

impl InMemoryDueStore {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().expect("fake due store lock")
    }

    pub fn insert_tenant(&self, tenant: &TenantId, timezone: Timezone) {
        self.state().timezones.insert(tenant.clone(), timezone);
    }

    pub fn insert_schedule(&self, tenant: &TenantId, staff: &StaffId, schedule: WeeklySchedule) {
        self.state()
            .schedules
            .insert((tenant.clone(), staff.clone()), schedule);
    }

    pub fn remove_schedule(&self, tenant: &TenantId, staff: &StaffId) {
        self.state()
            .schedules
            .remove(&(tenant.clone(), staff.clone()));
    }

    pub fn seat(&self, tenant: &TenantId, staff: &StaffId, codes: &[&CodeId]) {
        self.state().seats.insert(
            (tenant.clone(), staff.clone()),
            codes.iter().map(|c| (*c).clone()).collect(),
        );
    }

    /// A claim of the quota loop: `staff` reached `claim.limit` on `day`.
    pub fn insert_claim(&self, tenant: &TenantId, day: &str, claim: LimitReached) {
        self.state()
            .claims
            .push((tenant.clone(), day.to_owned(), claim));
    }

    pub fn make_unreadable(&self, staff: &StaffId, unreadable: bool) {
        let mut state = self.state();
        if unreadable {
            state.unreadable.insert(staff.clone());
        } else {
            state.unreadable.remove(staff);
        }
    }

    pub fn put_due(&self, tenant: &TenantId, subject: Subject, minute: Minute) {
        self.state().due.insert((tenant.clone(), subject), minute);
    }

    pub fn due_of(&self, tenant: &TenantId, subject: &Subject) -> Option<Minute> {
        self.state()
            .due
            .get(&(tenant.clone(), subject.clone()))
            .copied()
    }

    pub fn cursor(&self) -> Option<Minute> {
        self.state().cursor
    }

    pub fn set_cursor(&self, cursor: Minute) {
        self.state().cursor = Some(cursor);
    }

    /// Another run holds the cursor until `until_ms`.
    pub fn hold_lease(&self, owner: &str, until_ms: u64) {
        let mut state = self.state();
        state.owner = Some(owner.to_owned());
        state.lease_until_ms = until_ms;
    }

    pub fn lease(&self) -> (Option<String>, u64) {
        let state = self.state();
        (state.owner.clone(), state.lease_until_ms)
    }

    /// The minutes `due_in` was asked for, in order.
    pub fn minutes_read(&self) -> Vec<Minute> {
        self.state().minutes_read.clone()
    }
}

#[async_trait::async_trait]
impl DueIndex for InMemoryDueStore {
    async fn acquire(
        &self,
        owner: &str,
        now_ms: u64,
        lease_until_ms: u64,
    ) -> Result<CursorLease, StoreError> {
        let mut state = self.state();
        let running = (now_ms..=lease_until_ms).contains(&state.lease_until_ms);
        if state.owner.is_some() && running {
            return Ok(CursorLease::HeldElsewhere);
        }
        state.owner = Some(owner.to_owned());
        state.lease_until_ms = lease_until_ms;
        Ok(CursorLease::Acquired { next: state.cursor })
    }

    async fn advance(
        &self,
        owner: &str,
        from: Option<Minute>,
        to: Minute,
    ) -> Result<bool, StoreError> {
        let mut state = self.state();
        if state.owner.as_deref() != Some(owner) || state.cursor != from {
            return Ok(false);
        }
        state.cursor = Some(to);
        Ok(true)
    }

    async fn release(&self, owner: &str) -> Result<(), StoreError> {
        let mut state = self.state();
        if state.owner.as_deref() == Some(owner) {
            state.lease_until_ms = 0;
        }
        Ok(())
    }

    async fn due_in(&self, minute: Minute) -> Result<Vec<Due>, StoreError> {
        let mut state = self.state();
        state.minutes_read.push(minute);
        Ok(state
            .due
            .iter()
            .filter(|(_, m)| **m == minute)
            .map(|((tenant, subject), minute)| Due {
                tenant: tenant.clone(),
                subject: subject.clone(),
                minute: *minute,
            })
            .collect())
    }

    async fn reschedule(&self, due: &Due, next: Option<Minute>) -> Result<(), StoreError> {
        let mut state = self.state();
        let key = (due.tenant.clone(), due.subject.clone());
        if state.due.get(&key) != Some(&due.minute) {
            return Ok(());
        }
        match next {
            Some(next) => state.due.insert(key, next),
            None => state.due.remove(&key),
        };
        Ok(())
    }
}

#[async_trait::async_trait]
impl DueWriter for InMemoryDueStore {
    async fn set_due(
        &self,
        tenant: &TenantId,
        subject: &Subject,
        minute: Minute,
    ) -> Result<(), StoreError> {
        self.put_due(tenant, subject.clone(), minute);
        Ok(())
    }

    async fn clear_due(&self, tenant: &TenantId, subject: &Subject) -> Result<(), StoreError> {
        self.state().due.remove(&(tenant.clone(), subject.clone()));
        Ok(())
    }

    async fn due_subjects(&self, tenant: &TenantId) -> Result<Vec<Subject>, StoreError> {
        Ok(self
            .state()
            .due
            .keys()
            .filter(|(t, _)| t == tenant)
            .map(|(_, subject)| subject.clone())
            .collect())
    }
}

#[async_trait::async_trait]
impl ScheduleFacts for InMemoryDueStore {
    async fn timezone(&self, tenant: &TenantId) -> Result<Option<Timezone>, StoreError> {
        Ok(self.state().timezones.get(tenant).copied())
    }

    async fn schedule(
        &self,
        tenant: &TenantId,
        staff: &StaffId,
    ) -> Result<Option<WeeklySchedule>, StoreError> {
        Ok(self
            .state()
            .schedules
            .get(&(tenant.clone(), staff.clone()))
            .cloned())
    }

    async fn codes_of_staff(
        &self,
        tenant: &TenantId,
        staff: &StaffId,
    ) -> Result<Vec<CodeId>, StoreError> {
        let state = self.state();
        if state.unreadable.contains(staff) {
            return Err(StoreError::new(
                "table",
                "the fake seat index is switched off",
            ));
        }
        Ok(state
            .seats
            .get(&(tenant.clone(), staff.clone()))
            .cloned()
            .unwrap_or_default())
    }

    async fn limits_reached(
        &self,
        tenant: &TenantId,
        first_day: &str,
        last_day: &str,
    ) -> Result<Vec<LimitReached>, StoreError> {
        Ok(self
            .state()
            .claims
            .iter()
            .filter(|(t, day, _)| {
                t == tenant && day.as_str() >= first_day && day.as_str() <= last_day
            })
            .map(|(_, _, claim)| claim.clone())
            .collect())
    }
}
