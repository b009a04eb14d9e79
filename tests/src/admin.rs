//! The admin API as the platform backend calls it: JSON over HTTPS, SigV4-signed for
//! `execute-api` (the routes use `AWS_IAM` authorisation).

use crate::World;
use anyhow::{anyhow, Result};
use aws_credential_types::provider::ProvideCredentials;
use aws_sigv4::http_request::{sign, SignableBody, SignableRequest, SigningSettings};
use aws_sigv4::sign::v4;
use serde_json::Value;
use std::time::SystemTime;

pub struct Admin<'a>(pub(crate) &'a World);

impl Admin<'_> {
    /// Sends a signed request; answers the status and the JSON body (`Null` when empty).
    pub async fn request(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> Result<(u16, Value)> {
        let world = self.0;
        let url = format!("{}/admin{path}", world.api_url);
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        let credentials = world
            .aws
            .credentials_provider()
            .ok_or_else(|| anyhow!("no AWS credentials configured"))?
            .provide_credentials()
            .await?;
        let identity = credentials.into();
        let region = world
            .aws
            .region()
            .map(|r| r.to_string())
            .unwrap_or_else(|| "us-east-1".into());
        let params = v4::SigningParams::builder()
            .identity(&identity)
            .region(&region)
            .name("execute-api")
            .time(SystemTime::now())
            .settings(SigningSettings::default())
            .build()?
            .into();
        let headers = [("content-type", "application/json")];
        let signable = SignableRequest::new(
            method,
            url.as_str(),
            headers.into_iter(),
            SignableBody::Bytes(body.as_bytes()),
        )?;
        let (instructions, _) = sign(signable, &params)?.into_parts();
        let mut request = world
            .http
            .request(reqwest::Method::from_bytes(method.as_bytes())?, &url)
            .header("content-type", "application/json")
            .body(body);
        for (name, value) in instructions.headers() {
            request = request.header(name, value);
        }
        let response = request.send().await?;
        let status = response.status().as_u16();
        let text = response.text().await?;
        let json = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        Ok((status, json))
    }

    pub async fn put(&self, path: &str, body: Value) -> Result<Value> {
        let (status, answer) = self.request("PUT", path, Some(body)).await?;
        anyhow::ensure!(
            (200..300).contains(&status),
            "PUT /admin{path}: {status} {answer}"
        );
        Ok(answer)
    }

    pub async fn get(&self, path: &str) -> Result<Value> {
        let (status, answer) = self.request("GET", path, None).await?;
        anyhow::ensure!(status == 200, "GET /admin{path}: {status} {answer}");
        Ok(answer)
    }
}

impl World {
    pub fn admin(&self) -> Admin<'_> {
        Admin(self)
    }
}
