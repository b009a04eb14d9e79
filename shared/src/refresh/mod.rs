//! MISSION rules 3 to 5, the single writer: only this module changes a code's WeCom list and
//! its "last pushed" record. It recomputes from the facts as they are when it runs (so order,
//! duplicates and lost reasons do not matter as long as one later reason arrives), pushes to
//! WeCom first and records second (so the dedupe check never skips a push WeCom did not
//! receive), and makes no call when the list is unchanged.

mod reason;

pub use reason::{Cause, RefreshReason};

use crate::membership::{
    self, AddCounts, CodeConfig, CodeId, DepartmentId, Facts, Membership, RotationSlot, StaffFacts,
    StaffId, TenantRules,
};
use crate::ports::StoreError;
use crate::tenants::{TenantId, TenantProfile};
use crate::wecom::api::{CorpCredentials, WeComError};
use crate::Clock;
use std::collections::{BTreeSet, HashMap};

/// A code as the admin configured it, with the WeCom contact way it owns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredCode {
    pub config: CodeConfig,
    /// WeCom's id of the contact way; `None` until the admin's create call succeeded.
    pub config_id: Option<String>,
    /// The list WeCom created the contact way with: what WeCom holds until the first push.
    pub created_with: Vec<StaffId>,
}

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
    /// the contact way was created with.
    pub fn wecom_list(&self) -> &[StaffId] {
        match &self.last_pushed {
            Some(last) => &last.users,
            None => &self.code.created_with,
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

    pub fn credentials(&self) -> CorpCredentials {
        CorpCredentials {
            corp_id: self.profile.corp_id.clone(),
            corp_secret: self.profile.corp_secret.clone(),
        }
    }
}

/// One completed push, as recorded after WeCom accepted it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushRecord {
    pub users: Vec<StaffId>,
    pub pushed_at_ms: u64,
    pub fallback: bool,
    /// When the facts behind the coalesced reasons were written.
    pub fact_at_ms: Vec<u64>,
    /// The landing page's rotation from the same recompute (sequenced and quota codes).
    pub rotation: Option<Vec<RotationSlot>>,
}

/// Reads a code's facts and keeps its "last pushed" record.
#[async_trait::async_trait]
pub trait CodeFacts: Send + Sync {
    /// Strongly consistent reads of everything the recompute needs for the tenant's day at
    /// `now_ms`. `Ok(None)` when the tenant or the code does not exist.
    async fn snapshot(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        now_ms: u64,
    ) -> Result<Option<CodeSnapshot>, StoreError>;
    /// Records a push WeCom accepted: the last-pushed list and a history entry.
    async fn record_push(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        push: &PushRecord,
    ) -> Result<(), StoreError>;
    /// Marks the code starved (nobody eligible, no fallback) without touching the last list.
    async fn record_starved(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        at_ms: u64,
    ) -> Result<(), StoreError>;
    /// Replaces the landing page's rotation when the WeCom list stayed the same but the
    /// rotation did not (a quota member's share of a round shrinks with each add).
    async fn record_rotation(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        rotation: &[RotationSlot],
    ) -> Result<(), StoreError> {
        let _ = (tenant, code, rotation);
        Ok(())
    }
    /// Adds one refresh's tally to the tenant's counters for `day`. Stores that keep no
    /// counters (test fakes) need not implement it.
    async fn record_tally(
        &self,
        _tenant: &TenantId,
        _day: &str,
        _tally: &Tally,
    ) -> Result<(), StoreError> {
        Ok(())
    }
}

/// What one refresh did, for the tenant's daily counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    pub reasons: u32,
    pub recomputes: u32,
    pub pushes: u32,
    pub unchanged: u32,
    pub starved: u32,
}

/// Replaces the user list of a WeCom contact way.
#[async_trait::async_trait]
pub trait ContactWayPusher: Send + Sync {
    async fn replace_users(
        &self,
        corp: &CorpCredentials,
        config_id: &str,
        users: &[String],
    ) -> Result<(), WeComError>;
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Pushed(Vec<StaffId>),
    /// The recomputed list equals the last pushed one: no call.
    Unchanged,
    /// Nobody eligible and no fallback: nothing pushed, alert raised.
    Starved,
    /// No such tenant or code (deleted, or a reason for a code that never existed).
    CodeNotFound,
    /// The code exists but its contact way is not created yet; its creation sends a reason.
    NotCreated,
}

