//! "What the operator saw": the stack's alarm changes during the run, read back from
//! CloudWatch's alarm history, and what the team's group robot received (the sandbox's
//! webhook log), so the report says which alarms fired and why, or that none did.

use crate::sandbox::Sandbox;
use crate::world::World;
use anyhow::Result;
use aws_sdk_cloudwatch::primitives::DateTime;
use aws_sdk_cloudwatch::types::{HistoryItemType, MetricDatum, StandardUnit, StateValue};
use serde_json::Value;
use std::time::SystemTime;

/// One alarm state change.
#[derive(Debug, Clone)]
pub struct Change {
    pub at: String,
    pub alarm: String,
    pub summary: String,
    pub reason: String,
}

#[derive(Debug, Clone, Default)]
pub struct Seen {
    /// The stack's alarms, and those in ALARM at the end.
    pub alarms: usize,
    pub in_alarm: Vec<String>,
    pub changes: Vec<Change>,
    /// The robot messages' first lines.
    pub robot: Vec<String>,
}

/// Where the run starts: the time and the robot log's position.
pub struct Mark {
    since: SystemTime,
    robot_next: u64,
}

pub async fn mark(sandbox: &Sandbox) -> Mark {
    Mark {
        since: SystemTime::now(),
        robot_next: robot(sandbox, 0).await.map(|(_, next)| next).unwrap_or(0),
    }
}

async fn robot(sandbox: &Sandbox, since: u64) -> Result<(Vec<String>, u64)> {
    let page: Value = sandbox
        .call(
            reqwest::Method::GET,
            &format!("/_sandbox/robot/messages?since={since}"),
            None,
        )
        .await?;
    let lines = page["messages"]
        .as_array()
        .map(|messages| {
            messages
                .iter()
                .filter_map(|m| m["content"].as_str())
                .map(|c| c.lines().next().unwrap_or_default().to_owned())
                .collect()
        })
        .unwrap_or_default();
    Ok((lines, page["next"].as_u64().unwrap_or(since)))
}

/// The alarm changes since `mark`, and the robot's messages. MiniStack evaluates its alarms
/// only when a datum or an alarm is put, so one probe datum is put first (on AWS alarms
/// evaluate themselves every period).
pub async fn look(world: &World, sandbox: &Sandbox, mark: &Mark) -> Result<Seen> {
    let cloudwatch = aws_sdk_cloudwatch::Client::new(&world.aws);
    cloudwatch
        .put_metric_data()
        .namespace("qrsync/demo")
        .metric_data(
            MetricDatum::builder()
                .metric_name("AlarmProbe")
                .value(1.0)
                .unit(StandardUnit::Count)
                .build(),
        )
        .send()
        .await?;
    let prefix = format!("{}-", world.stack);
    let alarms = cloudwatch
        .describe_alarms()
        .alarm_name_prefix(&prefix)
        .max_records(100)
        .send()
        .await?;
    let alarms = alarms.metric_alarms();
    let history = cloudwatch
        .describe_alarm_history()
        .history_item_type(HistoryItemType::StateUpdate)
        .start_date(DateTime::from(mark.since))
        .end_date(DateTime::from(SystemTime::now()))
        .max_records(100)
        .send()
        .await?;
    let mut changes: Vec<Change> = history
        .alarm_history_items()
        .iter()
        .filter(|item| item.alarm_name().is_some_and(|n| n.starts_with(&prefix)))
        .map(|item| {
            let data: Value =
                serde_json::from_str(item.history_data().unwrap_or("{}")).unwrap_or_default();
            Change {
                at: item.timestamp().map(|t| t.to_string()).unwrap_or_default(),
                alarm: item.alarm_name().unwrap_or_default().to_owned(),
                summary: item.history_summary().unwrap_or_default().to_owned(),
                reason: data["newState"]["stateReason"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            }
        })
        .collect();
    changes.sort_by(|a, b| a.at.cmp(&b.at));
    Ok(Seen {
        alarms: alarms.len(),
        in_alarm: alarms
            .iter()
            .filter(|a| a.state_value() == Some(&StateValue::Alarm))
            .filter_map(|a| a.alarm_name().map(str::to_owned))
            .collect(),
        changes,
        robot: robot(sandbox, mark.robot_next).await?.0,
    })
}
