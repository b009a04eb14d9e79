//! Customer-acquisition links (获客链接, `customer_acquisition/create_link`, `get`,
//! `delete_link`) with WeCom's answer shapes, and what a visitor opening one does: the link's
//! member gets the customer, and the add event carries the URL's `customer_channel` as
//! `State` (`scans::open_link`).

use crate::rng;
use crate::state::{Link, State};
use crate::wecom::{code, WecomError};
use serde_json::{json, Map, Value};

const MAX_LINK_NAME_CHARS: usize = 30;
/// Members one link may name (WeCom's range takes users and departments; the sandbox has no
/// departments, so only `user_list` counts).
const MAX_LINK_USERS: usize = 500;
/// Where the sandbox's links live: `<LINK_BASE><link_id>`, as WeCom's `work.weixin.qq.com/ca/`.
pub(crate) const LINK_BASE: &str = "https://work.weixin.qq.com/ca/";

fn invalid(detail: impl Into<String>) -> WecomError {
    WecomError::with_detail(code::INVALID_PARAMETER, detail)
}

fn object(body: &Value) -> Result<&Map<String, Value>, WecomError> {
    body.as_object()
        .ok_or_else(|| invalid("body must be a JSON object"))
}

fn link_id(obj: &Map<String, Value>) -> Result<String, WecomError> {
    obj.get("link_id")
        .and_then(Value::as_str)
        .filter(|id| !id.is_empty())
        .map(str::to_owned)
        .ok_or_else(|| invalid("link_id missing"))
}

/// The answer's `link` object, as `create_link` and `get` give it.
fn link_json(link: &Link) -> Value {
    json!({
        "link_id": link.link_id,
        "link_name": link.link_name,
        "url": link.url,
        "create_time": link.create_time,
        "skip_verify": link.skip_verify,
    })
}

pub(crate) fn create(
    state: &mut State,
    corp_id: &str,
    body: &Value,
) -> Result<Map<String, Value>, WecomError> {
    let obj = object(body)?;
    let link_name = obj
        .get("link_name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .ok_or_else(|| invalid("link_name missing"))?;
    if link_name.chars().count() > MAX_LINK_NAME_CHARS {
        return Err(invalid(format!(
            "link_name is longer than {MAX_LINK_NAME_CHARS} characters"
        )));
    }
    let users: Vec<String> = obj
        .get("range")
        .and_then(|r| r.get("user_list"))
        .and_then(Value::as_array)
        .ok_or_else(|| invalid("range.user_list missing"))?
        .iter()
        .map(|u| {
            u.as_str()
                .filter(|u| !u.is_empty())
                .map(str::to_owned)
                .ok_or_else(|| invalid("range.user_list must hold userids"))
        })
        .collect::<Result<_, _>>()?;
    if users.is_empty() || users.len() > MAX_LINK_USERS {
        return Err(invalid(format!(
            "range.user_list must name 1 to {MAX_LINK_USERS} users"
        )));
    }
    let directory = state.corps.get(corp_id).map(|c| &c.users);
    if let Some(missing) = users
        .iter()
        .find(|u| directory.is_none_or(|d| !d.contains(*u)))
    {
        return Err(WecomError::with_detail(
            code::USER_NOT_FOUND,
            missing.clone(),
        ));
    }
    let link_id = format!("cawcde{}", rng::alphanumeric(&mut state.rngs.scans, 12)).to_lowercase();
    let link = Link {
        corp_id: corp_id.to_owned(),
        url: format!("{LINK_BASE}{link_id}"),
        link_id: link_id.clone(),
        link_name: link_name.to_owned(),
        user_list: users,
        skip_verify: obj
            .get("skip_verify")
            .and_then(Value::as_bool)
            .unwrap_or(true),
        create_time: state.now_ms() / 1000,
    };
    let mut answer = Map::new();
    answer.insert("link".into(), link_json(&link));
    state.links.insert(link_id, link);
    Ok(answer)
}

fn owned<'a>(state: &'a State, corp_id: &str, id: &str) -> Result<&'a Link, WecomError> {
    state
        .links
        .get(id)
        .filter(|l| l.corp_id == corp_id)
        .ok_or_else(|| invalid(format!("no link {id}")))
}

pub(crate) fn get(
    state: &mut State,
    corp_id: &str,
    body: &Value,
) -> Result<Map<String, Value>, WecomError> {
    let id = link_id(object(body)?)?;
    let link = owned(state, corp_id, &id)?;
    let mut answer = Map::new();
    answer.insert("link".into(), link_json(link));
    answer.insert(
        "range".into(),
        json!({ "user_list": link.user_list, "department_list": [] }),
    );
    Ok(answer)
}

pub(crate) fn delete(
    state: &mut State,
    corp_id: &str,
    body: &Value,
) -> Result<Map<String, Value>, WecomError> {
    let id = link_id(object(body)?)?;
    owned(state, corp_id, &id)?;
    state.links.remove(&id);
    Ok(Map::new())
}
