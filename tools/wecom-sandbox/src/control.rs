//! The `/_sandbox` admin API: set up corps, steer configuration, faults and the clock, read
//! the logs, and make customers scan codes.

use crate::app::SharedApp;
use crate::campaigns::{self, CampaignRequest};
use crate::clock::ClockPatch;
use crate::config::ConfigPatch;
use crate::delivery::{self, Target};
use crate::rng::Rngs;
use crate::scans::{self, ScanError, ScanRequest};
use crate::state::{CallbackSettings, Corp, State};
use crate::tokens;
use axum::body::Bytes;
use axum::extract::{Path, Query, State as AxumState};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use domain::wecom::callback::write_flat_xml;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::BTreeSet;

pub(crate) fn routes() -> Router<SharedApp> {
    Router::new()
        .route("/_sandbox/health", get(health))
        .route("/_sandbox/config", get(get_config).put(put_config))
        .route("/_sandbox/clock", get(get_clock).put(put_clock))
        .route("/_sandbox/corps", get(list_corps))
        .route(
            "/_sandbox/corps/{corp_id}",
            get(get_corp).put(put_corp).delete(delete_corp),
        )
        .route("/_sandbox/corps/{corp_id}/secret", put(put_secret))
        .route(
            "/_sandbox/corps/{corp_id}/trusted-ips",
            put(put_trusted_ips),
        )
        .route(
            "/_sandbox/corps/{corp_id}/users/{userid}",
            put(put_user).delete(delete_user),
        )
        .route("/_sandbox/tokens/expire", post(expire_tokens))
        .route("/_sandbox/calls", get(list_calls).delete(clear_calls))
        .route("/_sandbox/limits", get(limits))
        .route("/_sandbox/contact-ways", get(list_contact_ways))
        .route(
            "/_sandbox/contact-ways/{config_id}",
            get(get_contact_way).put(change_contact_way),
        )
        .route("/_sandbox/reset", post(reset))
        .route("/_sandbox/scan", post(scan))
        .route("/_sandbox/open-link", post(open_link))
        .route("/_sandbox/links", get(list_links))
        .route("/_sandbox/scans", get(list_scans))
        .route("/_sandbox/callbacks", post(send_callback))
        .route("/_sandbox/stats", get(stats))
        .route(
            "/_sandbox/campaigns",
            get(list_campaigns).post(start_campaign),
        )
        .route(
            "/_sandbox/campaigns/{campaign_id}",
            get(get_campaign).delete(stop_campaign),
        )
}

/// Control errors are plain JSON `{"error": ...}` with a meaningful HTTP status, unlike the
/// WeCom API's errcodes, so that a mistake in test setup is never mistaken for WeCom's answer.
#[derive(Debug)]
pub(crate) struct ControlError {
    status: StatusCode,
    body: Value,
}

impl ControlError {
    fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            body: json!({ "error": message.into() }),
        }
    }

    fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }

    fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, message)
    }
}

impl IntoResponse for ControlError {
    fn into_response(self) -> Response {
        (self.status, Json(self.body)).into_response()
    }
}

type Reply = Result<Response, ControlError>;

fn reply(status: StatusCode, body: Value) -> Reply {
    Ok((status, Json(body)).into_response())
}

fn to_json(value: &impl serde::Serialize) -> Value {
    serde_json::to_value(value).unwrap_or_else(|e| json!({ "error": e.to_string() }))
}

/// Parses a JSON body with a 400 that says what is wrong; an empty body reads as `{}`.
fn parse<T: DeserializeOwned>(body: &Bytes) -> Result<T, ControlError> {
    let text: &[u8] = if body.iter().all(u8::is_ascii_whitespace) {
        b"{}"
    } else {
        body
    };
    serde_json::from_slice(text).map_err(|e| ControlError::bad_request(format!("body: {e}")))
}

/// A filter parameter; `?corp_id=` (empty) means no filter, as in a form left blank.
fn given(param: &Option<String>) -> Option<&str> {
    param.as_deref().filter(|v| !v.is_empty())
}

