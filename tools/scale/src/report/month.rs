//! The stretch's counted usage, scaled to a month, each part by what drives it.
//!
//! The stretch is a few of the day's minutes, and its usage comes from two kinds of drivers
//! (`waves`): the day's activity (adds, breaks, resignations, the schedules), which goes on
//! all day, and the waves at the profile's shift edges and the tenants' midnights, which come
//! a few times a day. Each line is split between them minute by minute, and each part is
//! scaled to the day by its own driver, then by 30 days. Scaling a stretch that holds the
//! 09:00 wave by the day's scans alone counted that wave some eighty times a day.

use super::waves::{
    edges_between, waves_per_day, Attribution, Baseline, Driver, Edge, Mark, Split, Wave,
};
use crate::cost::{DynamoUsage, FunctionUsage, LogsUsage, MonthUsage, NatUsage, SqsRequests};
use crate::profile::{Profile, Shift};
use crate::run::{Outcome, ReasonsMade, UsageSoFar};
use chrono::{TimeZone, Utc};
use chrono_tz::Tz;

/// Bytes of one log line CloudWatch Logs ingests [assumption: ~300 bytes as JSON].
const LOG_BYTES_PER_LINE: f64 = 300.0;
/// Lines each invocation writes whatever it does: Lambda's start and report lines and the
/// metrics' one embedded-metric-format line.
const LOG_LINES_PER_INVOCATION: f64 = 3.0;
/// The table's bytes per code: the code, its pushed list, its index entries [assumption].
const TABLE_BYTES_PER_CODE: f64 = 3_000.0;
/// With no retention set, the logs kept are every earlier month's too: a year's worth on
/// average over a platform's first two years [assumption].
const LOG_MONTHS_KEPT_FOREVER: f64 = 12.0;
const DAYS_PER_MONTH: f64 = 30.0;
const DAY_MS: f64 = 86_400_000.0;
/// The explanation names at most this many of the stretch's edges.
const EDGES_NAMED: usize = 6;

/// A function as the month bills it.
#[derive(Debug, Clone)]
pub struct MonthFunction {
    pub id: String,
    pub memory_mb: u32,
    pub arm64: bool,
    /// What its continuous part follows: the clock for a scheduled function, the adds for the
    /// callbacks' path (the callback function and the inbox's consumer), else the day's
    /// activity.
    pub driver: Driver,
}

#[derive(Debug, Clone)]
pub struct MonthScale {
    /// The day's scans over the stretch's: the callbacks' path.
    pub per_day: f64,
    /// The day's length over the stretch's.
    pub clock_per_day: f64,
    /// The day's adds, breaks' flips and resignations over the stretch's, each weighted by the
    /// changes it made the lists owe in the stretch (`activity_per_day`).
    pub activity_per_day: f64,
    /// The day's shift edges over the stretch's, by the staff each moves; `None` with no shift
    /// edge in the stretch.
    pub shift_edges_per_day: Option<f64>,
    /// Every zone's midnight over the stretch's, by their staff; `None` with no midnight in the
    /// stretch.
    pub midnights_per_day: Option<f64>,
    /// The edges from the stretch's start to the end of its settling.
    pub edges: Vec<Edge>,
    pub baseline: Baseline,
    pub functions: Vec<MonthFunction>,
    /// FIFO queues, by logical id.
    pub fifo_queues: Vec<String>,
    /// The queues a function consumes: what is left in them at the end is unfinished work.
    pub consumed_queues: Vec<String>,
    /// WeCom's callbacks, persisted: the adds drive it.
    pub inbox_queue: String,
    /// Months of logs stored on average: the template's retention when every function has a
    /// log group with one, else `LOG_MONTHS_KEPT_FOREVER`.
    pub log_months_kept: f64,
    /// The template's NAT gateways (`FixedEgress`): billed by the hour, and per GB of the WeCom
    /// calls through them, which follow the refresh function's invocations.
    pub nat_gateways: u32,
    /// The template's interface endpoints' zones (the SQS endpoint's two), billed by the hour.
    pub interface_endpoint_zones: u32,
    pub refresh_function: String,
    shifts: Vec<Shift>,
    /// A staff member's breaks' flips (offline and online) and resignations a day.
    flips_per_staff_day: f64,
    resignations_per_staff_day: f64,
    /// The zone the explanation gives times in (the campaign's).
    zone: Tz,
    stretch_start_ms: u64,
    /// WeCom posts its callbacks to it: one REST API request each.
    callback_function: String,
}

