//! The tenants' shared WeCom budget.

use crate::budget::{
    hold_sharded, minute_of, refusal, reopens_in, spend_layered, BudgetLayers, BudgetLimits,
    BudgetSlot, Holder, ShardSpend, Spend, Throttled, WeComBudget, Window,
};
use crate::ids::TenantId;
use crate::StoreError;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};

/// One hour's item of a shard: the hour's total and each minute's counter.
type HourSpent = (u32, HashMap<String, u32>);
/// Whose item: holder (`tenant:<t>` or `address:<a>`), API, UTC hour and shard.
type ItemOf = (String, String, u64, u32);

#[derive(Default)]
struct Left {
    /// Calls left (unlimited when `None`).
    calls: Option<u32>,
    /// When spent, how long until calls may be made again (the minute's end when `None`).
    retry_after_ms: Option<u64>,
    /// With limits, the budget is kept as the table keeps it (`limited`, `layered`): per
    /// holder, API, UTC hour and shard, the hour's total and each minute's counter.
    layers: Option<BudgetLayers>,
    spent: HashMap<ItemOf, HourSpent>,
    /// Spends so far: the seed of the next one's shard (`pick`), so a run is repeatable.
    spends: u64,
    /// Each tenant's and API's last 45009 (`hold`).
    throttled: HashMap<(TenantId, String), Throttled>,
    /// The tenants that asked of each address for each API in each minute (the roster).
    asking: HashMap<(String, String, u64), HashSet<TenantId>>,
}

impl Left {
    /// Shard `shard`'s item of `holder` for `api` in `slot`'s hour, created empty.
    fn item(
        &mut self,
        holder: Holder<'_>,
        api: &str,
        slot: &BudgetSlot,
        shard: u32,
    ) -> &mut HourSpent {
        self.spent
            .entry((holder_name(holder), api.to_owned(), slot.hour, shard))
            .or_default()
    }
}

/// A budget of calls, unlimited until told otherwise. Clones share it.
#[derive(Clone, Default)]
pub struct FakeBudget {
    left: Arc<Mutex<Left>>,
}

impl FakeBudget {
    fn left(&self) -> MutexGuard<'_, Left> {
        self.left.lock().expect("fake budget lock")
    }

    /// A budget with nothing left, that opens again in `retry_after_ms`.
    pub fn spent_for(retry_after_ms: u64) -> Self {
        let budget = Self::default();
        *budget.left() = Left {
            calls: Some(0),
            retry_after_ms: Some(retry_after_ms),
            ..Left::default()
        };
        budget
    }

    /// A budget of `limits` per tenant and API, spent as `adapters::dynamodb::DynamoBudget`
    /// spends it: both windows checked and charged at once, a refusal charging nothing and
    /// naming the full window (the hour's first). The store contract holds the two to it.
    pub fn limited(limits: BudgetLimits) -> Self {
        Self::layered(BudgetLayers::behind_one_address(limits))
    }

    /// A budget of both `layers`, spent as `DynamoBudget` spends it (`spend_layered`).
    pub fn layered(layers: BudgetLayers) -> Self {
        let budget = Self::default();
        budget.left().layers = Some(layers);
        budget
    }

    /// `calls` calls left (unlimited when `None`); once spent, the minute's budget is.
    pub fn set_left(&self, calls: Option<u32>) {
        self.left().calls = calls;
    }

    /// The number a spend draws its first shard from: the spend's count, scrambled
    /// (SplitMix64's finaliser), so that shards are drawn as at random but repeatably.
    pub fn pick(&self) -> u64 {
        let mut left = self.left();
        left.spends += 1;
        scrambled(left.spends)
    }

    /// One atomic check-and-charge of shard `shard`'s item against its `share`, as
    /// `DynamoBudget` makes it: both windows or nothing.
    pub fn spend_shard(
        &self,
        holder: Holder<'_>,
        api: &str,
        shard: u32,
        share: BudgetLimits,
        now_ms: u64,
    ) -> ShardSpend {
        let mut left = self.left();
        let slot = BudgetSlot::at(now_ms);
        let (hour, minutes) = left.item(holder, api, &slot, shard);
        let minute = minutes.entry(slot.minute_counter).or_default();
        if *hour < share.per_hour && *minute < share.per_minute {
            *hour += 1;
            *minute += 1;
            return ShardSpend::Granted {
                minute_spent: *minute,
            };
        }
        ShardSpend::Refused(refusal(share, *hour, *minute, now_ms))
    }

    /// Counts `tenant` on `address`'s roster for `api` in the minute of `now_ms`, as
    /// `DynamoBudget` does, and answers how many tenants asked of the address in the minute
    /// before (`crate::budget::fair_share`).
    pub fn asking(&self, tenant: &TenantId, address: &str, api: &str, now_ms: u64) -> u32 {
        self.count_on_roster(tenant, address, api, now_ms);
        self.asked_in(address, api, minute_of(now_ms).saturating_sub(1))
    }

    /// Counts `tenant` on `address`'s roster for `api` in the minute of `now_ms`; answers
    /// whether it was not counted yet (the roster's count went up).
    pub fn count_on_roster(
        &self,
        tenant: &TenantId,
        address: &str,
        api: &str,
        now_ms: u64,
    ) -> bool {
        let mut left = self.left();
        let minute = minute_of(now_ms);
        // Only this minute's rosters and the one before are ever asked for.
        left.asking.retain(|(_, _, kept), _| kept + 1 >= minute);
        left.asking
            .entry((address.to_owned(), api.to_owned(), minute))
            .or_default()
            .insert(tenant.clone())
    }

    /// How many tenants asked of `address` for `api` in `minute` (minutes since the epoch).
    pub fn asked_in(&self, address: &str, api: &str, minute: u64) -> u32 {
        self.left()
            .asking
            .get(&(address.to_owned(), api.to_owned(), minute))
            .map_or(0, |asked| asked.len() as u32)
    }

    /// Gives one unit back to shard `shard` of `holder`'s item at `now_ms`, as `DynamoBudget`
    /// does when the address refuses a spend the tenant granted.
    pub fn refund_shard(&self, holder: Holder<'_>, api: &str, shard: u32, now_ms: u64) {
        let mut left = self.left();
        let slot = BudgetSlot::at(now_ms);
        if let Some((hour, minutes)) =
            left.spent
                .get_mut(&(holder_name(holder), api.to_owned(), slot.hour, shard))
        {
            *hour = hour.saturating_sub(1);
            if let Some(minute) = minutes.get_mut(&slot.minute_counter) {
                *minute = minute.saturating_sub(1);
            }
        }
    }

    /// Marks `window` of shard `shard` of `holder`'s item at `now_ms` as spent, as
    /// `DynamoBudget::hold` does; answers the counter it replaced.
    pub fn fill_shard(
        &self,
        holder: Holder<'_>,
        api: &str,
        shard: u32,
        share: BudgetLimits,
        window: Window,
        now_ms: u64,
    ) -> u32 {
        let mut left = self.left();
        let slot = BudgetSlot::at(now_ms);
        let (hour, minutes) = left.item(holder, api, &slot, shard);
        match window {
            Window::Minute => minutes
                .insert(slot.minute_counter, share.per_minute)
                .unwrap_or(0),
            Window::Hour => std::mem::replace(hour, share.per_hour),
        }
    }

    /// Records `tenant`'s 45009 for `api`; answers the one before.
    pub fn record_throttled(
        &self,
        tenant: &TenantId,
        api: &str,
        now: Throttled,
    ) -> Option<Throttled> {
        self.left()
            .throttled
            .insert((tenant.clone(), api.to_owned()), now)
    }

    /// The budget's layers, when it keeps them as the table does (`limited`, `layered`).
    pub fn layers(&self) -> Option<BudgetLayers> {
        self.left().layers.clone()
    }
}

