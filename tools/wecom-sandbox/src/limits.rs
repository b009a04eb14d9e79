//! WeCom's frequency limits: per corp and per API, a fixed window aligned to the wall-clock
//! minute and another to the hour. A refused call is not counted, so a client that backs off
//! until the next window gets through at once.

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
    /// Counts the call if both windows have room; otherwise names the exhausted window.
    pub fn admit(
        &mut self,
        corp_id: &str,
        api: Api,
        now_ms: u64,
        per_minute: u64,
        per_hour: u64,
    ) -> Result<(), Window> {
        let counts = self.windows.entry((corp_id.to_owned(), api)).or_default();
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
        counts.minute_count += 1;
        counts.hour_count += 1;
        Ok(())
    }

    /// The current counts, as `corp_id -> api -> counts`.
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
