//! The admin API's port on the table: the store's own code, staff and profile methods, plus
//! the two it alone needs (a staff write that leaves WeCom's verdict alone, and a tenant's
//! codes).

use super::codes::code_record;
use super::conditions::ConditionalWriteError;
use super::retiring_links::{resignation_indexed, RESIGNATION_INDEX_SET};
use super::CodeRecord;
use super::{
    corrupt, employment_name, get_n, get_s, get_strings, keys, n, s, staff_from, tenant_key,
    DynamoStore, Item,
};
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue};
use domain::admin::{
    AdminStore, CodeAdds, CodeSummary, ProfileWrite, StaffChange, StaffRecord, StaffUpdate,
    StoredProfile, VersionedCode,
};
use domain::facts::StaffLedger;
use domain::ids::DepartmentId;
use domain::ids::TenantId;
use domain::ids::{CodeId, StaffId};
use domain::membership::{CodeConfig, Employment, WeeklySchedule};
use domain::StoreError;
use std::collections::BTreeSet;
use std::collections::HashMap;

#[async_trait::async_trait]
impl domain::fanout::CodeIndex for DynamoStore {
    async fn codes_of(
        &self,
        tenant: &TenantId,
        source: &domain::reasons::Source,
    ) -> Result<Vec<CodeId>, StoreError> {
        use domain::reasons::Source;
        match source {
            Source::Staff { staff } => self.codes_of_staff(tenant, staff).await,
            Source::Department { department } => {
                StaffLedger::codes_listing_department(self, tenant, department).await
            }
            Source::Tenant => self.codes_of_tenant(tenant).await,
        }
    }
}

#[async_trait::async_trait]
impl AdminStore for DynamoStore {
    async fn stored_profile(&self, tenant: &TenantId) -> Result<Option<StoredProfile>, StoreError> {
        self.read_stored_profile(tenant).await
    }

    async fn put_profile(
        &self,
        tenant: &TenantId,
        next: &StoredProfile,
        previous: Option<&StoredProfile>,
    ) -> Result<ProfileWrite, StoreError> {
        self.write_profile(tenant, next, previous).await
    }

    async fn set_schedule(
        &self,
        tenant: &TenantId,
        staff: &StaffId,
        schedule: Option<&WeeklySchedule>,
        at_ms: u64,
    ) -> Result<bool, StoreError> {
        self.set_staff_schedule(tenant, staff, schedule, at_ms)
            .await
    }

