//! WeCom's API rate windows and latency under virtual time: per corp and API (10,000 calls a
//! minute, 150,000 an hour), per caller IP and API across every corp calling from it (20,000 a
//! minute, 600,000 an hour), errcode 45009 for a call over a window, which blocks until that
//! window ends, and a seeded latency distribution. docs/wecom-api.md §7 and
//! tools/scale/README.md, "The simulated services".

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard};
use tokio::time::{Duration, Instant};

/// WeCom's answer to a call over a frequency window.
pub const FREQUENCY_LIMIT_ERRCODE: i64 = 45009;
const MINUTE_MS: u64 = 60_000;
const HOUR_MS: u64 = 3_600_000;

/// Which window refused a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Window {
    CorpMinute,
    CorpHour,
    IpMinute,
    IpHour,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    pub corp_per_minute: u32,
    pub corp_per_hour: u32,
    pub ip_per_minute: u32,
    pub ip_per_hour: u32,
}

impl Limits {
    /// A self-built or developed-on-behalf app's limits.
    pub const PUBLISHED: Self = Self {
        corp_per_minute: 10_000,
        corp_per_hour: 150_000,
        ip_per_minute: 20_000,
        ip_per_hour: 600_000,
    };
}

/// A log-normal latency given by its median and 99th percentile.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Latency {
    pub median: Duration,
    pub p99: Duration,
}

impl Latency {
    /// z of the 99th percentile of a standard normal distribution.
    const Z_P99: f64 = 2.326_348;

