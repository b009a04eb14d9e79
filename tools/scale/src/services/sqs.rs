//! SQS queues under virtual time: FIFO queues (message groups, one batch in flight per group,
//! the 120,000-message look-ahead for available groups, deduplication) and standard queues
//! (no groups, at-least-once), with visibility timeouts, queue-level delays, `maxReceiveCount`
//! and dead-letter queues, and the requests SQS bills. Where each behaviour comes from:
//! docs/aws-semantics.md §1 and tools/scale/README.md, "The simulated services".

use arcstr::ArcStr;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, HashMap, VecDeque};
use std::ops::Bound;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::Notify;
use tokio::time::{Duration, Instant};

/// A FIFO queue looks for available message groups among this many messages from its head.
pub const FIFO_LOOKAHEAD: usize = 120_000;
/// One batch call (send, receive, delete, change visibility) carries at most this many messages.
pub const MAX_BATCH: usize = 10;
/// Each started 64 KB of a request's payload is billed as one request.
pub const BILLED_CHUNK_BYTES: usize = 64 * 1024;
/// A FIFO queue drops a send whose deduplication id it accepted this long ago or less.
pub const DEDUPLICATION_WINDOW: Duration = Duration::from_secs(5 * 60);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueKind {
    Fifo,
    Standard,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redrive {
    pub dead_letter_queue: String,
    pub max_receive_count: u32,
}

#[derive(Debug, Clone)]
pub struct QueueConfig {
    pub name: String,
    pub kind: QueueKind,
    pub visibility_timeout: Duration,
    /// The queue's `DelaySeconds` (a FIFO queue has no per-message delay).
    pub delay: Duration,
    pub redrive: Option<Redrive>,
    /// Standard queues: out of a million receives of a message, how many also leave a copy
    /// that a later receive delivers again (at-least-once delivery). Ignored on FIFO.
    pub duplicates_per_million: u32,
}

impl QueueConfig {
    pub fn fifo(name: &str, visibility_timeout: Duration) -> Self {
        Self {
            name: name.to_owned(),
            kind: QueueKind::Fifo,
            visibility_timeout,
            delay: Duration::ZERO,
            redrive: None,
            duplicates_per_million: 0,
        }
    }

    pub fn standard(name: &str, visibility_timeout: Duration) -> Self {
        Self {
            kind: QueueKind::Standard,
            ..Self::fifo(name, visibility_timeout)
        }
    }

    pub fn with_delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    pub fn with_dead_letters(mut self, queue: &str, max_receive_count: u32) -> Self {
        self.redrive = Some(Redrive {
            dead_letter_queue: queue.to_owned(),
            max_receive_count,
        });
        self
    }

    pub fn with_duplicates_per_million(mut self, duplicates: u32) -> Self {
        self.duplicates_per_million = duplicates;
        self
    }
}

/// A message to send. `group` is the FIFO `MessageGroupId` (ignored on a standard queue).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outgoing {
    pub group: String,
    pub body: String,
    pub deduplication_id: Option<String>,
    /// `DelaySeconds` of this message, in place of the queue's: a standard queue's only.
    pub delay: Option<Duration>,
}

impl Outgoing {
    pub fn new(group: &str, body: &str) -> Self {
        Self {
            group: group.to_owned(),
            body: body.to_owned(),
            deduplication_id: None,
            delay: None,
        }
    }

    pub fn deduplicated_by(mut self, id: &str) -> Self {
        self.deduplication_id = Some(id.to_owned());
        self
    }

    /// The message's own delay (SQS takes up to 900 s, and none on a FIFO queue).
    pub fn delayed_by(mut self, delay: Duration) -> Self {
        self.delay = Some(delay.min(Duration::from_secs(900)));
        self
    }
}

/// The handle of one receive of one message: a later receive of the message makes it stale.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Receipt {
    seq: u64,
    generation: u32,
}

/// A received message, as the event source hands it to a function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivered {
    pub message_id: String,
    /// Empty on a standard queue.
    pub group: String,
    pub body: String,
    /// `ApproximateReceiveCount`: 1 on the first receive.
    pub receive_count: u32,
    pub sent_at: Instant,
    pub receipt: Receipt,
}

/// Requests and messages of one queue. `billed_requests` is what SQS charges for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueCounters {
    pub send_requests: u64,
    pub receive_requests: u64,
    pub empty_receives: u64,
    pub delete_requests: u64,
    pub change_visibility_requests: u64,
    pub messages_sent: u64,
    pub messages_received: u64,
    pub messages_deleted: u64,
    pub deduplicated: u64,
    pub duplicates_delivered: u64,
    pub dead_lettered: u64,
}

impl QueueCounters {
    pub fn billed_requests(&self) -> u64 {
        self.send_requests
            + self.receive_requests
            + self.delete_requests
            + self.change_visibility_requests
    }
}

/// One queue's depth at one moment (CloudWatch's `ApproximateNumberOfMessages*` and
/// `ApproximateAgeOfOldestMessage`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueSample {
    pub at_ms: u64,
    pub visible: usize,
    pub in_flight: usize,
    pub delayed: usize,
    pub oldest_age: Duration,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SqsError {
    UnknownQueue(String),
    BatchTooLarge(usize),
    /// A per-message delay sent to a FIFO queue (SQS refuses it: `InvalidParameterValue`).
    DelayOnFifo(String),
}

