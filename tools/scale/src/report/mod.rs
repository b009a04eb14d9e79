//! The stretch's report: staleness, routing, the work done, saturation over time, and the
//! month's cost at list prices, as text an operator reads top to bottom; the chart is drawn
//! beside it (`chart`).

pub mod chart;
mod month;
mod waves;

pub use month::{month_parts, month_usage, MonthFunction, MonthParts, MonthScale};
pub use waves::{Baseline, Driver, Edge, Wave};

use crate::cost::{month_cost, PRICES_AS_OF, REGION};
use crate::measure::Measure;
use crate::run::Outcome;
use crate::services::dynamodb::Peak;
use crate::show::thousands;
use domain::ids::TenantId;
use std::collections::BTreeMap;
use std::fmt::Write;

/// The report's text. `chart` names the image drawn beside it, if one was.
pub fn render(outcome: &Outcome, scale: &MonthScale, chart: Option<&str>, about: &str) -> String {
    let mut out = String::new();
    let o = outcome;
    let _ = writeln!(
        out,
        "qrsync-scale: a simulated stretch of the campaign day\n"
    );
    let _ = writeln!(out, "{about}");
    let _ = writeln!(
        out,
        "world: {} tenants, {} codes, {} staff (loaded in {:.0} s); seed {}",
        thousands(o.tenants as u64),
        thousands(o.codes),
        thousands(o.staff),
        o.load_seconds,
        o.seed
    );
    let h = &o.happened;
    let _ = writeln!(
        out,
        "happened: {} scans ({} on codes WeCom routes nowhere), {} adds, {} breaks, {} resignations, {} department moves; callbacks retried {}, lost {}; admin calls failed {}",
        thousands(h.scans),
        thousands(h.scans_nowhere),
        thousands(h.adds),
        thousands(h.breaks),
        thousands(h.resignations),
        thousands(h.moves),
        thousands(h.callbacks_retried),
        thousands(h.callbacks_lost),
        thousands(h.admin_failures)
    );
    let _ = writeln!(
        out,
        "run: {:.0} s of wall time, peak resident memory {:.1} GB\n",
        o.wall_seconds,
        o.peak_resident_bytes as f64 / 1e9
    );
    if let Some(stopped) = &o.stopped {
        let _ = writeln!(out, "NOTE: the run {stopped}\n");
    }

    let _ = writeln!(
        out,
        "## Staleness: from each fact to WeCom holding a list recomputed from it\n"
    );
    let _ = writeln!(
        out,
        "{:<9} {:>10} {:>11} {:>9} {:>9} {:>9} {:>9} {:>11} {:>13}",
        "class", "facts", "resolved", "p50", "p95", "p99", "max", "waiting", "oldest waits"
    );
    let mut all_resolved = Vec::new();
    let mut all_waiting = Vec::new();
    for (name, figures) in o.class_names.iter().zip(&o.measure.classes) {
        all_resolved.extend_from_slice(&figures.staleness_ms);
        all_waiting.extend_from_slice(&figures.waiting_ms);
        staleness_row(&mut out, name, &figures.staleness_ms, &figures.waiting_ms);
    }
    staleness_row(&mut out, "all", &all_resolved, &all_waiting);
    for (name, figures) in ["in budget", "over"].iter().zip(&o.measure.by_budget) {
        staleness_row(&mut out, name, &figures.staleness_ms, &figures.waiting_ms);
    }
    let [within, over] = &o.measure.by_budget;
    let _ = writeln!(
        out,
        "  (percentiles count a fact still waiting at the end with its age then: a lower bound;\n   in budget: the {} tenants whose codes all fit one minute of their WeCom budget, over: the {} others)",
        thousands(within.tenants),
        thousands(over.tenants)
    );
    over_budget_bound(&mut out, &o.measure);

    let _ = writeln!(out, "## Routing\n");
    let _ = writeln!(
        out,
        "{:<8} {:>11} {:>30} {:>8} {:>22} {:>16}",
        "class",
        "scans",
        "to staff no longer eligible",
        "share",
        "of them after the push",
        "on starved codes"
    );
    let mut all = crate::measure::ClassFigures::default();
    for (name, figures) in o.class_names.iter().zip(&o.measure.classes) {
        all.scans += figures.scans;
        all.misrouted += figures.misrouted;
        all.misrouted_after_push += figures.misrouted_after_push;
        all.on_starved += figures.on_starved;
        routing_row(&mut out, name, figures);
    }
    routing_row(&mut out, "all", &all);
    let _ = writeln!(
        out,
        "(after the push: no fact of the code was waiting, so WeCom held a list pushed after every change;\n on starved codes: nobody eligible and no fallback, so WeCom keeps the last list, as it cannot hold none)"
    );
    let _ = writeln!(
        out,
        "\nend of stretch (after settling): {} codes checked, {} whose WeCom list differs from the recompute of the true facts\n",
        thousands(o.checked),
        thousands(o.differ)
    );

    let _ = writeln!(out, "## Work done\n");
    let _ = writeln!(
        out,
        "{:<8} {:>10} {:>10} {:>9} {:>10} {:>8} {:>10} {:>10} {:>8} {:>9} {:>9}",
        "class",
        "reasons",
        "recomputes",
        "pushes",
        "unchanged",
        "starved",
        "put off",
        "45009/33",
        "lease",
        "to slow",
        "slow wait"
    );
    for (name, figures) in o.class_names.iter().zip(&o.measure.classes) {
        let t = &figures.refreshes;
        let _ = writeln!(
            out,
            "{:<8} {:>10} {:>10} {:>9} {:>10} {:>8} {:>10} {:>10} {:>8} {:>9} {:>9}",
            name,
            thousands(u64::from(t.reasons)),
            thousands(u64::from(t.recomputes)),
            thousands(u64::from(t.pushes)),
            thousands(u64::from(t.unchanged)),
            thousands(u64::from(t.starved)),
            thousands(u64::from(t.requeued_budget)),
            thousands(u64::from(t.requeued_throttled)),
            thousands(u64::from(t.requeued_lease)),
            thousands(u64::from(t.to_slow_lane)),
            thousands(u64::from(t.slow_interval_waits))
        );
    }
    let _ = writeln!(
        out,
        "  (the refresh function's own tally: put off = its tenant's budget spent)\n"
    );
    let _ = writeln!(
        out,
        "lists WeCom took: {}; WeCom calls accepted: {}; refused (45009) by window: {}",
        thousands(o.measure.lists_landed),
        thousands(o.wecom.accepted),
        if o.wecom.refused_by_window.is_empty() {
            "none".to_owned()
        } else {
            o.wecom
                .refused_by_window
                .iter()
                .map(|(w, n)| format!("{w:?} {}", thousands(*n)))
                .collect::<Vec<_>>()
                .join(", ")
        }
    );
    let refused: Vec<String> = o
        .class_names
        .iter()
        .zip(&o.refused_by_class)
        .filter(|(_, (tenants, _))| *tenants > 0)
        .map(|(name, (tenants, answers))| {
            format!(
                "{name} {} tenants, {} answers",
                thousands(*tenants),
                thousands(*answers)
            )
        })
        .collect();
    let _ = writeln!(
        out,
        "45009 by tenant (corp window or the corp's share of its IP's): {}",
        if refused.is_empty() {
            "none".to_owned()
        } else {
            refused.join("; ")
        }
    );
    let _ = writeln!(
        out,
        "\n{:<26} {:>11} {:>8} {:>9} {:>10} {:>9} {:>10}",
        "function", "invocations", "cold", "timeouts", "throttles", "peak conc", "GB-s"
    );
    for ((name, counters), (_, concurrency)) in o.functions.iter().zip(&o.concurrency) {
        if counters.invocations == 0 && counters.throttles == 0 {
            continue;
        }
        let peak = concurrency.iter().map(|(_, c)| *c).max().unwrap_or(0);
        let _ = writeln!(
            out,
            "{:<26} {:>11} {:>8} {:>9} {:>10} {:>9} {:>10.0}",
            name,
            thousands(counters.invocations),
            thousands(counters.cold_starts),
            thousands(counters.timeouts),
            thousands(counters.throttles),
            peak,
            counters.gb_seconds()
        );
    }
    let _ = writeln!(
        out,
        "\n{:<34} {:>10} {:>10} {:>10} {:>11} {:>12} {:>10}",
        "queue", "sent", "received", "deleted", "peak depth", "peak oldest", "at end"
    );
    for ((name, counters), (_, samples)) in o.queues.iter().zip(&o.depths) {
        if counters.messages_sent == 0 && counters.receive_requests == 0 {
            continue;
        }
        let depth = |s: &crate::services::sqs::QueueSample| s.visible + s.in_flight + s.delayed;
        let peak = samples.iter().map(depth).max().unwrap_or(0);
        let oldest = samples
            .iter()
            .map(|s| s.oldest_age)
            .max()
            .unwrap_or_default();
        let last = samples.last().map(depth).unwrap_or(0);
        let _ = writeln!(
            out,
            "{:<34} {:>10} {:>10} {:>10} {:>11} {:>12} {:>10}",
            name,
            thousands(counters.messages_sent),
            thousands(counters.messages_received),
            thousands(counters.messages_deleted),
            thousands(peak as u64),
            duration(oldest.as_millis() as u64),
            thousands(last as u64)
        );
    }
    let d = &o.dynamo;
    let _ = writeln!(
        out,
        "\nDynamoDB: {:.0} read units, {} write units, {} throttled attempts, {} requests failed after the SDK's retries, {} transaction conflicts, {} partition splits ({} shared partitions split in two, {} for hot keys)",
        d.read_units(),
        thousands(d.write_units),
        thousands(d.throttled_attempts),
        thousands(d.failed_requests),
        thousands(d.conflicts),
        o.splits.total(),
        o.splits.shared,
        o.splits.keys
    );
    let (recomputes, pushes) = o.measure.classes.iter().fold((0u64, 0u64), |(r, p), f| {
        (
            r + u64::from(f.refreshes.recomputes),
            p + u64::from(f.refreshes.pushes),
        )
    });
    if recomputes > 0 && pushes > 0 {
        // Every unit counts, facts and sweeps included: what the refresh path's share costs
        // per unit of its work, for comparing one step with the next.
        let _ = writeln!(
            out,
            "  per recompute {:.1} read units; per push {:.1} write units (every unit of the stretch over the refresh's recomputes and pushes)",
            d.read_units() / recomputes as f64,
            d.write_units as f64 / pushes as f64
        );
    }
    let _ = writeln!(out, "{}", units_by_kind(&o.dynamo_by_kind));
    let c = &o.dynamo_config;
    let _ = writeln!(
        out,
        "  warm throughput: the table {} reads and {} writes a second ({} partitions), each index {} and {} ({} partitions)",
        thousands(c.table.read_units_per_second),
        thousands(c.table.write_units_per_second),
        c.table.partitions(),
        thousands(c.index.read_units_per_second),
        thousands(c.index.write_units_per_second),
        c.index.partitions()
    );
    let peaks: Vec<String> = o
        .dynamo_peaks
        .iter()
        .map(|(space, peak)| {
            let quota = c.quota(space);
            format!(
                "{space} {} read and {} write units (quota {} and {})",
                thousands(peak.read_units().ceil() as u64),
                thousands(peak.write_units),
                thousands(quota.read_units_per_second),
                thousands(quota.write_units_per_second)
            )
        })
        .collect();
    if !peaks.is_empty() {
        let _ = writeln!(out, "  most served in one second: {}", peaks.join("; "));
    }
    let mut throttled: Vec<_> = o.throttles.iter().collect();
    throttled.sort_by(|a, b| b.1.cmp(a.1));
    // The quota's throttles are a handful of lines at most (the table and each index) and say
    // the table as a whole ran out, so they show whatever the hot keys' counts.
    let (quota, keys): (Vec<_>, Vec<_>) = throttled.into_iter().partition(|(p, _)| p.is_quota());
    for (pattern, count) in quota.iter().chain(keys.iter().take(8)) {
        let _ = writeln!(
            out,
            "  throttled on {} / {}: {}",
            pattern.pk,
            pattern.sk,
            thousands(**count)
        );
    }
    let behind = o.timeline.iter().map(|t| t.1).max().unwrap_or(0);
    let behind_at_end = o.timeline.last().map_or(0, |t| t.1);
    let _ = writeln!(
        out,
        "\ntick: the cursor at most {behind} minutes behind the clock, {behind_at_end} at the end of the stretch"
    );
    for (name, counters) in &o.schedules {
        let _ = writeln!(
            out,
            "  {name}: {} firings, {} runs, {} timed out, {} throttled, {} dropped",
            counters.firings,
            counters.runs,
            counters.timed_out_runs,
            counters.throttled,
            counters.dropped
        );
    }

    sweep_lines(&mut out, o);

    month_lines(&mut out, o, scale);
    if let Some(chart) = chart {
        let _ = writeln!(
            out,
            "\nchart: {chart} (facts waiting and the oldest's age, queue depths, the tick's minutes behind, DynamoDB throttles, per minute)"
        );
    }
    out
}

