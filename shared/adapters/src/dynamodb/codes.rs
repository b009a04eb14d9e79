//! Codes, staff, the staff -> codes index, and the refresh function's push records.

use super::conditions::ConditionalWriteError;
use super::keys::{LINK_ID, LINK_URL};
use super::leases;
use super::owed::{OwedEdit, OwedRead};
use super::{
    corrupt, get_bool, get_n, get_s, get_strings, key, keys, n, s, staff_from, strings, tenant_key,
    unavailable, DynamoStore, Item,
};
use aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder;
use aws_sdk_dynamodb::types::{
    AttributeValue, Put, ReturnValuesOnConditionCheckFailure, TransactWriteItem, Update,
};
use domain::codes::LeaseSeen;
use domain::codes::{CodeFacts, CodeSnapshot, PushedList, StoredCode};
use domain::facts::StaffLedger;
use domain::ids::TenantId;
use domain::ids::{CodeId, DepartmentId, StaffId};
use domain::lanes::{CodeAge, Lane};
use domain::membership::{
    candidates, AddCounts, CodeConfig, RotationSlot, MAX_DEPARTMENT_CANDIDATES,
};
use domain::owed::replan;
use domain::refresh::PageWrite;
use domain::refresh::{AfterRecord, CodeRecords, FencedWrite, Lease, PushRecord, Requeues, Tally};
use domain::tenants::tenant_day;
use domain::wecom::acquisition::AcquisitionLink;
use domain::StoreError;
use futures::{StreamExt, TryStreamExt};
use std::collections::{BTreeSet, HashMap};

/// Push history is kept for reports and audits, then collected.
const PUSH_LOG_TTL_SECS: u64 = 30 * 24 * 3600;

/// A code item as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeRecord {
    pub code: StoredCode,
    pub version: u64,
    pub created_at_ms: u64,
    pub updated_at_ms: u64,
}

/// Which staff -> code index entries an edit added and removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SeatChange {
    pub added: Vec<StaffId>,
    pub removed: Vec<StaffId>,
}

fn seated(config: &CodeConfig) -> BTreeSet<StaffId> {
    config
        .members
        .iter()
        .chain(&config.fallback)
        .cloned()
        .collect()
}

/// Department items read per request in a snapshot: a department item holds up to 2,000 ids
/// (about 40 KB), so a page stays far below `BatchGetItem`'s 16 MB, and a code listing many
/// large departments stops after the first page or two (`MAX_DEPARTMENT_CANDIDATES`).
const DEPARTMENTS_PER_PAGE: usize = 10;

fn unique_members(config: &CodeConfig) -> usize {
    config.members.iter().collect::<BTreeSet<_>>().len()
}

/// The sort keys of a code's entries in the staff -> codes and department -> codes indexes.
fn index_entries(code: &CodeId, config: &CodeConfig) -> BTreeSet<String> {
    seated(config)
        .iter()
        .map(|staff| keys::seat(staff, code))
        .chain(
            config
                .departments
                .iter()
                .map(|department| keys::department_seat(department, code)),
        )
        .collect()
}

pub(crate) fn code_record(item: &Item) -> Result<CodeRecord, StoreError> {
    let config: CodeConfig =
        serde_json::from_str(get_s(item, "config").ok_or_else(|| corrupt("code config"))?)
            .map_err(|_| corrupt("code config"))?;
    Ok(CodeRecord {
        code: StoredCode {
            config,
            config_id: get_s(item, "config_id").map(str::to_owned),
            created_with: parse_staff(&get_strings(item, "created_with")),
        },
        version: get_n(item, "version").unwrap_or(0),
        created_at_ms: get_n(item, "created_at_ms").unwrap_or(0),
        updated_at_ms: get_n(item, "updated_at_ms").unwrap_or(0),
    })
}

fn parse_staff(raw: &[String]) -> Vec<StaffId> {
    raw.iter().filter_map(|u| StaffId::parse(u).ok()).collect()
}

