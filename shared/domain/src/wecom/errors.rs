//! How a failed WeCom call is handled: its `errcode` decides its class (docs/rules.md rule 9,
//! docs/wecom-api.md §7), never its `errmsg`.

use serde::{Deserialize, Serialize};
use std::fmt;

/// How a failed WeCom call should be handled (docs/rules.md rule 9). Serialized in snake_case so it
/// can travel on dead letters and in metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureClass {
    /// Rate limited: requeue with a delay; not a failure and never a dead letter.
    Throttled,
    /// The access token was refused even after one refresh, or the secret is wrong.
    Token,
    /// WeCom busy, 5xx, timeout, connection trouble: back off and retry.
    Transient,
    /// The config_id no longer exists: clean up and stop.
    CodeGone,
    /// A listed member cannot be used: mark them unusable, recompute, alert.
    StaffUnusable,
    /// More than 100 members: a recompute bug or a department grew; do not retry as is.
    ListTooLong,
    /// 60020: the caller's address is not among the app's trusted IPs. Every call of the
    /// tenant from that address fails alike: the tenant is paused, not retried.
    UntrustedIp,
    /// 48002: the app may not call the API (not among customer contact's allowed apps, or
    /// without the contact-way permission). Every call of the tenant fails alike: paused.
    Forbidden,
    /// Anything else WeCom refused: our request is wrong; retrying it as is cannot help.
    Rejected,
}

impl FailureClass {
    /// The snake_case name, as serialized.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Throttled => "throttled",
            Self::Token => "token",
            Self::Transient => "transient",
            Self::CodeGone => "code_gone",
            Self::StaffUnusable => "staff_unusable",
            Self::ListTooLong => "list_too_long",
            Self::UntrustedIp => "untrusted_ip",
            Self::Forbidden => "forbidden",
            Self::Rejected => "rejected",
        }
    }

    /// Every class, in a fixed order.
    pub const ALL: [Self; 9] = [
        Self::Throttled,
        Self::Token,
        Self::Transient,
        Self::CodeGone,
        Self::StaffUnusable,
        Self::ListTooLong,
        Self::UntrustedIp,
        Self::Forbidden,
        Self::Rejected,
    ];

    /// Whether the failure is about the tenant, not the call: WeCom refuses its credentials
    /// (a secret that no longer works), its caller address or its app's permission, so every
    /// call of the tenant would fail the same way until someone fixes it in WeCom's console.
    /// Such a tenant is paused (`crate::tenants::TenantPause`), not retried code by code.
    pub fn pauses_tenant(self) -> bool {
        matches!(self, Self::Token | Self::UntrustedIp | Self::Forbidden)
    }

    /// The class named `name` (as `as_str` writes it).
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|class| class.as_str() == name)
    }
}

impl fmt::Display for FailureClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failed WeCom call, classified by `errcode` (docs/rules.md rule 9). `errmsg`, where kept, is for
/// logs only: it is truncated and scrubbed of tokens and secrets, and must never be branched
/// on (WeCom says its texts may change).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WeComError {
    /// 45009 (frequency limit) or 45033 (concurrency limit). Retry after a delay; for 45009
    /// not before the current minute is over.
    #[error("WeCom throttled the call (errcode {errcode})")]
    Throttled { errcode: i64 },
    /// 40014 / 42001 that persisted through the one refresh-and-retry, or 40001 (wrong or
    /// reset secret, usually from `gettoken`). Retryable, but a repeat means the credentials
    /// are wrong; do not hammer `gettoken`, WeCom bans IPs that do.
    #[error("WeCom refused the access token or secret (errcode {errcode})")]
    Token { errcode: i64 },
    /// errcode -1 (system busy), an HTTP 5xx, a timeout, a connection error or an answer
    /// that is not WeCom's JSON. Whether the call took effect is unknown; back off and retry.
    #[error("WeCom call failed transiently: {detail}")]
    Transient { detail: String },
    /// 41044: the config_id is unknown or deleted.
    #[error("the contact way does not exist (errcode {errcode})")]
    CodeGone { errcode: i64 },
    /// A listed user cannot be put on a contact way: not in the directory or visible range,
    /// not activated, not real-name verified, or without customer-contact permission.
    /// WeCom does not say which user in a structured way.
    #[error("a listed user cannot be used (errcode {errcode}: {errmsg})")]
    StaffUnusable { errcode: i64, errmsg: String },
    /// 41041: more than 100 users (departments expanded).
    #[error("more than 100 users on one contact way (errcode 41041)")]
    ListTooLong,
    /// 60020: the caller's address is not a trusted IP of the app.
    #[error("WeCom does not trust the caller's address (errcode 60020)")]
    UntrustedIp,
    /// 48002: the app may not call this API.
    #[error("the app may not call this WeCom API (errcode 48002)")]
    Forbidden,
    /// Any other non-zero errcode: the request is wrong (a bug, a missing permission such
    /// as 48002, a bad corp id 40013...).
    #[error("WeCom rejected the call (errcode {errcode}: {errmsg})")]
    Rejected { errcode: i64, errmsg: String },
}

impl WeComError {
    /// The error for a non-zero `errcode`; `None` for 0 (success). `errmsg` is kept only
    /// where the class carries it, so scrub it first.
    pub fn from_errcode(errcode: i64, errmsg: &str) -> Option<Self> {
        let error = match errcode {
            0 => return None,
            45009 | 45033 => Self::Throttled { errcode },
            40014 | 42001 | 40001 => Self::Token { errcode },
            -1 => Self::Transient {
                detail: format!("errcode -1 (system busy): {errmsg}"),
            },
            41044 => Self::CodeGone { errcode },
            60111 | 40003 | 41054 | 40098 | 84074 | 60011 | 40031 | 60021 => Self::StaffUnusable {
                errcode,
                errmsg: errmsg.to_owned(),
            },
            41041 => Self::ListTooLong,
            60020 => Self::UntrustedIp,
            48002 => Self::Forbidden,
            _ => Self::Rejected {
                errcode,
                errmsg: errmsg.to_owned(),
            },
        };
        Some(error)
    }

