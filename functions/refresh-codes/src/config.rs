//! The environment this function reads; names match `template.yaml`.

use adapters::env::{budget_layers, max_receive_count, parsed, required, EnvError};
use domain::budget::{BudgetLayers, BudgetLimits};
use domain::ids::TenantId;
use domain::lanes::{LanePolicy, LaneSwitch};
use domain::refresh::retry::RetryDelay;
use domain::refresh::LeaseTimes;
use std::time::Duration;

#[derive(Debug)]
pub struct Config {
    pub table_name: String,
    /// The landing page's tables: pages are written (refresh) or deleted (admin) with their codes.
    pub pages: adapters::dynamodb::PageTables,
    pub dead_letter_queue_url: String,
    /// Where reasons go back to once their delay is served.
    pub refresh_queue_url: String,
    /// Where the fan-out to every code of a staff member WeCom refuses goes.
    pub fan_out_queue_url: String,
    /// One FIFO delay queue per `RetryDelay`.
    pub retry_queue_urls: Vec<(RetryDelay, String)>,
    /// Where WeCom's API is: its real host in AWS, the sandbox locally.
    pub wecom_api_base_url: String,
    pub wecom_timeout: Duration,
    /// The egress relays WeCom calls go through (`EGRESS_RELAYS`); empty: from this process.
    pub egress_relays: Vec<String>,
    /// Each tenant's calls per WeCom API per minute and per hour, and each egress address's,
    /// shared by its tenants (rule 6).
    pub budget: BudgetLayers,
    /// The slow lane's queue.
    pub slow_queue_url: String,
    pub lanes: LanePolicy,
    pub lease_times: LeaseTimes,
    /// The refresh queues' `maxReceiveCount`: on that receive a code is marked dirty first.
    pub max_receives: u32,
}

impl Config {
    pub fn from_env() -> Result<Self, EnvError> {
        let retry_queue_urls = RetryDelay::ALL
            .into_iter()
            .map(|delay| {
                let name = match delay {
                    RetryDelay::Seconds15 => "RETRY_QUEUE_URL_15S",
                    RetryDelay::Seconds60 => "RETRY_QUEUE_URL_60S",
                    RetryDelay::Seconds900 => "RETRY_QUEUE_URL_900S",
                };
                Ok((delay, required(name)?))
            })
            .collect::<Result<_, EnvError>>()?;
        let wecom_timeout = Duration::from_millis(parsed("WECOM_TIMEOUT_MS")?);
        let egress_relays = adapters::env::egress_relays();
        // The client bounds a whole call (token and stale-token retry included) to this.
        let call_bound = adapters::wecom::call_bound(wecom_timeout, !egress_relays.is_empty());
        let lease_times = LeaseTimes {
            duration_ms: parsed::<u64>("CODE_LEASE_SECONDS")? * 1000,
            call_ms: u64::try_from(call_bound.as_millis()).unwrap_or(u64::MAX),
        };
        if lease_times.duration_ms <= lease_times.call_ms {
            return Err(EnvError::Malformed(
                "CODE_LEASE_SECONDS",
                "a lease must outlast one WeCom call (WECOM_TIMEOUT_MS plus 500 ms, and 1.5 s more through an egress relay)".into(),
            ));
        }
        Ok(Self {
            slow_queue_url: required("SLOW_REFRESH_QUEUE_URL")?,
            lanes: LanePolicy {
                switch: parsed::<LaneSwitch>("SLOW_LANE_SWITCH")?,
                quiet_after_ms: parsed::<u64>("SLOW_LANE_QUIET_AFTER_SECONDS")? * 1000,
                fast_tenants: fast_tenants()?,
                slow_interval_ms: parsed::<u64>("SLOW_LANE_INTERVAL_SECONDS")? * 1000,
            },
            lease_times,
            max_receives: max_receive_count("REFRESH_MAX_RECEIVES")?,
            table_name: required("TABLE_NAME")?,
            pages: adapters::env::page_tables()?,
            dead_letter_queue_url: required("DEAD_LETTER_QUEUE_URL")?,
            refresh_queue_url: required("REFRESH_QUEUE_URL")?,
            fan_out_queue_url: required("FAN_OUT_QUEUE_URL")?,
            retry_queue_urls,
            wecom_api_base_url: required("WECOM_API_BASE_URL")?,
            wecom_timeout,
            egress_relays,
            budget: budget_layers(BudgetLimits {
                per_minute: parsed("WECOM_BUDGET_PER_MINUTE")?,
                per_hour: parsed("WECOM_BUDGET_PER_HOUR")?,
            })?,
        })
    }
}

/// `FAST_LANE_TENANTS`: tenant ids separated by commas; empty for none.
fn fast_tenants() -> Result<std::collections::BTreeSet<TenantId>, EnvError> {
    const NAME: &str = "FAST_LANE_TENANTS";
    std::env::var(NAME)
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|raw| !raw.is_empty())
        .map(|raw| {
            TenantId::parse(raw).map_err(|e| EnvError::Malformed(NAME, format!("`{raw}`: {e}")))
        })
        .collect()
}
