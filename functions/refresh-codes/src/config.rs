//! The environment this function reads; names match `template.yaml`.

use std::time::Duration;

#[derive(Debug)]
pub struct Config {
    pub table_name: String,
    pub dead_letter_queue_url: String,
    /// Where WeCom's API is: its real host in AWS, the sandbox locally.
    pub wecom_api_base_url: String,
    pub wecom_timeout: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("environment variable {0} is not set")]
    Missing(&'static str),
    #[error("environment variable {0} must be a whole number of milliseconds")]
    NotMillis(&'static str),
}

fn required(name: &'static str) -> Result<String, ConfigError> {
    std::env::var(name)
        .ok()
        .filter(|v| !v.is_empty())
        .ok_or(ConfigError::Missing(name))
}

impl Config {
    /// Fails the cold start when a variable is missing, rather than failing each batch.
    pub fn from_env() -> Result<Self, ConfigError> {
        Ok(Self {
            table_name: required("TABLE_NAME")?,
            dead_letter_queue_url: required("DEAD_LETTER_QUEUE_URL")?,
            wecom_api_base_url: required("WECOM_API_BASE_URL")?,
            wecom_timeout: Duration::from_millis(
                required("WECOM_TIMEOUT_MS")?
                    .parse()
                    .map_err(|_| ConfigError::NotMillis("WECOM_TIMEOUT_MS"))?,
            ),
        })
    }
}
