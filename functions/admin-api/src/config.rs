//! The environment this function reads; names match `template.yaml`.

#[derive(Debug)]
pub struct Config {
    pub table_name: String,
    pub refresh_queue_url: String,
    /// WeCom's API host (`https://qyapi.weixin.qq.com` in production, the sandbox locally).
    pub wecom_api_base_url: String,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("environment variable {0} is not set")]
    Missing(&'static str),
}

fn required(name: &'static str) -> Result<String, ConfigError> {
    std::env::var(name)
        .ok()
        .filter(|v| !v.is_empty())
        .ok_or(ConfigError::Missing(name))
}

impl Config {
    /// Fails the cold start when a variable is missing, rather than failing each request.
    pub fn from_env() -> Result<Self, ConfigError> {
        Ok(Self {
            table_name: required("TABLE_NAME")?,
            refresh_queue_url: required("REFRESH_QUEUE_URL")?,
            wecom_api_base_url: required("WECOM_API_BASE_URL")?,
        })
    }
}