impl MonthScale {
    /// The functions and queues as the template declares them, and the profile's shifts and
    /// rates; the stretch's share of the day comes with `with_stretch`.
    pub fn of(profile: &Profile, settings: &crate::settings::Settings) -> Self {
        let inbox_queue = settings.callback.inbox_queue.clone();
        let functions = settings
            .functions
            .values()
            .map(|f| {
                let records_callbacks = f.queue_sources.iter().any(|s| s.queue == inbox_queue);
                let driver = if !f.schedules.is_empty() {
                    Driver::Clock
                } else if f.id == settings.callback.function || records_callbacks {
                    Driver::Adds
                } else {
                    Driver::Activity
                };
                MonthFunction {
                    id: f.id.clone(),
                    memory_mb: f.memory_mb,
                    arm64: f.architecture == "arm64",
                    driver,
                }
            })
            .collect();
        Self {
            per_day: 1.0,
            clock_per_day: 1.0,
            activity_per_day: 1.0,
            shift_edges_per_day: None,
            midnights_per_day: None,
            edges: Vec::new(),
            baseline: Baseline::NoEdge,
            functions,
            fifo_queues: settings
                .queues
                .values()
                .filter(|q| q.fifo)
                .map(|q| q.id.clone())
                .collect(),
            consumed_queues: settings
                .functions
                .values()
                .flat_map(|f| f.queue_sources.iter().map(|s| s.queue.clone()))
                .collect(),
            inbox_queue,
            log_months_kept: log_months_kept(settings),
            nat_gateways: settings.account.nat_gateways,
            interface_endpoint_zones: settings.account.interface_endpoint_zones,
            refresh_function: settings.refresh.function.clone(),
            shifts: profile.shift.clone(),
            flips_per_staff_day: profile.staff.offline_flips_per_day,
            resignations_per_staff_day: profile.staff.resignations_per_thousand_per_day / 1_000.0,
            zone: profile.campaign.timezone,
            stretch_start_ms: 0,
            callback_function: settings.callback.function.clone(),
        }
    }

    /// The stretch's share of the day, by each driver, and its edges.
    pub fn with_stretch(mut self, outcome: &Outcome, profile: &Profile) -> Self {
        self.stretch_start_ms = outcome.start_ms;
        let stretch_ms = outcome.end_ms.saturating_sub(outcome.start_ms).max(1) as f64;
        self.clock_per_day = DAY_MS / stretch_ms;
        let h = &outcome.happened;
        self.per_day = if h.scans == 0 {
            self.clock_per_day
        } else {
            profile.scans.day as f64 * outcome.scan_share / h.scans as f64
        };
        let staff = outcome.staff as f64;
        let per_day = |day: f64, stretch: u64| {
            if stretch == 0 {
                0.0
            } else {
                day / stretch as f64
            }
        };
        self.activity_per_day = activity_per_day(
            &h.reasons,
            self.per_day,
            per_day(staff * self.flips_per_staff_day, h.staff_flips),
            per_day(staff * self.resignations_per_staff_day, h.resignations),
        )
        .unwrap_or(self.per_day);
        self.edges = edges_between(
            &self.shifts,
            &outcome.staff_by_zone,
            outcome.start_ms,
            outcome.settled_ms,
        );
        self.shift_edges_per_day =
            waves_per_day(Wave::ShiftEdge, &outcome.staff_by_zone, &self.edges);
        self.midnights_per_day = waves_per_day(Wave::Midnight, &outcome.staff_by_zone, &self.edges);
        self.baseline = self.attribution(outcome).baseline();
        self
    }

