//! docs/rules.md rule 6: a per-tenant budget for each WeCom API, shared by every concurrent worker,
//! spent before each call, honouring both of WeCom's windows (per wall-clock minute and per
//! wall-clock hour, docs/wecom-api.md §7).
//!
//! The windows live in stored items per tenant, API and UTC hour: an hour total and one
//! counter per minute of that hour. One spend is one conditional `ADD` to such an item
//! (`hour_total < per_hour AND minute_n < per_minute`), so both windows are checked and
//! charged in the same atomic write: two racing workers cannot both take the last unit, and
//! there is no read before the write.
//!
//! A budget of more than `SHARE_MOST_PER_MINUTE` a minute is kept in shards: items each
//! holding a share of both windows (`BudgetLimits::shards`, `BudgetLimits::share`), the
//! shares adding up to the limits. One item takes at most 1,000 writes a second however it
//! is keyed, and a campaign's wave may spend a whole minute's budget in its first second; a
//! share of at most 600 keeps every item under that even then. A spend tries two shards
//! (`shards_to_try`: a random one, then the one half way round), so one shard running out
//! before the others wastes little of the minute; it is refused only when both are spent.
//! Since every grant is within one shard's share, the tenant is never granted more than its
//! limits.
//!
//! WeCom also limits each caller address, across every corp behind it (`egress`). A spend is
//! charged to two layers: the tenant's budget first, then the budget of the address its calls
//! leave from, shared by every tenant behind that address (`BudgetLayers`, `spend_layered`).
//! Each layer's item is charged by its own conditional write, so neither is ever overspent;
//! when the address refuses, the tenant's unit is given back, so nothing is lost to a refusal
//! (the note on `spend_layered` says why this is two writes and not one transaction). Of
//! the address's minute, the last fifth goes only to tenants within their fair share of it
//! (`fairness`), so one tenant's wave does not hold back every other tenant behind the
//! address. This module holds the pure arithmetic; the adapter is `adapters::dynamodb::budget`
//! (`DynamoBudget`).

mod egress;
mod fairness;
mod ports;

pub use egress::{EgressAddresses, MOST_ADDRESSES, SHARED_ADDRESS};
pub use fairness::{
    asking_through, calls_this_minute, fair_share, open_part, within_fair_share, RosterMemo,
    OPEN_FIFTHS,
};
pub use ports::WeComBudget;

use crate::ids::TenantId;

use crate::StoreError;

/// The API whose budget the refresh function spends.
pub const UPDATE_CONTACT_WAY: &str = "update_contact_way";
/// The refresh's creation of a staff member's customer-acquisition link (`crate::landing`).
pub const CREATE_LINK: &str = "create_link";
/// The sweep's deletion of a resigned staff member's link.
pub const DELETE_LINK: &str = "delete_link";
/// The admin API's calls, budgeted the same way (WeCom limits each API on its own).
pub const ADD_CONTACT_WAY: &str = "add_contact_way";
pub const DEL_CONTACT_WAY: &str = "del_contact_way";
/// The sweep's read-back (its own per-tenant share, set by the sweep's read budget).
pub const GET_CONTACT_WAY: &str = "get_contact_way";

const MINUTE_MS: u64 = 60_000;
const HOUR_MS: u64 = 60 * MINUTE_MS;

/// How many calls one tenant may make to one API per window. Kept below WeCom's 10,000 per
/// minute and 150,000 per hour so that clock skew between hosts and calls we do not count
/// (an operator's tools) still leave room.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BudgetLimits {
    pub per_minute: u32,
    pub per_hour: u32,
}

impl Default for BudgetLimits {
    fn default() -> Self {
        Self {
            per_minute: 9_000,
            per_hour: 135_000,
        }
    }
}

/// The most one shard of a budget holds of a minute (see the module's note).
pub const SHARE_MOST_PER_MINUTE: u32 = 600;
/// The most shards a budget is kept in: a provider's per-address 40,000 a minute in shards of
/// at most 600 (a tenant's 10,000 takes 17).
pub const MOST_SHARDS: u32 = 67;

