//! DynamoDB's request units and partition limits under virtual time: what each request costs,
//! which partition serves it (decided by the partition key string, exactly as the adapters key
//! items: `adapters::dynamodb::keys`), the per-partition limits per second, the partitions a
//! table's warm throughput gives and how they split when they keep throttling, the account's
//! throughput quota on the table and on each index, index writes that throttle the table's
//! write, transaction conflicts, and the AWS SDK's standard retry of throttled requests.
//! docs/aws-semantics.md §3 and tools/scale/README.md, "The simulated services".
//!
//! This is the metering of a request, not a store: the simulation keeps the items in the
//! domain's in-memory store and asks this model what each request it makes costs and whether
//! DynamoDB would have served it.

use adapters::dynamodb::keys;
use domain::ids::CodeId;
use domain::ids::TenantId;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, HashMap, HashSet};
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
/// The partitions of a new on-demand table (and of a new index): its warm throughput of
/// 12,000 reads and 4,000 writes a second, at a partition's 3,000 and 1,000.
pub const NEW_TABLE_PARTITIONS: u64 = 4;
/// How many times a key's partitions can double by sort key: far beyond one item per
/// partition for any tenant, so the item is what stays the limit.
const MAX_SPLIT_LEVEL: u32 = 24;
/// How many times a shared partition's slot can halve: a table's base partitions times 2^20
/// is far beyond what any run asks, so a split is never refused for depth in practice.
const MAX_SHARED_DEPTH: u32 = 20;

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

    /// A tenant's item with sort key `sk`, under the partition key its sort key gives it
    /// (`keys::home`): a code's items under `TENANT#<t>#CODE#<c>`, a staff member's under
    /// `TENANT#<t>#STAFF#<s>`, a department's under `TENANT#<t>#DEPT#<d>`, the rest under
    /// `TENANT#<t>`, as the adapters key them.
    pub fn of(tenant: &TenantId, sk: impl Into<String>) -> Self {
        let sk = sk.into();
        Self::new(keys::home(tenant, &sk), sk)
    }

    /// A code's record, under the code's home.
    pub fn code(tenant: &TenantId, code: &CodeId) -> Self {
        Self::of(tenant, keys::code(code))
    }

    /// What WeCom last accepted for a code, with the code's lease.
    pub fn pushed(tenant: &TenantId, code: &CodeId) -> Self {
        Self::of(tenant, keys::pushed(code))
    }

    /// One shard of the refresh function's counters for a tenant-day: every refresh batch
    /// writes one, under that shard's home.
    pub fn refresh_tally(tenant: &TenantId, shard: u32, day: &str) -> Self {
        Self::of(tenant, keys::refresh_tally(shard, day))
    }

    /// One shard of a tenant's WeCom budget for one API and UTC hour, under that shard's home.
    pub fn budget(tenant: &TenantId, api: &str, shard: u32, hour: u64) -> Self {
        Self::of(tenant, keys::budget(api, shard, hour))
    }

    /// A paused tenant's pause, beside its profile.
    pub fn pause(tenant: &TenantId) -> Self {
        Self::of(tenant, keys::PAUSE.to_owned())
    }

    /// One shard of an egress address's WeCom budget for one API and UTC hour, under its own
    /// partition key.
    pub fn address_budget(address: &str, api: &str, shard: u32, hour: u64) -> Self {
        Self {
            pk: keys::address_budget_home(address, api, shard),
            sk: keys::budget(api, shard, hour),
        }
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

/// Which kind of key a counter is about: `TENANT#*` / `CODE#*`; or, for a throttle by the
/// account's quota rather than by a partition, the table or index and the units it ran out of
/// (`table quota` / `write units`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KeyPattern {
    pub pk: String,
    pub sk: String,
}

/// What a quota throttle is recorded under, in place of a key's pattern: no item key has a
/// space in it, so it never reads as a hot key's.
const QUOTA_PATTERN_SUFFIX: &str = " quota";

impl KeyPattern {
    /// The pattern a throttle by `space`'s quota is counted under (`table quota`, `gsi1 quota`),
    /// with the units it ran out of (`read units`, `write units`, `read and write units`).
    pub fn quota(space: &str, units: &str) -> Self {
        Self {
            pk: format!("{space}{QUOTA_PATTERN_SUFFIX}"),
            sk: units.to_owned(),
        }
    }

    /// Whether the throttles counted under it were the account's quota, not a partition's.
    pub fn is_quota(&self) -> bool {
        self.pk.ends_with(QUOTA_PATTERN_SUFFIX)
    }
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

/// A table's or an index's warm throughput (DynamoDB Developer Guide, "Understanding DynamoDB
/// warm throughput"): the reads and writes a second it serves at once when they are spread
/// evenly over its partitions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WarmThroughput {
    pub read_units_per_second: u64,
    pub write_units_per_second: u64,
}

impl WarmThroughput {
    /// A new on-demand table's, and a new index's: 12,000 reads and 4,000 writes a second.
    pub const NEW_TABLE: Self = Self {
        read_units_per_second: 12_000,
        write_units_per_second: 4_000,
    };

