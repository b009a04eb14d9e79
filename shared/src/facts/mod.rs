//! MISSION rules 2 and 8: whoever observes a business fact writes it first, idempotently,
//! as a claim keyed by the business facts (never the delivery id), and only then emits a
//! refresh reason for each code it may change.

use crate::intake::InboxMessage;
use crate::membership::{CodeId, StaffId};
use crate::ports::StoreError;
use crate::refresh::{Cause, RefreshReason};
use crate::tenants::{tenant_day, TenantId, TenantProfile};
use crate::wecom::callback::{CallbackEvent, Envelope};
use crate::Clock;
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
    /// The claim key: the same add delivered twice, or redelivered, maps to one key.
    pub fn business_key(&self) -> String {
        let mut hasher = Sha256::new();
        for part in [
            self.tenant.as_str(),
            self.code.as_str(),
            self.staff.as_str(),
            &self.external_user,
            &self.created_at_secs.to_string(),
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

/// Counters and claims.
#[async_trait::async_trait]
pub trait AddLedger: Send + Sync {
    /// Claims the add by its business key and, in the same transaction, adds one to the
    /// staff member's counters (total on the code, today on the code, today on all codes).
    /// Exactly one of two racing attempts counts.
    async fn count_add(&self, add: &AddFact, now_ms: u64) -> Result<CountOutcome, StoreError>;
    /// Counts an event qrsync does not act on, so it is visible without being retried.
    async fn record_ignored(&self, tenant: &TenantId, kind: &str) -> Result<(), StoreError>;
}

#[async_trait::async_trait]
pub trait TenantProfiles: Send + Sync {
    async fn profile(&self, tenant: &TenantId) -> Result<Option<TenantProfile>, StoreError>;
}

/// Where refresh reasons go (refresh.fifo, grouped by code).
#[async_trait::async_trait]
pub trait ReasonQueue: Send + Sync {
    async fn send(&self, reason: &RefreshReason) -> Result<(), StoreError>;
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recorded {
    Add {
        fact: AddFact,
        outcome: CountOutcome,
    },
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

pub struct FactRecorder<T, L, Q> {
    tenants: T,
    ledger: L,
    reasons: Q,
    clock: Clock,
}

impl<T: TenantProfiles, L: AddLedger, Q: ReasonQueue> FactRecorder<T, L, Q> {
    pub fn new(tenants: T, ledger: L, reasons: Q, clock: Clock) -> Self {
        Self {
            tenants,
            ledger,
            reasons,
            clock,
        }
    }

    /// Verifies and decrypts a stored callback again (the inbox keeps the raw envelope),
    /// writes its fact, then emits the refresh reason.
    #[tracing::instrument(skip_all, fields(tenant = %message.tenant, event_key = %message.event_key))]
    pub async fn record(&self, message: &InboxMessage) -> Result<Recorded, FactsError> {
        let profile = self
            .tenants
            .profile(&message.tenant)
            .await?
            .ok_or_else(|| FactsError::Poison(format!("no tenant {}", message.tenant)))?;
        let event = open(message, &profile)?;
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
        let Some(fact) = fact else {
            tracing::info!(
                kind,
                "event recorded and acknowledged; qrsync does not act on it"
            );
            self.ledger.record_ignored(&message.tenant, &kind).await?;
            return Ok(Recorded::Ignored { kind });
        };
        let outcome = self.ledger.count_add(&fact, (self.clock)()).await?;
        // Sent even when the add was already counted: the attempt that counted it may have
        // failed before sending, and a duplicate reason is harmless (same dedupe id).
        self.reasons
            .send(&RefreshReason {
                tenant: fact.tenant.clone(),
                code: fact.code.clone(),
                cause: Cause::AddCounted,
                fact_at_ms: outcome.counted_at_ms(),
                fact_key: fact.business_key(),
            })
            .await?;
        Ok(Recorded::Add { fact, outcome })
    }
}

fn open(message: &InboxMessage, profile: &TenantProfile) -> Result<CallbackEvent, FactsError> {
    let poison = |what: &str, e: &dyn std::fmt::Display| FactsError::Poison(format!("{what}: {e}"));
    let crypto = profile
        .callback_settings()
        .crypto()
        .map_err(|e| poison("tenant callback settings", &e))?;
    let envelope = Envelope::parse(&message.envelope).map_err(|e| poison("envelope", &e))?;
    crypto
        .verify(
            &message.msg_signature,
            &message.timestamp,
            &message.nonce,
            &envelope.encrypt,
        )
        .map_err(|e| poison("signature", &e))?;
    let plaintext = crypto
        .decrypt(&envelope.encrypt)
        .map_err(|e| poison("ciphertext", &e))?;
    CallbackEvent::parse(&plaintext.message).map_err(|e| poison("event", &e))
}

/// An add that names a qrsync code; an add through another channel (no or foreign `State`)
/// is not ours to count.
fn add_fact(tenant: &TenantId, event: &CallbackEvent, profile: &TenantProfile) -> Option<AddFact> {
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
