//! One simulated stretch of the campaign day: the population loaded as the table holds it at
//! the stretch's start, the deployment of `template.yaml` on the simulated services with the
//! domain's own consumers as its functions, and what happens outside qrsync (`happenings`)
//! turned into what reaches it: WeCom's add callbacks for scans, the admin API's calls for
//! breaks, WeCom's contact callbacks for resignations and department moves. The measure
//! watches the facts as they happen and the lists as WeCom takes them.
//!
//! Everything runs on one current-thread runtime with tokio's clock paused: the same seed
//! gives the same run.

mod drive;

pub use drive::{Happened, Outcome, ReasonsMade, UsageSoFar, ZoneStaff};

use crate::population::Population;
use crate::profile::Profile;
use crate::settings::Settings;
use chrono::{NaiveDate, NaiveTime};
use std::time::Duration;

/// The stretch of the day simulated, in the campaign's zone.
#[derive(Debug, Clone)]
pub struct Stretch {
    pub date: NaiveDate,
    pub from: NaiveTime,
    pub until: NaiveTime,
    /// After `until`, nothing more happens and qrsync is left this long to catch up; the
    /// end-of-stretch check runs after it.
    pub settle: Duration,
}

#[derive(Debug, Clone)]
pub struct RunOptions {
    pub seed: u64,
    pub stretch: Stretch,
    /// Keep only the first N tenants of the population (a small scenario); `None` is all.
    pub tenants: Option<usize>,
    /// A customer adds the staff member this long after the scan [assumption].
    pub add_after: Duration,
    /// The run stops early (and says so) once its resident memory passes this.
    pub memory_limit_bytes: u64,
}

/// Runs the stretch; the population is generated from `profile` and the seed.
pub fn run(profile: &Profile, settings: Settings, options: &RunOptions) -> anyhow::Result<Outcome> {
    let mut population = Population::generate(profile, options.seed);
    if let Some(keep) = options.tenants {
        population = population.keep_first(keep);
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()?;
    runtime.block_on(drive::drive(profile, &population, settings, options))
}
