//! What happened in each phase, measured from the outside, and the must-be lines.

use crate::sandbox::Call;
use crate::world::Budget;
use stack_client::report::{quantiles, Lines};
use std::collections::BTreeMap;
use std::fmt::Write as _;

const MINUTE_MS: u64 = 60_000;

#[derive(Debug, Clone, Copy)]
pub struct Drain {
    pub drained: bool,
    pub secs: f64,
}

#[derive(Debug, Clone)]
pub struct Seeding {
    pub codes: usize,
    pub staff_secs: f64,
    pub codes_secs: f64,
    pub drain_secs: f64,
}

/// Every code's WeCom list against the recompute of the final facts.
#[derive(Debug, Clone, Default)]
pub struct Convergence {
    pub codes: usize,
    /// A line per code whose WeCom list differs.
    pub differ: Vec<String>,
    /// Starved and never pushed: nothing to compare with.
    pub unverifiable: usize,
    pub secs: f64,
}

#[derive(Debug, Clone)]
pub struct Phase {
    pub name: String,
    /// The sandbox's update_contact_way limit per minute.
    pub limit: u64,
    pub started_ms: u64,
    pub ended_ms: u64,
    pub rounds: usize,
    /// Admin staff changes sent, and the reasons they fanned out to (`codes_refreshed`).
    pub changes: usize,
    pub reasons_sent: u64,
    /// From the first round to the end of the last.
    pub driven_secs: f64,
    pub drain: Drain,
    /// Latency of each admin staff change.
    pub admin_ms: Vec<u64>,
    /// Staff changes tried again after a 5xx.
    pub admin_retries: u32,
    /// The refresh function's counters of the tenant before and after.
    pub tally_before: BTreeMap<String, u64>,
    pub tally_after: BTreeMap<String, u64>,
    /// The corp's update_contact_way calls during the phase.
    pub calls: Vec<Call>,
    /// Push log entries of the phase: (pushed at, fact times served).
    pub pushes: Vec<(u64, Vec<u64>)>,
    pub convergence: Convergence,
    pub dead_letters: Vec<(String, u64)>,
}

impl Phase {
    /// The counter's growth over the phase; `None` when the stack does not write it.
    pub fn counter(&self, name: &str) -> Option<u64> {
        let after = self.tally_after.get(name)?;
        Some(after.saturating_sub(self.tally_before.get(name).copied().unwrap_or(0)))
    }

    pub fn ok_calls(&self) -> usize {
        self.calls.iter().filter(|c| c.errcode() == Some(0)).count()
    }

    pub fn errcode_count(&self, errcode: i64) -> usize {
        self.calls
            .iter()
            .filter(|c| c.errcode() == Some(errcode))
            .count()
    }

    /// Accepted pushes per wall-clock minute, from the first minute with one to the last
    /// (minutes with none in between included).
    pub fn per_minute(&self) -> Vec<(u64, u64)> {
        let mut minutes: BTreeMap<u64, u64> = BTreeMap::new();
        for call in self.calls.iter().filter(|c| c.errcode() == Some(0)) {
            *minutes.entry(call.at_ms / MINUTE_MS).or_default() += 1;
        }
        let (Some(first), Some(last)) = (
            minutes.keys().next().copied(),
            minutes.keys().next_back().copied(),
        ) else {
            return Vec::new();
        };
        (first..=last)
            .map(|m| (m, minutes.get(&m).copied().unwrap_or(0)))
            .collect()
    }

    /// The warm minutes: every minute but the first and the last with pushes (both partial:
    /// the backlog was still building, or ran out).
    pub fn warm(&self) -> Vec<(u64, u64)> {
        let minutes = self.per_minute();
        if minutes.len() <= 2 {
            return Vec::new();
        }
        minutes[1..minutes.len() - 1].to_vec()
    }

    pub fn dead_lettered(&self) -> u64 {
        self.dead_letters.iter().map(|(_, d)| d).sum()
    }

    /// Pushed at minus each fact time served, for facts of this phase.
    fn latencies(&self) -> Vec<u64> {
        let mut latencies: Vec<u64> = self
            .pushes
            .iter()
            .flat_map(|(pushed, facts)| {
                facts
                    .iter()
                    .filter(|f| **f >= self.started_ms)
                    .map(move |f| pushed.saturating_sub(*f))
            })
            .collect();
        latencies.sort_unstable();
        latencies
    }
}

