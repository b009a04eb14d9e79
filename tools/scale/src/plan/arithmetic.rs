//! The planner's arithmetic, pure: a distribution of fan-outs, the drain of a number of pushes
//! through a tenant's two budget windows, the budget a campaign needs, the sweep's coverage and
//! a refresh lane's throughput. Every figure of a setting comes in as an argument (read from
//! `template.yaml` by `crate::settings`); nothing here knows a default.

use domain::budget::BudgetLimits;
use domain::sweep::{sample_size, SweepSettings};

const MINUTE_MS: u64 = 60_000;

/// Codes per staff member over a tenant's staff.
#[derive(Debug, Clone, PartialEq)]
pub struct Distribution {
    pub staff: u32,
    pub min: u32,
    pub p50: u32,
    pub p90: u32,
    pub p99: u32,
    pub max: u32,
    pub mean: f64,
    /// (lowest, highest or `None` for no end, staff members in it), lowest first; empty
    /// buckets left out.
    pub buckets: Vec<(u32, Option<u32>, u32)>,
}

/// Bucket edges: the fan-outs an operator tells apart (none, a few, tens, hundreds, the
/// thousands the largest tenants reach).
const BUCKET_STARTS: [u32; 11] = [0, 1, 10, 50, 100, 250, 500, 1_000, 1_500, 2_000, 5_000];

/// Nearest-rank percentile of sorted values (`share` of 1 is the largest).
fn percentile(sorted: &[u32], share: f64) -> u32 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (share * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

pub fn distribution(fan_outs: &[u32]) -> Distribution {
    let mut sorted = fan_outs.to_vec();
    sorted.sort_unstable();
    let mut buckets = Vec::new();
    for (i, &low) in BUCKET_STARTS.iter().enumerate() {
        let high = BUCKET_STARTS.get(i + 1).map(|next| next - 1);
        let count = sorted
            .iter()
            .filter(|&&f| f >= low && high.is_none_or(|h| f <= h))
            .count();
        if count > 0 {
            buckets.push((low, high, u32::try_from(count).unwrap_or(u32::MAX)));
        }
    }
    let sum: u64 = sorted.iter().map(|&f| u64::from(f)).sum();
    Distribution {
        staff: u32::try_from(sorted.len()).unwrap_or(u32::MAX),
        min: sorted.first().copied().unwrap_or(0),
        p50: percentile(&sorted, 0.50),
        p90: percentile(&sorted, 0.90),
        p99: percentile(&sorted, 0.99),
        max: sorted.last().copied().unwrap_or(0),
        mean: if sorted.is_empty() {
            0.0
        } else {
            sum as f64 / sorted.len() as f64
        },
        buckets,
    }
}

/// How long `pushes` take through a tenant's budget, each push one unit of both windows.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Drain {
    pub pushes: u64,
    pub minutes: f64,
    /// The hour window ran out before the pushes did (the drain waited for an hour's end).
    pub hour_binds: bool,
}

impl Drain {
    /// Pushes per minute over the whole drain.
    pub fn mean_rate(&self) -> f64 {
        if self.minutes > 0.0 {
            self.pushes as f64 / self.minutes
        } else {
            0.0
        }
    }
}

/// The drain of `pushes` through the budget's windows (wall-clock minutes and hours, as
/// `domain::budget` counts them), starting at the top of an hour with both windows unspent
/// and nothing else spending them; the refresh is assumed fast enough to spend a minute's
/// budget as soon as it opens (the bench's warm minutes all reach the budget).
///
/// A minute passes at most `min(per_minute, per_hour)` pushes and an hour at most
/// `min(per_hour, 60 x per_minute)`. Up to one hour's worth, the drain takes pushes / rate
/// minutes; beyond it, each full hour's worth takes 60 minutes (the rest of the hour waits
/// for the hour window), and the remainder pushes / rate minutes after the last full hour.
pub fn drain(pushes: u64, budget: BudgetLimits) -> Drain {
    let per_minute = u64::from(budget.per_minute.min(budget.per_hour)).max(1);
    let per_hour = u64::from(budget.per_hour).min(60 * per_minute).max(1);
    if pushes <= per_hour {
        return Drain {
            pushes,
            minutes: pushes as f64 / per_minute as f64,
            hour_binds: false,
        };
    }
    let full_hours = pushes.div_ceil(per_hour) - 1;
    let remainder = pushes - full_hours * per_hour;
    Drain {
        pushes,
        minutes: (full_hours * 60) as f64 + remainder as f64 / per_minute as f64,
        hour_binds: per_hour < 60 * per_minute,
    }
}

