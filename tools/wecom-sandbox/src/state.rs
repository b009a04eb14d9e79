//! Everything the sandbox remembers. One mutex guards it all: the sandbox serves tests and
//! demos, not production traffic, and one lock keeps every answer consistent with the logs.

use crate::clock::Clock;
use crate::config::{SandboxConfig, Settings};
use crate::journal::{Journal, Sequenced, DEFAULT_CAPACITY};
use crate::limits::RateLimiter;
use crate::rng::Rngs;
use domain::wecom::crypto::CallbackCrypto;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use tokio::task::AbortHandle;

/// Where and how a corp's callbacks are delivered.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallbackSettings {
    pub url: String,
    pub token: String,
    pub encoding_aes_key: String,
}

impl CallbackSettings {
    pub fn crypto(&self, corp_id: &str) -> Result<CallbackCrypto, String> {
        CallbackCrypto::new(&self.token, &self.encoding_aes_key, corp_id)
            .map_err(|e| format!("callback settings: {e}"))
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Corp {
    pub corp_id: String,
    pub corp_secret: String,
    /// The contact directory: the userids the API accepts.
    pub users: BTreeSet<String>,
    pub callback: Option<CallbackSettings>,
    /// The app's trusted IPs (企业可信IP): a call from any other address is answered 60020.
    /// `None` trusts every address (an app created before WeCom required the list).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trusted_ips: Option<Vec<String>>,
}

#[derive(Debug, Clone)]
pub(crate) struct IssuedToken {
    pub corp_id: String,
    pub expires_at_ms: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct ContactWay {
    pub corp_id: String,
    pub config_id: String,
    #[serde(rename = "type")]
    pub kind: i64,
    pub scene: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub style: Option<i64>,
    pub remark: String,
    pub skip_verify: bool,
    pub state: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub qr_code: Option<String>,
    pub user: Vec<String>,
    pub party: Vec<i64>,
    pub is_exclusive: bool,
    pub created_at_ms: u64,
    pub updated_at_ms: u64,
    /// How many successful update_contact_way calls it has had.
    pub updates: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct CallRecord {
    pub seq: u64,
    /// When the call arrived.
    pub at_ms: u64,
    pub elapsed_ms: u64,
    pub corp_id: Option<String>,
    pub api: String,
    pub method: String,
    /// The JSON body, or the query parameters for GET; secrets redacted.
    pub request: Value,
    /// `None` when the connection was dropped.
    pub http_status: Option<u16>,
    /// `null` when the connection was dropped or the body was not JSON.
    pub response: Value,
    pub fault: Option<String>,
    /// The caller's `User-Agent` (its first 120 characters): an egress relay's calls say so.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_agent: Option<String>,
}

impl Sequenced for CallRecord {
    fn seq(&self) -> u64 {
        self.seq
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct DeliverySummary {
    pub delivered: bool,
    pub attempts: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct ScanRecord {
    pub seq: u64,
    pub at_ms: u64,
    pub corp_id: String,
    pub config_id: String,
    pub state: String,
    /// The member the customer was routed to; `None` when no one was on the list.
    pub userid: Option<String>,
    pub external_userid: Option<String>,
    pub routed: bool,
    /// Members still on the code's list but gone from the directory; they were skipped.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stale_members: Vec<String>,
    pub duplicate: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub campaign_id: Option<u64>,
    /// Filled in once the callback delivery has finished; `None` while it runs or when the
    /// corp has no callback configured.
    pub delivery: Option<DeliverySummary>,
}

impl Sequenced for ScanRecord {
    fn seq(&self) -> u64 {
        self.seq
    }
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Stats {
    pub api_calls: u64,
    pub faults_injected: u64,
    pub rate_limited: u64,
    pub scans: u64,
    pub unroutable_scans: u64,
    /// Scans whose code still listed members gone from the directory.
    pub scans_with_stale_members: u64,
    /// Callback copies sent (a duplicated callback counts twice).
    pub callbacks: u64,
    pub callbacks_delivered: u64,
    /// Copies that failed every attempt.
    pub failures: u64,
    pub attempts: u64,
    /// Attempts after the first, per copy.
    pub retried_attempts: u64,
    pub duplicates: u64,
}

/// A customer-acquisition link (`crate::links` answers for them).
#[derive(Debug, Clone, Serialize)]
pub struct Link {
    pub corp_id: String,
    pub link_id: String,
    pub link_name: String,
    pub url: String,
    pub user_list: Vec<String>,
    pub skip_verify: bool,
    pub create_time: u64,
}

/// A message the group robot took (`crate::robot` answers for it).
#[derive(Debug, Clone, Serialize)]
pub struct RobotMessage {
    pub seq: u64,
    pub at_ms: u64,
    pub msgtype: String,
    pub content: String,
}

impl Sequenced for RobotMessage {
    fn seq(&self) -> u64 {
        self.seq
    }
}

/// A campaign of scans (`crate::campaigns` runs them).
#[derive(Debug, Clone, Serialize)]
pub struct Campaign {
    pub campaign_id: u64,
    pub corp_id: String,
    pub config_ids: Vec<String>,
    pub per_second: f64,
    pub duplicate_fraction: f64,
    pub total: u64,
    /// Scans started so far.
    pub started: u64,
    /// Scans whose delivery has finished (or that failed before delivering).
    pub done: u64,
    /// Scans that were unroutable, could not be made, or whose callback never got through.
    pub failures: u64,
    pub unroutable: u64,
    pub duplicates: u64,
    pub running: bool,
    pub started_at_ms: u64,
    pub finished_at_ms: Option<u64>,
    #[serde(skip)]
    pub abort: Option<AbortHandle>,
}

pub(crate) struct State {
    pub settings: Settings,
    pub clock: Clock,
    pub rngs: Rngs,
    pub corps: BTreeMap<String, Corp>,
    pub tokens: HashMap<String, IssuedToken>,
    pub contact_ways: BTreeMap<String, ContactWay>,
    /// Customer-acquisition links by link id (`links`).
    pub links: BTreeMap<String, Link>,
    pub limiter: RateLimiter,
    pub calls: Journal<CallRecord>,
    pub scans: Journal<ScanRecord>,
    /// What the group-robot webhook took (`crate::robot`).
    pub robot: Journal<RobotMessage>,
    pub stats: Stats,
    pub campaigns: BTreeMap<u64, Campaign>,
    pub next_campaign: u64,
}

impl State {
    pub fn new(config: &SandboxConfig, seed: u64) -> Self {
        Self {
            settings: Settings::from_config(config, seed),
            clock: Clock::default(),
            rngs: Rngs::new(seed),
            corps: BTreeMap::new(),
            tokens: HashMap::new(),
            contact_ways: BTreeMap::new(),
            links: BTreeMap::new(),
            limiter: RateLimiter::default(),
            calls: Journal::new(DEFAULT_CAPACITY),
            scans: Journal::new(DEFAULT_CAPACITY),
            robot: Journal::new(10_000),
            stats: Stats::default(),
            campaigns: BTreeMap::new(),
            next_campaign: 1,
        }
    }

    pub fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }

    /// The corp a token was issued to, expired or not: rate limits and fault rules apply to
    /// the caller's corp even when its token turns out to be stale.
    pub fn token_owner(&self, token: &str) -> Option<&str> {
        self.tokens.get(token).map(|t| t.corp_id.as_str())
    }
}