async fn health() -> Reply {
    reply(StatusCode::OK, json!({ "status": "ok" }))
}

async fn get_config(AxumState(app): AxumState<SharedApp>) -> Reply {
    reply(StatusCode::OK, to_json(&app.lock().settings))
}

async fn put_config(AxumState(app): AxumState<SharedApp>, body: Bytes) -> Reply {
    let patch: ConfigPatch = parse(&body)?;
    patch.validate().map_err(ControlError::bad_request)?;
    let mut state = app.lock();
    let settings = &mut state.settings;
    if let Some(v) = patch.token_lifetime_secs {
        settings.token_lifetime_secs = v;
    }
    if let Some(v) = patch.limit_per_minute {
        settings.limit_per_minute = v;
    }
    if let Some(v) = patch.limit_per_hour {
        settings.limit_per_hour = v;
    }
    if let Some(v) = patch.limit_per_ip_per_minute {
        settings.limit_per_ip_per_minute = v;
    }
    if let Some(v) = patch.limit_per_ip_per_hour {
        settings.limit_per_ip_per_hour = v;
    }
    if let Some(v) = patch.retry_pause_ms {
        settings.retry_pause_ms = v;
    }
    if let Some(v) = patch.delivery_timeout_ms {
        settings.delivery_timeout_ms = v;
    }
    if let Some(v) = patch.delivery_attempts {
        settings.delivery_attempts = v;
    }
    if let Some(mut faults) = patch.faults {
        for rule in &mut faults {
            rule.matched = 0;
            rule.fired = 0;
        }
        settings.faults = faults;
    }
    if let Some(seed) = patch.seed {
        settings.seed = seed;
        state.rngs = Rngs::new(seed);
    }
    reply(StatusCode::OK, to_json(&state.settings))
}

async fn get_clock(AxumState(app): AxumState<SharedApp>) -> Reply {
    let state = app.lock();
    let mut body = to_json(&state.clock);
    body["now_ms"] = json!(state.clock.now_ms());
    reply(StatusCode::OK, body)
}

async fn put_clock(AxumState(app): AxumState<SharedApp>, body: Bytes) -> Reply {
    let patch: ClockPatch = parse(&body)?;
    let mut state = app.lock();
    state.clock.apply(&patch);
    let mut body = to_json(&state.clock);
    body["now_ms"] = json!(state.clock.now_ms());
    reply(StatusCode::OK, body)
}

async fn list_corps(AxumState(app): AxumState<SharedApp>) -> Reply {
    let state = app.lock();
    let corps: Vec<&Corp> = state.corps.values().collect();
    reply(StatusCode::OK, json!({ "corps": corps }))
}

fn corp_view(state: &State, corp_id: &str) -> Result<Value, ControlError> {
    state
        .corps
        .get(corp_id)
        .map(to_json)
        .ok_or_else(|| ControlError::not_found(format!("unknown corp {corp_id}")))
}

