//! EventBridge Scheduler's `rate(..)` schedules under virtual time, firing a function (the
//! schedule tick, the sweep) through Lambda's asynchronous invocation: firings within the
//! schedule's precision, runs that overlap when one outlasts the period, throttled events
//! retried by Lambda with backoff, and failed runs retried twice. docs/aws-semantics.md §5.1
//! and tools/scale/README.md, "The simulated services".

use super::lambda::{Account, Invoked, LambdaError};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::time::{Duration, Instant};

/// The function's code for one run: given its deadline, whether it succeeded.
pub type ScheduledCode =
    Arc<dyn Fn(Instant) -> Pin<Box<dyn Future<Output = Result<(), String>> + Send>> + Send + Sync>;

/// Makes a `ScheduledCode` of an async closure.
pub fn scheduled<F, Fut>(code: F) -> ScheduledCode
where
    F: Fn(Instant) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), String>> + Send + 'static,
{
    Arc::new(move |deadline| Box::pin(code(deadline)))
}

#[derive(Debug, Clone)]
pub struct ScheduleConfig {
    pub function: String,
    /// The `rate(..)` period.
    pub every: Duration,
    /// A firing happens anywhere this long after its time (60 s without a flexible window);
    /// each is drawn uniformly, seeded.
    pub precision: Duration,
    /// Lambda's asynchronous retries of a failed (or timed-out) run, and the waits before
    /// each: twice, one minute then two.
    pub retry_delays: Vec<Duration>,
    /// Lambda keeps retrying a throttled event, the wait doubling from `throttle_backoff` to
    /// `max_throttle_backoff`, until the event is this old, then drops it.
    pub max_event_age: Duration,
    pub throttle_backoff: Duration,
    pub max_throttle_backoff: Duration,
}

