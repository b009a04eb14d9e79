//! The sweep's own items: its lease and cursor (`SWEEP / LEASE`, outside every tenant), the
//! tenants' registry (every profile item is in `gsi1` under `TENANTS`), and per tenant its
//! sample cursor (`DRIFT#SAMPLE`), its drift reports (`DRIFT#DAY#<day>`, with an item per
//! code found differing that day, `DRIFT#DAY#<day>#<code>`), its guard
//! (`DRIFT#GUARD`) and its creation intents (`INTENT#<code>#<ms>`, in `gsi1` under `INTENTS`).

use super::conditions::ConditionalWriteError;
use super::{
    get_n, get_s, get_strings, key, keys, n, s, strings, tenant_key, unavailable, DynamoStore, Item,
};
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue};
use domain::ids::CodeId;
use domain::ids::TenantId;
use domain::sweep::{
    CreationIntent, CreationIntents, DriftCounts, DriftLedger, DriftReport, GuardTrip, SweepRuns,
    TenantRegistry,
};
use domain::StoreError;

const AFTER_TENANT: &str = "after_tenant";
/// Drift reports outlive the day they describe by a quarter: garbage collection only.
const REPORT_TTL_SECS: u64 = 90 * 24 * 60 * 60;

/// When a drift report item written now expires (`expires_at`, seconds).
pub(super) fn report_expires() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
        + REPORT_TTL_SECS
}

fn lease_key() -> Item {
    key(keys::SWEEP_PK.to_owned(), keys::SWEEP_SK.to_owned())
}

#[async_trait::async_trait]
impl SweepRuns for DynamoStore {
    async fn acquire(
        &self,
        owner: &str,
        now_ms: u64,
        lease_until_ms: u64,
    ) -> Result<Option<Option<TenantId>>, StoreError> {
        let lease = (keys::SWEEP_PK, keys::SWEEP_SK);
        Ok(self
            .take_run_lease(lease, owner, now_ms, lease_until_ms)
            .await?
            .map(|item| get_s(&item, AFTER_TENANT).and_then(|tenant| TenantId::parse(tenant).ok())))
    }

    async fn save_cursor(&self, owner: &str, after: Option<&TenantId>) -> Result<bool, StoreError> {
        let update = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(lease_key()))
            .condition_expression("#owner = :owner")
            .expression_attribute_names("#owner", "owner")
            .expression_attribute_names("#after", AFTER_TENANT)
            .expression_attribute_values(":owner", s(owner));
        let update = match after {
            Some(after) => update
                .update_expression("SET #after = :after")
                .expression_attribute_values(":after", s(after.as_str())),
            None => update.update_expression("REMOVE #after"),
        };
        match update.send().await {
            Ok(_) => Ok(true),
            Err(error) => error.refused_or_unavailable().map(|_| false),
        }
    }

    async fn release(&self, owner: &str) -> Result<(), StoreError> {
        self.give_back_run_lease((keys::SWEEP_PK, keys::SWEEP_SK), owner)
            .await
    }
}

#[async_trait::async_trait]
impl TenantRegistry for DynamoStore {
    /// The registry's index partition, from after `after`.
    async fn tenants_after(
        &self,
        after: Option<&TenantId>,
        limit: usize,
    ) -> Result<Vec<TenantId>, StoreError> {
        Ok(self
            .index_sort_keys(
                keys::TENANTS_INDEX,
                after.map(TenantId::as_str),
                Some(limit),
            )
            .await?
            .iter()
            .filter_map(|tenant| TenantId::parse(tenant).ok())
            .collect())
    }
}

impl DynamoStore {
    async fn tenant_item(&self, tenant: &TenantId, sk: &str) -> Result<Option<Item>, StoreError> {
        Ok(self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(tenant_key(tenant, sk.to_owned())))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| unavailable(e.into_service_error()))?
            .item)
    }
}

#[async_trait::async_trait]
impl DriftLedger for DynamoStore {
    async fn sample_cursor(&self, tenant: &TenantId) -> Result<Option<CodeId>, StoreError> {
        let item = self.tenant_item(tenant, keys::DRIFT_SAMPLE).await?;
        Ok(item
            .as_ref()
            .and_then(|item| get_s(item, "after_code"))
            .and_then(|code| CodeId::parse(code).ok()))
    }

