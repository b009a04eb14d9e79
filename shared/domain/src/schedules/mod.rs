//! Moments that change a code's list with no event of their own: a staff member's shift
//! starting or ending, and a tenant's midnight (staff removed for a daily limit or the company
//! cap come back). docs/rules.md, "Shift edges and the day rollover": every shift start and end,
//! and the tenant's midnight, reach the affected codes without any other event.
//!
//! The recompute already reads `now` in the tenant's timezone, so nothing here decides a list:
//! at each moment the tick only sends refresh reasons to the codes it may change, and the
//! refresh function (the single writer) recomputes them.
//!
//! How moments are found: a tenant has at most two **due items**, one for the next shift start
//! or end of any of its staff and one for its next midnight, each indexed by the UTC minute it
//! falls in. A **tick** that runs every minute walks the minutes from a stored cursor up to now,
//! and for each due item sends its reasons first and moves the item to its next moment second
//! (a crash in between sends the reasons again: harmless, the refresh coalesces and dedupes).
//!
//! Why one shift item per tenant, not one per staff member: on a production morning most staff
//! start at 09:00, so per-staff items put hundreds of thousands of items in one minute, more
//! than a tick can move before the next minute (the scale simulation measured 24 minutes
//! behind). Per tenant, a minute holds at most one shift item per tenant. Handling it reads the
//! tenant's schedules (one query), finds the staff whose shifts started or ended since the item
//! was last handled (`Due::handled_through_ms`, so a writer that moves the item earlier never
//! skips another staff member's edge), sends them in `FanOut`s of at most
//! `plan::STAFF_PER_FAN_OUT` staff (past `plan::TENANT_WIDE_AFTER_STAFF`, one fan-out to every
//! code of the tenant), and moves the item to the earliest next edge of any of them.
//! A schedule write moves the item to the next minute (`plan::asap`), so the tick recomputes
//! the next edge with the new schedule; a tick that read the schedules before that write finds
//! the item moved and leaves the writer's minute.
//!
//! The tick's work per item is bounded: edges and rollovers are `FanOut`s of at most
//! `plan::STAFF_PER_FAN_OUT` staff each (the fan-out function pages their codes, as it does for
//! the admin API's staff changes), and a midnight adds the day's claimed codes. The tick checks
//! its deadline before each item, so a run that cannot finish a minute stops inside it: the
//! items it handled have moved to their next moment, the cursor stays on the minute, and the
//! next run finds only the rest.
//!
//! - `plan`: the pure part (which minutes a tick may walk, next moments, what a rollover
//!   brings back, the reasons to send);
//! - the ports below: `DueIndex` (the tick's view of the index and its cursor), `DueWriter`
//!   (how the admin API writes due items), `ScheduleFacts` (what the tick reads);
//! - `Tick`: one run of the tick over those ports.
//!
//! **A run waits for its minute.** The scheduler fires a run at some second of each minute,
//! and a minute may be walked only `grace_ms` after it began: a run fired at second 5 would
//! leave the minute's edges to the next run, 60 s later, and one fired at second 50 walks them
//! 50 s late. So a scheduled run that has caught up waits (`Tick::run_waiting`, with the pause
//! `Tick::waiting_with` gives it) until the next minute may be walked and walks it, while its
//! budget leaves room for that walk: every edge is sent `grace_ms` after its minute began,
//! whichever second the run was fired at. A run fired while another waits finds the cursor held
//! and returns at once; a run by hand (`Tick::run`) walks what is due and returns.

pub mod plan;
mod ports;

pub use ports::{DueIndex, DueWriter, ScheduleFacts};

use crate::ids::TenantId;
use crate::ids::{CodeId, StaffId};
use crate::membership::Limit;
use crate::reasons::{FanOut, FanOutQueue, ReasonQueue, RefreshReason};
use crate::Clock;
use crate::StoreError;
use futures::stream::{self, StreamExt, TryStreamExt};
use std::collections::BTreeSet;
use std::fmt;
use std::time::Duration;