pub struct Inputs<'a> {
    pub tenant: &'a str,
    pub seed: u64,
    pub staff: usize,
    pub members: usize,
    /// Codes per staff member: fewest, most.
    pub seats: (usize, usize),
    pub budget: Budget,
    pub seeding: Seeding,
    pub phases: Vec<Phase>,
    pub warm_share: f64,
    pub min_reasons: u64,
    pub min_codes: usize,
    pub run_secs: f64,
}

fn secs(ms: u64) -> String {
    format!("{:.1} s", ms as f64 / 1000.0)
}

/// `hh:mm` UTC of a minute since the epoch.
fn clock(minute: u64) -> String {
    format!("{:02}:{:02}", minute / 60 % 24, minute % 60)
}

/// The counters the refresh function keeps per tenant-day, as the report names them.
const COUNTERS: [(&str, &str); 10] = [
    ("reasons", "reasons refreshed (counted by the refresh)"),
    ("recomputes", "recomputes"),
    ("pushes", "pushes"),
    ("unchanged", "pushes skipped as unchanged"),
    (
        "starved",
        "starved recomputes (nobody eligible, nothing pushed)",
    ),
    ("requeued_budget", "requeues for budget (our budget spent)"),
    (
        "requeued_throttled",
        "requeues for WeCom throttling (45009/45033)",
    ),
    ("requeued_lease", "requeues for a busy code lease"),
    ("to_slow_lane", "reasons sent to the slow lane"),
    ("slow_interval_waits", "slow-lane interval waits"),
];

/// A phase's sections. The first phase (the sandbox's limit above the budget) carries the
/// must-be lines on the reasons driven, the warm drain rate and no 45009; the later ones
/// must see 45009.
fn phase_section(out: &Lines, phase: &Phase, inputs: &Inputs<'_>, first: bool) -> Lines {
    let mut section = out.section();
    let parts = [
        phase_drive(out, phase, inputs, first),
        phase_pushes(out, phase, inputs, first),
        phase_answers(out, phase, first),
        phase_refresh_counters(out, phase),
        phase_latency_and_losses(out, phase),
    ];
    for part in parts {
        section.append(part);
    }
    section
}

fn phase_drive(out: &Lines, phase: &Phase, inputs: &Inputs<'_>, first: bool) -> Lines {
    let mut out = out.section();
    let budget = inputs.budget.per_minute;
    out.head(&format!(
        "{}: sandbox limit {}/min per corp and API, budget {budget}/min ({})",
        phase.name,
        phase.limit,
        if phase.limit > budget {
            "limit above the budget"
        } else {
            "limit below the budget"
        }
    ));
    out.line(
        "staff changes (admin PUT online/offline), rounds",
        format!(
            "{} in {} rounds over {:.0} s",
            phase.changes, phase.rounds, phase.driven_secs
        ),
    );
    out.line(
        "admin API answer p50 / p95 / max",
        quantiles(phase.admin_ms.clone(), |ms| format!("{ms} ms")),
    );
    if phase.admin_retries > 0 {
        out.note(&format!(
            "{} changes were tried again after a 5xx (the emulator's function timeout); their first tries' reasons are not counted above",
            phase.admin_retries
        ));
    }
    let reasons_line = "reasons driven (fan-out of the changes)";
    if first {
        out.must(
            &format!("{reasons_line} >= {}", inputs.min_reasons),
            phase.reasons_sent,
            phase.reasons_sent >= inputs.min_reasons,
        );
    } else {
        out.line(reasons_line, phase.reasons_sent);
    }
    out.must(
        "queues drained",
        format!("{:.0} s after the last round", phase.drain.secs),
        phase.drain.drained,
    );
    out.line(
        "phase wall time (first round to drained)",
        secs(phase.ended_ms - phase.started_ms),
    );
    out
}

