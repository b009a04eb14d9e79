//! The admin routes' path parameters, query strings and JSON bodies, validated into commands.
//! Every refusal names the field to fix (`members[2]`, `switches.daily_limit`) and never
//! echoes a secret.
//!
//! Every PUT body is a JSON merge patch (RFC 7396) on the stored resource: a field left out
//! keeps its stored value, a field set to `null` goes back to its default (a field with no
//! default refuses `null`), and a field given is set. Creating a resource takes the defaults
//! for what is left out, and needs the fields that have none. See `Patch`.

use super::error::AdminError;
use super::ports::StaffChange;
use crate::ids::TenantId;
use crate::ids::{CodeId, DepartmentId, StaffId};
use crate::membership::{CodeConfig, Employment, Family, Shift, Switches, WeeklySchedule};
use crate::tenants::{KeyRotation, PreviousCallbackKeys, TenantProfile, Timezone};
use crate::wecom::crypto::{CallbackCrypto, CryptoError};
use serde_json::{Map, Value};
use std::collections::{BTreeSet, HashSet};

/// WeCom corp ids are 18 letters and digits today; 64 leaves room without accepting junk.
pub const MAX_CORP_ID_CHARS: usize = 64;
/// WeCom app secrets are 43 characters today; 128 leaves room.
pub const MAX_CORP_SECRET_CHARS: usize = 128;
/// WeCom's rule for a callback Token: 3 to 32 letters or digits.
pub const CALLBACK_TOKEN_CHARS: std::ops::RangeInclusive<usize> = 3..=32;
/// An IANA zone name ("America/Argentina/ComodRivadavia" is 32).
pub const MAX_TIMEZONE_CHARS: usize = 64;
/// A page of a listing: at most this many codes.
pub const MAX_PAGE: usize = 100;
/// A page of a listing when the request names no limit.
pub const DEFAULT_PAGE: usize = 50;
/// The largest request body read: a department of `MAX_DEPARTMENT_MEMBERS` ids of 64
/// characters is about 135 KB, every other body a few KB.
pub const MAX_BODY_BYTES: usize = 256 * 1024;
/// Members are stored with their seats in the staff -> codes index, one write each; WeCom
/// takes at most 100 of them at a time anyway.
pub const MAX_MEMBERS: usize = 500;
/// The recompute never routes to more than 100 fallback staff.
pub const MAX_FALLBACK: usize = 100;
/// Departments a code lists: each is read on every recompute of the code and has an entry in
/// the department -> codes index.
pub const MAX_CODE_DEPARTMENTS: usize = 50;
/// Members of one department as the admin API sets them; they are stored on one item.
pub const MAX_DEPARTMENT_MEMBERS: usize = 2_000;
/// Departments one staff member is in.
pub const MAX_STAFF_DEPARTMENTS: usize = 100;
/// Adds one staff member may take through one code in a day; far above what a person can
/// handle, low enough to catch a typo (WeCom itself limits a user's daily adds).
pub const MAX_DAILY_LIMIT: u32 = 10_000;
/// Adds one staff member may take through one code in total.
pub const MAX_ADD_LIMIT: u32 = 1_000_000;
/// Customers one member takes per rotation round.
pub const MAX_ROUND_LIMIT: u32 = 1_000;

/// A field of a PUT body under merge-patch semantics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Patch<T> {
    /// Left out: the stored value stays.
    #[default]
    Keep,
    /// `null`: back to the field's default.
    Reset,
    /// A value: set.
    Set(T),
}

impl<T> Patch<T> {
    /// The value after the patch, given the stored one (`None`: nothing stored yet, so the
    /// default) and the field's default.
    pub fn apply(self, stored: Option<T>, default: impl FnOnce() -> T) -> T {
        match self {
            Self::Keep => stored.unwrap_or_else(default),
            Self::Reset => default(),
            Self::Set(value) => value,
        }
    }

    fn try_map<U>(
        self,
        f: impl FnOnce(T) -> Result<U, AdminError>,
    ) -> Result<Patch<U>, AdminError> {
        Ok(match self {
            Self::Keep => Patch::Keep,
            Self::Reset => Patch::Reset,
            Self::Set(value) => Patch::Set(f(value)?),
        })
    }

