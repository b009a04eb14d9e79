//! The store ports over the simulated DynamoDB: every call first sends through the request
//! meter (`services::dynamodb::DynamoDb`: units by item size, partitions, throttling, the SDK's
//! retries) the very requests `adapters::dynamodb::DynamoStore` sends for it, then answers from
//! the domain's `InMemoryStore`, which holds the data. A request still refused after the SDK's
//! retries fails the call with the `StoreError` the adapter returns (`StoreError::new("table",
//! ..)`), and a write refused so writes nothing.
//!
//! Writes are metered before they are forwarded. A read whose requests depend on what it finds
//! (the snapshot's departments and people, a query's pages) is answered by the in-memory store
//! first and metered from that answer, which is returned only once every request was served.
//!
//! # The requests, call by call
//!
//! What `shared/adapters/src/dynamodb/*.rs` sends (S strong, E eventually consistent; `gsi1`
//! and `gsi2` reads are always eventual; "+idx" is an index entry the write changes, billed as
//! its own write on the index's partition). Each item is under the partition key its sort key
//! gives it (`keys::home`, `ItemKey::of`): a code's items under the code's, a staff member's
//! and a department's under theirs, the rest under the tenant's. This table is the one place
//! to compare with the adapter.
//!
//! | call | requests |
//! |---|---|
//! | `CodeLeases::acquire` | UpdateItem `PUSHED#c` (the lease's attributes on the record) |
//! | `CodeFacts::snapshot` | BatchGetItem S [`PROFILE`, `PAUSE`, `CODE#c`, `PUSHED#c` (with the lease), `DIRTY#c`]; stops there when the profile or code is missing; then BatchGetItem S of `DEPT#d` per 10 departments, until they hold 2,000 candidates; then BatchGetItem S of 4 keys per person (staff, today on code, today on all codes, total on code) in requests of 100 keys |
//! | `CodeLeases::release` | UpdateItem `PUSHED#c` |
//! | `CodeRecords::record_tally` | UpdateItem `STATS#REFRESH#shard#day` (a shard drawn per write); when requeued for budget or throttle, UpdateItem `REQUEUES#shard / MINUTE#m` (a shard drawn per write) |
//! | `CodeRecords::record_push` | UpdateItem `PUSHED#c` (fenced on the lease there, and releasing it with `AfterRecord::Release`), for a landing code a TransactWriteItems of that update and its page (Put, rotation table); once it holds, PutItem `PUSHLOG#c#..` |
//! | `CodeRecords::record_starved`, `record_rotation` | UpdateItem `PUSHED#c` (fenced on the lease there), for a landing code a TransactWriteItems of that update and its page |
//! | `RotationCounter::count_visit` (the landing page) | GetItem S of the page (rotation table); for a rotating page UpdateItem of its round's counter (visit table) |
//! | `CodeRecords::keep_link` | UpdateItem `STAFF#s` |
//! | `FailureMarks::mark_code_gone` / `mark_staff_unusable` | UpdateItem `CODE#c` / `STAFF#s` |
//! | `DirtyMarks::mark_dirty` | UpdateItem `DIRTY#c` +idx (`gsi1` dirty shard) |
//! | `DirtyMarks::clear_dirty` | DeleteItem `DIRTY#c` (+idx removed when there was a mark) |
//! | `DirtyMarks::count_repaired` | UpdateItem `DRIFT#day#c` |
//! | `MeteredBudget::spend` | UpdateItem `BUDGET#api#shard#hour` (refused or not), a second on another shard when the first is spent |
//! | `TenantProfiles::profile`, `ScheduleFacts::timezone` | GetItem `PROFILE` S |
//! | `AddLedger::count_add` | TransactWriteItems [Put `CLAIM#key`, Update total, Update today on code, Update today all codes] |
//! | `AddLedger::record_ignored` | UpdateItem `IGNORED#kind` |
//! | `QuotaLedger::code_config` | GetItem `CODE#c` S |
//! | `QuotaLedger::counts` | BatchGetItem S of the 3 counters |
//! | `QuotaLedger::claim_limit` | PutItem `LIMIT#..` +idx (`CLAIMS#OPEN`) |
//! | `QuotaLedger::mark_notified` / `take_over` | UpdateItem `LIMIT#..` (+idx removed / moved) |
//! | `QuotaLedger::stale_claims` | Query `gsi1` `CLAIMS#OPEN` (limit); BatchGetItem S of what it found |
//! | `StaffLedger::set_employment` | UpdateItem `STAFF#s` (+idx `STAFF#RESIGNED` on a resignation) |
//! | `StaffLedger::codes_of_staff`, `ScheduleFacts::codes_of_staff`, `CodeIndex` (staff) | Query S `SEAT#s#` (pages); GetItem S `STAFF#s`; Query S `DEPTSEAT#d#` per department |
//! | `StaffLedger::codes_listing_department`, `CodeIndex` (department) | Query S `DEPTSEAT#d#` |
//! | `CodeIndex` (tenant) | Query `gsi1` `TENANT#t#CODES` (keys only; pages of 1 MB of entries) |
//! | `StaffLedger::set_staff_departments` | GetItem S `STAFF#s`; UpdateItem `STAFF#s`; UpdateItem `DEPT#d` per department joined or left |
//! | `StaffLedger::set_department_members` | GetItem S `DEPT#d`; Query S `OWED#DEPT#d#`; TransactWriteItems [Update `DEPT#d`, Update `STAFF#s` per member changed] when at most 99 change, else one of the owed chunks and one per chunk of 99 |
//! | `StaffLedger::rename_staff` | `codes_of_staff`; GetItem + PutItem of the staff item (+idx `gsi2` when it has a schedule) and `set_staff_departments`; GetItem `PROFILE`; GetItem (+ PutItem when found) per counter; per code GetItem and, when it named `from`, `put_code` (GetItem, Query owed, TransactWriteItems); `set_staff_departments(from, {})`; UpdateItem `STAFF#from` |
//! | `DueIndex::acquire` / `advance` / `release` | UpdateItem `SCHEDULES / TICK_CURSOR` |
//! | `DueIndex::due_in` | Query `gsi1` per shard (8) of the minute's bucket, in pages of 1 MB |
//! | `DueIndex::reschedule` | UpdateItem `DUE#..` +idx moved (old entry deleted, new put), or DeleteItem +idx removed |
//! | `ScheduleFacts::schedule` | GetItem S `STAFF#s` |
//! | `ScheduleFacts::schedules` | Query `gsi2` `TENANT#t#SCHEDULES` (the scheduled staff's keys and schedules) |
//! | `ScheduleFacts::limits_reached` | Query S `LIMIT#first..last` (pages) |
//! | `FanOutMarks::mark_fan_out` / `clear_fan_out` | UpdateItem +idx (`FANOUT_MARKS`) / DeleteItem `FANOUT_MARK#..` |
//! | `CallbackArchive::keep` | PutItem `ARCHIVE#t#day / ..` |
//! | `CallbackArchive::page` | Query of each archive day partition it reads (pages of 1 MB) |
//! | `SweepRuns::acquire` / `save_cursor` / `release` | UpdateItem `SWEEP / LEASE` |
//! | `DirtyIndex::due_marks` | Query `gsi1` per dirty shard (4); BatchGetItem S of the marks found |
//! | `DirtyIndex::mark_suspect` / `resync_sent` / `drop_mark` | UpdateItem `DIRTY#c` +idx (new) / UpdateItem +idx moved / DeleteItem +idx removed |
//! | `FanOutIndex::due_fan_outs` / `fan_out_resent` | Query `gsi1` `FANOUT_MARKS`; BatchGetItem S / UpdateItem +idx moved |
//! | `TenantRegistry::tenants_after` | Query `gsi1` `TENANTS` |
//! | `DriftLedger::sample_cursor` / `report` / `guard` | GetItem S `DRIFT#SAMPLE` / `DRIFT#DAY#day` / `DRIFT#GUARD` |
//! | `DriftLedger::save_sample_cursor` / `trip_guard` / `add_to_report` / `resume` | PutItem / PutItem / UpdateItem / DeleteItem |
//! | `DriftLedger::codes_after` | Query `gsi1` `TENANT#t#CODES` from after `after` (keys only) |
//! | `CreationIntents::record_intent` / `clear_intent` / `stale_intents` | PutItem +idx / DeleteItem +idx / Query `gsi1` `INTENTS` |
//! | `LinkRetirements::resigned_before` | Query `gsi1` `STAFF#RESIGNED`; GetItem S per staff member |
//! | `LinkRetirements::detach_link` / `link_retired` / `nothing_to_retire` | UpdateItem `STAFF#s` (the last +idx removed) |
//!
//! Sizes (DynamoDB Developer Guide, "Item sizes and formats"): a string is its name's bytes
//! plus its UTF-8 bytes, a number its name plus one byte per two digits plus one, a boolean its
//! name plus one, a list or map 3 bytes plus one per element plus the elements, a string set
//! its strings. Each item's size is added up from the attributes the adapter writes, with the
//! values the in-memory store holds (JSON attributes serialised as the adapter serialises
//! them). A write is billed on the item as it is after the write, a read on the item read.

use crate::observe::Trace;
use crate::services::clock::now_ms;
use crate::services::dynamodb::{Consistency, DynamoDb, DynamoError, ItemKey, Request, Touch};
use adapters::dynamodb::keys;
use domain::budget::{
    asking_through, minute_of, spend_layered, BudgetLayers, BudgetSlot, Holder, RosterMemo, Spend,
    WeComBudget,
};
use domain::codes::{CodeFacts, CodeSnapshot, PushedList, StoredCode};
use domain::dirty::{DirtyMark, DirtyMarks, DirtyWhy, FanOutMark, FanOutMarks, StaleSuspect};
use domain::facts::{
    AddFact, AddLedger, ClaimOutcome, CountOutcome, LimitClaim, QuotaLedger, StaffLedger,
    TenantProfiles,
};
use domain::fakes::{scrambled, FakeBudget, InMemoryStore};
use domain::fanout::CodeIndex;
use domain::ids::{CodeId, DepartmentId, StaffId, TenantId};
use domain::intake::{InboxMessage, MessageGroup};
use domain::landing::{Counted, OrderKey, RotationCounter};
use domain::membership::{
    candidates, AddCounts, CodeConfig, Employment, RotationSlot, StaffFacts, WeeklySchedule,
    MAX_DEPARTMENT_CANDIDATES,
};
use domain::reasons::{FanOut, Source};
use domain::refresh::PageWrite;
use domain::refresh::{
    Acquired, AfterRecord, CodeLeases, CodeRecords, FailureMarks, FencedWrite, Lease, PushRecord,
    Requeues, Tally,
};
use domain::replay::{ArchivedCallback, CallbackArchive, Selection};
use domain::schedules::{CursorLease, Due, DueIndex, LimitReached, Minute, ScheduleFacts, Subject};
use domain::sweep::{
    CreationIntent, CreationIntents, DirtyIndex, DriftCounts, DriftLedger, DriftReport,
    FanOutIndex, GuardTrip, LeavingStaff, LinkRetirements, SweepRuns, TenantRegistry,
};
use domain::tenants::{TenantPause, TenantPauses};
use domain::tenants::{TenantProfile, Timezone};
use domain::wecom::acquisition::AcquisitionLink;
use domain::StoreError;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// The table's global secondary index of time-ordered and listing entries (`keys::GSI1`),
/// keys only: due items, marks, claims, intents, resigned staff, tenants, each tenant's codes.
const GSI1: &str = keys::GSI1;
/// The index of each tenant's staff with a work schedule (`keys::GSI2`), the schedule
/// projected: what the schedule tick reads.
const GSI2: &str = keys::GSI2;
/// Keys one `BatchGetItem` reads at most (the adapter's `batch_get` chunks).
const BATCH_GET_KEYS: usize = 100;
/// Departments one snapshot request reads (the adapter's `DEPARTMENTS_PER_PAGE`).
const DEPARTMENTS_PER_PAGE: usize = 10;
/// A `Query` answers at most 1 MB a page; the adapter follows `LastEvaluatedKey`.
const QUERY_PAGE_BYTES: usize = 1024 * 1024;
/// Items one `TransactWriteItems` holds at most.
const TRANSACTION_ITEMS: usize = 100;
/// Index writes one transaction carries beside its owner (`domain::owed`).
const WRITES_PER_TRANSACTION: usize = 99;
/// A kept acquisition link's two attributes, when the store does not say what they hold
/// (`link_id` and a `https://work.weixin.qq.com/ca/...` URL).
const LINK_BYTES: usize = 7 + 40 + 8 + 60;

/// The kinds of request the adapter sends, as the DynamoDB API names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    GetItem,
    BatchGetItem,
    Query,
    PutItem,
    UpdateItem,
    DeleteItem,
    TransactWriteItems,
}

/// Requests sent, by kind (each request once), and the attempts the SDK made for them (each
/// retry of a throttled request one more, as the adapter's `RequestCounter` counts them for the
/// refresh tally's `store_requests`).
#[derive(Debug, Clone, Default)]
pub struct RequestLog {
    sent: Arc<Mutex<BTreeMap<Kind, u64>>>,
    attempts: Arc<AtomicU64>,
}

