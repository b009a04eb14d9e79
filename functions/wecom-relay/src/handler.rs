//! Translates one invocation into WeCom requests: the requests the caller sent together
//! (a `RelayInvocation`, at most 16), each checked (`WeComRequest::check`: one of qrsync's
//! calls, nothing else), sent at once from this function's subnet, and WeCom's answers handed
//! back as they came, in order.
//!
//! The invocation itself never fails on WeCom's account: an unreachable WeCom or a refused
//! request is a reply, so the caller classes it (`adapters::wecom`) as it would a direct
//! call's. Nothing of a request but its API is logged: its query holds the access token or
//! the corp secret.

use adapters::wecom::{
    Direct, RelayAnswer, WeComReply, WeComRequest, MOST_REQUESTS_PER_INVOCATION,
};
use lambda_runtime::{Error, LambdaEvent};
use serde::Deserialize;
use serde_json::Value;

/// What a refused request is told: the shape the relay takes, never an echo of what came
/// (which may hold a token).
const NOT_A_REQUEST: &str = "not a WeCom request the relay carries: an `api` of qrsync's calls, a `query` of access_token, corpid or corpsecret pairs, and a JSON `body` for every call but gettoken";

/// The invocation read loosely first, so one bad request is refused alone.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Invocation {
    requests: Vec<Value>,
}

pub(crate) async fn handle(
    wecom: &Direct,
    event: LambdaEvent<Value>,
) -> Result<RelayAnswer, Error> {
    let refuse = |reason: String| {
        tracing::warn!(reason, "invocation refused");
        Ok(RelayAnswer {
            replies: Vec::new(),
            refused: Some(reason),
        })
    };
    let Ok(invocation) = serde_json::from_value::<Invocation>(event.payload) else {
        return refuse("not a relay invocation: an object with `requests`, a list".to_owned());
    };
    let count = invocation.requests.len();
    if count == 0 || count > MOST_REQUESTS_PER_INVOCATION {
        return refuse(format!(
            "{count} requests; 1 to {MOST_REQUESTS_PER_INVOCATION} an invocation"
        ));
    }
    let sends = invocation.requests.into_iter().map(|request| async move {
        let Ok(request) = serde_json::from_value::<WeComRequest>(request) else {
            tracing::warn!("a request is not a WeCom request; refused");
            return WeComReply::Refused {
                reason: NOT_A_REQUEST.to_owned(),
            };
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
        reply
    });
    let replies = futures::future::join_all(sends).await;
    // One line an invocation (not a call): how well calls are gathered shows here.
    tracing::info!(requests = count, "relayed");
    Ok(RelayAnswer {
        replies,
        refused: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use lambda_runtime::Context;
    use serde_json::json;
    use std::time::Duration;

    async fn relay(payload: Value) -> RelayAnswer {
        // Nothing listens on port 9 of 127.0.0.1: a request that is sent is unreachable.
        let wecom = Direct::new("http://127.0.0.1:9", Duration::from_millis(500));
        handle(&wecom, LambdaEvent::new(payload, Context::default()))
            .await
            .expect("an answer, never a failed invocation")
    }

    fn push(token: &str) -> Value {
        json!({
            "api": "externalcontact/update_contact_way",
            "query": [["access_token", token]],
            "body": { "config_id": "cw", "user": ["alice"] }
        })
    }

    #[tokio::test]
    async fn the_calls_qrsync_makes_are_sent_to_wecom_each_answered_in_order() {
        let answer = relay(json!({ "requests": [
            push("tok-1"),
            { "api": "user/get", "query": [["access_token", "tok-2"]], "body": {} },
        ] }))
        .await;
        assert_eq!(answer.refused, None);
        match &answer.replies[..] {
            [WeComReply::Unreachable { detail }, WeComReply::Refused { reason }] => {
                assert!(detail.contains("could not connect"), "{detail}");
                assert!(!detail.contains("tok-1"), "{detail}");
                assert!(!reason.contains("tok-2"), "{reason}");
            }
            other => panic!("sent, then refused: {other:?}"),
        }
    }

    #[tokio::test]
    async fn anything_else_is_refused_without_echoing_it() {
        for payload in [
            json!({ "requests": [{ "api": "gettoken", "query": "tok-3" }] }),
            json!({ "requests": [{ "url": "http://169.254.169.254/latest/meta-data", "query": [] }] }),
            json!({ "requests": [{ "api": "gettoken", "query": [["corpsecret", "tok-3"]], "body": {} }] }),
        ] {
            let answer = relay(payload.clone()).await;
            match &answer.replies[..] {
                [WeComReply::Refused { reason }] => assert!(!reason.contains("tok-3"), "{reason}"),
                other => panic!("{payload} was not refused: {other:?}"),
            }
        }
        for payload in [
            json!("tok-3"),
            json!({ "requests": [] }),
            json!({ "requests": vec![push("tok-3"); 17] }),
            json!({ "requests": [], "url": "x" }),
        ] {
            let answer = relay(payload.clone()).await;
            let reason = answer
                .refused
                .unwrap_or_else(|| panic!("{payload} was taken"));
            assert!(!reason.contains("tok-3"), "{reason}");
            assert!(answer.replies.is_empty());
        }
    }
}
