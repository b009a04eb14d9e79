//! The environment this function reads; names match `template.yaml`.

use adapters::env::{key_rotation, parsed, required, EnvError};
use domain::tenants::KeyRotation;

#[derive(Debug)]
pub struct Config {
    pub table_name: String,
    pub refresh_queue_url: String,
    pub replay_queue_url: String,
    pub quota_event_bus: String,
    /// How long the add that makes a limit claim owns it (apply mode runs the quota loop).
    pub claim_owner_lease_ms: u64,
    /// How long a tenant's replaced callback keys still open its archived callbacks.
    pub key_rotation: KeyRotation,
}

impl Config {
    pub fn from_env() -> Result<Self, EnvError> {
        Ok(Self {
            table_name: required("TABLE_NAME")?,
            refresh_queue_url: required("REFRESH_QUEUE_URL")?,
            replay_queue_url: required("REPLAY_QUEUE_URL")?,
            quota_event_bus: required("QUOTA_EVENT_BUS_NAME")?,
            claim_owner_lease_ms: parsed::<u64>("CLAIM_OWNER_LEASE_SECONDS")? * 1000,
            key_rotation: key_rotation()?,
        })
    }
}