    /// The factor a line's continuous part is scaled to the day by.
    fn continuous_per_day(&self, driver: Driver) -> f64 {
        match driver {
            Driver::Activity => self.activity_per_day,
            Driver::Adds => self.per_day,
            Driver::Clock => self.clock_per_day,
        }
    }

    fn attribution(&self, outcome: &Outcome) -> Attribution {
        let marks = counted(outcome)
            .iter()
            .map(|u| Mark {
                at_ms: u.at_ms,
                adds: u.happened.adds as f64,
                reasons: u.happened.reasons.total() as f64,
            })
            .collect();
        Attribution::new(outcome.start_ms, outcome.end_ms, marks, self.edges.clone())
    }

    /// How the month was scaled, a line per part.
    pub fn explain(&self) -> String {
        let usual = match self.baseline {
            Baseline::NoEdge => "no shift edge or midnight from the stretch's start to the end of its settling: all of its usage is the day's activity".to_owned(),
            Baseline::Unmeasured => "the stretch starts at an edge, leaving no usual minute to measure the day's rate by: all of its usage is counted as the day's activity, which overstates the waves (start the stretch a few minutes before its first edge)".to_owned(),
            Baseline::Until { at_ms } => format!(
                "each line's usual rate is measured {}-{}, before the first edge: per change the day's activity made the lists owe (an add's reason and its limits' facts, a break's flip, a resignation), per add on the callbacks' path, per minute for the scheduled functions and the polls that found a queue empty; that rate over the stretch's activity is the day's part",
                self.local(self.stretch_start_ms),
                self.local(at_ms)
            ),
        };
        let shift_edges = match self.shift_edges_per_day {
            Some(factor) => format!(
                "shift edges x {factor:.2} (the day's shift starts and ends over the stretch's {}, by the staff each moves)",
                self.edges_named(Wave::ShiftEdge, factor)
            ),
            None => "shift edges: none in the stretch".to_owned(),
        };
        let midnights = match self.midnights_per_day {
            Some(factor) => format!(
                "midnights x {factor:.2} (every zone's midnight over the stretch's {}, by their staff)",
                self.edges_named(Wave::Midnight, factor)
            ),
            None => "midnights: none in the stretch, left out (a midnight redoes, once a day, the codes the day's limits took)".to_owned(),
        };
        format!(
            "scaled to a month by what drives each part, x {DAYS_PER_MONTH} days; {usual}.\n\
             - the day's activity x {:.1} (the day's adds, breaks' flips and resignations over the stretch's, each weighted by the changes it made); the callbacks' path x {:.1} (the day's scans over the stretch's); the clock's x {:.1} (the day's length over the stretch's)\n\
             - the waves: what the stretch counted beyond the usual rate, from the first edge to the end of settling (each minute's excess the latest edge's): {shift_edges}; {midnights}\n\
             - not counted: the work still queued at the end (below, when there is any); CloudWatch metrics and alarms. Storage {TABLE_BYTES_PER_CODE} bytes per code, logs {LOG_BYTES_PER_LINE} bytes per line kept {:.1} months ({})",
            self.activity_per_day,
            self.per_day,
            self.clock_per_day,
            self.log_months_kept,
            if self.log_months_kept < LOG_MONTHS_KEPT_FOREVER {
                "the template's retention"
            } else {
                "no retention is set"
            }
        )
    }

