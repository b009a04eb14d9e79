//! The marks a permanent failure leaves on the table (docs/rules.md rule 9; the dirty marks of
//! rule 11 are `dirty.rs`).

use super::conditions::ConditionalWriteError;
use super::{keys, n, tenant_key, unavailable, DynamoStore};
use aws_sdk_dynamodb::types::AttributeValue;
use domain::ids::TenantId;
use domain::ids::{CodeId, StaffId};
use domain::refresh::FailureMarks;
use domain::StoreError;

#[async_trait::async_trait]
impl FailureMarks for DynamoStore {
    /// Marks the code item; `snapshot` then answers "no such code", so no reason for it
    /// reaches WeCom again. Only if the code item still exists (a deleted code stays deleted).
    async fn mark_code_gone(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        at_ms: u64,
    ) -> Result<(), StoreError> {
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(tenant_key(tenant, keys::code(code))))
            .update_expression("SET wecom_gone_at_ms = :at")
            .condition_expression("attribute_exists(pk)")
            .expression_attribute_values(":at", n(at_ms))
            .send()
            .await;
        match result {
            Ok(_) => Ok(()),
            Err(error) => error.refused_or_unavailable().map(|_| ()),
        }
    }

    /// Sets `rejected_by_wecom` on the staff item and nothing else (the admin's writes leave
    /// it alone, see `AdminStore::update_staff`).
    async fn mark_staff_unusable(
        &self,
        tenant: &TenantId,
        staff: &StaffId,
        errcode: i64,
        at_ms: u64,
    ) -> Result<(), StoreError> {
        self.client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(tenant_key(tenant, keys::staff(staff))))
            .update_expression(
                "SET rejected_by_wecom = :yes, rejected_errcode = :errcode, rejected_at_ms = :at",
            )
            .expression_attribute_values(":yes", AttributeValue::Bool(true))
            .expression_attribute_values(":errcode", n(errcode))
            .expression_attribute_values(":at", n(at_ms))
            .send()
            .await
            .map_err(|e| unavailable(e.into_service_error()))?;
        Ok(())
    }
}
