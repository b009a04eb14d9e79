//! `qrsync-ops plan`: the capacity planner (the model is `qrsync_scale::plan`). A tenant's seats
//! come from the deployed table (`--tenant`: the tenant's code configurations and the
//! departments they list, read-only, paginated, bounded), from a profile on the command line (`--synthetic`)
//! or are the bench's (`--bench`); the budget, lanes and sweep from `template.yaml`, as the
//! simulation reads them. With `--bench` the one-tenant prediction is the simulation's own run
//! of the bench (`qrsync_scale::plan::simulated`, the deployment's functions under virtual
//! time), printed before the count model's replay.

use crate::ops::Ops;
use adapters::dynamodb::DynamoStore;
use anyhow::{anyhow, bail, Result};
use domain::ids::{CodeId, DepartmentId, TenantId};
use domain::membership::CodeConfig;
use qrsync_scale::plan::{
    self, bench, seats::TenantSeats, simulated, synthetic::Synthetic, CampaignInput,
};
use qrsync_scale::profile::Profile;
use qrsync_scale::settings::{parse_override, Settings};
use std::collections::BTreeSet;
use std::path::PathBuf;

/// A giant's indexes hold about 3M seats; the default leaves room, the ceiling keeps a read
/// to a few GB of memory at most.
const DEFAULT_MAX_ITEMS: u64 = 5_000_000;
const MAX_ITEMS_CEILING: u64 = 50_000_000;

#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("source").required(true).args(["tenant", "synthetic", "bench"])))]
pub struct Args {
    /// A tenant of the deployed stack: its seats read from the table.
    #[arg(long)]
    tenant: Option<String>,
    /// A synthetic tenant: codes=N,staff=N (or codes-per-staff=N),members=N or LOW-HIGH,
    /// departments=N,seed=N; drawn with the simulation's generator.
    #[arg(long, value_name = "SPEC")]
    synthetic: Option<String>,
    /// `make bench`'s tenant and phase 1, predicted, next to the bench's recorded figures.
    #[arg(long)]
    bench: bool,
    /// Plan a campaign of this many scans a second on the tenant...
    #[arg(long, value_name = "SCANS")]
    campaign_scans_per_second: Option<f64>,
    /// ...of which this percentage cross a limit (daily, add or company cap).
    #[arg(long, default_value_t = 1.0, value_name = "PERCENT")]
    crossing_percent: f64,
    /// Time one refresh takes per code (WeCom's call and the table's requests); default: the
    /// simulation's assumed WeCom median.
    #[arg(long)]
    seconds_per_code: Option<f64>,
    /// Replace a template parameter's default, as deployed (`WeComBudgetPerMinute=540`).
    #[arg(long = "parameter", value_name = "NAME=VALUE", value_parser = parse_override)]
    parameters: Vec<(String, String)>,
    /// The template the budget, lanes and sweep are read from.
    #[arg(long, value_name = "PATH")]
    template: Option<PathBuf>,
    /// With --tenant: refuse a tenant whose indexes hold more items than this.
    #[arg(long, default_value_t = DEFAULT_MAX_ITEMS)]
    max_items: u64,
}