impl DynamoStore {
    pub async fn code(
        &self,
        tenant: &TenantId,
        code: &CodeId,
    ) -> Result<Option<CodeRecord>, StoreError> {
        let output = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(tenant_key(tenant, keys::code(code))))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| unavailable(e.into_service_error()))?;
        output.item.as_ref().map(code_record).transpose()
    }

    /// The stored items of `codes` (absent ones left out), strongly consistent, in
    /// `BatchGetItem`s of 100 keys.
    pub async fn code_records(
        &self,
        tenant: &TenantId,
        codes: &[CodeId],
    ) -> Result<Vec<(CodeId, CodeRecord)>, StoreError> {
        let items = self
            .batch_get(
                codes
                    .iter()
                    .map(|code| tenant_key(tenant, keys::code(code)))
                    .collect(),
            )
            .await?;
        items
            .iter()
            .map(|item| {
                let code = get_s(item, keys::SK)
                    .and_then(|sk| sk.strip_prefix(keys::CODE_PREFIX))
                    .and_then(|raw| CodeId::parse(raw).ok())
                    .ok_or_else(|| corrupt("code key"))?;
                Ok((code, code_record(item)?))
            })
            .collect()
    }

    /// Creates or replaces a code's configuration and keeps the staff -> codes and department
    /// -> codes indexes in step (`domain::owed`). The configuration and the index writes it owes
    /// are stored in one transaction conditioned on the version read, so two concurrent edits
    /// cannot both land; the owed writes then land in fenced chunks (one transaction in all
    /// for an edit of up to 98 entries). A retry, with the same configuration or another,
    /// finishes what an interrupted edit still owed, so the index always ends matching the
    /// configuration stored last.
    pub async fn put_code(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        config: &CodeConfig,
        now_ms: u64,
    ) -> Result<(CodeRecord, SeatChange), StoreError> {
        self.put_code_if(tenant, code, config, now_ms, None)
            .await?
            .ok_or_else(|| corrupt("an unconditional code write was refused"))
    }

    /// `put_code`, when `expected` is given only if the stored version is still that one
    /// (`Some(None)`: no code stored); `None` when it is not, and nothing was written.
    pub(crate) async fn put_code_if(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        config: &CodeConfig,
        now_ms: u64,
        expected: Option<Option<u64>>,
    ) -> Result<Option<(CodeRecord, SeatChange)>, StoreError> {
        let previous = self.code(tenant, code).await?;
        if expected.is_some_and(|version| version != previous.as_ref().map(|p| p.version)) {
            return Ok(None);
        }
        let owner = keys::code(code);
        let before = previous
            .as_ref()
            .map(|p| seated(&p.code.config))
            .unwrap_or_default();
        let after = seated(config);
        let change = SeatChange {
            added: after.difference(&before).cloned().collect(),
            removed: before.difference(&after).cloned().collect(),
        };
        // Owed chunks are written only in the transaction that writes the code's item, and
        // deleted before it: a code with no item has none, so a new code skips the query.
        // (On a tenant of many codes that query is the new code's costliest request.)
        let owed = match previous {
            Some(_) => self.read_owed(tenant, &owner).await?,
            None => OwedRead::default(),
        };
        let stored_entries = previous
            .as_ref()
            .map(|p| index_entries(code, &p.code.config))
            .unwrap_or_default();
        let plan = replan(&stored_entries, &owed.owed, &index_entries(code, config));
        let version = previous.as_ref().map_or(1, |p| p.version + 1);
        let created_at_ms = previous.as_ref().map_or(now_ms, |p| p.created_at_ms);
        let mut item = tenant_key(tenant, owner.clone());
        // Every code item is listed under its tenant in gsi1 (`keys::codes_index`).
        item.insert(keys::GSI1_PK.into(), s(keys::codes_index(tenant)));
        item.insert(keys::GSI1_SK.into(), s(code.as_str()));
        let owner_write = self.code_write(item, config, previous.as_ref(), now_ms)?;
        let index_write = |sk: &str, put: bool| -> Result<TransactWriteItem, StoreError> {
            let key = tenant_key(tenant, sk.to_owned());
            if put {
                self.put_in_transaction(key)
            } else {
                self.delete_in_transaction(key)
            }
        };
        if !owed.owed.is_empty() {
            tracing::info!(
                owed = owed.owed.len(),
                "finishing the index writes an earlier edit owed"
            );
        }
        let edit = OwedEdit {
            owner: &owner,
            version,
            owner_write,
            before: owed,
            plan,
        };
        self.write_owed(tenant, edit, &index_write).await?;
        let record = CodeRecord {
            code: StoredCode {
                config: config.clone(),
                config_id: previous.as_ref().and_then(|p| p.code.config_id.clone()),
                created_with: previous.map(|p| p.code.created_with).unwrap_or_default(),
            },
            version,
            created_at_ms,
            updated_at_ms: now_ms,
        };
        Ok(Some((record, change)))
    }

    /// The write of a code's item holding `config`, conditioned on the version it replaces
    /// (`previous`, or no item at all), keeping its contact way and creation list.
    fn code_write(
        &self,
        mut item: Item,
        config: &CodeConfig,
        previous: Option<&CodeRecord>,
        now_ms: u64,
    ) -> Result<TransactWriteItem, StoreError> {
        let version = previous.map_or(1, |p| p.version + 1);
        let created_at_ms = previous.map_or(now_ms, |p| p.created_at_ms);
        item.insert(
            "config".into(),
            s(serde_json::to_string(config).map_err(|_| corrupt("config"))?),
        );
        item.insert("version".into(), n(version));
        item.insert("created_at_ms".into(), n(created_at_ms));
        item.insert("updated_at_ms".into(), n(now_ms));
        if let Some(config_id) = previous.and_then(|p| p.code.config_id.as_ref()) {
            let created_with = previous
                .into_iter()
                .flat_map(|p| p.code.created_with.iter())
                .map(|u| u.as_str().to_owned());
            item.insert("config_id".into(), s(config_id));
            item.insert("created_with".into(), strings(created_with));
        }
        let put = Put::builder().table_name(&self.table).set_item(Some(item));
        let put = match previous {
            Some(p) => put
                .condition_expression("version = :seen")
                .expression_attribute_values(":seen", n(p.version)),
            None => put.condition_expression("attribute_not_exists(pk)"),
        };
        Ok(TransactWriteItem::builder()
            .put(put.build().map_err(unavailable)?)
            .build())
    }

    /// Stores the WeCom contact way created for a code and the list WeCom created it with;
    /// refuses to overwrite another one.
    pub async fn set_config_id(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        config_id: &str,
        created_with: &[String],
    ) -> Result<bool, StoreError> {
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(tenant_key(tenant, keys::code(code))))
            .update_expression("SET config_id = :id, created_with = :users")
            .expression_attribute_values(":users", strings(created_with.iter().cloned()))
            .condition_expression("attribute_exists(pk) AND attribute_not_exists(config_id)")
            .expression_attribute_values(":id", s(config_id))
            .send()
            .await;
        match result {
            Ok(_) => Ok(true),
            Err(error) => error.refused_or_unavailable().map(|_| false),
        }
    }

    /// Every code the staff member sits on, as a member or fallback or through a department
    /// the code lists: the staff -> codes and department -> codes indexes (queries, never a
    /// scan).
    pub async fn codes_of_staff(
        &self,
        tenant: &TenantId,
        staff: &StaffId,
    ) -> Result<Vec<CodeId>, StoreError> {
        let mut codes = BTreeSet::new();
        for code in self.keys_under(tenant, &keys::seats_of(staff)).await? {
            codes.insert(CodeId::parse(&code).map_err(|_| corrupt("seat"))?);
        }
        let departments = self.departments_of_staff(tenant, staff).await?;
        // Collected first: a lazy `map` over borrowed ids trips the compiler's higher-ranked
        // lifetime check inside `async_trait` methods.
        let mut queries = Vec::with_capacity(departments.len());
        for department in &departments {
            queries.push(StaffLedger::codes_listing_department(
                self, tenant, department,
            ));
        }
        let listing: Vec<Vec<CodeId>> = futures::stream::iter(queries)
            .buffer_unordered(super::ITEM_REQUESTS_IN_FLIGHT)
            .try_collect()
            .await?;
        codes.extend(listing.into_iter().flatten());
        Ok(codes.into_iter().collect())
    }

    /// Deletes a code's configuration, its last-pushed record and its index entries; answers
    /// what was deleted (`None`: nothing was stored, e.g. a repeat).
    pub async fn delete_code(
        &self,
        tenant: &TenantId,
        code: &CodeId,
    ) -> Result<Option<CodeRecord>, StoreError> {
        let Some(record) = self.code(tenant, code).await? else {
            return Ok(None);
        };
        // What an interrupted edit still owed: entries it had not deleted yet, and its chunks.
        let owed = self.read_owed(tenant, &keys::code(code)).await?;
        let mut entries = index_entries(code, &record.code.config);
        entries.extend(owed.owed.delete.iter().cloned());
        // Index entries first, the code item last: a crash in between leaves the code
        // deletable again by a retry, never an index entry pointing at nothing forever.
        let mut doomed: Vec<String> = entries.into_iter().collect();
        doomed.extend(owed.chunk_keys().iter().cloned());
        doomed.push(keys::pushed(code));
        doomed.push(keys::code(code));
        for sk in doomed {
            if sk == keys::code(code) {
                // After the record (no writer can write the page once the record and its lease
                // are gone: the page is only written in the record's fenced transaction), and
                // before the code item, so a retry deletes it too.
                self.delete_page(tenant, code).await?;
            }
            self.client
                .delete_item()
                .table_name(&self.table)
                .set_key(Some(tenant_key(tenant, sk)))
                .send()
                .await
                .map_err(|e| unavailable(e.into_service_error()))?;
        }
        Ok(Some(record))
    }

    /// Stored membership of `departments` (a department nobody is in, or that WeCom deleted,
    /// is absent).
    pub async fn departments(
        &self,
        tenant: &TenantId,
        departments: &[DepartmentId],
    ) -> Result<HashMap<DepartmentId, BTreeSet<StaffId>>, StoreError> {
        if departments.is_empty() {
            return Ok(HashMap::new());
        }
        let items = self
            .batch_get(
                departments
                    .iter()
                    .map(|d| tenant_key(tenant, keys::department(d)))
                    .collect(),
            )
            .await?;
        let mut stored = HashMap::new();
        for item in items {
            let Some(department) =
                get_s(&item, "department").and_then(|d| DepartmentId::parse(d).ok())
            else {
                continue;
            };
            let members = parse_staff(&get_strings(&item, "members"))
                .into_iter()
                .collect();
            stored.insert(department, members);
        }
        Ok(stored)
    }

    /// The code's departments as `candidates` expands them, read a page of
    /// `DEPARTMENTS_PER_PAGE` at a time in the code's order, stopping once they hold
    /// `MAX_DEPARTMENT_CANDIDATES` staff (the departments after that could add nobody).
    async fn departments_for_candidates(
        &self,
        tenant: &TenantId,
        config: &CodeConfig,
    ) -> Result<HashMap<DepartmentId, BTreeSet<StaffId>>, StoreError> {
        let mut read = HashMap::new();
        for page in config.departments.chunks(DEPARTMENTS_PER_PAGE) {
            read.extend(self.departments(tenant, page).await?);
            let expanded = candidates(config, &read).len() - unique_members(config);
            if expanded >= MAX_DEPARTMENT_CANDIDATES {
                break;
            }
        }
        Ok(read)
    }

    /// Every item under `prefix_of(code)` in each code's home, for every code of the tenant
    /// (the code index, then one query per code, `ITEM_REQUESTS_IN_FLIGHT` at once): e.g.
    /// every push log entry of a tenant, for reports.
    pub async fn query_each_code(
        &self,
        tenant: &TenantId,
        prefix_of: impl Fn(&CodeId) -> String,
    ) -> Result<Vec<Item>, StoreError> {
        let prefixes: Vec<String> = self
            .code_ids(tenant, None, None)
            .await?
            .iter()
            .map(prefix_of)
            .collect();
        let mut queries = Vec::with_capacity(prefixes.len());
        for prefix in &prefixes {
            queries.push(self.query_tenant(tenant, prefix, false));
        }
        let found: Vec<Vec<Item>> = futures::stream::iter(queries)
            .buffer_unordered(super::ITEM_REQUESTS_IN_FLIGHT)
            .try_collect()
            .await?;
        Ok(found.into_iter().flatten().collect())
    }

    /// Every shard of the tenant's refresh tallies, of `day` or of every day: what a reader
    /// sums (`keys::refresh_tally`).
    pub async fn refresh_tallies(
        &self,
        tenant: &TenantId,
        day: Option<&str>,
    ) -> Result<Vec<Item>, StoreError> {
        let mut items = Vec::new();
        for shard in 0..keys::REFRESH_TALLY_SHARDS {
            let prefix = format!("{}{}", keys::refresh_tally_shard(shard), day.unwrap_or(""));
            items.extend(self.query_tenant(tenant, &prefix, false).await?);
        }
        Ok(items)
    }

    /// Every item of a tenant whose sort key starts with `prefix`, e.g. a code's push history.
    pub async fn query_prefix(
        &self,
        tenant: &TenantId,
        prefix: &str,
    ) -> Result<Vec<Item>, StoreError> {
        self.query_tenant(tenant, prefix, false).await
    }
}

