//! The environment this function reads; names match `template.yaml`.

use std::time::Duration;

#[derive(Debug)]
pub struct Config {
    pub table_name: String,
    pub inbox_queue_url: String,
    pub max_age_secs: u64,
    pub tenant_cache_ttl: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("environment variable {0} is not set")]
    Missing(&'static str),
    #[error("environment variable {0} must be a whole number of seconds")]
    NotSeconds(&'static str),
}

fn required(name: &'static str) -> Result<String, ConfigError> {
    std::env::var(name)
        .ok()
        .filter(|v| !v.is_empty())
        .ok_or(ConfigError::Missing(name))
}

fn seconds(name: &'static str) -> Result<u64, ConfigError> {
    required(name)?
        .parse()
        .map_err(|_| ConfigError::NotSeconds(name))
}

impl Config {
    /// Fails the cold start when a variable is missing, rather than failing each request.
    pub fn from_env() -> Result<Self, ConfigError> {
        Ok(Self {
            table_name: required("TABLE_NAME")?,
            inbox_queue_url: required("INBOX_QUEUE_URL")?,
            max_age_secs: seconds("CALLBACK_MAX_AGE_SECONDS")?,
            tenant_cache_ttl: Duration::from_secs(seconds("TENANT_CACHE_SECONDS")?),
        })
    }
}