impl ScheduleConfig {
    pub fn rate(function: &str, every: Duration) -> Self {
        Self {
            function: function.to_owned(),
            every,
            precision: Duration::from_secs(60),
            retry_delays: vec![Duration::from_secs(60), Duration::from_secs(120)],
            max_event_age: Duration::from_secs(6 * 3_600),
            throttle_backoff: Duration::from_secs(1),
            max_throttle_backoff: Duration::from_secs(5 * 60),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScheduleCounters {
    pub firings: u64,
    /// How long after its scheduled time each firing's first run started its code (the
    /// firing's jitter, throttles and a cold start included), in the order runs ended.
    pub start_delays: Vec<Duration>,
    pub runs: u64,
    pub throttled: u64,
    pub failed_runs: u64,
    pub timed_out_runs: u64,
    pub retries: u64,
    /// Events Lambda dropped: retries spent, or too old while throttled.
    pub dropped: u64,
}

struct State {
    counters: ScheduleCounters,
    rng: StdRng,
}

pub struct Schedule {
    config: ScheduleConfig,
    state: Mutex<State>,
}

impl Schedule {
    pub fn new(config: ScheduleConfig, seed: u64) -> Arc<Self> {
        Arc::new(Self {
            config,
            state: Mutex::new(State {
                counters: ScheduleCounters::default(),
                rng: StdRng::seed_from_u64(seed),
            }),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub fn counters(&self) -> ScheduleCounters {
        self.lock().counters.clone()
    }

    /// Fires every period from now, for as long as the simulation runs; each firing is an
    /// asynchronous invocation of its own, so runs overlap when one outlasts the period.
    pub fn spawn(
        self: &Arc<Self>,
        account: Arc<Account>,
        code: ScheduledCode,
    ) -> tokio::task::JoinHandle<()> {
        let schedule = Arc::clone(self);
        tokio::spawn(async move {
            let mut due = Instant::now();
            loop {
                let jitter = {
                    let mut state = schedule.lock();
                    state.counters.firings += 1;
                    let precision_ms =
                        u64::try_from(schedule.config.precision.as_millis()).unwrap_or(0);
                    Duration::from_millis(state.rng.gen_range(0..precision_ms.max(1)))
                };
                let firing = Arc::clone(&schedule);
                let (account, code) = (Arc::clone(&account), Arc::clone(&code));
                tokio::spawn(async move {
                    tokio::time::sleep_until(due + jitter).await;
                    firing.deliver(&account, &code, due).await;
                });
                due += schedule.config.every;
                tokio::time::sleep_until(due).await;
            }
        })
    }

    /// Lambda's handling of one asynchronous event.
    async fn deliver(&self, account: &Account, code: &ScheduledCode, due: Instant) {
        let received = Instant::now();
        let mut backoff = self.config.throttle_backoff;
        let mut retries = self.config.retry_delays.iter();
        let mut first_run = true;
        loop {
            let mut started = None;
            let run = account
                .invoke(&self.config.function, |deadline| {
                    started = Some(Instant::now());
                    code(deadline)
                })
                .await;
            let failed = match run {
                Ok(Invoked::Throttled) => {
                    self.lock().counters.throttled += 1;
                    if received.elapsed() + backoff > self.config.max_event_age {
                        self.lock().counters.dropped += 1;
                        return;
                    }
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(self.config.max_throttle_backoff);
                    continue;
                }
                Ok(Invoked::Done(Ok(()))) => false,
                Ok(Invoked::Done(Err(_))) => {
                    self.lock().counters.failed_runs += 1;
                    true
                }
                Ok(Invoked::TimedOut) => {
                    self.lock().counters.timed_out_runs += 1;
                    true
                }
                Err(
                    LambdaError::UnknownFunction(_)
                    | LambdaError::ReservationTooLarge { .. }
                    | LambdaError::Queue(_),
                ) => {
                    self.lock().counters.dropped += 1;
                    return;
                }
            };
            {
                let mut state = self.lock();
                state.counters.runs += 1;
                if first_run {
                    let started = started.unwrap_or(received);
                    state
                        .counters
                        .start_delays
                        .push(started.duration_since(due));
                }
            }
            first_run = false;
            if !failed {
                return;
            }
            let Some(delay) = retries.next() else {
                self.lock().counters.dropped += 1;
                return;
            };
            self.lock().counters.retries += 1;
            tokio::time::sleep(*delay).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::lambda::FunctionConfig;
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    const MINUTE: Duration = Duration::from_secs(60);

    fn account_with(config: FunctionConfig) -> Arc<Account> {
        let account = Arc::new(Account::new(1_000));
        account.create_function(config).expect("function");
        account
    }

    fn tick_function(timeout: Duration) -> FunctionConfig {
        let mut config = FunctionConfig::new("schedule-tick", timeout, 256);
        config.cold_start = Duration::ZERO;
        config
    }

    fn taking(length: Duration) -> ScheduledCode {
        scheduled(move |_deadline| async move {
            tokio::time::sleep(length).await;
            Ok(())
        })
    }

    #[tokio::test(start_paused = true)]
    async fn a_rate_schedule_fires_once_a_period_each_within_its_precision() {
        let account = account_with(tick_function(MINUTE));
        let schedule = Schedule::new(ScheduleConfig::rate("schedule-tick", MINUTE), 3);
        let runs = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&runs);
        let start = Instant::now();
        let code = scheduled(move |_deadline| {
            seen.lock().expect("lock").push(start.elapsed());
            async { Ok(()) }
        });
        let firing = schedule.spawn(Arc::clone(&account), code);
        tokio::time::sleep(MINUTE * 10 - Duration::from_millis(1)).await;
        firing.abort();
        let offsets = runs.lock().expect("lock").clone();
        assert_eq!(offsets.len(), 10);
        for (n, offset) in (0u32..).zip(&offsets) {
            assert!(
                *offset >= MINUTE * n && *offset < MINUTE * (n + 1),
                "{offsets:?}"
            );
        }
        assert!(
            offsets.iter().any(|o| o.as_secs() % 60 != 0),
            "jittered: {offsets:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_same_seed_fires_at_the_same_moments() {
        let mut runs = Vec::new();
        for _ in 0..2 {
            let account = account_with(tick_function(MINUTE));
            let schedule = Schedule::new(ScheduleConfig::rate("schedule-tick", MINUTE), 8);
            let firing = schedule.spawn(account, taking(Duration::from_secs(1)));
            tokio::time::sleep(MINUTE * 5).await;
            firing.abort();
            runs.push(schedule.counters().start_delays);
        }
        assert_eq!(runs[0], runs[1]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_run_longer_than_the_period_overlaps_the_next_one() {
        let account = account_with(tick_function(Duration::from_secs(240)));
        let mut config = ScheduleConfig::rate("schedule-tick", MINUTE);
        config.precision = Duration::from_millis(1);
        let schedule = Schedule::new(config, 1);
        let firing = schedule.spawn(Arc::clone(&account), taking(Duration::from_secs(150)));
        tokio::time::sleep(MINUTE * 10).await;
        firing.abort();
        let peak = account
            .concurrency_by_second("schedule-tick")
            .expect("series")
            .iter()
            .map(|(_, in_use)| *in_use)
            .max();
        assert_eq!(peak, Some(3));
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_run_is_retried_twice_one_then_two_minutes_later() {
        let account = account_with(tick_function(MINUTE));
        let mut config = ScheduleConfig::rate("schedule-tick", Duration::from_secs(3_600));
        config.precision = Duration::from_millis(1);
        let schedule = Schedule::new(config, 1);
        let runs = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&runs);
        let start = Instant::now();
        let code = scheduled(move |_deadline| {
            seen.lock().expect("lock").push(start.elapsed().as_secs());
            async { Err("the table is unavailable".to_owned()) }
        });
        let firing = schedule.spawn(account, code);
        tokio::time::sleep(MINUTE * 10).await;
        firing.abort();
        assert_eq!(*runs.lock().expect("lock"), [0, 60, 180]);
        let counters = schedule.counters();
        assert_eq!(
            (counters.failed_runs, counters.retries, counters.dropped),
            (3, 2, 1)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_throttled_event_waits_with_a_doubling_backoff_until_concurrency_frees() {
        let mut function = tick_function(Duration::from_secs(300));
        function.reserved_concurrency = Some(1);
        let account = account_with(function);
        let mut config = ScheduleConfig::rate("schedule-tick", MINUTE);
        config.precision = Duration::from_millis(1);
        let schedule = Schedule::new(config, 1);
        let started = Arc::new(AtomicU32::new(0));
        let count = Arc::clone(&started);
        let code = scheduled(move |_deadline| {
            let first = count.fetch_add(1, Ordering::SeqCst) == 0;
            async move {
                if first {
                    tokio::time::sleep(Duration::from_secs(100)).await;
                }
                Ok(())
            }
        });
        let firing = schedule.spawn(account, code);
        tokio::time::sleep(Duration::from_secs(119)).await;
        firing.abort();
        let counters = schedule.counters();
        // The second firing (at 60 s) is throttled at 60, 61, 63, 67, 75, 91 s and runs at 123 s.
        assert_eq!(counters.throttled, 6);
        assert_eq!(counters.runs, 1);
        tokio::time::sleep(Duration::from_secs(10)).await;
        let delays = schedule.counters().start_delays;
        assert_eq!(delays.get(1).map(Duration::as_secs), Some(63));
    }
}
