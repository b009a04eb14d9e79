//! What happened in each phase, measured from the outside, the must-be lines, and issue 31's
//! figures against their targets (reported, not must-be).

use crate::attribution::{attribute, Attribution, Charged, Sample, OUTCOMES};
use crate::sandbox::Call;
use crate::world::Budget;
use stack_client::report::{quantiles, thousands, Lines};
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
    /// Codes whose recompute is not what the bench's own model of the facts says (the model
    /// the burst is polled against).
    pub model_differs: usize,
    pub secs: f64,
}

/// What a phase must show.
#[derive(Debug, Clone, Copy)]
pub struct Checks {
    /// Must-be: at least this many reasons driven.
    pub min_reasons: Option<u64>,
    /// Must-be (a burst): at least this many list changes.
    pub min_burst: Option<usize>,
    /// Must-be: the warm drain rate at least this share of the budget.
    pub warm_share: Option<f64>,
    /// Must-be: WeCom answered 45009 (true: the sandbox's limit is below the budget) or never
    /// did (false).
    pub throttled: bool,
    /// Print the accepted pushes of each wall-clock minute.
    pub minutes: bool,
}

/// The fan-out burst, measured (`burst.rs`).
#[derive(Debug, Clone)]
pub struct Burst {
    pub member: String,
    /// When the admin PUT that wrote the burst's fact was sent, and when it was answered (the
    /// fact and its fan-out written).
    pub fact_ms: u64,
    pub answered_ms: u64,
    /// Codes whose WeCom list had to change (issue 31's N), of all codes.
    pub changes: usize,
    pub codes: usize,
    /// When the bench's poll first saw every list right; `None`: not before the deadline.
    pub seen_converged_ms: Option<u64>,
    /// Codes still not right at the deadline.
    pub left: usize,
    /// The first and the last update_contact_way WeCom accepted from the fact until every
    /// list was right, and how many.
    pub first_push_ms: Option<u64>,
    pub last_push_ms: Option<u64>,
    pub pushes: usize,
    pub polls: u32,
}

impl Burst {
    /// From the fact to the last push it needed, once every list is right.
    pub fn convergence_secs(&self) -> Option<f64> {
        self.seen_converged_ms?;
        let last = self.last_push_ms.unwrap_or(self.fact_ms);
        Some(last.saturating_sub(self.fact_ms) as f64 / 1000.0)
    }

    /// From the fact to the first accepted push.
    pub fn start_secs(&self) -> Option<f64> {
        Some(self.first_push_ms?.saturating_sub(self.fact_ms) as f64 / 1000.0)
    }

    /// Issue 31's bound: 1.1 x N / B minutes plus a fixed start of 5 s.
    pub fn bound_secs(&self, per_minute: u64) -> f64 {
        1.1 * self.changes as f64 * 60.0 / per_minute.max(1) as f64 + START_SECS
    }
}

/// Issue 31's fixed start: under 5 s from a burst's facts to its first push.
const START_SECS: f64 = 5.0;

#[derive(Debug, Clone)]
pub struct Phase {
    pub name: String,
    /// What the phase drove.
    pub what: String,
    /// The sandbox's update_contact_way limit per minute.
    pub limit: u64,
    pub checks: Checks,
    pub started_ms: u64,
    pub ended_ms: u64,
    /// Rounds of admin staff PUTs (a phase without rounds sends one).
    pub rounds: usize,
    /// Admin staff PUTs sent, and the reasons they fanned out to (`codes_refreshed`).
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
    /// The same counters read about once a second through the phase (`attribution`).
    pub samples: Vec<Sample>,
    /// The corp's update_contact_way calls during the phase.
    pub calls: Vec<Call>,
    /// Push log entries of the phase: (pushed at, fact times served).
    pub pushes: Vec<(u64, Vec<u64>)>,
    /// The burst's measurements (the burst phase only).
    pub burst: Option<Burst>,
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

