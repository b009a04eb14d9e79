//! A tenant's callback keys after a rotation (docs/design/safety.md, "Rotating callback
//! keys"). The pair a rotation replaces is kept beside the new one, with when it was replaced,
//! and a callback is verified with the current pair and, failing that, with the previous one
//! while it is still within its window: at the live route for `KeyRotation::edge_ms` (WeCom
//! may go on signing with it until the tenant saves the new keys in its console), for a stored
//! callback (the inbox, its dead letters, the replay archive) for `KeyRotation::stored_ms`,
//! long enough for every one of them signed before the rotation to be recorded or replayed.

use crate::wecom::crypto::{CallbackCrypto, CryptoError, Plaintext};
use std::fmt;

const HOUR_MS: u64 = 3_600_000;
const DAY_MS: u64 = 24 * HOUR_MS;

/// How long replaced callback keys still verify, counted from their replacement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyRotation {
    /// At the live route (`CallbackKeyOverlapHours`).
    pub edge_ms: u64,
    /// For a stored callback: the overlap, then the inbox and its dead-letter queue (their
    /// retention each), then the archive (`CallbackArchiveDays` from the callback's last
    /// recording).
    pub stored_ms: u64,
}

impl KeyRotation {
    /// `overlap_hours` is `CallbackKeyOverlapHours`, `inbox_retention_secs` the inbox's and
    /// its dead-letter queue's `MessageRetentionPeriod`, `archive_days` `CallbackArchiveDays`.
    /// A callback signed with the old keys reaches the route at most `overlap_hours` after the
    /// rotation, waits at most the retention in the inbox and as long again in its dead
    /// letters, and its archived copy expires `archive_days` after it was last recorded.
    pub fn new(overlap_hours: u64, inbox_retention_secs: u64, archive_days: u64) -> Self {
        let edge_ms = overlap_hours.saturating_mul(HOUR_MS);
        let queued_ms = inbox_retention_secs.saturating_mul(2_000);
        Self {
            edge_ms,
            stored_ms: edge_ms
                .saturating_add(queued_ms)
                .saturating_add(archive_days.saturating_mul(DAY_MS)),
        }
    }

    /// Until when `previous` verifies a stored callback (and is kept on the profile).
    pub fn kept_until(&self, previous: &PreviousCallbackKeys) -> u64 {
        previous.replaced_at_ms.saturating_add(self.stored_ms)
    }

    /// Until when `previous` verifies a callback at the live route.
    pub fn edge_until(&self, previous: &PreviousCallbackKeys) -> u64 {
        previous.replaced_at_ms.saturating_add(self.edge_ms)
    }
}

impl Default for KeyRotation {
    /// The template's defaults: 24 hours at the route, SQS's 14 days twice, 30 days archived.
    fn default() -> Self {
        Self::new(24, 14 * 24 * 3600, 30)
    }
}

/// The callback token and AES key a rotation replaced, and when. `Debug` hides both.
#[derive(Clone, PartialEq, Eq)]
pub struct PreviousCallbackKeys {
    pub callback_token: String,
    pub encoding_aes_key: String,
    pub replaced_at_ms: u64,
}

impl fmt::Debug for PreviousCallbackKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PreviousCallbackKeys")
            .field("callback_token", &"[redacted]")
            .field("encoding_aes_key", &"[redacted]")
            .field("replaced_at_ms", &self.replaced_at_ms)
            .finish()
    }
}

/// The key pairs a callback may be signed with now: the current one, and the previous one
/// while it is within its window.
#[derive(Debug, Clone)]
pub struct CallbackKeys {
    pub(super) current: CallbackCrypto,
    pub(super) previous: Option<CallbackCrypto>,
}