impl std::fmt::Display for SqsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::UnknownQueue(name) => write!(f, "no queue named {name}"),
            Self::BatchTooLarge(n) => write!(f, "a batch of {n} messages (at most {MAX_BATCH})"),
            Self::DelayOnFifo(name) => write!(f, "a per-message delay on FIFO queue {name}"),
        }
    }
}

impl std::error::Error for SqsError {}

/// Kept small: a backlog of millions of messages must fit in memory. The id is its first
/// sequence number (`m<id>` when delivered); the group is shared with the group's index.
struct Stored {
    id: u64,
    group: ArcStr,
    body: Box<str>,
    sent_at: Instant,
    visible_at: Instant,
    receive_count: u32,
    /// Set by a receive: until then the message is in flight (and its FIFO group blocked).
    in_flight_until: Option<Instant>,
    generation: u32,
}

struct Queue {
    config: QueueConfig,
    /// In send order: the queue's head is the first entry.
    messages: BTreeMap<u64, Stored>,
    /// When each received message's visibility timeout ends (for counting in-flight messages).
    in_flight: BTreeSet<(Instant, u64)>,
    /// When each delayed message becomes visible (for counting delayed messages).
    delayed: BTreeSet<(Instant, u64)>,
    /// FIFO: each group's messages in sequence (a queue, not a tree: most groups hold one
    /// message), and the groups by their first message.
    groups: HashMap<ArcStr, VecDeque<u64>>,
    heads: BTreeSet<(u64, ArcStr)>,
    /// FIFO: the last message a receive looks at, once the queue is longer than the look-ahead.
    lookahead_end: Option<u64>,
    /// Whether any message came with a delay of its own: then messages are no longer visible
    /// in send order, and a receive looks past a delayed one.
    own_delays: bool,
    /// Accepted deduplication ids by their fingerprint (`fingerprint`).
    deduplication: HashMap<u128, Instant>,
    deduplication_order: VecDeque<(Instant, u128)>,
    counters: QueueCounters,
    samples: Vec<QueueSample>,
    arrivals: Arc<Notify>,
}

impl Queue {
    fn new(config: QueueConfig) -> Self {
        Self {
            config,
            messages: BTreeMap::new(),
            in_flight: BTreeSet::new(),
            delayed: BTreeSet::new(),
            groups: HashMap::new(),
            heads: BTreeSet::new(),
            lookahead_end: None,
            own_delays: false,
            deduplication: HashMap::new(),
            deduplication_order: VecDeque::new(),
            counters: QueueCounters::default(),
            samples: Vec::new(),
            arrivals: Arc::new(Notify::new()),
        }
    }

    fn forget_expired_deduplication_ids(&mut self, now: Instant) {
        while let Some((accepted_at, _)) = self.deduplication_order.front() {
            if now.duration_since(*accepted_at) < DEDUPLICATION_WINDOW {
                break;
            }
            if let Some((accepted_at, id)) = self.deduplication_order.pop_front() {
                if self.deduplication.get(&id) == Some(&accepted_at) {
                    self.deduplication.remove(&id);
                }
            }
        }
    }

    /// Adds one message; false when FIFO deduplication dropped it.
    fn enqueue(&mut self, seq: u64, message: &Outgoing, now: Instant) -> bool {
        if self.config.kind == QueueKind::Fifo {
            self.forget_expired_deduplication_ids(now);
            if let Some(dedup) = &message.deduplication_id {
                let dedup = fingerprint(dedup);
                if self.deduplication.contains_key(&dedup) {
                    self.counters.deduplicated += 1;
                    return false;
                }
                self.deduplication.insert(dedup, now);
                self.deduplication_order.push_back((now, dedup));
            }
        }
        let group = match self.config.kind {
            QueueKind::Fifo => match self.groups.get_key_value(message.group.as_str()) {
                Some((group, _)) => group.clone(),
                None => ArcStr::from(message.group.as_str()),
            },
            QueueKind::Standard => ArcStr::new(),
        };
        self.insert(
            seq,
            Stored {
                id: seq,
                group,
                body: message.body.as_str().into(),
                sent_at: now,
                visible_at: now + message.delay.unwrap_or(self.config.delay),
                receive_count: 0,
                in_flight_until: None,
                generation: 0,
            },
        );
        self.own_delays |= message.delay.is_some();
        self.counters.messages_sent += 1;
        true
    }

    fn insert(&mut self, seq: u64, stored: Stored) {
        if stored.visible_at > stored.sent_at {
            self.delayed.insert((stored.visible_at, seq));
        }
        if self.config.kind == QueueKind::Fifo {
            let group = self.groups.entry(stored.group.clone()).or_default();
            if group.is_empty() {
                self.heads.insert((seq, stored.group.clone()));
            }
            // Every insert has the highest sequence number yet: the group stays in order.
            group.push_back(seq);
        }
        self.messages.insert(seq, stored);
        // Every insert has the highest sequence number yet, so only reaching the look-ahead's
        // length sets its last message.
        if self.messages.len() == FIFO_LOOKAHEAD {
            self.lookahead_end = Some(seq);
        }
    }