/// The month at list prices: the total and what drives it, the largest lines, and the work
/// the stretch left queued.
fn month_lines(out: &mut String, o: &Outcome, scale: &MonthScale) {
    let parts = month_parts(o, scale);
    let cost = month_cost(&parts.total());
    let continuous = month_cost(&parts.continuous).total_usd;
    let shift_edges = month_cost(&parts.shift_edges).total_usd;
    let midnights = month_cost(&parts.midnights).total_usd;
    let _ = writeln!(
        out,
        "\n## A month at list prices ({REGION}, prices as of {PRICES_AS_OF})\n\n{}\n",
        scale.explain()
    );
    let _ = writeln!(
        out,
        "total ${:.0} a month: the day's activity ${continuous:.0}, the waves ${:.0} (shift edges ${shift_edges:.0}, midnights ${midnights:.0}); per tenant-month ${:.3}; per million scans ${:.0}",
        cost.total_usd,
        shift_edges + midnights,
        cost.per_tenant_month_usd.unwrap_or(0.0),
        cost.per_million_scans_usd.unwrap_or(0.0)
    );
    for line in cost.top(8) {
        let _ = writeln!(
            out,
            "  {:<12} {:<42} ${:>9.0}  ({:.3e} {})",
            line.service, line.what, line.usd, line.quantity, line.unit
        );
    }
    if parts.unfinished_messages > 0 {
        let waves = shift_edges + midnights;
        // What the backlog would have cost to finish, at what the waves' handled messages
        // cost: rough (a queued fan-out is many refreshes), so beside the total, not in it.
        let estimate = if waves > 0.0 && parts.wave_messages_handled > 0.0 {
            format!(
                "; at the waves' cost per message handled, finishing it would add about ${:.0} a month",
                waves * parts.unfinished_per_month / parts.wave_messages_handled
            )
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "  not counted: {} messages still queued at the end in the queues the functions consume; an unfinished wave understates the waves' cost{estimate}",
            thousands(parts.unfinished_messages)
        );
    }
}