impl RequestLog {
    fn count(&self, kind: Kind, attempts: u32) {
        *self
            .sent
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry(kind)
            .or_default() += 1;
        self.attempts
            .fetch_add(u64::from(attempts), Ordering::Relaxed);
    }

    /// Attempts transmitted so far, retries included.
    pub fn attempts(&self) -> u64 {
        self.attempts.load(Ordering::Relaxed)
    }

    /// Requests sent so far, by kind.
    pub fn by_kind(&self) -> BTreeMap<Kind, u64> {
        self.sent
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Requests sent so far, in all.
    pub fn total(&self) -> u64 {
        self.by_kind().values().sum()
    }
}

/// An item's size, added up attribute by attribute as DynamoDB counts it.
#[derive(Debug, Clone, Copy)]
struct Size(usize);

fn number_bytes(value: u64) -> usize {
    let digits = value.checked_ilog10().map_or(1, |log| log as usize + 1);
    digits.div_ceil(2) + 1
}

impl Size {
    /// The key attributes `pk` and `sk`.
    fn of(key: &ItemKey) -> Self {
        Self(keys::PK.len() + key.pk.len() + keys::SK.len() + key.sk.len())
    }

    fn s(self, name: &str, value_bytes: usize) -> Self {
        Self(self.0 + name.len() + value_bytes)
    }

    fn n(self, name: &str, value: u64) -> Self {
        Self(self.0 + name.len() + number_bytes(value))
    }

    fn b(self, name: &str) -> Self {
        Self(self.0 + name.len() + 1)
    }

    /// A list of strings (`L` of `S`).
    fn list<'a>(self, name: &str, values: impl IntoIterator<Item = &'a str>) -> Self {
        let elements: usize = values.into_iter().map(|v| v.len() + 1).sum();
        Self(self.0 + name.len() + 3 + elements)
    }

    /// A list of numbers (`L` of `N`).
    fn numbers(self, name: &str, values: &[u64]) -> Self {
        let elements: usize = values.iter().map(|v| number_bytes(*v) + 1).sum();
        Self(self.0 + name.len() + 3 + elements)
    }

    /// A string set (`SS`); an empty one is not stored.
    fn set<'a>(self, name: &str, values: impl IntoIterator<Item = &'a str>) -> Self {
        let elements: usize = values.into_iter().map(str::len).sum();
        if elements == 0 {
            return self;
        }
        Self(self.0 + name.len() + elements)
    }

    fn bytes(self) -> usize {
        self.0
    }
}

/// A 13-digit epoch millisecond, as most of the table's times are.
const MS: u64 = 1_796_000_000_000;
/// An epoch second (a TTL).
const SECS: u64 = 1_796_000_000;

fn json_len<T: serde::Serialize + ?Sized>(value: &T) -> usize {
    serde_json::to_string(value).map_or(0, |json| json.len())
}

// ------------------------------------------------------------------------ item sizes

fn profile_bytes(tenant: &TenantId, profile: &TenantProfile) -> usize {
    let key = ItemKey::of(tenant, keys::PROFILE);
    let mut size = Size::of(&key)
        .s("corp_id", profile.corp_id.len())
        .s("callback_token", profile.callback_token.len())
        .s("encoding_aes_key", profile.encoding_aes_key.len())
        .s("corp_secret", profile.corp_secret.len())
        .s("timezone", profile.timezone.name().len())
        .n("version", 10)
        .s(keys::GSI1_PK, keys::TENANTS_INDEX.len())
        .s(keys::GSI1_SK, tenant.as_str().len())
        .n("corp_secret_changed_at_ms", MS)
        .n("callback_token_changed_at_ms", MS)
        .n("encoding_aes_key_changed_at_ms", MS);
    if let Some(cap) = profile.company_daily_cap {
        size = size.n("company_daily_cap", u64::from(cap));
    }
    size.bytes()
}

fn code_bytes(tenant: &TenantId, code: &CodeId, stored: &StoredCode) -> usize {
    let listed = code_index_key(tenant, code);
    let mut size = Size::of(&ItemKey::code(tenant, code))
        .s(keys::GSI1_PK, listed.pk.len())
        .s(keys::GSI1_SK, listed.sk.len())
        .s("config", json_len(&stored.config))
        .n("version", 100)
        .n("created_at_ms", MS)
        .n("updated_at_ms", MS);
    if let Some(config_id) = &stored.config_id {
        size = size.s("config_id", config_id.len()).list(
            "created_with",
            stored.created_with.iter().map(StaffId::as_str),
        );
    }
    size.bytes()
}

/// A code's entry in `gsi1`'s list of its tenant's codes (`keys::codes_index`): the code id
/// under `TENANT#<t>#CODES`, which every code item carries.
fn code_index_key(tenant: &TenantId, code: &CodeId) -> ItemKey {
    ItemKey::new(keys::codes_index(tenant), code.as_str())
}

/// What listing one code through `gsi1` reads: its entry's keys and the code item's.
fn code_index_bytes(tenant: &TenantId, code: &CodeId) -> usize {
    index_entry_bytes(&code_index_key(tenant, code), &ItemKey::code(tenant, code))
}

fn pushed_bytes(
    tenant: &TenantId,
    code: &CodeId,
    users: &[StaffId],
    rotation: Option<&[RotationSlot]>,
) -> usize {
    let mut size = Size::of(&ItemKey::pushed(tenant, code))
        .list("users", users.iter().map(StaffId::as_str))
        .n("pushed_at_ms", MS)
        .b("fallback")
        .b("starved");
    if let Some(rotation) = rotation {
        size = size.s("rotation", json_len(rotation));
    }
    size.bytes()
}

fn pushed_list_bytes(tenant: &TenantId, code: &CodeId, pushed: &PushedList) -> usize {
    let size = pushed_bytes(tenant, code, &pushed.users, pushed.rotation.as_deref());
    if pushed.starved {
        return Size(size).n("starved_at_ms", MS).bytes();
    }
    size
}

fn push_log_key(tenant: &TenantId, code: &CodeId, push: &PushRecord) -> ItemKey {
    ItemKey::of(tenant, keys::push_log(code, push.pushed_at_ms, "000000"))
}

fn push_log_bytes(tenant: &TenantId, code: &CodeId, push: &PushRecord) -> usize {
    Size::of(&push_log_key(tenant, code, push))
        .list("users", push.users.iter().map(StaffId::as_str))
        .n("pushed_at_ms", push.pushed_at_ms)
        .b("fallback")
        .s("lane", 4)
        .numbers("fact_at_ms", &push.fact_at_ms)
        .n(keys::EXPIRES_AT, SECS)
        .bytes()
}

/// The lease's attributes on the code's record: its holder (32 hex digits), expiry and count
/// of acquisitions (`adapters::dynamodb::leases`).
fn lease_bytes() -> usize {
    Size(0)
        .s("holder", 32)
        .n("lease_expires_ms", MS)
        .n("acquisitions", 1_000)
        .bytes()
}

/// The code's record with its lease, as a write of it is billed: `record` bytes of the
/// record's own attributes (the key alone when it has none yet) and the lease's.
fn record_touch(tenant: &TenantId, code: &CodeId, record: Option<usize>) -> Touch {
    let record = record.unwrap_or_else(|| Size::of(&ItemKey::pushed(tenant, code)).bytes());
    Touch::new(ItemKey::pushed(tenant, code), record + lease_bytes())
}

/// A code's page in the landing page's rotation table, as written and read: its rotation,
/// round, order key and starved mark. The page and visit tables are their own tables at AWS;
/// here their items are partitions of their own in the one simulated table (whose table-wide
/// limits they then share: the conservative side).
fn page_touch(tenant: &TenantId, code: &CodeId, rotation: Option<&[RotationSlot]>) -> Touch {
    let key = ItemKey::new(format!("PAGE#{}", keys::page(tenant, code)), "");
    let mut size = Size::of(&key)
        .s("round", 16)
        .s("order_key", OrderKey::LEN)
        .b("starved");
    if let Some(rotation) = rotation {
        size = size.s("rotation", json_len(rotation));
    }
    Touch::new(key, size.bytes())
}

fn dirty_key(tenant: &TenantId, code: &CodeId) -> ItemKey {
    ItemKey::of(tenant, keys::dirty(code))
}

fn dirty_index_key(tenant: &TenantId, code: &CodeId, due_ms: u64) -> ItemKey {
    ItemKey::new(
        keys::dirty_bucket(tenant, code),
        keys::dirty_index_sort(due_ms, tenant, code),
    )
}

fn dirty_bytes(tenant: &TenantId, code: &CodeId) -> usize {
    let index = dirty_index_key(tenant, code, MS);
    Size::of(&dirty_key(tenant, code))
        .n("marked_at_ms", MS)
        .s("why", 16)
        .n("due_at_ms", MS)
        .n("resyncs", 1)
        .s(keys::GSI1_PK, index.pk.len())
        .s(keys::GSI1_SK, index.sk.len())
        .n("failures", 1)
        .bytes()
}

fn staff_key(tenant: &TenantId, staff: &StaffId) -> ItemKey {
    ItemKey::of(tenant, keys::staff(staff))
}

/// A staff item: the admin's facts, WeCom's refusal, the schedule (JSON), the link and the
/// departments, as far as the store knows them.
fn staff_bytes(
    tenant: &TenantId,
    staff: &StaffId,
    facts: Option<&StaffFacts>,
    departments: &BTreeSet<DepartmentId>,
    link_bytes: usize,
) -> usize {
    let mut size = Size::of(&staff_key(tenant, staff));
    if let Some(facts) = facts {
        size = size
            .b("online")
            .s("employment", 8)
            .n("employment_at_ms", MS)
            .b("rejected_by_wecom");
        if let Some(schedule) = &facts.schedule {
            let entry = schedule_index_key(tenant, staff);
            size = size
                .s("schedule", json_len(schedule))
                .n("schedule_at_ms", MS)
                .s(keys::GSI2_PK, entry.pk.len())
                .s(keys::GSI2_SK, entry.sk.len());
        }
    }
    if !departments.is_empty() {
        size = size
            .set("departments", departments.iter().map(DepartmentId::as_str))
            .n("departments_at_ms", MS);
    }
    Size(size.bytes() + link_bytes).bytes()
}

/// A staff member's entry in `gsi2` (`keys::schedules_index`), present while they have a
/// schedule.
fn schedule_index_key(tenant: &TenantId, staff: &StaffId) -> ItemKey {
    ItemKey::new(keys::schedules_index(tenant), staff.as_str())
}

/// An entry of `gsi2`, which projects the schedule: its index keys, the table's keys and the
/// schedule.
fn schedule_entry_bytes(tenant: &TenantId, staff: &StaffId, schedule: &WeeklySchedule) -> usize {
    let entry = schedule_index_key(tenant, staff);
    Size::of(&staff_key(tenant, staff))
        .s(keys::GSI2_PK, entry.pk.len())
        .s(keys::GSI2_SK, entry.sk.len())
        .s("schedule", json_len(schedule))
        .bytes()
}

fn department_key(tenant: &TenantId, department: &DepartmentId) -> ItemKey {
    ItemKey::of(tenant, keys::department(department))
}

fn department_bytes(
    tenant: &TenantId,
    department: &DepartmentId,
    members: &BTreeSet<StaffId>,
) -> usize {
    Size::of(&department_key(tenant, department))
        .s("department", department.as_str().len())
        .set("members", members.iter().map(StaffId::as_str))
        .n("members_at_ms", MS)
        .n("members_version", 10)
        .bytes()
}

/// An add counter: `adds`, and a TTL on the daily ones.
fn counter_bytes(key: &ItemKey, daily: bool) -> usize {
    let size = Size::of(key).n("adds", 100);
    if daily {
        return size.n(keys::EXPIRES_AT, SECS).bytes();
    }
    size.bytes()
}

/// A code's counter item: a count per member with adds (`n_<staff>`), and, a day's, its expiry.
fn code_counter_bytes(key: &ItemKey, counted: &[&StaffId], daily: bool) -> usize {
    if counted.is_empty() {
        return 0;
    }
    let size = counted.iter().fold(Size::of(key), |size, staff| {
        size.n(&format!("n_{staff}"), 100)
    });
    if daily {
        return size.n(keys::EXPIRES_AT, SECS).bytes();
    }
    size.bytes()
}

fn key_only_bytes(key: &ItemKey) -> usize {
    Size::of(key).bytes()
}

fn tally_bytes(key: &ItemKey) -> usize {
    [
        "reasons",
        "recomputes",
        "pushes",
        "unchanged",
        "starved",
        "requeued_budget",
        "requeued_throttled",
        "requeued_lease",
        "to_slow_lane",
        "slow_interval_waits",
        "store_requests",
    ]
    .into_iter()
    .fold(Size::of(key), |size, name| size.n(name, 100_000))
    .bytes()
}

/// A budget item holds the hour's total and a counter for each minute spent in so far:
/// at most 60, so it stays under 1 KB as the adapter says.
fn budget_bytes(key: &ItemKey, now_ms: u64) -> usize {
    let minutes = (now_ms % 3_600_000) / 60_000 + 1;
    let size = Size::of(key).n("spent", 100_000).n(keys::EXPIRES_AT, SECS);
    (0..minutes)
        .fold(size, |size, _| size.n("m00", 10_000))
        .bytes()
}

