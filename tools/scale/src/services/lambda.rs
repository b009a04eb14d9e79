//! Lambda functions behind SQS event sources, under virtual time: the poller that runs up to
//! `MaximumConcurrency` batches at once (on FIFO, one per available message group, which the
//! queue itself enforces), each function's reserved concurrency and the account's concurrent
//! executions shared by the rest, cold starts and warm environments, timeouts that abandon an
//! invocation, and partial batch responses. docs/aws-semantics.md §2 and tools/scale/README.md,
//! "The simulated services".
//!
//! The handler is the function's code: an async closure given the batch that answers the ids
//! of the messages that failed (`batchItemFailures`), so the simulation can run the domain's
//! own consumers (`RefreshConsumer::consume`, `fanout::consume`, `FactRecorder::record`).

use super::sqs::{Delivered, QueueKind, Receipt, Sqs, SqsError};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::Semaphore;
use tokio::time::{Duration, Instant};

/// The default concurrent executions of an account in a Region.
pub const ACCOUNT_CONCURRENCY: u32 = 1_000;
/// Lambda keeps this much of the account's concurrency unreserved, for functions without a
/// reservation.
pub const MINIMUM_UNRESERVED: u32 = 100;

#[derive(Debug, Clone)]
pub struct FunctionConfig {
    pub name: String,
    pub timeout: Duration,
    pub memory_mb: u32,
    /// `ReservedConcurrentExecutions`: set aside for this function, and its ceiling.
    pub reserved_concurrency: Option<u32>,
    /// How long a new execution environment takes before the handler runs (init), billed.
    pub cold_start: Duration,
    /// How long an idle environment stays warm for the next invocation.
    pub keep_warm: Duration,
}

impl FunctionConfig {
    pub fn new(name: &str, timeout: Duration, memory_mb: u32) -> Self {
        Self {
            name: name.to_owned(),
            timeout,
            memory_mb,
            reserved_concurrency: None,
            cold_start: Duration::from_millis(150),
            keep_warm: Duration::from_secs(10 * 60),
        }
    }
}

#[derive(Debug, Clone)]
pub struct EventSourceConfig {
    pub queue: String,
    /// `BatchSize` (at most 10 on FIFO).
    pub batch_size: usize,
    /// `ScalingConfig.MaximumConcurrency`.
    pub maximum_concurrency: u32,
    /// How long one receive of the poller waits for messages (SQS long polling, at most 20 s).
    pub long_poll: Duration,
    /// How long the poller waits before invoking a throttled batch again.
    pub throttle_backoff: Duration,
}

impl EventSourceConfig {
    pub fn new(queue: &str, batch_size: usize, maximum_concurrency: u32) -> Self {
        Self {
            queue: queue.to_owned(),
            batch_size,
            maximum_concurrency,
            long_poll: Duration::from_secs(20),
            throttle_backoff: Duration::from_secs(1),
        }
    }
}

/// One invocation's event: the batch, and when the function's timeout ends it.
#[derive(Debug, Clone)]
pub struct Invocation {
    pub function: String,
    pub messages: Vec<Delivered>,
    pub deadline: Instant,
}

impl Invocation {
    /// What `Context.deadline` leaves: the domain's consumers take it as `time_left_ms`.
    pub fn time_left(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }
}

/// The function's code: given a batch, the ids of the messages that failed.
pub type Handler =
    Arc<dyn Fn(Invocation) -> Pin<Box<dyn Future<Output = Vec<String>> + Send>> + Send + Sync>;

/// Makes a `Handler` of an async closure.
pub fn handler<F, Fut>(code: F) -> Handler
where
    F: Fn(Invocation) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Vec<String>> + Send + 'static,
{
    Arc::new(move |invocation| Box::pin(code(invocation)))
}

#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct FunctionCounters {
    pub invocations: u64,
    pub cold_starts: u64,
    pub timeouts: u64,
    /// Invocations refused for concurrency (reserved or the account's), each attempt once.
    pub throttles: u64,
    /// Batches whose messages all went back to the queue because no concurrency came free
    /// before their visibility timeout.
    pub batches_returned_throttled: u64,
    /// Billed duration (init included), in MB-milliseconds.
    pub mb_ms: u128,
    pub messages_deleted: u64,
    pub messages_failed: u64,
    /// FIFO: a message the handler acknowledged after an earlier message of its group in the
    /// batch failed. SQS deletes it anyway, so its group is then out of order.
    pub order_violations: u64,
    /// Answers naming a message that was not in the batch: the whole batch failed.
    pub unknown_failures: u64,
}

