//! The team's WeCom group robot (群机器人): `POST <webhook URL>` with
//! `{"msgtype":"markdown","markdown":{"content":...}}`, answered `{"errcode":0,"errmsg":"ok"}`.
//! The URL carries the robot's key, a secret: it is never logged, and errors drop it.

use domain::alerts::{AlertError, GroupRobot};
use serde::Deserialize;
use std::time::Duration;

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
        let status = answer.status();
        let answer: Answer = answer
            .json()
            .await
            .map_err(|e| AlertError::Robot(format!("HTTP {status}: {}", e.without_url())))?;
        if answer.errcode == 0 {
            Ok(())
        } else {
            Err(AlertError::Robot(format!(
                "errcode {} ({})",
                answer.errcode, answer.errmsg
            )))
        }
    }
}
