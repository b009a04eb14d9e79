//! The table, in memory: one `InMemoryStore` implements every store port (the admin API's,
//! the fact recorder's, the refresh's, the schedule tick's), as `adapters::dynamodb`'s
//! `DynamoStore` does, so a write through one port is what another reads.
//!
//! - `admin.rs`: `TenantProfiles`, `CodeFacts`, `DueWriter`, `AdminStore`, `CodeIndex`;
//! - `facts.rs`: `AddLedger`, `QuotaLedger`, `StaffLedger`;
//! - `refresh.rs`: `CodeRecords`, `CodeLeases`, `FailureMarks`;
//! - `schedules.rs`: `DueIndex`, `ScheduleFacts`;
//! - `sweep.rs`: `DirtyIndex`, `FanOutMarks`, `FanOutIndex`, `SweepRuns`, `TenantRegistry`,
//!   `DriftLedger`.

mod admin;
mod archive;
mod facts;
mod indexes;
mod pages;
mod refresh;
mod schedules;
mod sweep;

use crate::admin::{SecretsChanged, VersionedCode};
use crate::codes::{CodeSnapshot, PushedList, StoredCode};
use crate::dirty::DirtyWhy;
use crate::facts::{AddFact, LimitClaim};
use crate::ids::TenantId;
use crate::ids::{CodeId, DepartmentId, StaffId};
use crate::lanes::CodeAge;
use crate::membership::{AddCounts, CodeConfig, Employment, StaffFacts, WeeklySchedule};
use crate::owed::{Owed, WRITES_PER_TRANSACTION};
use crate::refresh::PageWrite;
use crate::refresh::{Lease, PushRecord, Tally};
use crate::schedules::{LimitReached, Minute, Subject};
use crate::tenants::{TenantProfile, Timezone};
use crate::wecom::acquisition::AcquisitionLink;
use crate::StoreError;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};

type CodeKey = (TenantId, CodeId);
type StaffKey = (TenantId, StaffId);
type DepartmentKey = (TenantId, DepartmentId);

/// A code's entry in the staff -> codes or the department -> codes index.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Seat {
    Staff(StaffId),
    Department(DepartmentId),
}

fn seats(config: &CodeConfig) -> BTreeSet<Seat> {
    config
        .members
        .iter()
        .chain(&config.fallback)
        .cloned()
        .map(Seat::Staff)
        .chain(config.departments.iter().cloned().map(Seat::Department))
        .collect()
}

/// DynamoDB's cap on items in one transaction.
const TRANSACTION_ITEMS: usize = 100;

/// What the refresh marked when WeCom refused for good (`refresh::FailureMarks`), and every
/// dirty mark made (`dirty::DirtyMarks`), in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Marks {
    pub gone: Vec<CodeId>,
    pub unusable: Vec<StaffId>,
    pub dirty: Vec<(CodeId, DirtyWhy)>,
}

/// A staff member not stored yet, as a first write creates them.
const NEW_STAFF: StaffFacts = StaffFacts {
    online: false,
    employment: Employment::Active,
    rejected_by_wecom: false,
    schedule: None,
};

