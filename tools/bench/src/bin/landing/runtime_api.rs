//! The landing function's own `bootstrap`, run by the bench as Lambda runs it: a pool of
//! warm execution environments, each polling a Lambda Runtime API
//! (`/2018-06-01/runtime/invocation/next`) that the bench serves on 127.0.0.1, with the
//! deployed function's environment and the credentials of its role.
//!
//! Why: the local world's emulated API Gateway and Lambda (MiniStack, one Python process)
//! queue invocations above about 100 a second on two cores, so a visit's answer time at 300 a
//! second there measures the emulator. Through this pool, 300 visits a second reach the same
//! binary, which makes its one real request to the local world's DynamoDB; what is left out is
//! API Gateway's own hop. No code of the function changes: it is the `bootstrap` `sam deploy`
//! uploaded, reading its event from the Runtime API as on Lambda.

use anyhow::{ensure, Context, Result};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::Router;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::{mpsc, oneshot};

/// The sample event of `events/apigw-landing-visit.json`: a REST API proxy event of the
/// landing route, as API Gateway sends it.
const VISIT_EVENT: &str = include_str!("../../../../../events/apigw-landing-visit.json");

/// An invocation waiting for an environment, and where its answer goes.
struct Pending {
    request_id: String,
    event: Arc<Value>,
    answer: oneshot::Sender<Value>,
}

struct Shared {
    queue: tokio::sync::Mutex<mpsc::Receiver<Pending>>,
    in_flight: Mutex<HashMap<String, oneshot::Sender<Value>>>,
    function_arn: String,
}

/// The pool: invoke it with `visit`; `store_requests` are the numbers the function logged.
pub struct RuntimePool {
    queue: mpsc::Sender<Pending>,
    event: Arc<Value>,
    next_id: AtomicU64,
    children: Mutex<Vec<Child>>,
    store_requests: Arc<Mutex<Vec<u64>>>,
}

/// What the pool needs of the deployed function.
pub struct Deployed {
    pub bootstrap: std::path::PathBuf,
    pub function_name: String,
    pub function_arn: String,
    pub memory_mb: i32,
    pub environment: HashMap<String, String>,
    /// The role's credentials: access key, secret, session token.
    pub credentials: (String, String, String),
}

impl Deployed {
    /// The function's configuration and its role's credentials (STS `AssumeRole`), so the
    /// pool's environments act with the function's own permissions.
    pub async fn read(
        aws: &aws_config::SdkConfig,
        function: &str,
        bootstrap: std::path::PathBuf,
    ) -> Result<Self> {
        ensure!(
            bootstrap.is_file(),
            "no bootstrap at {} (make deploy stages one)",
            bootstrap.display()
        );
        let config = aws_sdk_lambda::Client::new(aws)
            .get_function_configuration()
            .function_name(function)
            .send()
            .await?;
        let role = config.role().context("the function has a role")?;
        let assumed = aws_sdk_sts::Client::new(aws)
            .assume_role()
            .role_arn(role)
            .role_session_name("landing-bench")
            .send()
            .await?;
        let credentials = assumed
            .credentials()
            .context("AssumeRole answers credentials")?;
        Ok(Self {
            bootstrap,
            function_name: function.to_owned(),
            function_arn: config.function_arn().unwrap_or_default().to_owned(),
            memory_mb: config.memory_size().unwrap_or(128),
            environment: config
                .environment()
                .and_then(|e| e.variables())
                .cloned()
                .unwrap_or_default(),
            credentials: (
                credentials.access_key_id().to_owned(),
                credentials.secret_access_key().to_owned(),
                credentials.session_token().to_owned(),
            ),
        })
    }
}

fn next_headers(request_id: &str, function_arn: &str) -> HeaderMap {
    let deadline_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
        + 10_000;
    let mut headers = HeaderMap::new();
    let mut put = |name: &'static str, value: &str| {
        if let Ok(value) = HeaderValue::from_str(value) {
            headers.insert(name, value);
        }
    };
    put("lambda-runtime-aws-request-id", request_id);
    put("lambda-runtime-deadline-ms", &deadline_ms.to_string());
    put("lambda-runtime-invoked-function-arn", function_arn);
    put("content-type", "application/json");
    headers
}

async fn next(State(shared): State<Arc<Shared>>) -> impl IntoResponse {
    let pending = shared.queue.lock().await.recv().await;
    let Some(pending) = pending else {
        return (StatusCode::GONE, HeaderMap::new(), String::new());
    };
    shared
        .in_flight
        .lock()
        .expect("not poisoned")
        .insert(pending.request_id.clone(), pending.answer);
    (
        StatusCode::OK,
        next_headers(&pending.request_id, &shared.function_arn),
        pending.event.to_string(),
    )
}

async fn respond(
    State(shared): State<Arc<Shared>>,
    Path(request_id): Path<String>,
    body: Bytes,
) -> StatusCode {
    let answer = serde_json::from_slice(&body).unwrap_or(Value::Null);
    finish(&shared, &request_id, answer)
}

async fn fail(
    State(shared): State<Arc<Shared>>,
    Path(request_id): Path<String>,
    body: Bytes,
) -> StatusCode {
    let error = serde_json::from_slice(&body).unwrap_or(Value::Null);
    finish(&shared, &request_id, json!({ "error": error }))
}

fn finish(shared: &Shared, request_id: &str, answer: Value) -> StatusCode {
    let waiting = shared
        .in_flight
        .lock()
        .expect("not poisoned")
        .remove(request_id);
    if let Some(waiting) = waiting {
        let _ = waiting.send(answer);
    }
    StatusCode::ACCEPTED
}

