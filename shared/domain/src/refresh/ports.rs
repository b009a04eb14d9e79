//! What the single writer needs from the outside world besides the code's facts
//! (`codes::CodeFacts`) and the tenant's budget (`budget::WeComBudget`): the code's records,
//! its lease, WeCom and the retry queues.

use super::lease::{Acquired, AfterRecord, FencedWrite, Lease};
use super::retry::{RetriedReason, RetryDelay};
use super::{PushRecord, Requeues, Tally};
use crate::ids::TenantId;
use crate::ids::{CodeId, StaffId};
use crate::membership::RotationSlot;
use crate::wecom::acquisition::AcquisitionLink;
use crate::wecom::contact_way::CorpCredentials;
use crate::wecom::errors::WeComError;
use crate::StoreError;

/// Keeps a code's "last pushed" record. Every write is fenced on the writer's lease: a
/// writer that lost its lease gets `FencedWrite::LeaseLost` and nothing is written.
#[async_trait::async_trait]
pub trait CodeRecords: Send + Sync {
    /// Records a push WeCom accepted: the last-pushed list and a history entry; with
    /// `AfterRecord::Release` the same write gives the lease back.
    async fn record_push(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        lease: &Lease,
        push: &PushRecord,
        then: AfterRecord,
    ) -> Result<FencedWrite, StoreError>;
    /// Marks the code starved (nobody eligible, no fallback) without touching the last list;
    /// with `on_page` (a code the landing page serves) its page says so in the same write
    /// (`PageWrite::Starved`).
    async fn record_starved(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        lease: &Lease,
        at_ms: u64,
        on_page: bool,
    ) -> Result<FencedWrite, StoreError>;
    /// Replaces the landing page's rotation when the WeCom list stayed the same but the
    /// rotation did not (a quota member's share of a round shrinks with each add); `None`
    /// removes it (a code edited to native: the page must stop routing it). The code's page
    /// is written in the same write (`PageWrite::SameRound`, or `PageWrite::NotServed`).
    async fn record_rotation(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        lease: &Lease,
        wecom_list: &[StaffId],
        rotation: Option<&[RotationSlot]>,
    ) -> Result<FencedWrite, StoreError>;
    /// Keeps `link` as the staff member's acquisition link unless one is kept already (two
    /// codes' writers may create one for the same member at once); answers the link kept.
    async fn keep_link(
        &self,
        tenant: &TenantId,
        staff: &StaffId,
        link: &AcquisitionLink,
    ) -> Result<AcquisitionLink, StoreError>;
    /// Adds one refresh's tally to the tenant's counters for `day`.
    async fn record_tally(
        &self,
        tenant: &TenantId,
        day: &str,
        tally: &Tally,
    ) -> Result<(), StoreError>;
    /// Adds refreshes put off for budget or throttling to the platform's count for the minute
    /// of `now_ms`.
    async fn record_requeues(&self, now_ms: u64, requeues: Requeues) -> Result<(), StoreError>;
}

/// Replaces the user list of a WeCom contact way.
#[async_trait::async_trait]
pub trait ContactWayPusher: Send + Sync {
    async fn replace_users(
        &self,
        corp: &CorpCredentials,
        config_id: &str,
        users: &[String],
    ) -> Result<(), WeComError>;
}

/// WeCom's customer-acquisition links (获客链接): the landing page sends a visitor to the
/// picked member's link (`crate::landing`).
#[async_trait::async_trait]
pub trait AcquisitionLinks: Send + Sync {
    /// `customer_acquisition/create_link` for exactly `user`.
    async fn create_link(
        &self,
        corp: &CorpCredentials,
        user: &str,
    ) -> Result<AcquisitionLink, WeComError>;
    /// `customer_acquisition/delete_link` (a link another writer's was kept instead of).
    async fn delete_link(&self, corp: &CorpCredentials, link_id: &str) -> Result<(), WeComError>;
}

/// What the refresh writes when WeCom refuses for good (docs/rules.md rule 9); the dirty mark
/// of rule 11 is `dirty::DirtyMarks`.
#[async_trait::async_trait]
pub trait FailureMarks: Send + Sync {
    /// WeCom no longer knows the code's contact way (41044): the code is not refreshed again.
    async fn mark_code_gone(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        at_ms: u64,
    ) -> Result<(), StoreError>;
    /// WeCom refused `staff` on a contact way: never eligible on this tenant again (sticky,
    /// like every WeCom rejection in `membership::fold`).
    async fn mark_staff_unusable(
        &self,
        tenant: &TenantId,
        staff: &StaffId,
        errcode: i64,
        at_ms: u64,
    ) -> Result<(), StoreError>;
}

/// Per-code leases, taken with one conditional write.
#[async_trait::async_trait]
pub trait CodeLeases: Send + Sync {
    /// Takes the lease when it is free or expired at `now_ms`, for `duration_ms`; with
    /// `expected` (a `LeaseSeen::acquisitions` read before), only if nobody took it since
    /// (`Acquired::TakenSince` otherwise).
    async fn acquire(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        holder: &str,
        now_ms: u64,
        duration_ms: u64,
        expected: Option<u64>,
    ) -> Result<Acquired, StoreError>;
    /// Gives the lease back if this holder still has it; otherwise does nothing.
    async fn release(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        lease: &Lease,
    ) -> Result<(), StoreError>;
}

/// The retry queues and the way back to refresh.fifo.
#[async_trait::async_trait]
pub trait RetryQueues: Send + Sync {
    /// Sends every requeue of a batch, at most ten to a request per queue (SQS bills a
    /// request, not a message, and the batch's sends take one round trip, not one each).
    /// `Err` names the requeues that were not sent; every other one was.
    async fn send_all(&self, requeues: &[Requeue]) -> Result<(), Unsent>;
}

/// Which queue a requeued reason goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Destination {
    /// The retry queue that delays it by this much.
    Retry(RetryDelay),
    /// refresh.fifo, in its code's message group (a retry queue's delay served, or no time
    /// left in the invocation).
    RefreshQueue,
    /// The slow lane's queue, in its code's message group.
    SlowLane,
}

/// One reason on its way to a queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requeue {
    pub to: Destination,
    pub reason: RetriedReason,
}

/// The requeues of a `RetryQueues::send_all` that were not sent (their index in the slice
/// given), and why.
#[derive(Debug)]
pub struct Unsent {
    pub indices: Vec<usize>,
    pub error: StoreError,
}