    fn remove(&mut self, seq: u64) -> Option<Stored> {
        let stored = self.messages.remove(&seq)?;
        if let Some(until) = stored.in_flight_until {
            self.in_flight.remove(&(until, seq));
        }
        self.delayed.remove(&(stored.visible_at, seq));
        if let Some(end) = self.lookahead_end {
            if seq <= end {
                // The look-ahead now reaches one message further, if there is one.
                self.lookahead_end = self
                    .messages
                    .range((Bound::Excluded(end), Bound::Unbounded))
                    .next()
                    .map(|(next, _)| *next);
            }
        }
        if let Some(group) = self.groups.get_mut(&stored.group) {
            let was_head = group.front() == Some(&seq);
            if let Ok(at) = group.binary_search(&seq) {
                group.remove(at);
            }
            if was_head {
                self.heads.remove(&(seq, stored.group.clone()));
                match group.front() {
                    Some(&next) => {
                        self.heads.insert((next, stored.group.clone()));
                    }
                    None => {
                        self.groups.remove(&stored.group);
                    }
                }
            }
        }
        Some(stored)
    }

    /// The messages a receive may take, in order, and those due for the dead-letter queue.
    fn pick(&self, max: usize, now: Instant) -> (Vec<u64>, Vec<u64>) {
        match self.config.kind {
            QueueKind::Fifo => self.pick_fifo(max, now),
            QueueKind::Standard => self.pick_standard(max, now),
        }
    }

    fn due_for_dead_letters(&self, stored: &Stored) -> bool {
        self.config
            .redrive
            .as_ref()
            .is_some_and(|redrive| stored.receive_count >= redrive.max_receive_count)
    }

    /// A standard queue: any available message, oldest first. While messages arrive in
    /// sequence and share the queue's delay, the first one still delayed ends the search;
    /// once one came with a delay of its own, the search looks past delayed messages.
    fn pick_standard(&self, max: usize, now: Instant) -> (Vec<u64>, Vec<u64>) {
        let (mut taken, mut dead) = (Vec::new(), Vec::new());
        for (&seq, stored) in &self.messages {
            if taken.len() == max {
                break;
            }
            if stored.visible_at > now {
                if self.own_delays {
                    continue;
                }
                break;
            }
            if stored.in_flight_until.is_some_and(|until| until > now) {
                continue;
            }
            if self.due_for_dead_letters(stored) {
                dead.push(seq);
            } else {
                taken.push(seq);
            }
        }
        (taken, dead)
    }

    /// A FIFO queue: the messages of the first `FIFO_LOOKAHEAD` whose group has nothing in
    /// flight, in queue order, each group up to its first message not available. The groups
    /// are walked by their first message and merged in sequence, so a receive costs the
    /// groups it passes over (those in flight), not the messages behind them.
    fn pick_fifo(&self, max: usize, now: Instant) -> (Vec<u64>, Vec<u64>) {
        let (mut taken, mut dead) = (Vec::new(), Vec::new());
        let last = self.lookahead_end.unwrap_or(u64::MAX);
        let mut heads = self.heads.iter().peekable();
        // The next message of each group this receive has taken from.
        let mut continuing: BinaryHeap<Reverse<(u64, &str)>> = BinaryHeap::new();
        while taken.len() < max {
            let from_group = continuing.peek().map(|Reverse((seq, _))| *seq);
            let from_heads = heads.peek().map(|(seq, _)| *seq);
            let (seq, group) = match (from_group, from_heads) {
                (Some(g), Some(h)) if g < h => continuing.pop().map(|Reverse(next)| next),
                (Some(_), None) => continuing.pop().map(|Reverse(next)| next),
                (_, Some(_)) => heads.next().map(|(seq, group)| (*seq, group.as_ref())),
                (None, None) => None,
            }
            .unwrap_or((u64::MAX, ""));
            if seq > last {
                break;
            }
            let Some(stored) = self.messages.get(&seq) else {
                break;
            };
            if stored.visible_at > now {
                // Sent later than every message before it, with the queue's delay: so is
                // everything after it.
                break;
            }
            if stored.in_flight_until.is_some_and(|until| until > now) {
                // Its group is held: nothing after it in the group is taken.
                continue;
            }
            if self.due_for_dead_letters(stored) {
                dead.push(seq);
            } else {
                taken.push(seq);
            }
            let next = self
                .groups
                .get(group)
                .and_then(|seqs| seqs.get(seqs.partition_point(|&s| s <= seq)).copied());
            if let Some(next) = next {
                continuing.push(Reverse((next, group)));
            }
        }
        (taken, dead)
    }

