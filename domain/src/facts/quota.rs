//! The quota loop (issue "Every membership rule"): when a counted add takes a staff member to a
//! limit, exactly one handler claims "removed today" for (tenant, staff, limit scope,
//! tenant-day), publishes one `StaffQuotaReached` and emits a refresh reason for every code
//! the limit removes the staff member from.

use crate::membership::{AddCounts, CodeId, Limit, StaffId, Switches};
use crate::tenants::TenantId;

/// "Staff member `staff` reached `limit` on tenant-day `day`" (on `code` for code limits).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LimitClaim {
    pub tenant: TenantId,
    pub staff: StaffId,
    pub limit: Limit,
    pub day: String,
    /// The code for a code-level limit; `None` for the company-wide cap.
    pub code: Option<CodeId>,
    /// The add whose counting reached the limit: the owner of the claim. A redelivery of
    /// that add finishes what its first attempt started; nobody else does.
    pub owner: String,
    pub claimed_at_ms: u64,
}

impl LimitClaim {
    /// Stable across retries: consumers of the notification deduplicate on it, and refresh
    /// reasons carry it as their fact key.
    pub fn id(&self) -> String {
        let code = self.code.as_ref().map_or("ALL", CodeId::as_str);
        format!(
            "limit:{}:{}:{}:{}:{}",
            self.tenant,
            self.day,
            self.limit.name(),
            self.staff,
            code
        )
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimOutcome {
    /// This add owns the claim; `notified` tells whether its notification was already sent
    /// by an earlier attempt.
    Owned { notified: bool },
    /// Another add reached the limit first: it notifies and emits the reasons.
    TakenByAnother,
}

/// The notification an operator subscribes to.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct StaffQuotaReached {
    /// The claim id: the same crossing always carries the same id.
    pub id: String,
    pub tenant: TenantId,
    pub staff: StaffId,
    pub limit: Limit,
    pub day: String,
    pub code: Option<CodeId>,
    /// The codes the staff member is removed from (refresh reasons emitted for each).
    pub codes: usize,
    pub reached_at_ms: u64,
}

/// A limit crossing this add owns, and what it did about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Crossing {
    pub limit: Limit,
    /// Refresh reasons emitted (one per affected code).
    pub reasons: usize,
    /// Whether this attempt published the notification (a retry of an attempt that already
    /// did publishes nothing).
    pub notified: bool,
}

/// The counts after an add reached `limits` of a code with `switches`.
pub fn crossed(switches: &Switches, cap: Option<u32>, counts: AddCounts) -> Vec<Limit> {
    crate::membership::limits_reached(
        switches,
        crate::membership::TenantRules {
            company_daily_cap: cap,
        },
        counts,
    )
}
