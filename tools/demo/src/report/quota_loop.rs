//! The quota loop's section of the report and its checks: the limit crossings the adds caused,
//! the claims and notifications the stack made of them, and each crossing's fan-out.

use super::histories::Histories;
use super::ms;
use crate::measured::Inputs;
use crate::quota::{self, Crossing, Notification};
use stack_client::report::{quantiles, Lines};
use std::collections::{BTreeSet, HashMap};

/// What the quota loop's section and its checks both read.
pub(super) struct QuotaLoop {
    fan_outs: Vec<FanOut>,
    /// The crossings the notifications name, and how many notifications repeated an id;
    /// `None` when the stack has no notification queue.
    notified: Option<(BTreeSet<Crossing>, usize)>,
}

impl QuotaLoop {
    pub(super) fn new(inputs: &Inputs<'_>, histories: &Histories<'_>) -> Self {
        let notified = inputs.notifications.as_ref().map(|ns| {
            let ids: BTreeSet<&str> = ns.iter().map(|n| n.id.as_str()).collect();
            (
                ns.iter().map(Notification::crossing).collect(),
                ns.len() - ids.len(),
            )
        });
        Self {
            fan_outs: fan_outs(inputs, histories),
            notified,
        }
    }

    pub(super) fn cap_crossings(&self) -> Vec<&FanOut> {
        self.fan_outs
            .iter()
            .filter(|f| f.crossing.limit == quota::COMPANY_DAILY)
            .collect()
    }
}

/// "n (a code_daily, b code_total, c company_daily)".
fn by_limit(set: &BTreeSet<Crossing>) -> String {
    let count = |limit: &str| set.iter().filter(|c| c.limit == limit).count();
    format!(
        "{} ({} code_daily, {} code_total, {} company_daily)",
        set.len(),
        count(quota::CODE_DAILY),
        count(quota::CODE_TOTAL),
        count(quota::COMPANY_DAILY)
    )
}

pub(super) fn section(out: &Lines, inputs: &Inputs<'_>, quota: &QuotaLoop) -> Lines {
    let mut out = out.section();
    let claimed: BTreeSet<Crossing> = inputs
        .limit_claims
        .iter()
        .map(|c| c.crossing.clone())
        .collect();
    out.head("Quota loop (limit crossings, StaffQuotaReached notifications, fan-out)");
    out.line(
        "limit crossings computed from the adds delivered",
        by_limit(&inputs.expected_crossings),
    );
    out.line(
        "limit claims in the table (REMOVED#)",
        format!(
            "{} ({} marked notified)",
            by_limit(&claimed),
            inputs.limit_claims.iter().filter(|c| c.notified).count()
        ),
    );
    match &quota.notified {
        Some((set, duplicates)) => out.line(
            "notifications received (QuotaNotificationsQueue)",
            format!("{} ({duplicates} repeated an id)", by_limit(set)),
        ),
        None => out.line(
            "notifications received",
            "the stack has no QuotaNotificationsQueueUrl output",
        ),
    }
    let company = quota.cap_crossings();
    for fan in &company {
        let removed = fan.removals.iter().flatten().count();
        out.line(
            &format!("cap reached by {}", fan.crossing.staff),
            format!(
                "fan-out {} codes (plan: sits on {}); off {removed} of the {} lists naming them, last push {}",
                fan.notified_codes.map_or("?".into(), |n| n.to_string()),
                fan.planned_codes,
                fan.removals.len(),
                fan.last_push_ms().map_or("-".into(), ms)
            ),
        );
    }
    out.line(
        "cap crossing -> last push of its fan-out: p50 / p95 / max",
        quantiles(
            company.iter().filter_map(|f| f.last_push_ms()).collect(),
            ms,
        ),
    );
    out.line(
        "code-limit crossing -> push removing the staff member",
        quantiles(
            quota
                .fan_outs
                .iter()
                .filter(|f| f.crossing.limit != quota::COMPANY_DAILY)
                .filter_map(|f| f.last_push_ms())
                .collect(),
            ms,
        ),
    );
    out
}

