//! What the sweep needs from the outside world, beyond the single writer's `CodeFacts`, the
//! dirty marks, the shared budget and the reason queue.

use super::{DriftCounts, DriftReport, GuardTrip};
use crate::dirty::{DirtyMark, FanOutMark, StaleSuspect};
use crate::ids::TenantId;
use crate::ids::{CodeId, StaffId};
use crate::wecom::contact_way::{ContactWay, CorpCredentials};
use crate::wecom::errors::WeComError;
use crate::StoreError;
use sha2::{Digest, Sha256};

/// The sweep's one lease and its cursor through the tenants.
#[async_trait::async_trait]
pub trait SweepRuns: Send + Sync {
    /// Takes the sweep's lease for `owner` until `lease_until_ms` unless another run's lease
    /// is still running at `now_ms`; answers the stored cursor (the last tenant sampled, or
    /// `None` from the start), or `Err`-free `None` when another run holds the lease.
    async fn acquire(
        &self,
        owner: &str,
        now_ms: u64,
        lease_until_ms: u64,
    ) -> Result<Option<Option<TenantId>>, StoreError>;
    /// Stores the cursor while `owner` holds the lease; `false` when it does not any more.
    async fn save_cursor(&self, owner: &str, after: Option<&TenantId>) -> Result<bool, StoreError>;
    /// Ends `owner`'s lease early (a lease that is not `owner`'s is left alone).
    async fn release(&self, owner: &str) -> Result<(), StoreError>;
}

/// The dirty set as the sweep reads it: a query on when each mark is next due, never a scan.
#[async_trait::async_trait]
pub trait DirtyIndex: Send + Sync {
    /// Marks due at `now_ms`, earliest first, at most `limit`.
    async fn due_marks(&self, now_ms: u64, limit: usize) -> Result<Vec<DirtyMark>, StoreError>;
    /// Marks the code dirty with why `stale` as a `suspect`, made at `at_ms` and due at
    /// `due_ms`, unless the code is marked already (a mark it has is not made a suspect).
    async fn mark_suspect(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        suspect: StaleSuspect,
        at_ms: u64,
        due_ms: u64,
    ) -> Result<(), StoreError>;
    /// Records that a resync was sent for `mark` (or that it was held): `resyncs` sent in all,
    /// the next one due at `next_due_ms`; a suspect stops being one. Nothing when the mark
    /// was renewed since it was read (then it is due).
    async fn resync_sent(
        &self,
        mark: &DirtyMark,
        resyncs: u32,
        next_due_ms: u64,
    ) -> Result<(), StoreError>;
    /// Removes `mark` (its code was deleted or is gone on WeCom), unless it was renewed.
    async fn drop_mark(&self, mark: &DirtyMark) -> Result<(), StoreError>;
}

/// The fan-outs given up, as the sweep reads them: a query on when each is next due.
#[async_trait::async_trait]
pub trait FanOutIndex: Send + Sync {
    /// Fan-out marks due at `now_ms`, earliest first, at most `limit`.
    async fn due_fan_outs(&self, now_ms: u64, limit: usize) -> Result<Vec<FanOutMark>, StoreError>;
    /// Records that `mark`'s fan-out was sent again: `resends` in all, the next one due at
    /// `next_due_ms`. Nothing when the mark was renewed or cleared since it was read.
    async fn fan_out_resent(
        &self,
        mark: &FanOutMark,
        resends: u32,
        next_due_ms: u64,
    ) -> Result<(), StoreError>;
}

/// Every tenant, in id order (the sweep walks them all), by a query on a registry the
/// profile writes keep.
#[async_trait::async_trait]
pub trait TenantRegistry: Send + Sync {
    async fn tenants_after(
        &self,
        after: Option<&TenantId>,
        limit: usize,
    ) -> Result<Vec<TenantId>, StoreError>;
}

/// The drift read-back's own records: each tenant's place in its codes, its reports, its guard.
#[async_trait::async_trait]
pub trait DriftLedger: Send + Sync {
    /// The last code the tenant's sample read (`None`: start from the first).
    async fn sample_cursor(&self, tenant: &TenantId) -> Result<Option<CodeId>, StoreError>;
    async fn save_sample_cursor(&self, tenant: &TenantId, after: &CodeId)
        -> Result<(), StoreError>;
    /// Up to `limit` of the tenant's codes after `after`, in id order (a query).
    async fn codes_after(
        &self,
        tenant: &TenantId,
        after: Option<&CodeId>,
        limit: usize,
    ) -> Result<Vec<CodeId>, StoreError>;
    /// Records a read of `code` on `day` for the tenant's report: one that `differs` puts the
    /// code among the day's differing codes (once, however often it is read) and its still
    /// differing ones; one that agrees takes it out of the still differing, and writes nothing
    /// for a code not found differing that day (the sweep records agreeing reads only of codes
    /// that may have differed: marked ones, a guard's).
    async fn record_read(
        &self,
        tenant: &TenantId,
        day: &str,
        code: &CodeId,
        differs: bool,
    ) -> Result<(), StoreError>;
    /// Adds `counts` to the tenant's report for `day`.
    async fn add_to_report(
        &self,
        tenant: &TenantId,
        day: &str,
        counts: &DriftCounts,
    ) -> Result<(), StoreError>;
    async fn report(&self, tenant: &TenantId, day: &str) -> Result<DriftReport, StoreError>;
    /// The tenant's blast-radius guard, if it has tripped and not been resumed.
    async fn guard(&self, tenant: &TenantId) -> Result<Option<GuardTrip>, StoreError>;
    async fn trip_guard(&self, tenant: &TenantId, trip: &GuardTrip) -> Result<(), StoreError>;
    /// The re-check found the guard tripped at `tripped_at_ms` still differing: it is
    /// confirmed at `at_ms`, in one write conditioned on that guard still standing (an
    /// operator's resume meanwhile is never undone). `false` when it was not.
    async fn confirm_guard(
        &self,
        tenant: &TenantId,
        tripped_at_ms: u64,
        at_ms: u64,
    ) -> Result<bool, StoreError>;
    /// An operator resumes the repair; `false` when the guard was not tripped.
    async fn resume(&self, tenant: &TenantId) -> Result<bool, StoreError>;
}

