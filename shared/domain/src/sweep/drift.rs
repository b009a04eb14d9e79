//! The read-back's pure rules: how WeCom's copy, our record and the recompute are compared,
//! how many codes a tenant's sample reads, and when the blast-radius guard trips; and a
//! tenant's drift as an operator reads it.

use super::DriftLedger;
use crate::codes::CodeSnapshot;
use crate::ids::{CodeId, TenantId};
use crate::StoreError;
use std::collections::BTreeSet;

/// What a read-back found on one code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Difference {
    /// WeCom routes to the list we recorded, and it is the recompute of the current facts.
    None,
    /// WeCom's list is not the one we recorded as pushed (changed behind our back, or a push
    /// we recorded never landed).
    WeComDiffers,
    /// WeCom has what we recorded, but the current facts recompute to another list: a reason
    /// was lost (or the recompute changed).
    RecordStale,
}

/// Compares whom WeCom routes to (`users`, `departments`) with `snapshot`'s record and with
/// the recompute of its facts. Lists compare as sets: on a native code WeCom picks among the
/// users at random. qrsync lists no department on a contact way (it expands departments into
/// users itself, so each member passes the limits), so any department there is drift: it
/// routes customers to everyone in it, past every limit.
pub fn compare(snapshot: &CodeSnapshot, users: &[String], departments: &[u64]) -> Difference {
    let wecom: BTreeSet<&str> = users.iter().map(String::as_str).collect();
    let recorded: BTreeSet<&str> = snapshot.wecom_list().iter().map(|u| u.as_str()).collect();
    if wecom != recorded || !departments.is_empty() {
        return Difference::WeComDiffers;
    }
    if record_stale(snapshot) {
        Difference::RecordStale
    } else {
        Difference::None
    }
}

/// `compare`'s second half, which needs no call to WeCom: whether the current facts
/// recompute to another list than the one recorded as pushed.
pub fn record_stale(snapshot: &CodeSnapshot) -> bool {
    let recorded: BTreeSet<&str> = snapshot.wecom_list().iter().map(|u| u.as_str()).collect();
    let starved_recorded = snapshot.last_pushed.as_ref().is_some_and(|p| p.starved);
    match snapshot.recompute().users() {
        Some(users) => {
            let recomputed: BTreeSet<&str> = users.iter().map(|u| u.as_str()).collect();
            recomputed != recorded || starved_recorded
        }
        // Nobody eligible: the list stays by design once the code is recorded starved.
        None => !starved_recorded,
    }
}

/// A tenant's read-back counts, added to its report for the day. Which codes differed is
/// recorded code by code (`DriftLedger::record_read`), so a code read again counts once.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct DriftCounts {
    /// Contact ways read back (a code read twice counts twice: these are WeCom calls).
    pub read: u32,
    /// Stale records confirmed: still behind the facts once their settle period was over.
    pub stale_confirmed: u32,
}

/// A tenant's drift report for one tenant-day.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct DriftReport {
    pub day: String,
    pub read: u32,
    /// Distinct codes a read found differing that day, however many times each was read.
    pub differing: u32,
    /// Distinct codes whose difference was repaired that day: the code's mark was cleared by a
    /// completed refresh (or a stale suspect caught up by itself).
    pub repaired: u32,
    /// Distinct codes whose latest read that day differed and that are not repaired since: a
    /// later read that agrees, or a repair, takes a code out.
    pub still_differing: u32,
    /// Stale records still behind the facts after the settle period (counted for the guard).
    pub stale_confirmed: u32,
}

/// The codes a guard keeps to read again: a sample's differing codes, bounded so the guard
/// stays one small item whatever the sample's size.
pub const GUARD_CODES_KEPT: usize = 100;

/// The blast-radius guard of a tenant, as tripped.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct GuardTrip {
    pub tripped_at_ms: u64,
    /// The sample that tripped it.
    pub sampled: u32,
    pub differing: u32,
    /// The codes that differed (at most `GUARD_CODES_KEPT`), which the re-check reads again.
    pub codes: Vec<CodeId>,
    /// When the sweep reads `codes` again: if too few still differ (a glitch at WeCom that
    /// has passed), the guard lifts itself; if not, it is confirmed.
    pub recheck_at_ms: u64,
    /// When the re-check found the codes still differing: from then on only an operator
    /// resumes the repair. `None` until then.
    pub confirmed_at_ms: Option<u64>,
}

impl GuardTrip {
    /// A guard the re-check has not settled yet, due at `now_ms`.
    pub fn recheck_due(&self, now_ms: u64) -> bool {
        self.confirmed_at_ms.is_none() && self.recheck_at_ms <= now_ms
    }

    /// Whether `still` of the kept codes differing on the re-check would still trip the guard:
    /// counted against the trip's own sample, scaled up when not every differing code was kept.
    pub fn still_trips(&self, still: u32, share_percent: u32, min_sample: u32) -> bool {
        // A trip that kept no code has nothing to read again: it stands.
        if self.codes.is_empty() {
            return true;
        }
        let kept = u64::try_from(self.codes.len()).unwrap_or(u64::MAX).max(1);
        let scaled = u64::from(still) * u64::from(self.differing) / kept;
        guard_trips(
            self.sampled,
            u32::try_from(scaled).unwrap_or(u32::MAX),
            share_percent,
            min_sample,
        )
    }
}

/// How many of a tenant's codes one run samples: the hour's read budget spread over the runs
/// of an hour, at least one.
pub fn sample_size(reads_per_hour: u32, period_ms: u64) -> usize {
    let per_run = (u64::from(reads_per_hour) * period_ms).div_ceil(3_600_000);
    usize::try_from(per_run.max(1)).unwrap_or(usize::MAX)
}

/// Whether a sample of `sampled` codes of which `differing` differed trips the guard: more
/// than `share_percent` of them, once the sample is large enough to mean something.
pub fn guard_trips(sampled: u32, differing: u32, share_percent: u32, min_sample: u32) -> bool {
    sampled >= min_sample.max(1)
        && u64::from(differing) * 100 > u64::from(share_percent) * u64::from(sampled)
}

/// A tenant's drift as an operator reads it: the day's report and the guard.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DriftView {
    pub day: String,
    pub read: u32,
    pub differing: u32,
    pub repaired: u32,
    pub still_differing: u32,
    /// Stale records confirmed: still behind the facts after their settle period.
    pub stale_confirmed: u32,
    /// Set while the tenant's repair is stopped.
    pub guard: Option<GuardTrip>,
}

/// The tenant's drift report for `day` and its guard.
pub async fn drift_view(
    ledger: &impl DriftLedger,
    tenant: &TenantId,
    day: &str,
) -> Result<DriftView, StoreError> {
    let report = ledger.report(tenant, day).await?;
    let guard = ledger.guard(tenant).await?;
    Ok(DriftView {
        day: day.to_owned(),
        read: report.read,
        differing: report.differing,
        repaired: report.repaired,
        still_differing: report.still_differing,
        stale_confirmed: report.stale_confirmed,
        guard,
    })
}
