//! Access tokens: cached per corp for the life of the process, refreshed shortly before they
//! expire, fetched by one caller at a time per corp, and optionally shared between processes
//! through a [`TokenStore`] (docs/wecom-api.md §5: WeCom rate-limits `gettoken` and bans IPs
//! that storm it).

use super::answer::answer;
use super::transport::{Transport, WeComApi, WeComRequest};
use crate::clock::host_clock;
use domain::wecom::contact_way::{CorpCredentials, REDACTED};
use domain::wecom::errors::WeComError;
use domain::StoreError;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Mutex;

/// Longest early-refresh margin: a token is replaced once less than this remains...
const MAX_REFRESH_MARGIN: Duration = Duration::from_secs(5 * 60);
/// ...or less than this fraction of its lifetime, whichever margin is smaller, so short-lived
/// tokens (a sandbox configured with a 60 s lifetime) are still used for most of their life.
const REFRESH_MARGIN_DIVISOR: u32 = 10;
/// WeCom issues 2-hour tokens; a wild `expires_in` is capped rather than trusted (or
/// overflowing the clock arithmetic).
const MAX_TOKEN_LIFETIME: Duration = Duration::from_secs(24 * 60 * 60);
/// How long a process may hold a corp's token refresh lock in a [`TokenStore`]: longer than
/// one `gettoken`, short enough that a crashed holder costs little.
const TOKEN_LOCK: Duration = Duration::from_secs(10);
/// While another process holds the lock and no stored token is valid, how often and how
/// many times the store is read again before fetching regardless.
const TOKEN_LOCK_POLL: Duration = Duration::from_millis(100);
const TOKEN_LOCK_POLLS: u32 = 10;

/// An access token as processes share it through a [`TokenStore`]: wall-clock times (an
/// `Instant` means nothing to another process) and the digest of the secret it belongs to.
#[derive(Clone, PartialEq, Eq)]
pub struct SharedToken {
    pub value: String,
    /// Hex SHA-256 of the corp secret the token was issued for.
    pub secret_digest: String,
    /// Milliseconds since the epoch: replace it from then on...
    pub refresh_at_ms: u64,
    /// ...and never use it after this.
    pub expires_at_ms: u64,
}

impl fmt::Debug for SharedToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedToken")
            .field("value", &REDACTED)
            .field("refresh_at_ms", &self.refresh_at_ms)
            .field("expires_at_ms", &self.expires_at_ms)
            .finish_non_exhaustive()
    }
}

/// Where processes share access tokens, one per corp app, with a short lock so that one
/// process at a time calls `gettoken` (WeCom rate-limits it and bans IPs that storm it, §5).
#[async_trait::async_trait]
pub trait TokenStore: Send + Sync {
    async fn load(&self, corp_id: &str) -> Result<Option<SharedToken>, StoreError>;
    /// Takes the corp's refresh lock until `until_ms`, unless another process holds it.
    async fn try_lock(&self, corp_id: &str, now_ms: u64, until_ms: u64)
        -> Result<bool, StoreError>;
    /// Stores a newly fetched token and releases the lock.
    async fn save(&self, corp_id: &str, token: &SharedToken) -> Result<(), StoreError>;
}

/// A token as cached for one corp.
struct CachedToken {
    value: String,
    /// Which secret it was issued for, so a rotated secret is not answered with a token of
    /// the old one. A digest, so the cache holds no second copy of the secret.
    secret_digest: [u8; 32],
    refresh_at: Instant,
    expires_at: Instant,
}

impl CachedToken {
    fn new(
        value: String,
        secret_digest: [u8; 32],
        fetched_at: Instant,
        lifetime: Duration,
    ) -> Self {
        let lifetime = lifetime.min(MAX_TOKEN_LIFETIME);
        Self {
            value,
            secret_digest,
            refresh_at: fetched_at + lifetime - refresh_margin(lifetime),
            expires_at: fetched_at + lifetime,
        }
    }

    fn fresh(&self, now: Instant, digest: &[u8; 32]) -> bool {
        &self.secret_digest == digest && now < self.refresh_at
    }

    fn unexpired(&self, now: Instant, digest: &[u8; 32]) -> bool {
        &self.secret_digest == digest && now < self.expires_at
    }

    /// This process's copy of a stored token, read at wall-clock `now_ms`.
    fn from_shared(shared: &SharedToken, digest: [u8; 32], now_ms: u64) -> Self {
        let now = Instant::now();
        Self {
            value: shared.value.clone(),
            secret_digest: digest,
            refresh_at: now + Duration::from_millis(shared.refresh_at_ms.saturating_sub(now_ms)),
            expires_at: now + Duration::from_millis(shared.expires_at_ms.saturating_sub(now_ms)),
        }
    }

