//! Refresh reasons: events keyed by code that carry a reason to recompute, never state
//! (docs/rules.md rule 2).

use crate::intake::MessageGroup;
use crate::membership::CodeId;
use crate::tenants::TenantId;
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
