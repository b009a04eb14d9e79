//! The environment this function reads; names match `template.yaml`.

#[derive(Debug)]
pub struct Config {
    pub table_name: String,
    pub refresh_queue_url: String,
    pub dead_letter_queue_url: String,
}

#[derive(Debug, thiserror::Error)]
#[error("environment variable {0} is not set")]
pub struct MissingVariable(&'static str);

fn required(name: &'static str) -> Result<String, MissingVariable> {
    std::env::var(name)
        .ok()
        .filter(|v| !v.is_empty())
        .ok_or(MissingVariable(name))
}

impl Config {
    /// Fails the cold start when a variable is missing, rather than failing each batch.
    pub fn from_env() -> Result<Self, MissingVariable> {
        Ok(Self {
            table_name: required("TABLE_NAME")?,
            refresh_queue_url: required("REFRESH_QUEUE_URL")?,
            dead_letter_queue_url: required("DEAD_LETTER_QUEUE_URL")?,
        })
    }
}