    fn sample(&self, rng: &mut StdRng) -> Duration {
        let median = self.median.as_secs_f64();
        if median <= 0.0 {
            return Duration::ZERO;
        }
        let sigma = (self.p99.as_secs_f64() / median).ln().max(0.0) / Self::Z_P99;
        // Box-Muller: one standard normal draw from two uniform ones.
        let u1: f64 = rng.gen_range(f64::MIN_POSITIVE..1.0);
        let u2: f64 = rng.gen_range(0.0..1.0);
        let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
        Duration::from_secs_f64(median * (sigma * z).exp())
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WeComConfig {
    pub limits: Limits,
    pub latency: Latency,
}

impl Default for WeComConfig {
    fn default() -> Self {
        Self {
            limits: Limits::PUBLISHED,
            latency: Latency {
                median: Duration::from_millis(80),
                p99: Duration::from_millis(600),
            },
        }
    }
}

/// A 45009 answer: which window, and when it reopens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refused {
    pub errcode: i64,
    pub window: Window,
    pub reopens_at_ms: u64,
}

#[derive(Debug, Clone, Copy, Default)]
struct Count {
    window: u64,
    calls: u32,
}

impl Count {
    fn current(&mut self, window: u64) -> u32 {
        if self.window != window {
            *self = Self { window, calls: 0 };
        }
        self.calls
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct Windows {
    minute: Count,
    hour: Count,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WeComCounters {
    pub accepted: u64,
    pub refused_by_window: BTreeMap<Window, u64>,
    pub refused_by_corp: BTreeMap<String, u64>,
}

struct State {
    /// The config's limits until `set_limits` changes them.
    limits: Limits,
    corps: HashMap<(String, String), Windows>,
    ips: HashMap<(String, String), Windows>,
    counters: WeComCounters,
    rng: StdRng,
}

pub struct WeCom {
    config: WeComConfig,
    state: Mutex<State>,
}

impl WeCom {
    pub fn new(config: WeComConfig, seed: u64) -> Self {
        Self {
            config,
            state: Mutex::new(State {
                limits: config.limits,
                corps: HashMap::new(),
                ips: HashMap::new(),
                counters: WeComCounters::default(),
                rng: StdRng::seed_from_u64(seed),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// One call of `api` by `corp` from `ip`: after WeCom's latency, its answer.
    pub async fn call(&self, corp: &str, ip: &str, api: &str) -> Result<(), Refused> {
        let answer = self.admit(corp, ip, api);
        let latency = {
            let mut state = self.lock();
            self.config.latency.sample(&mut state.rng)
        };
        tokio::time::sleep(latency).await;
        answer
    }

    /// Whether WeCom takes a call arriving now. Windows are the wall clock's minutes and
    /// hours; a refused call counts against none, and the window that refused it stays shut
    /// until it ends.
    pub fn admit(&self, corp: &str, ip: &str, api: &str) -> Result<(), Refused> {
        let now_ms = super::clock::epoch_ms_at(Instant::now());
        let (minute, hour) = (now_ms / MINUTE_MS, now_ms / HOUR_MS);
        let mut guard = self.lock();
        let state = &mut *guard;
        let limits = state.limits;
        let corp_windows = state
            .corps
            .entry((corp.to_owned(), api.to_owned()))
            .or_default();
        let ip_windows = state
            .ips
            .entry((ip.to_owned(), api.to_owned()))
            .or_default();
        let checks = [
            (
                Window::CorpMinute,
                corp_windows.minute.current(minute),
                limits.corp_per_minute,
                (minute + 1) * MINUTE_MS,
            ),
            (
                Window::CorpHour,
                corp_windows.hour.current(hour),
                limits.corp_per_hour,
                (hour + 1) * HOUR_MS,
            ),
            (
                Window::IpMinute,
                ip_windows.minute.current(minute),
                limits.ip_per_minute,
                (minute + 1) * MINUTE_MS,
            ),
            (
                Window::IpHour,
                ip_windows.hour.current(hour),
                limits.ip_per_hour,
                (hour + 1) * HOUR_MS,
            ),
        ];
        if let Some((window, _, _, reopens_at_ms)) = checks
            .into_iter()
            .find(|(_, calls, limit, _)| calls >= limit)
        {
            *state.counters.refused_by_window.entry(window).or_default() += 1;
            *state
                .counters
                .refused_by_corp
                .entry(corp.to_owned())
                .or_default() += 1;
            return Err(Refused {
                errcode: FREQUENCY_LIMIT_ERRCODE,
                window,
                reopens_at_ms,
            });
        }
        corp_windows.minute.calls += 1;
        corp_windows.hour.calls += 1;
        ip_windows.minute.calls += 1;
        ip_windows.hour.calls += 1;
        state.counters.accepted += 1;
        Ok(())
    }

    pub fn counters(&self) -> WeComCounters {
        self.lock().counters.clone()
    }

    /// Changes the limits from the next call on, as the bench's sandbox does between its
    /// phases (calls already counted in the current windows stay counted).
    pub fn set_limits(&self, limits: Limits) {
        self.lock().limits = limits;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IP: &str = "203.0.113.7";
    const UPDATE: &str = "update_contact_way";

    fn wecom() -> WeCom {
        crate::services::clock::start_at(0);
        WeCom::new(WeComConfig::default(), 9)
    }

    #[tokio::test(start_paused = true)]
    async fn limits_lowered_mid_window_refuse_from_the_next_call_counting_the_calls_already_taken()
    {
        let wecom = wecom();
        for _ in 0..3 {
            assert_eq!(wecom.admit("corp", IP, UPDATE), Ok(()));
        }
        wecom.set_limits(Limits {
            corp_per_minute: 4,
            ..Limits::PUBLISHED
        });
        assert_eq!(wecom.admit("corp", IP, UPDATE), Ok(()));
        let refused = wecom.admit("corp", IP, UPDATE).expect_err("the fifth call");
        assert_eq!(refused.window, Window::CorpMinute);
        assert_eq!(wecom.counters().accepted, 4);
    }

    /// Calls `count` times now; the first refusal, if any, and how many were accepted.
    fn calls(wecom: &WeCom, corp: &str, api: &str, count: u32) -> (u32, Option<Refused>) {
        let mut accepted = 0;
        for _ in 0..count {
            match wecom.admit(corp, IP, api) {
                Ok(()) => accepted += 1,
                Err(refused) => return (accepted, Some(refused)),
            }
        }
        (accepted, None)
    }

    #[tokio::test(start_paused = true)]
    async fn a_corp_gets_10000_calls_of_an_api_a_minute_then_45009_until_the_minute_ends() {
        let wecom = wecom();
        tokio::time::sleep(Duration::from_secs(15)).await;
        let (accepted, refused) = calls(&wecom, "corp-a", UPDATE, 10_001);
        assert_eq!(accepted, 10_000);
        assert_eq!(
            refused,
            Some(Refused {
                errcode: 45009,
                window: Window::CorpMinute,
                reopens_at_ms: 60_000
            })
        );
        tokio::time::sleep(Duration::from_secs(44)).await;
        assert!(wecom.admit("corp-a", IP, UPDATE).is_err());
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(
            calls(&wecom, "corp-a", UPDATE, 10_000),
            (10_000, None),
            "refusals counted nothing"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_corps_hour_window_refuses_after_150000_calls_until_the_hour_ends() {
        let wecom = wecom();
        for _ in 0..15 {
            assert_eq!(calls(&wecom, "corp-a", UPDATE, 10_000).0, 10_000);
            tokio::time::sleep(Duration::from_secs(60)).await;
        }
        let (accepted, refused) = calls(&wecom, "corp-a", UPDATE, 1);
        assert_eq!(accepted, 0);
        assert_eq!(
            refused.map(|r| (r.window, r.reopens_at_ms)),
            Some((Window::CorpHour, 3_600_000))
        );
        tokio::time::sleep(Duration::from_secs(45 * 60)).await;
        assert_eq!(calls(&wecom, "corp-a", UPDATE, 1), (1, None));
    }

    #[tokio::test(start_paused = true)]
    async fn each_api_has_windows_of_its_own() {
        let wecom = wecom();
        assert_eq!(calls(&wecom, "corp-a", UPDATE, 10_000).0, 10_000);
        assert_eq!(
            calls(&wecom, "corp-a", "get_contact_way", 10_000),
            (10_000, None)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn every_corp_behind_one_ip_shares_its_20000_calls_a_minute() {
        let wecom = wecom();
        assert_eq!(calls(&wecom, "corp-a", UPDATE, 8_000).0, 8_000);
        assert_eq!(calls(&wecom, "corp-b", UPDATE, 8_000).0, 8_000);
        let (accepted, refused) = calls(&wecom, "corp-c", UPDATE, 8_000);
        assert_eq!(accepted, 4_000);
        assert_eq!(refused.map(|r| r.window), Some(Window::IpMinute));
        let counters = wecom.counters();
        assert_eq!(counters.refused_by_window.get(&Window::IpMinute), Some(&1));
        assert_eq!(counters.refused_by_corp.get("corp-c"), Some(&1));
        // Another address has windows of its own.
        assert!(wecom.admit("corp-c", "198.51.100.1", UPDATE).is_ok());
    }

    #[tokio::test(start_paused = true)]
    async fn an_ips_hour_window_refuses_after_600000_calls_from_all_its_corps() {
        let wecom = wecom();
        let corps = ["corp-a", "corp-b", "corp-c", "corp-d", "corp-e"];
        for minute in 0..30 {
            for corp in &corps[(minute % 5)..(minute % 5) + 1] {
                assert_eq!(calls(&wecom, corp, UPDATE, 10_000).0, 10_000);
            }
            let next = corps[(minute + 1) % 5];
            assert_eq!(calls(&wecom, next, UPDATE, 10_000).0, 10_000);
            tokio::time::sleep(Duration::from_secs(60)).await;
        }
        let refused = wecom.admit("corp-e", IP, UPDATE);
        assert_eq!(refused.map_err(|r| r.window), Err(Window::IpHour));
    }

    #[tokio::test(start_paused = true)]
    async fn latency_is_seeded_with_the_configured_median_and_99th_percentile() {
        let sample = |seed| {
            let wecom = WeCom::new(WeComConfig::default(), seed);
            let mut state = wecom.lock();
            let mut all: Vec<Duration> = (0..20_000)
                .map(|_| wecom.config.latency.sample(&mut state.rng))
                .collect();
            drop(state);
            all.sort();
            all
        };
        let latencies = sample(3);
        assert_eq!(latencies, sample(3));
        assert_ne!(latencies, sample(4));
        let median = latencies[10_000].as_secs_f64();
        let p99 = latencies[19_800].as_secs_f64();
        assert!((median - 0.080).abs() < 0.080 * 0.05, "median {median}");
        assert!((p99 - 0.600).abs() < 0.600 * 0.10, "p99 {p99}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_answers_after_its_latency() {
        let wecom = wecom();
        let start = Instant::now();
        assert!(wecom.call("corp-a", IP, UPDATE).await.is_ok());
        assert!(start.elapsed() > Duration::ZERO);
    }
}
