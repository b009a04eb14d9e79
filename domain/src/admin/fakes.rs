//! In-memory versions of the admin ports, for unit tests here and in `functions/admin-api`.

use super::ports::{AdminStore, ContactWays, StaffChange, VersionedCode};
use crate::facts::TenantProfiles;
use crate::membership::{
    candidates, AddCounts, CodeConfig, CodeId, DepartmentId, Employment, StaffFacts, StaffId,
    WeeklySchedule,
};
use crate::owed::{replan, Owed, WRITES_PER_TRANSACTION};
use crate::reasons::ReasonQueue;
use crate::reasons::RefreshReason;
use crate::refresh::{CodeFacts, CodeSnapshot, PushedList, StoredCode};
use crate::schedules::{DueWriter, Minute, Subject};
use crate::tenants::{TenantId, TenantProfile};
use crate::wecom::contact_way::{CorpCredentials, CreatedContactWay, NewContactWay};
use crate::wecom::errors::WeComError;
use crate::StoreError;
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

type CodeKey = (TenantId, CodeId);
type DepartmentKey = (TenantId, DepartmentId);

/// A code's entry in the staff -> codes or the department -> codes index.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
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

#[derive(Default)]
struct Tables {
    profiles: HashMap<TenantId, TenantProfile>,
    staff: HashMap<(TenantId, StaffId), StaffFacts>,
    codes: HashMap<CodeKey, VersionedCode>,
    pushed: HashMap<CodeKey, PushedList>,
    today: HashMap<(TenantId, CodeId, StaffId), AddCounts>,
    departments: HashMap<(TenantId, DepartmentId), BTreeSet<StaffId>>,
    /// The schedule tick's due items, and when each staff member's schedule was set.
    due: HashMap<(TenantId, Subject), Minute>,
    schedule_at_ms: HashMap<(TenantId, StaffId), u64>,
    /// A contact way another request stores first, just before the next `set_config_id`.
    race: HashMap<CodeKey, String>,
    /// The staff -> codes and department -> codes indexes, each code's entries, and the index
    /// writes an interrupted edit still owes (`crate::owed`), as the table keeps them.
    code_index: HashMap<CodeKey, BTreeSet<Seat>>,
    code_owed: HashMap<CodeKey, Owed<Seat>>,
    /// Each staff member's departments (their staff item), and what a department replacement
    /// still owes them.
    staff_departments: HashMap<(TenantId, StaffId), BTreeSet<DepartmentId>>,
    department_owed: HashMap<DepartmentKey, Owed<StaffId>>,
    /// Transactions written, and how many more succeed before every one fails.
    transactions: usize,
    transactions_left: Option<usize>,
    unavailable: bool,
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

/// The table, as the admin API sees it. Clones share their contents.
#[derive(Clone, Default)]
pub struct InMemoryAdminStore {
    tables: Arc<Mutex<Tables>>,
}

impl InMemoryAdminStore {
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

    pub fn set_unavailable(&self, unavailable: bool) {
        self.tables().unavailable = unavailable;
    }

    pub fn insert_profile(&self, tenant: &TenantId, profile: TenantProfile) {
        self.tables().profiles.insert(tenant.clone(), profile);
    }

    pub fn stored_profile(&self, tenant: &TenantId) -> Option<TenantProfile> {
        self.tables().profiles.get(tenant).cloned()
    }

    pub fn insert_staff(&self, tenant: &TenantId, staff: &StaffId, facts: StaffFacts) {
        self.tables()
            .staff
            .insert((tenant.clone(), staff.clone()), facts);
    }

    pub fn stored_staff(&self, tenant: &TenantId, staff: &StaffId) -> Option<StaffFacts> {
        self.tables()
            .staff
            .get(&(tenant.clone(), staff.clone()))
            .cloned()
    }

    pub fn stored_code(&self, tenant: &TenantId, code: &CodeId) -> Option<VersionedCode> {
        self.tables()
            .codes
            .get(&(tenant.clone(), code.clone()))
            .cloned()
    }

    pub fn set_today(&self, tenant: &TenantId, code: &CodeId, staff: &StaffId, counts: AddCounts) {
        self.tables()
            .today
            .insert((tenant.clone(), code.clone(), staff.clone()), counts);
    }

