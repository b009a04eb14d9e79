//! The admin routes' path parameters and JSON bodies, validated into commands. Every refusal
//! names the field to fix (`members[2]`, `switches.daily_limit`) and never echoes a secret.

use super::error::AdminError;
use super::ports::StaffChange;
use crate::membership::{
    CodeConfig, CodeId, DepartmentId, Employment, Family, Shift, StaffId, Switches, WeeklySchedule,
};
use crate::tenants::{TenantId, TenantProfile, Timezone};
use crate::wecom::crypto::{CallbackCrypto, CryptoError};
use serde_json::{Map, Value};
use std::collections::{BTreeSet, HashSet};

/// WeCom corp ids are 18 characters today; 64 leaves room without accepting junk.
pub const MAX_CORP_ID_CHARS: usize = 64;
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
/// Consecutive customers one member takes per rotation round.
pub const MAX_ROUND_LIMIT: u32 = 1_000;

/// `PUT /admin/tenants/{tenant}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PutTenant {
    pub tenant: TenantId,
    /// `Debug` hides its secrets.
    pub profile: TenantProfile,
}

/// `PUT /admin/tenants/{tenant}/staff/{staff}`.
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
/// the stored ones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PutDepartment {
    pub tenant: TenantId,
    pub department: DepartmentId,
    pub members: BTreeSet<StaffId>,
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
    pub config: CodeConfig,
}

/// `GET /admin/tenants/{tenant}/codes/{code}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GetCode {
    pub tenant: TenantId,
    pub code: CodeId,
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
        let corp_id = body.string("corp_id")?;
        if corp_id.is_empty() || corp_id.chars().count() > MAX_CORP_ID_CHARS {
            return Err(body.invalid(
                "corp_id",
                format!("must be 1 to {MAX_CORP_ID_CHARS} characters"),
            ));
        }
        let corp_secret = body.string("corp_secret")?;
        if corp_secret.is_empty() {
            return Err(body.invalid("corp_secret", "must not be empty"));
        }
        let callback_token = body.string("callback_token")?;
        let encoding_aes_key = body.string("encoding_aes_key")?;
        // The callback function builds the same crypto from these for every callback: a
        // profile it could not build with would refuse all of the tenant's callbacks.
        CallbackCrypto::new(&callback_token, &encoding_aes_key, &corp_id).map_err(|e| match e {
            CryptoError::BadAesKey => body.invalid("encoding_aes_key", e),
            _ => body.invalid("callback_token", e),
        })?;
        let timezone = match body.optional_string("timezone")? {
            Some(name) => name
                .parse::<Timezone>()
                .map_err(|e| body.invalid("timezone", e))?,
            None => Timezone::default(),
        };
        let company_daily_cap = body.optional_limit("company_daily_cap")?;
        body.finish()?;
        Ok(Self {
            tenant,
            profile: TenantProfile {
                corp_id,
                callback_token,
                encoding_aes_key,
                corp_secret,
                timezone,
                company_daily_cap,
            },
        })
    }
}

