//! The 「联系我」 contact way as WeCom's API speaks it (docs/wecom-api.md §4): the corp's
//! credentials, what `add_contact_way` creates and what `get_contact_way` answers.

use crate::ids::TenantId;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::fmt;

/// What stands in for a secret wherever one would be shown.
pub const REDACTED: &str = "[redacted]";

/// The credentials of the corp's customer-contact app (§5: its secret, not the corp's
/// address-book secret, or contact-way calls fail with 48002), with the tenant they belong to:
/// the tenant decides which egress address its calls leave from (`budget::EgressAddresses`),
/// and the address its budget is charged to must be the one WeCom sees.
#[derive(Clone, PartialEq, Eq)]
pub struct CorpCredentials {
    pub tenant: TenantId,
    pub corp_id: String,
    pub corp_secret: String,
}

impl fmt::Debug for CorpCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CorpCredentials")
            .field("tenant", &self.tenant)
            .field("corp_id", &self.corp_id)
            .field("corp_secret", &REDACTED)
            .finish()
    }
}

/// A contact way's `type`: who a scan can be routed to. It cannot be changed after creation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ContactWayKind {
    /// `type` 1: exactly one user.
    Single,
    /// `type` 2: up to 100 users (departments expanded); WeCom picks one per scan.
    Multi,
}

impl ContactWayKind {
    /// The wire value of `type`.
    pub fn code(self) -> u8 {
        match self {
            Self::Single => 1,
            Self::Multi => 2,
        }
    }

    /// The kind for a wire `type`, if it is one WeCom defines.
    pub fn from_code(code: i64) -> Option<Self> {
        match code {
            1 => Some(Self::Single),
            2 => Some(Self::Multi),
            _ => None,
        }
    }
}

/// A contact way's `scene`. qrsync only makes printable QR codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ContactWayScene {
    /// `scene` 2: WeCom answers a `qr_code` image URL.
    QrCode,
}

impl ContactWayScene {
    /// The wire value of `scene`.
    pub fn code(self) -> u8 {
        match self {
            Self::QrCode => 2,
        }
    }
}

/// What `add_contact_way` creates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewContactWay {
    pub kind: ContactWayKind,
    pub scene: ContactWayScene,
    /// Echoed in add-customer callbacks (≤ 30 characters). Empty means "no state" and is not
    /// sent.
    pub state: String,
    /// Exactly one for [`ContactWayKind::Single`]; at most 100 otherwise. Empty is not sent.
    pub users: Vec<String>,
    /// ≤ 30 characters; `None` is not sent.
    pub remark: Option<String>,
    /// Always sent, because WeCom's default (`true`) is not something to rely on silently.
    pub skip_verify: bool,
}

/// WeCom's answer to `add_contact_way`. Lose `config_id` and the code can never be edited or
/// deleted again (§4.1), so persist it before anything else.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreatedContactWay {
    pub config_id: String,
    /// Present for [`ContactWayScene::QrCode`].
    pub qr_code: Option<String>,
}

/// WeCom's current copy of a contact way, as `get_contact_way` answers it (used to detect
/// drift between what we last pushed and what WeCom routes to).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContactWay {
    pub config_id: String,
    pub kind: ContactWayKind,
    /// Empty when the code has none.
    pub state: String,
    /// Empty when the code has none. qrsync's creations carry their intent's marker here
    /// (`sweep::CreationIntent::marker`).
    pub remark: String,
    /// `None` when the answer left the list out (or sent `null`): a partial answer, which says
    /// nothing about whom the contact way routes to. qrsync never pushes an empty list, so
    /// reading a missing list as an empty one would make every glitch look like drift.
    pub users: Option<Vec<String>>,
    /// Department ids, as listed (not expanded).
    pub party: Vec<u64>,
}

