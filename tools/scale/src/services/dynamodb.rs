//! DynamoDB's request units and partition limits under virtual time: what each request costs,
//! which partition serves it (decided by the partition key string, exactly as the adapters key
//! items: `adapters::dynamodb::keys`), the per-partition limits per second, the split for heat,
//! index writes that throttle the table's write, transaction conflicts, and the AWS SDK's
//! standard retry of throttled requests. docs/aws-semantics.md §3 and tools/scale/README.md,
//! "The simulated services".
//!
//! This is the metering of a request, not a store: the simulation keeps the items in the
//! domain's in-memory store and asks this model what each request it makes costs and whether
//! DynamoDB would have served it.

use adapters::dynamodb::keys;
use domain::ids::CodeId;
use domain::ids::TenantId;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard};
use tokio::time::{Duration, Instant};

/// Read units one partition serves in a second.
pub const PARTITION_READ_UNITS: u64 = 3_000;
/// Write units one partition serves in a second.
pub const PARTITION_WRITE_UNITS: u64 = 1_000;
/// A strongly consistent read costs one unit per started 4 KB (an eventual one half).
pub const READ_UNIT_BYTES: usize = 4 * 1024;
/// A write costs one unit per started 1 KB.
pub const WRITE_UNIT_BYTES: usize = 1024;
/// How many times a key's partitions can double by sort key: far beyond one item per
/// partition for any tenant, so the item is what stays the limit.
const MAX_SPLIT_LEVEL: u32 = 24;

/// An item's primary key: the partition key decides the partition.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ItemKey {
    pub pk: String,
    pub sk: String,
}

impl ItemKey {
    pub fn new(pk: impl Into<String>, sk: impl Into<String>) -> Self {
        Self {
            pk: pk.into(),
            sk: sk.into(),
        }
    }

    /// A code's record: under its tenant, like every item of a tenant.
    pub fn code(tenant: &TenantId, code: &CodeId) -> Self {
        Self::new(keys::tenant(tenant), keys::code(code))
    }

    /// What WeCom last accepted for a code.
    pub fn pushed(tenant: &TenantId, code: &CodeId) -> Self {
        Self::new(keys::tenant(tenant), keys::pushed(code))
    }

    /// The code's lease, which every writer of the code's record holds.
    pub fn lease(tenant: &TenantId, code: &CodeId) -> Self {
        Self::new(keys::tenant(tenant), keys::lease(code))
    }

    /// The refresh function's counters for a tenant-day: one item every refresh writes.
    pub fn refresh_tally(tenant: &TenantId, day: &str) -> Self {
        Self::new(keys::tenant(tenant), keys::refresh_tally(day))
    }

    /// A tenant's WeCom budget for one API and UTC hour.
    pub fn budget(tenant: &TenantId, api: &str, hour: u64) -> Self {
        Self::new(keys::tenant(tenant), keys::budget(api, hour))
    }

    /// The key's pattern: each key cut after its first `#` (`TENANT#*`, `CODE#*`).
    pub fn pattern(&self) -> KeyPattern {
        KeyPattern {
            pk: pattern_of(&self.pk),
            sk: pattern_of(&self.sk),
        }
    }
}

fn pattern_of(key: &str) -> String {
    match key.split_once('#') {
        Some((kind, _)) => format!("{kind}#*"),
        None => key.to_owned(),
    }
}

/// Which kind of key a counter is about: `TENANT#*` / `CODE#*`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KeyPattern {
    pub pk: String,
    pub sk: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Consistency {
    Strong,
    Eventual,
}

/// The entry a write puts in a global secondary index (its key there and its size).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexEntry {
    pub index: String,
    pub key: ItemKey,
    pub bytes: usize,
}

/// One item a request touches, with its size in bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Touch {
    pub key: ItemKey,
    pub bytes: usize,
    /// The index entries a write changes (a write only).
    pub index_entries: Vec<IndexEntry>,
}

impl Touch {
    pub fn new(key: ItemKey, bytes: usize) -> Self {
        Self {
            key,
            bytes,
            index_entries: Vec::new(),
        }
    }

    pub fn with_index(mut self, index: &str, key: ItemKey, bytes: usize) -> Self {
        self.index_entries.push(IndexEntry {
            index: index.to_owned(),
            key,
            bytes,
        });
        self
    }
}