    fn map<U>(self, f: impl FnOnce(T) -> U) -> Patch<U> {
        match self {
            Self::Keep => Patch::Keep,
            Self::Reset => Patch::Reset,
            Self::Set(value) => Patch::Set(f(value)),
        }
    }
}

/// `PUT /admin/tenants/{tenant}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PutTenant {
    pub tenant: TenantId,
    pub patch: TenantPatch,
}

/// The tenant fields a PUT sets. The corp id and the three secrets have no default: required
/// to create a tenant, kept when left out, never `null`. `Debug` hides the secrets.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct TenantPatch {
    pub corp_id: Option<String>,
    pub corp_secret: Option<String>,
    pub callback_token: Option<String>,
    pub encoding_aes_key: Option<String>,
    /// Default Asia/Shanghai.
    pub timezone: Patch<Timezone>,
    /// Default: no cap.
    pub company_daily_cap: Patch<Option<u32>>,
    /// `"previous_callback_keys": null`: drop the callback keys the last rotation replaced
    /// (after a leak, or to rotate again before they expire).
    pub drop_previous_callback_keys: bool,
}

impl std::fmt::Debug for TenantPatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TenantPatch")
            .field("corp_id", &self.corp_id)
            .field("corp_secret", &self.corp_secret.as_ref().map(|_| "<set>"))
            .field(
                "callback_token",
                &self.callback_token.as_ref().map(|_| "<set>"),
            )
            .field(
                "encoding_aes_key",
                &self.encoding_aes_key.as_ref().map(|_| "<set>"),
            )
            .field("timezone", &self.timezone)
            .field("company_daily_cap", &self.company_daily_cap)
            .field(
                "drop_previous_callback_keys",
                &self.drop_previous_callback_keys,
            )
            .finish()
    }
}

impl TenantPatch {
    /// The profile after the patch, at `now_ms`. The callback function builds its crypto from
    /// the corp id, the Token and the key for every callback, so a profile it could not build
    /// with (which would refuse all of the tenant's callbacks) is refused here.
    ///
    /// A new token or key is a rotation: the pair it replaces is kept as the previous one, so
    /// callbacks signed with it before (or, for `rotation.edge_ms`, after) still open. One
    /// previous pair is kept: a rotation while an earlier one is still kept would drop it and
    /// every stored callback signed with it, so it is refused (409
    /// `previous_callback_keys_held`) unless the request drops that pair explicitly.
    pub fn apply(
        self,
        stored: Option<&TenantProfile>,
        now_ms: u64,
        rotation: KeyRotation,
    ) -> Result<TenantProfile, AdminError> {
        let required = |given: Option<String>, field: &str, stored: Option<&String>| {
            given
                .or_else(|| stored.cloned())
                .ok_or_else(|| AdminError::invalid(field, "is required to create the tenant"))
        };
        let held = stored
            .and_then(|p| p.previous_callback.clone())
            .filter(|held| !self.drop_previous_callback_keys && now_ms < rotation.kept_until(held));
        let mut profile = TenantProfile {
            corp_id: required(self.corp_id, "corp_id", stored.map(|p| &p.corp_id))?,
            corp_secret: required(
                self.corp_secret,
                "corp_secret",
                stored.map(|p| &p.corp_secret),
            )?,
            callback_token: required(
                self.callback_token,
                "callback_token",
                stored.map(|p| &p.callback_token),
            )?,
            encoding_aes_key: required(
                self.encoding_aes_key,
                "encoding_aes_key",
                stored.map(|p| &p.encoding_aes_key),
            )?,
            previous_callback: held.clone(),
            timezone: self
                .timezone
                .apply(stored.map(|p| p.timezone), Timezone::default),
            company_daily_cap: self
                .company_daily_cap
                .apply(stored.map(|p| p.company_daily_cap), || None),
        };
        CallbackCrypto::new(
            &profile.callback_token,
            &profile.encoding_aes_key,
            &profile.corp_id,
        )
        .map_err(|e| match e {
            CryptoError::BadAesKey => AdminError::invalid("encoding_aes_key", e),
            _ => AdminError::invalid("callback_token", e),
        })?;
        let rotated = stored.filter(|stored| {
            stored.callback_token != profile.callback_token
                || stored.encoding_aes_key != profile.encoding_aes_key
        });
        if let Some(stored) = rotated {
            if let Some(held) = held {
                return Err(AdminError::PreviousKeysHeld {
                    kept_until_ms: rotation.kept_until(&held),
                });
            }
            profile.previous_callback = Some(PreviousCallbackKeys {
                callback_token: stored.callback_token.clone(),
                encoding_aes_key: stored.encoding_aes_key.clone(),
                replaced_at_ms: now_ms,
            });
        }
        Ok(profile)
    }
}

