//! The capacity planner's model (issue 30, item 6): from one tenant's seats, what a staff
//! change, a resync, a campaign and the sweep cost it, in pushes and minutes, at the budget and
//! lanes `template.yaml` deploys, and where it sits against the platform's ceilings. The
//! write-up's lesson, applied: the rate and the drain come from the fan-out arithmetic (the
//! codes a staff member sits on), not from the event rate.
//!
//! `qrsync-ops plan` prints it (tools/ops); tools/scale/README.md, "The capacity planner's
//! model", says what it assumes.

pub mod arithmetic;
pub mod bench;
pub mod seats;
pub mod simulated;
pub mod synthetic;

use crate::services::wecom::{Limits, WeComConfig};
use crate::settings::Settings;
use crate::show::thousands;
use arithmetic::{
    campaign, distribution, drain, lane_minutes, sweep_coverage, CampaignNeed, Distribution, Drain,
    Lane, SweepCoverage,
};
use domain::budget::BudgetLimits;
use domain::sweep::SweepSettings;
use seats::TenantSeats;
use std::fmt::{self, Write as _};

/// A campaign to plan for: scans a second, and the share of them that cross a limit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CampaignInput {
    pub scans_per_second: f64,
    pub crossing_share: f64,
}

impl CampaignInput {
    /// Bounded: a platform's campaign peaks at several hundred scans a second; a share is a
    /// share.
    pub fn new(scans_per_second: f64, crossing_percent: f64) -> Result<Self, String> {
        if !(scans_per_second > 0.0 && scans_per_second <= 100_000.0) {
            return Err(format!(
                "--campaign-scans-per-second: {scans_per_second} is outside 0 (excluded) to 100,000"
            ));
        }
        if !(0.0..=100.0).contains(&crossing_percent) {
            return Err(format!(
                "--crossing-percent: {crossing_percent} is outside 0 to 100"
            ));
        }
        Ok(Self {
            scans_per_second,
            crossing_share: crossing_percent / 100.0,
        })
    }
}

/// What the plan is computed at: every figure from the template, except the time a refresh
/// takes per code (an assumption, said as one).
#[derive(Debug, Clone, PartialEq)]
pub struct Inputs {
    pub budget: BudgetLimits,
    pub sweep: SweepSettings,
    pub fast_lane: Lane,
    pub slow_lane: Lane,
    /// `SlowLaneSwitch` and `SlowLaneQuietAfterSeconds`, as the template sets them.
    pub lane_switch: String,
    pub quiet_after_ms: u64,
    pub wecom: Limits,
    pub campaign: Option<CampaignInput>,
}

/// The WeCom latency the simulation assumes (`services::wecom`, its median): the default time
/// one refresh takes per code, since the codes of a batch are refreshed one after another.
pub fn default_seconds_per_code() -> f64 {
    WeComConfig::default().latency.median.as_secs_f64()
}

impl Inputs {
    pub fn from_settings(
        settings: &Settings,
        seconds_per_code: f64,
        campaign: Option<CampaignInput>,
    ) -> Result<Self, String> {
        if !(seconds_per_code > 0.0 && seconds_per_code <= 60.0) {
            return Err(format!(
                "--seconds-per-code: {seconds_per_code} is outside 0 (excluded) to 60"
            ));
        }
        let lane = |name: &str, queue: &str| -> Result<Lane, String> {
            let (_, source) = settings
                .source_of(queue)
                .ok_or_else(|| format!("template.yaml: no event source reads {queue}"))?;
            Ok(Lane {
                name: name.to_owned(),
                queue: queue.to_owned(),
                maximum_concurrency: source.maximum_concurrency,
                batch_size: source.batch_size,
                seconds_per_code,
            })
        };
        let refresh = &settings.refresh;
        Ok(Self {
            budget: refresh.budget,
            sweep: settings.sweep.settings,
            fast_lane: lane("fast", &refresh.fast_queue)?,
            slow_lane: lane("slow", &refresh.slow_queue)?,
            lane_switch: settings
                .parameters
                .get("SlowLaneSwitch")
                .and_then(|p| p.value.clone())
                .unwrap_or_else(|| format!("{:?}", refresh.lanes.switch)),
            quiet_after_ms: refresh.lanes.quiet_after_ms,
            wecom: Limits::PUBLISHED,
            campaign,
        })
    }
}