    /// The phase's DynamoDB requests by kind of refresh (`attribution`).
    pub fn attribution(&self) -> Attribution {
        attribute(&self.samples)
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
    /// The long drive rather than the default run.
    pub long: bool,
    pub staff: usize,
    pub burst_member: Option<String>,
    pub members: usize,
    /// Codes per drawn staff member: fewest, most.
    pub seats: (usize, usize),
    pub budget: Budget,
    pub seeding: Seeding,
    pub phases: Vec<Phase>,
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

/// The kinds of refresh the report gives DynamoDB requests for: the tally's outcome counter,
/// the report's name, and issue 31's target (requests per refresh) when it sets one.
const KINDS: [(&str, &str, Option<f64>); 4] = [
    ("unchanged", "unchanged refresh", Some(4.0)),
    ("pushes", "push", Some(6.0)),
    ("requeued_budget", "refresh put off for budget", Some(2.0)),
    ("requeued_throttled", "refresh put off for 45009", None),
];

/// Issue 31's target for WCU per push.
const WCU_PER_PUSH_TARGET: u64 = 8;

/// "meets" or "misses" a target of at most `target`.
fn verdict(value: f64, target: f64) -> &'static str {
    if value <= target {
        "meets the target"
    } else {
        "misses the target"
    }
}

/// A phase's sections, with the must-be lines its checks name.
fn phase_section(out: &Lines, phase: &Phase, inputs: &Inputs<'_>) -> Lines {
    let mut section = out.section();
    let parts = [
        phase_drive(out, phase),
        phase_burst(out, phase, inputs),
        phase_pushes(out, phase, inputs),
        phase_answers(out, phase),
        phase_refresh_counters(out, phase),
        phase_latency_and_losses(out, phase),
    ];
    for part in parts {
        section.append(part);
    }
    section
}

fn phase_drive(out: &Lines, phase: &Phase) -> Lines {
    let mut out = out.section();
    out.head(&format!(
        "{}: sandbox limit {}/min per corp and API; {}",
        phase.name, phase.limit, phase.what
    ));
    out.line(
        "admin staff PUTs, rounds",
        format!(
            "{} in {} round(s) over {:.0} s",
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
    match phase.checks.min_reasons {
        Some(min) => out.must(
            &format!("{reasons_line} >= {min}"),
            phase.reasons_sent,
            phase.reasons_sent >= min,
        ),
        None => out.line(reasons_line, phase.reasons_sent),
    }
    out.must(
        "queues drained",
        format!("{:.0} s after the last change", phase.drain.secs),
        phase.drain.drained,
    );
    out.line(
        "phase wall time (first change to drained)",
        secs(phase.ended_ms - phase.started_ms),
    );
    out
}

fn phase_burst(out: &Lines, phase: &Phase, inputs: &Inputs<'_>) -> Lines {
    let mut out = out.section();
    let Some(burst) = &phase.burst else {
        return out;
    };
    let budget = inputs.budget.per_minute;
    let min = phase.checks.min_burst.unwrap_or(0);
    out.must(
        &format!("list changes the burst needs (N, codes whose list must change) >= {min}"),
        format!("{} of {}", thousands(burst.changes as u64), burst.codes),
        burst.changes >= min,
    );
    out.must(
        "every list equal to the recompute (polled every 2 s)",
        match burst.seen_converged_ms {
            Some(seen) => format!(
                "seen {} ({} polls)",
                secs(seen.saturating_sub(burst.fact_ms)),
                burst.polls
            ),
            None => format!("{} codes left", burst.left),
        },
        burst.seen_converged_ms.is_some(),
    );
    out.line(
        &format!(
            "admin PUT of the fact ({} offline) answered in",
            burst.member
        ),
        secs(burst.answered_ms.saturating_sub(burst.fact_ms)),
    );
    let bound = burst.bound_secs(budget);
    match burst.convergence_secs() {
        Some(took) => out.line(
            "convergence: the fact to the last push it needed",
            format!(
                "{took:.1} s; bound 1.1 x {} / {budget} min + 5 s = {bound:.1} s: {}",
                burst.changes,
                verdict(took, bound)
            ),
        ),
        None => out.line("convergence", "not reached before the deadline"),
    }
    match burst.start_secs() {
        Some(start) => out.line(
            "fixed start: the fact to the first push",
            format!(
                "{start:.1} s (target under {START_SECS:.0} s): {}",
                verdict(start, START_SECS)
            ),
        ),
        None => out.line("fixed start", "no push"),
    }
    out.line(
        "pushes WeCom accepted until every list was right",
        format!("{} for {} list changes", burst.pushes, burst.changes),
    );
    out
}

fn phase_pushes(out: &Lines, phase: &Phase, inputs: &Inputs<'_>) -> Lines {
    let mut out = out.section();
    let budget = inputs.budget.per_minute;
    out.line(
        "pushes accepted by WeCom (update_contact_way ok)",
        phase.ok_calls(),
    );
    if !phase.checks.minutes {
        return out;
    }
    let minutes = phase.per_minute();
    let warm = phase.warm();
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
    match phase.checks.warm_share {
        Some(share) => out.must(
            &format!("warm drain rate vs budget (>= {:.0}%)", share * 100.0),
            &warm_text,
            warm_rate.is_some_and(|r| r >= share * budget as f64),
        ),
        None => out.line(
            &format!("warm drain rate vs budget (sandbox allows {})", phase.limit),
            &warm_text,
        ),
    }
    if let Some(min) = warm.iter().map(|(_, c)| *c).min() {
        out.note(&format!(
            "{} warm minutes: all but the first and the last minute with pushes (partial: backlog building, backlog ran out); slowest warm minute {min}",
            warm.len()
        ));
    }
    out
}

fn phase_answers(out: &Lines, phase: &Phase) -> Lines {
    let mut out = out.section();
    let throttled = phase.errcode_count(45009);
    if phase.checks.throttled {
        out.must(
            "45009 answers received (must be > 0)",
            throttled,
            throttled > 0,
        );
    } else {
        out.must(
            "45009 answers received (must be 0)",
            throttled,
            throttled == 0,
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
    // Every tallied refresh read the code or was put off: the recomputes, and those put off
    // (budget, WeCom's throttling, a lost lease, the slow lane's interval).
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
                "DynamoDB requests per tallied refresh (all kinds)",
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
            kinds(&mut out, &phase.attribution());
        }
        None => out.line(
            "DynamoDB requests per refresh",
            "not recorded by this stack (no store_requests counter)",
        ),
        _ => out.line("DynamoDB requests per refresh", "no refresh"),
    }
    out
}

/// The requests per refresh of each kind found alone in a tally interval.
fn kinds(out: &mut Lines, attribution: &Attribution) {
    let mut any = false;
    for (outcome, name, _) in KINDS {
        let charged = attribution.kind(outcome);
        if let Some(per) = charged.per_refresh() {
            any = true;
            out.line(
                &format!("    per {name}"),
                format!("{per:.2} ({})", charged_text(&charged)),
            );
        }
    }
    let others: Vec<String> = attribution
        .by_kind
        .iter()
        .filter(|(kind, _)| !KINDS.iter().any(|(k, _, _)| k == kind))
        .map(|(kind, charged)| format!("{kind} {}", charged_text(charged)))
        .collect();
    if !others.is_empty() {
        out.line("    other kinds alone", others.join("; "));
    }
    if attribution.mixed.refreshes > 0 {
        out.line(
            "    in mixed tally intervals (charged to no kind)",
            charged_text(&attribution.mixed),
        );
    }
    if !any {
        out.note("no tally interval held refreshes of one kind alone");
    }
}

fn charged_text(charged: &Charged) -> String {
    format!(
        "{} requests / {} refreshes in {} tally intervals",
        thousands(charged.requests),
        thousands(charged.refreshes),
        charged.intervals
    )
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
    if c.model_differs > 0 {
        out.note(&format!(
            "{} codes' recompute differs from the bench's model of the facts (the burst's poll uses the model)",
            c.model_differs
        ));
    }
    for line in c.differ.iter().take(5) {
        out.note(line);
    }
    out
}

/// One kind's requests per refresh over the whole phases that hold it: each phase's requests
/// less its other kinds' refreshes at their one-kind figures (`one_kind`), over the phase's
/// refreshes of the kind. This charges the kind with what the one-kind intervals cannot see
/// (a put-off in the same batch as a push: the first refusal of each minute). Phases holding a
/// kind with no one-kind figure are left out; answers the figure and the phases used.
fn whole_phases<'p>(
    phases: &'p [Phase],
    kind: &str,
    one_kind: &Attribution,
) -> Option<(f64, Vec<&'p str>)> {
    let (mut requests, mut refreshes, mut used) = (0.0, 0u64, Vec::new());
    'phases: for phase in phases {
        let count = phase.counter(kind).unwrap_or(0);
        let Some(total) = phase.counter("store_requests").filter(|_| count > 0) else {
            continue;
        };
        let mut others = 0.0;
        for outcome in OUTCOMES.iter().filter(|o| **o != kind) {
            let n = phase.counter(outcome).unwrap_or(0);
            if n == 0 {
                continue;
            }
            match one_kind.kind(outcome).per_refresh() {
                Some(per) => others += n as f64 * per,
                None => continue 'phases,
            }
        }
        requests += total as f64 - others;
        refreshes += count;
        used.push(phase.name.as_str());
    }
    (refreshes > 0).then(|| (requests / refreshes as f64, used))
}

/// Issue 31's figures over the whole run, against their targets: reported, not must-be.
fn targets(out: &Lines, inputs: &Inputs<'_>) -> Lines {
    let mut out = out.section();
    out.head("Issue 31's figures (targets; reported, not must-be)");
    let mut all = Attribution::default();
    for phase in &inputs.phases {
        all.absorb(&phase.attribution());
    }
    for (outcome, name, target) in KINDS {
        let Some(target) = target else { continue };
        let charged = all.kind(outcome);
        let whole = whole_phases(&inputs.phases, outcome, &all);
        let label = format!("DynamoDB requests per {name} (target <= {target:.0})");
        // The verdict goes by the higher of the two figures.
        let figures = [charged.per_refresh(), whole.as_ref().map(|(per, _)| *per)];
        match figures.iter().flatten().copied().reduce(f64::max) {
            Some(worst) => out.line(
                &label,
                format!(
                    "{} one-kind, {} whole phases: {}",
                    figures[0].map_or("-".to_owned(), |per| format!("{per:.2}")),
                    figures[1].map_or("-".to_owned(), |per| format!("{per:.2}")),
                    verdict(worst, target)
                ),
            ),
            None => out.line(&label, "no tally interval held that kind alone"),
        }
        if charged.refreshes > 0 {
            out.note(&format!(
                "one-kind: the intervals of that kind alone, over every phase: {}",
                charged_text(&charged)
            ));
        }
        if let Some((_, used)) = whole {
            out.note(&format!(
                "whole phases: {}, each less its other kinds at their one-kind figures",
                used.join(", ")
            ));
        }
    }
    out.line(
        &format!("WCU per push (target <= {WCU_PER_PUSH_TARGET})"),
        "not measured: the tally counts requests, not capacity units",
    );
    for phase in &inputs.phases {
        let Some(burst) = &phase.burst else { continue };
        let budget = inputs.budget.per_minute;
        let bound = burst.bound_secs(budget);
        out.line(
            &format!(
                "burst convergence, N = {} at B = {budget}/min (bound {bound:.1} s)",
                burst.changes
            ),
            burst.convergence_secs().map_or_else(
                || "not converged before the deadline".to_owned(),
                |took| format!("{took:.1} s: {}", verdict(took, bound)),
            ),
        );
        out.line(
            &format!("burst fixed start (target under {START_SECS:.0} s)"),
            burst.start_secs().map_or_else(
                || "no push".to_owned(),
                |start| format!("{start:.1} s: {}", verdict(start, START_SECS)),
            ),
        );
    }
    out.line(
        "the bench's own run time (make bench adds the build, deploy and stop)",
        format!(
            "{:.0} s = {:.1} min",
            inputs.run_secs,
            inputs.run_secs / 60.0
        ),
    );
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
    let mut out = Lines::new(64, 22);
    out.append(overview_and_seeding(&out, inputs));
    for phase in &inputs.phases {
        out.append(phase_section(&out, phase, inputs));
    }
    out.append(targets(&out, inputs));
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
        "\nqrsync bench report ({}): tenant {}, seed {}",
        if inputs.long {
            "the long drive"
        } else {
            "the default run"
        },
        inputs.tenant,
        inputs.seed
    );
    let _ = writeln!(
        out.text,
        "  {} staff, {} native codes with the offline check, {} members each drawn (each drawn staff member on {} to {} codes){}",
        inputs.staff,
        seeding.codes,
        inputs.members,
        inputs.seats.0,
        inputs.seats.1,
        inputs
            .burst_member
            .as_ref()
            .map(|m| format!(", and {m} on every code"))
            .unwrap_or_default()
    );
    let _ = writeln!(
        out.text,
        "  budget of the refresh function (its environment): {}/min, {}/h",
        inputs.budget.per_minute, inputs.budget.per_hour
    );
    let _ = writeln!(
        out.text,
        "  DynamoDB requests by kind: the tenant's tally read about once a second; an interval in which one kind of refresh alone was tallied is charged to that kind"
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
            what: "a test".into(),
            limit: 600,
            checks: Checks {
                min_reasons: None,
                min_burst: None,
                warm_share: None,
                throttled: false,
                minutes: true,
            },
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
            samples: Vec::new(),
            calls: calls
                .iter()
                .map(|(at_ms, errcode)| Call {
                    at_ms: *at_ms,
                    request: json!({}),
                    response: json!({ "errcode": errcode }),
                })
                .collect(),
            pushes: vec![(10_000, vec![1_000, 4_000])],
            burst: None,
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

    fn burst(first_push_ms: Option<u64>, last_push_ms: Option<u64>, seen: Option<u64>) -> Burst {
        Burst {
            member: "staff-all".into(),
            fact_ms: 1_000,
            answered_ms: 1_400,
            changes: 2_000,
            codes: 2_000,
            seen_converged_ms: seen,
            left: 0,
            first_push_ms,
            last_push_ms,
            pushes: 2_000,
            polls: 10,
        }
    }

    #[test]
    fn the_burst_bound_is_one_point_one_times_n_over_the_budget_plus_five_seconds() {
        let b = burst(Some(3_000), Some(201_000), Some(203_000));
        // 1.1 x 2,000 / 540 a minute = 244.4 s, plus the 5 s start.
        assert!((b.bound_secs(540) - 249.444).abs() < 0.01);
        assert_eq!(b.convergence_secs(), Some(200.0));
        assert_eq!(b.start_secs(), Some(2.0));
    }

    #[test]
    fn a_burst_not_seen_converged_has_no_convergence_time_and_one_without_pushes_no_start() {
        let b = burst(None, None, None);
        assert_eq!(b.convergence_secs(), None);
        assert_eq!(b.start_secs(), None);
        assert_eq!(verdict(4.0, 4.0), "meets the target");
        assert_eq!(verdict(4.01, 4.0), "misses the target");
    }

    #[test]
    fn thousands_are_separated_by_commas() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_000), "1,000");
        assert_eq!(thousands(21_735_123), "21,735,123");
    }

    #[test]
    fn a_kind_over_whole_phases_is_charged_what_the_other_kinds_do_not_cost_at_their_one_kind_figures(
    ) {
        let counters = |pairs: &[(&str, u64)]| -> BTreeMap<String, u64> {
            pairs.iter().map(|(k, n)| ((*k).to_owned(), *n)).collect()
        };
        let mut burst = phase(&[]);
        burst.name = "burst".into();
        burst.tally_before = BTreeMap::new();
        burst.tally_after = counters(&[
            ("pushes", 10),
            ("requeued_budget", 20),
            ("store_requests", 80),
        ]);
        let mut throttled = phase(&[]);
        throttled.name = "45009".into();
        throttled.tally_before = BTreeMap::new();
        throttled.tally_after = counters(&[
            ("requeued_throttled", 5),
            ("requeued_budget", 5),
            ("store_requests", 50),
        ]);
        let mut one_kind = Attribution::default();
        one_kind.by_kind.insert(
            "pushes".into(),
            Charged {
                refreshes: 2,
                requests: 12,
                intervals: 1,
            },
        );
        let phases = [burst, throttled];
        // (80 - 10 x 6) / 20; the 45009 phase has no one-kind figure for its throttled ones.
        assert_eq!(
            whole_phases(&phases, "requeued_budget", &one_kind),
            Some((1.0, vec!["burst"]))
        );
        assert_eq!(whole_phases(&phases, "unchanged", &one_kind), None);
    }
}