pub async fn run(args: Args, stack: &str, api_url: Option<&str>, json: bool) -> Result<()> {
    let campaign = args
        .campaign_scans_per_second
        .map(|scans| CampaignInput::new(scans, args.crossing_percent))
        .transpose()
        .map_err(|e| anyhow!(e))?;
    if !(1..=MAX_ITEMS_CEILING).contains(&args.max_items) {
        bail!(
            "--max-items: {} is outside 1 to {MAX_ITEMS_CEILING}",
            args.max_items
        );
    }
    let seconds_per_code = args
        .seconds_per_code
        .unwrap_or_else(plan::default_seconds_per_code);
    let mut overrides = Vec::new();
    if args.bench {
        overrides
            .extend(bench::budget_overrides(&bench::project_makefile()).map_err(|e| anyhow!(e))?);
    }
    overrides.extend(args.parameters.iter().cloned());
    let settings = match &args.template {
        Some(path) => Settings::read_file(path, &overrides),
        None => Settings::read_project(&overrides),
    }
    .map_err(|e| anyhow!("{e}"))?;
    let inputs = plan::Inputs::from_settings(&settings, seconds_per_code, campaign)
        .map_err(|e| anyhow!(e))?;
    let profile = Profile::load_default().map_err(|e| anyhow!("{e}"))?;

    let (source, seats) = if let Some(tenant) = &args.tenant {
        let tenant = TenantId::parse(tenant).map_err(|e| anyhow!("--tenant: {e}"))?;
        let ops = Ops::connect(stack, api_url, json).await?;
        let table = ops.table()?.to_owned();
        let (seats, items) = read_seats(&ops, &table, &tenant, args.max_items).await?;
        (
            format!(
                "tenant {tenant} (table {table}, {items} codes and departments read)",
                items = qrsync_scale::show::thousands(items)
            ),
            seats,
        )
    } else if let Some(spec) = &args.synthetic {
        let synthetic = Synthetic::parse(spec).map_err(|e| anyhow!(e))?;
        (
            synthetic.describe(),
            TenantSeats::from_figures(&profile, &synthetic.tenant()),
        )
    } else {
        let tenant = bench::tenant(bench::seed());
        (
            "make bench's tenant (tools/bench/src/scenario.rs; the simulation's generator)"
                .to_owned(),
            TenantSeats::from_figures(&profile, &tenant),
        )
    };
    let budget = inputs.budget;
    // The bench's tenant and phase 1 through the simulated deployment: the same model as
    // `qrsync-scale` (the domain's own functions on the simulated services).
    let simulated = if args.bench {
        let settings = settings.clone();
        Some(tokio::task::spawn_blocking(move || simulated::phases_on(settings, true)).await??)
    } else {
        None
    };
    let planned = plan::plan(&source, &seats, inputs);
    let replayed = if args.bench {
        Some(
            bench::replay(
                &profile,
                &bench::tenant(bench::seed()),
                bench::Drive::phase_one(),
                budget,
            )
            .map_err(|e| anyhow!(e))?,
        )
    } else {
        None
    };
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&as_json(
                &planned,
                replayed.as_ref(),
                simulated.as_ref()
            ))?
        );
    } else {
        print!("{planned}");
        if let Some(simulated) = &simulated {
            print!("\n{}", simulated::comparison_text(simulated));
        }
        if let Some(replayed) = &replayed {
            print!("{}", bench_text(replayed, budget));
        }
    }
    Ok(())
}

