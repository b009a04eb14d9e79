//! What the admin API answers: the views of its reads and the answers of its writes. None of
//! them holds a secret.

use crate::ids::TenantId;
use crate::ids::{CodeId, DepartmentId, StaffId};
use crate::membership::{Employment, Exclusion, Family, WeeklySchedule};
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
    /// Why WeCom does not serve the tenant, while it is paused (`crate::tenants::TenantPause`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paused: Option<PausedView>,
}

/// A paused tenant's pause, and what to fix in words.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PausedView {
    pub reason: String,
    #[serde(flatten)]
    pub pause: crate::tenants::TenantPause,
}

impl PausedView {
    pub fn of(pause: crate::tenants::TenantPause) -> Self {
        Self {
            reason: pause.reason(),
            pause,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SecretsView {
    pub corp_secret: SecretState,
    pub callback_token: SecretState,
    pub encoding_aes_key: SecretState,
    /// The callback keys the last rotation replaced, while they are kept; never their values.
    pub previous_callback_keys: Option<PreviousKeysView>,
}

/// When the previous callback keys were replaced, and until when they still verify: a
/// callback at the live route (`edge_until_ms`), a stored one (`kept_until_ms`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PreviousKeysView {
    pub replaced_at_ms: u64,
    pub edge_until_ms: u64,
    pub kept_until_ms: u64,
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

/// The answer to `GET /admin/tenants/{tenant}/codes/{code}`: what the code should route to now,
/// why members are left out, and whether WeCom already has that list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CodeStatus {
    pub code: CodeId,
    pub family: Family,
    /// The departments the code lists; their members are candidates after the members.
    pub departments: Vec<DepartmentId>,
    pub config_id: Option<String>,
    pub version: u64,
    /// The list a recompute gives now (the fallback staff when the outcome is `fallback`).
    pub eligible_now: Vec<StaffId>,
    pub outcome: RoutingOutcome,
    pub excluded: Vec<ExcludedMember>,
    pub last_pushed: Option<LastPushed>,
    /// WeCom's list (the last push, or the creation's list before any) is `eligible_now` and
    /// the code is not starved.
    pub in_sync: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RoutingOutcome {
    Members,
    Fallback,
    Starved,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExcludedMember {
    pub staff: StaffId,
    pub reason: &'static str,
}

/// The list WeCom routes the code to, by our records.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LastPushed {
    pub users: Vec<StaffId>,
    /// When the refresh function's push of `users` was accepted; `None` while the list is the
    /// one the contact way was created with.
    pub pushed_at_ms: Option<u64>,
    /// The last recompute found nobody eligible; WeCom still routes to `users`, because an
    /// empty list is never pushed.
    pub starved: bool,
}

/// The reason's wire name. Spelled out rather than derived so "WeCom" reads as one word.
pub fn exclusion_name(exclusion: Exclusion) -> &'static str {
    match exclusion {
        Exclusion::UnknownStaff => "unknown_staff",
        Exclusion::Resigned => "resigned",
        Exclusion::Disabled => "disabled",
        Exclusion::RejectedByWeCom => "rejected_by_wecom",
        Exclusion::Offline => "offline",
        Exclusion::OutsideShift => "outside_shift",
        Exclusion::AddLimitReached => "add_limit_reached",
        Exclusion::DailyLimitReached => "daily_limit_reached",
        Exclusion::CompanyCapReached => "company_cap_reached",
        Exclusion::OverWeComCap => "over_wecom_cap",
    }
}

/// The answer to `PUT /admin/tenants/{tenant}`. Holds no secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TenantAnswer {
    pub tenant: TenantId,
    pub corp_id: String,
    pub timezone: String,
    pub company_daily_cap: Option<u32>,
    /// The profile's version after this write.
    pub version: u64,
    /// The fan-out that sends every code of the tenant a reason, when the cap or the timezone
    /// changed (its id, the fact's key); absent when no code needs a recompute.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fan_out: Option<String>,
}

/// The answer to `PUT /admin/tenants/{tenant}/staff/{staff}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StaffAnswer {
    pub staff: StaffId,
    pub online: bool,
    pub employment: Employment,
    /// The departments the staff member is in, when the request set them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub departments: Option<Vec<DepartmentId>>,
    /// WeCom refused this user for contact ways (only WeCom's answers set it).
    pub rejected_by_wecom: bool,
    /// The stored work schedule (absent: none, always on shift).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schedule: Option<WeeklySchedule>,
    /// The fan-out that sends a reason to every code the staff member may be on, and to every
    /// code listing a department they joined or left: queued before the answer.
    pub fan_out: String,
}

/// The answer to `PUT /admin/tenants/{tenant}/departments/{department}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DepartmentAnswer {
    pub department: DepartmentId,
    pub members: Vec<StaffId>,
    /// Staff who joined or left the department with this request.
    pub changed: Vec<StaffId>,
    /// The fan-out that sends a reason to every code listing the department.
    pub fan_out: String,
}

/// The answer to `DELETE /admin/tenants/{tenant}/codes/{code}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeletedCode {
    pub code: CodeId,
    /// The WeCom contact way deleted with it (`None` when it was never created).
    pub config_id: Option<String>,
}

/// The answer to `PUT /admin/tenants/{tenant}/codes/{code}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CodeAnswer {
    pub code: CodeId,
    pub config_id: String,
    pub version: u64,
    /// This request created the contact way (HTTP 201).
    pub created: bool,
    /// The QR code image URL WeCom answered on creation; WeCom's `get_contact_way` has it later.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub qr_code: Option<String>,
}

/// The answer of `POST /admin/tenants/{tenant}/drift/resume`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Resumed {
    pub tenant: TenantId,
    pub resumed: bool,
}
