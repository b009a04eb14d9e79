//! What an operator sees: every metric qrsync records, named in one place, through the
//! vendor-neutral `metrics` facade (no AWS type here). `adapters::metrics` installs the
//! recorder that writes them as CloudWatch Embedded Metric Format documents, one set per
//! invocation, and `template.yaml`'s alarms and dashboard name the same metrics.
//!
//! Dimensions are the function (set by the recorder) and, where it matters, a refusal reason,
//! a failure class or a lane: a handful of values each. Tenant ids would be 30,000 dimension
//! values (a custom metric each), so they are collected with [`tenant`] and written as a
//! property of the invocation's documents, searchable in Logs Insights, never a dimension.

use crate::ids::TenantId;
use crate::lanes::Lane;
use metrics::{counter, describe_counter, describe_histogram, histogram, Unit};
use std::collections::BTreeSet;
use std::sync::Mutex;

/// The CloudWatch namespace of every metric.
pub const NAMESPACE: &str = "qrsync";

/// Dimension names.
pub mod dimension {
    /// The deployed function's name (every metric).
    pub const FUNCTION: &str = "Function";
    /// Why a callback was refused (`ErrorAnswer::code`).
    pub const REASON: &str = "Reason";
    /// A failure class (`FailureClass::as_str`, or `poison`).
    pub const CLASS: &str = "Class";
    /// `fast` or `slow`.
    pub const LANE: &str = "Lane";
    /// An HTTP status class.
    pub const STATUS: &str = "Status";
}

/// Metric names.
pub mod name {
    pub const COLD_STARTS: &str = "ColdStarts";
    pub const CALLBACKS_ACCEPTED: &str = "CallbacksAccepted";
    pub const CALLBACKS_REFUSED: &str = "CallbacksRefused";
    pub const ACK_DURATION: &str = "AckDuration";
    pub const ADDS_COUNTED: &str = "AddsCounted";
    pub const ADDS_DUPLICATE: &str = "AddsDuplicate";
    pub const REFRESH_REASONS: &str = "RefreshReasons";
    pub const RECOMPUTES: &str = "Recomputes";
    pub const PUSHES: &str = "Pushes";
    pub const UNCHANGED_LISTS: &str = "UnchangedLists";
    pub const STARVED_CODES: &str = "StarvedCodes";
    pub const BUDGET_REFUSALS: &str = "BudgetRefusals";
    /// WeCom's 45009 and 45033 answers.
    pub const WECOM_THROTTLED: &str = "WeComThrottled";
    pub const BUSY_LEASES: &str = "BusyLeases";
    pub const SLOW_LANE_REPUBLISHES: &str = "SlowLaneRepublishes";
    pub const FACT_TO_PUSH: &str = "FactToPushLatency";
    /// Failures by class (dimension `Class`), whatever path they took.
    pub const FAILURES: &str = "Failures";
    /// Messages moved to a dead-letter queue by qrsync itself, by class.
    pub const DEAD_LETTERED: &str = "DeadLettered";
    /// The larger share of a tenant's WeCom budget (minute or hour window) spent, after a spend.
    pub const BUDGET_USED: &str = "BudgetUsedPercent";
    /// The larger share of an egress address's WeCom budget (minute or hour window, shared by
    /// every tenant behind it) spent, after a spend.
    pub const ADDRESS_BUDGET_USED: &str = "AddressBudgetUsedPercent";
    /// Tenants paused because WeCom refused their credentials, address or permission.
    pub const TENANTS_PAUSED: &str = "TenantsPaused";
    /// Paused tenants a probe found served again.
    pub const TENANTS_RESUMED: &str = "TenantsResumed";
    pub const DIRTY_CODES: &str = "DirtyCodes";
    pub const DRIFT_READ_BACKS: &str = "DriftReadBacks";
    pub const DRIFT_FOUND: &str = "DriftFound";
    pub const DRIFT_REPAIRS: &str = "DriftRepairs";
    pub const DRIFT_GUARD_TRIPPED: &str = "DriftGuardTripped";
    pub const FAN_OUT_REASONS: &str = "FanOutReasons";
    pub const TICK_REASONS: &str = "TickReasons";
    pub const TICK_FAN_OUTS: &str = "TickFanOuts";
    pub const ALARM_MESSAGES_POSTED: &str = "AlarmMessagesPosted";
    /// Admin API answers, by status class (dimension `Status`: `2xx`, `4xx`, `5xx`).
    pub const ADMIN_ANSWERS: &str = "AdminAnswers";
}