#[async_trait::async_trait]
impl CodeFacts for DynamoStore {
    #[tracing::instrument(skip(self), fields(tenant = %tenant, code = %code))]
    async fn snapshot(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        now_ms: u64,
    ) -> Result<Option<CodeSnapshot>, StoreError> {
        self.snapshots(&[(tenant, code)], now_ms)
            .await
            .pop()
            .unwrap_or(Ok(None))
    }

    /// Two strongly consistent batch reads for all of `codes` (more only past 100 keys, or for
    /// codes that list departments): every code's own items with each tenant's profile once,
    /// then every candidate's staff item and add counters, each key once however many of the
    /// codes list that staff member.
    #[tracing::instrument(skip_all, fields(codes = codes.len()))]
    async fn snapshots(
        &self,
        codes: &[(&TenantId, &CodeId)],
        now_ms: u64,
    ) -> Vec<Result<Option<CodeSnapshot>, StoreError>> {
        match self.read_snapshots(codes, now_ms).await {
            Ok(snapshots) => snapshots,
            Err(error) => codes
                .iter()
                .map(|_| Err(StoreError::new(error.what, error.to_string())))
                .collect(),
        }
    }
}

/// Keys read in one batch, each once (BatchGetItem refuses a request that names a key twice).
#[derive(Default)]
struct Wanted {
    seen: BTreeSet<(String, String)>,
    keys: Vec<Item>,
}