/// A request, as the adapters make them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// `GetItem`.
    Get(Touch, Consistency),
    /// `BatchGetItem`: each key billed as its own read.
    BatchGet(Vec<Touch>, Consistency),
    /// `Query` of one partition key from `start.sk`, reading `bytes` in all (rounded once).
    Query {
        start: ItemKey,
        bytes: usize,
        consistency: Consistency,
        index: Option<String>,
    },
    /// `PutItem`, `UpdateItem` or `DeleteItem` (billed even when its condition refuses it).
    Write(Touch),
    /// `TransactWriteItems`: writes and condition checks, each at twice a write's units.
    TransactWrite(Vec<Touch>),
    /// `TransactGetItems`: twice a strongly consistent read.
    TransactGet(Vec<Touch>),
}

/// What a served request cost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Served {
    /// Read units in halves (an eventually consistent read of up to 4 KB is one half).
    pub read_half_units: u64,
    pub write_units: u64,
    pub attempts: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DynamoError {
    /// Throttled on every attempt the SDK's retry allows.
    Throttled { attempts: u32, pattern: KeyPattern },
    /// A plain write to an item a running transaction holds (`TransactionConflictException`).
    TransactionConflict(ItemKey),
    /// A transaction on an item another request is writing (`TransactionCanceledException`,
    /// reason `TransactionConflict`).
    TransactionCanceled(ItemKey),
}

impl std::fmt::Display for DynamoError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Throttled { attempts, pattern } => {
                write!(
                    f,
                    "throttled {attempts} times on {}/{}",
                    pattern.pk, pattern.sk
                )
            }
            Self::TransactionConflict(key) => write!(f, "transaction conflict on {key:?}"),
            Self::TransactionCanceled(key) => write!(f, "transaction cancelled on {key:?}"),
        }
    }
}

impl std::error::Error for DynamoError {}

/// The AWS SDK's standard retry: `max_attempts` in all, and before retry `n` a wait drawn
/// uniformly from zero to `min(initial_backoff × 2^(n-1), max_backoff)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    pub max_attempts: u32,
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 3,
            initial_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(20),
        }
    }
}

impl RetryPolicy {
    fn ceiling(&self, retry: u32) -> Duration {
        let doubled = self
            .initial_backoff
            .saturating_mul(1 << retry.saturating_sub(1).min(30));
        doubled.min(self.max_backoff)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DynamoConfig {
    /// Partitions of the table (and of each index) before any split: a new on-demand table's
    /// warm throughput of 12,000 reads and 4,000 writes a second is four partitions.
    pub initial_partitions: u64,
    /// How long a partition must throttle before its hottest key gets partitions of its own
    /// (and, each further delay, twice as many by sort key).
    pub split_delay: Duration,
    pub retry: RetryPolicy,
    /// Service time of a single-item request and of a transaction: while a request is served
    /// its items are being written (the window a transaction conflict needs).
    pub request_latency: Duration,
    pub transaction_latency: Duration,
}

impl Default for DynamoConfig {
    fn default() -> Self {
        Self {
            initial_partitions: 4,
            split_delay: Duration::from_secs(5 * 60),
            retry: RetryPolicy::default(),
            request_latency: Duration::from_millis(5),
            transaction_latency: Duration::from_millis(20),
        }
    }
}

/// Counts for one second (or a whole run).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub read_half_units: u64,
    pub write_units: u64,
    /// Attempts refused for a partition's limit (each retried one counts).
    pub throttled_attempts: u64,
    /// Requests that failed after the SDK's last attempt.
    pub failed_requests: u64,
    pub conflicts: u64,
}

impl Usage {
    /// Adds `other`'s counts to these.
    pub fn absorb(&mut self, other: &Usage) {
        self.read_half_units += other.read_half_units;
        self.write_units += other.write_units;
        self.throttled_attempts += other.throttled_attempts;
        self.failed_requests += other.failed_requests;
        self.conflicts += other.conflicts;
    }

    pub fn read_units(&self) -> f64 {
        #[allow(clippy::cast_precision_loss)]
        let halves = self.read_half_units as f64;
        halves / 2.0
    }
}

/// A partition: of the table or an index, shared by hash of the partition key, or one of a
/// hot key's own after splits.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum PartitionId {
    Shared {
        space: String,
        slot: u64,
    },
    Split {
        space: String,
        pk: String,
        level: u32,
        slot: u64,
    },
}

