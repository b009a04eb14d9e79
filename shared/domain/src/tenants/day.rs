//! "Today" is the tenant's day: daily limits and the company cap count adds per calendar day
//! in the tenant's timezone (default Asia/Shanghai).

use chrono::TimeZone;
use chrono_tz::Tz;
use std::fmt;
use std::str::FromStr;

pub const DEFAULT_TIMEZONE: &str = "Asia/Shanghai";

/// An IANA timezone name, validated.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Timezone(Tz);

impl Default for Timezone {
    fn default() -> Self {
        Self(chrono_tz::Asia::Shanghai)
    }
}

impl FromStr for Timezone {
    type Err = String;
    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Tz::from_str(name)
            .map(Self)
            .map_err(|_| format!("{name:?} is not an IANA timezone name"))
    }
}

impl Timezone {
    pub fn name(&self) -> &'static str {
        self.0.name()
    }
}

impl fmt::Debug for Timezone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl fmt::Display for Timezone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Timezone {
    pub fn tz(&self) -> Tz {
        self.0
    }

    /// `at_ms` (milliseconds since the epoch) as the tenant's local time.
    pub fn at(&self, at_ms: u64) -> chrono::DateTime<Tz> {
        utc(at_ms).with_timezone(&self.0)
    }

    /// The first instant of the tenant's next calendar day after `at_ms`, in milliseconds.
    pub fn next_midnight_ms(&self, at_ms: u64) -> u64 {
        let local = self.at(at_ms);
        let tomorrow = local.date_naive().succ_opt().unwrap_or(local.date_naive());
        let midnight = tomorrow.and_hms_opt(0, 0, 0).unwrap_or_default();
        // A zone whose midnight is skipped by DST starts its day at the first instant after.
        let start = self
            .0
            .from_local_datetime(&midnight)
            .earliest()
            .or_else(|| {
                self.0
                    .from_local_datetime(&(midnight + chrono::Duration::hours(1)))
                    .earliest()
            });
        start.map_or(at_ms + 86_400_000, |t| {
            u64::try_from(t.timestamp_millis()).unwrap_or(0)
        })
    }
}

pub(crate) fn utc(at_ms: u64) -> chrono::DateTime<chrono::Utc> {
    chrono::Utc
        .timestamp_millis_opt(i64::try_from(at_ms).unwrap_or(i64::MAX))
        .single()
        .unwrap_or_default()
}

/// Zones whose midnights fall on every half hour of UTC (and a few quarter hours).
const MIDNIGHT_ZONES: &[&str] = &[
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
/// most about 45 minutes later): a tenant in it reaches a day rollover soon, with only a small
/// clock jump (the demo's and the tests' way through a midnight).
pub fn zone_with_the_next_midnight(not_before_ms: u64) -> (Timezone, u64) {
    MIDNIGHT_ZONES
        .iter()
        .filter_map(|name| name.parse::<Timezone>().ok())
        .map(|zone| (zone, zone.next_midnight_ms(not_before_ms)))
        .min_by_key(|(_, midnight)| *midnight)
        .unwrap_or_else(|| {
            let zone = Timezone::default();
            (zone, zone.next_midnight_ms(not_before_ms))
        })
}

/// The tenant's calendar day (`YYYY-MM-DD`) at `at_ms` (milliseconds since the epoch).
pub fn tenant_day(at_ms: u64, timezone: Timezone) -> String {
    timezone.at(at_ms).format("%Y-%m-%d").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_day_turns_at_the_tenants_midnight_not_utcs() {
        let shanghai = Timezone::default();
        // 2026-11-30T15:59:59Z is 23:59:59 in Shanghai; one second later it is the 1st.
        let before = 1_796_054_399_000;
        assert_eq!(tenant_day(before, shanghai), "2026-11-30");
        assert_eq!(tenant_day(before + 1000, shanghai), "2026-12-01");
        let utc: Timezone = "UTC".parse().expect("valid zone");
        assert_eq!(tenant_day(before + 1000, utc), "2026-11-30");
    }

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

    #[test]
    fn unknown_zones_are_refused() {
        assert!("Mars/Olympus".parse::<Timezone>().is_err());
    }
}
