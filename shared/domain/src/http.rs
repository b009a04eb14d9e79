//! Domain errors as HTTP answers: one mapping, used by every HTTP function. Client errors
//! carry a stable `{code, detail}` JSON body; server errors stay opaque (the cause is logged
//! by the caller, never returned).

use crate::intake::IntakeError;
use crate::wecom::crypto::CryptoError;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorAnswer {
    pub status: u16,
    pub code: &'static str,
    pub detail: String,
}

impl ErrorAnswer {
    pub fn body(&self) -> String {
        serde_json::json!({ "code": self.code, "detail": self.detail }).to_string()
    }
}

impl From<&IntakeError> for ErrorAnswer {
    fn from(error: &IntakeError) -> Self {
        if error.is_unauthenticated() {
            // One answer, word for word, whether the tenant is unknown or the signature wrong.
            return Self {
                status: 401,
                code: "bad_signature",
                detail: CryptoError::BadSignature.to_string(),
            };
        }
        let (status, code) = match error {
            IntakeError::TooLarge { .. } => (413, "too_large"),
            IntakeError::MissingParameter(_) => (400, "missing_parameter"),
            IntakeError::OversizedParameter(_) => (400, "oversized_parameter"),
            IntakeError::StaleTimestamp { .. } => (400, "stale_timestamp"),
            IntakeError::MalformedTenant
            | IntakeError::UnknownTenant(_)
            | IntakeError::Crypto(CryptoError::BadSignature) => (401, "bad_signature"),
            IntakeError::Crypto(CryptoError::WrongReceiver) | IntakeError::WrongReceiverCorp => {
                (400, "wrong_receiver")
            }
            IntakeError::Crypto(_) => (400, "bad_ciphertext"),
            IntakeError::Xml(_) => (400, "bad_xml"),
            IntakeError::BrokenTenantSettings(_) | IntakeError::Unavailable(_) => {
                return Self {
                    status: 503,
                    code: "unavailable",
                    detail: "try again later".into(),
                }
            }
        };
        Self {
            status,
            code,
            detail: error.to_string(),
        }
    }
}
