//! The stretch's counted usage, scaled to a month.
//!
//! The stretch is the day's busiest hours, not a day: usage that follows the scans and the
//! staff changes is scaled by the day's scans over the stretch's (`per_day`), usage that
//! follows the clock (schedules) by the day's length over the stretch's, and both by 30 days.
//! Scaling the busiest hours by scans overstates the quiet hours' refreshes (shift waves and
//! midnights are not spread like scans); the report says so next to its figure.

use crate::cost::{DynamoUsage, FunctionUsage, LogsUsage, MonthUsage, SqsRequests};
use crate::run::Outcome;

/// Bytes CloudWatch Logs ingests per invocation and per message handled [assumption: the
/// functions log a start and an end line per invocation and one line per message, ~300 bytes
/// each as JSON].
const LOG_BYTES_PER_LINE: f64 = 300.0;
/// The table's bytes per code: the code, its pushed list, its index entries [assumption].
const TABLE_BYTES_PER_CODE: f64 = 3_000.0;
/// With no retention set, the logs kept are every earlier month's too: a year's worth on
/// average over a platform's first two years [assumption].
const LOG_MONTHS_KEPT_FOREVER: f64 = 12.0;
const DAYS_PER_MONTH: f64 = 30.0;

#[derive(Debug, Clone)]
pub struct MonthScale {
    /// The day's scans over the stretch's.
    pub per_day: f64,
    /// The day's length over the stretch's.
    pub clock_per_day: f64,
    /// Each function's memory and whether it runs on arm64 (from the template).
    pub functions: Vec<(String, u32, bool)>,
    /// FIFO queues, by logical id.
    pub fifo_queues: Vec<String>,
    /// Months of logs stored on average: the template's retention when every function has a
    /// log group with one, else `LOG_MONTHS_KEPT_FOREVER`.
    pub log_months_kept: f64,
}

impl MonthScale {
    /// The functions and queues as the template declares them; the stretch's share of the
    /// day comes with `with_stretch`.
    pub fn of(profile: &crate::profile::Profile, settings: &crate::settings::Settings) -> Self {
        let _ = profile;
        Self {
            per_day: 1.0,
            clock_per_day: 1.0,
            functions: settings
                .functions
                .values()
                .map(|f| (f.id.clone(), f.memory_mb, f.architecture == "arm64"))
                .collect(),
            fifo_queues: settings
                .queues
                .values()
                .filter(|q| q.fifo)
                .map(|q| q.id.clone())
                .collect(),
            log_months_kept: log_months_kept(settings),
        }
    }

    /// The day's scans over the stretch's, and the day's length over the stretch's.
    pub fn with_stretch(mut self, outcome: &Outcome, profile: &crate::profile::Profile) -> Self {
        let stretch_ms = outcome.end_ms.saturating_sub(outcome.start_ms).max(1) as f64;
        self.clock_per_day = 86_400_000.0 / stretch_ms;
        self.per_day = if outcome.happened.scans == 0 {
            self.clock_per_day
        } else {
            profile.scans.day as f64 * outcome_share(outcome) / outcome.happened.scans as f64
        };
        self
    }

    pub fn explain(&self) -> String {
        format!(
            "scaled from the stretch: scan- and change-driven usage x {:.1} (the day's scans over the stretch's), schedules x {:.1} (the day's length over the stretch's), x {DAYS_PER_MONTH} days; storage {TABLE_BYTES_PER_CODE} bytes per code, logs {LOG_BYTES_PER_LINE} bytes per line kept {:.1} months ({}); CloudWatch metrics and alarms left out",
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
}

/// The share of the platform's scans the simulated tenants get (1 unless a small scenario
/// kept only some tenants).
fn outcome_share(outcome: &Outcome) -> f64 {
    outcome.scan_share
}

pub fn month_usage(outcome: &Outcome, scale: &MonthScale) -> MonthUsage {
    let events = scale.per_day * DAYS_PER_MONTH;
    let clock = scale.clock_per_day * DAYS_PER_MONTH;
    let scaled = |n: u64| (n as f64 * events).round() as u64;
    let mut log_lines = 0.0;
    let functions = outcome
        .functions
        .iter()
        .filter_map(|(name, counters)| {
            let (_, memory_mb, arm64) = scale.functions.iter().find(|(f, _, _)| f == name)?;
            log_lines += (2 * counters.invocations + counters.messages_deleted) as f64 * events;
            Some(FunctionUsage {
                function: name.clone(),
                arm64: *arm64,
                memory_mb: *memory_mb,
                invocations: scaled(counters.invocations),
                billed_ms: (counters.mb_ms as f64 / f64::from((*memory_mb).max(1)) * events) as u64,
            })
        })
        .collect();
    let mut sqs = SqsRequests::default();
    for (name, counters) in &outcome.queues {
        let billed = scaled(counters.billed_requests());
        if scale.fifo_queues.contains(name) {
            sqs.fifo += billed;
        } else {
            sqs.standard += billed;
        }
    }
    let callbacks: u64 = outcome
        .functions
        .iter()
        .filter(|(name, _)| name.contains("Callback"))
        .map(|(_, c)| c.invocations)
        .sum();
    let ingested_gb = log_lines * LOG_BYTES_PER_LINE / 1e9;
    MonthUsage {
        tenants: outcome.tenants as u64,
        scans: scaled(outcome.happened.scans),
        functions,
        api_rest_requests: scaled(callbacks + outcome.happened.breaks * 2),
        sqs,
        dynamo: DynamoUsage {
            read_units: outcome.dynamo.read_units() * events,
            write_units: outcome.dynamo.write_units as f64 * events,
            storage_gb: outcome.codes as f64 * TABLE_BYTES_PER_CODE / 1e9,
            point_in_time_recovery: false,
        },
        logs: LogsUsage {
            ingested_gb,
            stored_gb: ingested_gb * scale.log_months_kept,
        },
        custom_metrics: 0,
        alarms: 0,
        dashboards: 0,
        nat: None,
        scheduler_invocations: outcome
            .schedules
            .iter()
            .map(|(_, c)| (c.firings as f64 * clock) as u64)
            .sum(),
    }
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