    /// The class to route on.
    pub fn class(&self) -> FailureClass {
        match self {
            Self::Throttled { .. } => FailureClass::Throttled,
            Self::Token { .. } => FailureClass::Token,
            Self::Transient { .. } => FailureClass::Transient,
            Self::CodeGone { .. } => FailureClass::CodeGone,
            Self::StaffUnusable { .. } => FailureClass::StaffUnusable,
            Self::ListTooLong => FailureClass::ListTooLong,
            Self::UntrustedIp => FailureClass::UntrustedIp,
            Self::Forbidden => FailureClass::Forbidden,
            Self::Rejected { .. } => FailureClass::Rejected,
        }
    }

    /// Whether sending the same request again later can succeed: throttled, transient and
    /// token failures. The others need a different request (or none).
    pub fn is_retryable(&self) -> bool {
        matches!(
            self.class(),
            FailureClass::Throttled | FailureClass::Transient | FailureClass::Token
        )
    }

    /// WeCom's errcode, where the failure had one (-1 is folded into `Transient`'s detail).
    pub fn errcode(&self) -> Option<i64> {
        match self {
            Self::Throttled { errcode }
            | Self::Token { errcode }
            | Self::CodeGone { errcode }
            | Self::StaffUnusable { errcode, .. }
            | Self::Rejected { errcode, .. } => Some(*errcode),
            Self::ListTooLong => Some(41041),
            Self::UntrustedIp => Some(60020),
            Self::Forbidden => Some(48002),
            Self::Transient { .. } => None,
        }
    }

    pub fn transient(detail: impl Into<String>) -> Self {
        Self::Transient {
            detail: detail.into(),
        }
    }

    /// Whether this refusal means "get a new token and try once more".
    pub fn is_stale_token(&self) -> bool {
        matches!(
            self,
            Self::Token {
                errcode: 40014 | 42001
            }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_errcode_maps_to_its_failure_class() {
        let table: &[(i64, FailureClass)] = &[
            (45009, FailureClass::Throttled),
            (45033, FailureClass::Throttled),
            (40014, FailureClass::Token),
            (42001, FailureClass::Token),
            (40001, FailureClass::Token),
            (-1, FailureClass::Transient),
            (41044, FailureClass::CodeGone),
            (60111, FailureClass::StaffUnusable),
            (40003, FailureClass::StaffUnusable),
            (41054, FailureClass::StaffUnusable),
            (40098, FailureClass::StaffUnusable),
            (84074, FailureClass::StaffUnusable),
            (60011, FailureClass::StaffUnusable),
            (40031, FailureClass::StaffUnusable),
            (60021, FailureClass::StaffUnusable),
            (41041, FailureClass::ListTooLong),
            (60020, FailureClass::UntrustedIp),
            (48002, FailureClass::Forbidden),
            // Our own bugs and configuration problems: retrying the same request cannot help.
            (41043, FailureClass::Rejected),
            (40058, FailureClass::Rejected),
            (40013, FailureClass::Rejected),
            (41001, FailureClass::Rejected),
            (48001, FailureClass::Rejected),
            (1, FailureClass::Rejected),
        ];
        for &(errcode, class) in table {
            let error = WeComError::from_errcode(errcode, "some text").expect("non-zero errcode");
            assert_eq!(error.class(), class, "errcode {errcode}");
            let retryable = matches!(
                class,
                FailureClass::Throttled | FailureClass::Transient | FailureClass::Token
            );
            assert_eq!(error.is_retryable(), retryable, "errcode {errcode}");
            if errcode != -1 {
                assert_eq!(error.errcode(), Some(errcode), "errcode {errcode}");
            }
        }
        assert_eq!(WeComError::from_errcode(0, "ok"), None);
    }

    #[test]
    fn the_class_follows_the_errcode_whatever_the_errmsg_says() {
        let error = WeComError::from_errcode(40058, "api freq out of limit").unwrap();
        assert_eq!(error.class(), FailureClass::Rejected);
        let error = WeComError::from_errcode(45009, "invalid userid").unwrap();
        assert_eq!(error, WeComError::Throttled { errcode: 45009 });
    }

    #[test]
    fn staff_unusable_and_rejected_keep_the_errmsg_for_logs() {
        let error = WeComError::from_errcode(60111, "userid not found").unwrap();
        assert_eq!(
            error,
            WeComError::StaffUnusable {
                errcode: 60111,
                errmsg: "userid not found".into()
            }
        );
        assert!(error.to_string().contains("userid not found"));
    }

    #[test]
    fn failure_classes_serialize_in_snake_case() {
        for class in FailureClass::ALL {
            let json = serde_json::to_string(&class).unwrap();
            assert_eq!(json, format!("\"{}\"", class.as_str()));
            assert_eq!(serde_json::from_str::<FailureClass>(&json).unwrap(), class);
        }
        assert_eq!(FailureClass::CodeGone.to_string(), "code_gone");
    }

    #[test]
    fn credentials_address_and_permission_pause_the_tenant_and_nothing_else_does() {
        let pausing: Vec<FailureClass> = FailureClass::ALL
            .into_iter()
            .filter(|class| class.pauses_tenant())
            .collect();
        assert_eq!(
            pausing,
            [
                FailureClass::Token,
                FailureClass::UntrustedIp,
                FailureClass::Forbidden
            ]
        );
    }
}
