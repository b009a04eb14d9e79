//! The shared WeCom budget on the table (docs/rules.md rule 6, `domain::budget`).

use super::conditions::ConditionalWriteError;
use super::{get_n, key, keys, n, tenant_key, DynamoStore, Item};
use aws_sdk_dynamodb::types::{ReturnValue, ReturnValuesOnConditionCheckFailure};
use domain::budget::{
    asking_through, hold_sharded, minute_of, refusal, spend_layered, BudgetLayers, BudgetLimits,
    BudgetSlot, Holder, RosterMemo, ShardSpend, Spend, Throttled, WeComBudget,
};
use domain::ids::TenantId;
use domain::StoreError;
use std::sync::{Arc, Mutex};

/// The shared budget on the table: one item per holder (a tenant, or an egress address its
/// tenants share), API, UTC hour and shard, and the addresses' rosters
/// (`domain::budget::fairness`).
#[derive(Clone)]
pub struct DynamoBudget {
    store: DynamoStore,
    layers: BudgetLayers,
    /// What this container counted and read of the rosters this minute.
    rosters: Arc<Mutex<RosterMemo>>,
}

impl DynamoBudget {
    pub fn new(store: DynamoStore, layers: BudgetLayers) -> Self {
        Self {
            store,
            layers,
            rosters: Arc::default(),
        }
    }

    /// The key of `holder`'s item for `api`, `shard` and UTC hour `hour`: a tenant's under
    /// its home (`keys::home`), an address's under a partition key of its own per API and
    /// shard, so the address's shards are as many partition keys as a tenant's.
    fn item_key(holder: Holder<'_>, api: &str, shard: u32, hour: u64) -> Item {
        let sk = keys::budget(api, shard, hour);
        match holder {
            Holder::Tenant(tenant) => tenant_key(tenant, sk),
            Holder::Address(address) => key(keys::address_budget_home(address, api, shard), sk),
        }
    }
}

