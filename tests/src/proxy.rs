//! A fault injector on the wire: an HTTP proxy on 127.0.0.1 in front of the local AWS
//! endpoint that fails the requests a test picks. A function is pointed at it through the
//! standard `AWS_ENDPOINT_URL_<SERVICE>` setting, so no code path exists only for tests.

use anyhow::Result;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

/// Decides from a request's `X-Amz-Target` header and body whether to fail it.
pub type Rule = Arc<dyn Fn(&str, &str) -> bool + Send + Sync>;

/// The answer a failed request gets: an HTTP status and DynamoDB's error type.
#[derive(Debug, Clone, Copy)]
pub struct Fault {
    pub status: u16,
    pub error_type: &'static str,
}

impl Fault {
    /// DynamoDB's 500: an internal error, which the SDK retries.
    pub const INTERNAL: Fault = Fault {
        status: 500,
        error_type: "InternalServerError",
    };
    /// A write refused because an item it names is part of a transaction in flight (AWS
    /// answers it; the emulator never does).
    pub const TRANSACTION_CONFLICT: Fault = Fault {
        status: 400,
        error_type: "TransactionConflictException",
    };
}

struct Shared {
    upstream: String,
    http: reqwest::Client,
    rule: Rule,
    fault: Fault,
    armed: AtomicBool,
    failed: AtomicUsize,
}

pub struct FaultProxy {
    pub url: String,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl FaultProxy {
    /// Starts armed: every request matching `rule` gets a DynamoDB-style 500 until `disarm`.
    pub async fn start(upstream: &str, rule: Rule) -> Result<Self> {
        Self::start_with(upstream, rule, Fault::INTERNAL).await
    }

    /// Starts armed: every request matching `rule` gets `fault` until `disarm`.
    pub async fn start_with(upstream: &str, rule: Rule, fault: Fault) -> Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        let shared = Arc::new(Shared {
            upstream: upstream.trim_end_matches('/').to_owned(),
            http: reqwest::Client::new(),
            rule,
            fault,
            armed: AtomicBool::new(true),
            failed: AtomicUsize::new(0),
        });
        let app = axum::Router::new()
            .fallback(forward)
            .with_state(shared.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self { url, shared, task })
    }

    pub fn disarm(&self) {
        self.shared.armed.store(false, Ordering::SeqCst);
    }

    /// How many requests were failed so far.
    pub fn failed(&self) -> usize {
        self.shared.failed.load(Ordering::SeqCst)
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn forward(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let target = headers
        .get("x-amz-target")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if shared.armed.load(Ordering::SeqCst) && (shared.rule)(target, &String::from_utf8_lossy(&body))
    {
        shared.failed.fetch_add(1, Ordering::SeqCst);
        let error = format!(
            r#"{{"__type":"com.amazonaws.dynamodb.v20120810#{}","message":"injected by the test's fault proxy"}}"#,
            shared.fault.error_type
        );
        return (
            StatusCode::from_u16(shared.fault.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            [("content-type", "application/x-amz-json-1.0")],
            error,
        )
            .into_response();
    }
    let path = uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
    let mut request = shared
        .http
        .request(method, format!("{}{path}", shared.upstream))
        .body(body);
    for (name, value) in &headers {
        // The signature covers the Host header, so the upstream must see the one the client signed.
        if name != "content-length" {
            request = request.header(name, value);
        }
    }
    match request.send().await {
        Ok(upstream) => {
            let status = upstream.status();
            let headers = upstream.headers().clone();
            let body = upstream.bytes().await.unwrap_or_default();
            let mut response = (status, body).into_response();
            for (name, value) in &headers {
                if name != "content-length" && name != "transfer-encoding" {
                    response.headers_mut().insert(name, value.clone());
                }
            }
            response
        }
        Err(_) => StatusCode::BAD_GATEWAY.into_response(),
    }
}
