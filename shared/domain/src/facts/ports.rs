//! What recording facts needs from the outside world: the ledgers facts are written to, the
//! tenants' profiles, and where limit crossings are announced.

use super::{AddFact, ClaimOutcome, CountOutcome, LimitClaim, StaffQuotaReached};
use crate::dirty::{DirtyMarks, FanOutMarks};
use crate::ids::TenantId;
use crate::ids::{CodeId, DepartmentId, StaffId};
use crate::membership::{AddCounts, CodeConfig, Employment};
use crate::tenants::TenantProfile;
use crate::StoreError;
use std::collections::BTreeSet;

/// Counters and claims.
#[async_trait::async_trait]
pub trait AddLedger: Send + Sync {
    /// Claims the add by its business key and, in the same transaction, adds one to the
    /// staff member's counters (total on the code, today on the code, today on all codes).
    /// Exactly one of two racing attempts counts.
    async fn count_add(&self, add: &AddFact, now_ms: u64) -> Result<CountOutcome, StoreError>;
    /// Counts an event qrsync does not act on, so it is visible without being retried.
    async fn record_ignored(&self, tenant: &TenantId, kind: &str) -> Result<(), StoreError>;
}

#[async_trait::async_trait]
pub trait TenantProfiles: Send + Sync {
    async fn profile(&self, tenant: &TenantId) -> Result<Option<TenantProfile>, StoreError>;
}

/// Everything the fact recorder writes: add claims and counters, staff facts, limit claims,
/// and the marks of what the messages it gives up on would have reached (a code's dirty mark,
/// or a fan-out mark for a message of a staff member or the tenant).
pub trait FactLedger: AddLedger + StaffLedger + QuotaLedger + DirtyMarks + FanOutMarks {}

impl<L: AddLedger + StaffLedger + QuotaLedger + DirtyMarks + FanOutMarks> FactLedger for L {}

/// What the quota loop reads and writes.
#[async_trait::async_trait]
pub trait QuotaLedger: Send + Sync {
    /// The code's configuration (its members, fallback, departments and switches), or `None`
    /// when the code does not exist (any more).
    async fn code_config(
        &self,
        tenant: &TenantId,
        code: &CodeId,
    ) -> Result<Option<CodeConfig>, StoreError>;
    /// The staff member's counters after the add: today on the code, today on all codes,
    /// and in total on the code.
    async fn counts(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        staff: &StaffId,
        day: &str,
    ) -> Result<AddCounts, StoreError>;
    /// Creates the claim unless it exists (one conditional write); answers who owns it.
    async fn claim_limit(&self, claim: &LimitClaim) -> Result<ClaimOutcome, StoreError>;
    /// Records that the claim's notification was published, and how many codes it reached,
    /// if `claim.owner` still owns it (a claim taken over is recorded by its new owner).
    async fn mark_notified(&self, claim: &LimitClaim, codes: usize) -> Result<(), StoreError>;
    /// Claims not recorded as notified whose owner's lease ended before `now_ms`, at most
    /// `limit` (a query on the open claims, never a scan).
    async fn stale_claims(&self, now_ms: u64, limit: usize) -> Result<Vec<LimitClaim>, StoreError>;
    /// Makes `owner` the owner of `claim` until `lease_until_ms`, in one conditional write:
    /// only if it is still as read (the same owner and lease) and not notified. `false` when
    /// it was not (its owner finished it, or another took it over first).
    async fn take_over(
        &self,
        claim: &LimitClaim,
        owner: &str,
        lease_until_ms: u64,
    ) -> Result<bool, StoreError>;
}

/// Publishes `StaffQuotaReached` (an EventBridge bus in production).
#[async_trait::async_trait]
pub trait QuotaNotifier: Send + Sync {
    async fn publish(&self, event: &StaffQuotaReached) -> Result<(), StoreError>;
}

/// Staff and department facts, and the indexes that say which codes they reach.
#[async_trait::async_trait]
pub trait StaffLedger: Send + Sync {
    /// `false` when a newer employment fact is stored.
    async fn set_employment(
        &self,
        tenant: &TenantId,
        staff: &StaffId,
        employment: Employment,
        at_ms: u64,
    ) -> Result<bool, StoreError>;
    /// Re-keys `from` to `to` everywhere; answers the codes that now name `to`.
    async fn rename_staff(
        &self,
        tenant: &TenantId,
        from: &StaffId,
        to: &StaffId,
        at_ms: u64,
    ) -> Result<Vec<CodeId>, StoreError>;
    /// Replaces the departments the staff member is in (as of `at_ms`), keeping each
    /// department's members in step. Answers the departments whose membership changed.
    async fn set_staff_departments(
        &self,
        tenant: &TenantId,
        staff: &StaffId,
        departments: &BTreeSet<DepartmentId>,
        at_ms: u64,
    ) -> Result<Vec<DepartmentId>, StoreError>;
    /// Replaces a department's members (as of `at_ms`), keeping each staff member's
    /// departments in step. Answers the staff whose records this write updates (in id order).
    /// A replacement cut short is finished by the next one, the same or not (`crate::owed`).
    async fn set_department_members(
        &self,
        tenant: &TenantId,
        department: &DepartmentId,
        members: &BTreeSet<StaffId>,
        at_ms: u64,
    ) -> Result<Vec<StaffId>, StoreError>;
    /// Every code that may route to the staff member: as member or fallback, or through a
    /// department they are in that the code lists.
    async fn codes_of_staff(
        &self,
        tenant: &TenantId,
        staff: &StaffId,
    ) -> Result<Vec<CodeId>, StoreError>;
    /// Every code that lists the department.
    async fn codes_listing_department(
        &self,
        tenant: &TenantId,
        department: &DepartmentId,
    ) -> Result<Vec<CodeId>, StoreError>;
}