/// How a run waits for the next minute's grace to pass.
pub use crate::Pause;

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
    /// The next shift start or end of any staff member of the tenant.
    Shifts,
    /// The tenant's next midnight.
    Midnight,
}

/// A due item as the index holds it: this subject of this tenant is due in `minute`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Due {
    pub tenant: TenantId,
    pub subject: Subject,
    pub minute: Minute,
    /// Moments up to this time were handled when the item was last handled (or, for an item
    /// no tick has handled yet, when it was written): the shift edges to send are the ones
    /// after it. `None` for an item that does not say (its minute's start is used).
    pub handled_through_ms: Option<u64>,
}

impl Due {
    /// The time the item's moments were handled through: its own record, or for an item
    /// without one, just before its minute.
    pub fn handled_through(&self) -> u64 {
        self.handled_through_ms
            .unwrap_or_else(|| self.minute.start_ms().saturating_sub(1))
    }
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
    /// How long a run holds the cursor. Longer than the function's timeout (template.yaml,
    /// `ScheduleTickFunction`, 120 s): a run is never overtaken while it lives, and a crashed
    /// run's cursor is free again after it.
    pub lease_ms: u64,
    /// Due items, and reasons or fan-outs of one item, in flight at once.
    pub concurrency: usize,
    /// Start no item when this much of the run's time is left (the rest is for finishing the
    /// items in hand, moving the cursor and releasing it).
    pub reserve: Duration,
}

impl TickSettings {
    pub const DEFAULT: Self = Self {
        grace_ms: 15_000,
        max_minutes: 60,
        lease_ms: 180_000,
        concurrency: 64,
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
    pub fan_outs_sent: usize,
    /// The run's time ran out inside a minute: the cursor stays on it for the next run.
    pub stopped_inside_minute: bool,
    /// Items whose handling failed and that were moved to a later minute to be tried again.
    pub retried: usize,
    /// Complete minutes still to walk after this run (a lag worth alerting on when it grows).
    pub minutes_behind: u64,
    /// Times the run waited for a minute's grace to pass and walked it (`Tick::waiting_with`).
    pub waits: u64,
}

pub struct Tick<I, F, Q, O> {
    index: I,
    facts: F,
    reasons: Q,
    fan_outs: O,
    clock: Clock,
    settings: TickSettings,
    pause: Option<Pause>,
}

/// What handling one due item sent.
#[derive(Debug, Clone, Copy, Default)]
struct Sent {
    reasons: usize,
    fan_outs: usize,
}

impl<I: DueIndex, F: ScheduleFacts, Q: ReasonQueue, O: FanOutQueue> Tick<I, F, Q, O> {
    pub fn new(
        index: I,
        facts: F,
        reasons: Q,
        fan_outs: O,
        clock: Clock,
        settings: TickSettings,
    ) -> Self {
        Self {
            index,
            facts,
            reasons,
            fan_outs,
            clock,
            settings,
            pause: None,
        }
    }

    /// How `run_waiting` waits. Without it, `run_waiting` is `run`.
    pub fn waiting_with(mut self, pause: Pause) -> Self {
        self.pause = Some(pause);
        self
    }

    /// One run: takes the cursor (or leaves it to the run that holds it), walks the complete
    /// minutes from it, at most `max_minutes` and within `budget`, moving it after each
    /// minute walked whole, and gives it back. `owner` names this run (the Lambda request id).
    ///
    /// A storage or queue failure while handling one item moves that item a minute later
    /// and the walk goes on; a failure to read a minute or to move an item stops the run with
    /// the cursor on the minute in hand, which the next run walks again.
    pub async fn run(&self, owner: &str, budget: Duration) -> Result<TickReport, StoreError> {
        self.run_with(owner, budget, None).await
    }

