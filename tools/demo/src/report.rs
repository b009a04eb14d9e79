//! What happened, measured from the outside: the sandbox's logs and counters, the table's
//! items (counters, claims, push log, refresh statistics) and the recompute of final facts.

use crate::plan::Plan;
use crate::sandbox::{Call, Campaign, Scan, Stats};
use aws_sdk_dynamodb::types::AttributeValue;
use shared::tenants::{tenant_day, Timezone};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fmt::Write as _;

pub type Item = HashMap<String, AttributeValue>;

pub fn n(item: &Item, name: &str) -> Option<u64> {
    item.get(name)?.as_n().ok()?.parse().ok()
}

pub fn s<'a>(item: &'a Item, name: &str) -> Option<&'a str> {
    item.get(name)?.as_s().ok().map(String::as_str)
}

fn numbers(item: &Item, name: &str) -> Vec<u64> {
    item.get(name)
        .and_then(|v| v.as_l().ok())
        .map(|l| {
            l.iter()
                .filter_map(|v| v.as_n().ok()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

fn strings(item: &Item, name: &str) -> Vec<String> {
    item.get(name)
        .and_then(|v| v.as_l().ok())
        .map(|l| l.iter().filter_map(|v| v.as_s().ok().cloned()).collect())
        .unwrap_or_default()
}

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
    pub scans_planned: u64,
    pub per_second: f64,
    /// code id -> WeCom config id.
    pub config_ids: &'a BTreeMap<String, String>,
    pub flips: &'a [Flip],
    pub stats: Stats,
    pub campaign: Campaign,
    pub scans: Vec<Scan>,
    pub update_calls: Vec<Call>,
    /// The lists the contact ways were created with (from the sandbox's add_contact_way log),
    /// by state (code id).
    pub created_lists: HashMap<String, Vec<String>>,
    pub adds_counted: u64,
    pub claims: Vec<Claim>,
    pub refresh: Option<RefreshStats>,
    pub pushes: Vec<(String, Push)>,
    pub final_codes: Vec<FinalCode>,
    pub dead_letters: Vec<(String, u64)>,
    pub drained: Drain,
    pub run_secs: f64,
}

#[derive(Debug, Clone)]
pub struct Drain {
    pub drained: bool,
    pub secs: f64,
    pub inbox: u64,
    pub refresh: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Why {
    Offline,
    DailyLimit,
}

/// A staff member becoming ineligible on a code.
#[derive(Debug, Clone)]
struct Change {
    code: String,
    staff: String,
    why: Why,
    at_ms: u64,
    /// For a daily limit: the tenant day it holds for.
    day: Option<String>,
}

/// Scans routed to staff after they became ineligible.
#[derive(Debug, Default)]
struct Routing {
    /// Scan seqs routed to them after the push that removed them completed.
    after_push: BTreeSet<u64>,
    /// Scan seqs routed to them between the change and that push.
    window: BTreeSet<u64>,
    /// Changes with no push removing the staff member (code, staff, why, scans after).
    never_removed: Vec<(String, String, Why, usize)>,
    details: Vec<String>,
    changes: usize,
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn ms(value: u64) -> String {
    if value >= 10_000 {
        format!("{:.1} s", value as f64 / 1000.0)
    } else {
        format!("{value} ms")
    }
}

fn changes(inputs: &Inputs<'_>) -> Vec<Change> {
    let mut changes = Vec::new();
    for flip in inputs.flips {
        for code in inputs
            .plan
            .codes
            .iter()
            .filter(|c| c.members.contains(&flip.staff))
        {
            changes.push(Change {
                code: code.id.clone(),
                staff: flip.staff.clone(),
                why: Why::Offline,
                at_ms: flip.sent_ms,
                day: None,
            });
        }
    }
    let mut counted: BTreeMap<(&str, &str, &str), Vec<u64>> = BTreeMap::new();
    for claim in &inputs.claims {
        counted
            .entry((&claim.code, &claim.staff, &claim.day))
            .or_default()
            .push(claim.counted_at_ms);
    }
    for ((code, staff, day), mut times) in counted {
        // The limit applies to members; fallback staff are routed to regardless of it.
        let Some(limit) = inputs
            .plan
            .code(code)
            .filter(|c| c.members.iter().any(|m| m == staff))
            .and_then(|c| c.daily_limit)
        else {
            continue;
        };
        times.sort_unstable();
        // The limit-th add by counted time: the counter cannot have reached the limit before
        // it, so this is a lower bound of the moment the staff member became ineligible.
        if let Some(&at_ms) = times.get(limit as usize - 1) {
            changes.push(Change {
                code: code.to_owned(),
                staff: staff.to_owned(),
                why: Why::DailyLimit,
                at_ms,
                day: Some(day.to_owned()),
            });
        }
    }
    changes
}

fn routing(inputs: &Inputs<'_>, changes: &[Change]) -> Routing {
    let mut pushes: HashMap<&str, Vec<&Push>> = HashMap::new();
    for (code, push) in &inputs.pushes {
        pushes.entry(code.as_str()).or_default().push(push);
    }
    for list in pushes.values_mut() {
        list.sort_by_key(|p| p.pushed_at_ms);
    }
    let timezone = Timezone::default();
    let mut routing = Routing {
        changes: changes.len(),
        ..Routing::default()
    };
    for change in changes {
        let Some(config_id) = inputs.config_ids.get(&change.code) else {
            continue;
        };
        let history = pushes
            .get(change.code.as_str())
            .map(Vec::as_slice)
            .unwrap_or_default();
        let removed_at = history
            .iter()
            .find(|p| p.pushed_at_ms >= change.at_ms && !p.users.contains(&change.staff))
            .map(|p| p.pushed_at_ms)
            .or_else(|| {
                // Already off the list when the change happened (e.g. offline after reaching
                // the limit): the list in force then is the last push, or the created one.
                let before = history
                    .iter()
                    .rev()
                    .find(|p| p.pushed_at_ms < change.at_ms)
                    .map(|p| &p.users)
                    .or_else(|| inputs.created_lists.get(&change.code));
                before
                    .is_some_and(|users| !users.contains(&change.staff))
                    .then_some(change.at_ms)
            });
        let theirs = inputs.scans.iter().filter(|scan| {
            &scan.config_id == config_id
                && scan.userid.as_deref() == Some(change.staff.as_str())
                && scan.at_ms >= change.at_ms
                && change
                    .day
                    .as_ref()
                    .is_none_or(|day| &tenant_day(scan.at_ms, timezone) == day)
        });
        match removed_at {
            Some(removed_at) => {
                for scan in theirs {
                    if scan.at_ms > removed_at {
                        routing.after_push.insert(scan.seq);
                        routing.details.push(format!(
                            "scan #{} on {} routed to {} at +{} ms after the push removing them ({:?})",
                            scan.seq,
                            change.code,
                            change.staff,
                            scan.at_ms - removed_at,
                            change.why
                        ));
                    } else {
                        routing.window.insert(scan.seq);
                    }
                }
            }
            None => {
                let after = theirs.count();
                routing.never_removed.push((
                    change.code.clone(),
                    change.staff.clone(),
                    change.why,
                    after,
                ));
            }
        }
    }
    routing
}

struct Lines {
    text: String,
    failed: Vec<String>,
}

const WIDTH: usize = 58;

impl Lines {
    fn head(&mut self, title: &str) {
        let _ = writeln!(self.text, "\n{title}");
    }

    fn line(&mut self, label: &str, value: impl std::fmt::Display) {
        let _ = writeln!(self.text, "  {label:<WIDTH$} {value}");
    }

    fn note(&mut self, text: &str) {
        let _ = writeln!(self.text, "      {text}");
    }

    fn must(&mut self, label: &str, value: impl std::fmt::Display, pass: bool) {
        let verdict = if pass { "PASS" } else { "FAIL" };
        let value = value.to_string();
        let _ = writeln!(self.text, "  {label:<WIDTH$} {value:<16} {verdict}");
        if !pass {
            self.failed.push(label.to_owned());
        }
    }
}

/// Prints the report; true when every must-be line passed.
pub fn print(inputs: &Inputs<'_>) -> bool {
    let plan = inputs.plan;
    let mut out = Lines {
        text: String::new(),
        failed: Vec::new(),
    };
    let limited = plan
        .codes
        .iter()
        .filter(|c| c.daily_limit.is_some())
        .count();
    let daily_limit = plan.codes.iter().find_map(|c| c.daily_limit).unwrap_or(0);
    let with_fallback = plan.codes.iter().filter(|c| !c.fallback.is_empty()).count();
    let seats = plan.seats();
    let _ = writeln!(
        out.text,
        "\nqrsync demo report: tenant {}, seed {}",
        inputs.tenant, inputs.seed
    );
    let _ = writeln!(
        out.text,
        "  {} staff (each on {} to {} codes), {} native codes ({} with daily limit {}, {} with fallback), offline check on every code",
        plan.staff.len(),
        seats.values().min().unwrap_or(&0),
        seats.values().max().unwrap_or(&0),
        plan.codes.len(),
        limited,
        daily_limit,
        with_fallback
    );
    let campaign_secs = inputs
        .campaign
        .finished_at_ms
        .map(|end| end.saturating_sub(inputs.campaign.started_at_ms) as f64 / 1000.0)
        .unwrap_or(0.0);
    let _ = writeln!(
        out.text,
        "  campaign: {} scans at {}/s, 10% duplicated, {:.1} s; queues drained {:.1} s after it; whole run {:.0} s",
        inputs.scans_planned, inputs.per_second, campaign_secs, inputs.drained.secs, inputs.run_secs
    );

    // ---------------------------------------------------------------- intake
    let stats = &inputs.stats;
    out.head("Intake (sandbox counters for this run, campaign status)");
    out.line(
        "scans",
        format!(
            "{} (campaign: {} done, {} unroutable)",
            stats.scans, inputs.campaign.done, inputs.campaign.unroutable
        ),
    );
    out.line(
        "callbacks delivered (copies answered 200)",
        format!(
            "{} of {} copies",
            stats.callbacks_delivered, stats.callbacks
        ),
    );
    out.line(
        "callbacks duplicated (second concurrent copy)",
        format!(
            "{} (campaign: {})",
            stats.duplicates, inputs.campaign.duplicates
        ),
    );
    out.line(
        "callbacks retried (attempts after the first)",
        format!(
            "{} ({} copies failed every attempt)",
            stats.retried_attempts, stats.failures
        ),
    );
    out.line(
        "adds counted (sum of ADDS#TOTAL counters)",
        inputs.adds_counted,
    );

    // ---------------------------------------------------------------- refresh
    out.head("Refresh (the single writer)");
    match &inputs.refresh {
        Some(r) => {
            out.line(
                "refresh reasons",
                format!("{} (counters of {} tenant day(s))", r.reasons, r.days),
            );
            out.line("recomputes", r.recomputes);
            out.line("pushes (refresh counters)", r.pushes);
            out.line("pushes skipped because nothing changed", r.unchanged);
            out.line(
                "starved recomputes / failed refreshes",
                format!("{} / {}", r.starved, r.failed),
            );
        }
        None => out.line(
            "refresh counters (STATS#REFRESH#)",
            "none found in the table",
        ),
    }
    let ok_calls = inputs
        .update_calls
        .iter()
        .filter(|c| c.errcode() == Some(0))
        .count();
    let throttled = inputs
        .update_calls
        .iter()
        .filter(|c| c.errcode() == Some(45009))
        .count();
    let other_calls = inputs.update_calls.len() - ok_calls - throttled;
    out.line(
        "update_contact_way calls seen by the sandbox",
        format!(
            "{} ({ok_calls} ok, {throttled} 45009, {other_calls} other)",
            inputs.update_calls.len()
        ),
    );
    out.line("push log entries (PUSHLOG#)", inputs.pushes.len());
    out.line("45009 answers from WeCom (all APIs)", stats.rate_limited);
    // No push when nothing changed: a push whose list equals the one WeCom already had.
    let mut by_code: BTreeMap<&str, Vec<&Push>> = BTreeMap::new();
    for (code, push) in &inputs.pushes {
        by_code.entry(code).or_default().push(push);
    }
    let mut repeats = 0;
    let mut first_repeats = 0;
    for (code, list) in by_code.iter_mut() {
        list.sort_by_key(|p| p.pushed_at_ms);
        let set = |users: &[String]| users.iter().cloned().collect::<BTreeSet<_>>();
        let mut previous = inputs.created_lists.get(*code).map(|u| set(u));
        for (i, push) in list.iter().enumerate() {
            let now = set(&push.users);
            if previous.as_ref() == Some(&now) {
                repeats += 1;
                if i == 0 {
                    first_repeats += 1;
                }
            }
            previous = Some(now);
        }
    }
    out.line(
        "pushes that repeated the list WeCom already had",
        format!("{repeats} ({first_repeats} of them the first push after creation)"),
    );

    // ---------------------------------------------------------------- latency
    let mut latencies: Vec<u64> = inputs
        .pushes
        .iter()
        .flat_map(|(_, p)| {
            p.fact_at_ms
                .iter()
                .map(|f| p.pushed_at_ms.saturating_sub(*f))
        })
        .collect();
    latencies.sort_unstable();
    out.head("Latency from the fact (admin change or counted add) to the completed push");
    if latencies.is_empty() {
        out.line("samples", "none (no push log entries with fact times)");
    } else {
        out.line("samples (fact times served by pushes)", latencies.len());
        out.line(
            "p50 / p95 / max",
            format!(
                "{} / {} / {}",
                ms(percentile(&latencies, 50.0)),
                ms(percentile(&latencies, 95.0)),
                ms(latencies[latencies.len() - 1])
            ),
        );
    }

    // ---------------------------------------------------------------- scenario
    let changes = changes(inputs);
    let mut reached: BTreeMap<&str, usize> = BTreeMap::new();
    for change in changes.iter().filter(|c| c.why == Why::DailyLimit) {
        *reached.entry(change.staff.as_str()).or_default() += 1;
    }
    out.head("Scenario");
    for flip in inputs.flips {
        out.line(
            &format!("{} taken offline", flip.staff),
            format!(
                "acknowledged in {} ms, {} codes refreshed",
                flip.acked_ms.saturating_sub(flip.sent_ms),
                flip.codes_refreshed.map_or("?".into(), |n| n.to_string())
            ),
        );
    }
    let pairs: usize = reached.values().sum();
    let who: Vec<&str> = reached.keys().copied().collect();
    out.line(
        "staff offline / staff who reached a daily limit",
        format!(
            "{} / {} ({pairs} staff-code pairs)",
            inputs.flips.len(),
            reached.len()
        ),
    );
    out.note(&format!("reached a daily limit: {}", who.join(", ")));
    let starved_now = inputs.final_codes.iter().filter(|c| c.starved).count();
    let fallback_now = inputs.final_codes.iter().filter(|c| c.fallback).count();
    out.line(
        "codes on their fallback / starved at the end",
        format!("{fallback_now} / {starved_now}"),
    );
    let dead: u64 = inputs.dead_letters.iter().map(|(_, n)| n).sum();
    out.line(
        "dead letters",
        inputs
            .dead_letters
            .iter()
            .map(|(q, n)| format!("{q} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
            + if dead == 0 { "" } else { "  <- not empty" },
    );

    // ---------------------------------------------------------------- checks
    out.head("Checks");
    out.must(
        "queues drained (inbox + refresh, as SQS reports them)",
        if inputs.drained.drained {
            "yes".to_owned()
        } else {
            format!("no: {} + {}", inputs.drained.inbox, inputs.drained.refresh)
        },
        inputs.drained.drained,
    );
    out.must(
        "scenario: >= 2 staff offline, >= 2 reached a daily limit",
        format!("{} / {}", inputs.flips.len(), reached.len()),
        inputs.flips.len() >= 2 && reached.len() >= 2,
    );
    let routing = routing(inputs, &changes);
    out.must(
        "scans to ineligible staff after the push removing them",
        routing.after_push.len(),
        routing.after_push.is_empty(),
    );
    out.note(&format!(
        "{} eligibility changes; scans that reached them between the change and that push: {}",
        routing.changes,
        routing.window.len()
    ));
    for detail in routing.details.iter().take(20) {
        out.note(detail);
    }
    if !routing.never_removed.is_empty() {
        out.note(&format!(
            "changes with no push removing the staff member: {}",
            routing.never_removed.len()
        ));
        for (code, staff, why, after) in routing.never_removed.iter().take(20) {
            let starved = inputs
                .final_codes
                .iter()
                .any(|c| &c.code == code && c.starved);
            out.note(&format!(
                "  {code}: {staff} ({why:?}){}, {after} scans routed to them afterwards",
                if starved { ", code starved" } else { "" }
            ));
        }
    }

    let mut delivered = HashSet::new();
    let mut undelivered = 0;
    for scan in &inputs.scans {
        match (&scan.delivery, &scan.external_userid) {
            (Some(d), Some(external)) if d.delivered => {
                delivered.insert((scan.state.as_str(), external.as_str()));
            }
            (_, Some(_)) => undelivered += 1,
            _ => {}
        }
    }
    out.must(
        "adds counted vs distinct adds delivered",
        format!("{} / {}", inputs.adds_counted, delivered.len()),
        inputs.adds_counted == delivered.len() as u64,
    );
    out.note(&format!(
        "add claims in the table: {}; routed scans whose callback never got a 200: {undelivered}",
        inputs.claims.len()
    ));

    let mut differ = Vec::new();
    let mut unverifiable = 0;
    for code in &inputs.final_codes {
        let set = |users: &Vec<String>| users.iter().cloned().collect::<BTreeSet<_>>();
        match (&code.expected, &code.sandbox) {
            (Some(expected), Some(actual)) if set(expected) == set(actual) => {}
            (None, _) => unverifiable += 1,
            (expected, actual) => differ.push(format!(
                "{}: recompute {:?}{}, sandbox {:?}",
                code.code,
                expected.as_ref().map(set).unwrap_or_default(),
                if code.starved {
                    " (starved: last pushed)"
                } else {
                    ""
                },
                actual.as_ref().map(set)
            )),
        }
    }
    out.must(
        "codes whose sandbox list differs from the recompute",
        format!("{} of {}", differ.len(), inputs.final_codes.len()),
        differ.is_empty(),
    );
    if unverifiable > 0 {
        out.note(&format!(
            "starved codes never pushed (compared with nothing): {unverifiable}"
        ));
    }
    for line in differ.iter().take(20) {
        out.note(line);
    }

    let _ = writeln!(
        out.text,
        "\n{}",
        if out.failed.is_empty() {
            "Every must-be line passed.".to_owned()
        } else {
            format!("FAILED: {}", out.failed.join("; "))
        }
    );
    print!("{}", out.text);
    out.failed.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::CodePlan;
    use crate::sandbox::Delivery;

    fn scan(seq: u64, at_ms: u64, userid: &str) -> Scan {
        Scan {
            seq,
            at_ms,
            config_id: "cfg0".into(),
            state: "code-00".into(),
            userid: Some(userid.into()),
            external_userid: Some(format!("wm{seq}")),
            delivery: Some(Delivery { delivered: true }),
        }
    }

    fn push(pushed_at_ms: u64, users: &[&str]) -> (String, Push) {
        let users = users.iter().map(|u| (*u).to_owned()).collect();
        (
            "code-00".to_owned(),
            Push {
                pushed_at_ms,
                users,
                fact_at_ms: vec![pushed_at_ms - 50],
            },
        )
    }

    #[test]
    fn scans_count_against_ineligible_staff_only_after_the_push_removing_them() {
        let plan = Plan {
            staff: vec!["a".into(), "b".into(), "f".into()],
            codes: vec![CodePlan {
                id: "code-00".into(),
                members: vec!["a".into(), "b".into()],
                fallback: vec!["f".into()],
                daily_limit: Some(2),
                weight: 1,
            }],
            offline: Vec::new(),
        };
        let config_ids = BTreeMap::from([("code-00".to_owned(), "cfg0".to_owned())]);
        let flips = [Flip {
            staff: "b".into(),
            sent_ms: 1000,
            acked_ms: 1010,
            codes_refreshed: Some(1),
        }];
        let claim = |staff: &str, at: u64| Claim {
            code: "code-00".into(),
            staff: staff.into(),
            day: "1970-01-01".into(),
            counted_at_ms: at,
        };
        let inputs = Inputs {
            plan: &plan,
            tenant: "t",
            seed: 1,
            scans_planned: 6,
            per_second: 1.0,
            config_ids: &config_ids,
            flips: &flips,
            stats: Stats::default(),
            campaign: Campaign::default(),
            scans: vec![
                scan(1, 1100, "b"), // offline, before the push removing b: the window
                scan(2, 1300, "b"), // after it: wrong
                scan(3, 1400, "a"),
                scan(4, 1650, "a"), // a reached the limit at 1600, push at 1700: the window
                scan(5, 1800, "a"), // after it: wrong
                scan(6, 1900, "f"), // the fallback: fine
            ],
            update_calls: Vec::new(),
            created_lists: HashMap::from([(
                "code-00".to_owned(),
                vec!["a".to_owned(), "b".to_owned()],
            )]),
            adds_counted: 0,
            claims: vec![
                claim("a", 1500),
                claim("a", 1600),
                claim("f", 1950),
                claim("f", 1960),
            ],
            refresh: None,
            pushes: vec![
                push(900, &["a", "b"]),
                push(1200, &["a"]),
                push(1700, &["f"]),
            ],
            final_codes: Vec::new(),
            dead_letters: Vec::new(),
            drained: Drain {
                drained: true,
                secs: 0.0,
                inbox: 0,
                refresh: 0,
            },
            run_secs: 0.0,
        };
        let changes = changes(&inputs);
        // b offline, a at the limit; f is a fallback, whom the limit does not apply to.
        assert_eq!(changes.len(), 2);
        let routing = routing(&inputs, &changes);
        assert_eq!(routing.after_push, BTreeSet::from([2, 5]));
        assert_eq!(routing.window, BTreeSet::from([1, 4]));
        assert!(routing.never_removed.is_empty());
    }

    #[test]
    fn nearest_rank_percentiles() {
        let values: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&values, 50.0), 50);
        assert_eq!(percentile(&values, 95.0), 95);
        assert_eq!(percentile(&[7], 95.0), 7);
        assert_eq!(percentile(&[], 95.0), 0);
    }

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