impl FunctionCounters {
    /// Memory in GB times billed seconds, what Lambda charges for.
    pub fn gb_seconds(&self) -> f64 {
        // Precision is ample: a simulated month stays far below 2^52 MB-ms.
        #[allow(clippy::cast_precision_loss)]
        let mb_ms = self.mb_ms as f64;
        mb_ms / 1024.0 / 1000.0
    }
}

/// Concurrency in use during one second: its peak and its level when the second ended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SecondOfConcurrency {
    pub peak: u32,
    pub at_end: u32,
}

#[derive(Default)]
struct Usage {
    in_use: u32,
    by_second: BTreeMap<u64, SecondOfConcurrency>,
}

impl Usage {
    fn change(&mut self, in_use: u32, now: Instant) {
        self.in_use = in_use;
        let second = self
            .by_second
            .entry(super::clock::epoch_second_at(now))
            .or_default();
        second.peak = second.peak.max(in_use);
        second.at_end = in_use;
    }

    /// Every second from the first recorded to the last, gaps carried from the level before.
    fn series(&self) -> Vec<(u64, u32)> {
        let (Some((&first, _)), Some((&last, _))) = (
            self.by_second.first_key_value(),
            self.by_second.last_key_value(),
        ) else {
            return Vec::new();
        };
        let mut level = 0;
        (first..=last)
            .map(|second| match self.by_second.get(&second) {
                Some(recorded) => {
                    level = recorded.at_end;
                    (second, recorded.peak)
                }
                None => (second, level),
            })
            .collect()
    }
}

struct FunctionState {
    config: FunctionConfig,
    /// When each idle environment was last released, most recent last.
    idle_environments: Vec<Instant>,
    usage: Usage,
    counters: FunctionCounters,
}

struct AccountState {
    reserved_total: u32,
    unreserved_in_use: u32,
    usage: Usage,
    functions: HashMap<String, FunctionState>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LambdaError {
    UnknownFunction(String),
    /// The reservation would leave less than `MINIMUM_UNRESERVED` for the rest.
    ReservationTooLarge {
        asked: u32,
        available: u32,
    },
    Queue(SqsError),
}

impl std::fmt::Display for LambdaError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::UnknownFunction(name) => write!(f, "no function named {name}"),
            Self::ReservationTooLarge { asked, available } => {
                write!(
                    f,
                    "reserved concurrency {asked}, at most {available} can be reserved"
                )
            }
            Self::Queue(error) => write!(f, "{error}"),
        }
    }
}

impl std::error::Error for LambdaError {}

impl From<SqsError> for LambdaError {
    fn from(error: SqsError) -> Self {
        Self::Queue(error)
    }
}

/// What became of one invocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Invoked<T> {
    Done(T),
    TimedOut,
    Throttled,
}

/// An execution environment given to one invocation.
struct Environment {
    cold: bool,
}

/// The account: its concurrent executions and the functions that share them.
pub struct Account {
    limit: u32,
    state: Mutex<AccountState>,
}