    /// The stored form of this token, at wall-clock `now_ms`.
    fn to_shared(&self, now_ms: u64) -> SharedToken {
        let now = Instant::now();
        let later = |at: Instant| {
            now_ms.saturating_add(
                u64::try_from(at.saturating_duration_since(now).as_millis()).unwrap_or(u64::MAX),
            )
        };
        SharedToken {
            value: self.value.clone(),
            secret_digest: hex::encode(self.secret_digest),
            refresh_at_ms: later(self.refresh_at),
            expires_at_ms: later(self.expires_at),
        }
    }
}

/// How long before expiry a token is replaced: 5 minutes or 10% of its lifetime, whichever is
/// smaller.
fn refresh_margin(lifetime: Duration) -> Duration {
    MAX_REFRESH_MARGIN.min(lifetime / REFRESH_MARGIN_DIVISOR)
}

/// One corp's token and the single-flight state around fetching it.
#[derive(Default)]
struct TokenSlot {
    /// Counts finished `gettoken` attempts. Read before queueing for `state`, so a waiter can
    /// tell that an attempt finished while it waited.
    attempts: AtomicU64,
    /// LeasedRefresh for the whole fetch: this is what makes concurrent callers wait for one refresh.
    state: Mutex<SlotState>,
}

#[derive(Default)]
struct SlotState {
    token: Option<CachedToken>,
    /// The outcome of the latest attempt if it failed, handed to callers that queued behind
    /// it, so a `gettoken` outage costs one attempt per wave of callers, not one per caller.
    last_failure: Option<WeComError>,
}

/// Every corp's token in this process, and the store that shares them between processes.
#[derive(Default)]
pub(super) struct Tokens {
    slots: Mutex<HashMap<String, Arc<TokenSlot>>>,
    shared: Option<Arc<dyn TokenStore>>,
}

impl Tokens {
    pub(super) fn share_through(&mut self, store: Arc<dyn TokenStore>) {
        self.shared = Some(store);
    }

    /// A usable token for `creds`, fetched through `transport` when one is due.
    /// With `rejected`, that token was just refused by WeCom: it is dropped unless another
    /// caller has already replaced it.
    pub(super) async fn token(
        &self,
        transport: &Transport,
        creds: &CorpCredentials,
        rejected: Option<&str>,
    ) -> Result<String, WeComError> {
        let slot = self.slot(&creds.corp_id).await;
        let digest: [u8; 32] = Sha256::digest(creds.corp_secret.as_bytes()).into();
        let attempts_seen = slot.attempts.load(Ordering::Acquire);
        let mut state = slot.state.lock().await;
        let now = Instant::now();

        if let Some(rejected) = rejected {
            if state.token.as_ref().is_some_and(|t| t.value == rejected) {
                state.token = None;
            }
        }
        if let Some(token) = state.token.as_ref().filter(|t| t.fresh(now, &digest)) {
            return Ok(token.value.clone());
        }
        if slot.attempts.load(Ordering::Acquire) != attempts_seen {
            if let Some(failure) = state.last_failure.clone() {
                // Someone tried while we waited and failed: share their answer rather than
                // queue yet another gettoken behind it.
                return fallback(&state, now, &digest).ok_or(failure);
            }
        }

        if let Some(store) = &self.shared {
            match shared_token(store.as_ref(), &creds.corp_id, digest, rejected).await {
                Ok(Some(token)) => {
                    let value = token.value.clone();
                    state.token = Some(token);
                    state.last_failure = None;
                    return Ok(value);
                }
                // Ours to fetch: we hold the lock, or its holder did not deliver in time.
                Ok(None) => {}
                Err(error) => {
                    tracing::warn!(error = %error, "token store unavailable; fetching a token");
                }
            }
        }
        let outcome = fetch_token(transport, creds, &digest).await;
        slot.attempts.fetch_add(1, Ordering::AcqRel);
        match outcome {
            Ok(token) => {
                if let Some(store) = &self.shared {
                    if let Err(error) = store
                        .save(&creds.corp_id, &token.to_shared(host_clock()))
                        .await
                    {
                        tracing::warn!(error = %error, "fetched token not shared");
                    }
                }
                let value = token.value.clone();
                state.token = Some(token);
                state.last_failure = None;
                Ok(value)
            }
            Err(error) => {
                state.last_failure = Some(error.clone());
                fallback(&state, now, &digest).ok_or(error)
            }
        }
    }

    async fn slot(&self, corp_id: &str) -> Arc<TokenSlot> {
        self.slots
            .lock()
            .await
            .entry(corp_id.to_owned())
            .or_default()
            .clone()
    }
}

