//! `qrsync-ops plan`: the capacity planner (the model is `qrsync_scale::plan`). A tenant's seats
//! come from the deployed table (`--tenant`: the staff -> codes and department -> codes
//! indexes, read-only, paginated, bounded), from a profile on the command line (`--synthetic`)
//! or are the bench's (`--bench`); the budget, lanes and sweep from `template.yaml`, as the
//! simulation reads them. With `--bench` the one-tenant prediction is the simulation's own run
//! of the bench (`qrsync_scale::plan::simulated`, the deployment's functions under virtual
//! time), printed before the count model's replay.

use crate::ops::Ops;
use adapters::dynamodb::keys;
use anyhow::{anyhow, bail, Context, Result};
use aws_sdk_dynamodb::types::AttributeValue;
use domain::ids::{CodeId, DepartmentId, StaffId, TenantId};
use qrsync_scale::plan::{
    self, bench, seats::TenantSeats, simulated, synthetic::Synthetic, CampaignInput,
};
use qrsync_scale::profile::Profile;
use qrsync_scale::settings::{parse_override, Settings};
use std::collections::HashMap;
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
                "tenant {tenant} (table {table}, {items} index items read)",
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

/// The prefix of a family of sort keys, from the adapter's own key function: what it gives
/// for `id` with `id` taken off the end.
fn prefix(key: String, id: &str) -> Result<String> {
    key.strip_suffix(id)
        .map(str::to_owned)
        .ok_or_else(|| anyhow!("the adapter's key `{key}` does not end with `{id}`"))
}

/// The sort-key prefixes of the item families a plan reads, as the adapter keys them.
#[derive(Debug, PartialEq, Eq)]
struct Families {
    code: String,
    staff: String,
    seat: String,
    listing: String,
    department: String,
}

impl Families {
    fn from_adapter() -> Result<Self> {
        let staff = StaffId::parse("x").map_err(|e| anyhow!("{e}"))?;
        let code = CodeId::parse("y").map_err(|e| anyhow!("{e}"))?;
        let department = DepartmentId::parse("z").map_err(|e| anyhow!("{e}"))?;
        Ok(Self {
            code: prefix(keys::code(&code), "y")?,
            staff: prefix(keys::staff(&staff), "x")?,
            seat: prefix(keys::seats_of(&staff), "x#")?,
            listing: prefix(keys::department_seats_of(&department), "z#")?,
            department: prefix(keys::department(&department), "z")?,
        })
    }
}

/// The tenant's codes, staff, seats, department listings and department members, from the
/// table: keys-only queries of each item family under the tenant's partition, page by page,
/// eventually consistent (a plan needs no last write), stopping with an error past
/// `max_items`. Nothing is written.
async fn read_seats(
    ops: &Ops,
    table: &str,
    tenant: &TenantId,
    max_items: u64,
) -> Result<(TenantSeats, u64)> {
    let Families {
        code: code_prefix,
        staff: staff_prefix,
        seat: seat_prefix,
        listing: listing_prefix,
        department: department_prefix,
    } = Families::from_adapter()?;

    let bar = crate::ops::spinner(&format!("reading {tenant}'s seats"), ops.json);
    let mut seats = TenantSeats::new();
    let mut read = 0u64;
    let mut reader = Reader {
        ops,
        table,
        tenant,
        max_items,
        read: &mut read,
        bar: &bar,
    };
    for item in reader.family(&code_prefix, None).await? {
        if let Some(code) = item.sk.strip_prefix(&code_prefix) {
            if CodeId::parse(code).is_ok() {
                seats.add_code(code);
            }
        }
    }
    for item in reader.family(&staff_prefix, None).await? {
        if let Some(staff) = item.sk.strip_prefix(&staff_prefix) {
            if StaffId::parse(staff).is_ok() {
                seats.add_staff(staff);
            }
        }
    }
    for item in reader.family(&seat_prefix, None).await? {
        let (staff, code) = split(&item.sk, &seat_prefix)?;
        seats.seat(staff, code);
    }
    for item in reader.family(&listing_prefix, None).await? {
        let (department, code) = split(&item.sk, &listing_prefix)?;
        seats.department_listed(department, code);
    }
    for item in reader.family(&department_prefix, Some("members")).await? {
        let Some(department) = item.sk.strip_prefix(&department_prefix) else {
            continue;
        };
        for member in &item.members {
            seats.department_member(department, member);
        }
    }
    bar.finish_and_clear();
    Ok((seats, read))
}

