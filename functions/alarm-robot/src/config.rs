//! The environment this function reads; names match `template.yaml`.

use adapters::env::{parsed, EnvError};
use std::time::Duration;

#[derive(Debug)]
pub struct Config {
    /// The robot's webhook URL (it holds the robot's key: never logged); `None` when the
    /// template parameter is left empty, and then nothing is posted.
    pub webhook_url: Option<String>,
    pub timeout: Duration,
}

impl Config {
    pub fn from_env() -> Result<Self, EnvError> {
        Ok(Self {
            webhook_url: std::env::var("ALARM_ROBOT_WEBHOOK_URL")
                .ok()
                .filter(|url| !url.trim().is_empty()),
            timeout: Duration::from_millis(parsed("WECOM_TIMEOUT_MS")?),
        })
    }
}