    pub fn set_pushed(&self, tenant: &TenantId, code: &CodeId, pushed: PushedList) {
        self.tables()
            .pushed
            .insert((tenant.clone(), code.clone()), pushed);
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

    pub fn stored_pushed(&self, tenant: &TenantId, code: &CodeId) -> Option<PushedList> {
        self.tables()
            .pushed
            .get(&(tenant.clone(), code.clone()))
            .cloned()
    }

    /// The minute the subject's due item is due, if it has one.
    pub fn stored_due(&self, tenant: &TenantId, subject: &Subject) -> Option<Minute> {
        self.tables()
            .due
            .get(&(tenant.clone(), subject.clone()))
            .copied()
    }

    /// After `transactions` more successful transactions every transaction fails (as a
    /// DynamoDB outage or a timed-out function would cut an edit short); `None` heals it.
    pub fn fail_transactions_after(&self, transactions: Option<usize>) {
        self.tables().transactions_left = transactions;
    }

    /// Transactions written so far (each a `TransactWriteItems`, one round trip).
    pub fn transactions(&self) -> usize {
        self.tables().transactions
    }

    /// The staff members whose staff -> codes index lists `code`.
    pub fn staff_seated_on(&self, tenant: &TenantId, code: &CodeId) -> BTreeSet<StaffId> {
        self.tables()
            .code_index
            .get(&(tenant.clone(), code.clone()))
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

    /// Makes another request win the next creation race for `code` with `config_id`.
    pub fn lose_next_creation_race(&self, tenant: &TenantId, code: &CodeId, config_id: &str) {
        self.tables()
            .race
            .insert((tenant.clone(), code.clone()), config_id.to_owned());
    }
}

#[async_trait::async_trait]
impl TenantProfiles for InMemoryAdminStore {
    async fn profile(&self, tenant: &TenantId) -> Result<Option<TenantProfile>, StoreError> {
        Ok(self.available()?.profiles.get(tenant).cloned())
    }
}

#[async_trait::async_trait]
impl CodeFacts for InMemoryAdminStore {
    async fn snapshot(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        now_ms: u64,
    ) -> Result<Option<CodeSnapshot>, StoreError> {
        let tables = self.available()?;
        let key = (tenant.clone(), code.clone());
        let (Some(profile), Some(stored)) = (tables.profiles.get(tenant), tables.codes.get(&key))
        else {
            return Ok(None);
        };
        let config = &stored.code.config;
        let departments: HashMap<DepartmentId, BTreeSet<StaffId>> = config
            .departments
            .iter()
            .filter_map(|d| {
                let members = tables.departments.get(&(tenant.clone(), d.clone()))?;
                Some((d.clone(), members.clone()))
            })
            .collect();
        let expanded = candidates(config, &departments);
        let people: Vec<&StaffId> = expanded.iter().chain(&config.fallback).collect();
        let staff = people
            .iter()
            .filter_map(|s| {
                let facts = tables.staff.get(&(tenant.clone(), (*s).clone()))?;
                Some(((*s).clone(), facts.clone()))
            })
            .collect();
        let today = people
            .iter()
            .filter_map(|s| {
                let counts = tables
                    .today
                    .get(&(tenant.clone(), code.clone(), (*s).clone()))?;
                Some(((*s).clone(), *counts))
            })
            .collect();
        Ok(Some(CodeSnapshot {
            profile: profile.clone(),
            code: stored.code.clone(),
            staff,
            adds: today,
            departments,
            now_ms,
            last_pushed: tables.pushed.get(&key).cloned(),
        }))
    }
}

#[async_trait::async_trait]
impl DueWriter for InMemoryAdminStore {
    async fn set_due(
        &self,
        tenant: &TenantId,
        subject: &Subject,
        minute: Minute,
    ) -> Result<(), StoreError> {
        self.available()?
            .due
            .insert((tenant.clone(), subject.clone()), minute);
        Ok(())
    }

    async fn clear_due(&self, tenant: &TenantId, subject: &Subject) -> Result<(), StoreError> {
        self.available()?
            .due
            .remove(&(tenant.clone(), subject.clone()));
        Ok(())
    }

    async fn due_subjects(&self, tenant: &TenantId) -> Result<Vec<Subject>, StoreError> {
        Ok(self
            .available()?
            .due
            .keys()
            .filter(|(t, _)| t == tenant)
            .map(|(_, subject)| subject.clone())
            .collect())
    }
}

#[async_trait::async_trait]
impl AdminStore for InMemoryAdminStore {
    async fn set_schedule(
        &self,
        tenant: &TenantId,
        staff: &StaffId,
        schedule: Option<&WeeklySchedule>,
        at_ms: u64,
    ) -> Result<bool, StoreError> {
        let mut tables = self.available()?;
        let key = (tenant.clone(), staff.clone());
        if tables
            .schedule_at_ms
            .get(&key)
            .is_some_and(|&set| set > at_ms)
        {
            return Ok(false);
        }
        tables.schedule_at_ms.insert(key.clone(), at_ms);
        tables
            .staff
            .entry(key)
            .or_insert(StaffFacts {
                online: false,
                employment: Employment::Active,
                rejected_by_wecom: false,
                schedule: None,
            })
            .schedule = schedule.cloned();
        Ok(true)
    }

    async fn put_profile(
        &self,
        tenant: &TenantId,
        profile: &TenantProfile,
    ) -> Result<(), StoreError> {
        self.available()?
            .profiles
            .insert(tenant.clone(), profile.clone());
        Ok(())
    }

    async fn update_staff(
        &self,
        tenant: &TenantId,
        staff: &StaffId,
        change: &StaffChange,
        _now_ms: u64,
    ) -> Result<StaffFacts, StoreError> {
        let mut tables = self.available()?;
        let facts = tables
            .staff
            .entry((tenant.clone(), staff.clone()))
            .or_insert(StaffFacts {
                online: false,
                employment: Employment::Active,
                rejected_by_wecom: false,
                schedule: None,
            });
        facts.online = change.online;
        if let Some(employment) = change.employment {
            facts.employment = employment;
        }
        Ok(facts.clone())
    }

    async fn codes_of_staff(
        &self,
        tenant: &TenantId,
        staff: &StaffId,
    ) -> Result<Vec<CodeId>, StoreError> {
        // As the table answers: the staff -> codes index, and the department -> codes index of
        // each department the staff member's record lists.
        let tables = self.available()?;
        let departments = tables
            .staff_departments
            .get(&(tenant.clone(), staff.clone()))
            .cloned()
            .unwrap_or_default();
        let mut codes: Vec<CodeId> = tables
            .code_index
            .iter()
            .filter(|((t, _), seats)| {
                t == tenant
                    && seats.iter().any(|seat| match seat {
                        Seat::Staff(s) => s == staff,
                        Seat::Department(d) => departments.contains(d),
                    })
            })
            .map(|((_, code), _)| code.clone())
            .collect();
        codes.sort();
        Ok(codes)
    }

    async fn codes_of_tenant(&self, tenant: &TenantId) -> Result<Vec<CodeId>, StoreError> {
        let tables = self.available()?;
        let mut codes: Vec<CodeId> = tables
            .codes
            .keys()
            .filter(|(t, _)| t == tenant)
            .map(|(_, code)| code.clone())
            .collect();
        codes.sort();
        Ok(codes)
    }

    async fn code(
        &self,
        tenant: &TenantId,
        code: &CodeId,
    ) -> Result<Option<VersionedCode>, StoreError> {
        Ok(self
            .available()?
            .codes
            .get(&(tenant.clone(), code.clone()))
            .cloned())
    }

    async fn put_code(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        config: &CodeConfig,
        _now_ms: u64,
    ) -> Result<VersionedCode, StoreError> {
        let mut tables = self.available()?;
        let key = (tenant.clone(), code.clone());
        let previous = tables.codes.get(&key).cloned();
        let owed_before = tables.code_owed.get(&key).cloned().unwrap_or_default();
        let stored_seats = previous
            .as_ref()
            .map(|p| seats(&p.code.config))
            .unwrap_or_default();
        let plan = replan(&stored_seats, &owed_before, &seats(config));
        let stored = VersionedCode {
            code: StoredCode {
                config: config.clone(),
                config_id: previous.as_ref().and_then(|p| p.code.config_id.clone()),
                created_with: previous
                    .as_ref()
                    .map(|p| p.code.created_with.clone())
                    .unwrap_or_default(),
            },
            version: previous.as_ref().map_or(1, |p| p.version + 1),
        };
        let answer = stored.clone();
        let (owned_key, index_key) = (key.clone(), key.clone());
        land(
            &mut tables,
            &owed_before,
            plan,
            |tables| {
                tables.codes.insert(key, stored);
            },
            |tables| tables.code_owed.entry(owned_key.clone()).or_default(),
            |tables, seat, put| {
                let index = tables.code_index.entry(index_key.clone()).or_default();
                if put {
                    index.insert(seat.clone());
                } else {
                    index.remove(seat);
                }
            },
        )?;
        Ok(answer)
    }

    async fn delete_code(&self, tenant: &TenantId, code: &CodeId) -> Result<(), StoreError> {
        let mut tables = self.available()?;
        let key = (tenant.clone(), code.clone());
        tables.codes.remove(&key);
        tables.code_index.remove(&key);
        tables.code_owed.remove(&key);
        tables.pushed.remove(&key);
        tables
            .today
            .retain(|(t, c, _), _| !(t == tenant && c == code));
        Ok(())
    }

    async fn set_staff_departments(
        &self,
        tenant: &TenantId,
        staff: &StaffId,
        departments: &BTreeSet<DepartmentId>,
        _at_ms: u64,
    ) -> Result<Vec<DepartmentId>, StoreError> {
        let mut tables = self.available()?;
        tables
            .staff_departments
            .insert((tenant.clone(), staff.clone()), departments.clone());
        for department in departments {
            tables
                .departments
                .entry((tenant.clone(), department.clone()))
                .or_default();
        }
        let mut changed: Vec<DepartmentId> = tables
            .departments
            .iter_mut()
            .filter(|((t, _), _)| t == tenant)
            .filter_map(|((_, department), members)| {
                let moved = if departments.contains(department) {
                    members.insert(staff.clone())
                } else {
                    members.remove(staff)
                };
                moved.then(|| department.clone())
            })
            .collect();
        changed.sort();
        Ok(changed)
    }

    async fn set_department_members(
        &self,
        tenant: &TenantId,
        department: &DepartmentId,
        members: &BTreeSet<StaffId>,
        _at_ms: u64,
    ) -> Result<Vec<StaffId>, StoreError> {
        let mut tables = self.available()?;
        let key = (tenant.clone(), department.clone());
        let before = tables.departments.get(&key).cloned().unwrap_or_default();
        let owed_before = tables
            .department_owed
            .get(&key)
            .cloned()
            .unwrap_or_default();
        let plan = replan(&before, &owed_before, members);
        // In id order, joined and left together, as the table's adapter answers.
        let changed: BTreeSet<StaffId> = plan.entries().map(|(staff, _)| staff.clone()).collect();
        let owed_key = key.clone();
        land(
            &mut tables,
            &owed_before,
            plan,
            |tables| {
                tables.departments.insert(key, members.clone());
            },
            |tables| tables.department_owed.entry(owed_key.clone()).or_default(),
            |tables, staff, member| {
                let departments = tables
                    .staff_departments
                    .entry((tenant.clone(), staff.clone()))
                    .or_default();
                if member {
                    departments.insert(department.clone());
                } else {
                    departments.remove(department);
                }
            },
        )?;
        Ok(changed.into_iter().collect())
    }

    async fn codes_listing_department(
        &self,
        tenant: &TenantId,
        department: &DepartmentId,
    ) -> Result<Vec<CodeId>, StoreError> {
        let tables = self.available()?;
        let seat = Seat::Department(department.clone());
        let mut codes: Vec<CodeId> = tables
            .code_index
            .iter()
            .filter(|((t, _), seats)| t == tenant && seats.contains(&seat))
            .map(|((_, code), _)| code.clone())
            .collect();
        codes.sort();
        Ok(codes)
    }

    async fn set_config_id(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        config_id: &str,
        created_with: &[String],
    ) -> Result<bool, StoreError> {
        let mut tables = self.available()?;
        let key = (tenant.clone(), code.clone());
        let winner = tables.race.remove(&key);
        let Some(stored) = tables.codes.get_mut(&key) else {
            return Ok(false);
        };
        if let Some(winner) = winner {
            stored.code.config_id = Some(winner);
        }
        if stored.code.config_id.is_some() {
            return Ok(false);
        }
        stored.code.config_id = Some(config_id.to_owned());
        stored.code.created_with = created_with
            .iter()
            .filter_map(|u| StaffId::parse(u).ok())
            .collect();
        Ok(true)
    }
}

/// Collects refresh reasons, deduplicating by id as SQS FIFO does; can be switched to fail.
#[derive(Clone, Default)]
pub struct InMemoryReasonQueue {
    reasons: Arc<Mutex<Vec<RefreshReason>>>,
    ids: Arc<Mutex<std::collections::HashSet<String>>>,
    unavailable: Arc<Mutex<bool>>,
}

impl InMemoryReasonQueue {
    pub fn reasons(&self) -> Vec<RefreshReason> {
        self.reasons.lock().expect("fake queue lock").clone()
    }

    pub fn set_unavailable(&self, unavailable: bool) {
        *self.unavailable.lock().expect("fake queue lock") = unavailable;
    }
}

#[async_trait::async_trait]
impl ReasonQueue for InMemoryReasonQueue {
    async fn send(&self, reason: &RefreshReason) -> Result<(), StoreError> {
        if *self.unavailable.lock().expect("fake queue lock") {
            return Err(StoreError::new(
                "refresh queue",
                "the fake queue is switched off",
            ));
        }
        if self
            .ids
            .lock()
            .expect("fake queue lock")
            .insert(reason.deduplication_id())
        {
            self.reasons
                .lock()
                .expect("fake queue lock")
                .push(reason.clone());
        }
        Ok(())
    }
}

#[async_trait::async_trait]
impl crate::fanout::CodeIndex for InMemoryAdminStore {
    async fn codes_of(
        &self,
        tenant: &TenantId,
        source: &crate::reasons::Source,
    ) -> Result<Vec<CodeId>, StoreError> {
        use crate::reasons::Source;
        match source {
            Source::Staff { staff } => self.codes_of_staff(tenant, staff).await,
            Source::Department { department } => {
                self.codes_listing_department(tenant, department).await
            }
            Source::Tenant => self.codes_of_tenant(tenant).await,
        }
    }
}

/// Collects fan-outs and, like the fan-out function after the answer, expands each at once
/// into `reasons` through `index`, so a test sees the reasons a fact reaches.
#[derive(Clone)]
pub struct InMemoryFanOutQueue {
    fan_outs: Arc<Mutex<Vec<crate::reasons::FanOut>>>,
    index: InMemoryAdminStore,
    reasons: InMemoryReasonQueue,
}

impl InMemoryFanOutQueue {
    pub fn expanding_into(index: InMemoryAdminStore, reasons: InMemoryReasonQueue) -> Self {
        Self {
            fan_outs: Arc::default(),
            index,
            reasons,
        }
    }

    pub fn fan_outs(&self) -> Vec<crate::reasons::FanOut> {
        self.fan_outs.lock().expect("fake queue lock").clone()
    }
}

#[async_trait::async_trait]
impl crate::reasons::FanOutQueue for InMemoryFanOutQueue {
    async fn send(&self, fan_out: &crate::reasons::FanOut) -> Result<(), StoreError> {
        self.fan_outs
            .lock()
            .expect("fake queue lock")
            .push(fan_out.clone());
        let expander =
            crate::fanout::Expander::new(self.index.clone(), self.reasons.clone(), self.clone());
        expander.expand(fan_out, || false).await.map(|_| ())
    }
}

#[derive(Default)]
struct WeComState {
    created: Vec<(CorpCredentials, NewContactWay)>,
    deleted: Vec<String>,
    failure: Option<WeComError>,
    delete_failure: Option<WeComError>,
}

/// WeCom's contact ways: numbers them `cw-1`, `cw-2`... and remembers what was asked. Deleting
/// one it did not create, or deleted already, is 41044 as in WeCom.
#[derive(Clone, Default)]
pub struct FakeContactWays {
    state: Arc<Mutex<WeComState>>,
}

impl FakeContactWays {
    fn state(&self) -> MutexGuard<'_, WeComState> {
        self.state.lock().expect("fake WeCom lock")
    }

    /// Every later create fails with `error`.
    pub fn fail_with(&self, error: WeComError) {
        self.state().failure = Some(error);
    }

    /// Every later delete fails with `error`; `None` heals it.
    pub fn fail_deletes_with(&self, error: Option<WeComError>) {
        self.state().delete_failure = error;
    }

    pub fn created(&self) -> Vec<(CorpCredentials, NewContactWay)> {
        self.state().created.clone()
    }

    pub fn deleted(&self) -> Vec<String> {
        self.state().deleted.clone()
    }
}

#[async_trait::async_trait]
impl ContactWays for FakeContactWays {
    async fn create(
        &self,
        corp: &CorpCredentials,
        way: &NewContactWay,
    ) -> Result<CreatedContactWay, WeComError> {
        let mut state = self.state();
        if let Some(error) = state.failure.clone() {
            return Err(error);
        }
        state.created.push((corp.clone(), way.clone()));
        let config_id = format!("cw-{}", state.created.len());
        Ok(CreatedContactWay {
            qr_code: Some(format!("https://wework.example/qr/{config_id}")),
            config_id,
        })
    }

    async fn delete(&self, _corp: &CorpCredentials, config_id: &str) -> Result<(), WeComError> {
        let mut state = self.state();
        if let Some(error) = state.delete_failure.clone() {
            return Err(error);
        }
        let exists = (1..=state.created.len()).any(|i| format!("cw-{i}") == config_id)
            && !state.deleted.iter().any(|d| d == config_id);
        if !exists {
            return Err(WeComError::CodeGone { errcode: 41044 });
        }
        state.deleted.push(config_id.to_owned());
        Ok(())
    }
}
