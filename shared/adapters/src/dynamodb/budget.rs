//! The shared WeCom budget on the table (docs/rules.md rule 6, `domain::budget`).

use super::conditions::ConditionalWriteError;
use super::{get_n, keys, n, tenant_key, DynamoStore, Item};
use aws_sdk_dynamodb::types::{ReturnValue, ReturnValuesOnConditionCheckFailure};
use domain::budget::{exhausted, BudgetLimits, BudgetSlot, Spend, WeComBudget};
use domain::ids::TenantId;
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
            .set_key(Some(tenant_key(tenant, keys::budget(api, slot.hour))))
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
