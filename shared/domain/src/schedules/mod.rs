//! Moments that change a code's list with no event of their own: a staff member's shift
//! starting or ending, and a tenant's midnight (staff removed for a daily limit or the company
//! cap come back). docs/rules.md, "Shift edges and the day rollover": every shift start and end,
//! and the tenant's midnight, reach the affected codes without any other event.
//!
//! The recompute already reads `now` in the tenant's timezone, so nothing here decides a list:
//! at each moment the tick only sends refresh reasons to the codes it may change, and the
//! refresh function (the single writer) recomputes them.
//!
//! How moments are found: every subject with a next moment has one **due item** (one per staff
//! member with a schedule, one per tenant for its next midnight), indexed by the UTC minute it
//! falls in. A **tick** that runs every minute walks the minutes from a stored cursor up to now,
//! and for each due item sends its reasons first and moves the item to its next moment second
//! (a crash in between sends the reasons again: harmless, the refresh coalesces and dedupes).
//!
//! - `plan`: the pure part (which minutes a tick may walk, next moments, what a rollover
//!   brings back, the reasons to send);
//! - the ports below: `DueIndex` (the tick's view of the index and its cursor), `DueWriter`
//!   (how the admin API writes due items), `ScheduleFacts` (what the tick reads);
//! - `Tick`: one run of the tick over those ports.

pub mod plan;
mod ports;

pub use ports::{DueIndex, DueWriter, ScheduleFacts};

use crate::ids::TenantId;
use crate::ids::{CodeId, StaffId};
use crate::membership::Limit;
use crate::reasons::ReasonQueue;
use crate::reasons::RefreshReason;
use crate::Clock;
use crate::StoreError;
use futures::stream::{self, StreamExt, TryStreamExt};
use std::collections::BTreeSet;
use std::fmt;
use std::time::Duration;

const MS_PER_MINUTE: u64 = 60_000;

/// A UTC minute (minutes since the epoch): the bucket of the due index a moment falls in.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Minute(u64);

impl Minute {
    /// The minute `at_ms` falls in.
    pub fn containing(at_ms: u64) -> Self {
        Self(at_ms / MS_PER_MINUTE)
    }

    pub fn start_ms(self) -> u64 {
        self.0 * MS_PER_MINUTE
    }

    pub fn next(self) -> Self {
        self.plus(1)
    }

    pub fn plus(self, minutes: u64) -> Self {
        Self(self.0.saturating_add(minutes))
    }

    pub fn minus(self, minutes: u64) -> Self {
        Self(self.0.saturating_sub(minutes))
    }

    /// Minutes from `earlier` to `self` (0 when `earlier` is later).
    pub fn since(self, earlier: Minute) -> u64 {
        self.0.saturating_sub(earlier.0)
    }

    /// `YYYYMMDDHHMM` in UTC, as it appears in the index's keys.
    pub fn label(self) -> String {
        plan::utc(self.start_ms()).format("%Y%m%d%H%M").to_string()
    }

    pub fn parse_label(label: &str) -> Option<Self> {
        let naive = chrono::NaiveDateTime::parse_from_str(label, "%Y%m%d%H%M").ok()?;
        let ms = u64::try_from(naive.and_utc().timestamp_millis()).ok()?;
        Some(Self::containing(ms))
    }

    pub fn as_u64(self) -> u64 {
        self.0
    }

    pub fn from_u64(minutes: u64) -> Self {
        Self(minutes)
    }
}

impl fmt::Debug for Minute {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Minute({})", self.label())
    }
}

impl fmt::Display for Minute {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.label())
    }
}

/// What a due item is for.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Subject {
    /// A staff member's next shift start or end.
    Shift(StaffId),
    /// The tenant's next midnight.
    Midnight,
}

/// A due item as the index holds it: this subject of this tenant is due in `minute`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Due {
    pub tenant: TenantId,
    pub subject: Subject,
    pub minute: Minute,
}

/// One of the quota loop's "removed for a limit" claims, as the rollover reads them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitReached {
    pub staff: StaffId,
    pub limit: Limit,
    /// The code of a code-level limit; `None` for the company cap.
    pub code: Option<CodeId>,
}