impl BudgetLimits {
    /// What qrsync spends of WeCom's per-address window (20,000 a minute, 600,000 an hour per
    /// API and caller address, docs/wecom-api.md §7): nine tenths, like a tenant's budget, for
    /// the calls it does not count.
    pub const PER_ADDRESS: BudgetLimits = BudgetLimits {
        per_minute: 18_000,
        per_hour: 540_000,
    };
}

/// Both layers a call is charged to: the tenant's budget and the budget of the address its
/// calls leave from (`egress`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BudgetLayers {
    pub tenant: BudgetLimits,
    pub address: BudgetLimits,
    pub egress: EgressAddresses,
}

impl BudgetLayers {
    /// `tenant` limits behind the one shared address, at its default limits.
    pub fn behind_one_address(tenant: BudgetLimits) -> Self {
        Self {
            tenant,
            address: BudgetLimits::PER_ADDRESS,
            egress: EgressAddresses::default(),
        }
    }
}

/// Whose window an item keeps: one tenant's, or one address's, shared by its tenants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holder<'a> {
    Tenant(&'a TenantId),
    Address(&'a str),
}

impl BudgetLimits {
    /// How many items the budget is kept in. Part of the items' keys: a budget whose count
    /// changes (its limits redeployed) starts the current hour again in its new shards.
    pub fn shards(&self) -> u32 {
        self.per_minute
            .div_ceil(SHARE_MOST_PER_MINUTE)
            .clamp(1, MOST_SHARDS)
    }

    /// Shard `shard`'s share of both windows: an even split, the remainder to the first
    /// shards, so the shares add up to the limits exactly.
    pub fn share(&self, shard: u32) -> BudgetLimits {
        let shards = self.shards();
        let part = |total: u32| total / shards + u32::from(shard < total % shards);
        BudgetLimits {
            per_minute: part(self.per_minute),
            per_hour: part(self.per_hour),
        }
    }
}

/// The shards a spend tries, in order, from a number drawn at random (`pick`): the shard it
/// names, then the one half way round (the two are the same for a budget of one shard).
pub fn shards_to_try(limits: BudgetLimits, pick: u64) -> Vec<u32> {
    let shards = limits.shards();
    let first = (pick % u64::from(shards)) as u32;
    let second = (first + shards / 2) % shards;
    if second == first {
        vec![first]
    } else {
        vec![first, second]
    }
}

/// One shard's answer to a spend: granted, with the shard's minute counter after it (the
/// store's write answers it at no extra cost), or refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShardSpend {
    Granted { minute_spent: u32 },
    Refused(Spend),
}

/// A spend from `limits`' shards, as every store of the budget makes it: the shards
/// `shards_to_try` names, in order, until one grants; `spend_shard(shard, share)` is one
/// atomic check-and-charge of that shard's item against its share. Refused, it says the
/// window that reopens first.
pub async fn spend_sharded<F, Fut>(
    limits: BudgetLimits,
    pick: u64,
    spend_shard: F,
) -> Result<Spend, StoreError>
where
    F: FnMut(u32, BudgetLimits) -> Fut,
    Fut: std::future::Future<Output = Result<ShardSpend, StoreError>>,
{
    Ok(match granting_shard(limits, pick, spend_shard).await? {
        Ok(_) => Spend::Granted,
        Err(refusal) => refusal,
    })
}

/// A shard that granted a spend, and its minute counter after it.
#[derive(Debug, Clone, Copy)]
struct Granted {
    shard: u32,
    minute_spent: u32,
}

