//! The environment this function reads; names match `template.yaml`.

use adapters::env::{parsed, required, EnvError};
use std::time::Duration;

#[derive(Debug)]
pub struct Config {
    pub table_name: String,
    pub inbox_queue_url: String,
    pub max_age_secs: u64,
    pub tenant_cache_ttl: Duration,
    /// How long after a rotation the previous callback keys still verify here
    /// (`CallbackKeyOverlapHours`).
    pub key_overlap_ms: u64,
}

impl Config {
    pub fn from_env() -> Result<Self, EnvError> {
        Ok(Self {
            table_name: required("TABLE_NAME")?,
            inbox_queue_url: required("INBOX_QUEUE_URL")?,
            max_age_secs: parsed("CALLBACK_MAX_AGE_SECONDS")?,
            tenant_cache_ttl: Duration::from_secs(parsed("TENANT_CACHE_SECONDS")?),
            key_overlap_ms: parsed::<u64>("CALLBACK_KEY_OVERLAP_HOURS")? * 3_600_000,
        })
    }
}