    /// The earliest moment after `now` at which a message may become available.
    fn next_change(&self, now: Instant) -> Option<Instant> {
        let after = |set: &BTreeSet<(Instant, u64)>| {
            set.range((now, 0)..)
                .find(|(at, _)| *at > now)
                .map(|(at, _)| *at)
        };
        match (after(&self.in_flight), after(&self.delayed)) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn sample(&mut self, now: Instant) -> QueueSample {
        let purge = |set: &mut BTreeSet<(Instant, u64)>| {
            while set.first().is_some_and(|(at, _)| *at <= now) {
                set.pop_first();
            }
            set.len()
        };
        let in_flight = purge(&mut self.in_flight);
        let delayed = purge(&mut self.delayed);
        let oldest_age = self
            .messages
            .values()
            .next()
            .map_or(Duration::ZERO, |m| now.duration_since(m.sent_at));
        let sample = QueueSample {
            at_ms: super::clock::epoch_ms_at(now),
            visible: self.messages.len().saturating_sub(in_flight + delayed),
            in_flight,
            delayed,
            oldest_age,
        };
        self.samples.push(sample);
        sample
    }
}

fn message_id(id: u64) -> String {
    format!("m{id}")
}

/// A deduplication id as the queue keeps it: 128 bits of two SipHash passes (deterministic
/// within a build), not the id's up to 128 characters, since millions are held at once. Two ids
/// sharing a fingerprint (odds below 10^-24 at these counts) would drop a message SQS keeps.
fn fingerprint(id: &str) -> u128 {
    use std::hash::{Hash, Hasher};
    let half = |salt: u8| {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        salt.hash(&mut hasher);
        id.hash(&mut hasher);
        hasher.finish()
    };
    (u128::from(half(0)) << 64) | u128::from(half(1))
}

fn billed_chunks(bytes: usize) -> u64 {
    u64::try_from(bytes.div_ceil(BILLED_CHUNK_BYTES).max(1)).unwrap_or(u64::MAX)
}

struct State {
    queues: HashMap<String, Queue>,
    next_seq: u64,
    rng: StdRng,
}

impl State {
    fn queue(&mut self, name: &str) -> Result<&mut Queue, SqsError> {
        self.queues
            .get_mut(name)
            .ok_or_else(|| SqsError::UnknownQueue(name.to_owned()))
    }
}

/// Every queue of the simulated account. Message ids are `m<n>` in send order, so a seed
/// gives the same ids on every run.
/// How long one SQS API call (a send, a batch send) takes from the caller's side
/// [assumption: AWS publishes no latency; ~10 ms within a region is what SDK clients see].
/// The ports wait it before each call, so a sender's throughput is bounded as on AWS: a tick
/// sending one message per code sends about 100 a second.
pub const REQUEST_LATENCY: std::time::Duration = std::time::Duration::from_millis(10);

pub struct Sqs {
    state: Mutex<State>,
}

impl Sqs {
    pub fn new(seed: u64) -> Self {
        Self {
            state: Mutex::new(State {
                queues: HashMap::new(),
                next_seq: 0,
                rng: StdRng::seed_from_u64(seed),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while the lock was held already failed the simulation; its state is still
        // the last consistent one, since no method awaits while holding it.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub fn create_queue(&self, config: QueueConfig) {
        let mut state = self.lock();
        state.queues.insert(config.name.clone(), Queue::new(config));
    }

    pub fn config(&self, queue: &str) -> Result<QueueConfig, SqsError> {
        Ok(self.lock().queue(queue)?.config.clone())
    }

    /// `SendMessage`: the message's id, or `None` when FIFO deduplication dropped it (SQS
    /// answers success either way).
    pub fn send(&self, queue: &str, message: Outgoing) -> Result<Option<String>, SqsError> {
        let mut ids = self.send_batch(queue, std::slice::from_ref(&message))?;
        Ok(ids.pop().flatten())
    }

    /// `SendMessageBatch` of at most ten messages: one request per started 64 KB.
    pub fn send_batch(
        &self,
        queue: &str,
        messages: &[Outgoing],
    ) -> Result<Vec<Option<String>>, SqsError> {
        if messages.len() > MAX_BATCH {
            return Err(SqsError::BatchTooLarge(messages.len()));
        }
        let now = Instant::now();
        let mut state = self.lock();
        let first_seq = state.next_seq;
        state.next_seq += u64::try_from(messages.len()).unwrap_or(0);
        let target = state.queue(queue)?;
        if target.config.kind == QueueKind::Fifo && messages.iter().any(|m| m.delay.is_some()) {
            return Err(SqsError::DelayOnFifo(queue.to_owned()));
        }
        let bytes: usize = messages.iter().map(|m| m.body.len()).sum();
        target.counters.send_requests += billed_chunks(bytes);
        let mut ids = Vec::with_capacity(messages.len());
        for (seq, message) in (first_seq..).zip(messages) {
            ids.push(target.enqueue(seq, message, now).then(|| message_id(seq)));
        }
        target.arrivals.notify_waiters();
        Ok(ids)
    }

    /// `ReceiveMessage` of up to `max` messages (at most ten): the messages are in flight for
    /// the queue's visibility timeout. Messages received `maxReceiveCount` times already move
    /// to the dead-letter queue instead.
    pub fn receive(&self, queue: &str, max: usize) -> Result<Vec<Delivered>, SqsError> {
        if max > MAX_BATCH {
            return Err(SqsError::BatchTooLarge(max));
        }
        let now = Instant::now();
        let mut guard = self.lock();
        let state = &mut *guard;
        let source = state
            .queues
            .get_mut(queue)
            .ok_or_else(|| SqsError::UnknownQueue(queue.to_owned()))?;
        let (taken, dead) = source.pick(max, now);
        let visibility = source.config.visibility_timeout;
        let standard = source.config.kind == QueueKind::Standard;
        let duplicates_per_million = source.config.duplicates_per_million;
        let mut delivered = Vec::with_capacity(taken.len());
        let mut duplicates = Vec::new();
        for seq in taken {
            let Some(stored) = source.messages.get_mut(&seq) else {
                continue;
            };
            if let Some(until) = stored.in_flight_until {
                source.in_flight.remove(&(until, seq));
            }
            stored.receive_count += 1;
            stored.generation += 1;
            stored.in_flight_until = Some(now + visibility);
            source.in_flight.insert((now + visibility, seq));
            delivered.push(Delivered {
                message_id: message_id(stored.id),
                group: stored.group.to_string(),
                body: stored.body.to_string(),
                receive_count: stored.receive_count,
                sent_at: stored.sent_at,
                receipt: Receipt {
                    seq,
                    generation: stored.generation,
                },
            });
            if standard
                && duplicates_per_million > 0
                && state.rng.gen_range(0..1_000_000) < duplicates_per_million
            {
                duplicates.push((stored.id, stored.body.clone(), stored.sent_at));
            }
        }
        let bytes: usize = delivered.iter().map(|m| m.body.len()).sum();
        source.counters.receive_requests += billed_chunks(bytes);
        source.counters.messages_received += u64::try_from(delivered.len()).unwrap_or(0);
        if delivered.is_empty() {
            source.counters.empty_receives += 1;
        }
        // A copy left behind by at-least-once delivery: the same message id, delivered again
        // by a later receive.
        for (id, body, sent_at) in duplicates {
            let seq = state.next_seq;
            state.next_seq += 1;
            let source = state.queue(queue)?;
            source.counters.duplicates_delivered += 1;
            source.insert(
                seq,
                Stored {
                    id,
                    group: ArcStr::new(),
                    body,
                    sent_at,
                    visible_at: sent_at,
                    receive_count: 0,
                    in_flight_until: None,
                    generation: 0,
                },
            );
        }
        self.dead_letter(state, queue, &dead, now)?;
        Ok(delivered)
    }

    fn dead_letter(
        &self,
        state: &mut State,
        queue: &str,
        seqs: &[u64],
        now: Instant,
    ) -> Result<(), SqsError> {
        if seqs.is_empty() {
            return Ok(());
        }
        let source = state.queue(queue)?;
        let Some(redrive) = source.config.redrive.clone() else {
            return Ok(());
        };
        let moved: Vec<Stored> = seqs.iter().filter_map(|seq| source.remove(*seq)).collect();
        source.counters.dead_lettered += u64::try_from(moved.len()).unwrap_or(0);
        for mut stored in moved {
            let seq = state.next_seq;
            state.next_seq += 1;
            let target = state.queue(&redrive.dead_letter_queue)?;
            stored.receive_count = 0;
            stored.in_flight_until = None;
            stored.visible_at = now;
            target.counters.messages_sent += 1;
            target.insert(seq, stored);
            target.arrivals.notify_waiters();
        }
        Ok(())
    }

    /// `DeleteMessage`: false for a stale receipt (the message was received again since).
    pub fn delete(&self, queue: &str, receipt: Receipt) -> Result<bool, SqsError> {
        let mut state = self.lock();
        let target = state.queue(queue)?;
        target.counters.delete_requests += 1;
        let deleted = Self::delete_one(target, receipt);
        // A deletion can free a FIFO group for the next receive.
        target.arrivals.notify_waiters();
        Ok(deleted)
    }

    /// `DeleteMessageBatch`, in requests of up to ten: how many were deleted.
    pub fn delete_batch(&self, queue: &str, receipts: &[Receipt]) -> Result<usize, SqsError> {
        let mut state = self.lock();
        let target = state.queue(queue)?;
        target.counters.delete_requests +=
            u64::try_from(receipts.len().div_ceil(MAX_BATCH)).unwrap_or(0);
        let deleted = receipts
            .iter()
            .filter(|receipt| Self::delete_one(target, **receipt))
            .count();
        target.arrivals.notify_waiters();
        Ok(deleted)
    }

    fn delete_one(target: &mut Queue, receipt: Receipt) -> bool {
        let current = target
            .messages
            .get(&receipt.seq)
            .is_some_and(|m| m.generation == receipt.generation);
        if current {
            target.remove(receipt.seq);
            target.counters.messages_deleted += 1;
        }
        current
    }

    /// `ChangeMessageVisibility`: the message becomes visible `timeout` from now.
    pub fn change_visibility(
        &self,
        queue: &str,
        receipt: Receipt,
        timeout: Duration,
    ) -> Result<bool, SqsError> {
        let now = Instant::now();
        let mut state = self.lock();
        let target = state.queue(queue)?;
        target.counters.change_visibility_requests += 1;
        let Some(stored) = target.messages.get_mut(&receipt.seq) else {
            return Ok(false);
        };
        if stored.generation != receipt.generation {
            return Ok(false);
        }
        if let Some(until) = stored.in_flight_until.replace(now + timeout) {
            target.in_flight.remove(&(until, receipt.seq));
        }
        target.in_flight.insert((now + timeout, receipt.seq));
        target.arrivals.notify_waiters();
        Ok(true)
    }

    /// Waits up to `max_wait` for the queue to possibly have a message to receive: a send, a
    /// deletion or visibility change (which may free a FIFO group), a delay or a visibility
    /// timeout ending. Receives that follow a long poll are what an
    /// event source's poller makes.
    pub async fn wait_for_messages(&self, queue: &str, max_wait: Duration) -> Result<(), SqsError> {
        let now = Instant::now();
        let (arrivals, wake_at) = {
            let mut state = self.lock();
            let target = state.queue(queue)?;
            let wake_at = target
                .next_change(now)
                .map_or(now + max_wait, |at| at.min(now + max_wait));
            (Arc::clone(&target.arrivals), wake_at)
        };
        tokio::select! {
            () = arrivals.notified() => {}
            () = tokio::time::sleep_until(wake_at) => {}
        }
        Ok(())
    }

    pub fn counters(&self, queue: &str) -> Result<QueueCounters, SqsError> {
        Ok(self.lock().queue(queue)?.counters)
    }

    /// Records every queue's depth and oldest message now; queues in name order.
    pub fn sample(&self) -> Vec<(String, QueueSample)> {
        let now = Instant::now();
        let mut state = self.lock();
        let mut names: Vec<String> = state.queues.keys().cloned().collect();
        names.sort();
        names
            .into_iter()
            .filter_map(|name| {
                let sample = state.queues.get_mut(&name)?.sample(now);
                Some((name, sample))
            })
            .collect()
    }

    pub fn samples(&self, queue: &str) -> Result<Vec<QueueSample>, SqsError> {
        Ok(self.lock().queue(queue)?.samples.clone())
    }

    /// Samples every queue each `every` of virtual time, for as long as the simulation runs.
    pub fn spawn_sampler(self: &Arc<Self>, every: Duration) -> tokio::task::JoinHandle<()> {
        let sqs = Arc::clone(self);
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(every);
            loop {
                ticks.tick().await;
                sqs.sample();
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    const VISIBILITY: Duration = Duration::from_secs(60);

    fn fifo() -> Sqs {
        let sqs = Sqs::new(7);
        sqs.create_queue(
            QueueConfig::fifo("refresh.fifo", VISIBILITY).with_dead_letters("dlq.fifo", 5),
        );
        sqs.create_queue(QueueConfig::fifo("dlq.fifo", VISIBILITY));
        sqs
    }

    fn send(sqs: &Sqs, queue: &str, group: &str, body: &str) -> String {
        sqs.send(queue, Outgoing::new(group, body))
            .expect("queue exists")
            .expect("not deduplicated")
    }

    fn bodies(delivered: &[Delivered]) -> Vec<&str> {
        delivered.iter().map(|m| m.body.as_str()).collect()
    }

    #[tokio::test(start_paused = true)]
    async fn a_group_with_a_batch_in_flight_gives_no_more_messages_until_the_batch_is_deleted() {
        let sqs = fifo();
        for n in 0..4 {
            send(&sqs, "refresh.fifo", "code-a", &format!("a{n}"));
        }
        let first = sqs.receive("refresh.fifo", 2).expect("receive");
        assert_eq!(bodies(&first), ["a0", "a1"]);
        assert!(sqs.receive("refresh.fifo", 10).expect("receive").is_empty());
        let receipts: Vec<Receipt> = first.iter().map(|m| m.receipt).collect();
        assert_eq!(sqs.delete_batch("refresh.fifo", &receipts), Ok(2));
        assert_eq!(
            bodies(&sqs.receive("refresh.fifo", 10).expect("receive")),
            ["a2", "a3"]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_receive_fills_its_batch_from_every_available_group_in_queue_order() {
        let sqs = fifo();
        send(&sqs, "refresh.fifo", "code-a", "a0");
        send(&sqs, "refresh.fifo", "code-b", "b0");
        send(&sqs, "refresh.fifo", "code-a", "a1");
        let held = sqs.receive("refresh.fifo", 1).expect("receive");
        assert_eq!(bodies(&held), ["a0"]);
        // code-a is in flight: its a1 waits, code-b's message is taken.
        assert_eq!(
            bodies(&sqs.receive("refresh.fifo", 10).expect("receive")),
            ["b0"]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_batch_holds_the_first_messages_in_queue_order_whatever_their_groups() {
        let sqs = fifo();
        for (group, body) in [
            ("a", "a0"),
            ("b", "b0"),
            ("a", "a1"),
            ("c", "c0"),
            ("b", "b1"),
        ] {
            send(&sqs, "refresh.fifo", group, body);
        }
        assert_eq!(
            bodies(&sqs.receive("refresh.fifo", 3).expect("receive")),
            ["a0", "b0", "a1"]
        );
        assert_eq!(
            bodies(&sqs.receive("refresh.fifo", 3).expect("receive")),
            ["c0"]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn one_groups_backlog_of_120000_messages_holds_back_the_groups_behind_it() {
        let sqs = fifo();
        for chunk in 0..FIFO_LOOKAHEAD / MAX_BATCH {
            let batch: Vec<Outgoing> = (0..MAX_BATCH)
                .map(|n| Outgoing::new("hot-code", &format!("{chunk}-{n}")))
                .collect();
            sqs.send_batch("refresh.fifo", &batch).expect("send");
        }
        send(&sqs, "refresh.fifo", "quiet-code", "behind");
        assert_eq!(sqs.receive("refresh.fifo", 10).expect("receive").len(), 10);
        // The hot group is in flight and fills the whole look-ahead: nothing is available.
        assert!(sqs.receive("refresh.fifo", 10).expect("receive").is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn deleting_messages_ahead_brings_a_group_behind_into_the_look_ahead() {
        let sqs = fifo();
        for chunk in 0..FIFO_LOOKAHEAD / MAX_BATCH {
            let batch: Vec<Outgoing> = (0..MAX_BATCH)
                .map(|n| Outgoing::new("hot-code", &format!("{chunk}-{n}")))
                .collect();
            sqs.send_batch("refresh.fifo", &batch).expect("send");
        }
        send(&sqs, "refresh.fifo", "quiet-code", "behind");
        let first = sqs.receive("refresh.fifo", 10).expect("receive");
        let receipts: Vec<Receipt> = first.iter().map(|m| m.receipt).collect();
        sqs.delete_batch("refresh.fifo", &receipts).expect("delete");
        let second = sqs.receive("refresh.fifo", 10).expect("receive");
        assert!(second.iter().all(|m| m.group == "hot-code"));
        assert_eq!(
            bodies(&sqs.receive("refresh.fifo", 10).expect("receive")),
            ["behind"]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_group_behind_a_backlog_shorter_than_the_look_ahead_is_still_found() {
        let sqs = fifo();
        for n in 0..1_000 {
            send(&sqs, "refresh.fifo", "hot-code", &n.to_string());
        }
        send(&sqs, "refresh.fifo", "quiet-code", "behind");
        sqs.receive("refresh.fifo", 10).expect("receive");
        assert_eq!(
            bodies(&sqs.receive("refresh.fifo", 10).expect("receive")),
            ["behind"]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_unanswered_message_returns_after_the_visibility_timeout_with_its_receive_counted() {
        let sqs = fifo();
        send(&sqs, "refresh.fifo", "code-a", "a0");
        let first = sqs.receive("refresh.fifo", 10).expect("receive");
        assert_eq!(first[0].receive_count, 1);
        tokio::time::sleep(VISIBILITY - Duration::from_millis(1)).await;
        assert!(sqs.receive("refresh.fifo", 10).expect("receive").is_empty());
        tokio::time::sleep(Duration::from_millis(1)).await;
        let again = sqs.receive("refresh.fifo", 10).expect("receive");
        assert_eq!(again[0].message_id, first[0].message_id);
        assert_eq!(again[0].receive_count, 2);
        assert_eq!(
            sqs.delete("refresh.fifo", first[0].receipt),
            Ok(false),
            "stale receipt"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_message_received_max_receive_count_times_moves_to_the_dead_letter_queue() {
        let sqs = fifo();
        send(&sqs, "refresh.fifo", "code-a", "poison");
        send(&sqs, "refresh.fifo", "code-a", "next");
        for _ in 0..5 {
            assert_eq!(
                bodies(&sqs.receive("refresh.fifo", 1).expect("receive")),
                ["poison"]
            );
            tokio::time::sleep(VISIBILITY).await;
        }
        // The sixth receive moves it and goes on with the rest of its group.
        assert_eq!(
            bodies(&sqs.receive("refresh.fifo", 1).expect("receive")),
            ["next"]
        );
        assert_eq!(
            bodies(&sqs.receive("dlq.fifo", 10).expect("receive")),
            ["poison"]
        );
        assert_eq!(sqs.counters("refresh.fifo").map(|c| c.dead_lettered), Ok(1));
    }

    #[tokio::test(start_paused = true)]
    async fn the_queues_delay_hides_a_new_message_until_it_has_passed() {
        let sqs = Sqs::new(1);
        sqs.create_queue(
            QueueConfig::fifo("retry-60s.fifo", VISIBILITY).with_delay(Duration::from_secs(60)),
        );
        send(&sqs, "retry-60s.fifo", "code-a", "later");
        tokio::time::sleep(Duration::from_secs(59)).await;
        assert!(sqs
            .receive("retry-60s.fifo", 10)
            .expect("receive")
            .is_empty());
        assert_eq!(sqs.sample()[0].1.delayed, 1);
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(
            bodies(&sqs.receive("retry-60s.fifo", 10).expect("receive")),
            ["later"]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_message_delayed_on_its_own_hides_only_itself_and_a_fifo_queue_refuses_one() {
        let sqs = fifo();
        sqs.create_queue(QueueConfig::standard("fanout", VISIBILITY));
        let later = Outgoing::new("", "later").delayed_by(Duration::from_secs(60));
        sqs.send("fanout", later.clone())
            .expect("a standard queue takes it");
        send(&sqs, "fanout", "", "now");
        let first = sqs.receive("fanout", 10).expect("receive");
        assert_eq!(
            bodies(&first),
            ["now"],
            "the delayed message first in the queue holds nothing back"
        );
        let receipts: Vec<Receipt> = first.iter().map(|m| m.receipt).collect();
        sqs.delete_batch("fanout", &receipts).expect("delete");
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert_eq!(
            bodies(&sqs.receive("fanout", 10).expect("receive")),
            ["later"]
        );
        assert_eq!(
            sqs.send("refresh.fifo", later),
            Err(SqsError::DelayOnFifo("refresh.fifo".into()))
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_repeated_deduplication_id_within_five_minutes_is_accepted_but_not_delivered() {
        let sqs = fifo();
        let fact = Outgoing::new("code-a", "fact").deduplicated_by("fact-1");
        assert!(sqs
            .send("refresh.fifo", fact.clone())
            .expect("send")
            .is_some());
        assert_eq!(sqs.send("refresh.fifo", fact.clone()), Ok(None));
        tokio::time::sleep(DEDUPLICATION_WINDOW).await;
        assert!(sqs.send("refresh.fifo", fact).expect("send").is_some());
        assert_eq!(sqs.counters("refresh.fifo").map(|c| c.deduplicated), Ok(1));
    }

    #[tokio::test(start_paused = true)]
    async fn a_standard_queue_ignores_groups_and_may_deliver_a_message_twice() {
        let sqs = Sqs::new(3);
        sqs.create_queue(
            QueueConfig::standard("fanout", VISIBILITY).with_duplicates_per_million(500_000),
        );
        for n in 0..200 {
            send(&sqs, "fanout", "same-group", &n.to_string());
        }
        let mut deliveries = 0;
        let mut ids = HashSet::new();
        loop {
            let batch = sqs.receive("fanout", 10).expect("receive");
            if batch.is_empty() {
                break;
            }
            deliveries += batch.len();
            let receipts: Vec<Receipt> = batch.iter().map(|m| m.receipt).collect();
            ids.extend(batch.into_iter().map(|m| m.message_id));
            sqs.delete_batch("fanout", &receipts).expect("delete");
        }
        assert_eq!(ids.len(), 200, "every message delivered");
        assert!(deliveries > 200, "some delivered twice: {deliveries}");
        let counters = sqs.counters("fanout").expect("counters");
        assert_eq!(
            deliveries - 200,
            usize::try_from(counters.duplicates_delivered).unwrap_or(0)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_same_seed_delivers_the_same_duplicates() {
        let run = || {
            let sqs = Sqs::new(11);
            sqs.create_queue(
                QueueConfig::standard("fanout", VISIBILITY).with_duplicates_per_million(100_000),
            );
            for n in 0..100 {
                send(&sqs, "fanout", "", &n.to_string());
            }
            let mut order = Vec::new();
            loop {
                let batch = sqs.receive("fanout", 10).expect("receive");
                if batch.is_empty() {
                    break order;
                }
                let receipts: Vec<Receipt> = batch.iter().map(|m| m.receipt).collect();
                order.extend(batch.into_iter().map(|m| m.message_id));
                sqs.delete_batch("fanout", &receipts).expect("delete");
            }
        };
        assert_eq!(run(), run());
    }

    #[tokio::test(start_paused = true)]
    async fn requests_are_billed_per_call_of_up_to_ten_messages_and_per_started_64_kb() {
        let sqs = fifo();
        let small: Vec<Outgoing> = (0..10)
            .map(|n| Outgoing::new(&n.to_string(), "x"))
            .collect();
        sqs.send_batch("refresh.fifo", &small).expect("send");
        let large = "y".repeat(BILLED_CHUNK_BYTES + 1);
        sqs.send("refresh.fifo", Outgoing::new("big", &large))
            .expect("send");
        let received = sqs.receive("refresh.fifo", 10).expect("receive");
        sqs.receive("refresh.fifo", 10).expect("receive"); // the large one: 2 chunks
        sqs.receive("refresh.fifo", 10).expect("receive"); // empty, still billed
        let receipts: Vec<Receipt> = received.iter().map(|m| m.receipt).collect();
        sqs.delete_batch("refresh.fifo", &receipts).expect("delete");
        sqs.change_visibility("refresh.fifo", receipts[0], Duration::ZERO)
            .expect("change");
        let counters = sqs.counters("refresh.fifo").expect("counters");
        assert_eq!(counters.send_requests, 1 + 2);
        assert_eq!(counters.receive_requests, 1 + 2 + 1);
        assert_eq!(counters.empty_receives, 1);
        assert_eq!(counters.delete_requests, 1);
        assert_eq!(counters.change_visibility_requests, 1);
        assert_eq!(counters.billed_requests(), 3 + 4 + 1 + 1);
    }

    #[tokio::test(start_paused = true)]
    async fn depth_and_the_oldest_messages_age_are_sampled_over_virtual_time() {
        let sqs = Arc::new(fifo());
        let sampler = sqs.spawn_sampler(Duration::from_secs(60));
        send(&sqs, "refresh.fifo", "code-a", "a0");
        send(&sqs, "refresh.fifo", "code-b", "b0");
        tokio::time::sleep(Duration::from_secs(30)).await;
        sqs.receive("refresh.fifo", 1).expect("receive");
        tokio::time::sleep(Duration::from_secs(60)).await;
        sampler.abort();
        let samples = sqs.samples("refresh.fifo").expect("samples");
        let depths: Vec<(usize, usize, u64)> = samples
            .iter()
            .map(|s| (s.visible, s.in_flight, s.oldest_age.as_secs()))
            .collect();
        assert_eq!(depths, [(2, 0, 0), (1, 1, 60)]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_long_poll_ends_when_a_message_arrives_or_becomes_visible() {
        let sqs = Arc::new(fifo());
        let start = Instant::now();
        let sender = Arc::clone(&sqs);
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(3)).await;
            send(&sender, "refresh.fifo", "code-a", "a0");
        });
        sqs.wait_for_messages("refresh.fifo", Duration::from_secs(20))
            .await
            .expect("wait");
        assert_eq!(start.elapsed(), Duration::from_secs(3));
        sqs.receive("refresh.fifo", 10).expect("receive");
        sqs.wait_for_messages("refresh.fifo", Duration::from_secs(120))
            .await
            .expect("wait");
        assert_eq!(start.elapsed(), Duration::from_secs(3) + VISIBILITY);
    }
}
