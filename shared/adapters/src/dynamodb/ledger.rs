//! Add claims and counters (docs/rules.md rule 8): the claim and the three counters move in one
//! transaction, so an add is counted exactly once however often it is delivered. A code's
//! counters are one item a day and one in all, a number per staff member (`keys::Counter`).

use super::conditions::ConditionalWriteError;
use super::{get_bool, get_n, get_s, key, keys, n, s, tenant_key, unavailable, DynamoStore};
use aws_sdk_dynamodb::types::{
    AttributeValue, Put, ReturnValuesOnConditionCheckFailure, TransactWriteItem, Update,
};
use domain::facts::{AddFact, AddLedger, ClaimOutcome, CountOutcome, LimitClaim, QuotaLedger};
use domain::ids::TenantId;
use domain::ids::{CodeId, StaffId};
use domain::membership::{AddCounts, CodeConfig};
use domain::StoreError;

/// Claims outlive WeCom's and SQS's redelivery windows by far; daily counters outlive the
/// day for reports.
const CLAIM_TTL_SECS: u64 = 90 * 24 * 3600;
const DAILY_COUNTER_TTL_SECS: u64 = 35 * 24 * 3600;

fn increment(
    table: &str,
    tenant: &TenantId,
    counter: keys::Counter,
    expires_at: Option<u64>,
) -> Result<TransactWriteItem, StoreError> {
    let mut update = Update::builder()
        .table_name(table)
        .set_key(Some(tenant_key(tenant, counter.sk)))
        .expression_attribute_names("#count", counter.attribute)
        .expression_attribute_values(":one", n(1));
    update = match expires_at {
        Some(at) => update
            .update_expression("ADD #count :one SET #expires = :expires")
            .expression_attribute_names("#expires", keys::EXPIRES_AT)
            .expression_attribute_values(":expires", n(at)),
        None => update.update_expression("ADD #count :one"),
    };
    Ok(TransactWriteItem::builder()
        .update(update.build().map_err(unavailable)?)
        .build())
}

#[async_trait::async_trait]
impl AddLedger for DynamoStore {
    #[tracing::instrument(skip_all, fields(tenant = %add.tenant, code = %add.code, staff = %add.staff))]
    async fn count_add(&self, add: &AddFact, now_ms: u64) -> Result<CountOutcome, StoreError> {
        let now_secs = now_ms / 1000;
        let mut claim = tenant_key(&add.tenant, keys::claim(&add.business_key()));
        claim.insert("counted_at_ms".into(), n(now_ms));
        claim.insert("code".into(), s(add.code.as_str()));
        claim.insert("staff".into(), s(add.staff.as_str()));
        claim.insert("external_user".into(), s(&add.external_user));
        claim.insert("day".into(), s(&add.day));
        claim.insert(keys::EXPIRES_AT.into(), n(now_secs + CLAIM_TTL_SECS));
        let claim = Put::builder()
            .table_name(&self.table)
            .set_item(Some(claim))
            .condition_expression("attribute_not_exists(pk)")
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .map_err(unavailable)?;
        let daily_expiry = Some(now_secs + DAILY_COUNTER_TTL_SECS);
        let table = self.table.as_str();
        let items = vec![
            TransactWriteItem::builder().put(claim).build(),
            increment(
                table,
                &add.tenant,
                keys::adds_total(&add.code, &add.staff),
                None,
            )?,
            increment(
                table,
                &add.tenant,
                keys::adds_today_on_code(&add.day, &add.code, &add.staff),
                daily_expiry,
            )?,
            increment(
                table,
                &add.tenant,
                keys::adds_today_all_codes(&add.day, &add.staff),
                daily_expiry,
            )?,
        ];
        // No ClientRequestToken: the claim is the idempotency, and a token would turn a
        // retry with a later timestamp into IdempotentParameterMismatch.
        let result = self
            .client
            .transact_write_items()
            .set_transact_items(Some(items))
            .send()
            .await;
        match result {
            Ok(_) => Ok(CountOutcome::Counted { at_ms: now_ms }),
            Err(error) => {
                const CLAIM: usize = 0;
                let refused = error.refused_or_unavailable()?;
                if !refused.refused_item(CLAIM) {
                    return Err(refused.into_unavailable());
                }
                let at_ms = refused
                    .stored_item(CLAIM)
                    .and_then(|item| get_n(item, "counted_at_ms"))
                    .unwrap_or(now_ms);
                Ok(CountOutcome::AlreadyCounted { at_ms })
            }
        }
    }

