//! docs/rules.md rule 10: the archive of accepted callbacks, and replay of a selection of
//! them through today's code.
//!
//! A run is a sequence of pages ([`Page`]), each small enough for one invocation; the replay
//! function handles one page and queues the next, so a long replay runs in the stack, not on
//! the operator's machine. A **dry run** (the default) writes nothing but its own record: per
//! event what it would change (an add not yet counted, a staff fact that differs), then, from
//! an in-memory recompute over the current facts plus the would-be facts, which codes' WeCom
//! lists would change and which limits would be crossed. It calls WeCom zero times.
//! **Apply** runs each callback through the fact recorder (`facts::FactRecorder::record`):
//! missing facts are written idempotently by business key and refresh reasons are sent, so
//! WeCom is called only by the single writer afterwards.

pub mod consumer;
mod ports;
mod what_if;

pub use ports::{CallbackArchive, ReplayPages, ReplayReads, ReplayRuns};
pub use what_if::{what_if, CodeChange, StaffDelta, WouldBe};

use crate::codes::CodeFacts;
use crate::facts::{self, FactOutcome, FactRecorder, FactsError, StaffEvent};
use crate::facts::{FactLedger, QuotaLedger, QuotaNotifier, StaffLedger, TenantProfiles};
use crate::ids::CodeId;
use crate::ids::TenantId;
use crate::intake::{InboxMessage, MessageGroup};
use crate::membership::Employment;
use crate::reasons::ReasonQueue;
use crate::tenants::tenant_day;
use crate::{Clock, StoreError};

/// The longest window one run may select (the archive keeps at most 90 days).
pub const MAX_WINDOW_MS: u64 = 90 * 24 * 3600 * 1000;
/// An event type filter is WeCom's `Event` (and `ChangeType`): short ASCII words.
pub const MAX_EVENT_TYPE_BYTES: usize = 64;
/// Archived callbacks per page: each costs a few reads (and in apply mode the fact's
/// writes); 50 fit one invocation with room to spare.
pub const EVENTS_PER_PAGE: usize = 50;
/// Codes recomputed per page of a dry run's last phase (one snapshot each).
pub const CODES_PER_PAGE: usize = 25;
/// A run id is what the operator's tool made it: at most this long, `[A-Za-z0-9-]`.
pub const MAX_RUN_ID_BYTES: usize = 64;

/// The longest retention the archive takes (`CallbackArchiveDays`' maximum).
pub const MAX_ARCHIVE_DAYS: u64 = 90;

/// Keeps each stored callback in the archive as part of handling it (the inbox consumer
/// calls `keep` before the fact is written: a failure redelivers the message, never loses
/// it).
pub struct Archiving<A> {
    archive: A,
    retention_ms: u64,
    clock: Clock,
}

impl<A: CallbackArchive> Archiving<A> {
    /// `retention_days` is capped at `MAX_ARCHIVE_DAYS`.
    pub fn new(archive: A, retention_days: u64, clock: Clock) -> Self {
        Self {
            archive,
            retention_ms: retention_days.min(MAX_ARCHIVE_DAYS) * 24 * 3600 * 1000,
            clock,
        }
    }

    /// Archives `message` of inbox group `group_id` until the retention ends.
    pub async fn keep(&self, message: &InboxMessage, group_id: &str) -> Result<(), StoreError> {
        let expires_at_secs = ((self.clock)() + self.retention_ms) / 1000;
        self.archive.keep(message, group_id, expires_at_secs).await
    }
}

/// Which archived callbacks a run replays.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Selection {
    pub tenant: TenantId,
    /// Received at or after, ms since the epoch.
    pub from_ms: u64,
    /// Received at or before.
    pub to_ms: u64,
    /// Only callbacks whose message group names this code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<CodeId>,
    /// Only events of this type: WeCom's `Event` (`change_external_contact`) or
    /// `Event/ChangeType` (`change_contact/delete_user`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_type: Option<String>,
}

impl Selection {
    /// Refuses a selection no run should start with, naming the field.
    pub fn check(&self) -> Result<(), String> {
        if self.to_ms < self.from_ms {
            return Err("to: before from".into());
        }
        if self.to_ms - self.from_ms > MAX_WINDOW_MS {
            return Err("to: the window is longer than 90 days".into());
        }
        if let Some(kind) = &self.event_type {
            if kind.is_empty()
                || kind.len() > MAX_EVENT_TYPE_BYTES
                || !kind
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'/')
            {
                return Err("event_type: 1 to 64 of [A-Za-z0-9_/]".into());
            }
        }
        Ok(())
    }

    fn matches(&self, kind: &str) -> bool {
        self.event_type.as_deref().is_none_or(|wanted| {
            kind == wanted || kind.split('/').next().is_some_and(|event| event == wanted)
        })
    }
}