/// A campaign's list changes: `scans_per_second`, of which `crossing_share` cross a limit
/// (the staff member's daily, add or company limit), each crossing taking the staff member
/// off every code they sit on: a list change, one push, per code.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CampaignNeed {
    pub scans_per_second: f64,
    pub crossing_share: f64,
    /// Crossings per second: scans x share.
    pub crossings_per_second: f64,
    /// Pushes per minute when the crossing staff sit on the mean number of codes...
    pub mean_per_minute: f64,
    /// ...and when every crossing is by the busiest staff member.
    pub worst_per_minute: f64,
    /// The same over a sustained hour (the hour window's view).
    pub mean_per_hour: f64,
    pub worst_per_hour: f64,
}

pub fn campaign(
    scans_per_second: f64,
    crossing_share: f64,
    distribution: &Distribution,
) -> CampaignNeed {
    let crossings_per_second = scans_per_second * crossing_share;
    let mean_per_minute = crossings_per_second * distribution.mean * 60.0;
    let worst_per_minute = crossings_per_second * f64::from(distribution.max) * 60.0;
    CampaignNeed {
        scans_per_second,
        crossing_share,
        crossings_per_second,
        mean_per_minute,
        worst_per_minute,
        mean_per_hour: mean_per_minute * 60.0,
        worst_per_hour: worst_per_minute * 60.0,
    }
}

/// How long the sweep's drift read-back takes to read every code of a tenant once.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SweepCoverage {
    /// Codes sampled per run (the hour's read budget spread over the runs, `sample_size`).
    pub per_run: u64,
    pub runs: u64,
    pub period_ms: u64,
    pub minutes: f64,
}

/// The read-back alone: dirty codes read first take from the same per-tenant budget, so with
/// dirty codes the sweep is slower than this.
pub fn sweep_coverage(codes: u64, sweep: &SweepSettings) -> SweepCoverage {
    let period_ms = sweep.period_ms.max(1);
    let per_run = sample_size(sweep.reads_per_tenant_hour, period_ms) as u64;
    let runs = codes.div_ceil(per_run.max(1));
    SweepCoverage {
        per_run,
        runs,
        period_ms,
        minutes: (runs * period_ms) as f64 / MINUTE_MS as f64,
    }
}

/// A refresh lane: its event source's `MaximumConcurrency` batches at once, each refreshing
/// its codes one after another (the refresh consumer's loop), so the lane refreshes
/// `MaximumConcurrency x batch / (batch x seconds per code)` = `MaximumConcurrency / seconds
/// per code` codes a second, for the whole platform.
#[derive(Debug, Clone, PartialEq)]
pub struct Lane {
    pub name: String,
    pub queue: String,
    /// `None`: the event source sets no `MaximumConcurrency` (the function's and account's
    /// concurrency bound it).
    pub maximum_concurrency: Option<u32>,
    pub batch_size: u32,
    pub seconds_per_code: f64,
}

impl Lane {
    pub fn codes_per_minute(&self) -> Option<f64> {
        let concurrency = f64::from(self.maximum_concurrency?);
        Some(concurrency / self.seconds_per_code.max(f64::MIN_POSITIVE) * 60.0)
    }

    pub fn batch_seconds(&self) -> f64 {
        f64::from(self.batch_size) * self.seconds_per_code
    }
}

/// Minutes to refresh `codes` on `lane` if it did nothing else.
pub fn lane_minutes(codes: u64, lane: &Lane) -> Option<f64> {
    lane.codes_per_minute().map(|rate| codes as f64 / rate)
}

