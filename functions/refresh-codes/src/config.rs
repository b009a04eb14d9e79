//! The environment this function reads; names match `template.yaml`.

use shared::env::{parsed, required, EnvError};
use shared::refresh::retry::RetryDelay;
use shared::refresh::BudgetLimits;
use std::time::Duration;

#[derive(Debug)]
pub struct Config {
    pub table_name: String,
    pub dead_letter_queue_url: String,
    /// Where reasons go back to once their delay is served.
    pub refresh_queue_url: String,
    /// One FIFO delay queue per `RetryDelay`.
    pub retry_queue_urls: Vec<(RetryDelay, String)>,
    /// Where WeCom's API is: its real host in AWS, the sandbox locally.
    pub wecom_api_base_url: String,
    pub wecom_timeout: Duration,
    /// Each tenant's update_contact_way calls per minute and per hour (rule 6).
    pub budget: BudgetLimits,
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
        Ok(Self {
            table_name: required("TABLE_NAME")?,
            dead_letter_queue_url: required("DEAD_LETTER_QUEUE_URL")?,
            refresh_queue_url: required("REFRESH_QUEUE_URL")?,
            retry_queue_urls,
            wecom_api_base_url: required("WECOM_API_BASE_URL")?,
            wecom_timeout: Duration::from_millis(parsed("WECOM_TIMEOUT_MS")?),
            budget: BudgetLimits {
                per_minute: parsed("WECOM_BUDGET_PER_MINUTE")?,
                per_hour: parsed("WECOM_BUDGET_PER_HOUR")?,
            },
        })
    }
}
