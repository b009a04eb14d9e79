//! Wiring only: one HTTP client per container, reused by every invocation.

mod config;
mod handler;

use adapters::wecom::Direct;
use lambda_runtime::{run, service_fn, Error};

#[tokio::main]
async fn main() -> Result<(), Error> {
    adapters::logging::init();
    let metrics = adapters::metrics::init("wecom-relay")?;
    let config = config::Config::from_env()?;
    let wecom = Direct::relaying(config.wecom_api_base_url, config.wecom_timeout);
    run(service_fn(|event| {
        metrics.measured(handler::handle(&wecom, event))
    }))
    .await
}
