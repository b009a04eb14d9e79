//! Alerts where the team already looks: a CloudWatch alarm's state change, as it arrives on the
//! alarm topic, turned into a WeCom group-robot message (docs/wecom-api.md, "Group robot").
//! The robot itself is a port ([`GroupRobot`]); the HTTP client is in `adapters::wecom::robot`.

use serde::Deserialize;

/// WeCom refuses a markdown `content` longer than 4096 bytes.
pub const MAX_CONTENT_BYTES: usize = 4096;

/// One alarm state change, from the JSON CloudWatch publishes to SNS.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct AlarmChange {
    pub alarm_name: String,
    #[serde(default)]
    pub alarm_description: Option<String>,
    #[serde(default)]
    pub old_state_value: Option<String>,
    pub new_state_value: String,
    #[serde(default)]
    pub new_state_reason: Option<String>,
    #[serde(default)]
    pub state_change_time: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum AlertError {
    /// Not an alarm state change: retrying cannot help, so it is logged and dropped.
    #[error("not an alarm state change: {0}")]
    NotAnAlarm(String),
    /// The robot did not take the message (its answer's errcode, or no answer).
    #[error("the group robot did not take the message: {0}")]
    Robot(String),
}

impl AlarmChange {
    pub fn parse(message: &str) -> Result<Self, AlertError> {
        serde_json::from_str(message).map_err(|e| AlertError::NotAnAlarm(e.to_string()))
    }

    /// The robot's markdown: the state, the alarm, the change and why, at most
    /// [`MAX_CONTENT_BYTES`] (cut at a character boundary).
    pub fn markdown(&self) -> String {
        let colour = match self.new_state_value.as_str() {
            "ALARM" => "warning",
            "OK" => "info",
            _ => "comment",
        };
        let state = plain(&self.new_state_value);
        let mut content = format!(
            "**qrsync alarm <font color=\"{colour}\">{state}</font>**: {}\n",
            plain(&self.alarm_name)
        );
        let from = plain(self.old_state_value.as_deref().unwrap_or("?"));
        let at = plain(self.state_change_time.as_deref().unwrap_or("?"));
        content.push_str(&format!("> {from} -> {state} at {at}\n"));
        if let Some(description) = self.alarm_description.as_deref() {
            content.push_str(&format!("> {}\n", plain(description)));
        }
        if let Some(reason) = self.new_state_reason.as_deref() {
            content.push_str(&format!(
                "> <font color=\"comment\">{}</font>\n",
                plain(reason)
            ));
        }
        truncate(content, MAX_CONTENT_BYTES)
    }
}

/// `text` as plain words in the robot's markdown: the characters its markup is made of (tags,
/// links, emphasis, code, quotes at a line's start) become their full-width look-alikes, and a
/// line break a space, so an alarm's text shows as written and cannot add a link, a colour or
/// a line of its own.
fn plain(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '<' => '＜',
            '>' => '＞',
            '[' => '［',
            ']' => '］',
            '(' => '（',
            ')' => '）',
            '*' => '＊',
            '`' => '｀',
            '#' => '＃',
            '_' => '＿',
            c if c.is_control() => ' ',
            c => c,
        })
        .collect()
}

fn truncate(mut text: String, max: usize) -> String {
    if text.len() > max {
        let mut cut = max;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
    }
    text
}

/// The team's WeCom group robot.
#[async_trait::async_trait]
pub trait GroupRobot: Send + Sync {
    /// Posts one markdown message; `Err` when the robot did not answer `errcode` 0.
    async fn post_markdown(&self, content: &str) -> Result<(), AlertError>;
}

/// What became of one alarm change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Relayed {
    Posted,
    /// No robot is configured (`AlarmRobotWebhookUrl` empty): nothing posted.
    NoRobot,
}

/// Relays alarm changes to the robot, if one is configured.
pub struct AlarmRelay<R> {
    robot: Option<R>,
}

