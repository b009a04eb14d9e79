//! docs/rules.md rules 2 and 8: whoever observes a business fact writes it first, idempotently,
//! as a claim keyed by the business facts (never the delivery id), and only then emits a
//! refresh reason for each code it may change.

mod ports;
mod quota;
mod staff;

pub use ports::{AddLedger, FactLedger, QuotaLedger, QuotaNotifier, StaffLedger, TenantProfiles};

pub use quota::{
    finish_claim, ClaimOutcome, Crossing, LimitClaim, StaffQuotaReached, OWNER_LEASE_MS,
};
pub use staff::{MalformedContactEvent, StaffEvent};

/// The fact key of the fan-out a given-up inbox message of a staff member or the tenant
/// marks: one mark per tenant, whichever message.
pub const INBOX_GAVE_UP: &str = "inbox-gave-up";

use crate::ids::TenantId;
use crate::ids::{CodeId, StaffId};
use crate::intake::GroupReach;
use crate::intake::InboxMessage;
use crate::membership::{CodeConfig, Switches};
use crate::reasons::{Cause, Fact, FanOut, ReasonQueue, RefreshReason, Source};
use crate::tenants::{tenant_day, TenantProfile};
use crate::wecom::callback::{CallbackEvent, Envelope};
use crate::wecom::crypto::CryptoError;
use crate::StoreError;
use crate::{Clock, Pause};
use sha2::{Digest, Sha256};

/// A customer added a staff member through a code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddFact {
    pub tenant: TenantId,
    pub code: CodeId,
    pub staff: StaffId,
    pub external_user: String,
    /// WeCom's CreateTime of the add, seconds.
    pub created_at_secs: u64,
    /// The tenant's day of the add: the day whose daily counters it counts toward.
    pub day: String,
}

