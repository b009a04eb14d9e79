//! Reading a function's environment. Each function's `config.rs` names the variables it
//! reads (the same names as `template.yaml`); a missing or malformed one fails the cold
//! start rather than each request.

use std::str::FromStr;

#[derive(Debug, thiserror::Error)]
pub enum EnvError {
    #[error("environment variable {0} is not set")]
    Missing(&'static str),
    #[error("environment variable {0} is malformed: {1}")]
    Malformed(&'static str, String),
}

pub fn required(name: &'static str) -> Result<String, EnvError> {
    std::env::var(name)
        .ok()
        .filter(|v| !v.is_empty())
        .ok_or(EnvError::Missing(name))
}

/// A required variable parsed as `T` (a number of seconds, say).
pub fn parsed<T: FromStr>(name: &'static str) -> Result<T, EnvError>
where
    T::Err: std::fmt::Display,
{
    required(name)?
        .parse()
        .map_err(|e: T::Err| EnvError::Malformed(name, e.to_string()))
}