#[derive(Default)]
struct Partition {
    second: u64,
    read_half_units: u64,
    write_units: u64,
    hot_since: Option<Instant>,
    last_throttled_second: Option<u64>,
}

impl Partition {
    fn roll(&mut self, second: u64) {
        if self.second != second {
            self.second = second;
            self.read_half_units = 0;
            self.write_units = 0;
        }
    }

    fn fits(&self, read_half_units: u64, write_units: u64) -> bool {
        self.read_half_units + read_half_units <= PARTITION_READ_UNITS * 2
            && self.write_units + write_units <= PARTITION_WRITE_UNITS
    }

    /// Marks a throttle: true once the partition has been throttling for `split_delay`.
    fn throttled(&mut self, second: u64, now: Instant, split_delay: Duration) -> bool {
        let continued = self
            .last_throttled_second
            .is_some_and(|last| last + 1 >= second);
        if !continued {
            self.hot_since = Some(now);
        }
        self.last_throttled_second = Some(second);
        self.hot_since
            .is_some_and(|since| now.duration_since(since) >= split_delay)
    }
}

/// The units one request asks of one partition.
struct Demand {
    partition: PartitionId,
    key: ItemKey,
    read_half_units: u64,
    write_units: u64,
}

struct State {
    partitions: HashMap<PartitionId, Partition>,
    /// Keys split for heat: how many doublings of their own partitions.
    split_levels: HashMap<(String, String), u32>,
    /// What the partition a key was split from had served in the second of the split: the
    /// key's new partitions start from it, so a split gives no extra units that second.
    split_from: HashMap<(String, String), Partition>,
    /// Items being written until the instant, and whether by a transaction.
    busy: HashMap<ItemKey, (Instant, bool)>,
    total: Usage,
    by_second: BTreeMap<u64, Usage>,
    throttles_by_pattern: BTreeMap<KeyPattern, u64>,
    splits: u64,
    rng: StdRng,
}

pub struct DynamoDb {
    config: DynamoConfig,
    state: Mutex<State>,
}

fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn read_half_units(bytes: usize, consistency: Consistency) -> u64 {
    let units = u64::try_from(bytes.div_ceil(READ_UNIT_BYTES).max(1)).unwrap_or(u64::MAX);
    match consistency {
        Consistency::Strong => units * 2,
        Consistency::Eventual => units,
    }
}

fn write_units(bytes: usize) -> u64 {
    u64::try_from(bytes.div_ceil(WRITE_UNIT_BYTES).max(1)).unwrap_or(u64::MAX)
}

const TABLE: &str = "table";

