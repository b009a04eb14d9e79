//! The time the admin API, record-facts, refresh, schedule-tick and sweep functions act on. The
//! callback function checks a callback's signed timestamp against the host's clock, and the
//! fan-out function only reads deadlines, so neither takes this clock. Every function reads
//! the time to its invocation's deadline through `time_to_deadline`.

/// The time left until a Lambda invocation's deadline (milliseconds since the epoch, real
/// time: the clock offset does not apply to Lambda's deadline); `fallback` when the invocation
/// carries none (a hand-run `sam local invoke`).
pub fn time_to_deadline(
    deadline_ms: u64,
    now: std::time::SystemTime,
    fallback: std::time::Duration,
) -> std::time::Duration {
    if deadline_ms == 0 {
        return fallback;
    }
    (std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_millis(deadline_ms))
        .duration_since(now)
        .unwrap_or(std::time::Duration::ZERO)
}

/// What an SQS consumer may spend of its invocation, in milliseconds: the time to its
/// deadline less `reserve_ms` for finishing the batch. None without a deadline: a consumer
/// would rather queue its work again than start what it may not finish.
pub fn consumer_time_left_ms(deadline_ms: u64, reserve_ms: u64) -> u64 {
    let left = time_to_deadline(
        deadline_ms,
        std::time::SystemTime::now(),
        std::time::Duration::ZERO,
    );
    u64::try_from(left.as_millis())
        .unwrap_or(u64::MAX)
        .saturating_sub(reserve_ms)
}

/// The host's clock, milliseconds since the epoch, as Lambda's deadline is: the operator's
/// clock offset does not move it.
pub fn host_clock() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or_default()
}

/// The operator's clock offset (template parameter `ClockOffsetSeconds`), in seconds.
pub const CLOCK_OFFSET_VAR: &str = "QRSYNC_CLOCK_OFFSET_SECONDS";

/// The host's clock moved by `QRSYNC_CLOCK_OFFSET_SECONDS`
/// (0 when unset). The offset exists so an operator can move a whole stack through a day
/// rollover or a shift edge (the local demo does); it is read once per process.
pub fn system_clock() -> u64 {
    host_clock().saturating_add_signed(clock_offset_ms())
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
    use super::{consumer_time_left_ms, host_clock, parse_clock_offset, time_to_deadline};
    use std::time::{Duration, SystemTime};

    #[test]
    fn the_time_to_a_deadline_is_what_is_left_of_it_or_the_fallback_without_one() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
        let fallback = Duration::from_secs(30);
        assert_eq!(
            time_to_deadline(1_055_000, now, fallback),
            Duration::from_secs(55)
        );
        assert_eq!(time_to_deadline(999_000, now, fallback), Duration::ZERO);
        assert_eq!(time_to_deadline(0, now, fallback), fallback);
    }

    #[test]
    fn a_consumer_keeps_its_reserve_back_and_has_no_time_without_a_deadline() {
        let left = consumer_time_left_ms(host_clock() + 60_000, 1_500);
        assert!((57_000..=58_500).contains(&left), "{left}");
        assert_eq!(consumer_time_left_ms(host_clock() + 1_000, 1_500), 0);
        assert_eq!(consumer_time_left_ms(0, 1_500), 0);
    }

    #[test]
    fn a_clock_offset_is_whole_seconds_either_way() {
        assert_eq!(parse_clock_offset(""), Some(0));
        assert_eq!(parse_clock_offset("86400"), Some(86_400_000));
        assert_eq!(parse_clock_offset(" -90 "), Some(-90_000));
        assert_eq!(parse_clock_offset("1.5"), None);
        assert_eq!(parse_clock_offset("soon"), None);
    }
}
