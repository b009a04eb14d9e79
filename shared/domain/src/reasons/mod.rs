//! What a written fact sends (docs/rules.md rule 2): a refresh reason to each code it may
//! change, or, when it reaches many codes, one `FanOut` that the fan-out function expands
//! into those reasons. Reasons carry no state: the single writer recomputes from the facts.
//! `Fact` is the one place a fact becomes reasons.

mod ports;

pub use ports::{FanOutQueue, ReasonQueue};

use crate::ids::TenantId;
use crate::ids::{CodeId, DepartmentId, StaffId};
use crate::intake::MessageGroup;
use sha2::{Digest, Sha256};

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cause {
    /// An add through this code was counted.
    AddCounted,
    /// The code's configuration was created or edited.
    CodeEdited,
    /// A staff member on this code changed (online flag, employment).
    StaffChanged,
    /// A counted add took a staff member on this code to a limit.
    LimitReached,
    /// An operator or a sweep asked for a recompute.
    Requested,
    /// A staff member on this code started or ended a shift (the schedule tick).
    ShiftChanged,
    /// The tenant's day ended: staff removed for a daily limit or the company cap may be back.
    DayRolledOver,
    /// The sweep found the code dirty: push even a list the record says WeCom has.
    Resync,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RefreshReason {
    pub tenant: TenantId,
    pub code: CodeId,
    pub cause: Cause,
    /// When the fact behind this reason was written; the push latency is measured from it.
    pub fact_at_ms: u64,
    /// Identifies the fact (an add's business key, an edit's version...). Two reasons for the
    /// same fact are one reason.
    pub fact_key: String,
}

impl RefreshReason {
    /// All reasons of one code share a message group: one writer per code.
    pub fn group_id(&self) -> String {
        MessageGroup::Code {
            tenant: self.tenant.clone(),
            code: self.code.as_str().to_owned(),
        }
        .id()
    }

    pub fn deduplication_id(&self) -> String {
        let mut hasher = Sha256::new();
        for part in [self.tenant.as_str(), self.code.as_str(), &self.fact_key] {
            hasher.update(part.as_bytes());
            hasher.update([0u8]);
        }
        hex::encode(hasher.finalize())
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a refresh reason always serialises")
    }
}

/// A fact as its refresh reasons name it: the tenant, why the codes should be recomputed,
/// when the fact was written and its identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fact {
    pub tenant: TenantId,
    pub cause: Cause,
    /// When the fact was written; every reason carries it, so the push latency starts there.
    pub at_ms: u64,
    /// The fact's identity: two reasons for the same fact and code are one reason.
    pub key: String,
}

impl Fact {
    /// The reason that tells `code` about this fact.
    pub fn reason_for(&self, code: &CodeId) -> RefreshReason {
        RefreshReason {
            tenant: self.tenant.clone(),
            code: code.clone(),
            cause: self.cause,
            fact_at_ms: self.at_ms,
            fact_key: self.key.clone(),
        }
    }

    /// One reason per code, all alike but the code.
    pub fn reasons<'a>(
        &'a self,
        codes: impl IntoIterator<Item = &'a CodeId> + 'a,
    ) -> impl Iterator<Item = RefreshReason> + 'a {
        codes.into_iter().map(|code| self.reason_for(code))
    }
}

/// Where the codes of a fan-out come from.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Source {
    /// Every code that may route to the staff member: as member, as fallback, or through a
    /// department of theirs that the code lists.
    Staff { staff: StaffId },
    /// Every code that lists the department.
    Department { department: DepartmentId },
    /// Every code of the tenant.
    Tenant,
}

/// A reason to recompute every code of its sources, for one fact.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FanOut {
    pub tenant: TenantId,
    pub sources: Vec<Source>,
    pub cause: Cause,
    /// When the fact was written; every reason carries it, so the push latency starts there.
    pub fact_at_ms: u64,
    /// The fact's identity: it deduplicates the fan-out's reasons, and names the fan-out
    /// with `part` (`mark_key`).
    pub fact_key: String,
    /// Which part of its fact this fan-out is, when the fact was split over several (a shift
    /// edge of more staff than one fan-out takes): each part is a fan-out of its own for the
    /// marks of docs/rules.md rule 11, while their reasons are the one fact's. A code several
    /// parts reach is sent reasons with one deduplication id: refresh.fifo keeps the first
    /// and drops the rest it is sent within its five-minute deduplication window, so the code
    /// is recomputed once (coalescing before the queue).
    #[serde(default, skip_serializing_if = "is_first_part")]
    pub part: u32,
    /// The codes up to this one (in code order) were sent by an earlier part of the fan-out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent_through: Option<CodeId>,
}

fn is_first_part(part: &u32) -> bool {
    *part == 0
}

impl FanOut {
    pub fn new(
        tenant: TenantId,
        sources: Vec<Source>,
        cause: Cause,
        fact_at_ms: u64,
        fact_key: String,
    ) -> Self {
        Self {
            tenant,
            sources,
            cause,
            fact_at_ms,
            fact_key,
            part: 0,
            sent_through: None,
        }
    }

    /// This fan-out as part `part` of its fact.
    #[must_use]
    pub fn part(self, part: u32) -> Self {
        Self { part, ..self }
    }

    /// The fan-out's own name among its fact's parts: the key of its mark (rule 11).
    pub fn mark_key(&self) -> String {
        match self.part {
            0 => self.fact_key.clone(),
            part => format!("{}#{part}", self.fact_key),
        }
    }

    /// The fact this fan-out tells its codes about.
    pub fn fact(&self) -> Fact {
        Fact {
            tenant: self.tenant.clone(),
            cause: self.cause,
            at_ms: self.fact_at_ms,
            key: self.fact_key.clone(),
        }
    }

    /// The rest of this fan-out, after `code`.
    pub fn resumed_after(&self, code: &CodeId) -> Self {
        Self {
            sent_through: Some(code.clone()),
            ..self.clone()
        }
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a fan-out always serialises")
    }
}