/// Checks a run id: 1 to 64 of `[A-Za-z0-9-]`.
pub fn check_run_id(run: &str) -> Result<(), String> {
    if run.is_empty()
        || run.len() > MAX_RUN_ID_BYTES
        || !run.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
    {
        return Err("run: 1 to 64 of [A-Za-z0-9-]".into());
    }
    Ok(())
}

/// One step of a run: a page of events from `after`, or (dry runs) a page of codes.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Page {
    pub run: String,
    pub selection: Selection,
    #[serde(default)]
    pub apply: bool,
    #[serde(default)]
    pub phase: Phase,
    /// Where the previous page stopped (an archive position, or a code id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
    /// Who started the run: the operator tool's caller (its STS identity, with `--by` added).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub by: String,
    /// When the operator's tool sent the first page: with the rest of the request, what tells
    /// a first page delivered again (the same request, which resumes the run) from another
    /// request under the same run id (refused).
    #[serde(default)]
    pub requested_at_ms: u64,
}

impl Page {
    /// What the run was asked for: every page of a run carries the same.
    pub fn request(&self) -> RunRequest {
        RunRequest {
            selection: self.selection.clone(),
            apply: self.apply,
            by: self.by.clone(),
            requested_at_ms: self.requested_at_ms,
        }
    }
}

/// A run's request, kept on its record: the selection, the mode, who asked and when.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RunRequest {
    pub selection: Selection,
    pub apply: bool,
    #[serde(default)]
    pub by: String,
    #[serde(default)]
    pub requested_at_ms: u64,
}

/// What creating a run's record found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunStart {
    /// No run had the id: the record is written.
    New,
    /// The run exists with the same request: its first page again (a redelivery, or a retry
    /// after a failure), which carries on where the run is.
    Resumed,
    /// Another request holds the id: the page is refused, the run left as it is.
    Taken,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    #[default]
    Events,
    Codes,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    Events,
    Codes,
    Done,
    Refused,
}

impl RunStatus {
    pub fn label(self) -> &'static str {
        match self {
            Self::Events => "events",
            Self::Codes => "codes",
            Self::Done => "done",
            Self::Refused => "refused",
        }
    }
}

/// An archived callback and where it sits in the archive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArchivedCallback {
    pub position: String,
    pub message: InboxMessage,
}

/// What one event would do (dry run) or did (apply).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventOutcome {
    /// Dry run: an add not counted yet.
    WouldCountAdd,
    /// An add already counted (nothing to do).
    AlreadyCounted,
    /// The same business event earlier in this run.
    Duplicate,
    /// Dry run: a staff fact that differs from the stored one.
    StaffFactDiffers,
    /// A staff fact equal to the stored one.
    StaffFactSame,
    /// Dry run: a contact change whose effect the in-memory recompute does not model
    /// (re-keying, departments); its staff member's codes are recomputed all the same.
    StaffChangeOther,
    /// Apply: an add counted now.
    Counted,
    /// Apply: a contact change written.
    StaffChangeWritten,
    /// The event still cannot be processed (with today's code and settings).
    Poison,
    /// An event qrsync does not act on.
    NoFact,
}

/// One line of a run's report: one archived callback.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct EventLine {
    pub position: String,
    pub received_at_ms: u64,
    pub kind: String,
    pub outcome: EventOutcome,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub staff: Option<String>,
    /// A short reason (a poison's class of failure, the fact that differs); never secrets.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
}

/// Counters a page adds to its run.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Progress {
    pub events: u32,
    pub filtered: u32,
    pub would_count: u32,
    pub already_counted: u32,
    pub duplicates: u32,
    pub staff_differs: u32,
    pub staff_same: u32,
    pub staff_other: u32,
    pub counted: u32,
    pub staff_written: u32,
    pub poison: u32,
    pub no_fact: u32,
    pub codes: u32,
    pub codes_changing: u32,
    pub crossings: u32,
    pub pages: u32,
}

