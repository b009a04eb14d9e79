//! How items are keyed. Everything of a tenant lives under one partition key; sort keys
//! name the item kind first, so a kind can be read with `begins_with`.

use crate::membership::{CodeId, DepartmentId, Limit, StaffId};
use crate::tenants::TenantId;

pub const PK: &str = "pk";
pub const SK: &str = "sk";
/// TTL attribute: garbage collection of claims, daily counters and history, never correctness.
pub const EXPIRES_AT: &str = "expires_at";

pub fn tenant(tenant: &TenantId) -> String {
    format!("TENANT#{tenant}")
}

pub const PROFILE: &str = "PROFILE";

pub fn code(code: &CodeId) -> String {
    format!("CODE#{code}")
}

pub const CODE_PREFIX: &str = "CODE#";

/// The refresh function's record of what WeCom last accepted for a code.
pub fn pushed(code: &CodeId) -> String {
    format!("PUSHED#{code}")
}

/// One entry per completed push, in time order.
pub fn push_log(code: &CodeId, pushed_at_ms: u64, nonce: &str) -> String {
    format!("PUSHLOG#{code}#{pushed_at_ms:013}#{nonce}")
}

pub fn push_log_prefix(code: Option<&CodeId>) -> String {
    match code {
        Some(code) => format!("PUSHLOG#{code}#"),
        None => "PUSHLOG#".to_owned(),
    }
}

pub fn staff(staff: &StaffId) -> String {
    format!("STAFF#{staff}")
}

/// Staff member `staff` sits on `code` (as member or fallback): the staff -> codes index.
pub fn seat(staff: &StaffId, code: &CodeId) -> String {
    format!("SEAT#{staff}#{code}")
}

pub fn seats_of(staff: &StaffId) -> String {
    format!("SEAT#{staff}#")
}

pub fn adds_total(code: &CodeId, staff: &StaffId) -> String {
    format!("ADDS#TOTAL#{code}#{staff}")
}

pub fn adds_today_on_code(day: &str, code: &CodeId, staff: &StaffId) -> String {
    format!("ADDS#DAY#{day}#{code}#{staff}")
}

pub fn adds_today_all_codes(day: &str, staff: &StaffId) -> String {
    format!("ADDS#DAY#{day}#ALL#{staff}")
}

/// Stored membership of a WeCom department (a string set of user ids).
pub fn department(department: &DepartmentId) -> String {
    format!("DEPT#{department}")
}

/// Code `code` lists department `department`: the department -> codes index.
pub fn department_seat(department: &DepartmentId, code: &CodeId) -> String {
    format!("DSEAT#{department}#{code}")
}

pub fn department_seats_of(department: &DepartmentId) -> String {
    format!("DSEAT#{department}#")
}

/// The quota loop's claim: `staff` reached `limit` on the tenant-day `day` (on `code`, or on
/// every code for the company cap). Exactly one writer creates it; the day rollover reads a
/// day's claims to bring those staff back.
pub fn limit_reached(day: &str, limit: Limit, staff: &StaffId, code: Option<&CodeId>) -> String {
    match code {
        Some(code) => format!("REMOVED#{day}#{}#{staff}#{code}", limit.name()),
        None => format!("REMOVED#{day}#{}#{staff}", limit.name()),
    }
}

pub fn limits_reached_on(day: &str) -> String {
    format!("REMOVED#{day}#")
}

pub fn claim(business_key: &str) -> String {
    format!("CLAIM#{business_key}")
}

pub fn ignored(kind: &str) -> String {
    format!("IGNORED#{kind}")
}

/// The refresh function's counters for a tenant-day.
pub fn refresh_tally(day: &str) -> String {
    format!("STATS#REFRESH#{day}")
}