    /// The stretch's edges of `wave`, each with its share of the day's (`per_day` times the
    /// stretch's).
    fn edges_named(&self, wave: Wave, per_day: f64) -> String {
        let of_wave: Vec<&Edge> = self.edges.iter().filter(|e| e.wave == wave).collect();
        let day: f64 = per_day * of_wave.iter().map(|e| e.staff as f64).sum::<f64>();
        let mut named: Vec<String> = of_wave
            .iter()
            .take(EDGES_NAMED)
            .map(|e| {
                format!(
                    "{} ({:.0}% of the day's)",
                    self.local(e.at_ms),
                    100.0 * e.staff as f64 / day.max(1.0)
                )
            })
            .collect();
        if of_wave.len() > EDGES_NAMED {
            named.push(format!("and {} more", of_wave.len() - EDGES_NAMED));
        }
        named.join(", ")
    }

    /// `HH:MM` in the campaign's zone.
    fn local(&self, at_ms: u64) -> String {
        i64::try_from(at_ms)
            .ok()
            .and_then(|ms| Utc.timestamp_millis_opt(ms).single())
            .map_or_else(
                || "?".to_owned(),
                |at| at.with_timezone(&self.zone).format("%H:%M").to_string(),
            )
    }
}

/// The day's changes over the stretch's: each kind's day over its stretch (`None` where the
/// stretch had none), weighted by the changes it made the lists owe in the stretch. A change
/// costs about the same whatever made it (its refresh, its queue messages, its units)
/// [assumption]. `None` when the stretch made no change.
pub fn activity_per_day(
    made: &ReasonsMade,
    adds_per_day: f64,
    flips_per_day: f64,
    resignations_per_day: f64,
) -> Option<f64> {
    let total = made.total();
    (total > 0).then(|| {
        (made.by_adds as f64 * adds_per_day
            + made.by_flips as f64 * flips_per_day
            + made.by_resignations as f64 * resignations_per_day)
            / total as f64
    })
}

/// The month's usage, by part: the day's activity (with the clock's and the storage), the
/// shift edges' waves, the midnights'.
#[derive(Debug, Clone, Default)]
pub struct MonthParts {
    pub continuous: MonthUsage,
    pub shift_edges: MonthUsage,
    pub midnights: MonthUsage,
    /// Messages still queued at the end in the queues the functions consume: their handling
    /// is in no part.
    pub unfinished_messages: u64,
    /// Messages the functions handled in the waves, scaled to the month.
    pub wave_messages_handled: f64,
    /// The unfinished messages scaled to the month as the latest edge's wave is.
    pub unfinished_per_month: f64,
}

impl MonthParts {
    pub fn total(&self) -> MonthUsage {
        self.continuous
            .plus(&self.shift_edges)
            .plus(&self.midnights)
    }
}

pub fn month_usage(outcome: &Outcome, scale: &MonthScale) -> MonthUsage {
    month_parts(outcome, scale).total()
}

/// Every counted instant: the run's minute samples, then the end of settling.
fn counted(outcome: &Outcome) -> Vec<UsageSoFar> {
    let mut counted: Vec<UsageSoFar> = outcome
        .usage_by_minute
        .iter()
        .filter(|u| u.at_ms < outcome.settled_ms)
        .cloned()
        .collect();
    counted.push(UsageSoFar {
        at_ms: outcome.settled_ms.max(outcome.start_ms),
        happened: outcome.happened.clone(),
        wecom_accepted: outcome.wecom.accepted,
        queues: outcome.queues.clone(),
        functions: outcome.functions.clone(),
    });
    counted
}