#[derive(Default)]
struct Tables {
    profiles: HashMap<TenantId, TenantProfile>,
    /// Paused tenants (`crate::tenants::TenantPause`).
    pauses: BTreeMap<TenantId, crate::tenants::TenantPause>,
    /// Each profile's version and secret times (`AdminStore::stored_profile`), and which
    /// tenant holds each corp id.
    profile_meta: HashMap<TenantId, (u64, SecretsChanged)>,
    corp_claims: HashMap<String, TenantId>,
    /// In key order, so a tenant's staff are one range (the tick's schedule query).
    staff: BTreeMap<StaffKey, StaffFacts>,
    codes: HashMap<CodeKey, VersionedCode>,
    /// Each tenant's code ids in order, as the table's sort key orders them (`CODE#` items):
    /// a tenant's page of codes reads that tenant's ids, not every code of every tenant.
    tenant_codes: HashMap<TenantId, BTreeSet<CodeId>>,
    /// When each code was created and last edited (`CodeRecords::age`).
    ages: HashMap<CodeKey, CodeAge>,
    pushed: HashMap<CodeKey, PushedList>,
    /// Each landing code's page (`crate::refresh::PageWrite`), written with its record.
    pages: HashMap<CodeKey, pages::Page>,
    /// Each staff member's acquisition link (`CodeRecords::keep_link`).
    links: HashMap<StaffKey, AcquisitionLink>,
    today: HashMap<(TenantId, CodeId, StaffId), AddCounts>,
    /// The counters every counted add increments, as the table keeps them: per staff member
    /// on a code on a day, per staff member on a day, per staff member on a code.
    adds: indexes::AddCounters,
    departments: HashMap<DepartmentKey, BTreeSet<StaffId>>,
    /// The schedule tick's due items, and when each staff member's schedule was set.
    due: indexes::DueTable,
    schedule_at_ms: HashMap<StaffKey, u64>,
    /// When each staff member's employment and departments were set.
    employment_at_ms: HashMap<StaffKey, u64>,
    departments_at_ms: HashMap<StaffKey, u64>,
    /// A contact way another request stores first, just before the next `set_config_id`.
    race: HashMap<CodeKey, String>,
    /// Members another edit sets on a code just before the next conditional `put_code`.
    edit_race: HashMap<CodeKey, Vec<StaffId>>,
    /// The staff -> codes and department -> codes indexes, each code's entries, and the index
    /// writes an interrupted edit still owes (`crate::owed`), as the table keeps them.
    code_index: indexes::SeatIndex,
    code_owed: HashMap<CodeKey, Owed<Seat>>,
    /// Each staff member's departments (their staff item), and what a department replacement
    /// still owes them.
    staff_departments: HashMap<StaffKey, BTreeSet<DepartmentId>>,
    department_owed: HashMap<DepartmentKey, Owed<StaffId>>,
    /// Transactions written, and how many more succeed before every one fails.
    transactions: usize,
    transactions_left: Option<usize>,
    /// Adds whose count is refused as meeting another write (`conflict_next_adds`).
    add_conflicts_left: usize,
    unavailable: bool,
    /// Staff whose codes cannot be read, and codes whose snapshot cannot be read (a storage
    /// failure for that item only).
    unreadable_staff: HashSet<StaffId>,
    unreadable_codes: HashSet<CodeId>,
    /// The schedule tick's cursor and the lease on it.
    cursor: Option<Minute>,
    cursor_owner: Option<String>,
    cursor_lease_until_ms: u64,
    minutes_read: Vec<Minute>,
    /// Adds by business key (when each was counted), the adds counted in order, and the
    /// events counted as ignored.
    add_claims: HashMap<String, u64>,
    counted: Vec<AddFact>,
    /// When set (`InMemoryStore::without_history`), the histories kept for tests' asserts
    /// (`snapshots_read`, `pushes`, `counted`, `ignored`, `minutes_read`, `renames`, the
    /// `marks` lists) stop growing; the table's contents are kept as ever.
    history_off: bool,
    ignored: Vec<String>,
    /// Limit claims in the order they were made, and whether each was notified.
    limit_claims: Vec<(LimitClaim, bool)>,
    renames: Vec<(StaffId, StaffId)>,
    /// Each code's lease; when `leases_taken_over`, another writer takes every lease over
    /// right after it is granted.
    leases: HashMap<CodeKey, Lease>,
    /// How many times each code's lease was taken (the table's `acquisitions`).
    lease_acquisitions: HashMap<CodeKey, u64>,
    leases_taken_over: bool,
    snapshots_read: Vec<CodeId>,
    pushes: Vec<PushRecord>,
    records_fail: bool,
    starved: u32,
    tally: Tally,
    /// How many tally writes added up to it.
    tally_writes: usize,
    /// The platform's requeue counts, added up, and how many writes they took.
    requeues: (crate::refresh::Requeues, usize),
    marks: Marks,
    /// The dirty set as the table keeps it: each marked code's latest mark (time, why,
    /// resyncs sent, next due), and the drift repairs counted per tenant-day.
    dirty: HashMap<CodeKey, (u64, DirtyWhy)>,
    dirty_due: HashMap<CodeKey, (u32, u64)>,
    /// The marks that are stale suspects, with their sample's figures.
    dirty_suspects: HashMap<CodeKey, crate::dirty::StaleSuspect>,
    /// The drift report's codes, per tenant-day: found differing, latest read differing,
    /// repaired.
    drift_codes: HashMap<(TenantId, String, CodeId), CodeDrift>,
    /// Fan-outs given up, by tenant and fact key.
    fan_out_marks: HashMap<(TenantId, String), crate::dirty::FanOutMark>,
    sweep: SweepTables,
    /// Archived callbacks (`replay::CallbackArchive`): the message, its code, its expiry.
    archive: Vec<(crate::intake::InboxMessage, Option<CodeId>, u64)>,
    /// Replay runs by id (`replay::ReplayRuns`).
    replays: HashMap<String, archive::Run>,
}

