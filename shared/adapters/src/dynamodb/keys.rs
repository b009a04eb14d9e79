//! How items are keyed. A tenant's items live under partition keys that begin with its
//! `TENANT#<t>`: each code, staff member and department has a partition key of its own (its
//! "home", `home`), and what belongs to the tenant as a whole stays under `TENANT#<t>`. Sort
//! keys name the item kind first, so a kind can be read with `begins_with`, and the sort key
//! alone decides an item's home. docs/design/keys.md says why.

use domain::ids::TenantId;
use domain::ids::{CodeId, DepartmentId, StaffId};
use domain::membership::Limit;
use domain::schedules::{Minute, Subject};

pub const PK: &str = "pk";
pub const SK: &str = "sk";
/// TTL attribute: garbage collection of claims, daily counters and history, never correctness.
pub const EXPIRES_AT: &str = "expires_at";

pub fn tenant(tenant: &TenantId) -> String {
    format!("TENANT#{tenant}")
}

/// The partition key an item of `tenant_id` lives under, decided by its sort key `sk`:
/// a code's record, what WeCom accepted, its lease, mark, push log, creation intents, owed
/// index writes and per-code add counters under `TENANT#<t>#CODE#<c>`; a staff member's item,
/// seats and all-codes daily counter under `TENANT#<t>#STAFF#<s>`; a department's members,
/// seats and owed writes under `TENANT#<t>#DEPT#<d>`; each shard of the budget of each WeCom
/// API under `TENANT#<t>#BUDGET#<api>#<shard>` and each shard of the refresh tallies under
/// `TENANT#<t>#STATS#REFRESH#<shard>`, so the items every push and every refresh batch write
/// share no partition key with the tenant's claims and profile, nor a shard with another;
/// everything else under `TENANT#<t>`.
///
/// A prefix that names a kind but no owner (`CODE#`, `PUSHLOG#`) spans many homes and has
/// none: `spans_homes` says so, and such a read goes through an index.
pub fn home(tenant_id: &TenantId, sk: &str) -> String {
    match owner(sk) {
        Some((kind, id)) if !id.is_empty() => format!("{}#{kind}#{id}", tenant(tenant_id)),
        _ => tenant(tenant_id),
    }
}

/// Whether the items under sort-key prefix `prefix` are spread over many homes (the prefix
/// names an owned kind but not its owner).
pub fn spans_homes(prefix: &str) -> bool {
    owner(prefix).is_some_and(|(_, id)| id.is_empty())
}

/// The home of an item of code `code`: `TENANT#t1#CODE#c1`.
pub fn code_home(tenant_id: &TenantId, code_id: &CodeId) -> String {
    home(tenant_id, &code(code_id))
}

/// The home of a staff member's items: `TENANT#t1#STAFF#s1`.
pub fn staff_home(tenant_id: &TenantId, staff_id: &StaffId) -> String {
    home(tenant_id, &staff(staff_id))
}

/// The tenant of any of its homes (`TENANT#t1#CODE#c1` and `TENANT#t1` both name `t1`).
pub fn tenant_of_home(pk: &str) -> Option<&str> {
    let rest = pk.strip_prefix("TENANT#")?;
    Some(rest.split_once('#').map_or(rest, |(tenant, _)| tenant))
}

