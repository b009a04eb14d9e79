//! `qrsync-scale`: wiring only (issue 30, being built).

use anyhow::Context;
use clap::{Parser, Subcommand};
use qrsync_scale::day::DayCurve;
use qrsync_scale::population::Population;
use qrsync_scale::profile::{default_profile_path, Profile};
use qrsync_scale::settings::{parse_override, project_template, Settings};
use qrsync_scale::show;
use std::path::PathBuf;

#[derive(Parser)]
#[command(about = "The platform at production scale, simulated (issue 30; being built)")]
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

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
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
            let runtime = tokio::runtime::Builder::new_current_thread().build()?;
            let started = std::time::Instant::now();
            let before = qrsync_scale::memory::resident_bytes();
            let store = domain::fakes::InMemoryStore::default();
            let mut codes = 0u64;
            let mut members = 0u64;
            runtime.block_on(qrsync_scale::platform::load(
                &store,
                &profile,
                &population,
                1_794_000_000_000,
                |_, _, code| {
                    codes += 1;
                    members += code.users.len() as u64;
                },
            ));
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
