//! The environment this function reads; names match `template.yaml`.

use adapters::env::{required, EnvError};

#[derive(Debug)]
pub struct Config {
    pub table_name: String,
    pub refresh_queue_url: String,
    pub fan_out_queue_url: String,
}

impl Config {
    pub fn from_env() -> Result<Self, EnvError> {
        Ok(Self {
            table_name: required("TABLE_NAME")?,
            refresh_queue_url: required("REFRESH_QUEUE_URL")?,
            fan_out_queue_url: required("FAN_OUT_QUEUE_URL")?,
        })
    }
}