/// The property holding the tenant ids an invocation's metrics concern.
pub const TENANTS_PROPERTY: &str = "TenantIds";
/// At most this many tenant ids per document (a batch has 10 messages; a sweep may touch more).
pub const MAX_TENANTS_PER_DOCUMENT: usize = 50;

const COUNTS: &[&str] = &[
    name::COLD_STARTS,
    name::CALLBACKS_ACCEPTED,
    name::CALLBACKS_REFUSED,
    name::ADDS_COUNTED,
    name::ADDS_DUPLICATE,
    name::REFRESH_REASONS,
    name::RECOMPUTES,
    name::PUSHES,
    name::UNCHANGED_LISTS,
    name::STARVED_CODES,
    name::BUDGET_REFUSALS,
    name::WECOM_THROTTLED,
    name::BUSY_LEASES,
    name::SLOW_LANE_REPUBLISHES,
    name::FAILURES,
    name::DEAD_LETTERED,
    name::DIRTY_CODES,
    name::DRIFT_READ_BACKS,
    name::DRIFT_FOUND,
    name::DRIFT_REPAIRS,
    name::DRIFT_GUARD_TRIPPED,
    name::FAN_OUT_REASONS,
    name::TICK_REASONS,
    name::TICK_FAN_OUTS,
    name::ALARM_MESSAGES_POSTED,
    name::ADMIN_ANSWERS,
    name::TENANTS_PAUSED,
    name::TENANTS_RESUMED,
];

/// Tells the installed recorder each metric's unit (EMF carries it with the metric).
pub fn describe() {
    for &count in COUNTS {
        describe_counter!(count, Unit::Count, "");
    }
    describe_histogram!(name::ACK_DURATION, Unit::Milliseconds, "");
    describe_histogram!(name::FACT_TO_PUSH, Unit::Milliseconds, "");
    describe_histogram!(name::BUDGET_USED, Unit::Percent, "");
    describe_histogram!(name::ADDRESS_BUDGET_USED, Unit::Percent, "");
}

static TENANTS: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());

/// Notes that this invocation's metrics concern `tenant` (a property, never a dimension).
pub fn tenant(tenant: &TenantId) {
    if let Ok(mut seen) = TENANTS.lock() {
        if seen.len() < MAX_TENANTS_PER_DOCUMENT {
            seen.insert(tenant.to_string());
        }
    }
}

/// The tenants noted since the last call, emptied (the recorder calls it once per flush).
pub fn take_tenants() -> Vec<String> {
    TENANTS
        .lock()
        .map(|mut seen| std::mem::take(&mut *seen).into_iter().collect())
        .unwrap_or_default()
}

pub fn cold_start() {
    counter!(name::COLD_STARTS).increment(1);
}

/// A callback the inbox accepted, `ack_ms` after it arrived.
pub fn callback_accepted(ack_ms: u64) {
    counter!(name::CALLBACKS_ACCEPTED).increment(1);
    histogram!(name::ACK_DURATION).record(ack_ms as f64);
}

/// A callback refused (`reason`: the answer's code, e.g. `bad_signature`, `unavailable`).
pub fn callback_refused(reason: &'static str, ack_ms: u64) {
    counter!(name::CALLBACKS_REFUSED, dimension::REASON => reason).increment(1);
    histogram!(name::ACK_DURATION).record(ack_ms as f64);
}

/// One add fact: counted now, or already counted (a duplicate delivery dropped).
pub fn add(tenant_id: &TenantId, counted: bool) {
    tenant(tenant_id);
    let metric = if counted {
        name::ADDS_COUNTED
    } else {
        name::ADDS_DUPLICATE
    };
    counter!(metric).increment(1);
}

/// A failure of `class` (a `FailureClass` name, or `poison`), whatever path it then takes.
pub fn failure(class: &'static str) {
    counter!(name::FAILURES, dimension::CLASS => class).increment(1);
}

