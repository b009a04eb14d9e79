//! Per-code leases: one item per code (`LEASE#code`), taken and given back with one
//! conditional write each, and the condition every record write of the code is fenced on.
//!
//! Expiry is an absolute time on the functions' clock (Lambda hosts are NTP-synced; the
//! docs/aws-semantics.md §3.1 variant), and a WeCom call starts only while the lease covers it.
//! The item stays after release (with its expiry cleared) so a count of acquisitions is kept;
//! the TTL collects codes nobody refreshes any more.

use super::conditions::ConditionalWriteError;
use super::{get_n, keys, n, s, tenant_key, unavailable, DynamoStore};
use aws_sdk_dynamodb::types::{ConditionCheck, ReturnValuesOnConditionCheckFailure, Update};
use domain::ids::CodeId;
use domain::ids::TenantId;
use domain::refresh::{Acquired, CodeLeases, Lease};
use domain::StoreError;

/// A lease item no refresh touched for a week is collected.
const LEASE_ITEM_TTL_SECS: u64 = 7 * 24 * 3600;

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
            .set_key(Some(tenant_key(tenant, keys::lease(code))))
            .update_expression(
                "SET holder = :holder, lease_expires_ms = :expires, #ttl = :ttl ADD acquisitions :one",
            )
            .condition_expression(condition)
            .expression_attribute_names("#ttl", keys::EXPIRES_AT)
            .expression_attribute_values(":holder", s(holder))
            .expression_attribute_values(":expires", n(expires_at_ms))
            .expression_attribute_values(":ttl", n(now_ms / 1000 + LEASE_ITEM_TTL_SECS))
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
                    .and_then(|item| get_n::<u64>(item, "lease_expires_ms"));
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
            .set_key(Some(tenant_key(tenant, keys::lease(code))))
            .update_expression("REMOVE lease_expires_ms")
            .condition_expression("holder = :holder")
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

impl DynamoStore {
    /// The condition a record write of `code` carries: `lease` is still the code's lease.
    /// The fence of a record write that also gives the lease back: the same condition, and
    /// the expiry removed in the same transaction.
    pub(crate) fn lease_fence_and_release(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        lease: &Lease,
    ) -> Result<Update, StoreError> {
        Update::builder()
            .table_name(&self.table)
            .set_key(Some(tenant_key(tenant, keys::lease(code))))
            .update_expression("REMOVE lease_expires_ms")
            .condition_expression("holder = :holder")
            .expression_attribute_values(":holder", s(&lease.holder))
            .build()
            .map_err(unavailable)
    }

    pub(crate) fn lease_fence(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        lease: &Lease,
    ) -> Result<ConditionCheck, StoreError> {
        ConditionCheck::builder()
            .table_name(&self.table)
            .set_key(Some(tenant_key(tenant, keys::lease(code))))
            .condition_expression("holder = :holder")
            .expression_attribute_values(":holder", s(&lease.holder))
            .build()
            .map_err(unavailable)
    }
}
