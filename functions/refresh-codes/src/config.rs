//! The environment this function reads; names match `template.yaml`.

use shared::env::{parsed, required, EnvError};
use std::time::Duration;

#[derive(Debug)]
pub struct Config {
    pub table_name: String,
    pub dead_letter_queue_url: String,
    /// Where WeCom's API is: its real host in AWS, the sandbox locally.
    pub wecom_api_base_url: String,
    pub wecom_timeout: Duration,
}

impl Config {
    pub fn from_env() -> Result<Self, EnvError> {
        Ok(Self {
            table_name: required("TABLE_NAME")?,
            dead_letter_queue_url: required("DEAD_LETTER_QUEUE_URL")?,
            wecom_api_base_url: required("WECOM_API_BASE_URL")?,
            wecom_timeout: Duration::from_millis(parsed("WECOM_TIMEOUT_MS")?),
        })
    }
}
