//! The tick's decisions as pure functions of the clock, the cursor and stored facts.

use super::{LimitReached, Minute, TickSettings};
use crate::ids::TenantId;
use crate::ids::{CodeId, StaffId};
use crate::membership::{Limit, WeeklySchedule};
use crate::reasons::{Cause, Fact, FanOut, RefreshReason, Source};
use crate::tenants::Timezone;
use chrono::TimeZone;
use std::collections::{BTreeMap, BTreeSet};

/// The minutes a run may walk: `first..=last` (empty when `first > last`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MinuteRange {
    pub first: Minute,
    pub last: Minute,
    /// The stored cursor was ahead of the clock and was not used.
    pub rewound: bool,
}

/// How far the stored cursor may be ahead of the clock before the clock counts as set back
/// (clocks of two hosts differ by far less).
const AHEAD_TOLERANCE_MINUTES: u64 = 2;

/// The minutes a run at `now_ms` walks, given the stored cursor (the first minute not walked,
/// `None` before the first run ever). The last is the newest minute whose grace has passed.
/// Without a cursor the walk starts `max_minutes` back, so items written just before the first
/// run are not skipped. A cursor ahead of the clock means the clock was set back (an operator's
/// clock offset): the walk restarts at the last complete minute rather than waiting for the
/// clock to catch up with it.
pub fn window(stored: Option<Minute>, now_ms: u64, settings: &TickSettings) -> MinuteRange {
    let last = Minute::containing(now_ms.saturating_sub(settings.grace_ms));
    match stored {
        None => MinuteRange {
            first: last.minus(settings.max_minutes.saturating_sub(1)),
            last,
            rewound: false,
        },
        Some(next) if next > Minute::containing(now_ms).plus(AHEAD_TOLERANCE_MINUTES) => {
            MinuteRange {
                first: last,
                last,
                rewound: true,
            }
        }
        Some(next) => MinuteRange {
            first: next,
            last,
            rewound: false,
        },
    }
}

/// The minute of the staff member's next shift start or end after `now_ms`, if any.
pub fn next_shift_edge(
    schedule: Option<&WeeklySchedule>,
    timezone: Timezone,
    now_ms: u64,
) -> Option<Minute> {
    let edge = schedule?.next_transition_after(utc(now_ms), timezone.tz())?;
    u64::try_from(edge.timestamp_millis())
        .ok()
        .map(Minute::containing)
}

/// The minute of the tenant's next midnight after `now_ms`.
pub fn next_midnight(timezone: Timezone, now_ms: u64) -> Minute {
    Minute::containing(timezone.next_midnight_ms(now_ms))
}

/// The first minute a due item written now can safely go in ("as soon as possible"): the
/// next one, which no run has walked yet.
pub fn asap(now_ms: u64) -> Minute {
    Minute::containing(now_ms).next()
}

/// The tenant-days (`YYYY-MM-DD`, first and last) that ended by `now_ms`, for a midnight due in
/// `due`: the day that ended at `due` and, when the tick ran late by whole days, every day
/// after it up to yesterday.
pub fn days_ended(due: Minute, now_ms: u64, timezone: Timezone) -> (String, String) {
    let first = timezone.at(due.start_ms().saturating_sub(1)).date_naive();
    let yesterday = timezone.at(now_ms).date_naive().pred_opt().unwrap_or(first);
    let last = first.max(yesterday);
    (
        first.format("%Y-%m-%d").to_string(),
        last.format("%Y-%m-%d").to_string(),
    )
}

/// What a day rollover brings back, from the claims of the days that ended.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rollover {
    /// Codes with a staff member removed for the code's daily limit.
    pub codes: BTreeSet<CodeId>,
    /// Staff removed for the company cap: every code they sit on.
    pub staff_on_every_code: BTreeSet<StaffId>,
}

/// Daily limits end with the day; a code's add limit (all-time) does not, so its claims bring
/// nobody back.
pub fn rollover(claims: &[LimitReached]) -> Rollover {
    let mut back = Rollover::default();
    for claim in claims {
        match (claim.limit, &claim.code) {
            (Limit::CodeDaily, Some(code)) => {
                back.codes.insert(code.clone());
            }
            (Limit::CompanyDaily, _) => {
                back.staff_on_every_code.insert(claim.staff.clone());
            }
            (Limit::CodeTotal, _) | (Limit::CodeDaily, None) => {}
        }
    }
    back
}

/// Staff per `FanOut` the tick sends: the fan-out function reads each source's codes before it
/// sends a page, and a message stays far below SQS's 256 KiB whatever the staff ids.
pub const STAFF_PER_FAN_OUT: usize = 100;

/// The shift edges a tick finds for a tenant: who had one since the item was last handled, by
/// the minute of their (latest) edge, and the earliest edge still to come.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShiftEdges {
    pub staff_by_edge: BTreeMap<Minute, Vec<StaffId>>,
    /// `None` when no staff member has a schedule with an edge ahead.
    pub next: Option<Minute>,
}

/// Edges of one staff member a tick walks through to find the latest in its window.
const EDGES_WALKED: usize = 8;

