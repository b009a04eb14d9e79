//! A client for WeCom's server API: access tokens and the four 「联系我」 contact-way calls
//! qrsync uses (reference `wecom-api.md` §4–§7).
//!
//! The contract, in short:
//!
//! - Every failure comes back as a [`WeComError`], classified by `errcode` (never by `errmsg`)
//!   into the paths of MISSION rule 9; [`WeComError::class`] gives the class to route on.
//! - The client retries exactly one thing by itself: a call refused with 40014 or 42001 (token
//!   invalid or expired) gets one new token and is sent once more. Throttling, transient and
//!   every other failure go straight back to the caller, because a Lambda must not wait out a
//!   back-off (rule 6 and 7): the caller requeues with a delay instead.
//! - Access tokens are cached per corp for the life of the process (so across warm Lambda
//!   invocations), refreshed shortly before they expire, and fetched by one caller at a time
//!   per corp: concurrent callers wait for that one `gettoken` instead of each sending theirs
//!   (WeCom rate-limits `gettoken` and bans IPs that storm it, §5).
//! - With a [`TokenStore`] ([`WeComClient::with_token_store`]), tokens are also shared between
//!   processes (every warm Lambda container of every function): a process whose own cache
//!   has nothing fresh reads the store first, and only the one process holding the store's
//!   short refresh lock calls `gettoken`; the others use the stored token while it is still
//!   valid, or wait up to a second for the new one.
//! - Tokens and secrets never appear in logs, errors or `Debug` output.

use crate::ports::StoreError;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::Mutex;

/// WeCom's production API host, the default for [`WeComClient::new`]'s base URL.
pub const WECOM_API_BASE_URL: &str = "https://qyapi.weixin.qq.com";

/// Longest early-refresh margin: a token is replaced once less than this remains...
const MAX_REFRESH_MARGIN: Duration = Duration::from_secs(5 * 60);
/// ...or less than this fraction of its lifetime, whichever margin is smaller, so short-lived
/// tokens (a sandbox configured with a 60 s lifetime) are still used for most of their life.
const REFRESH_MARGIN_DIVISOR: u32 = 10;
/// errmsg is kept for logs only; WeCom's texts are short, so anything longer is noise.
const MAX_ERRMSG_CHARS: usize = 300;
/// WeCom issues 2-hour tokens; a wild `expires_in` is capped rather than trusted (or
/// overflowing the clock arithmetic).
const MAX_TOKEN_LIFETIME: Duration = Duration::from_secs(24 * 60 * 60);
const REDACTED: &str = "[redacted]";
/// What a whole contact-way call may take beyond one request's timeout: the token from the
/// table, a token lock's short wait, connection set-up.
pub const CALL_MARGIN: Duration = Duration::from_millis(500);
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

fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The credentials of the corp's customer-contact app (§5: its secret, not the corp's
/// address-book secret, or contact-way calls fail with 48002).
#[derive(Clone, PartialEq, Eq)]
pub struct CorpCredentials {
    pub corp_id: String,
    pub corp_secret: String,
}

impl fmt::Debug for CorpCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CorpCredentials")
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

/// What [`WeComClient::add_contact_way`] creates.
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
    pub users: Vec<String>,
    /// Department ids, as listed (not expanded).
    pub party: Vec<u64>,
}

/// How a failed WeCom call should be handled (MISSION rule 9). Serialized in snake_case so it
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
            Self::Rejected => "rejected",
        }
    }
}

impl fmt::Display for FailureClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failed WeCom call, classified by `errcode` (MISSION rule 9). `errmsg`, where kept, is for
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
            Self::Transient { .. } => None,
        }
    }

    fn transient(detail: impl Into<String>) -> Self {
        Self::Transient {
            detail: detail.into(),
        }
    }

    /// Whether this refusal means "get a new token and try once more".
    fn is_stale_token(&self) -> bool {
        matches!(
            self,
            Self::Token {
                errcode: 40014 | 42001
            }
        )
    }
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
    /// Held for the whole fetch: this is what makes concurrent callers wait for one refresh.
    state: Mutex<SlotState>,
}