/// `spend_sharded`, naming the shard that granted (`Ok`) or the refusal (`Err`).
async fn granting_shard<F, Fut>(
    limits: BudgetLimits,
    pick: u64,
    mut spend_shard: F,
) -> Result<Result<Granted, Spend>, StoreError>
where
    F: FnMut(u32, BudgetLimits) -> Fut,
    Fut: std::future::Future<Output = Result<ShardSpend, StoreError>>,
{
    let mut refused: Option<Spend> = None;
    for shard in shards_to_try(limits, pick) {
        match spend_shard(shard, limits.share(shard)).await? {
            ShardSpend::Granted { minute_spent } => {
                return Ok(Ok(Granted {
                    shard,
                    minute_spent,
                }))
            }
            ShardSpend::Refused(refusal) => {
                refused = Some(refused.map_or(refusal, |r| sooner(r, refusal)))
            }
        }
    }
    // `shards_to_try` names at least one shard, so a refusal was seen.
    Ok(Err(refused.unwrap_or(Spend::Exhausted {
        window: Window::Minute,
        retry_after_ms: MINUTE_MS,
    })))
}

/// A spend from both of `layers` for `tenant`, as every store of the budget makes it: the
/// tenant's shards first (`spend_shard(Holder::Tenant, ..)`), then the shards of the address
/// the tenant is charged to; when the address refuses, `refund_shard` gives the tenant's unit
/// back to the shard that granted it, and the address's refusal is the answer.
///
/// Of the address's minute, a tenant past its fair share may take only the part open to all
/// (`fairness`): `asking(address)` counts the tenant on the address's roster for this minute
/// and answers how many tenants asked of it in the minute before. A roster that cannot be
/// read or written is logged and taken as one tenant: the whole minute is open, as it was
/// before the rule, and the spend goes on (the roster decides only who may take the last
/// fifth; neither layer can be overspent without it).
///
/// Why two conditional writes and not one `TransactWriteItems`: each write's condition keeps
/// its own layer within its limits, which is all "never overspent" needs, and the refund
/// means a refusal costs the tenant nothing. A transaction would add only that no unit is
/// held between the two writes (a racing spend of the same tenant may be refused for a unit
/// about to be given back: refusals err on the safe side) and that a worker dying between
/// them loses no unit (one unit of one minute, back when the window turns). It would cost
/// four write units instead of two, and the address's items are the hottest of the table:
/// every tenant behind the address spends on them, a wave's first second included, and
/// DynamoDB cancels a transaction that meets another on the same item
/// (`TransactionConflict`), where conditional writes on one item simply queue.
///
/// The tenant goes first because its own budget is the one a campaign fills: a tenant
/// refused there touches the shared items not at all.
pub async fn spend_layered<'a, S, SFut, R, RFut, A, AFut>(
    layers: &'a BudgetLayers,
    tenant: &'a TenantId,
    pick: u64,
    mut spend_shard: S,
    refund_shard: R,
    asking: A,
) -> Result<Spend, StoreError>
where
    S: FnMut(Holder<'a>, u32, BudgetLimits) -> SFut,
    SFut: std::future::Future<Output = Result<ShardSpend, StoreError>>,
    R: FnOnce(Holder<'a>, u32) -> RFut,
    RFut: std::future::Future<Output = Result<(), StoreError>>,
    A: FnOnce(&'a str) -> AFut,
    AFut: std::future::Future<Output = Result<u32, StoreError>>,
{
    let tenants = match granting_shard(layers.tenant, pick, |shard, share| {
        spend_shard(Holder::Tenant(tenant), shard, share)
    })
    .await?
    {
        Ok(granted) => granted,
        Err(refusal) => return Ok(refusal),
    };
    let address_name = layers.egress.address_for(tenant);
    let asked = asking(address_name).await.unwrap_or_else(|error| {
        tracing::warn!(address = address_name, error = %error, "the address's roster was not read; its whole minute is open to every tenant");
        1
    });
    let within = within_fair_share(
        calls_this_minute(tenants.minute_spent, layers.tenant),
        layers.address,
        asked,
    );
    let address = Holder::Address(address_name);
    let addressed = granting_shard(layers.address, pick.rotate_left(32), |shard, share| {
        spend_shard(
            address,
            shard,
            if within { share } else { open_part(share) },
        )
    })
    .await;
    match addressed {
        Ok(Ok(_)) => Ok(Spend::Granted),
        Ok(Err(refusal)) => {
            refund(refund_shard, tenant, tenants.shard).await;
            Ok(refusal)
        }
        Err(error) => {
            refund(refund_shard, tenant, tenants.shard).await;
            Err(error)
        }
    }
}

/// Gives the tenant's unit back. A refund that fails is logged, not raised: the unit is only
/// held until its window turns, and the spend's answer (a refusal) stands either way.
async fn refund<'a, R, RFut>(refund_shard: R, tenant: &'a TenantId, shard: u32)
where
    R: FnOnce(Holder<'a>, u32) -> RFut,
    RFut: std::future::Future<Output = Result<(), StoreError>>,
{
    if let Err(error) = refund_shard(Holder::Tenant(tenant), shard).await {
        tracing::warn!(tenant = %tenant, shard, error = %error, "a budget unit was not given back; it is held until its window turns");
    }
}

/// Of two refusals, the one whose window reopens first: the soonest a retry can be granted.
pub fn sooner(a: Spend, b: Spend) -> Spend {
    match (a, b) {
        (
            Spend::Exhausted {
                retry_after_ms: x, ..
            },
            Spend::Exhausted {
                retry_after_ms: y, ..
            },
        ) if y < x => b,
        (Spend::Granted, _) | (_, Spend::Granted) => Spend::Granted,
        _ => a,
    }
}

/// A 45009 of a tenant's API, as the hold records it: its minute (minutes since the epoch) and
/// the calls the tenant's budget had granted in that minute before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Throttled {
    pub minute: u64,
    pub granted: u32,
}

/// The window to hold after WeCom answered 45009 (`now`), the tenant's previous 45009 of the same
/// API having been `previous` (docs/rules.md rule 6). WeCom does not say which of its windows is
/// spent. A 45009 holds the rest of the minute, unless the minute right before was held too and
/// this minute let through less than half the calls that one did: then the new minute did not
/// restore WeCom's capacity, so an hour window is spent (the corp's, or its address's), and the
/// rest of the hour is held. The tenant's codes then wait for the hour without a call, not retried
/// every minute at the cost of a unit and a read each time. A 45009 after as many calls as the
/// minute before is a minute window smaller than our budget (calls we do not count, an address
/// shared with others), not the hour.
pub fn window_to_hold(previous: Option<Throttled>, now: Throttled) -> Window {
    match previous {
        Some(previous)
            if previous.minute + 1 == now.minute
                && now.granted.saturating_mul(2) < previous.granted =>
        {
            Window::Hour
        }
        _ => Window::Minute,
    }
}

/// The minute `now_ms` falls in, in minutes since the epoch.
pub fn minute_of(now_ms: u64) -> u64 {
    now_ms / MINUTE_MS
}

/// Holds the tenant's window after a 45009 at `now_ms`, for every shard of `limits`:
/// `fill_minute(shard, share)` marks that shard's minute as spent and answers how many calls it
/// had granted in it; `record(now)` keeps this 45009 and answers the previous one;
/// `fill_hour(shard, share)` marks the shard's hour as spent, when `window_to_hold` says so.
/// Answers the refusal the caller waits on.
pub async fn hold_sharded<M, MFut, R, RFut, H, HFut>(
    limits: BudgetLimits,
    now_ms: u64,
    mut fill_minute: M,
    record: R,
    mut fill_hour: H,
) -> Result<Spend, StoreError>
where
    M: FnMut(u32, BudgetLimits) -> MFut,
    MFut: std::future::Future<Output = Result<u32, StoreError>>,
    R: FnOnce(Throttled) -> RFut,
    RFut: std::future::Future<Output = Result<Option<Throttled>, StoreError>>,
    H: FnMut(u32, BudgetLimits) -> HFut,
    HFut: std::future::Future<Output = Result<(), StoreError>>,
{
    let mut granted = 0u32;
    for shard in 0..limits.shards() {
        granted = granted.saturating_add(fill_minute(shard, limits.share(shard)).await?);
    }
    let now = Throttled {
        minute: minute_of(now_ms),
        granted,
    };
    let window = window_to_hold(record(now).await?, now);
    if window == Window::Hour {
        for shard in 0..limits.shards() {
            fill_hour(shard, limits.share(shard)).await?;
        }
    }
    Ok(Spend::Exhausted {
        window,
        retry_after_ms: reopens_in(window, now_ms),
    })
}

/// Which window ran out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Window {
    Minute,
    Hour,
}

/// The outcome of one attempt to spend a unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spend {
    Granted,
    /// Nothing was spent; the exhausted window reopens in `retry_after_ms`.
    Exhausted {
        window: Window,
        retry_after_ms: u64,
    },
}