impl Progress {
    fn count(&mut self, outcome: EventOutcome) {
        self.events += 1;
        let counter = match outcome {
            EventOutcome::WouldCountAdd => &mut self.would_count,
            EventOutcome::AlreadyCounted => &mut self.already_counted,
            EventOutcome::Duplicate => &mut self.duplicates,
            EventOutcome::StaffFactDiffers => &mut self.staff_differs,
            EventOutcome::StaffFactSame => &mut self.staff_same,
            EventOutcome::StaffChangeOther => &mut self.staff_other,
            EventOutcome::Counted => &mut self.counted,
            EventOutcome::StaffChangeWritten => &mut self.staff_written,
            EventOutcome::Poison => &mut self.poison,
            EventOutcome::NoFact => &mut self.no_fact,
        };
        *counter += 1;
    }
}

pub struct Replayer<A, R, F, T, L, Q, N> {
    archive: A,
    runs: R,
    reads: F,
    recorder: FactRecorder<T, L, Q, N>,
    clock: Clock,
}

impl<A, R, F, T, L, Q, N> Replayer<A, R, F, T, L, Q, N>
where
    A: CallbackArchive,
    R: ReplayRuns,
    F: ReplayReads + TenantProfiles + CodeFacts + StaffLedger + QuotaLedger,
    T: TenantProfiles,
    L: FactLedger,
    Q: ReasonQueue,
    N: QuotaNotifier,
{
    /// `recorder` writes facts in apply mode; a dry run never calls it.
    pub fn new(
        archive: A,
        runs: R,
        reads: F,
        recorder: FactRecorder<T, L, Q, N>,
        clock: Clock,
    ) -> Self {
        Self {
            archive,
            runs,
            reads,
            recorder,
            clock,
        }
    }

    /// Handles one page; answers the next page of the run, if any. A store failure leaves
    /// the page to be retried whole: every step of a page is idempotent.
    #[tracing::instrument(skip_all, fields(run = %page.run, phase = ?page.phase, apply = page.apply))]
    pub async fn page(&self, page: &Page) -> Result<Option<Page>, StoreError> {
        let now_ms = (self.clock)();
        if let Err(refusal) = check_run_id(&page.run).and_then(|()| page.selection.check()) {
            tracing::warn!(refusal, "replay page refused");
            if check_run_id(&page.run).is_ok()
                && self.runs.create(&page.run, &page.request(), now_ms).await? != RunStart::Taken
            {
                self.runs
                    .progress(&page.run, &Progress::default(), RunStatus::Refused, now_ms)
                    .await?;
            }
            return Ok(None);
        }
        // A run id names one run: a first page of another request under an existing id would
        // add its figures to that run's record, so it is refused and the run left alone.
        if page.phase == Phase::Events
            && page.after.is_none()
            && self.runs.create(&page.run, &page.request(), now_ms).await? == RunStart::Taken
        {
            tracing::warn!(
                run = %page.run,
                by = %page.by,
                "replay page refused: the run id belongs to another request"
            );
            return Ok(None);
        }
        match page.phase {
            Phase::Events => self.events_page(page, now_ms).await,
            Phase::Codes => self.codes_page(page, now_ms).await,
        }
    }

    async fn events_page(&self, page: &Page, now_ms: u64) -> Result<Option<Page>, StoreError> {
        let (callbacks, next) = self
            .archive
            .page(
                &page.selection,
                page.after.as_deref(),
                EVENTS_PER_PAGE,
                now_ms / 1000,
            )
            .await?;
        let mut progress = Progress {
            pages: 1,
            ..Progress::default()
        };
        for callback in &callbacks {
            let line = if page.apply {
                self.apply_one(&page.selection, callback).await?
            } else {
                self.dry_one(&page.run, &page.selection, callback).await?
            };
            match line {
                Some(line) => {
                    progress.count(line.outcome);
                    self.runs.record_event(&page.run, &line).await?;
                }
                None => progress.filtered += 1,
            }
        }
        let (status, following) = match (next, page.apply) {
            (Some(after), _) => (
                RunStatus::Events,
                Some(Page {
                    after: Some(after),
                    ..page.clone()
                }),
            ),
            (None, false) => (
                RunStatus::Codes,
                Some(Page {
                    phase: Phase::Codes,
                    after: None,
                    ..page.clone()
                }),
            ),
            (None, true) => (RunStatus::Done, None),
        };
        self.runs
            .progress(&page.run, &progress, status, now_ms)
            .await?;
        Ok(following)
    }

    /// Dry run: what the callback would change, with nothing written but the run's record;
    /// `None` for an event of another type than the selection's.
    async fn dry_one(
        &self,
        run: &str,
        selection: &Selection,
        callback: &ArchivedCallback,
    ) -> Result<Option<EventLine>, StoreError> {
        let message = &callback.message;
        let mut line = EventLine {
            position: callback.position.clone(),
            received_at_ms: message.received_at_ms,
            kind: "?".into(),
            outcome: EventOutcome::Poison,
            code: None,
            staff: None,
            detail: String::new(),
        };
        let Some(profile) = self.reads.profile(&message.tenant).await? else {
            line.detail = "no such tenant".into();
            return Ok(Some(line));
        };
        let event = match self.recorder.open(message, &profile) {
            Ok(event) => event,
            Err(FactsError::Poison(reason)) => {
                line.detail = poison_class(&reason);
                return Ok(Some(line));
            }
            Err(FactsError::Store(error)) => return Err(error),
        };
        line.kind = kind_of(&event);
        if !selection.matches(&line.kind) {
            return Ok(None);
        }
        if let Some(add) = facts::add_fact(&message.tenant, &event, &profile) {
            line.code = Some(add.code.to_string());
            line.staff = Some(add.staff.to_string());
            let key = add.business_key();
            line.outcome = if !self.runs.first_sight(run, &key).await? {
                EventOutcome::Duplicate
            } else if !facts::counts_on_code(
                &self.reads,
                &add,
                self.reads
                    .code_config(&message.tenant, &add.code)
                    .await?
                    .as_ref(),
            )
            .await?
            {
                line.detail = "the code does not exist or does not list the member".into();
                EventOutcome::NoFact
            } else if self.reads.add_counted(&message.tenant, &key).await? {
                EventOutcome::AlreadyCounted
            } else {
                self.runs
                    .note_add(run, &add.code, &add.staff, &add.day)
                    .await?;
                self.runs.note_code(run, &add.code).await?;
                line.detail = format!("day {}", add.day);
                EventOutcome::WouldCountAdd
            };
            return Ok(Some(line));
        }
        let staff_event = match StaffEvent::from_callback(&event) {
            Ok(Some(staff_event)) => staff_event,
            Ok(None) => {
                line.outcome = EventOutcome::NoFact;
                return Ok(Some(line));
            }
            Err(malformed) => {
                line.detail = format!("{}: {malformed}", line.kind);
                return Ok(Some(line));
            }
        };
        let at_ms = event
            .create_time()
            .and_then(|t| t.parse::<u64>().ok())
            .map_or(message.received_at_ms, |secs| secs.saturating_mul(1000));
        let (staff, employment) = match &staff_event {
            StaffEvent::Deleted { staff } => (staff, Some(Employment::Resigned)),
            StaffEvent::Changed {
                staff,
                renamed_to: None,
                employment,
                departments: None,
            } => (staff, *employment),
            StaffEvent::Changed { staff, .. } => (staff, None),
            StaffEvent::DepartmentDeleted { department } => {
                line.outcome = EventOutcome::StaffChangeOther;
                line.detail = format!("department {department} deleted");
                for code in self
                    .reads
                    .codes_listing_department(&message.tenant, department)
                    .await?
                {
                    self.runs.note_code(run, &code).await?;
                }
                return Ok(Some(line));
            }
        };
        line.staff = Some(staff.to_string());
        let stored = self.reads.employment(&message.tenant, staff).await?;
        line.outcome = match employment {
            Some(wanted) if stored == Some(wanted) => EventOutcome::StaffFactSame,
            Some(wanted) => {
                self.runs.note_employment(run, staff, wanted, at_ms).await?;
                line.detail = format!(
                    "employment {} -> {}",
                    stored.map_or("unknown", employment_name),
                    employment_name(wanted)
                );
                EventOutcome::StaffFactDiffers
            }
            None => {
                line.detail = "re-keying or departments".into();
                EventOutcome::StaffChangeOther
            }
        };
        if line.outcome != EventOutcome::StaffFactSame {
            for code in self.reads.codes_of_staff(&message.tenant, staff).await? {
                self.runs.note_code(run, &code).await?;
            }
        }
        Ok(Some(line))
    }

    /// Apply: the callback through the fact recorder, exactly as the inbox consumer runs it;
    /// `None` for an event of another type than the selection's (not recorded).
    async fn apply_one(
        &self,
        selection: &Selection,
        callback: &ArchivedCallback,
    ) -> Result<Option<EventLine>, StoreError> {
        let message = &callback.message;
        let mut line = EventLine {
            position: callback.position.clone(),
            received_at_ms: message.received_at_ms,
            kind: "?".into(),
            outcome: EventOutcome::Poison,
            code: None,
            staff: None,
            detail: String::new(),
        };
        // The kind, for the filter and the report (the recorder opens it again).
        if let Some(profile) = self.reads.profile(&message.tenant).await? {
            if let Ok(event) = self.recorder.open(message, &profile) {
                line.kind = kind_of(&event);
            }
        }
        if selection.event_type.is_some() && !selection.matches(&line.kind) {
            return Ok(None);
        }
        match self.recorder.record(message).await {
            Ok(FactOutcome::Add { fact, outcome, .. }) => {
                line.code = Some(fact.code.to_string());
                line.staff = Some(fact.staff.to_string());
                line.outcome = match outcome {
                    facts::CountOutcome::Counted { .. } => EventOutcome::Counted,
                    facts::CountOutcome::AlreadyCounted { .. } => EventOutcome::AlreadyCounted,
                };
            }
            Ok(FactOutcome::StaffChanged { codes, .. }) => {
                line.outcome = EventOutcome::StaffChangeWritten;
                line.detail = format!("{codes} codes sent a reason");
            }
            Ok(FactOutcome::Ignored { .. }) => line.outcome = EventOutcome::NoFact,
            Err(FactsError::Poison(reason)) => line.detail = poison_class(&reason),
            Err(FactsError::Store(error)) => return Err(error),
        }
        Ok(Some(line))
    }

    /// Dry runs' last phase: each noted code recomputed over current plus would-be facts.
    async fn codes_page(&self, page: &Page, now_ms: u64) -> Result<Option<Page>, StoreError> {
        let tenant = &page.selection.tenant;
        let after = match page.after.as_deref() {
            Some(raw) => Some(CodeId::parse(raw).map_err(|e| StoreError::new("replay page", e))?),
            None => None,
        };
        let codes = self
            .runs
            .codes(&page.run, after.as_ref(), CODES_PER_PAGE)
            .await?;
        let mut progress = Progress {
            pages: 1,
            ..Progress::default()
        };
        for code in &codes {
            let Some(snapshot) = self.reads.snapshot(tenant, code, now_ms).await? else {
                continue;
            };
            let today = tenant_day(now_ms, snapshot.profile.timezone);
            let staff: Vec<_> = snapshot.staff.keys().cloned().collect();
            let would = self.runs.would_be(&page.run, code, &staff, &today).await?;
            let change = what_if(code, &snapshot, &would);
            progress.codes += 1;
            progress.codes_changing += u32::from(change.would_change);
            progress.crossings += change.crossings.len() as u32;
            self.runs.record_code(&page.run, &change).await?;
        }
        let following = (codes.len() == CODES_PER_PAGE).then(|| Page {
            after: codes.last().map(ToString::to_string),
            ..page.clone()
        });
        let status = if following.is_some() {
            RunStatus::Codes
        } else {
            RunStatus::Done
        };
        self.runs
            .progress(&page.run, &progress, status, now_ms)
            .await?;
        Ok(following)
    }
}

fn kind_of(event: &crate::wecom::callback::CallbackEvent) -> String {
    format!(
        "{}/{}",
        event
            .event()
            .unwrap_or(event.field("MsgType").unwrap_or("?")),
        event.change_type().unwrap_or("-")
    )
}

/// The part of a poison reason before its first `:` (`signature`, `ciphertext`, `event`...):
/// the class of failure, without the detail of a payload.
fn poison_class(reason: &str) -> String {
    reason
        .split(':')
        .next()
        .unwrap_or("poison")
        .chars()
        .take(80)
        .collect()
}

fn employment_name(employment: Employment) -> &'static str {
    match employment {
        Employment::Active => "active",
        Employment::Resigned => "resigned",
        Employment::Disabled => "disabled",
    }
}

/// The code an inbox message group names, if any (the archive's code filter).
pub fn code_of_group(group_id: &str, tenant: &TenantId) -> Option<CodeId> {
    MessageGroup::code_of(group_id)
        .filter(|(of, _)| of == tenant)
        .map(|(_, code)| code)
}

#[cfg(test)]
mod tests;
