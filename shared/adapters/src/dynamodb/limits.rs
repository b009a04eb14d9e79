//! The refresh function's limits on the table: the shared WeCom budget (docs/rules.md rule 6) and
//! the marks a permanent failure leaves (rule 9; the dirty marks of rule 11 are `dirty.rs`).

use super::conditions::ConditionalWriteError;
use super::{get_n, key, keys, n, unavailable, DynamoStore, Item};
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue, ReturnValuesOnConditionCheckFailure};
use domain::budget::{exhausted, BudgetLimits, BudgetSlot, Spend, WeComBudget};
use domain::ids::{CodeId, StaffId};
use domain::refresh::FailureMarks;
use domain::tenants::TenantId;
use domain::StoreError;

/// The shared budget on the table: one item per tenant, API and UTC hour.
#[derive(Clone)]
pub struct DynamoBudget {
    store: DynamoStore,
    limits: BudgetLimits,
}

impl DynamoBudget {
    pub fn new(store: DynamoStore, limits: BudgetLimits) -> Self {
        Self { store, limits }
    }
}

#[async_trait::async_trait]
impl WeComBudget for DynamoBudget {
    /// One `UpdateItem`, 1 WCU (the item stays under 1 KB: a total and at most 60 minute
    /// counters): `ADD` one to the hour's total and to the minute's counter, on condition
    /// that both are below their budgets. DynamoDB applies a conditional update atomically
    /// against the item's current state, so N concurrent workers serialise on the item and
    /// at most `per_minute` of them succeed in a minute and `per_hour` in an hour. A refusal
    /// returns the item as it was (`ALL_OLD`, no read), which tells which window is full.
    async fn spend(&self, tenant: &TenantId, api: &str, now_ms: u64) -> Result<Spend, StoreError> {
        let slot = BudgetSlot::at(now_ms);
        let result = self
            .store
            .client
            .update_item()
            .table_name(&self.store.table)
            .set_key(Some(key(
                keys::tenant(tenant),
                keys::budget(api, slot.hour),
            )))
            .update_expression("ADD #hour :one, #minute :one SET #expires = :expires")
            .condition_expression(
                "(attribute_not_exists(#hour) OR #hour < :per_hour) \
                 AND (attribute_not_exists(#minute) OR #minute < :per_minute)",
            )
            .expression_attribute_names("#hour", "spent")
            .expression_attribute_names("#minute", &slot.minute_counter)
            .expression_attribute_names("#expires", keys::EXPIRES_AT)
            .expression_attribute_values(":one", n(1))
            .expression_attribute_values(":per_hour", n(self.limits.per_hour))
            .expression_attribute_values(":per_minute", n(self.limits.per_minute))
            .expression_attribute_values(":expires", n(slot.expires_at_secs()))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            // The counters after the spend, for the budget's metric (no extra request or WCU).
            .return_values(ReturnValue::UpdatedNew)
            .send()
            .await;
        match result {
            Ok(output) => {
                let new: Item = output.attributes.unwrap_or_default();
                let hour = get_n::<u64>(&new, "spent").unwrap_or(0) as f64;
                let minute = get_n::<u64>(&new, &slot.minute_counter).unwrap_or(0) as f64;
                let share = (minute / self.limits.per_minute as f64)
                    .max(hour / self.limits.per_hour as f64);
                domain::telemetry::budget_used(tenant, share * 100.0);
                Ok(Spend::Granted)
            }
            Err(error) => {
                let refused = error.refused_or_unavailable()?;
                let old: Item = refused.item.unwrap_or_default();
                let hour_total = get_n(&old, "spent").unwrap_or(0);
                let minute_total = get_n(&old, &slot.minute_counter).unwrap_or(0);
                // A refusal with room in both windows means the budget was lowered
                // below what is spent; the minute's end is the soonest it can change.
                Ok(
                    exhausted(self.limits, hour_total, minute_total, now_ms).unwrap_or(
                        Spend::Exhausted {
                            window: domain::budget::Window::Minute,
                            retry_after_ms: domain::budget::reopens_in(
                                domain::budget::Window::Minute,
                                now_ms,
                            ),
                        },
                    ),
                )
            }
        }
    }
}

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
            .set_key(Some(key(keys::tenant(tenant), keys::code(code))))
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
            .set_key(Some(key(keys::tenant(tenant), keys::staff(staff))))
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