fn as_json(
    planned: &plan::Plan,
    replayed: Option<&bench::Prediction>,
    simulated: Option<&simulated::Simulated>,
) -> serde_json::Value {
    let d = &planned.distribution;
    let drain = |d: &plan::arithmetic::Drain| serde_json::json!({ "pushes": d.pushes, "minutes": d.minutes, "hour_binds": d.hour_binds });
    serde_json::json!({
        "source": planned.source,
        "codes": planned.codes,
        "staff": planned.staff,
        "departments": planned.departments,
        "budget": { "per_minute": planned.inputs.budget.per_minute, "per_hour": planned.inputs.budget.per_hour },
        "codes_per_staff": {
            "min": d.min, "p50": d.p50, "p90": d.p90, "p99": d.p99, "max": d.max, "mean": d.mean,
            "buckets": d.buckets.iter().map(|(low, high, staff)| serde_json::json!({ "low": low, "high": high, "staff": staff })).collect::<Vec<_>>(),
        },
        "worst_staff_change": drain(&planned.worst_change),
        "median_staff_change": drain(&planned.typical_change),
        "resync": drain(&planned.resync),
        "campaign": planned.campaign.map(|c| serde_json::json!({
            "scans_per_second": c.scans_per_second,
            "crossing_share": c.crossing_share,
            "mean_pushes_per_minute": c.mean_per_minute,
            "worst_pushes_per_minute": c.worst_per_minute,
            "mean_pushes_per_hour": c.mean_per_hour,
        })),
        "sweep": { "reads_per_run": planned.sweep.per_run, "runs": planned.sweep.runs, "minutes": planned.sweep.minutes },
        "lanes_codes_per_minute": {
            "fast": planned.inputs.fast_lane.codes_per_minute(),
            "slow": planned.inputs.slow_lane.codes_per_minute(),
        },
        "bench_simulated": simulated.map(|s| serde_json::json!({
            "predicted": {
                "minutes": s.phase_minutes, "pushes_per_warm_minute": s.pushes_per_warm_minute,
                "warm_minutes": s.warm_minutes, "reasons": s.reasons_sent, "pushes": s.tally.pushes,
                "unchanged": s.tally.unchanged, "requeued_budget": s.tally.requeued_budget,
                "per_minute": s.per_minute, "codes_differing": s.differ,
            },
            "phase_two": s.phase_two.as_ref().map(|two| serde_json::json!({
                "minutes": two.measured.minutes, "pushes_per_warm_minute": two.measured.pushes_per_warm_minute,
                "reasons": two.measured.reasons_sent, "pushes": two.measured.tally.pushes,
                "refused_45009": two.refused_45009, "per_minute": two.measured.per_minute,
                "codes_differing": two.differ,
                "recorded": { "minutes": simulated::RECORDED_PHASE_TWO.phase_minutes, "pushes_per_warm_minute": simulated::RECORDED_PHASE_TWO.pushes_per_warm_minute, "reasons": simulated::RECORDED_PHASE_TWO.reasons, "pushes": simulated::RECORDED_PHASE_TWO.pushes },
            })),
            "recorded": { "minutes": bench::RECORDED.phase_minutes, "pushes_per_warm_minute": bench::RECORDED.pushes_per_warm_minute, "reasons": bench::RECORDED.reasons, "pushes": bench::RECORDED.pushes, "unchanged": bench::RECORDED.unchanged },
        })),
        "bench": replayed.map(|p| serde_json::json!({
            "predicted": { "minutes": p.minutes, "pushes_per_warm_minute": p.pushes_per_warm_minute, "reasons": p.reasons, "pushes": p.pushes, "unchanged": p.unchanged },
            "recorded": { "minutes": bench::RECORDED.phase_minutes, "pushes_per_warm_minute": bench::RECORDED.pushes_per_warm_minute, "reasons": bench::RECORDED.reasons, "pushes": bench::RECORDED.pushes, "unchanged": bench::RECORDED.unchanged },
        })),
    })
}

fn bench_text(p: &bench::Prediction, budget: domain::budget::BudgetLimits) -> String {
    use qrsync_scale::show::thousands;
    let r = bench::RECORDED;
    let row = |name: &str, predicted: String, recorded: String, off: f64| {
        format!("  {name:<34} {predicted:>12} {recorded:>12} {off:>+9.1}%\n")
    };
    let mut out = String::new();
    out.push_str(&format!(
        "\nmake bench, phase 1, replayed reason by reason (the count model, for comparison) at {}/min (the Makefile's BENCH_BUDGET_PER_MINUTE)\n",
        thousands(u64::from(budget.per_minute))
    ));
    out.push_str(&format!(
        "  {:<34} {:>12} {:>12} {:>10}\n",
        "", "predicted", "recorded", "difference"
    ));
    out.push_str(&row(
        "phase time (rounds and drain)",
        format!("{:.1} min", p.minutes),
        format!("{:.1} min", r.phase_minutes),
        bench::difference_percent(p.minutes, r.phase_minutes),
    ));
    out.push_str(&row(
        "pushes per warm minute",
        format!("{:.0}", p.pushes_per_warm_minute),
        format!("{:.0}", r.pushes_per_warm_minute),
        bench::difference_percent(p.pushes_per_warm_minute, r.pushes_per_warm_minute),
    ));
    for (name, predicted, recorded) in [
        ("reasons (staff changes x codes)", p.reasons, r.reasons),
        ("pushes (list changes)", p.pushes, r.pushes),
        ("unchanged refreshes", p.unchanged, r.unchanged),
    ] {
        out.push_str(&row(
            name,
            thousands(predicted),
            thousands(recorded),
            bench::difference_percent(predicted as f64, recorded as f64),
        ));
    }
    let every_reason = p.reasons as f64 / f64::from(budget.per_minute.max(1));
    out.push_str(&format!(
        "  (counting every reason as a push, as the event rate would, gives {every_reason:.1} min: {:+.0}%;\n   recorded figures: docs/local-world.md, \"Benchmark: make bench\")\n",
        bench::difference_percent(every_reason, r.phase_minutes)
    ));
    out
}

