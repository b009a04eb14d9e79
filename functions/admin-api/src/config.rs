//! The environment this function reads; names match `template.yaml`.

use adapters::env::{budget_layers, key_rotation, parsed, required, EnvError};
use domain::budget::{BudgetLayers, BudgetLimits};
use domain::tenants::KeyRotation;

#[derive(Debug)]
pub struct Config {
    pub table_name: String,
    /// The landing page's tables: pages are written (refresh) or deleted (admin) with their codes.
    pub pages: adapters::dynamodb::PageTables,
    pub refresh_queue_url: String,
    /// Where facts that reach several codes go, to be expanded after the answer.
    pub fan_out_queue_url: String,
    /// WeCom's API host (`https://qyapi.weixin.qq.com` in production, the sandbox locally).
    pub wecom_api_base_url: String,
    /// Each tenant's calls per WeCom API per minute and hour, shared with the refresh function,
    /// and each egress address's, shared by its tenants.
    pub budget: BudgetLayers,
    /// How long a tenant's replaced callback keys are kept: a second rotation within it is
    /// refused unless it drops them.
    pub key_rotation: KeyRotation,
}

impl Config {
    pub fn from_env() -> Result<Self, EnvError> {
        Ok(Self {
            table_name: required("TABLE_NAME")?,
            pages: adapters::env::page_tables()?,
            refresh_queue_url: required("REFRESH_QUEUE_URL")?,
            fan_out_queue_url: required("FAN_OUT_QUEUE_URL")?,
            wecom_api_base_url: required("WECOM_API_BASE_URL")?,
            budget: budget_layers(BudgetLimits {
                per_minute: parsed("WECOM_BUDGET_PER_MINUTE")?,
                per_hour: parsed("WECOM_BUDGET_PER_HOUR")?,
            })?,
            key_rotation: key_rotation()?,
        })
    }
}