impl DynamoDb {
    pub fn new(config: DynamoConfig, seed: u64) -> Self {
        Self {
            config,
            state: Mutex::new(State {
                partitions: HashMap::new(),
                split_levels: HashMap::new(),
                split_from: HashMap::new(),
                busy: HashMap::new(),
                total: Usage::default(),
                by_second: BTreeMap::new(),
                throttles_by_pattern: BTreeMap::new(),
                splits: 0,
                rng: StdRng::seed_from_u64(seed),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Serves a request as DynamoDB and the SDK would: throttled attempts wait the SDK's
    /// backoff and try again; a request is billed once, when served.
    pub async fn request(&self, request: &Request) -> Result<Served, DynamoError> {
        let demands = self.demands(request);
        let mut attempt = 1;
        loop {
            let outcome = self.attempt(request, &demands)?;
            match outcome {
                None => {
                    let latency = match request {
                        Request::TransactWrite(_) | Request::TransactGet(_) => {
                            self.config.transaction_latency
                        }
                        _ => self.config.request_latency,
                    };
                    tokio::time::sleep(latency).await;
                    let (read_half_units, write_units) =
                        demands.iter().fold((0, 0), |(r, w), d| {
                            (r + d.read_half_units, w + d.write_units)
                        });
                    return Ok(Served {
                        read_half_units,
                        write_units,
                        attempts: attempt,
                    });
                }
                Some(pattern) if attempt >= self.config.retry.max_attempts => {
                    let mut state = self.lock();
                    state.total.failed_requests += 1;
                    let second = super::clock::epoch_second_at(Instant::now());
                    state.by_second.entry(second).or_default().failed_requests += 1;
                    return Err(DynamoError::Throttled {
                        attempts: attempt,
                        pattern,
                    });
                }
                Some(_) => {
                    let ceiling = self.config.retry.ceiling(attempt);
                    let wait = {
                        let mut state = self.lock();
                        ceiling.mul_f64(state.rng.gen_range(0.0..1.0))
                    };
                    tokio::time::sleep(wait).await;
                    attempt += 1;
                }
            }
        }
    }

    /// The partitions a request asks units of (an index write's units are asked of the
    /// index's partition, and its throttle is the table write's).
    fn demands(&self, request: &Request) -> Vec<Demand> {
        let state = self.lock();
        let demand = |space: &str, key: &ItemKey, read_half_units, write_units| Demand {
            partition: self.partition_of(&state, space, key),
            key: key.clone(),
            read_half_units,
            write_units,
        };
        let writes = |touch: &Touch, factor: u64| {
            let mut all = vec![demand(
                TABLE,
                &touch.key,
                0,
                write_units(touch.bytes) * factor,
            )];
            all.extend(
                touch
                    .index_entries
                    .iter()
                    .map(|entry| demand(&entry.index, &entry.key, 0, write_units(entry.bytes))),
            );
            all
        };
        match request {
            Request::Get(touch, consistency) => {
                vec![demand(
                    TABLE,
                    &touch.key,
                    read_half_units(touch.bytes, *consistency),
                    0,
                )]
            }
            Request::BatchGet(touches, consistency) => touches
                .iter()
                .map(|t| demand(TABLE, &t.key, read_half_units(t.bytes, *consistency), 0))
                .collect(),
            Request::Query {
                start,
                bytes,
                consistency,
                index,
            } => vec![demand(
                index.as_deref().unwrap_or(TABLE),
                start,
                read_half_units(*bytes, *consistency),
                0,
            )],
            Request::Write(touch) => writes(touch, 1),
            Request::TransactWrite(touches) => touches.iter().flat_map(|t| writes(t, 2)).collect(),
            Request::TransactGet(touches) => touches
                .iter()
                .map(|t| {
                    demand(
                        TABLE,
                        &t.key,
                        read_half_units(t.bytes, Consistency::Strong) * 2,
                        0,
                    )
                })
                .collect(),
        }
    }

    fn partition_of(&self, state: &State, space: &str, key: &ItemKey) -> PartitionId {
        match state.split_levels.get(&(space.to_owned(), key.pk.clone())) {
            Some(&level) => PartitionId::Split {
                space: space.to_owned(),
                pk: key.pk.clone(),
                level,
                slot: fnv1a(&key.sk) % (1u64 << level),
            },
            None => PartitionId::Shared {
                space: space.to_owned(),
                slot: fnv1a(&key.pk) % self.config.initial_partitions.max(1),
            },
        }
    }

    /// One attempt: `None` when served (and billed), the throttled key's pattern otherwise.
    fn attempt(
        &self,
        request: &Request,
        demands: &[Demand],
    ) -> Result<Option<KeyPattern>, DynamoError> {
        let now = Instant::now();
        let second = super::clock::epoch_second_at(now);
        let mut guard = self.lock();
        let state = &mut *guard;
        self.check_conflicts(state, request, now)?;
        // Splits since the request was planned move its items to their new partitions.
        let placed: Vec<PartitionId> = demands
            .iter()
            .map(|d| match &d.partition {
                PartitionId::Shared { space, .. } | PartitionId::Split { space, .. } => {
                    self.partition_of(state, space, &d.key)
                }
            })
            .collect();
        let mut asked: HashMap<&PartitionId, (u64, u64)> = HashMap::new();
        for (partition, demand) in placed.iter().zip(demands) {
            let entry = asked.entry(partition).or_default();
            entry.0 += demand.read_half_units;
            entry.1 += demand.write_units;
        }
        let (partitions, split_from) = (&mut state.partitions, &state.split_from);
        let throttled = placed.iter().zip(demands).find(|(partition, _)| {
            let (read, write) = asked[partition];
            let p = partitions.entry((*partition).clone()).or_insert_with(|| {
                let PartitionId::Split { space, pk, .. } = partition else {
                    return Partition::default();
                };
                split_from
                    .get(&(space.clone(), pk.clone()))
                    .map(|from| Partition {
                        second: from.second,
                        read_half_units: from.read_half_units,
                        write_units: from.write_units,
                        ..Partition::default()
                    })
                    .unwrap_or_default()
            });
            p.roll(second);
            !p.fits(read, write)
        });
        if let Some((partition, demand)) = throttled {
            let pattern = self.record_throttle(state, partition, demand, second, now);
            return Ok(Some(pattern));
        }
        for (partition, (read, write)) in asked {
            if let Some(p) = state.partitions.get_mut(partition) {
                p.read_half_units += read;
                p.write_units += write;
            }
        }
        let (read, write) = demands.iter().fold((0, 0), |(r, w), d| {
            (r + d.read_half_units, w + d.write_units)
        });
        for usage in [&mut state.total, state.by_second.entry(second).or_default()] {
            usage.read_half_units += read;
            usage.write_units += write;
        }
        self.mark_busy(state, request, now);
        Ok(None)
    }

    fn record_throttle(
        &self,
        state: &mut State,
        partition: &PartitionId,
        demand: &Demand,
        second: u64,
        now: Instant,
    ) -> KeyPattern {
        let mut pattern = demand.key.pattern();
        let space = match partition {
            PartitionId::Shared { space, .. } | PartitionId::Split { space, .. } => space.clone(),
        };
        if space != TABLE {
            pattern.pk = format!("{space}:{}", pattern.pk);
        }
        state.total.throttled_attempts += 1;
        state
            .by_second
            .entry(second)
            .or_default()
            .throttled_attempts += 1;
        *state
            .throttles_by_pattern
            .entry(pattern.clone())
            .or_default() += 1;
        let due_for_split = state
            .partitions
            .get_mut(partition)
            .is_some_and(|p| p.throttled(second, now, self.config.split_delay));
        if due_for_split {
            // The key that asked is the hot one: it gets partitions of its own, twice as many
            // at each further split; every partition it now has starts cold.
            let hot_key = (space, demand.key.pk.clone());
            state
                .split_levels
                .entry(hot_key.clone())
                .and_modify(|level| *level = (*level + 1).min(MAX_SPLIT_LEVEL))
                .or_insert(0);
            state.splits += 1;
            if let Some(p) = state.partitions.get_mut(partition) {
                p.hot_since = None;
                p.last_throttled_second = None;
                let served = Partition {
                    second: p.second,
                    read_half_units: p.read_half_units,
                    write_units: p.write_units,
                    ..Partition::default()
                };
                state.split_from.insert(hot_key, served);
            }
        }
        pattern
    }

    fn check_conflicts(
        &self,
        state: &mut State,
        request: &Request,
        now: Instant,
    ) -> Result<(), DynamoError> {
        let busy = |key: &ItemKey| state.busy.get(key).filter(|(until, _)| *until > now);
        let conflict = match request {
            Request::Write(touch) => busy(&touch.key)
                .filter(|(_, by_transaction)| *by_transaction)
                .map(|_| DynamoError::TransactionConflict(touch.key.clone())),
            Request::TransactWrite(touches) => touches
                .iter()
                .find(|t| busy(&t.key).is_some())
                .map(|t| DynamoError::TransactionCanceled(t.key.clone())),
            _ => None,
        };
        match conflict {
            Some(error) => {
                state.total.conflicts += 1;
                let second = super::clock::epoch_second_at(now);
                state.by_second.entry(second).or_default().conflicts += 1;
                Err(error)
            }
            None => Ok(()),
        }
    }

    fn mark_busy(&self, state: &mut State, request: &Request, now: Instant) {
        state.busy.retain(|_, (until, _)| *until > now);
        match request {
            Request::Write(touch) => {
                state.busy.insert(
                    touch.key.clone(),
                    (now + self.config.request_latency, false),
                );
            }
            Request::TransactWrite(touches) => {
                for touch in touches {
                    state.busy.insert(
                        touch.key.clone(),
                        (now + self.config.transaction_latency, true),
                    );
                }
            }
            _ => {}
        }
    }

    pub fn total(&self) -> Usage {
        self.lock().total
    }

    /// Usage per epoch second, for the seconds that had any.
    pub fn by_second(&self) -> BTreeMap<u64, Usage> {
        self.lock().by_second.clone()
    }

    /// Throttled attempts per key pattern (`TENANT#*`/`CODE#*`; an index's as `gsi1:DIRTY#*`).
    pub fn throttles_by_pattern(&self) -> BTreeMap<KeyPattern, u64> {
        self.lock().throttles_by_pattern.clone()
    }

    /// How many times a hot key got (more) partitions of its own.
    pub fn splits(&self) -> u64 {
        self.lock().splits
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn tenant(id: &str) -> TenantId {
        TenantId::parse(id).expect("tenant id")
    }

    fn code(id: &str) -> CodeId {
        CodeId::parse(id).expect("code id")
    }

    /// A table whose seconds start with the test.
    fn db_with(config: DynamoConfig) -> Arc<DynamoDb> {
        crate::services::clock::start_at(0);
        Arc::new(DynamoDb::new(config, 42))
    }

    fn db() -> Arc<DynamoDb> {
        db_with(DynamoConfig::default())
    }

    fn write(key: ItemKey, bytes: usize) -> Request {
        Request::Write(Touch::new(key, bytes))
    }

    /// Starts `count` writes of 1 KB to `key` now, each its own task.
    fn burst(
        db: &Arc<DynamoDb>,
        keys: impl Iterator<Item = ItemKey>,
    ) -> Vec<tokio::task::JoinHandle<Result<Served, DynamoError>>> {
        keys.map(|key| {
            let db = Arc::clone(db);
            tokio::spawn(async move { db.request(&write(key, 1_000)).await })
        })
        .collect()
    }

    async fn outcomes(
        tasks: Vec<tokio::task::JoinHandle<Result<Served, DynamoError>>>,
    ) -> Vec<Result<Served, DynamoError>> {
        let mut all = Vec::new();
        for task in tasks {
            all.push(task.await.expect("task"));
        }
        all
    }

    #[tokio::test(start_paused = true)]
    async fn a_read_costs_a_unit_per_started_4_kb_when_strongly_consistent_and_half_when_eventual()
    {
        let db = db();
        let key = ItemKey::code(&tenant("t1"), &code("c1"));
        let strong = db
            .request(&Request::Get(
                Touch::new(key.clone(), 4_097),
                Consistency::Strong,
            ))
            .await;
        let eventual = db
            .request(&Request::Get(
                Touch::new(key.clone(), 4_097),
                Consistency::Eventual,
            ))
            .await;
        let small = db
            .request(&Request::Get(Touch::new(key, 100), Consistency::Eventual))
            .await;
        let halves: Vec<u64> = [strong, eventual, small]
            .into_iter()
            .map(|served| served.expect("served").read_half_units)
            .collect();
        assert_eq!(halves, [4, 2, 1]);
        assert!((db.total().read_units() - 3.5).abs() < f64::EPSILON);
    }

    #[tokio::test(start_paused = true)]
    async fn a_write_costs_a_unit_per_started_kb_and_in_a_transaction_twice() {
        let db = db();
        let t = tenant("t1");
        let plain = db
            .request(&write(ItemKey::code(&t, &code("c1")), 1_025))
            .await;
        let transaction = db
            .request(&Request::TransactWrite(vec![
                Touch::new(ItemKey::code(&t, &code("c2")), 500),
                Touch::new(ItemKey::lease(&t, &code("c2")), 100),
            ]))
            .await;
        assert_eq!(plain.map(|s| s.write_units), Ok(2));
        assert_eq!(transaction.map(|s| s.write_units), Ok(4));
    }

    #[tokio::test(start_paused = true)]
    async fn a_write_that_changes_an_index_entry_pays_for_the_index_write_too() {
        let db = db();
        let t = tenant("t1");
        let c = code("c1");
        let mark = Touch::new(ItemKey::new(keys::tenant(&t), keys::dirty(&c)), 300).with_index(
            keys::GSI1,
            ItemKey::new(
                keys::dirty_bucket(&t, &c),
                keys::dirty_index_sort(0, &t, &c),
            ),
            300,
        );
        assert_eq!(
            db.request(&Request::Write(mark))
                .await
                .map(|s| s.write_units),
            Ok(2)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn every_item_of_a_tenant_shares_its_partition_key() {
        let t = tenant("acme");
        let c = code("c9");
        let pks: Vec<String> = [
            ItemKey::code(&t, &c),
            ItemKey::pushed(&t, &c),
            ItemKey::lease(&t, &c),
            ItemKey::refresh_tally(&t, "2026-12-05"),
            ItemKey::budget(&t, "update_contact_way", 494_000),
        ]
        .into_iter()
        .map(|k| k.pk)
        .collect();
        assert!(pks.iter().all(|pk| pk == "TENANT#acme"), "{pks:?}");
        assert_eq!(
            ItemKey::code(&t, &c).pattern(),
            KeyPattern {
                pk: "TENANT#*".to_owned(),
                sk: "CODE#*".to_owned()
            }
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_partition_serves_1000_write_units_a_second_and_throttles_the_rest_to_the_sdks_retry()
    {
        let db = db();
        let t = tenant("heavy");
        let tasks = burst(
            &db,
            (0..1_001).map(|n| ItemKey::code(&t, &code(&format!("c{n}")))),
        );
        let served = outcomes(tasks).await;
        let failed = served.iter().filter(|s| s.is_err()).count() as u64;
        let total = db.total();
        assert_eq!(
            db.by_second().get(&0).map(|u| u.write_units),
            Some(PARTITION_WRITE_UNITS)
        );
        assert!(total.throttled_attempts >= 1);
        assert_eq!(
            (total.write_units + failed, total.failed_requests),
            (1_001, failed)
        );
        let pattern = KeyPattern {
            pk: "TENANT#*".to_owned(),
            sk: "CODE#*".to_owned(),
        };
        assert_eq!(
            db.throttles_by_pattern().get(&pattern),
            Some(&total.throttled_attempts)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_same_seed_throttles_and_retries_the_same_requests_at_the_same_moments() {
        let mut runs = Vec::new();
        for _ in 0..2 {
            let db = db();
            let t = tenant("heavy");
            let tasks = burst(
                &db,
                (0..3_000).map(|n| ItemKey::code(&t, &code(&format!("c{n}")))),
            );
            let attempts: Vec<Option<u32>> = outcomes(tasks)
                .await
                .into_iter()
                .map(|s| s.ok().map(|s| s.attempts))
                .collect();
            runs.push((attempts, db.by_second()));
        }
        assert!(runs[0].1.len() > 1, "retries spread over seconds");
        assert_eq!(runs[0], runs[1]);
    }

    #[tokio::test(start_paused = true)]
    async fn the_sdk_gives_up_after_its_third_attempt_having_waited_at_most_one_then_two_seconds() {
        let db = db();
        let t = tenant("heavy");
        // Another writer fills the tenant's partition at the start of every second.
        let filler = Arc::clone(&db);
        let filling = tokio::spawn(async move {
            let mut ticks = tokio::time::interval(Duration::from_secs(1));
            loop {
                ticks.tick().await;
                let key = ItemKey::code(&tenant("heavy"), &code("big"));
                let _ = filler
                    .request(&write(key, PARTITION_WRITE_UNITS as usize * 1_024))
                    .await;
            }
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        let start = Instant::now();
        let result = db
            .request(&write(ItemKey::code(&t, &code("victim")), 10))
            .await;
        let waited = start.elapsed();
        filling.abort();
        assert!(
            matches!(result, Err(DynamoError::Throttled { attempts: 3, .. })),
            "{result:?}"
        );
        assert!(waited <= Duration::from_secs(3), "{waited:?}");
        assert_eq!(db.total().failed_requests, 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_hot_partition_key_gets_partitions_of_its_own_after_the_split_delay() {
        let db = db_with(DynamoConfig {
            split_delay: Duration::from_secs(10),
            ..DynamoConfig::default()
        });
        let t = tenant("campaign");
        let mut served_per_second = Vec::new();
        for second in 0..30u64 {
            let before = db.total().write_units;
            let keys = (0..2_000).map(|n| ItemKey::code(&t, &code(&format!("c{second}x{n}"))));
            let db_for_second = Arc::clone(&db);
            let tasks: Vec<_> = keys
                .map(|key| {
                    let db = Arc::clone(&db_for_second);
                    tokio::spawn(async move {
                        let _ = db.request(&write(key, 1_000)).await;
                    })
                })
                .collect();
            tokio::time::sleep(Duration::from_millis(1)).await;
            served_per_second.push(db.total().write_units - before);
            tokio::time::sleep(Duration::from_millis(999)).await;
            drop(tasks);
        }
        assert_eq!(served_per_second[0], PARTITION_WRITE_UNITS);
        assert!(db.splits() >= 1);
        assert!(
            served_per_second[29] > PARTITION_WRITE_UNITS,
            "{served_per_second:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn one_item_never_takes_more_than_a_partitions_write_units_even_after_splits() {
        let db = db_with(DynamoConfig {
            split_delay: Duration::from_secs(2),
            ..DynamoConfig::default()
        });
        let tally = ItemKey::refresh_tally(&tenant("heavy"), "2026-12-05");
        for _ in 0..20 {
            let _tasks = burst(&db, std::iter::repeat_n(tally.clone(), 1_500));
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        assert!(db.splits() >= 2);
        let most = db
            .by_second()
            .values()
            .map(|u| u.write_units)
            .max()
            .unwrap_or(0);
        assert!(most <= PARTITION_WRITE_UNITS, "{most}");
    }

    #[tokio::test(start_paused = true)]
    async fn an_index_partition_that_cannot_take_a_write_throttles_the_tables_write() {
        let db = db();
        // Marks of many tenants (their table partitions are spread) into one index bucket.
        let tasks: Vec<_> = (0..1_100)
            .map(|n| {
                let t = tenant(&format!("t{n}"));
                let c = code("c1");
                let touch = Touch::new(ItemKey::new(keys::tenant(&t), keys::dirty(&c)), 100)
                    .with_index(
                        keys::GSI1,
                        ItemKey::new("DIRTY#0", keys::dirty_index_sort(0, &t, &c)),
                        100,
                    );
                let db = Arc::clone(&db);
                tokio::spawn(async move { db.request(&Request::Write(touch)).await })
            })
            .collect();
        outcomes(tasks).await;
        // Each mark is a table unit and an index unit: the index partition takes 1,000.
        assert_eq!(
            db.by_second().get(&0).map(|u| u.write_units),
            Some(2 * PARTITION_WRITE_UNITS)
        );
        let throttles = db.throttles_by_pattern();
        let index_pattern = KeyPattern {
            pk: "gsi1:DIRTY#*".to_owned(),
            sk: "0000000000000#*".to_owned(),
        };
        assert!(
            throttles.get(&index_pattern).is_some_and(|n| *n >= 100),
            "{throttles:?}"
        );
        assert_eq!(
            throttles.len(),
            1,
            "no table partition throttled: {throttles:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_write_to_an_item_a_running_transaction_holds_is_refused_as_a_conflict() {
        let db = db();
        let t = tenant("t1");
        let record = ItemKey::code(&t, &code("c1"));
        let transaction = Request::TransactWrite(vec![
            Touch::new(ItemKey::lease(&t, &code("c1")), 100),
            Touch::new(record.clone(), 2_000),
        ]);
        let in_transaction = Arc::clone(&db);
        let running = tokio::spawn(async move { in_transaction.request(&transaction).await });
        tokio::task::yield_now().await;
        let landing_visit = db.request(&write(record.clone(), 2_000)).await;
        assert_eq!(landing_visit, Err(DynamoError::TransactionConflict(record)));
        assert!(running.await.expect("task").is_ok());
        assert_eq!(db.total().conflicts, 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_transaction_on_an_item_being_written_is_cancelled() {
        let db = db();
        let record = ItemKey::code(&tenant("t1"), &code("c1"));
        let writer = Arc::clone(&db);
        let visit = write(record.clone(), 2_000);
        let writing = tokio::spawn(async move { writer.request(&visit).await });
        tokio::task::yield_now().await;
        let refresh = db
            .request(&Request::TransactWrite(vec![Touch::new(
                record.clone(),
                2_000,
            )]))
            .await;
        assert_eq!(refresh, Err(DynamoError::TransactionCanceled(record)));
        assert!(writing.await.expect("task").is_ok());
    }

    #[tokio::test(start_paused = true)]
    async fn throttles_are_counted_by_the_second_they_happened_in() {
        let db = db();
        let t = tenant("heavy");
        tokio::time::sleep(Duration::from_secs(5)).await;
        let _tasks = burst(
            &db,
            (0..1_010).map(|n| ItemKey::code(&t, &code(&format!("c{n}")))),
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
        let seconds: Vec<(u64, u64)> = db
            .by_second()
            .into_iter()
            .map(|(second, usage)| (second, usage.throttled_attempts))
            .collect();
        assert_eq!(seconds, [(5, 10)]);
    }
}