/// The owner kind (`CODE`, `STAFF`, `DEPT`, `BUDGET`, `STATS`) and owner id a sort key belongs to, if any. Ids
/// never hold `#` (`domain::ids`), so the fields split cleanly.
fn owner(sk: &str) -> Option<(&'static str, &str)> {
    if let Some(rest) = sk.strip_prefix("BUDGET#") {
        // `<api>#<shard>#<hour>`: the owner is the API's shard, two fields.
        return Some(("BUDGET", first_two_fields(rest)));
    }
    if let Some(rest) = sk.strip_prefix("STATS#") {
        // `REFRESH#<shard>#<day>`: the owner is the tally's shard, two fields.
        return Some(("STATS", first_two_fields(rest)));
    }
    let fields: Vec<&str> = sk.split('#').collect();
    match fields.as_slice() {
        ["CODE" | "PUSHED" | "DIRTY" | "PUSHLOG" | "INTENT", code, ..] => Some(("CODE", code)),
        ["ADDS", "TOTAL", code, ..] => Some(("CODE", code)),
        ["ADDS", "DAY", _day, "ALL", staff, ..] => Some(("STAFF", staff)),
        ["ADDS", "DAY", _day, code, ..] => Some(("CODE", code)),
        ["ADDS", ..] => Some(("CODE", "")),
        ["STAFF" | "SEAT", staff, ..] => Some(("STAFF", staff)),
        ["DEPT" | "DSEAT", department, ..] => Some(("DEPT", department)),
        ["OWED", "CODE", code, ..] => Some(("CODE", code)),
        ["OWED", "DEPT", department, ..] => Some(("DEPT", department)),
        ["OWED", ..] => Some(("CODE", "")),
        _ => None,
    }
}

/// `rest` up to its second `#` (`a#b#c` -> `a#b`), or "" when it has fewer than two fields
/// or the second is empty: an owner of two fields, named in full or not at all.
fn first_two_fields(rest: &str) -> &str {
    match rest.match_indices('#').nth(1) {
        Some((at, _)) if !rest[..at].ends_with('#') => &rest[..at],
        _ => "",
    }
}

/// `gsi1` lists a tenant's codes: every code item carries `gsi1pk = TENANT#<t>#CODES` and its
/// code id as `gsi1sk` (the admin API's list and the sweep's walk read it).
pub fn codes_index(tenant_id: &TenantId) -> String {
    format!("{}#CODES", tenant(tenant_id))
}

/// `gsi2` lists a tenant's staff who have a work schedule, with the schedule projected: a staff
/// item with a schedule carries `gsi2pk = TENANT#<t>#SCHEDULES` and its staff id as `gsi2sk`
/// (the schedule tick's one query per tenant).
pub fn schedules_index(tenant_id: &TenantId) -> String {
    format!("{}#SCHEDULES", tenant(tenant_id))
}

pub const GSI2: &str = "gsi2";
pub const GSI2_PK: &str = "gsi2pk";
pub const GSI2_SK: &str = "gsi2sk";

pub const PROFILE: &str = "PROFILE";

/// A paused tenant's pause (`domain::tenants::TenantPause`), beside its profile; listed in
/// `gsi1` partition `PAUSED_INDEX` by tenant id.
pub const PAUSE: &str = "PAUSE";
pub const PAUSED_INDEX: &str = "PAUSED";
/// Which tenant holds a WeCom corp id (outside any tenant: the claim is what keeps two
/// tenants from registering one corp). Sort key `CORP`.
pub fn corp(corp_id: &str) -> String {
    format!("CORP#{corp_id}")
}
pub const CORP_SK: &str = "CORP";

pub fn code(code: &CodeId) -> String {
    format!("CODE#{code}")
}

pub const CODE_PREFIX: &str = "CODE#";

/// The refresh function's record of what WeCom last accepted for a code, which also holds the
/// code's lease (`leases.rs`: the lease every writer of the record holds).
pub fn pushed(code: &CodeId) -> String {
    format!("PUSHED#{code}")
}

/// One entry per completed push, in time order.
pub fn push_log(code: &CodeId, pushed_at_ms: u64, nonce: &str) -> String {
    format!("PUSHLOG#{code}#{pushed_at_ms:013}#{nonce}")
}

pub fn push_log_prefix(code: Option<&CodeId>) -> String {
    match code {
        Some(code) => format!("PUSHLOG#{code}#"),
        None => "PUSHLOG#".to_owned(),
    }
}

pub fn staff(staff: &StaffId) -> String {
    format!("STAFF#{staff}")
}

pub const STAFF_PREFIX: &str = "STAFF#";