impl Wanted {
    fn add(&mut self, tenant: &TenantId, sk: String) {
        let pk = keys::home(tenant, &sk);
        if self.seen.insert((pk.clone(), sk.clone())) {
            self.keys.push(super::key(pk, sk));
        }
    }
}

/// The items a batch read found, by key.
struct Found(HashMap<(String, String), Item>);

impl Found {
    fn of(items: Vec<Item>) -> Self {
        Self(
            items
                .into_iter()
                .filter_map(|item| {
                    let pk = get_s(&item, keys::PK)?.to_owned();
                    let sk = get_s(&item, keys::SK)?.to_owned();
                    Some(((pk, sk), item))
                })
                .collect(),
        )
    }

    fn get(&self, tenant: &TenantId, sk: &str) -> Option<&Item> {
        self.0.get(&(keys::home(tenant, sk), sk.to_owned()))
    }
}

/// A code's own items as read, before its candidates' are.
struct CodeRead {
    profile: domain::tenants::TenantProfile,
    tenant_paused: Option<domain::tenants::TenantPause>,
    code: StoredCode,
    last_pushed: Option<PushedList>,
    dirty_since_ms: Option<u64>,
    lease: LeaseSeen,
    age: CodeAge,
    departments: HashMap<DepartmentId, BTreeSet<StaffId>>,
    people: BTreeSet<StaffId>,
    counters: CountersRead,
    day: String,
}