/// The sweep's coverage: what its runs read back in the stretch, and how long reading back
/// every code takes at that rate.
fn sweep_lines(out: &mut String, o: &Outcome) {
    let s = &o.sweep;
    let _ = writeln!(
        out,
        "\nsweep: {} runs ({} found the lease held, {} ran out of time); {} tenant samples of {} tenants; {} contact ways read back, {} differing, {} repairs started, {} resyncs sent",
        s.runs,
        s.held_elsewhere,
        s.out_of_time,
        thousands(s.tenants_sampled),
        thousands(o.tenants as u64),
        thousands(s.read_back),
        thousands(s.differing),
        thousands(s.repairs_started),
        thousands(s.resyncs_sent)
    );
    let stretch_ms = o.settled_ms.saturating_sub(o.start_ms).max(1);
    if s.read_back > 0 {
        let full_ms = o.codes as f64 / s.read_back as f64 * stretch_ms as f64;
        let _ = writeln!(
            out,
            "  coverage: {:.3}% of the {} codes read back in the stretch; at that rate every code once in {}",
            100.0 * s.read_back as f64 / o.codes.max(1) as f64,
            thousands(o.codes),
            duration(full_ms as u64)
        );
    } else {
        let _ = writeln!(out, "  coverage: no contact way read back in the stretch");
    }
}

