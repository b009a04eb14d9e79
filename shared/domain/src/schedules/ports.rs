//! What the schedule tick and the admin API need from the due index and the schedule facts.

use super::{CursorLease, Due, LimitReached, Minute, Subject};
use crate::ids::StaffId;
use crate::ids::TenantId;
use crate::membership::WeeklySchedule;
use crate::tenants::Timezone;
use crate::StoreError;

/// The due index and the tick's cursor.
#[async_trait::async_trait]
pub trait DueIndex: Send + Sync {
    /// Takes the cursor for `owner` until `lease_until_ms`, unless another run's lease is still
    /// running at `now_ms`. Exactly one of two racing runs gets it. A lease ending after
    /// `lease_until_ms` was taken under a clock ahead of this one (the clock was set back, which
    /// restarts every function) and holds nothing.
    async fn acquire(
        &self,
        owner: &str,
        now_ms: u64,
        lease_until_ms: u64,
    ) -> Result<CursorLease, StoreError>;

    /// Moves the cursor from `from` (`None`: never set) to `to` while `owner` holds it; `false`
    /// when it does not any more.
    async fn advance(
        &self,
        owner: &str,
        from: Option<Minute>,
        to: Minute,
    ) -> Result<bool, StoreError>;

    /// Ends `owner`'s lease early (a lease that is not `owner`'s is left alone).
    async fn release(&self, owner: &str) -> Result<(), StoreError>;

    /// Every due item in `minute`.
    async fn due_in(&self, minute: Minute) -> Result<Vec<Due>, StoreError>;

    /// Moves a due item the tick has handled to `next` (`None` deletes it), recording that its
    /// moments were handled through `handled_through_ms`, unless a writer moved it since it
    /// was read: then the writer's version stands.
    async fn reschedule(
        &self,
        due: &Due,
        next: Option<Minute>,
        handled_through_ms: u64,
    ) -> Result<(), StoreError>;
}

/// How writers of facts (the admin API) keep due items in step with what they write.
#[async_trait::async_trait]
pub trait DueWriter: Send + Sync {
    /// Moves the subject's due item to `minute`, or creates it there counting the moments
    /// before `now_ms` as handled (an existing item keeps its own record, so a write that moves
    /// it makes the tick skip no moment it has not handled).
    async fn set_due(
        &self,
        tenant: &TenantId,
        subject: &Subject,
        minute: Minute,
        now_ms: u64,
    ) -> Result<(), StoreError>;
}

/// What the tick reads to handle a due item.
#[async_trait::async_trait]
pub trait ScheduleFacts: Send + Sync {
    /// `None` when the tenant does not exist (any more).
    async fn timezone(&self, tenant: &TenantId) -> Result<Option<Timezone>, StoreError>;

    /// Every staff member of the tenant who has a schedule, with it (one query of the
    /// tenant's staff, which may lag a write by the table's propagation: the tick reads it
    /// well after any write that moved the item; unreadable schedules are left out, as the
    /// recompute reads them).
    async fn schedules(
        &self,
        tenant: &TenantId,
    ) -> Result<Vec<(StaffId, WeeklySchedule)>, StoreError>;

    /// The quota loop's claims of the tenant-days `first_day..=last_day` (`YYYY-MM-DD`).
    async fn limits_reached(
        &self,
        tenant: &TenantId,
        first_day: &str,
        last_day: &str,
    ) -> Result<Vec<LimitReached>, StoreError>;
}