impl DynamoStore {
    async fn read_snapshots(
        &self,
        codes: &[(&TenantId, &CodeId)],
        now_ms: u64,
    ) -> Result<Vec<Result<Option<CodeSnapshot>, StoreError>>, StoreError> {
        let mut first = Wanted::default();
        for (tenant, code) in codes {
            first.add(tenant, keys::PROFILE.to_owned());
            first.add(tenant, keys::PAUSE.to_owned());
            for sk in [keys::code(code), keys::pushed(code), keys::dirty(code)] {
                first.add(tenant, sk);
            }
        }
        let first = Found::of(self.batch_get(first.keys).await?);
        let own = codes
            .iter()
            .map(|(tenant, code)| self.code_read(&first, tenant, code, now_ms));
        let own: Vec<Result<Option<CodeRead>, StoreError>> = futures::future::join_all(own).await;
        let mut people = Wanted::default();
        for ((tenant, code), read) in codes.iter().zip(&own) {
            if let Ok(Some(read)) = read {
                for staff in &read.people {
                    for sk in read.counters.keys(&read.day, code, staff) {
                        people.add(tenant, sk);
                    }
                }
            }
        }
        let people = Found::of(self.batch_get(people.keys).await?);
        Ok(codes
            .iter()
            .zip(own)
            .map(|((tenant, code), read)| {
                Ok(read?.map(|read| read.into_snapshot(&people, tenant, code, now_ms)))
            })
            .collect())
    }

    /// A code's own items from `first`, and its departments (read now, as they decide its
    /// candidates). `Ok(None)` when the tenant or the code does not exist, or WeCom no longer
    /// knows the code.
    async fn code_read(
        &self,
        first: &Found,
        tenant: &TenantId,
        code: &CodeId,
        now_ms: u64,
    ) -> Result<Option<CodeRead>, StoreError> {
        let (Some(profile), Some(code_item)) = (
            first.get(tenant, keys::PROFILE),
            first.get(tenant, &keys::code(code)),
        ) else {
            return Ok(None);
        };
        // WeCom answered 41044 for it (`FailureMarks::mark_code_gone`): refreshed no more.
        if get_n::<u64>(code_item, "wecom_gone_at_ms").is_some() {
            return Ok(None);
        }
        let profile = self.profile_from(tenant, profile).await?;
        let tenant_paused = first
            .get(tenant, keys::PAUSE)
            .map(super::tenants::pause_from)
            .transpose()?;
        let record = code_record(code_item)?;
        let record_item = first.get(tenant, &keys::pushed(code));
        // The lease's attributes alone (a code leased before its first record) are no record.
        let last_pushed = record_item
            .filter(|item| item.contains_key("users") || item.contains_key("starved"))
            .map(|item| PushedList {
                users: parse_staff(&get_strings(item, "users")),
                pushed_at_ms: get_n(item, "pushed_at_ms").unwrap_or(0),
                starved: get_bool(item, "starved").unwrap_or(false),
                rotation: get_s(item, "rotation").and_then(|raw| serde_json::from_str(raw).ok()),
            });
        let departments = self
            .departments_for_candidates(tenant, &record.code.config)
            .await?;
        let mut people: BTreeSet<StaffId> = candidates(&record.code.config, &departments)
            .into_iter()
            .collect();
        people.extend(record.code.config.fallback.iter().cloned());
        let counters = CountersRead {
            on_code: record.code.config.switches.daily_limit.is_some(),
            on_code_total: record.code.config.switches.add_limit.is_some(),
            all_codes: profile.company_daily_cap.is_some(),
        };
        Ok(Some(CodeRead {
            day: tenant_day(now_ms, profile.timezone),
            profile,
            tenant_paused,
            age: CodeAge {
                created_at_ms: record.created_at_ms,
                updated_at_ms: record.updated_at_ms,
            },
            code: record.code,
            last_pushed,
            dirty_since_ms: first
                .get(tenant, &keys::dirty(code))
                .and_then(|item| get_n(item, "marked_at_ms")),
            lease: record_item
                .map(|item| LeaseSeen {
                    acquisitions: get_n(item, leases::ACQUISITIONS).unwrap_or(0),
                    held_until_ms: get_n(item, leases::EXPIRES_MS).unwrap_or(0),
                })
                .unwrap_or_default(),
            departments,
            people,
            counters,
        }))
    }
}

