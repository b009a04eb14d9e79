//! Wiring only: the robot (if one is configured) is built once per container.

mod config;
mod handler;

use adapters::wecom::WeComRobot;
use domain::alerts::AlarmRelay;
use lambda_runtime::{run, service_fn, Error};

#[tokio::main]
async fn main() -> Result<(), Error> {
    adapters::logging::init();
    let metrics = adapters::metrics::init("alarm-robot")?;
    let config = config::Config::from_env()?;
    let robot = config
        .webhook_url
        .map(|url| WeComRobot::new(url, config.timeout));
    let relay = AlarmRelay::new(robot);
    run(service_fn(|event| {
        metrics.measured(handler::handle(&relay, event))
    }))
    .await
}