impl<R: GroupRobot> AlarmRelay<R> {
    pub fn new(robot: Option<R>) -> Self {
        Self { robot }
    }

    pub async fn relay(&self, change: &AlarmChange) -> Result<Relayed, AlertError> {
        let Some(robot) = &self.robot else {
            return Ok(Relayed::NoRobot);
        };
        robot.post_markdown(&change.markdown()).await?;
        crate::telemetry::alarm_message_posted();
        Ok(Relayed::Posted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    const SAMPLE: &str = r#"{"AlarmName":"qrsync-local-refresh-dlq-depth","AlarmDescription":"Refresh reasons failed for good.","AWSAccountId":"000000000000","NewStateValue":"ALARM","NewStateReason":"Threshold Crossed: 1 datapoint [2.0] was greater than the threshold (0.0).","StateChangeTime":"2026-12-03T14:00:00.000+0000","Region":"us-east-1","OldStateValue":"OK","Trigger":{"MetricName":"ApproximateNumberOfMessagesVisible","Namespace":"AWS/SQS"}}"#;

    #[derive(Default)]
    struct Recorded(Mutex<Vec<String>>);

    #[async_trait::async_trait]
    impl GroupRobot for &Recorded {
        async fn post_markdown(&self, content: &str) -> Result<(), AlertError> {
            self.0.lock().expect("lock").push(content.to_owned());
            Ok(())
        }
    }

    #[test]
    fn an_alarm_change_reads_as_state_name_transition_and_reason() {
        let change = AlarmChange::parse(SAMPLE).expect("an alarm");
        let text = change.markdown();
        assert!(text.starts_with("**qrsync alarm <font color=\"warning\">ALARM</font>**: qrsync-local-refresh-dlq-depth"), "{text}");
        assert!(
            text.contains("> OK -> ALARM at 2026-12-03T14:00:00.000+0000"),
            "{text}"
        );
        assert!(text.contains("Threshold Crossed"), "{text}");
        assert!(text.contains("Refresh reasons failed for good."), "{text}");
    }

    #[test]
    fn an_alarms_text_cannot_add_markup_a_link_or_a_line_of_its_own() {
        let mut change = AlarmChange::parse(SAMPLE).expect("an alarm");
        change.alarm_name = "x</font>**[pay here](https://evil.example)**".into();
        change.alarm_description = Some("fine\n> <font color=\"info\">all clear</font>".into());
        let text = change.markdown();
        for markup in ["](", "[pay", "</font>**[", "\n> <font color=\"info\">"] {
            assert!(!text.contains(markup), "{markup:?} in {text}");
        }
        assert_eq!(
            text.lines().count(),
            4,
            "title, transition, description, reason: {text}"
        );
        assert!(text.contains("pay here"), "the words stay readable: {text}");
    }

    #[test]
    fn a_message_that_is_no_alarm_is_refused_and_a_long_one_is_cut_to_wecom_s_limit() {
        assert!(matches!(
            AlarmChange::parse("{\"hello\":1}"),
            Err(AlertError::NotAnAlarm(_))
        ));
        let mut change = AlarmChange::parse(SAMPLE).expect("an alarm");
        change.new_state_reason = Some("原因".repeat(2000));
        let text = change.markdown();
        assert!(text.len() <= MAX_CONTENT_BYTES);
    }

    #[tokio::test]
    async fn with_no_robot_nothing_is_posted_and_with_one_the_markdown_is() {
        let change = AlarmChange::parse(SAMPLE).expect("an alarm");
        let none: AlarmRelay<&Recorded> = AlarmRelay::new(None);
        assert_eq!(none.relay(&change).await.expect("ok"), Relayed::NoRobot);
        let recorded = Recorded::default();
        let relay = AlarmRelay::new(Some(&recorded));
        assert_eq!(relay.relay(&change).await.expect("ok"), Relayed::Posted);
        assert_eq!(recorded.0.lock().expect("lock").len(), 1);
    }
}
