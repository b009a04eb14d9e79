//! A client for WeCom's server API: the four 「联系我」 contact-way calls qrsync uses
//! (docs/wecom-api.md §4–§7), over HTTP, with the access-token policy of `tokens`.
//!
//! The contract, in short:
//!
//! - Every failure comes back as a [`WeComError`], classified by `errcode` (never by `errmsg`)
//!   into the paths of docs/rules.md rule 9; [`WeComError::class`] gives the class to route on.
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

use super::answer::answer;
use super::tokens::{TokenStore, Tokens};
use super::transport::{Direct, Relays, Transport, WeComApi, WeComRequest, RELAY_MARGIN};
use domain::budget::EgressAddresses;
use domain::wecom::acquisition::{create_link_body, parse_link, AcquisitionLink};
use domain::wecom::contact_way::{
    add_contact_way_body, parse_contact_way, ContactWay, CorpCredentials, CreatedContactWay,
    NewContactWay,
};
use domain::wecom::errors::WeComError;
use serde_json::{json, Value};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// WeCom's production API host, the default for [`WeComClient::new`]'s base URL.
pub const WECOM_API_BASE_URL: &str = "https://qyapi.weixin.qq.com";
/// What a whole contact-way call may take beyond one request's timeout: the token from the
/// table, a token lock's short wait, connection set-up.
pub const CALL_MARGIN: Duration = Duration::from_millis(500);

/// The most one call may take as a whole with a request `timeout`, through an egress relay
/// or not: what [`WeComClient::call_bound`] answers, for callers that plan before they build one.
pub fn call_bound(timeout: Duration, relayed: bool) -> Duration {
    let direct = timeout + CALL_MARGIN;
    if relayed {
        direct + RELAY_MARGIN
    } else {
        direct
    }
}

/// A WeCom API client. Cheap to share (`Arc` it, or keep one per process): it holds the HTTP
/// connection pool and the per-corp token cache.
pub struct WeComClient {
    transport: Transport,
    /// Each HTTP request's bound.
    timeout: Duration,
    base_url: String,
    /// The most one contact-way call may take, its token fetch and one stale-token retry
    /// included: [`WeComClient::call_bound`].
    call_bound: Duration,
    tokens: Tokens,
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
    /// sandbox's URL in tests), calling from this process. `timeout` bounds each HTTP request
    /// as a whole (connect to last byte); a request that runs out of it is
    /// [`WeComError::Transient`].
    ///
    /// # Panics
    ///
    /// If the TLS backend cannot be initialised, as `reqwest::Client::new` does: the process
    /// cannot talk to WeCom at all, so failing at start-up is the useful outcome.
    pub fn new(base_url: impl Into<String>, timeout: Duration) -> Self {
        let direct = Direct::new(base_url, timeout);
        Self {
            base_url: direct.base_url().to_owned(),
            transport: Transport::Direct(direct),
            timeout,
            call_bound: call_bound(timeout, false),
            tokens: Tokens::default(),
        }
    }

    /// Sends every call through the egress relay of its tenant's address instead of from this
    /// process (`FixedEgress=on`, docs/design/egress.md). Each relay call may take
    /// [`RELAY_MARGIN`] more than a direct one; the call bound grows by that much.
    #[must_use]
    pub fn through_relays(mut self, relays: Relays) -> Self {
        self.transport = Transport::Relayed(relays);
        self.call_bound = call_bound(self.timeout, true);
        self
    }

    /// Shares tokens with other processes through `store` (see the module's contract).
    #[must_use]
    pub fn with_token_store(mut self, store: Arc<dyn TokenStore>) -> Self {
        self.tokens.share_through(store);
        self
    }