/// `gettoken` for `creds`: a new token, its lifetime counted from before the request.
async fn fetch_token(
    transport: &Transport,
    creds: &CorpCredentials,
    digest: &[u8; 32],
) -> Result<CachedToken, WeComError> {
    let fetched_at = Instant::now();
    let request = WeComRequest {
        api: WeComApi::GetToken,
        query: vec![
            ("corpid".to_owned(), creds.corp_id.clone()),
            ("corpsecret".to_owned(), creds.corp_secret.clone()),
        ],
        body: None,
    };
    let reply = transport.send(&creds.tenant, &request).await;
    let answer = answer(reply, &[&creds.corp_secret])?;
    let value = answer
        .get("access_token")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| WeComError::transient("gettoken answered without access_token"))?;
    // A missing lifetime makes the token single-use rather than trusted for a guess.
    let lifetime = Duration::from_secs(
        answer
            .get("expires_in")
            .and_then(Value::as_u64)
            .unwrap_or(0),
    );
    tracing::debug!(
        corp_id = %creds.corp_id,
        expires_in = lifetime.as_secs(),
        "fetched a WeCom access token"
    );
    Ok(CachedToken::new(
        value.to_owned(),
        *digest,
        fetched_at,
        lifetime,
    ))
}

/// A usable token from `store`: a fresh one; else, when another process holds the refresh
/// lock, the stored one while still valid, or the holder's new one within about a second.
/// `None` when the caller is to fetch (it took the lock, or the holder is too slow).
async fn shared_token(
    store: &dyn TokenStore,
    corp_id: &str,
    digest: [u8; 32],
    rejected: Option<&str>,
) -> Result<Option<CachedToken>, StoreError> {
    let digest_hex = hex::encode(digest);
    let usable = |token: &SharedToken, now_ms: u64| {
        token.secret_digest == digest_hex
            && Some(token.value.as_str()) != rejected
            && now_ms < token.expires_at_ms
    };
    let now_ms = host_clock();
    let stored = store.load(corp_id).await?;
    if let Some(token) = stored
        .as_ref()
        .filter(|t| usable(t, now_ms) && now_ms < t.refresh_at_ms)
    {
        return Ok(Some(CachedToken::from_shared(token, digest, now_ms)));
    }
    let lock_until = now_ms + u64::try_from(TOKEN_LOCK.as_millis()).unwrap_or(10_000);
    if store.try_lock(corp_id, now_ms, lock_until).await? {
        return Ok(None);
    }
    // Someone else is fetching. A token due for refresh but not expired still works.
    if let Some(token) = stored.as_ref().filter(|t| usable(t, now_ms)) {
        return Ok(Some(CachedToken::from_shared(token, digest, now_ms)));
    }
    for _ in 0..TOKEN_LOCK_POLLS {
        tokio::time::sleep(TOKEN_LOCK_POLL).await;
        let now_ms = host_clock();
        if let Some(token) = store
            .load(corp_id)
            .await?
            .filter(|t| usable(t, now_ms) && now_ms < t.refresh_at_ms)
        {
            return Ok(Some(CachedToken::from_shared(&token, digest, now_ms)));
        }
    }
    Ok(None)
}

/// The cached token if it is due for refresh but not yet expired: better than failing the
/// call because an early refresh hit a busy WeCom.
fn fallback(state: &SlotState, now: Instant, digest: &[u8; 32]) -> Option<String> {
    state
        .token
        .as_ref()
        .filter(|t| t.unexpired(now, digest))
        .map(|t| t.value.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_refreshed_five_minutes_or_a_tenth_of_their_life_early() {
        assert_eq!(
            refresh_margin(Duration::from_secs(7200)),
            Duration::from_secs(300)
        );
        assert_eq!(
            refresh_margin(Duration::from_secs(60)),
            Duration::from_secs(6)
        );
        assert_eq!(refresh_margin(Duration::ZERO), Duration::ZERO);

        let start = Instant::now();
        let digest = [7; 32];
        let token = CachedToken::new("t".into(), digest, start, Duration::from_secs(7200));
        assert!(token.fresh(start + Duration::from_secs(6899), &digest));
        assert!(!token.fresh(start + Duration::from_secs(6900), &digest));
        assert!(token.unexpired(start + Duration::from_secs(7199), &digest));
        assert!(!token.unexpired(start + Duration::from_secs(7200), &digest));
        // A token issued for another secret is never reused.
        assert!(!token.fresh(start, &[8; 32]));

        let forever = CachedToken::new("t".into(), digest, start, Duration::MAX);
        assert!(!forever.unexpired(start + MAX_TOKEN_LIFETIME, &digest));
    }

    #[test]
    fn a_token_without_a_lifetime_is_never_reused() {
        let start = Instant::now();
        let token = CachedToken::new("t".into(), [0; 32], start, Duration::ZERO);
        assert!(!token.fresh(start, &[0; 32]));
    }
}