/// One tenant's plan.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Where the seats came from, in words.
    pub source: String,
    pub codes: u32,
    pub staff: u32,
    pub departments: u32,
    pub department_listings: u64,
    pub distribution: Distribution,
    /// The busiest staff member's change: one push per code they sit on.
    pub worst_change: Drain,
    /// A median staff member's change.
    pub typical_change: Drain,
    /// Every code pushed once.
    pub resync: Drain,
    pub campaign: Option<CampaignNeed>,
    pub sweep: SweepCoverage,
    pub inputs: Inputs,
}

pub fn plan(source: &str, seats: &TenantSeats, inputs: Inputs) -> Plan {
    let distribution = distribution(&seats.fan_outs());
    let codes = seats.codes();
    Plan {
        source: source.to_owned(),
        codes,
        staff: seats.staff(),
        departments: seats.departments(),
        department_listings: seats.department_listings(),
        worst_change: drain(u64::from(distribution.max), inputs.budget),
        typical_change: drain(u64::from(distribution.p50), inputs.budget),
        resync: drain(u64::from(codes), inputs.budget),
        campaign: inputs
            .campaign
            .map(|c| campaign(c.scans_per_second, c.crossing_share, &distribution)),
        sweep: sweep_coverage(u64::from(codes), &inputs.sweep),
        distribution,
        inputs,
    }
}

/// `minutes` as an operator reads it: seconds under two minutes, hours over two hours.
pub fn duration(minutes: f64) -> String {
    if minutes < 2.0 {
        format!("{:.1} s", minutes * 60.0)
    } else if minutes < 120.0 {
        format!("{minutes:.1} min")
    } else if minutes < 48.0 * 60.0 {
        format!("{:.1} h", minutes / 60.0)
    } else {
        format!("{:.1} days", minutes / 1_440.0)
    }
}

fn count(n: f64) -> String {
    thousands(n.round().max(0.0) as u64)
}

fn percent(part: f64, whole: f64) -> String {
    if whole > 0.0 {
        format!("{:.0}%", part / whole * 100.0)
    } else {
        "-".to_owned()
    }
}

impl Plan {
    fn drain_line(&self, drained: &Drain) -> String {
        let budget = self.inputs.budget;
        let window = if drained.hour_binds {
            format!(
                "the hour window ({}/h) binds: the drain waits for the next hour",
                thousands(u64::from(budget.per_hour))
            )
        } else {
            "the hour window does not bind".to_owned()
        };
        format!(
            "{} at {}/min ({window})",
            duration(drained.minutes),
            thousands(u64::from(budget.per_minute))
        )
    }

    /// How long the lanes alone take over `codes` refreshes: a drain takes the longer of its
    /// budget time and its lane time.
    fn lanes_lines(&self, codes: u64, indent: &str) -> String {
        let mut out = String::new();
        for lane in [&self.inputs.fast_lane, &self.inputs.slow_lane] {
            if let Some(minutes) = lane_minutes(codes, lane) {
                let _ = writeln!(
                    out,
                    "{indent}on the {} lane, its whole rate for every tenant refreshes them in {} at best",
                    lane.name,
                    duration(minutes)
                );
            }
        }
        out
    }

