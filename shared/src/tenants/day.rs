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

/// The tenant's calendar day (`YYYY-MM-DD`) at `at_ms` (milliseconds since the epoch).
pub fn tenant_day(at_ms: u64, timezone: Timezone) -> String {
    let at = chrono::Utc
        .timestamp_millis_opt(i64::try_from(at_ms).unwrap_or(i64::MAX))
        .single()
        .unwrap_or_default();
    at.with_timezone(&timezone.0).format("%Y-%m-%d").to_string()
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
    fn unknown_zones_are_refused() {
        assert!("Mars/Olympus".parse::<Timezone>().is_err());
    }
}
