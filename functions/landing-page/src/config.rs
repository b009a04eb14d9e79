//! The environment this function reads; names match `template.yaml`.

use adapters::dynamodb::PageTables;
use adapters::env::{page_tables, EnvError};

#[derive(Debug)]
pub struct Config {
    /// The landing page's own tables: it reads pages and counts visits, nothing else.
    pub pages: PageTables,
}

impl Config {
    pub fn from_env() -> Result<Self, EnvError> {
        Ok(Self {
            pages: page_tables()?,
        })
    }
}