    /// The partitions that serve it: enough for both figures at a partition's 3,000 reads and
    /// 1,000 writes a second, and never fewer than a new table's 4.
    pub fn partitions(&self) -> u64 {
        let reads = self.read_units_per_second.div_ceil(PARTITION_READ_UNITS);
        let writes = self.write_units_per_second.div_ceil(PARTITION_WRITE_UNITS);
        NEW_TABLE_PARTITIONS.max(reads).max(writes)
    }
}

/// The account's throughput quota on an on-demand table, and on each of its global secondary
/// indexes on its own ("Quotas in Amazon DynamoDB", "DynamoDB maximum throughput for on-demand
/// tables"): the most request units it serves in a second however many partitions it has.
/// Past it a request is throttled like a partition throttle (`ThrottlingException`, which the
/// SDK retries). Adjustable on request, so a warm throughput above it needs it raised.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quota {
    pub read_units_per_second: u64,
    pub write_units_per_second: u64,
}

impl Quota {
    /// The default for every account: 40,000 read and 40,000 write request units a second, per
    /// table and per index.
    pub const ON_DEMAND_DEFAULT: Self = Self {
        read_units_per_second: 40_000,
        write_units_per_second: 40_000,
    };

    /// Which of its units a second that has already served `served` and is now asked `asked`
    /// (units as a `Peak` counts them: reads in halves) would exceed: `None` while both fit.
    fn exceeded(&self, served: Peak, asked: Peak) -> Option<&'static str> {
        let reads = served.read_half_units + asked.read_half_units
            > self.read_units_per_second.saturating_mul(2);
        let writes = served.write_units + asked.write_units > self.write_units_per_second;
        match (reads, writes) {
            (true, true) => Some("read and write units"),
            (true, false) => Some("read units"),
            (false, true) => Some("write units"),
            (false, false) => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DynamoConfig {
    /// The table's warm throughput, which gives its partitions before any split. The default
    /// is a new on-demand table's (the bench's stack); the stretch takes the profile's.
    pub table: WarmThroughput,
    /// Each global secondary index's (`gsi1`, `gsi2`), which has partitions of its own.
    pub index: WarmThroughput,
    /// The account's quota on the table, and on each index on its own (an index's traffic does
    /// not count against the table's, nor one index's against another's).
    pub table_quota: Quota,
    pub index_quota: Quota,
    /// How long a partition must throttle before it splits: a shared partition in two, or its
    /// hot key onto partitions of its own (and, each further delay, twice as many by sort key).
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
            table: WarmThroughput::NEW_TABLE,
            index: WarmThroughput::NEW_TABLE,
            table_quota: Quota::ON_DEMAND_DEFAULT,
            index_quota: Quota::ON_DEMAND_DEFAULT,
            split_delay: Duration::from_secs(5 * 60),
            retry: RetryPolicy::default(),
            request_latency: Duration::from_millis(5),
            transaction_latency: Duration::from_millis(20),
        }
    }
}

impl DynamoConfig {
    /// The table's (`"table"`) or an index's partitions before any split.
    pub fn base_partitions(&self, space: &str) -> u64 {
        if space == TABLE {
            self.table.partitions()
        } else {
            self.index.partitions()
        }
    }

    /// The table's (`"table"`) or an index's quota.
    pub fn quota(&self, space: &str) -> Quota {
        if space == TABLE {
            self.table_quota
        } else {
            self.index_quota
        }
    }
}

/// Counts for one second (or a whole run).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub read_half_units: u64,
    pub write_units: u64,
    /// Attempts refused for a partition's limit or the account's quota (each retried one
    /// counts).
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

/// The busiest second of the table or of one index: what it served, in read and write units.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Peak {
    pub read_half_units: u64,
    pub write_units: u64,
}

impl Peak {
    pub fn read_units(&self) -> f64 {
        #[allow(clippy::cast_precision_loss)]
        let halves = self.read_half_units as f64;
        halves / 2.0
    }
}

/// How many partitions split: shared ones in two, and hot keys onto partitions of their own
/// (each further doubling of a key's partitions counts once more).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Splits {
    pub shared: u64,
    pub keys: u64,
}

impl Splits {
    pub fn total(&self) -> u64 {
        self.shared + self.keys
    }
}

/// A partition: of the table or an index, shared by hash of the partition key (at the depth
/// its slot has split to), or one of a hot key's own after splits.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum PartitionId {
    Shared {
        space: String,
        depth: u32,
        slot: u64,
    },
    Split {
        space: String,
        pk: String,
        level: u32,
        slot: u64,
    },
}

impl PartitionId {
    fn space(&self) -> &str {
        match self {
            Self::Shared { space, .. } | Self::Split { space, .. } => space,
        }
    }
}