fn claim_key(add: &AddFact) -> ItemKey {
    ItemKey::of(&add.tenant, keys::claim(&add.business_key()))
}

fn add_claim_bytes(add: &AddFact) -> usize {
    Size::of(&claim_key(add))
        .n("counted_at_ms", MS)
        .s("code", add.code.as_str().len())
        .s("staff", add.staff.as_str().len())
        .s("external_user", add.external_user.len())
        .s("day", add.day.len())
        .n(keys::EXPIRES_AT, SECS)
        .bytes()
}

fn add_counter_keys(add: &AddFact) -> [(ItemKey, bool); 3] {
    let t = &add.tenant;
    [
        (
            ItemKey::of(t, keys::adds_total(&add.code, &add.staff).sk),
            false,
        ),
        (
            ItemKey::of(
                t,
                keys::adds_today_on_code(&add.day, &add.code, &add.staff).sk,
            ),
            true,
        ),
        (
            ItemKey::of(t, keys::adds_today_all_codes(&add.day, &add.staff).sk),
            true,
        ),
    ]
}

fn limit_key(claim: &LimitClaim) -> ItemKey {
    ItemKey::of(
        &claim.tenant,
        keys::limit_reached(&claim.day, claim.limit, &claim.staff, claim.code.as_ref()),
    )
}

fn open_claim_index_key(claim: &LimitClaim, lease_until_ms: u64) -> ItemKey {
    ItemKey::new(
        keys::OPEN_CLAIMS,
        keys::open_claim_sort(lease_until_ms, &claim.tenant, &limit_key(claim).sk),
    )
}

fn limit_claim_bytes(claim: &LimitClaim) -> usize {
    let index = open_claim_index_key(claim, claim.lease_until_ms);
    let mut size = Size::of(&limit_key(claim))
        .s("staff", claim.staff.as_str().len())
        .s("limit", claim.limit.name().len())
        .s("day", claim.day.len())
        .s("owner", claim.owner.len())
        .n("claimed_at_ms", claim.claimed_at_ms)
        .n("lease_until_ms", claim.lease_until_ms)
        .b("notified")
        .s(keys::GSI1_PK, index.pk.len())
        .s(keys::GSI1_SK, index.sk.len())
        .n(keys::EXPIRES_AT, SECS);
    if let Some(code) = &claim.code {
        size = size.s("code", code.as_str().len());
    }
    size.bytes()
}

fn due_key(tenant: &TenantId, subject: &Subject) -> ItemKey {
    ItemKey::of(tenant, keys::due(subject))
}

fn due_index_key(tenant: &TenantId, subject: &Subject, minute: Minute) -> ItemKey {
    // The handled-through time is 13 digits whatever its value: the key's size is the same.
    ItemKey::new(
        keys::due_bucket(minute, keys::due_shard(tenant, subject)),
        keys::due_index_sort(tenant, subject, minute.start_ms()),
    )
}

fn due_bytes(tenant: &TenantId, subject: &Subject, minute: Minute) -> usize {
    let index = due_index_key(tenant, subject, minute);
    Size::of(&due_key(tenant, subject))
        .s(keys::GSI1_PK, index.pk.len())
        .s(keys::GSI1_SK, index.sk.len())
        .n("due_at_ms", minute.start_ms())
        .bytes()
}

fn cursor_key() -> ItemKey {
    ItemKey::new(keys::TICK_CURSOR_PK, keys::TICK_CURSOR_SK)
}

fn cursor_bytes(owner: &str) -> usize {
    Size::of(&cursor_key())
        .s("owner", owner.len())
        .n("lease_until_ms", MS)
        .n("next_minute", 30_000_000)
        .bytes()
}

fn fan_out_key(fan_out: &FanOut) -> ItemKey {
    ItemKey::of(&fan_out.tenant, keys::fan_out_mark(&fan_out.mark_key()))
}

fn fan_out_index_key(fan_out: &FanOut, due_ms: u64) -> ItemKey {
    ItemKey::new(
        keys::FAN_OUT_MARKS,
        keys::fan_out_mark_sort(due_ms, &fan_out.tenant, &fan_out_key(fan_out).sk),
    )
}

fn fan_out_mark_bytes(fan_out: &FanOut, at_ms: u64) -> usize {
    let index = fan_out_index_key(fan_out, at_ms);
    Size::of(&fan_out_key(fan_out))
        .s("fan_out", fan_out.to_json().len())
        .n("marked_at_ms", at_ms)
        .s("why", 16)
        .n("due_at_ms", at_ms)
        .n("resends", 1)
        .s(keys::GSI1_PK, index.pk.len())
        .s(keys::GSI1_SK, index.sk.len())
        .bytes()
}

const DAY_MS: u64 = 24 * 3_600_000;

fn archive_key(message: &InboxMessage) -> ItemKey {
    ItemKey::new(
        keys::archive(&message.tenant, message.received_at_ms / DAY_MS),
        keys::archived(message.received_at_ms, &message.event_key),
    )
}

fn archive_bytes(message: &InboxMessage, group_id: &str) -> usize {
    let mut size = Size::of(&archive_key(message))
        .s("message", message.to_json().len())
        .n("received_at_ms", message.received_at_ms)
        .s("event_key", message.event_key.len())
        .n(keys::EXPIRES_AT, SECS);
    if let Some((_, code)) = MessageGroup::code_of(group_id) {
        size = size.s("code", code.as_str().len());
    }
    size.bytes()
}

/// An entry of `gsi1`, which projects keys only: its index keys and the table's keys.
fn index_entry_bytes(entry: &ItemKey, table: &ItemKey) -> usize {
    Size::of(table)
        .s(keys::GSI1_PK, entry.pk.len())
        .s(keys::GSI1_SK, entry.sk.len())
        .bytes()
}

/// `touch` writing (putting, moving or deleting) its entry `entry` of `gsi1`.
fn indexed(touch: Touch, entry: ItemKey) -> Touch {
    let bytes = index_entry_bytes(&entry, &touch.key);
    touch.with_index(GSI1, entry, bytes)
}

/// How many pages a query of `bytes` takes, and the bytes of each.
fn pages(bytes: usize) -> Vec<usize> {
    let full = bytes / QUERY_PAGE_BYTES;
    let mut pages = vec![QUERY_PAGE_BYTES; full];
    let rest = bytes % QUERY_PAGE_BYTES;
    if rest > 0 || pages.is_empty() {
        pages.push(rest);
    }
    pages
}

fn unavailable(error: impl std::error::Error + Send + Sync + 'static) -> StoreError {
    StoreError::new("table", error)
}

/// The domain's in-memory table behind the requests the adapter would send for each call.
/// Clones share the data, the meter, the trace and the request log.
#[derive(Clone)]
pub struct MeteredStore {
    data: InMemoryStore,
    meter: Arc<DynamoDb>,
    trace: Arc<Trace>,
    log: RequestLog,
    /// Tally writes so far: the shard each writes is drawn from it, as at random but
    /// repeatably (the adapter draws at random).
    tallies: Arc<AtomicU64>,
}

impl MeteredStore {
    pub fn new(data: InMemoryStore, meter: Arc<DynamoDb>, trace: Arc<Trace>) -> Self {
        Self {
            data,
            meter,
            trace,
            log: RequestLog::default(),
            tallies: Arc::default(),
        }
    }

    /// The table's contents (to load, and to read back without a request).
    pub fn data(&self) -> &InMemoryStore {
        &self.data
    }

    pub fn meter(&self) -> &Arc<DynamoDb> {
        &self.meter
    }

    /// The requests this store (and the budget built on it) sent, by kind.
    pub fn requests(&self) -> &RequestLog {
        &self.log
    }

    async fn send(&self, kind: Kind, request: Request) -> Result<(), StoreError> {
        let served = self.meter.request(&request).await;
        let attempts = match &served {
            Ok(served) => served.attempts,
            Err(DynamoError::Throttled { attempts, .. }) => *attempts,
            Err(_) => 1,
        };
        self.log.count(kind, attempts);
        served.map(|_| ()).map_err(|error| match error {
            // The adapter tells a conflict apart (`StoreError::is_conflict`), as here.
            DynamoError::TransactionConflict(_) | DynamoError::TransactionCanceled(_) => {
                StoreError::conflict("table", error)
            }
            DynamoError::Throttled { .. } => unavailable(error),
        })
    }

    async fn get(&self, touch: Touch, consistency: Consistency) -> Result<(), StoreError> {
        self.send(Kind::GetItem, Request::Get(touch, consistency))
            .await
    }

    /// Strongly consistent `BatchGetItem`s of `touches`, 100 keys a request (none for none).
    async fn batch_get(&self, touches: Vec<Touch>) -> Result<(), StoreError> {
        for chunk in touches.chunks(BATCH_GET_KEYS) {
            let request = Request::BatchGet(chunk.to_vec(), Consistency::Strong);
            self.send(Kind::BatchGetItem, request).await?;
        }
        Ok(())
    }

    /// A query from `start` reading `bytes` in all, one request per 1 MB page.
    async fn query(
        &self,
        start: ItemKey,
        bytes: usize,
        consistency: Consistency,
        index: Option<&str>,
    ) -> Result<(), StoreError> {
        for page in pages(bytes) {
            let request = Request::Query {
                start: start.clone(),
                bytes: page,
                consistency,
                index: index.map(str::to_owned),
            };
            self.send(Kind::Query, request).await?;
        }
        Ok(())
    }

    /// A strongly consistent query of the tenant's keys under `prefix` (`query_tenant`), of
    /// the one partition key the prefix's items live under. A prefix whose items span many
    /// (`keys::spans_homes`: every code) has no such query: the adapter refuses it and reads
    /// through an index, and so must a caller here.
    async fn query_tenant(
        &self,
        tenant: &TenantId,
        prefix: &str,
        bytes: usize,
    ) -> Result<(), StoreError> {
        debug_assert!(
            !keys::spans_homes(prefix),
            "{prefix} spans partition keys: meter the index query the adapter makes"
        );
        let start = ItemKey::of(tenant, prefix);
        self.query(start, bytes, Consistency::Strong, None).await
    }

    async fn write(&self, kind: Kind, touch: Touch) -> Result<(), StoreError> {
        self.send(kind, Request::Write(touch)).await
    }

    async fn transact(&self, touches: Vec<Touch>) -> Result<(), StoreError> {
        self.send(Kind::TransactWriteItems, Request::TransactWrite(touches))
            .await
    }

    /// A record write: one fenced `UpdateItem`, or, with a landing code's page, a
    /// `TransactWriteItems` of the record and the page (each item billed twice).
    async fn record_write(
        &self,
        record: Touch,
        page: Option<&PageWrite>,
        tenant: &TenantId,
        code: &CodeId,
    ) -> Result<(), StoreError> {
        let Some(page) = page else {
            return self.write(Kind::UpdateItem, record).await;
        };
        let rotation = match page {
            PageWrite::NewRound(slots) | PageWrite::SameRound(slots) => Some(slots.as_slice()),
            PageWrite::Starved | PageWrite::NotServed => None,
        };
        self.transact(vec![record, page_touch(tenant, code, rotation)])
            .await
    }

    /// A write of the code's record or its lease, on the record as stored.
    fn stored_record_touch(&self, tenant: &TenantId, code: &CodeId) -> Touch {
        let stored = self.data.stored_pushed(tenant, code);
        record_touch(
            tenant,
            code,
            stored.map(|pushed| pushed_list_bytes(tenant, code, &pushed)),
        )
    }

    fn staff_touch(&self, tenant: &TenantId, staff: &StaffId, link_bytes: usize) -> Touch {
        let facts = self.data.stored_staff(tenant, staff);
        let departments = self.data.stored_staff_departments(tenant, staff);
        let bytes = staff_bytes(tenant, staff, facts.as_ref(), &departments, link_bytes);
        Touch::new(staff_key(tenant, staff), bytes)
    }

    /// Seat entries are keys only (`pk`, `sk`).
    fn seats_bytes(tenant: &TenantId, prefix: &str, codes: usize) -> usize {
        let one = ItemKey::of(tenant, format!("{prefix}{}", "c".repeat(12)));
        key_only_bytes(&one) * codes
    }

    /// The requests of the adapter's `codes_of_staff`: the staff's seats, their staff item,
    /// and each of their departments' seats.
    async fn meter_codes_of_staff(
        &self,
        tenant: &TenantId,
        staff: &StaffId,
        codes: &[CodeId],
    ) -> Result<(), StoreError> {
        let departments = self.data.stored_staff_departments(tenant, staff);
        // Without departments every code found is one of the staff member's own seats.
        let seated = if departments.is_empty() {
            codes.len()
        } else {
            codes
                .iter()
                .filter(|code| self.data.staff_seated_on(tenant, code).contains(staff))
                .count()
        };
        let prefix = keys::seats_of(staff);
        let bytes = Self::seats_bytes(tenant, &prefix, seated);
        self.query_tenant(tenant, &prefix, bytes).await?;
        self.get(self.staff_touch(tenant, staff, 0), Consistency::Strong)
            .await?;
        for department in departments {
            let listing =
                StaffLedger::codes_listing_department(&self.data, tenant, &department).await?;
            self.meter_department_seats(tenant, &department, listing.len())
                .await?;
        }
        Ok(())
    }

