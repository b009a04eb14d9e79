//! Shared test harness: an in-process sandbox, a reqwest client, and a scripted callback
//! receiver on 127.0.0.1:0.
#![allow(dead_code, clippy::unwrap_used)]

use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::routing::post;
use axum::Router;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use wecom_sandbox::{Sandbox, SandboxConfig};

pub const CORP: &str = "ww0123456789abcdef";
pub const SECRET: &str = "corp-secret";
pub const TOKEN: &str = "QDG6eK";
pub const AES_KEY: &str = "jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C";

pub struct Harness {
    pub sandbox: Sandbox,
    pub http: reqwest::Client,
    pub url: String,
}

pub fn client() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

impl Harness {
    pub async fn start(seed: u64) -> Self {
        Self::start_with(SandboxConfig {
            seed: Some(seed),
            retry_pause_ms: 10,
            ..SandboxConfig::default()
        })
        .await
    }

    pub async fn start_with(config: SandboxConfig) -> Self {
        let sandbox = Sandbox::start(config).await.unwrap();
        let url = sandbox.url();
        Self {
            sandbox,
            http: client(),
            url,
        }
    }

    /// A control call; answers the status and the JSON body.
    pub async fn control(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let mut request = self.http.request(method, format!("{}{path}", self.url));
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    /// A control call that must succeed.
    pub async fn ok(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let (status, body) = self.control(method, path, body).await;
        assert!(
            (200..300).contains(&status),
            "{method} {path}: {status} {body}"
        );
        body
    }

    pub async fn put_corp(&self, users: &[&str], callback_url: Option<&str>) {
        let callback = callback_url
            .map(|url| json!({"url": url, "token": TOKEN, "encoding_aes_key": AES_KEY}));
        let mut body = json!({"corp_secret": SECRET, "users": users});
        if let Some(callback) = callback {
            body["callback"] = callback;
        }
        self.ok("PUT", &format!("/_sandbox/corps/{CORP}"), Some(body))
            .await;
    }

    pub async fn gettoken(&self, corp: &str, secret: &str) -> Value {
        self.http
            .get(format!("{}/cgi-bin/gettoken", self.url))
            .query(&[("corpid", corp), ("corpsecret", secret)])
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    pub async fn token(&self) -> String {
        let answer = self.gettoken(CORP, SECRET).await;
        assert_eq!(answer["errcode"], 0, "{answer}");
        answer["access_token"].as_str().unwrap().to_owned()
    }

    pub async fn send(
        &self,
        api: &str,
        token: &str,
        body: &Value,
    ) -> reqwest::Result<reqwest::Response> {
        self.http
            .post(format!("{}/cgi-bin/externalcontact/{api}", self.url))
            .query(&[("access_token", token)])
            .json(body)
            .send()
            .await
    }

    /// A WeCom call that must come back as HTTP 200 JSON.
    pub async fn wecom(&self, api: &str, token: &str, body: Value) -> Value {
        let response = self.send(api, token, &body).await.unwrap();
        assert_eq!(response.status(), 200);
        response.json().await.unwrap()
    }

    pub async fn add_way(&self, token: &str, kind: u8, users: &[&str], state: &str) -> String {
        let answer = self
            .wecom(
                "add_contact_way",
                token,
                json!({"type": kind, "scene": 2, "user": users, "state": state}),
            )
            .await;
        assert_eq!(answer["errcode"], 0, "{answer}");
        answer["config_id"].as_str().unwrap().to_owned()
    }

    pub async fn set_users(&self, token: &str, config_id: &str, users: &[&str]) {
        let answer = self
            .wecom(
                "update_contact_way",
                token,
                json!({"config_id": config_id, "user": users}),
            )
            .await;
        assert_eq!(answer["errcode"], 0, "{answer}");
    }

    pub async fn config(&self, patch: Value) -> Value {
        self.ok("PUT", "/_sandbox/config", Some(patch)).await
    }

    pub async fn scan(&self, config_id: &str, duplicate: bool) -> (u16, Value) {
        self.control(
            "POST",
            "/_sandbox/scan",
            Some(json!({"corp_id": CORP, "config_id": config_id, "duplicate": duplicate})),
        )
        .await
    }
}

/// Polls `check` until it gives a value, failing after `deadline`.
pub async fn eventually<T, F, Fut>(deadline: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let until = Instant::now() + deadline;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            Instant::now() < until,
            "condition not met within {deadline:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[derive(Debug, Clone)]
pub struct Hit {
    pub query: HashMap<String, String>,
    pub body: String,
    pub arrived: Instant,
    pub answered: Instant,
}

#[derive(Default)]
struct ReceiverState {
    hits: Vec<Hit>,
    arrivals: usize,
    /// Statuses for the first requests, in order; 200 after the script runs out.
    script: Vec<u16>,
    delay: Duration,
}

/// A stand-in for qrsync's callback endpoint.
pub struct Receiver {
    pub url: String,
    state: Arc<Mutex<ReceiverState>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn receive(
    State(state): State<Arc<Mutex<ReceiverState>>>,
    Query(query): Query<HashMap<String, String>>,
    body: Bytes,
) -> StatusCode {
    let arrived = Instant::now();
    let (index, delay) = {
        let mut state = state.lock().unwrap();
        state.arrivals += 1;
        (state.arrivals - 1, state.delay)
    };
    if !delay.is_zero() {
        // Simulates a slow endpoint, so concurrent copies overlap.
        tokio::time::sleep(delay).await;
    }
    let mut state = state.lock().unwrap();
    let status = state.script.get(index).copied().unwrap_or(200);
    state.hits.push(Hit {
        query,
        body: String::from_utf8(body.to_vec()).unwrap(),
        arrived,
        answered: Instant::now(),
    });
    StatusCode::from_u16(status).unwrap()
}

impl Receiver {
    pub async fn start(script: Vec<u16>, delay: Duration) -> Self {
        let state = Arc::new(Mutex::new(ReceiverState {
            hits: Vec::new(),
            arrivals: 0,
            script,
            delay,
        }));
        let app = Router::new()
            .route("/wecom/callback", post(receive))
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/wecom/callback", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Self { url, state, task }
    }

    pub fn hits(&self) -> Vec<Hit> {
        let mut hits = self.state.lock().unwrap().hits.clone();
        hits.sort_by_key(|h| h.arrived);
        hits
    }
}
