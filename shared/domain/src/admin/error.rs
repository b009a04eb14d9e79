//! What can go wrong in an admin request, and how each failure is answered over HTTP.

use crate::http::ErrorAnswer;
use crate::wecom::errors::WeComError;
use crate::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    /// The request can never succeed as sent. `field` names the part to fix (`members[2]`,
    /// `switches.daily_limit`, `body`, the path parameter `tenant`...). Never carries a secret.
    #[error("{field}: {reason}")]
    Invalid { field: String, reason: String },
    /// The body is over `commands::MAX_BODY_BYTES`; it was not read.
    #[error("body of {bytes} bytes is over the limit of {limit}")]
    TooLarge { bytes: usize, limit: usize },
    /// No such tenant or code; `what` names it (`tenant demo`, `code spring-01`).
    #[error("{what} does not exist")]
    NotFound { what: String },
    /// Nobody on the code is eligible and it has no usable fallback, so WeCom cannot be given
    /// a list to create its contact way with. The configuration stays stored.
    #[error("nobody on code {code} is eligible now and it has no usable fallback; the configuration is stored, PUT it again once someone is eligible")]
    NoEligibleMember { code: String },
    /// The staff member resigned, which is final (WeCom gives a re-hired person a new user id):
    /// a PUT may not make them active or disabled again.
    #[error("staff {staff} resigned, which is final; a re-hired person has a new WeCom user id")]
    Resigned { staff: String },
    /// Another tenant holds the corp id: one corp's callbacks and contact ways belong to one
    /// tenant.
    #[error("corp id {corp_id} is registered to another tenant")]
    CorpIdTaken { corp_id: String },
    /// The request rotates the tenant's callback keys while the pair an earlier rotation
    /// replaced is still kept for the callbacks signed with it: one previous pair is kept, so
    /// this rotation would drop that one. Sent again with `"previous_callback_keys": null` it
    /// drops them on purpose.
    #[error("the callback keys an earlier rotation replaced are kept until {kept_until_ms} (ms since the epoch) for the callbacks signed with them, and a second rotation would drop them; rotate after that, or send \"previous_callback_keys\": null with it to drop them now")]
    PreviousKeysHeld { kept_until_ms: u64 },
    /// The resource changed between this request's read and its write, again and again.
    #[error("{what} changed while this request was applied; send it again")]
    Conflict { what: String },
    /// WeCom refused or failed the contact-way creation.
    #[error(transparent)]
    WeCom(#[from] WeComError),
    /// The tenant's budget for this WeCom API is spent for the window (docs/rules.md rule 6): no
    /// call was made; the same request succeeds once the window reopens.
    #[error("the tenant's WeCom budget for {api} is spent; retry in {} s", retry_after_ms.div_ceil(1000))]
    Budget {
        api: &'static str,
        retry_after_ms: u64,
    },
    /// DynamoDB or SQS failed; the request can be retried as is.
    #[error(transparent)]
    Unavailable(#[from] StoreError),
}

impl AdminError {
    pub fn invalid(field: impl Into<String>, reason: impl ToString) -> Self {
        Self::Invalid {
            field: field.into(),
            reason: reason.to_string(),
        }
    }

    pub fn not_found(what: impl Into<String>) -> Self {
        Self::NotFound { what: what.into() }
    }

    /// Whether the caller got something wrong (4xx) rather than a dependency failing (5xx).
    pub fn is_client_error(&self) -> bool {
        matches!(
            self,
            Self::Invalid { .. }
                | Self::TooLarge { .. }
                | Self::NotFound { .. }
                | Self::NoEligibleMember { .. }
                | Self::Resigned { .. }
                | Self::CorpIdTaken { .. }
                | Self::PreviousKeysHeld { .. }
                | Self::Conflict { .. }
                | Self::WeCom(WeComError::StaffUnusable { .. })
        )
    }
}

impl From<&AdminError> for ErrorAnswer {
    fn from(error: &AdminError) -> Self {
        let (status, code, detail) = match error {
            AdminError::Invalid { .. } => (400, "invalid", error.to_string()),
            AdminError::TooLarge { .. } => (413, "too_large", error.to_string()),
            AdminError::NotFound { .. } => (404, "not_found", error.to_string()),
            AdminError::NoEligibleMember { .. } => (409, "no_eligible_member", error.to_string()),
            AdminError::Resigned { .. } => (409, "resigned", error.to_string()),
            AdminError::CorpIdTaken { .. } => (409, "corp_id_taken", error.to_string()),
            AdminError::PreviousKeysHeld { .. } => {
                (409, "previous_callback_keys_held", error.to_string())
            }
            AdminError::Conflict { .. } => (409, "conflict", error.to_string()),
            // WeCom refused a user the request listed: the caller's to fix (take the user off
            // the code or offline), not a failure of ours or WeCom's. The configuration is
            // stored, as for `no_eligible_member`.
            AdminError::WeCom(e @ WeComError::StaffUnusable { .. }) => (
                409,
                "staff_unusable",
                format!(
                    "WeCom refused a listed user (errcode {}); the configuration is stored, take the user off the code and PUT it again",
                    e.errcode().unwrap_or_default()
                ),
            ),
            // The class and errcode only: WeCom's errmsg is for our logs, not for callers.
            AdminError::WeCom(e) => (
                502,
                "wecom_error",
                match e.errcode() {
                    Some(errcode) => format!("{} errcode {errcode}", e.class()),
                    None => e.class().to_string(),
                },
            ),
            AdminError::Budget { .. } => (429, "throttled", error.to_string()),
            AdminError::Unavailable(_) => (503, "unavailable", "try again later".to_owned()),
        };
        Self {
            status,
            code,
            detail,
        }
    }
}
