//! The admin API's port on the table: the store's own code, staff and profile methods, plus
//! the two it alone needs (a staff write that leaves WeCom's verdict alone, and a tenant's
//! codes).

use super::{
    corrupt, employment_name, key, keys, n, s, staff_from, unavailable, DynamoStore, Item,
};
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue};
use domain::admin::{AdminStore, StaffChange, VersionedCode};
use domain::facts::StaffLedger;
use domain::membership::{CodeConfig, CodeId, Employment, StaffFacts, StaffId, WeeklySchedule};
use domain::tenants::{TenantId, TenantProfile};
use domain::StoreError;

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
    async fn put_profile(
        &self,
        tenant: &TenantId,
        profile: &TenantProfile,
    ) -> Result<(), StoreError> {
        DynamoStore::put_profile(self, tenant, profile).await
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

    /// Sets `online` (and the employment, when given) in one `UpdateItem` that leaves every
    /// other attribute as stored: `put_staff` rewrites `rejected_by_wecom` too, which would
    /// undo a refresh function's "WeCom rejected this user" written between a read and it.
    /// A staff member not stored yet starts active. Answers the facts after the write.
    /// `online` is a DynamoDB reserved word, hence the attribute-name aliases.
    async fn update_staff(
        &self,
        tenant: &TenantId,
        staff: &StaffId,
        change: &StaffChange,
        now_ms: u64,
    ) -> Result<StaffFacts, StoreError> {
        let (employment_expression, employment) = match change.employment {
            Some(employment) => (":employment", employment),
            None => (
                "if_not_exists(#employment, :employment)",
                Employment::Active,
            ),
        };
        let output = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(key(keys::tenant(tenant), keys::staff(staff))))
            .update_expression(format!(
                "SET #online = :online, #employment = {employment_expression}, #updated = :now"
            ))
            .expression_attribute_names("#online", "online")
            .expression_attribute_names("#employment", "employment")
            .expression_attribute_names("#updated", "updated_at_ms")
            .expression_attribute_values(":online", AttributeValue::Bool(change.online))
            .expression_attribute_values(":employment", s(employment_name(employment)))
            .expression_attribute_values(":now", n(now_ms))
            .return_values(ReturnValue::AllNew)
            .send()
            .await
            .map_err(|e| unavailable(e.into_service_error()))?;
        let item: Item = output
            .attributes
            .ok_or_else(|| corrupt("staff write answered no item"))?;
        Ok(staff_from(&item))
    }

    /// Every code of the tenant (a query on the code items' keys, never a scan).
    async fn codes_of_tenant(&self, tenant: &TenantId) -> Result<Vec<CodeId>, StoreError> {
        self.keys_under(tenant, keys::CODE_PREFIX)
            .await?
            .iter()
            .map(|code| CodeId::parse(code).map_err(|_| corrupt("code key")))
            .collect()
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
        now_ms: u64,
    ) -> Result<VersionedCode, StoreError> {
        let (record, _) = DynamoStore::put_code(self, tenant, code, config, now_ms).await?;
        Ok(VersionedCode {
            code: record.code,
            version: record.version,
        })
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
