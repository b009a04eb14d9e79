//! The dirty set (docs/rules.md rule 11): the codes whose WeCom list may not be what their
//! facts say, because a path gave up on them or the sweep's read-back found a difference.
//!
//! - Every path that gives up on a code marks it (`DirtyMarks::mark_dirty`): a refresh that
//!   failed for good or was dead-lettered, the last receive before SQS's own redrive (a
//!   timeout or a crash may follow), an inbox message naming the code that was parked or
//!   dead-lettered, a fan-out that gave up, and the sweep's drift read-back.
//! - A mark carries when and why it was made, and when the sweep should next send the code a
//!   `resync` reason. The sweep finds due marks by a query on that time, never a scan.
//! - Any refresh of a marked code pushes, even a list the record says WeCom has. The mark is
//!   cleared only by a refresh that began after it was made and completed; the clear is
//!   conditional on the mark's time, so a newer mark is never lost.
//! - A fan-out that gives up (its last receive before the fan-out queue's own redrive) cannot
//!   name its codes without the expansion it may not survive, so it marks itself instead
//!   (`FanOutMarks::mark_fan_out`, a `FanOutMark` holding the fan-out). The sweep sends a due
//!   one to the fan-out queue again; an expansion that began after the mark and completed
//!   clears it, on the same conditional terms as a code's mark.

mod ports;

pub use ports::{DirtyMarks, FanOutMarks};

use crate::ids::CodeId;
use crate::ids::TenantId;
use crate::reasons::FanOut;
use crate::wecom::errors::FailureClass;

/// Why a code was marked dirty.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DirtyWhy {
    /// The refresh failed for good with this class, or was dead-lettered with it.
    RefreshFailed(FailureClass),
    /// The code's reasons were on their last receive before SQS's own redrive: a timeout or
    /// a crash of this receive moves them to the dead-letter queue without any code of ours.
    LastReceive,
    /// An inbox message naming the code was parked or dead-lettered: a fact may be missing.
    InboxGaveUp,
    /// A fan-out reaching the code gave up: the code may not have been told of a fact.
    FanOutGaveUp,
    /// WeCom's copy of the contact way differs from the list we recorded as pushed.
    Drift,
    /// The recorded list differs from the recompute of the current facts (a reason was lost).
    Stale,
}

impl DirtyWhy {
    /// The stored and logged form: `refresh_failed:transient`, `drift`...
    pub fn label(self) -> String {
        match self {
            Self::RefreshFailed(class) => format!("refresh_failed:{}", class.as_str()),
            Self::LastReceive => "last_receive".into(),
            Self::InboxGaveUp => "inbox_gave_up".into(),
            Self::FanOutGaveUp => "fan_out_gave_up".into(),
            Self::Drift => "drift".into(),
            Self::Stale => "stale".into(),
        }
    }

    pub fn parse(label: &str) -> Option<Self> {
        Some(match label {
            "last_receive" => Self::LastReceive,
            "inbox_gave_up" => Self::InboxGaveUp,
            "fan_out_gave_up" => Self::FanOutGaveUp,
            "drift" => Self::Drift,
            "stale" => Self::Stale,
            other => {
                Self::RefreshFailed(FailureClass::parse(other.strip_prefix("refresh_failed:")?)?)
            }
        })
    }

    /// Found by the sweep's read-back: its repair counts in the tenant's drift report.
    pub fn found_by_read_back(self) -> bool {
        matches!(self, Self::Drift | Self::Stale)
    }
}

/// One code's mark, as the sweep reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirtyMark {
    pub tenant: TenantId,
    pub code: CodeId,
    /// When the latest mark was made: only a refresh that began after it clears it.
    pub marked_at_ms: u64,
    /// Why the latest mark was made (`None` for a label this version does not know).
    pub why: Option<DirtyWhy>,
    /// Resync reasons the sweep has sent for it.
    pub resyncs: u32,
    /// When the sweep sends the next one.
    pub due_at_ms: u64,
    /// Set while the mark is a stale record the sweep's sample saw and has not confirmed.
    pub suspect: Option<StaleSuspect>,
}

/// A record the drift sample found behind the facts, at first sight. That is also what every
/// code with a reason still queued looks like, so it is not resynced nor counted for the
/// guard yet: its mark is due only after the settle period, and any refresh that begins
/// after it (the queued reason arriving) clears it. One still stale then is confirmed, and
/// counted with the sample it was found in, whose figures it carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StaleSuspect {
    /// Codes the sample read back...
    pub sample_read: u32,
    /// ...and of those, codes whose WeCom list differed from our record.
    pub sample_drifted: u32,
}

/// A fan-out the fan-out function gave up on, as the sweep reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FanOutMark {
    /// The fan-out as it was given up (a continuation carries how far it had got); the sweep
    /// sends it again from its first code.
    pub fan_out: FanOut,
    /// When the latest mark was made: only an expansion that began after it clears it.
    pub marked_at_ms: u64,
    /// Why (`None` for a label this version does not know).
    pub why: Option<DirtyWhy>,
    /// Times the sweep has sent it to the fan-out queue again.
    pub resends: u32,
    /// When the sweep sends it again next.
    pub due_at_ms: u64,
}

/// The longest wait between two resyncs of a mark that keeps failing.
pub const LONGEST_RESYNC_WAIT_MS: u64 = 6 * 60 * 60 * 1000;

/// When the sweep sends the next resync of a mark it has now sent `resyncs` for: one period
/// after the first, doubling with each, at most `LONGEST_RESYNC_WAIT_MS`. A code that fails
/// for good (a list WeCom will never take) is retried ever more rarely, never every period.
pub fn next_resync_at(now_ms: u64, period_ms: u64, resyncs: u32) -> u64 {
    let doubling = 1u64 << resyncs.saturating_sub(1).min(20);
    let wait = period_ms
        .saturating_mul(doubling)
        .min(LONGEST_RESYNC_WAIT_MS.max(period_ms));
    now_ms.saturating_add(wait)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_why_reads_back_from_its_label() {
        let all = [
            DirtyWhy::RefreshFailed(FailureClass::Transient),
            DirtyWhy::RefreshFailed(FailureClass::ListTooLong),
            DirtyWhy::LastReceive,
            DirtyWhy::InboxGaveUp,
            DirtyWhy::FanOutGaveUp,
            DirtyWhy::Drift,
            DirtyWhy::Stale,
        ];
        for why in all {
            assert_eq!(DirtyWhy::parse(&why.label()), Some(why), "{}", why.label());
        }
        assert_eq!(DirtyWhy::parse("refresh_failed:nonsense"), None);
        assert_eq!(DirtyWhy::parse("whatever"), None);
    }

    #[test]
    fn a_mark_that_keeps_failing_is_resynced_ever_more_rarely_up_to_six_hours() {
        let period = 5 * 60_000;
        assert_eq!(next_resync_at(0, period, 1), period);
        assert_eq!(next_resync_at(0, period, 2), 2 * period);
        assert_eq!(next_resync_at(0, period, 3), 4 * period);
        assert_eq!(next_resync_at(0, period, 40), LONGEST_RESYNC_WAIT_MS);
        assert_eq!(next_resync_at(1_000, period, 0), 1_000 + period);
    }
}
