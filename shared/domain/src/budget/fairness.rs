//! A fair share of a busy address (docs/rules.md rule 6, docs/design/egress.md "A fair share
//! of a busy address").
//!
//! Every tenant behind an address spends from the address's one window. Taken first come,
//! first served, a tenant with a wave of changes (a giant's shift edge, a campaign) fills each
//! minute in its first seconds, and a small tenant behind the same address waits behind that
//! backlog for as many minutes as the wave lasts.
//!
//! So four fifths of each of the address's minutes are open to every tenant, and the last
//! fifth only to a tenant within its fair share of the minute: the minute divided among the
//! tenants that asked of the address in the minute before (the roster). A tenant's calls this
//! minute are read from the tenant's own budget item, which the spend has just charged. A
//! tenant alone on the address, or a handful that each need more than their share, still use
//! the whole minute (their shares add up to it); what the rule gives up is at most the last
//! fifth, when the tenants within their share leave it unused while others wait.
//!
//! The roster counts each tenant once per address, API and minute: one conditional write on
//! the tenant's marker, and one `ADD` on the address's roster only when the marker was not
//! yet set for the minute. A function's container remembers what it has counted and read
//! (`RosterMemo`), so it asks the table at most once per tenant and once per address a minute.

use super::BudgetLimits;
use crate::ids::TenantId;
use crate::StoreError;
use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::{Mutex, MutexGuard};

/// Fifths of each minute of an address open to every tenant behind it.
pub const OPEN_FIFTHS: u32 = 4;

/// The part of an address shard's `share` open to every tenant: four fifths of its minute,
/// rounded up (so a share of one call is open), and all of its hour.
pub fn open_part(share: BudgetLimits) -> BudgetLimits {
    BudgetLimits {
        per_minute: (share.per_minute * OPEN_FIFTHS).div_ceil(5),
        per_hour: share.per_hour,
    }
}

/// A tenant's fair share of `address`'s minute when `asking` tenants asked of it in the
/// minute before: the minute divided among them (all of it when none did).
pub fn fair_share(address: BudgetLimits, asking: u32) -> u32 {
    address.per_minute / asking.max(1)
}

/// Whether a tenant that has made `calls` this minute (the one being granted included) is
/// within its fair share of `address` (`fair_share`).
pub fn within_fair_share(calls: u32, address: BudgetLimits, asking: u32) -> bool {
    calls <= fair_share(address, asking)
}

/// A tenant's calls this minute, from the one shard of its budget a spend charged: that
/// shard's minute counter times the shards. Spends draw their shard at random, so each
/// shard holds about an even part; for a budget of one shard (600 a minute or less) it is
/// exact.
pub fn calls_this_minute(shard_minute: u32, tenant: BudgetLimits) -> u32 {
    shard_minute.saturating_mul(tenant.shards())
}

/// What one function's container remembers of the rosters within a minute: the tenants it
/// has counted for each API, and how many tenants asked of each address in the minute before.
/// Forgotten when the minute turns, so it holds at most one minute's tenants.
#[derive(Debug, Default)]
pub struct RosterMemo {
    minute: u64,
    counted: HashSet<(TenantId, String)>,
    asked_before: HashMap<(String, String), u32>,
}

impl RosterMemo {
    fn at(&mut self, minute: u64) -> &mut Self {
        if minute != self.minute {
            *self = Self {
                minute,
                ..Self::default()
            };
        }
        self
    }

    /// Whether `tenant` is still to be counted on the roster of `api` in `minute`; it is
    /// remembered as counted from now on (the caller counts it).
    pub fn to_count(&mut self, tenant: &TenantId, api: &str, minute: u64) -> bool {
        self.at(minute)
            .counted
            .insert((tenant.clone(), api.to_owned()))
    }

    /// How many tenants asked of `address` for `api` in the minute before `minute`, if read.
    pub fn asked_before(&mut self, address: &str, api: &str, minute: u64) -> Option<u32> {
        self.at(minute)
            .asked_before
            .get(&(address.to_owned(), api.to_owned()))
            .copied()
    }