/// `PUT /admin/tenants/{tenant}/staff/{staff}`. A staff member not stored yet is created with
/// the defaults: offline, active, in no department, no schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PutStaff {
    pub tenant: TenantId,
    pub staff: StaffId,
    pub change: StaffChange,
    /// The departments the staff member is in (replacing the stored ones); `None` keeps them.
    pub departments: Option<BTreeSet<DepartmentId>>,
    /// `None` keeps the stored work schedule.
    pub schedule: Option<ScheduleEdit>,
}

/// A staff member's work schedule as a request sets it (`"schedule": {...}` or `null`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScheduleEdit {
    /// Weekly shifts in the tenant's timezone; outside them the staff member counts as offline
    /// on codes with the offline check on.
    Set(WeeklySchedule),
    /// No schedule: always on shift.
    Remove,
}

/// `PUT /admin/tenants/{tenant}/departments/{department}`: the department's members, replacing
/// the stored ones (`None`: left out, kept).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PutDepartment {
    pub tenant: TenantId,
    pub department: DepartmentId,
    pub members: Option<BTreeSet<StaffId>>,
}

/// `DELETE /admin/tenants/{tenant}/codes/{code}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeleteCode {
    pub tenant: TenantId,
    pub code: CodeId,
}

/// `PUT /admin/tenants/{tenant}/codes/{code}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PutCode {
    pub tenant: TenantId,
    pub code: CodeId,
    pub patch: CodePatch,
}

/// The code fields a PUT sets. `family` has no default (required to create a code); the
/// lists default to empty, the switches to off.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CodePatch {
    pub family: Option<Family>,
    pub members: Patch<Vec<StaffId>>,
    pub departments: Patch<Vec<DepartmentId>>,
    pub fallback: Patch<Vec<StaffId>>,
    pub switches: SwitchesPatch,
}

/// `switches` of a code PUT; `"switches": null` resets each of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SwitchesPatch {
    pub offline_check: Patch<bool>,
    pub add_limit: Patch<Option<u32>>,
    pub daily_limit: Patch<Option<u32>>,
    pub round_limit: Patch<Option<u32>>,
}

impl CodePatch {
    /// The configuration after the patch, checked as a whole (a code lists someone; only
    /// rotating families take a round limit).
    pub fn apply(self, stored: Option<&CodeConfig>) -> Result<CodeConfig, AdminError> {
        let family = self
            .family
            .or(stored.map(|c| c.family))
            .ok_or_else(|| AdminError::invalid("family", "is required to create the code"))?;
        let switches = stored.map(|c| c.switches);
        let config = CodeConfig {
            family,
            members: self
                .members
                .apply(stored.map(|c| c.members.clone()), Vec::new),
            departments: self
                .departments
                .apply(stored.map(|c| c.departments.clone()), Vec::new),
            fallback: self
                .fallback
                .apply(stored.map(|c| c.fallback.clone()), Vec::new),
            switches: Switches {
                offline_check: self
                    .switches
                    .offline_check
                    .apply(switches.map(|s| s.offline_check), || false),
                add_limit: self
                    .switches
                    .add_limit
                    .apply(switches.map(|s| s.add_limit), || None),
                daily_limit: self
                    .switches
                    .daily_limit
                    .apply(switches.map(|s| s.daily_limit), || None),
                round_limit: self
                    .switches
                    .round_limit
                    .apply(switches.map(|s| s.round_limit), || None),
            },
        };
        if config.members.is_empty() && config.departments.is_empty() {
            return Err(AdminError::invalid(
                "members",
                "a code must list at least one member or one department",
            ));
        }
        if config.switches.round_limit.is_some() && !config.family.rotates() {
            return Err(AdminError::invalid(
                "switches.round_limit",
                "only sequenced and quota codes rotate; WeCom routes a native code itself",
            ));
        }
        Ok(config)
    }
}