fn phase_pushes(out: &Lines, phase: &Phase, inputs: &Inputs<'_>, first: bool) -> Lines {
    let mut out = out.section();
    let budget = inputs.budget.per_minute;
    let minutes = phase.per_minute();
    let warm = phase.warm();
    out.line(
        "pushes accepted by WeCom (update_contact_way ok)",
        phase.ok_calls(),
    );
    let _ = writeln!(
        out.text,
        "  pushes per wall-clock minute (UTC; * = warm, counted below):"
    );
    for (i, (minute, count)) in minutes.iter().enumerate() {
        let is_warm = i > 0 && i + 1 < minutes.len();
        let _ = writeln!(
            out.text,
            "      {} {} {:>5}  {:>5.1}% of the budget",
            clock(*minute),
            if is_warm { "*" } else { " " },
            count,
            *count as f64 * 100.0 / budget as f64
        );
    }
    let warm_rate = (!warm.is_empty())
        .then(|| warm.iter().map(|(_, c)| *c).sum::<u64>() as f64 / warm.len() as f64);
    let warm_text = warm_rate.map_or("no warm minute".into(), |r| {
        format!("{r:.0}/min = {:.1}%", r * 100.0 / budget as f64)
    });
    if first {
        out.must(
            &format!(
                "warm drain rate vs budget (>= {:.0}%)",
                inputs.warm_share * 100.0
            ),
            &warm_text,
            warm_rate.is_some_and(|r| r >= inputs.warm_share * budget as f64),
        );
    } else {
        out.line(
            &format!("warm drain rate vs budget (sandbox allows {})", phase.limit),
            &warm_text,
        );
    }
    if let Some(min) = warm.iter().map(|(_, c)| *c).min() {
        out.note(&format!(
            "{} warm minutes: all but the first and the last minute with pushes (partial: backlog building, backlog ran out); slowest warm minute {min}",
            warm.len()
        ));
    }
    out
}

fn phase_answers(out: &Lines, phase: &Phase, first: bool) -> Lines {
    let mut out = out.section();
    let throttled = phase.errcode_count(45009);
    if first {
        out.must(
            "45009 answers received (must be 0)",
            throttled,
            throttled == 0,
        );
    } else {
        out.must(
            "45009 answers received (must be > 0)",
            throttled,
            throttled > 0,
        );
    }
    let others = phase
        .calls
        .iter()
        .filter(|c| !matches!(c.errcode(), Some(0) | Some(45009)))
        .count();
    if others > 0 {
        out.line("other answers (45033, errors, dropped)", others);
    }
    out
}

fn phase_refresh_counters(out: &Lines, phase: &Phase) -> Lines {
    let mut out = out.section();
    for (name, label) in COUNTERS {
        match phase.counter(name) {
            Some(value) => out.line(label, value),
            None if name == "reasons" || name == "pushes" => {
                out.line(label, "not recorded by this stack")
            }
            None => out.line(label, "0 (not recorded by this stack)"),
        }
    }
    // Every tallied refresh read the code: the recomputes, and those put off after the
    // snapshot (budget, WeCom's throttling, a lost lease, the slow lane's interval).
    let refreshes: u64 = [
        "recomputes",
        "requeued_budget",
        "requeued_throttled",
        "requeued_lease",
        "slow_interval_waits",
    ]
    .iter()
    .filter_map(|name| phase.counter(name))
    .sum();
    match phase.counter("store_requests") {
        Some(requests) if refreshes > 0 => {
            out.line(
                "DynamoDB requests per refresh (pushed, unchanged or put off)",
                format!(
                    "{:.2} ({requests} / {refreshes})",
                    requests as f64 / refreshes as f64
                ),
            );
            if let Some(recomputes) = phase.counter("recomputes").filter(|n| *n > 0) {
                out.line(
                    "    per completed recompute (put-off refreshes included)",
                    format!("{:.2}", requests as f64 / recomputes as f64),
                );
            }
        }
        None => out.line(
            "DynamoDB requests per refresh",
            "not recorded by this stack (no store_requests counter)",
        ),
        _ => out.line("DynamoDB requests per refresh", "no refresh"),
    }
    out
}

fn phase_latency_and_losses(out: &Lines, phase: &Phase) -> Lines {
    let mut out = out.section();
    out.line(
        "reason (fact written) -> push completed p50 / p95 / max",
        quantiles(phase.latencies(), secs),
    );
    out.note("over the facts each push served (a reason coalesced into an unchanged recompute has no push)");
    let dead = phase.dead_lettered();
    out.must("dead-lettered messages (DLQ depth)", dead, dead == 0);
    if dead > 0 {
        out.note(&format!("{:?}", phase.dead_letters));
    }
    let c = &phase.convergence;
    out.must(
        "codes whose WeCom list differs from the recompute",
        format!("{} of {}", c.differ.len(), c.codes),
        c.differ.is_empty() && c.codes > 0,
    );
    if c.unverifiable > 0 {
        out.note(&format!(
            "{} codes starved and never pushed: nothing to compare",
            c.unverifiable
        ));
    }
    for line in c.differ.iter().take(5) {
        out.note(line);
    }
    out
}