impl CodeRead {
    /// The snapshot, with the staff facts, add counters and acquisition links of its
    /// candidates from `people`: a staff member with no record has no facts, and a counter
    /// never written (or not read) counts 0.
    fn into_snapshot(
        self,
        people: &Found,
        tenant: &TenantId,
        code: &CodeId,
        now_ms: u64,
    ) -> CodeSnapshot {
        let count = |counter: keys::Counter| {
            people
                .get(tenant, &counter.sk)
                .and_then(|item| get_n::<u32>(item, &counter.attribute))
                .unwrap_or(0)
        };
        let day = &self.day;
        let mut staff = HashMap::new();
        let mut adds = HashMap::new();
        let mut links = HashMap::new();
        for person in self.people {
            if let Some(item) = people.get(tenant, &keys::staff(&person)) {
                staff.insert(person.clone(), staff_from(item));
                if let Some(url) = get_s(item, LINK_URL) {
                    links.insert(person.clone(), url.to_owned());
                }
            }
            let counts = AddCounts {
                on_code: if self.counters.on_code {
                    count(keys::adds_today_on_code(day, code, &person))
                } else {
                    0
                },
                all_codes: if self.counters.all_codes {
                    count(keys::adds_today_all_codes(day, &person))
                } else {
                    0
                },
                on_code_total: if self.counters.on_code_total {
                    count(keys::adds_total(code, &person))
                } else {
                    0
                },
            };
            adds.insert(person, counts);
        }
        CodeSnapshot {
            profile: self.profile,
            code: self.code,
            staff,
            adds,
            departments: self.departments,
            now_ms,
            last_pushed: self.last_pushed,
            dirty_since_ms: self.dirty_since_ms,
            links,
            lease: self.lease,
            age: self.age,
            tenant_paused: self.tenant_paused,
        }
    }
}

/// Which add counters a recompute of the code reads: only those of the limits it has (a
/// daily limit reads the day's adds on the code, an add limit the code's total, the tenant's
/// company cap the day's adds on every code). `membership::limits_reached` and the rotation
/// look at no other, so a counter of a limit that is off is not read and counts 0: a refresh
/// of a code without limits reads one item per candidate, not four.
#[derive(Debug, Clone, Copy)]
struct CountersRead {
    on_code: bool,
    on_code_total: bool,
    all_codes: bool,
}

impl CountersRead {
    /// The keys a recompute of `code` reads for `staff`: the staff item, and the counters of
    /// the limits it has.
    fn keys(&self, day: &str, code: &CodeId, staff: &StaffId) -> Vec<String> {
        let mut wanted = vec![keys::staff(staff)];
        if self.on_code {
            wanted.push(keys::adds_today_on_code(day, code, staff).sk);
        }
        if self.all_codes {
            wanted.push(keys::adds_today_all_codes(day, staff).sk);
        }
        if self.on_code_total {
            wanted.push(keys::adds_total(code, staff).sk);
        }
        wanted
    }
}

impl DynamoStore {
    /// Sends `update` of the code's record on condition that `lease` is still the code's
    /// (`leases::FENCE`), and with `AfterRecord::Release` gives the lease back in the same
    /// write: all or nothing, and nothing when the lease was taken over. `clauses` are the
    /// record's own sets and removes; the lease's are added here. With a `page` write (a
    /// landing code's, `page_write`), the record and the page are one `TransactWriteItems`,
    /// the record's item carrying the fence: the page changes with its record or not at all.
    async fn fenced_update(
        &self,
        update: UpdateItemFluentBuilder,
        lease: &Lease,
        clauses: (&[&str], &[&str]),
        then: AfterRecord,
        page: Option<TransactWriteItem>,
    ) -> Result<FencedWrite, StoreError> {
        let (sets, removes) = clauses;
        let mut removes = removes.to_vec();
        if then == AfterRecord::Release {
            removes.push(leases::EXPIRES_MS);
        }
        let mut expression = format!("SET {}", sets.join(", "));
        if !removes.is_empty() {
            expression.push_str(&format!(" REMOVE {}", removes.join(", ")));
        }
        let update = update
            .update_expression(expression)
            .condition_expression(leases::FENCE)
            .expression_attribute_values(":holder", s(&lease.holder));
        let Some(page) = page else {
            return match update.send().await {
                Ok(_) => Ok(FencedWrite::Written),
                Err(error) => error
                    .refused_or_unavailable()
                    .map(|_| FencedWrite::LeaseLost),
            };
        };
        let input = update.as_input();
        let record = Update::builder()
            .table_name(&self.table)
            .set_key(input.get_key().clone())
            .set_update_expression(input.get_update_expression().clone())
            .set_condition_expression(input.get_condition_expression().clone())
            .set_expression_attribute_names(input.get_expression_attribute_names().clone())
            .set_expression_attribute_values(input.get_expression_attribute_values().clone())
            .build()
            .map_err(|error| corrupt(&error.to_string()))?;
        let result = self
            .client
            .transact_write_items()
            .transact_items(TransactWriteItem::builder().update(record).build())
            .transact_items(page)
            .send()
            .await;
        match result {
            Ok(_) => Ok(FencedWrite::Written),
            Err(error) => {
                let refused = error.refused_or_unavailable()?;
                // Only the record's item carries a condition.
                if refused.refused_item(0) {
                    Ok(FencedWrite::LeaseLost)
                } else {
                    Err(refused.into_unavailable())
                }
            }
        }
    }