/// `GET /admin/tenants/{tenant}/codes/{code}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GetCode {
    pub tenant: TenantId,
    pub code: CodeId,
}

/// `GET /admin/tenants/{tenant}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GetTenant {
    pub tenant: TenantId,
}

/// `GET /admin/tenants/{tenant}/drift?day=`: the drift report of a tenant-day (`None`: the
/// tenant's current day) and the blast-radius guard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GetDrift {
    pub tenant: TenantId,
    pub day: Option<String>,
}

/// `POST /admin/tenants/{tenant}/drift/resume`: the operator resumes a tripped guard's repair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResumeRepair {
    pub tenant: TenantId,
}

/// `GET /admin/tenants/{tenant}/staff/{staff}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GetStaff {
    pub tenant: TenantId,
    pub staff: StaffId,
}

/// `GET /admin/tenants/{tenant}/departments/{department}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GetDepartment {
    pub tenant: TenantId,
    pub department: DepartmentId,
}

/// `GET /admin/tenants/{tenant}/codes` and `GET /admin/tenants/{tenant}/staff/{staff}/codes`:
/// codes in id order, from after `after`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListCodes {
    pub tenant: TenantId,
    /// The staff member whose codes are listed; `None`: all of the tenant's.
    pub staff: Option<StaffId>,
    pub page: PageRequest,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageRequest {
    /// The cursor a previous page answered: the last code it held.
    pub after: Option<CodeId>,
    pub limit: usize,
}

impl PageRequest {
    /// From the query string's `limit` (1 to `MAX_PAGE`, default `DEFAULT_PAGE`) and
    /// `cursor` (as answered by the previous page).
    pub fn parse(limit: Option<&str>, cursor: Option<&str>) -> Result<Self, AdminError> {
        let limit = match limit {
            None => DEFAULT_PAGE,
            Some(raw) => raw
                .parse::<usize>()
                .ok()
                .filter(|n| (1..=MAX_PAGE).contains(n))
                .ok_or_else(|| {
                    AdminError::invalid(
                        "limit",
                        format!("must be a whole number from 1 to {MAX_PAGE}"),
                    )
                })?,
        };
        let after = cursor
            .map(|raw| {
                CodeId::parse(raw)
                    .map_err(|_| AdminError::invalid("cursor", "is not a cursor this API answered"))
            })
            .transpose()?;
        Ok(Self { after, limit })
    }
}

pub fn tenant_param(raw: &str) -> Result<TenantId, AdminError> {
    TenantId::parse(raw).map_err(|e| AdminError::invalid("tenant", e))
}

pub fn staff_param(raw: &str) -> Result<StaffId, AdminError> {
    StaffId::parse(raw).map_err(|e| AdminError::invalid("staff", e))
}

pub fn code_param(raw: &str) -> Result<CodeId, AdminError> {
    CodeId::parse(raw).map_err(|e| AdminError::invalid("code", e))
}

pub fn department_param(raw: &str) -> Result<DepartmentId, AdminError> {
    DepartmentId::parse(raw).map_err(|e| AdminError::invalid("department", e))
}

