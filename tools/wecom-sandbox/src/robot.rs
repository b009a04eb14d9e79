//! WeCom's group robot (群机器人) webhook, as the sandbox answers it, and what it received.
//!
//! `POST /cgi-bin/webhook/send?key=KEY` with `{"msgtype":"text","text":{"content":...}}` or
//! `{"msgtype":"markdown","markdown":{"content":...}}` answers `{"errcode":0,"errmsg":"ok"}`;
//! no key 93000 (invalid webhook url), another message type 40008, an empty content 44004, a
//! content over 4096 bytes (markdown; 2048 for text) 40058, more than 20 messages a minute to
//! one robot 45009. `GET /_sandbox/robot/messages?since=N` lists the messages taken after
//! sequence number N (the key is never recorded, only whether one was given).

use crate::app::SharedApp;
use crate::state::RobotMessage;
use axum::extract::{Query, State as AxumState};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::HashMap;

/// Messages one robot takes per minute.
const PER_MINUTE: usize = 20;

pub(crate) fn routes() -> Router<SharedApp> {
    Router::new()
        .route("/cgi-bin/webhook/send", post(send))
        .route("/_sandbox/robot/messages", get(messages))
}

fn answer(errcode: i64, errmsg: &str) -> Json<Value> {
    Json(json!({ "errcode": errcode, "errmsg": errmsg }))
}

async fn send(
    AxumState(app): AxumState<SharedApp>,
    Query(query): Query<HashMap<String, String>>,
    body: String,
) -> Json<Value> {
    if query.get("key").is_none_or(|key| key.is_empty()) {
        return answer(93000, "invalid webhook url");
    }
    let Ok(body) = serde_json::from_str::<Value>(&body) else {
        return answer(40008, "invalid message type");
    };
    let msgtype = body["msgtype"].as_str().unwrap_or_default().to_owned();
    let limit = match msgtype.as_str() {
        "markdown" => 4096,
        "text" => 2048,
        _ => return answer(40008, "invalid message type"),
    };
    let content = body[&msgtype]["content"].as_str().unwrap_or_default();
    if content.is_empty() {
        return answer(44004, "empty content");
    }
    if content.len() > limit {
        return answer(40058, "content exceed max length");
    }
    let mut state = app.lock();
    let now_ms = state.now_ms();
    let last_minute = state.robot.after(0, |m| m.at_ms + 60_000 > now_ms).len();
    if last_minute >= PER_MINUTE {
        return answer(45009, "api freq out of limit");
    }
    let seq = state.robot.next_seq();
    state.robot.push(RobotMessage {
        seq,
        at_ms: now_ms,
        msgtype,
        content: content.to_owned(),
    });
    answer(0, "ok")
}

#[derive(Deserialize)]
struct Since {
    #[serde(default)]
    since: u64,
}

async fn messages(AxumState(app): AxumState<SharedApp>, Query(since): Query<Since>) -> Json<Value> {
    let state = app.lock();
    let messages = state.robot.after(since.since, |_| true);
    let next = state.robot.last_seq().max(since.since);
    Json(json!({ "messages": messages, "next": next }))
}
