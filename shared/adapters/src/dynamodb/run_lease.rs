//! The lease a scheduled function's run holds on one item (the schedule tick's cursor, the
//! sweep's lease), so one run works at a time and a crashed run's lease frees itself.

use super::conditions::ConditionalWriteError;
use super::{key, n, s, DynamoStore, Item};
use aws_sdk_dynamodb::types::ReturnValue;
use domain::StoreError;

const OWNER: &str = "owner";
const LEASE_UNTIL: &str = "lease_until_ms";

impl DynamoStore {
    /// Takes the lease on item `(pk, sk)` for `owner` until `lease_until_ms`, unless another
    /// run's lease is still running at `now_ms`: one conditional write, so exactly one of two
    /// racing runs gets it. A lease ending after `lease_until_ms` was taken under a clock ahead
    /// of this one (the clock was set back, which restarts every function) and holds nothing.
    /// Answers the item as it now is, or `None` when another run holds it.
    pub(crate) async fn take_run_lease(
        &self,
        (pk, sk): (&str, &str),
        owner: &str,
        now_ms: u64,
        lease_until_ms: u64,
    ) -> Result<Option<Item>, StoreError> {
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(key(pk.to_owned(), sk.to_owned())))
            .update_expression("SET #owner = :owner, #until = :until")
            .condition_expression("attribute_not_exists(#pk) OR #until < :now OR #until > :until")
            .expression_attribute_names("#pk", super::keys::PK)
            .expression_attribute_names("#owner", OWNER)
            .expression_attribute_names("#until", LEASE_UNTIL)
            .expression_attribute_values(":owner", s(owner))
            .expression_attribute_values(":until", n(lease_until_ms))
            .expression_attribute_values(":now", n(now_ms))
            .return_values(ReturnValue::AllNew)
            .send()
            .await;
        match result {
            Ok(output) => Ok(Some(output.attributes.unwrap_or_default())),
            Err(error) => error.refused_or_unavailable().map(|_| None),
        }
    }

    /// Ends `owner`'s lease on item `(pk, sk)` early; a lease that is not `owner`'s is left
    /// to its holder.
    pub(crate) async fn give_back_run_lease(
        &self,
        (pk, sk): (&str, &str),
        owner: &str,
    ) -> Result<(), StoreError> {
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(key(pk.to_owned(), sk.to_owned())))
            .update_expression("SET #until = :zero")
            .condition_expression("#owner = :owner")
            .expression_attribute_names("#owner", OWNER)
            .expression_attribute_names("#until", LEASE_UNTIL)
            .expression_attribute_values(":owner", s(owner))
            .expression_attribute_values(":zero", n(0))
            .send()
            .await;
        match result {
            Ok(_) => Ok(()),
            Err(error) => error.refused_or_unavailable().map(|_| ()),
        }
    }
}
