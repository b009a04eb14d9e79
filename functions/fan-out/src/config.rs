//! The environment this function reads; names match `template.yaml`.

use adapters::env::{max_receive_count, parsed, required, EnvError};

#[derive(Debug)]
pub struct Config {
    pub table_name: String,
    pub refresh_queue_url: String,
    /// Its own queue, where a fan-out cut short by the deadline continues.
    pub fan_out_queue_url: String,
    /// The fan-out queue's `maxReceiveCount`: on that receive a fan-out is marked given up
    /// before it expands.
    pub max_receives: u32,
    /// The tenants' WeCom budget a minute: the most reasons one expansion sends.
    pub pace_per_minute: u32,
}

impl Config {
    pub fn from_env() -> Result<Self, EnvError> {
        Ok(Self {
            table_name: required("TABLE_NAME")?,
            refresh_queue_url: required("REFRESH_QUEUE_URL")?,
            fan_out_queue_url: required("FAN_OUT_QUEUE_URL")?,
            max_receives: max_receive_count("FAN_OUT_MAX_RECEIVES")?,
            pace_per_minute: parsed("WECOM_BUDGET_PER_MINUTE")?,
        })
    }
}