/// The tick's cursor, as `DueIndex::acquire` finds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CursorLease {
    /// This run holds the cursor; `next` is the first minute not walked yet (`None` before the
    /// first run ever).
    Acquired { next: Option<Minute> },
    /// Another run holds it and its lease has not expired.
    HeldElsewhere,
}

/// How a tick run walks the index.
#[derive(Debug, Clone, Copy)]
pub struct TickSettings {
    /// A minute is walked only this long after it began. Every writer of a due item reads the
    /// clock before the minute it writes and finishes within its function's timeout, so a
    /// grace longer than the longest writer (the admin API, 10 s) means no item is written into
    /// a minute after the tick walked it. It also covers the index's propagation delay (the
    /// index is eventually consistent).
    pub grace_ms: u64,
    /// Minutes one run walks at most: a tick that was stopped (or a clock moved forward)
    /// catches up this many minutes per run.
    pub max_minutes: u64,
    /// How long a run holds the cursor. Longer than the function's timeout: a run is never
    /// overtaken while it lives, and a crashed run's cursor is free again after it.
    pub lease_ms: u64,
    /// Due items, and reasons of one item, in flight at once.
    pub concurrency: usize,
    /// Stop walking when this much of the run's time is left (the rest is for finishing the
    /// minute in hand and releasing the cursor).
    pub reserve: Duration,
}

impl TickSettings {
    pub const DEFAULT: Self = Self {
        grace_ms: 15_000,
        max_minutes: 60,
        lease_ms: 120_000,
        concurrency: 16,
        reserve: Duration::from_secs(15),
    };
}

/// What a run did, for the log (and the invocation's answer).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct TickReport {
    /// Another run held the cursor: this one did nothing.
    pub held_elsewhere: bool,
    /// The cursor was ahead of the clock (the clock was set back) and was moved back to it.
    pub rewound: bool,
    pub minutes_walked: u64,
    pub due_items: usize,
    pub reasons_sent: usize,
    /// Items whose handling failed and that were moved to a later minute to be tried again.
    pub retried: usize,
    /// Complete minutes still to walk after this run (a lag worth alerting on when it grows).
    pub minutes_behind: u64,
}

pub struct Tick<I, F, Q> {
    index: I,
    facts: F,
    reasons: Q,
    clock: Clock,
    settings: TickSettings,
}

impl<I: DueIndex, F: ScheduleFacts, Q: ReasonQueue> Tick<I, F, Q> {
    pub fn new(index: I, facts: F, reasons: Q, clock: Clock, settings: TickSettings) -> Self {
        Self {
            index,
            facts,
            reasons,
            clock,
            settings,
        }
    }

    /// One run: takes the cursor (or leaves it to the run that holds it), walks the complete
    /// minutes from it, at most `max_minutes` and within `budget`, moving it after each
    /// minute, and gives it back. `owner` names this run (the Lambda request id).
    ///
    /// A storage or queue failure while handling one item moves that item a minute later
    /// and the walk goes on; a failure to read a minute or to move an item stops the run with
    /// the cursor on the minute in hand, which the next run walks again.
    #[tracing::instrument(skip_all, fields(owner = %owner))]
    pub async fn run(&self, owner: &str, budget: Duration) -> Result<TickReport, StoreError> {
        let now_ms = (self.clock)();
        let mut report = TickReport::default();
        let next = match self
            .index
            .acquire(owner, now_ms, now_ms + self.settings.lease_ms)
            .await?
        {
            CursorLease::Acquired { next } => next,
            CursorLease::HeldElsewhere => {
                report.held_elsewhere = true;
                return Ok(report);
            }
        };
        let walked = self.walk(owner, next, now_ms, budget, &mut report).await;
        // A lease left behind only delays the next run until it expires.
        if let Err(e) = self.index.release(owner).await {
            tracing::warn!(error = %e, "could not release the tick's cursor; it frees itself when the lease ends");
        }
        walked.map(|()| report)
    }

