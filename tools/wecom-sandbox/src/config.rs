//! Settings: those fixed at start (`SandboxConfig`) and the live ones (`Settings`) that
//! `PUT /_sandbox/config` changes while the sandbox runs.

use crate::faults::FaultRule;
use serde::{Deserialize, Serialize};

/// WeCom's own numbers, where it publishes them.
pub mod defaults {
    pub const TOKEN_LIFETIME_SECS: u64 = 7200;
    pub const LIMIT_PER_MINUTE: u64 = 10_000;
    pub const LIMIT_PER_HOUR: u64 = 150_000;
    /// Per caller address and API, across every corp calling from it.
    pub const LIMIT_PER_IP_PER_MINUTE: u64 = 20_000;
    pub const LIMIT_PER_IP_PER_HOUR: u64 = 600_000;
    /// WeCom does not say how long it waits between tries; one second keeps runs short.
    pub const RETRY_PAUSE_MS: u64 = 1_000;
    pub const DELIVERY_TIMEOUT_MS: u64 = 5_000;
    pub const DELIVERY_ATTEMPTS: u32 = 3;
}

/// What the sandbox starts with, and what `POST /_sandbox/reset` returns to.
#[derive(Debug, Clone, PartialEq)]
pub struct SandboxConfig {
    /// `None` draws a seed at start; `GET /_sandbox/config` shows it so a run can be replayed.
    pub seed: Option<u64>,
    pub token_lifetime_secs: u64,
    pub limit_per_minute: u64,
    pub limit_per_hour: u64,
    pub limit_per_ip_per_minute: u64,
    pub limit_per_ip_per_hour: u64,
    pub retry_pause_ms: u64,
    pub delivery_timeout_ms: u64,
    pub delivery_attempts: u32,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        Self {
            seed: None,
            token_lifetime_secs: defaults::TOKEN_LIFETIME_SECS,
            limit_per_minute: defaults::LIMIT_PER_MINUTE,
            limit_per_hour: defaults::LIMIT_PER_HOUR,
            limit_per_ip_per_minute: defaults::LIMIT_PER_IP_PER_MINUTE,
            limit_per_ip_per_hour: defaults::LIMIT_PER_IP_PER_HOUR,
            retry_pause_ms: defaults::RETRY_PAUSE_MS,
            delivery_timeout_ms: defaults::DELIVERY_TIMEOUT_MS,
            delivery_attempts: defaults::DELIVERY_ATTEMPTS,
        }
    }
}

/// The live settings, as `GET /_sandbox/config` shows them.
#[derive(Debug, Clone, Serialize)]
pub struct Settings {
    pub seed: u64,
    pub token_lifetime_secs: u64,
    pub limit_per_minute: u64,
    pub limit_per_hour: u64,
    pub limit_per_ip_per_minute: u64,
    pub limit_per_ip_per_hour: u64,
    pub retry_pause_ms: u64,
    pub delivery_timeout_ms: u64,
    pub delivery_attempts: u32,
    pub faults: Vec<FaultRule>,
}

impl Settings {
    pub fn from_config(config: &SandboxConfig, seed: u64) -> Self {
        Self {
            seed,
            token_lifetime_secs: config.token_lifetime_secs,
            limit_per_minute: config.limit_per_minute,
            limit_per_hour: config.limit_per_hour,
            limit_per_ip_per_minute: config.limit_per_ip_per_minute,
            limit_per_ip_per_hour: config.limit_per_ip_per_hour,
            retry_pause_ms: config.retry_pause_ms,
            delivery_timeout_ms: config.delivery_timeout_ms,
            delivery_attempts: config.delivery_attempts,
            faults: Vec::new(),
        }
    }
}

/// A partial update; absent keys keep their value. Unknown keys are refused so a typo does not
/// pass silently.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigPatch {
    pub seed: Option<u64>,
    pub token_lifetime_secs: Option<u64>,
    pub limit_per_minute: Option<u64>,
    pub limit_per_hour: Option<u64>,
    pub limit_per_ip_per_minute: Option<u64>,
    pub limit_per_ip_per_hour: Option<u64>,
    pub retry_pause_ms: Option<u64>,
    pub delivery_timeout_ms: Option<u64>,
    pub delivery_attempts: Option<u32>,
    pub faults: Option<Vec<FaultRule>>,
}

impl ConfigPatch {
    pub fn validate(&self) -> Result<(), String> {
        if self.token_lifetime_secs == Some(0) {
            return Err("token_lifetime_secs must be at least 1".into());
        }
        if self.delivery_attempts == Some(0) {
            return Err("delivery_attempts must be at least 1".into());
        }
        if self.delivery_timeout_ms == Some(0) {
            return Err("delivery_timeout_ms must be at least 1".into());
        }
        for (index, rule) in self.faults.iter().flatten().enumerate() {
            rule.validate()
                .map_err(|e| format!("faults[{index}]: {e}"))?;
        }
        Ok(())
    }
}