fn holder_name(holder: Holder<'_>) -> String {
    match holder {
        Holder::Tenant(tenant) => format!("tenant:{tenant}"),
        Holder::Address(address) => format!("address:{address}"),
    }
}

#[async_trait::async_trait]
impl WeComBudget for FakeBudget {
    async fn spend(&self, tenant: &TenantId, api: &str, now_ms: u64) -> Result<Spend, StoreError> {
        if let Some(layers) = self.layers() {
            return spend_layered(
                &layers,
                tenant,
                self.pick(),
                |holder, shard, share| async move {
                    Ok(self.spend_shard(holder, api, shard, share, now_ms))
                },
                |holder, shard| async move {
                    self.refund_shard(holder, api, shard, now_ms);
                    Ok(())
                },
                |address| async move { Ok(self.asking(tenant, address, api, now_ms)) },
            )
            .await;
        }
        let mut left = self.left();
        let retry_after_ms = left.retry_after_ms;
        match left.calls.as_mut() {
            Some(0) => Ok(Spend::Exhausted {
                window: Window::Minute,
                retry_after_ms: retry_after_ms
                    .unwrap_or_else(|| reopens_in(Window::Minute, now_ms)),
            }),
            Some(n) => {
                *n -= 1;
                Ok(Spend::Granted)
            }
            None => Ok(Spend::Granted),
        }
    }

    async fn hold(&self, tenant: &TenantId, api: &str, now_ms: u64) -> Result<Spend, StoreError> {
        let Some(layers) = self.layers() else {
            return Ok(Spend::Exhausted {
                window: Window::Minute,
                retry_after_ms: reopens_in(Window::Minute, now_ms),
            });
        };
        let holder = Holder::Tenant(tenant);
        hold_sharded(
            layers.tenant,
            now_ms,
            |shard, share| async move {
                Ok(self.fill_shard(holder, api, shard, share, Window::Minute, now_ms))
            },
            |now| async move { Ok(self.record_throttled(tenant, api, now)) },
            |shard, share| async move {
                self.fill_shard(holder, api, shard, share, Window::Hour, now_ms);
                Ok(())
            },
        )
        .await
    }

    fn address_of(&self, tenant: &TenantId) -> String {
        self.layers().map_or_else(
            || crate::budget::SHARED_ADDRESS.to_owned(),
            |layers| layers.egress.address_for(tenant).to_owned(),
        )
    }
}

/// `n` scrambled by SplitMix64's finaliser: counts 1, 2, 3 become draws that look random and
/// repeat from run to run, for fakes that must choose as at random.
pub fn scrambled(n: u64) -> u64 {
    let mut z = n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