impl PutStaff {
    pub fn parse(tenant: &str, staff: &str, body: &str) -> Result<Self, AdminError> {
        let tenant = tenant_param(tenant)?;
        let staff = staff_param(staff)?;
        let mut body = Object::parse(body, "")?;
        let online = body.boolean("online")?;
        let employment = body
            .take("employment")
            .map(|value| {
                serde_json::from_value::<Employment>(value).map_err(|_| {
                    body.invalid(
                        "employment",
                        "must be \"active\", \"resigned\" or \"disabled\"",
                    )
                })
            })
            .transpose()?;
        let departments = body
            .take("departments")
            .map(|value| {
                department_list(&body.path("departments"), value, 0, MAX_STAFF_DEPARTMENTS)
            })
            .transpose()?
            .map(|list| list.into_iter().collect());
        // Unlike the other fields, `null` means something here: remove the schedule.
        let schedule = match body.fields.remove("schedule") {
            None => None,
            Some(Value::Null) => Some(ScheduleEdit::Remove),
            Some(value) => Some(ScheduleEdit::Set(weekly_schedule(
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
        let family = body
            .take("family")
            .ok_or_else(|| body.invalid("family", "is required"))?;
        let family = serde_json::from_value::<Family>(family).map_err(|_| {
            body.invalid("family", "must be \"native\", \"sequenced\" or \"quota\"")
        })?;
        let members = match body.take("members") {
            Some(value) => staff_list(&body.path("members"), value, 0, MAX_MEMBERS)?,
            None => Vec::new(),
        };
        let departments = match body.take("departments") {
            Some(value) => {
                department_list(&body.path("departments"), value, 0, MAX_CODE_DEPARTMENTS)?
            }
            None => Vec::new(),
        };
        if members.is_empty() && departments.is_empty() {
            return Err(body.invalid(
                "members",
                "a code must list at least one member or one department",
            ));
        }
        let fallback = match body.take("fallback") {
            Some(value) => staff_list(&body.path("fallback"), value, 0, MAX_FALLBACK)?,
            None => Vec::new(),
        };
        let switches = match body.take("switches") {
            Some(Value::Object(fields)) => {
                let mut switches = Object {
                    fields,
                    prefix: body.path("switches."),
                };
                let parsed = Switches {
                    offline_check: switches.optional_boolean("offline_check")?.unwrap_or(false),
                    add_limit: switches.limit_up_to("add_limit", MAX_ADD_LIMIT)?,
                    daily_limit: switches.limit_up_to("daily_limit", MAX_DAILY_LIMIT)?,
                    round_limit: switches.limit_up_to("round_limit", MAX_ROUND_LIMIT)?,
                };
                if parsed.round_limit.is_some() && !family.rotates() {
                    return Err(switches.invalid(
                        "round_limit",
                        "only sequenced and quota codes rotate; WeCom routes a native code itself",
                    ));
                }
                switches.finish()?;
                parsed
            }
            Some(_) => return Err(body.invalid("switches", "must be an object")),
            None => Switches::default(),
        };
        body.finish()?;
        Ok(Self {
            tenant,
            code,
            config: CodeConfig {
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
        let members = body
            .take("members")
            .ok_or_else(|| body.invalid("members", "is required (an empty list empties it)"))?;
        let members = staff_list(&body.path("members"), members, 0, MAX_DEPARTMENT_MEMBERS)?;
        body.finish()?;
        Ok(Self {
            tenant,
            department,
            members: members.into_iter().collect(),
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
            // WeCom's department ids are numbers; both spellings are accepted.
            let raw = match item {
                Value::String(s) => s,
                Value::Number(n) if n.is_u64() => n.to_string(),
                _ => return Err(AdminError::invalid(&at, "must be a department id")),
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

    fn optional_string(&mut self, field: &str) -> Result<Option<String>, AdminError> {
        match self.take(field) {
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(self.invalid(field, "must be a string")),
            None => Ok(None),
        }
    }

    fn string(&mut self, field: &str) -> Result<String, AdminError> {
        self.optional_string(field)?
            .ok_or_else(|| self.invalid(field, "is required"))
    }

    fn optional_boolean(&mut self, field: &str) -> Result<Option<bool>, AdminError> {
        match self.take(field) {
            Some(Value::Bool(b)) => Ok(Some(b)),
            Some(_) => Err(self.invalid(field, "must be true or false")),
            None => Ok(None),
        }
    }

    fn boolean(&mut self, field: &str) -> Result<bool, AdminError> {
        self.optional_boolean(field)?
            .ok_or_else(|| self.invalid(field, "is required"))
    }

    /// A limit: a whole number from 1, or absent/`null` for "off". Zero is refused because it
    /// would exclude everyone, every day, which is what turning the code off is for.
    fn optional_limit(&mut self, field: &str) -> Result<Option<u32>, AdminError> {
        self.limit_up_to(field, u32::MAX)
    }

    /// A limit (as `optional_limit`) of at most `max`.
    fn limit_up_to(&mut self, field: &str, max: u32) -> Result<Option<u32>, AdminError> {
        match self.take(field) {
            None => Ok(None),
            Some(value) => value
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .filter(|&n| (1..=max).contains(&n))
                .map(Some)
                .ok_or_else(|| {
                    self.invalid(
                        field,
                        format!("must be a whole number from 1 to {max}, or null for no limit"),
                    )
                }),
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