/// Every tenant's own staleness, one line each, by tenant id (`<out>.tenants.csv`).
pub fn tenants_csv(o: &Outcome) -> String {
    let mut rows: Vec<_> = o.measure.tenants.iter().collect();
    rows.sort_by(|a, b| a.0.cmp(b.0));
    crate::measure::tenants_csv(rows.into_iter().map(|(tenant, staleness)| {
        let class = o
            .measure
            .class_of(tenant)
            .and_then(|c| o.class_names.get(c))
            .map_or("?", String::as_str);
        crate::measure::TenantLine {
            tenant: tenant.as_str(),
            class,
            over_budget: o.measure.is_over_budget(tenant),
            campaign: o.campaign_tenants.contains(tenant),
            staleness,
        }
    }))
}

/// The over-budget tenants whose latest-resolved fact came within 1.1 x (their list changes /
/// the budget) + 5 s, and the one furthest past it. The changes are the lists WeCom took, so
/// with facts still waiting the bound is a lower one. A tenant with more codes than its budget
/// pushes in an hour is counted apart: a wave of its codes meets the hour's window, and what is
/// past it waits for the next UTC hour, so the per-minute bound cannot hold for it.
fn over_budget_bound(out: &mut String, measure: &Measure) {
    let per_minute = measure.budget_per_minute;
    let mut within = 0;
    let mut over = 0;
    let mut past_the_hour = (0, 0);
    let mut worst: Option<(f64, &TenantId, u32, u64)> = None;
    for (tenant, staleness) in &measure.tenants {
        if !measure.is_over_budget(tenant) {
            continue;
        }
        let bound = staleness.over_budget_bound_ms(per_minute);
        let max = staleness.max_ms;
        let is_within = u64::from(max) <= bound;
        if measure.is_past_the_hour(tenant) {
            past_the_hour.0 += usize::from(is_within);
            past_the_hour.1 += 1;
            continue;
        }
        over += 1;
        within += usize::from(is_within);
        let ratio = f64::from(max) / bound as f64;
        if worst.is_none_or(|(r, ..)| ratio > r) {
            worst = Some((ratio, tenant, max, bound));
        }
    }
    let _ = write!(
        out,
        "  over budget, within 1.1 x (list changes / {per_minute} a minute) + 5 s: {within} of {over} tenants"
    );
    if let Some((ratio, tenant, max, bound)) = worst {
        let _ = write!(
            out,
            "; furthest: {tenant}, max {:.0} s against {:.0} s ({ratio:.1} x)",
            f64::from(max) / 1000.0,
            bound as f64 / 1000.0
        );
    }
    if past_the_hour.1 > 0 {
        let _ = write!(
            out,
            "\n  over an hour's budget ({} lists): {} tenants, {} within the bound (what is past the hour waits for the next)",
            thousands(u64::from(measure.budget_per_hour)),
            past_the_hour.1,
            past_the_hour.0
        );
    }
    let _ = writeln!(out, "\n");
}