pub fn month_parts(outcome: &Outcome, scale: &MonthScale) -> MonthParts {
    let attribution = scale.attribution(outcome);
    let counted = counted(outcome);
    let line =
        |value: &dyn Fn(&UsageSoFar) -> f64| -> Vec<f64> { counted.iter().map(value).collect() };
    // A line's month, by part.
    let month = |split: Split, driver: Driver| -> [f64; 3] {
        [
            split.continuous * scale.continuous_per_day(driver) * DAYS_PER_MONTH,
            split.shift_edges * scale.shift_edges_per_day.unwrap_or(0.0) * DAYS_PER_MONTH,
            split.midnights * scale.midnights_per_day.unwrap_or(0.0) * DAYS_PER_MONTH,
        ]
    };
    let mut parts = [
        MonthUsage::default(),
        MonthUsage::default(),
        MonthUsage::default(),
    ];
    let mut log_lines = [0.0; 3];
    let mut refresh_month_invocations = 0.0;
    let mut wave_messages_handled = 0.0;

    for (name, _) in &outcome.functions {
        let Some(function) = scale.functions.iter().find(|f| &f.id == name) else {
            continue;
        };
        let of = |pick: fn(&crate::services::lambda::FunctionCounters) -> f64| {
            let values = line(&|u: &UsageSoFar| {
                u.functions
                    .iter()
                    .find(|(n, _)| n == name)
                    .map_or(0.0, |(_, c)| pick(c))
            });
            month(attribution.split(function.driver, &values), function.driver)
        };
        let invocations = of(|c| c.invocations as f64);
        if *name == scale.refresh_function {
            refresh_month_invocations = invocations.iter().sum();
        }
        let mb_ms = of(|c| c.mb_ms as f64);
        let handled = of(|c| c.messages_deleted as f64);
        wave_messages_handled += handled[1] + handled[2];
        // The refresh logs at `info` only what changed WeCom, one line a push (a put-off, an
        // unchanged list are `debug`: docs/design/refresh.md, "Logs"); the other functions are
        // counted a line per message they handled (an overstatement for the recorder, whose
        // counted adds log nothing at `info`).
        let info_lines = if *name == scale.refresh_function {
            month(
                attribution.split(
                    function.driver,
                    &line(&|u: &UsageSoFar| u.wecom_accepted as f64),
                ),
                function.driver,
            )
        } else {
            handled
        };
        for (part, usage) in parts.iter_mut().enumerate() {
            log_lines[part] += LOG_LINES_PER_INVOCATION * invocations[part] + info_lines[part];
            usage.functions.push(FunctionUsage {
                function: name.clone(),
                arm64: function.arm64,
                memory_mb: function.memory_mb,
                invocations: invocations[part].round() as u64,
                billed_ms: (mb_ms[part] / f64::from(function.memory_mb.max(1))) as u64,
            });
        }
    }

    for (name, _) in &outcome.queues {
        let counters = |u: &UsageSoFar| u.queues.iter().find(|(n, _)| n == name).map(|(_, c)| *c);
        // Polls that found nothing follow the clock (a poller asks again every 20 s); every
        // other request follows what sent the messages.
        let asked = line(&|u| {
            counters(u).map_or(0.0, |c| {
                c.billed_requests().saturating_sub(c.empty_receives) as f64
            })
        });
        let idle = line(&|u| counters(u).map_or(0.0, |c| c.empty_receives as f64));
        let driver = if *name == scale.inbox_queue {
            Driver::Adds
        } else {
            Driver::Activity
        };
        let asked = month(attribution.split(driver, &asked), driver);
        let idle = month(attribution.split(Driver::Clock, &idle), Driver::Clock);
        let fifo = scale.fifo_queues.contains(name);
        for (part, usage) in parts.iter_mut().enumerate() {
            let billed = (asked[part] + idle[part]).round() as u64;
            let requests = SqsRequests {
                fifo: if fifo { billed } else { 0 },
                standard: if fifo { 0 } else { billed },
            };
            usage.sqs.fifo += requests.fifo;
            usage.sqs.standard += requests.standard;
        }
    }

    // DynamoDB by the minute: units served before each counted instant.
    let dynamo = |value: fn(&crate::services::dynamodb::Usage) -> f64| -> Vec<f64> {
        let mut values: Vec<f64> = counted[..counted.len() - 1]
            .iter()
            .map(|u| {
                outcome
                    .dynamo_by_minute
                    .iter()
                    .take_while(|(minute, _)| *minute < u.at_ms)
                    .fold(0.0, |sum, (_, usage)| sum + value(usage))
            })
            .collect();
        values.push(value(&outcome.dynamo));
        values
    };
    let reads = month(
        attribution.split(Driver::Activity, &dynamo(|u| u.read_units())),
        Driver::Activity,
    );
    let writes = month(
        attribution.split(Driver::Activity, &dynamo(|u| u.write_units as f64)),
        Driver::Activity,
    );
    for (part, usage) in parts.iter_mut().enumerate() {
        let ingested_gb = log_lines[part] * LOG_BYTES_PER_LINE / 1e9;
        usage.dynamo = DynamoUsage {
            read_units: reads[part],
            write_units: writes[part],
            storage_gb: 0.0,
            point_in_time_recovery: false,
        };
        usage.logs = LogsUsage {
            ingested_gb,
            stored_gb: ingested_gb * scale.log_months_kept,
        };
    }

    let [continuous, shift_edges, midnights] = parts;
    let callbacks = invocations_of(outcome, &scale.callback_function);
    let flips_a_day = outcome.staff as f64 * scale.flips_per_staff_day;
    let continuous = MonthUsage {
        tenants: outcome.tenants as u64,
        scans: (outcome.happened.scans as f64 * scale.per_day * DAYS_PER_MONTH).round() as u64,
        // WeCom's callbacks follow the scans; the admin API's calls are the breaks' flips.
        api_rest_requests: ((callbacks as f64 * scale.per_day + flips_a_day) * DAYS_PER_MONTH)
            .round() as u64,
        dynamo: DynamoUsage {
            storage_gb: outcome.codes as f64 * TABLE_BYTES_PER_CODE / 1e9,
            ..continuous.dynamo
        },
        nat: nat_usage(
            scale.nat_gateways,
            scale.interface_endpoint_zones,
            wecom_calls_per_month(outcome, scale, refresh_month_invocations),
        ),
        scheduler_invocations: outcome
            .schedules
            .iter()
            .map(|(_, c)| (c.firings as f64 * scale.clock_per_day * DAYS_PER_MONTH) as u64)
            .sum(),
        ..continuous
    };

    let unfinished_messages: u64 = outcome
        .depths
        .iter()
        .filter(|(queue, _)| scale.consumed_queues.contains(queue))
        .filter_map(|(_, samples)| samples.last())
        .map(|s| (s.visible + s.in_flight + s.delayed) as u64)
        .sum();
    // The backlog belongs to the latest edge's wave, and scales as it does.
    let unfinished_per_month = unfinished_messages as f64
        * DAYS_PER_MONTH
        * match scale.edges.last().map(|e| e.wave) {
            Some(Wave::ShiftEdge) => scale.shift_edges_per_day.unwrap_or(0.0),
            Some(Wave::Midnight) => scale.midnights_per_day.unwrap_or(0.0),
            None => scale.activity_per_day,
        };
    MonthParts {
        continuous,
        shift_edges,
        midnights,
        unfinished_messages,
        wave_messages_handled,
        unfinished_per_month,
    }
}