    fn record_update(&self, tenant: &TenantId, code: &CodeId) -> UpdateItemFluentBuilder {
        self.client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(tenant_key(tenant, keys::pushed(code))))
    }
}

/// The record's rotation in `update`: set when the code rotates, removed when it does not (the
/// landing page's condition, `attribute_exists(rotation)`, then refuses its visits).
fn with_rotation(
    update: UpdateItemFluentBuilder,
    rotation: Option<&[RotationSlot]>,
    sets: &mut Vec<&'static str>,
    removes: &mut Vec<&'static str>,
) -> Result<UpdateItemFluentBuilder, StoreError> {
    Ok(match rotation {
        Some(rotation) => {
            sets.push("rotation = :rotation");
            update.expression_attribute_values(
                ":rotation",
                s(serde_json::to_string(rotation).map_err(|_| corrupt("rotation"))?),
            )
        }
        None => {
            removes.push("rotation");
            update
        }
    })
}

#[async_trait::async_trait]
impl CodeRecords for DynamoStore {
    async fn record_push(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        lease: &Lease,
        push: &PushRecord,
        then: AfterRecord,
    ) -> Result<FencedWrite, StoreError> {
        let users = push.users.iter().map(|u| u.as_str().to_owned());
        // The record is rewritten whole but for the lease: what a Put would replace (the
        // landing page's counter and order key, a starvation's time, a rotation the push no
        // longer has) is removed, and the lease's attributes stay.
        let mut update = self
            .record_update(tenant, code)
            .expression_attribute_values(":users", strings(users.clone()))
            .expression_attribute_values(":at", n(push.pushed_at_ms))
            .expression_attribute_values(":fallback", AttributeValue::Bool(push.fallback))
            .expression_attribute_values(":no", AttributeValue::Bool(false));
        let mut sets = vec![
            "#users = :users",
            "pushed_at_ms = :at",
            "fallback = :fallback",
            "starved = :no",
        ];
        let mut removes = vec!["visits", "order_key", "starved_at_ms"];
        update = update.expression_attribute_names("#users", "users");
        update = with_rotation(update, push.rotation.as_deref(), &mut sets, &mut removes)?;
        // Two pushes of one code in the same millisecond must not overwrite each other's entry.
        let nonce = format!("{:06}", rand::random::<u32>() % 1_000_000);
        let mut log = tenant_key(tenant, keys::push_log(code, push.pushed_at_ms, &nonce));
        log.insert("users".into(), strings(users));
        log.insert("pushed_at_ms".into(), n(push.pushed_at_ms));
        log.insert("fallback".into(), AttributeValue::Bool(push.fallback));
        let lane = match push.lane {
            Lane::Fast => "fast",
            Lane::Slow => "slow",
        };
        log.insert("lane".into(), s(lane));
        log.insert(
            "fact_at_ms".into(),
            AttributeValue::L(push.fact_at_ms.iter().map(n).collect()),
        );
        log.insert(
            keys::EXPIRES_AT.into(),
            n(push.pushed_at_ms / 1000 + PUSH_LOG_TTL_SECS),
        );
        let page = push
            .page()
            .map(|page| self.page_write(tenant, code, &page))
            .transpose()?;
        let written = self
            .fenced_update(update, lease, (&sets, &removes), then, page)
            .await?;
        // The history entry follows the record instead of joining it: a transaction bills each
        // item twice, so the record and the entry would cost 4 WCU there and cost 2 here.
        // It is written only after the record held (a writer that lost its lease logs nothing);
        // if it fails the push stands and only the entry is missing (docs/design/refresh.md).
        if written == FencedWrite::Written {
            let logged = self
                .client
                .put_item()
                .table_name(&self.table)
                .set_item(Some(log))
                .send()
                .await;
            if let Err(error) = logged {
                tracing::warn!(error = %unavailable(error.into_service_error()), "push recorded; its history entry was not written");
            }
        }
        Ok(written)
    }

    async fn record_rotation(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        lease: &Lease,
        wecom_list: &[StaffId],
        rotation: Option<&[RotationSlot]>,
    ) -> Result<FencedWrite, StoreError> {
        // Before its first push a code has no record, and WeCom holds the list the contact way
        // was created with: the record starts from that list, so the next recompute still sees
        // what WeCom has (and does not push it again). No rotation: the code stopped rotating,
        // and the landing page's condition (`attribute_exists(rotation)`) refuses its visits.
        let update = self
            .record_update(tenant, code)
            .expression_attribute_names("#users", "users")
            .expression_attribute_values(
                ":wecom_list",
                strings(wecom_list.iter().map(|u| u.as_str().to_owned())),
            )
            .expression_attribute_values(":no", AttributeValue::Bool(false));
        let mut sets = vec![
            "#users = if_not_exists(#users, :wecom_list)",
            "starved = if_not_exists(starved, :no)",
        ];
        let mut removes = vec![];
        let update = with_rotation(update, rotation, &mut sets, &mut removes)?;
        let page = rotation.map_or(PageWrite::NotServed, |slots| {
            PageWrite::SameRound(slots.to_vec())
        });
        let page = self.page_write(tenant, code, &page)?;
        self.fenced_update(
            update,
            lease,
            (&sets, &removes),
            AfterRecord::Keep,
            Some(page),
        )
        .await
    }