impl AddFact {
    /// The claim key: the customer, the member and the code on the tenant's day of the add.
    /// The same add delivered twice or redelivered maps to one key, and so does a customer who
    /// deletes the member and adds them again through the same code that day: WeCom sends
    /// each re-add as a new event with its own `CreateTime`, and with the time in the key one
    /// WeChat account could push a member over the code's limits, or the company cap, alone.
    /// Counted once a day rather than once ever: a claim per pair kept forever would grow
    /// without bound (claims expire after 90 days), and a customer who comes back another day
    /// is that day's work for the member (docs/rules.md rule 8, "What an add counts").
    pub fn business_key(&self) -> String {
        let mut hasher = Sha256::new();
        for part in [
            self.tenant.as_str(),
            self.code.as_str(),
            self.staff.as_str(),
            &self.external_user,
            &self.day,
        ] {
            hasher.update(part.as_bytes());
            hasher.update([0u8]);
        }
        format!("add:{}", hex::encode(hasher.finalize()))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CountOutcome {
    /// This attempt won the claim and counted the add, at this time.
    Counted { at_ms: u64 },
    /// An earlier attempt already counted it, at this time.
    AlreadyCounted { at_ms: u64 },
}

impl CountOutcome {
    pub fn counted_at_ms(&self) -> u64 {
        match self {
            Self::Counted { at_ms } | Self::AlreadyCounted { at_ms } => *at_ms,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FactOutcome {
    Add {
        fact: AddFact,
        outcome: CountOutcome,
        /// Limits this add reached and owns the claim of.
        crossings: Vec<Crossing>,
    },
    /// A contact change was written; `codes` reasons were emitted.
    StaffChanged { kind: String, codes: usize },
    /// Acknowledged without action; `kind` names the event.
    Ignored { kind: String },
}

#[derive(Debug, thiserror::Error)]
pub enum FactsError {
    /// The stored message can never be processed (unknown tenant, fails verification,
    /// unparseable). Retrying cannot help: it goes to the dead-letter queue with this class.
    #[error("poison message: {0}")]
    Poison(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

pub struct FactRecorder<T, L, Q, N> {
    tenants: T,
    ledger: L,
    reasons: Q,
    notifier: N,
    clock: Clock,
    owner_lease_ms: u64,
    /// How long after a rotation a stored callback signed with the previous keys still opens.
    stored_key_window_ms: u64,
    /// How an add whose count met another write of one of its items waits before trying again.
    conflict_pause: Option<Pause>,
}

/// How many times an add's count is tried when each try meets another write of one of its
/// items (`StoreError::is_conflict`), and how long it waits before the second: each wait is
/// twice the one before (25, 50, 100 ms).
const COUNT_TRIES: u32 = 4;
const FIRST_CONFLICT_WAIT: std::time::Duration = std::time::Duration::from_millis(25);

impl<T: TenantProfiles, L: FactLedger, Q: ReasonQueue, N: QuotaNotifier> FactRecorder<T, L, Q, N> {
    pub fn new(tenants: T, ledger: L, reasons: Q, notifier: N, clock: Clock) -> Self {
        Self {
            tenants,
            ledger,
            reasons,
            notifier,
            clock,
            owner_lease_ms: OWNER_LEASE_MS,
            stored_key_window_ms: crate::tenants::KeyRotation::default().stored_ms,
            conflict_pause: None,
        }
    }

    /// How long a tenant's replaced callback keys still open its stored callbacks (the
    /// inbox's backlog, its dead letters redriven, the archive replayed).
    #[must_use]
    pub fn with_key_rotation(mut self, rotation: crate::tenants::KeyRotation) -> Self {
        self.stored_key_window_ms = rotation.stored_ms;
        self
    }

    /// Opens a stored callback of a tenant whose profile is `profile`, now.
    pub(crate) fn open(
        &self,
        message: &InboxMessage,
        profile: &TenantProfile,
    ) -> Result<CallbackEvent, FactsError> {
        open(message, profile, (self.clock)(), self.stored_key_window_ms)
    }

    /// How an add whose count met another write waits before trying again (without one it
    /// tries again at once).
    #[must_use]
    pub fn waiting_with(mut self, pause: Pause) -> Self {
        self.conflict_pause = Some(pause);
        self
    }

    /// How long the add that makes a limit claim owns it before the sweep may take it over.
    #[must_use]
    pub fn with_owner_lease(mut self, owner_lease_ms: u64) -> Self {
        self.owner_lease_ms = owner_lease_ms;
        self
    }

    /// An inbox message of `group_id` is given up on (parked as poison), or is on its last
    /// receive before the inbox's own redrive: a fact it carried may never be written, or
    /// written and never told to its codes (docs/rules.md rule 11), so what it would have
    /// reached is marked. A code's message marks the code dirty. A staff member's or the
    /// tenant's message marks a fan-out of every code of the tenant: which codes it reaches
    /// is in the message it could not read (a department move reaches the codes of the
    /// departments left and joined, a re-keyed user the old id's codes), and the tenant's
    /// codes are all of them. One mark per tenant (`INBOX_GAVE_UP`), so a burst of given-up
    /// messages costs one recompute of each code, which pushes only the lists that changed.
    pub async fn gave_up_on(&self, group_id: &str, why: crate::dirty::DirtyWhy) {
        let now_ms = (self.clock)();
        let (tenant, code) = match crate::intake::MessageGroup::reach_of(group_id) {
            Some(GroupReach::Code(tenant, code)) => (tenant, code),
            Some(GroupReach::Tenant(tenant)) => {
                let fan_out = FanOut::new(
                    tenant.clone(),
                    vec![Source::Tenant],
                    Cause::Requested,
                    now_ms,
                    INBOX_GAVE_UP.to_owned(),
                );
                match self.ledger.mark_fan_out(&fan_out, why, now_ms).await {
                    Ok(()) => {
                        tracing::warn!(tenant = %tenant, group = group_id, why = why.label(), "an inbox message of a staff member or the tenant was given up on; a fan-out of the tenant's codes marked")
                    }
                    Err(error) => {
                        tracing::error!(tenant = %tenant, group = group_id, error = %error, "fan-out not marked")
                    }
                }
                return;
            }
            // A code id SQS would refuse is no code of ours (ours are all SQS-safe).
            None => return,
        };
        let marked = self.ledger.mark_dirty(&tenant, &code, why, now_ms).await;
        match marked {
            Ok(()) => {
                tracing::warn!(tenant = %tenant, code = %code, why = why.label(), "an inbox message naming the code was given up on; code marked dirty")
            }
            Err(error) => {
                tracing::error!(tenant = %tenant, code = %code, error = %error, "code not marked dirty")
            }
        }
    }

    /// Verifies and decrypts a stored callback again (the inbox keeps the raw envelope),
    /// writes its fact, then emits the refresh reason.
    #[tracing::instrument(skip_all, fields(tenant = %message.tenant, event_key = %message.event_key))]
    pub async fn record(&self, message: &InboxMessage) -> Result<FactOutcome, FactsError> {
        let profile = self
            .tenants
            .profile(&message.tenant)
            .await?
            .ok_or_else(|| FactsError::Poison(format!("no tenant {}", message.tenant)))?;
        let event = self.open(message, &profile)?;
        let kind = format!(
            "{}/{}",
            event
                .event()
                .unwrap_or(event.field("MsgType").unwrap_or("?")),
            event.change_type().unwrap_or("-")
        );
        let fact = match (event.event(), event.change_type()) {
            (Some("change_external_contact"), Some("add_external_contact")) => {
                add_fact(&message.tenant, &event, &profile)
            }
            _ => None,
        };
        if let Some(fact) = fact {
            return self.record_add(fact, &profile).await;
        }
        let staff_event = StaffEvent::from_callback(&event)
            .map_err(|e| FactsError::Poison(format!("{kind}: {e}")))?;
        if let Some(staff_event) = staff_event {
            return self
                .record_staff_event(message, &event, &staff_event, kind)
                .await;
        }
        tracing::info!(
            kind,
            "event recorded and acknowledged; qrsync does not act on it"
        );
        self.ledger.record_ignored(&message.tenant, &kind).await?;
        Ok(FactOutcome::Ignored { kind })
    }

    /// Counts the add, trying again when the count met another write of one of its items: two
    /// adds of one staff member on two codes (two message groups, recorded side by side) write
    /// the member's company-cap counter in transactions of their own, and DynamoDB cancels a
    /// transaction that meets another on the same item (docs/aws-semantics.md §3). The claim
    /// makes a count idempotent, so trying again is safe; failing the message instead would
    /// leave the add uncounted for the inbox's visibility timeout, and its member routed past
    /// a limit the add reached.
    async fn count_add(&self, fact: &AddFact) -> Result<CountOutcome, StoreError> {
        let mut wait = FIRST_CONFLICT_WAIT;
        let mut tries = 1;
        loop {
            match self.ledger.count_add(fact, (self.clock)()).await {
                Err(error) if error.is_conflict() && tries < COUNT_TRIES => {
                    tracing::debug!(tries, error = %error, "add count met another write; trying again");
                    if let Some(pause) = self.conflict_pause {
                        pause(wait).await;
                    }
                    wait *= 2;
                    tries += 1;
                }
                counted => return counted,
            }
        }
    }

    async fn record_add(
        &self,
        fact: AddFact,
        profile: &TenantProfile,
    ) -> Result<FactOutcome, FactsError> {
        let config = self.ledger.code_config(&fact.tenant, &fact.code).await?;
        if !counts_on_code(&self.ledger, &fact, config.as_ref()).await? {
            // `State` is whatever channel the customer came through, and an acquisition link
            // is public: anyone can open it with any code as its channel. Counted, such an add
            // would spend the limits of a code that does not route to the member.
            let kind = format!("{ADD_KIND}:not_on_code");
            tracing::info!(code = %fact.code, staff = %fact.staff, "add not counted: the code does not exist or does not list the member");
            self.ledger.record_ignored(&fact.tenant, &kind).await?;
            return Ok(FactOutcome::Ignored { kind });
        }
        let outcome = self.count_add(&fact).await?;
        // Sent even when the add was already counted: the attempt that counted it may have
        // failed before sending, and a duplicate reason is harmless (same dedupe id).
        self.reasons
            .send(
                &Fact {
                    tenant: fact.tenant.clone(),
                    cause: Cause::AddCounted,
                    at_ms: outcome.counted_at_ms(),
                    key: fact.business_key(),
                }
                .reason_for(&fact.code),
            )
            .await?;
        // Also run for an add counted before: its first attempt may have stopped between
        // counting and claiming.
        let crossings = match config {
            Some(config) => self.quota_loop(&fact, profile, &config.switches).await?,
            None => Vec::new(),
        };
        Ok(FactOutcome::Add {
            fact,
            outcome,
            crossings,
        })
    }

    /// The limits the staff member's counters reached after `fact`: claims each once per
    /// tenant-day; the owner of a claim emits a reason per affected code, then publishes the
    /// notification once.
    async fn quota_loop(
        &self,
        fact: &AddFact,
        profile: &TenantProfile,
        switches: &Switches,
    ) -> Result<Vec<Crossing>, FactsError> {
        let counts = self
            .ledger
            .counts(&fact.tenant, &fact.code, &fact.staff, &fact.day)
            .await?;
        let mut crossings = Vec::new();
        for limit in quota::crossed(switches, profile.company_daily_cap, counts) {
            let claimed_at_ms = (self.clock)();
            let claim = LimitClaim {
                tenant: fact.tenant.clone(),
                staff: fact.staff.clone(),
                limit,
                day: fact.day.clone(),
                code: (!limit.company_wide()).then(|| fact.code.clone()),
                owner: fact.business_key(),
                claimed_at_ms,
                lease_until_ms: claimed_at_ms + self.owner_lease_ms,
            };
            let ClaimOutcome::Owned { notified } = self.ledger.claim_limit(&claim).await? else {
                continue;
            };
            let codes = finish_claim(
                &self.ledger,
                &self.reasons,
                &self.notifier,
                &claim,
                notified,
            )
            .await?;
            tracing::info!(
                limit = limit.name(),
                reasons = codes,
                notified = !notified,
                "limit reached"
            );
            crossings.push(Crossing {
                limit,
                reasons: codes,
                notified: !notified,
            });
        }
        Ok(crossings)
    }

    async fn record_staff_event(
        &self,
        message: &InboxMessage,
        event: &CallbackEvent,
        staff_event: &StaffEvent,
        kind: String,
    ) -> Result<FactOutcome, FactsError> {
        // The fact's time is WeCom's: of two changes to one attribute the later one wins,
        // whatever order they are delivered in.
        let at_ms = event
            .create_time()
            .and_then(|t| t.parse::<u64>().ok())
            .map_or(message.received_at_ms, |secs| secs.saturating_mul(1000));
        let codes = staff::apply(&self.ledger, &message.tenant, staff_event, at_ms).await?;
        let written_at_ms = (self.clock)();
        let staff_changed = Fact {
            tenant: message.tenant.clone(),
            cause: Cause::StaffChanged,
            at_ms: written_at_ms,
            key: message.event_key.clone(),
        };
        let reasons: Vec<RefreshReason> = staff_changed.reasons(&codes).collect();
        self.reasons.send_all(&reasons).await?;
        tracing::info!(kind, codes = codes.len(), "contact change written");
        Ok(FactOutcome::StaffChanged {
            kind,
            codes: codes.len(),
        })
    }
}

/// Verifies and decrypts a stored callback with the tenant's current callback keys, or with
/// the previous ones until `window_ms` after they were replaced (`KeyRotation::stored_ms`).
fn open(
    message: &InboxMessage,
    profile: &TenantProfile,
    now_ms: u64,
    window_ms: u64,
) -> Result<CallbackEvent, FactsError> {
    let poison = |what: &str, e: &dyn std::fmt::Display| FactsError::Poison(format!("{what}: {e}"));
    let keys = profile
        .callback_settings()
        .keys(now_ms, window_ms)
        .map_err(|e| poison("tenant callback settings", &e))?;
    let envelope = Envelope::parse(&message.envelope).map_err(|e| poison("envelope", &e))?;
    let plaintext = keys
        .open(
            &message.msg_signature,
            &message.timestamp,
            &message.nonce,
            &envelope.encrypt,
        )
        .map_err(|e| match e {
            CryptoError::BadSignature => poison("signature", &e),
            e => poison("ciphertext", &e),
        })?;
    CallbackEvent::parse(&plaintext.message).map_err(|e| poison("event", &e))
}

/// The kind of an add event, as `FactRecorder::record` names events.
const ADD_KIND: &str = "change_external_contact/add_external_contact";

/// Whether `fact` counts on its code: the code exists in the tenant (`config`, read once for
/// this and the quota loop) and lists the member as a member or fallback, or through a
/// department it lists. Only a code that lists departments and not the member by name needs
/// more than that one read: the member's departments, through their seat indexes. A member
/// taken off the code between the customer's scan and the add's recording is not counted on
/// it: the counters describe the members a code lists.
pub(crate) async fn counts_on_code<L: StaffLedger + ?Sized>(
    ledger: &L,
    fact: &AddFact,
    config: Option<&CodeConfig>,
) -> Result<bool, StoreError> {
    let Some(config) = config else {
        return Ok(false);
    };
    if config.members.contains(&fact.staff) || config.fallback.contains(&fact.staff) {
        return Ok(true);
    }
    if config.departments.is_empty() {
        return Ok(false);
    }
    let codes = ledger.codes_of_staff(&fact.tenant, &fact.staff).await?;
    Ok(codes.contains(&fact.code))
}

/// An add that names a qrsync code; an add through another channel (no or foreign `State`)
/// is not ours to count.
pub(crate) fn add_fact(
    tenant: &TenantId,
    event: &CallbackEvent,
    profile: &TenantProfile,
) -> Option<AddFact> {
    let code = CodeId::parse(event.state()?).ok()?;
    let staff = StaffId::parse(event.user_id()?).ok()?;
    let external_user = event.field("ExternalUserID")?.to_owned();
    let created_at_secs: u64 = event.create_time()?.parse().ok()?;
    Some(AddFact {
        tenant: tenant.clone(),
        code,
        staff,
        external_user,
        created_at_secs,
        day: tenant_day(created_at_secs.saturating_mul(1000), profile.timezone),
    })
}

#[cfg(test)]
mod tests;
