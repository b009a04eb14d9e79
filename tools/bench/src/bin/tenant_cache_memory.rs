//! How much a warm callback container grows under a flood of callbacks for random tenant ids
//! (the route is public). Runs `CachedCallbackSettings` in process over a directory that knows
//! no tenant, sends it `--ids` random ids, and prints the resident memory before and after
//! and the entries the cache holds.
//!
//!     cargo run -p qrsync-bench --bin tenant-cache-memory -- --ids 1000000

use anyhow::{Context, Result};
use clap::Parser;
use domain::ids::TenantId;
use domain::tenants::cache::CachedCallbackSettings;
use domain::tenants::CallbackSettings;
use domain::tenants::CallbackSettingsSource;
use domain::StoreError;
use rand::distributions::{Alphanumeric, DistString};
use rand::{rngs::StdRng, SeedableRng};
use std::time::{Duration, Instant};

#[derive(Parser)]
struct Args {
    /// Random tenant ids sent, one callback each.
    #[arg(long, default_value_t = 1_000_000)]
    ids: usize,
    #[arg(long, default_value_t = 7)]
    seed: u64,
}

/// The table, as it answers for tenants that do not exist.
struct NoTenants;

#[async_trait::async_trait]
impl CallbackSettingsSource for NoTenants {
    async fn callback_settings(
        &self,
        _: &TenantId,
    ) -> Result<Option<CallbackSettings>, StoreError> {
        Ok(None)
    }
}

/// This process's resident set, from /proc (Linux, as on Lambda).
fn resident_mb() -> Result<f64> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let kb: f64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_whitespace().next())
        .context("VmRSS in /proc/self/status")?
        .parse()?;
    Ok(kb / 1024.0)
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    let cache = CachedCallbackSettings::new(NoTenants, Duration::from_secs(60));
    let mut rng = StdRng::seed_from_u64(args.seed);
    let before = resident_mb()?;
    let started = Instant::now();
    for _ in 0..args.ids {
        let id = TenantId::parse(&Alphanumeric.sample_string(&mut rng, 24))?;
        cache.callback_settings(&id).await?;
    }
    let elapsed = started.elapsed();
    let (known, unknown) = cache.entries().await;
    let after = resident_mb()?;
    println!(
        "{} random tenant ids in {:.1} s: resident {before:.1} MB -> {after:.1} MB (+{:.1} MB); cache holds {known} known, {unknown} unknown",
        args.ids,
        elapsed.as_secs_f64(),
        after - before
    );
    Ok(())
}
