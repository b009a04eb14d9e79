//! MISSION's "Membership rules": the list a code should route to, as a pure function of the
//! code's configuration, staff facts, counters and tenant rules. No I/O and no clock: the
//! caller loads the facts for the tenant's current day and passes them in, so the same facts
//! always give the same list, whatever order they arrived in.

mod staff;

pub use staff::{CodeId, InvalidCodeId, InvalidStaffId, StaffId};

use std::collections::HashMap;

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

/// The per-code switches. A limit of `None` is the switch turned off.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Switches {
    /// Exclude staff who are offline.
    #[serde(default)]
    pub offline_check: bool,
    /// Exclude staff whose adds through this code today reached this number.
    #[serde(default)]
    pub daily_limit: Option<u32>,
}

/// A code's configuration as the tenant admin set it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CodeConfig {
    pub family: Family,
    /// In rotation order.
    pub members: Vec<StaffId>,
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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StaffFacts {
    pub online: bool,
    pub employment: Employment,
    /// WeCom rejected this user for contact ways (60111, 41054, ...).
    pub rejected_by_wecom: bool,
}

impl StaffFacts {
    pub const ACTIVE_ONLINE: Self = Self {
        online: true,
        employment: Employment::Active,
        rejected_by_wecom: false,
    };
}

/// Adds counted for one staff member on the tenant's current day.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DailyCounts {
    /// Through this code.
    pub on_code: u32,
    /// Through every code of the tenant (for the company-wide cap).
    pub all_codes: u32,
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
    pub today: &'a HashMap<StaffId, DailyCounts>,
    pub tenant: TenantRules,
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

/// Every member in order, with the reason it is excluded (or `None` when eligible).
pub fn assess(facts: &Facts<'_>) -> Vec<(StaffId, Option<Exclusion>)> {
    let mut seen = std::collections::HashSet::new();
    let mut eligible = 0usize;
    facts
        .code
        .members
        .iter()
        .filter(|member| seen.insert(*member))
        .map(|member| {
            let staff = facts.staff.get(member);
            let today = facts.today.get(member).copied().unwrap_or_default();
            let switches = &facts.code.switches;
            let exclusion = never_eligible(staff)
                .or_else(|| {
                    (switches.offline_check && !staff.is_some_and(|s| s.online))
                        .then_some(Exclusion::Offline)
                })
                .or_else(|| {
                    switches
                        .daily_limit
                        .filter(|&limit| today.on_code >= limit)
                        .map(|_| Exclusion::DailyLimitReached)
                })
                .or_else(|| {
                    facts
                        .tenant
                        .company_daily_cap
                        .filter(|&cap| today.all_codes >= cap)
                        .map(|_| Exclusion::CompanyCapReached)
                })
                .or_else(|| (eligible >= MAX_USERS_PER_CODE).then_some(Exclusion::OverWeComCap));
            if exclusion.is_none() {
                eligible += 1;
            }
            (member.clone(), exclusion)
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
    let mut seen = std::collections::HashSet::new();
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

#[cfg(test)]
mod tests;
