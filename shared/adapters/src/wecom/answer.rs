//! WeCom's answer to one request read: what the client's calls and the token fetch share.

use super::redaction::scrub;
use super::transport::WeComReply;
use domain::wecom::errors::WeComError;
use serde_json::Value;

/// errcode of the error for a request the egress relay refused: not one of WeCom's, which are
/// never below -1. The refusal is a fault of this code (a request the relay does not carry),
/// so it is rejected, not retried.
pub const RELAY_REFUSED_ERRCODE: i64 = -1_000;

/// Reads `reply`: the JSON body when `errcode` is 0, the classified error otherwise.
/// `secrets` are scrubbed from anything kept in an error.
pub(super) fn answer(reply: WeComReply, secrets: &[&str]) -> Result<Value, WeComError> {
    let (status, body) = match reply {
        WeComReply::Answered { status, body } => (status, body),
        WeComReply::Unreachable { detail } => {
            return Err(WeComError::transient(scrub(&detail, secrets)))
        }
        WeComReply::Refused { reason } => {
            return Err(WeComError::Rejected {
                errcode: RELAY_REFUSED_ERRCODE,
                errmsg: scrub(&format!("the egress relay refused: {reason}"), secrets),
            })
        }
    };
    if (500..600).contains(&status) {
        // Whatever the body says, a 5xx comes from WeCom's front end having trouble.
        return Err(WeComError::transient(format!("HTTP {status}")));
    }
    // Not WeCom's JSON (a proxy's or gateway's page, a truncated body): we cannot tell what
    // happened, so it is treated like a lost answer rather than a verdict on the request.
    let unreadable = || WeComError::transient(format!("HTTP {status}: not a WeCom answer"));
    let body: Value = serde_json::from_str(&body).map_err(|_| unreadable())?;
    let errcode = body
        .get("errcode")
        .and_then(Value::as_i64)
        .ok_or_else(unreadable)?;
    let errmsg = body
        .get("errmsg")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if let Some(error) = WeComError::from_errcode(errcode, &scrub(errmsg, secrets)) {
        return Err(error);
    }
    if !(200..300).contains(&status) {
        return Err(unreadable());
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answered(status: u16, body: &str) -> WeComReply {
        WeComReply::Answered {
            status,
            body: body.to_owned(),
        }
    }

    #[test]
    fn an_answer_with_errcode_zero_is_its_body() {
        let body = answer(answered(200, r#"{"errcode":0,"config_id":"cw"}"#), &[]).expect("ok");
        assert_eq!(body["config_id"], "cw");
    }

    #[test]
    fn a_server_error_or_a_page_that_is_not_wecoms_is_transient() {
        for reply in [
            answered(502, r#"{"errcode":0}"#),
            answered(200, "<html>gateway</html>"),
            answered(404, r#"{"errcode":0}"#),
        ] {
            assert!(
                matches!(
                    answer(reply.clone(), &[]),
                    Err(WeComError::Transient { .. })
                ),
                "{reply:?}"
            );
        }
    }

    #[test]
    fn an_unreached_wecom_is_transient_and_keeps_no_secret() {
        let reply = WeComReply::Unreachable {
            detail: "timed out sending tok-9".into(),
        };
        match answer(reply, &["tok-9"]) {
            Err(WeComError::Transient { detail }) => assert!(!detail.contains("tok-9"), "{detail}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_request_the_relay_refuses_is_rejected_not_retried() {
        let reply = WeComReply::Refused {
            reason: "query argument \"x\" is not one WeCom's calls take".into(),
        };
        let error = answer(reply, &[]).expect_err("refused");
        assert!(matches!(
            error,
            WeComError::Rejected {
                errcode: RELAY_REFUSED_ERRCODE,
                ..
            }
        ));
        assert!(error.to_string().contains("egress relay refused"));
    }
}
