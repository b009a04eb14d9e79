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

    // Vectors from ../shared/reference/wecom-api.md §1.8.
    const V1_TOKEN: &str = "QDG6eK";
    const V1_KEY: &str = "jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C";
    const V1_CORP: &str = "wx5823bf96d3bd56c7";
    const V4_TOKEN: &str = "123456";
    const V4_KEY: &str = "kWxPEV2UEDyxWpmPdKC3F4dgPDmOvfKX1HGnEUDS1aR";
    const V4_CORP: &str = "wx49f0ab532d5d035a";

    fn v1() -> CallbackCrypto {
        CallbackCrypto::new(V1_TOKEN, V1_KEY, V1_CORP).expect("V1 settings are valid")
    }

    fn v4() -> CallbackCrypto {
        CallbackCrypto::new(V4_TOKEN, V4_KEY, V4_CORP).expect("V4 settings are valid")
    }

    #[test]
    fn v1_url_verification_signature_matches_and_echostr_decrypts() {
        let echostr = "P9nAzCzyDtyTWESHep1vC5X9xho/qYX3Zpb4yKa9SKld1DsH3Iyt3tP3zNdtp+4RPcs8TgAE7OaBO+FZXvnaqQ==";
        let crypto = v1();
        crypto
            .verify(
                "5c45ff5e21c57e6ad56bac8758b79b1d9ac89fd3",
                "1409659589",
                "263014780",
                echostr,
            )
            .expect("V1 signature");
        let plain = crypto.decrypt(echostr).expect("V1 decrypts");
        assert_eq!(plain.message, "1616140317555161061");
        assert_eq!(plain.receive_id, V1_CORP);
    }

    const V2_ENCRYPT: &str = "RypEvHKD8QQKFhvQ6QleEB4J58tiPdvo+rtK1I9qca6aM/wvqnLSV5zEPeusUiX5L5X/0lWfrf0QADHHhGd3QczcdCUpj911L3vg3W/sYYvuJTs3TUUkSUXxaccAS0qhxchrRYt66wiSpGLYL42aM6A8dTT+6k4aSknmPj48kzJs8qLjvd4Xgpue06DOdnLxAUHzM6+kDZ+HMZfJYuR+LtwGc2hgf5gsijff0ekUNXZiqATP7PF5mZxZ3Izoun1s4zG4LUMnvw2r+KqCKIw+3IQH03v+BCA9nMELNqbSf6tiWSrXJB3LAVGUcallcrw8V2t9EL4EhzJWrQUax5wLVMNS0+rUPA3k22Ncx4XXZS9o0MBH27Bo6BpNelZpS+/uh9KsNlY6bHCmJU9p8g7m3fVKn28H3KDYA5Pl/T8Z1ptDAVe0lXdQ2YoyyH2uyPIGHBZZIs2pDBS8R07+qN+E7Q==";

    #[test]
    fn v2_post_with_pad_byte_30_decrypts_to_the_documented_284_bytes() {
        let crypto = v1();
        crypto
            .verify(
                "477715d11cdb4164915debcba66cb864d751f3e6",
                "1409659813",
                "1372623149",
                V2_ENCRYPT,
            )
            .expect("V2 signature");
        let plain = crypto.decrypt(V2_ENCRYPT).expect("V2 decrypts");
        let expected = "<xml><ToUserName><![CDATA[wx5823bf96d3bd56c7]]></ToUserName>\n<FromUserName><![CDATA[mycreate]]></FromUserName>\n<CreateTime>1409659813</CreateTime>\n<MsgType><![CDATA[text]]></MsgType>\n<Content><![CDATA[hello]]></Content>\n<MsgId>4561255354251345929</MsgId>\n<AgentID>218</AgentID>\n</xml>";
        assert_eq!(plain.message.len(), 284);
        assert_eq!(plain.message, expected);
    }

    #[test]
    fn v4_url_verification_passes_and_a_changed_nonce_fails() {
        let echostr = "4ByGGj+sVCYcvGeQYhaKIk1o0pQRNbRjxybjTGblXrBaXlTXeOo1+bXFXDQQb1o6co6Yh9Bv41n7hOchLF6p+Q==";
        let crypto = v4();
        crypto
            .verify(
                "dd6b9c95b495b3f7e2901bfbc76c664930ffdb96",
                "1411443780",
                "437374425",
                echostr,
            )
            .expect("V4 signature");
        assert_eq!(
            crypto.decrypt(echostr).expect("V4 decrypts").message,
            "5927782489442352469"
        );
        assert_eq!(
            crypto.verify(
                "dd6b9c95b495b3f7e2901bfbc76c664930ffdb96",
                "1411443780",
                "437374424",
                echostr
            ),
            Err(CryptoError::BadSignature)
        );
    }

    const V4_ENCRYPT: &str = "RgqEoJj5A4EMYlLvWO1F86ioRjZfaex/gePD0gOXTxpsq5Yj4GNglrBb8I2BAJVODGajiFnXBu7mCPatfjsu6IHCrsTyeDXzF6Bv283dGymzxh6ydJRvZsryDyZbLTE7rhnus50qGPMfp2wASFlzEgMW9z1ef/RD8XzaFYgm7iTdaXpXaG4+BiYyolBug/gYNx410cvkKR2/nPwBiT+P4hIiOAQqGp/TywZBtDh1yCF2KOd0gpiMZ5jSw3e29mTvmUHzkVQiMS6td7vXUaWOMZnYZlF3So2SjHnwh4jYFxdgpkHHqIrH/54SNdshoQgWYEvccTKe7FS709/5t6NMxuGhcUGAPOQipvWTT4dShyqio7mlsl5noTrb++x6En749zCpQVhDpbV6GDnTbcX2e8K9QaNWHp91eBdCRxthuL0=";

    #[test]
    fn v4_message_with_pad_byte_1_decrypts() {
        let crypto = v4();
        crypto
            .verify(
                "74d92dfeb87ba7c714f89d98870ae5eb62dff26d",
                "1411525903",
                "461056294",
                V4_ENCRYPT,
            )
            .expect("V4 message signature");
        let plain = crypto
            .decrypt(V4_ENCRYPT)
            .expect("V4 message decrypts")
            .message;
        assert!(plain.contains("<Content><![CDATA[test]]></Content>"));
        assert!(plain.contains("<FromUserName><![CDATA[messense]]></FromUserName>"));
        assert!(plain.contains("4363689963896700987"));
    }

    #[test]
    fn v4b_deterministic_encryption_matches_byte_for_byte() {
        let reply = "<xml>\n<MsgType><![CDATA[text]]></MsgType>\n<Content><![CDATA[test]]></Content>\n<FromUserName><![CDATA[wx49f0ab532d5d035a]]></FromUserName>\n<ToUserName><![CDATA[messense]]></ToUserName>\n<AgentID>1</AgentID>\n<CreateTime>1411525903</CreateTime>\n</xml>";
        assert_eq!(reply.len(), 247);
        let crypto = v4();
        let encrypted = crypto.encrypt_with_random(b"1234567890123456", reply);
        assert_eq!(encrypted, "9s4gMv99m88kKTh/H8IdkOiMg6bisoy3ypwy9H4hvSPe9nsGaqyw5hhSjdYbcrKk+j3nba4HMOTzHrluLBYqxgNcBqGsL8GqxlhZgURnAtObvesEl5nZ+uBE8bviY0LWke8Zy9V/QYKxNV2FqllNXcfmstttyIkMKCCmVbCFM2JTF5wY0nFhHZSjPUL2Q1qvSUCUld+/WIXrx0oyKQmpB6o8NRrrNrsDf03oxI1p9FxUgMnwKKZeOA/uu+2IEvEBtb7muXsVbwbgX05UPPJvFurDXafG0RQyPR+mf1nDnAtQmmNOuiR5MIkdQ39xn1vWwi1O5oazPoQJz0nTYjxxEE8kv3kFxtAGVRe3ypD3WeK2XeFYFMNMpatF9XiKzHo3");
        assert_eq!(
            crypto.sign("1411525903", "461056294", &encrypted),
            "407518b7649e86ef23978113f92d27afa9296533"
        );
    }

    #[test]
    fn every_pad_length_from_1_to_32_round_trips() {
        let crypto = v1();
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
        let sender = CallbackCrypto::new(V1_TOKEN, V1_KEY, "another-corp").expect("valid");
        assert_eq!(
            v1().decrypt(&sender.encrypt("hi")),
            Err(CryptoError::WrongReceiver)
        );
    }

    #[test]
    fn garbage_ciphertext_is_rejected_not_panicked_on() {
        let crypto = v1();
        assert_eq!(crypto.decrypt("not base64 !!"), Err(CryptoError::BadBase64));
        assert_eq!(crypto.decrypt("AAAA"), Err(CryptoError::BadCiphertext));
        assert!(crypto.decrypt(&STANDARD.encode([7u8; 64])).is_err());
    }

    #[test]
    fn settings_are_validated() {
        assert_eq!(
            CallbackCrypto::new("", V1_KEY, V1_CORP).unwrap_err(),
            CryptoError::BadToken
        );
        assert_eq!(
            CallbackCrypto::new(V1_TOKEN, "short", V1_CORP).unwrap_err(),
            CryptoError::BadAesKey
        );
        let debug = format!("{:?}", v1());
        assert!(!debug.contains(V1_TOKEN) && !debug.contains("jWmYm7"));
    }
}
