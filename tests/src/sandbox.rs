//! The WeCom sandbox, driven as the tests need it: its control API and its WeCom API.

use crate::{TestTenant, World};
use anyhow::{ensure, Result};
use serde_json::{json, Value};

pub struct Sandbox<'a>(pub(crate) &'a World);

impl Sandbox<'_> {
    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.0.sandbox_url)
    }

    pub async fn post(&self, path: &str, body: Value) -> Result<Value> {
        Ok(self
            .0
            .http
            .post(self.url(path))
            .json(&body)
            .send()
            .await?
            .json()
            .await?)
    }

    pub async fn put(&self, path: &str, body: Value) -> Result<Value> {
        let response = self.0.http.put(self.url(path)).json(&body).send().await?;
        ensure!(
            response.status().is_success(),
            "sandbox refused PUT {path}: {}",
            response.text().await?
        );
        Ok(response.json().await?)
    }

    pub async fn get(&self, path: &str) -> Result<Value> {
        Ok(self.0.http.get(self.url(path)).send().await?.json().await?)
    }

    /// Registers the tenant's corp with its directory and, if given, its callback URL.
    pub async fn add_corp(
        &self,
        tenant: &TestTenant,
        callback_url: Option<&str>,
        users: &[&str],
    ) -> Result<()> {
        let mut corp = json!({"corp_secret": tenant.corp_secret, "users": users});
        if let Some(url) = callback_url {
            corp["callback"] =
                json!({"url": url, "token": tenant.token, "encoding_aes_key": tenant.aes_key});
        }
        self.put(&format!("/_sandbox/corps/{}", tenant.corp_id), corp)
            .await?;
        Ok(())
    }

    pub async fn gettoken(&self, corp_id: &str, secret: &str) -> Result<Value> {
        Ok(self
            .0
            .http
            .get(self.url("/cgi-bin/gettoken"))
            .query(&[("corpid", corp_id), ("corpsecret", secret)])
            .send()
            .await?
            .json()
            .await?)
    }

    pub async fn token(&self, tenant: &TestTenant) -> Result<String> {
        let answer = self.gettoken(&tenant.corp_id, &tenant.corp_secret).await?;
        ensure!(answer["errcode"] == 0, "gettoken failed: {answer}");
        Ok(answer["access_token"]
            .as_str()
            .unwrap_or_default()
            .to_owned())
    }

    /// One `externalcontact/<api>` call with `access_token`.
    pub async fn call(&self, api: &str, token: &str, body: Value) -> Result<Value> {
        Ok(self
            .0
            .http
            .post(self.url(&format!("/cgi-bin/externalcontact/{api}")))
            .query(&[("access_token", token)])
            .json(&body)
            .send()
            .await?
            .json()
            .await?)
    }
}

impl World {
    pub fn sandbox(&self) -> Sandbox<'_> {
        Sandbox(self)
    }
}