#[cfg(test)]
mod tests {
    use super::*;

    const BENCH: BudgetLimits = BudgetLimits {
        per_minute: 540,
        per_hour: 32_400,
    };

    fn one_staff_on(codes: u32) -> Distribution {
        distribution(&[codes])
    }

    #[test]
    fn one_staff_member_on_1500_codes_drains_in_1500_over_the_minute_budget_minutes() {
        let worst = one_staff_on(1_500).max;
        assert_eq!(worst, 1_500);
        let drained = drain(u64::from(worst), BENCH);
        assert_eq!(drained.pushes, 1_500);
        assert!(
            (drained.minutes - 1_500.0 / 540.0).abs() < 1e-9,
            "{drained:?}"
        );
        assert!(!drained.hour_binds);
    }

    #[test]
    fn the_hour_window_binds_once_an_hours_budget_is_spent() {
        let budget = BudgetLimits {
            per_minute: 9_000,
            per_hour: 135_000,
        };
        // 135,000 in the first 15 minutes, then the rest of the hour waits; the next 65,000
        // take 65,000 / 9,000 minutes of the second hour.
        let drained = drain(200_000, budget);
        assert!(drained.hour_binds);
        assert!(
            (drained.minutes - (60.0 + 65_000.0 / 9_000.0)).abs() < 1e-9,
            "{drained:?}"
        );
        let within = drain(135_000, budget);
        assert!(!within.hour_binds);
        assert!((within.minutes - 15.0).abs() < 1e-9, "{within:?}");
    }

    #[test]
    fn an_hour_window_above_sixty_minutes_of_budget_never_binds() {
        let drained = drain(100_000, BENCH);
        assert!(!drained.hour_binds);
        assert!((drained.minutes - 100_000.0 / 540.0).abs() < 1e-9);
    }

    #[test]
    fn the_percentiles_are_nearest_rank_and_the_buckets_hold_every_staff_member() {
        let fan_outs: Vec<u32> = (1..=100).collect();
        let d = distribution(&fan_outs);
        assert_eq!((d.min, d.p50, d.p90, d.p99, d.max), (1, 50, 90, 99, 100));
        let held: u32 = d.buckets.iter().map(|b| b.2).sum();
        assert_eq!(held, 100);
        assert_eq!(d.buckets[0], (1, Some(9), 9));
    }

    #[test]
    fn a_campaigns_pushes_are_scans_times_crossing_share_times_codes_per_crossing_staff() {
        let d = distribution(&[100, 300]);
        let need = campaign(400.0, 0.01, &d);
        assert!((need.crossings_per_second - 4.0).abs() < 1e-9);
        assert!((need.mean_per_minute - 4.0 * 200.0 * 60.0).abs() < 1e-6);
        assert!((need.worst_per_minute - 4.0 * 300.0 * 60.0).abs() < 1e-6);
        assert!((need.mean_per_hour - need.mean_per_minute * 60.0).abs() < 1e-6);
    }

    #[test]
    fn a_sweep_covers_a_tenant_in_codes_over_reads_per_run_periods() {
        let sweep = SweepSettings {
            period_ms: 5 * 60_000,
            reads_per_tenant_hour: 60,
            ..SweepSettings::DEFAULT
        };
        let covered = sweep_coverage(2_000, &sweep);
        assert_eq!(covered.per_run, 5);
        assert_eq!(covered.runs, 400);
        assert!((covered.minutes - 2_000.0).abs() < 1e-9);
    }

    #[test]
    fn a_lane_refreshes_its_concurrency_over_the_time_per_code_codes_a_second() {
        let slow = Lane {
            name: "slow".into(),
            queue: "SlowRefreshQueue".into(),
            maximum_concurrency: Some(2),
            batch_size: 10,
            seconds_per_code: 0.08,
        };
        let rate = slow.codes_per_minute().expect("bounded");
        assert!((rate - 1_500.0).abs() < 1e-6, "{rate}");
        assert!((slow.batch_seconds() - 0.8).abs() < 1e-9);
    }
}
