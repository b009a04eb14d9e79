use super::StoredCode;
use crate::ids::{DepartmentId, StaffId, TenantId};
use crate::lanes::CodeAge;
use crate::membership::{
    self, AddCounts, Facts, Membership, RotationSlot, StaffFacts, TenantRules,
};
use crate::tenants::TenantProfile;
use crate::wecom::contact_way::CorpCredentials;
use std::collections::{BTreeSet, HashMap};

/// The list WeCom last accepted for a code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushedList {
    pub users: Vec<StaffId>,
    pub pushed_at_ms: u64,
    /// The code was starved at its last recompute (nothing pushed then).
    pub starved: bool,
    /// The landing page's rotation written with it (sequenced and quota codes).
    pub rotation: Option<Vec<RotationSlot>>,
}

/// The code's lease as a snapshot read it, beside the facts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LeaseSeen {
    /// How many times the lease was ever taken: a writer that takes it with this count
    /// expected knows nobody took it, and so nobody pushed, since the read.
    pub acquisitions: u64,
    /// Until when a writer holds it (0, or a time passed: nobody).
    pub held_until_ms: u64,
}

impl LeaseSeen {
    pub fn free_at(&self, now_ms: u64) -> bool {
        self.held_until_ms <= now_ms
    }
}

/// Everything a recompute of one code reads, loaded at processing time.
#[derive(Debug, Clone)]
pub struct CodeSnapshot {
    pub profile: TenantProfile,
    pub code: StoredCode,
    pub staff: HashMap<StaffId, StaffFacts>,
    pub adds: HashMap<StaffId, AddCounts>,
    /// Stored membership of the departments the code lists.
    pub departments: HashMap<DepartmentId, BTreeSet<StaffId>>,
    /// The instant the snapshot was read for: "today" and work schedules are read at it.
    pub now_ms: u64,
    pub last_pushed: Option<PushedList>,
    /// When the code was last marked dirty, if it is (`crate::dirty`): its refresh pushes
    /// whatever the record says, and clears the mark once it completes.
    pub dirty_since_ms: Option<u64>,
    /// The acquisition links kept for the staff read (`crate::landing`), by staff member.
    pub links: HashMap<StaffId, String>,
    /// The code's lease, read with the rest: a refresh that finds it free and has nothing to
    /// write takes no lease (`crate::refresh`).
    pub lease: LeaseSeen,
    /// When the code was created and last edited: the lane policy's input, read with the
    /// code's item rather than on its own (`crate::lanes`).
    pub age: CodeAge,
    /// The tenant's pause, read with its profile: a paused tenant's refresh calls nothing
    /// (`crate::tenants::TenantPause`).
    pub tenant_paused: Option<crate::tenants::TenantPause>,
}

impl CodeSnapshot {
    pub fn facts(&self) -> Facts<'_> {
        Facts {
            code: &self.code.config,
            staff: &self.staff,
            adds: &self.adds,
            departments: &self.departments,
            now: self.profile.timezone.at(self.now_ms),
            tenant: TenantRules {
                company_daily_cap: self.profile.company_daily_cap,
            },
        }
    }

    /// The list WeCom routes to, by our records: the last push, or before any push the list
    /// the contact way was created with. A record with no users holds only a starved mark
    /// (an empty list is never pushed), so WeCom still has the creation's list then.
    pub fn wecom_list(&self) -> &[StaffId] {
        match &self.last_pushed {
            Some(last) if !last.users.is_empty() => &last.users,
            _ => &self.code.created_with,
        }
    }

    /// WeCom already routes to exactly `users`, and the last recompute was not starved (a
    /// starved code's record must be cleared by a push).
    pub fn wecom_has(&self, users: &[StaffId]) -> bool {
        !self.last_pushed.as_ref().is_some_and(|last| last.starved) && self.wecom_list() == users
    }

    pub fn recompute(&self) -> Membership {
        membership::recompute(&self.facts())
    }

    /// The landing page's rotation for `membership` (sequenced and quota codes only).
    pub fn rotation(&self, membership: &Membership) -> Option<Vec<RotationSlot>> {
        membership::rotation(&self.facts(), membership)
    }

    pub fn credentials(&self, tenant: &TenantId) -> CorpCredentials {
        self.profile.credentials(tenant)
    }
}
