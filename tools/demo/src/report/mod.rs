//! What happened, measured from the outside: the sandbox's logs and counters, the table's
//! items (counters, claims, push log, refresh statistics), the quota loop's notifications and
//! the recompute of final facts.

mod histories;
mod quota_loop;

use crate::measured::{FinalCode, Inputs, Push};
use domain::tenants::tenant_day;
use histories::Histories;
use quota_loop::QuotaLoop;
use stack_client::report::{percentile, quantiles, Lines};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fmt::Write as _;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Why {
    Offline,
    DailyLimit,
    AddLimit,
    CompanyCap,
    Resigned,
    OffShift,
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

pub fn ms(value: u64) -> String {
    if value >= 10_000 {
        format!("{:.1} s", value as f64 / 1000.0)
    } else {
        format!("{value} ms")
    }
}

/// Every moment a staff member became ineligible on a code, as the demo knows them.
fn changes(inputs: &Inputs<'_>) -> Vec<Change> {
    let mut changes = offline_resigned_and_off_shift(inputs);
    changes.extend(company_cap_reached(inputs));
    changes.extend(daily_limit_reached(inputs));
    changes.extend(add_limit_reached(inputs));
    changes
}

fn offline_resigned_and_off_shift(inputs: &Inputs<'_>) -> Vec<Change> {
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
    for resignation in inputs.resignations {
        // Never eligible again, not even as a fallback.
        for code in inputs.plan.codes_of(&resignation.staff) {
            changes.push(Change {
                code: code.id.clone(),
                staff: resignation.staff.clone(),
                why: Why::Resigned,
                at_ms: resignation.sent_ms,
                day: None,
            });
        }
    }
    if inputs.shifts.walked.is_some() {
        for staff in &inputs.shifts.ends {
            for code in inputs.plan.member_of(staff) {
                changes.push(Change {
                    code: code.id.clone(),
                    staff: staff.clone(),
                    why: Why::OffShift,
                    at_ms: inputs.shifts.edge_ms,
                    day: None,
                });
            }
        }
    }
    changes
}

fn company_cap_reached(inputs: &Inputs<'_>) -> Vec<Change> {
    let mut changes = Vec::new();
    let Some(cap) = inputs.company_daily_cap else {
        return changes;
    };
    let mut company: BTreeMap<(&str, &str), Vec<u64>> = BTreeMap::new();
    for claim in &inputs.claims {
        company
            .entry((&claim.staff, &claim.day))
            .or_default()
            .push(claim.counted_at_ms);
    }
    for ((staff, day), mut times) in company {
        times.sort_unstable();
        let Some(&at_ms) = times.get(cap as usize - 1) else {
            continue;
        };
        // The cap holds members off every code; fallback staff are not held to it.
        for code in inputs.plan.member_of(staff) {
            changes.push(Change {
                code: code.id.clone(),
                staff: staff.to_owned(),
                why: Why::CompanyCap,
                at_ms,
                day: Some(day.to_owned()),
            });
        }
    }
    changes
}

fn daily_limit_reached(inputs: &Inputs<'_>) -> Vec<Change> {
    let mut counted: BTreeMap<(&str, &str, &str), Vec<u64>> = BTreeMap::new();
    for claim in &inputs.claims {
        counted
            .entry((&claim.code, &claim.staff, &claim.day))
            .or_default()
            .push(claim.counted_at_ms);
    }
    let mut changes = Vec::new();
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

fn add_limit_reached(inputs: &Inputs<'_>) -> Vec<Change> {
    let mut ever: BTreeMap<(&str, &str), Vec<u64>> = BTreeMap::new();
    for claim in &inputs.claims {
        ever.entry((&claim.code, &claim.staff))
            .or_default()
            .push(claim.counted_at_ms);
    }
    let mut changes = Vec::new();
    for ((code, staff), mut times) in ever {
        let Some(limit) = inputs
            .plan
            .code(code)
            .filter(|c| c.members.iter().any(|m| m == staff))
            .and_then(|c| c.add_limit)
        else {
            continue;
        };
        times.sort_unstable();
        if let Some(&at_ms) = times.get(limit as usize - 1) {
            changes.push(Change {
                code: code.to_owned(),
                staff: staff.to_owned(),
                why: Why::AddLimit,
                at_ms,
                day: None,
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
    let timezone = inputs.timezone;
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

/// Codes whose sandbox list differs from the recompute (with a line each), and codes that
/// could not be compared (starved and never pushed).
pub fn differing(codes: &[FinalCode]) -> (Vec<String>, usize) {
    let mut differ = Vec::new();
    let mut unverifiable = 0;
    for code in codes {
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
    (differ, unverifiable)
}

/// Prints the report; true when every must-be line passed.
pub fn print(inputs: &Inputs<'_>) -> bool {
    let report = report(inputs);
    print!("{}", report.text);
    report.passed()
}

/// The report's sections, in order, and the verdict on all their must-be lines.
fn report(inputs: &Inputs<'_>) -> Lines {
    let changes = changes(inputs);
    let reached = staff_at_daily_limits(&changes);
    let histories = Histories::new(inputs);
    let quota = QuotaLoop::new(inputs, &histories);
    let edge = ShiftEdge::new(inputs, &histories);
    let mut out = Lines::new(58, 16);
    let sections = [
        overview(&out, inputs),
        intake(&out, inputs),
        refresh(&out, inputs),
        latency(&out, inputs),
        scenario(&out, inputs, &reached),
        quota_loop::section(&out, inputs, &quota),
        resignations(&out, inputs, &histories),
        schedules(&out, inputs, &edge),
        day_rollover(&out, inputs),
        operator_saw(&out, inputs),
        checks(&out, inputs, &changes, &reached, &quota, &edge),
    ];
    for section in sections {
        out.append(section);
    }
    let _ = writeln!(
        out.text,
        "\n{}",
        if out.passed() {
            "Every must-be line passed.".to_owned()
        } else {
            format!("FAILED: {}", out.failed.join("; "))
        }
    );
    out
}

/// Per staff member, the codes whose daily limit they reached.
fn staff_at_daily_limits(changes: &[Change]) -> BTreeMap<&str, usize> {
    let mut reached: BTreeMap<&str, usize> = BTreeMap::new();
    for change in changes.iter().filter(|c| c.why == Why::DailyLimit) {
        *reached.entry(change.staff.as_str()).or_default() += 1;
    }
    reached
}

fn overview(out: &Lines, inputs: &Inputs<'_>) -> Lines {
    let plan = inputs.plan;
    let mut out = out.section();
    let limited = plan
        .codes
        .iter()
        .filter(|c| c.daily_limit.is_some())
        .count();
    let quiet_codes = plan.quiet().count();
    let daily_limit = plan.codes.iter().find_map(|c| c.daily_limit).unwrap_or(0);
    let with_fallback = plan.codes.iter().filter(|c| !c.fallback.is_empty()).count();
    let seats = plan.seats();
    let _ = writeln!(
        out.text,
        "\nqrsync demo report: tenant {}, seed {}",
        inputs.tenant, inputs.seed
    );
    let add_limited = plan.codes.iter().filter(|c| c.add_limit.is_some()).count();
    let add_limit = plan.codes.iter().find_map(|c| c.add_limit).unwrap_or(0);
    let _ = writeln!(
        out.text,
        "  {} staff (each on {} to {} codes; hubs {} on the most), {} native codes in the campaign ({} with daily limit {}, {} with add limit {}, {} with fallback) and {quiet_codes} quiet ones, offline check on every code",
        plan.staff.len(),
        seats.values().min().unwrap_or(&0),
        seats.values().max().unwrap_or(&0),
        plan.hubs.join(", "),
        plan.codes.len() - quiet_codes,
        limited,
        daily_limit,
        add_limited,
        add_limit,
        with_fallback
    );
    let _ = writeln!(
        out.text,
        "  tenant timezone {}, company daily cap {}",
        inputs.timezone,
        inputs
            .company_daily_cap
            .map_or("off".to_owned(), |c| format!("{c} adds per staff member")),
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
    out
}

fn intake(out: &Lines, inputs: &Inputs<'_>) -> Lines {
    let stats = &inputs.stats;
    let mut out = out.section();
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
    out
}

fn refresh(out: &Lines, inputs: &Inputs<'_>) -> Lines {
    let mut out = out.section();
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
    out.line(
        "45009 answers from WeCom (all APIs)",
        inputs.stats.rate_limited,
    );
    let (repeats, first_repeats) = repeated_lists(inputs);
    out.line(
        "pushes that repeated the list WeCom already had",
        format!("{repeats} ({first_repeats} of them the first push after creation)"),
    );
    out
}

/// Pushes whose list equals the one WeCom already had (there should be none: nothing changed),
/// and how many of them were a code's first push after its creation.
fn repeated_lists(inputs: &Inputs<'_>) -> (usize, usize) {
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
    (repeats, first_repeats)
}

/// The fact-to-push p95 the campaign must stay under: nothing in it waits for the budget.
const FACT_TO_PUSH_P95_MS: u64 = 1_000;

fn latency(out: &Lines, inputs: &Inputs<'_>) -> Lines {
    let mut out = out.section();
    // The shift edge is the tick's fact, measured on its own below.
    let is_edge = |fact: &u64| inputs.shifts.walked.is_some() && *fact == inputs.shifts.edge_ms;
    let mut latencies: Vec<u64> = inputs
        .pushes
        .iter()
        .flat_map(|(_, p)| {
            p.fact_at_ms
                .iter()
                .filter(|f| !is_edge(f))
                .map(|f| p.pushed_at_ms.saturating_sub(*f))
        })
        .collect();
    latencies.sort_unstable();
    let slowest = inputs
        .pushes
        .iter()
        .flat_map(|(code, p)| {
            p.fact_at_ms
                .iter()
                .filter(|f| !is_edge(f))
                .map(move |f| (p.pushed_at_ms.saturating_sub(*f), code, *f, p))
        })
        .max_by_key(|(latency, ..)| *latency);
    out.head("Latency from the fact (admin change, counted add, limit claim, contact change) to the completed push");
    if latencies.is_empty() {
        out.line("samples", "none (no push log entries with fact times)");
    } else {
        out.line("samples (fact times served by pushes)", latencies.len());
        let p95 = percentile(&latencies, 95.0);
        out.line(
            "p50 / p95 / max",
            format!(
                "{} / {} / {}",
                ms(percentile(&latencies, 50.0)),
                ms(p95),
                ms(latencies[latencies.len() - 1])
            ),
        );
        // MISSION.md's figure for an unthrottled change: what a user sees of freshness.
        out.must(
            &format!("p95 under {}", ms(FACT_TO_PUSH_P95_MS)),
            ms(p95),
            p95 < FACT_TO_PUSH_P95_MS,
        );
        if let Some((latency, code, fact, push)) = slowest {
            out.note(&format!(
                "slowest: {code}, fact at {:+.1} s of the campaign, pushed {} later ({} facts served by that push)",
                (fact as f64 - inputs.campaign.started_at_ms as f64) / 1000.0,
                ms(latency),
                push.fact_at_ms.len()
            ));
        }
    }
    out
}

fn scenario(out: &Lines, inputs: &Inputs<'_>, reached: &BTreeMap<&str, usize>) -> Lines {
    let mut out = out.section();
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
    out
}

fn resignations(out: &Lines, inputs: &Inputs<'_>, histories: &Histories<'_>) -> Lines {
    let mut out = out.section();
    out.head("Resignation (WeCom change_contact / delete_user through the callback route)");
    for r in inputs.resignations {
        let codes: Vec<&str> = inputs
            .plan
            .codes_of(&r.staff)
            .iter()
            .map(|c| c.id.as_str())
            .collect();
        let removals = histories.removals(codes.iter().copied(), &r.staff, r.sent_ms);
        out.line(
            &format!("{} resigned", r.staff),
            format!(
                "callback {}; sits on {} codes, {} listed them: {} pushes took them off, last after {}",
                if r.delivered { "delivered" } else { "NOT delivered" },
                codes.len(),
                removals.len(),
                removals.iter().flatten().count(),
                removals
                    .iter()
                    .copied()
                    .collect::<Option<Vec<u64>>>()
                    .and_then(|d| d.into_iter().max())
                    .map_or("-".into(), ms)
            ),
        );
        out.note(&format!(
            "off every WeCom list {} after the callback (polled each second); WeCom's directory then dropped them with {} contact ways still naming them",
            r.off_lists_ms
                .map_or("never seen".into(), |t| ms(t.saturating_sub(r.sent_ms))),
            r.still_listed_on
                .as_ref()
                .map_or("?".into(), |l| l.len().to_string())
        ));
    }
    if inputs.resignations.is_empty() {
        out.line("resignations", "none in this run");
    }
    out
}

/// How the lists followed the shift edge.
struct ShiftEdge {
    /// Campaign codes the edge must change (ends: every member code whose list named them
    /// at the edge; starts: every member code whose recompute of final facts lists them),
    /// and of those the codes a push after the edge changed.
    expected: usize,
    followed: usize,
    /// Scans routed to staff whose shift starts at the edge, before it.
    early_scans: usize,
    /// Quiet codes the tick's push gave exactly their on-shift members.
    quiet_changed: usize,
    /// Pushes on quiet codes serving any fact besides the edge.
    quiet_other_pushes: usize,
    /// The edge to the tick's push on each quiet code it pushed.
    quiet_lag: Vec<u64>,
}

impl ShiftEdge {
    fn new(inputs: &Inputs<'_>, histories: &Histories<'_>) -> Self {
        let mut edge = Self {
            expected: 0,
            followed: 0,
            early_scans: 0,
            quiet_changed: 0,
            quiet_other_pushes: 0,
            quiet_lag: Vec::new(),
        };
        edge.follow_campaign_codes(inputs, histories);
        edge.follow_quiet_codes(inputs, histories);
        edge
    }

    fn follow_campaign_codes(&mut self, inputs: &Inputs<'_>, histories: &Histories<'_>) {
        let (plan, shifts) = (inputs.plan, &inputs.shifts);
        for staff in &shifts.ends {
            let codes = plan.member_of(staff);
            let removals =
                histories.removals(codes.iter().map(|c| c.id.as_str()), staff, shifts.edge_ms);
            self.expected += removals.len();
            self.followed += removals.iter().flatten().count();
        }
        for staff in &shifts.starts {
            for code in plan.member_of(staff) {
                let wanted = inputs.final_codes.iter().any(|f| {
                    f.code == code.id && f.expected.as_ref().is_some_and(|e| e.contains(staff))
                });
                if !wanted {
                    continue;
                }
                self.expected += 1;
                if histories
                    .first_push(&code.id, shifts.edge_ms, staff, true)
                    .is_some()
                {
                    self.followed += 1;
                }
            }
            self.early_scans += inputs
                .scans
                .iter()
                .filter(|scan| {
                    scan.userid.as_deref() == Some(staff.as_str()) && scan.at_ms < shifts.edge_ms
                })
                .count();
        }
    }

    /// Quiet codes see no scan and no admin change: only the tick's reasons may change them.
    fn follow_quiet_codes(&mut self, inputs: &Inputs<'_>, histories: &Histories<'_>) {
        let (plan, shifts) = (inputs.plan, &inputs.shifts);
        let on_shift: BTreeSet<&String> = plan.steady.iter().chain(&shifts.starts).collect();
        for code in plan.quiet() {
            let history = histories.of(&code.id);
            let by_tick = history.iter().find(|p| {
                p.pushed_at_ms >= shifts.edge_ms && p.fact_at_ms.contains(&shifts.edge_ms)
            });
            self.quiet_other_pushes += history
                .iter()
                .filter(|p| p.fact_at_ms.iter().any(|f| *f != shifts.edge_ms))
                .count();
            if let Some(push) = by_tick {
                let after: BTreeSet<&String> = push.users.iter().collect();
                let wanted: BTreeSet<&String> = code
                    .members
                    .iter()
                    .filter(|m| on_shift.contains(m))
                    .collect();
                if after == wanted {
                    self.quiet_changed += 1;
                }
                self.quiet_lag
                    .push(push.pushed_at_ms.saturating_sub(shifts.edge_ms));
            }
        }
    }
}

fn schedules(out: &Lines, inputs: &Inputs<'_>, edge: &ShiftEdge) -> Lines {
    let shifts = &inputs.shifts;
    let mut out = out.section();
    out.head("Work schedules (a shift edge reaches the lists through the schedule tick alone)");
    let edge_local = inputs.timezone.at(shifts.edge_ms).format("%a %H:%M");
    let names = |staff: &[String]| {
        if staff.is_empty() {
            "nobody".into()
        } else {
            staff.join(", ")
        }
    };
    out.line(
        &format!("shift edge at {edge_local} ({})", inputs.timezone),
        format!(
            "ends for {}; starts for {}; tick walked it: {}",
            names(&shifts.ends),
            names(&shifts.starts),
            match shifts.walked {
                Some(true) => "yes",
                Some(false) => "NO",
                None => "-",
            }
        ),
    );
    out.line(
        "campaign codes the edge must change / changed after it",
        format!(
            "{} / {} (by the tick or by any refresh after it)",
            edge.expected, edge.followed
        ),
    );
    out.line(
        "quiet codes changed by the tick's reasons alone",
        format!(
            "{} of {} (pushes on them serving any other fact: {})",
            edge.quiet_changed,
            inputs.plan.quiet().count(),
            edge.quiet_other_pushes
        ),
    );
    out.line(
        "edge -> tick's push on a quiet code: p50 / p95 / max",
        quantiles(edge.quiet_lag.clone(), ms),
    );
    out.note(
        "the tick fires once a minute (60-70 s apart on MiniStack) and walks a minute from 15 s after it began",
    );
    out
}

fn day_rollover(out: &Lines, inputs: &Inputs<'_>) -> Lines {
    let rollover = &inputs.rollover;
    let mut out = out.section();
    out.head("Day rollover (the stack's clock moved to just before the tenant's midnight)");
    if let Some(why) = &rollover.skipped {
        out.line("day rollover", format!("not run: {why}"));
        return out;
    }
    out.line(
        "midnight / clock jump (functions and WeCom)",
        format!(
            "{} {} / +{} s, to {} before it",
            inputs
                .timezone
                .at(rollover.midnight_ms)
                .format("%Y-%m-%d %H:%M"),
            inputs.timezone,
            rollover.jump_secs,
            ms(rollover.midnight_ms.saturating_sub(rollover.jumped_to_ms))
        ),
    );
    out.line(
        "the tick rolled the day over",
        rollover
            .tick_secs
            .map_or("NO".into(), |s| format!("{s:.0} s (real) after the jump")),
    );
    out.line(
        "pushes between the jump and midnight (no event)",
        rollover.pushes_before_midnight,
    );
    let staff_back: BTreeSet<&str> = rollover.back.iter().map(|(_, s)| s.as_str()).collect();
    let codes_back: BTreeSet<&str> = rollover.back.iter().map(|(c, _)| c.as_str()).collect();
    out.line(
        "staff restored (on codes)",
        format!("{} ({} codes)", staff_back.len(), codes_back.len()),
    );
    out.line(
        "codes refreshed by the rollover (pushes serving midnight)",
        rollover.pushes.len(),
    );
    if let Some((reasons, recomputes, pushes)) = rollover.new_day {
        out.note(&format!(
            "refresh counters of the new day: {reasons} reasons, {recomputes} recomputes, {pushes} pushes"
        ));
    }
    out.line(
        "midnight -> push: p50 / p95 / max",
        quantiles(
            rollover
                .pushes
                .iter()
                .map(|(_, at)| at.saturating_sub(rollover.midnight_ms))
                .collect(),
            ms,
        ),
    );
    out
}

fn operator_saw(out: &Lines, inputs: &Inputs<'_>) -> Lines {
    let mut out = out.section();
    out.head("What the operator saw (the stack's alarms and the team's group robot)");
    let seen = match &inputs.operator {
        Ok(seen) => seen,
        Err(why) => {
            out.line("alarms", format!("not read: {why}"));
            return out;
        }
    };
    out.line(
        "alarm changes during the run (of the stack's alarms)",
        format!("{} (of {})", seen.changes.len(), seen.alarms),
    );
    if seen.changes.is_empty() {
        out.note("none fired");
    }
    for change in &seen.changes {
        out.note(&format!(
            "{} {}: {} ({})",
            change.at, change.alarm, change.summary, change.reason
        ));
    }
    // An alarm that did not change during the run was in ALARM before it (an earlier run or
    // test on the same world): said apart, so the run is not blamed for it.
    let (during, before): (Vec<&String>, Vec<&String>) = seen
        .in_alarm
        .iter()
        .partition(|name| seen.changes.iter().any(|c| &c.alarm == *name));
    let names = |list: &[&String]| {
        if list.is_empty() {
            "none".to_owned()
        } else {
            list.iter()
                .map(|n| n.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        }
    };
    out.line("in ALARM at the end, raised during the run", names(&during));
    if !before.is_empty() {
        out.line("in ALARM since before the run", names(&before));
    }
    out.line("group robot messages", seen.robot.len());
    for message in &seen.robot {
        out.note(message);
    }
    out.note(
        "MiniStack evaluates only AWS/Lambda alarms, from Invoke calls (docs/local-world.md, MiniStack versus AWS)",
    );
    out
}

fn checks(
    out: &Lines,
    inputs: &Inputs<'_>,
    changes: &[Change],
    reached: &BTreeMap<&str, usize>,
    quota: &QuotaLoop,
    edge: &ShiftEdge,
) -> Lines {
    let mut checks = out.section();
    checks.head("Checks");
    let sections = [
        drain_and_scenario_checks(out, inputs, reached),
        routing_check(out, inputs, changes),
        adds_check(out, inputs),
        final_list_checks(out, inputs),
        scenario_events_check(out, inputs, quota),
        quota_loop::notification_checks(out, inputs, quota),
        shift_edge_checks(out, inputs, edge),
        rollover_checks(out, inputs),
    ];
    for section in sections {
        checks.append(section);
    }
    checks
}

fn drain_and_scenario_checks(
    out: &Lines,
    inputs: &Inputs<'_>,
    reached: &BTreeMap<&str, usize>,
) -> Lines {
    let mut out = out.section();
    out.must(
        "queues drained (inbox, refresh, retries; per SQS)",
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
    out
}

fn routing_check(out: &Lines, inputs: &Inputs<'_>, changes: &[Change]) -> Lines {
    let mut out = out.section();
    let routing = routing(inputs, changes);
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
    out
}

fn adds_check(out: &Lines, inputs: &Inputs<'_>) -> Lines {
    let mut out = out.section();
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
    out
}

fn final_list_checks(out: &Lines, inputs: &Inputs<'_>) -> Lines {
    let mut out = out.section();
    let (differ, unverifiable) = differing(&inputs.final_codes);
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
    out.must(
        "codes listing a resigned staff member at the end",
        inputs
            .final_codes
            .iter()
            .filter(|c| {
                c.sandbox.as_ref().is_some_and(|users| {
                    inputs.resignations.iter().any(|r| users.contains(&r.staff))
                })
            })
            .count(),
        inputs.final_codes.iter().all(|c| {
            c.sandbox.as_ref().is_none_or(|users| {
                inputs
                    .resignations
                    .iter()
                    .all(|r| !users.contains(&r.staff))
            })
        }),
    );
    out
}

/// The run must have produced the events the report's checks are about.
fn scenario_events_check(out: &Lines, inputs: &Inputs<'_>, quota: &QuotaLoop) -> Lines {
    let mut out = out.section();
    let cap_crossings = quota.cap_crossings().len();
    let shifts = &inputs.shifts;
    out.must(
        "scenario: cap crossings, resignations, shift edges",
        format!(
            "{} / {} / {}",
            cap_crossings,
            inputs.resignations.iter().filter(|r| r.delivered).count(),
            shifts.ends.len() + shifts.starts.len()
        ),
        (inputs.company_daily_cap.is_none() || cap_crossings > 0)
            && inputs.resignations.iter().all(|r| r.delivered)
            && inputs.resignations.len() == inputs.plan.resign.len(),
    );
    out
}

fn shift_edge_checks(out: &Lines, inputs: &Inputs<'_>, edge: &ShiftEdge) -> Lines {
    let mut out = out.section();
    let walked = inputs.shifts.walked;
    if walked.is_none() {
        return out;
    }
    out.must(
        "campaign codes that followed the shift edge",
        format!("{} of {}", edge.followed, edge.expected),
        walked == Some(true) && edge.expected > 0 && edge.followed == edge.expected,
    );
    let quiet = inputs.plan.quiet().count();
    out.must(
        "quiet codes changed at the edge by the tick alone",
        format!("{} of {quiet}", edge.quiet_changed),
        edge.quiet_changed == quiet && edge.quiet_other_pushes == 0,
    );
    out.must(
        "scans routed to staff before their shift started",
        edge.early_scans,
        edge.early_scans == 0,
    );
    out
}

fn rollover_checks(out: &Lines, inputs: &Inputs<'_>) -> Lines {
    let rollover = &inputs.rollover;
    let mut out = out.section();
    match &rollover.skipped {
        Some(why) if !rollover.left_out => {
            out.must("day rollover", format!("not run: {why}"), false);
            return out;
        }
        Some(_) => return out,
        None => {}
    }
    out.must(
        "staff-code pairs back after midnight (limit or cap)",
        format!(
            "{} of {}",
            rollover.back.len(),
            rollover.expected_back.len()
        ),
        !rollover.expected_back.is_empty() && rollover.back.len() == rollover.expected_back.len(),
    );
    for (code, staff) in rollover
        .expected_back
        .iter()
        .filter(|pair| !rollover.back.contains(pair))
        .take(10)
    {
        out.note(&format!("{staff} not back on {code}"));
    }
    out.must(
        "codes whose list differs from the recompute after it",
        format!("{} of {}", rollover.differ.len(), rollover.codes),
        rollover.drained && rollover.differ.is_empty(),
    );
    for line in rollover.differ.iter().take(10) {
        out.note(line);
    }
    out.must(
        "clock restored afterwards",
        rollover.restore_error.as_deref().unwrap_or("yes"),
        rollover.restore_error.is_none(),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measured::{Claim, Drain, Flip, Shifts};
    use crate::plan::{CodePlan, Plan};
    use crate::rollover::Rollover;
    use crate::sandbox::{Campaign, Delivery, Scan, Stats};
    use domain::tenants::Timezone;

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
                add_limit: None,
                weight: 1,
            }],
            offline: Vec::new(),
            resign: Vec::new(),
            shift_ends: Vec::new(),
            shift_starts: Vec::new(),
            hubs: Vec::new(),
            steady: Vec::new(),
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
            timezone: Timezone::default(),
            company_daily_cap: None,
            scans_planned: 6,
            per_second: 1.0,
            config_ids: &config_ids,
            flips: &flips,
            resignations: &[],
            shifts: Shifts {
                edge_ms: 0,
                ends: Vec::new(),
                starts: Vec::new(),
                walked: None,
            },
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
            expected_crossings: BTreeSet::new(),
            limit_claims: Vec::new(),
            notifications: None,
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
            rollover: Rollover::default(),
            operator: Ok(crate::operator::Seen::default()),
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
}
