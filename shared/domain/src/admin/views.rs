//! What the admin API's GET routes answer. None of them holds a secret.

use crate::ids::{CodeId, DepartmentId, StaffId};
use crate::membership::{Employment, Family, WeeklySchedule};
use crate::tenants::TenantId;
use serde::Serialize;

/// `GET /admin/tenants/{tenant}`: the tenant's settings; of each secret only whether it is set
/// and when it last changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TenantView {
    pub tenant: TenantId,
    pub corp_id: String,
    pub timezone: String,
    pub company_daily_cap: Option<u32>,
    pub version: u64,
    pub secrets: SecretsView,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SecretsView {
    pub corp_secret: SecretState,
    pub callback_token: SecretState,
    pub encoding_aes_key: SecretState,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct SecretState {
    pub set: bool,
    /// When its value last changed; `None` when that was not recorded.
    pub changed_at_ms: Option<u64>,
}

/// `GET /admin/tenants/{tenant}/staff/{staff}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StaffView {
    pub staff: StaffId,
    pub employment: Employment,
    pub online: bool,
    /// WeCom refused this user for contact ways; only WeCom's answers set it.
    pub rejected_by_wecom: bool,
    pub schedule: Option<WeeklySchedule>,
    pub departments: Vec<DepartmentId>,
    /// The tenant's current day (`YYYY-MM-DD`, in its timezone): the day the counts are of.
    pub day: String,
    /// Adds through every code of the tenant today, against the company-wide cap. Per code,
    /// against each code's limits: `GET .../staff/{staff}/codes`.
    pub adds_today_all_codes: AddsAgainst,
}

/// A count and the limit it is measured against (`None`: no limit).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct AddsAgainst {
    pub adds: u32,
    pub limit: Option<u32>,
}

/// `GET /admin/tenants/{tenant}/departments/{department}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DepartmentView {
    pub department: DepartmentId,
    pub members: Vec<StaffId>,
}

/// `GET /admin/tenants/{tenant}/codes`: a page of the tenant's codes in id order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CodePage {
    pub codes: Vec<CodeSummaryView>,
    /// Pass as `cursor` for the next page; `None` on the last one.
    pub next_cursor: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CodeSummaryView {
    pub code: CodeId,
    pub family: Family,
    pub config_id: Option<String>,
    pub version: u64,
}

/// `GET /admin/tenants/{tenant}/staff/{staff}/codes`: a page of the codes that may route to
/// the staff member (as member or fallback, or through a department), in id order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StaffCodesPage {
    pub staff: StaffId,
    pub day: String,
    pub codes: Vec<StaffCodeView>,
    pub next_cursor: Option<String>,
}

/// The staff member's adds through one code, against the code's limits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StaffCodeView {
    pub code: CodeId,
    /// Today, against the code's `daily_limit`.
    pub adds_today: AddsAgainst,
    /// Ever, against the code's `add_limit`.
    pub adds_total: AddsAgainst,
}