    async fn save_sample_cursor(
        &self,
        tenant: &TenantId,
        after: &CodeId,
    ) -> Result<(), StoreError> {
        let mut item = tenant_key(tenant, keys::DRIFT_SAMPLE.to_owned());
        item.insert("after_code".into(), s(after.as_str()));
        self.put(item).await
    }

    /// One query of the tenant's code index (`gsi1`) after `after`.
    async fn codes_after(
        &self,
        tenant: &TenantId,
        after: Option<&CodeId>,
        limit: usize,
    ) -> Result<Vec<CodeId>, StoreError> {
        self.code_ids(tenant, after, Some(limit)).await
    }

    async fn add_to_report(
        &self,
        tenant: &TenantId,
        day: &str,
        counts: &DriftCounts,
    ) -> Result<(), StoreError> {
        self.client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(tenant_key(tenant, keys::drift_report(day))))
            .update_expression(
                "ADD #read :read, stale_confirmed :stale_confirmed SET #expires = :expires",
            )
            .expression_attribute_names("#read", "read")
            .expression_attribute_names("#expires", keys::EXPIRES_AT)
            .expression_attribute_values(":read", n(counts.read))
            .expression_attribute_values(":stale_confirmed", n(counts.stale_confirmed))
            .expression_attribute_values(":expires", n(report_expires()))
            .send()
            .await
            .map_err(|e| unavailable(e.into_service_error()))?;
        Ok(())
    }

    /// A read that differs writes the code's item (found, latest differing); one that agrees
    /// updates it only if it exists, so a clean code never gets one.
    async fn record_read(
        &self,
        tenant: &TenantId,
        day: &str,
        code: &CodeId,
        differs: bool,
    ) -> Result<(), StoreError> {
        let update = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(tenant_key(tenant, keys::drift_code(day, code))));
        let update = if differs {
            update
                // `found` is one of DynamoDB's reserved words: named through a placeholder.
                .update_expression("SET #found = :yes, latest_differs = :yes, #expires = :expires")
                .expression_attribute_names("#found", "found")
                .expression_attribute_names("#expires", keys::EXPIRES_AT)
                .expression_attribute_values(":yes", AttributeValue::Bool(true))
                .expression_attribute_values(":expires", n(report_expires()))
        } else {
            update
                .update_expression("SET latest_differs = :no")
                .condition_expression("attribute_exists(#sk)")
                .expression_attribute_names("#sk", keys::SK)
                .expression_attribute_values(":no", AttributeValue::Bool(false))
        };
        match update.send().await {
            Ok(_) => Ok(()),
            Err(error) => error.refused_or_unavailable().map(|_| ()),
        }
    }

    /// The day's counters, and its codes counted from their items (one query of the tenant's
    /// home, following pages): each code once, however many reads it had.
    async fn report(&self, tenant: &TenantId, day: &str) -> Result<DriftReport, StoreError> {
        let item = self.tenant_item(tenant, &keys::drift_report(day)).await?;
        let count = |name: &str| item.as_ref().and_then(|i| get_n(i, name)).unwrap_or(0);
        let codes = self
            .query_tenant(tenant, &keys::drift_codes(day), false)
            .await?;
        let flagged = |name: &str| {
            let flagged = codes
                .iter()
                .filter(|code| matches!(code.get(name), Some(AttributeValue::Bool(true))))
                .count();
            u32::try_from(flagged).unwrap_or(u32::MAX)
        };
        Ok(DriftReport {
            day: day.to_owned(),
            read: count("read"),
            differing: flagged("found"),
            repaired: flagged("repaired"),
            still_differing: flagged("latest_differs"),
            stale_confirmed: count("stale_confirmed"),
        })
    }

    async fn guard(&self, tenant: &TenantId) -> Result<Option<GuardTrip>, StoreError> {
        let item = self.tenant_item(tenant, keys::DRIFT_GUARD).await?;
        Ok(item.map(|item| {
            let tripped_at_ms = get_n(&item, "tripped_at_ms").unwrap_or(0);
            GuardTrip {
                tripped_at_ms,
                sampled: get_n(&item, "sampled").unwrap_or(0),
                differing: get_n(&item, "differing").unwrap_or(0),
                codes: get_strings(&item, "codes")
                    .iter()
                    .filter_map(|code| CodeId::parse(code).ok())
                    .collect(),
                recheck_at_ms: get_n(&item, "recheck_at_ms").unwrap_or(tripped_at_ms),
                // A guard stored before re-checks were raised its alert when it tripped, and
                // kept no codes to read again: it stands as confirmed then.
                confirmed_at_ms: get_n(&item, "confirmed_at_ms")
                    .or_else(|| (!item.contains_key("recheck_at_ms")).then_some(tripped_at_ms)),
            }
        }))
    }

    async fn trip_guard(&self, tenant: &TenantId, trip: &GuardTrip) -> Result<(), StoreError> {
        let mut item = tenant_key(tenant, keys::DRIFT_GUARD.to_owned());
        item.insert("tripped_at_ms".into(), n(trip.tripped_at_ms));
        item.insert("sampled".into(), n(trip.sampled));
        item.insert("differing".into(), n(trip.differing));
        item.insert(
            "codes".into(),
            strings(trip.codes.iter().map(CodeId::as_str)),
        );
        item.insert("recheck_at_ms".into(), n(trip.recheck_at_ms));
        if let Some(at_ms) = trip.confirmed_at_ms {
            item.insert("confirmed_at_ms".into(), n(at_ms));
        }
        self.put(item).await
    }

    async fn confirm_guard(
        &self,
        tenant: &TenantId,
        tripped_at_ms: u64,
        at_ms: u64,
    ) -> Result<bool, StoreError> {
        let update = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(tenant_key(tenant, keys::DRIFT_GUARD.to_owned())))
            .update_expression("SET confirmed_at_ms = :at")
            .condition_expression("tripped_at_ms = :tripped")
            .expression_attribute_values(":at", n(at_ms))
            .expression_attribute_values(":tripped", n(tripped_at_ms));
        match update.send().await {
            Ok(_) => Ok(true),
            Err(error) => error.refused_or_unavailable().map(|_| false),
        }
    }

    async fn resume(&self, tenant: &TenantId) -> Result<bool, StoreError> {
        let output = self
            .client
            .delete_item()
            .table_name(&self.table)
            .set_key(Some(tenant_key(tenant, keys::DRIFT_GUARD.to_owned())))
            .return_values(ReturnValue::AllOld)
            .send()
            .await
            .map_err(|e| unavailable(e.into_service_error()))?;
        Ok(output.attributes.is_some())
    }
}

