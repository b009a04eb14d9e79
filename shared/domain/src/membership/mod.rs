//! docs/rules.md "Membership rules (the recompute)": the list a code should route to, as a pure function of the
//! code's configuration, staff facts, counters and tenant rules. No I/O and no clock: the
//! caller loads the facts for the tenant's current day and passes them in, so the same facts
//! always give the same list, whatever order they arrived in.

mod fold;
mod schedule;

pub use fold::{Fact, LoadedFacts, TenantFacts};
pub use schedule::{InvalidSchedule, Shift, WeeklySchedule};

use crate::ids::{DepartmentId, StaffId};
use chrono::DateTime;
use chrono_tz::Tz;
use std::collections::{BTreeSet, HashMap, HashSet};

/// WeCom's cap on users per contact way (departments expanded); more is refused with 41041.
pub const MAX_USERS_PER_CODE: usize = 100;

/// How WeCom or our landing page picks among the listed users.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Family {
    /// WeCom picks at random among the listed users.
    Native,
    /// Our landing page picks in rotation order.
    Sequenced,
    /// Our landing page picks in rotation order and by volume.
    Quota,
}

impl Family {
    /// Our landing page rotates through the members (and needs a rotation written with the list).
    pub fn rotates(self) -> bool {
        matches!(self, Self::Sequenced | Self::Quota)
    }
}

/// The per-code switches. A limit of `None` is the switch turned off.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Switches {
    /// Exclude staff who are offline (admin flag) or outside their work schedule.
    #[serde(default)]
    pub offline_check: bool,
    /// Exclude staff whose adds through this code, in total, reached this number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub add_limit: Option<u32>,
    /// Exclude staff whose adds through this code today reached this number.
    #[serde(default)]
    pub daily_limit: Option<u32>,
    /// Sequenced and quota codes: customers one member takes per rotation round (the round is
    /// handed out in a shuffled order, `crate::landing`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub round_limit: Option<u32>,
}

/// A code's configuration as the tenant admin set it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CodeConfig {
    pub family: Family,
    /// In rotation order.
    pub members: Vec<StaffId>,
    /// Expanded after the members, each in the listed order, its members by user id.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub departments: Vec<DepartmentId>,
    /// Pushed when no member is eligible.
    #[serde(default)]
    pub fallback: Vec<StaffId>,
    #[serde(default)]
    pub switches: Switches,
}

/// Whether WeCom still knows the staff member as someone a code may list.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Employment {
    #[default]
    Active,
    Resigned,
    Disabled,
}

/// What is known about one staff member now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaffFacts {
    /// The admin's online flag.
    pub online: bool,
    pub employment: Employment,
    /// WeCom rejected this user for contact ways (60111, 41054, ...).
    pub rejected_by_wecom: bool,
    /// Weekly shifts in the tenant's timezone; `None` is "no schedule: always on shift".
    pub schedule: Option<WeeklySchedule>,
}

impl StaffFacts {
    pub const ACTIVE_ONLINE: Self = Self {
        online: true,
        employment: Employment::Active,
        rejected_by_wecom: false,
        schedule: None,
    };

    /// Online by the admin flag and, with a schedule, inside a shift at `now`.
    pub fn available(&self, now: DateTime<Tz>) -> bool {
        self.online && self.schedule.as_ref().is_none_or(|s| s.on_shift(now))
    }
}

/// Adds counted for one staff member.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AddCounts {
    /// Through this code, on the tenant's current day.
    pub on_code: u32,
    /// Through every code of the tenant, on the tenant's current day (the company-wide cap).
    pub all_codes: u32,
    /// Through this code, ever (the add limit).
    pub on_code_total: u32,
}

/// Tenant-wide rules.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TenantRules {
    /// Adds per staff member per tenant-day across all codes; `None` is off.
    pub company_daily_cap: Option<u32>,
}

/// Why a member is not on the list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Exclusion {
    UnknownStaff,
    Resigned,
    Disabled,
    RejectedByWeCom,
    Offline,
    OutsideShift,
    AddLimitReached,
    DailyLimitReached,
    CompanyCapReached,
    OverWeComCap,
}

