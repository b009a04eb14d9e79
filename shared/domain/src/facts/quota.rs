//! The quota loop (issue "Every membership rule"): when a counted add takes a staff member to a
//! limit, exactly one handler claims "removed today" for (tenant, staff, limit scope,
//! tenant-day), publishes one `StaffQuotaReached` and emits a refresh reason for every code
//! the limit removes the staff member from.

use super::{QuotaLedger, QuotaNotifier, StaffLedger};
use crate::ids::TenantId;
use crate::ids::{CodeId, StaffId};
use crate::membership::{AddCounts, Limit, Switches};
use crate::reasons::{Cause, Fact, ReasonQueue, RefreshReason};
use crate::StoreError;

/// "Staff member `staff` reached `limit` on tenant-day `day`" (on `code` for code limits).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LimitClaim {
    pub tenant: TenantId,
    pub staff: StaffId,
    pub limit: Limit,
    pub day: String,
    /// The code for a code-level limit; `None` for the company-wide cap.
    pub code: Option<CodeId>,
    /// Who finishes the claim: the add whose counting reached the limit (a redelivery of it
    /// finishes what its first attempt started), or the sweep once it took the claim over.
    pub owner: String,
    pub claimed_at_ms: u64,
    /// Until when the owner holds the claim. A claim still unfinished after that is stale:
    /// the sweep takes it over (fenced on owner and lease) and finishes it.
    pub lease_until_ms: u64,
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

/// How long the add that made a claim owns it by default (`ClaimOwnerLeaseSeconds`): longer
/// than the inbox redelivers one message (5 receives, 60 s apart, each at most the
/// consumer's 10 s), so a live owner is never overtaken; a dead one (its message
/// dead-lettered or lost) is, by the sweep.
pub const OWNER_LEASE_MS: u64 = 10 * 60_000;

/// Finishes a claim `claim.owner` holds: one refresh reason to each code the limit removes the
/// staff member from (the fact's key is the claim's id, so repeats are one reason), then,
/// unless an earlier attempt did, the notification (its id is the claim's id: at least once,
/// consumers drop repeats), then the record that it was sent. Answers the codes reached.
pub async fn finish_claim<L, Q, N>(
    ledger: &L,
    reasons: &Q,
    notifier: &N,
    claim: &LimitClaim,
    notified: bool,
) -> Result<usize, StoreError>
where
    L: QuotaLedger + StaffLedger,
    Q: ReasonQueue,
    N: QuotaNotifier,
{
    let codes = match &claim.code {
        Some(code) => vec![code.clone()],
        None => ledger.codes_of_staff(&claim.tenant, &claim.staff).await?,
    };
    let limit_reached = Fact {
        tenant: claim.tenant.clone(),
        cause: Cause::LimitReached,
        at_ms: claim.claimed_at_ms,
        key: claim.id(),
    };
    let sent: Vec<RefreshReason> = limit_reached.reasons(&codes).collect();
    reasons.send_all(&sent).await?;
    if !notified {
        notifier
            .publish(&StaffQuotaReached {
                id: claim.id(),
                tenant: claim.tenant.clone(),
                staff: claim.staff.clone(),
                limit: claim.limit,
                day: claim.day.clone(),
                code: claim.code.clone(),
                codes: codes.len(),
                reached_at_ms: claim.claimed_at_ms,
            })
            .await?;
        ledger.mark_notified(claim, codes.len()).await?;
    }
    Ok(codes.len())
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
