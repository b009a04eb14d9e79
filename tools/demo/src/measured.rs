//! What the run measured, as the demo hands it to the report: its own records of what it did
//! (flips, resignations, the shift edge) and what it read back from the sandbox and the table.

use crate::item::{n, numbers, s, strings, Item};
use crate::plan::Plan;
use crate::quota::{Crossing, LimitClaim, Notification};
use crate::rollover::Rollover;
use crate::sandbox::{Call, Campaign, Scan, Stats};
use domain::tenants::Timezone;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// An admin flip of a staff member to offline, as the demo saw it.
#[derive(Debug, Clone)]
pub struct Flip {
    pub staff: String,
    /// Just before the request left: the fact is written after this.
    pub sent_ms: u64,
    /// When the admin API's answer arrived.
    pub acked_ms: u64,
    pub codes_refreshed: Option<u64>,
}

/// A resignation (WeCom's `delete_user` callback), as the demo saw it.
#[derive(Debug, Clone)]
pub struct Resignation {
    pub staff: String,
    /// WeCom's (the sandbox's) time when the callback was sent.
    pub sent_ms: u64,
    /// A copy of the callback was answered 200.
    pub delivered: bool,
    /// When the demo first saw no contact way listing them (polled every second).
    pub off_lists_ms: Option<u64>,
    /// What WeCom's directory removal answered: the contact ways still listing them.
    pub still_listed_on: Option<Vec<String>>,
}

/// The work-schedule edge of the run.
#[derive(Debug, Clone)]
pub struct Shifts {
    pub edge_ms: u64,
    /// Staff whose shift ended at the edge, and staff whose shift started then.
    pub ends: Vec<String>,
    pub starts: Vec<String>,
    /// Whether the tick walked the edge (every scheduled staff member's due item moved past
    /// it); `None` when nobody has a schedule.
    pub walked: Option<bool>,
}

/// One completed push, from the refresh function's push log.
#[derive(Debug, Clone)]
pub struct Push {
    pub pushed_at_ms: u64,
    pub users: Vec<String>,
    pub fact_at_ms: Vec<u64>,
}

impl Push {
    pub fn from_item(item: &Item) -> Option<(String, Push)> {
        let sk = s(item, "sk")?.strip_prefix("PUSHLOG#")?;
        let mut parts = sk.rsplitn(3, '#');
        let (_nonce, _at, code) = (parts.next()?, parts.next()?, parts.next()?);
        Some((
            code.to_owned(),
            Push {
                pushed_at_ms: n(item, "pushed_at_ms")?,
                users: strings(item, "users"),
                fact_at_ms: numbers(item, "fact_at_ms"),
            },
        ))
    }
}

/// An add claim (the facts function's record of one counted add).
#[derive(Debug, Clone)]
pub struct Claim {
    pub code: String,
    pub staff: String,
    pub day: String,
    pub counted_at_ms: u64,
}

impl Claim {
    pub fn from_item(item: &Item) -> Option<Claim> {
        Some(Claim {
            code: s(item, "code")?.to_owned(),
            staff: s(item, "staff")?.to_owned(),
            day: s(item, "day")?.to_owned(),
            counted_at_ms: n(item, "counted_at_ms")?,
        })
    }
}

/// A code's final state: what the recompute of final facts says and what WeCom (the sandbox)
/// holds.
#[derive(Debug, Clone)]
pub struct FinalCode {
    pub code: String,
    /// `None` when the code is starved and was never pushed.
    pub expected: Option<Vec<String>>,
    pub starved: bool,
    pub fallback: bool,
    pub sandbox: Option<Vec<String>>,
}

/// The refresh function's per-tenant-day counters, summed over the days present.
#[derive(Debug, Clone, Default)]
pub struct RefreshStats {
    pub days: usize,
    pub reasons: u64,
    pub recomputes: u64,
    pub pushes: u64,
    pub unchanged: u64,
    pub starved: u64,
    pub failed: u64,
}

impl RefreshStats {
    pub fn from_items(items: &[Item]) -> RefreshStats {
        let mut stats = RefreshStats {
            days: items.len(),
            ..RefreshStats::default()
        };
        for item in items {
            let get = |name| n(item, name).unwrap_or(0);
            stats.reasons += get("reasons");
            stats.recomputes += get("recomputes");
            stats.pushes += get("pushes");
            stats.unchanged += get("unchanged");
            stats.starved += get("starved");
            stats.failed += get("failed");
        }
        stats
    }
}

pub struct Inputs<'a> {
    pub plan: &'a Plan,
    pub tenant: &'a str,
    pub seed: u64,
    pub timezone: Timezone,
    pub company_daily_cap: Option<u32>,
    pub scans_planned: u64,
    pub per_second: f64,
    /// code id -> WeCom config id.
    pub config_ids: &'a BTreeMap<String, String>,
    pub flips: &'a [Flip],
    pub resignations: &'a [Resignation],
    pub shifts: Shifts,
    pub stats: Stats,
    pub campaign: Campaign,
    pub scans: Vec<Scan>,
    pub update_calls: Vec<Call>,
    /// The lists the contact ways were created with (from the sandbox's add_contact_way log),
    /// by state (code id).
    pub created_lists: HashMap<String, Vec<String>>,
    pub adds_counted: u64,
    pub claims: Vec<Claim>,
    /// The crossings the delivered adds must have caused (the demo's own computation).
    pub expected_crossings: BTreeSet<Crossing>,
    /// The quota loop's claims in the table.
    pub limit_claims: Vec<LimitClaim>,
    /// This tenant's notifications from the stack's queue; `None` when it has none.
    pub notifications: Option<Vec<Notification>>,
    pub refresh: Option<RefreshStats>,
    pub pushes: Vec<(String, Push)>,
    pub final_codes: Vec<FinalCode>,
    pub dead_letters: Vec<(String, u64)>,
    pub drained: Drain,
    pub rollover: Rollover,
    /// The alarm changes and robot messages of the run, or why they could not be read.
    pub operator: Result<crate::operator::Seen, String>,
    pub run_secs: f64,
}

#[derive(Debug, Clone)]
pub struct Drain {
    pub drained: bool,
    pub secs: f64,
    pub inbox: u64,
    pub refresh: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_dynamodb::types::AttributeValue;

    #[test]
    fn push_log_keys_name_their_code() {
        let item: Item = HashMap::from([
            (
                "sk".to_owned(),
                AttributeValue::S("PUSHLOG#code-07#0001700000000123#004211".into()),
            ),
            (
                "pushed_at_ms".to_owned(),
                AttributeValue::N("1700000000123".into()),
            ),
            (
                "users".to_owned(),
                AttributeValue::L(vec![AttributeValue::S("staff01".into())]),
            ),
            (
                "fact_at_ms".to_owned(),
                AttributeValue::L(vec![AttributeValue::N("1700000000100".into())]),
            ),
        ]);
        let (code, push) = Push::from_item(&item).expect("a push log item");
        assert_eq!(code, "code-07");
        assert_eq!(push.users, ["staff01"]);
        assert_eq!(push.fact_at_ms, [1_700_000_000_100]);
    }
}