    fn lane_line(&self, lane: &Lane) -> String {
        match (lane.maximum_concurrency, lane.codes_per_minute()) {
            (Some(concurrency), Some(per_minute)) => format!(
                "{} lane ({}): MaximumConcurrency {concurrency} batches of up to {} codes, \
                 each code {:.0} ms one after another = {} codes/s = {} codes/min",
                lane.name,
                lane.queue,
                lane.batch_size,
                lane.seconds_per_code * 1000.0,
                count(per_minute / 60.0),
                count(per_minute)
            ),
            _ => format!(
                "{} lane ({}): no MaximumConcurrency (the function's and account's concurrency bound it)",
                lane.name, lane.queue
            ),
        }
    }
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = String::new();
        let budget = self.inputs.budget;
        let d = &self.distribution;
        let _ = writeln!(out, "Capacity plan: {}", self.source);
        let _ = writeln!(
            out,
            "  {} codes, {} staff; {} departments listed on codes ({} listings)",
            thousands(u64::from(self.codes)),
            thousands(u64::from(self.staff)),
            thousands(u64::from(self.departments)),
            thousands(self.department_listings)
        );
        let _ = writeln!(
            out,
            "  budget per tenant (template.yaml, refresh function): {} pushes/min, {} pushes/h",
            thousands(u64::from(budget.per_minute)),
            thousands(u64::from(budget.per_hour))
        );
        let _ = writeln!(
            out,
            "  (every drain below starts with both windows unspent and nothing else spending them)"
        );

        let _ = writeln!(out, "\nCodes per staff member (what one staff change fans out to, direct seats and listed departments)");
        let _ = writeln!(
            out,
            "  min {}  p50 {}  p90 {}  p99 {}  max {}  mean {:.1}",
            thousands(u64::from(d.min)),
            thousands(u64::from(d.p50)),
            thousands(u64::from(d.p90)),
            thousands(u64::from(d.p99)),
            thousands(u64::from(d.max)),
            d.mean
        );
        let widest = d.buckets.iter().map(|b| b.2).max().unwrap_or(1).max(1);
        for &(low, high, staff) in &d.buckets {
            let range = match high {
                Some(high) if high == low => format!("{low}"),
                Some(high) => format!("{low} to {high}"),
                None => format!("{low} or more"),
            };
            let bar = "#".repeat(((u64::from(staff) * 40).div_ceil(u64::from(widest))) as usize);
            let _ = writeln!(
                out,
                "  {range:>14} codes: {:>7} staff  {bar}",
                thousands(u64::from(staff))
            );
        }

        let _ = writeln!(
            out,
            "\nOne staff change (online/offline, a resignation, a department move)"
        );
        let _ = writeln!(
            out,
            "  worst case: the busiest staff member sits on {} codes = {} pushes (one list change per code)",
            thousands(u64::from(d.max)),
            thousands(self.worst_change.pushes)
        );
        let _ = writeln!(out, "    drains in {}", self.drain_line(&self.worst_change));
        out.push_str(&self.lanes_lines(self.worst_change.pushes, "    "));
        let _ = writeln!(
            out,
            "  a median staff member ({} codes): {}",
            thousands(self.typical_change.pushes),
            duration(self.typical_change.minutes)
        );

        let _ = writeln!(
            out,
            "\nWhole-tenant resync: {} codes = {} pushes",
            thousands(u64::from(self.codes)),
            thousands(self.resync.pushes)
        );
        let _ = writeln!(out, "  drains in {}", self.drain_line(&self.resync));
        out.push_str(&self.lanes_lines(self.resync.pushes, "  "));

