//! The local stack's controllable clock: the template parameter `ClockOffsetSeconds` reaches
//! every function as `QRSYNC_CLOCK_OFFSET_SECONDS`, and WeCom's clock (the sandbox's) must
//! move with it, since callbacks are signed and dated with the sender's time.
//!
//! MiniStack restarts a function when its configuration changes and ends an invocation in
//! flight, so the offset is changed only with the queues drained.

use crate::sandbox::Sandbox;
use crate::world::World;
use adapters::clock::CLOCK_OFFSET_VAR;
use anyhow::{bail, Context, Result};
use aws_sdk_lambda::types::{Environment, LastUpdateStatus};
use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub fn real_now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or_default()
}

/// The stack's functions with their environments, and the offset they run at.
pub struct StackClock {
    functions: Vec<(String, HashMap<String, String>)>,
    offset_secs: i64,
}

impl StackClock {
    /// Reads every function's environment. `None` when no function has the clock variable
    /// (a stack from before the controllable clock).
    pub async fn read(world: &World) -> Result<Option<Self>> {
        let mut functions = Vec::new();
        let mut offsets = Vec::new();
        for name in world.functions.values() {
            let config = world
                .lambda
                .get_function_configuration()
                .function_name(name)
                .send()
                .await
                .with_context(|| format!("GetFunctionConfiguration {name}"))?;
            let env = config
                .environment()
                .and_then(|e| e.variables())
                .cloned()
                .unwrap_or_default();
            if let Some(raw) = env.get(CLOCK_OFFSET_VAR) {
                offsets.push(raw.trim().parse::<i64>().unwrap_or(0));
            }
            functions.push((name.clone(), env));
        }
        if offsets.is_empty() {
            return Ok(None);
        }
        Ok(Some(Self {
            functions,
            offset_secs: offsets.iter().copied().max().unwrap_or(0),
        }))
    }

    pub fn offset_secs(&self) -> i64 {
        self.offset_secs
    }

    /// The stack's now.
    pub fn now_ms(&self) -> u64 {
        real_now_ms().saturating_add_signed(self.offset_secs * 1000)
    }

    /// Moves every function to `offset_secs` and the sandbox's clock by the same difference,
    /// as an operator would; waits until every function runs with it.
    pub async fn set(&mut self, world: &World, sandbox: &Sandbox, offset_secs: i64) -> Result<()> {
        let delta_secs = offset_secs - self.offset_secs;
        for (name, env) in &mut self.functions {
            env.insert(CLOCK_OFFSET_VAR.to_owned(), offset_secs.to_string());
            world
                .lambda
                .update_function_configuration()
                .function_name(name.as_str())
                .environment(
                    Environment::builder()
                        .set_variables(Some(env.clone()))
                        .build(),
                )
                .send()
                .await
                .with_context(|| format!("UpdateFunctionConfiguration {name}"))?;
        }
        for (name, _) in &self.functions {
            wait_updated(world, name).await?;
        }
        if delta_secs != 0 {
            sandbox.advance_clock(delta_secs * 1000).await?;
        }
        self.offset_secs = offset_secs;
        Ok(())
    }
}

/// Waits until a function's configuration update is no longer in progress.
async fn wait_updated(world: &World, name: &str) -> Result<()> {
    let started = Instant::now();
    loop {
        let config = world
            .lambda
            .get_function_configuration()
            .function_name(name)
            .send()
            .await?;
        match config.last_update_status() {
            Some(LastUpdateStatus::InProgress) => {}
            Some(LastUpdateStatus::Failed) => bail!(
                "updating {name} failed: {}",
                config
                    .last_update_status_reason()
                    .unwrap_or("no reason given")
            ),
            _ => return Ok(()),
        }
        if started.elapsed() > Duration::from_secs(60) {
            bail!("updating {name} still in progress after 60 s");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