impl PutTenant {
    pub fn parse(tenant: &str, body: &str) -> Result<Self, AdminError> {
        let tenant = tenant_param(tenant)?;
        let mut body = Object::parse(body, "")?;
        let corp_id = body.kept_string(
            "corp_id",
            1..=MAX_CORP_ID_CHARS,
            |c| c.is_ascii_alphanumeric(),
            "1 to 64 letters and digits",
        )?;
        let corp_secret = body.kept_string(
            "corp_secret",
            1..=MAX_CORP_SECRET_CHARS,
            |c| c.is_ascii_graphic(),
            "1 to 128 printable ASCII characters, without spaces",
        )?;
        let callback_token = body.kept_string(
            "callback_token",
            CALLBACK_TOKEN_CHARS,
            |c| c.is_ascii_alphanumeric(),
            "3 to 32 letters and digits (WeCom's rule for a Token)",
        )?;
        let encoding_aes_key = body.kept_string(
            "encoding_aes_key",
            43..=43,
            |c| c.is_ascii_alphanumeric(),
            "43 letters and digits (WeCom's EncodingAESKey)",
        )?;
        let timezone = match body.patch("timezone") {
            Patch::Set(Value::String(name)) if name.len() <= MAX_TIMEZONE_CHARS => Patch::Set(
                name.parse::<Timezone>()
                    .map_err(|e| body.invalid("timezone", e))?,
            ),
            Patch::Set(_) => {
                return Err(body.invalid(
                    "timezone",
                    format!("must be an IANA zone name of at most {MAX_TIMEZONE_CHARS} characters"),
                ))
            }
            other => other.map(|_| Timezone::default()),
        };
        let company_daily_cap = body.limit_patch("company_daily_cap", u32::MAX)?;
        let drop_previous_callback_keys =
            match body.patch("previous_callback_keys") {
                Patch::Keep => false,
                Patch::Reset => true,
                Patch::Set(_) => return Err(body.invalid(
                    "previous_callback_keys",
                    "can only be null, which drops the callback keys the last rotation replaced",
                )),
            };
        body.finish()?;
        Ok(Self {
            tenant,
            patch: TenantPatch {
                corp_id,
                corp_secret,
                callback_token,
                encoding_aes_key,
                timezone,
                company_daily_cap,
                drop_previous_callback_keys,
            },
        })
    }
}

impl PutStaff {
    pub fn parse(tenant: &str, staff: &str, body: &str) -> Result<Self, AdminError> {
        let tenant = tenant_param(tenant)?;
        let staff = staff_param(staff)?;
        let mut body = Object::parse(body, "")?;
        let online = match body.patch("online") {
            Patch::Keep => None,
            Patch::Reset => Some(false),
            Patch::Set(Value::Bool(online)) => Some(online),
            Patch::Set(_) => return Err(body.invalid("online", "must be true or false")),
        };
        let employment = match body.patch("employment") {
            Patch::Keep => None,
            Patch::Reset => Some(Employment::Active),
            Patch::Set(value) => {
                Some(serde_json::from_value::<Employment>(value).map_err(|_| {
                    body.invalid(
                        "employment",
                        "must be \"active\", \"resigned\" or \"disabled\"",
                    )
                })?)
            }
        };
        let departments = match body.patch("departments") {
            Patch::Keep => None,
            Patch::Reset => Some(BTreeSet::new()),
            Patch::Set(value) => Some(
                department_list(&body.path("departments"), value, 0, MAX_STAFF_DEPARTMENTS)?
                    .into_iter()
                    .collect(),
            ),
        };
        let schedule = match body.patch("schedule") {
            Patch::Keep => None,
            Patch::Reset => Some(ScheduleEdit::Remove),
            Patch::Set(value) => Some(ScheduleEdit::Set(weekly_schedule(
                &body.path("schedule"),
                value,
            )?)),
        };
        body.finish()?;
        Ok(Self {
            tenant,
            staff,
            change: StaffChange { online, employment },
            departments,
            schedule,
        })
    }
}

