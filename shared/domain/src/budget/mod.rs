//! docs/rules.md rule 6: a per-tenant budget for each WeCom API, shared by every concurrent worker,
//! spent before each call, honouring both of WeCom's windows (per wall-clock minute and per
//! wall-clock hour, docs/wecom-api.md §7).
//!
//! The windows live in one stored item per tenant, API and UTC hour: an hour total and one
//! counter per minute of that hour. One spend is one conditional `ADD` to that item
//! (`hour_total < per_hour AND minute_n < per_minute`), so both windows are checked and
//! charged in the same atomic write: two racing workers cannot both take the last unit, and
//! there is no read before the write. This module holds the pure arithmetic; the adapter is
//! `adapters::dynamodb::budget` (`DynamoBudget`).

mod ports;

pub use ports::WeComBudget;

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
    fn a_refusal_with_room_in_both_windows_is_not_an_exhaustion() {
        assert_eq!(exhausted(LIMITS, 99, 9, 0), None);
    }
}