/// A contact way about to be created for a code: recorded before `add_contact_way`, cleared
/// once its `config_id` is stored (or the contact way deleted again, or WeCom refused to make
/// it). One still there after its request ended may mean a contact way WeCom made and nobody
/// recorded (a crash between the call and the record): the sweep looks for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreationIntent {
    pub tenant: TenantId,
    pub code: CodeId,
    pub started_at_ms: u64,
}

impl CreationIntent {
    /// What the creation puts in the contact way's `remark`, so the sweep deletes only a
    /// contact way this creation made: the `state` alone is the code's id, which another tool
    /// of the tenant may use too. Derived from the intent (a hash of its tenant, code and
    /// time), so the intent needs no field for it; 29 characters, within WeCom's 30.
    pub fn marker(&self) -> String {
        let mut hasher = Sha256::new();
        for part in [
            self.tenant.as_str(),
            self.code.as_str(),
            &self.started_at_ms.to_string(),
        ] {
            hasher.update(part.as_bytes());
            hasher.update([0u8]);
        }
        let hash = hex::encode(hasher.finalize());
        format!("qrsync {}", &hash[..22])
    }
}

#[async_trait::async_trait]
pub trait CreationIntents: Send + Sync {
    async fn record_intent(&self, intent: &CreationIntent) -> Result<(), StoreError>;
    async fn clear_intent(&self, intent: &CreationIntent) -> Result<(), StoreError>;
    /// Intents recorded before `before_ms`, oldest first (by time, tenant, code), those after
    /// `after` (a page's last), at most `limit` (a query).
    async fn stale_intents(
        &self,
        before_ms: u64,
        after: Option<&CreationIntent>,
        limit: usize,
    ) -> Result<Vec<CreationIntent>, StoreError>;
}

/// What the sweep needs of WeCom to find and delete contact ways created but never recorded.
#[async_trait::async_trait]
pub trait OrphanFinder: Send + Sync {
    /// The config ids of the corp's contact ways created between `from_secs` and `to_secs`
    /// (`list_contact_way`, every page).
    async fn created_between(
        &self,
        corp: &CorpCredentials,
        from_secs: u64,
        to_secs: u64,
    ) -> Result<Vec<String>, WeComError>;
    async fn delete(&self, corp: &CorpCredentials, config_id: &str) -> Result<(), WeComError>;
}

/// Reads WeCom's copy of a contact way (`get_contact_way`): whom it routes to (its users and
/// departments), and the `state` and `remark` it was created with.
#[async_trait::async_trait]
pub trait ContactWayReader: Send + Sync {
    async fn contact_way(
        &self,
        corp: &CorpCredentials,
        config_id: &str,
    ) -> Result<ContactWay, WeComError>;
}

/// A staff member who resigned (`employment` set to resigned), as the sweep finds them once
/// their resignation is `SweepSettings::link_retire_grace_ms` old: if they hold a customer-acquisition link
/// (`crate::landing`), it is deleted at WeCom.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeavingStaff {
    pub tenant: TenantId,
    pub staff: StaffId,
    /// Still resigned as the sweep reads them (a rehire keeps the link).
    pub resigned: bool,
    /// The link their staff item still holds.
    pub link_id: Option<String>,
    /// A link taken off their staff item whose deletion at WeCom is not yet confirmed.
    pub retiring_link_id: Option<String>,
}

/// The index of resigned staff whose links may still exist at WeCom.
#[async_trait::async_trait]
pub trait LinkRetirements: Send + Sync {
    /// Staff who resigned before `before_ms`, oldest first, at most `limit` (a query).
    async fn resigned_before(
        &self,
        before_ms: u64,
        limit: usize,
    ) -> Result<Vec<LeavingStaff>, StoreError>;
    /// Takes `link_id` off the staff item into its retiring slot, on condition that they are
    /// still resigned and still hold it: from then on no refresh can put it into a rotation.
    /// `false` when either changed (a rehire, a newer link).
    async fn detach_link(
        &self,
        tenant: &TenantId,
        staff: &StaffId,
        link_id: &str,
    ) -> Result<bool, StoreError>;
    /// WeCom no longer has `link_id`: its retiring slot is cleared (if it still holds it).
    async fn link_retired(
        &self,
        tenant: &TenantId,
        staff: &StaffId,
        link_id: &str,
    ) -> Result<(), StoreError>;
    /// Takes the staff member out of the index, on condition that nothing is left to retire
    /// (no retiring link, and not resigned with a link), so a resignation written meanwhile
    /// is never lost.
    async fn nothing_to_retire(&self, tenant: &TenantId, staff: &StaffId)
        -> Result<(), StoreError>;
}