/// A staff item's customer-acquisition link (`domain::landing`), and the link taken off it
/// after a resignation whose deletion at WeCom is not yet confirmed.
pub const LINK_ID: &str = "link_id";
pub const LINK_URL: &str = "link_url";
pub const RETIRING_LINK_ID: &str = "retiring_link_id";

/// Staff items of resigned members are in `gsi1` under this partition, by when they resigned
/// (`{at:013}#TENANT#t#STAFF#s`), until the sweep has deleted their link or found none:
/// resignations are few, so one partition's throughput is plenty.
pub const RESIGNED_STAFF: &str = "STAFF#RESIGNED";

pub fn resigned_index_sort(
    resigned_at_ms: u64,
    tenant_id: &TenantId,
    staff_id: &StaffId,
) -> String {
    format!(
        "{resigned_at_ms:013}#{}#{}",
        tenant(tenant_id),
        staff(staff_id)
    )
}

/// Staff member `staff` sits on `code` (as member or fallback): the staff -> codes index.
pub fn seat(staff: &StaffId, code: &CodeId) -> String {
    format!("SEAT#{staff}#{code}")
}

pub fn seats_of(staff: &StaffId) -> String {
    format!("SEAT#{staff}#")
}

/// Where one add count is kept: the item (its sort key) and the number attribute in it.
///
/// A code's counts, today's and all-time, are one item each with an attribute per staff
/// member, so a recompute reads two items per code, not two per candidate; the company cap's
/// count is per staff member (`ALL`), one item each, shared by every code they sit on.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Counter {
    pub sk: String,
    pub attribute: String,
}

/// How a per-code counter item names the attribute of a member's count.
pub const COUNT_PREFIX: &str = "n_";

/// The attribute of a per-code counter item that holds `staff`'s count.
fn count_of(staff: &StaffId) -> String {
    format!("{COUNT_PREFIX}{staff}")
}

/// The attribute of an item that holds one count.
pub const ADDS: &str = "adds";

/// `staff`'s adds on `code` since it was created.
pub fn adds_total(code: &CodeId, staff: &StaffId) -> Counter {
    Counter {
        sk: code_adds_total(code),
        attribute: count_of(staff),
    }
}

/// The item of every member's adds on `code` since it was created.
pub fn code_adds_total(code: &CodeId) -> String {
    format!("ADDS#TOTAL#{code}")
}

/// `staff`'s adds on `code` on tenant day `day`.
pub fn adds_today_on_code(day: &str, code: &CodeId, staff: &StaffId) -> Counter {
    Counter {
        sk: code_adds_on(day, code),
        attribute: count_of(staff),
    }
}

/// The item of every member's adds on `code` on tenant day `day`.
pub fn code_adds_on(day: &str, code: &CodeId) -> String {
    format!("ADDS#DAY#{day}#{code}")
}

/// `staff`'s adds on every code on tenant day `day` (the company cap's count).
pub fn adds_today_all_codes(day: &str, staff: &StaffId) -> Counter {
    Counter {
        sk: format!("ADDS#DAY#{day}#ALL#{staff}"),
        attribute: ADDS.to_owned(),
    }
}

/// Stored membership of a WeCom department (a string set of user ids).
pub fn department(department: &DepartmentId) -> String {
    format!("DEPT#{department}")
}

/// Code `code` lists department `department`: the department -> codes index.
pub fn department_seat(department: &DepartmentId, code: &CodeId) -> String {
    format!("DSEAT#{department}#{code}")
}

pub fn department_seats_of(department: &DepartmentId) -> String {
    format!("DSEAT#{department}#")
}

/// The quota loop's claim: `staff` reached `limit` on the tenant-day `day` (on `code`, or on
/// every code for the company cap). Exactly one writer creates it; the day rollover reads a
/// day's claims to bring those staff back.
pub fn limit_reached(day: &str, limit: Limit, staff: &StaffId, code: Option<&CodeId>) -> String {
    match code {
        Some(code) => format!("REMOVED#{day}#{}#{staff}#{code}", limit.name()),
        None => format!("REMOVED#{day}#{}#{staff}", limit.name()),
    }
}

