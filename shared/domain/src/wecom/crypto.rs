//! WeCom's callback crypto (WXBizMsgCrypt): SHA-1 signatures and AES-256-CBC with 32-byte
//! PKCS#7 blocks. Both sides live here: the callback function verifies and decrypts, the
//! sandbox signs and encrypts, so a mistake cannot hide in matching halves.

use aes::cipher::{block_padding::NoPadding, BlockDecryptMut, BlockEncryptMut, KeyIvInit};
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig, STANDARD};
use base64::{alphabet, Engine};
use rand::Rng;
use sha1::{Digest, Sha1};
use std::fmt;

type Aes256CbcEnc = cbc::Encryptor<aes::Aes256>;
type Aes256CbcDec = cbc::Decryptor<aes::Aes256>;

/// WeCom pads to a multiple of 32 bytes (not AES's 16), so pad bytes run from 1 to 32.
const PAD_BLOCK: usize = 32;
const RANDOM_LEN: usize = 16;
const MAX_TOKEN_LEN: usize = 32;

/// An EncodingAESKey is 43 characters whose last one carries unused bits; WeCom's own
/// libraries ignore them, so the key decoder must too.
const AES_KEY_BASE64: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_allow_trailing_bits(true),
);

/// Why a callback failed its cryptographic checks. The numbers in the docs are WeCom's own
/// library codes, kept so logs can be compared with WeCom's documentation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CryptoError {
    /// -40001
    #[error("signature does not match")]
    BadSignature,
    /// -40004
    #[error("EncodingAESKey must be 43 characters of base64")]
    BadAesKey,
    /// -40005
    #[error("message was encrypted for another receiver")]
    WrongReceiver,
    /// -40007 / -40008
    #[error("ciphertext does not decrypt to a WeCom message")]
    BadCiphertext,
    /// -40010
    #[error("ciphertext is not base64")]
    BadBase64,
    #[error("callback token must be 1 to 32 letters or digits")]
    BadToken,
}

/// The three per-tenant callback settings. `Debug` never shows the token or the key.
#[derive(Clone)]
pub struct CallbackCrypto {
    token: String,
    key: [u8; 32],
    receive_id: String,
}

impl fmt::Debug for CallbackCrypto {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CallbackCrypto")
            .field("token", &"[redacted]")
            .field("key", &"[redacted]")
            .field("receive_id", &self.receive_id)
            .finish()
    }
}

/// A decrypted message and the receiver it was addressed to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plaintext {
    pub message: String,
    pub receive_id: String,
}

/// `hex(sha1(sort([token, timestamp, nonce, encrypt]).concat()))`, lowercase.
pub fn signature(token: &str, timestamp: &str, nonce: &str, encrypt: &str) -> String {
    let mut parts = [token, timestamp, nonce, encrypt];
    parts.sort_unstable();
    let mut hasher = Sha1::new();
    for part in parts {
        hasher.update(part.as_bytes());
    }
    hex::encode(hasher.finalize())
}

/// Compares without an early exit, so the time taken does not reveal a matching prefix.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

impl CallbackCrypto {
    /// `receive_id` is the corp id for self-built apps; decryption rejects anything else.
    pub fn new(token: &str, encoding_aes_key: &str, receive_id: &str) -> Result<Self, CryptoError> {
        if token.is_empty()
            || token.len() > MAX_TOKEN_LEN
            || !token.bytes().all(|b| b.is_ascii_alphanumeric())
        {
            return Err(CryptoError::BadToken);
        }
        if encoding_aes_key.len() != 43
            || !encoding_aes_key.bytes().all(|b| b.is_ascii_alphanumeric())
        {
            return Err(CryptoError::BadAesKey);
        }
        let key = AES_KEY_BASE64
            .decode(format!("{encoding_aes_key}="))
            .map_err(|_| CryptoError::BadAesKey)?;
        let key: [u8; 32] = key.try_into().map_err(|_| CryptoError::BadAesKey)?;
        Ok(Self {
            token: token.to_owned(),
            key,
            receive_id: receive_id.to_owned(),
        })
    }

    pub fn receive_id(&self) -> &str {
        &self.receive_id
    }

    pub fn sign(&self, timestamp: &str, nonce: &str, encrypt: &str) -> String {
        signature(&self.token, timestamp, nonce, encrypt)
    }

