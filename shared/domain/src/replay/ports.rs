//! What replay needs from the outside world: the archive of stored callbacks, the run's own
//! record (progress, report, would-be facts), and the reads a dry run makes.

use super::{
    ArchivedCallback, CodeChange, EventLine, Page, Progress, RunRequest, RunStart, RunStatus,
    Selection, WouldBe,
};
use crate::ids::TenantId;
use crate::ids::{CodeId, StaffId};
use crate::membership::Employment;
use crate::StoreError;

/// The archive of accepted callbacks (docs/rules.md rule 10): the raw envelope as the inbox
/// stored it, kept for a retention period.
#[async_trait::async_trait]
pub trait CallbackArchive: Send + Sync {
    /// Keeps `message` (idempotent: a redelivery writes the same item) until
    /// `expires_at_secs`. `group_id` is its inbox message group (it may name the code).
    async fn keep(
        &self,
        message: &crate::intake::InboxMessage,
        group_id: &str,
        expires_at_secs: u64,
    ) -> Result<(), StoreError>;
    /// Up to `limit` archived callbacks of the selection, oldest first, after `after` (an
    /// opaque position a previous page answered); the position to go on from, if any. A
    /// callback whose expiry is at or before `now_secs` is not answered, though the table's
    /// TTL may keep it for days: its add's claim expires no earlier than it, so an expired
    /// callback replayed could find its claim gone and count again.
    async fn page(
        &self,
        selection: &Selection,
        after: Option<&str>,
        limit: usize,
        now_secs: u64,
    ) -> Result<(Vec<ArchivedCallback>, Option<String>), StoreError>;
}

/// One replay run's record, kept beside the facts it reads.
#[async_trait::async_trait]
pub trait ReplayRuns: Send + Sync {
    /// Creates the run's record with `request` unless the run exists; an existing run is
    /// [`RunStart::Resumed`] when its request is `request`, else [`RunStart::Taken`].
    async fn create(
        &self,
        run: &str,
        request: &RunRequest,
        now_ms: u64,
    ) -> Result<RunStart, StoreError>;
    /// `true` the first time the run sees `business_key` (a callback delivered twice is one
    /// fact).
    async fn first_sight(&self, run: &str, business_key: &str) -> Result<bool, StoreError>;
    /// One add the run would count: through `code` by `staff` on the tenant-day `day`.
    async fn note_add(
        &self,
        run: &str,
        code: &CodeId,
        staff: &StaffId,
        day: &str,
    ) -> Result<(), StoreError>;
    /// The employment the run would write (the latest by WeCom's time wins).
    async fn note_employment(
        &self,
        run: &str,
        staff: &StaffId,
        employment: Employment,
        at_ms: u64,
    ) -> Result<(), StoreError>;
    /// A code whose list the run's would-be facts may change.
    async fn note_code(&self, run: &str, code: &CodeId) -> Result<(), StoreError>;
    async fn record_event(&self, run: &str, line: &EventLine) -> Result<(), StoreError>;
    async fn record_code(&self, run: &str, change: &CodeChange) -> Result<(), StoreError>;
    /// Adds `delta` to the run's counters and sets its status.
    async fn progress(
        &self,
        run: &str,
        delta: &Progress,
        status: RunStatus,
        now_ms: u64,
    ) -> Result<(), StoreError>;
    /// The codes noted, in code order, after `after`.
    async fn codes(
        &self,
        run: &str,
        after: Option<&CodeId>,
        limit: usize,
    ) -> Result<Vec<CodeId>, StoreError>;
    /// The run's would-be facts for `code`'s candidates: its adds through the code (in all,
    /// and on `today`), their adds through every code on `today`, and their employment.
    async fn would_be(
        &self,
        run: &str,
        code: &CodeId,
        staff: &[StaffId],
        today: &str,
    ) -> Result<WouldBe, StoreError>;
}

/// The reads a dry run makes beside a code's snapshot.
#[async_trait::async_trait]
pub trait ReplayReads: Send + Sync {
    /// Whether an add with this business key was counted.
    async fn add_counted(&self, tenant: &TenantId, business_key: &str) -> Result<bool, StoreError>;
    /// The staff member's stored employment, `None` for a staff member not on record.
    async fn employment(
        &self,
        tenant: &TenantId,
        staff: &StaffId,
    ) -> Result<Option<Employment>, StoreError>;
}

/// Where a run's next page goes (a queue the replay function consumes).
#[async_trait::async_trait]
pub trait ReplayPages: Send + Sync {
    async fn send(&self, page: &Page) -> Result<(), StoreError>;
}
