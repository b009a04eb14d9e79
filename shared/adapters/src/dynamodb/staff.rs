//! Staff facts that WeCom's contact-change callbacks and the admin API write: employment,
//! department membership and re-keying (WeCom's `NewUserID`). Each fact carries the time it
//! happened and a write only lands when it is not older than the stored one, so facts applied
//! in any order leave the same state (the rule `membership::fold` states purely).

use super::conditions::ConditionalWriteError;
use super::owed::OwedEdit;
use super::retiring_links::{resignation_indexed, RESIGNATION_INDEX_SET};
use super::{
    corrupt, employment_name, get_n, get_strings, keys, n, s, tenant_key, unavailable, DynamoStore,
    Item,
};
use aws_sdk_dynamodb::types::{AttributeValue, TransactWriteItem, Update};
use domain::facts::{StaffLedger, TenantProfiles};
use domain::ids::TenantId;
use domain::ids::{CodeId, DepartmentId, StaffId};
use domain::membership::Employment;
use domain::owed::replan;
use domain::tenants::tenant_day;
use domain::StoreError;
use futures::{StreamExt, TryStreamExt};
use std::collections::BTreeSet;

fn string_set<'a>(values: impl IntoIterator<Item = &'a str>) -> Option<AttributeValue> {
    let set: Vec<String> = values.into_iter().map(str::to_owned).collect();
    // DynamoDB has no empty sets: an empty membership is an absent attribute.
    (!set.is_empty()).then_some(AttributeValue::Ss(set))
}

impl DynamoStore {
    pub(crate) async fn get(
        &self,
        tenant: &TenantId,
        sk: String,
    ) -> Result<Option<Item>, StoreError> {
        Ok(self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(tenant_key(tenant, sk)))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| unavailable(e.into_service_error()))?
            .item)
    }

    /// Adds `staff` to (or removes it from) the department's member set; set operations, so
    /// a repeat changes nothing.
    async fn update_department_set(
        &self,
        tenant: &TenantId,
        department: &DepartmentId,
        staff: &StaffId,
        member: bool,
    ) -> Result<(), StoreError> {
        let expression = if member {
            "ADD members :staff SET department = :department"
        } else {
            "DELETE members :staff SET department = :department"
        };
        self.client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(tenant_key(tenant, keys::department(department))))
            .update_expression(expression)
            .expression_attribute_values(":staff", AttributeValue::Ss(vec![staff.to_string()]))
            .expression_attribute_values(":department", s(department.as_str()))
            .send()
            .await
            .map_err(|e| unavailable(e.into_service_error()))?;
        Ok(())
    }

    /// The write of a department's members as of `at_ms`, conditioned on the members version
    /// it replaces (`seen`, or none stored yet).
    fn members_write(
        &self,
        tenant: &TenantId,
        department: &DepartmentId,
        members: &BTreeSet<StaffId>,
        at_ms: u64,
        seen: Option<u64>,
    ) -> Result<TransactWriteItem, StoreError> {
        let update = Update::builder()
            .table_name(&self.table)
            .set_key(Some(tenant_key(tenant, keys::department(department))))
            .expression_attribute_values(":department", s(department.as_str()))
            .expression_attribute_values(":at", n(at_ms))
            .expression_attribute_values(":version", n(seen.unwrap_or(0) + 1));
        let set = "SET department = :department, members_at_ms = :at, members_version = :version";
        let update = match string_set(members.iter().map(StaffId::as_str)) {
            Some(members) => update
                .update_expression(format!("{set}, members = :members"))
                .expression_attribute_values(":members", members),
            None => update.update_expression(format!("{set} REMOVE members")),
        };
        let update = match seen {
            Some(seen) => update
                .condition_expression("members_version = :seen")
                .expression_attribute_values(":seen", n(seen)),
            None => update.condition_expression("attribute_not_exists(members_version)"),
        };
        Ok(TransactWriteItem::builder()
            .update(update.build().map_err(unavailable)?)
            .build())
    }

    /// The departments the staff member is in, as stored.
    pub async fn departments_of_staff(
        &self,
        tenant: &TenantId,
        staff: &StaffId,
    ) -> Result<BTreeSet<DepartmentId>, StoreError> {
        Ok(self
            .get(tenant, keys::staff(staff))
            .await?
            .map(|item| departments_from(&item, "departments"))
            .unwrap_or_default())
    }

    /// Writes `item` unless an item with its key exists (a repeat, or facts of its own).
    /// Sets `counter` to `count` unless it holds a count already (a repeated rename).
    async fn set_count_if_absent(
        &self,
        tenant: &TenantId,
        counter: keys::Counter,
        count: u32,
    ) -> Result<(), StoreError> {
        self.client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(tenant_key(tenant, counter.sk)))
            .update_expression("SET #count = if_not_exists(#count, :count)")
            .expression_attribute_names("#count", counter.attribute)
            .expression_attribute_values(":count", n(count))
            .send()
            .await
            .map_err(|e| unavailable(e.into_service_error()))?;
        Ok(())
    }

    async fn put_if_absent(&self, item: Item) -> Result<(), StoreError> {
        let result = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(pk)")
            .send()
            .await;
        match result {
            Ok(_) => Ok(()),
            Err(error) => error.refused_or_unavailable().map(|_| ()),
        }
    }
}