    /// `run`, and then, caught up, waits for the next minute's grace to pass and walks that
    /// minute too, as long as the budget leaves a `reserve` for the walk besides the one kept
    /// for finishing: what each scheduled run does, so that a minute is walked as soon as it
    /// may be, whichever second the scheduler fired the run at.
    pub async fn run_waiting(
        &self,
        owner: &str,
        budget: Duration,
    ) -> Result<TickReport, StoreError> {
        self.run_with(owner, budget, self.pause).await
    }

    #[tracing::instrument(skip_all, fields(owner = %owner, waits = pause.is_some()))]
    async fn run_with(
        &self,
        owner: &str,
        budget: Duration,
        pause: Option<Pause>,
    ) -> Result<TickReport, StoreError> {
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
        let walked = self
            .walk(owner, next, now_ms, budget, pause, &mut report)
            .await;
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
        started_ms: u64,
        budget: Duration,
        pause: Option<Pause>,
        report: &mut TickReport,
    ) -> Result<(), StoreError> {
        // Elapsed on the run's own clock, which a simulation runs in virtual time.
        let elapsed = || Duration::from_millis((self.clock)().saturating_sub(started_ms));
        let out_of_time = || elapsed() + self.settings.reserve > budget;
        let mut cursor = stored;
        let mut waited = false;
        loop {
            let walked_before = report.minutes_walked;
            let next = self
                .walk_window(owner, cursor, &out_of_time, report)
                .await?;
            cursor = Some(next);
            // A wait after which no minute could be walked (the clock did not get there, or
            // was set back) ends the run rather than waiting again.
            let waited_for_nothing = waited && report.minutes_walked == walked_before;
            let caught_up =
                report.minutes_behind == 0 && !report.stopped_inside_minute && !waited_for_nothing;
            let Some(pause) = pause.filter(|_| caught_up) else {
                return Ok(());
            };
            let walkable_at_ms = next.start_ms() + self.settings.grace_ms;
            let wait = Duration::from_millis(walkable_at_ms.saturating_sub((self.clock)()));
            if elapsed() + wait + 2 * self.settings.reserve > budget
                || report.minutes_walked >= self.settings.max_minutes
            {
                return Ok(());
            }
            pause(wait).await;
            report.waits += 1;
            waited = true;
        }
    }

    /// Walks the complete minutes from `stored` up to now, and answers the first minute not
    /// walked.
    async fn walk_window(
        &self,
        owner: &str,
        stored: Option<Minute>,
        out_of_time: &(dyn Fn() -> bool + Sync),
        report: &mut TickReport,
    ) -> Result<Minute, StoreError> {
        let now_ms = (self.clock)();
        let window = plan::window(stored, now_ms, &self.settings);
        report.rewound |= window.rewound;
        if window.rewound {
            tracing::warn!(cursor = ?stored, now = %Minute::containing(now_ms), "the tick's cursor was ahead of the clock (clock set back): walking from now");
        }
        let mut cursor = stored;
        let mut minute = window.first;
        while minute <= window.last && report.minutes_walked < self.settings.max_minutes {
            if out_of_time() {
                break;
            }
            let walked = self.walk_minute(minute, out_of_time).await?;
            report.due_items += walked.handled;
            report.reasons_sent += walked.sent.reasons;
            report.fan_outs_sent += walked.sent.fan_outs;
            report.retried += walked.retried;
            if walked.left > 0 {
                tracing::info!(%minute, handled = walked.handled, left = walked.left, "out of time inside a minute; the next run goes on with it");
                report.stopped_inside_minute = true;
                break;
            }
            if !self.index.advance(owner, cursor, minute.next()).await? {
                tracing::warn!(%minute, "another run took the cursor; stopping");
                break;
            }
            cursor = Some(minute.next());
            report.minutes_walked += 1;
            minute = minute.next();
        }
        report.minutes_behind = window.last.next().since(minute);
        Ok(minute)
    }