    async fn record_ignored(&self, tenant: &TenantId, kind: &str) -> Result<(), StoreError> {
        self.client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(tenant_key(tenant, keys::ignored(kind))))
            .update_expression("ADD events :one")
            .expression_attribute_values(":one", n(1))
            .send()
            .await
            .map_err(|e| unavailable(e.into_service_error()))?;
        Ok(())
    }
}

/// Limit claims live as long as the daily counters they describe.
const LIMIT_CLAIM_TTL_SECS: u64 = DAILY_COUNTER_TTL_SECS;

#[async_trait::async_trait]
impl QuotaLedger for DynamoStore {
    async fn code_config(
        &self,
        tenant: &TenantId,
        code: &CodeId,
    ) -> Result<Option<CodeConfig>, StoreError> {
        Ok(self
            .code(tenant, code)
            .await?
            .map(|record| record.code.config))
    }

    async fn counts(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        staff: &StaffId,
        day: &str,
    ) -> Result<AddCounts, StoreError> {
        let on_code = keys::adds_today_on_code(day, code, staff);
        let all_codes = keys::adds_today_all_codes(day, staff);
        let total = keys::adds_total(code, staff);
        let items = self
            .batch_get(vec![
                tenant_key(tenant, on_code.sk.clone()),
                tenant_key(tenant, all_codes.sk.clone()),
                tenant_key(tenant, total.sk.clone()),
            ])
            .await?;
        let count = |counter: &keys::Counter| {
            items
                .iter()
                .find(|item| get_s(item, keys::SK) == Some(counter.sk.as_str()))
                .and_then(|item| get_n::<u32>(item, &counter.attribute))
                .unwrap_or(0)
        };
        Ok(AddCounts {
            on_code: count(&on_code),
            all_codes: count(&all_codes),
            on_code_total: count(&total),
        })
    }

    async fn claim_limit(&self, claim: &LimitClaim) -> Result<ClaimOutcome, StoreError> {
        let mut item = tenant_key(
            &claim.tenant,
            keys::limit_reached(&claim.day, claim.limit, &claim.staff, claim.code.as_ref()),
        );
        item.insert("staff".into(), s(claim.staff.as_str()));
        item.insert("limit".into(), s(claim.limit.name()));
        if let Some(code) = &claim.code {
            item.insert("code".into(), s(code.as_str()));
        }
        item.insert("day".into(), s(&claim.day));
        item.insert("owner".into(), s(&claim.owner));
        item.insert("claimed_at_ms".into(), n(claim.claimed_at_ms));
        item.insert("lease_until_ms".into(), n(claim.lease_until_ms));
        item.insert("notified".into(), AttributeValue::Bool(false));
        // Open until notified: the sweep finds it there once its owner's lease has ended.
        let sk = keys::limit_reached(&claim.day, claim.limit, &claim.staff, claim.code.as_ref());
        item.insert(keys::GSI1_PK.into(), s(keys::OPEN_CLAIMS));
        item.insert(
            keys::GSI1_SK.into(),
            s(keys::open_claim_sort(
                claim.lease_until_ms,
                &claim.tenant,
                &sk,
            )),
        );
        item.insert(
            keys::EXPIRES_AT.into(),
            n(claim.claimed_at_ms / 1000 + LIMIT_CLAIM_TTL_SECS),
        );
        let result = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(pk)")
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        match result {
            Ok(_) => Ok(ClaimOutcome::Owned { notified: false }),
            Err(error) => {
                let stored = error.refused_or_unavailable()?.item.unwrap_or_default();
                if get_s(&stored, "owner") == Some(claim.owner.as_str()) {
                    Ok(ClaimOutcome::Owned {
                        notified: get_bool(&stored, "notified").unwrap_or(false),
                    })
                } else {
                    Ok(ClaimOutcome::TakenByAnother)
                }
            }
        }
    }

