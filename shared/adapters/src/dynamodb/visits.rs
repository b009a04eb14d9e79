//! The landing page's one write per visit (`domain::landing`).

use super::conditions::ConditionalWriteError;
use super::{corrupt, get_bool, get_n, get_s, keys, n, tenant_key, DynamoStore, Item};
use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue, ReturnValuesOnConditionCheckFailure};
use domain::ids::CodeId;
use domain::ids::TenantId;
use domain::landing::{Counted, OrderKey, RotationCounter};
use domain::membership::RotationSlot;
use domain::StoreError;

#[async_trait::async_trait]
impl RotationCounter for DynamoStore {
    /// One `UpdateItem` on the code's `PUSHED#` record: `ADD visits :one` on condition that the
    /// record has a rotation and is not starved, answering the item as the add left it
    /// (`ALL_NEW`: the counter and the rotation from the same atomic write). A refusal answers
    /// the item as it was (`ALL_OLD`), which tells an unknown code (no record), a native one
    /// (no rotation) and a starved one apart without a second request. The record is written
    /// whole by each push (`record_push`), which starts the counter again and drops the order
    /// key: the same write keeps a fresh random key unless the record has one
    /// (`if_not_exists`), so the first visit of each record keys its order and every later
    /// one reads that key back. The key is written by nobody else and goes nowhere else.
    async fn count_visit(&self, tenant: &TenantId, code: &CodeId) -> Result<Counted, StoreError> {
        let fresh: [u8; OrderKey::LEN] = rand::random();
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(tenant_key(tenant, keys::pushed(code))))
            .update_expression("ADD visits :one SET order_key = if_not_exists(order_key, :key)")
            .condition_expression(
                "attribute_exists(rotation) AND (attribute_not_exists(starved) OR starved = :no)",
            )
            .expression_attribute_values(":one", n(1))
            .expression_attribute_values(":key", AttributeValue::B(Blob::new(fresh)))
            .expression_attribute_values(":no", AttributeValue::Bool(false))
            .return_values(ReturnValue::AllNew)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        match result {
            Ok(output) => {
                let item: Item = output.attributes.unwrap_or_default();
                let number = get_n(&item, "visits").ok_or_else(|| corrupt("visit counter"))?;
                let order = item
                    .get("order_key")
                    .and_then(|key| key.as_b().ok())
                    .and_then(|key| OrderKey::from_slice(key.as_ref()))
                    .ok_or_else(|| corrupt("order key"))?;
                Ok(Counted::Visit {
                    number,
                    rotation: rotation_of(&item)?,
                    order,
                })
            }
            Err(error) => {
                let old: Item = error.refused_or_unavailable()?.item.unwrap_or_default();
                Ok(if old.is_empty() {
                    Counted::NoSuchCode
                } else if get_bool(&old, "starved").unwrap_or(false) {
                    Counted::Starved
                } else {
                    Counted::NotRotating
                })
            }
        }
    }
}

fn rotation_of(item: &Item) -> Result<Vec<RotationSlot>, StoreError> {
    get_s(item, "rotation")
        .and_then(|raw| serde_json::from_str(raw).ok())
        .ok_or_else(|| corrupt("rotation"))
}