impl Account {
    pub fn new(limit: u32) -> Self {
        Self {
            limit,
            state: Mutex::new(AccountState {
                reserved_total: 0,
                unreserved_in_use: 0,
                usage: Usage::default(),
                functions: HashMap::new(),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, AccountState> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub fn create_function(&self, config: FunctionConfig) -> Result<(), LambdaError> {
        let mut state = self.lock();
        if let Some(asked) = config.reserved_concurrency {
            let available = self
                .limit
                .saturating_sub(MINIMUM_UNRESERVED)
                .saturating_sub(state.reserved_total);
            if asked > available {
                return Err(LambdaError::ReservationTooLarge { asked, available });
            }
            state.reserved_total += asked;
        }
        state.functions.insert(
            config.name.clone(),
            FunctionState {
                config,
                idle_environments: Vec::new(),
                usage: Usage::default(),
                counters: FunctionCounters::default(),
            },
        );
        Ok(())
    }

    fn function_config(&self, name: &str) -> Result<FunctionConfig, LambdaError> {
        self.lock()
            .functions
            .get(name)
            .map(|f| f.config.clone())
            .ok_or_else(|| LambdaError::UnknownFunction(name.to_owned()))
    }

    /// One unit of concurrency for `function`, or `None` (a throttle) when its reservation or
    /// the account's unreserved pool is used up.
    fn try_acquire(&self, function: &str) -> Option<Environment> {
        let now = Instant::now();
        let mut guard = self.lock();
        let state = &mut *guard;
        let unreserved = self.limit - state.reserved_total;
        let f = state.functions.get_mut(function)?;
        let free = match f.config.reserved_concurrency {
            Some(reserved) => f.usage.in_use < reserved,
            None => state.unreserved_in_use < unreserved,
        };
        if !free {
            f.counters.throttles += 1;
            return None;
        }
        if f.config.reserved_concurrency.is_none() {
            state.unreserved_in_use += 1;
        }
        let in_use = f.usage.in_use + 1;
        f.usage.change(in_use, now);
        let keep_warm = f.config.keep_warm;
        f.idle_environments
            .retain(|idle_since| now.duration_since(*idle_since) < keep_warm);
        let cold = f.idle_environments.pop().is_none();
        if cold {
            f.counters.cold_starts += 1;
        }
        let total = state.usage.in_use + 1;
        state.usage.change(total, now);
        Some(Environment { cold })
    }

    /// Gives the concurrency back; a timed-out environment is discarded, not kept warm.
    fn release(&self, function: &str, keep_environment: bool, billed: Duration) {
        let now = Instant::now();
        let mut guard = self.lock();
        let state = &mut *guard;
        let Some(f) = state.functions.get_mut(function) else {
            return;
        };
        if f.config.reserved_concurrency.is_none() {
            state.unreserved_in_use -= 1;
        }
        let in_use = f.usage.in_use - 1;
        f.usage.change(in_use, now);
        if keep_environment {
            f.idle_environments.push(now);
        }
        f.counters.invocations += 1;
        // Lambda bills each started millisecond.
        let billed_ms = billed.as_micros().div_ceil(1_000);
        f.counters.mb_ms += billed_ms * u128::from(f.config.memory_mb);
        let total = state.usage.in_use - 1;
        state.usage.change(total, now);
    }

    /// Runs `code` in `environment` (after its cold start if it is new) until the function's
    /// timeout, which drops the code and discards the environment: `None` then.
    async fn run<T, Fut>(
        &self,
        function: &FunctionConfig,
        environment: Environment,
        code: impl FnOnce(Instant) -> Fut,
    ) -> Option<T>
    where
        Fut: Future<Output = T>,
    {
        let started = Instant::now();
        if environment.cold {
            tokio::time::sleep(function.cold_start).await;
        }
        let deadline = Instant::now() + function.timeout;
        let answer = tokio::time::timeout(function.timeout, code(deadline)).await;
        let billed = started.elapsed();
        let finished = answer.is_ok();
        if !finished {
            self.count(&function.name, |c| c.timeouts += 1);
        }
        self.release(&function.name, finished, billed);
        answer.ok()
    }

    /// One invocation of `function` now: a throttle when its concurrency is used up, else
    /// `code` given its deadline, cut off at the function's timeout.
    pub async fn invoke<T, Fut>(
        &self,
        function: &str,
        code: impl FnOnce(Instant) -> Fut,
    ) -> Result<Invoked<T>, LambdaError>
    where
        Fut: Future<Output = T>,
    {
        let config = self.function_config(function)?;
        let Some(environment) = self.try_acquire(function) else {
            return Ok(Invoked::Throttled);
        };
        Ok(match self.run(&config, environment, code).await {
            Some(answer) => Invoked::Done(answer),
            None => Invoked::TimedOut,
        })
    }

    fn count(&self, function: &str, update: impl FnOnce(&mut FunctionCounters)) {
        if let Some(f) = self.lock().functions.get_mut(function) {
            update(&mut f.counters);
        }
    }

    pub fn counters(&self, function: &str) -> Result<FunctionCounters, LambdaError> {
        self.lock()
            .functions
            .get(function)
            .map(|f| f.counters)
            .ok_or_else(|| LambdaError::UnknownFunction(function.to_owned()))
    }

    /// The function's concurrency in use, per second (epoch seconds): each second's peak.
    pub fn concurrency_by_second(&self, function: &str) -> Result<Vec<(u64, u32)>, LambdaError> {
        self.lock()
            .functions
            .get(function)
            .map(|f| f.usage.series())
            .ok_or_else(|| LambdaError::UnknownFunction(function.to_owned()))
    }

    /// The whole account's concurrency in use, per second.
    pub fn account_concurrency_by_second(&self) -> Vec<(u64, u32)> {
        self.lock().usage.series()
    }
}

/// An SQS event source mapping: polls `config.queue` and invokes `function` with its batches.
pub struct EventSource {
    pub config: EventSourceConfig,
    pub function: String,
}

impl EventSource {
    pub fn new(config: EventSourceConfig, function: &str) -> Self {
        Self {
            config,
            function: function.to_owned(),
        }
    }

    /// Starts polling, for as long as the simulation runs.
    pub fn spawn(
        self,
        account: Arc<Account>,
        sqs: Arc<Sqs>,
        code: Handler,
    ) -> Result<tokio::task::JoinHandle<()>, LambdaError> {
        let function = account.function_config(&self.function)?;
        let queue = sqs.config(&self.config.queue)?;
        let poller = Poller {
            source: self.config,
            function,
            fifo: queue.kind == QueueKind::Fifo,
            visibility_timeout: queue.visibility_timeout,
            account,
            sqs,
            code,
        };
        Ok(tokio::spawn(async move { poller.run().await }))
    }
}

struct Poller {
    source: EventSourceConfig,
    function: FunctionConfig,
    fifo: bool,
    visibility_timeout: Duration,
    account: Arc<Account>,
    sqs: Arc<Sqs>,
    code: Handler,
}

impl Poller {
    async fn run(self) {
        let this = Arc::new(self);
        let slots = Arc::new(Semaphore::new(
            usize::try_from(this.source.maximum_concurrency).unwrap_or(usize::MAX),
        ));
        loop {
            let Ok(slot) = Arc::clone(&slots).acquire_owned().await else {
                return;
            };
            let Ok(batch) = this.sqs.receive(&this.source.queue, this.source.batch_size) else {
                return;
            };
            if batch.is_empty() {
                drop(slot);
                if this
                    .sqs
                    .wait_for_messages(&this.source.queue, this.source.long_poll)
                    .await
                    .is_err()
                {
                    return;
                }
                continue;
            }
            let received_at = Instant::now();
            let Some(environment) = this.concurrency_for(received_at).await else {
                this.account
                    .count(&this.function.name, |c| c.batches_returned_throttled += 1);
                continue;
            };
            let invocation = Arc::clone(&this);
            tokio::spawn(async move {
                invocation.invoke(batch, environment).await;
                drop(slot);
            });
        }
    }

    /// Retries a throttled invocation until the batch would become visible again anyway.
    async fn concurrency_for(&self, received_at: Instant) -> Option<Environment> {
        let gives_up_at = received_at + self.visibility_timeout;
        loop {
            if let Some(environment) = self.account.try_acquire(&self.function.name) {
                return Some(environment);
            }
            if Instant::now() + self.source.throttle_backoff >= gives_up_at {
                return None;
            }
            tokio::time::sleep(self.source.throttle_backoff).await;
        }
    }

    async fn invoke(&self, batch: Vec<Delivered>, environment: Environment) {
        let invocation = |deadline| Invocation {
            function: self.function.name.clone(),
            messages: batch.clone(),
            deadline,
        };
        let answer = self
            .account
            .run(&self.function, environment, |deadline| {
                (self.code)(invocation(deadline))
            })
            .await;
        // After a timeout nothing is deleted: every message comes back after its visibility
        // timeout.
        if let Some(failed) = answer {
            self.settle(&batch, &failed);
        }
    }

    /// Deletes what the handler did not report as failed (Lambda's partial batch response).
    fn settle(&self, batch: &[Delivered], failed: &[String]) {
        let failed: HashSet<&str> = failed.iter().map(String::as_str).collect();
        let known: HashSet<&str> = batch.iter().map(|m| m.message_id.as_str()).collect();
        if failed.iter().any(|id| !known.contains(id)) {
            self.account.count(&self.function.name, |c| {
                c.unknown_failures += 1;
                c.messages_failed += batch.len() as u64;
            });
            return;
        }
        let mut failed_groups: HashSet<&str> = HashSet::new();
        let mut order_violations = 0;
        let mut acknowledged: Vec<Receipt> = Vec::new();
        for message in batch {
            if failed.contains(message.message_id.as_str()) {
                failed_groups.insert(message.group.as_str());
                continue;
            }
            if self.fifo && failed_groups.contains(message.group.as_str()) {
                order_violations += 1;
            }
            acknowledged.push(message.receipt);
        }
        let deleted = acknowledged
            .chunks(super::sqs::MAX_BATCH)
            .map(|chunk| {
                self.sqs
                    .delete_batch(&self.source.queue, chunk)
                    .unwrap_or(0)
            })
            .sum::<usize>();
        self.account.count(&self.function.name, |c| {
            c.messages_deleted += deleted as u64;
            c.messages_failed += failed.len() as u64;
            c.order_violations += order_violations;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::super::sqs::{Outgoing, QueueConfig};
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    const VISIBILITY: Duration = Duration::from_secs(30);

    struct World {
        sqs: Arc<Sqs>,
        account: Arc<Account>,
    }

    fn world(account_limit: u32, queues: &[QueueConfig]) -> World {
        let sqs = Arc::new(Sqs::new(5));
        for queue in queues {
            sqs.create_queue(queue.clone());
        }
        World {
            sqs,
            account: Arc::new(Account::new(account_limit)),
        }
    }

    fn function(name: &str) -> FunctionConfig {
        FunctionConfig::new(name, Duration::from_secs(10), 1024)
    }

    fn sleeping_for(duration: Duration) -> Handler {
        handler(move |_invocation| async move {
            tokio::time::sleep(duration).await;
            Vec::new()
        })
    }

    fn send_many(sqs: &Sqs, queue: &str, groups: &[&str], each: usize) {
        for n in 0..each {
            for group in groups {
                sqs.send(queue, Outgoing::new(group, &format!("{group}-{n}")))
                    .expect("send");
            }
        }
    }

    fn peak(series: &[(u64, u32)]) -> u32 {
        series.iter().map(|(_, in_use)| *in_use).max().unwrap_or(0)
    }

    #[tokio::test(start_paused = true)]
    async fn an_event_source_runs_at_most_its_maximum_concurrency_of_batches_at_once() {
        let w = world(1_000, &[QueueConfig::standard("fanout", VISIBILITY)]);
        w.account
            .create_function(function("fanout"))
            .expect("function");
        send_many(&w.sqs, "fanout", &[""], 20);
        EventSource::new(EventSourceConfig::new("fanout", 1, 2), "fanout")
            .spawn(
                Arc::clone(&w.account),
                Arc::clone(&w.sqs),
                sleeping_for(Duration::from_secs(5)),
            )
            .expect("spawn");
        tokio::time::sleep(Duration::from_secs(300)).await;
        let counters = w.account.counters("fanout").expect("counters");
        assert_eq!(counters.messages_deleted, 20);
        assert_eq!(
            peak(&w.account.concurrency_by_second("fanout").expect("series")),
            2
        );
        assert_eq!(counters.throttles, 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_fifo_source_runs_one_batch_per_message_group_at_a_time() {
        let w = world(1_000, &[QueueConfig::fifo("refresh.fifo", VISIBILITY)]);
        w.account
            .create_function(function("refresh"))
            .expect("function");
        // One group after the other: a batch of two is then one group's.
        send_many(&w.sqs, "refresh.fifo", &["code-a"], 10);
        send_many(&w.sqs, "refresh.fifo", &["code-b"], 10);
        EventSource::new(EventSourceConfig::new("refresh.fifo", 2, 50), "refresh")
            .spawn(
                Arc::clone(&w.account),
                Arc::clone(&w.sqs),
                sleeping_for(Duration::from_secs(5)),
            )
            .expect("spawn");
        tokio::time::sleep(Duration::from_secs(300)).await;
        assert_eq!(
            w.account.counters("refresh").map(|c| c.messages_deleted),
            Ok(20)
        );
        assert_eq!(
            peak(&w.account.concurrency_by_second("refresh").expect("series")),
            2
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_same_world_runs_the_same_invocations_at_the_same_moments() {
        let mut runs = Vec::new();
        for _ in 0..2 {
            let w = world(3, &[QueueConfig::fifo("refresh.fifo", VISIBILITY)]);
            w.account
                .create_function(function("refresh"))
                .expect("function");
            send_many(&w.sqs, "refresh.fifo", &["a", "b", "c", "d", "e"], 6);
            let log = Arc::new(Mutex::new(Vec::new()));
            let seen = Arc::clone(&log);
            let start = Instant::now();
            let code = handler(move |invocation: Invocation| {
                let ids: Vec<String> = invocation
                    .messages
                    .iter()
                    .map(|m| m.message_id.clone())
                    .collect();
                seen.lock()
                    .expect("lock")
                    .push((start.elapsed(), ids.clone()));
                async move {
                    tokio::time::sleep(Duration::from_millis(700)).await;
                    ids.into_iter()
                        .take(1)
                        .filter(|id| id.ends_with('7'))
                        .collect()
                }
            });
            let poller = EventSource::new(EventSourceConfig::new("refresh.fifo", 1, 4), "refresh")
                .spawn(Arc::clone(&w.account), Arc::clone(&w.sqs), code)
                .expect("spawn");
            tokio::time::sleep(Duration::from_secs(300)).await;
            poller.abort();
            let counters = w.account.counters("refresh").expect("counters");
            let entries = log.lock().expect("lock").clone();
            runs.push((entries, counters.throttles, counters.messages_deleted));
        }
        assert!(
            runs[0].1 > 0,
            "the account's 3 concurrent executions throttled some"
        );
        assert_eq!(runs[0], runs[1]);
    }

    /// How the next session plugs a domain consumer in: the function's handler calls the
    /// domain's own `fanout::consume` with the batch, virtual time as its clock and the time
    /// the invocation has left, and answers its partial batch.
    #[tokio::test(start_paused = true)]
    async fn the_domains_fan_out_consumer_runs_as_a_handler_under_virtual_time() {
        use domain::fakes::{InMemoryQueues, InMemoryStore};
        use domain::fanout::{consumer, Expander};
        use domain::ids::TenantId;
        use domain::ids::{CodeId, StaffId};
        use domain::reasons::{Cause, FanOut, Source};

        crate::services::clock::start_at(1_796_000_000_000);
        let store = InMemoryStore::default();
        let tenant = TenantId::parse("t1").expect("tenant");
        let alice = StaffId::parse("alice").expect("staff");
        let codes: Vec<CodeId> = (0..250)
            .map(|n| CodeId::parse(&format!("c{n:04}")).expect("code"))
            .collect();
        store.seat(&tenant, &alice, &codes.iter().collect::<Vec<_>>());
        let queues = InMemoryQueues::default();
        let expander = Arc::new(Expander::new(
            store.clone(),
            queues.clone(),
            queues.clone(),
            store,
        ));

        let w = world(1_000, &[QueueConfig::standard("fanout", VISIBILITY)]);
        w.account
            .create_function(function("fanout"))
            .expect("function");
        let fan_out = FanOut::new(
            tenant,
            vec![Source::Staff { staff: alice }],
            Cause::StaffChanged,
            42,
            "staff:alice:42".into(),
        );
        let body = serde_json::to_string(&fan_out).expect("JSON");
        w.sqs
            .send("fanout", Outgoing::new("", &body))
            .expect("send");
        let code = handler(move |invocation: Invocation| {
            let expander = Arc::clone(&expander);
            async move {
                let received: Vec<domain::batch::Received<'_>> = invocation
                    .messages
                    .iter()
                    .map(|m| domain::batch::Received {
                        message_id: &m.message_id,
                        group: &m.group,
                        body: &m.body,
                        receive_count: m.receive_count,
                    })
                    .collect();
                let time_left_ms = u64::try_from(invocation.time_left().as_millis()).unwrap_or(0);
                consumer::consume(
                    &expander,
                    5,
                    crate::services::clock::now_ms,
                    &received,
                    time_left_ms,
                )
                .await
                .failures()
            }
        });
        EventSource::new(EventSourceConfig::new("fanout", 10, 20), "fanout")
            .spawn(Arc::clone(&w.account), Arc::clone(&w.sqs), code)
            .expect("spawn");
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert_eq!(
            queues.reasons().len(),
            250,
            "one refresh reason per code alice sits on"
        );
        assert_eq!(
            w.account.counters("fanout").map(|c| c.messages_deleted),
            Ok(1)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn reserved_concurrency_caps_a_function_and_counts_its_throttles() {
        let w = world(1_000, &[QueueConfig::standard("replay", VISIBILITY)]);
        let mut config = function("replay");
        config.reserved_concurrency = Some(1);
        w.account.create_function(config).expect("function");
        send_many(&w.sqs, "replay", &[""], 6);
        EventSource::new(EventSourceConfig::new("replay", 1, 3), "replay")
            .spawn(
                Arc::clone(&w.account),
                Arc::clone(&w.sqs),
                sleeping_for(Duration::from_secs(2)),
            )
            .expect("spawn");
        tokio::time::sleep(Duration::from_secs(600)).await;
        let counters = w.account.counters("replay").expect("counters");
        assert_eq!(counters.messages_deleted, 6);
        assert!(counters.throttles > 0);
        assert_eq!(
            peak(&w.account.concurrency_by_second("replay").expect("series")),
            1
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_reservation_may_not_leave_less_than_100_unreserved() {
        let account = Account::new(ACCOUNT_CONCURRENCY);
        let mut config = function("refresh");
        config.reserved_concurrency = Some(901);
        assert_eq!(
            account.create_function(config),
            Err(LambdaError::ReservationTooLarge {
                asked: 901,
                available: 900
            })
        );
    }

    #[tokio::test(start_paused = true)]
    async fn functions_without_a_reservation_share_the_accounts_concurrency() {
        let w = world(
            3,
            &[
                QueueConfig::standard("a", VISIBILITY),
                QueueConfig::standard("b", VISIBILITY),
            ],
        );
        for name in ["a", "b"] {
            w.account.create_function(function(name)).expect("function");
            send_many(&w.sqs, name, &[""], 4);
            EventSource::new(EventSourceConfig::new(name, 1, 2), name)
                .spawn(
                    Arc::clone(&w.account),
                    Arc::clone(&w.sqs),
                    sleeping_for(Duration::from_secs(5)),
                )
                .expect("spawn");
        }
        tokio::time::sleep(Duration::from_secs(600)).await;
        assert_eq!(peak(&w.account.account_concurrency_by_second()), 3);
        let throttles = w.account.counters("a").expect("a").throttles
            + w.account.counters("b").expect("b").throttles;
        assert!(throttles > 0);
        for name in ["a", "b"] {
            assert_eq!(w.account.counters(name).map(|c| c.messages_deleted), Ok(4));
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_new_environment_pays_the_cold_start_and_an_idle_one_is_reused_while_warm() {
        let w = world(1_000, &[QueueConfig::standard("q", VISIBILITY)]);
        let mut config = function("f");
        config.cold_start = Duration::from_millis(500);
        config.keep_warm = Duration::from_secs(60);
        w.account.create_function(config).expect("function");
        let started_at = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&started_at);
        let code = handler(move |_invocation| {
            seen.lock().expect("lock").push(Instant::now());
            async { Vec::new() }
        });
        let start = Instant::now();
        EventSource::new(EventSourceConfig::new("q", 1, 1), "f")
            .spawn(Arc::clone(&w.account), Arc::clone(&w.sqs), code)
            .expect("spawn");
        w.sqs.send("q", Outgoing::new("", "first")).expect("send");
        tokio::time::sleep(Duration::from_secs(10)).await;
        w.sqs.send("q", Outgoing::new("", "warm")).expect("send");
        tokio::time::sleep(Duration::from_secs(120)).await;
        w.sqs
            .send("q", Outgoing::new("", "cold again"))
            .expect("send");
        tokio::time::sleep(Duration::from_secs(10)).await;
        let offsets: Vec<Duration> = started_at
            .lock()
            .expect("lock")
            .iter()
            .map(|at| at.duration_since(start))
            .collect();
        assert_eq!(
            offsets,
            [
                Duration::from_millis(500),
                Duration::from_secs(10),
                Duration::from_millis(130_500),
            ]
        );
        assert_eq!(w.account.counters("f").map(|c| c.cold_starts), Ok(2));
    }

    #[tokio::test(start_paused = true)]
    async fn an_invocation_past_its_timeout_is_abandoned_and_its_batch_returns_after_the_visibility_timeout(
    ) {
        let w = world(1_000, &[QueueConfig::fifo("refresh.fifo", VISIBILITY)]);
        w.account
            .create_function(function("refresh"))
            .expect("function");
        let receives = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&receives);
        let start = Instant::now();
        let code = handler(move |invocation: Invocation| {
            let first = invocation.messages[0].receive_count;
            seen.lock().expect("lock").push((start.elapsed(), first));
            async move {
                if first == 1 {
                    tokio::time::sleep(Duration::from_secs(3_600)).await;
                }
                Vec::new()
            }
        });
        w.sqs
            .send("refresh.fifo", Outgoing::new("code-a", "slow"))
            .expect("send");
        EventSource::new(EventSourceConfig::new("refresh.fifo", 10, 2), "refresh")
            .spawn(Arc::clone(&w.account), Arc::clone(&w.sqs), code)
            .expect("spawn");
        tokio::time::sleep(Duration::from_secs(120)).await;
        let cold = Duration::from_millis(150);
        assert_eq!(
            *receives.lock().expect("lock"),
            [(cold, 1), (VISIBILITY + cold, 2)],
            "a new environment: the timed-out one is not reused"
        );
        let counters = w.account.counters("refresh").expect("counters");
        assert_eq!((counters.timeouts, counters.messages_deleted), (1, 1));
    }

    #[tokio::test(start_paused = true)]
    async fn reported_failures_return_after_the_visibility_timeout_and_the_rest_is_deleted() {
        let w = world(1_000, &[QueueConfig::fifo("refresh.fifo", VISIBILITY)]);
        w.account
            .create_function(function("refresh"))
            .expect("function");
        send_many(&w.sqs, "refresh.fifo", &["code-a"], 3);
        let calls = Arc::new(AtomicU32::new(0));
        let count = Arc::clone(&calls);
        // The first batch fails its second message and, in order, the rest of the group.
        let code = handler(move |invocation: Invocation| {
            let first_call = count.fetch_add(1, Ordering::SeqCst) == 0;
            async move {
                if first_call {
                    invocation.messages[1..]
                        .iter()
                        .map(|m| m.message_id.clone())
                        .collect()
                } else {
                    Vec::new()
                }
            }
        });
        EventSource::new(EventSourceConfig::new("refresh.fifo", 10, 2), "refresh")
            .spawn(Arc::clone(&w.account), Arc::clone(&w.sqs), code)
            .expect("spawn");
        tokio::time::sleep(VISIBILITY - Duration::from_secs(1)).await;
        let counters = w.account.counters("refresh").expect("counters");
        assert_eq!(
            (counters.messages_deleted, counters.messages_failed),
            (1, 2)
        );
        tokio::time::sleep(Duration::from_secs(5)).await;
        let counters = w.account.counters("refresh").expect("counters");
        assert_eq!(
            (counters.messages_deleted, counters.order_violations),
            (3, 0)
        );
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn acknowledging_a_message_after_a_failed_one_of_its_group_counts_an_order_violation() {
        let w = world(1_000, &[QueueConfig::fifo("refresh.fifo", VISIBILITY)]);
        w.account
            .create_function(function("refresh"))
            .expect("function");
        send_many(&w.sqs, "refresh.fifo", &["code-a"], 3);
        let code = handler(|invocation: Invocation| async move {
            if invocation.messages[0].receive_count == 1 {
                vec![invocation.messages[0].message_id.clone()]
            } else {
                Vec::new()
            }
        });
        EventSource::new(EventSourceConfig::new("refresh.fifo", 10, 2), "refresh")
            .spawn(Arc::clone(&w.account), Arc::clone(&w.sqs), code)
            .expect("spawn");
        tokio::time::sleep(Duration::from_secs(1)).await;
        let counters = w.account.counters("refresh").expect("counters");
        assert_eq!(
            (counters.messages_deleted, counters.order_violations),
            (2, 2)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_answer_naming_a_message_not_in_the_batch_fails_the_whole_batch() {
        let w = world(1_000, &[QueueConfig::standard("q", VISIBILITY)]);
        w.account.create_function(function("f")).expect("function");
        send_many(&w.sqs, "q", &[""], 2);
        let code = handler(|_invocation| async { vec!["not-in-batch".to_owned()] });
        EventSource::new(EventSourceConfig::new("q", 10, 2), "f")
            .spawn(Arc::clone(&w.account), Arc::clone(&w.sqs), code)
            .expect("spawn");
        tokio::time::sleep(Duration::from_secs(1)).await;
        let counters = w.account.counters("f").expect("counters");
        assert_eq!(
            (counters.messages_deleted, counters.unknown_failures),
            (0, 1)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn gb_seconds_are_memory_times_the_billed_duration_with_the_cold_start() {
        let w = world(1_000, &[QueueConfig::standard("q", VISIBILITY)]);
        let mut config = function("f");
        config.memory_mb = 512;
        config.cold_start = Duration::from_millis(500);
        w.account.create_function(config).expect("function");
        w.sqs.send("q", Outgoing::new("", "one")).expect("send");
        EventSource::new(EventSourceConfig::new("q", 10, 2), "f")
            .spawn(
                Arc::clone(&w.account),
                Arc::clone(&w.sqs),
                sleeping_for(Duration::from_millis(3_500)),
            )
            .expect("spawn");
        tokio::time::sleep(Duration::from_secs(60)).await;
        let counters = w.account.counters("f").expect("counters");
        assert_eq!(counters.invocations, 1);
        assert!(
            (counters.gb_seconds() - 2.0).abs() < 1e-9,
            "{}",
            counters.gb_seconds()
        );
    }
}