#[async_trait::async_trait]
impl CreationIntents for DynamoStore {
    async fn record_intent(&self, intent: &CreationIntent) -> Result<(), StoreError> {
        let sk = keys::creation_intent(&intent.code, intent.started_at_ms);
        let mut item = tenant_key(&intent.tenant, sk.clone());
        item.insert(keys::GSI1_PK.into(), s(keys::INTENTS));
        item.insert(
            keys::GSI1_SK.into(),
            s(keys::intent_index_sort(
                intent.started_at_ms,
                &intent.tenant,
                &sk,
            )),
        );
        self.put(item).await
    }

    async fn clear_intent(&self, intent: &CreationIntent) -> Result<(), StoreError> {
        self.client
            .delete_item()
            .table_name(&self.table)
            .set_key(Some(tenant_key(
                &intent.tenant,
                keys::creation_intent(&intent.code, intent.started_at_ms),
            )))
            .send()
            .await
            .map_err(|e| unavailable(e.into_service_error()))?;
        Ok(())
    }

    /// One index query: the intent's tenant, code and time are all in its keys; a page starts
    /// after `after`'s index entry.
    async fn stale_intents(
        &self,
        before_ms: u64,
        after: Option<&CreationIntent>,
        limit: usize,
    ) -> Result<Vec<CreationIntent>, StoreError> {
        let start = after.map(|intent| {
            let sk = keys::creation_intent(&intent.code, intent.started_at_ms);
            let mut start = tenant_key(&intent.tenant, sk.clone());
            start.insert(keys::GSI1_PK.into(), s(keys::INTENTS));
            start.insert(
                keys::GSI1_SK.into(),
                s(keys::intent_index_sort(
                    intent.started_at_ms,
                    &intent.tenant,
                    &sk,
                )),
            );
            start
        });
        let items = self
            .index_before_after(keys::INTENTS, before_ms, start, limit)
            .await?;
        Ok(items
            .iter()
            .filter_map(|item| {
                let tenant = keys::tenant_of_home(get_s(item, keys::PK)?)?;
                let rest = get_s(item, keys::SK)?.strip_prefix("INTENT#")?;
                let (code, at) = rest.rsplit_once('#')?;
                Some(CreationIntent {
                    tenant: TenantId::parse(tenant).ok()?,
                    code: CodeId::parse(code).ok()?,
                    started_at_ms: at.parse().ok()?,
                })
            })
            .collect())
    }
}
