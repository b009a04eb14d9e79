//! The quota loop seen from outside: the limit crossings the delivered adds must have caused
//! (computed here from the sandbox's scan log and the demo's own plan, not from the stack),
//! the claims the stack wrote (`REMOVED#...`) and the `StaffQuotaReached` notifications that
//! reached the stack's notification queue.

use crate::item::{n, s, Item};
use crate::plan::Plan;
use crate::sandbox::Scan;
use crate::world::World;
use anyhow::{Context, Result};
use domain::tenants::{tenant_day, Timezone};
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::time::Duration;

pub const CODE_TOTAL: &str = "code_total";
pub const CODE_DAILY: &str = "code_daily";
pub const COMPANY_DAILY: &str = "company_daily";

/// "`staff` reached `limit` on tenant-day `day`" (on `code` for a code's limits).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Crossing {
    pub limit: String,
    pub staff: String,
    pub day: String,
    pub code: Option<String>,
}

impl std::fmt::Display for Crossing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} {}", self.day, self.limit, self.staff)?;
        if let Some(code) = &self.code {
            write!(f, " on {code}")?;
        }
        Ok(())
    }
}

/// One add WeCom delivered (a routed scan whose callback was answered 200), once per
/// external contact and code however many copies were delivered.
#[derive(Debug, Clone)]
pub struct Add {
    pub code: String,
    pub staff: String,
    pub at_ms: u64,
}

/// The distinct adds delivered, from the sandbox's scan log.
pub fn delivered_adds(scans: &[Scan]) -> Vec<Add> {
    let mut seen = HashSet::new();
    let mut adds: Vec<Add> = scans
        .iter()
        .filter(|scan| scan.delivery.as_ref().is_some_and(|d| d.delivered))
        .filter_map(|scan| {
            let external = scan.external_userid.as_deref()?;
            let staff = scan.userid.as_deref()?;
            seen.insert((scan.state.clone(), external.to_owned()))
                .then(|| Add {
                    code: scan.state.clone(),
                    staff: staff.to_owned(),
                    at_ms: scan.at_ms,
                })
        })
        .collect();
    adds.sort_by_key(|a| a.at_ms);
    adds
}

/// The crossings these adds cause under the plan's limits and the tenant's cap: a code's
/// daily limit per (code, staff, tenant-day), its add limit per (code, staff), the company
/// cap per (staff, tenant-day); each once, whoever the staff member is on the code (the
/// counters count fallback staff too).
pub fn expected_crossings(
    adds: &[Add],
    plan: &Plan,
    cap: Option<u32>,
    timezone: Timezone,
) -> BTreeSet<Crossing> {
    let mut daily: BTreeMap<(&str, &str, String), u32> = BTreeMap::new();
    let mut total: BTreeMap<(&str, &str), u32> = BTreeMap::new();
    let mut company: BTreeMap<(&str, String), u32> = BTreeMap::new();
    let mut crossings = BTreeSet::new();
    // In delivery order: the add limit is reached on the day of the add that reached it.
    for add in adds {
        let day = tenant_day(add.at_ms / 1000 * 1000, timezone);
        let Some(code) = plan.code(&add.code) else {
            continue;
        };
        let on_code = daily
            .entry((&add.code, &add.staff, day.clone()))
            .or_default();
        *on_code += 1;
        if code.daily_limit == Some(*on_code) {
            crossings.insert(Crossing {
                limit: CODE_DAILY.into(),
                staff: add.staff.clone(),
                day: day.clone(),
                code: Some(add.code.clone()),
            });
        }
        let ever = total.entry((&add.code, &add.staff)).or_default();
        *ever += 1;
        if code.add_limit == Some(*ever) {
            crossings.insert(Crossing {
                limit: CODE_TOTAL.into(),
                staff: add.staff.clone(),
                day: day.clone(),
                code: Some(add.code.clone()),
            });
        }
        let all = company.entry((&add.staff, day.clone())).or_default();
        *all += 1;
        if cap == Some(*all) {
            crossings.insert(Crossing {
                limit: COMPANY_DAILY.into(),
                staff: add.staff.clone(),
                day,
                code: None,
            });
        }
    }
    crossings
}

/// A `StaffQuotaReached` as it arrived on the notification queue (its `detail`).
#[derive(Debug, Clone, Deserialize)]
pub struct Notification {
    pub id: String,
    pub tenant: String,
    pub staff: String,
    pub limit: String,
    pub day: String,
    pub code: Option<String>,
    pub codes: u64,
}

impl Notification {
    pub fn crossing(&self) -> Crossing {
        Crossing {
            limit: self.limit.clone(),
            staff: self.staff.clone(),
            day: self.day.clone(),
            code: self.code.clone(),
        }
    }

    /// The `detail` of an EventBridge envelope.
    pub fn from_envelope(body: &str) -> Option<Notification> {
        let envelope: serde_json::Value = serde_json::from_str(body).ok()?;
        serde_json::from_value(envelope.get("detail")?.clone()).ok()
    }
}

/// A "removed for a limit" claim of the quota loop (`REMOVED#<day>#<limit>#<staff>[#<code>]`).
#[derive(Debug, Clone)]
pub struct LimitClaim {
    pub crossing: Crossing,
    pub claimed_at_ms: u64,
    pub notified: bool,
    /// Codes it sent refresh reasons to (set with `notified`).
    pub codes: Option<u64>,
}

