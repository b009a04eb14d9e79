//! The landing page of sequenced and quota codes (issue 15): a visitor's scan is counted
//! against the code's page, whose rotation the visit's number picks the member from.
//!
//! - **The page's home.** A code's page (its rotation, the round's id and order key, a starved
//!   mark) lives apart from the platform's table, written only by the code's single writer in
//!   one transaction with the code's record (`refresh::PageWrite`: never one without the other, never
//!   under a lost lease). `RotationCounter::count_visit` reads the page and adds one to its
//!   round's counter: so once the record without a member has landed, no visit that starts
//!   later is counted against a rotation naming them.
//! - **The pick** (`pick`, `order.rs`): visit number n (1-based) counts against round
//!   (n - 1) / R and position (n - 1) mod R of it, R the round's length (the sum of the slots'
//!   `takes`): on a sequenced code each member takes `round_limit` visitors per round (1
//!   without the switch); on a quota code a member takes no more than is left of their daily
//!   limit on the code (`membership::rotation`), and leaves the rotation through the quota loop
//!   once their adds reach it. Consecutive numbers never share a position within a round, so n
//!   concurrent visits fill the round's positions exactly, none twice and none skipped. Which
//!   slot a position reaches is a shuffle of the round, keyed by the page's secret
//!   `OrderKey` and the round's number: a visitor who watches the redirects cannot send GETs
//!   up to the slot before someone's and hand them the next real visitor.
//! - **Machines are not counted** (`opener.rs`): a `HEAD`, a prefetch or a link-preview
//!   fetcher gets an answer without a write, so it neither spends a slot nor learns one.
//! - **A push starts a new round** (`PageWrite::NewRound`): the next visit is number 1 of the
//!   new rotation, under a new key. A rotation recorded without a push (the list unchanged, a
//!   quota member's share or a link changed) keeps the round, its counter and its key.
//! - **Attribution.** Each slot carries its member's customer-acquisition link; the visitor is
//!   sent to it with `customer_channel` = the code id the page resolved from its path
//!   (`chat_url`; nothing the visitor sends with the request is read), which WeCom echoes as
//!   `State` in the add event, so the intake counts the add against the code and the member
//!   as it does for a native code's `state`. The link itself is public and a visitor can open
//!   it with another channel: the fact recorder counts an add only on a code that exists and
//!   lists the member (`crate::facts`).

mod opener;
mod order;
mod ports;

pub use opener::{Machine, Opener, Request, PURPOSE_READ, USER_AGENT_READ};
pub use order::{pick, OrderKey, MAX_ROUND};
pub use ports::RotationCounter;

use crate::ids::{CodeId, InvalidCodeId, StaffId};
use crate::ids::{InvalidTenantId, TenantId};
use crate::membership::RotationSlot;
use crate::StoreError;

/// What the one write of a visit found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Counted {
    /// The visit was counted: its number (1-based, since the record was written), the
    /// rotation of the record it was counted on and the record's order key.
    Visit {
        number: u64,
        rotation: Vec<RotationSlot>,
        order: OrderKey,
    },
    /// No record: an unknown code, a deleted one, or one the single writer has not recorded.
    NoSuchCode,
    /// The code's record has no rotation: a native code, which WeCom routes itself.
    NotRotating,
    /// Nobody is eligible and there is no fallback (the record's starved mark).
    Starved,
}

/// Where a visitor goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Landing {
    /// To a chat with `staff`, through their link with the code as the channel.
    Chat {
        staff: StaffId,
        location: String,
        number: u64,
    },
    UnknownCode,
    NotOnLandingPage,
    Starved,
    /// The picked member has no link yet (its creation is owed): try again shortly.
    NoLinkYet {
        staff: StaffId,
    },
    /// Not a person opening the link: nothing was counted or read.
    Machine(Machine),
}

#[derive(Debug, thiserror::Error)]
pub enum LandingError {
    #[error(transparent)]
    Tenant(#[from] InvalidTenantId),
    #[error(transparent)]
    Code(#[from] InvalidCodeId),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The link with the code as its channel: WeCom echoes `customer_channel` as the add event's
/// `State`. A code id is letters, digits, `-` and `_` only (`CodeId`), nothing to escape.
pub fn chat_url(link: &str, code: &CodeId) -> String {
    let joint = if link.contains('?') { '&' } else { '?' };
    format!("{link}{joint}customer_channel={code}")
}

pub struct LandingPage<C> {
    counter: C,
}

impl<C: RotationCounter> LandingPage<C> {
    pub fn new(counter: C) -> Self {
        Self { counter }
    }

    /// One opening of `/l/{tenant}/{code}`: both ids are checked before any work; a machine
    /// is answered without a write; a person's visit is counted by one write, which picks the
    /// member.
    pub async fn visit(
        &self,
        tenant: &str,
        code: &str,
        opener: Opener,
    ) -> Result<Landing, LandingError> {
        let tenant = TenantId::parse(tenant)?;
        let code = CodeId::parse(code)?;
        if let Opener::Machine(machine) = opener {
            return Ok(Landing::Machine(machine));
        }
        let landing = match self.counter.count_visit(&tenant, &code).await? {
            Counted::NoSuchCode => Landing::UnknownCode,
            Counted::NotRotating => Landing::NotOnLandingPage,
            Counted::Starved => Landing::Starved,
            Counted::Visit {
                number,
                rotation,
                order,
            } => match pick(&rotation, number, &order) {
                None => Landing::Starved,
                Some(slot) => match &slot.link {
                    Some(link) => Landing::Chat {
                        staff: slot.staff.clone(),
                        location: chat_url(link, &code),
                        number,
                    },
                    None => Landing::NoLinkYet {
                        staff: slot.staff.clone(),
                    },
                },
            },
        };
        Ok(landing)
    }
}

#[cfg(test)]
mod tests;
