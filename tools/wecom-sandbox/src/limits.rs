//! WeCom's frequency limits: per corp and per API, and per caller address and per API across
//! every corp calling from it, each a fixed window aligned to the wall-clock minute and
//! another to the hour. A refused call is not counted, so a client that backs off until the
//! next window gets through at once.

use crate::wecom::Api;
use serde::Serialize;
use std::collections::BTreeMap;

const MINUTE_MS: u64 = 60_000;
const HOUR_MS: u64 = 3_600_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Window {
    Minute,
    Hour,
}

#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct Counts {
    /// The window start, in ms since the epoch.
    pub minute_start_ms: u64,
    pub minute_count: u64,
    pub hour_start_ms: u64,
    pub hour_count: u64,
}

#[derive(Debug, Default)]
pub(crate) struct RateLimiter {
    windows: BTreeMap<(String, Api), Counts>,
}

impl RateLimiter {
    /// Counts the call if both windows of `key` (a corp, or a caller address) have room;
    /// otherwise names the exhausted window.
    #[cfg(test)]
    pub fn admit(
        &mut self,
        key: &str,
        api: Api,
        now_ms: u64,
        per_minute: u64,
        per_hour: u64,
    ) -> Result<(), Window> {
        self.admit_all(&[(key, per_minute, per_hour)], api, now_ms)
    }

    /// Counts the call in every one of `limits` (key, per minute, per hour) if all have room,
    /// otherwise in none, naming the first exhausted window.
    pub fn admit_all(
        &mut self,
        limits: &[(&str, u64, u64)],
        api: Api,
        now_ms: u64,
    ) -> Result<(), Window> {
        for &(key, per_minute, per_hour) in limits {
            self.room(key, api, now_ms, per_minute, per_hour)?;
        }
        for &(key, _, _) in limits {
            self.count(key, api);
        }
        Ok(())
    }

    /// Whether both windows of `key` have room at `now_ms`, counting nothing.
    fn room(
        &mut self,
        key: &str,
        api: Api,
        now_ms: u64,
        per_minute: u64,
        per_hour: u64,
    ) -> Result<(), Window> {
        let counts = self.windows.entry((key.to_owned(), api)).or_default();
        let minute_start = now_ms - now_ms % MINUTE_MS;
        let hour_start = now_ms - now_ms % HOUR_MS;
        if counts.minute_start_ms != minute_start {
            counts.minute_start_ms = minute_start;
            counts.minute_count = 0;
        }
        if counts.hour_start_ms != hour_start {
            counts.hour_start_ms = hour_start;
            counts.hour_count = 0;
        }
        if counts.minute_count >= per_minute {
            return Err(Window::Minute);
        }
        if counts.hour_count >= per_hour {
            return Err(Window::Hour);
        }
        Ok(())
    }

    /// Counts one call of `key` in the windows `room` just brought up to date.
    fn count(&mut self, key: &str, api: Api) {
        let counts = self.windows.entry((key.to_owned(), api)).or_default();
        counts.minute_count += 1;
        counts.hour_count += 1;
    }

    /// The current counts, as `key -> api -> counts`.
    pub fn snapshot(&self) -> BTreeMap<String, BTreeMap<&'static str, Counts>> {
        let mut out: BTreeMap<String, BTreeMap<&'static str, Counts>> = BTreeMap::new();
        for ((corp, api), counts) in &self.windows {
            out.entry(corp.clone())
                .or_default()
                .insert(api.name(), counts.clone());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: u64 = 1_700_000_020_000; // 40 s into a minute, 13 min into an hour

    #[test]
    fn the_minute_window_refuses_once_full_and_reopens_at_the_next_minute() {
        let mut limiter = RateLimiter::default();
        for _ in 0..3 {
            assert_eq!(limiter.admit("c", Api::GetToken, T0, 3, 100), Ok(()));
        }
        assert_eq!(
            limiter.admit("c", Api::GetToken, T0 + 19_000, 3, 100),
            Err(Window::Minute)
        );
        assert_eq!(
            limiter.admit("c", Api::GetToken, T0 + 20_000, 3, 100),
            Ok(())
        );
    }

    #[test]
    fn a_call_the_callers_address_refuses_counts_in_neither_window() {
        let mut limiter = RateLimiter::default();
        let both = |corp| [(corp, 10, 100), ("ip:127.0.0.1", 2, 100)];
        assert_eq!(limiter.admit_all(&both("a"), Api::GetToken, T0), Ok(()));
        assert_eq!(limiter.admit_all(&both("b"), Api::GetToken, T0), Ok(()));
        assert_eq!(
            limiter.admit_all(&both("c"), Api::GetToken, T0),
            Err(Window::Minute),
            "two corps filled the address's minute"
        );
        let counts = limiter.snapshot();
        assert_eq!(counts["ip:127.0.0.1"]["gettoken"].minute_count, 2);
        assert_eq!(counts["c"]["gettoken"].minute_count, 0);
    }

    #[test]
    fn refused_calls_are_not_counted() {
        let mut limiter = RateLimiter::default();
        assert_eq!(limiter.admit("c", Api::GetToken, T0, 1, 2), Ok(()));
        for _ in 0..5 {
            assert_eq!(
                limiter.admit("c", Api::GetToken, T0, 1, 2),
                Err(Window::Minute)
            );
        }
        assert_eq!(limiter.admit("c", Api::GetToken, T0 + 60_000, 1, 2), Ok(()));
        assert_eq!(
            limiter.admit("c", Api::GetToken, T0 + 120_000, 1, 2),
            Err(Window::Hour)
        );
    }

    #[test]
    fn corps_and_apis_have_separate_windows() {
        let mut limiter = RateLimiter::default();
        assert_eq!(limiter.admit("a", Api::GetToken, T0, 1, 10), Ok(()));
        assert_eq!(limiter.admit("a", Api::GetContactWay, T0, 1, 10), Ok(()));
        assert_eq!(limiter.admit("b", Api::GetToken, T0, 1, 10), Ok(()));
        assert_eq!(
            limiter.admit("a", Api::GetToken, T0, 1, 10),
            Err(Window::Minute)
        );
    }
}
