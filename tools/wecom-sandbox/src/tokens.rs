//! Access tokens: random, per corp, several valid at once (a new one does not revoke the old,
//! as with WeCom), and kept after expiry so a stale token answers 42001 rather than 40014.

use crate::rng;
use crate::state::{IssuedToken, State};
use crate::wecom::{code, WecomError};
use serde_json::{json, Map, Value};
use std::collections::HashMap;

/// Expired tokens are forgotten (and then answer 40014) after a day, so a long run does not
/// accumulate them forever.
const FORGET_AFTER_MS: u64 = 24 * 3_600_000;

pub(crate) fn get_token(
    state: &mut State,
    query: &HashMap<String, String>,
) -> Result<Map<String, Value>, WecomError> {
    let corp_id = query
        .get("corpid")
        .filter(|v| !v.is_empty())
        .ok_or_else(|| WecomError::new(code::MISSING_CORPID))?;
    let secret = query
        .get("corpsecret")
        .filter(|v| !v.is_empty())
        .ok_or_else(|| WecomError::new(code::MISSING_SECRET))?;
    let corp = state
        .corps
        .get(corp_id)
        .ok_or_else(|| WecomError::new(code::INVALID_CORPID))?;
    if &corp.corp_secret != secret {
        return Err(WecomError::new(code::INVALID_SECRET));
    }
    let now = state.now_ms();
    let lifetime = state.settings.token_lifetime_secs;
    state
        .tokens
        .retain(|_, t| t.expires_at_ms.saturating_add(FORGET_AFTER_MS) > now);
    let token = rng::token(&mut state.rngs.ids, 64);
    state.tokens.insert(
        token.clone(),
        IssuedToken {
            corp_id: corp_id.clone(),
            expires_at_ms: now.saturating_add(lifetime.saturating_mul(1000)),
        },
    );
    let mut fields = Map::new();
    fields.insert("access_token".into(), json!(token));
    fields.insert("expires_in".into(), json!(lifetime));
    Ok(fields)
}

/// The corp the token belongs to, if it is known and unexpired.
pub(crate) fn authenticate(state: &State, token: Option<&str>) -> Result<String, WecomError> {
    let token = token
        .filter(|t| !t.is_empty())
        .ok_or_else(|| WecomError::new(code::MISSING_TOKEN))?;
    let issued = state
        .tokens
        .get(token)
        .ok_or_else(|| WecomError::new(code::INVALID_TOKEN))?;
    if issued.expires_at_ms <= state.now_ms() {
        return Err(WecomError::new(code::TOKEN_EXPIRED));
    }
    Ok(issued.corp_id.clone())
}

/// Ends every issued token's life now (of one corp, or of all); returns how many were live.
pub(crate) fn expire(state: &mut State, corp_id: Option<&str>) -> usize {
    let now = state.now_ms();
    let mut expired = 0;
    for token in state.tokens.values_mut() {
        if corp_id.is_none_or(|c| c == token.corp_id) && token.expires_at_ms > now {
            token.expires_at_ms = now;
            expired += 1;
        }
    }
    expired
}