fn staleness_row(out: &mut String, name: &str, resolved: &[u32], waiting: &[u32]) {
    let mut all: Vec<u32> = resolved.iter().chain(waiting).copied().collect();
    all.sort_unstable();
    let at = |q: f64| -> String {
        if all.is_empty() {
            return "-".into();
        }
        let index = ((all.len() as f64 * q).ceil() as usize).clamp(1, all.len()) - 1;
        duration(u64::from(all[index]))
    };
    let oldest = waiting
        .iter()
        .max()
        .map_or("-".into(), |w| duration(u64::from(*w)));
    let _ = writeln!(
        out,
        "{:<9} {:>10} {:>11} {:>9} {:>9} {:>9} {:>9} {:>11} {:>13}",
        name,
        thousands(all.len() as u64),
        thousands(resolved.len() as u64),
        at(0.50),
        at(0.95),
        at(0.99),
        at(1.0),
        thousands(waiting.len() as u64),
        oldest
    );
}

fn routing_row(out: &mut String, name: &str, figures: &crate::measure::ClassFigures) {
    let share = if figures.scans == 0 {
        0.0
    } else {
        figures.misrouted as f64 / figures.scans as f64 * 100.0
    };
    let _ = writeln!(
        out,
        "{:<8} {:>11} {:>30} {:>7.2}% {:>22} {:>16}",
        name,
        thousands(figures.scans),
        thousands(figures.misrouted),
        share,
        thousands(figures.misrouted_after_push),
        thousands(figures.on_starved)
    );
}

