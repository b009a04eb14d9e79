//! `make bench`'s phase 1 through the planner's model, next to what the bench recorded.
//!
//! The tenant is the bench's (its flags' defaults, `tools/bench/src/scenario.rs`, included
//! below: one source), drawn with the simulation's generator; the budget is the one `make
//! bench` deploys (`BENCH_BUDGET_PER_MINUTE` in the Makefile, and the hour 60 times it as its
//! recipe says), read into the template's parameters. The drive is replayed reason by reason,
//! which is the fan-out arithmetic counted rather than averaged:
//!
//! - a round flips `ROUND_STAFF_1` distinct staff online <-> offline and sends one reason per
//!   code each sits on (what the fan-out sends); round r starts `r x ROUND_SECS` after the
//!   first, and not while more than `MAX_QUEUED` reasons wait (the bench's own gate);
//! - a reason whose code's list (its members online now) equals the list last pushed costs
//!   nothing (`unchanged`: an earlier reason already pushed the same facts, or a flip was
//!   undone); any other is a push, one unit of the minute's and the hour's budget;
//! - with the minute's budget spent, the reason is put off to the next minute (the refresh
//!   requeues it until the window reopens); a minute's budget is spent as soon as it opens.
//!
//! Left out: the refresh's own time (the bench's warm minutes all reach the budget, so it is
//! not what bounds), the retry queues' exact delays (a put-off waits for the next minute
//! here), the drain's quiet polls (about 10 s) and the seeding. The bench draws its seats
//! with another generator (`StdRng`): the same shape, other draws.

// Phase 2 (the sandbox below the budget: 45009s) is not planned here, so some of its
// constants go unread in this crate.
#[allow(dead_code)]
#[path = "../../../bench/src/scenario.rs"]
pub(crate) mod scenario;

use crate::population::TenantFigures;
use crate::profile::{Profile, Range};
use domain::budget::BudgetLimits;
use rand::seq::index::sample;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};

/// Where the project's Makefile is, from this crate.
pub fn project_makefile() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../Makefile")
}

/// The bench's tenant: its codes, staff and members per code, one department (the bench
/// draws each code's members among all its staff).
pub fn tenant(seed: u64) -> TenantFigures {
    let members = u32::try_from(scenario::MEMBERS).unwrap_or(u32::MAX);
    TenantFigures::synthetic(
        u32::try_from(scenario::CODES).unwrap_or(u32::MAX),
        u32::try_from(scenario::STAFF).unwrap_or(u32::MAX),
        1,
        Range {
            low: members,
            high: members,
        },
        seed,
    )
}

pub fn seed() -> u64 {
    scenario::SEED
}

/// Phase 1's drive: who changes, how often.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Drive {
    pub rounds: u32,
    pub round_staff: u32,
    pub round_secs: u64,
    pub max_queued: u64,
    pub seed: u64,
}

impl Drive {
    pub fn phase_one() -> Self {
        Self {
            rounds: u32::try_from(scenario::ROUNDS_1).unwrap_or(u32::MAX),
            round_staff: u32::try_from(scenario::ROUND_STAFF_1).unwrap_or(u32::MAX),
            round_secs: scenario::ROUND_SECS,
            max_queued: scenario::MAX_QUEUED,
            seed: scenario::SEED,
        }
    }
}

/// The budget `make bench` deploys, as template parameter overrides (`Name`, `value`).
pub fn budget_overrides(makefile: &Path) -> Result<Vec<(String, String)>, String> {
    let text = std::fs::read_to_string(makefile)
        .map_err(|e| format!("{}: cannot be read: {e}", makefile.display()))?;
    let per_minute: u32 = text
        .lines()
        .find_map(|line| line.trim().strip_prefix("BENCH_BUDGET_PER_MINUTE ?="))
        .ok_or_else(|| {
            format!(
                "{}: no `BENCH_BUDGET_PER_MINUTE ?= N` line",
                makefile.display()
            )
        })?
        .trim()
        .parse()
        .map_err(|e| format!("{}: BENCH_BUDGET_PER_MINUTE: {e}", makefile.display()))?;
    let hour_factor: u32 = text
        .split("WeComBudgetPerHour=$$(( $(BENCH_BUDGET_PER_MINUTE) * ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| {
            format!(
                "{}: the bench recipe no longer sets WeComBudgetPerHour to BENCH_BUDGET_PER_MINUTE * N",
                makefile.display()
            )
        })?;
    Ok(vec![
        ("WeComBudgetPerMinute".to_owned(), per_minute.to_string()),
        (
            "WeComBudgetPerHour".to_owned(),
            (per_minute.saturating_mul(hour_factor)).to_string(),
        ),
    ])
}