/// The outcome of a recompute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Membership {
    /// Eligible members, in member order, at most `MAX_USERS_PER_CODE`.
    Members(Vec<StaffId>),
    /// Nobody was eligible; the usable fallback staff.
    Fallback(Vec<StaffId>),
    /// Nobody eligible and no usable fallback: push nothing (WeCom would keep routing to the
    /// old list, which beats an empty code) and raise an alert.
    Starved,
}

impl Membership {
    /// The users to push, or `None` when starved.
    pub fn users(&self) -> Option<&[StaffId]> {
        match self {
            Self::Members(users) | Self::Fallback(users) => Some(users),
            Self::Starved => None,
        }
    }
}

/// Everything the recompute reads.
pub struct Facts<'a> {
    pub code: &'a CodeConfig,
    pub staff: &'a HashMap<StaffId, StaffFacts>,
    pub adds: &'a HashMap<StaffId, AddCounts>,
    /// Stored membership of the departments the code lists.
    pub departments: &'a HashMap<DepartmentId, BTreeSet<StaffId>>,
    pub tenant: TenantRules,
    /// Now, in the tenant's timezone (work schedules are read in it).
    pub now: DateTime<Tz>,
}

/// At most this many candidates a code takes from its departments (after its own members).
///
/// WeCom's contact way takes at most `MAX_USERS_PER_CODE` users, departments expanded
/// (41041), so a code never needs a department's 2,000th member: five times the cap still
/// fills the list when four in five are offline or over a limit. The bound is what keeps a
/// code's snapshot inside its lease: without it a code listing 50 departments of 2,000 would
/// read 100,000 staff, 4 items each (4,000 `BatchGetItem`s); with it a snapshot reads at most
/// 500 members + 500 from departments + 100 fallback = 1,100 staff, 44 `BatchGetItem`s of
/// 100 keys, and the departments' items until the bound is reached.
pub const MAX_DEPARTMENT_CANDIDATES: usize = 500;

/// The code's candidates in order: its members, then each listed department's members (by
/// user id), each person once, at most `MAX_DEPARTMENT_CANDIDATES` of them from departments.
pub fn candidates(
    code: &CodeConfig,
    departments: &HashMap<DepartmentId, BTreeSet<StaffId>>,
) -> Vec<StaffId> {
    let mut seen = HashSet::new();
    let mut candidates: Vec<StaffId> = code
        .members
        .iter()
        .filter(|staff| seen.insert(*staff))
        .cloned()
        .collect();
    candidates.extend(
        code.departments
            .iter()
            .filter_map(|department| departments.get(department))
            .flatten()
            .filter(|staff| seen.insert(*staff))
            .take(MAX_DEPARTMENT_CANDIDATES)
            .cloned(),
    );
    candidates
}

fn never_eligible(facts: Option<&StaffFacts>) -> Option<Exclusion> {
    match facts {
        None => Some(Exclusion::UnknownStaff),
        Some(f) if f.employment == Employment::Resigned => Some(Exclusion::Resigned),
        Some(f) if f.employment == Employment::Disabled => Some(Exclusion::Disabled),
        Some(f) if f.rejected_by_wecom => Some(Exclusion::RejectedByWeCom),
        Some(_) => None,
    }
}

/// Why `staff` may not take customers of a code with `switches` now, ignoring WeCom's cap.
fn exclusion(facts: &Facts<'_>, staff: &StaffId) -> Option<Exclusion> {
    let person = facts.staff.get(staff);
    let adds = facts.adds.get(staff).copied().unwrap_or_default();
    let switches = &facts.code.switches;
    never_eligible(person)
        .or_else(|| {
            let person = person?;
            if !switches.offline_check {
                None
            } else if !person.online {
                Some(Exclusion::Offline)
            } else if !person.available(facts.now) {
                Some(Exclusion::OutsideShift)
            } else {
                None
            }
        })
        .or_else(|| {
            limits_reached(switches, facts.tenant, adds)
                .first()
                .map(|limit| limit.exclusion())
        })
}

/// Every candidate in order, with the reason it is excluded (or `None` when eligible).
pub fn assess(facts: &Facts<'_>) -> Vec<(StaffId, Option<Exclusion>)> {
    let mut eligible = 0usize;
    candidates(facts.code, facts.departments)
        .into_iter()
        .map(|member| {
            let exclusion = exclusion(facts, &member)
                .or_else(|| (eligible >= MAX_USERS_PER_CODE).then_some(Exclusion::OverWeComCap));
            if exclusion.is_none() {
                eligible += 1;
            }
            (member, exclusion)
        })
        .collect()
}