    async fn meter_department_seats(
        &self,
        tenant: &TenantId,
        department: &DepartmentId,
        codes: usize,
    ) -> Result<(), StoreError> {
        let prefix = keys::department_seats_of(department);
        let bytes = Self::seats_bytes(tenant, &prefix, codes);
        self.query_tenant(tenant, &prefix, bytes).await
    }

    /// The requests of the adapter's `set_staff_departments`, from what is stored now.
    fn staff_departments_requests(
        &self,
        tenant: &TenantId,
        staff: &StaffId,
        departments: &BTreeSet<DepartmentId>,
    ) -> Vec<(Kind, Request)> {
        let touch = self.staff_touch(tenant, staff, 0);
        let mut requests = vec![
            (
                Kind::GetItem,
                Request::Get(touch.clone(), Consistency::Strong),
            ),
            (Kind::UpdateItem, Request::Write(touch)),
        ];
        let before = self.data.stored_staff_departments(tenant, staff);
        for department in before.symmetric_difference(departments) {
            let members = self
                .data
                .stored_department(tenant, department)
                .unwrap_or_default();
            let bytes = department_bytes(tenant, department, &members);
            let touch = Touch::new(department_key(tenant, department), bytes);
            requests.push((Kind::UpdateItem, Request::Write(touch)));
        }
        requests
    }

    async fn send_all(&self, requests: Vec<(Kind, Request)>) -> Result<(), StoreError> {
        for (kind, request) in requests {
            self.send(kind, request).await?;
        }
        Ok(())
    }

    /// The requests of the adapter's `put_code` of a stored code whose index entries change
    /// to `entries` (a rename swaps one member's seat): read, owed query, one transaction.
    fn put_code_requests(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        stored: &StoredCode,
        entries: Vec<ItemKey>,
    ) -> Vec<(Kind, Request)> {
        let touch = Touch::new(
            ItemKey::code(tenant, code),
            code_bytes(tenant, code, stored),
        );
        let mut transaction = vec![touch.clone()];
        transaction.extend(entries.into_iter().map(|entry| {
            let bytes = key_only_bytes(&entry);
            Touch::new(entry, bytes)
        }));
        let owed = ItemKey::of(tenant, keys::owed_of(&keys::code(code)));
        vec![
            (Kind::GetItem, Request::Get(touch, Consistency::Strong)),
            (
                Kind::Query,
                Request::Query {
                    start: owed,
                    bytes: 0,
                    consistency: Consistency::Strong,
                    index: None,
                },
            ),
            (
                Kind::TransactWriteItems,
                Request::TransactWrite(transaction),
            ),
        ]
    }
}

// ------------------------------------------------------------------------ the refresh

#[async_trait::async_trait]
impl CodeFacts for MeteredStore {
    async fn snapshot(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        now_ms_at: u64,
    ) -> Result<Option<CodeSnapshot>, StoreError> {
        self.snapshots(&[(tenant, code)], now_ms_at)
            .await
            .pop()
            .unwrap_or(Ok(None))
    }

    /// As the adapter reads them: one batch read of every code's own items with each
    /// tenant's profile once, each code's departments, then one batch read of every
    /// candidate's staff item and counters, each key once.
    async fn snapshots(
        &self,
        codes: &[(&TenantId, &CodeId)],
        now_ms_at: u64,
    ) -> Vec<Result<Option<CodeSnapshot>, StoreError>> {
        let mut found = Vec::with_capacity(codes.len());
        for (tenant, code) in codes {
            found.push(self.data.snapshot(tenant, code, now_ms_at).await);
        }
        match self.meter_snapshots(codes, &found, now_ms_at).await {
            Ok(()) => found,
            Err(error) => codes
                .iter()
                .map(|_| Err(StoreError::new(error.what, error.to_string())))
                .collect(),
        }
    }
}

/// Touches read in one batch, each key once.
#[derive(Default)]
struct SharedTouches {
    seen: std::collections::HashSet<ItemKey>,
    touches: Vec<Touch>,
}

impl SharedTouches {
    fn add(&mut self, key: ItemKey, bytes: usize) {
        if self.seen.insert(key.clone()) {
            self.touches.push(Touch::new(key, bytes));
        }
    }
}

impl MeteredStore {
    /// The requests of `snapshots` for `codes`, whose snapshots `found` read.
    async fn meter_snapshots(
        &self,
        codes: &[(&TenantId, &CodeId)],
        found: &[Result<Option<CodeSnapshot>, StoreError>],
        now_ms_at: u64,
    ) -> Result<(), StoreError> {
        let mut first = SharedTouches::default();
        for ((tenant, code), found) in codes.iter().zip(found) {
            let bytes = match found {
                Ok(Some(snapshot)) => [
                    profile_bytes(tenant, &snapshot.profile),
                    code_bytes(tenant, code, &snapshot.code),
                    match (&snapshot.last_pushed, snapshot.lease.acquisitions > 0) {
                        (Some(pushed), leased) => {
                            pushed_list_bytes(tenant, code, pushed)
                                + if leased { lease_bytes() } else { 0 }
                        }
                        (None, true) => record_touch(tenant, code, None).bytes,
                        (None, false) => 0,
                    },
                    snapshot
                        .dirty_since_ms
                        .map_or(0, |_| dirty_bytes(tenant, code)),
                ],
                _ => [
                    self.data
                        .stored_profile(tenant)
                        .map_or(0, |profile| profile_bytes(tenant, &profile)),
                    self.data
                        .stored_code(tenant, code)
                        .map_or(0, |stored| code_bytes(tenant, code, &stored.code)),
                    self.data
                        .stored_pushed(tenant, code)
                        .map_or(0, |pushed| pushed_list_bytes(tenant, code, &pushed)),
                    self.data
                        .dirty_mark(tenant, code)
                        .map_or(0, |_| dirty_bytes(tenant, code)),
                ],
            };
            let keys = [
                ItemKey::of(tenant, keys::PROFILE),
                ItemKey::code(tenant, code),
                ItemKey::pushed(tenant, code),
                dirty_key(tenant, code),
            ];
            for (key, bytes) in keys.into_iter().zip(bytes) {
                first.add(key, bytes);
            }
            // The tenant's pause, read with its profile (a miss when it is not paused).
            let paused = matches!(found, Ok(Some(snapshot)) if snapshot.tenant_paused.is_some());
            first.add(ItemKey::pause(tenant), if paused { PAUSE_BYTES } else { 0 });
        }
        self.batch_get(first.touches).await?;
        let mut people = SharedTouches::default();
        for ((tenant, code), found) in codes.iter().zip(found) {
            if let Ok(Some(snapshot)) = found {
                self.people_touches(&mut people, tenant, code, snapshot, now_ms_at)
                    .await?;
            }
        }
        self.batch_get(people.touches).await?;
        for ((tenant, code), found) in codes.iter().zip(found) {
            let Ok(Some(snapshot)) = found else {
                continue;
            };
            self.trace.snapshot_read(tenant, code, now_ms());
            // A refresh that finds the lease free and nothing to write ends here, with no
            // lease to give back (`domain::refresh`, the same test).
            if snapshot.lease.free_at(now_ms_at)
                && domain::refresh::nothing_to_write(false, snapshot)
            {
                self.trace.lease_released(tenant, code, now_ms());
            }
        }
        Ok(())
    }

    /// The code's department reads (made now), and its candidates' staff items and the
    /// counters of its limits, added to `people`.
    async fn people_touches(
        &self,
        people: &mut SharedTouches,
        tenant: &TenantId,
        code: &CodeId,
        snapshot: &CodeSnapshot,
        now_ms_at: u64,
    ) -> Result<(), StoreError> {
        let config = &snapshot.code.config;
        let read = self.meter_departments(tenant, config, snapshot).await?;
        let mut candidates_read: BTreeSet<StaffId> =
            candidates(config, &read).into_iter().collect();
        candidates_read.extend(config.fallback.iter().cloned());
        let day = domain::tenants::tenant_day(now_ms_at, snapshot.profile.timezone);
        for person in &candidates_read {
            // The staff item's departments are left out: a staff item is never near 4 KB.
            let link = snapshot
                .links
                .get(person)
                .map_or(0, |url| LINK_BYTES - 60 + url.len());
            let facts = snapshot.staff.get(person);
            let staff = staff_bytes(tenant, person, facts, &BTreeSet::new(), link);
            people.add(
                staff_key(tenant, person),
                if facts.is_some() { staff } else { 0 },
            );
            let counts = snapshot.adds.get(person).copied().unwrap_or_default();
            if snapshot.profile.company_daily_cap.is_some() {
                let key = ItemKey::of(tenant, keys::adds_today_all_codes(&day, person).sk);
                let bytes = if counts.all_codes > 0 {
                    counter_bytes(&key, true)
                } else {
                    0
                };
                people.add(key, bytes);
            }
        }
        // The code's own counters, only those of the limits it has, as the adapter reads them:
        // one item a day and one in all, holding a count per member with adds.
        let switches = &config.switches;
        for (sk, daily, read) in [
            (
                keys::code_adds_on(&day, code),
                true,
                switches.daily_limit.is_some(),
            ),
            (
                keys::code_adds_total(code),
                false,
                switches.add_limit.is_some(),
            ),
        ] {
            if !read {
                continue;
            }
            let counted: Vec<&StaffId> = candidates_read
                .iter()
                .filter(|person| {
                    snapshot.adds.get(*person).is_some_and(|counts| {
                        if daily {
                            counts.on_code > 0
                        } else {
                            counts.on_code_total > 0
                        }
                    })
                })
                .collect();
            let key = ItemKey::of(tenant, sk);
            let bytes = code_counter_bytes(&key, &counted, daily);
            people.add(key, bytes);
        }
        Ok(())
    }
}

impl MeteredStore {
    /// The snapshot's department reads, a page of 10 at a time until they hold 2,000
    /// candidates; answers the departments read.
    async fn meter_departments(
        &self,
        tenant: &TenantId,
        config: &CodeConfig,
        snapshot: &CodeSnapshot,
    ) -> Result<HashMap<DepartmentId, BTreeSet<StaffId>>, StoreError> {
        let mut read = HashMap::new();
        let unique_members = config.members.iter().collect::<BTreeSet<_>>().len();
        for page in config.departments.chunks(DEPARTMENTS_PER_PAGE) {
            let touches = page
                .iter()
                .map(|department| {
                    let bytes = snapshot
                        .departments
                        .get(department)
                        .map_or(0, |members| department_bytes(tenant, department, members));
                    Touch::new(department_key(tenant, department), bytes)
                })
                .collect();
            self.batch_get(touches).await?;
            for department in page {
                if let Some(members) = snapshot.departments.get(department) {
                    read.insert(department.clone(), members.clone());
                }
            }
            let expanded = candidates(config, &read).len() - unique_members;
            if expanded >= MAX_DEPARTMENT_CANDIDATES {
                break;
            }
        }
        Ok(read)
    }
}

#[async_trait::async_trait]
impl CodeRecords for MeteredStore {
    async fn record_push(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        lease: &Lease,
        push: &PushRecord,
        then: AfterRecord,
    ) -> Result<FencedWrite, StoreError> {
        let pushed = pushed_bytes(tenant, code, &push.users, push.rotation.as_deref());
        let record = record_touch(tenant, code, Some(pushed));
        self.record_write(record, push.page().as_ref(), tenant, code)
            .await?;
        let recorded = self.data.record_push(tenant, code, lease, push, then).await;
        if then == AfterRecord::Release {
            // The record gave the lease back: the refresh ends here.
            self.trace.lease_released(tenant, code, now_ms());
        }
        if matches!(recorded, Ok(FencedWrite::Written)) {
            // The history entry after the record, as the adapter writes it; a failure leaves
            // the push recorded.
            let log = Touch::new(
                push_log_key(tenant, code, push),
                push_log_bytes(tenant, code, push),
            );
            let _ = self.write(Kind::PutItem, log).await;
        }
        recorded
    }

    async fn record_starved(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        lease: &Lease,
        at_ms: u64,
        on_page: bool,
    ) -> Result<FencedWrite, StoreError> {
        let pushed = self.data.stored_pushed(tenant, code).map_or(
            Size::of(&ItemKey::pushed(tenant, code))
                .b("starved")
                .bytes(),
            |pushed| pushed_list_bytes(tenant, code, &pushed),
        );
        let pushed = Size(pushed).n("starved_at_ms", at_ms).bytes();
        let record = record_touch(tenant, code, Some(pushed));
        self.record_write(record, on_page.then_some(&PageWrite::Starved), tenant, code)
            .await?;
        self.data
            .record_starved(tenant, code, lease, at_ms, on_page)
            .await
    }

    async fn record_rotation(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        lease: &Lease,
        wecom_list: &[StaffId],
        rotation: Option<&[RotationSlot]>,
    ) -> Result<FencedWrite, StoreError> {
        let pushed = pushed_bytes(tenant, code, wecom_list, rotation);
        let record = record_touch(tenant, code, Some(pushed));
        let page = rotation.map_or(PageWrite::NotServed, |slots| {
            PageWrite::SameRound(slots.to_vec())
        });
        self.record_write(record, Some(&page), tenant, code).await?;
        self.data
            .record_rotation(tenant, code, lease, wecom_list, rotation)
            .await
    }