async fn get_corp(AxumState(app): AxumState<SharedApp>, Path(corp_id): Path<String>) -> Reply {
    reply(StatusCode::OK, corp_view(&app.lock(), &corp_id)?)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CorpBody {
    corp_secret: String,
    #[serde(default)]
    users: Vec<String>,
    #[serde(default)]
    callback: Option<CallbackSettings>,
    /// The app's trusted IPs; absent trusts every address.
    #[serde(default)]
    trusted_ips: Option<Vec<String>>,
}

fn check_callback(corp_id: &str, callback: &CallbackSettings) -> Result<(), ControlError> {
    callback
        .crypto(corp_id)
        .map_err(ControlError::bad_request)?;
    let url = reqwest::Url::parse(&callback.url)
        .map_err(|e| ControlError::bad_request(format!("callback.url: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(ControlError::bad_request(
            "callback.url must be http or https",
        ));
    }
    Ok(())
}

/// Replacing a corp keeps its contact ways and tokens: only its secret, directory and
/// callback change.
async fn put_corp(
    AxumState(app): AxumState<SharedApp>,
    Path(corp_id): Path<String>,
    body: Bytes,
) -> Reply {
    let body: CorpBody = parse(&body)?;
    if corp_id.is_empty() || body.corp_secret.is_empty() {
        return Err(ControlError::bad_request(
            "corp_id and corp_secret must not be empty",
        ));
    }
    if let Some(callback) = &body.callback {
        check_callback(&corp_id, callback)?;
    }
    if body.users.iter().any(String::is_empty) {
        return Err(ControlError::bad_request("userids must not be empty"));
    }
    let mut state = app.lock();
    let corp = Corp {
        corp_id: corp_id.clone(),
        corp_secret: body.corp_secret,
        users: body.users.into_iter().collect::<BTreeSet<_>>(),
        callback: body.callback,
        trusted_ips: body.trusted_ips,
    };
    let created = state.corps.insert(corp_id.clone(), corp).is_none();
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    reply(status, corp_view(&state, &corp_id)?)
}

/// The longest secret the sandbox takes (WeCom's are 43 characters).
const MOST_SECRET_BYTES: usize = 256;
/// The most trusted IPs one corp lists here.
const MOST_TRUSTED_IPS: usize = 120;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SecretBody {
    corp_secret: String,
}

/// Resets the app's secret, as an administrator does in WeCom's console: `gettoken` with the
/// old one is answered 40001 from now on (tokens already issued live out their lifetime;
/// `POST /_sandbox/tokens/expire` ends them).
async fn put_secret(
    AxumState(app): AxumState<SharedApp>,
    Path(corp_id): Path<String>,
    body: Bytes,
) -> Reply {
    let body: SecretBody = parse(&body)?;
    if body.corp_secret.is_empty() || body.corp_secret.len() > MOST_SECRET_BYTES {
        return Err(ControlError::bad_request(format!(
            "corp_secret must be 1 to {MOST_SECRET_BYTES} bytes"
        )));
    }
    let mut state = app.lock();
    let corp = state
        .corps
        .get_mut(&corp_id)
        .ok_or_else(|| ControlError::not_found(format!("no corp {corp_id}")))?;
    corp.corp_secret = body.corp_secret;
    reply(StatusCode::OK, corp_view(&state, &corp_id)?)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TrustedIpsBody {
    /// `null` trusts every address again.
    trusted_ips: Option<Vec<String>>,
}

/// Sets the app's trusted IPs (企业可信IP): every API but `gettoken` answers 60020 to a caller
/// whose address is not listed.
async fn put_trusted_ips(
    AxumState(app): AxumState<SharedApp>,
    Path(corp_id): Path<String>,
    body: Bytes,
) -> Reply {
    let body: TrustedIpsBody = parse(&body)?;
    if body
        .trusted_ips
        .as_ref()
        .is_some_and(|ips| ips.len() > MOST_TRUSTED_IPS)
    {
        return Err(ControlError::bad_request(format!(
            "at most {MOST_TRUSTED_IPS} trusted_ips"
        )));
    }
    if body
        .trusted_ips
        .iter()
        .flatten()
        .any(|ip| ip.parse::<std::net::IpAddr>().is_err())
    {
        return Err(ControlError::bad_request(
            "trusted_ips must be IP addresses",
        ));
    }
    let mut state = app.lock();
    let corp = state
        .corps
        .get_mut(&corp_id)
        .ok_or_else(|| ControlError::not_found(format!("no corp {corp_id}")))?;
    corp.trusted_ips = body.trusted_ips;
    reply(StatusCode::OK, corp_view(&state, &corp_id)?)
}

async fn delete_corp(AxumState(app): AxumState<SharedApp>, Path(corp_id): Path<String>) -> Reply {
    let mut state = app.lock();
    if state.corps.remove(&corp_id).is_none() {
        return Err(ControlError::not_found(format!("unknown corp {corp_id}")));
    }
    state.contact_ways.retain(|_, w| w.corp_id != corp_id);
    state.tokens.retain(|_, t| t.corp_id != corp_id);
    reply(StatusCode::OK, json!({ "deleted": corp_id }))
}

async fn put_user(
    AxumState(app): AxumState<SharedApp>,
    Path((corp_id, userid)): Path<(String, String)>,
) -> Reply {
    let mut state = app.lock();
    let corp = state
        .corps
        .get_mut(&corp_id)
        .ok_or_else(|| ControlError::not_found(format!("unknown corp {corp_id}")))?;
    let added = corp.users.insert(userid.clone());
    reply(
        StatusCode::OK,
        json!({ "corp_id": corp_id, "userid": userid, "added": added, "users": corp.users.len() }),
    )
}

/// A resignation: the API refuses the userid from now on (60111), but contact ways that list
/// it keep it until they are updated, as WeCom is not known to prune them.
async fn delete_user(
    AxumState(app): AxumState<SharedApp>,
    Path((corp_id, userid)): Path<(String, String)>,
) -> Reply {
    let mut state = app.lock();
    let corp = state
        .corps
        .get_mut(&corp_id)
        .ok_or_else(|| ControlError::not_found(format!("unknown corp {corp_id}")))?;
    let removed = corp.users.remove(&userid);
    let users = corp.users.len();
    let still_listed_on: Vec<&str> = state
        .contact_ways
        .values()
        .filter(|w| w.corp_id == corp_id && w.user.contains(&userid))
        .map(|w| w.config_id.as_str())
        .collect();
    reply(
        StatusCode::OK,
        json!({
            "corp_id": corp_id,
            "userid": userid,
            "removed": removed,
            "users": users,
            "still_listed_on": still_listed_on,
        }),
    )
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct CorpFilter {
    #[serde(default)]
    corp_id: Option<String>,
}

async fn expire_tokens(
    AxumState(app): AxumState<SharedApp>,
    Query(query): Query<CorpFilter>,
    body: Bytes,
) -> Reply {
    let body: CorpFilter = parse(&body)?;
    let corp_id = given(&body.corp_id).or(given(&query.corp_id));
    let expired = tokens::expire(&mut app.lock(), corp_id);
    reply(StatusCode::OK, json!({ "expired": expired }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CallsQuery {
    #[serde(default)]
    since: u64,
    #[serde(default)]
    corp_id: Option<String>,
    #[serde(default)]
    api: Option<String>,
}

/// `next` is the newest seq considered, filtered out or not: pass it as `since` to poll.
async fn list_calls(
    AxumState(app): AxumState<SharedApp>,
    Query(query): Query<CallsQuery>,
) -> Reply {
    let state = app.lock();
    let calls = state.calls.after(query.since, |c| {
        query
            .corp_id
            .as_ref()
            .filter(|corp| !corp.is_empty())
            .is_none_or(|corp| c.corp_id.as_ref() == Some(corp))
            && given(&query.api).is_none_or(|api| c.api == api)
    });
    let next = state.calls.last_seq().max(query.since);
    reply(StatusCode::OK, json!({ "calls": calls, "next": next }))
}

async fn clear_calls(AxumState(app): AxumState<SharedApp>) -> Reply {
    app.lock().calls.clear();
    reply(StatusCode::OK, json!({ "cleared": true }))
}

async fn limits(AxumState(app): AxumState<SharedApp>) -> Reply {
    let state = app.lock();
    reply(
        StatusCode::OK,
        json!({
            "limit_per_minute": state.settings.limit_per_minute,
            "limit_per_hour": state.settings.limit_per_hour,
            "limit_per_ip_per_minute": state.settings.limit_per_ip_per_minute,
            "limit_per_ip_per_hour": state.settings.limit_per_ip_per_hour,
            "windows": state.limiter.snapshot(),
        }),
    )
}

async fn list_contact_ways(
    AxumState(app): AxumState<SharedApp>,
    Query(query): Query<CorpFilter>,
) -> Reply {
    let state = app.lock();
    let ways: Vec<Value> = state
        .contact_ways
        .values()
        .filter(|w| given(&query.corp_id).is_none_or(|c| w.corp_id == c))
        .map(to_json)
        .collect();
    reply(StatusCode::OK, json!({ "contact_ways": ways }))
}

async fn get_contact_way(
    AxumState(app): AxumState<SharedApp>,
    Path(config_id): Path<String>,
) -> Reply {
    let state = app.lock();
    let way = state
        .contact_ways
        .get(&config_id)
        .ok_or_else(|| ControlError::not_found(format!("unknown config_id {config_id}")))?;
    reply(StatusCode::OK, to_json(way))
}

/// What an operator changes on a contact way in WeCom's own admin console, behind qrsync's
/// back: the users it routes to (`{"user": [...]}`). Not logged as an API call.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ContactWayChange {
    user: Vec<String>,
}

async fn change_contact_way(
    AxumState(app): AxumState<SharedApp>,
    Path(config_id): Path<String>,
    body: Bytes,
) -> Reply {
    let change: ContactWayChange = parse(&body)?;
    let mut state = app.lock();
    let way = state
        .contact_ways
        .get_mut(&config_id)
        .ok_or_else(|| ControlError::not_found(format!("unknown config_id {config_id}")))?;
    way.user = change.user;
    reply(StatusCode::OK, to_json(way))
}

/// Back to the state at start: no corps, tokens, codes, logs or campaigns; the startup
/// settings and seed; the real clock.
async fn reset(AxumState(app): AxumState<SharedApp>) -> Reply {
    app.stop_campaigns();
    *app.lock() = State::new(&app.startup, app.startup_seed);
    reply(StatusCode::OK, json!({ "reset": true }))
}

fn scan_error(error: ScanError) -> ControlError {
    let message = error.to_string();
    match error {
        ScanError::UnknownCorp(_) | ScanError::UnknownConfig(_) => ControlError::not_found(message),
        ScanError::BadRequest(_) => ControlError::bad_request(message),
        ScanError::Unroutable(scan) => ControlError {
            status: StatusCode::CONFLICT,
            body: json!({ "error": message, "scan": scan }),
        },
    }
}

async fn scan(AxumState(app): AxumState<SharedApp>, body: Bytes) -> Reply {
    let request: ScanRequest = parse(&body)?;
    let outcome = scans::scan(&app, &request, None)
        .await
        .map_err(scan_error)?;
    reply(StatusCode::OK, to_json(&outcome))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScansQuery {
    #[serde(default)]
    since: u64,
    #[serde(default)]
    corp_id: Option<String>,
    #[serde(default)]
    config_id: Option<String>,
}

/// A visitor opens a customer-acquisition link URL (`{"url": ...}`, with the platform's
/// `customer_channel`): answered like a scan.
async fn open_link(AxumState(app): AxumState<SharedApp>, body: Bytes) -> Reply {
    let request: scans::OpenLinkRequest = parse(&body)?;
    let outcome = scans::open_link(&app, &request).await.map_err(scan_error)?;
    reply(StatusCode::OK, to_json(&outcome))
}

/// Every acquisition link, as created (`{"links": [...]}`).
async fn list_links(AxumState(app): AxumState<SharedApp>) -> Reply {
    let state = app.lock();
    let links: Vec<&crate::state::Link> = state.links.values().collect();
    reply(StatusCode::OK, json!({ "links": links }))
}

async fn list_scans(
    AxumState(app): AxumState<SharedApp>,
    Query(query): Query<ScansQuery>,
) -> Reply {
    let state = app.lock();
    let scans = state.scans.after(query.since, |s| {
        given(&query.corp_id).is_none_or(|c| s.corp_id == c)
            && given(&query.config_id).is_none_or(|c| s.config_id == c)
    });
    let next = state.scans.last_seq().max(query.since);
    reply(StatusCode::OK, json!({ "scans": scans, "next": next }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CallbackBody {
    corp_id: String,
    #[serde(default)]
    fields: Option<Vec<(String, String)>>,
    #[serde(default)]
    plaintext: Option<String>,
    #[serde(default)]
    duplicate: bool,
}

/// Encrypts and delivers any event, e.g. `change_contact` / `delete_user`. The fields are
/// written as given, in order; nothing is added.
async fn send_callback(AxumState(app): AxumState<SharedApp>, body: Bytes) -> Reply {
    let body: CallbackBody = parse(&body)?;
    let plaintext = match (body.fields, body.plaintext) {
        (Some(fields), None) => {
            let pairs: Vec<(&str, &str)> = fields
                .iter()
                .map(|(name, value)| (name.as_str(), value.as_str()))
                .collect();
            write_flat_xml(&pairs)
        }
        (None, Some(plaintext)) => plaintext,
        _ => {
            return Err(ControlError::bad_request(
                "give exactly one of fields and plaintext",
            ))
        }
    };
    let target = {
        let state = app.lock();
        let corp = state
            .corps
            .get(&body.corp_id)
            .ok_or_else(|| ControlError::not_found(format!("unknown corp {}", body.corp_id)))?;
        let callback = corp.callback.as_ref().ok_or_else(|| {
            ControlError::new(
                StatusCode::CONFLICT,
                format!("corp {} has no callback configured", body.corp_id),
            )
        })?;
        Target {
            corp_id: corp.corp_id.clone(),
            url: callback.url.clone(),
            crypto: callback
                .crypto(&corp.corp_id)
                .map_err(ControlError::bad_request)?,
        }
    };
    let report = delivery::deliver(&app, &target, &plaintext, body.duplicate).await;
    let mut body = to_json(&report);
    body["plaintext"] = json!(plaintext);
    reply(StatusCode::OK, body)
}

async fn stats(AxumState(app): AxumState<SharedApp>) -> Reply {
    reply(StatusCode::OK, to_json(&app.lock().stats))
}

async fn start_campaign(AxumState(app): AxumState<SharedApp>, body: Bytes) -> Reply {
    let request: CampaignRequest = parse(&body)?;
    request.validate().map_err(ControlError::bad_request)?;
    {
        let state = app.lock();
        if !state.corps.contains_key(&request.corp_id) {
            return Err(ControlError::not_found(format!(
                "unknown corp {}",
                request.corp_id
            )));
        }
        if let Some(unknown) = request.config_ids.iter().find(|id| {
            state
                .contact_ways
                .get(*id)
                .is_none_or(|w| w.corp_id != request.corp_id)
        }) {
            return Err(ControlError::not_found(format!(
                "unknown config_id {unknown} for corp {}",
                request.corp_id
            )));
        }
    }
    let campaign_id = campaigns::start(&app, request);
    reply(StatusCode::ACCEPTED, json!({ "campaign_id": campaign_id }))
}

async fn list_campaigns(AxumState(app): AxumState<SharedApp>) -> Reply {
    let state = app.lock();
    let campaigns: Vec<Value> = state.campaigns.values().map(to_json).collect();
    reply(StatusCode::OK, json!({ "campaigns": campaigns }))
}

async fn get_campaign(AxumState(app): AxumState<SharedApp>, Path(campaign_id): Path<u64>) -> Reply {
    let state = app.lock();
    let campaign = state
        .campaigns
        .get(&campaign_id)
        .ok_or_else(|| ControlError::not_found(format!("unknown campaign {campaign_id}")))?;
    reply(StatusCode::OK, to_json(campaign))
}

async fn stop_campaign(
    AxumState(app): AxumState<SharedApp>,
    Path(campaign_id): Path<u64>,
) -> Reply {
    let campaign = campaigns::stop(&app, campaign_id)
        .ok_or_else(|| ControlError::not_found(format!("unknown campaign {campaign_id}")))?;
    reply(StatusCode::OK, to_json(&campaign))
}