    pub fn remember_asked_before(&mut self, address: &str, api: &str, minute: u64, asking: u32) {
        self.at(minute)
            .asked_before
            .insert((address.to_owned(), api.to_owned()), asking);
    }
}

/// How many tenants asked of `address` for `api` in the minute before `minute`, as a store
/// answers `WeComBudget::asking` through its container's `memo`: `count` (the store counts
/// `tenant` on the address's roster) at most once a minute per tenant and API, `read` (the
/// store reads the roster's count of the minute before) at most once a minute per address.
///
/// A tenant is remembered as counted before `count` runs, so a count that fails is not tried
/// again this minute: the roster then misses the tenant for a minute, which only widens every
/// share (the first-come order of before the roster, for that minute), and never lets a grant
/// past a limit.
pub async fn asking_through<Count, Read>(
    memo: &Mutex<RosterMemo>,
    (tenant, address, api): (&TenantId, &str, &str),
    minute: u64,
    count: impl FnOnce() -> Count,
    read: impl FnOnce() -> Read,
) -> Result<u32, StoreError>
where
    Count: Future<Output = Result<(), StoreError>>,
    Read: Future<Output = Result<u32, StoreError>>,
{
    // A panic while holding the memo leaves it whole (each use is one insert or read).
    let lock = || -> MutexGuard<'_, RosterMemo> {
        memo.lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    };
    if lock().to_count(tenant, api, minute) {
        count().await?;
    }
    if let Some(asked) = lock().asked_before(address, api, minute) {
        return Ok(asked);
    }
    let asked = read().await?;
    lock().remember_asked_before(address, api, minute, asked);
    Ok(asked)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ADDRESS: BudgetLimits = BudgetLimits::PER_ADDRESS;

    #[test]
    fn four_fifths_of_an_address_shards_minute_are_open_to_every_tenant_and_all_of_its_hour() {
        let share = ADDRESS.share(0);
        assert_eq!(share.per_minute, 600);
        assert_eq!(
            open_part(share),
            BudgetLimits {
                per_minute: 480,
                per_hour: share.per_hour
            }
        );
        let one = BudgetLimits {
            per_minute: 1,
            per_hour: 1,
        };
        assert_eq!(open_part(one).per_minute, 1, "a share of one call is open");
    }

    #[test]
    fn a_tenants_fair_share_is_the_minute_divided_among_last_minutes_tenants() {
        assert_eq!(fair_share(ADDRESS, 0), 18_000, "nobody asked: all of it");
        assert_eq!(fair_share(ADDRESS, 1), 18_000);
        assert_eq!(fair_share(ADDRESS, 50), 360);
        assert!(within_fair_share(360, ADDRESS, 50));
        assert!(!within_fair_share(361, ADDRESS, 50));
    }

    #[test]
    fn a_tenants_calls_this_minute_are_its_shards_counter_times_its_shards() {
        let tenant = BudgetLimits::default();
        assert_eq!(tenant.shards(), 15);
        assert_eq!(calls_this_minute(4, tenant), 60);
        let small = BudgetLimits {
            per_minute: 500,
            per_hour: 5_000,
        };
        assert_eq!(calls_this_minute(37, small), 37, "one shard: exact");
    }

    #[test]
    fn the_memo_counts_a_tenant_once_a_minute_and_forgets_when_the_minute_turns() {
        let mut memo = RosterMemo::default();
        let tenant = TenantId::parse("t1").expect("tenant");
        assert!(memo.to_count(&tenant, "api", 7));
        assert!(!memo.to_count(&tenant, "api", 7));
        assert!(
            memo.to_count(&tenant, "other", 7),
            "each API has its roster"
        );
        assert_eq!(memo.asked_before("a", "api", 7), None);
        memo.remember_asked_before("a", "api", 7, 12);
        assert_eq!(memo.asked_before("a", "api", 7), Some(12));
        assert!(memo.to_count(&tenant, "api", 8), "a new minute");
        assert_eq!(memo.asked_before("a", "api", 8), None);
    }
}