    pub fn verify(
        &self,
        msg_signature: &str,
        timestamp: &str,
        nonce: &str,
        encrypt: &str,
    ) -> Result<(), CryptoError> {
        let expected = self.sign(timestamp, nonce, encrypt);
        if constant_time_eq(
            expected.as_bytes(),
            msg_signature.to_ascii_lowercase().as_bytes(),
        ) {
            Ok(())
        } else {
            Err(CryptoError::BadSignature)
        }
    }

    /// Encrypts with fresh random bytes (16 ASCII digits, as WeCom's own library does).
    pub fn encrypt(&self, message: &str) -> String {
        let mut rng = rand::thread_rng();
        let random: [u8; RANDOM_LEN] = std::array::from_fn(|_| b'0' + rng.gen_range(0..10));
        self.encrypt_with_random(&random, message)
    }

    /// Deterministic encryption, for test vectors.
    pub fn encrypt_with_random(&self, random: &[u8; RANDOM_LEN], message: &str) -> String {
        let message_len = u32::try_from(message.len()).unwrap_or(u32::MAX);
        let mut plain =
            Vec::with_capacity(RANDOM_LEN + 4 + message.len() + self.receive_id.len() + PAD_BLOCK);
        plain.extend_from_slice(random);
        plain.extend_from_slice(&message_len.to_be_bytes());
        plain.extend_from_slice(message.as_bytes());
        plain.extend_from_slice(self.receive_id.as_bytes());
        let pad = PAD_BLOCK - plain.len() % PAD_BLOCK;
        plain.resize(plain.len() + pad, pad as u8);

        let len = plain.len();
        let cipher = Aes256CbcEnc::new(&self.key.into(), self.key[..16].into());
        let encrypted = cipher
            .encrypt_padded_mut::<NoPadding>(&mut plain, len)
            .expect("plaintext is padded to whole AES blocks");
        STANDARD.encode(encrypted)
    }