fn departments_from(item: &Item, name: &str) -> BTreeSet<DepartmentId> {
    get_strings(item, name)
        .iter()
        .filter_map(|raw| DepartmentId::parse(raw).ok())
        .collect()
}

#[async_trait::async_trait]
impl StaffLedger for DynamoStore {
    /// Sets the staff member's employment as of `at_ms`. `false` when a newer employment
    /// fact is already stored (nothing changed).
    async fn set_employment(
        &self,
        tenant: &TenantId,
        staff: &StaffId,
        employment: Employment,
        at_ms: u64,
    ) -> Result<bool, StoreError> {
        let resigned = employment == Employment::Resigned;
        let expression = if resigned {
            format!(
                "SET #employment = :employment, employment_at_ms = :at, {RESIGNATION_INDEX_SET}"
            )
        } else {
            "SET #employment = :employment, employment_at_ms = :at".to_owned()
        };
        let mut update = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(tenant_key(tenant, keys::staff(staff))))
            .update_expression(expression)
            .condition_expression(
                "attribute_not_exists(employment_at_ms) OR employment_at_ms <= :at",
            )
            .expression_attribute_names("#employment", "employment")
            .expression_attribute_values(":employment", s(employment_name(employment)))
            .expression_attribute_values(":at", n(at_ms));
        if resigned {
            update = resignation_indexed(update, tenant, staff, at_ms);
        }
        let result = update.send().await;
        match result {
            Ok(_) => Ok(true),
            Err(error) => error.refused_or_unavailable().map(|_| false),
        }
    }

    /// WeCom re-keyed a user (`update_user` with `NewUserID`): the new id takes over the old
    /// one's facts, today's and total add counters and departments, and replaces it in every
    /// code at the same position; the old id is never eligible again. Safe to repeat. Answers
    /// the codes that now name `to`.
    async fn rename_staff(
        &self,
        tenant: &TenantId,
        from: &StaffId,
        to: &StaffId,
        at_ms: u64,
    ) -> Result<Vec<CodeId>, StoreError> {
        let codes = self.codes_of_staff(tenant, from).await?;
        if let Some(old) = self.get(tenant, keys::staff(from)).await? {
            let mut moved = old.clone();
            moved.extend(tenant_key(tenant, keys::staff(to)));
            if moved.contains_key(keys::GSI2_SK) {
                moved.insert(keys::GSI2_SK.into(), s(to.as_str()));
            }
            moved.remove("departments");
            moved.remove("departments_at_ms");
            // The old id's link names the old id (`range.user_list`): it is retired with the
            // old id below, and the new id gets a link of its own at its next refresh.
            for attribute in [keys::LINK_ID, keys::LINK_URL, keys::RETIRING_LINK_ID] {
                moved.remove(attribute);
            }
            moved.remove(keys::GSI1_PK);
            moved.remove(keys::GSI1_SK);
            moved.insert("renamed_from".into(), s(from.as_str()));
            self.put_if_absent(moved).await?;
            let departments = departments_from(&old, "departments");
            self.set_staff_departments(tenant, to, &departments, at_ms)
                .await?;
        }
        let day = match self.profile(tenant).await? {
            Some(profile) => tenant_day(at_ms, profile.timezone),
            None => return Err(corrupt("rename for a tenant without a profile")),
        };
        let all_codes = keys::adds_today_all_codes(&day, from);
        if let Some(mut counter) = self.get(tenant, all_codes.sk).await? {
            // Under the new id's home, as its sort key says (`keys::home`).
            counter.extend(tenant_key(tenant, keys::adds_today_all_codes(&day, to).sk));
            self.put_if_absent(counter).await?;
        }
        for code in &codes {
            // A code's counters are one item each: the count moves to the new id's attribute.
            for (old, new) in [
                (
                    keys::adds_today_on_code(&day, code, from),
                    keys::adds_today_on_code(&day, code, to),
                ),
                (keys::adds_total(code, from), keys::adds_total(code, to)),
            ] {
                let count = self
                    .get(tenant, old.sk)
                    .await?
                    .and_then(|item| get_n::<u32>(&item, &old.attribute));
                if let Some(count) = count {
                    self.set_count_if_absent(tenant, new, count).await?;
                }
            }
        }
        for code in &codes {
            let Some(record) = self.code(tenant, code).await? else {
                continue;
            };
            let mut config = record.code.config.clone();
            for list in [&mut config.members, &mut config.fallback] {
                if list.contains(to) {
                    list.retain(|member| member != from);
                } else {
                    for member in list.iter_mut().filter(|m| *m == from) {
                        *member = to.clone();
                    }
                }
            }
            if config != record.code.config {
                self.put_code(tenant, code, &config, at_ms).await?;
            }
        }
        self.set_staff_departments(tenant, from, &BTreeSet::new(), at_ms)
            .await?;
        let update = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(tenant_key(tenant, keys::staff(from))))
            .update_expression(format!(
                "SET #employment = :resigned, renamed_to = :to, {RESIGNATION_INDEX_SET} \
                 REMOVE #spk, #ssk"
            ))
            .expression_attribute_names("#employment", "employment")
            .expression_attribute_names("#spk", keys::GSI2_PK)
            .expression_attribute_names("#ssk", keys::GSI2_SK)
            .expression_attribute_values(":resigned", s(employment_name(Employment::Resigned)))
            .expression_attribute_values(":to", s(to.as_str()));
        resignation_indexed(update, tenant, from, at_ms)
            .send()
            .await
            .map_err(|e| unavailable(e.into_service_error()))?;
        Ok(codes)
    }

    /// Sets the departments the staff member is in, as of `at_ms`, and keeps each
    /// department's member set in step. Answers the departments whose membership changed
    /// (empty when a newer fact was already stored).
    async fn set_staff_departments(
        &self,
        tenant: &TenantId,
        staff: &StaffId,
        departments: &BTreeSet<DepartmentId>,
        at_ms: u64,
    ) -> Result<Vec<DepartmentId>, StoreError> {
        let stored = self.get(tenant, keys::staff(staff)).await?;
        if stored
            .as_ref()
            .and_then(|item| get_n::<u64>(item, "departments_at_ms"))
            .is_some_and(|stored_at| stored_at > at_ms)
        {
            return Ok(Vec::new());
        }
        let before: BTreeSet<DepartmentId> = stored
            .as_ref()
            .map(|item| departments_from(item, "departments"))
            .unwrap_or_default();
        let mut update = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(tenant_key(tenant, keys::staff(staff))))
            .condition_expression(
                "attribute_not_exists(departments_at_ms) OR departments_at_ms <= :at",
            )
            .expression_attribute_values(":at", n(at_ms));
        update = match string_set(departments.iter().map(DepartmentId::as_str)) {
            Some(set) => update
                .update_expression("SET departments = :departments, departments_at_ms = :at")
                .expression_attribute_values(":departments", set),
            None => update.update_expression("SET departments_at_ms = :at REMOVE departments"),
        };
        if let Err(error) = update.send().await {
            error.refused_or_unavailable()?;
            return Ok(Vec::new());
        }
        let changed: Vec<DepartmentId> =
            before.symmetric_difference(departments).cloned().collect();
        // One item each, in flight together: a staff member may join or leave 100 departments
        // in one request, which one after another took most of the function's timeout on a
        // loaded emulator. Each write adds or removes one member, so their order is free.
        let mut writes = Vec::with_capacity(changed.len());
        for department in &changed {
            let member = departments.contains(department);
            writes.push(self.update_department_set(tenant, department, staff, member));
        }
        futures::stream::iter(writes)
            .buffer_unordered(super::ITEM_REQUESTS_IN_FLIGHT)
            .try_collect::<Vec<()>>()
            .await?;
        Ok(changed)
    }

    /// Replaces a department's members (the admin API, or WeCom deleting the department) and
    /// keeps each staff member's department set in step (`domain::owed`): the new members and
    /// the staff updates they owe are stored on the department in one write conditioned on its
    /// `members_version`, then the updates land in fenced transactions of 99,
    /// `CHUNKS_IN_FLIGHT` at once. A retry finishes what an interrupted replacement still
    /// owed. Answers the staff whose membership this write updates.
    async fn set_department_members(
        &self,
        tenant: &TenantId,
        department: &DepartmentId,
        members: &BTreeSet<StaffId>,
        at_ms: u64,
    ) -> Result<Vec<StaffId>, StoreError> {
        let owner = keys::department(department);
        let stored = self.get(tenant, owner.clone()).await?;
        let before: BTreeSet<String> = stored
            .as_ref()
            .map(|item| get_strings(item, "members").into_iter().collect())
            .unwrap_or_default();
        let seen = stored
            .as_ref()
            .and_then(|item| get_n::<u64>(item, "members_version"));
        let version = seen.unwrap_or(0) + 1;
        let owed = self.read_owed(tenant, &owner).await?;
        let next: BTreeSet<String> = members.iter().map(|m| m.as_str().to_owned()).collect();
        let plan = replan(&before, &owed.owed, &next);
        // In id order, joined and left together.
        let changed: Vec<StaffId> = plan
            .entries()
            .filter_map(|(staff, _)| StaffId::parse(staff).ok())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let owner_write = self.members_write(tenant, department, members, at_ms, seen)?;
        let index_write = |staff: &str, member: bool| -> Result<TransactWriteItem, StoreError> {
            let expression = if member {
                "ADD departments :department"
            } else {
                "DELETE departments :department"
            };
            let staff = StaffId::parse(staff).map_err(|_| corrupt("department member"))?;
            let update = Update::builder()
                .table_name(&self.table)
                .set_key(Some(tenant_key(tenant, keys::staff(&staff))))
                .update_expression(expression)
                .expression_attribute_values(
                    ":department",
                    AttributeValue::Ss(vec![department.to_string()]),
                )
                .build()
                .map_err(unavailable)?;
            Ok(TransactWriteItem::builder().update(update).build())
        };
        if !owed.owed.is_empty() {
            tracing::info!(
                owed = owed.owed.len(),
                "finishing the staff updates an earlier replacement owed"
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
        Ok(changed)
    }

    async fn codes_of_staff(
        &self,
        tenant: &TenantId,
        staff: &StaffId,
    ) -> Result<Vec<CodeId>, StoreError> {
        DynamoStore::codes_of_staff(self, tenant, staff).await
    }

    /// Every code that lists the department, through the department -> codes index.
    async fn codes_listing_department(
        &self,
        tenant: &TenantId,
        department: &DepartmentId,
    ) -> Result<Vec<CodeId>, StoreError> {
        self.keys_under(tenant, &keys::department_seats_of(department))
            .await?
            .iter()
            .map(|code| CodeId::parse(code).map_err(|_| corrupt("department seat")))
            .collect()
    }
}
