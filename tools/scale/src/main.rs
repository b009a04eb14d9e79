//! `qrsync-scale`: wiring only.

use anyhow::Context;
use clap::{Parser, Subcommand};
use qrsync_scale::day::DayCurve;
use qrsync_scale::population::Population;
use qrsync_scale::ports::wecom::EgressIps;
use qrsync_scale::profile::{default_profile_path, Profile};
use qrsync_scale::report::{self, chart, MonthScale};
use qrsync_scale::run::{RunOptions, Stretch};
use qrsync_scale::settings::{parse_override, project_template, Settings};
use qrsync_scale::show;
use std::path::PathBuf;

#[derive(Parser)]
#[command(about = "The platform at production scale, simulated (issue 30)")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Prints the population a profile and seed give, and the settings read from template.yaml.
    Profile {
        #[arg(long, default_value_os_t = default_profile_path())]
        profile: PathBuf,
        #[arg(long, default_value_t = 30)]
        seed: u64,
        /// The campaign day (its scans' timezones and clock changes follow the date).
        #[arg(long, default_value = "2026-11-11")]
        date: chrono::NaiveDate,
        #[arg(long, default_value_os_t = project_template())]
        template: PathBuf,
        /// A template parameter instead of its default: `--parameter WeComBudgetPerMinute=540`.
        #[arg(long = "parameter", value_parser = parse_override)]
        parameters: Vec<(String, String)>,
    },
    /// Runs a stretch of the campaign day through the domain's own code and prints the report.
    Run(RunArgs),
    /// Runs `make bench`'s tenant and both phases through the simulated deployment and prints
    /// the drain time and pushes per minute next to the bench's recorded figures.
    Bench {
        /// A template parameter besides the Makefile's bench budget: `--parameter Name=value`.
        #[arg(long = "parameter", value_parser = parse_override)]
        parameters: Vec<(String, String)>,
    },
    /// Compares each tenant's p99 staleness on a day (`run --out`'s `<out>.tenants.csv`) with
    /// its own on a quiet day (the same seed with `--profile` of a campaign-free profile).
    Compare { day: PathBuf, quiet: PathBuf },
    /// Loads the population into the in-memory table and prints what it took (time, memory).
    Load {
        #[arg(long, default_value_os_t = default_profile_path())]
        profile: PathBuf,
        #[arg(long, default_value_t = 30)]
        seed: u64,
        /// Load only the first N tenants (largest first).
        #[arg(long)]
        tenants: Option<usize>,
    },
}

#[derive(clap::Args)]
struct RunArgs {
    #[arg(long, default_value_os_t = default_profile_path())]
    profile: PathBuf,
    #[arg(long, default_value_t = 30)]
    seed: u64,
    /// The campaign day.
    #[arg(long, default_value = "2026-11-11")]
    date: chrono::NaiveDate,
    /// The stretch, in the campaign's zone (the profile's `campaign.timezone`).
    #[arg(long, default_value = "08:50")]
    from: chrono::NaiveTime,
    #[arg(long, default_value = "09:20")]
    until: chrono::NaiveTime,
    /// Minutes qrsync is left to catch up after the stretch, with nothing new happening.
    #[arg(long, default_value_t = 5)]
    settle_minutes: u64,
    /// Keep only the first N tenants (a small scenario).
    #[arg(long)]
    tenants: Option<usize>,
    #[arg(long, default_value_os_t = project_template())]
    template: PathBuf,
    /// A template parameter instead of its default: `--parameter WeComBudgetPerMinute=540`.
    #[arg(long = "parameter", value_parser = parse_override)]
    parameters: Vec<(String, String)>,
    /// The run stops early, saying so in its report, once its resident memory passes this.
    #[arg(long, default_value_t = 15.0)]
    max_memory_gb: f64,
    /// Where the report and its chart are written (`<out>.txt`, `<out>.svg`); stdout too.
    #[arg(long)]
    out: Option<PathBuf>,
    /// The same day without the campaign (its scans and spikes), for `compare`.
    #[arg(long)]
    quiet_day: bool,
}