/// The list the code should route to now.
pub fn recompute(facts: &Facts<'_>) -> Membership {
    let members: Vec<StaffId> = assess(facts)
        .into_iter()
        .filter_map(|(member, exclusion)| exclusion.is_none().then_some(member))
        .collect();
    if !members.is_empty() {
        return Membership::Members(members);
    }
    let mut seen = HashSet::new();
    let fallback: Vec<StaffId> = facts
        .code
        .fallback
        .iter()
        .filter(|staff| never_eligible(facts.staff.get(*staff)).is_none() && seen.insert(*staff))
        .take(MAX_USERS_PER_CODE)
        .cloned()
        .collect();
    if fallback.is_empty() {
        Membership::Starved
    } else {
        Membership::Fallback(fallback)
    }
}

/// One member's turn in a sequenced or quota code's rotation round.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RotationSlot {
    pub staff: StaffId,
    /// Customers this member takes per round (in the round's shuffled order, `crate::landing`).
    pub takes: u32,
    /// The member's customer-acquisition link (`crate::landing`), written by the single writer
    /// so a visit needs no second read; `None` until one is created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<String>,
}

/// The rotation our landing page draws from, written by the same recompute as the WeCom list:
/// the pushed users in order, each taking `round_limit` customers per round (1 without the
/// switch); a quota code never gives a member more in a round than is left of their daily
/// limit on the code. `None` for native codes, which WeCom routes itself.
pub fn rotation(facts: &Facts<'_>, membership: &Membership) -> Option<Vec<RotationSlot>> {
    if !facts.code.family.rotates() {
        return None;
    }
    let switches = &facts.code.switches;
    let per_round = switches.round_limit.unwrap_or(1).max(1);
    let slots = membership
        .users()
        .unwrap_or_default()
        .iter()
        .map(|staff| {
            let left_today = switches
                .daily_limit
                .filter(|_| facts.code.family == Family::Quota)
                .map(|limit| {
                    let done = facts.adds.get(staff).map_or(0, |a| a.on_code);
                    limit.saturating_sub(done).max(1)
                });
            RotationSlot {
                staff: staff.clone(),
                takes: left_today.map_or(per_round, |left| per_round.min(left)),
                link: None,
            }
        })
        .collect();
    Some(slots)
}

/// A limit an add can take a staff member to; each is claimed once per tenant-day.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Limit {
    /// The code's add limit (adds through the code, ever).
    CodeTotal,
    /// The code's daily limit.
    CodeDaily,
    /// The tenant's company-wide daily cap (every code the staff member sits on).
    CompanyDaily,
}

impl Limit {
    pub fn name(self) -> &'static str {
        match self {
            Self::CodeTotal => "code_total",
            Self::CodeDaily => "code_daily",
            Self::CompanyDaily => "company_daily",
        }
    }

    /// Whether reaching it removes the staff member from every code they sit on.
    pub fn company_wide(self) -> bool {
        self == Self::CompanyDaily
    }

    /// Why a member who reached it is off the list.
    fn exclusion(self) -> Exclusion {
        match self {
            Self::CodeTotal => Exclusion::AddLimitReached,
            Self::CodeDaily => Exclusion::DailyLimitReached,
            Self::CompanyDaily => Exclusion::CompanyCapReached,
        }
    }
}

/// The limits the counts have reached on a code with `switches`, in the order a member's
/// exclusion names the first: the add limit, the daily limit, the company cap. After an add
/// they are the limits it crossed; in a recompute, why a member is off the list.
pub fn limits_reached(switches: &Switches, tenant: TenantRules, counts: AddCounts) -> Vec<Limit> {
    let reached = |limit: Option<u32>, count: u32| limit.is_some_and(|limit| count >= limit);
    let mut limits = Vec::new();
    if reached(switches.add_limit, counts.on_code_total) {
        limits.push(Limit::CodeTotal);
    }
    if reached(switches.daily_limit, counts.on_code) {
        limits.push(Limit::CodeDaily);
    }
    if reached(tenant.company_daily_cap, counts.all_codes) {
        limits.push(Limit::CompanyDaily);
    }
    limits
}

#[cfg(test)]
mod tests;