impl PutCode {
    pub fn parse(tenant: &str, code: &str, body: &str) -> Result<Self, AdminError> {
        let tenant = tenant_param(tenant)?;
        let code = code_param(code)?;
        let mut body = Object::parse(body, "")?;
        let family = match body.patch("family") {
            Patch::Keep => None,
            Patch::Reset => {
                return Err(body.invalid("family", "has no default; leave it out to keep it"))
            }
            Patch::Set(value) => Some(serde_json::from_value::<Family>(value).map_err(|_| {
                body.invalid("family", "must be \"native\", \"sequenced\" or \"quota\"")
            })?),
        };
        let field = body.path("members");
        let members = body
            .patch("members")
            .try_map(|value| staff_list(&field, value, 0, MAX_MEMBERS))?;
        let field = body.path("departments");
        let departments = body
            .patch("departments")
            .try_map(|value| department_list(&field, value, 0, MAX_CODE_DEPARTMENTS))?;
        let field = body.path("fallback");
        let fallback = body
            .patch("fallback")
            .try_map(|value| staff_list(&field, value, 0, MAX_FALLBACK))?;
        let switches = match body.patch("switches") {
            Patch::Keep => SwitchesPatch::default(),
            Patch::Reset => SwitchesPatch {
                offline_check: Patch::Reset,
                add_limit: Patch::Reset,
                daily_limit: Patch::Reset,
                round_limit: Patch::Reset,
            },
            Patch::Set(Value::Object(fields)) => {
                let mut switches = Object {
                    fields,
                    prefix: body.path("switches."),
                };
                let offline_check = match switches.patch("offline_check") {
                    Patch::Set(Value::Bool(on)) => Patch::Set(on),
                    Patch::Set(_) => {
                        return Err(switches.invalid("offline_check", "must be true or false"))
                    }
                    other => other.map(|_| false),
                };
                let parsed = SwitchesPatch {
                    offline_check,
                    add_limit: switches.limit_patch("add_limit", MAX_ADD_LIMIT)?,
                    daily_limit: switches.limit_patch("daily_limit", MAX_DAILY_LIMIT)?,
                    round_limit: switches.limit_patch("round_limit", MAX_ROUND_LIMIT)?,
                };
                switches.finish()?;
                parsed
            }
            Patch::Set(_) => return Err(body.invalid("switches", "must be an object")),
        };
        body.finish()?;
        Ok(Self {
            tenant,
            code,
            patch: CodePatch {
                family,
                members,
                departments,
                fallback,
                switches,
            },
        })
    }
}

impl GetCode {
    pub fn parse(tenant: &str, code: &str) -> Result<Self, AdminError> {
        Ok(Self {
            tenant: tenant_param(tenant)?,
            code: code_param(code)?,
        })
    }
}

impl GetTenant {
    pub fn parse(tenant: &str) -> Result<Self, AdminError> {
        Ok(Self {
            tenant: tenant_param(tenant)?,
        })
    }
}

impl GetDrift {
    /// `day` is a calendar date, `YYYY-MM-DD`.
    pub fn parse(tenant: &str, day: Option<&str>) -> Result<Self, AdminError> {
        let day = day
            .map(|day| {
                chrono::NaiveDate::parse_from_str(day, "%Y-%m-%d")
                    .ok()
                    .filter(|_| day.len() == 10)
                    .map(|_| day.to_owned())
                    .ok_or_else(|| AdminError::invalid("day", "must be a date, YYYY-MM-DD"))
            })
            .transpose()?;
        Ok(Self {
            tenant: tenant_param(tenant)?,
            day,
        })
    }
}

impl ResumeRepair {
    pub fn parse(tenant: &str) -> Result<Self, AdminError> {
        Ok(Self {
            tenant: tenant_param(tenant)?,
        })
    }
}

impl GetStaff {
    pub fn parse(tenant: &str, staff: &str) -> Result<Self, AdminError> {
        Ok(Self {
            tenant: tenant_param(tenant)?,
            staff: staff_param(staff)?,
        })
    }
}

impl GetDepartment {
    pub fn parse(tenant: &str, department: &str) -> Result<Self, AdminError> {
        Ok(Self {
            tenant: tenant_param(tenant)?,
            department: department_param(department)?,
        })
    }
}

impl ListCodes {
    pub fn parse(
        tenant: &str,
        staff: Option<&str>,
        limit: Option<&str>,
        cursor: Option<&str>,
    ) -> Result<Self, AdminError> {
        Ok(Self {
            tenant: tenant_param(tenant)?,
            staff: staff.map(staff_param).transpose()?,
            page: PageRequest::parse(limit, cursor)?,
        })
    }
}

impl DeleteCode {
    pub fn parse(tenant: &str, code: &str) -> Result<Self, AdminError> {
        Ok(Self {
            tenant: tenant_param(tenant)?,
            code: code_param(code)?,
        })
    }
}