#[derive(Debug, thiserror::Error)]
pub enum RefreshError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("WeCom refused or failed the push: {0}")]
    WeCom(#[from] WeComError),
}

pub struct Refresher<F, P> {
    facts: F,
    pusher: P,
    clock: Clock,
}

impl<F: CodeFacts, P: ContactWayPusher> Refresher<F, P> {
    pub fn new(facts: F, pusher: P, clock: Clock) -> Self {
        Self {
            facts,
            pusher,
            clock,
        }
    }

    pub fn facts(&self) -> &F {
        &self.facts
    }

    /// One recompute for `code`, however many reasons (with facts written at `fact_at_ms`)
    /// asked for it.
    #[tracing::instrument(skip(self, fact_at_ms), fields(tenant = %tenant, code = %code, reasons = fact_at_ms.len()))]
    pub async fn refresh(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        fact_at_ms: &[u64],
    ) -> Result<Outcome, RefreshError> {
        let now_ms = (self.clock)();
        let Some(snapshot) = self.facts.snapshot(tenant, code, now_ms).await? else {
            return Ok(Outcome::CodeNotFound);
        };
        let outcome = self
            .refresh_snapshot(tenant, code, &snapshot, fact_at_ms, now_ms)
            .await?;
        let reasons = u32::try_from(fact_at_ms.len()).unwrap_or(u32::MAX);
        let tally = match &outcome {
            Outcome::Pushed(_) => Tally {
                reasons,
                recomputes: 1,
                pushes: 1,
                ..Tally::default()
            },
            Outcome::Unchanged => Tally {
                reasons,
                recomputes: 1,
                unchanged: 1,
                ..Tally::default()
            },
            Outcome::Starved => Tally {
                reasons,
                recomputes: 1,
                starved: 1,
                ..Tally::default()
            },
            Outcome::CodeNotFound | Outcome::NotCreated => Tally {
                reasons,
                ..Tally::default()
            },
        };
        let day = crate::tenants::tenant_day(now_ms, snapshot.profile.timezone);
        // Counters are for people; a failure to count must not fail (and so repeat) a push.
        if let Err(error) = self.facts.record_tally(tenant, &day, &tally).await {
            tracing::warn!(error = %error, "refresh tally not recorded");
        }
        Ok(outcome)
    }

    async fn refresh_snapshot(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        snapshot: &CodeSnapshot,
        fact_at_ms: &[u64],
        now_ms: u64,
    ) -> Result<Outcome, RefreshError> {
        let Some(config_id) = snapshot.code.config_id.clone() else {
            return Ok(Outcome::NotCreated);
        };
        let membership = snapshot.recompute();
        let Some(users) = membership.users() else {
            tracing::error!(
                alert = "code_starved",
                "nobody is eligible and the code has no usable fallback; the last list stays"
            );
            if !snapshot.last_pushed.as_ref().is_some_and(|p| p.starved) {
                self.facts.record_starved(tenant, code, now_ms).await?;
            }
            return Ok(Outcome::Starved);
        };
        let rotation = snapshot.rotation(&membership);
        if snapshot.wecom_has(users) {
            let stored = snapshot.last_pushed.as_ref().and_then(|p| p.rotation.as_ref());
            if let Some(rotation) = rotation.as_ref().filter(|r| Some(*r) != stored) {
                self.facts.record_rotation(tenant, code, rotation).await?;
            }
            return Ok(Outcome::Unchanged);
        }
        let wire: Vec<String> = users.iter().map(|u| u.as_str().to_owned()).collect();
        self.pusher
            .replace_users(&snapshot.credentials(), &config_id, &wire)
            .await?;
        let record = PushRecord {
            users: users.to_vec(),
            // Completion time: the push latency ends when WeCom accepted.
            pushed_at_ms: (self.clock)(),
            fallback: matches!(membership, Membership::Fallback(_)),
            fact_at_ms: fact_at_ms.to_vec(),
            rotation,
        };
        self.facts.record_push(tenant, code, &record).await?;
        Ok(Outcome::Pushed(users.to_vec()))
    }
}

#[cfg(test)]
mod tests;