/// One limit crossing the stack claimed, with its fan-out.
pub(super) struct FanOut {
    crossing: Crossing,
    /// Codes the notification says it reached, and codes the demo's plan seats the staff
    /// member on (every code for the cap, the one code for a code's limit).
    notified_codes: Option<u64>,
    planned_codes: usize,
    /// Codes whose list named the staff member at the claim, and the delay to the push that
    /// took them off each.
    removals: Vec<Option<u64>>,
}

impl FanOut {
    /// Claim to the last push of its fan-out, when every affected list was pushed.
    fn last_push_ms(&self) -> Option<u64> {
        self.removals
            .iter()
            .copied()
            .collect::<Option<Vec<u64>>>()
            .and_then(|delays| delays.into_iter().max())
    }
}

fn fan_outs(inputs: &Inputs<'_>, histories: &Histories<'_>) -> Vec<FanOut> {
    let notified: HashMap<Crossing, u64> = inputs
        .notifications
        .iter()
        .flatten()
        .map(|n| (n.crossing(), n.codes))
        .collect();
    inputs
        .limit_claims
        .iter()
        .map(|claim| {
            let crossing = &claim.crossing;
            let (planned, members): (Vec<&str>, Vec<&str>) = match &crossing.code {
                Some(code) => (
                    vec![code.as_str()],
                    inputs
                        .plan
                        .code(code)
                        .filter(|c| c.members.contains(&crossing.staff))
                        .map(|c| vec![c.id.as_str()])
                        .unwrap_or_default(),
                ),
                None => (
                    inputs
                        .plan
                        .codes_of(&crossing.staff)
                        .iter()
                        .map(|c| c.id.as_str())
                        .collect(),
                    inputs
                        .plan
                        .member_of(&crossing.staff)
                        .iter()
                        .map(|c| c.id.as_str())
                        .collect(),
                ),
            };
            FanOut {
                crossing: crossing.clone(),
                notified_codes: notified.get(crossing).copied().or(claim.codes),
                planned_codes: planned.len(),
                removals: histories.removals(members, &crossing.staff, claim.claimed_at_ms),
            }
        })
        .collect()
}

pub(super) fn notification_checks(out: &Lines, inputs: &Inputs<'_>, quota: &QuotaLoop) -> Lines {
    let mut out = out.section();
    let expected = &inputs.expected_crossings;
    match &quota.notified {
        Some((set, duplicates)) => {
            let missing: Vec<&Crossing> = expected.difference(set).collect();
            let unexpected: Vec<&Crossing> = set.difference(expected).collect();
            out.must(
                "notifications sent vs limit crossings (from the adds)",
                format!(
                    "{} / {}",
                    inputs.notifications.as_ref().map_or(0, Vec::len),
                    expected.len()
                ),
                missing.is_empty() && unexpected.is_empty() && *duplicates == 0,
            );
            for crossing in missing.iter().take(10) {
                out.note(&format!("no notification for {crossing}"));
            }
            for crossing in unexpected.iter().take(10) {
                out.note(&format!("notification without a crossing: {crossing}"));
            }
        }
        None => out.must(
            "notifications sent vs limit crossings (from the adds)",
            "no queue",
            false,
        ),
    }
    let wrong_fan_out: Vec<&FanOut> = quota
        .fan_outs
        .iter()
        .filter(|f| f.notified_codes != Some(f.planned_codes as u64))
        .collect();
    out.must(
        "crossings whose fan-out differs from the plan's seats",
        format!("{} of {}", wrong_fan_out.len(), quota.fan_outs.len()),
        wrong_fan_out.is_empty(),
    );
    for fan in wrong_fan_out.iter().take(10) {
        out.note(&format!(
            "{}: {} reasons, the plan seats them on {} codes",
            fan.crossing,
            fan.notified_codes.map_or("?".into(), |n| n.to_string()),
            fan.planned_codes
        ));
    }
    out
}
