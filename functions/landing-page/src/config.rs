//! The environment this function reads; names match `template.yaml`.

use adapters::env::{required, EnvError};

#[derive(Debug)]
pub struct Config {
    pub table_name: String,
}

impl Config {
    pub fn from_env() -> Result<Self, EnvError> {
        Ok(Self {
            table_name: required("TABLE_NAME")?,
        })
    }
}
