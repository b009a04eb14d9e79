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
    let aws = adapters::aws::load_config().await;
    // The robot's webhook URL holds its key: it is read from its secret (none configured:
    // nothing is posted), never from the function's configuration.
    let robot = adapters::secrets::robot_webhook_url(&aws)
        .await?
        .map(|url| WeComRobot::new(url, config.timeout));
    let relay = AlarmRelay::new(robot);
    run(service_fn(|event| {
        metrics.measured(handler::handle(&relay, event))
    }))
    .await
}