/// Milliseconds as the largest sensible unit.
pub fn duration(ms: u64) -> String {
    if ms < 1_000 {
        format!("{ms} ms")
    } else if ms < 120_000 {
        format!("{:.1} s", ms as f64 / 1000.0)
    } else if ms < 7_200_000 {
        format!("{:.1} min", ms as f64 / 60_000.0)
    } else {
        format!("{:.1} h", ms as f64 / 3_600_000.0)
    }
}

/// Where the units went: the kinds of item that took at least 1% of the stretch's read or
/// write units, the busiest first.
fn units_by_kind(by_kind: &BTreeMap<String, Peak>) -> String {
    let reads: u64 = by_kind.values().map(|units| units.read_half_units).sum();
    let writes: u64 = by_kind.values().map(|units| units.write_units).sum();
    let share = |part: u64, whole: u64| {
        if whole == 0 {
            0.0
        } else {
            part as f64 * 100.0 / whole as f64
        }
    };
    let mut kinds: Vec<(&String, &Peak)> = by_kind
        .iter()
        .filter(|(_, units)| {
            share(units.read_half_units, reads) >= 1.0 || share(units.write_units, writes) >= 1.0
        })
        .collect();
    kinds.sort_by_key(|(_, units)| {
        std::cmp::Reverse(units.read_half_units * 2 + units.write_units * 10)
    });
    let mut out = String::from("  units by kind of item (at least 1% of reads or writes):");
    for (kind, units) in kinds {
        out.push_str(&format!(
            "\n    {kind:<32} {:>14} read units ({:>4.1}%) {:>12} write units ({:>4.1}%)",
            thousands(units.read_units().round() as u64),
            share(units.read_half_units, reads),
            thousands(units.write_units),
            share(units.write_units, writes)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_with_separators_and_durations_in_their_unit() {
        assert_eq!(thousands(6_086_958), "6,086,958");
        assert_eq!(thousands(999), "999");
        assert_eq!(duration(450), "450 ms");
        assert_eq!(duration(90_000), "90.0 s");
        assert_eq!(duration(600_000), "10.0 min");
        assert_eq!(duration(9_000_000), "2.5 h");
    }

    fn over_budget_tenant(measure: &mut Measure, id: &str, codes: u64, lists: u64, max_s: u32) {
        let tenant = TenantId::parse(id).expect("valid");
        measure.tenant(&tenant, 0, codes);
        let staleness = measure.tenants.entry(tenant).or_default();
        staleness.add(max_s * 1000);
        staleness.lists_landed = lists;
    }

    #[test]
    fn a_tenant_with_more_codes_than_an_hours_budget_is_counted_apart_from_the_bound() {
        let mut measure = Measure::new(0, 1, |_| None).with_budget(9_000, 135_000);
        // 18,000 lists at 9,000 a minute: bound 1.1 x 2 min + 5 s = 137 s.
        over_budget_tenant(&mut measure, "within", 20_000, 18_000, 130);
        over_budget_tenant(&mut measure, "late", 20_000, 18_000, 300);
        // 135,000 lists in the hour, the rest of 200,000 codes waiting for the next one.
        over_budget_tenant(&mut measure, "giant", 200_000, 135_000, 1_800);
        let mut out = String::new();
        over_budget_bound(&mut out, &measure);
        assert!(
            out.contains("+ 5 s: 1 of 2 tenants; furthest: late, max 300 s against 137 s"),
            "{out}"
        );
        assert!(
            out.contains("over an hour's budget (135,000 lists): 1 tenants, 0 within the bound"),
            "{out}"
        );
    }
}