    async fn keep_link(
        &self,
        tenant: &TenantId,
        staff: &StaffId,
        link: &AcquisitionLink,
    ) -> Result<AcquisitionLink, StoreError> {
        let link_bytes = keys::LINK_ID.len() + link.link_id.len() + keys::LINK_URL.len();
        let touch = self.staff_touch(tenant, staff, link_bytes + link.url.len());
        self.write(Kind::UpdateItem, touch).await?;
        self.data.keep_link(tenant, staff, link).await
    }

    async fn record_tally(
        &self,
        tenant: &TenantId,
        day: &str,
        tally: &Tally,
    ) -> Result<(), StoreError> {
        let draw = scrambled(self.tallies.fetch_add(1, Ordering::Relaxed));
        let shard = (draw % u64::from(keys::REFRESH_TALLY_SHARDS)) as u32;
        let key = ItemKey::refresh_tally(tenant, shard, day);
        let bytes = tally_bytes(&key);
        self.write(Kind::UpdateItem, Touch::new(key, bytes)).await?;
        self.data.record_tally(tenant, day, tally).await?;
        self.trace.tallied(tenant, tally);
        Ok(())
    }

    /// The platform's per-minute count of put-off refreshes, on one of its shards.
    async fn record_requeues(&self, now_ms: u64, requeues: Requeues) -> Result<(), StoreError> {
        let draw = scrambled(self.tallies.fetch_add(1, Ordering::Relaxed));
        let key = ItemKey::new(
            keys::requeues((draw % u64::from(keys::REQUEUE_SHARDS)) as u32),
            keys::requeues_minute(now_ms / 60_000),
        );
        let bytes = Size::of(&key)
            .n("requeued_budget", 10_000)
            .n("requeued_throttled", 10_000)
            .n(keys::EXPIRES_AT, SECS)
            .bytes();
        self.write(Kind::UpdateItem, Touch::new(key, bytes)).await?;
        self.data.record_requeues(now_ms, requeues).await
    }
}

#[async_trait::async_trait]
impl CodeLeases for MeteredStore {
    async fn acquire(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        holder: &str,
        now_ms_at: u64,
        duration_ms: u64,
        expected: Option<u64>,
    ) -> Result<Acquired, StoreError> {
        self.write(Kind::UpdateItem, self.stored_record_touch(tenant, code))
            .await?;
        CodeLeases::acquire(
            &self.data,
            tenant,
            code,
            holder,
            now_ms_at,
            duration_ms,
            expected,
        )
        .await
    }

    /// The trace hears of the release whether or not the table took it: the refresh is over
    /// either way (a lease not given back only expires later).
    async fn release(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        lease: &Lease,
    ) -> Result<(), StoreError> {
        let sent = self
            .write(Kind::UpdateItem, self.stored_record_touch(tenant, code))
            .await;
        let released = match sent {
            Ok(()) => CodeLeases::release(&self.data, tenant, code, lease).await,
            Err(error) => Err(error),
        };
        self.trace.lease_released(tenant, code, now_ms());
        released
    }
}

/// A pause is one small item beside the profile (`keys::PAUSE`), written and deleted rarely.
/// The registry's query is not metered (a handful of entries, once a sweep run).
#[async_trait::async_trait]
impl TenantPauses for MeteredStore {
    async fn pause(&self, tenant: &TenantId, pause: &TenantPause) -> Result<bool, StoreError> {
        self.write(
            Kind::PutItem,
            Touch::new(ItemKey::pause(tenant), PAUSE_BYTES),
        )
        .await?;
        self.data.pause(tenant, pause).await
    }

    async fn pause_of(&self, tenant: &TenantId) -> Result<Option<TenantPause>, StoreError> {
        self.get(
            Touch::new(ItemKey::pause(tenant), PAUSE_BYTES),
            Consistency::Strong,
        )
        .await?;
        self.data.pause_of(tenant).await
    }

    async fn paused_tenants(&self) -> Result<Vec<TenantId>, StoreError> {
        self.data.paused_tenants().await
    }

    async fn update_pause(&self, tenant: &TenantId, pause: &TenantPause) -> Result<(), StoreError> {
        self.write(
            Kind::PutItem,
            Touch::new(ItemKey::pause(tenant), PAUSE_BYTES),
        )
        .await?;
        self.data.update_pause(tenant, pause).await
    }

    async fn lift_pause(&self, tenant: &TenantId, since_ms: u64) -> Result<bool, StoreError> {
        self.write(
            Kind::DeleteItem,
            Touch::new(ItemKey::pause(tenant), PAUSE_BYTES),
        )
        .await?;
        self.data.lift_pause(tenant, since_ms).await
    }
}

/// A pause's item: its JSON and keys, well under 1 KB.
const PAUSE_BYTES: usize = 400;

#[async_trait::async_trait]
impl FailureMarks for MeteredStore {
    async fn mark_code_gone(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        at_ms: u64,
    ) -> Result<(), StoreError> {
        let bytes = self
            .data
            .stored_code(tenant, code)
            .map_or(0, |stored| code_bytes(tenant, code, &stored.code));
        let bytes = Size(bytes).n("wecom_gone_at_ms", at_ms).bytes();
        self.write(
            Kind::UpdateItem,
            Touch::new(ItemKey::code(tenant, code), bytes),
        )
        .await?;
        self.data.mark_code_gone(tenant, code, at_ms).await
    }

    async fn mark_staff_unusable(
        &self,
        tenant: &TenantId,
        staff: &StaffId,
        errcode: i64,
        at_ms: u64,
    ) -> Result<(), StoreError> {
        let touch = self.staff_touch(tenant, staff, 0);
        let bytes = Size(touch.bytes)
            .n("rejected_errcode", 60_111)
            .n("rejected_at_ms", at_ms)
            .bytes();
        self.write(Kind::UpdateItem, Touch::new(touch.key, bytes))
            .await?;
        self.data
            .mark_staff_unusable(tenant, staff, errcode, at_ms)
            .await
    }
}

#[async_trait::async_trait]
impl DirtyMarks for MeteredStore {
    async fn mark_dirty(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        why: DirtyWhy,
        at_ms: u64,
    ) -> Result<(), StoreError> {
        let mut touch = Touch::new(dirty_key(tenant, code), dirty_bytes(tenant, code));
        // A renewed mark keeps its index key (`if_not_exists`): only a new one writes an entry.
        if self.data.dirty_mark(tenant, code).is_none() {
            touch = indexed(touch, dirty_index_key(tenant, code, at_ms));
        }
        self.write(Kind::UpdateItem, touch).await?;
        self.data.mark_dirty(tenant, code, why, at_ms).await
    }

    async fn clear_dirty(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        began_ms: u64,
    ) -> Result<Option<Option<DirtyWhy>>, StoreError> {
        let mark = self.data.dirty_entry(tenant, code);
        let mut touch = Touch::new(
            dirty_key(tenant, code),
            mark.as_ref().map_or(0, |_| dirty_bytes(tenant, code)),
        );
        if let Some(mark) = mark.filter(|mark| mark.marked_at_ms < began_ms) {
            touch = indexed(touch, dirty_index_key(tenant, code, mark.due_at_ms));
        }
        self.write(Kind::DeleteItem, touch).await?;
        self.data.clear_dirty(tenant, code, began_ms).await
    }

    async fn count_repaired(
        &self,
        tenant: &TenantId,
        day: &str,
        code: &CodeId,
    ) -> Result<(), StoreError> {
        let key = ItemKey::of(tenant, keys::drift_code(day, code));
        let bytes = drift_code_bytes(&key);
        self.write(Kind::UpdateItem, Touch::new(key, bytes)).await?;
        self.data.count_repaired(tenant, day, code).await
    }
}

// ------------------------------------------------------------------------ the landing page

#[async_trait::async_trait]
impl RotationCounter for MeteredStore {
    /// A strongly consistent `GetItem` of the code's page, then, for a page with a rotation,
    /// an `UpdateItem` of its round's counter (the landing page's own tables).
    async fn count_visit(&self, tenant: &TenantId, code: &CodeId) -> Result<Counted, StoreError> {
        let pushed = self.data.stored_pushed(tenant, code);
        let rotation = pushed
            .as_ref()
            .and_then(|pushed| pushed.rotation.as_deref());
        self.get(page_touch(tenant, code, rotation), Consistency::Strong)
            .await?;
        let counted = self.data.count_visit(tenant, code).await?;
        if matches!(counted, Counted::Visit { .. }) {
            let counter = ItemKey::new(keys::round(tenant, code, "0123456789abcdef"), "");
            let bytes = Size::of(&counter)
                .n("visits", 1_000)
                .n(keys::EXPIRES_AT, SECS)
                .bytes();
            self.write(Kind::UpdateItem, Touch::new(counter, bytes))
                .await?;
        }
        Ok(counted)
    }
}

/// The shared WeCom budget with `DynamoBudget`'s semantics (one conditional `UpdateItem` per
/// shard tried, both windows in it, the tenant's layer and then its address's, a refund when
/// the address refuses; `FakeBudget::layered` keeps each shard's windows as the table does,
/// and the store contract holds the two to it), each spend and refund metered as its
/// `UpdateItem`. The rosters (`domain::budget::fairness`) are metered as `DynamoBudget`
/// sends them, with one memo for the whole function where each of its containers keeps its
/// own: a tenant's mark is written once a minute here, at most once a minute per container
/// there (a refused write for all but the first).
#[derive(Clone)]
pub struct MeteredBudget {
    store: MeteredStore,
    layers: BudgetLayers,
    windows: FakeBudget,
    rosters: Arc<Mutex<RosterMemo>>,
}

impl MeteredBudget {
    pub fn new(store: MeteredStore, layers: BudgetLayers) -> Self {
        Self {
            store,
            windows: FakeBudget::layered(layers.clone()),
            layers,
            rosters: Arc::default(),
        }
    }

    /// `DynamoBudget::asking`, metered: the tenant's mark and the roster's count once a
    /// minute, the roster's eventually consistent read once a minute per address.
    async fn asking(
        &self,
        tenant: &TenantId,
        address: &str,
        api: &str,
        now_ms_at: u64,
    ) -> Result<u32, StoreError> {
        let roster = |at_ms: u64| {
            let slot = BudgetSlot::at(at_ms);
            let key = ItemKey::new(
                keys::address_roster_home(address, api),
                keys::budget_roster_hour(slot.hour),
            );
            let bytes = budget_bytes(&key, at_ms);
            Touch::new(key, bytes)
        };
        let count = || async {
            let mark = Touch::new(ItemKey::of(tenant, keys::asking_mark(api)), 60);
            self.store.write(Kind::UpdateItem, mark).await?;
            if self
                .windows
                .count_on_roster(tenant, address, api, now_ms_at)
            {
                self.store
                    .write(Kind::UpdateItem, roster(now_ms_at))
                    .await?;
            }
            Ok(())
        };
        let read = || async {
            let before = now_ms_at.saturating_sub(60_000);
            self.store
                .get(roster(before), Consistency::Eventual)
                .await?;
            Ok(self.windows.asked_in(address, api, minute_of(before)))
        };
        let asking = (tenant, address, api);
        asking_through(&self.rosters, asking, minute_of(now_ms_at), count, read).await
    }
}

impl MeteredBudget {
    /// One `UpdateItem` of a budget shard's item, metered.
    async fn update_shard(&self, key: ItemKey, now_ms: u64) -> Result<(), StoreError> {
        let bytes = budget_bytes(&key, now_ms);
        self.store
            .write(Kind::UpdateItem, Touch::new(key, bytes))
            .await
    }
}

fn budget_key(holder: Holder<'_>, api: &str, shard: u32, hour: u64) -> ItemKey {
    match holder {
        Holder::Tenant(tenant) => ItemKey::budget(tenant, api, shard, hour),
        Holder::Address(address) => ItemKey::address_budget(address, api, shard, hour),
    }
}

#[async_trait::async_trait]
impl WeComBudget for MeteredBudget {
    async fn spend(
        &self,
        tenant: &TenantId,
        api: &str,
        now_ms_at: u64,
    ) -> Result<Spend, StoreError> {
        let hour = BudgetSlot::at(now_ms_at).hour;
        spend_layered(
            &self.layers,
            tenant,
            self.windows.pick(),
            |holder, shard, share| async move {
                self.update_shard(budget_key(holder, api, shard, hour), now_ms_at)
                    .await?;
                Ok(self
                    .windows
                    .spend_shard(holder, api, shard, share, now_ms_at))
            },
            |holder, shard| async move {
                self.update_shard(budget_key(holder, api, shard, hour), now_ms_at)
                    .await?;
                self.windows.refund_shard(holder, api, shard, now_ms_at);
                Ok(())
            },
            |address| self.asking(tenant, address, api, now_ms_at),
        )
        .await
    }

