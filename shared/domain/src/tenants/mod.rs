//! Tenants (WeCom corps) and the settings the callback needs to trust their callbacks.

pub mod cache;
mod day;
mod pause;
mod ports;
mod rotation;

pub use day::{tenant_day, zone_with_the_next_midnight, Timezone, DEFAULT_TIMEZONE};
pub use pause::{pause_tenant, TenantPause};
pub use ports::{CallbackSettingsSource, TenantPauses};
pub use rotation::{CallbackKeys, KeyRotation, PreviousCallbackKeys};

use crate::ids::TenantId;
use crate::wecom::contact_way::CorpCredentials;
use crate::wecom::crypto::{CallbackCrypto, CryptoError};
use std::fmt;

/// What the callback function needs from a tenant's profile. `Debug` hides the secrets.
#[derive(Clone, PartialEq, Eq)]
pub struct CallbackSettings {
    pub corp_id: String,
    pub callback_token: String,
    pub encoding_aes_key: String,
    /// The pair the last rotation replaced, while it is kept (`KeyRotation`).
    pub previous: Option<PreviousCallbackKeys>,
}

impl fmt::Debug for CallbackSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CallbackSettings")
            .field("corp_id", &self.corp_id)
            .field("callback_token", &"[redacted]")
            .field("encoding_aes_key", &"[redacted]")
            .field("previous", &self.previous)
            .finish()
    }
}

/// A tenant's stored profile: its WeCom corp, the secrets qrsync holds for it, and its rules.
/// `Debug` shows none of the secrets.
#[derive(Clone, PartialEq, Eq)]
pub struct TenantProfile {
    pub corp_id: String,
    pub callback_token: String,
    pub encoding_aes_key: String,
    /// The callback keys the last rotation replaced, while they are kept (`KeyRotation`).
    pub previous_callback: Option<PreviousCallbackKeys>,
    pub corp_secret: String,
    pub timezone: Timezone,
    /// Adds per staff member per tenant-day across all codes; `None` is off.
    pub company_daily_cap: Option<u32>,
}

impl fmt::Debug for TenantProfile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TenantProfile")
            .field("corp_id", &self.corp_id)
            .field("timezone", &self.timezone)
            .field("company_daily_cap", &self.company_daily_cap)
            .finish_non_exhaustive()
    }
}

impl TenantProfile {
    /// The credentials `tenant`'s WeCom calls are made with.
    pub fn credentials(&self, tenant: &TenantId) -> CorpCredentials {
        CorpCredentials {
            tenant: tenant.clone(),
            corp_id: self.corp_id.clone(),
            corp_secret: self.corp_secret.clone(),
        }
    }

    pub fn callback_settings(&self) -> CallbackSettings {
        CallbackSettings {
            corp_id: self.corp_id.clone(),
            callback_token: self.callback_token.clone(),
            encoding_aes_key: self.encoding_aes_key.clone(),
            previous: self.previous_callback.clone(),
        }
    }
}

impl CallbackSettings {
    /// The current pair's crypto.
    pub fn crypto(&self) -> Result<CallbackCrypto, CryptoError> {
        CallbackCrypto::new(&self.callback_token, &self.encoding_aes_key, &self.corp_id)
    }

    /// The pairs a callback may be signed with at `now_ms`: the current one, and the previous
    /// one until `window_ms` after it was replaced. An error is the current pair's: the
    /// tenant's settings are broken.
    pub fn keys(&self, now_ms: u64, window_ms: u64) -> Result<CallbackKeys, CryptoError> {
        let previous = self
            .previous
            .as_ref()
            .filter(|p| now_ms < p.replaced_at_ms.saturating_add(window_ms))
            .and_then(|p| {
                CallbackCrypto::new(&p.callback_token, &p.encoding_aes_key, &self.corp_id).ok()
            });
        Ok(CallbackKeys {
            current: self.crypto()?,
            previous,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn callback_settings_never_print_their_secrets() {
        let settings = CallbackSettings {
            corp_id: "corp".into(),
            callback_token: "tok123".into(),
            encoding_aes_key: "k".repeat(43),
            previous: None,
        };
        let shown = format!("{settings:?}");
        assert!(shown.contains("corp") && !shown.contains("tok123") && !shown.contains("kkkk"));
    }
}