    /// One `UpdateItem` that sets what the change names, creating the staff member offline
    /// and active when nothing is stored. Bringing a resigned staff member back is refused by
    /// the write's own condition, so no read can go stale in between.
    async fn update_staff(
        &self,
        tenant: &TenantId,
        staff: &StaffId,
        change: &StaffChange,
        now_ms: u64,
    ) -> Result<StaffUpdate, StoreError> {
        // DynamoDB refuses an expression value no expression uses, so each default is named
        // only where it is used.
        let mut update = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(tenant_key(tenant, keys::staff(staff))))
            .expression_attribute_names("#online", "online")
            .expression_attribute_names("#employment", "employment")
            .expression_attribute_names("#updated", "updated_at_ms")
            .expression_attribute_values(":now", n(now_ms))
            .return_values(ReturnValue::AllNew);
        let online = match change.online {
            Some(online) => {
                update =
                    update.expression_attribute_values(":online", AttributeValue::Bool(online));
                "#online = :online"
            }
            None => {
                update =
                    update.expression_attribute_values(":offline", AttributeValue::Bool(false));
                "#online = if_not_exists(#online, :offline)"
            }
        };
        let employment = match change.employment {
            Some(Employment::Resigned) => {
                update = update.expression_attribute_values(
                    ":employment",
                    s(employment_name(Employment::Resigned)),
                );
                // The sweep retires their link: the same index WeCom's resignations enter.
                update = resignation_indexed(update, tenant, staff, now_ms);
                format!("#employment = :employment, {RESIGNATION_INDEX_SET}")
            }
            Some(employment) => {
                update = update
                    .expression_attribute_values(":employment", s(employment_name(employment)))
                    .condition_expression(
                        "attribute_not_exists(#employment) OR #employment <> :resigned",
                    )
                    .expression_attribute_values(
                        ":resigned",
                        s(employment_name(Employment::Resigned)),
                    );
                "#employment = :employment".to_owned()
            }
            None => {
                update = update
                    .expression_attribute_values(":active", s(employment_name(Employment::Active)));
                "#employment = if_not_exists(#employment, :active)".to_owned()
            }
        };
        let sets = [online, &employment, "#updated = :now"];
        let output = match update
            .update_expression(format!("SET {}", sets.join(", ")))
            .send()
            .await
        {
            Ok(output) => output,
            Err(error) => {
                error.refused_or_unavailable()?;
                return Ok(StaffUpdate::ResignationIsFinal);
            }
        };
        let item: Item = output
            .attributes
            .ok_or_else(|| corrupt("staff write answered no item"))?;
        Ok(StaffUpdate::Stored(staff_from(&item)))
    }

    async fn staff_record(
        &self,
        tenant: &TenantId,
        staff: &StaffId,
    ) -> Result<Option<StaffRecord>, StoreError> {
        Ok(self
            .get(tenant, keys::staff(staff))
            .await?
            .map(|item| StaffRecord {
                facts: staff_from(&item),
                departments: get_strings(&item, "departments")
                    .iter()
                    .filter_map(|raw| DepartmentId::parse(raw).ok())
                    .collect(),
            }))
    }

    async fn department_members(
        &self,
        tenant: &TenantId,
        department: &DepartmentId,
    ) -> Result<Option<BTreeSet<StaffId>>, StoreError> {
        Ok(self
            .get(tenant, keys::department(department))
            .await?
            .map(|item| {
                get_strings(&item, "members")
                    .iter()
                    .filter_map(|raw| StaffId::parse(raw).ok())
                    .collect()
            }))
    }

    /// One page of the tenant's codes after `after`: `limit + 1` ids from the code index
    /// (`gsi1`) to tell whether more follow, then the code items in one `BatchGetItem` per
    /// 100 (a code deleted since the index was read is left out).
    async fn codes_page(
        &self,
        tenant: &TenantId,
        after: Option<&CodeId>,
        limit: usize,
    ) -> Result<(Vec<CodeSummary>, bool), StoreError> {
        let mut ids = self.code_ids(tenant, after, Some(limit + 1)).await?;
        let more = ids.len() > limit;
        ids.truncate(limit);
        let mut by_code: HashMap<CodeId, CodeRecord> =
            self.code_records(tenant, &ids).await?.into_iter().collect();
        let codes = ids
            .into_iter()
            .filter_map(|code| {
                let record = by_code.remove(&code)?;
                Some(CodeSummary {
                    code,
                    family: record.code.config.family,
                    config_id: record.code.config_id,
                    version: record.version,
                })
            })
            .collect();
        Ok((codes, more))
    }

    /// One `BatchGetItem` per 33 codes: each code's item (its limits) and its two counter
    /// items, which hold the staff member's counts on it.
    async fn adds_on_codes(
        &self,
        tenant: &TenantId,
        staff: &StaffId,
        codes: &[CodeId],
        day: &str,
    ) -> Result<Vec<CodeAdds>, StoreError> {
        let wanted = codes
            .iter()
            .flat_map(|code| {
                [
                    tenant_key(tenant, keys::code(code)),
                    tenant_key(tenant, keys::adds_today_on_code(day, code, staff).sk),
                    tenant_key(tenant, keys::adds_total(code, staff).sk),
                ]
            })
            .collect();
        let items = self.batch_get(wanted).await?;
        let by_sk = |sk: &str| items.iter().find(|item| get_s(item, keys::SK) == Some(sk));
        let count = |counter: keys::Counter| {
            by_sk(&counter.sk)
                .and_then(|item| get_n::<u32>(item, &counter.attribute))
                .unwrap_or(0)
        };
        codes
            .iter()
            .map(|code| {
                Ok(CodeAdds {
                    code: code.clone(),
                    today: count(keys::adds_today_on_code(day, code, staff)),
                    total: count(keys::adds_total(code, staff)),
                    switches: by_sk(&keys::code(code))
                        .map(code_record)
                        .transpose()?
                        .map(|record| record.code.config.switches),
                })
            })
            .collect()
    }

    async fn adds_on_all_codes(
        &self,
        tenant: &TenantId,
        staff: &StaffId,
        day: &str,
    ) -> Result<u32, StoreError> {
        let counter = keys::adds_today_all_codes(day, staff);
        Ok(self
            .get(tenant, counter.sk)
            .await?
            .and_then(|item| get_n::<u32>(&item, &counter.attribute))
            .unwrap_or(0))
    }

    /// Every code of the tenant (the code index, `gsi1`: never a scan).
    async fn codes_of_tenant(&self, tenant: &TenantId) -> Result<Vec<CodeId>, StoreError> {
        self.code_ids(tenant, None, None).await
    }

    async fn code(
        &self,
        tenant: &TenantId,
        code: &CodeId,
    ) -> Result<Option<VersionedCode>, StoreError> {
        Ok(DynamoStore::code(self, tenant, code)
            .await?
            .map(|r| VersionedCode {
                code: r.code,
                version: r.version,
            }))
    }

    async fn put_code(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        config: &CodeConfig,
        read_version: Option<u64>,
        now_ms: u64,
    ) -> Result<Option<VersionedCode>, StoreError> {
        Ok(self
            .put_code_if(tenant, code, config, now_ms, Some(read_version))
            .await?
            .map(|(record, _)| VersionedCode {
                code: record.code,
                version: record.version,
            }))
    }

    async fn set_config_id(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        config_id: &str,
        created_with: &[String],
    ) -> Result<bool, StoreError> {
        DynamoStore::set_config_id(self, tenant, code, config_id, created_with).await
    }

    async fn delete_code(&self, tenant: &TenantId, code: &CodeId) -> Result<(), StoreError> {
        DynamoStore::delete_code(self, tenant, code).await?;
        Ok(())
    }
}
