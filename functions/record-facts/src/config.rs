//! The environment this function reads; names match `template.yaml`.

use adapters::env::{key_rotation, max_receive_count, parsed, required, EnvError};
use domain::tenants::KeyRotation;

#[derive(Debug)]
pub struct Config {
    pub table_name: String,
    pub refresh_queue_url: String,
    pub dead_letter_queue_url: String,
    pub quota_event_bus: String,
    /// The inbox's `maxReceiveCount`: on that receive a message's code is marked dirty first.
    pub max_receives: u32,
    /// How long the add that makes a limit claim owns it (then the sweep may finish it).
    pub claim_owner_lease_ms: u64,
    /// How long each stored callback is archived for replay (`CallbackArchiveDays`).
    pub archive_days: u64,
    /// How long a tenant's replaced callback keys still open its stored callbacks.
    pub key_rotation: KeyRotation,
}

impl Config {
    pub fn from_env() -> Result<Self, EnvError> {
        Ok(Self {
            table_name: required("TABLE_NAME")?,
            refresh_queue_url: required("REFRESH_QUEUE_URL")?,
            dead_letter_queue_url: required("DEAD_LETTER_QUEUE_URL")?,
            quota_event_bus: required("QUOTA_EVENT_BUS_NAME")?,
            max_receives: max_receive_count("INBOX_MAX_RECEIVES")?,
            claim_owner_lease_ms: parsed::<u64>("CLAIM_OWNER_LEASE_SECONDS")? * 1000,
            archive_days: parsed::<u64>("CALLBACK_ARCHIVE_DAYS")?,
            key_rotation: key_rotation()?,
        })
    }
}