#[derive(Default)]
struct Partition {
    second: u64,
    read_half_units: u64,
    write_units: u64,
    hot_since: Option<Instant>,
    last_throttled_second: Option<u64>,
    /// What each partition key (by its hash) asked of a shared partition this second, served
    /// or refused, in load (`load`); and all of it. Tells a hot key from a hot partition.
    asked_by_key: HashMap<u64, u64>,
    asked: u64,
}

/// A request's weight on a partition, as a share of what it serves in a second: a write unit
/// is a thousandth of it and so are six read halves (3,000 read units), so both count alike.
fn load(read_half_units: u64, write_units: u64) -> u64 {
    write_units * 6 + read_half_units
}

impl Partition {
    /// A partition that starts with what `from` served this second: a split gives no extra
    /// units in the second it happens.
    fn continuing(from: &Partition) -> Self {
        Self {
            second: from.second,
            read_half_units: from.read_half_units,
            write_units: from.write_units,
            ..Self::default()
        }
    }

    fn roll(&mut self, second: u64) {
        if self.second != second {
            self.second = second;
            self.read_half_units = 0;
            self.write_units = 0;
            self.asked_by_key.clear();
            self.asked = 0;
        }
    }

    fn ask(&mut self, pk_hash: u64, load: u64) {
        *self.asked_by_key.entry(pk_hash).or_default() += load;
        self.asked += load;
    }