/// One code in a tenant-day's drift report.
#[derive(Debug, Clone, Copy, Default)]
struct CodeDrift {
    found: bool,
    latest_differs: bool,
    repaired: bool,
}

/// The sweep's lease and cursor, each tenant's sample cursor, drift reports and guard.
#[derive(Default)]
struct SweepTables {
    owner: Option<String>,
    lease_until_ms: u64,
    cursor: Option<TenantId>,
    sample_cursors: HashMap<TenantId, CodeId>,
    reports: HashMap<(TenantId, String), crate::sweep::DriftCounts>,
    guards: HashMap<TenantId, crate::sweep::GuardTrip>,
    intents: Vec<crate::sweep::CreationIntent>,
    /// The resigned-staff index (when each resigned) and the links taken off staff items
    /// whose deletion is not yet confirmed.
    resigned: HashMap<StaffKey, u64>,
    retiring_links: HashMap<StaffKey, String>,
}

impl Tables {
    /// One `TransactWriteItems`: counted, and refused once the injected fault is due.
    fn transact(&mut self) -> Result<(), StoreError> {
        if let Some(left) = &mut self.transactions_left {
            if *left == 0 {
                return Err(StoreError::new(
                    "table",
                    "the fake table failed a transaction",
                ));
            }
            *left -= 1;
        }
        self.transactions += 1;
        Ok(())
    }

    /// The tenant's staff items, in id order: one range of the key-ordered map, as the table's
    /// `STAFF#` prefix of the tenant's partition.
    fn staff_of_tenant<'t>(
        &'t self,
        tenant: &'t TenantId,
    ) -> impl Iterator<Item = (&'t StaffId, &'t StaffFacts)> + 't {
        // "-" sorts before every other valid staff id.
        let lowest = StaffId::parse("-").expect("the lowest staff id is valid");
        self.staff
            .range((tenant.clone(), lowest)..)
            .take_while(move |((of, _), _)| of == tenant)
            .map(|((_, staff), facts)| (staff, facts))
    }

    fn readable(&self, staff: &StaffId) -> Result<(), StoreError> {
        if self.unreadable_staff.contains(staff) {
            return Err(StoreError::new(
                "table",
                "the fake seat index is switched off",
            ));
        }
        Ok(())
    }

    /// The codes whose index lists `seat`, in id order.
    fn stored_code_id(&mut self, tenant: &TenantId, code: &CodeId) {
        self.tenant_codes
            .entry(tenant.clone())
            .or_default()
            .insert(code.clone());
    }

    /// Up to `limit` of the tenant's code ids after `after`, in order.
    fn tenant_codes_after(
        &self,
        tenant: &TenantId,
        after: Option<&CodeId>,
        limit: usize,
    ) -> Vec<&CodeId> {
        use std::ops::Bound::{Excluded, Unbounded};
        let Some(codes) = self.tenant_codes.get(tenant) else {
            return Vec::new();
        };
        let from = after.map_or(Unbounded, |after| Excluded(after.clone()));
        codes.range((from, Unbounded)).take(limit).collect()
    }

    fn codes_seating(&self, tenant: &TenantId, seats: &[Seat]) -> Vec<CodeId> {
        self.code_index.codes_with_any(tenant, seats)
    }
}

/// Lands `plan` as the table does (`adapters::dynamodb`'s owed writes): inline with the
/// owner's write when it fits one transaction, else recorded as owed and landed in chunks of
/// `WRITES_PER_TRANSACTION`, each struck from the owed record as it lands. `owner` is the
/// owner's own write (the first transaction), `apply` one index write.
fn land<T: Ord + Clone>(
    tables: &mut Tables,
    owed_before: &Owed<T>,
    plan: Owed<T>,
    owner: impl FnOnce(&mut Tables),
    owed: impl Fn(&mut Tables) -> &mut Owed<T>,
    apply: impl Fn(&mut Tables, &T, bool),
) -> Result<(), StoreError> {
    tables.transact()?;
    owner(tables);
    let old_chunks = owed_before.chunks(WRITES_PER_TRANSACTION).len();
    if 1 + old_chunks + plan.len() <= TRANSACTION_ITEMS {
        for (entry, put) in plan.entries() {
            apply(tables, entry, put);
        }
        *owed(tables) = Owed::default();
        return Ok(());
    }
    *owed(tables) = plan.clone();
    for chunk in plan.chunks(WRITES_PER_TRANSACTION) {
        tables.transact()?;
        for (entry, put) in chunk.entries() {
            apply(tables, entry, put);
            let owed = owed(tables);
            owed.put.remove(entry);
            owed.delete.remove(entry);
        }
    }
    Ok(())
}

