//! MISSION rules 3 to 5, the single writer: only this module changes a code's WeCom list and
//! its "last pushed" record. It recomputes from the facts as they are when it runs (so order,
//! duplicates and lost reasons do not matter as long as one later reason arrives), pushes to
//! WeCom first and records second (so the dedupe check never skips a push WeCom did not
//! receive), and makes no call when the list is unchanged.

mod budget;
mod reason;
pub mod retry;

pub use budget::{
    exhausted, reopens_in, BudgetLimits, BudgetSlot, Spend, WeComBudget, Window, UPDATE_CONTACT_WAY,
};
pub use reason::{Cause, RefreshReason};

use crate::membership::{
    self, AddCounts, CodeConfig, CodeId, DepartmentId, Facts, Membership, RotationSlot, StaffFacts,
    StaffId, TenantRules,
};
use crate::ports::StoreError;
use crate::tenants::{TenantId, TenantProfile};
use crate::wecom::api::{CorpCredentials, FailureClass, WeComError};
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

/// What the refresh writes when WeCom refuses for good (MISSION rules 9 and 11).
#[async_trait::async_trait]
pub trait FailureMarks: Send + Sync {
    /// WeCom no longer knows the code's contact way (41044): the code is not refreshed again.
    async fn mark_code_gone(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        at_ms: u64,
    ) -> Result<(), StoreError>;
    /// WeCom refused `staff` on a contact way: never eligible on this tenant again (sticky,
    /// like every WeCom rejection in `membership::fold`).
    async fn mark_staff_unusable(
        &self,
        tenant: &TenantId,
        staff: &StaffId,
        errcode: i64,
        at_ms: u64,
    ) -> Result<(), StoreError>;
    /// The code's last refresh failed for good or was dead-lettered: the sweep recomputes it.
    async fn mark_dirty(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        class: FailureClass,
        at_ms: u64,
    ) -> Result<(), StoreError>;
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
    /// No budget left, or WeCom throttled (45009/45033): the reasons wait `retry_after_ms`
    /// in a retry queue. Not a failure (rule 6).
    Throttled {
        retry_after_ms: u64,
    },
    /// WeCom answered 41044: the code is marked gone and dirty, and an alert raised.
    CodeGone,
}

#[derive(Debug, thiserror::Error)]
pub enum RefreshError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("WeCom refused or failed the push: {0}")]
    WeCom(#[from] WeComError),
}

/// Most WeCom calls one refresh makes while finding which listed staff WeCom refuses; the
/// rest is found by the next refresh (each call is charged to the budget all the same).
const MAX_PROBES: usize = 10;
/// Recompute-and-push rounds after staff were found unusable.
const MAX_ROUNDS: usize = 3;

/// Why one budgeted push did not go through.
enum PushFailure {
    Budget(u64),
    WeCom(WeComError),
    Store(StoreError),
}

impl From<StoreError> for PushFailure {
    fn from(error: StoreError) -> Self {
        Self::Store(error)
    }
}

pub struct Refresher<F, P, B> {
    facts: F,
    pusher: P,
    budget: B,
    clock: Clock,
}

impl<F: CodeFacts + FailureMarks, P: ContactWayPusher, B: WeComBudget> Refresher<F, P, B> {
    pub fn new(facts: F, pusher: P, budget: B, clock: Clock) -> Self {
        Self {
            facts,
            pusher,
            budget,
            clock,
        }
    }

    pub fn facts(&self) -> &F {
        &self.facts
    }

