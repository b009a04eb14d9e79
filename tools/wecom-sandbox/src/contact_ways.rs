//! The 「联系我」 operations: add, get, update (present fields overwrite, `user` and `party`
//! replace the whole list) and del, with WeCom's validation errcodes.

use crate::rng;
use crate::state::{ContactWay, State};
use crate::wecom::{code, WecomError};
use serde_json::{json, Map, Value};
use std::collections::BTreeSet;

/// WeCom counts members after expanding departments; the sandbox has no departments, so only
/// `user` counts and `party` is stored as given.
pub(crate) const MAX_USERS: usize = 100;
const MAX_TEXT_CHARS: usize = 30;

fn invalid(detail: impl Into<String>) -> WecomError {
    WecomError::with_detail(code::INVALID_PARAMETER, detail)
}

fn object(body: &Value) -> Result<&Map<String, Value>, WecomError> {
    body.as_object()
        .ok_or_else(|| invalid("body must be a JSON object"))
}

/// A present `null` is refused rather than read as "absent": WeCom's behaviour for it is
/// unknown, and a client that serializes `null` for "unset" is a bug worth surfacing.
fn present<'a>(obj: &'a Map<String, Value>, name: &str) -> Result<Option<&'a Value>, WecomError> {
    match obj.get(name) {
        None => Ok(None),
        Some(Value::Null) => Err(invalid(format!("{name} must not be null"))),
        Some(value) => Ok(Some(value)),
    }
}

fn text(obj: &Map<String, Value>, name: &str) -> Result<Option<String>, WecomError> {
    let Some(value) = present(obj, name)? else {
        return Ok(None);
    };
    let text = value
        .as_str()
        .ok_or_else(|| invalid(format!("{name} must be a string")))?;
    if text.chars().count() > MAX_TEXT_CHARS {
        return Err(invalid(format!(
            "{name} is longer than {MAX_TEXT_CHARS} characters"
        )));
    }
    Ok(Some(text.to_owned()))
}

fn boolean(obj: &Map<String, Value>, name: &str) -> Result<Option<bool>, WecomError> {
    present(obj, name)?
        .map(|v| {
            v.as_bool()
                .ok_or_else(|| invalid(format!("{name} must be a boolean")))
        })
        .transpose()
}

fn integer(obj: &Map<String, Value>, name: &str) -> Result<Option<i64>, WecomError> {
    present(obj, name)?
        .map(|v| {
            v.as_i64()
                .ok_or_else(|| invalid(format!("{name} must be an integer")))
        })
        .transpose()
}

/// Keeps the first occurrence of each userid, in order.
fn users(obj: &Map<String, Value>) -> Result<Option<Vec<String>>, WecomError> {
    let Some(value) = present(obj, "user")? else {
        return Ok(None);
    };
    let items = value
        .as_array()
        .ok_or_else(|| invalid("user must be an array of userids"))?;
    let mut seen = BTreeSet::new();
    let mut list = Vec::with_capacity(items.len());
    for item in items {
        let userid = item
            .as_str()
            .filter(|u| !u.is_empty())
            .ok_or_else(|| invalid("user must be an array of non-empty strings"))?;
        if seen.insert(userid) {
            list.push(userid.to_owned());
        }
    }
    Ok(Some(list))
}

