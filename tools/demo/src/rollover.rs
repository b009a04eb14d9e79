//! The day rollover: after the campaign, the stack's clock (every function's, and WeCom's with
//! it) jumps to just before the tenant's midnight; nothing else happens, and the schedule tick
//! alone must bring back the staff removed for a daily limit or the company cap.
//!
//! The tenant's timezone is chosen so that its midnight comes soon after the campaign: the jump
//! stays well within the tick's one-hour catch-up.

use shared::tenants::Timezone;

/// Zones whose midnights fall on every half hour of UTC (and a few quarter hours).
const ZONES: &[&str] = &[
    "Pacific/Kiritimati",
    "Pacific/Chatham",
    "Pacific/Auckland",
    "Pacific/Fiji",
    "Pacific/Noumea",
    "Australia/Lord_Howe",
    "Australia/Sydney",
    "Australia/Adelaide",
    "Australia/Darwin",
    "Asia/Tokyo",
    "Australia/Eucla",
    "Asia/Shanghai",
    "Asia/Bangkok",
    "Asia/Yangon",
    "Asia/Dhaka",
    "Asia/Kathmandu",
    "Asia/Kolkata",
    "Asia/Karachi",
    "Asia/Kabul",
    "Asia/Dubai",
    "Asia/Tehran",
    "Europe/Moscow",
    "Africa/Johannesburg",
    "Africa/Lagos",
    "UTC",
    "Atlantic/Cape_Verde",
    "Atlantic/South_Georgia",
    "America/Sao_Paulo",
    "America/St_Johns",
    "America/Caracas",
    "America/Bogota",
    "America/Mexico_City",
    "America/Phoenix",
    "America/Los_Angeles",
    "America/Anchorage",
    "Pacific/Marquesas",
    "Pacific/Honolulu",
    "Pacific/Pago_Pago",
];

/// The zone whose next midnight comes soonest after `not_before_ms`, and that midnight (at
/// most about half an hour later).
pub fn zone_with_the_next_midnight(not_before_ms: u64) -> (Timezone, u64) {
    ZONES
        .iter()
        .filter_map(|name| name.parse::<Timezone>().ok())
        .map(|zone| (zone, zone.next_midnight_ms(not_before_ms)))
        .min_by_key(|(_, midnight)| *midnight)
        .unwrap_or_else(|| {
            let zone = Timezone::default();
            (zone, zone.next_midnight_ms(not_before_ms))
        })
}

/// What the rollover did, as the demo saw it.
#[derive(Debug, Clone, Default)]
pub struct Rollover {
    /// Why it did not run (the stack lacks a part, or the run was told to leave it out).
    pub skipped: Option<String>,
    /// Left out on purpose (`--no-rollover`): not a failure.
    pub left_out: bool,
    pub midnight_ms: u64,
    /// How far the clock jumped (stack and sandbox), in seconds.
    pub jump_secs: i64,
    /// The stack's time right after the jump.
    pub jumped_to_ms: u64,
    /// Real seconds from the jump until the tick moved the midnight item on.
    pub tick_secs: Option<f64>,
    /// The queues drained after the rollover's refreshes.
    pub drained: bool,
    /// (code, staff) pairs removed for a daily limit or the cap on the day that ended and
    /// eligible otherwise: the rollover must put each back.
    pub expected_back: Vec<(String, String)>,
    /// Of those, the pairs on the code's sandbox list after the rollover.
    pub back: Vec<(String, String)>,
    /// Pushes between the jump and midnight (none should happen: no event).
    pub pushes_before_midnight: usize,
    /// Pushes after midnight serving the rollover's reasons: (code, pushed_at_ms).
    pub pushes: Vec<(String, u64)>,
    /// The refresh counters of the new day: reasons, recomputes, pushes.
    pub new_day: Option<(u64, u64, u64)>,
    /// Codes whose sandbox list differs from the recompute at the new day, with details.
    pub differ: Vec<String>,
    pub codes: usize,
    /// Restoring the clock afterwards failed.
    pub restore_error: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn some_zone_has_its_midnight_within_about_half_an_hour() {
        // 2026-03-10T13:07:00Z and a few other instants.
        for at in [1_773_148_020_000u64, 1_773_100_000_000, 1_773_199_999_000] {
            let (zone, midnight) = zone_with_the_next_midnight(at);
            assert!(midnight > at);
            assert!(midnight - at <= 46 * 60_000, "{zone}: {}", midnight - at);
            assert_eq!(zone.at(midnight).format("%H:%M").to_string(), "00:00");
        }
    }
}
