//! What the admin API needs from storage and from WeCom, beyond the ports it shares with the
//! other functions (`facts::TenantProfiles`, `facts::StaffLedger`, `codes::CodeFacts`,
//! `schedules::DueWriter`, `reasons::ReasonQueue`).
//! `DynamoStore` implements `AdminStore` in `adapters::dynamodb`; `WeComClient` implements
//! `ContactWays` in `adapters::wecom`; `crate::fakes` has in-memory versions of both for tests.

use crate::codes::{CodeFacts, StoredCode};
use crate::facts::{StaffLedger, TenantProfiles};
use crate::ids::TenantId;
use crate::ids::{CodeId, DepartmentId, StaffId};
use crate::membership::{CodeConfig, Employment, Family, StaffFacts, Switches, WeeklySchedule};
use crate::schedules::DueWriter;
use crate::sweep::{CreationIntents, DriftLedger};
use crate::tenants::TenantProfile;
use crate::wecom::contact_way::{CorpCredentials, CreatedContactWay, NewContactWay};
use crate::wecom::errors::WeComError;
use crate::StoreError;
use std::collections::BTreeSet;

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
    /// `None` keeps the stored flag (offline for a staff member not stored yet).
    pub online: Option<bool>,
    /// `None` keeps the stored employment (active for a staff member not stored yet).
    pub employment: Option<Employment>,
}

/// What a staff write did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StaffUpdate {
    /// Written; the staff member's facts after it.
    Stored(StaffFacts),
    /// Refused, nothing written: the change would make a resigned staff member active or
    /// disabled again.
    ResignationIsFinal,
}

/// A tenant's profile as stored, with its version (1 for the first write; 0 for a profile
/// stored before versions were) and when each secret last changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredProfile {
    pub profile: TenantProfile,
    pub version: u64,
    pub secrets_changed_at_ms: SecretsChanged,
}

/// When each secret of a profile was last set to a new value (0: not recorded).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SecretsChanged {
    pub corp_secret: u64,
    pub callback_token: u64,
    pub encoding_aes_key: u64,
}

/// What a profile write did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProfileWrite {
    Stored,
    /// Another tenant holds the corp id; nothing was written.
    CorpIdTaken,
    /// The stored version is no longer the one read; nothing was written.
    Raced,
}

/// A staff member's stored facts and departments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaffRecord {
    pub facts: StaffFacts,
    pub departments: BTreeSet<DepartmentId>,
}

/// One code in a listing of a tenant's codes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeSummary {
    pub code: CodeId,
    pub family: Family,
    pub config_id: Option<String>,
    pub version: u64,
}

/// A staff member's adds through one code, and the code's limits they are measured against
/// (`None`: the code is gone).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeAdds {
    pub code: CodeId,
    pub today: u32,
    pub total: u32,
    pub switches: Option<Switches>,
}

#[async_trait::async_trait]
pub trait AdminStore:
    TenantProfiles
    + CodeFacts
    + DueWriter
    + StaffLedger
    + DriftLedger
    + CreationIntents
    + crate::tenants::TenantPauses
{
    /// The tenant's profile with its version and secret times.
    async fn stored_profile(&self, tenant: &TenantId) -> Result<Option<StoredProfile>, StoreError>;

    /// Stores `next` (whose version is the previous one's plus one) if the stored profile is
    /// still `previous` (`None`: none stored), and in the same write claims `next`'s corp id
    /// for the tenant (releasing the previous one's), unless another tenant holds it.
    async fn put_profile(
        &self,
        tenant: &TenantId,
        next: &StoredProfile,
        previous: Option<&StoredProfile>,
    ) -> Result<ProfileWrite, StoreError>;

    /// Applies `change` in one write that leaves every other staff fact as stored (so a
    /// concurrent "rejected by WeCom" mark is never lost), and answers the facts after it.
    /// A change that would bring a resigned staff member back is refused in the same write.
    async fn update_staff(
        &self,
        tenant: &TenantId,
        staff: &StaffId,
        change: &StaffChange,
        now_ms: u64,
    ) -> Result<StaffUpdate, StoreError>;

    /// The staff member's facts and departments, `None` when nothing is stored for them.
    async fn staff_record(
        &self,
        tenant: &TenantId,
        staff: &StaffId,
    ) -> Result<Option<StaffRecord>, StoreError>;

    /// The department's stored members, `None` when nothing is stored for it.
    async fn department_members(
        &self,
        tenant: &TenantId,
        department: &DepartmentId,
    ) -> Result<Option<BTreeSet<StaffId>>, StoreError>;

    /// Up to `limit` of the tenant's codes in id order, from after `after`, and whether more
    /// follow.
    async fn codes_page(
        &self,
        tenant: &TenantId,
        after: Option<&CodeId>,
        limit: usize,
    ) -> Result<(Vec<CodeSummary>, bool), StoreError>;

    /// The staff member's adds on the tenant-day `day` through each of `codes`, their total
    /// through each, and each code's limits.
    async fn adds_on_codes(
        &self,
        tenant: &TenantId,
        staff: &StaffId,
        codes: &[CodeId],
        day: &str,
    ) -> Result<Vec<CodeAdds>, StoreError>;

    /// The staff member's adds through every code on the tenant-day `day`.
    async fn adds_on_all_codes(
        &self,
        tenant: &TenantId,
        staff: &StaffId,
        day: &str,
    ) -> Result<u32, StoreError>;

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
    /// the staff -> codes index, if the stored version is still `read_version` (`None`: no
    /// code stored), the one the configuration was patched from; `None` when it is not, and
    /// nothing was written. A concurrent edit of the same code makes one of them fail.
    /// An edit cut short after storing the configuration leaves its owed index writes
    /// recorded (`crate::owed`); the next `put_code` of the code, even with the same
    /// configuration, finishes them, so the index ends matching the configuration stored last.
    async fn put_code(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        config: &CodeConfig,
        read_version: Option<u64>,
        now_ms: u64,
    ) -> Result<Option<VersionedCode>, StoreError>;

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