pub fn limits_reached_on(day: &str) -> String {
    format!("REMOVED#{day}#")
}

pub fn claim(business_key: &str) -> String {
    format!("CLAIM#{business_key}")
}

pub fn ignored(kind: &str) -> String {
    format!("IGNORED#{kind}")
}

/// One shard of the refresh function's counters for a tenant-day: each refresh batch adds
/// its counts to one shard drawn at random, so a tenant's busiest minute spreads its writes
/// over `REFRESH_TALLY_SHARDS` partition keys; a reader sums the shards
/// (`refresh_tally_shard` names each one's items).
pub fn refresh_tally(shard: u32, day: &str) -> String {
    format!("{}{day}", refresh_tally_shard(shard))
}

/// The sort-key prefix of every day of one tally shard, all under that shard's home.
pub fn refresh_tally_shard(shard: u32) -> String {
    format!("STATS#REFRESH#{shard}#")
}

/// A tenant's refresh tally shards. One item takes at most 1,000 writes a second; a tenant's
/// refresh batches at the 09:00 wave came to more (one write each), and 8 shards keep them
/// under it with room while a reader needs only 8 queries.
pub const REFRESH_TALLY_SHARDS: u32 = 8;

/// One shard of a tenant's budget for one WeCom API in one UTC hour (hours since the epoch):
/// the hour's total and a counter per minute (`budget::BudgetSlot`, `BudgetLimits::shards`).
pub fn budget(api: &str, shard: u32, hour: u64) -> String {
    format!("BUDGET#{api}#{shard}#{hour}")
}

/// A tenant's record of its last 45009 for `api` (`domain::budget::window_to_hold`).
pub fn throttled(api: &str) -> String {
    format!("THROTTLED#{api}")
}

/// The partition key of shard `shard` of egress address `address`'s budget for `api`
/// (`domain::budget::egress`): shared by every tenant behind the address, so its own
/// partition key per API and shard, outside every tenant's home.
pub fn address_budget_home(address: &str, api: &str, shard: u32) -> String {
    format!("EGRESS#{address}#BUDGET#{api}#{shard}")
}

/// A tenant's mark that it is on its address's roster for `api` in a minute
/// (`domain::budget::fairness`): the minute it was last counted.
pub fn asking_mark(api: &str) -> String {
    format!("ASKING#{api}")
}

/// An address's roster for `api`: one item per UTC hour (`budget_roster_hour`), a counter per
/// minute of the tenants that asked of the address in it.
pub fn address_roster_home(address: &str, api: &str) -> String {
    format!("EGRESS#{address}#ASKING#{api}")
}

pub fn budget_roster_hour(hour: u64) -> String {
    format!("HOUR#{hour}")
}

/// The code's dirty mark (`domain::dirty`): one item per code, found by the sweep through
/// `gsi1` by when its next resync is due.
pub fn dirty(code: &CodeId) -> String {
    format!("DIRTY#{code}")
}

pub const DIRTY_PREFIX: &str = "DIRTY#";

/// Dirty marks are spread over this many index partitions, so a wave of marks (a WeCom
/// outage dead-letters thousands of codes) is not one partition key's write throughput.
/// Changing it strands marks written under the old count: it is part of the key format.
pub const DIRTY_SHARDS: u32 = 4;

/// The index partition of a code's mark: `DIRTY#2`.
pub fn dirty_bucket(tenant_id: &TenantId, code: &CodeId) -> String {
    let shard =
        fnv1a(tenant(tenant_id).bytes().chain(dirty(code).bytes())) % u64::from(DIRTY_SHARDS);
    format!("{DIRTY_PREFIX}{shard}")
}

pub fn dirty_shard(shard: u32) -> String {
    format!("{DIRTY_PREFIX}{shard}")
}

