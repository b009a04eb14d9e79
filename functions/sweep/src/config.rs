//! The environment this function reads; names match `template.yaml`.

use adapters::env::{budget_layers, parsed, required, EnvError};
use domain::budget::{BudgetLayers, BudgetLimits};
use domain::sweep::SweepSettings;
use std::time::Duration;

#[derive(Debug)]
pub struct Config {
    pub table_name: String,
    /// Where resync reasons go: refresh.fifo, the single writer's input.
    pub refresh_queue_url: String,
    /// Where a fan-out given up is sent again: the fan-out function's queue.
    pub fan_out_queue_url: String,
    /// Where a finished claim's `StaffQuotaReached` goes.
    pub quota_event_bus: String,
    pub wecom_api_base_url: String,
    pub wecom_timeout: Duration,
    pub settings: SweepSettings,
    /// `get_contact_way`'s own per-tenant budget: the read-back's reads per hour, any of them
    /// in one minute (a run reads its share at once, dirty codes first), but never more in a
    /// minute than the 9,000 of every API's default budget (below WeCom's 10,000). Each egress
    /// address's window is shared with every other function calling from it.
    pub read_budget: BudgetLayers,
}

impl Config {
    pub fn from_env() -> Result<Self, EnvError> {
        let period_ms = parsed::<u64>("SWEEP_PERIOD_MINUTES")? * 60_000;
        let reads_per_tenant_hour: u32 = parsed("DRIFT_READS_PER_TENANT_HOUR")?;
        let guard_share_percent: u32 = parsed("DRIFT_GUARD_SHARE_PERCENT")?;
        let stale_settle_ms = parsed::<u64>("DRIFT_STALE_SETTLE_MINUTES")?.saturating_mul(60_000);
        let link_retire_grace_ms =
            parsed::<u64>("LINK_RETIRE_GRACE_MINUTES")?.saturating_mul(60_000);
        if !(1..=100).contains(&guard_share_percent) {
            return Err(EnvError::Malformed(
                "DRIFT_GUARD_SHARE_PERCENT",
                format!("{guard_share_percent} is not a share of 1 to 100 percent"),
            ));
        }
        Ok(Self {
            table_name: required("TABLE_NAME")?,
            refresh_queue_url: required("REFRESH_QUEUE_URL")?,
            fan_out_queue_url: required("FAN_OUT_QUEUE_URL")?,
            quota_event_bus: required("QUOTA_EVENT_BUS_NAME")?,
            wecom_api_base_url: required("WECOM_API_BASE_URL")?,
            wecom_timeout: Duration::from_millis(parsed("WECOM_TIMEOUT_MS")?),
            settings: SweepSettings {
                period_ms,
                reads_per_tenant_hour,
                guard_share_percent,
                stale_settle_ms,
                link_retire_grace_ms,
                ..SweepSettings::DEFAULT
            },
            read_budget: budget_layers(BudgetLimits {
                per_minute: reads_per_tenant_hour.min(BudgetLimits::default().per_minute),
                per_hour: reads_per_tenant_hour,
            })?,
        })
    }
}
