//! What the admin API needs from storage and from WeCom, beyond the ports it shares with the
//! other functions (`facts::TenantProfiles`, `facts::StaffLedger`, `refresh::CodeFacts`,
//! `schedules::DueWriter`, `reasons::ReasonQueue`).
//! `DynamoStore` implements `AdminStore` in `adapters::dynamodb`; `WeComClient` implements
//! `ContactWays` in `adapters::wecom`; `crate::fakes` has in-memory versions of both for tests.

use crate::facts::{StaffLedger, TenantProfiles};
use crate::membership::{CodeConfig, CodeId, Employment, StaffFacts, StaffId, WeeklySchedule};
use crate::refresh::{CodeFacts, StoredCode};
use crate::schedules::DueWriter;
use crate::tenants::{TenantId, TenantProfile};
use crate::wecom::contact_way::{CorpCredentials, CreatedContactWay, NewContactWay};
use crate::wecom::errors::WeComError;
use crate::StoreError;

/// A stored code and the version its last write gave it (1 for the first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionedCode {
    pub code: StoredCode,
    pub version: u64,
}

/// What an admin sets on a staff member. `rejected_by_wecom` is not here on purpose: only
/// WeCom's answers set it, and an admin write must not clear it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StaffChange {
    pub online: bool,
    /// `None` keeps the stored employment (active for a staff member not stored yet).
    pub employment: Option<Employment>,
}

#[async_trait::async_trait]
pub trait AdminStore: TenantProfiles + CodeFacts + DueWriter + StaffLedger {
    /// Creates or replaces a tenant's profile.
    async fn put_profile(
        &self,
        tenant: &TenantId,
        profile: &TenantProfile,
    ) -> Result<(), StoreError>;

    /// Applies `change` in one write that leaves every other staff fact as stored (so a
    /// concurrent "rejected by WeCom" mark is never lost), and answers the facts after it.
    async fn update_staff(
        &self,
        tenant: &TenantId,
        staff: &StaffId,
        change: &StaffChange,
        now_ms: u64,
    ) -> Result<StaffFacts, StoreError>;

    /// Stores the staff member's weekly schedule (`None` removes it) as of `at_ms`, unless a
    /// later one is stored: `false` then, and nothing changes.
    async fn set_schedule(
        &self,
        tenant: &TenantId,
        staff: &StaffId,
        schedule: Option<&WeeklySchedule>,
        at_ms: u64,
    ) -> Result<bool, StoreError>;

    /// Every code of the tenant.
    async fn codes_of_tenant(&self, tenant: &TenantId) -> Result<Vec<CodeId>, StoreError>;

    async fn code(
        &self,
        tenant: &TenantId,
        code: &CodeId,
    ) -> Result<Option<VersionedCode>, StoreError>;

    /// Creates or replaces a code's configuration (keeping its `config_id`) and its seats in
    /// the staff -> codes index; a concurrent edit of the same code makes one of them fail.
    /// An edit cut short after storing the configuration leaves its owed index writes
    /// recorded (`crate::owed`); the next `put_code` of the code, even with the same
    /// configuration, finishes them, so the index ends matching the configuration stored last.
    async fn put_code(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        config: &CodeConfig,
        now_ms: u64,
    ) -> Result<VersionedCode, StoreError>;

    /// Deletes the code's item, its last-pushed record and its entries in the staff -> codes
    /// and department -> codes indexes. Deleting a code that is gone changes nothing.
    async fn delete_code(&self, tenant: &TenantId, code: &CodeId) -> Result<(), StoreError>;

    /// Stores the contact way created for a code and the list WeCom created it with. `false` when the code already has one
    /// (another request created it first): the stored one is kept.
    async fn set_config_id(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        config_id: &str,
        created_with: &[String],
    ) -> Result<bool, StoreError>;
}

/// Creating and deleting WeCom contact ways. Updating their lists is the refresh function's
/// job alone (`refresh::ContactWayPusher`).
#[async_trait::async_trait]
pub trait ContactWays: Send + Sync {
    async fn create(
        &self,
        corp: &CorpCredentials,
        way: &NewContactWay,
    ) -> Result<CreatedContactWay, WeComError>;
    async fn delete(&self, corp: &CorpCredentials, config_id: &str) -> Result<(), WeComError>;
}