    async fn record_starved(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        lease: &Lease,
        at_ms: u64,
        on_page: bool,
    ) -> Result<FencedWrite, StoreError> {
        let update = self
            .record_update(tenant, code)
            .expression_attribute_values(":yes", AttributeValue::Bool(true))
            .expression_attribute_values(":at", n(at_ms));
        let page = on_page
            .then(|| self.page_write(tenant, code, &PageWrite::Starved))
            .transpose()?;
        self.fenced_update(
            update,
            lease,
            (&["starved = :yes", "starved_at_ms = :at"], &[]),
            AfterRecord::Keep,
            page,
        )
        .await
    }

    /// One `UpdateItem` on the staff item: `SET link_id, link_url` on condition that the staff
    /// member is stored and has no link yet; a refusal answers the link kept (`ALL_OLD`).
    async fn keep_link(
        &self,
        tenant: &TenantId,
        staff: &StaffId,
        link: &AcquisitionLink,
    ) -> Result<AcquisitionLink, StoreError> {
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(tenant_key(tenant, keys::staff(staff))))
            .update_expression("SET #id = :id, #url = :url")
            .condition_expression("attribute_exists(pk) AND attribute_not_exists(#url)")
            .expression_attribute_names("#id", LINK_ID)
            .expression_attribute_names("#url", LINK_URL)
            .expression_attribute_values(":id", s(&link.link_id))
            .expression_attribute_values(":url", s(&link.url))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        match result {
            Ok(_) => Ok(link.clone()),
            Err(error) => {
                let old: Item = error.refused_or_unavailable()?.item.unwrap_or_default();
                match (get_s(&old, LINK_ID), get_s(&old, LINK_URL)) {
                    (Some(link_id), Some(url)) => Ok(AcquisitionLink {
                        link_id: link_id.to_owned(),
                        url: url.to_owned(),
                    }),
                    // No staff item: nothing can route to them; the link is kept nowhere.
                    _ => Err(corrupt("a link for a staff member who is not stored")),
                }
            }
        }
    }

    async fn record_tally(
        &self,
        tenant: &TenantId,
        day: &str,
        tally: &Tally,
    ) -> Result<(), StoreError> {
        let store_requests = self.requests.since_last_tally();
        self.client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(tenant_key(
                tenant,
                keys::refresh_tally(rand::random::<u32>() % keys::REFRESH_TALLY_SHARDS, day),
            )))
            .update_expression(
                "ADD reasons :r, recomputes :c, pushes :p, unchanged :u, starved :s, \
                 requeued_budget :rb, requeued_throttled :rt, requeued_lease :rl, \
                 to_slow_lane :sl, slow_interval_waits :sw, store_requests :sr",
            )
            .expression_attribute_values(":rb", n(tally.requeued_budget))
            .expression_attribute_values(":rt", n(tally.requeued_throttled))
            .expression_attribute_values(":rl", n(tally.requeued_lease))
            .expression_attribute_values(":sl", n(tally.to_slow_lane))
            .expression_attribute_values(":sw", n(tally.slow_interval_waits))
            .expression_attribute_values(":sr", n(store_requests))
            .expression_attribute_values(":r", n(tally.reasons))
            .expression_attribute_values(":c", n(tally.recomputes))
            .expression_attribute_values(":p", n(tally.pushes))
            .expression_attribute_values(":u", n(tally.unchanged))
            .expression_attribute_values(":s", n(tally.starved))
            .send()
            .await
            .map_err(|e| unavailable(e.into_service_error()))?;
        Ok(())
    }

    /// The minute's platform-wide count of refreshes put off by the budget or a throttle: the
    /// operator's "throttled requeues in the last hour".
    async fn record_requeues(&self, now_ms: u64, requeues: Requeues) -> Result<(), StoreError> {
        self.client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(key(
                keys::requeues(rand::random::<u32>() % keys::REQUEUE_SHARDS),
                keys::requeues_minute(now_ms / 60_000),
            )))
            .update_expression(
                "ADD requeued_budget :rb, requeued_throttled :rt SET expires_at = :exp",
            )
            .expression_attribute_values(":rb", n(requeues.budget))
            .expression_attribute_values(":rt", n(requeues.throttled))
            .expression_attribute_values(":exp", n(now_ms / 1000 + 2 * 24 * 3600))
            .send()
            .await
            .map_err(|e| unavailable(e.into_service_error()))?;
        Ok(())
    }
}