#[derive(Default)]
struct SlotState {
    token: Option<CachedToken>,
    /// The outcome of the latest attempt if it failed, handed to callers that queued behind
    /// it, so a `gettoken` outage costs one attempt per wave of callers, not one per caller.
    last_failure: Option<WeComError>,
}

/// A WeCom API client. Cheap to share (`Arc` it, or keep one per process): it holds the HTTP
/// connection pool and the per-corp token cache.
pub struct WeComClient {
    http: reqwest::Client,
    base_url: String,
    /// The most one contact-way call may take, its token fetch and one stale-token retry
    /// included: [`WeComClient::call_bound`].
    call_bound: Duration,
    tokens: Mutex<HashMap<String, Arc<TokenSlot>>>,
    shared: Option<Arc<dyn TokenStore>>,
}

impl fmt::Debug for WeComClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WeComClient")
            .field("base_url", &self.base_url)
            .finish_non_exhaustive()
    }
}

impl WeComClient {
    /// A client for the WeCom API at `base_url` ([`WECOM_API_BASE_URL`] in production, the
    /// sandbox's URL in tests). `timeout` bounds each HTTP request as a whole (connect to last
    /// byte); a request that runs out of it is [`WeComError::Transient`].
    ///
    /// # Panics
    ///
    /// If the TLS backend cannot be initialised, as `reqwest::Client::new` does: the process
    /// cannot talk to WeCom at all, so failing at start-up is the useful outcome.
    pub fn new(base_url: impl Into<String>, timeout: Duration) -> Self {
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .user_agent(concat!("qrsync/", env!("CARGO_PKG_VERSION")))
            .build()
            .expect("the TLS backend initialises");
        let base_url = base_url.into().trim_end_matches('/').to_owned();
        Self {
            http,
            base_url,
            call_bound: timeout + CALL_MARGIN,
            tokens: Mutex::new(HashMap::new()),
            shared: None,
        }
    }

    /// Shares tokens with other processes through `store` (see the module's contract).
    #[must_use]
    pub fn with_token_store(mut self, store: Arc<dyn TokenStore>) -> Self {
        self.shared = Some(store);
        self
    }

    /// The most one contact-way call may take as a whole: `timeout` plus [`CALL_MARGIN`].
    /// A call is a token (cached, shared, or fetched), the request, and on a stale token one
    /// more fetch and request, so without this bound it could take four timeouts; callers
    /// that must finish within a lease or an invocation plan on this figure alone.
    pub fn call_bound(&self) -> Duration {
        self.call_bound
    }

    /// The base URL calls go to, without a trailing slash.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// `add_contact_way`: creates a contact way. Not idempotent: a [`WeComError::Transient`]
    /// may hide a code that was created, so callers reconcile rather than blindly re-add.
    pub async fn add_contact_way(
        &self,
        creds: &CorpCredentials,
        way: &NewContactWay,
    ) -> Result<CreatedContactWay, WeComError> {
        let answer = self
            .call(creds, "add_contact_way", &add_contact_way_body(way))
            .await?;
        let config_id = answer
            .get("config_id")
            .and_then(Value::as_str)
            .filter(|id| !id.is_empty())
            .ok_or_else(|| WeComError::transient("add_contact_way answered without config_id"))?;
        Ok(CreatedContactWay {
            config_id: config_id.to_owned(),
            qr_code: answer
                .get("qr_code")
                .and_then(Value::as_str)
                .map(str::to_owned),
        })
    }

    /// `update_contact_way` with exactly `{"config_id", "user"}`: replaces the whole user list
    /// and leaves every other field alone (nothing else is sent, not even as null or empty).
    /// An empty `users` is sent as `[]` and empties the list; deciding not to push an empty
    /// list is the caller's policy. Idempotent, so safe to retry.
    pub async fn update_contact_way_users(
        &self,
        creds: &CorpCredentials,
        config_id: &str,
        users: &[String],
    ) -> Result<(), WeComError> {
        let body = json!({ "config_id": config_id, "user": users });
        self.call(creds, "update_contact_way", &body).await?;
        Ok(())
    }