impl PutDepartment {
    pub fn parse(tenant: &str, department: &str, body: &str) -> Result<Self, AdminError> {
        let tenant = tenant_param(tenant)?;
        let department = department_param(department)?;
        let mut body = Object::parse(body, "")?;
        let field = body.path("members");
        let members = match body.patch("members") {
            Patch::Keep => None,
            Patch::Reset => Some(BTreeSet::new()),
            Patch::Set(value) => Some(
                staff_list(&field, value, 0, MAX_DEPARTMENT_MEMBERS)?
                    .into_iter()
                    .collect(),
            ),
        };
        body.finish()?;
        Ok(Self {
            tenant,
            department,
            members,
        })
    }
}

/// `{"shifts": [{"day": "mon", "start": "09:00", "end": "18:00"}, ...]}`, each shift checked
/// where it is (`schedule.shifts[2].day`), then the whole against `WeeklySchedule::validate`.
fn weekly_schedule(field: &str, value: Value) -> Result<WeeklySchedule, AdminError> {
    let Value::Object(fields) = value else {
        return Err(AdminError::invalid(
            field,
            "must be an object with a list of shifts, or null for no schedule",
        ));
    };
    let mut schedule = Object {
        fields,
        prefix: format!("{field}."),
    };
    let shifts = match schedule.take("shifts") {
        Some(Value::Array(shifts)) => shifts,
        Some(_) => return Err(schedule.invalid("shifts", "must be a list of shifts")),
        None => return Err(schedule.invalid("shifts", "is required")),
    };
    schedule.finish()?;
    if shifts.len() > WeeklySchedule::MAX_SHIFTS {
        return Err(AdminError::invalid(
            format!("{field}.shifts"),
            format!("must list at most {} shifts", WeeklySchedule::MAX_SHIFTS),
        ));
    }
    let shifts = shifts
        .into_iter()
        .enumerate()
        .map(|(i, shift)| {
            let at = format!("{field}.shifts[{i}]");
            let Value::Object(fields) = shift else {
                return Err(AdminError::invalid(
                    &at,
                    "must be an object with day, start and end",
                ));
            };
            let mut shift = Object {
                fields,
                prefix: format!("{at}."),
            };
            let day = shift.string("day")?;
            let start = shift.string("start")?;
            let end = shift.string("end")?;
            shift.finish()?;
            // Shift's own serde reads the day and times; its errors name the value, never more.
            serde_json::from_value::<Shift>(
                serde_json::json!({"day": day, "start": start, "end": end}),
            )
            .map_err(|e| AdminError::invalid(&at, e))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let schedule = WeeklySchedule { shifts };
    schedule
        .validate()
        .map_err(|e| AdminError::invalid(field, e))?;
    Ok(schedule)
}

/// A list of distinct staff ids, `min..=max` long.
fn staff_list(
    field: &str,
    value: Value,
    min: usize,
    max: usize,
) -> Result<Vec<StaffId>, AdminError> {
    let Value::Array(items) = value else {
        return Err(AdminError::invalid(field, "must be a list of staff ids"));
    };
    if !(min..=max).contains(&items.len()) {
        return Err(AdminError::invalid(
            field,
            format!("must list {min} to {max} staff ids"),
        ));
    }
    let mut seen = HashSet::new();
    items
        .into_iter()
        .enumerate()
        .map(|(i, item)| {
            let at = format!("{field}[{i}]");
            let id = item
                .as_str()
                .ok_or_else(|| AdminError::invalid(&at, "must be a string"))
                .and_then(|raw| StaffId::parse(raw).map_err(|e| AdminError::invalid(&at, e)))?;
            if !seen.insert(id.clone()) {
                return Err(AdminError::invalid(&at, format!("repeats {id}")));
            }
            Ok(id)
        })
        .collect()
}

/// A list of distinct department ids, `min..=max` long.
fn department_list(
    field: &str,
    value: Value,
    min: usize,
    max: usize,
) -> Result<Vec<DepartmentId>, AdminError> {
    let Value::Array(items) = value else {
        return Err(AdminError::invalid(
            field,
            "must be a list of department ids",
        ));
    };
    if !(min..=max).contains(&items.len()) {
        return Err(AdminError::invalid(
            field,
            format!("must list {min} to {max} department ids"),
        ));
    }
    let mut seen = HashSet::new();
    items
        .into_iter()
        .enumerate()
        .map(|(i, item)| {
            let at = format!("{field}[{i}]");
            // WeCom's department ids are numbers, but the API takes them as strings, like
            // every other id: one spelling, so a stored list compares equal to a sent one.
            let Value::String(raw) = item else {
                return Err(AdminError::invalid(
                    &at,
                    "must be a department id (a string)",
                ));
            };
            let id = DepartmentId::parse(&raw).map_err(|e| AdminError::invalid(&at, e))?;
            if !seen.insert(id.clone()) {
                return Err(AdminError::invalid(&at, format!("repeats {id}")));
            }
            Ok(id)
        })
        .collect()
}

/// A JSON object whose fields are taken one by one; what is left at the end is unknown.
struct Object {
    fields: Map<String, Value>,
    /// Prepended to field names in errors (`switches.`).
    prefix: String,
}

impl Object {
    fn parse(body: &str, prefix: &str) -> Result<Self, AdminError> {
        // Parsing into a `Value` reports syntax errors only (position, never content), so
        // the message is safe to return even when the body holds secrets.
        match serde_json::from_str::<Value>(body) {
            Ok(Value::Object(fields)) => Ok(Self {
                fields,
                prefix: prefix.to_owned(),
            }),
            Ok(_) => Err(AdminError::invalid("body", "must be a JSON object")),
            Err(e) => Err(AdminError::invalid("body", format!("is not JSON: {e}"))),
        }
    }

    fn path(&self, field: &str) -> String {
        format!("{}{field}", self.prefix)
    }

    fn invalid(&self, field: &str, reason: impl ToString) -> AdminError {
        AdminError::invalid(self.path(field), reason)
    }

    /// The field's value; JSON `null` counts as absent.
    fn take(&mut self, field: &str) -> Option<Value> {
        self.fields.remove(field).filter(|v| !v.is_null())
    }

    /// The field under merge-patch semantics: left out, `null`, or a value.
    fn patch(&mut self, field: &str) -> Patch<Value> {
        match self.fields.remove(field) {
            None => Patch::Keep,
            Some(Value::Null) => Patch::Reset,
            Some(value) => Patch::Set(value),
        }
    }

    /// A string field with no default: left out keeps the stored value (`None`), `null` is
    /// refused. Bounded in characters and to characters `allowed` takes; the refusal never
    /// echoes the value (it may be a secret).
    fn kept_string(
        &mut self,
        field: &str,
        chars: std::ops::RangeInclusive<usize>,
        allowed: fn(char) -> bool,
        what: &str,
    ) -> Result<Option<String>, AdminError> {
        match self.patch(field) {
            Patch::Keep => Ok(None),
            Patch::Reset => Err(self.invalid(field, "has no default; leave it out to keep it")),
            Patch::Set(Value::String(value))
                if chars.contains(&value.chars().count()) && value.chars().all(allowed) =>
            {
                Ok(Some(value))
            }
            Patch::Set(_) => Err(self.invalid(field, format!("must be {what}"))),
        }
    }

    /// A limit: a whole number from 1 to `max`, or `null` for "off" (the default). Zero is
    /// refused because it would exclude everyone, every day, which is what turning the code
    /// off is for.
    fn limit_patch(&mut self, field: &str, max: u32) -> Result<Patch<Option<u32>>, AdminError> {
        match self.patch(field) {
            Patch::Keep => Ok(Patch::Keep),
            Patch::Reset => Ok(Patch::Reset),
            Patch::Set(value) => value
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .filter(|&n| (1..=max).contains(&n))
                .map(|n| Patch::Set(Some(n)))
                .ok_or_else(|| {
                    self.invalid(
                        field,
                        format!("must be a whole number from 1 to {max}, or null for no limit"),
                    )
                }),
        }
    }

    fn string(&mut self, field: &str) -> Result<String, AdminError> {
        match self.fields.remove(field) {
            Some(Value::String(s)) => Ok(s),
            Some(_) => Err(self.invalid(field, "must be a string")),
            None => Err(self.invalid(field, "is required")),
        }
    }

    fn finish(self) -> Result<(), AdminError> {
        match self.fields.keys().next() {
            Some(unknown) => {
                let shown: String = unknown.chars().take(64).collect();
                Err(AdminError::invalid(
                    self.path(&shown),
                    "is not a known field",
                ))
            }
            None => Ok(()),
        }
    }
}