impl DynamoBudget {
    /// One `UpdateItem`, 1 WCU (the item stays under 1 KB: a total and at most 60 minute
    /// counters): `ADD` one to shard `shard`'s hour total and minute counter, on condition
    /// that both are below the shard's `share`. DynamoDB applies a conditional update
    /// atomically against the item's current state, so N concurrent workers serialise on the
    /// item and at most the share's minute and hour are granted from it. A refusal returns
    /// the item as it was (`ALL_OLD`, no read), which tells which window is full.
    async fn spend_shard(
        &self,
        holder: Holder<'_>,
        api: &str,
        shard: u32,
        share: BudgetLimits,
        now_ms: u64,
    ) -> Result<ShardSpend, StoreError> {
        let slot = BudgetSlot::at(now_ms);
        let result = self
            .store
            .client
            .update_item()
            .table_name(&self.store.table)
            .set_key(Some(Self::item_key(holder, api, shard, slot.hour)))
            .update_expression("ADD #hour :one, #minute :one SET #expires = :expires")
            .condition_expression(
                "(attribute_not_exists(#hour) OR #hour < :per_hour) \
                 AND (attribute_not_exists(#minute) OR #minute < :per_minute)",
            )
            .expression_attribute_names("#hour", "spent")
            .expression_attribute_names("#minute", &slot.minute_counter)
            .expression_attribute_names("#expires", keys::EXPIRES_AT)
            .expression_attribute_values(":one", n(1))
            .expression_attribute_values(":per_hour", n(share.per_hour))
            .expression_attribute_values(":per_minute", n(share.per_minute))
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
                let minute_spent = get_n::<u32>(&new, &slot.minute_counter).unwrap_or(0);
                let minute = f64::from(minute_spent);
                // The shard's share spent stands for the tenant's: spends are spread evenly.
                let used = (minute / share.per_minute as f64).max(hour / share.per_hour as f64);
                match holder {
                    Holder::Tenant(tenant) => domain::telemetry::budget_used(tenant, used * 100.0),
                    Holder::Address(address) => {
                        domain::telemetry::address_budget_used(address, used * 100.0)
                    }
                }
                Ok(ShardSpend::Granted { minute_spent })
            }
            Err(error) => {
                let refused = error.refused_or_unavailable()?;
                let old: Item = refused.item.unwrap_or_default();
                let hour_total = get_n(&old, "spent").unwrap_or(0);
                let minute_total = get_n(&old, &slot.minute_counter).unwrap_or(0);
                Ok(ShardSpend::Refused(refusal(
                    share,
                    hour_total,
                    minute_total,
                    now_ms,
                )))
            }
        }
    }

    /// Counts `tenant` on `address`'s roster for `api` this minute, unless this container
    /// already did, and answers how many tenants asked of the address in the minute before
    /// (`domain::budget::fairness`), read once a minute per container.
    async fn asking(
        &self,
        tenant: &TenantId,
        address: &str,
        api: &str,
        now_ms: u64,
    ) -> Result<u32, StoreError> {
        asking_through(
            &self.rosters,
            (tenant, address, api),
            minute_of(now_ms),
            || self.count_on_roster(tenant, address, api, now_ms),
            || self.read_roster(address, api, now_ms.saturating_sub(60_000)),
        )
        .await
    }

    /// One conditional `UpdateItem` on the tenant's mark (the minute it was last counted, set
    /// only when older), and, when it was, one `ADD` to the minute's counter on the address's
    /// roster: each tenant counted once a minute however many containers spend for it.
    async fn count_on_roster(
        &self,
        tenant: &TenantId,
        address: &str,
        api: &str,
        now_ms: u64,
    ) -> Result<(), StoreError> {
        let slot = BudgetSlot::at(now_ms);
        let minute = minute_of(now_ms);
        let marked = self
            .store
            .client
            .update_item()
            .table_name(&self.store.table)
            .set_key(Some(tenant_key(tenant, keys::asking_mark(api))))
            .update_expression("SET #minute = :minute, #expires = :expires")
            .condition_expression("attribute_not_exists(#minute) OR #minute < :minute")
            .expression_attribute_names("#minute", "minute")
            .expression_attribute_names("#expires", keys::EXPIRES_AT)
            .expression_attribute_values(":minute", n(minute))
            .expression_attribute_values(":expires", n(slot.expires_at_secs()))
            .send()
            .await;
        if let Err(error) = marked {
            // Refused: another container counted the tenant this minute.
            error.refused_or_unavailable()?;
            return Ok(());
        }
        self.store
            .client
            .update_item()
            .table_name(&self.store.table)
            .set_key(Some(key(
                keys::address_roster_home(address, api),
                keys::budget_roster_hour(slot.hour),
            )))
            .update_expression("ADD #minute :one SET #expires = :expires")
            .expression_attribute_names("#minute", &slot.minute_counter)
            .expression_attribute_names("#expires", keys::EXPIRES_AT)
            .expression_attribute_values(":one", n(1))
            .expression_attribute_values(":expires", n(slot.expires_at_secs()))
            .send()
            .await
            .map_err(|e| super::unavailable(e.into_service_error()))?;
        Ok(())
    }

    /// One eventually consistent `GetItem` of the address's roster: how many tenants asked of
    /// it in the minute of `at_ms`. A count a second stale changes a share by one tenant.
    async fn read_roster(&self, address: &str, api: &str, at_ms: u64) -> Result<u32, StoreError> {
        let slot = BudgetSlot::at(at_ms);
        let output = self
            .store
            .client
            .get_item()
            .table_name(&self.store.table)
            .set_key(Some(key(
                keys::address_roster_home(address, api),
                keys::budget_roster_hour(slot.hour),
            )))
            .projection_expression("#minute")
            .expression_attribute_names("#minute", &slot.minute_counter)
            .send()
            .await
            .map_err(|e| super::unavailable(e.into_service_error()))?;
        Ok(output
            .item
            .as_ref()
            .and_then(|item| get_n::<u32>(item, &slot.minute_counter))
            .unwrap_or(0))
    }

    /// One `UpdateItem`, 1 WCU: gives back the unit a spend took from shard `shard`'s item
    /// (the address refused it): `ADD -1` on the counters the spend raised, on condition only
    /// that the item exists, so a refund never creates one.
    async fn refund_shard(
        &self,
        holder: Holder<'_>,
        api: &str,
        shard: u32,
        now_ms: u64,
    ) -> Result<(), StoreError> {
        let slot = BudgetSlot::at(now_ms);
        self.store
            .client
            .update_item()
            .table_name(&self.store.table)
            .set_key(Some(Self::item_key(holder, api, shard, slot.hour)))
            .update_expression("ADD #hour :less, #minute :less")
            .condition_expression("attribute_exists(#hour)")
            .expression_attribute_names("#hour", "spent")
            .expression_attribute_names("#minute", &slot.minute_counter)
            .expression_attribute_values(":less", n(-1))
            .send()
            .await
            .map_err(super::unavailable)?;
        Ok(())
    }
}