    /// `get_contact_way`: WeCom's current copy of a contact way.
    pub async fn get_contact_way(
        &self,
        creds: &CorpCredentials,
        config_id: &str,
    ) -> Result<ContactWay, WeComError> {
        let answer = self
            .call(creds, "get_contact_way", &json!({ "config_id": config_id }))
            .await?;
        parse_contact_way(&answer)
            .ok_or_else(|| WeComError::transient("get_contact_way answered an unexpected shape"))
    }

    /// `del_contact_way`. Deleting a code that is already gone is
    /// [`WeComError::CodeGone`], which callers cleaning up may treat as done.
    pub async fn del_contact_way(
        &self,
        creds: &CorpCredentials,
        config_id: &str,
    ) -> Result<(), WeComError> {
        self.call(creds, "del_contact_way", &json!({ "config_id": config_id }))
            .await?;
        Ok(())
    }

    /// One contact-way call with the token policy: a cached (or fetched) token, and on
    /// 40014/42001 one refresh and one more attempt, never a loop. The whole of it ends
    /// within [`WeComClient::call_bound`]; one that does not is transient, like a timeout
    /// (WeCom may or may not have applied it).
    async fn call(
        &self,
        creds: &CorpCredentials,
        api: &'static str,
        body: &Value,
    ) -> Result<Value, WeComError> {
        tokio::time::timeout(self.call_bound, self.call_with_token(creds, api, body))
            .await
            .unwrap_or_else(|_| {
                Err(WeComError::transient(format!(
                    "{api} and its token took longer than {} ms",
                    self.call_bound.as_millis()
                )))
            })
    }

    async fn call_with_token(
        &self,
        creds: &CorpCredentials,
        api: &'static str,
        body: &Value,
    ) -> Result<Value, WeComError> {
        let token = self.token(creds, None).await?;
        match self.post(creds, api, &token, body).await {
            Err(error) if error.is_stale_token() => {
                tracing::info!(
                    corp_id = %creds.corp_id,
                    api,
                    errcode = error.errcode(),
                    "access token refused; fetching a new one and retrying once"
                );
                let token = self.token(creds, Some(&token)).await?;
                self.post(creds, api, &token, body).await
            }
            outcome => outcome,
        }
    }

    async fn post(
        &self,
        creds: &CorpCredentials,
        api: &'static str,
        token: &str,
        body: &Value,
    ) -> Result<Value, WeComError> {
        let url = format!("{}/cgi-bin/externalcontact/{api}", self.base_url);
        let request = self
            .http
            .post(url)
            .query(&[("access_token", token)])
            .json(body);
        answer(request, &[token, &creds.corp_secret]).await
    }