/// Code ids asked of the code index per query.
const CODES_PER_PAGE: usize = 1_000;

/// The tenant's codes, staff, seats, department listings and department members, from the
/// table: its code list (the code index, `gsi1`, page by page), each code's item (the
/// configuration the staff -> codes and department -> codes indexes are kept from: each code's
/// members live under their own partition keys, docs/design/keys.md) and the members of the
/// departments the codes list, stopping with an error past `max_items`. Staff on no code are
/// not read: they reach nothing. Nothing is written.
async fn read_seats(
    ops: &Ops,
    table: &str,
    tenant: &TenantId,
    max_items: u64,
) -> Result<(TenantSeats, u64)> {
    let store = DynamoStore::new(ops.dynamodb.clone(), table.to_owned());
    let bar = crate::ops::spinner(&format!("reading {tenant}'s seats"), ops.json);
    let mut seats = TenantSeats::new();
    let mut read = 0u64;
    let mut count = |n: usize, bar: &indicatif::ProgressBar| -> Result<()> {
        read += u64::try_from(n).unwrap_or(u64::MAX);
        if read > max_items {
            bail!(
                "{tenant} holds more than {max_items} codes and departments (--max-items); raise it (at most {MAX_ITEMS_CEILING}) to plan this tenant"
            );
        }
        bar.set_message(format!("reading {tenant}'s seats: {read} items"));
        Ok(())
    };
    let mut listed = BTreeSet::new();
    let mut after: Option<CodeId> = None;
    loop {
        let page = store
            .code_ids(tenant, after.as_ref(), Some(CODES_PER_PAGE))
            .await
            .map_err(|e| anyhow!("the code index of {tenant}: {e}"))?;
        let Some(last) = page.last().cloned() else {
            break;
        };
        count(page.len(), &bar)?;
        let records = store
            .code_records(tenant, &page)
            .await
            .map_err(|e| anyhow!("the codes of {tenant}: {e}"))?;
        for (code, record) in records {
            seat_code(&mut seats, &code, &record.code.config);
            listed.extend(record.code.config.departments.iter().cloned());
        }
        after = Some(last);
    }
    let listed: Vec<DepartmentId> = listed.into_iter().collect();
    for chunk in listed.chunks(100) {
        let members = store
            .departments(tenant, chunk)
            .await
            .map_err(|e| anyhow!("the departments of {tenant}: {e}"))?;
        count(members.len(), &bar)?;
        for (department, staff) in members {
            for member in staff {
                seats.department_member(department.as_str(), member.as_str());
            }
        }
    }
    bar.finish_and_clear();
    Ok((seats, read))
}

/// What one code's configuration puts in the indexes: a seat per member and fallback, a
/// listing per department.
fn seat_code(seats: &mut TenantSeats, code: &CodeId, config: &CodeConfig) {
    seats.add_code(code.as_str());
    for staff in config.members.iter().chain(&config.fallback) {
        seats.seat(staff.as_str(), code.as_str());
    }
    for department in &config.departments {
        seats.department_listed(department.as_str(), code.as_str());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use domain::ids::StaffId;

    #[test]
    fn a_codes_members_fallback_and_departments_are_its_seats_and_listings() {
        let mut seats = TenantSeats::new();
        let staff = |id: &str| StaffId::parse(id).expect("id");
        let config: CodeConfig = serde_json::from_value(serde_json::json!({
            "family": "native",
            "members": ["ann", "bo"],
            "fallback": ["cy"],
            "departments": ["7"],
        }))
        .expect("config");
        seat_code(&mut seats, &CodeId::parse("c-1").expect("id"), &config);
        seat_code(
            &mut seats,
            &CodeId::parse("c-2").expect("id"),
            &CodeConfig {
                members: vec![staff("ann")],
                ..config.clone()
            },
        );
        seats.department_member("7", "dee");
        assert_eq!(seats.codes(), 2);
        assert_eq!(seats.staff(), 4);
    }
}
