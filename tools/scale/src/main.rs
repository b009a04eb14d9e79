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
    }
    Ok(())
}
