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

/// Where WeCom's customer-acquisition links live (`https://work.weixin.qq.com/ca/<id>`,
/// docs/wecom-api.md): a link elsewhere is not one WeCom made.
pub const LINK_HOST: &str = "https://work.weixin.qq.com/";
/// The longest link URL kept.
const MAX_LINK_URL_BYTES: usize = 512;

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
    // It is sent to visitors as a redirect: only WeCom's own https links are taken, of
    // printable ASCII without spaces (no header or HTML can be smuggled through it).
    let wecoms = url.starts_with(LINK_HOST)
        && url.len() <= MAX_LINK_URL_BYTES
        && url.bytes().all(|b| b.is_ascii_graphic());
    if !wecoms {
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
    fn a_link_not_on_wecoms_host_over_http_or_with_a_control_character_is_not_taken() {
        let link = |url: &str| json!({"link": {"link_id": "ca1", "url": url}});
        for url in [
            "http://work.weixin.qq.com/ca/ca1",
            "https://evil.example/ca/ca1",
            "https://work.weixin.qq.com.evil.example/ca/ca1",
            "https://work.weixin.qq.com/ca/ca1\r\nSet-Cookie: x=1",
            "https://work.weixin.qq.com/ca/ca 1",
        ] {
            assert_eq!(parse_link(&link(url)), None, "{url:?} was taken");
        }
        let long = format!("https://work.weixin.qq.com/ca/{}", "c".repeat(500));
        assert_eq!(parse_link(&link(&long)), None);
        assert!(parse_link(&link("https://work.weixin.qq.com/ca/ca1")).is_some());
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