/// What `make bench` recorded for phase 1 (docs/local-world.md, "Benchmark: `make bench`",
/// a run on 2 cores). A test checks the page still says so.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Recorded {
    pub phase_minutes: f64,
    pub pushes_per_warm_minute: f64,
    pub reasons: u64,
    pub pushes: u64,
    pub unchanged: u64,
}

pub const RECORDED: Recorded = Recorded {
    phase_minutes: 23.6,
    pushes_per_warm_minute: 540.0,
    reasons: 21_735,
    pushes: 12_935,
    unchanged: 8_829,
};

#[derive(Debug, Clone, PartialEq)]
pub struct Prediction {
    pub reasons: u64,
    pub pushes: u64,
    pub unchanged: u64,
    pub put_offs: u64,
    /// From the first round to the last reason done.
    pub minutes: f64,
    /// Pushes per minute, every minute but the first and the last with pushes (the bench's
    /// "warm" minutes).
    pub pushes_per_warm_minute: f64,
    pub warm_minutes: u32,
}

/// A day is far beyond any drive the bench makes: a replay that has not drained by then is
/// refused rather than looped.
const REPLAY_LIMIT_SECS: u64 = 86_400;

/// Replays `drive` on `tenant` at `budget` (see the module's comment for the rules).
pub fn replay(
    profile: &Profile,
    tenant: &TenantFigures,
    drive: Drive,
    budget: BudgetLimits,
) -> Result<Prediction, String> {
    let members: Vec<Vec<u32>> = (0..tenant.codes)
        .map(|i| tenant.code(profile, i).members)
        .collect();
    if members.iter().any(|m| m.len() > 32) {
        return Err("the bench replay keeps a code's list in 32 bits: at most 32 members".into());
    }
    let mut codes_of: Vec<Vec<u32>> = vec![Vec::new(); tenant.staff as usize];
    for (code, seated) in members.iter().enumerate() {
        for &staff in seated {
            codes_of[staff as usize].push(code as u32);
        }
    }
    let mut online = vec![true; tenant.staff as usize];
    let list = |online: &[bool], code: usize| -> u32 {
        members[code]
            .iter()
            .enumerate()
            .filter(|(_, &s)| online[s as usize])
            .fold(0u32, |mask, (k, _)| mask | 1 << k)
    };
    let mut pushed: Vec<u32> = (0..members.len()).map(|c| list(&online, c)).collect();
    let mut rng = ChaCha8Rng::seed_from_u64(drive.seed);
    // (when it may be refreshed, in seconds from the first round; the code)
    let mut queue: VecDeque<(u64, u32)> = VecDeque::new();
    let mut per_minute: BTreeMap<u64, u64> = BTreeMap::new();
    let mut per_hour: BTreeMap<u64, u64> = BTreeMap::new();
    let (mut reasons, mut pushes, mut unchanged, mut put_offs) = (0u64, 0u64, 0u64, 0u64);
    let mut round = 0u32;
    let mut t = 0u64;
    let round_staff = (drive.round_staff as usize).min(online.len());
    while round < drive.rounds || !queue.is_empty() {
        if t > REPLAY_LIMIT_SECS {
            return Err(format!(
                "the bench replay had not drained after {} h",
                REPLAY_LIMIT_SECS / 3_600
            ));
        }
        if round < drive.rounds
            && t >= u64::from(round) * drive.round_secs
            && queue.len() as u64 <= drive.max_queued
        {
            for staff in sample(&mut rng, online.len(), round_staff) {
                online[staff] = !online[staff];
                for &code in &codes_of[staff] {
                    queue.push_back((t, code));
                    reasons += 1;
                }
            }
            round += 1;
        }
        let (minute, hour) = (t / 60, t / 3_600);
        for _ in 0..queue.len() {
            let Some((ready, code)) = queue.pop_front() else {
                break;
            };
            if ready > t {
                queue.push_back((ready, code));
                continue;
            }
            let now = list(&online, code as usize);
            if now == pushed[code as usize] {
                unchanged += 1;
                continue;
            }
            let minute_used = per_minute.entry(minute).or_default();
            let hour_used = per_hour.entry(hour).or_default();
            if *hour_used >= u64::from(budget.per_hour) {
                put_offs += 1;
                queue.push_back(((hour + 1) * 3_600, code));
            } else if *minute_used >= u64::from(budget.per_minute) {
                put_offs += 1;
                queue.push_back(((minute + 1) * 60, code));
            } else {
                *minute_used += 1;
                *hour_used += 1;
                pushed[code as usize] = now;
                pushes += 1;
            }
        }
        t += 1;
    }
    let with_pushes: Vec<u64> = per_minute.values().copied().filter(|&n| n > 0).collect();
    let warm: &[u64] = if with_pushes.len() > 2 {
        &with_pushes[1..with_pushes.len() - 1]
    } else {
        &[]
    };
    Ok(Prediction {
        reasons,
        pushes,
        unchanged,
        put_offs,
        minutes: t as f64 / 60.0,
        pushes_per_warm_minute: if warm.is_empty() {
            0.0
        } else {
            warm.iter().sum::<u64>() as f64 / warm.len() as f64
        },
        warm_minutes: u32::try_from(warm.len()).unwrap_or(u32::MAX),
    })
}