fn parties(obj: &Map<String, Value>) -> Result<Option<Vec<i64>>, WecomError> {
    let Some(value) = present(obj, "party")? else {
        return Ok(None);
    };
    value
        .as_array()
        .ok_or_else(|| invalid("party must be an array of department ids"))?
        .iter()
        .map(|p| {
            p.as_i64()
                .ok_or_else(|| invalid("party must be an array of integers"))
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

/// The 100-member cap first, then membership: a list that is too long is refused as such
/// whatever it contains.
fn check_members(
    state: &State,
    corp_id: &str,
    kind: i64,
    user: &[String],
    party: &[i64],
) -> Result<(), WecomError> {
    if user.len() > MAX_USERS {
        return Err(WecomError::new(code::TOO_MANY_USERS));
    }
    if kind == 1 && (user.len() != 1 || !party.is_empty()) {
        return Err(invalid(
            "type 1 (single) needs exactly one user and no party",
        ));
    }
    let directory = state.corps.get(corp_id).map(|c| &c.users);
    if let Some(missing) = user
        .iter()
        .find(|u| directory.is_none_or(|d| !d.contains(*u)))
    {
        return Err(WecomError::with_detail(
            code::USER_NOT_FOUND,
            missing.clone(),
        ));
    }
    Ok(())
}

fn one_of(obj: &Map<String, Value>, name: &str, missing: i64, bad: i64) -> Result<i64, WecomError> {
    match obj.get(name) {
        None | Some(Value::Null) => Err(WecomError::new(missing)),
        Some(value) => value
            .as_i64()
            .filter(|v| matches!(v, 1 | 2))
            .ok_or_else(|| WecomError::new(bad)),
    }
}

pub(crate) fn add(
    state: &mut State,
    corp_id: &str,
    body: &Value,
) -> Result<Map<String, Value>, WecomError> {
    let obj = object(body)?;
    let kind = one_of(obj, "type", code::MISSING_TYPE, code::INVALID_TYPE)?;
    let scene = one_of(obj, "scene", code::MISSING_SCENE, code::INVALID_SCENE)?;
    if boolean(obj, "is_temp")? == Some(true) {
        return Err(invalid(
            "is_temp (temporary sessions) is not emulated by the sandbox",
        ));
    }
    let remark = text(obj, "remark")?.unwrap_or_default();
    let contact_state = text(obj, "state")?.unwrap_or_default();
    let skip_verify = boolean(obj, "skip_verify")?.unwrap_or(true);
    let is_exclusive = boolean(obj, "is_exclusive")?.unwrap_or(false);
    let style = integer(obj, "style")?;
    let user = users(obj)?.unwrap_or_default();
    let party = parties(obj)?.unwrap_or_default();
    check_members(state, corp_id, kind, &user, &party)?;

    let config_id = loop {
        let id = rng::hex_id(&mut state.rngs.ids, 32);
        if !state.contact_ways.contains_key(&id) {
            break id;
        }
    };
    let qr_code =
        (scene == 2).then(|| format!("https://wework.qpic.cn/wwpic/sandbox/{config_id}/0"));
    let now = state.now_ms();
    let way = ContactWay {
        corp_id: corp_id.to_owned(),
        config_id: config_id.clone(),
        kind,
        scene,
        style: style.filter(|_| scene == 1),
        remark,
        skip_verify,
        state: contact_state,
        qr_code: qr_code.clone(),
        user,
        party,
        is_exclusive,
        created_at_ms: now,
        updated_at_ms: now,
        updates: 0,
    };
    state.contact_ways.insert(config_id.clone(), way);
    let mut fields = Map::new();
    fields.insert("config_id".into(), json!(config_id));
    if let Some(qr_code) = qr_code {
        fields.insert("qr_code".into(), json!(qr_code));
    }
    Ok(fields)
}

/// The config_id named in the body, if this corp owns it: another corp's config is as unknown
/// as a deleted one.
fn config_id_of(
    state: &State,
    corp_id: &str,
    obj: &Map<String, Value>,
) -> Result<String, WecomError> {
    let config_id = match obj.get("config_id") {
        None | Some(Value::Null) => return Err(WecomError::new(code::MISSING_CONFIG_ID)),
        Some(Value::String(s)) if s.is_empty() => {
            return Err(WecomError::new(code::MISSING_CONFIG_ID))
        }
        Some(Value::String(s)) => s,
        Some(_) => return Err(WecomError::new(code::INVALID_CONFIG_ID)),
    };
    match state.contact_ways.get(config_id) {
        Some(way) if way.corp_id == corp_id => Ok(config_id.clone()),
        _ => Err(WecomError::new(code::INVALID_CONFIG_ID)),
    }
}

/// The `contact_way` object as get_contact_way returns it.
pub(crate) fn wecom_view(way: &ContactWay) -> Value {
    let mut view = Map::new();
    view.insert("config_id".into(), json!(way.config_id));
    view.insert("type".into(), json!(way.kind));
    view.insert("scene".into(), json!(way.scene));
    if let Some(style) = way.style {
        view.insert("style".into(), json!(style));
    }
    view.insert("remark".into(), json!(way.remark));
    view.insert("skip_verify".into(), json!(way.skip_verify));
    view.insert("state".into(), json!(way.state));
    if let Some(qr_code) = &way.qr_code {
        view.insert("qr_code".into(), json!(qr_code));
    }
    view.insert("user".into(), json!(way.user));
    view.insert("party".into(), json!(way.party));
    view.insert("is_temp".into(), json!(false));
    view.insert("is_exclusive".into(), json!(way.is_exclusive));
    Value::Object(view)
}

pub(crate) fn get(
    state: &State,
    corp_id: &str,
    body: &Value,
) -> Result<Map<String, Value>, WecomError> {
    let config_id = config_id_of(state, corp_id, object(body)?)?;
    let way = state
        .contact_ways
        .get(&config_id)
        .ok_or_else(|| WecomError::new(code::INVALID_CONFIG_ID))?;
    let mut fields = Map::new();
    fields.insert("contact_way".into(), wecom_view(way));
    Ok(fields)
}

/// The most `list_contact_way` answers in one page, and its default (§4.3).
const LIST_LIMIT_MAX: i64 = 1000;
const LIST_LIMIT_DEFAULT: i64 = 100;
/// The window `list_contact_way` covers when `start_time` is left out: 90 days (§4.3).
const LIST_DEFAULT_WINDOW_SECS: i64 = 90 * 24 * 60 * 60;

/// `list_contact_way`: the config ids of the corp's contact ways created in
/// `[start_time, end_time]` (seconds; 90 days ago and now by default), oldest first, a page of
/// `limit` at a time; `next_cursor` is empty on the last page.
pub(crate) fn list(
    state: &State,
    corp_id: &str,
    body: &Value,
) -> Result<Map<String, Value>, WecomError> {
    let obj = object(body)?;
    let now_secs = i64::try_from(state.now_ms() / 1000).unwrap_or(i64::MAX);
    let end = integer(obj, "end_time")?.unwrap_or(now_secs);
    let start = integer(obj, "start_time")?.unwrap_or(end - LIST_DEFAULT_WINDOW_SECS);
    let limit = integer(obj, "limit")?.unwrap_or(LIST_LIMIT_DEFAULT);
    if !(1..=LIST_LIMIT_MAX).contains(&limit) || start > end {
        return Err(invalid(
            "limit must be 1 to 1000, start_time at most end_time",
        ));
    }
    let skip: usize = match text(obj, "cursor")? {
        None => 0,
        Some(cursor) if cursor.is_empty() => 0,
        Some(cursor) => cursor
            .parse()
            .map_err(|_| invalid("cursor is not one we gave"))?,
    };
    let mut ways: Vec<&ContactWay> = state
        .contact_ways
        .values()
        .filter(|w| w.corp_id == corp_id)
        .filter(|w| {
            let created = i64::try_from(w.created_at_ms / 1000).unwrap_or(i64::MAX);
            (start..=end).contains(&created)
        })
        .collect();
    ways.sort_by(|a, b| (a.created_at_ms, &a.config_id).cmp(&(b.created_at_ms, &b.config_id)));
    let page: Vec<Value> = ways
        .iter()
        .skip(skip)
        .take(usize::try_from(limit).unwrap_or(0))
        .map(|w| json!({ "config_id": w.config_id }))
        .collect();
    let next = skip + page.len();
    let mut fields = Map::new();
    fields.insert("contact_way".into(), Value::Array(page));
    fields.insert(
        "next_cursor".into(),
        Value::String(if next < ways.len() {
            next.to_string()
        } else {
            String::new()
        }),
    );
    Ok(fields)
}

/// `type` and `scene` cannot change and are ignored if sent. Everything is validated before
/// anything is written, so a refused update leaves the code as it was.
pub(crate) fn update(
    state: &mut State,
    corp_id: &str,
    body: &Value,
) -> Result<Map<String, Value>, WecomError> {
    let obj = object(body)?;
    let config_id = config_id_of(state, corp_id, obj)?;
    let remark = text(obj, "remark")?;
    let contact_state = text(obj, "state")?;
    let skip_verify = boolean(obj, "skip_verify")?;
    let is_exclusive = boolean(obj, "is_exclusive")?;
    let style = integer(obj, "style")?;
    let user = users(obj)?;
    let party = parties(obj)?;
    let (kind, scene, current_user, current_party) = {
        let way = state
            .contact_ways
            .get(&config_id)
            .ok_or_else(|| WecomError::new(code::INVALID_CONFIG_ID))?;
        (way.kind, way.scene, way.user.clone(), way.party.clone())
    };
    check_members(
        state,
        corp_id,
        kind,
        user.as_deref().unwrap_or(&current_user),
        party.as_deref().unwrap_or(&current_party),
    )
    .or_else(|e| match (&user, e.errcode) {
        // A member who left after being listed does not block updates of other fields; only
        // a list that is being sent is checked against the directory.
        (None, code::USER_NOT_FOUND) => Ok(()),
        _ => Err(e),
    })?;

    let now = state.now_ms();
    let way = state
        .contact_ways
        .get_mut(&config_id)
        .ok_or_else(|| WecomError::new(code::INVALID_CONFIG_ID))?;
    if let Some(remark) = remark {
        way.remark = remark;
    }
    if let Some(contact_state) = contact_state {
        way.state = contact_state;
    }
    if let Some(skip_verify) = skip_verify {
        way.skip_verify = skip_verify;
    }
    if let Some(is_exclusive) = is_exclusive {
        way.is_exclusive = is_exclusive;
    }
    if scene == 1 && style.is_some() {
        way.style = style;
    }
    if let Some(user) = user {
        way.user = user;
    }
    if let Some(party) = party {
        way.party = party;
    }
    way.updated_at_ms = now;
    way.updates += 1;
    Ok(Map::new())
}

pub(crate) fn del(
    state: &mut State,
    corp_id: &str,
    body: &Value,
) -> Result<Map<String, Value>, WecomError> {
    let config_id = config_id_of(state, corp_id, object(body)?)?;
    state.contact_ways.remove(&config_id);
    Ok(Map::new())
}