    /// Whether the key asked more than half of what the partition was asked this second.
    fn dominated_by(&self, pk_hash: u64) -> bool {
        self.asked_by_key
            .get(&pk_hash)
            .is_some_and(|&by_key| by_key * 2 > self.asked)
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

/// The units one request asks of one item's partition.
struct Demand {
    space: String,
    key: ItemKey,
    pk_hash: u64,
    read_half_units: u64,
    write_units: u64,
}

/// The table's or an index's busiest second so far, and the second being counted.
#[derive(Default)]
struct SpaceSeconds {
    second: u64,
    now: Peak,
    peak: Peak,
}

impl SpaceSeconds {
    /// What the space has served in `second` so far.
    fn served_in(&self, second: u64) -> Peak {
        if self.second == second {
            self.now
        } else {
            Peak::default()
        }
    }
}

struct State {
    partitions: HashMap<PartitionId, Partition>,
    /// Shared partitions split in two, per space, as (depth, slot): a key's slot at depth `d`
    /// is `hash(pk) % (base << d)`, and a key walks down while its slot is split.
    split_shared: HashMap<String, HashSet<(u32, u64)>>,
    /// Keys split for heat, per space: how many doublings of their own partitions.
    split_levels: HashMap<String, HashMap<String, u32>>,
    /// What the partition a key was split from had served in the second of the split: the
    /// key's new partitions start from it, so a split gives no extra units that second.
    split_from: HashMap<String, HashMap<String, Partition>>,
    /// Items being written until the instant, and whether by a transaction.
    busy: HashMap<ItemKey, (Instant, bool)>,
    total: Usage,
    by_second: BTreeMap<u64, Usage>,
    by_space: HashMap<String, SpaceSeconds>,
    throttles_by_pattern: BTreeMap<KeyPattern, u64>,
    /// Units served per space and kind of sort key (`table STAFF#*`), for where they went.
    served_by_kind: HashMap<String, Peak>,
    splits: Splits,
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

/// The table's space; an index's is its name.
pub const TABLE: &str = "table";

impl DynamoDb {
    pub fn new(config: DynamoConfig, seed: u64) -> Self {
        Self {
            config,
            state: Mutex::new(State {
                partitions: HashMap::new(),
                split_shared: HashMap::new(),
                split_levels: HashMap::new(),
                split_from: HashMap::new(),
                busy: HashMap::new(),
                total: Usage::default(),
                by_second: BTreeMap::new(),
                by_space: HashMap::new(),
                throttles_by_pattern: BTreeMap::new(),
                served_by_kind: HashMap::new(),
                splits: Splits::default(),
                rng: StdRng::seed_from_u64(seed),
            }),
        }
    }

    pub fn config(&self) -> &DynamoConfig {
        &self.config
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Serves a request as DynamoDB and the SDK would: throttled attempts wait the SDK's
    /// backoff and try again; a request is billed once, when served.
    pub async fn request(&self, request: &Request) -> Result<Served, DynamoError> {
        let demands = Self::demands(request);
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

    /// The units a request asks of each item's partition (an index write's units are asked of
    /// the index's partition, and its throttle is the table write's). Where each lands is
    /// decided at every attempt: a split in between moves it.
    fn demands(request: &Request) -> Vec<Demand> {
        let demand = |space: &str, key: &ItemKey, read_half_units, write_units| Demand {
            space: space.to_owned(),
            key: key.clone(),
            pk_hash: fnv1a(&key.pk),
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

    /// The partition that serves `demand` now: its key's own (by sort key) when the key was
    /// split for heat, else the shared partition its hash reaches, walking down every level
    /// its slot has split at.
    fn partition_of(&self, state: &State, demand: &Demand) -> PartitionId {
        let space = demand.space.as_str();
        let level = state
            .split_levels
            .get(space)
            .and_then(|keys| keys.get(&demand.key.pk));
        if let Some(&level) = level {
            return PartitionId::Split {
                space: space.to_owned(),
                pk: demand.key.pk.clone(),
                level,
                slot: fnv1a(&demand.key.sk) % (1u64 << level),
            };
        }
        let base = self.config.base_partitions(space).max(1);
        let (mut depth, mut slot) = (0, demand.pk_hash % base);
        if let Some(split) = state.split_shared.get(space) {
            while split.contains(&(depth, slot)) {
                depth += 1;
                slot = demand.pk_hash % (base << depth);
            }
        }
        PartitionId::Shared {
            space: space.to_owned(),
            depth,
            slot,
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
        // The quota is the request router's, before any partition: a request it refuses is not
        // asked of a partition, so it heats none and splits none.
        if let Some(pattern) = self.over_quota(state, demands, second) {
            Self::count_throttle(state, &pattern, second);
            return Ok(Some(pattern));
        }
        let placed: Vec<PartitionId> = demands
            .iter()
            .map(|d| self.partition_of(state, d))
            .collect();
        // Every attempt asks, served or not: heat is what is asked.
        for (partition, demand) in placed.iter().zip(demands) {
            let p = state
                .partitions
                .entry(partition.clone())
                .or_insert_with(|| match partition {
                    PartitionId::Split { space, pk, .. } => state
                        .split_from
                        .get(space)
                        .and_then(|keys| keys.get(pk))
                        .map(Partition::continuing)
                        .unwrap_or_default(),
                    PartitionId::Shared { .. } => Partition::default(),
                });
            p.roll(second);
            if matches!(partition, PartitionId::Shared { .. }) {
                p.ask(
                    demand.pk_hash,
                    load(demand.read_half_units, demand.write_units),
                );
            }
        }
        let mut asked: HashMap<&PartitionId, (u64, u64)> = HashMap::new();
        for (partition, demand) in placed.iter().zip(demands) {
            let entry = asked.entry(partition).or_default();
            entry.0 += demand.read_half_units;
            entry.1 += demand.write_units;
        }
        let throttled = placed.iter().zip(demands).find(|(partition, _)| {
            let (read, write) = asked[partition];
            state
                .partitions
                .get(*partition)
                .is_some_and(|p| !p.fits(read, write))
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
        for demand in demands {
            if !state.by_space.contains_key(&demand.space) {
                state
                    .by_space
                    .insert(demand.space.clone(), SpaceSeconds::default());
            }
            let Some(space) = state.by_space.get_mut(&demand.space) else {
                continue;
            };
            if space.second != second {
                *space = SpaceSeconds {
                    second,
                    now: Peak::default(),
                    peak: space.peak,
                };
            }
            space.now.read_half_units += demand.read_half_units;
            space.now.write_units += demand.write_units;
            space.peak.read_half_units = space.peak.read_half_units.max(space.now.read_half_units);
            space.peak.write_units = space.peak.write_units.max(space.now.write_units);
            let kind = format!("{} {}", demand.space, pattern_of(&demand.key.sk));
            let served = state.served_by_kind.entry(kind).or_default();
            served.read_half_units += demand.read_half_units;
            served.write_units += demand.write_units;
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

    /// The quota pattern of the first space (in the order the request asks them: the table
    /// before its indexes) that serving `demands` in `second` would take past its quota.
    fn over_quota(&self, state: &State, demands: &[Demand], second: u64) -> Option<KeyPattern> {
        let mut asked: Vec<(&str, Peak)> = Vec::new();
        for demand in demands {
            let space = demand.space.as_str();
            let at = match asked.iter().position(|(s, _)| *s == space) {
                Some(at) => at,
                None => {
                    asked.push((space, Peak::default()));
                    asked.len() - 1
                }
            };
            asked[at].1.read_half_units += demand.read_half_units;
            asked[at].1.write_units += demand.write_units;
        }
        asked.into_iter().find_map(|(space, asked)| {
            let served = state
                .by_space
                .get(space)
                .map(|seconds| seconds.served_in(second))
                .unwrap_or_default();
            self.config
                .quota(space)
                .exceeded(served, asked)
                .map(|units| KeyPattern::quota(space, units))
        })
    }

    /// Counts a throttled attempt, in all, in its second and under its pattern.
    fn count_throttle(state: &mut State, pattern: &KeyPattern, second: u64) {
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
        let space = partition.space().to_owned();
        if space != TABLE {
            pattern.pk = format!("{space}:{}", pattern.pk);
        }
        Self::count_throttle(state, &pattern, second);
        let Some(p) = state.partitions.get_mut(partition) else {
            return pattern;
        };
        if !p.throttled(second, now, self.config.split_delay) {
            return pattern;
        }
        p.hot_since = None;
        p.last_throttled_second = None;
        // A shared partition that many keys keep hot splits in two; one whose heat is mostly
        // one key (it asked more than half) would only move that key's heat to one of the
        // halves, so the key gets partitions of its own instead, as a split for heat does.
        match partition {
            PartitionId::Shared { depth, slot, .. }
                if *depth < MAX_SHARED_DEPTH && !p.dominated_by(demand.pk_hash) =>
            {
                self.split_shared(state, &space, *depth, *slot);
            }
            _ => Self::split_key(state, partition, &space, &demand.key.pk),
        }
        pattern
    }

    /// Splits the shared partition at (`depth`, `slot`) of `space` in two by hash: its keys go
    /// to slots `slot` and `slot + base × 2^depth` at the next depth, each starting from what
    /// the partition had served this second.
    fn split_shared(&self, state: &mut State, space: &str, depth: u32, slot: u64) {
        let base = self.config.base_partitions(space).max(1);
        let parent = PartitionId::Shared {
            space: space.to_owned(),
            depth,
            slot,
        };
        let served = state
            .partitions
            .remove(&parent)
            .map(|p| Partition::continuing(&p))
            .unwrap_or_default();
        for child in [slot, slot + (base << depth)] {
            let id = PartitionId::Shared {
                space: space.to_owned(),
                depth: depth + 1,
                slot: child,
            };
            state.partitions.insert(id, Partition::continuing(&served));
        }
        state
            .split_shared
            .entry(space.to_owned())
            .or_default()
            .insert((depth, slot));
        state.splits.shared += 1;
    }

    /// The hot key `pk` gets partitions of its own (by a hash of the sort key), twice as many
    /// at each further split; its new partitions start from what `partition` served this
    /// second.
    fn split_key(state: &mut State, partition: &PartitionId, space: &str, pk: &str) {
        let levels = state.split_levels.entry(space.to_owned()).or_default();
        levels
            .entry(pk.to_owned())
            .and_modify(|level| *level = (*level + 1).min(MAX_SPLIT_LEVEL))
            .or_insert(0);
        state.splits.keys += 1;
        if let Some(p) = state.partitions.get(partition) {
            let served = Partition::continuing(p);
            state
                .split_from
                .entry(space.to_owned())
                .or_default()
                .insert(pk.to_owned(), served);
        }
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

    /// The busiest second's units served, for the table (`"table"`) and each index by name:
    /// what its warm throughput has to cover for the day to be served without a split.
    pub fn peaks(&self) -> BTreeMap<String, Peak> {
        self.lock()
            .by_space
            .iter()
            .map(|(space, seconds)| (space.clone(), seconds.peak))
            .collect()
    }

    /// Throttled attempts per key pattern (`TENANT#*`/`CODE#*`; an index's as `gsi1:DIRTY#*`;
    /// the account's quota as `table quota`/`write units`, an index's as `gsi1 quota`).
    pub fn throttles_by_pattern(&self) -> BTreeMap<KeyPattern, u64> {
        self.lock().throttles_by_pattern.clone()
    }

    /// The units served per space and kind of sort key (`table STAFF#*`, `gsi1 DUE#*`), the
    /// whole run's.
    pub fn served_by_kind(&self) -> BTreeMap<String, Peak> {
        self.lock()
            .served_by_kind
            .iter()
            .map(|(kind, units)| (kind.clone(), *units))
            .collect()
    }

    /// How many shared partitions split in two, and how many times a hot key got (more)
    /// partitions of its own.
    pub fn splits(&self) -> Splits {
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

    /// The `n`th push-log entry of one code: items of one partition key (the code's home),
    /// each its own sort key.
    fn one_home(t: &TenantId, n: u64) -> ItemKey {
        ItemKey::of(t, keys::push_log(&code("hot"), n, "n"))
    }

    /// Distinct partition keys (each a code's home) that a table of `partitions` puts on its
    /// shared partition `slot`.
    fn homes_on_slot(partitions: u64, slot: u64, count: usize) -> Vec<ItemKey> {
        let t = tenant("campaign");
        (0..)
            .map(|n| ItemKey::code(&t, &code(&format!("c{n}"))))
            .filter(|key| fnv1a(&key.pk) % partitions == slot)
            .take(count)
            .collect()
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
                Touch::new(ItemKey::pushed(&t, &code("c2")), 100),
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
        let mark = Touch::new(ItemKey::of(&t, keys::dirty(&c)), 300).with_index(
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

    #[test]
    fn each_item_of_a_tenant_is_metered_under_the_partition_key_its_sort_key_gives_it() {
        let t = tenant("acme");
        let c = code("c9");
        let code_items: Vec<String> = [
            ItemKey::code(&t, &c),
            ItemKey::pushed(&t, &c),
            ItemKey::of(&t, keys::dirty(&c)),
        ]
        .into_iter()
        .map(|k| k.pk)
        .collect();
        assert!(
            code_items.iter().all(|pk| pk == "TENANT#acme#CODE#c9"),
            "{code_items:?}"
        );
        let s = domain::ids::StaffId::parse("s1").expect("staff id");
        assert_eq!(ItemKey::of(&t, keys::staff(&s)).pk, "TENANT#acme#STAFF#s1");
        assert_eq!(ItemKey::of(&t, keys::PROFILE).pk, "TENANT#acme");
        assert_eq!(
            ItemKey::refresh_tally(&t, 3, "2026-12-05").pk,
            "TENANT#acme#STATS#REFRESH#3"
        );
        assert_eq!(
            ItemKey::budget(&t, "update_contact_way", 7, 494_000).pk,
            "TENANT#acme#BUDGET#update_contact_way#7"
        );
        assert_eq!(
            ItemKey::code(&t, &c).pattern(),
            KeyPattern {
                pk: "TENANT#*".to_owned(),
                sk: "CODE#*".to_owned()
            }
        );
    }

    #[test]
    fn a_tables_partitions_are_its_warm_throughput_at_3000_reads_and_1000_writes_each_never_fewer_than_four(
    ) {
        let warm = |read_units_per_second, write_units_per_second| WarmThroughput {
            read_units_per_second,
            write_units_per_second,
        };
        assert_eq!(WarmThroughput::NEW_TABLE.partitions(), 4);
        assert_eq!(warm(30_000, 10_000).partitions(), 10);
        assert_eq!(warm(12_000, 45_500).partitions(), 46);
        assert_eq!(warm(300_000, 1_000).partitions(), 100);
        assert_eq!(warm(1_000, 1_000).partitions(), 4);
        let config = DynamoConfig {
            index: warm(90_000, 4_000),
            ..DynamoConfig::default()
        };
        assert_eq!(
            (
                config.base_partitions(TABLE),
                config.base_partitions(keys::GSI1)
            ),
            (4, 30)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_partition_serves_1000_write_units_a_second_and_throttles_the_rest_to_the_sdks_retry()
    {
        let db = db();
        let t = tenant("heavy");
        let tasks = burst(&db, (0..1_001).map(|n| one_home(&t, n)));
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
            sk: "PUSHLOG#*".to_owned(),
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
            let tasks = burst(&db, (0..3_000).map(|n| one_home(&t, n)));
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
        // Another writer fills the code's partition at the start of every second.
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
            .request(&write(ItemKey::pushed(&t, &code("big")), 10))
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

    /// Sends `keys` as 1 KB writes at the start of each of `seconds` seconds and answers what
    /// was served in each second's first millisecond (the first attempts: retries come later).
    async fn served_at_each_second(
        db: &Arc<DynamoDb>,
        seconds: u64,
        keys: impl Fn(u64) -> Vec<ItemKey>,
    ) -> Vec<u64> {
        let mut served_per_second = Vec::new();
        for second in 0..seconds {
            let before = db.total().write_units;
            let tasks = burst(db, keys(second).into_iter());
            tokio::time::sleep(Duration::from_millis(1)).await;
            served_per_second.push(db.total().write_units - before);
            tokio::time::sleep(Duration::from_millis(999)).await;
            drop(tasks);
        }
        served_per_second
    }

    #[tokio::test(start_paused = true)]
    async fn one_hot_key_on_a_shared_partition_still_ends_on_partitions_of_its_own() {
        let db = db_with(DynamoConfig {
            split_delay: Duration::from_secs(10),
            ..DynamoConfig::default()
        });
        let t = tenant("campaign");
        let hot_slot = fnv1a(&one_home(&t, 0).pk) % NEW_TABLE_PARTITIONS;
        // A few other keys share the hot key's partition: it is alone-ish, not alone.
        let neighbours = homes_on_slot(NEW_TABLE_PARTITIONS, hot_slot, 100);
        let served = served_at_each_second(&db, 30, |second| {
            let mut keys: Vec<ItemKey> = (0..2_000)
                .map(|n| one_home(&t, second * 10_000 + n))
                .collect();
            keys.extend(neighbours.iter().cloned());
            keys
        })
        .await;
        assert_eq!(served[0], PARTITION_WRITE_UNITS);
        let splits = db.splits();
        assert!(splits.keys >= 1, "{splits:?}");
        assert_eq!(splits.shared, 0, "the partition's heat was one key's");
        assert!(served[29] > 2 * PARTITION_WRITE_UNITS, "{served:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_shared_partition_that_many_keys_keep_throttling_splits_in_two_after_the_split_delay()
    {
        let db = db_with(DynamoConfig {
            split_delay: Duration::from_secs(10),
            ..DynamoConfig::default()
        });
        // 1,500 keys a second, one write each, all on shared partition 0 of a new table.
        let keys = homes_on_slot(NEW_TABLE_PARTITIONS, 0, 1_500);
        let served = served_at_each_second(&db, 30, |_| keys.clone()).await;
        assert_eq!(served[0], PARTITION_WRITE_UNITS);
        let splits = db.splits();
        assert_eq!(splits.keys, 0, "no key was hot on its own: {splits:?}");
        assert_eq!(splits.shared, 1, "{splits:?}");
        // Its two halves (slots 0 and 4 of 8) serve all 1,500 once the retries are through.
        assert_eq!(served[29], 1_500, "{served:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn writes_spread_over_many_keys_beyond_4000_a_second_are_served_when_warm_throughput_covers_them(
    ) {
        let t = tenant("campaign");
        let spread = |second: u64| -> Vec<ItemKey> {
            (0..12_000)
                .map(|n| ItemKey::code(&t, &code(&format!("c{second}x{n}"))))
                .collect()
        };
        let warm = db_with(DynamoConfig {
            table: WarmThroughput {
                read_units_per_second: 12_000,
                write_units_per_second: 20_000,
            },
            ..DynamoConfig::default()
        });
        let served = served_at_each_second(&warm, 3, spread).await;
        assert_eq!(served, [12_000; 3]);
        assert_eq!(warm.total().throttled_attempts, 0);
        // A new table's four partitions take 4,000 of them.
        let new = db();
        let served = served_at_each_second(&new, 1, spread).await;
        assert!(served[0] <= 4 * PARTITION_WRITE_UNITS, "{served:?}");
        assert!(new.total().throttled_attempts > 0);
    }

    #[tokio::test(start_paused = true)]
    async fn the_busiest_second_of_the_table_and_of_each_index_is_kept() {
        let db = db();
        let t = tenant("t1");
        for (n, count) in [3_u64, 7, 2].into_iter().enumerate() {
            let keys = (0..count).map(|i| one_home(&t, n as u64 * 100 + i));
            outcomes(burst(&db, keys)).await;
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        let c = code("c1");
        let marked = Touch::new(ItemKey::of(&t, keys::dirty(&c)), 100).with_index(
            keys::GSI1,
            ItemKey::new("DIRTY#0", keys::dirty_index_sort(0, &t, &c)),
            100,
        );
        db.request(&Request::Write(marked)).await.expect("served");
        db.request(&Request::Get(
            Touch::new(one_home(&t, 0), 100),
            Consistency::Strong,
        ))
        .await
        .expect("served");
        let peaks = db.peaks();
        assert_eq!(
            peaks.get(TABLE),
            Some(&Peak {
                read_half_units: 2,
                write_units: 7
            })
        );
        assert_eq!(
            peaks.get(keys::GSI1),
            Some(&Peak {
                read_half_units: 0,
                write_units: 1
            })
        );
    }

    #[tokio::test(start_paused = true)]
    async fn one_item_never_takes_more_than_a_partitions_write_units_even_after_splits() {
        let db = db_with(DynamoConfig {
            split_delay: Duration::from_secs(2),
            ..DynamoConfig::default()
        });
        let tally = ItemKey::refresh_tally(&tenant("heavy"), 0, "2026-12-05");
        for _ in 0..20 {
            let _tasks = burst(&db, std::iter::repeat_n(tally.clone(), 1_500));
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        assert!(db.splits().keys >= 2);
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
                let touch = Touch::new(ItemKey::of(&t, keys::dirty(&c)), 100).with_index(
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
            Touch::new(ItemKey::pushed(&t, &code("c1")), 100),
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

    /// A table with room for any spread load (40 partitions of the table and of each index),
    /// and `table_quota` and `index_quota` as given.
    fn db_with_quotas(table_quota: Quota, index_quota: Quota) -> Arc<DynamoDb> {
        let roomy = WarmThroughput {
            read_units_per_second: 120_000,
            write_units_per_second: 40_000,
        };
        db_with(DynamoConfig {
            table: roomy,
            index: roomy,
            table_quota,
            index_quota,
            ..DynamoConfig::default()
        })
    }

    fn writes_quota(write_units_per_second: u64) -> Quota {
        Quota {
            write_units_per_second,
            ..Quota::ON_DEMAND_DEFAULT
        }
    }

    /// `count` distinct codes' records, each under its own partition key: load spread evenly.
    fn spread(label: &str, count: u64) -> Vec<ItemKey> {
        let t = tenant("campaign");
        (0..count)
            .map(|n| ItemKey::code(&t, &code(&format!("{label}x{n}"))))
            .collect()
    }

    #[tokio::test(start_paused = true)]
    async fn a_second_asking_more_than_the_tables_quota_is_throttled_at_it_and_served_again_the_next_second(
    ) {
        let db = db_with_quotas(writes_quota(2_000), Quota::ON_DEMAND_DEFAULT);
        let served =
            served_at_each_second(&db, 2, |second| spread(&format!("s{second}"), 3_000)).await;
        assert_eq!(served[0], 2_000);
        // Each second serves the quota again, and no more, whatever the retries add.
        let by_second = db.by_second();
        let writes: Vec<Option<u64>> = [0, 1]
            .iter()
            .map(|second| by_second.get(second).map(|u| u.write_units))
            .collect();
        assert_eq!(writes, [Some(2_000), Some(2_000)]);
        assert!(by_second
            .get(&0)
            .is_some_and(|u| u.throttled_attempts >= 1_000));
        let throttles = db.throttles_by_pattern();
        let quota = KeyPattern::quota(TABLE, "write units");
        assert_eq!(
            throttles.keys().collect::<Vec<_>>(),
            [&quota],
            "no partition throttled: {throttles:?}"
        );
        assert_eq!(throttles[&quota], db.total().throttled_attempts);
        assert!(quota.is_quota());
        assert!(!ItemKey::code(&tenant("t1"), &code("c1"))
            .pattern()
            .is_quota());
    }

    #[tokio::test(start_paused = true)]
    async fn the_quota_counts_read_units_an_eventually_consistent_read_a_half_a_strong_one_a_whole()
    {
        let quota = Quota {
            read_units_per_second: 100,
            ..Quota::ON_DEMAND_DEFAULT
        };
        let mut served = Vec::new();
        for consistency in [Consistency::Eventual, Consistency::Strong] {
            let db = db_with_quotas(quota, Quota::ON_DEMAND_DEFAULT);
            let tasks: Vec<_> = spread("c", 300)
                .into_iter()
                .map(|key| {
                    let db = Arc::clone(&db);
                    let read = Request::Get(Touch::new(key, 100), consistency);
                    tokio::spawn(async move { db.request(&read).await })
                })
                .collect();
            tokio::time::sleep(Duration::from_millis(1)).await;
            let throttled = db.throttles_by_pattern().into_keys().collect::<Vec<_>>();
            served.push((db.total().read_half_units, throttled));
            drop(tasks);
        }
        // 100 units a second: 200 eventually consistent reads of a half each, 100 strong ones.
        let quota_pattern = vec![KeyPattern::quota(TABLE, "read units")];
        assert_eq!(served, [(200, quota_pattern.clone()), (200, quota_pattern)]);
    }

    #[tokio::test(start_paused = true)]
    async fn each_index_has_a_quota_of_its_own_apart_from_the_tables_and_the_other_indexes() {
        let db = db_with_quotas(Quota::ON_DEMAND_DEFAULT, writes_quota(500));
        // 800 writes a second into each index, each entry under its own index key.
        let tasks: Vec<_> = [keys::GSI1, keys::GSI2]
            .into_iter()
            .flat_map(|index| {
                spread(index, 800)
                    .into_iter()
                    .enumerate()
                    .map(move |(n, key)| {
                        let entry = ItemKey::new(format!("TENANT#{index}#{n}"), "CODE#x");
                        Touch::new(key, 100).with_index(index, entry, 100)
                    })
            })
            .map(|touch| {
                let db = Arc::clone(&db);
                tokio::spawn(async move { db.request(&Request::Write(touch)).await })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(1)).await;
        let writes: Vec<(String, u64)> = db
            .peaks()
            .into_iter()
            .map(|(space, peak)| (space, peak.write_units))
            .collect();
        // Each index takes its 500; the table serves both indexes' writes, 1,000, past 500.
        assert_eq!(
            writes,
            [
                (keys::GSI1.to_owned(), 500),
                (keys::GSI2.to_owned(), 500),
                (TABLE.to_owned(), 1_000)
            ]
        );
        let throttled: Vec<KeyPattern> = db.throttles_by_pattern().into_keys().collect();
        assert_eq!(
            throttled,
            [
                KeyPattern::quota(keys::GSI1, "write units"),
                KeyPattern::quota(keys::GSI2, "write units")
            ]
        );
        drop(tasks);
    }

    #[tokio::test(start_paused = true)]
    async fn a_throttle_for_the_quota_never_splits_a_partition() {
        let config = |table_quota| DynamoConfig {
            split_delay: Duration::from_secs(2),
            table_quota,
            ..DynamoConfig::default()
        };
        let t = tenant("heavy");
        let mut splits = Vec::new();
        // 1,500 writes a second on one partition key: past its partition's 1,000 (which splits
        // it within the split delay), or past a quota of 500 (which it never reaches).
        for quota in [Quota::ON_DEMAND_DEFAULT, writes_quota(500)] {
            let db = db_with(config(quota));
            for second in 0..20 {
                let _tasks = burst(&db, (0..1_500).map(|n| one_home(&t, second * 10_000 + n)));
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            splits.push((db.splits().total(), db.throttles_by_pattern()));
        }
        assert!(splits[0].0 >= 1, "the load splits a partition: {splits:?}");
        assert_eq!(splits[1].0, 0, "{:?}", splits[1].1);
        assert_eq!(
            splits[1].1.keys().collect::<Vec<_>>(),
            [&KeyPattern::quota(TABLE, "write units")]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn throttles_are_counted_by_the_second_they_happened_in() {
        let db = db();
        let t = tenant("heavy");
        tokio::time::sleep(Duration::from_secs(5)).await;
        let _tasks = burst(&db, (0..1_010).map(|n| one_home(&t, n)));
        tokio::time::sleep(Duration::from_millis(1)).await;
        let seconds: Vec<(u64, u64)> = db
            .by_second()
            .into_iter()
            .map(|(second, usage)| (second, usage.throttled_attempts))
            .collect();
        assert_eq!(seconds, [(5, 10)]);
    }
}
