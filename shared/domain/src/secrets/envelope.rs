use super::{DataKey, DataKeys, Purpose, SecretContext};
use crate::StoreError;
use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Nonce};
use moka::future::Cache;
use rand::RngCore;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The first bytes of every sealed value (format 1: `QS1`, the wrapped key's length as two
/// bytes, the wrapped key, a 12-byte nonce, the AES-256-GCM ciphertext and its tag).
const MAGIC: &[u8; 3] = b"QS1";
const NONCE_LEN: usize = 12;

/// What a process that may not open a purpose reads in place of its sealed value (the schedule
/// tick reads a profile for its timezone, never for its corp secret). It is never a valid
/// secret: WeCom refuses it, and nothing writes it back (the admin API, the only writer of
/// profiles, holds every purpose's key).
pub const SEALED_PLACEHOLDER: &str = "[sealed]";

/// A secret as an item holds it: plaintext from before sealing, or sealed. Stores keep them
/// apart by the attribute's type (a string is plaintext, bytes are sealed).
#[derive(Clone, PartialEq, Eq)]
pub enum StoredSecret {
    Plain(String),
    Sealed(Vec<u8>),
}

impl std::fmt::Debug for StoredSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Plain(_) => "Plain([redacted])",
            Self::Sealed(_) => "Sealed(..)",
        })
    }
}

/// How long and how often a container reuses a data key: at most `seals_per_key` seals with one
/// generated key, and every cached key (for sealing or opening) dropped after `max_age`, with at
/// most `entries` of each kept.
#[derive(Debug, Clone, Copy)]
pub struct CacheLimits {
    pub entries: u64,
    pub max_age: Duration,
    pub seals_per_key: u32,
}

impl Default for CacheLimits {
    /// 30,000 tenants fit; 15 minutes of reuse; a key seals at most 1,000 values.
    fn default() -> Self {
        Self {
            entries: 50_000,
            max_age: Duration::from_secs(15 * 60),
            seals_per_key: 1_000,
        }
    }
}

struct SealingKey {
    key: DataKey,
    uses: AtomicU32,
}

/// Seals and opens secrets with data keys from `DataKeys`, each cached per container within
/// `CacheLimits`: a warm container opens a tenant's secrets without calling the key service.
pub struct Envelope {
    keys: Arc<dyn DataKeys>,
    limits: CacheLimits,
    sealing: Cache<SecretContext, Arc<SealingKey>>,
    opening: Cache<(SecretContext, Vec<u8>), [u8; 32]>,
}

impl Envelope {
    pub fn new(keys: Arc<dyn DataKeys>, limits: CacheLimits) -> Self {
        Self {
            keys,
            limits,
            sealing: Cache::builder()
                .max_capacity(limits.entries)
                .time_to_live(limits.max_age)
                .build(),
            opening: Cache::builder()
                .max_capacity(limits.entries)
                .time_to_live(limits.max_age)
                .build(),
        }
    }

    /// Whether this process may seal and open `purpose`.
    pub fn holds(&self, purpose: Purpose) -> bool {
        self.keys.holds(purpose)
    }

    /// `plaintext` sealed for `context`.
    pub async fn seal(
        &self,
        context: &SecretContext,
        plaintext: &str,
    ) -> Result<Vec<u8>, StoreError> {
        let key = self.sealing_key(context).await?;
        let mut nonce = [0u8; NONCE_LEN];
        rand::thread_rng().fill_bytes(&mut nonce);
        let cipher = Aes256Gcm::new_from_slice(&key.plaintext).map_err(refused)?;
        let aad = context.associated_data();
        let sealed = cipher
            .encrypt(
                Nonce::from_slice(&nonce),
                Payload {
                    msg: plaintext.as_bytes(),
                    aad: &aad,
                },
            )
            .map_err(|_| refused("the value could not be sealed"))?;
        let wrapped_len =
            u16::try_from(key.wrapped.len()).map_err(|_| refused("wrapped key too long"))?;
        let mut out = Vec::with_capacity(5 + key.wrapped.len() + NONCE_LEN + sealed.len());
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&wrapped_len.to_be_bytes());
        out.extend_from_slice(&key.wrapped);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&sealed);
        Ok(out)
    }

    /// The plaintext of `sealed`, if it was sealed for `context` and this process may open it.
    pub async fn open(&self, context: &SecretContext, sealed: &[u8]) -> Result<String, StoreError> {
        let (wrapped, nonce, ciphertext) =
            parse(sealed).ok_or_else(|| refused("not a sealed value"))?;
        let cache_key = (context.clone(), wrapped.to_vec());
        let data_key = match self.opening.get(&cache_key).await {
            Some(key) => key,
            None => {
                let key = self.keys.unwrap(context, wrapped).await?;
                self.opening.insert(cache_key, key).await;
                key
            }
        };
        let cipher = Aes256Gcm::new_from_slice(&data_key).map_err(refused)?;
        let aad = context.associated_data();
        let plain = cipher
            .decrypt(
                Nonce::from_slice(nonce),
                Payload {
                    msg: ciphertext,
                    aad: &aad,
                },
            )
            .map_err(|_| refused("the sealed value does not open under its context"))?;
        String::from_utf8(plain).map_err(|_| refused("the sealed value is not text"))
    }

    /// A stored secret's plaintext: a plaintext one as it is, a sealed one opened, or
    /// `SEALED_PLACEHOLDER` when this process may not open its purpose.
    pub async fn reveal(
        &self,
        context: &SecretContext,
        stored: &StoredSecret,
    ) -> Result<String, StoreError> {
        match stored {
            StoredSecret::Plain(value) => Ok(value.clone()),
            StoredSecret::Sealed(_) if !self.holds(context.purpose) => {
                Ok(SEALED_PLACEHOLDER.to_owned())
            }
            StoredSecret::Sealed(sealed) => self.open(context, sealed).await,
        }
    }

    /// The data key to seal with: the cached one while it has seals left, else a new one.
    async fn sealing_key(&self, context: &SecretContext) -> Result<DataKey, StoreError> {
        if let Some(cached) = self.sealing.get(context).await {
            if cached.uses.fetch_add(1, Ordering::AcqRel) < self.limits.seals_per_key {
                return Ok(cached.key.clone());
            }
        }
        let key = self.keys.generate(context).await?;
        // The new key opens what it seals without a call to the key service.
        self.opening
            .insert((context.clone(), key.wrapped.clone()), key.plaintext)
            .await;
        self.sealing
            .insert(
                context.clone(),
                Arc::new(SealingKey {
                    key: key.clone(),
                    uses: AtomicU32::new(1),
                }),
            )
            .await;
        Ok(key)
    }

    /// Keys held now, for sealing and for opening (after pending evictions are applied).
    pub async fn cached(&self) -> (u64, u64) {
        self.sealing.run_pending_tasks().await;
        self.opening.run_pending_tasks().await;
        (self.sealing.entry_count(), self.opening.entry_count())
    }
}

fn parse(sealed: &[u8]) -> Option<(&[u8], &[u8], &[u8])> {
    let rest = sealed.strip_prefix(MAGIC.as_slice())?;
    let (len, rest) = rest.split_first_chunk::<2>()?;
    let len = usize::from(u16::from_be_bytes(*len));
    if rest.len() < len + NONCE_LEN + 16 {
        return None;
    }
    let (wrapped, rest) = rest.split_at(len);
    let (nonce, ciphertext) = rest.split_at(NONCE_LEN);
    Some((wrapped, nonce, ciphertext))
}

fn refused(error: impl std::fmt::Display) -> StoreError {
    StoreError::new("secrets", error.to_string())
}
