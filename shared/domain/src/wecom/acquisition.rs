//! WeCom's customer-acquisition links (获客链接, `externalcontact/customer_acquisition/*`): one
//! link per staff member who sits on a sequenced or quota code. A visitor opened on
//! `<url>?customer_channel=<code>` is added to that member, and WeCom echoes the channel as
//! the add event's `State` (docs/wecom-api.md §3), which is how the landing page's adds are
//! counted against the code and the member.

use serde_json::{json, Value};

/// WeCom's bound on `link_name`.
pub const MAX_LINK_NAME_CHARS: usize = 30;

/// A link as WeCom created it (`create_link`'s `link` object).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcquisitionLink {
    pub link_id: String,
    pub url: String,
}

/// The body of `create_link` for one user: `link_name` (at most 30 characters; the user id,
/// cut), `range.user_list` = the user, `skip_verify` so the visitor's request is accepted at
/// once, as a contact way's `skip_verify` does.
pub fn create_link_body(user: &str) -> Value {
    let name: String = format!("qrsync {user}")
        .chars()
        .take(MAX_LINK_NAME_CHARS)
        .collect();
    json!({ "link_name": name, "range": { "user_list": [user] }, "skip_verify": true })
}

/// The link of a `create_link` (or `get`) answer; `None` for any other shape.
pub fn parse_link(answer: &Value) -> Option<AcquisitionLink> {
    let link = answer.get("link")?;
    let text = |field: &str| {
        link.get(field)
            .and_then(Value::as_str)
            .filter(|v| !v.is_empty())
            .map(str::to_owned)
    };
    let url = text("url")?;
    // It is sent to visitors as a redirect: only WeCom's https links are taken.
    if !url.starts_with("https://") && !url.starts_with("http://") || url.len() > 512 {
        return None;
    }
    Some(AcquisitionLink {
        link_id: text("link_id")?,
        url,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_create_link_answer_gives_its_id_and_url() {
        let answer = json!({"errcode": 0, "errmsg": "ok", "link": {
            "link_id": "cawcde5dc3b2a8cf4a", "link_name": "qrsync zhangsan",
            "url": "https://work.weixin.qq.com/ca/cawcde5dc3b2a8cf4a", "create_time": 1672502400}});
        assert_eq!(
            parse_link(&answer),
            Some(AcquisitionLink {
                link_id: "cawcde5dc3b2a8cf4a".into(),
                url: "https://work.weixin.qq.com/ca/cawcde5dc3b2a8cf4a".into(),
            })
        );
        assert_eq!(
            parse_link(&json!({"errcode": 0, "link": {"link_id": "x"}})),
            None
        );
        assert_eq!(
            parse_link(&json!({"link": {"link_id": "x", "url": "javascript:alert(1)"}})),
            None
        );
    }

    #[test]
    fn the_link_name_stays_within_wecoms_bound_and_names_one_user() {
        let long = "u".repeat(64);
        let body = create_link_body(&long);
        assert_eq!(
            body["link_name"].as_str().map(|n| n.chars().count()),
            Some(MAX_LINK_NAME_CHARS)
        );
        assert_eq!(body["range"]["user_list"], json!([long]));
    }
}