impl CallbackKeys {
    /// Verifies the signature and decrypts with the current pair, else with the previous one
    /// (a rotation may change the token, the key or both, so a pair is tried whole). When
    /// neither opens it, the current pair's refusal is the answer.
    pub fn open(
        &self,
        signature: &str,
        timestamp: &str,
        nonce: &str,
        encrypt: &str,
    ) -> Result<Plaintext, CryptoError> {
        let open = |crypto: &CallbackCrypto| {
            crypto.verify(signature, timestamp, nonce, encrypt)?;
            crypto.decrypt(encrypt)
        };
        let refusal = match open(&self.current) {
            Ok(plaintext) => return Ok(plaintext),
            Err(refusal) => refusal,
        };
        match self.previous.as_ref().map(open) {
            Some(Ok(plaintext)) => {
                tracing::info!(
                    keys = "previous",
                    "callback verified with the tenant's previous callback keys"
                );
                Ok(plaintext)
            }
            _ => Err(refusal),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tenants::CallbackSettings;
    use crate::wecom::reference_vectors as vectors;

    const OLD_TOKEN: &str = "oldtoken";
    const NEW_TOKEN: &str = "newtoken";
    const REPLACED_AT_MS: u64 = 1_700_000_000_000;
    const WINDOW_MS: u64 = 30 * DAY_MS;

    /// The settings after a rotation from (`OLD_TOKEN`, V1's key) to (`NEW_TOKEN`, V4's key).
    fn rotated() -> CallbackSettings {
        CallbackSettings {
            corp_id: vectors::V1.corp_id.into(),
            callback_token: NEW_TOKEN.into(),
            encoding_aes_key: vectors::V4.encoding_aes_key.into(),
            previous: Some(PreviousCallbackKeys {
                callback_token: OLD_TOKEN.into(),
                encoding_aes_key: vectors::V1.encoding_aes_key.into(),
                replaced_at_ms: REPLACED_AT_MS,
            }),
        }
    }

    /// A callback signed and encrypted with `token` and `key` for V1's corp.
    fn signed(token: &str, key: &str) -> (String, String) {
        let crypto = CallbackCrypto::new(token, key, vectors::V1.corp_id).expect("valid keys");
        let encrypt = crypto.encrypt("<xml>hello</xml>");
        (crypto.sign("1700000000", "nonce", &encrypt), encrypt)
    }

    fn opens(
        settings: &CallbackSettings,
        (signature, encrypt): &(String, String),
        now_ms: u64,
    ) -> bool {
        settings
            .keys(now_ms, WINDOW_MS)
            .expect("current keys are valid")
            .open(signature, "1700000000", "nonce", encrypt)
            .is_ok_and(|p| p.message == "<xml>hello</xml>")
    }

    #[test]
    fn a_callback_signed_with_the_previous_keys_opens_within_the_window() {
        let old = signed(OLD_TOKEN, vectors::V1.encoding_aes_key);
        assert!(opens(&rotated(), &old, REPLACED_AT_MS));
        assert!(opens(&rotated(), &old, REPLACED_AT_MS + WINDOW_MS - 1));
    }

    #[test]
    fn a_callback_signed_with_the_previous_keys_is_refused_once_the_window_has_passed() {
        let old = signed(OLD_TOKEN, vectors::V1.encoding_aes_key);
        assert!(!opens(&rotated(), &old, REPLACED_AT_MS + WINDOW_MS));
        assert!(!opens(&rotated(), &old, REPLACED_AT_MS + 400 * DAY_MS));
    }

    #[test]
    fn a_callback_signed_with_the_current_keys_always_opens() {
        let new = signed(NEW_TOKEN, vectors::V4.encoding_aes_key);
        for now_ms in [0, REPLACED_AT_MS, REPLACED_AT_MS + WINDOW_MS, u64::MAX] {
            assert!(opens(&rotated(), &new, now_ms));
        }
        let never_rotated = CallbackSettings {
            previous: None,
            ..rotated()
        };
        assert!(opens(&never_rotated, &new, REPLACED_AT_MS));
    }

    #[test]
    fn keys_that_were_never_the_tenants_are_refused_as_a_bad_signature() {
        let random = signed("randomtoken", &"R".repeat(43));
        let keys = rotated().keys(REPLACED_AT_MS, WINDOW_MS).expect("valid");
        assert_eq!(
            keys.open(&random.0, "1700000000", "nonce", &random.1),
            Err(CryptoError::BadSignature)
        );
    }

    #[test]
    fn a_rotation_of_the_key_alone_opens_callbacks_encrypted_with_the_old_key() {
        // The token did not change: the current pair's signature matches, its key cannot
        // decrypt, and the previous pair (same token, old key) opens it.
        let mut settings = rotated();
        settings.callback_token = OLD_TOKEN.into();
        let old = signed(OLD_TOKEN, vectors::V1.encoding_aes_key);
        assert!(opens(&settings, &old, REPLACED_AT_MS + 1));
        assert!(!opens(&settings, &old, REPLACED_AT_MS + WINDOW_MS));
    }

    #[test]
    fn the_stored_window_covers_the_overlap_both_queues_and_the_archive() {
        let rotation = KeyRotation::new(24, 14 * 24 * 3600, 30);
        assert_eq!(rotation.edge_ms, DAY_MS);
        assert_eq!(rotation.stored_ms, (1 + 28 + 30) * DAY_MS);
        assert_eq!(KeyRotation::default(), rotation);
    }

    #[test]
    fn previous_keys_never_print_their_secrets() {
        let shown = format!("{:?} {:?}", rotated(), rotated().previous);
        assert!(!shown.contains(OLD_TOKEN) && !shown.contains(&vectors::V1.encoding_aes_key[..10]));
    }
}
