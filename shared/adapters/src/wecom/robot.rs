//! The team's WeCom group robot (群机器人): `POST <webhook URL>` with
//! `{"msgtype":"markdown","markdown":{"content":...}}`, answered `{"errcode":0,"errmsg":"ok"}`.
//! The URL carries the robot's key, a secret: it is never logged, and errors drop it.

use super::transport::{read_bounded, Bounded};
use domain::alerts::{AlertError, GroupRobot};
use serde::Deserialize;
use std::time::Duration;

/// The most of the robot's answer read: it is `{"errcode":0,"errmsg":"ok"}`.
const MOST_ANSWER_BYTES: usize = 16 * 1024;
/// The most of its `errmsg` kept in an error.
const MOST_ERRMSG_CHARS: usize = 300;

pub struct WeComRobot {
    http: reqwest::Client,
    url: String,
}

#[derive(Deserialize)]
struct Answer {
    errcode: i64,
    #[serde(default)]
    errmsg: String,
}

impl WeComRobot {
    /// `url` is the robot's webhook (`https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=...`).
    pub fn new(url: impl Into<String>, timeout: Duration) -> Self {
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .user_agent(concat!("qrsync/", env!("CARGO_PKG_VERSION")))
            .build()
            .expect("the TLS backend initialises");
        Self {
            http,
            url: url.into(),
        }
    }
}

#[async_trait::async_trait]
impl GroupRobot for WeComRobot {
    async fn post_markdown(&self, content: &str) -> Result<(), AlertError> {
        let body = serde_json::json!({ "msgtype": "markdown", "markdown": { "content": content } });
        let answer = self
            .http
            .post(&self.url)
            .json(&body)
            .send()
            .await
            .map_err(|e| AlertError::Robot(e.without_url().to_string()))?;
        let mut answer = answer;
        let status = answer.status();
        let body = read_bounded(&mut answer, MOST_ANSWER_BYTES)
            .await
            .map_err(|failure| match failure {
                Bounded::TooLong => AlertError::Robot(format!(
                    "HTTP {status}: an answer longer than {MOST_ANSWER_BYTES} bytes"
                )),
                Bounded::Failed(e) => AlertError::Robot(e.without_url().to_string()),
            })?;
        let answer: Answer = serde_json::from_slice(&body)
            .map_err(|_| AlertError::Robot(format!("HTTP {status}: not the robot's answer")))?;
        if answer.errcode == 0 {
            Ok(())
        } else {
            let errmsg: String = answer.errmsg.chars().take(MOST_ERRMSG_CHARS).collect();
            Err(AlertError::Robot(format!(
                "errcode {} ({errmsg})",
                answer.errcode
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wecom::test_server::answering_once;

    #[tokio::test]
    async fn an_answer_far_longer_than_the_robots_is_refused_unread() {
        let url = answering_once(200, vec![b' '; MOST_ANSWER_BYTES + 1]).await;
        let robot = WeComRobot::new(url, Duration::from_secs(5));
        let error = robot.post_markdown("hello").await.expect_err("too long");
        assert!(error.to_string().contains("longer than 16384"), "{error}");
    }

    #[tokio::test]
    async fn the_robots_refusal_keeps_its_errcode_and_a_bounded_errmsg() {
        let answer = format!(r#"{{"errcode":93000,"errmsg":"{}"}}"#, "e".repeat(2_000));
        let url = answering_once(200, answer.into_bytes()).await;
        let robot = WeComRobot::new(url, Duration::from_secs(5));
        let error = robot.post_markdown("hello").await.expect_err("refused");
        let text = error.to_string();
        assert!(text.contains("errcode 93000"), "{text}");
        assert!(text.len() < 400, "{} characters", text.len());
    }
}
