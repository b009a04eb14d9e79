//! The bench's scenario: the defaults of its flags, kept here so that the capacity planner
//! (`qrsync-ops plan --bench`, tools/scale/src/plan/bench.rs, which includes this file) describes
//! the very tenant and drive `make bench` runs. Plain constants only: this file is compiled
//! into both crates.

/// Seed of every choice the bench makes (members of each code, who changes in each round).
pub const SEED: u64 = 42;
pub const STAFF: usize = 200;
pub const CODES: usize = 2000;
/// Members of each code, drawn at random among all the staff.
pub const MEMBERS: usize = 10;
/// Phase 1: rounds of staff changes, staff changed per round, the sandbox's limit per minute.
pub const ROUNDS_1: usize = 22;
pub const ROUND_STAFF_1: usize = 10;
pub const LIMIT_1: u64 = 600;
/// Phase 2: the same, with the sandbox's limit below the budget.
pub const ROUNDS_2: usize = 4;
pub const ROUND_STAFF_2: usize = 10;
pub const LIMIT_2: u64 = 400;
/// A round starts this long after the previous one started (or later, see `MAX_QUEUED`).
pub const ROUND_SECS: u64 = 20;
/// A round waits until the work queues hold at most this many messages.
pub const MAX_QUEUED: u64 = 1000;
/// The default run's phases (`make bench` without `--long`), each of one kind of refresh where
/// it can be. Unchanged: staff who send their own facts again (`online: true` while online), so
/// every code they sit on is recomputed and found unchanged.
pub const UNCHANGED_STAFF: usize = 10;
/// Push: staff with no code in common flipped offline, so every refresh pushes once; at most
/// this many codes (and never more than half the budget a minute), so none waits for budget.
pub const PUSH_CODES: usize = 270;
/// The burst: one more staff member sits on every code; going offline changes every list at
/// once. At least this many list changes make a burst (issue 31's N).
pub const MIN_BURST: usize = 2000;
/// The 45009 phase: staff flipped offline until this many codes change, more than the
/// sandbox's `LIMIT_2` allows in a minute.
pub const THROTTLED_CODES: usize = 600;