    /// One `UpdateItem` per shard of the tenant's budget, the marker's, and for an hour one more
    /// per shard, as `DynamoBudget::hold` sends them.
    async fn hold(
        &self,
        tenant: &TenantId,
        api: &str,
        now_ms_at: u64,
    ) -> Result<Spend, StoreError> {
        let hour = BudgetSlot::at(now_ms_at).hour;
        let refusal = self.windows.hold(tenant, api, now_ms_at).await?;
        let passes = match refusal {
            Spend::Exhausted {
                window: domain::budget::Window::Hour,
                ..
            } => 2,
            _ => 1,
        };
        for _ in 0..passes {
            for shard in 0..self.layers.tenant.shards() {
                self.update_shard(ItemKey::budget(tenant, api, shard, hour), now_ms_at)
                    .await?;
            }
        }
        self.store
            .write(
                Kind::UpdateItem,
                Touch::new(ItemKey::of(tenant, keys::throttled(api)), 100),
            )
            .await?;
        Ok(refusal)
    }

    fn address_of(&self, tenant: &TenantId) -> String {
        self.layers.egress.address_for(tenant).to_owned()
    }
}

// ------------------------------------------------------------------------ facts

impl MeteredStore {
    fn profile_touch(&self, tenant: &TenantId) -> Touch {
        let bytes = self
            .data
            .stored_profile(tenant)
            .map_or(0, |profile| profile_bytes(tenant, &profile));
        Touch::new(ItemKey::of(tenant, keys::PROFILE), bytes)
    }

    fn code_touch(&self, tenant: &TenantId, code: &CodeId) -> Touch {
        let bytes = self
            .data
            .stored_code(tenant, code)
            .map_or(0, |stored| code_bytes(tenant, code, &stored.code));
        Touch::new(ItemKey::code(tenant, code), bytes)
    }
}

#[async_trait::async_trait]
impl TenantProfiles for MeteredStore {
    async fn profile(&self, tenant: &TenantId) -> Result<Option<TenantProfile>, StoreError> {
        self.get(self.profile_touch(tenant), Consistency::Strong)
            .await?;
        self.data.profile(tenant).await
    }
}

#[async_trait::async_trait]
impl AddLedger for MeteredStore {
    async fn count_add(&self, add: &AddFact, now_ms_at: u64) -> Result<CountOutcome, StoreError> {
        let mut touches = vec![Touch::new(claim_key(add), add_claim_bytes(add))];
        touches.extend(add_counter_keys(add).into_iter().map(|(key, daily)| {
            let bytes = counter_bytes(&key, daily);
            Touch::new(key, bytes)
        }));
        self.transact(touches).await?;
        let outcome = self.data.count_add(add, now_ms_at).await?;
        if matches!(outcome, CountOutcome::Counted { .. }) {
            self.trace.add_counted(&add.external_user, now_ms());
        }
        Ok(outcome)
    }

    async fn record_ignored(&self, tenant: &TenantId, kind: &str) -> Result<(), StoreError> {
        let key = ItemKey::of(tenant, keys::ignored(kind));
        let bytes = Size::of(&key).n("events", 1_000).bytes();
        self.write(Kind::UpdateItem, Touch::new(key, bytes)).await?;
        self.data.record_ignored(tenant, kind).await
    }
}

#[async_trait::async_trait]
impl QuotaLedger for MeteredStore {
    async fn code_config(
        &self,
        tenant: &TenantId,
        code: &CodeId,
    ) -> Result<Option<CodeConfig>, StoreError> {
        self.get(self.code_touch(tenant, code), Consistency::Strong)
            .await?;
        self.data.code_config(tenant, code).await
    }

    async fn counts(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        staff: &StaffId,
        day: &str,
    ) -> Result<AddCounts, StoreError> {
        let counts = self.data.counts(tenant, code, staff, day).await?;
        let counters = [
            (
                keys::adds_today_on_code(day, code, staff),
                counts.on_code,
                true,
            ),
            (
                keys::adds_today_all_codes(day, staff),
                counts.all_codes,
                true,
            ),
            (keys::adds_total(code, staff), counts.on_code_total, false),
        ];
        let touches = counters
            .into_iter()
            .map(|(counter, count, daily)| {
                let key = ItemKey::of(tenant, counter.sk);
                let bytes = if count > 0 {
                    counter_bytes(&key, daily)
                } else {
                    0
                };
                Touch::new(key, bytes)
            })
            .collect();
        self.batch_get(touches).await?;
        Ok(counts)
    }

    async fn claim_limit(&self, claim: &LimitClaim) -> Result<ClaimOutcome, StoreError> {
        let entry = open_claim_index_key(claim, claim.lease_until_ms);
        let touch = indexed(
            Touch::new(limit_key(claim), limit_claim_bytes(claim)),
            entry,
        );
        self.write(Kind::PutItem, touch).await?;
        self.data.claim_limit(claim).await
    }

    async fn mark_notified(&self, claim: &LimitClaim, codes: usize) -> Result<(), StoreError> {
        let entry = open_claim_index_key(claim, claim.lease_until_ms);
        let touch = indexed(
            Touch::new(limit_key(claim), limit_claim_bytes(claim)),
            entry,
        );
        self.write(Kind::UpdateItem, touch).await?;
        self.data.mark_notified(claim, codes).await
    }

    async fn stale_claims(
        &self,
        now_ms_at: u64,
        limit: usize,
    ) -> Result<Vec<LimitClaim>, StoreError> {
        let stale = self.data.stale_claims(now_ms_at, limit).await?;
        let bytes: usize = stale
            .iter()
            .map(|claim| {
                let entry = open_claim_index_key(claim, claim.lease_until_ms);
                index_entry_bytes(&entry, &limit_key(claim))
            })
            .sum();
        let start = ItemKey::new(keys::OPEN_CLAIMS, format!("{now_ms_at:013}"));
        self.query(start, bytes, Consistency::Eventual, Some(GSI1))
            .await?;
        let touches = stale
            .iter()
            .map(|claim| Touch::new(limit_key(claim), limit_claim_bytes(claim)))
            .collect();
        self.batch_get(touches).await?;
        Ok(stale)
    }

    async fn take_over(
        &self,
        claim: &LimitClaim,
        owner: &str,
        lease_until_ms: u64,
    ) -> Result<bool, StoreError> {
        let touch = Touch::new(limit_key(claim), limit_claim_bytes(claim));
        let touch = indexed(touch, open_claim_index_key(claim, claim.lease_until_ms));
        let touch = indexed(touch, open_claim_index_key(claim, lease_until_ms));
        self.write(Kind::UpdateItem, touch).await?;
        self.data.take_over(claim, owner, lease_until_ms).await
    }
}

#[async_trait::async_trait]
impl StaffLedger for MeteredStore {
    async fn set_employment(
        &self,
        tenant: &TenantId,
        staff: &StaffId,
        employment: Employment,
        at_ms: u64,
    ) -> Result<bool, StoreError> {
        let mut touch = self.staff_touch(tenant, staff, 0);
        if employment == Employment::Resigned {
            let entry = ItemKey::new(
                keys::RESIGNED_STAFF,
                keys::resigned_index_sort(at_ms, tenant, staff),
            );
            touch = indexed(touch, entry);
        }
        self.write(Kind::UpdateItem, touch).await?;
        self.data
            .set_employment(tenant, staff, employment, at_ms)
            .await
    }

    async fn rename_staff(
        &self,
        tenant: &TenantId,
        from: &StaffId,
        to: &StaffId,
        at_ms: u64,
    ) -> Result<Vec<CodeId>, StoreError> {
        let codes = StaffLedger::codes_of_staff(&self.data, tenant, from).await?;
        self.meter_codes_of_staff(tenant, from, &codes).await?;
        let old = self.staff_touch(tenant, from, 0);
        let mut requests = vec![(
            Kind::GetItem,
            Request::Get(old.clone(), Consistency::Strong),
        )];
        let departments = self.data.stored_staff_departments(tenant, from);
        if let Some(facts) = self.data.stored_staff(tenant, from) {
            let mut moved = Touch::new(staff_key(tenant, to), old.bytes);
            // The new item keeps the schedule, so it is a new entry of gsi2.
            if let Some(schedule) = &facts.schedule {
                let bytes = schedule_entry_bytes(tenant, to, schedule);
                moved = moved.with_index(GSI2, schedule_index_key(tenant, to), bytes);
            }
            requests.push((Kind::PutItem, Request::Write(moved)));
            requests.extend(self.staff_departments_requests(tenant, to, &departments));
        }
        requests.push((
            Kind::GetItem,
            Request::Get(self.profile_touch(tenant), Consistency::Strong),
        ));
        let timezone = self
            .data
            .stored_profile(tenant)
            .map(|profile| profile.timezone)
            .unwrap_or_default();
        let day = domain::tenants::tenant_day(at_ms, timezone);
        let mut counters = vec![(keys::adds_today_all_codes(&day, from), true)];
        for code in &codes {
            counters.push((keys::adds_today_on_code(&day, code, from), true));
            counters.push((keys::adds_total(code, from), false));
        }
        for (counter, daily) in counters {
            let key = ItemKey::of(tenant, counter.sk);
            let bytes = counter_bytes(&key, daily);
            requests.push((
                Kind::GetItem,
                Request::Get(Touch::new(key.clone(), bytes), Consistency::Strong),
            ));
        }
        for code in &codes {
            let Some(stored) = self.data.stored_code(tenant, code) else {
                continue;
            };
            let touch = Touch::new(
                ItemKey::code(tenant, code),
                code_bytes(tenant, code, &stored.code),
            );
            requests.push((Kind::GetItem, Request::Get(touch, Consistency::Strong)));
            let config = &stored.code.config;
            if config.members.contains(from) || config.fallback.contains(from) {
                let entries = vec![
                    ItemKey::of(tenant, keys::seat(from, code)),
                    ItemKey::of(tenant, keys::seat(to, code)),
                ];
                requests.extend(self.put_code_requests(tenant, code, &stored.code, entries));
            }
        }
        requests.extend(self.staff_departments_requests(tenant, from, &BTreeSet::new()));
        requests.push((Kind::UpdateItem, Request::Write(old)));
        self.send_all(requests).await?;
        self.data.rename_staff(tenant, from, to, at_ms).await
    }

    async fn set_staff_departments(
        &self,
        tenant: &TenantId,
        staff: &StaffId,
        departments: &BTreeSet<DepartmentId>,
        at_ms: u64,
    ) -> Result<Vec<DepartmentId>, StoreError> {
        let requests = self.staff_departments_requests(tenant, staff, departments);
        self.send_all(requests).await?;
        self.data
            .set_staff_departments(tenant, staff, departments, at_ms)
            .await
    }

    async fn set_department_members(
        &self,
        tenant: &TenantId,
        department: &DepartmentId,
        members: &BTreeSet<StaffId>,
        at_ms: u64,
    ) -> Result<Vec<StaffId>, StoreError> {
        let before = self
            .data
            .stored_department(tenant, department)
            .unwrap_or_default();
        let owner = department_key(tenant, department);
        let owner_touch = Touch::new(
            owner.clone(),
            department_bytes(tenant, department, &before)
                .max(department_bytes(tenant, department, members)),
        );
        let mut requests = vec![
            (
                Kind::GetItem,
                Request::Get(owner_touch.clone(), Consistency::Strong),
            ),
            (
                Kind::Query,
                Request::Query {
                    start: ItemKey::of(tenant, keys::owed_of(&owner.sk)),
                    bytes: 0,
                    consistency: Consistency::Strong,
                    index: None,
                },
            ),
        ];
        let changed: Vec<Touch> = before
            .symmetric_difference(members)
            .map(|staff| self.staff_touch(tenant, staff, 0))
            .collect();
        if changed.len() < TRANSACTION_ITEMS {
            let mut transaction = vec![owner_touch];
            transaction.extend(changed);
            requests.push((
                Kind::TransactWriteItems,
                Request::TransactWrite(transaction),
            ));
        } else {
            let chunks: Vec<&[Touch]> = changed.chunks(WRITES_PER_TRANSACTION).collect();
            let chunk_key = |i: usize| ItemKey::of(tenant, keys::owed(&owner.sk, i));
            let mut first = vec![owner_touch];
            for (i, chunk) in chunks.iter().enumerate() {
                let key = chunk_key(i);
                let bytes = Size::of(&key).n("version", 10).bytes()
                    + "owed_put".len()
                    + chunk.iter().map(|t| t.key.sk.len()).sum::<usize>();
                first.push(Touch::new(key, bytes));
            }
            requests.push((Kind::TransactWriteItems, Request::TransactWrite(first)));
            for (i, chunk) in chunks.iter().enumerate() {
                let mut landing = chunk.to_vec();
                let key = chunk_key(i);
                let bytes = key_only_bytes(&key);
                landing.push(Touch::new(key, bytes));
                requests.push((Kind::TransactWriteItems, Request::TransactWrite(landing)));
            }
        }
        self.send_all(requests).await?;
        self.data
            .set_department_members(tenant, department, members, at_ms)
            .await
    }

    async fn codes_of_staff(
        &self,
        tenant: &TenantId,
        staff: &StaffId,
    ) -> Result<Vec<CodeId>, StoreError> {
        let codes = StaffLedger::codes_of_staff(&self.data, tenant, staff).await?;
        self.meter_codes_of_staff(tenant, staff, &codes).await?;
        Ok(codes)
    }

