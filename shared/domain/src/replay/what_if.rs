//! The dry run's in-memory recompute: a code's current facts plus the run's would-be facts.

use crate::codes::CodeSnapshot;
use crate::ids::{CodeId, StaffId};
use crate::membership::{limits_reached, recompute, AddCounts, Employment, Facts, TenantRules};
use std::collections::HashMap;

/// Adds the run would count for one staff member, as the code's counters see them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StaffDelta {
    /// Through the code, on the tenant's current day.
    pub on_code: u32,
    /// Through every code, on the tenant's current day.
    pub all_codes: u32,
    /// Through the code, any day.
    pub on_code_total: u32,
}

/// A run's would-be facts for one code's candidates.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WouldBe {
    pub adds: HashMap<StaffId, StaffDelta>,
    pub employment: HashMap<StaffId, Employment>,
}

/// What a run's would-be facts do to one code.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CodeChange {
    pub code: String,
    /// The list WeCom holds by our record.
    pub wecom_list: Vec<String>,
    /// The list the recompute over current plus would-be facts gives; `None`: starved.
    pub would_push: Option<Vec<String>>,
    /// The single writer would push: `would_push` differs from `wecom_list`.
    pub would_change: bool,
    /// The replay's facts make the difference (the current facts alone recompute to
    /// another list than the would-be ones).
    pub because_of_replay: bool,
    /// Limits the would-be adds would cross that the current counts have not: `staff:limit`.
    pub crossings: Vec<String>,
}

/// Recomputes `snapshot`'s code over its facts plus `would`.
pub fn what_if(code: &CodeId, snapshot: &CodeSnapshot, would: &WouldBe) -> CodeChange {
    let current = snapshot.facts();
    let before = recompute(&current);
    let mut adds = snapshot.adds.clone();
    let rules = TenantRules {
        company_daily_cap: snapshot.profile.company_daily_cap,
    };
    let mut crossings = Vec::new();
    for (staff, delta) in &would.adds {
        let counts = adds.entry(staff.clone()).or_default();
        let old = *counts;
        *counts = AddCounts {
            on_code: old.on_code + delta.on_code,
            all_codes: old.all_codes + delta.all_codes,
            on_code_total: old.on_code_total + delta.on_code_total,
        };
        let was = limits_reached(&snapshot.code.config.switches, rules, old);
        for limit in limits_reached(&snapshot.code.config.switches, rules, *counts) {
            if !was.contains(&limit) {
                crossings.push(format!("{staff}:{}", limit.name()));
            }
        }
    }
    crossings.sort();
    let mut staff = snapshot.staff.clone();
    for (id, employment) in &would.employment {
        if let Some(facts) = staff.get_mut(id) {
            facts.employment = *employment;
        }
    }
    let after = recompute(&Facts {
        adds: &adds,
        staff: &staff,
        ..current
    });
    let names = |users: &[StaffId]| users.iter().map(ToString::to_string).collect::<Vec<_>>();
    let wecom_list = names(snapshot.wecom_list());
    let would_push = after.users().map(names);
    CodeChange {
        code: code.to_string(),
        would_change: would_push
            .as_ref()
            .is_some_and(|users| *users != wecom_list),
        wecom_list,
        would_push,
        because_of_replay: before != after,
        crossings,
    }
}
