//! The environment this function reads; names match `template.yaml`.

use adapters::env::{parsed, required, EnvError};
use std::time::Duration;

#[derive(Debug)]
pub struct Config {
    /// WeCom's API host (the sandbox, locally): the only place a request goes.
    pub wecom_api_base_url: String,
    pub wecom_timeout: Duration,
}

impl Config {
    pub fn from_env() -> Result<Self, EnvError> {
        Ok(Self {
            wecom_api_base_url: required("WECOM_API_BASE_URL")?,
            wecom_timeout: Duration::from_millis(parsed("WECOM_TIMEOUT_MS")?),
        })
    }
}
