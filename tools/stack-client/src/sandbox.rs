//! The WeCom sandbox's control API (`/_sandbox`, see tools/wecom-sandbox/README.md): the calls
//! every tool steering the sandbox makes the same way. Tools add their own steps on top with
//! `SandboxControl::call`.

use anyhow::{bail, Context, Result};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::Value;
use std::time::Duration;

pub struct SandboxControl {
    base: String,
    http: reqwest::Client,
}

/// One entry of the sandbox's call log.
#[derive(Debug, Clone, Deserialize)]
pub struct Call {
    /// When the call arrived (the sandbox's clock).
    #[serde(default)]
    pub at_ms: u64,
    /// The JSON body the caller sent.
    #[serde(default)]
    pub request: Value,
    pub response: Value,
}

impl Call {
    /// WeCom's errcode, when WeCom answered at all.
    pub fn errcode(&self) -> Option<i64> {
        self.response.get("errcode").and_then(Value::as_i64)
    }
}

/// A contact way as the sandbox holds it.
#[derive(Debug, Clone, Deserialize)]
pub struct ContactWay {
    pub config_id: String,
    /// The code id qrsync created the contact way with.
    #[serde(default)]
    pub state: String,
    pub user: Vec<String>,
}

impl SandboxControl {
    /// A client of the sandbox at `base`; each request may take up to `timeout`.
    pub fn new(base: &str, timeout: Duration) -> Result<Self> {
        Ok(Self {
            base: base.trim_end_matches('/').to_owned(),
            http: reqwest::Client::builder().timeout(timeout).build()?,
        })
    }

    /// One control request; a non-2xx answer is an error carrying the sandbox's body.
    pub async fn call<T: DeserializeOwned>(
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
            .call(reqwest::Method::GET, "/_sandbox/health", None)
            .await?;
        Ok(())
    }

    /// Changes the sandbox's settings named in `settings` (`PUT /_sandbox/config`).
    pub async fn configure(&self, settings: Value) -> Result<()> {
        let _: Value = self
            .call(reqwest::Method::PUT, "/_sandbox/config", Some(settings))
            .await?;
        Ok(())
    }

    /// Creates or replaces a corp (`body`: its secret, users and optional callback).
    pub async fn put_corp(&self, corp_id: &str, body: Value) -> Result<()> {
        let _: Value = self
            .call(
                reqwest::Method::PUT,
                &format!("/_sandbox/corps/{corp_id}"),
                Some(body),
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
            .call(
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
            .call(
                reqwest::Method::GET,
                &format!("/_sandbox/contact-ways?corp_id={corp_id}"),
                None,
            )
            .await?;
        Ok(page.contact_ways)
    }
}