/// The table. Clones share their contents.
#[derive(Clone, Default)]
pub struct InMemoryStore {
    tables: Arc<Mutex<Tables>>,
}

/// Seeding the table, switching faults on and off, and reading what was written.
impl InMemoryStore {
    fn tables(&self) -> MutexGuard<'_, Tables> {
        self.tables.lock().expect("fake store lock")
    }

    fn available(&self) -> Result<MutexGuard<'_, Tables>, StoreError> {
        let tables = self.tables();
        if tables.unavailable {
            return Err(StoreError::new("table", "the fake table is switched off"));
        }
        Ok(tables)
    }

    /// Every read and write fails while the table is switched off.
    pub fn set_unavailable(&self, unavailable: bool) {
        self.tables().unavailable = unavailable;
    }

    /// The next `adds` counts of an add are refused as having met another write of one of
    /// their items (DynamoDB's `TransactionConflict`), each writing nothing.
    pub fn conflict_next_adds(&self, adds: usize) {
        self.tables().add_conflicts_left = adds;
    }

    /// After `transactions` more successful transactions every transaction fails (as a
    /// DynamoDB outage or a timed-out function would cut an edit short); `None` heals it.
    pub fn fail_transactions_after(&self, transactions: Option<usize>) {
        self.tables().transactions_left = transactions;
    }

    /// A table that keeps no histories for asserts, so a long run (millions of refreshes and
    /// adds) holds only the table's contents: `snapshots_read`, `pushes`, `counted`,
    /// `ignored`, `minutes_read`, `renames` and `marks` stay empty.
    pub fn without_history() -> Self {
        let store = Self::default();
        store.tables().history_off = true;
        store
    }

    /// Transactions written so far (each a `TransactWriteItems`, one round trip).
    pub fn transactions(&self) -> usize {
        self.tables().transactions
    }

    // ---------------------------------------------------------------- tenants and staff

    /// The tenant the sample events are signed for (`demo`, with the reference vectors' corp,
    /// token and key), as the handlers' tests and the inbox's need it; returns its id.
    pub fn insert_reference_tenant(&self) -> TenantId {
        let vectors = &crate::wecom::reference_vectors::V1;
        let tenant = TenantId::parse("demo").expect("a valid tenant id");
        self.insert_profile(
            &tenant,
            TenantProfile {
                corp_id: vectors.corp_id.into(),
                callback_token: vectors.token.into(),
                encoding_aes_key: vectors.encoding_aes_key.into(),
                previous_callback: None,
                corp_secret: "s".into(),
                timezone: Default::default(),
                company_daily_cap: None,
            },
        );
        tenant
    }

    /// The code the sample add events name (`code-1` of `demo`, a native code listing
    /// `zhangsan`): the fact recorder counts an add only on a code that lists its member.
    pub async fn insert_reference_code(&self) -> CodeId {
        let tenant = TenantId::parse("demo").expect("a valid tenant id");
        let code = CodeId::parse("code-1").expect("a valid code id");
        let config = CodeConfig {
            family: crate::membership::Family::Native,
            members: vec![StaffId::parse("zhangsan").expect("a valid staff id")],
            departments: vec![],
            fallback: vec![],
            switches: Default::default(),
        };
        crate::admin::AdminStore::put_code(self, &tenant, &code, &config, None, 0)
            .await
            .expect("the fake store answers")
            .expect("a new code is stored");
        code
    }

    pub fn insert_profile(&self, tenant: &TenantId, profile: TenantProfile) {
        let mut tables = self.tables();
        tables
            .corp_claims
            .insert(profile.corp_id.clone(), tenant.clone());
        tables.profiles.insert(tenant.clone(), profile);
    }

    pub fn stored_profile(&self, tenant: &TenantId) -> Option<TenantProfile> {
        self.tables().profiles.get(tenant).cloned()
    }

    /// The tenant's zone, on its profile (created with empty credentials if it has none).
    pub fn insert_tenant(&self, tenant: &TenantId, timezone: Timezone) {
        self.tables()
            .profiles
            .entry(tenant.clone())
            .or_insert_with(|| TenantProfile {
                corp_id: String::new(),
                callback_token: String::new(),
                encoding_aes_key: String::new(),
                previous_callback: None,
                corp_secret: String::new(),
                timezone,
                company_daily_cap: None,
            })
            .timezone = timezone;
    }

    pub fn insert_staff(&self, tenant: &TenantId, staff: &StaffId, facts: StaffFacts) {
        self.tables()
            .staff
            .insert((tenant.clone(), staff.clone()), facts);
    }

    /// Stores `link` as the staff member's acquisition link, as a refresh that created it
    /// would have kept it (`CodeFacts::keep_link`).
    pub fn insert_link(&self, tenant: &TenantId, staff: &StaffId, link: AcquisitionLink) {
        self.tables()
            .links
            .insert((tenant.clone(), staff.clone()), link);
    }

    /// Every staff member of the tenant with an item, in id order.
    pub fn staff_of(&self, tenant: &TenantId) -> Vec<StaffId> {
        self.tables()
            .staff_of_tenant(tenant)
            .map(|(staff, _)| staff.clone())
            .collect()
    }

    pub fn stored_staff(&self, tenant: &TenantId, staff: &StaffId) -> Option<StaffFacts> {
        self.tables()
            .staff
            .get(&(tenant.clone(), staff.clone()))
            .cloned()
    }

    /// The staff member's stored employment and when it was set.
    pub fn stored_employment(
        &self,
        tenant: &TenantId,
        staff: &StaffId,
    ) -> Option<(Employment, u64)> {
        let tables = self.tables();
        let key = (tenant.clone(), staff.clone());
        let at_ms = tables.employment_at_ms.get(&key)?;
        Some((tables.staff.get(&key)?.employment, *at_ms))
    }

    /// Stores the staff member's weekly schedule (on their staff item).
    pub fn insert_schedule(&self, tenant: &TenantId, staff: &StaffId, schedule: WeeklySchedule) {
        self.tables()
            .staff
            .entry((tenant.clone(), staff.clone()))
            .or_insert(NEW_STAFF)
            .schedule = Some(schedule);
    }

    pub fn remove_schedule(&self, tenant: &TenantId, staff: &StaffId) {
        if let Some(facts) = self
            .tables()
            .staff
            .get_mut(&(tenant.clone(), staff.clone()))
        {
            facts.schedule = None;
        }
    }

    /// Staff renamed so far (`StaffLedger::rename_staff`), from and to.
    pub fn renames(&self) -> Vec<(StaffId, StaffId)> {
        self.tables().renames.clone()
    }

    /// The department's stored members (`None` when it was never stored).
    pub fn stored_department(
        &self,
        tenant: &TenantId,
        department: &DepartmentId,
    ) -> Option<BTreeSet<StaffId>> {
        self.tables()
            .departments
            .get(&(tenant.clone(), department.clone()))
            .cloned()
    }

    /// The departments the staff member's own record lists.
    pub fn stored_staff_departments(
        &self,
        tenant: &TenantId,
        staff: &StaffId,
    ) -> BTreeSet<DepartmentId> {
        self.tables()
            .staff_departments
            .get(&(tenant.clone(), staff.clone()))
            .cloned()
            .unwrap_or_default()
    }

    /// Whether a replacement of the department's members still owes staff updates.
    pub fn department_owes_staff_updates(
        &self,
        tenant: &TenantId,
        department: &DepartmentId,
    ) -> bool {
        self.tables()
            .department_owed
            .get(&(tenant.clone(), department.clone()))
            .is_some_and(|owed| !owed.is_empty())
    }

    /// Stores the department's members and lists the department on each member's record, as
    /// a landed `set_department_members` leaves them.
    pub fn insert_department(
        &self,
        tenant: &TenantId,
        department: &DepartmentId,
        members: BTreeSet<StaffId>,
    ) {
        let mut tables = self.tables();
        for staff in &members {
            tables
                .staff_departments
                .entry((tenant.clone(), staff.clone()))
                .or_default()
                .insert(department.clone());
        }
        tables
            .departments
            .insert((tenant.clone(), department.clone()), members);
    }

    // ---------------------------------------------------------------- codes and indexes

    /// Stores the code (version 1) with its age and its index entries, as a landed admin write
    /// leaves them, touching nothing else: the scale simulation loads millions this way.
    pub fn insert_code(&self, tenant: &TenantId, code: &CodeId, stored: StoredCode, age: CodeAge) {
        let mut tables = self.tables();
        let key = (tenant.clone(), code.clone());
        tables.code_index.replace(&key, seats(&stored.config));
        tables.ages.insert(key.clone(), age);
        tables.stored_code_id(tenant, code);
        tables.codes.insert(
            key,
            VersionedCode {
                code: stored,
                version: 1,
            },
        );
    }

    pub fn stored_code(&self, tenant: &TenantId, code: &CodeId) -> Option<VersionedCode> {
        self.tables()
            .codes
            .get(&(tenant.clone(), code.clone()))
            .cloned()
    }

    /// Stores everything `snapshot` was read from: the tenant's profile, the code (version 1)
    /// and its index entries, its members' staff items, today's counters, the departments it
    /// lists and its last-pushed record.
    pub fn load_snapshot(&self, tenant: &TenantId, code: &CodeId, snapshot: &CodeSnapshot) {
        let mut tables = self.tables();
        let key = (tenant.clone(), code.clone());
        tables
            .profiles
            .insert(tenant.clone(), snapshot.profile.clone());
        tables
            .code_index
            .replace(&key, seats(&snapshot.code.config));
        tables.stored_code_id(tenant, code);
        tables.codes.insert(
            key.clone(),
            VersionedCode {
                code: snapshot.code.clone(),
                version: 1,
            },
        );
        tables.ages.insert(key.clone(), snapshot.age);
        for (staff, facts) in &snapshot.staff {
            tables
                .staff
                .insert((tenant.clone(), staff.clone()), facts.clone());
        }
        for (staff, counts) in &snapshot.adds {
            tables
                .today
                .insert((tenant.clone(), code.clone(), staff.clone()), *counts);
        }
        for (department, members) in &snapshot.departments {
            tables
                .departments
                .insert((tenant.clone(), department.clone()), members.clone());
        }
        match &snapshot.last_pushed {
            Some(pushed) => tables.pushed.insert(key.clone(), pushed.clone()),
            None => tables.pushed.remove(&key),
        };
        tables.pages.remove(&key);
        drop(tables);
        // A record with a rotation was written with its page.
        if let Some(pushed) = &snapshot.last_pushed {
            if let Some(rotation) = &pushed.rotation {
                self.write_page(tenant, code, &PageWrite::NewRound(rotation.clone()));
            }
            if pushed.starved && pushed.rotation.is_some() {
                self.write_page(tenant, code, &PageWrite::Starved);
            }
        }
    }

    pub fn set_age(&self, tenant: &TenantId, code: &CodeId, age: CodeAge) {
        self.tables()
            .ages
            .insert((tenant.clone(), code.clone()), age);
    }

    pub fn set_today(&self, tenant: &TenantId, code: &CodeId, staff: &StaffId, counts: AddCounts) {
        self.tables()
            .today
            .insert((tenant.clone(), code.clone(), staff.clone()), counts);
    }

    /// The creation intents not cleared, oldest first.
    pub fn creation_intents(&self) -> Vec<crate::sweep::CreationIntent> {
        self.tables().sweep.intents.clone()
    }

    /// The code's current dirty mark: when it was made and why.
    pub fn dirty_mark(&self, tenant: &TenantId, code: &CodeId) -> Option<(u64, DirtyWhy)> {
        self.tables()
            .dirty
            .get(&(tenant.clone(), code.clone()))
            .copied()
    }

    /// The code's mark as the sweep reads it (due or not).
    pub fn dirty_entry(&self, tenant: &TenantId, code: &CodeId) -> Option<crate::dirty::DirtyMark> {
        let tables = self.tables();
        let key = (tenant.clone(), code.clone());
        let (at, why) = tables.dirty.get(&key)?;
        let (resyncs, due_at_ms) = tables.dirty_due.get(&key).copied().unwrap_or((0, *at));
        Some(crate::dirty::DirtyMark {
            tenant: tenant.clone(),
            code: code.clone(),
            marked_at_ms: *at,
            why: Some(*why),
            resyncs,
            due_at_ms,
            suspect: tables.dirty_suspects.get(&key).copied(),
        })
    }

    /// The fan-out mark named `mark_key` (`FanOut::mark_key`), if one is stored.
    pub fn fan_out_mark(
        &self,
        tenant: &TenantId,
        mark_key: &str,
    ) -> Option<crate::dirty::FanOutMark> {
        self.tables()
            .fan_out_marks
            .get(&(tenant.clone(), mark_key.to_owned()))
            .cloned()
    }

    /// Codes whose drift was repaired on the tenant-day.
    pub fn repaired(&self, tenant: &TenantId, day: &str) -> u32 {
        let tables = self.tables();
        let repaired = tables
            .drift_codes
            .iter()
            .filter(|((t, d, _), code)| t == tenant && d == day && code.repaired)
            .count();
        u32::try_from(repaired).unwrap_or(u32::MAX)
    }

    pub fn set_pushed(&self, tenant: &TenantId, code: &CodeId, pushed: PushedList) {
        self.tables()
            .pushed
            .insert((tenant.clone(), code.clone()), pushed);
    }

    pub fn stored_pushed(&self, tenant: &TenantId, code: &CodeId) -> Option<PushedList> {
        self.tables()
            .pushed
            .get(&(tenant.clone(), code.clone()))
            .cloned()
    }

    /// Seats `staff` on exactly `codes` in the staff -> codes index (codes need not be stored).
    pub fn seat(&self, tenant: &TenantId, staff: &StaffId, codes: &[&CodeId]) {
        self.index(tenant, Seat::Staff(staff.clone()), codes);
    }

    /// Lists `department` on exactly `codes` in the department -> codes index.
    pub fn list_department(&self, tenant: &TenantId, department: &DepartmentId, codes: &[&CodeId]) {
        self.index(tenant, Seat::Department(department.clone()), codes);
    }

    fn index(&self, tenant: &TenantId, seat: Seat, codes: &[&CodeId]) {
        let mut tables = self.tables();
        tables.code_index.clear_seat(tenant, &seat);
        for code in codes {
            tables
                .code_index
                .insert(&(tenant.clone(), (*code).clone()), seat.clone());
        }
    }

    /// The staff members whose staff -> codes index lists `code`.
    pub fn staff_seated_on(&self, tenant: &TenantId, code: &CodeId) -> BTreeSet<StaffId> {
        self.tables()
            .code_index
            .seats_of(&(tenant.clone(), code.clone()))
            .into_iter()
            .flatten()
            .filter_map(|seat| match seat {
                Seat::Staff(staff) => Some(staff.clone()),
                Seat::Department(_) => None,
            })
            .collect()
    }

    /// Whether an edit of the code still owes index writes.
    pub fn code_owes_index_writes(&self, tenant: &TenantId, code: &CodeId) -> bool {
        self.tables()
            .code_owed
            .get(&(tenant.clone(), code.clone()))
            .is_some_and(|owed| !owed.is_empty())
    }

    /// Makes another request win the next creation race for `code` with `config_id`.
    pub fn lose_next_creation_race(&self, tenant: &TenantId, code: &CodeId, config_id: &str) {
        self.tables()
            .race
            .insert((tenant.clone(), code.clone()), config_id.to_owned());
    }

    /// Another edit sets the code's members (a new version) just before the next conditional
    /// `put_code` of it, after the caller read the code.
    pub fn edit_before_next_code_write(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        members: &[StaffId],
    ) {
        self.tables()
            .edit_race
            .insert((tenant.clone(), code.clone()), members.to_vec());
    }

    /// The staff member cannot be read: their codes and their schedule (`codes_of_staff` and
    /// `ScheduleFacts::schedule` fail for them alone).
    pub fn make_unreadable(&self, staff: &StaffId, unreadable: bool) {
        let mut tables = self.tables();
        if unreadable {
            tables.unreadable_staff.insert(staff.clone());
        } else {
            tables.unreadable_staff.remove(staff);
        }
    }

    /// The code's snapshot cannot be read (`CodeFacts::snapshot` fails for it alone).
    pub fn make_code_unreadable(&self, code: &CodeId, unreadable: bool) {
        let mut tables = self.tables();
        if unreadable {
            tables.unreadable_codes.insert(code.clone());
        } else {
            tables.unreadable_codes.remove(code);
        }
    }

    // ---------------------------------------------------------------- due items and cursor

    /// The minute the subject's due item is due, if it has one.
    pub fn stored_due(&self, tenant: &TenantId, subject: &Subject) -> Option<Minute> {
        self.stored_due_handled(tenant, subject)
            .map(|(minute, _)| minute)
    }

    /// The subject's due item: its minute and the time it was handled through.
    pub fn stored_due_handled(
        &self,
        tenant: &TenantId,
        subject: &Subject,
    ) -> Option<(Minute, u64)> {
        self.tables().due.get(&(tenant.clone(), subject.clone()))
    }

    /// A due item in `minute`, handled through just before it.
    pub fn put_due(&self, tenant: &TenantId, subject: Subject, minute: Minute) {
        let through = minute.start_ms().saturating_sub(1);
        self.put_due_handled(tenant, subject, minute, through);
    }

    pub fn put_due_handled(
        &self,
        tenant: &TenantId,
        subject: Subject,
        minute: Minute,
        handled_through_ms: u64,
    ) {
        self.tables()
            .due
            .insert((tenant.clone(), subject), minute, handled_through_ms);
    }

    pub fn cursor(&self) -> Option<Minute> {
        self.tables().cursor
    }

    pub fn set_cursor(&self, cursor: Minute) {
        self.tables().cursor = Some(cursor);
    }

    /// Another run holds the tick's cursor until `until_ms`.
    pub fn hold_cursor_lease(&self, owner: &str, until_ms: u64) {
        let mut tables = self.tables();
        tables.cursor_owner = Some(owner.to_owned());
        tables.cursor_lease_until_ms = until_ms;
    }

    /// Who holds or last held the cursor, and until when.
    pub fn cursor_lease(&self) -> (Option<String>, u64) {
        let tables = self.tables();
        (tables.cursor_owner.clone(), tables.cursor_lease_until_ms)
    }

    /// The minutes `due_in` was asked for, in order.
    pub fn minutes_read(&self) -> Vec<Minute> {
        self.tables().minutes_read.clone()
    }

    // ---------------------------------------------------------------- adds and limits

    /// The adds counted, in order (a redelivered add is counted once).
    pub fn counted(&self) -> Vec<AddFact> {
        self.tables().counted.clone()
    }

    /// The kinds of the events counted as ignored, in order.
    pub fn ignored(&self) -> Vec<String> {
        self.tables().ignored.clone()
    }

    /// A claim of the quota loop: `claim.staff` reached `claim.limit` on `day`.
    pub fn insert_claim(&self, tenant: &TenantId, day: &str, claim: LimitReached) {
        let claim = LimitClaim {
            tenant: tenant.clone(),
            staff: claim.staff,
            limit: claim.limit,
            day: day.to_owned(),
            code: claim.code,
            owner: String::new(),
            claimed_at_ms: 0,
            lease_until_ms: 0,
        };
        self.tables().limit_claims.push((claim, true));
    }

    /// The limit claims made, in order.
    pub fn limit_claims(&self) -> Vec<LimitClaim> {
        self.tables()
            .limit_claims
            .iter()
            .map(|(claim, _)| claim.clone())
            .collect()
    }

    // ---------------------------------------------------------------- the refresh's records

    /// The code's lease as stored (`None` frees it).
    pub fn set_code_lease(&self, tenant: &TenantId, code: &CodeId, lease: Option<Lease>) {
        let key = (tenant.clone(), code.clone());
        let mut tables = self.tables();
        match lease {
            Some(lease) => tables.leases.insert(key, lease),
            None => tables.leases.remove(&key),
        };
    }

    /// How many times the code's lease was taken.
    pub fn lease_acquisitions(&self, tenant: &TenantId, code: &CodeId) -> u64 {
        self.tables()
            .lease_acquisitions
            .get(&(tenant.clone(), code.clone()))
            .copied()
            .unwrap_or(0)
    }

    pub fn code_lease(&self, tenant: &TenantId, code: &CodeId) -> Option<Lease> {
        self.tables()
            .leases
            .get(&(tenant.clone(), code.clone()))
            .cloned()
    }

    /// While on, another writer takes each lease over (after it expires) as soon as it is
    /// granted, so the holder's fenced writes are refused.
    pub fn set_leases_taken_over(&self, taken_over: bool) {
        self.tables().leases_taken_over = taken_over;
    }

    /// While on, `CodeRecords::record_push` fails.
    pub fn fail_records(&self, fail: bool) {
        self.tables().records_fail = fail;
    }

    /// The codes whose snapshot was read, in order.
    pub fn snapshots_read(&self) -> Vec<CodeId> {
        self.tables().snapshots_read.clone()
    }

    /// The pushes recorded, in order.
    pub fn pushes(&self) -> Vec<PushRecord> {
        self.tables().pushes.clone()
    }

    /// How often a code was recorded starved.
    pub fn starved(&self) -> u32 {
        self.tables().starved
    }

    /// Every refresh's tally, added up.
    pub fn tally(&self) -> Tally {
        self.tables().tally
    }

    /// How many writes of a tally there were.
    pub fn tally_writes(&self) -> usize {
        self.tables().tally_writes
    }

    /// The platform's requeue counts, added up, and how many writes they took.
    pub fn requeues(&self) -> (crate::refresh::Requeues, usize) {
        self.tables().requeues
    }

    pub fn marks(&self) -> Marks {
        self.tables().marks.clone()
    }
}