/// `PREFIX<a>#<b>` -> (a, b).
fn split<'k>(sk: &'k str, family: &str) -> Result<(&'k str, &'k str)> {
    sk.strip_prefix(family)
        .and_then(|rest| rest.split_once('#'))
        .with_context(|| format!("index item `{sk}` is not {family}<id>#<code>"))
}

struct Read {
    sk: String,
    members: Vec<String>,
}

struct Reader<'a> {
    ops: &'a Ops,
    table: &'a str,
    tenant: &'a TenantId,
    max_items: u64,
    read: &'a mut u64,
    bar: &'a indicatif::ProgressBar,
}

impl Reader<'_> {
    /// Every item of the tenant whose sort key starts with `family`: its sort key and, when
    /// asked, a string-set attribute.
    async fn family(&mut self, family: &str, set: Option<&str>) -> Result<Vec<Read>> {
        let mut found = Vec::new();
        let mut start: Option<HashMap<String, AttributeValue>> = None;
        loop {
            let mut query = self
                .ops
                .dynamodb
                .query()
                .table_name(self.table)
                .key_condition_expression("#pk = :pk AND begins_with(#sk, :prefix)")
                .expression_attribute_names("#pk", keys::PK)
                .expression_attribute_names("#sk", keys::SK)
                .expression_attribute_values(":pk", AttributeValue::S(keys::tenant(self.tenant)))
                .expression_attribute_values(":prefix", AttributeValue::S(family.to_owned()))
                .consistent_read(false)
                .set_exclusive_start_key(start.take());
            query = match set {
                Some(name) => query
                    .projection_expression("#sk, #set")
                    .expression_attribute_names("#set", name),
                None => query.projection_expression("#sk"),
            };
            let page = query.send().await.map_err(|e| {
                anyhow!(
                    "query {family} of {}: {}",
                    self.tenant,
                    e.into_service_error()
                )
            })?;
            for item in page.items.unwrap_or_default() {
                *self.read += 1;
                if *self.read > self.max_items {
                    bail!(
                        "{} holds more than {} index items (--max-items); raise it (at most {MAX_ITEMS_CEILING}) to plan this tenant",
                        self.tenant,
                        self.max_items
                    );
                }
                let sk = match item.get(keys::SK) {
                    Some(AttributeValue::S(sk)) => sk.clone(),
                    _ => continue,
                };
                let members = match set.and_then(|name| item.get(name)) {
                    Some(AttributeValue::Ss(values)) => values.clone(),
                    _ => Vec::new(),
                };
                found.push(Read { sk, members });
            }
            self.bar.set_message(format!(
                "reading {}'s seats: {} items",
                self.tenant, self.read
            ));
            start = page.last_evaluated_key;
            if start.is_none() {
                return Ok(found);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_families_read_are_the_adapters_index_items() {
        let families = Families::from_adapter().expect("prefixes");
        assert_eq!(
            families,
            Families {
                code: "CODE#".into(),
                staff: "STAFF#".into(),
                seat: "SEAT#".into(),
                listing: "DSEAT#".into(),
                department: "DEPT#".into(),
            }
        );
        let staff = StaffId::parse("ann.lee@x").expect("id");
        let code = CodeId::parse("c-1").expect("id");
        let seat = keys::seat(&staff, &code);
        assert_eq!(
            split(&seat, &families.seat).expect("a seat"),
            ("ann.lee@x", "c-1")
        );
        assert!(split("SEAT#nohash", &families.seat).is_err());
    }
}