    pub fn now_ms(&self) -> u64 {
        (self.clock)()
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
            .refresh_snapshot(tenant, code, snapshot.clone(), fact_at_ms, now_ms)
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
            // Requeued reasons are counted when they are finally refreshed.
            Outcome::Throttled { .. } => return Ok(outcome),
            Outcome::CodeNotFound | Outcome::NotCreated | Outcome::CodeGone => Tally {
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
        mut snapshot: CodeSnapshot,
        fact_at_ms: &[u64],
        now_ms: u64,
    ) -> Result<Outcome, RefreshError> {
        let Some(config_id) = snapshot.code.config_id.clone() else {
            return Ok(Outcome::NotCreated);
        };
        let mut pushed = None;
        for _ in 0..MAX_ROUNDS {
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
            let users = users.to_vec();
            let rotation = snapshot.rotation(&membership);
            if snapshot.wecom_has(&users) {
                let stored = snapshot
                    .last_pushed
                    .as_ref()
                    .and_then(|p| p.rotation.as_ref());
                if let Some(rotation) = rotation.as_ref().filter(|r| Some(*r) != stored) {
                    self.facts.record_rotation(tenant, code, rotation).await?;
                }
                return Ok(pushed.map_or(Outcome::Unchanged, Outcome::Pushed));
            }
            let fallback = matches!(membership, Membership::Fallback(_));
            let push = Push {
                tenant,
                code,
                config_id: &config_id,
                fact_at_ms,
                fallback,
                rotation,
            };
            let failure = match self.push(&push, &mut snapshot, &users).await {
                Ok(()) => return Ok(Outcome::Pushed(users)),
                Err(failure) => failure,
            };
            let error = match failure {
                PushFailure::WeCom(error) if error.class() == FailureClass::StaffUnusable => error,
                other => return self.settle(tenant, code, other, now_ms).await,
            };
            match self
                .find_unusable(&push, &mut snapshot, &users, &error)
                .await
            {
                Ok(Some(list)) => pushed = Some(list),
                Ok(None) => {}
                Err(failure) => return self.settle(tenant, code, failure, now_ms).await,
            }
        }
        // Still not settled after several rounds: let the next reason carry on.
        Ok(Outcome::Throttled { retry_after_ms: 0 })
    }

    /// Spends one unit of the tenant's budget, pushes `users`, records the push, and keeps
    /// `snapshot` in step with what WeCom now holds.
    async fn push(
        &self,
        push: &Push<'_>,
        snapshot: &mut CodeSnapshot,
        users: &[StaffId],
    ) -> Result<(), PushFailure> {
        let now_ms = (self.clock)();
        if let Spend::Exhausted {
            window,
            retry_after_ms,
        } = self
            .budget
            .spend(push.tenant, UPDATE_CONTACT_WAY, now_ms)
            .await?
        {
            tracing::info!(?window, retry_after_ms, "no WeCom budget left; requeued");
            return Err(PushFailure::Budget(retry_after_ms));
        }
        let wire: Vec<String> = users.iter().map(|u| u.as_str().to_owned()).collect();
        self.pusher
            .replace_users(&snapshot.credentials(), push.config_id, &wire)
            .await
            .map_err(PushFailure::WeCom)?;
        let record = PushRecord {
            users: users.to_vec(),
            // Completion time: the push latency ends when WeCom accepted.
            pushed_at_ms: (self.clock)(),
            fallback: push.fallback,
            fact_at_ms: push.fact_at_ms.to_vec(),
            rotation: push.rotation.clone(),
        };
        self.facts
            .record_push(push.tenant, push.code, &record)
            .await?;
        snapshot.last_pushed = Some(PushedList {
            users: record.users,
            pushed_at_ms: record.pushed_at_ms,
            starved: false,
            rotation: record.rotation,
        });
        Ok(())
    }

    /// WeCom refused `users` because of some listed user, without saying which (§6). The
    /// suspects are the users WeCom does not hold yet (it accepted the others before), or
    /// everyone when there are none; they are tried one at a time on top of the others, and
    /// each one WeCom refuses is marked unusable. Answers the list left on WeCom, if any
    /// probe pushed one.
    async fn find_unusable(
        &self,
        push: &Push<'_>,
        snapshot: &mut CodeSnapshot,
        users: &[StaffId],
        error: &WeComError,
    ) -> Result<Option<Vec<StaffId>>, PushFailure> {
        let errcode = error.errcode().unwrap_or_default();
        let held = snapshot.wecom_list().to_vec();
        let added: Vec<StaffId> = users
            .iter()
            .filter(|u| !held.contains(u))
            .cloned()
            .collect();
        let (mut accepted, mut suspects): (Vec<StaffId>, Vec<StaffId>) =
            if added.is_empty() || added.len() == users.len() {
                (Vec::new(), users.to_vec())
            } else {
                let base = users
                    .iter()
                    .filter(|u| !added.contains(u))
                    .cloned()
                    .collect();
                (base, added)
            };
        let mut left_on_wecom = None;
        let mut probes = 0;
        if !accepted.is_empty() {
            probes += 1;
            match self.push(push, snapshot, &accepted).await {
                Ok(()) => left_on_wecom = Some(accepted.clone()),
                Err(PushFailure::WeCom(e)) if e.class() == FailureClass::StaffUnusable => {
                    // The refusal is among the users WeCom held: suspect everyone.
                    accepted.clear();
                    suspects = users.to_vec();
                }
                Err(other) => return Err(other),
            }
        }
        // One suspect on top of an accepted list (or alone) is the one the first push failed on.
        if suspects.len() == 1 {
            self.mark_unusable(push.tenant, snapshot, &suspects[0], errcode)
                .await?;
            return Ok(left_on_wecom);
        }
        for suspect in suspects {
            if probes >= MAX_PROBES {
                break;
            }
            probes += 1;
            let trial: Vec<StaffId> = users
                .iter()
                .filter(|u| accepted.contains(u) || **u == suspect)
                .cloned()
                .collect();
            match self.push(push, snapshot, &trial).await {
                Ok(()) => {
                    accepted = trial.clone();
                    left_on_wecom = Some(trial);
                }
                Err(PushFailure::WeCom(e)) if e.class() == FailureClass::StaffUnusable => {
                    self.mark_unusable(
                        push.tenant,
                        snapshot,
                        &suspect,
                        e.errcode().unwrap_or(errcode),
                    )
                    .await?;
                }
                Err(other) => return Err(other),
            }
        }
        Ok(left_on_wecom)
    }

    async fn mark_unusable(
        &self,
        tenant: &TenantId,
        snapshot: &mut CodeSnapshot,
        staff: &StaffId,
        errcode: i64,
    ) -> Result<(), StoreError> {
        tracing::error!(
            alert = "staff_unusable",
            staff = %staff,
            errcode,
            "WeCom refuses this staff member on contact ways; they are excluded on this tenant"
        );
        self.facts
            .mark_staff_unusable(tenant, staff, errcode, (self.clock)())
            .await?;
        if let Some(facts) = snapshot.staff.get_mut(staff) {
            facts.rejected_by_wecom = true;
        }
        Ok(())
    }

    /// The outcome of a push that failed for a reason the refresh does not resolve itself.
    async fn settle(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        failure: PushFailure,
        now_ms: u64,
    ) -> Result<Outcome, RefreshError> {
        let error = match failure {
            PushFailure::Budget(retry_after_ms) => {
                return Ok(Outcome::Throttled { retry_after_ms })
            }
            PushFailure::Store(error) => return Err(error.into()),
            PushFailure::WeCom(error) => error,
        };
        match error.class() {
            FailureClass::Throttled => {
                // 45009 blocks for the rest of WeCom's window (§7); 45033 is about
                // concurrency, which the next minute relieves as well.
                let retry_after_ms = reopens_in(Window::Minute, (self.clock)());
                tracing::warn!(
                    errcode = error.errcode(),
                    retry_after_ms,
                    "WeCom throttled the push; requeued"
                );
                Ok(Outcome::Throttled { retry_after_ms })
            }
            FailureClass::CodeGone => {
                tracing::error!(
                    alert = "code_gone",
                    errcode = error.errcode(),
                    "WeCom no longer knows this code's contact way; it is not refreshed again"
                );
                self.facts.mark_code_gone(tenant, code, now_ms).await?;
                self.facts
                    .mark_dirty(tenant, code, FailureClass::CodeGone, now_ms)
                    .await?;
                Ok(Outcome::CodeGone)
            }
            _ => Err(error.into()),
        }
    }
}

/// What every push of one refresh shares.
struct Push<'a> {
    tenant: &'a TenantId,
    code: &'a CodeId,
    config_id: &'a str,
    fact_at_ms: &'a [u64],
    fallback: bool,
    rotation: Option<Vec<RotationSlot>>,
}

#[cfg(test)]
mod tests;