async fn init_error(body: Bytes) -> StatusCode {
    eprintln!(
        "[landing] an environment failed to start: {}",
        String::from_utf8_lossy(&body)
    );
    StatusCode::ACCEPTED
}

impl RuntimePool {
    /// Serves the Runtime API and starts `environments` copies of the bootstrap, then warms
    /// each with one visit of `tenant`'s `code`.
    pub async fn start(
        deployed: &Deployed,
        environments: usize,
        tenant: &str,
        code: &str,
    ) -> Result<Self> {
        let (queue, receiver) = mpsc::channel(100_000);
        let shared = Arc::new(Shared {
            queue: tokio::sync::Mutex::new(receiver),
            in_flight: Mutex::default(),
            function_arn: deployed.function_arn.clone(),
        });
        let app = Router::new()
            .route("/2018-06-01/runtime/invocation/next", get(next))
            .route(
                "/2018-06-01/runtime/invocation/{request_id}/response",
                post(respond),
            )
            .route(
                "/2018-06-01/runtime/invocation/{request_id}/error",
                post(fail),
            )
            .route("/2018-06-01/runtime/init/error", post(init_error))
            .with_state(shared);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let runtime_api = listener.local_addr()?.to_string();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });

        let mut event: Value = serde_json::from_str(VISIT_EVENT)?;
        event["path"] = json!(format!("/l/{tenant}/{code}"));
        event["pathParameters"] = json!({ "tenant": tenant, "code": code });
        event["requestContext"]["path"] = json!(format!("/live/l/{tenant}/{code}"));
        let pool = Self {
            queue,
            event: Arc::new(event),
            next_id: AtomicU64::new(0),
            children: Mutex::default(),
            store_requests: Arc::default(),
        };
        for n in 0..environments {
            let child = pool.spawn(deployed, &runtime_api, n)?;
            pool.children.lock().expect("not poisoned").push(child);
        }
        // Every environment's cold start done before the measured visits.
        let warm: Vec<_> = (0..environments).map(|_| pool.visit()).collect();
        for answer in futures::future::join_all(warm).await {
            answer.context("a warm-up visit")?;
        }
        // The warm-up's own log lines come through the readers a moment after their answers:
        // counted out before the measured visits start.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while pool.store_requests().len() < environments && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        pool.store_requests.lock().expect("not poisoned").clear();
        Ok(pool)
    }

    fn spawn(&self, deployed: &Deployed, runtime_api: &str, n: usize) -> Result<Child> {
        let (key, secret, token) = &deployed.credentials;
        let mut child = Command::new(&deployed.bootstrap)
            .env_clear()
            .envs(&deployed.environment)
            .envs([
                ("AWS_LAMBDA_RUNTIME_API", runtime_api),
                ("AWS_LAMBDA_FUNCTION_NAME", deployed.function_name.as_str()),
                ("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST"),
                (
                    "AWS_LAMBDA_FUNCTION_MEMORY_SIZE",
                    deployed.memory_mb.to_string().as_str(),
                ),
                (
                    "AWS_LAMBDA_LOG_GROUP_NAME",
                    format!("/aws/lambda/{}", deployed.function_name).as_str(),
                ),
                ("AWS_LAMBDA_LOG_STREAM_NAME", format!("bench-{n}").as_str()),
                ("AWS_ACCESS_KEY_ID", key.as_str()),
                ("AWS_SECRET_ACCESS_KEY", secret.as_str()),
                ("AWS_SESSION_TOKEN", token.as_str()),
            ])
            .envs(
                ["AWS_ENDPOINT_URL", "AWS_REGION", "AWS_DEFAULT_REGION"]
                    .into_iter()
                    .filter_map(|name| Some((name, std::env::var(name).ok()?))),
            )
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("starting {}", deployed.bootstrap.display()))?;
        let stdout = child.stdout.take().context("the bootstrap's stdout")?;
        let found = self.store_requests.clone();
        // The function logs each visit's `store_requests`: read here, as CloudWatch would.
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(n) = crate::store_requests_of(&line) {
                    found.lock().expect("not poisoned").push(n);
                }
            }
        });
        Ok(child)
    }

    /// One visit: its invocation queued for the next free environment, and the function's
    /// answer (API Gateway's proxy response) as status and `location`.
    pub async fn visit(&self) -> Result<(u16, Option<String>)> {
        let request_id = format!("bench-{}", self.next_id.fetch_add(1, Ordering::Relaxed));
        let (answer, answered) = oneshot::channel();
        self.queue
            .send(Pending {
                request_id,
                event: self.event.clone(),
                answer,
            })
            .await
            .ok()
            .context("the runtime API stopped")?;
        let answer = tokio::time::timeout(Duration::from_secs(10), answered)
            .await
            .context("no answer within 10 s")??;
        let status = answer["statusCode"].as_u64().unwrap_or(0) as u16;
        let location = answer["headers"]["location"]
            .as_str()
            .or_else(|| answer["headers"]["Location"].as_str())
            .or_else(|| answer["multiValueHeaders"]["location"][0].as_str())
            .map(str::to_owned);
        Ok((status, location))
    }

    pub fn store_requests(&self) -> Vec<u64> {
        self.store_requests.lock().expect("not poisoned").clone()
    }
}

impl Drop for RuntimePool {
    fn drop(&mut self) {
        for child in self.children.lock().expect("not poisoned").iter_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