/// A message qrsync itself moved to a dead-letter queue, with its class.
pub fn dead_lettered(class: &'static str) {
    counter!(name::DEAD_LETTERED, dimension::CLASS => class).increment(1);
}

/// One code's refresh, by its counts (the same figures as the tenant's daily tally): each is
/// a metric of `name` and its number, recorded when not zero.
pub fn refreshed(tenant_id: &TenantId, counts: &[(&'static str, u32)]) {
    tenant(tenant_id);
    for &(metric, value) in counts {
        if value > 0 {
            counter!(metric).increment(u64::from(value));
        }
    }
}

/// A push landed `latency_ms` after the oldest fact behind it was written.
pub fn fact_to_push(latency_ms: u64, lane: Lane) {
    let lane = match lane {
        Lane::Fast => "fast",
        Lane::Slow => "slow",
    };
    histogram!(name::FACT_TO_PUSH, dimension::LANE => lane).record(latency_ms as f64);
}

/// After a spend: the larger share of the tenant's minute or hour budget now spent.
pub fn budget_used(tenant_id: &TenantId, percent: f64) {
    tenant(tenant_id);
    histogram!(name::BUDGET_USED).record(percent);
}

/// A tenant was paused (`crate::tenants::TenantPause`). One metric, not one per class of
/// WeCom's refusal, so one alarm watches it; the class is in the pause's alert and log line.
pub fn tenant_paused() {
    counter!(name::TENANTS_PAUSED).increment(1);
}

/// A paused tenant's probe succeeded and it was resumed.
pub fn tenant_resumed() {
    counter!(name::TENANTS_RESUMED).increment(1);
}

/// After a spend: the larger share of an egress address's minute or hour budget now spent.
/// The address is in the log line, not a dimension: the highest across addresses is what
/// an alarm watches.
pub fn address_budget_used(address: &str, percent: f64) {
    tracing::trace!(address, percent, "address budget spent");
    histogram!(name::ADDRESS_BUDGET_USED).record(percent);
}

/// The backstop's run: dirty codes due, contact ways read back, drift found and repaired, and
/// tenants whose blast-radius guard tripped.
pub fn swept(dirty_due: u32, read_back: u32, differing: u32, repairs: u32, guards_tripped: u32) {
    counter!(name::DIRTY_CODES).increment(u64::from(dirty_due));
    counter!(name::DRIFT_READ_BACKS).increment(u64::from(read_back));
    counter!(name::DRIFT_FOUND).increment(u64::from(differing));
    counter!(name::DRIFT_REPAIRS).increment(u64::from(repairs));
    counter!(name::DRIFT_GUARD_TRIPPED).increment(u64::from(guards_tripped));
}

/// Refresh reasons a fan-out sent.
pub fn fan_out_reasons(sent: u64) {
    counter!(name::FAN_OUT_REASONS).increment(sent);
}

/// Refresh reasons the schedule tick sent.
pub fn tick_reasons(sent: u64) {
    counter!(name::TICK_REASONS).increment(sent);
}

/// Fan-outs the tick sent (one per shift edge, one per rollover with staff back from the
/// company cap).
pub fn tick_fan_outs(sent: u64) {
    counter!(name::TICK_FAN_OUTS).increment(sent);
}

/// An admin API answer with `status`.
pub fn admin_answered(status: u16) {
    let class = match status {
        200..=299 => "2xx",
        400..=499 => "4xx",
        _ => "5xx",
    };
    counter!(name::ADMIN_ANSWERS, dimension::STATUS => class).increment(1);
}

/// An alarm change posted to the team's group robot.
pub fn alarm_message_posted() {
    counter!(name::ALARM_MESSAGES_POSTED).increment(1);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tenants_of_a_document_are_bounded() {
        // Other tests of this crate note tenants too (the set is the process's): only the
        // bound is certain.
        take_tenants();
        for i in 0..(MAX_TENANTS_PER_DOCUMENT + 10) {
            tenant(&TenantId::parse(&format!("t{i}")).expect("valid"));
        }
        assert_eq!(take_tenants().len(), MAX_TENANTS_PER_DOCUMENT);
    }

    #[test]
    fn every_counted_metric_has_a_distinct_name() {
        let distinct: BTreeSet<_> = COUNTS.iter().collect();
        assert_eq!(distinct.len(), COUNTS.len());
    }
}