        if let Some(c) = &self.campaign {
            let _ = writeln!(
                out,
                "\nCampaign: {} scans/s, {:.2}% of them crossing a limit",
                c.scans_per_second,
                c.crossing_share * 100.0
            );
            let _ = writeln!(
                out,
                "  {} scans/s x {:.2}% = {:.2} crossings/s; each takes its staff member off every code they sit on",
                c.scans_per_second,
                c.crossing_share * 100.0,
                c.crossings_per_second
            );
            let per_minute = f64::from(budget.per_minute);
            let per_hour = f64::from(budget.per_hour);
            let _ = writeln!(
                out,
                "  mean: {:.2}/s x {:.1} codes x 60 s = {} pushes/min ({} of the minute budget), {} pushes/h ({} of the hour budget)",
                c.crossings_per_second,
                d.mean,
                count(c.mean_per_minute),
                percent(c.mean_per_minute, per_minute),
                count(c.mean_per_hour),
                percent(c.mean_per_hour, per_hour)
            );
            let _ = writeln!(
                out,
                "  worst (every crossing by the busiest, {} codes): {} pushes/min ({}), {} pushes/h ({})",
                thousands(u64::from(d.max)),
                count(c.worst_per_minute),
                percent(c.worst_per_minute, per_minute),
                count(c.worst_per_hour),
                percent(c.worst_per_hour, per_hour)
            );
            let needed = c.mean_per_minute.max(c.mean_per_hour / 60.0);
            // Over an hour the budget passes at most the minute's budget, and at most an
            // hour's budget spread over 60 minutes.
            let sustained = per_minute.min(per_hour / 60.0);
            let verdict = if c.mean_per_minute <= per_minute && c.mean_per_hour <= per_hour {
                "the budget holds the mean campaign".to_owned()
            } else {
                format!(
                    "the budget does not hold it: sustained it passes {} pushes/min, so a backlog grows by about {} pushes each minute;\n  \
                     the campaign needs a budget of {} pushes/min and {} pushes/h",
                    count(sustained),
                    count((c.mean_per_minute - sustained).max(0.0)),
                    count(needed),
                    count(c.mean_per_hour)
                )
            };
            let _ = writeln!(out, "  {verdict}");
            let corp = f64::from(self.inputs.wecom.corp_per_minute);
            if c.mean_per_minute > corp {
                let _ = writeln!(
                    out,
                    "  over WeCom's own {} calls/min per corp: no budget setting can hold it",
                    count(corp)
                );
            }
        }

        let s = &self.sweep;
        let _ = writeln!(
            out,
            "\nSweep read-back: {} get_contact_way reads/h per tenant, a run every {} reads {} codes",
            thousands(u64::from(self.inputs.sweep.reads_per_tenant_hour)),
            duration(s.period_ms as f64 / 60_000.0),
            thousands(s.per_run)
        );
        let _ = writeln!(
            out,
            "  every code read back once: {} runs = {} (dirty codes come first and take from the same reads)",
            thousands(s.runs),
            duration(s.minutes)
        );