    /// Decrypts and checks the receiver. Accepts pad bytes 1..=32 (WeCom's 32-byte blocks).
    pub fn decrypt(&self, encrypt: &str) -> Result<Plaintext, CryptoError> {
        let mut buffer = STANDARD
            .decode(encrypt.trim())
            .map_err(|_| CryptoError::BadBase64)?;
        if buffer.is_empty() || buffer.len() % 16 != 0 {
            return Err(CryptoError::BadCiphertext);
        }
        let cipher = Aes256CbcDec::new(&self.key.into(), self.key[..16].into());
        let plain = cipher
            .decrypt_padded_mut::<NoPadding>(&mut buffer)
            .map_err(|_| CryptoError::BadCiphertext)?;

        let pad = usize::from(*plain.last().ok_or(CryptoError::BadCiphertext)?);
        if !(1..=PAD_BLOCK).contains(&pad) || pad > plain.len() {
            return Err(CryptoError::BadCiphertext);
        }
        let content = &plain[..plain.len() - pad];
        if content.len() < RANDOM_LEN + 4 {
            return Err(CryptoError::BadCiphertext);
        }
        let len_bytes: [u8; 4] = content[RANDOM_LEN..RANDOM_LEN + 4]
            .try_into()
            .map_err(|_| CryptoError::BadCiphertext)?;
        let message_len = u32::from_be_bytes(len_bytes) as usize;
        let rest = &content[RANDOM_LEN + 4..];
        if message_len > rest.len() {
            return Err(CryptoError::BadCiphertext);
        }
        let (message, receive_id) = rest.split_at(message_len);
        let message =
            String::from_utf8(message.to_vec()).map_err(|_| CryptoError::BadCiphertext)?;
        let receive_id =
            String::from_utf8(receive_id.to_vec()).map_err(|_| CryptoError::BadCiphertext)?;
        if receive_id != self.receive_id {
            return Err(CryptoError::WrongReceiver);
        }
        Ok(Plaintext {
            message,
            receive_id,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wecom::reference_vectors::{self as vectors, Settings, Signed};

    fn crypto(settings: &Settings) -> CallbackCrypto {
        CallbackCrypto::new(settings.token, settings.encoding_aes_key, settings.corp_id)
            .expect("reference settings are valid")
    }

    fn verify(settings: &Settings, signed: &Signed) -> Result<(), CryptoError> {
        crypto(settings).verify(
            signed.msg_signature,
            signed.timestamp,
            signed.nonce,
            signed.encrypt,
        )
    }

    #[test]
    fn v1_url_verification_signature_matches_and_echostr_decrypts() {
        verify(&vectors::V1, &vectors::V1_VERIFY).expect("V1 signature");
        let plain = crypto(&vectors::V1)
            .decrypt(vectors::V1_VERIFY.encrypt)
            .expect("V1 decrypts");
        assert_eq!(plain.message, vectors::V1_REPLY);
        assert_eq!(plain.receive_id, vectors::V1.corp_id);
    }

    #[test]
    fn v2_post_with_pad_byte_30_decrypts_to_the_documented_284_bytes() {
        verify(&vectors::V1, &vectors::V2_POST).expect("V2 signature");
        let plain = crypto(&vectors::V1)
            .decrypt(vectors::V2_POST.encrypt)
            .expect("V2 decrypts");
        assert_eq!(plain.message.len(), 284);
        assert_eq!(plain.message, vectors::V2_PLAINTEXT);
    }

    #[test]
    fn v4_url_verification_passes_and_a_changed_nonce_fails() {
        verify(&vectors::V4, &vectors::V4_VERIFY).expect("V4 signature");
        let plain = crypto(&vectors::V4)
            .decrypt(vectors::V4_VERIFY.encrypt)
            .expect("V4 decrypts");
        assert_eq!(plain.message, vectors::V4_REPLY);
        let wrong_nonce = Signed {
            nonce: vectors::V4_WRONG_NONCE,
            ..vectors::V4_VERIFY
        };
        assert_eq!(
            verify(&vectors::V4, &wrong_nonce),
            Err(CryptoError::BadSignature)
        );
    }

    #[test]
    fn v4_message_with_pad_byte_1_decrypts() {
        verify(&vectors::V4, &vectors::V4_POST).expect("V4 message signature");
        let plain = crypto(&vectors::V4)
            .decrypt(vectors::V4_POST.encrypt)
            .expect("V4 message decrypts")
            .message;
        assert!(plain.contains("<Content><![CDATA[test]]></Content>"));
        assert!(plain.contains("<FromUserName><![CDATA[messense]]></FromUserName>"));
        assert!(plain.contains("4363689963896700987"));
    }

    #[test]
    fn v4b_deterministic_encryption_matches_byte_for_byte() {
        assert_eq!(vectors::V4B_PLAINTEXT.len(), 247);
        let reply = vectors::V4B_REPLY;
        let crypto = crypto(&vectors::V4);
        let encrypted = crypto.encrypt_with_random(vectors::V4B_RANDOM, vectors::V4B_PLAINTEXT);
        assert_eq!(encrypted, reply.encrypt);
        assert_eq!(
            crypto.sign(reply.timestamp, reply.nonce, &encrypted),
            reply.msg_signature
        );
    }

    #[test]
    fn every_pad_length_from_1_to_32_round_trips() {
        let crypto = crypto(&vectors::V1);
        // random (16) + length (4) + corp id (18) = 38 bytes; a message of n bytes pads by 32 - (38 + n) % 32.
        let mut seen = std::collections::BTreeSet::new();
        for n in 0..64 {
            let message = "x".repeat(n);
            let encrypted = crypto.encrypt(&message);
            seen.insert(32 - (38 + n) % 32);
            assert_eq!(
                crypto.decrypt(&encrypted).expect("round trip").message,
                message
            );
        }
        assert_eq!(seen, (1..=32).collect());
    }

    #[test]
    fn a_message_for_another_corp_is_rejected() {
        let v1 = &vectors::V1;
        let sender =
            CallbackCrypto::new(v1.token, v1.encoding_aes_key, "another-corp").expect("valid");
        assert_eq!(
            crypto(v1).decrypt(&sender.encrypt("hi")),
            Err(CryptoError::WrongReceiver)
        );
    }

    #[test]
    fn garbage_ciphertext_is_rejected_not_panicked_on() {
        let crypto = crypto(&vectors::V1);
        assert_eq!(crypto.decrypt("not base64 !!"), Err(CryptoError::BadBase64));
        assert_eq!(crypto.decrypt("AAAA"), Err(CryptoError::BadCiphertext));
        assert!(crypto.decrypt(&STANDARD.encode([7u8; 64])).is_err());
    }

    #[test]
    fn settings_are_validated() {
        let v1 = &vectors::V1;
        assert_eq!(
            CallbackCrypto::new("", v1.encoding_aes_key, v1.corp_id).unwrap_err(),
            CryptoError::BadToken
        );
        assert_eq!(
            CallbackCrypto::new(v1.token, "short", v1.corp_id).unwrap_err(),
            CryptoError::BadAesKey
        );
        let debug = format!("{:?}", crypto(v1));
        assert!(!debug.contains(v1.token) && !debug.contains("jWmYm7"));
    }
}