fn run(args: RunArgs) -> anyhow::Result<()> {
    let profile = Profile::load(&args.profile)?;
    let profile = if args.quiet_day {
        profile.quiet_day()?
    } else {
        profile
    };
    let settings = Settings::read_file(&args.template, &args.parameters)
        .with_context(|| format!("reading {}", args.template.display()))?;
    let options = RunOptions {
        seed: args.seed,
        stretch: Stretch {
            date: args.date,
            from: args.from,
            until: args.until,
            settle: std::time::Duration::from_secs(args.settle_minutes * 60),
        },
        tenants: args.tenants,
        add_after: std::time::Duration::from_secs(20),
        memory_limit_bytes: (args.max_memory_gb.clamp(0.5, 1024.0) * 1e9) as u64,
    };
    let scale = MonthScale::of(&profile, &settings);
    let egress = EgressIps::of_template(
        settings.account.nat_gateways,
        settings.account.egress_relays.len(),
        qrsync_scale::world::egress_addresses(&settings),
    );
    let outcome = qrsync_scale::run::run(&profile, settings, &options)?;
    let about = format!(
        "stretch: {} {}-{} {} (then {} min to settle); egress {:?}; template {}{}",
        args.date,
        args.from.format("%H:%M"),
        args.until.format("%H:%M"),
        profile.campaign.timezone,
        args.settle_minutes,
        egress,
        args.template.display(),
        if args.parameters.is_empty() {
            String::new()
        } else {
            format!(
                " with {}",
                args.parameters
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
    );
    let scale = scale.with_stretch(&outcome, &profile);
    let chart = match &args.out {
        Some(out) => {
            let path = out.with_extension("svg");
            chart::draw(&outcome, &path)?;
            Some(path.display().to_string())
        }
        None => None,
    };
    let text = report::render(&outcome, &scale, chart.as_deref(), &about);
    print!("{text}");
    if let Some(out) = &args.out {
        std::fs::write(out.with_extension("txt"), &text)?;
        std::fs::write(
            out.with_extension("tenants.csv"),
            report::tenants_csv(&outcome),
        )?;
    }
    Ok(())
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Run(args) => run(args)?,
        Command::Bench { parameters } => {
            use qrsync_scale::plan::{bench, simulated};
            let mut overrides = bench::budget_overrides(&bench::project_makefile())
                .map_err(|e| anyhow::anyhow!(e))?;
            overrides.extend(parameters);
            print!(
                "{}",
                simulated::comparison_text(&simulated::phases_on(
                    Settings::read_project(&overrides)?,
                    true
                )?)
            );
        }
        Command::Compare { day, quiet } => {
            let read = |path: &PathBuf| -> anyhow::Result<Vec<qrsync_scale::measure::TenantRow>> {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("reading {}", path.display()))?;
                qrsync_scale::measure::parse_csv(&text)
                    .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
            };
            print!(
                "{}",
                qrsync_scale::measure::compare(&read(&day)?, &read(&quiet)?)
            );
        }
        Command::Profile {
            profile,
            seed,
            date,
            template,
            parameters,
        } => {
            let profile = Profile::load(&profile)?;
            let settings = Settings::read_file(&template, &parameters)
                .with_context(|| format!("reading {}", template.display()))?;
            let population = Population::generate(&profile, seed);
            print!("{}", show::population(&profile, &population));
            print!(
                "{}",
                show::day(&profile, &DayCurve::new(&profile, &population), date)
            );
            print!("{}", show::settings(&settings));
        }
        Command::Load {
            profile,
            seed,
            tenants,
        } => {
            let profile = Profile::load(&profile)?;
            let mut population = Population::generate(&profile, seed);
            if let Some(n) = tenants {
                population.tenants.truncate(n);
            }
            let started = std::time::Instant::now();
            let before = qrsync_scale::memory::resident_bytes();
            let store = domain::fakes::InMemoryStore::default();
            let mut codes = 0u64;
            let mut members = 0u64;
            qrsync_scale::platform::load(
                &store,
                &profile,
                &population,
                1_794_000_000_000,
                |_, _, code| {
                    codes += 1;
                    members += code.users.len() as u64;
                },
            );
            let grown = qrsync_scale::memory::resident_bytes().saturating_sub(before);
            println!(
                "loaded {} tenants, {codes} codes ({members} listed users) in {:.1} s; resident memory grew {} MB, {} bytes per code",
                population.tenants.len(),
                started.elapsed().as_secs_f64(),
                grown / 1_000_000,
                grown / codes.max(1)
            );
            drop(store);
        }
    }
    Ok(())
}
