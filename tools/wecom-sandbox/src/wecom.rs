//! WeCom's answer shapes: every body carries `errcode` and `errmsg`, and errors say so with
//! HTTP 200, as WeCom does.

use serde_json::{json, Map, Value};

/// The errcodes the sandbox answers with. Only the numbers are contract; WeCom says its
/// errmsg texts may change, so clients must branch on `errcode` alone.
pub(crate) mod code {
    pub const SYSTEM_BUSY: i64 = -1;
    pub const INVALID_SECRET: i64 = 40001;
    pub const INVALID_CORPID: i64 = 40013;
    pub const INVALID_TOKEN: i64 = 40014;
    pub const INVALID_PARAMETER: i64 = 40058;
    pub const MISSING_TOKEN: i64 = 41001;
    pub const MISSING_CORPID: i64 = 41002;
    pub const MISSING_SECRET: i64 = 41004;
    pub const MISSING_TYPE: i64 = 41037;
    pub const MISSING_SCENE: i64 = 41038;
    pub const INVALID_TYPE: i64 = 41039;
    pub const INVALID_SCENE: i64 = 41040;
    pub const TOO_MANY_USERS: i64 = 41041;
    pub const MISSING_CONFIG_ID: i64 = 41043;
    pub const INVALID_CONFIG_ID: i64 = 41044;
    pub const TOKEN_EXPIRED: i64 = 42001;
    pub const REQUIRE_GET: i64 = 43001;
    pub const REQUIRE_POST: i64 = 43002;
    pub const FREQ_LIMIT: i64 = 45009;
    pub const CONCURRENCY_LIMIT: i64 = 45033;
    pub const NO_SUCH_API: i64 = 48001;
    pub const USER_NOT_FOUND: i64 = 60111;
    pub const UNTRUSTED_IP: i64 = 60020;
}

fn base_message(errcode: i64) -> &'static str {
    match errcode {
        code::SYSTEM_BUSY => "system busy",
        code::INVALID_SECRET => "invalid credential",
        code::INVALID_CORPID => "invalid corpid",
        code::INVALID_TOKEN => "invalid access_token",
        code::INVALID_PARAMETER => "invalid Request Parameter",
        code::MISSING_TOKEN => "access_token missing",
        code::MISSING_CORPID => "corpid missing",
        code::MISSING_SECRET => "corpsecret missing",
        code::MISSING_TYPE => "contact way type missing",
        code::MISSING_SCENE => "contact way scene missing",
        code::INVALID_TYPE => "invalid contact way type",
        code::INVALID_SCENE => "invalid contact way scene",
        code::TOO_MANY_USERS => "contact way user count exceeds limit (100, departments expanded)",
        code::MISSING_CONFIG_ID => "contact way config_id missing",
        code::INVALID_CONFIG_ID => "invalid contact way config_id",
        code::TOKEN_EXPIRED => "access_token expired",
        code::REQUIRE_GET => "require GET method",
        code::REQUIRE_POST => "require POST method",
        code::FREQ_LIMIT => "api freq out of limit",
        code::CONCURRENCY_LIMIT => "api concurrent out of limit",
        code::NO_SUCH_API => "api forbidden",
        code::USER_NOT_FOUND => "userid not found",
        code::UNTRUSTED_IP => "not allow to access from your ip",
        _ => "sandbox injected error",
    }
}

/// A WeCom errcode answer in the making; `detail` is appended to the standard text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct WecomError {
    pub errcode: i64,
    pub detail: Option<String>,
}

impl WecomError {
    pub fn new(errcode: i64) -> Self {
        Self {
            errcode,
            detail: None,
        }
    }

    pub fn with_detail(errcode: i64, detail: impl Into<String>) -> Self {
        Self {
            errcode,
            detail: Some(detail.into()),
        }
    }

    /// The body, shaped like WeCom's: `"<text>, hint: [...], from ip: ..., more info at ..."`.
    pub fn to_json(&self, hint: &str, peer_ip: &str) -> Value {
        let mut text = base_message(self.errcode).to_owned();
        if let Some(detail) = &self.detail {
            text.push_str(": ");
            text.push_str(detail);
        }
        json!({
            "errcode": self.errcode,
            "errmsg": format!(
                "{text}, hint: [{hint}], from ip: {peer_ip}, more info at https://open.work.weixin.qq.com/devtool/query?e={}",
                self.errcode
            ),
        })
    }
}

/// A successful answer: `errcode` 0, `errmsg` "ok" and the API's own fields.
pub(crate) fn ok(fields: Map<String, Value>) -> Value {
    let mut body = Map::new();
    body.insert("errcode".into(), json!(0));
    body.insert("errmsg".into(), json!("ok"));
    body.extend(fields);
    Value::Object(body)
}

/// The emulated APIs. Rate limits and fault rules are kept per API, as WeCom counts them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Api {
    GetToken,
    AddContactWay,
    GetContactWay,
    ListContactWay,
    UpdateContactWay,
    DelContactWay,
    CreateLink,
    GetLink,
    DeleteLink,
}

impl Api {
    pub const ALL: [Api; 9] = [
        Api::GetToken,
        Api::AddContactWay,
        Api::GetContactWay,
        Api::ListContactWay,
        Api::UpdateContactWay,
        Api::DelContactWay,
        Api::CreateLink,
        Api::GetLink,
        Api::DeleteLink,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Api::GetToken => "gettoken",
            Api::AddContactWay => "add_contact_way",
            Api::GetContactWay => "get_contact_way",
            Api::ListContactWay => "list_contact_way",
            Api::UpdateContactWay => "update_contact_way",
            Api::DelContactWay => "del_contact_way",
            Api::CreateLink => "customer_acquisition/create_link",
            Api::GetLink => "customer_acquisition/get",
            Api::DeleteLink => "customer_acquisition/delete_link",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|api| api.name() == name)
    }

    pub fn wants_post(self) -> bool {
        self != Api::GetToken
    }
}