    /// Handles the items due in `minute`, starting none once `out_of_time` says so.
    async fn walk_minute(
        &self,
        minute: Minute,
        out_of_time: &(dyn Fn() -> bool + Sync),
    ) -> Result<MinuteWalked, StoreError> {
        let items = self.index.due_in(minute).await?;
        let count = items.len();
        let outcomes: Vec<(Due, Result<Sent, StoreError>)> = stream::iter(items)
            .take_while(|_| std::future::ready(!out_of_time()))
            .map(|due| async move {
                let handled = self.handle(&due).await;
                (due, handled)
            })
            .buffer_unordered(self.settings.concurrency)
            .collect()
            .await;
        let handled = outcomes.len();
        let (mut sent, mut retried) = (Sent::default(), 0);
        for (due, outcome) in outcomes {
            match outcome {
                Ok(item) => {
                    sent.reasons += item.reasons;
                    sent.fan_outs += item.fan_outs;
                }
                Err(error) => {
                    // Its reasons may be half sent; trying the whole item again next minute
                    // sends them again, which is harmless.
                    let later = Minute::containing((self.clock)()).next();
                    tracing::warn!(tenant = %due.tenant, subject = ?due.subject, error = %error, retry_in = %later, "due item failed; trying it again later");
                    // Handled through nothing new: the retry sends the same edges.
                    self.index
                        .reschedule(&due, Some(later), due.handled_through())
                        .await?;
                    retried += 1;
                }
            }
        }
        Ok(MinuteWalked {
            handled,
            left: count - handled,
            sent,
            retried,
        })
    }

    /// Sends the item's reasons and fan-outs, then moves it to its next moment.
    async fn handle(&self, due: &Due) -> Result<Sent, StoreError> {
        let now_ms = (self.clock)();
        let Some(timezone) = self.facts.timezone(&due.tenant).await? else {
            tracing::info!(tenant = %due.tenant, "due item of a tenant that does not exist; deleted");
            self.index.reschedule(due, None, now_ms).await?;
            return Ok(Sent::default());
        };
        let (reasons, fan_outs, next) = match &due.subject {
            Subject::Shifts => {
                let schedules = self.facts.schedules(&due.tenant).await?;
                let edges = plan::shift_edges(&schedules, timezone, due.handled_through(), now_ms);
                let fan_outs = plan::shift_fan_outs(&due.tenant, &edges.staff_by_edge);
                (Vec::new(), fan_outs, edges.next)
            }
            Subject::Midnight => {
                let (first_day, last_day) = plan::days_ended(due.minute, now_ms, timezone);
                let claims = self
                    .facts
                    .limits_reached(&due.tenant, &first_day, &last_day)
                    .await?;
                let back = plan::rollover(&claims);
                let codes: BTreeSet<CodeId> = back.codes;
                let reasons = plan::rollover_reasons(&due.tenant, &last_day, due.minute, codes);
                let fan_outs = plan::rollover_fan_outs(
                    &due.tenant,
                    &last_day,
                    due.minute,
                    back.staff_on_every_code,
                );
                tracing::info!(tenant = %due.tenant, first_day, last_day, claims = claims.len(), codes = reasons.len(), "day rolled over");
                (
                    reasons,
                    fan_outs,
                    Some(plan::next_midnight(timezone, now_ms)),
                )
            }
        };
        stream::iter(reasons.iter().map(Ok))
            .try_for_each_concurrent(self.settings.concurrency, |reason: &RefreshReason| {
                self.reasons.send(reason)
            })
            .await?;
        stream::iter(fan_outs.iter().map(Ok))
            .try_for_each_concurrent(self.settings.concurrency, |fan_out: &FanOut| {
                self.fan_outs.send(fan_out)
            })
            .await?;
        self.index.reschedule(due, next, now_ms).await?;
        Ok(Sent {
            reasons: reasons.len(),
            fan_outs: fan_outs.len(),
        })
    }
}

/// One minute's walk: items handled (their reasons sent, or retried later), items left for
/// the next run, what was sent.
struct MinuteWalked {
    handled: usize,
    left: usize,
    sent: Sent,
    retried: usize,
}

#[cfg(test)]
mod tests;
