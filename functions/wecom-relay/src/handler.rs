//! Translates one invocation into one WeCom request: the request the caller sent, checked
//! (`WeComRequest::check`: one of qrsync's calls, nothing else), sent from this function's
//! subnet, and WeCom's answer handed back as it came.
//!
//! The invocation itself never fails on WeCom's account: an unreachable WeCom or a refused
//! request is a reply, so the caller classes it (`adapters::wecom`) as it would a direct
//! call's. Nothing of the request but its API is logged: its query holds the access token or
//! the corp secret.

use adapters::wecom::{Direct, WeComReply, WeComRequest};
use lambda_runtime::{Error, LambdaEvent};
use serde_json::Value;

/// What a refused request is told: the shape the relay takes, never an echo of what came
/// (which may hold a token).
const NOT_A_REQUEST: &str = "not a WeCom request the relay carries: an `api` of qrsync's calls, a `query` of access_token, corpid or corpsecret pairs, and a JSON `body` for every call but gettoken";

pub(crate) async fn handle(wecom: &Direct, event: LambdaEvent<Value>) -> Result<WeComReply, Error> {
    let Ok(request) = serde_json::from_value::<WeComRequest>(event.payload) else {
        tracing::warn!("invocation is not a WeCom request; refused");
        return Ok(WeComReply::Refused {
            reason: NOT_A_REQUEST.to_owned(),
        });
    };
    let reply = wecom.send(&request).await;
    match &reply {
        WeComReply::Answered { status, .. } => {
            tracing::debug!(api = request.api.name(), status, "relayed");
        }
        WeComReply::Unreachable { detail } => {
            tracing::warn!(api = request.api.name(), detail, "WeCom not reached");
        }
        WeComReply::Refused { reason } => {
            tracing::warn!(api = request.api.name(), reason, "request refused");
        }
    }
    Ok(reply)
}

#[cfg(test)]
mod tests {
    use super::*;
    use lambda_runtime::Context;
    use serde_json::json;
    use std::time::Duration;

    async fn relay(payload: Value) -> WeComReply {
        // Nothing listens on port 9 of 127.0.0.1: a request that is sent is unreachable.
        let wecom = Direct::new("http://127.0.0.1:9", Duration::from_millis(500));
        handle(&wecom, LambdaEvent::new(payload, Context::default()))
            .await
            .expect("a reply, never a failed invocation")
    }

    #[tokio::test]
    async fn a_call_qrsync_makes_is_sent_to_wecom() {
        let reply = relay(json!({
            "api": "externalcontact/update_contact_way",
            "query": [["access_token", "tok-1"]],
            "body": { "config_id": "cw", "user": ["alice"] }
        }))
        .await;
        match reply {
            WeComReply::Unreachable { detail } => {
                assert!(detail.contains("could not connect"), "{detail}");
                assert!(!detail.contains("tok-1"), "{detail}");
            }
            other => panic!("sent, so unreachable here: {other:?}"),
        }
    }

    #[tokio::test]
    async fn anything_else_is_refused_without_echoing_it() {
        for payload in [
            json!({ "api": "user/get", "query": [["access_token", "tok-2"]], "body": {} }),
            json!({ "api": "gettoken", "query": "tok-2" }),
            json!({ "url": "http://169.254.169.254/latest/meta-data", "query": [] }),
            json!("tok-2"),
            json!({ "api": "gettoken", "query": [["corpsecret", "tok-2"]], "body": {} }),
        ] {
            match relay(payload.clone()).await {
                WeComReply::Refused { reason } => {
                    assert!(!reason.contains("tok-2"), "{reason}");
                }
                other => panic!("{payload} was not refused: {other:?}"),
            }
        }
    }
}
