//! Per-code leases, kept on the code's record of what WeCom accepted (`PUSHED#code`): taken
//! and given back with one conditional write each, and the condition every record write of
//! the code is fenced on. With the lease on the record, a record write and its fence are one
//! conditional `UpdateItem` (1 write unit for a record under 1 KB) instead of a transaction of
//! two items (each billed twice), and the snapshot reads one item fewer
//! (docs/design/keys.md, "The lease on the record").
//!
//! Expiry is an absolute time on the functions' clock (Lambda hosts are NTP-synced; the
//! docs/aws-semantics.md §3.1 variant), and a WeCom call starts only while the lease covers it.
//! The attributes stay after release (with the expiry cleared) so a count of acquisitions is
//! kept; they go with the record when the code is deleted.

use super::conditions::ConditionalWriteError;
use super::{get_n, keys, n, s, tenant_key, DynamoStore};
use aws_sdk_dynamodb::types::ReturnValuesOnConditionCheckFailure;
use domain::ids::CodeId;
use domain::ids::TenantId;
use domain::refresh::{Acquired, CodeLeases, Lease};
use domain::StoreError;

/// The record's attributes that are the lease; every other attribute is the record's.
pub(crate) const EXPIRES_MS: &str = "lease_expires_ms";
pub(crate) const ACQUISITIONS: &str = "acquisitions";

/// The condition a record write of a code carries: the writer's lease is still the code's.
pub(crate) const FENCE: &str = "holder = :holder";

#[async_trait::async_trait]
impl CodeLeases for DynamoStore {
    async fn acquire(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        holder: &str,
        now_ms: u64,
        duration_ms: u64,
        expected: Option<u64>,
    ) -> Result<Acquired, StoreError> {
        let expires_at_ms = now_ms.saturating_add(duration_ms);
        let free = "(attribute_not_exists(lease_expires_ms) OR lease_expires_ms <= :now)";
        let condition = match expected {
            None => free.to_owned(),
            Some(0) => format!("{free} AND attribute_not_exists(acquisitions)"),
            Some(_) => format!("{free} AND acquisitions = :seen"),
        };
        let mut update = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(tenant_key(tenant, keys::pushed(code))))
            .update_expression(
                "SET holder = :holder, lease_expires_ms = :expires ADD acquisitions :one",
            )
            .condition_expression(condition)
            .expression_attribute_values(":holder", s(holder))
            .expression_attribute_values(":expires", n(expires_at_ms))
            .expression_attribute_values(":one", n(1))
            .expression_attribute_values(":now", n(now_ms))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
        if let Some(seen) = expected.filter(|seen| *seen > 0) {
            update = update.expression_attribute_values(":seen", n(seen));
        }
        match update.send().await {
            Ok(_) => Ok(Acquired::LeasedRefresh(Lease {
                holder: holder.to_owned(),
                expires_at_ms,
            })),
            Err(error) => {
                let refused = error.refused_or_unavailable()?;
                let held_until = refused
                    .item()
                    .and_then(|item| get_n::<u64>(item, EXPIRES_MS));
                Ok(match held_until {
                    Some(until) if until > now_ms => Acquired::Busy {
                        retry_after_ms: until - now_ms,
                    },
                    // Free: the condition failed on the count, somebody took it since.
                    _ if expected.is_some() => Acquired::TakenSince,
                    _ => Acquired::Busy {
                        retry_after_ms: expires_at_ms.saturating_sub(now_ms),
                    },
                })
            }
        }
    }

    async fn release(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        lease: &Lease,
    ) -> Result<(), StoreError> {
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(tenant_key(tenant, keys::pushed(code))))
            .update_expression("REMOVE lease_expires_ms")
            .condition_expression(FENCE)
            .expression_attribute_values(":holder", s(&lease.holder))
            .send()
            .await;
        match result {
            Ok(_) => Ok(()),
            // Taken over after it expired: the new holder's lease is not ours to release.
            Err(error) => error.refused_or_unavailable().map(|_| ()),
        }
    }
}