/// The stored item a spend at `now_ms` charges: its UTC hour (hours since the epoch) and the
/// name of the minute's counter within it (`m00`..`m59`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BudgetSlot {
    pub hour: u64,
    pub minute_counter: String,
}

impl BudgetSlot {
    pub fn at(now_ms: u64) -> Self {
        Self {
            hour: now_ms / HOUR_MS,
            minute_counter: format!("m{:02}", (now_ms % HOUR_MS) / MINUTE_MS),
        }
    }

    /// When the slot's hour item is no longer needed (garbage collection only).
    pub fn expires_at_secs(&self) -> u64 {
        (self.hour + 2) * HOUR_MS / 1000
    }
}

/// Which window a refused spend ran into, from the item as it was when the condition failed
/// (the hour total first: when both are full, only the hour's end helps).
pub fn exhausted(
    limits: BudgetLimits,
    hour_total: u32,
    minute_total: u32,
    now_ms: u64,
) -> Option<Spend> {
    let window = if hour_total >= limits.per_hour {
        Window::Hour
    } else if minute_total >= limits.per_minute {
        Window::Minute
    } else {
        return None;
    };
    Some(Spend::Exhausted {
        window,
        retry_after_ms: reopens_in(window, now_ms),
    })
}

/// The refusal of a spend on an item that held `hour_total` and `minute_total`: the full
/// window, or, with room in both (the budget was lowered below what is spent), the minute,
/// the soonest it can change.
pub fn refusal(limits: BudgetLimits, hour_total: u32, minute_total: u32, now_ms: u64) -> Spend {
    exhausted(limits, hour_total, minute_total, now_ms).unwrap_or(Spend::Exhausted {
        window: Window::Minute,
        retry_after_ms: reopens_in(Window::Minute, now_ms),
    })
}