    /// A usable token for `creds`. With `rejected`, that token was just refused by WeCom:
    /// it is dropped unless another caller has already replaced it.
    async fn token(
        &self,
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
        let outcome = self.fetch_token(creds, &digest).await;
        slot.attempts.fetch_add(1, Ordering::AcqRel);
        match outcome {
            Ok(token) => {
                if let Some(store) = &self.shared {
                    if let Err(error) = store
                        .save(&creds.corp_id, &token.to_shared(wall_ms()))
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
        self.tokens
            .lock()
            .await
            .entry(corp_id.to_owned())
            .or_default()
            .clone()
    }

    async fn fetch_token(
        &self,
        creds: &CorpCredentials,
        digest: &[u8; 32],
    ) -> Result<CachedToken, WeComError> {
        let fetched_at = Instant::now();
        let request = self
            .http
            .get(format!("{}/cgi-bin/gettoken", self.base_url))
            .query(&[
                ("corpid", creds.corp_id.as_str()),
                ("corpsecret", creds.corp_secret.as_str()),
            ]);
        let answer = answer(request, &[&creds.corp_secret]).await?;
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
    let now_ms = wall_ms();
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
        let now_ms = wall_ms();
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

fn add_contact_way_body(way: &NewContactWay) -> Value {
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

fn parse_contact_way(answer: &Value) -> Option<ContactWay> {
    let way = answer.get("contact_way")?;
    let strings = |key: &str| -> Option<Vec<String>> {
        match way.get(key) {
            None | Some(Value::Null) => Some(Vec::new()),
            Some(list) => list
                .as_array()?
                .iter()
                .map(|v| v.as_str().map(str::to_owned))
                .collect(),
        }
    };
    let party = match way.get("party") {
        None | Some(Value::Null) => Vec::new(),
        Some(list) => list
            .as_array()?
            .iter()
            .map(Value::as_u64)
            .collect::<Option<_>>()?,
    };
    Some(ContactWay {
        config_id: way.get("config_id")?.as_str()?.to_owned(),
        kind: ContactWayKind::from_code(way.get("type")?.as_i64()?)?,
        state: way
            .get("state")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        users: strings("user")?,
        party,
    })
}

/// Sends `request` and reads WeCom's answer: the JSON body when `errcode` is 0, the
/// classified error otherwise. `secrets` are scrubbed from anything kept in an error.
async fn answer(request: reqwest::RequestBuilder, secrets: &[&str]) -> Result<Value, WeComError> {
    let response = request
        .send()
        .await
        .map_err(|e| transport_error(e, secrets))?;
    let status = response.status();
    let bytes = response
        .bytes()
        .await
        .map_err(|e| transport_error(e, secrets))?;
    if status.is_server_error() {
        // Whatever the body says, a 5xx comes from WeCom's front end having trouble.
        return Err(WeComError::transient(format!("HTTP {status}")));
    }
    // Not WeCom's JSON (a proxy's or gateway's page, a truncated body): we cannot tell what
    // happened, so it is treated like a lost answer rather than a verdict on the request.
    let unreadable = || WeComError::transient(format!("HTTP {status}: not a WeCom answer"));
    let body: Value = serde_json::from_slice(&bytes).map_err(|_| unreadable())?;
    let errcode = body
        .get("errcode")
        .and_then(Value::as_i64)
        .ok_or_else(unreadable)?;
    let errmsg = body
        .get("errmsg")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if let Some(error) = WeComError::from_errcode(errcode, &scrub(errmsg, secrets)) {
        return Err(error);
    }
    if !status.is_success() {
        return Err(unreadable());
    }
    Ok(body)
}

fn transport_error(error: reqwest::Error, secrets: &[&str]) -> WeComError {
    let kind = if error.is_timeout() {
        "timed out"
    } else if error.is_connect() {
        "could not connect"
    } else {
        "transport error"
    };
    // reqwest's message carries the URL, and the URL carries the token or the secret.
    let error = error.without_url();
    let mut detail = format!("{kind}: {error}");
    // The useful part ("connection closed before message completed") is in the causes.
    let mut cause = std::error::Error::source(&error);
    while let Some(inner) = cause {
        detail.push_str(": ");
        detail.push_str(&inner.to_string());
        cause = inner.source();
    }
    WeComError::Transient {
        detail: scrub(&detail, secrets),
    }
}

/// Makes a WeCom text safe to keep: the known `secrets` (the token in use, the corp secret)
/// and any `access_token` / `corpsecret` value are replaced, and the text is truncated.
fn scrub(text: &str, secrets: &[&str]) -> String {
    let mut text = text.to_owned();
    for secret in secrets.iter().filter(|s| !s.is_empty()) {
        text = text.replace(secret, REDACTED);
    }
    for key in ["access_token", "corpsecret"] {
        text = redact_values_after(&text, key);
    }
    match text.char_indices().nth(MAX_ERRMSG_CHARS) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text,
    }
}

/// Replaces the value following each `key` (`key=V`, `key: V`, `"key":"V"`), whatever token
/// WeCom or a proxy might echo, even one we never saw.
fn redact_values_after(text: &str, key: &str) -> String {
    let is_value_char = |c: char| c.is_ascii_alphanumeric() || "-_.~%+/".contains(c);
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(key) {
        let after_key = at + key.len();
        out.push_str(&rest[..after_key]);
        rest = &rest[after_key..];
        let separator = rest
            .find(|c: char| !matches!(c, '=' | ':' | '"' | '\'' | ' '))
            .unwrap_or(rest.len());
        // Only `key=`/`key:` forms: "access_token missing" (41001's text) is no token.
        if !rest[..separator].contains(['=', ':']) {
            continue;
        }
        out.push_str(&rest[..separator]);
        rest = &rest[separator..];
        let value = rest.find(|c: char| !is_value_char(c)).unwrap_or(rest.len());
        if value > 0 {
            out.push_str(REDACTED);
            rest = &rest[value..];
        }
    }
    out.push_str(rest);
    out
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
            // Our own bugs and configuration problems: retrying the same request cannot help.
            (41043, FailureClass::Rejected),
            (40058, FailureClass::Rejected),
            (48002, FailureClass::Rejected),
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
        for class in [
            FailureClass::Throttled,
            FailureClass::Token,
            FailureClass::Transient,
            FailureClass::CodeGone,
            FailureClass::StaffUnusable,
            FailureClass::ListTooLong,
            FailureClass::Rejected,
        ] {
            let json = serde_json::to_string(&class).unwrap();
            assert_eq!(json, format!("\"{}\"", class.as_str()));
            assert_eq!(serde_json::from_str::<FailureClass>(&json).unwrap(), class);
        }
        assert_eq!(FailureClass::CodeGone.to_string(), "code_gone");
    }

    #[test]
    fn credentials_debug_shows_the_corp_but_not_the_secret() {
        let creds = CorpCredentials {
            corp_id: "ww0123456789abcdef".into(),
            corp_secret: "s3cr3t-value".into(),
        };
        let shown = format!("{creds:?} {creds:#?}");
        assert!(shown.contains("ww0123456789abcdef"));
        assert!(!shown.contains("s3cr3t-value"));
        assert!(shown.contains(REDACTED));
    }

    #[test]
    fn scrubbing_removes_known_secrets_and_any_access_token_value() {
        let text = "invalid access_token=AbC-123_x.y, hint: [x], token2 \"access_token\":\"zzz\" \
                    corpsecret: sekret and s3cr3t inline";
        let scrubbed = scrub(text, &["s3cr3t"]);
        for leaked in ["AbC-123_x.y", "zzz", "sekret", "s3cr3t"] {
            assert!(!scrubbed.contains(leaked), "{leaked} in {scrubbed}");
        }
        assert!(scrubbed.starts_with("invalid access_token=[redacted], hint: [x]"));
        assert_eq!(scrub("access_token missing", &[]), "access_token missing");
        assert_eq!(scrub("", &[""]), "");
    }

    #[test]
    fn scrubbing_truncates_long_texts_on_a_character_boundary() {
        let long = "频".repeat(MAX_ERRMSG_CHARS + 5);
        let scrubbed = scrub(&long, &[]);
        assert_eq!(scrubbed.chars().count(), MAX_ERRMSG_CHARS + 3);
        assert!(scrubbed.ends_with("..."));
    }

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
    fn a_contact_way_answer_parses_with_missing_optional_lists() {
        let answer =
            json!({"errcode": 0, "contact_way": {"config_id": "c1", "type": 2, "scene": 2}});
        assert_eq!(
            parse_contact_way(&answer),
            Some(ContactWay {
                config_id: "c1".into(),
                kind: ContactWayKind::Multi,
                state: String::new(),
                users: Vec::new(),
                party: Vec::new(),
            })
        );
        let answer = json!({"contact_way": {"config_id": "c1", "type": 3}});
        assert_eq!(parse_contact_way(&answer), None);
        let answer = json!({"contact_way": {"config_id": "c1", "type": 1, "user": [1]}});
        assert_eq!(parse_contact_way(&answer), None);
    }
}
