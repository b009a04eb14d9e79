//! docs/rules.md rule 1, "Persist before ACK": the callback function verifies, persists and
//! answers, and nothing else. A callback is acknowledged (200) only after the inbox accepted
//! it; if persisting fails the answer is 5xx so WeCom retries; input that fails verification
//! is refused with a 4xx and never persisted.

mod message;
mod ports;

pub use message::{GroupReach, InboxMessage, MessageGroup};
pub use ports::Inbox;

use crate::ids::TenantId;
use crate::tenants::CallbackSettings;
use crate::tenants::CallbackSettingsSource;
use crate::tenants::KeyRotation;
use crate::wecom::callback::{CallbackEvent, Envelope, XmlError};
use crate::wecom::crypto::CryptoError;
use crate::StoreError;
use std::collections::HashMap;

/// The largest callback body read. WeCom's envelopes are a few kilobytes (an `Encrypt` field
/// and the corp id); anything far larger is refused before it is parsed.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// The longest query parameter read: a signature is 40 hex digits, a timestamp 10 digits, a
/// nonce a few characters; the `echostr` of a URL verification is a few hundred.
pub const MAX_PARAMETER_BYTES: usize = 1024;

/// Why a callback was refused or could not be stored.
///
/// Every refusal that depends on whether the tenant exists (unknown or malformed tenant, bad
/// signature) is answered the same way, so tenant ids cannot be probed; the checks that need
/// no tenant (sizes, parameters, timestamp, envelope shape) come first.
#[derive(Debug, thiserror::Error)]
pub enum IntakeError {
    #[error("body of {bytes} bytes is over the limit of {MAX_BODY_BYTES}")]
    TooLarge { bytes: usize },
    #[error("tenant id is malformed")]
    MalformedTenant,
    #[error("no tenant {0}")]
    UnknownTenant(TenantId),
    #[error("query parameter {0} is missing")]
    MissingParameter(&'static str),
    #[error("query parameter {0} is longer than {MAX_PARAMETER_BYTES} bytes")]
    OversizedParameter(&'static str),
    #[error("timestamp is outside the accepted window of {max_age_secs} s")]
    StaleTimestamp { max_age_secs: u64 },
    #[error(transparent)]
    Crypto(#[from] CryptoError),
    #[error("callback addressed to another corp")]
    WrongReceiverCorp,
    #[error(transparent)]
    Xml(#[from] XmlError),
    #[error("tenant's stored callback settings are invalid")]
    BrokenTenantSettings(#[source] CryptoError),
    #[error(transparent)]
    Unavailable(#[from] StoreError),
}

impl IntakeError {
    /// Client errors are final: WeCom must not retry them and nothing was persisted.
    pub fn is_client_error(&self) -> bool {
        !matches!(self, Self::Unavailable(_) | Self::BrokenTenantSettings(_))
    }

    /// The refusals answered alike so that no answer tells whether a tenant exists.
    pub fn is_unauthenticated(&self) -> bool {
        matches!(
            self,
            Self::MalformedTenant
                | Self::UnknownTenant(_)
                | Self::Crypto(crate::wecom::crypto::CryptoError::BadSignature)
        )
    }
}

/// One HTTP request to `/wecom/{tenant}/callback`, already decoded from its transport.
#[derive(Debug, Clone)]
pub struct CallbackRequest {
    pub tenant: String,
    pub query: HashMap<String, String>,
    pub body: String,
}

impl CallbackRequest {
    fn param(&self, name: &'static str) -> Result<&str, IntakeError> {
        let value = self
            .query
            .get(name)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
            .ok_or(IntakeError::MissingParameter(name))?;
        if value.len() > MAX_PARAMETER_BYTES {
            return Err(IntakeError::OversizedParameter(name));
        }
        Ok(value)
    }

    fn check_size(&self) -> Result<(), IntakeError> {
        if self.body.len() > MAX_BODY_BYTES {
            return Err(IntakeError::TooLarge {
                bytes: self.body.len(),
            });
        }
        Ok(())
    }
}

/// The callback rules, with the tenant store and the inbox as ports.
pub struct Intake<D, I> {
    tenants: D,
    inbox: I,
    max_age_secs: u64,
    /// How long after a rotation the previous callback keys still verify here.
    key_overlap_ms: u64,
}

impl<D: CallbackSettingsSource, I: Inbox> Intake<D, I> {
    /// `max_age_secs` bounds how far the signed `timestamp` may be from now, in either
    /// direction, so a captured request cannot be replayed later.
    pub fn new(tenants: D, inbox: I, max_age_secs: u64) -> Self {
        Self {
            tenants,
            inbox,
            max_age_secs,
            key_overlap_ms: KeyRotation::default().edge_ms,
        }
    }

    /// How long after a rotation a callback signed with the previous keys is still accepted
    /// (`CallbackKeyOverlapHours`): WeCom signs with them until the tenant saves the new ones
    /// in its console, and the URL verification of that save is signed with the new ones.
    #[must_use]
    pub fn with_key_overlap(mut self, overlap_ms: u64) -> Self {
        self.key_overlap_ms = overlap_ms;
        self
    }

    /// URL verification (GET): returns the decrypted `echostr`, to be sent as the bare body.
    pub async fn verify_url(
        &self,
        request: &CallbackRequest,
        now_ms: u64,
    ) -> Result<String, IntakeError> {
        request.check_size()?;
        let signature = request.param("msg_signature")?;
        let timestamp = request.param("timestamp")?;
        let nonce = request.param("nonce")?;
        // A raw '+' that reached us unencoded arrives as a space; base64 has no spaces.
        let echostr = request.param("echostr")?.replace(' ', "+");
        self.check_timestamp(timestamp, now_ms / 1000)?;
        let (_, settings) = self.tenant(request).await?;
        let keys = settings
            .keys(now_ms, self.key_overlap_ms)
            .map_err(IntakeError::BrokenTenantSettings)?;
        Ok(keys.open(signature, timestamp, nonce, &echostr)?.message)
    }

    /// Event delivery (POST): verifies, then persists the raw envelope. Returns the stored
    /// message once the inbox accepted it.
    pub async fn accept_event(
        &self,
        request: &CallbackRequest,
        now_ms: u64,
    ) -> Result<InboxMessage, IntakeError> {
        request.check_size()?;
        let signature = request.param("msg_signature")?;
        let timestamp = request.param("timestamp")?;
        let nonce = request.param("nonce")?;
        self.check_timestamp(timestamp, now_ms / 1000)?;
        let envelope = Envelope::parse(&request.body)?;
        let (tenant, settings) = self.tenant(request).await?;
        let keys = settings
            .keys(now_ms, self.key_overlap_ms)
            .map_err(IntakeError::BrokenTenantSettings)?;
        // The signature before the receiver: only a sender holding the tenant's token learns
        // anything about the tenant from an answer.
        let plaintext = keys.open(signature, timestamp, nonce, &envelope.encrypt)?;
        if envelope.to_user_name != settings.corp_id {
            return Err(IntakeError::WrongReceiverCorp);
        }
        let event = CallbackEvent::parse(&plaintext.message)?;
        if event.field("ToUserName") != Some(settings.corp_id.as_str()) {
            return Err(IntakeError::WrongReceiverCorp);
        }
        let message = InboxMessage::new(
            tenant,
            &event,
            request.body.clone(),
            signature,
            timestamp,
            nonce,
            now_ms,
        );
        self.inbox.persist(&message).await?;
        Ok(message)
    }

    async fn tenant(
        &self,
        request: &CallbackRequest,
    ) -> Result<(TenantId, CallbackSettings), IntakeError> {
        let tenant = TenantId::parse(&request.tenant).map_err(|_| IntakeError::MalformedTenant)?;
        match self.tenants.callback_settings(&tenant).await? {
            Some(settings) => Ok((tenant, settings)),
            None => Err(IntakeError::UnknownTenant(tenant)),
        }
    }

    fn check_timestamp(&self, timestamp: &str, now_secs: u64) -> Result<(), IntakeError> {
        let stale = IntakeError::StaleTimestamp {
            max_age_secs: self.max_age_secs,
        };
        let signed: u64 = timestamp.parse().map_err(|_| stale)?;
        if signed.abs_diff(now_secs) > self.max_age_secs {
            return Err(IntakeError::StaleTimestamp {
                max_age_secs: self.max_age_secs,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
