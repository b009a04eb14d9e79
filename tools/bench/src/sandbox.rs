//! The parts of the WeCom sandbox's control API (`/_sandbox`, see
//! tools/wecom-sandbox/README.md) the bench steers and reads: the rate limits, one corp, the
//! call log (with arrival times, for pushes per minute) and the contact ways.

use anyhow::{bail, Context, Result};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};
use std::time::Duration;

pub struct Sandbox {
    base: String,
    http: reqwest::Client,
}

/// One entry of the sandbox's call log.
#[derive(Debug, Clone, Deserialize)]
pub struct Call {
    /// When the call arrived (the sandbox's clock).
    pub at_ms: u64,
    pub response: Value,
}

impl Call {
    /// WeCom's errcode, when WeCom answered at all.
    pub fn errcode(&self) -> Option<i64> {
        self.response.get("errcode").and_then(Value::as_i64)
    }
}

#[derive(Debug, Clone, Deserialize)]
pub struct ContactWay {
    /// The code id qrsync created the contact way with.
    pub state: String,
    pub user: Vec<String>,
}

impl Sandbox {
    pub fn new(base: &str) -> Result<Self> {
        Ok(Self {
            base: base.trim_end_matches('/').to_owned(),
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(120))
                .build()?,
        })
    }

    async fn send<T: DeserializeOwned>(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<T> {
        let mut request = self
            .http
            .request(method.clone(), format!("{}{path}", self.base));
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.with_context(|| {
            format!(
                "the WeCom sandbox at {} does not answer ({method} {path})",
                self.base
            )
        })?;
        let status = response.status();
        let text = response.text().await?;
        if !status.is_success() {
            bail!("sandbox {method} {path}: {status} {text}");
        }
        serde_json::from_str(&text)
            .with_context(|| format!("sandbox {method} {path}: unexpected answer"))
    }

    pub async fn health(&self) -> Result<()> {
        let _: Value = self
            .send(reqwest::Method::GET, "/_sandbox/health", None)
            .await?;
        Ok(())
    }

    /// WeCom's frequency limits (per corp, per API, per wall-clock minute and hour), and the
    /// seed of the sandbox's random streams.
    pub async fn set_limits(&self, per_minute: u64, per_hour: u64, seed: u64) -> Result<()> {
        let _: Value = self
            .send(
                reqwest::Method::PUT,
                "/_sandbox/config",
                Some(json!({
                    "limit_per_minute": per_minute,
                    "limit_per_hour": per_hour,
                    "seed": seed,
                })),
            )
            .await?;
        Ok(())
    }

    /// A corp with its directory (no callback: the bench sends no events).
    pub async fn put_corp(&self, corp_id: &str, corp_secret: &str, users: &[String]) -> Result<()> {
        let _: Value = self
            .send(
                reqwest::Method::PUT,
                &format!("/_sandbox/corps/{corp_id}"),
                Some(json!({ "corp_secret": corp_secret, "users": users })),
            )
            .await?;
        Ok(())
    }

    /// The corp's calls of one API still in the log.
    pub async fn calls(&self, corp_id: &str, api: &str) -> Result<Vec<Call>> {
        #[derive(Deserialize)]
        struct Page {
            calls: Vec<Call>,
        }
        let page: Page = self
            .send(
                reqwest::Method::GET,
                &format!("/_sandbox/calls?corp_id={corp_id}&api={api}"),
                None,
            )
            .await?;
        Ok(page.calls)
    }

    pub async fn contact_ways(&self, corp_id: &str) -> Result<Vec<ContactWay>> {
        #[derive(Deserialize)]
        struct Page {
            contact_ways: Vec<ContactWay>,
        }
        let page: Page = self
            .send(
                reqwest::Method::GET,
                &format!("/_sandbox/contact-ways?corp_id={corp_id}"),
                None,
            )
            .await?;
        Ok(page.contact_ways)
    }
}