/// Milliseconds until `window` (the one containing `now_ms`) is over.
pub fn reopens_in(window: Window, now_ms: u64) -> u64 {
    let length = match window {
        Window::Minute => MINUTE_MS,
        Window::Hour => HOUR_MS,
    };
    length - now_ms % length
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: BudgetLimits = BudgetLimits {
        per_minute: 10,
        per_hour: 100,
    };

    #[test]
    fn a_spend_charges_the_hour_item_and_the_counter_of_its_minute() {
        // 2026-11-30T09:37:12.5Z
        let now = 1_796_031_432_500;
        let slot = BudgetSlot::at(now);
        assert_eq!(slot.hour, now / 3_600_000);
        assert_eq!(slot.minute_counter, "m37");
        assert!(slot.expires_at_secs() * 1000 > now + 3_600_000);
    }

    #[test]
    fn a_full_minute_reopens_at_the_next_minute() {
        let now = 5 * 60_000 + 45_000;
        assert_eq!(
            exhausted(LIMITS, 50, 10, now),
            Some(Spend::Exhausted {
                window: Window::Minute,
                retry_after_ms: 15_000
            })
        );
    }

    #[test]
    fn a_full_hour_waits_for_the_hour_even_when_the_minute_is_full_too() {
        let now = 3_600_000 + 50 * 60_000;
        assert_eq!(
            exhausted(LIMITS, 100, 10, now),
            Some(Spend::Exhausted {
                window: Window::Hour,
                retry_after_ms: 10 * 60_000
            })
        );
    }

    #[test]
    fn a_budget_over_six_hundred_a_minute_is_kept_in_shards_whose_shares_add_up_to_it() {
        let limits = BudgetLimits::default();
        assert_eq!(limits.shards(), 15);
        let shares: Vec<BudgetLimits> = (0..15).map(|shard| limits.share(shard)).collect();
        assert!(shares.iter().all(|s| s.per_minute <= SHARE_MOST_PER_MINUTE));
        assert_eq!(shares.iter().map(|s| s.per_minute).sum::<u32>(), 9_000);
        assert_eq!(shares.iter().map(|s| s.per_hour).sum::<u32>(), 135_000);
        let odd = BudgetLimits {
            per_minute: 1_201,
            per_hour: 7,
        };
        assert_eq!(odd.shards(), 3);
        let shares: Vec<BudgetLimits> = (0..3).map(|shard| odd.share(shard)).collect();
        assert_eq!(
            shares
                .iter()
                .map(|s| (s.per_minute, s.per_hour))
                .collect::<Vec<_>>(),
            [(401, 3), (400, 2), (400, 2)]
        );
        let wecoms = BudgetLimits {
            per_minute: 10_000,
            per_hour: 150_000,
        };
        assert_eq!(wecoms.shards(), 17);
        assert!(wecoms.share(0).per_minute <= SHARE_MOST_PER_MINUTE);
        let providers_address = BudgetLimits {
            per_minute: 40_000,
            per_hour: 1_200_000,
        };
        assert_eq!(providers_address.shards(), MOST_SHARDS);
        assert!(providers_address.share(0).per_minute <= SHARE_MOST_PER_MINUTE);
        assert_eq!(BudgetLimits::PER_ADDRESS.shards(), 30);
    }

    #[test]
    fn a_small_budget_is_one_item_and_a_spend_tries_it_alone() {
        assert_eq!(LIMITS.shards(), 1);
        assert_eq!(LIMITS.share(0), LIMITS);
        assert_eq!(shards_to_try(LIMITS, 12_345), vec![0]);
    }

    #[test]
    fn a_spend_tries_the_drawn_shard_then_the_one_half_way_round() {
        let limits = BudgetLimits::default();
        assert_eq!(shards_to_try(limits, 3), vec![3, 10]);
        assert_eq!(shards_to_try(limits, 14), vec![14, 6]);
        assert_eq!(shards_to_try(limits, 15 + 2), vec![2, 9]);
    }

    #[test]
    fn of_two_refusals_the_one_reopening_first_is_kept() {
        let minute = Spend::Exhausted {
            window: Window::Minute,
            retry_after_ms: 5_000,
        };
        let hour = Spend::Exhausted {
            window: Window::Hour,
            retry_after_ms: 600_000,
        };
        assert_eq!(sooner(hour, minute), minute);
        assert_eq!(sooner(minute, hour), minute);
        assert_eq!(sooner(hour, Spend::Granted), Spend::Granted);
    }

    #[test]
    fn a_45009_holds_the_minute_and_one_right_after_a_held_minute_that_let_little_through_the_hour()
    {
        let at = |minute, granted| Throttled { minute, granted };
        assert_eq!(window_to_hold(None, at(100, 3)), Window::Minute);
        assert_eq!(
            window_to_hold(Some(at(99, 400)), at(100, 12)),
            Window::Hour,
            "the new minute let 12 calls through where the last let 400"
        );
        assert_eq!(
            window_to_hold(Some(at(99, 400)), at(100, 390)),
            Window::Minute,
            "a minute window smaller than our budget, met again"
        );
        assert_eq!(
            window_to_hold(Some(at(100, 400)), at(100, 1)),
            Window::Minute
        );
        assert_eq!(
            window_to_hold(Some(at(97, 400)), at(100, 1)),
            Window::Minute
        );
    }

    #[test]
    fn a_refusal_with_room_in_both_windows_is_not_an_exhaustion() {
        assert_eq!(exhausted(LIMITS, 99, 9, 0), None);
    }
}
