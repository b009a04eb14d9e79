//! One request to WeCom and its answer read: what the client's calls and the token fetch share.

use super::redaction::{scrub, transport_error};
use domain::wecom::errors::WeComError;
use serde_json::Value;

/// Sends `request` and reads WeCom's answer: the JSON body when `errcode` is 0, the
/// classified error otherwise. `secrets` are scrubbed from anything kept in an error.
pub(super) async fn answer(
    request: reqwest::RequestBuilder,
    secrets: &[&str],
) -> Result<Value, WeComError> {
    let response = request
        .send()
        .await
        .map_err(|e| transport_error(e, secrets))?;
    let status = response.status();
    let bytes = response
        .bytes()
        .await
        .map_err(|e| transport_error(e, secrets))?;
    if status.is_server_error() {
        // Whatever the body says, a 5xx comes from WeCom's front end having trouble.
        return Err(WeComError::transient(format!("HTTP {status}")));
    }
    // Not WeCom's JSON (a proxy's or gateway's page, a truncated body): we cannot tell what
    // happened, so it is treated like a lost answer rather than a verdict on the request.
    let unreadable = || WeComError::transient(format!("HTTP {status}: not a WeCom answer"));
    let body: Value = serde_json::from_slice(&bytes).map_err(|_| unreadable())?;
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
    if !status.is_success() {
        return Err(unreadable());
    }
    Ok(body)
}
