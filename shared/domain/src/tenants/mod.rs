//! Tenants (WeCom corps) and the settings the callback needs to trust their callbacks.

pub mod cache;
mod day;
mod pause;
mod ports;

pub use day::{tenant_day, zone_with_the_next_midnight, Timezone, DEFAULT_TIMEZONE};
pub use pause::{pause_tenant, TenantPause};
pub use ports::{CallbackSettingsSource, TenantPauses};

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
}

impl fmt::Debug for CallbackSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CallbackSettings")
            .field("corp_id", &self.corp_id)
            .field("callback_token", &"[redacted]")
            .field("encoding_aes_key", &"[redacted]")
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
        }
    }
}

impl CallbackSettings {
    pub fn crypto(&self) -> Result<CallbackCrypto, CryptoError> {
        CallbackCrypto::new(&self.callback_token, &self.encoding_aes_key, &self.corp_id)
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
        };
        let shown = format!("{settings:?}");
        assert!(shown.contains("corp") && !shown.contains("tok123") && !shown.contains("kkkk"));
    }
}