impl LimitClaim {
    pub fn from_item(item: &Item) -> Option<LimitClaim> {
        Some(LimitClaim {
            crossing: Crossing {
                limit: s(item, "limit")?.to_owned(),
                staff: s(item, "staff")?.to_owned(),
                day: s(item, "day")?.to_owned(),
                code: s(item, "code").map(str::to_owned),
            },
            claimed_at_ms: n(item, "claimed_at_ms")?,
            notified: item
                .get("notified")
                .and_then(|v| v.as_bool().ok())
                .copied()
                .unwrap_or(false),
            codes: n(item, "codes"),
        })
    }
}

/// Every notification of `tenant` on the queue. Messages are read until the queue has given
/// nothing new for `settle`; this tenant's are deleted (consumed), others become visible again.
pub async fn receive_notifications(
    world: &World,
    url: &str,
    tenant: &str,
    settle: Duration,
) -> Result<Vec<Notification>> {
    let mut seen = HashSet::new();
    let mut mine = Vec::new();
    let mut quiet_since = std::time::Instant::now();
    while quiet_since.elapsed() < settle {
        let received = world
            .sqs
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(10)
            .visibility_timeout(120)
            .wait_time_seconds(1)
            .send()
            .await
            .with_context(|| format!("ReceiveMessage {url}"))?;
        for message in received.messages() {
            let id = message.message_id().unwrap_or_default().to_owned();
            if !seen.insert(id) {
                continue;
            }
            quiet_since = std::time::Instant::now();
            let parsed = Notification::from_envelope(message.body().unwrap_or_default());
            match parsed {
                Some(notification) if notification.tenant == tenant => {
                    mine.push(notification);
                    if let Some(handle) = message.receipt_handle() {
                        world
                            .sqs
                            .delete_message()
                            .queue_url(url)
                            .receipt_handle(handle)
                            .send()
                            .await?;
                    }
                }
                _ => {
                    if let Some(handle) = message.receipt_handle() {
                        world
                            .sqs
                            .change_message_visibility()
                            .queue_url(url)
                            .receipt_handle(handle)
                            .visibility_timeout(0)
                            .send()
                            .await?;
                    }
                }
            }
        }
    }
    Ok(mine)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::CodePlan;
    use crate::sandbox::Delivery;

    fn code(id: &str, daily: Option<u32>, add_limit: Option<u32>) -> CodePlan {
        CodePlan {
            id: id.into(),
            members: vec!["a".into(), "b".into()],
            fallback: Vec::new(),
            daily_limit: daily,
            add_limit,
            weight: 1,
        }
    }

    fn plan() -> Plan {
        Plan {
            staff: vec!["a".into(), "b".into()],
            codes: vec![code("c1", Some(2), None), code("c2", None, Some(3))],
            offline: Vec::new(),
            resign: Vec::new(),
            shift_ends: Vec::new(),
            shift_starts: Vec::new(),
            hubs: Vec::new(),
            steady: Vec::new(),
        }
    }

    const DAY_MS: u64 = 86_400_000;

    fn add(code: &str, staff: &str, at_ms: u64) -> Add {
        Add {
            code: code.into(),
            staff: staff.into(),
            at_ms,
        }
    }

    #[test]
    fn each_limit_is_crossed_once_per_scope_and_day() {
        let utc: Timezone = "UTC".parse().expect("zone");
        let adds = [
            add("c1", "a", 1),
            add("c1", "a", 2), // a reaches c1's daily limit on day 0
            add("c1", "a", 3), // beyond it: no second crossing
            add("c2", "a", 4), // a's 4th add of the day: the cap (4)
            add("c2", "a", 5),
            add("c2", "a", DAY_MS + 1), // a's 3rd on c2 ever: the add limit, on day 1
            add("c1", "a", DAY_MS + 2),
            add("c1", "a", DAY_MS + 3), // c1's daily limit again, on day 1
            add("c1", "b", 6),          // b: once on c1, under every limit
        ];
        let crossings = expected_crossings(&adds, &plan(), Some(4), utc);
        let got: Vec<String> = crossings.iter().map(ToString::to_string).collect();
        assert_eq!(
            got,
            [
                "1970-01-01 code_daily a on c1",
                "1970-01-02 code_daily a on c1",
                "1970-01-02 code_total a on c2",
                "1970-01-01 company_daily a",
            ]
        );
    }

    #[test]
    fn duplicated_and_undelivered_scans_are_not_adds() {
        let scan = |seq, external: &str, delivered| Scan {
            seq,
            at_ms: seq,
            config_id: "cfg".into(),
            state: "c1".into(),
            userid: Some("a".into()),
            external_userid: Some(external.into()),
            delivery: Some(Delivery { delivered }),
        };
        let adds = delivered_adds(&[
            scan(1, "wm1", true),
            scan(2, "wm1", true),
            scan(3, "wm2", false),
            scan(4, "wm3", true),
        ]);
        assert_eq!(adds.iter().map(|a| a.at_ms).collect::<Vec<_>>(), [1, 4]);
    }

    #[test]
    fn notifications_are_read_from_the_eventbridge_envelope() {
        let body = r#"{"version":"0","id":"e1","detail-type":"StaffQuotaReached","source":"qrsync",
            "detail":{"id":"limit:t:2026-01-01:company_daily:a:ALL","tenant":"t","staff":"a",
            "limit":"company_daily","day":"2026-01-01","code":null,"codes":7,"reached_at_ms":5}}"#;
        let n = Notification::from_envelope(body).expect("a notification");
        assert_eq!(n.codes, 7);
        assert_eq!(
            n.crossing().to_string(),
            "2026-01-01 company_daily a",
            "{n:?}"
        );
    }
}