    /// Through `relays` (function names, one per address of `egress`) when there are any;
    /// from this process when there are none. What every function calling WeCom does with
    /// `EGRESS_RELAYS` (`crate::env::egress_relays`).
    pub fn routed(
        self,
        aws: &aws_config::SdkConfig,
        egress: &EgressAddresses,
        relays: &[String],
    ) -> Result<Self, String> {
        if relays.is_empty() {
            return Ok(self);
        }
        let lambda = aws_sdk_lambda::Client::new(aws);
        Ok(self.through_relays(Relays::new(lambda, egress.clone(), relays)?))
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
            .call(creds, WeComApi::AddContactWay, &add_contact_way_body(way))
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

    /// `update_contact_way` with exactly `{"config_id", "user", "party": []}`: replaces the
    /// whole user list, takes off any department (qrsync expands departments into users so each
    /// member passes the limits; one added in WeCom's console would route past them), and
    /// leaves every other field alone. An empty `users` is sent as `[]` and empties the list;
    /// deciding not to push an empty list is the caller's policy. Idempotent, so safe to retry.
    pub async fn update_contact_way_users(
        &self,
        creds: &CorpCredentials,
        config_id: &str,
        users: &[String],
    ) -> Result<(), WeComError> {
        let body = json!({ "config_id": config_id, "user": users, "party": [] });
        self.call(creds, WeComApi::UpdateContactWay, &body).await?;
        Ok(())
    }

    /// `get_contact_way`: WeCom's current copy of a contact way.
    pub async fn get_contact_way(
        &self,
        creds: &CorpCredentials,
        config_id: &str,
    ) -> Result<ContactWay, WeComError> {
        let answer = self
            .call(
                creds,
                WeComApi::GetContactWay,
                &json!({ "config_id": config_id }),
            )
            .await?;
        parse_contact_way(&answer)
            .ok_or_else(|| WeComError::transient("get_contact_way answered an unexpected shape"))
    }

    /// `list_contact_way`: the config ids of the corp's contact ways created in
    /// `[from_secs, to_secs]`, every page (at most `LIST_PAGES` of 1,000; WeCom lists only
    /// contact ways made after 2021-07-10, temporary sessions never).
    pub async fn list_contact_ways(
        &self,
        creds: &CorpCredentials,
        from_secs: u64,
        to_secs: u64,
    ) -> Result<Vec<String>, WeComError> {
        const LIST_PAGES: usize = 50;
        let mut ids = Vec::new();
        let mut cursor = String::new();
        for _ in 0..LIST_PAGES {
            let mut body = json!({ "start_time": from_secs, "end_time": to_secs, "limit": 1000 });
            if !cursor.is_empty() {
                body["cursor"] = json!(cursor);
            }
            let answer = self.call(creds, WeComApi::ListContactWay, &body).await?;
            let page = answer
                .get("contact_way")
                .and_then(Value::as_array)
                .ok_or_else(|| WeComError::transient("list_contact_way answered no list"))?;
            ids.extend(
                page.iter()
                    .filter_map(|way| way.get("config_id").and_then(Value::as_str))
                    .map(str::to_owned),
            );
            cursor = answer
                .get("next_cursor")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            if cursor.is_empty() {
                return Ok(ids);
            }
        }
        Err(WeComError::transient(
            "list_contact_way had more pages than one window should",
        ))
    }

    /// `del_contact_way`. Deleting a code that is already gone is
    /// [`WeComError::CodeGone`], which callers cleaning up may treat as done.
    pub async fn del_contact_way(
        &self,
        creds: &CorpCredentials,
        config_id: &str,
    ) -> Result<(), WeComError> {
        self.call(
            creds,
            WeComApi::DelContactWay,
            &json!({ "config_id": config_id }),
        )
        .await?;
        Ok(())
    }

    /// `customer_acquisition/create_link` for exactly `user` (`skip_verify`). Not idempotent:
    /// a transient failure may hide a link that was created (an unused link costs nothing but
    /// a slot of the corp's links).
    pub async fn create_acquisition_link(
        &self,
        creds: &CorpCredentials,
        user: &str,
    ) -> Result<AcquisitionLink, WeComError> {
        let answer = self
            .call(creds, WeComApi::CreateLink, &create_link_body(user))
            .await?;
        parse_link(&answer)
            .ok_or_else(|| WeComError::transient("create_link answered an unexpected shape"))
    }

    /// `customer_acquisition/delete_link`.
    pub async fn delete_acquisition_link(
        &self,
        creds: &CorpCredentials,
        link_id: &str,
    ) -> Result<(), WeComError> {
        self.call(creds, WeComApi::DeleteLink, &json!({ "link_id": link_id }))
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
        api: WeComApi,
        body: &Value,
    ) -> Result<Value, WeComError> {
        tokio::time::timeout(self.call_bound, self.call_with_token(creds, api, body))
            .await
            .unwrap_or_else(|_| {
                Err(WeComError::transient(format!(
                    "{} and its token took longer than {} ms",
                    api.name(),
                    self.call_bound.as_millis()
                )))
            })
    }

    async fn call_with_token(
        &self,
        creds: &CorpCredentials,
        api: WeComApi,
        body: &Value,
    ) -> Result<Value, WeComError> {
        let token = self.token(creds, None).await?;
        match self.post(creds, api, &token, body).await {
            Err(error) if error.is_stale_token() => {
                tracing::info!(
                    corp_id = %creds.corp_id,
                    api = api.name(),
                    errcode = error.errcode(),
                    "access token refused; fetching a new one and retrying once"
                );
                let token = self.token(creds, Some(&token)).await?;
                self.post(creds, api, &token, body).await
            }
            outcome => outcome,
        }
    }

    /// A token for `creds`: cached, shared, or fetched through this client (`tokens`).
    async fn token(
        &self,
        creds: &CorpCredentials,
        rejected: Option<&str>,
    ) -> Result<String, WeComError> {
        self.tokens.token(&self.transport, creds, rejected).await
    }

    async fn post(
        &self,
        creds: &CorpCredentials,
        api: WeComApi,
        token: &str,
        body: &Value,
    ) -> Result<Value, WeComError> {
        let request = WeComRequest {
            api,
            query: vec![("access_token".to_owned(), token.to_owned())],
            body: Some(body.clone()),
        };
        let reply = self.transport.send(&creds.tenant, &request).await;
        answer(reply, &[token, &creds.corp_secret])
    }
}