    async fn walk(
        &self,
        owner: &str,
        stored: Option<Minute>,
        now_ms: u64,
        budget: Duration,
        report: &mut TickReport,
    ) -> Result<(), StoreError> {
        let window = plan::window(stored, now_ms, &self.settings);
        report.rewound = window.rewound;
        if window.rewound {
            tracing::warn!(cursor = ?stored, now = %Minute::containing(now_ms), "the tick's cursor was ahead of the clock (clock set back): walking from now");
        }
        let mut cursor = stored;
        let mut minute = window.first;
        while minute <= window.last && report.minutes_walked < self.settings.max_minutes {
            // Elapsed on the run's own clock, which a simulation runs in virtual time.
            let elapsed = Duration::from_millis((self.clock)().saturating_sub(now_ms));
            if elapsed + self.settings.reserve > budget {
                break;
            }
            let (reasons, due, retried) = self.walk_minute(minute).await?;
            report.due_items += due;
            report.reasons_sent += reasons;
            report.retried += retried;
            if !self.index.advance(owner, cursor, minute.next()).await? {
                tracing::warn!(%minute, "another run took the cursor; stopping");
                break;
            }
            cursor = Some(minute.next());
            report.minutes_walked += 1;
            minute = minute.next();
        }
        report.minutes_behind = window.last.next().since(minute);
        Ok(())
    }

    /// Handles every item due in `minute`; answers (reasons sent, items, items retried).
    async fn walk_minute(&self, minute: Minute) -> Result<(usize, usize, usize), StoreError> {
        let items = self.index.due_in(minute).await?;
        let count = items.len();
        let outcomes: Vec<(Due, Result<usize, StoreError>)> = stream::iter(items)
            .map(|due| async move {
                let handled = self.handle(&due).await;
                (due, handled)
            })
            .buffer_unordered(self.settings.concurrency)
            .collect()
            .await;
        let (mut reasons, mut retried) = (0, 0);
        for (due, handled) in outcomes {
            match handled {
                Ok(sent) => reasons += sent,
                Err(error) => {
                    // Its reasons may be half sent; trying the whole item again next minute
                    // sends them again, which is harmless.
                    let later = Minute::containing((self.clock)()).next();
                    tracing::warn!(tenant = %due.tenant, subject = ?due.subject, error = %error, retry_in = %later, "due item failed; trying it again later");
                    self.index.reschedule(&due, Some(later)).await?;
                    retried += 1;
                }
            }
        }
        Ok((reasons, count, retried))
    }

    /// Sends the item's reasons, then moves it to its next moment. Answers the reasons sent.
    async fn handle(&self, due: &Due) -> Result<usize, StoreError> {
        let now_ms = (self.clock)();
        let Some(timezone) = self.facts.timezone(&due.tenant).await? else {
            tracing::info!(tenant = %due.tenant, "due item of a tenant that does not exist; deleted");
            self.index.reschedule(due, None).await?;
            return Ok(0);
        };
        let (reasons, next) = match &due.subject {
            Subject::Shift(staff) => {
                let schedule = self.facts.schedule(&due.tenant, staff).await?;
                let codes = self.facts.codes_of_staff(&due.tenant, staff).await?;
                let reasons = plan::shift_reasons(&due.tenant, staff, due.minute, codes);
                let next = plan::next_shift_edge(schedule.as_ref(), timezone, now_ms);
                (reasons, next)
            }
            Subject::Midnight => {
                let (first_day, last_day) = plan::days_ended(due.minute, now_ms, timezone);
                let claims = self
                    .facts
                    .limits_reached(&due.tenant, &first_day, &last_day)
                    .await?;
                let back = plan::rollover(&claims);
                let mut codes: BTreeSet<CodeId> = back.codes;
                for staff in &back.staff_on_every_code {
                    codes.extend(self.facts.codes_of_staff(&due.tenant, staff).await?);
                }
                let reasons = plan::rollover_reasons(&due.tenant, &last_day, due.minute, codes);
                tracing::info!(tenant = %due.tenant, first_day, last_day, claims = claims.len(), codes = reasons.len(), "day rolled over");
                (reasons, Some(plan::next_midnight(timezone, now_ms)))
            }
        };
        let sent = reasons.len();
        stream::iter(reasons.iter().map(Ok))
            .try_for_each_concurrent(self.settings.concurrency, |reason: &RefreshReason| {
                self.reasons.send(reason)
            })
            .await?;
        self.index.reschedule(due, next).await?;
        Ok(sent)
    }
}

#[cfg(test)]
mod tests;