    /// Closes the claim (out of the open claims' index), if `claim.owner` still owns it.
    async fn mark_notified(&self, claim: &LimitClaim, codes: usize) -> Result<(), StoreError> {
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(claim_key(claim)))
            .update_expression("SET notified = :yes, codes = :codes REMOVE #gpk, #gsk")
            .condition_expression("#owner = :owner")
            .expression_attribute_names("#gpk", keys::GSI1_PK)
            .expression_attribute_names("#gsk", keys::GSI1_SK)
            .expression_attribute_names("#owner", "owner")
            .expression_attribute_values(":yes", AttributeValue::Bool(true))
            .expression_attribute_values(":codes", n(codes))
            .expression_attribute_values(":owner", s(&claim.owner))
            .send()
            .await;
        match result {
            Ok(_) => Ok(()),
            // Taken over: its new owner records it.
            Err(error) => error.refused_or_unavailable().map(|_| ()),
        }
    }

    /// One index query for the keys of claims whose lease has ended, one batch read of them.
    async fn stale_claims(&self, now_ms: u64, limit: usize) -> Result<Vec<LimitClaim>, StoreError> {
        let items = self.index_before(keys::OPEN_CLAIMS, now_ms, limit).await?;
        let wanted = items
            .iter()
            .filter_map(|item| {
                Some(key(
                    get_s(item, keys::PK)?.to_owned(),
                    get_s(item, keys::SK)?.to_owned(),
                ))
            })
            .collect();
        Ok(self
            .batch_get(wanted)
            .await?
            .iter()
            .filter(|item| get_bool(item, "notified") == Some(false))
            .filter_map(claim_from)
            .filter(|claim| claim.lease_until_ms < now_ms)
            .collect())
    }

    async fn take_over(
        &self,
        claim: &LimitClaim,
        owner: &str,
        lease_until_ms: u64,
    ) -> Result<bool, StoreError> {
        let sk = keys::limit_reached(&claim.day, claim.limit, &claim.staff, claim.code.as_ref());
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(claim_key(claim)))
            .update_expression("SET #owner = :owner, lease_until_ms = :until, #gsk = :gsk")
            .condition_expression(
                "#owner = :held AND lease_until_ms = :held_until AND notified = :no",
            )
            .expression_attribute_names("#owner", "owner")
            .expression_attribute_names("#gsk", keys::GSI1_SK)
            .expression_attribute_values(":owner", s(owner))
            .expression_attribute_values(":until", n(lease_until_ms))
            .expression_attribute_values(
                ":gsk",
                s(keys::open_claim_sort(lease_until_ms, &claim.tenant, &sk)),
            )
            .expression_attribute_values(":held", s(&claim.owner))
            .expression_attribute_values(":held_until", n(claim.lease_until_ms))
            .expression_attribute_values(":no", AttributeValue::Bool(false))
            .send()
            .await;
        match result {
            Ok(_) => Ok(true),
            Err(error) => error.refused_or_unavailable().map(|_| false),
        }
    }
}

fn claim_key(claim: &LimitClaim) -> super::Item {
    tenant_key(
        &claim.tenant,
        keys::limit_reached(&claim.day, claim.limit, &claim.staff, claim.code.as_ref()),
    )
}

/// A claim item as stored; `None` for one this version cannot read.
fn claim_from(item: &super::Item) -> Option<LimitClaim> {
    let tenant = keys::tenant_of_home(get_s(item, keys::PK)?)?;
    Some(LimitClaim {
        tenant: TenantId::parse(tenant).ok()?,
        staff: StaffId::parse(get_s(item, "staff")?).ok()?,
        limit: super::due::limit_named(get_s(item, "limit")?)?,
        day: get_s(item, "day")?.to_owned(),
        code: match get_s(item, "code") {
            Some(code) => Some(CodeId::parse(code).ok()?),
            None => None,
        },
        owner: get_s(item, "owner")?.to_owned(),
        claimed_at_ms: get_n(item, "claimed_at_ms")?,
        lease_until_ms: get_n(item, "lease_until_ms")?,
    })
}
