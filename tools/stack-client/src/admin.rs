//! The admin API, as the platform's backend calls it: JSON over HTTPS with SigV4-signed
//! requests (service `execute-api`), credentials from the default provider chain.

use anyhow::{anyhow, bail, Context, Result};
use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use aws_sigv4::http_request::{sign, SignableBody, SignableRequest, SigningSettings};
use aws_sigv4::sign::v4::SigningParams;
use serde_json::Value;
use std::time::{Duration, SystemTime};

pub struct AdminApi {
    base: String,
    http: reqwest::Client,
    credentials: SharedCredentialsProvider,
    region: String,
}

/// An answer of the admin API: its status and JSON body.
pub struct Answer {
    pub status: u16,
    pub body: Value,
}

impl AdminApi {
    pub fn new(api_url: &str, aws: &aws_config::SdkConfig) -> Result<Self> {
        let credentials = aws.credentials_provider().ok_or_else(|| {
            anyhow!("no AWS credentials provider (set AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY)")
        })?;
        let region = aws
            .region()
            .map(ToString::to_string)
            .ok_or_else(|| anyhow!("no AWS region (set AWS_REGION)"))?;
        Ok(Self {
            base: format!("{}/admin", api_url.trim_end_matches('/')),
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(30))
                .build()?,
            credentials,
            region,
        })
    }

    pub async fn put(&self, path: &str, body: &Value) -> Result<Answer> {
        self.send("PUT", path, Some(body)).await
    }

    pub async fn get(&self, path: &str) -> Result<Answer> {
        self.send("GET", path, None).await
    }

    pub async fn delete(&self, path: &str) -> Result<Answer> {
        self.send("DELETE", path, None).await
    }

    /// One signed request of any method, `path` under `/admin`.
    pub async fn send(&self, method: &str, path: &str, body: Option<&Value>) -> Result<Answer> {
        let url = format!("{}{path}", self.base);
        let payload = body
            .map(serde_json::to_vec)
            .transpose()?
            .unwrap_or_default();
        let content_type = "application/json";
        let headers = self.signature(method, &url, content_type, &payload).await?;
        let mut request = self
            .http
            .request(method.parse()?, &url)
            .header("content-type", content_type);
        for (name, value) in headers {
            request = request.header(name, value);
        }
        if body.is_some() {
            request = request.body(payload);
        }
        let response = request
            .send()
            .await
            .with_context(|| format!("{method} {url}"))?;
        let status = response.status().as_u16();
        let text = response.text().await?;
        let body = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        Ok(Answer { status, body })
    }

    /// The headers SigV4 adds (authorization, x-amz-date, the session token if any).
    async fn signature(
        &self,
        method: &str,
        url: &str,
        content_type: &str,
        payload: &[u8],
    ) -> Result<Vec<(String, String)>> {
        let request = Unsigned {
            method,
            url,
            content_type,
            payload,
        };
        sigv4_headers(&self.credentials, &self.region, "execute-api", &request).await
    }
}

/// A request to sign: its method, URL, content type and body.
pub struct Unsigned<'a> {
    pub method: &'a str,
    pub url: &'a str,
    pub content_type: &'a str,
    pub payload: &'a [u8],
}

/// The headers SigV4 adds to `request` for `service` (authorization, x-amz-date, the session
/// token if any): the admin API's (`execute-api`), or a service's own API called without its
/// SDK (the tests sign SNS's query API this way).
pub async fn sigv4_headers(
    credentials: &SharedCredentialsProvider,
    region: &str,
    service: &str,
    request: &Unsigned<'_>,
) -> Result<Vec<(String, String)>> {
    let identity = credentials.provide_credentials().await?.into();
    let params = SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name(service)
        .time(SystemTime::now())
        .settings(SigningSettings::default())
        .build()?
        .into();
    let signable = SignableRequest::new(
        request.method,
        request.url,
        [("content-type", request.content_type)].into_iter(),
        SignableBody::Bytes(request.payload),
    )?;
    let (instructions, _signature) = sign(signable, &params)?.into_parts();
    Ok(instructions
        .headers()
        .map(|(name, value)| (name.to_owned(), value.to_owned()))
        .collect())
}

impl Answer {
    /// The body when the status is one of `expected`, else an error naming the request.
    pub fn expect(self, what: &str, expected: &[u16]) -> Result<Value> {
        if !expected.contains(&self.status) {
            bail!("{what}: admin API answered {} {}", self.status, self.body);
        }
        Ok(self.body)
    }
}
