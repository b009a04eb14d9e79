//! qrsync's library crate.
//!
//! - `wecom`: WeCom's wire formats (callback crypto, envelopes, events).
//! - `intake`: MISSION rule 1, the callback function's verify, persist, answer.
//! - `membership`: MISSION's membership rules, the pure recompute of a code's list.
//! - `facts`: MISSION rules 2 and 8, facts written idempotently (claims by business key), then refresh reasons.
//! - `refresh`: MISSION rules 3 to 5, the single writer of each code's WeCom list.
//! - `lanes`: MISSION "Lanes", the pure policy choosing the fast or slow lane per event.
//! - `tenants`: tenant ids and the settings that authenticate their callbacks.
//! - `ports`: the traits the domain needs; `adapters`: DynamoDB, SQS and in-memory versions.
//! - `schedules`: work-schedule edges and the tenant's midnight, due in a minute-bucketed index.
//! - `owed`: index work an edit still owes, so a retried edit finishes what it interrupted.
//! - `batch`: MISSION rule 7, order-safe partial batch responses for FIFO consumers.
//! - `http`: how domain errors become HTTP answers, shared by every HTTP function.

pub mod adapters;
pub mod admin;
pub mod batch;
pub mod env;
pub mod facts;
pub mod fanout;
pub mod http;
mod ids;
pub mod intake;
pub mod lanes;
pub mod logging;
pub mod membership;
pub mod owed;
pub mod ports;
pub mod refresh;
pub mod schedules;
pub mod tenants;
pub mod wecom;

/// Milliseconds since the epoch. Domain code takes a `Clock` so tests can fix time.
pub type Clock = fn() -> u64;

/// The operator's clock offset (template parameter `ClockOffsetSeconds`), in seconds.
pub const CLOCK_OFFSET_VAR: &str = "QRSYNC_CLOCK_OFFSET_SECONDS";

/// The time every function acts on: the host's clock moved by `QRSYNC_CLOCK_OFFSET_SECONDS`
/// (0 when unset). The offset exists so an operator can move a whole stack through a day
/// rollover or a shift edge (the local demo does); it is read once per process.
pub fn system_clock() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or_default()
        .saturating_add_signed(clock_offset_ms())
}

fn clock_offset_ms() -> i64 {
    static OFFSET_MS: std::sync::OnceLock<i64> = std::sync::OnceLock::new();
    *OFFSET_MS.get_or_init(|| {
        let raw = std::env::var(CLOCK_OFFSET_VAR).unwrap_or_default();
        parse_clock_offset(&raw).unwrap_or_else(|| {
            // The template only passes whole numbers; a hand-edited value must not stop time.
            tracing::error!(value = %raw, "{CLOCK_OFFSET_VAR} is not a whole number of seconds; using 0");
            0
        })
    })
}

/// Seconds (an optionally signed integer, or empty for none) as milliseconds.
fn parse_clock_offset(raw: &str) -> Option<i64> {
    let raw = raw.trim();
    if raw.is_empty() {
        return Some(0);
    }
    raw.parse::<i64>()
        .ok()
        .map(|secs| secs.saturating_mul(1000))
}

#[cfg(test)]
mod clock_tests {
    use super::parse_clock_offset;

    #[test]
    fn a_clock_offset_is_whole_seconds_either_way() {
        assert_eq!(parse_clock_offset(""), Some(0));
        assert_eq!(parse_clock_offset("86400"), Some(86_400_000));
        assert_eq!(parse_clock_offset(" -90 "), Some(-90_000));
        assert_eq!(parse_clock_offset("1.5"), None);
        assert_eq!(parse_clock_offset("soon"), None);
    }
}