    async fn codes_listing_department(
        &self,
        tenant: &TenantId,
        department: &DepartmentId,
    ) -> Result<Vec<CodeId>, StoreError> {
        let codes = self
            .data
            .codes_listing_department(tenant, department)
            .await?;
        self.meter_department_seats(tenant, department, codes.len())
            .await?;
        Ok(codes)
    }
}

// ------------------------------------------------------------------------ the schedule tick

impl MeteredStore {
    async fn cursor_write(&self, owner: &str) -> Result<(), StoreError> {
        let touch = Touch::new(cursor_key(), cursor_bytes(owner));
        self.write(Kind::UpdateItem, touch).await
    }
}

#[async_trait::async_trait]
impl DueIndex for MeteredStore {
    async fn acquire(
        &self,
        owner: &str,
        now_ms_at: u64,
        lease_until_ms: u64,
    ) -> Result<CursorLease, StoreError> {
        self.cursor_write(owner).await?;
        DueIndex::acquire(&self.data, owner, now_ms_at, lease_until_ms).await
    }

    async fn advance(
        &self,
        owner: &str,
        from: Option<Minute>,
        to: Minute,
    ) -> Result<bool, StoreError> {
        self.cursor_write(owner).await?;
        self.data.advance(owner, from, to).await
    }

    async fn release(&self, owner: &str) -> Result<(), StoreError> {
        self.cursor_write(owner).await?;
        DueIndex::release(&self.data, owner).await
    }

    /// The adapter queries the minute's 8 shards together.
    async fn due_in(&self, minute: Minute) -> Result<Vec<Due>, StoreError> {
        let due = self.data.due_in(minute).await?;
        let mut bytes = vec![0; keys::DUE_SHARDS as usize];
        for item in &due {
            let shard = keys::due_shard(&item.tenant, &item.subject) as usize;
            let entry = due_index_key(&item.tenant, &item.subject, minute);
            bytes[shard] += index_entry_bytes(&entry, &due_key(&item.tenant, &item.subject));
        }
        let queries = bytes.into_iter().enumerate().map(|(shard, bytes)| {
            let shard = u32::try_from(shard).unwrap_or_default();
            let start = ItemKey::new(keys::due_bucket(minute, shard), "");
            self.query(start, bytes, Consistency::Eventual, Some(GSI1))
        });
        futures::future::try_join_all(queries).await?;
        Ok(due)
    }

    async fn reschedule(
        &self,
        due: &Due,
        next: Option<Minute>,
        handled_through_ms: u64,
    ) -> Result<(), StoreError> {
        let (tenant, subject) = (&due.tenant, &due.subject);
        let bytes = due_bytes(tenant, subject, due.minute);
        let old = due_index_key(tenant, subject, due.minute);
        let touch = indexed(Touch::new(due_key(tenant, subject), bytes), old);
        match next {
            Some(next) => {
                let touch = indexed(touch, due_index_key(tenant, subject, next));
                self.write(Kind::UpdateItem, touch).await?;
            }
            None => self.write(Kind::DeleteItem, touch).await?,
        }
        self.data.reschedule(due, next, handled_through_ms).await
    }
}

#[async_trait::async_trait]
impl ScheduleFacts for MeteredStore {
    async fn timezone(&self, tenant: &TenantId) -> Result<Option<Timezone>, StoreError> {
        self.get(self.profile_touch(tenant), Consistency::Strong)
            .await?;
        self.data.timezone(tenant).await
    }

    /// The adapter's one query of `gsi2` under the tenant's schedules partition (eventually
    /// consistent, as an index read is): only staff with a schedule have an entry there, each
    /// its keys and the projected schedule, so the staff without one cost nothing.
    async fn schedules(
        &self,
        tenant: &TenantId,
    ) -> Result<Vec<(StaffId, WeeklySchedule)>, StoreError> {
        let schedules = self.data.schedules(tenant).await?;
        let bytes: usize = schedules
            .iter()
            .map(|(staff, schedule)| schedule_entry_bytes(tenant, staff, schedule))
            .sum();
        let start = ItemKey::new(keys::schedules_index(tenant), "");
        self.query(start, bytes, Consistency::Eventual, Some(GSI2))
            .await?;
        Ok(schedules)
    }

    async fn limits_reached(
        &self,
        tenant: &TenantId,
        first_day: &str,
        last_day: &str,
    ) -> Result<Vec<LimitReached>, StoreError> {
        let reached = self
            .data
            .limits_reached(tenant, first_day, last_day)
            .await?;
        let bytes: usize = reached
            .iter()
            .map(|claim| {
                let key = ItemKey::of(
                    tenant,
                    keys::limit_reached(last_day, claim.limit, &claim.staff, claim.code.as_ref()),
                );
                // A claim item: owner (an add's business key), times, its index keys.
                Size::of(&key).bytes() + 260
            })
            .sum();
        self.query_tenant(tenant, &keys::limits_reached_on(first_day), bytes)
            .await?;
        Ok(reached)
    }
}

// ------------------------------------------------------------------------ fan-out

#[async_trait::async_trait]
impl CodeIndex for MeteredStore {
    async fn codes_of(
        &self,
        tenant: &TenantId,
        source: &Source,
    ) -> Result<Vec<CodeId>, StoreError> {
        match source {
            Source::Staff { staff } => StaffLedger::codes_of_staff(self, tenant, staff).await,
            Source::Department { department } => {
                StaffLedger::codes_listing_department(self, tenant, department).await
            }
            Source::Tenant => {
                let codes = self.data.codes_of(tenant, source).await?;
                // Each code has a partition key of its own: the tenant's codes are listed by
                // `gsi1` (keys only), and a fan-out needs their ids alone.
                let bytes: usize = codes
                    .iter()
                    .map(|code| code_index_bytes(tenant, code))
                    .sum();
                let start = ItemKey::new(keys::codes_index(tenant), "");
                self.query(start, bytes, Consistency::Eventual, Some(GSI1))
                    .await?;
                Ok(codes)
            }
        }
    }
}

#[async_trait::async_trait]
impl FanOutMarks for MeteredStore {
    async fn mark_fan_out(
        &self,
        fan_out: &FanOut,
        why: DirtyWhy,
        at_ms: u64,
    ) -> Result<(), StoreError> {
        let bytes = fan_out_mark_bytes(fan_out, at_ms);
        let mut touch = Touch::new(fan_out_key(fan_out), bytes);
        if self
            .data
            .fan_out_mark(&fan_out.tenant, &fan_out.mark_key())
            .is_none()
        {
            touch = indexed(touch, fan_out_index_key(fan_out, at_ms));
        }
        self.write(Kind::UpdateItem, touch).await?;
        self.data.mark_fan_out(fan_out, why, at_ms).await
    }

    async fn clear_fan_out(&self, fan_out: &FanOut, began_ms: u64) -> Result<bool, StoreError> {
        let mark = self.data.fan_out_mark(&fan_out.tenant, &fan_out.mark_key());
        let bytes = mark
            .as_ref()
            .map_or(0, |mark| fan_out_mark_bytes(fan_out, mark.marked_at_ms));
        let mut touch = Touch::new(fan_out_key(fan_out), bytes);
        if let Some(mark) = mark.filter(|mark| mark.marked_at_ms < began_ms) {
            touch = indexed(touch, fan_out_index_key(fan_out, mark.due_at_ms));
        }
        self.write(Kind::DeleteItem, touch).await?;
        self.data.clear_fan_out(fan_out, began_ms).await
    }
}

// ------------------------------------------------------------------------ the archive

#[async_trait::async_trait]
impl CallbackArchive for MeteredStore {
    async fn keep(
        &self,
        message: &InboxMessage,
        group_id: &str,
        expires_at_secs: u64,
    ) -> Result<(), StoreError> {
        let touch = Touch::new(archive_key(message), archive_bytes(message, group_id));
        self.write(Kind::PutItem, touch).await?;
        self.data.keep(message, group_id, expires_at_secs).await
    }

    /// One query per archive day read, each on the messages it found there.
    async fn page(
        &self,
        selection: &Selection,
        after: Option<&str>,
        limit: usize,
        now_secs: u64,
    ) -> Result<(Vec<ArchivedCallback>, Option<String>), StoreError> {
        let (callbacks, next) = self.data.page(selection, after, limit, now_secs).await?;
        let first_day = after
            .and_then(|a| a.split_once('|'))
            .and_then(|(day, _)| day.parse::<u64>().ok())
            .unwrap_or(selection.from_ms / DAY_MS);
        let last_day = match (&next, callbacks.last()) {
            (Some(_), Some(last)) => last.message.received_at_ms / DAY_MS,
            _ => selection.to_ms / DAY_MS,
        };
        let mut by_day: BTreeMap<u64, usize> = BTreeMap::new();
        for callback in &callbacks {
            let day = callback.message.received_at_ms / DAY_MS;
            *by_day.entry(day).or_default() += archive_bytes(&callback.message, "");
        }
        for day in first_day..=last_day.max(first_day) {
            let start = ItemKey::new(keys::archive(&selection.tenant, day), "");
            let bytes = by_day.get(&day).copied().unwrap_or(0);
            self.query(start, bytes, Consistency::Eventual, None)
                .await?;
        }
        Ok((callbacks, next))
    }
}

// ------------------------------------------------------------------------ the sweep

fn sweep_lease_key() -> ItemKey {
    ItemKey::new(keys::SWEEP_PK, keys::SWEEP_SK)
}

fn tenant_item_key(tenant: &TenantId, sk: &str) -> ItemKey {
    ItemKey::of(tenant, sk)
}

fn drift_code_bytes(key: &ItemKey) -> usize {
    ["found", "latest_differs", "repaired"]
        .into_iter()
        .fold(Size::of(key), |size, name| size.b(name))
        .n(keys::EXPIRES_AT, SECS)
        .bytes()
}

fn drift_report_bytes(key: &ItemKey) -> usize {
    ["read", "stale_confirmed"]
        .into_iter()
        .fold(Size::of(key), |size, name| size.n(name, 10_000))
        .n(keys::EXPIRES_AT, SECS)
        .bytes()
}

fn guard_bytes(key: &ItemKey) -> usize {
    Size::of(key)
        .n("tripped_at_ms", MS)
        .n("sampled", 1_000)
        .n("differing", 1_000)
        .bytes()
}

fn intent_key(intent: &CreationIntent) -> ItemKey {
    ItemKey::of(
        &intent.tenant,
        keys::creation_intent(&intent.code, intent.started_at_ms),
    )
}

fn intent_index_key(intent: &CreationIntent) -> ItemKey {
    ItemKey::new(
        keys::INTENTS,
        keys::intent_index_sort(intent.started_at_ms, &intent.tenant, &intent_key(intent).sk),
    )
}

fn resigned_index_key(tenant: &TenantId, staff: &StaffId, at_ms: u64) -> ItemKey {
    ItemKey::new(
        keys::RESIGNED_STAFF,
        keys::resigned_index_sort(at_ms, tenant, staff),
    )
}

impl MeteredStore {
    async fn sweep_lease_write(&self, owner: &str) -> Result<(), StoreError> {
        let key = sweep_lease_key();
        let bytes = Size::of(&key)
            .s("owner", owner.len())
            .n("lease_until_ms", MS)
            .s("after_tenant", 16)
            .bytes();
        self.write(Kind::UpdateItem, Touch::new(key, bytes)).await
    }

    /// A `gsi1` query of `count` entries of `partition`, each like `entry` over `table`.
    async fn index_query(
        &self,
        partition: &str,
        entries: impl IntoIterator<Item = (ItemKey, ItemKey)>,
    ) -> Result<(), StoreError> {
        let bytes = entries
            .into_iter()
            .map(|(entry, table)| index_entry_bytes(&entry, &table))
            .sum();
        let start = ItemKey::new(partition, "");
        self.query(start, bytes, Consistency::Eventual, Some(GSI1))
            .await
    }
}

#[async_trait::async_trait]
impl SweepRuns for MeteredStore {
    async fn acquire(
        &self,
        owner: &str,
        now_ms_at: u64,
        lease_until_ms: u64,
    ) -> Result<Option<Option<TenantId>>, StoreError> {
        self.sweep_lease_write(owner).await?;
        SweepRuns::acquire(&self.data, owner, now_ms_at, lease_until_ms).await
    }

    async fn save_cursor(&self, owner: &str, after: Option<&TenantId>) -> Result<bool, StoreError> {
        self.sweep_lease_write(owner).await?;
        self.data.save_cursor(owner, after).await
    }

    async fn release(&self, owner: &str) -> Result<(), StoreError> {
        self.sweep_lease_write(owner).await?;
        SweepRuns::release(&self.data, owner).await
    }
}

#[async_trait::async_trait]
impl DirtyIndex for MeteredStore {
    /// One `gsi1` query per dirty shard (4), then one batch read of the marks found.
    async fn due_marks(&self, now_ms_at: u64, limit: usize) -> Result<Vec<DirtyMark>, StoreError> {
        let marks = self.data.due_marks(now_ms_at, limit).await?;
        for shard in 0..keys::DIRTY_SHARDS {
            let partition = keys::dirty_shard(shard);
            let entries = marks
                .iter()
                .map(|mark| {
                    let entry = dirty_index_key(&mark.tenant, &mark.code, mark.due_at_ms);
                    (entry, dirty_key(&mark.tenant, &mark.code))
                })
                .filter(|(entry, _)| entry.pk == partition);
            self.index_query(&partition, entries).await?;
        }
        let touches = marks
            .iter()
            .map(|mark| {
                Touch::new(
                    dirty_key(&mark.tenant, &mark.code),
                    dirty_bytes(&mark.tenant, &mark.code),
                )
            })
            .collect();
        self.batch_get(touches).await?;
        Ok(marks)
    }

