//! The WeCom sandbox steps the bench takes, on top of the shared control client: its rate
//! limits and one corp without a callback (the bench sends no events).

use anyhow::Result;
use serde_json::json;
pub use stack_client::sandbox::Call;
use stack_client::sandbox::SandboxControl;
use std::time::Duration;

pub struct Sandbox(pub SandboxControl);

impl std::ops::Deref for Sandbox {
    type Target = SandboxControl;

    fn deref(&self) -> &SandboxControl {
        &self.0
    }
}

impl Sandbox {
    pub fn new(base: &str) -> Result<Self> {
        // The call log of a full run is large: reading it takes a while.
        Ok(Self(SandboxControl::new(base, Duration::from_secs(120))?))
    }

    /// WeCom's frequency limits (per corp, per API, per wall-clock minute and hour), and the
    /// seed of the sandbox's random streams.
    pub async fn set_limits(&self, per_minute: u64, per_hour: u64, seed: u64) -> Result<()> {
        self.configure(json!({
            "limit_per_minute": per_minute,
            "limit_per_hour": per_hour,
            "seed": seed,
        }))
        .await
    }

    /// A corp with its directory.
    pub async fn put_corp(&self, corp_id: &str, corp_secret: &str, users: &[String]) -> Result<()> {
        self.0
            .put_corp(
                corp_id,
                json!({ "corp_secret": corp_secret, "users": users }),
            )
            .await
    }
}