/// The index sort key of a mark: when its next resync is due, then its tenant and code, so
/// the due marks are one key range per shard: `1796000000000#TENANT#t1#DIRTY#c1`.
pub fn dirty_index_sort(due_at_ms: u64, tenant_id: &TenantId, code: &CodeId) -> String {
    format!("{due_at_ms:013}#{}#{}", tenant(tenant_id), dirty(code))
}

/// A fan-out given up (`domain::dirty::FanOutMark`), under its tenant: `FANOUT_MARK#<hash>`,
/// one per fact. The fact key is hashed: it is whatever its writer made it, and a sort key
/// has a length limit and `#` as this table's separator.
pub fn fan_out_mark(fact_key: &str) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(fact_key.as_bytes());
    format!("{FAN_OUT_MARK_PREFIX}{}", hex::encode(&digest[..16]))
}

pub const FAN_OUT_MARK_PREFIX: &str = "FANOUT_MARK#";

/// Fan-out marks are in `gsi1` under this one partition, sorted by when each is next due
/// (`{due:013}#TENANT#t#FANOUT_MARK#<hash>`). Not in the code marks' `DIRTY#<shard>`
/// partitions: a fan-out gives up only after every receive its queue allows, so they are
/// few (one partition's throughput is plenty), and the code marks' pages stay code marks.
pub const FAN_OUT_MARKS: &str = "FANOUT_MARKS";

pub fn fan_out_mark_sort(due_at_ms: u64, tenant_id: &TenantId, sk: &str) -> String {
    format!("{due_at_ms:013}#{}#{sk}", tenant(tenant_id))
}

/// Limit claims not yet recorded as notified are in `gsi1` under this partition, sorted by
/// when their owner's lease ends (`{lease_until:013}#TENANT#t#REMOVED#...`): the sweep's stale
/// claims are one key range. Notifying removes a claim from it.
pub const OPEN_CLAIMS: &str = "CLAIMS#OPEN";

pub fn open_claim_sort(lease_until_ms: u64, tenant_id: &TenantId, sk: &str) -> String {
    format!("{lease_until_ms:013}#{}#{sk}", tenant(tenant_id))
}

/// A creation intent of a code's contact way (`domain::sweep::CreationIntent`), under its
/// tenant: `INTENT#<code>#<started ms>`; in `gsi1` under `INTENTS`, by time.
pub fn creation_intent(code: &CodeId, started_at_ms: u64) -> String {
    format!("INTENT#{code}#{started_at_ms:013}")
}

pub const INTENTS: &str = "INTENTS";

pub fn intent_index_sort(started_at_ms: u64, tenant_id: &TenantId, sk: &str) -> String {
    format!("{started_at_ms:013}#{}#{sk}", tenant(tenant_id))
}

/// The registry of tenants the sweep walks: every profile item carries `gsi1pk = TENANTS`
/// and its tenant id as `gsi1sk`.
pub const TENANTS_INDEX: &str = "TENANTS";

/// The sweep's lease and its cursor through the tenants: one item outside every tenant.
pub const SWEEP_PK: &str = "SWEEP";
pub const SWEEP_SK: &str = "LEASE";

/// A tenant's place in its codes for the drift sample.
pub const DRIFT_SAMPLE: &str = "DRIFT#SAMPLE";
/// A tenant's blast-radius guard, present while its repair is stopped.
pub const DRIFT_GUARD: &str = "DRIFT#GUARD";

/// A tenant's drift report for one tenant-day.
pub fn drift_report(day: &str) -> String {
    format!("DRIFT#DAY#{day}")
}

/// One code of a tenant-day's drift report (found differing, latest read differing,
/// repaired), under the tenant's home beside the report: `DRIFT#DAY#<day>#<code>`.
pub fn drift_code(day: &str, code_id: &CodeId) -> String {
    format!("{}{code_id}", drift_codes(day))
}

/// The prefix of a tenant-day's drift report codes (not the report item itself).
pub fn drift_codes(day: &str) -> String {
    format!("DRIFT#DAY#{day}#")
}