    async fn mark_suspect(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        suspect: StaleSuspect,
        at_ms: u64,
        due_ms: u64,
    ) -> Result<(), StoreError> {
        let bytes = Size(dirty_bytes(tenant, code))
            .n("suspect_sample_read", 1_000)
            .n("suspect_sample_drifted", 1_000)
            .bytes();
        let mut touch = Touch::new(dirty_key(tenant, code), bytes);
        if self.data.dirty_mark(tenant, code).is_none() {
            touch = indexed(touch, dirty_index_key(tenant, code, due_ms));
        }
        self.write(Kind::UpdateItem, touch).await?;
        self.data
            .mark_suspect(tenant, code, suspect, at_ms, due_ms)
            .await
    }

    async fn resync_sent(
        &self,
        mark: &DirtyMark,
        resyncs: u32,
        next_due_ms: u64,
    ) -> Result<(), StoreError> {
        let (tenant, code) = (&mark.tenant, &mark.code);
        let touch = Touch::new(dirty_key(tenant, code), dirty_bytes(tenant, code));
        let touch = indexed(touch, dirty_index_key(tenant, code, mark.due_at_ms));
        let touch = indexed(touch, dirty_index_key(tenant, code, next_due_ms));
        self.write(Kind::UpdateItem, touch).await?;
        self.data.resync_sent(mark, resyncs, next_due_ms).await
    }

    async fn drop_mark(&self, mark: &DirtyMark) -> Result<(), StoreError> {
        let (tenant, code) = (&mark.tenant, &mark.code);
        let touch = Touch::new(dirty_key(tenant, code), dirty_bytes(tenant, code));
        let touch = indexed(touch, dirty_index_key(tenant, code, mark.due_at_ms));
        self.write(Kind::DeleteItem, touch).await?;
        self.data.drop_mark(mark).await
    }
}

#[async_trait::async_trait]
impl FanOutIndex for MeteredStore {
    /// One `gsi1` query of `FANOUT_MARKS`, then one batch read of the marks found.
    async fn due_fan_outs(
        &self,
        now_ms_at: u64,
        limit: usize,
    ) -> Result<Vec<FanOutMark>, StoreError> {
        let marks = self.data.due_fan_outs(now_ms_at, limit).await?;
        let entries = marks.iter().map(|mark| {
            (
                fan_out_index_key(&mark.fan_out, mark.due_at_ms),
                fan_out_key(&mark.fan_out),
            )
        });
        self.index_query(keys::FAN_OUT_MARKS, entries).await?;
        let touches = marks
            .iter()
            .map(|mark| {
                Touch::new(
                    fan_out_key(&mark.fan_out),
                    fan_out_mark_bytes(&mark.fan_out, mark.marked_at_ms),
                )
            })
            .collect();
        self.batch_get(touches).await?;
        Ok(marks)
    }

    async fn fan_out_resent(
        &self,
        mark: &FanOutMark,
        resends: u32,
        next_due_ms: u64,
    ) -> Result<(), StoreError> {
        let fan_out = &mark.fan_out;
        let touch = Touch::new(
            fan_out_key(fan_out),
            fan_out_mark_bytes(fan_out, mark.marked_at_ms),
        );
        let touch = indexed(touch, fan_out_index_key(fan_out, mark.due_at_ms));
        let touch = indexed(touch, fan_out_index_key(fan_out, next_due_ms));
        self.write(Kind::UpdateItem, touch).await?;
        self.data.fan_out_resent(mark, resends, next_due_ms).await
    }
}

#[async_trait::async_trait]
impl TenantRegistry for MeteredStore {
    /// One `gsi1` query of `TENANTS` (every profile's entry), from after `after`.
    async fn tenants_after(
        &self,
        after: Option<&TenantId>,
        limit: usize,
    ) -> Result<Vec<TenantId>, StoreError> {
        let tenants = self.data.tenants_after(after, limit).await?;
        let entries = tenants.iter().map(|tenant| {
            (
                ItemKey::new(keys::TENANTS_INDEX, tenant.as_str()),
                tenant_item_key(tenant, keys::PROFILE),
            )
        });
        self.index_query(keys::TENANTS_INDEX, entries).await?;
        Ok(tenants)
    }
}

#[async_trait::async_trait]
impl DriftLedger for MeteredStore {
    async fn sample_cursor(&self, tenant: &TenantId) -> Result<Option<CodeId>, StoreError> {
        let cursor = self.data.sample_cursor(tenant).await?;
        let key = tenant_item_key(tenant, keys::DRIFT_SAMPLE);
        let bytes = cursor.as_ref().map_or(0, |code| {
            Size::of(&key).s("after_code", code.as_str().len()).bytes()
        });
        self.get(Touch::new(key, bytes), Consistency::Strong)
            .await?;
        Ok(cursor)
    }

    async fn save_sample_cursor(
        &self,
        tenant: &TenantId,
        after: &CodeId,
    ) -> Result<(), StoreError> {
        let key = tenant_item_key(tenant, keys::DRIFT_SAMPLE);
        let bytes = Size::of(&key).s("after_code", after.as_str().len()).bytes();
        self.write(Kind::PutItem, Touch::new(key, bytes)).await?;
        self.data.save_sample_cursor(tenant, after).await
    }

    /// One query of the tenant's codes in `gsi1` (keys only, eventually consistent), from
    /// after `after`: the ids are all the sample keeps.
    async fn codes_after(
        &self,
        tenant: &TenantId,
        after: Option<&CodeId>,
        limit: usize,
    ) -> Result<Vec<CodeId>, StoreError> {
        let codes = self.data.codes_after(tenant, after, limit).await?;
        let bytes: usize = codes
            .iter()
            .map(|code| code_index_bytes(tenant, code))
            .sum();
        let start = ItemKey::new(
            keys::codes_index(tenant),
            after.map_or("", |after| after.as_str()),
        );
        self.send(
            Kind::Query,
            Request::Query {
                start,
                bytes,
                consistency: Consistency::Eventual,
                index: Some(GSI1.to_owned()),
            },
        )
        .await?;
        Ok(codes)
    }

    async fn add_to_report(
        &self,
        tenant: &TenantId,
        day: &str,
        counts: &DriftCounts,
    ) -> Result<(), StoreError> {
        let key = tenant_item_key(tenant, &keys::drift_report(day));
        let bytes = drift_report_bytes(&key);
        self.write(Kind::UpdateItem, Touch::new(key, bytes)).await?;
        self.data.add_to_report(tenant, day, counts).await
    }

    /// One `UpdateItem` of the code's item (refused without writing when it agrees and the
    /// code has none: still a write unit).
    async fn record_read(
        &self,
        tenant: &TenantId,
        day: &str,
        code: &CodeId,
        differs: bool,
    ) -> Result<(), StoreError> {
        let key = ItemKey::of(tenant, keys::drift_code(day, code));
        let bytes = drift_code_bytes(&key);
        self.write(Kind::UpdateItem, Touch::new(key, bytes)).await?;
        self.data.record_read(tenant, day, code, differs).await
    }

    /// The report's item, then a query of its codes' items.
    async fn report(&self, tenant: &TenantId, day: &str) -> Result<DriftReport, StoreError> {
        let key = tenant_item_key(tenant, &keys::drift_report(day));
        let bytes = drift_report_bytes(&key);
        self.get(Touch::new(key, bytes), Consistency::Strong)
            .await?;
        let report = self.data.report(tenant, day).await?;
        let codes = ItemKey::of(tenant, keys::drift_codes(day));
        let per_code = drift_code_bytes(&codes);
        let bytes = per_code * usize::try_from(report.differing + report.repaired).unwrap_or(0);
        self.query(codes, bytes, Consistency::Strong, None).await?;
        Ok(report)
    }

    async fn guard(&self, tenant: &TenantId) -> Result<Option<GuardTrip>, StoreError> {
        let guard = self.data.guard(tenant).await?;
        let key = tenant_item_key(tenant, keys::DRIFT_GUARD);
        let bytes = guard.as_ref().map_or(0, |_| guard_bytes(&key));
        self.get(Touch::new(key, bytes), Consistency::Strong)
            .await?;
        Ok(guard)
    }

    async fn trip_guard(&self, tenant: &TenantId, trip: &GuardTrip) -> Result<(), StoreError> {
        let key = tenant_item_key(tenant, keys::DRIFT_GUARD);
        let bytes = guard_bytes(&key);
        self.write(Kind::PutItem, Touch::new(key, bytes)).await?;
        self.data.trip_guard(tenant, trip).await
    }

    async fn confirm_guard(
        &self,
        tenant: &TenantId,
        tripped_at_ms: u64,
        at_ms: u64,
    ) -> Result<bool, StoreError> {
        let key = tenant_item_key(tenant, keys::DRIFT_GUARD);
        let bytes = guard_bytes(&key);
        self.write(Kind::UpdateItem, Touch::new(key, bytes)).await?;
        self.data.confirm_guard(tenant, tripped_at_ms, at_ms).await
    }

    async fn resume(&self, tenant: &TenantId) -> Result<bool, StoreError> {
        let key = tenant_item_key(tenant, keys::DRIFT_GUARD);
        let bytes = guard_bytes(&key);
        self.write(Kind::DeleteItem, Touch::new(key, bytes)).await?;
        self.data.resume(tenant).await
    }
}

#[async_trait::async_trait]
impl CreationIntents for MeteredStore {
    async fn record_intent(&self, intent: &CreationIntent) -> Result<(), StoreError> {
        let key = intent_key(intent);
        let index = intent_index_key(intent);
        let bytes = index_entry_bytes(&index, &key);
        let touch = indexed(Touch::new(key, bytes), index);
        self.write(Kind::PutItem, touch).await?;
        self.data.record_intent(intent).await
    }

    async fn clear_intent(&self, intent: &CreationIntent) -> Result<(), StoreError> {
        let key = intent_key(intent);
        let index = intent_index_key(intent);
        let bytes = index_entry_bytes(&index, &key);
        let touch = indexed(Touch::new(key, bytes), index);
        self.write(Kind::DeleteItem, touch).await?;
        self.data.clear_intent(intent).await
    }

    /// One `gsi1` query: the intent's tenant, code and time are all in its keys.
    async fn stale_intents(
        &self,
        before_ms: u64,
        after: Option<&CreationIntent>,
        limit: usize,
    ) -> Result<Vec<CreationIntent>, StoreError> {
        let intents = self.data.stale_intents(before_ms, after, limit).await?;
        let entries = intents
            .iter()
            .map(|intent| (intent_index_key(intent), intent_key(intent)));
        self.index_query(keys::INTENTS, entries).await?;
        Ok(intents)
    }
}

#[async_trait::async_trait]
impl LinkRetirements for MeteredStore {
    /// One `gsi1` query of `STAFF#RESIGNED`, then each staff item read (strongly).
    async fn resigned_before(
        &self,
        before_ms: u64,
        limit: usize,
    ) -> Result<Vec<LeavingStaff>, StoreError> {
        let leaving = self.data.resigned_before(before_ms, limit).await?;
        let entries = leaving.iter().map(|staff| {
            (
                resigned_index_key(&staff.tenant, &staff.staff, before_ms),
                staff_key(&staff.tenant, &staff.staff),
            )
        });
        self.index_query(keys::RESIGNED_STAFF, entries).await?;
        for staff in &leaving {
            let link = if staff.link_id.is_some() || staff.retiring_link_id.is_some() {
                LINK_BYTES
            } else {
                0
            };
            let touch = self.staff_touch(&staff.tenant, &staff.staff, link);
            self.get(touch, Consistency::Strong).await?;
        }
        Ok(leaving)
    }

    async fn detach_link(
        &self,
        tenant: &TenantId,
        staff: &StaffId,
        link_id: &str,
    ) -> Result<bool, StoreError> {
        let touch = self.staff_touch(tenant, staff, LINK_BYTES);
        self.write(Kind::UpdateItem, touch).await?;
        self.data.detach_link(tenant, staff, link_id).await
    }

    async fn link_retired(
        &self,
        tenant: &TenantId,
        staff: &StaffId,
        link_id: &str,
    ) -> Result<(), StoreError> {
        let touch = self.staff_touch(tenant, staff, keys::RETIRING_LINK_ID.len() + 40);
        self.write(Kind::UpdateItem, touch).await?;
        self.data.link_retired(tenant, staff, link_id).await
    }

    /// Takes the staff item out of `STAFF#RESIGNED` (its entry removed).
    async fn nothing_to_retire(
        &self,
        tenant: &TenantId,
        staff: &StaffId,
    ) -> Result<(), StoreError> {
        let touch = self.staff_touch(tenant, staff, 0);
        let entry = resigned_index_key(tenant, staff, MS);
        self.write(Kind::UpdateItem, indexed(touch, entry)).await?;
        self.data.nothing_to_retire(tenant, staff).await
    }
}

mod admin;

#[cfg(test)]
mod tests;