#[async_trait::async_trait]
impl WeComBudget for DynamoBudget {
    /// One `UpdateItem` on a tenant's shard drawn at random (a second on another shard only
    /// when the first is spent), then the same on the shards of the tenant's address, and one
    /// more to give the tenant's unit back when the address refuses
    /// (`domain::budget::spend_layered`): 2 WCU a granted spend. Once a minute per tenant and
    /// container, the roster's mark and count (2 WCU, 1 when another container counted the
    /// tenant), and once a minute per address, its read (0.5 RCU).
    async fn spend(&self, tenant: &TenantId, api: &str, now_ms: u64) -> Result<Spend, StoreError> {
        spend_layered(
            &self.layers,
            tenant,
            rand::random(),
            |holder, shard, share| self.spend_shard(holder, api, shard, share, now_ms),
            |holder, shard| self.refund_shard(holder, api, shard, now_ms),
            |address| self.asking(tenant, address, api, now_ms),
        )
        .await
    }

    /// One `UpdateItem` per shard of the tenant's budget setting the minute's counter to the
    /// shard's share (each answering the counter before: the calls granted this minute), one on
    /// the tenant's record of its last 45009 for `api` (this one in, the one before out:
    /// `window_to_hold` decides from both), and, for an hour, one more per shard setting the
    /// hour's total to the share. Every later spend of the held window is then refused by the
    /// condition it already has. Rare (WeCom refused a call our budget granted), so its up to
    /// 35 writes are on no hot path.
    async fn hold(&self, tenant: &TenantId, api: &str, now_ms: u64) -> Result<Spend, StoreError> {
        let slot = &BudgetSlot::at(now_ms);
        let fill = |shard: u32, counter: &'static str, full: u32| async move {
            let counter = if counter.is_empty() {
                slot.minute_counter.as_str()
            } else {
                counter
            };
            let output = self
                .store
                .client
                .update_item()
                .table_name(&self.store.table)
                .set_key(Some(Self::item_key(
                    Holder::Tenant(tenant),
                    api,
                    shard,
                    slot.hour,
                )))
                .update_expression("SET #counter = :full, #expires = :expires")
                .expression_attribute_names("#counter", counter)
                .expression_attribute_names("#expires", keys::EXPIRES_AT)
                .expression_attribute_values(":full", n(full))
                .expression_attribute_values(":expires", n(slot.expires_at_secs()))
                .return_values(ReturnValue::UpdatedOld)
                .send()
                .await
                .map_err(|e| super::unavailable(e.into_service_error()))?;
            Ok::<u32, StoreError>(
                output
                    .attributes
                    .as_ref()
                    .and_then(|old| get_n::<u32>(old, counter))
                    .unwrap_or(0),
            )
        };
        let record = |now: Throttled| async move {
            let output = self
                .store
                .client
                .update_item()
                .table_name(&self.store.table)
                .set_key(Some(tenant_key(tenant, keys::throttled(api))))
                .update_expression(
                    "SET #minute = :minute, #granted = :granted, #expires = :expires",
                )
                .expression_attribute_names("#minute", "last_minute")
                .expression_attribute_names("#granted", "last_granted")
                .expression_attribute_names("#expires", keys::EXPIRES_AT)
                .expression_attribute_values(":minute", n(now.minute))
                .expression_attribute_values(":granted", n(now.granted))
                .expression_attribute_values(":expires", n(slot.expires_at_secs()))
                .return_values(ReturnValue::UpdatedOld)
                .send()
                .await
                .map_err(|e| super::unavailable(e.into_service_error()))?;
            Ok(output.attributes.as_ref().and_then(|old| {
                Some(Throttled {
                    minute: get_n(old, "last_minute")?,
                    granted: get_n(old, "last_granted").unwrap_or(0),
                })
            }))
        };
        hold_sharded(
            self.layers.tenant,
            now_ms,
            |shard, share| fill(shard, "", share.per_minute),
            record,
            |shard, share| async move { fill(shard, "spent", share.per_hour).await.map(|_| ()) },
        )
        .await
    }

    fn address_of(&self, tenant: &TenantId) -> String {
        self.layers.egress.address_for(tenant).to_owned()
    }
}