/// `predicted` against `recorded`, in percent of the recorded figure.
pub fn difference_percent(predicted: f64, recorded: f64) -> f64 {
    if recorded == 0.0 {
        0.0
    } else {
        (predicted / recorded - 1.0) * 100.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::Settings;

    #[test]
    fn the_bench_budget_is_the_makefiles_read_through_the_template() {
        let overrides = budget_overrides(&project_makefile()).expect("the Makefile says");
        let settings = Settings::read_project(&overrides).expect("template");
        let budget = settings.refresh.budget;
        assert_eq!(budget.per_hour, budget.per_minute * 60);
        assert!(budget.per_minute > 0);
    }

    #[test]
    fn the_recorded_figures_are_still_what_docs_local_world_says() {
        let page = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/local-world.md"),
        )
        .expect("docs/local-world.md");
        for figure in [
            "23.6 phase 1",
            "540 in each of 22",
            "21,735 / 21,809",
            "21,770 / 12,935 / 8,829",
        ] {
            assert!(
                page.contains(figure),
                "docs/local-world.md no longer says {figure}"
            );
        }
    }

    #[test]
    fn the_bench_replayed_drains_within_ten_percent_of_what_it_recorded() {
        let profile = Profile::load_default().expect("profile");
        let overrides = budget_overrides(&project_makefile()).expect("the Makefile says");
        let budget = Settings::read_project(&overrides)
            .expect("template")
            .refresh
            .budget;
        let predicted =
            replay(&profile, &tenant(seed()), Drive::phase_one(), budget).expect("drains");
        let off = |p: f64, r: f64| difference_percent(p, r).abs();
        assert!(
            off(predicted.minutes, RECORDED.phase_minutes) < 10.0,
            "{predicted:?}"
        );
        assert!(
            off(
                predicted.pushes_per_warm_minute,
                RECORDED.pushes_per_warm_minute
            ) < 10.0,
            "{predicted:?}"
        );
        assert!(
            off(predicted.pushes as f64, RECORDED.pushes as f64) < 10.0,
            "{predicted:?}"
        );
        assert!(
            off(predicted.reasons as f64, RECORDED.reasons as f64) < 10.0,
            "{predicted:?}"
        );
    }

    #[test]
    fn the_prediction_does_not_hang_on_one_draw_of_the_seats_or_the_rounds() {
        let profile = Profile::load_default().expect("profile");
        let overrides = budget_overrides(&project_makefile()).expect("the Makefile says");
        let budget = Settings::read_project(&overrides)
            .expect("template")
            .refresh
            .budget;
        for seed in 1..=4 {
            let drive = Drive {
                seed,
                ..Drive::phase_one()
            };
            let predicted = replay(&profile, &tenant(seed), drive, budget).expect("drains");
            let off = difference_percent(predicted.minutes, RECORDED.phase_minutes).abs();
            assert!(off < 10.0, "seed {seed}: {predicted:?}");
        }
    }

    #[test]
    fn every_reason_replayed_ends_as_a_push_or_an_unchanged_refresh() {
        let profile = Profile::load_default().expect("profile");
        let budget = BudgetLimits {
            per_minute: 100,
            per_hour: 6_000,
        };
        let drive = Drive {
            rounds: 3,
            round_staff: 5,
            ..Drive::phase_one()
        };
        let predicted = replay(&profile, &tenant(3), drive, budget).expect("drains");
        assert_eq!(predicted.reasons, predicted.pushes + predicted.unchanged);
        assert!(predicted.put_offs > 0, "{predicted:?}");
        assert!(predicted.pushes_per_warm_minute <= 100.0);
    }
}
