//! The environment this function reads; names match `template.yaml`.

use adapters::env::{parsed, EnvError};
use std::time::Duration;

#[derive(Debug)]
pub struct Config {
    pub timeout: Duration,
}

impl Config {
    pub fn from_env() -> Result<Self, EnvError> {
        Ok(Self {
            timeout: Duration::from_millis(parsed("WECOM_TIMEOUT_MS")?),
        })
    }
}