/// The staff whose shift started or ended in `(after_ms, now_ms]`, and the next edge of any
/// staff member after `now_ms`. A staff member with several edges in the window (a tick far
/// behind) is told once, at the latest: the recompute reads the clock, not the edge.
pub fn shift_edges(
    schedules: &[(StaffId, WeeklySchedule)],
    timezone: Timezone,
    after_ms: u64,
    now_ms: u64,
) -> ShiftEdges {
    let mut edges = ShiftEdges::default();
    for (staff, schedule) in schedules {
        let Some(first) = next_shift_edge(Some(schedule), timezone, after_ms) else {
            continue;
        };
        let upcoming = if first.start_ms() <= now_ms {
            let mut latest = first;
            let mut upcoming = next_shift_edge(Some(schedule), timezone, first.start_ms());
            for _ in 0..EDGES_WALKED {
                match upcoming {
                    Some(edge) if edge.start_ms() <= now_ms => {
                        latest = edge;
                        upcoming = next_shift_edge(Some(schedule), timezone, edge.start_ms());
                    }
                    _ => break,
                }
            }
            if upcoming.is_some_and(|edge| edge.start_ms() <= now_ms) {
                // A tick days behind: the edge told is not the latest, the next one is exact.
                upcoming = next_shift_edge(Some(schedule), timezone, now_ms);
            }
            edges
                .staff_by_edge
                .entry(latest)
                .or_default()
                .push(staff.clone());
            upcoming
        } else {
            // No edge since `after_ms`, so the one after it is the one after now too.
            Some(first)
        };
        edges.next = match (edges.next, upcoming) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
    edges
}

/// The fan-outs that tell the codes of the staff with a shift edge about it: per edge minute,
/// `STAFF_PER_FAN_OUT` staff at a time, in the order given. The fact is the tenant's edge
/// minute: the same edges sent twice (a crash, a retry, the fan-out queue's at-least-once
/// delivery) make the same reasons, which refresh.fifo deduplicates.
pub fn shift_fan_outs(
    tenant: &TenantId,
    staff_by_edge: &BTreeMap<Minute, Vec<StaffId>>,
) -> Vec<FanOut> {
    staff_by_edge
        .iter()
        .flat_map(|(edge, staff)| {
            staff_fan_outs(
                tenant,
                staff.iter().cloned(),
                Cause::ShiftChanged,
                *edge,
                &format!("shifts:{edge}"),
            )
        })
        .collect()
}

/// The fan-outs that tell every code of the staff back from the company cap about the day's
/// end (none when nobody is); the first is the same fact as the day's claimed codes' reasons.
pub fn rollover_fan_outs(
    tenant: &TenantId,
    last_day: &str,
    midnight: Minute,
    staff: impl IntoIterator<Item = StaffId>,
) -> Vec<FanOut> {
    staff_fan_outs(
        tenant,
        staff,
        Cause::DayRolledOver,
        midnight,
        &rollover_key(last_day),
    )
}

/// An edge that moves more staff than this is told to every code of the tenant in one
/// fan-out. Each of 100 staff parts reaches nearly every code of a tenant whose staff sit on
/// hundreds of codes each (a giant's 1,200 moving staff, 12 parts, sent its 200,000 codes
/// about a million reasons, and read a seat query per staff member); the tenant's codes
/// listed once from its index are sent one reason each. The codes it reaches that none of the
/// staff sits on are recomputed for nothing: with 15 members a code and a fifth of the staff
/// moving, about 4% of them.
pub const TENANT_WIDE_AFTER_STAFF: usize = 3 * STAFF_PER_FAN_OUT;

/// `STAFF_PER_FAN_OUT` staff per fan-out, each a part of the fact `key` (`FanOut::part`): a
/// code several parts reach is sent one reason refresh.fifo keeps, and recomputed once. More
/// than `TENANT_WIDE_AFTER_STAFF` staff: one fan-out to every code of the tenant.
fn staff_fan_outs(
    tenant: &TenantId,
    staff: impl IntoIterator<Item = StaffId>,
    cause: Cause,
    at: Minute,
    key: &str,
) -> Vec<FanOut> {
    let sources: Vec<Source> = staff
        .into_iter()
        .map(|staff| Source::Staff { staff })
        .collect();
    if sources.len() > TENANT_WIDE_AFTER_STAFF {
        return vec![FanOut::new(
            tenant.clone(),
            vec![Source::Tenant],
            cause,
            at.start_ms(),
            key.to_owned(),
        )];
    }
    sources
        .chunks(STAFF_PER_FAN_OUT)
        .zip(0..)
        .map(|(chunk, part)| {
            FanOut::new(
                tenant.clone(),
                chunk.to_vec(),
                cause,
                at.start_ms(),
                key.to_owned(),
            )
            .part(part)
        })
        .collect()
}

/// One reason per code a rollover may change; the fact is the end of `last_day`.
pub fn rollover_reasons(
    tenant: &TenantId,
    last_day: &str,
    midnight: Minute,
    codes: impl IntoIterator<Item = CodeId>,
) -> Vec<RefreshReason> {
    let day_rolled_over = Fact {
        tenant: tenant.clone(),
        cause: Cause::DayRolledOver,
        at_ms: midnight.start_ms(),
        key: rollover_key(last_day),
    };
    let codes: Vec<CodeId> = codes.into_iter().collect();
    day_rolled_over.reasons(&codes).collect()
}

fn rollover_key(last_day: &str) -> String {
    format!("day-rolled-over:{last_day}")
}

pub(super) fn utc(at_ms: u64) -> chrono::DateTime<chrono::Utc> {
    chrono::Utc
        .timestamp_millis_opt(i64::try_from(at_ms).unwrap_or(i64::MAX))
        .single()
        .unwrap_or_default()
}