fn fnv1a(bytes: impl Iterator<Item = u8>) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in bytes {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// A corp app's WeCom access token, shared by every function (outside any tenant: tokens
/// belong to the corp's app). Sort key `TOKEN`.
pub fn wecom_token(corp_id: &str) -> String {
    format!("WECOM_TOKEN#{corp_id}")
}

pub const WECOM_TOKEN_SK: &str = "TOKEN";

/// The schedule tick's due items (per tenant, one for its staff's shift edges and one for its
/// midnight) live under the tenant; the `gsi1` index finds them by the minute they are due.
pub const DUE_PREFIX: &str = "DUE#";
const DUE_SHIFTS: &str = "DUE#SHIFTS";
const DUE_MIDNIGHT: &str = "DUE#MIDNIGHT";

pub fn due(subject: &Subject) -> String {
    match subject {
        Subject::Shifts => DUE_SHIFTS.to_owned(),
        Subject::Midnight => DUE_MIDNIGHT.to_owned(),
    }
}

/// The subject of a due item's sort key; `None` for anything else (the per-staff items of the
/// layout before `DUE#SHIFTS`, `DUE#STAFF#<id>`, among them: docs/design/schedules.md).
pub fn due_subject(sk: &str) -> Option<Subject> {
    match sk {
        DUE_MIDNIGHT => Some(Subject::Midnight),
        DUE_SHIFTS => Some(Subject::Shifts),
        _ => None,
    }
}

pub const GSI1: &str = "gsi1";
pub const GSI1_PK: &str = "gsi1pk";
pub const GSI1_SK: &str = "gsi1sk";

/// Due items are spread over this many index partitions per minute, so that one minute's
/// wave (every 09:00 shift start of a timezone) is not one partition key's write throughput.
/// Changing it strands items written under the old count: it is part of the key format.
pub const DUE_SHARDS: u32 = 8;

/// The index partition of a due item: its UTC minute and shard, `DUE#202611300900#3`.
pub fn due_bucket(minute: Minute, shard: u32) -> String {
    format!("{DUE_PREFIX}{}#{shard}", minute.label())
}

/// The shard of a subject: a stable hash (FNV-1a) of the tenant and the subject's key.
pub fn due_shard(tenant_id: &TenantId, subject: &Subject) -> u32 {
    let hash = fnv1a(tenant(tenant_id).bytes().chain(due(subject).bytes()));
    u32::try_from(hash % u64::from(DUE_SHARDS)).unwrap_or(0)
}

/// The index sort key of a due item: its tenant, its subject and the time its moments were
/// handled through, `TENANT#t1#DUE#SHIFTS#1796000430000`. The time is in the key because the
/// index projects keys only and the tick reads nothing else of the item.
pub fn due_index_sort(tenant_id: &TenantId, subject: &Subject, handled_through_ms: u64) -> String {
    format!(
        "{}#{}#{handled_through_ms:013}",
        tenant(tenant_id),
        due(subject)
    )
}

/// The handled-through time of a due item's index sort key (`None` when it has none).
pub fn due_handled_through(index_sort: &str) -> Option<u64> {
    let (_, through) = index_sort.rsplit_once('#')?;
    (through.len() == 13)
        .then(|| through.parse().ok())
        .flatten()
}

/// The schedule tick's cursor and lease: one item outside every tenant.
pub const TICK_CURSOR_PK: &str = "SCHEDULES";
pub const TICK_CURSOR_SK: &str = "TICK_CURSOR";

/// One chunk of the index writes an edit of `owner` (a code's or a department's item) still
/// owes (`domain::owed`): `OWED#<owner sk>#<n>`.
pub fn owed(owner: &str, n: usize) -> String {
    format!("OWED#{owner}#{n:03}")
}

pub fn owed_of(owner: &str) -> String {
    format!("OWED#{owner}#")
}

/// One UTC day of a tenant's archived callbacks (days since the epoch): a day's callbacks
/// are one key range, read in order of arrival.
pub fn archive(tenant: &TenantId, utc_day: u64) -> String {
    format!("ARCHIVE#{tenant}#{utc_day}")
}

/// An archived callback: when it arrived (13 digits of ms, so the order is the time's), and
/// its event key (a redelivery of one message is one item).
pub fn archived(received_at_ms: u64, event_key: &str) -> String {
    format!("{received_at_ms:013}#{event_key}")
}

/// One replay run's record: `RUN`, its report (`EVENT#`, `CODE#`) and its would-be facts.
pub fn replay_run(run: &str) -> String {
    format!("REPLAY#{run}")
}

pub const REPLAY_RUN_SK: &str = "RUN";

pub fn replay_event(position: &str) -> String {
    format!("EVENT#{position}")
}

pub fn replay_seen(business_key: &str) -> String {
    format!("SEEN#{business_key}")
}

pub fn replay_code(code: &CodeId) -> String {
    format!("CODE#{code}")
}

pub fn replay_note_add(code: &CodeId, staff: &StaffId, day: &str) -> String {
    format!("NOTE#ADD#{code}#{staff}#{day}")
}

pub fn replay_note_day(day: &str, staff: &StaffId) -> String {
    format!("NOTE#DAY#{day}#{staff}")
}

pub fn replay_note_staff(staff: &StaffId) -> String {
    format!("NOTE#STAFF#{staff}")
}

/// Dead letters an operator closed: one item per message, under its queue.
pub fn closed_dead_letter(queue: &str) -> String {
    format!("DLQ_CLOSED#{queue}")
}

/// Refreshes requeued for the WeCom budget or a throttle (45009/45033), per UTC minute
/// (minutes since the epoch), in `REQUEUE_SHARDS` items, each write to one drawn at random so
/// a throttle storm (even one tenant's) spreads its writes: what `qrsync-ops status` sums
/// over the last hour.
pub fn requeues(shard: u32) -> String {
    format!("STATS#REQUEUES#{shard}")
}

pub fn requeues_minute(minute: u64) -> String {
    format!("MINUTE#{minute}")
}

/// 16 items take 16,000 writes a second; `qrsync-ops status` reads the last hour's
/// 16 x 60 keys in ten `BatchGetItem` requests.
pub const REQUEUE_SHARDS: u32 = 16;

/// The landing page's own tables (docs/design/landing-page.md, "The page's home"): the rotation
/// table keys a code's page by `PAGE`, the visit table a round's counter by `ROUND`.
pub const PAGE: &str = "page";
pub const ROUND: &str = "round";

pub fn page(tenant: &TenantId, code: &CodeId) -> String {
    format!("{tenant}#{code}")
}

/// A round's counter: the round id is the page's, drawn at random with each new round.
pub fn round(tenant: &TenantId, code: &CodeId, round: &str) -> String {
    format!("{tenant}#{code}#{round}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t1() -> TenantId {
        TenantId::parse("t1").expect("tenant")
    }

    #[test]
    fn every_item_of_a_code_shares_the_codes_home() {
        let (c1, s1) = (
            CodeId::parse("c1").expect("code"),
            StaffId::parse("s1").expect("staff"),
        );
        let homes: Vec<String> = [
            code(&c1),
            pushed(&c1),
            dirty(&c1),
            push_log(&c1, 1, "n"),
            creation_intent(&c1, 1),
            owed(&code(&c1), 0),
            adds_total(&c1, &s1).sk,
            adds_today_on_code("2026-12-06", &c1, &s1).sk,
        ]
        .iter()
        .map(|sk| home(&t1(), sk))
        .collect();
        assert!(homes.iter().all(|h| h == "TENANT#t1#CODE#c1"), "{homes:?}");
    }

    #[test]
    fn a_codes_counts_of_every_member_share_one_item_a_day_and_one_in_all() {
        let c1 = CodeId::parse("c1").expect("code");
        let (s1, s2) = (
            StaffId::parse("s1").expect("staff"),
            StaffId::parse("s2").expect("staff"),
        );
        let day = "2026-12-06";
        let (a, b) = (
            adds_today_on_code(day, &c1, &s1),
            adds_today_on_code(day, &c1, &s2),
        );
        assert_eq!(a.sk, b.sk);
        assert_ne!(a.attribute, b.attribute);
        assert_ne!(a.sk, adds_today_on_code("2026-12-07", &c1, &s1).sk);
        assert_eq!(adds_total(&c1, &s1).sk, adds_total(&c1, &s2).sk);
        assert_ne!(
            adds_today_all_codes(day, &s1).sk,
            adds_today_all_codes(day, &s2).sk
        );
    }

    #[test]
    fn a_staff_members_items_and_a_departments_items_each_have_their_own_home() {
        let (c1, s1) = (
            CodeId::parse("c1").expect("code"),
            StaffId::parse("s1").expect("staff"),
        );
        let d1 = DepartmentId::parse("7").expect("department");
        for sk in [
            staff(&s1),
            seat(&s1, &c1),
            adds_today_all_codes("2026-12-06", &s1).sk,
        ] {
            assert_eq!(home(&t1(), &sk), "TENANT#t1#STAFF#s1", "{sk}");
        }
        for sk in [
            department(&d1),
            department_seat(&d1, &c1),
            owed(&department(&d1), 2),
        ] {
            assert_eq!(home(&t1(), &sk), "TENANT#t1#DEPT#7", "{sk}");
        }
    }

    #[test]
    fn what_belongs_to_the_tenant_as_a_whole_stays_under_the_tenant() {
        for sk in [
            PROFILE.to_owned(),
            claim("add:x"),
            limits_reached_on("2026-12-06"),
            due(&Subject::Shifts),
            fan_out_mark("fact"),
        ] {
            assert_eq!(home(&t1(), &sk), "TENANT#t1", "{sk}");
        }
    }

    #[test]
    fn each_shard_of_each_apis_budget_and_the_refresh_tallies_have_homes_apart_from_the_tenants() {
        assert_eq!(
            home(&t1(), &budget("update_contact_way", 0, 494_000)),
            "TENANT#t1#BUDGET#update_contact_way#0"
        );
        assert_eq!(
            home(&t1(), &budget("update_contact_way", 14, 494_001)),
            "TENANT#t1#BUDGET#update_contact_way#14"
        );
        assert_eq!(
            home(&t1(), &budget("create_link", 3, 494_000)),
            "TENANT#t1#BUDGET#create_link#3"
        );
        assert!(spans_homes("BUDGET#"));
        assert_eq!(
            home(&t1(), &refresh_tally(0, "2026-12-06")),
            "TENANT#t1#STATS#REFRESH#0"
        );
        assert_eq!(
            home(&t1(), &refresh_tally_shard(7)),
            "TENANT#t1#STATS#REFRESH#7"
        );
        assert!(spans_homes("STATS#REFRESH#"));
    }

    #[test]
    fn a_prefix_that_names_a_kind_but_no_owner_spans_homes() {
        let s1 = StaffId::parse("s1").expect("staff");
        for prefix in [
            CODE_PREFIX,
            "PUSHLOG#",
            "ADDS#TOTAL#",
            "ADDS#DAY#2026-12-06#",
            "STAFF#",
            "STATS#REFRESH#",
            "BUDGET#create_link#",
        ] {
            assert!(spans_homes(prefix), "{prefix}");
        }
        for prefix in [
            seats_of(&s1),
            push_log_prefix(Some(&CodeId::parse("c1").expect("code"))),
        ] {
            assert!(!spans_homes(&prefix), "{prefix}");
        }
    }

    #[test]
    fn the_tenant_is_read_back_from_any_of_its_homes() {
        assert_eq!(tenant_of_home("TENANT#t1#CODE#c1"), Some("t1"));
        assert_eq!(tenant_of_home("TENANT#t1"), Some("t1"));
        assert_eq!(tenant_of_home("CORP#x"), None);
    }
}