/// Bytes through a NAT gateway per WeCom call, request and answer with their headers and TLS
/// [assumption]: a list of 10 to 20 members is about 600 bytes of JSON.
const WECOM_BYTES_PER_CALL: f64 = 2_048.0;

/// How often the stretch invoked `function`.
fn invocations_of(outcome: &Outcome, function: &str) -> u64 {
    outcome
        .functions
        .iter()
        .filter(|(name, _)| name == function)
        .map(|(_, c)| c.invocations)
        .sum()
}

/// The month's WeCom calls: the stretch's, scaled as the refresh function's invocations are
/// (its calls are nearly all of them).
fn wecom_calls_per_month(outcome: &Outcome, scale: &MonthScale, refresh_month: f64) -> f64 {
    let refresh_stretch = invocations_of(outcome, &scale.refresh_function);
    let refused: u64 = outcome.wecom.refused_by_window.values().sum();
    let calls = (outcome.wecom.accepted + refused) as f64;
    if refresh_stretch == 0 {
        0.0
    } else {
        calls * refresh_month / refresh_stretch as f64
    }
}

/// The egress VPC's month: every hour of its NAT gateways, their addresses and its interface
/// endpoints' zones, and the WeCom calls' bytes through the gateways. `None` without a gateway.
fn nat_usage(gateways: u32, endpoint_zones: u32, wecom_calls: f64) -> Option<NatUsage> {
    (gateways > 0).then(|| NatUsage {
        gateways,
        hours: 24.0 * DAYS_PER_MONTH,
        processed_gb: wecom_calls * WECOM_BYTES_PER_CALL / 1e9,
        endpoint_zones,
    })
}