        let w = &self.inputs.wecom;
        let _ = writeln!(
            out,
            "\nAgainst the platform's ceilings (shared by every tenant)"
        );
        for lane in [&self.inputs.fast_lane, &self.inputs.slow_lane] {
            let _ = writeln!(out, "  {}", self.lane_line(lane));
        }
        match self.inputs.slow_lane.codes_per_minute() {
            // `all` sheds every tenant off the whitelist to the slow queue, before any read.
            Some(slow) if self.inputs.lane_switch == "all" => {
                let _ = writeln!(
                    out,
                    "  SlowLaneSwitch=all: every code goes to the slow lane, whose whole rate is {} of this tenant's budget of {}/min",
                    percent(slow, f64::from(budget.per_minute)),
                    thousands(u64::from(budget.per_minute)),
                );
            }
            _ if self.inputs.lane_switch == "auto" => {
                let _ = writeln!(
                    out,
                    "  SlowLaneSwitch=auto: codes untouched for {} are pushed at most once per slow-lane interval, on the lane their reason arrives on (the slow queue is only for `all`)",
                    duration(self.inputs.quiet_after_ms as f64 / 60_000.0),
                );
            }
            _ => {}
        }
        let _ = writeln!(
            out,
            "  WeCom per corp (one tenant): {}/min, {}/h; the budget is {} and {} of them",
            thousands(u64::from(w.corp_per_minute)),
            thousands(u64::from(w.corp_per_hour)),
            percent(f64::from(budget.per_minute), f64::from(w.corp_per_minute)),
            percent(f64::from(budget.per_hour), f64::from(w.corp_per_hour))
        );
        let _ = writeln!(
            out,
            "  WeCom per caller IP (every corp behind one address): {}/min, {}/h: {:.1} tenants spending this budget at once fill the minute, {:.1} the hour",
            thousands(u64::from(w.ip_per_minute)),
            thousands(u64::from(w.ip_per_hour)),
            f64::from(w.ip_per_minute) / f64::from(budget.per_minute.max(1)),
            f64::from(w.ip_per_hour) / f64::from(budget.per_hour.max(1))
        );
        f.write_str(&out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs(budget: BudgetLimits) -> Inputs {
        let settings = Settings::read_project(&[]).expect("template");
        Inputs {
            budget,
            ..Inputs::from_settings(&settings, default_seconds_per_code(), None).expect("inputs")
        }
    }

    #[test]
    fn a_tenant_where_one_staff_member_sits_on_1500_codes_plans_1500_pushes_for_their_change() {
        let mut seats = TenantSeats::new();
        for i in 0..1_500 {
            seats.seat("busiest", &format!("c{i}"));
        }
        seats.seat("quiet", "c0");
        let budget = BudgetLimits {
            per_minute: 540,
            per_hour: 32_400,
        };
        let planned = plan("test", &seats, inputs(budget));
        assert_eq!(planned.worst_change.pushes, 1_500);
        assert!((planned.worst_change.minutes - 1_500.0 / 540.0).abs() < 1e-9);
        assert!(!planned.worst_change.hour_binds);
        assert_eq!(planned.resync.pushes, 1_500);
    }

    #[test]
    fn a_resync_larger_than_the_hour_budget_waits_for_the_next_hour() {
        let mut seats = TenantSeats::new();
        for i in 0..3_000 {
            seats.seat("ann", &format!("c{i}"));
        }
        let budget = BudgetLimits {
            per_minute: 100,
            per_hour: 1_000,
        };
        let planned = plan("test", &seats, inputs(budget));
        assert!(planned.resync.hour_binds);
        // 1,000 in each of the first two hours, the last 1,000 ten minutes into the third.
        assert!(
            (planned.resync.minutes - 130.0).abs() < 1e-9,
            "{:?}",
            planned.resync
        );
    }

    #[test]
    fn codes_listing_a_staff_members_department_count_in_their_worst_case() {
        let mut seats = TenantSeats::new();
        seats.seat("ann", "c0");
        for i in 1..=400 {
            seats.department_listed("sales", &format!("c{i}"));
        }
        seats.department_member("sales", "ann");
        let planned = plan("test", &seats, inputs(BudgetLimits::default()));
        assert_eq!(planned.worst_change.pushes, 401);
        assert_eq!(planned.department_listings, 400);
    }

    #[test]
    fn the_plans_lanes_and_budget_are_the_templates() {
        let settings =
            Settings::read_project(&[("WeComBudgetPerMinute".to_owned(), "1234".to_owned())])
                .expect("template");
        let read = Inputs::from_settings(&settings, 0.1, None).expect("inputs");
        assert_eq!(read.budget.per_minute, 1_234);
        assert_eq!(read.slow_lane.maximum_concurrency, Some(30));
        assert_eq!(read.fast_lane.maximum_concurrency, Some(200));
        assert!((read.slow_lane.codes_per_minute().expect("bounded") - 18_000.0).abs() < 1e-6);
        assert!((read.fast_lane.codes_per_minute().expect("bounded") - 120_000.0).abs() < 1e-6);
    }

    #[test]
    fn a_campaign_or_a_time_per_code_out_of_bounds_is_refused_naming_the_flag() {
        assert!(CampaignInput::new(0.0, 1.0)
            .unwrap_err()
            .contains("--campaign-scans-per-second"));
        assert!(CampaignInput::new(400.0, 120.0)
            .unwrap_err()
            .contains("--crossing-percent"));
        let settings = Settings::read_project(&[]).expect("template");
        assert!(Inputs::from_settings(&settings, 0.0, None)
            .unwrap_err()
            .contains("--seconds-per-code"));
    }

    #[test]
    fn the_printed_plan_names_its_units() {
        let mut seats = TenantSeats::new();
        seats.seat("ann", "c0");
        let planned = plan("test", &seats, inputs(BudgetLimits::default()));
        let text = planned.to_string();
        for unit in ["pushes/min", "codes/min", "runs", "p99"] {
            assert!(text.contains(unit), "{unit} missing from\n{text}");
        }
    }
}