/// Prints the report; true when every must-be line passed.
pub fn print(inputs: &Inputs<'_>) -> bool {
    let report = report(inputs);
    println!("{}", report.text);
    report.passed()
}

/// The report's sections, in order, and the verdict on all their must-be lines.
fn report(inputs: &Inputs<'_>) -> Lines {
    let mut out = Lines::new(56, 18);
    out.append(overview_and_seeding(&out, inputs));
    for (i, phase) in inputs.phases.iter().enumerate() {
        out.append(phase_section(&out, phase, inputs, i == 0));
    }
    let _ = writeln!(
        out.text,
        "\n  run time {:.0} s; {}",
        inputs.run_secs,
        if out.passed() {
            "every must-be line passed".to_owned()
        } else {
            format!("FAILED: {}", out.failed.join("; "))
        }
    );
    out
}

fn overview_and_seeding(out: &Lines, inputs: &Inputs<'_>) -> Lines {
    let mut out = out.section();
    let seeding = &inputs.seeding;
    let _ = writeln!(
        out.text,
        "\nqrsync bench report: tenant {}, seed {}",
        inputs.tenant, inputs.seed
    );
    let _ = writeln!(
        out.text,
        "  {} staff, {} native codes with the offline check, {} members each (each staff member on {} to {} codes)",
        inputs.staff, seeding.codes, inputs.members, inputs.seats.0, inputs.seats.1
    );
    let _ = writeln!(
        out.text,
        "  budget of the refresh function (its environment): {}/min, {}/h",
        inputs.budget.per_minute, inputs.budget.per_hour
    );
    out.head("Seeding (sandbox limits raised)");
    out.must(
        &format!(
            "codes seeded with their contact ways >= {}",
            inputs.min_codes
        ),
        seeding.codes,
        seeding.codes >= inputs.min_codes,
    );
    out.line(
        "staff / codes through the admin API",
        format!("{:.1} s / {:.1} s", seeding.staff_secs, seeding.codes_secs),
    );
    out.line(
        "the codes' first refreshes drained in",
        format!("{:.1} s", seeding.drain_secs),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn phase(calls: &[(u64, i64)]) -> Phase {
        Phase {
            name: "p".into(),
            limit: 600,
            started_ms: 0,
            ended_ms: u64::MAX,
            rounds: 1,
            changes: 1,
            reasons_sent: 1,
            driven_secs: 1.0,
            drain: Drain {
                drained: true,
                secs: 1.0,
            },
            admin_ms: Vec::new(),
            admin_retries: 0,
            tally_before: BTreeMap::from([("pushes".to_owned(), 5)]),
            tally_after: BTreeMap::from([("pushes".to_owned(), 12)]),
            calls: calls
                .iter()
                .map(|(at_ms, errcode)| Call {
                    at_ms: *at_ms,
                    request: json!({}),
                    response: json!({ "errcode": errcode }),
                })
                .collect(),
            pushes: vec![(10_000, vec![1_000, 4_000])],
            convergence: Convergence::default(),
            dead_letters: Vec::new(),
        }
    }

    #[test]
    fn warm_minutes_leave_out_the_first_and_the_last_and_count_empty_ones() {
        let p = phase(&[
            (30_000, 0),
            (61_000, 0),
            (62_000, 0),
            (63_000, 45009),
            (200_000, 0),
            (230_000, 0),
        ]);
        assert_eq!(p.per_minute(), vec![(0, 1), (1, 2), (2, 0), (3, 2)]);
        assert_eq!(p.warm(), vec![(1, 2), (2, 0)]);
        assert_eq!(p.ok_calls(), 5);
        assert_eq!(p.errcode_count(45009), 1);
    }

    #[test]
    fn counters_are_growth_and_absent_ones_are_none() {
        let p = phase(&[]);
        assert_eq!(p.counter("pushes"), Some(7));
        assert_eq!(p.counter("store_requests"), None);
        assert_eq!(p.latencies(), vec![6_000, 9_000]);
    }
}
