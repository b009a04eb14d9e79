//! WeCom's server API as the sandbox answers it. Every call passes the same stages, in this
//! order: fault rules (latency, then possibly an injected answer), the frequency limit, the
//! method, the access token, and the operation itself; the call log records the result.
//!
//! A call refused by a fault never reaches the limiter, so it does not count toward the
//! windows; every other call does, including those then refused for a bad or stale token.

use crate::app::SharedApp;
use crate::conn::ConnHandle;
use crate::faults::{self, Outcome};
use crate::state::{CallRecord, State};
use crate::wecom::{code, ok, Api, WecomError};
use crate::{contact_ways, links, tokens};
use axum::body::{to_bytes, Body};
use axum::extract::{ConnectInfo, Query, Request, State as AxumState};
use axum::http::{header, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use axum::{Json, Router};
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::time::{Duration, Instant};

const MAX_BODY_BYTES: usize = 1 << 20;
const REDACTED: &str = "[redacted]";

pub(crate) fn routes() -> Router<SharedApp> {
    Router::new()
        .route("/cgi-bin/gettoken", any(call))
        .route("/cgi-bin/externalcontact/{name}", any(call))
        .route(
            "/cgi-bin/externalcontact/customer_acquisition/{name}",
            any(call),
        )
}

enum Reply {
    Json(Value),
    Status(u16),
    Drop,
}

/// What the log shows of a request: the query for GET, the body otherwise, without secrets.
fn logged_request(
    api: Api,
    query: &HashMap<String, String>,
    body: &Result<Value, String>,
) -> Value {
    if api == Api::GetToken {
        let redacted: Map<String, Value> = query
            .iter()
            .map(|(k, v)| {
                let shown = if k == "corpsecret" || k == "access_token" {
                    REDACTED
                } else {
                    v
                };
                (k.clone(), json!(shown))
            })
            .collect();
        return Value::Object(redacted);
    }
    match body {
        Ok(Value::Object(fields)) => Value::Object(
            fields
                .iter()
                .map(|(k, v)| {
                    let shown = if k == "access_token" {
                        json!(REDACTED)
                    } else {
                        v.clone()
                    };
                    (k.clone(), shown)
                })
                .collect(),
        ),
        Ok(other) => other.clone(),
        Err(raw) => json!(raw),
    }
}

/// The answer as logged: an issued token is a secret too.
fn logged_response(answer: &Value) -> Value {
    let mut logged = answer.clone();
    if let Some(token) = logged.get_mut("access_token") {
        *token = json!(REDACTED);
    }
    logged
}

fn dispatch(
    state: &mut State,
    api: Api,
    method: &Method,
    caller: (Option<&str>, &str),
    query: &HashMap<String, String>,
    body: &Result<Value, String>,
) -> Result<Map<String, Value>, WecomError> {
    let (corp_id, peer_ip) = caller;
    if let Some(corp_id) = corp_id {
        admit(state, api, corp_id, peer_ip)?;
    }
    if api.wants_post() && method != Method::POST {
        return Err(WecomError::new(code::REQUIRE_POST));
    }
    if !api.wants_post() && method != Method::GET {
        return Err(WecomError::new(code::REQUIRE_GET));
    }
    if api == Api::GetToken {
        return tokens::get_token(state, query);
    }
    let corp_id = tokens::authenticate(state, query.get("access_token").map(String::as_str))?;
    let trusted = state
        .corps
        .get(&corp_id)
        .and_then(|corp| corp.trusted_ips.as_ref())
        .is_none_or(|ips| ips.iter().any(|ip| ip == peer_ip));
    if !trusted {
        return Err(WecomError::new(code::UNTRUSTED_IP));
    }
    let body = body
        .as_ref()
        .map_err(|_| WecomError::with_detail(code::INVALID_PARAMETER, "body is not JSON"))?;
    match api {
        Api::AddContactWay => contact_ways::add(state, &corp_id, body),
        Api::GetContactWay => contact_ways::get(state, &corp_id, body),
        Api::ListContactWay => contact_ways::list(state, &corp_id, body),
        Api::UpdateContactWay => contact_ways::update(state, &corp_id, body),
        Api::DelContactWay => contact_ways::del(state, &corp_id, body),
        Api::CreateLink => links::create(state, &corp_id, body),
        Api::GetLink => links::get(state, &corp_id, body),
        Api::DeleteLink => links::delete(state, &corp_id, body),
        Api::GetToken => tokens::get_token(state, query),
    }
}

/// Counts the call in the corp's windows and in its caller address's, or in neither: the
/// address's window is shared by every corp calling from it (docs/wecom-api.md §7).
fn admit(state: &mut State, api: Api, corp_id: &str, peer_ip: &str) -> Result<(), WecomError> {
    let settings = &state.settings;
    let (per_minute, per_hour) = (settings.limit_per_minute, settings.limit_per_hour);
    let (ip_per_minute, ip_per_hour) = (
        settings.limit_per_ip_per_minute,
        settings.limit_per_ip_per_hour,
    );
    let now = state.now_ms();
    let address = format!("ip:{peer_ip}");
    let limits = [
        (corp_id, per_minute, per_hour),
        (address.as_str(), ip_per_minute, ip_per_hour),
    ];
    if state.limiter.admit_all(&limits, api, now).is_err() {
        state.stats.rate_limited += 1;
        return Err(WecomError::new(code::FREQ_LIMIT));
    }
    Ok(())
}

async fn call(AxumState(app): AxumState<SharedApp>, request: Request) -> Response {
    let started = Instant::now();
    let (parts, body) = request.into_parts();
    let conn = parts
        .extensions
        .get::<ConnectInfo<ConnHandle>>()
        .map(|info| info.0.clone());
    let peer_ip = conn
        .as_ref()
        .map_or_else(|| "127.0.0.1".to_owned(), |c| c.peer.ip().to_string());
    let path = parts.uri.path();
    let name = path
        .strip_prefix("/cgi-bin/externalcontact/")
        .or_else(|| path.strip_prefix("/cgi-bin/"))
        .unwrap_or_default();
    let Some(api) = Api::from_name(name) else {
        let body = WecomError::with_detail(code::NO_SUCH_API, format!("{name} is not emulated"))
            .to_json("sandbox", &peer_ip);
        return (StatusCode::NOT_FOUND, Json(body)).into_response();
    };
    let query: HashMap<String, String> = Query::try_from_uri(&parts.uri)
        .map(|q| q.0)
        .unwrap_or_default();
    let body: Result<Value, String> = match to_bytes(body, MAX_BODY_BYTES).await {
        Ok(bytes) if bytes.iter().all(u8::is_ascii_whitespace) => Ok(json!({})),
        Ok(bytes) => {
            serde_json::from_slice(&bytes).map_err(|_| String::from_utf8_lossy(&bytes).into_owned())
        }
        Err(_) => Err(format!("body larger than {MAX_BODY_BYTES} bytes")),
    };

    let (corp_id, plan, at_ms) = {
        let mut guard = app.lock();
        let state = &mut *guard;
        let corp_id = match api {
            Api::GetToken => query.get("corpid").filter(|c| !c.is_empty()).cloned(),
            _ => query
                .get("access_token")
                .and_then(|t| state.token_owner(t))
                .map(str::to_owned),
        };
        let plan = faults::plan(
            &mut state.settings.faults,
            api,
            corp_id.as_deref(),
            &mut state.rngs.faults,
        );
        (corp_id, plan, state.now_ms())
    };
    if plan.latency_ms > 0 {
        tokio::time::sleep(Duration::from_millis(plan.latency_ms)).await;
    }

    let (reply, fault) = {
        let mut guard = app.lock();
        let state = &mut *guard;
        let seq = state.calls.next_seq();
        let hint = format!("{}_{seq}_sandbox", at_ms / 1000);
        let mut fault = plan.label();
        let reply = match plan.outcome {
            Some(Outcome::Drop) if conn.is_some() => Reply::Drop,
            Some(Outcome::Drop) => {
                fault = Some("drop (connection cannot be cut here; answered 502)".into());
                Reply::Status(502)
            }
            Some(Outcome::HttpStatus(status)) => Reply::Status(status),
            Some(Outcome::Errcode { errcode, errmsg }) => Reply::Json(match errmsg {
                Some(errmsg) => json!({"errcode": errcode, "errmsg": errmsg}),
                None => WecomError::new(errcode).to_json(&hint, &peer_ip),
            }),
            None => Reply::Json(
                match dispatch(
                    state,
                    api,
                    &parts.method,
                    (corp_id.as_deref(), &peer_ip),
                    &query,
                    &body,
                ) {
                    Ok(fields) => ok(fields),
                    Err(error) => error.to_json(&hint, &peer_ip),
                },
            ),
        };
        state.stats.api_calls += 1;
        if fault.is_some() {
            state.stats.faults_injected += 1;
        }
        let (http_status, response) = match &reply {
            Reply::Json(value) => (Some(200), logged_response(value)),
            Reply::Status(status) => (Some(*status), Value::Null),
            Reply::Drop => (None, Value::Null),
        };
        state.calls.push(CallRecord {
            seq,
            at_ms,
            elapsed_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            corp_id,
            api: api.name().to_owned(),
            method: parts.method.to_string(),
            request: logged_request(api, &query, &body),
            http_status,
            response,
            fault: fault.clone(),
            user_agent: parts
                .headers
                .get(header::USER_AGENT)
                .and_then(|agent| agent.to_str().ok())
                .map(|agent| agent.chars().take(120).collect()),
        });
        (reply, fault)
    };

    match reply {
        Reply::Json(value) => Json(value).into_response(),
        Reply::Status(status) => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY);
            let page = format!(
                "<html><body><h1>{status}</h1><p>{}</p></body></html>",
                fault.unwrap_or_default()
            );
            (status, [(header::CONTENT_TYPE, "text/html")], page).into_response()
        }
        Reply::Drop => {
            if let Some(conn) = conn {
                conn.cut();
            }
            // Nothing of this reaches the client: the socket is already shut down.
            Response::new(Body::empty())
        }
    }
}