/// The body of `add_contact_way` for `way`.
pub fn add_contact_way_body(way: &NewContactWay) -> Value {
    let mut body = json!({
        "type": way.kind.code(),
        "scene": way.scene.code(),
        "skip_verify": way.skip_verify,
    });
    // Only fields with a value: WeCom (and the sandbox) refuse nulls, and "" or [] would be
    // a statement rather than an absence.
    if !way.state.is_empty() {
        body["state"] = json!(way.state);
    }
    if !way.users.is_empty() {
        body["user"] = json!(way.users);
    }
    if let Some(remark) = &way.remark {
        body["remark"] = json!(remark);
    }
    body
}

/// WeCom's copy of a contact way from `get_contact_way`'s answer; `None` for any other shape.
pub fn parse_contact_way(answer: &Value) -> Option<ContactWay> {
    let way = answer.get("contact_way")?;
    let users = match way.get("user") {
        None | Some(Value::Null) => None,
        Some(list) => Some(
            list.as_array()?
                .iter()
                .map(|v| v.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()?,
        ),
    };
    let party = match way.get("party") {
        None | Some(Value::Null) => Vec::new(),
        Some(list) => list
            .as_array()?
            .iter()
            .map(Value::as_u64)
            .collect::<Option<_>>()?,
    };
    let text = |key: &str| {
        way.get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    Some(ContactWay {
        config_id: way.get("config_id")?.as_str()?.to_owned(),
        kind: ContactWayKind::from_code(way.get("type")?.as_i64()?)?,
        state: text("state"),
        remark: text("remark"),
        users,
        party,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_debug_shows_the_corp_but_not_the_secret() {
        let creds = CorpCredentials {
            tenant: TenantId::parse("acme").expect("valid"),
            corp_id: "ww0123456789abcdef".into(),
            corp_secret: "s3cr3t-value".into(),
        };
        let shown = format!("{creds:?} {creds:#?}");
        assert!(shown.contains("ww0123456789abcdef"));
        assert!(!shown.contains("s3cr3t-value"));
        assert!(shown.contains(REDACTED));
    }

    #[test]
    fn add_sends_only_the_fields_that_have_a_value() {
        let mut way = NewContactWay {
            kind: ContactWayKind::Multi,
            scene: ContactWayScene::QrCode,
            state: String::new(),
            users: Vec::new(),
            remark: None,
            skip_verify: false,
        };
        assert_eq!(
            add_contact_way_body(&way),
            json!({"type": 2, "scene": 2, "skip_verify": false})
        );
        way.kind = ContactWayKind::Single;
        way.state = "s1".into();
        way.users = vec!["alice".into()];
        way.remark = Some("r".into());
        way.skip_verify = true;
        assert_eq!(
            add_contact_way_body(&way),
            json!({"type": 1, "scene": 2, "skip_verify": true, "state": "s1", "user": ["alice"], "remark": "r"})
        );
    }

    #[test]
    fn a_contact_way_answer_parses_with_missing_optional_fields() {
        let answer =
            json!({"errcode": 0, "contact_way": {"config_id": "c1", "type": 2, "scene": 2}});
        assert_eq!(
            parse_contact_way(&answer),
            Some(ContactWay {
                config_id: "c1".into(),
                kind: ContactWayKind::Multi,
                state: String::new(),
                remark: String::new(),
                users: None,
                party: Vec::new(),
            })
        );
        let answer = json!({"contact_way": {"config_id": "c1", "type": 3}});
        assert_eq!(parse_contact_way(&answer), None);
        let answer = json!({"contact_way": {"config_id": "c1", "type": 1, "user": [1]}});
        assert_eq!(parse_contact_way(&answer), None);
    }

    #[test]
    fn an_answer_without_its_user_list_is_partial_not_an_empty_list() {
        for user in [json!(null), json!([])] {
            let mut way = json!({"config_id": "c1", "type": 2, "party": [7], "remark": "r"});
            if !user.is_null() {
                way["user"] = user.clone();
            }
            let parsed = parse_contact_way(&json!({"contact_way": way})).expect("parses");
            let expected = (!user.is_null()).then(Vec::new);
            assert_eq!(parsed.users, expected, "user: {user}");
            assert_eq!((parsed.party, parsed.remark.as_str()), (vec![7], "r"));
        }
    }
}
