//! Translates the alarm topic's SNS notifications into `AlarmRelay::relay` calls.
//!
//! A message that is no alarm state change is logged and dropped (a retry cannot change it);
//! a robot that did not take the message fails the invocation, so Lambda's asynchronous
//! retries post it again.

use aws_lambda_events::event::sns::SnsEvent;
use domain::alerts::{AlarmChange, AlarmRelay, GroupRobot, Relayed};
use lambda_runtime::{Error, LambdaEvent};

pub(crate) async fn handle<R: GroupRobot>(
    relay: &AlarmRelay<R>,
    event: LambdaEvent<SnsEvent>,
) -> Result<(), Error> {
    for record in &event.payload.records {
        let change = match AlarmChange::parse(&record.sns.message) {
            Ok(change) => change,
            Err(error) => {
                tracing::warn!(message_id = %record.sns.message_id, error = %error, "not an alarm state change; dropped");
                continue;
            }
        };
        match relay.relay(&change).await? {
            Relayed::Posted => {
                tracing::info!(alarm = %change.alarm_name, state = %change.new_state_value, "alarm change posted to the group robot")
            }
            Relayed::NoRobot => {
                tracing::info!(alarm = %change.alarm_name, state = %change.new_state_value, "no group robot configured; alarm change not posted")
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use domain::alerts::AlertError;
    use lambda_runtime::Context;
    use std::sync::Mutex;

    #[derive(Default)]
    struct Robot {
        posted: Mutex<Vec<String>>,
        refuse: bool,
    }

    #[async_trait::async_trait]
    impl GroupRobot for &Robot {
        async fn post_markdown(&self, content: &str) -> Result<(), AlertError> {
            if self.refuse {
                return Err(AlertError::Robot(
                    "errcode 45009 (api freq out of limit)".into(),
                ));
            }
            self.posted.lock().expect("lock").push(content.to_owned());
            Ok(())
        }
    }

    fn sample() -> LambdaEvent<SnsEvent> {
        let path = format!(
            "{}/../../events/sns-alarm-state-change.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let event = serde_json::from_str(&std::fs::read_to_string(path).expect("sample exists"))
            .expect("an SNS event");
        LambdaEvent::new(event, Context::default())
    }

    #[tokio::test]
    async fn when_an_alarm_changes_state_its_markdown_is_posted_to_the_robot() {
        let robot = Robot::default();
        handle(&AlarmRelay::new(Some(&robot)), sample())
            .await
            .expect("handled");
        let posted = robot.posted.lock().expect("lock");
        assert_eq!(posted.len(), 1);
        assert!(posted[0].contains("ALARM"), "{}", posted[0]);
    }

    #[tokio::test]
    async fn when_the_robot_refuses_the_invocation_fails_so_lambda_retries_it() {
        let robot = Robot {
            refuse: true,
            ..Robot::default()
        };
        let result = handle(&AlarmRelay::new(Some(&robot)), sample()).await;
        assert!(result.is_err());
    }

    #[tokio::test]
    async fn a_notification_that_is_no_alarm_is_dropped_without_failing() {
        let robot = Robot::default();
        let mut event = sample();
        event.payload.records[0].sns.message = "hello".into();
        handle(&AlarmRelay::new(Some(&robot)), event)
            .await
            .expect("handled");
        assert!(robot.posted.lock().expect("lock").is_empty());
    }
}