/// Every function's lines kept the template's retention, or forever (on average a year's).
fn log_months_kept(settings: &crate::settings::Settings) -> f64 {
    let functions = u32::try_from(settings.functions.len()).unwrap_or(u32::MAX);
    match settings.account.log_retention_days {
        Some(days) if settings.account.log_groups_with_retention >= functions => {
            (f64::from(days) / DAYS_PER_MONTH).min(LOG_MONTHS_KEPT_FOREVER)
        }
        _ => LOG_MONTHS_KEPT_FOREVER,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::default_profile_path;
    use crate::settings::Settings;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9 * b.abs().max(1.0)
    }

    #[test]
    fn changes_made_by_breaks_scale_by_the_days_breaks_not_by_its_scans() {
        // 84 times the stretch's scans in a day, 28 times its flips, 40 times its resignations.
        let (adds, flips, resignations) = (84.0, 28.0, 40.0);
        let only_flips = ReasonsMade {
            by_flips: 5_000,
            ..ReasonsMade::default()
        };
        assert_eq!(
            activity_per_day(&only_flips, adds, flips, resignations),
            Some(28.0)
        );
        let mixed = ReasonsMade {
            by_adds: 100,
            by_flips: 800,
            by_resignations: 100,
        };
        let blended = activity_per_day(&mixed, adds, flips, resignations).unwrap_or_default();
        assert!(
            close(blended, 0.1 * 84.0 + 0.8 * 28.0 + 0.1 * 40.0),
            "{blended}"
        );
        assert_eq!(
            activity_per_day(&ReasonsMade::default(), adds, flips, resignations),
            None
        );
    }

    #[test]
    fn the_scheduled_functions_follow_the_clock_and_the_callbacks_path_the_adds() {
        let profile = Profile::load(&default_profile_path()).expect("the shipped profile");
        let settings = Settings::read_project(&[]).expect("the project's template");
        let scale = MonthScale::of(&profile, &settings);
        let driver = |id: &str| {
            scale
                .functions
                .iter()
                .find(|f| f.id == id)
                .map(|f| f.driver)
        };
        assert_eq!(driver(&settings.tick.function), Some(Driver::Clock));
        assert_eq!(driver(&settings.sweep.function), Some(Driver::Clock));
        assert_eq!(driver(&settings.callback.function), Some(Driver::Adds));
        assert_eq!(driver(&settings.record_facts.function), Some(Driver::Adds));
        assert_eq!(driver(&settings.refresh.function), Some(Driver::Activity));
        assert_eq!(scale.inbox_queue, settings.callback.inbox_queue);
    }

    #[test]
    fn nat_gateways_bill_every_hour_of_the_month_and_the_wecom_calls_bytes() {
        assert_eq!(
            nat_usage(0, 0, 1e6),
            None,
            "no NAT gateway without FixedEgress"
        );
        let nat = nat_usage(2, 2, 1e6).expect("two gateways");
        assert_eq!((nat.gateways, nat.hours, nat.endpoint_zones), (2, 720.0, 2));
        assert!(close(nat.processed_gb, 2.048), "{nat:?}");
    }
}
