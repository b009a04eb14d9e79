//! How a WeCom request reaches WeCom: straight from this process ([`Direct`]), or through the
//! egress relay of the tenant's address ([`Relays`]): a small function that runs only in the
//! subnet whose NAT gateway holds that address, so the address WeCom sees is the one the
//! tenant's budget is charged to (docs/design/egress.md). A function placed in several
//! subnets leaves from whichever one Lambda put its execution environment in; the relay is
//! what makes the address the tenant's.
//!
//! One relay invocation carries a [`RelayInvocation`]: the [`WeComRequest`]s of one address
//! made within [`RELAY_LINGER`] of each other (`crate::coalesce`), each one of the calls in
//! [`WeComApi`] and nothing else, and answers a [`RelayAnswer`], a [`WeComReply`] for each.
//! All of it is plain JSON, so the relay needs no AWS client and holds no permission beyond
//! its logs.

use super::redaction::{scrub, transport_error};
use crate::coalesce::Coalescer;
use aws_sdk_lambda::primitives::Blob;
use domain::budget::EgressAddresses;
use domain::ids::TenantId;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// The most a request's JSON body may take: WeCom's largest, a list push of 100 user ids, is
/// a few KB.
pub const MOST_REQUEST_BODY_BYTES: usize = 64 * 1024;
/// The most of an answer kept: a `list_contact_way` page of 1,000 config ids is about 60 KB;
/// anything far beyond is not WeCom's JSON. A relay's whole answer, this many times
/// [`MOST_REQUESTS_PER_INVOCATION`], stays under Lambda's 6 MB for a synchronous answer.
pub const MOST_REPLY_BYTES: usize = 256 * 1024;
/// The most requests one relay invocation carries.
pub const MOST_REQUESTS_PER_INVOCATION: usize = 16;
/// How long a relay's first request waits for others of the same address before the
/// invocation goes: the pushes of one refresh batch start within a few milliseconds.
pub const RELAY_LINGER: Duration = Duration::from_millis(5);
/// The user agent of a call made from the calling process.
const USER_AGENT: &str = concat!("qrsync/", env!("CARGO_PKG_VERSION"));
/// The user agent of a call an egress relay made.
pub const RELAY_USER_AGENT: &str = concat!("qrsync/", env!("CARGO_PKG_VERSION"), " egress-relay");
/// The query keys a request may carry: the access token, or `gettoken`'s corp id and secret.
const QUERY_KEYS: [&str; 3] = ["access_token", "corpid", "corpsecret"];
/// The longest query value taken (WeCom's tokens and secrets are well under it).
const LONGEST_QUERY_VALUE: usize = 512;
/// What a relayed call may take beyond the request itself: the Lambda invoke, and a cold
/// start in a VPC subnet (its network interface is shared, made when the function was).
pub const RELAY_MARGIN: Duration = Duration::from_millis(1_500);

/// The WeCom calls qrsync makes, each with its path under `/cgi-bin/`: the relay forwards
/// these and refuses anything else.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum WeComApi {
    #[serde(rename = "gettoken")]
    GetToken,
    #[serde(rename = "externalcontact/add_contact_way")]
    AddContactWay,
    #[serde(rename = "externalcontact/update_contact_way")]
    UpdateContactWay,
    #[serde(rename = "externalcontact/get_contact_way")]
    GetContactWay,
    #[serde(rename = "externalcontact/list_contact_way")]
    ListContactWay,
    #[serde(rename = "externalcontact/del_contact_way")]
    DelContactWay,
    #[serde(rename = "externalcontact/customer_acquisition/create_link")]
    CreateLink,
    #[serde(rename = "externalcontact/customer_acquisition/delete_link")]
    DeleteLink,
}

impl WeComApi {
    pub const ALL: [Self; 8] = [
        Self::GetToken,
        Self::AddContactWay,
        Self::UpdateContactWay,
        Self::GetContactWay,
        Self::ListContactWay,
        Self::DelContactWay,
        Self::CreateLink,
        Self::DeleteLink,
    ];

    /// The path under `/cgi-bin/`, as the relay's request names it.
    pub fn path(self) -> &'static str {
        match self {
            Self::GetToken => "gettoken",
            Self::AddContactWay => "externalcontact/add_contact_way",
            Self::UpdateContactWay => "externalcontact/update_contact_way",
            Self::GetContactWay => "externalcontact/get_contact_way",
            Self::ListContactWay => "externalcontact/list_contact_way",
            Self::DelContactWay => "externalcontact/del_contact_way",
            Self::CreateLink => "externalcontact/customer_acquisition/create_link",
            Self::DeleteLink => "externalcontact/customer_acquisition/delete_link",
        }
    }

    /// The name logs and errors give it: the path's last part.
    pub fn name(self) -> &'static str {
        let path = self.path();
        path.rsplit('/').next().unwrap_or(path)
    }

    /// `gettoken` is a GET with its arguments in the query; every other call a POST of JSON.
    fn is_get(self) -> bool {
        self == Self::GetToken
    }
}

/// One WeCom request, as the client makes it and the relay carries it. `Debug` hides the
/// query's values (the token, or the corp secret).
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WeComRequest {
    pub api: WeComApi,
    pub query: Vec<(String, String)>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<Value>,
}

impl fmt::Debug for WeComRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let keys: Vec<&str> = self.query.iter().map(|(key, _)| key.as_str()).collect();
        f.debug_struct("WeComRequest")
            .field("api", &self.api)
            .field("query_keys", &keys)
            .finish_non_exhaustive()
    }
}

impl WeComRequest {
    /// Whether the relay may send it: a GET without a body or a POST with one of at most
    /// [`MOST_REQUEST_BODY_BYTES`], and a query of the known keys only, each at most once.
    pub fn check(&self) -> Result<(), String> {
        match (&self.body, self.api.is_get()) {
            (Some(_), true) => return Err(format!("{} takes no body", self.api.name())),
            (None, false) => return Err(format!("{} needs a JSON body", self.api.name())),
            (Some(body), false) => {
                let size = serde_json::to_vec(body).map_or(usize::MAX, |bytes| bytes.len());
                if size > MOST_REQUEST_BODY_BYTES {
                    return Err(format!(
                        "the body of {} is {size} bytes; at most {MOST_REQUEST_BODY_BYTES}",
                        self.api.name()
                    ));
                }
            }
            (None, true) => {}
        }
        if self.query.len() > QUERY_KEYS.len() {
            return Err(format!(
                "{} query arguments; at most {}",
                self.query.len(),
                QUERY_KEYS.len()
            ));
        }
        for (at, (key, value)) in self.query.iter().enumerate() {
            if !QUERY_KEYS.contains(&key.as_str()) {
                let shown: String = key.chars().take(32).collect();
                return Err(format!(
                    "query argument {shown:?} is not one WeCom's calls take"
                ));
            }
            if self.query[..at].iter().any(|(earlier, _)| earlier == key) {
                return Err(format!("query argument {key} given twice"));
            }
            if value.is_empty() || value.len() > LONGEST_QUERY_VALUE {
                return Err(format!(
                    "query argument {key} is empty or longer than {LONGEST_QUERY_VALUE} bytes"
                ));
            }
        }
        Ok(())
    }

    /// The values a text about this request must never show: its query's.
    fn secrets(&self) -> Vec<&str> {
        self.query.iter().map(|(_, value)| value.as_str()).collect()
    }
}

/// What became of a request: WeCom's HTTP answer, WeCom not reached (or no answer read), or
/// the relay's refusal of a request it does not carry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum WeComReply {
    Answered { status: u16, body: String },
    Unreachable { detail: String },
    Refused { reason: String },
}

/// What one relay invocation carries: requests of one address made at about the same moment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RelayInvocation {
    pub requests: Vec<WeComRequest>,
}

/// What a relay answers: a reply for each request, in order; or, for an invocation that is
/// not a [`RelayInvocation`] of 1 to [`MOST_REQUESTS_PER_INVOCATION`] requests, why not.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RelayAnswer {
    pub replies: Vec<WeComReply>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
}

impl RelayAnswer {
    /// The replies to `count` requests: the relay's, each request without one unreachable,
    /// every one refused when the relay refused the invocation.
    fn replies(self, count: usize, function: &str) -> Vec<WeComReply> {
        if let Some(reason) = self.refused {
            return vec![WeComReply::Refused { reason }; count];
        }
        let mut replies = self.replies;
        replies.truncate(count);
        while replies.len() < count {
            replies.push(WeComReply::Unreachable {
                detail: format!("egress relay {function} answered no reply for this request"),
            });
        }
        replies
    }
}

/// Sends requests to WeCom from this process.
#[derive(Debug, Clone)]
pub struct Direct {
    http: reqwest::Client,
    base_url: String,
}

impl Direct {
    /// Requests to `base_url` (WeCom's API host, or the sandbox), each bounded by `timeout`
    /// from connect to last byte.
    ///
    /// # Panics
    ///
    /// If the TLS backend cannot be initialised, as `reqwest::Client::new` does: the process
    /// cannot talk to WeCom at all, so failing at start-up is the useful outcome.
    pub fn new(base_url: impl Into<String>, timeout: Duration) -> Self {
        Self::with_agent(base_url, timeout, USER_AGENT)
    }

    /// The relay's: the same, with a user agent of its own ([`RELAY_USER_AGENT`]), so WeCom's
    /// side (the sandbox's call log, locally) can tell a relayed call.
    pub fn relaying(base_url: impl Into<String>, timeout: Duration) -> Self {
        Self::with_agent(base_url, timeout, RELAY_USER_AGENT)
    }

    fn with_agent(base_url: impl Into<String>, timeout: Duration, agent: &str) -> Self {
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .user_agent(agent)
            .build()
            .expect("the TLS backend initialises");
        Self {
            http,
            base_url: base_url.into().trim_end_matches('/').to_owned(),
        }
    }

    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// Sends `request` (checked first) and reads at most [`MOST_REPLY_BYTES`] of the answer.
    pub async fn send(&self, request: &WeComRequest) -> WeComReply {
        if let Err(reason) = request.check() {
            return WeComReply::Refused { reason };
        }
        let secrets = request.secrets();
        let url = format!("{}/cgi-bin/{}", self.base_url, request.api.path());
        let builder = match &request.body {
            Some(body) => self.http.post(url).json(body),
            None => self.http.get(url),
        }
        .query(&request.query);
        let mut response = match builder.send().await {
            Ok(response) => response,
            Err(error) => {
                return WeComReply::Unreachable {
                    detail: transport_error(error, &secrets),
                }
            }
        };
        let status = response.status().as_u16();
        match read_bounded(&mut response, MOST_REPLY_BYTES).await {
            Ok(body) => WeComReply::Answered {
                status,
                body: String::from_utf8_lossy(&body).into_owned(),
            },
            Err(Bounded::TooLong) => WeComReply::Unreachable {
                detail: format!("HTTP {status}: an answer longer than {MOST_REPLY_BYTES} bytes"),
            },
            Err(Bounded::Failed(error)) => WeComReply::Unreachable {
                detail: transport_error(error, &secrets),
            },
        }
    }
}

/// Why an answer was not read whole.
pub(super) enum Bounded {
    TooLong,
    Failed(reqwest::Error),
}

/// The body of `response`, read chunk by chunk and given up past `most` bytes: an answer
/// from the open internet is never held whole before its size is known.
pub(super) async fn read_bounded(
    response: &mut reqwest::Response,
    most: usize,
) -> Result<Vec<u8>, Bounded> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(Bounded::Failed)? {
        if body.len() + chunk.len() > most {
            return Err(Bounded::TooLong);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// Sends each tenant's requests through the relay of the address it is charged to, several
/// to one invocation when they are made together.
#[derive(Debug, Clone)]
pub struct Relays {
    lambda: aws_sdk_lambda::Client,
    egress: EgressAddresses,
    /// The relay function of each address, with its coalescer once started.
    relays: HashMap<String, Arc<Relay>>,
}

#[derive(Debug)]
struct Relay {
    function: String,
    /// Started on first use, on the runtime the calls run on.
    coalescer: tokio::sync::OnceCell<Coalescer<WeComRequest, WeComReply>>,
}

impl Relays {
    /// The relays `functions` (names or ARNs), one for each of `egress`'s addresses in the
    /// same order (the template's `WeComRelays` and `WeComCallerAddresses` outputs).
    pub fn new(
        lambda: aws_sdk_lambda::Client,
        egress: EgressAddresses,
        functions: &[String],
    ) -> Result<Self, String> {
        if functions.len() != egress.addresses().len() {
            return Err(format!(
                "{} egress relays for {} egress addresses; one relay per address",
                functions.len(),
                egress.addresses().len()
            ));
        }
        if let Some(empty) = functions.iter().position(|name| name.trim().is_empty()) {
            return Err(format!("egress relay {} has no name", empty + 1));
        }
        let relays = egress
            .addresses()
            .iter()
            .cloned()
            .zip(functions.iter().map(|name| {
                Arc::new(Relay {
                    function: name.trim().to_owned(),
                    coalescer: tokio::sync::OnceCell::new(),
                })
            }))
            .collect();
        Ok(Self {
            lambda,
            egress,
            relays,
        })
    }

    /// The relay `tenant`'s requests go through.
    pub fn relay_for(&self, tenant: &TenantId) -> &str {
        self.relays
            .get(self.egress.address_for(tenant))
            .map_or("", |relay| relay.function.as_str())
    }

    /// Sends `request` through `tenant`'s relay, in one invocation with the requests of the
    /// same relay made within [`RELAY_LINGER`]. A relay that cannot be invoked, fails, or
    /// answers something else leaves WeCom unreached, as far as the caller can tell (whether
    /// the relay's call reached WeCom is unknown).
    pub async fn send(&self, tenant: &TenantId, request: &WeComRequest) -> WeComReply {
        let Some(relay) = self.relays.get(self.egress.address_for(tenant)) else {
            return WeComReply::Unreachable {
                detail: "no egress relay for the tenant's address".to_owned(),
            };
        };
        let coalescer = relay
            .coalescer
            .get_or_init(|| async {
                let lambda = self.lambda.clone();
                let function = relay.function.clone();
                Coalescer::start(
                    RELAY_LINGER,
                    MOST_REQUESTS_PER_INVOCATION,
                    move |requests: Vec<WeComRequest>| {
                        invoke(lambda.clone(), function.clone(), requests)
                    },
                )
            })
            .await;
        coalescer
            .call(request.clone())
            .await
            .unwrap_or_else(|| WeComReply::Unreachable {
                detail: format!("egress relay {} gave no reply", relay.function),
            })
    }
}

/// One invocation of `function` with `requests`: a reply for each, in order.
async fn invoke(
    lambda: aws_sdk_lambda::Client,
    function: String,
    requests: Vec<WeComRequest>,
) -> Vec<WeComReply> {
    let count = requests.len();
    let unreached = |detail: String| -> Vec<WeComReply> {
        requests
            .iter()
            .map(|request| WeComReply::Unreachable {
                detail: scrub(&detail, &request.secrets()),
            })
            .collect()
    };
    let invocation = RelayInvocation {
        requests: requests.clone(),
    };
    let payload = match serde_json::to_vec(&invocation) {
        Ok(payload) => payload,
        Err(error) => return unreached(format!("requests not encoded: {error}")),
    };
    let invoked = lambda
        .invoke()
        .function_name(&function)
        .payload(Blob::new(payload))
        .send()
        .await;
    let output = match invoked {
        Ok(output) => output,
        Err(error) => {
            return unreached(format!(
                "egress relay {function} not invoked: {}",
                aws_sdk_lambda::error::DisplayErrorContext(&error)
            ))
        }
    };
    if let Some(failure) = output.function_error() {
        return unreached(format!("egress relay {function} failed: {failure}"));
    }
    let bytes = output.payload().map(Blob::as_ref).unwrap_or_default();
    match serde_json::from_slice::<RelayAnswer>(bytes) {
        Ok(answer) => answer.replies(count, &function),
        Err(_) => unreached(format!("egress relay {function} answered something else")),
    }
}

/// Where a client's requests go.
#[derive(Debug, Clone)]
pub(super) enum Transport {
    Direct(Direct),
    Relayed(Relays),
}

impl Transport {
    pub(super) async fn send(&self, tenant: &TenantId, request: &WeComRequest) -> WeComReply {
        match self {
            Self::Direct(direct) => direct.send(request).await,
            Self::Relayed(relays) => relays.send(tenant, request).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn push() -> WeComRequest {
        WeComRequest {
            api: WeComApi::UpdateContactWay,
            query: vec![("access_token".into(), "tok-123".into())],
            body: Some(json!({ "config_id": "cw-1", "user": ["alice"] })),
        }
    }

    #[test]
    fn every_call_the_client_makes_travels_as_its_path_and_comes_back_the_same() {
        for api in WeComApi::ALL {
            let wire = serde_json::to_value(api).expect("encodes");
            assert_eq!(wire, json!(api.path()), "{api:?}");
            assert_eq!(serde_json::from_value::<WeComApi>(wire).ok(), Some(api));
        }
        assert_eq!(WeComApi::CreateLink.name(), "create_link");
        assert_eq!(WeComApi::GetToken.name(), "gettoken");
    }

    #[test]
    fn a_path_outside_the_list_is_not_a_request_the_relay_reads() {
        for path in [
            "externalcontact/get_follow_user_list",
            "user/get",
            "../../latest/meta-data",
            "externalcontact/add_contact_way?x=1",
        ] {
            let wire = json!({ "api": path, "query": [], "body": {} });
            assert!(
                serde_json::from_value::<WeComRequest>(wire).is_err(),
                "{path} was taken"
            );
        }
        let extra = json!({ "api": "gettoken", "query": [], "url": "http://169.254.169.254/" });
        assert!(serde_json::from_value::<WeComRequest>(extra).is_err());
    }

    #[test]
    fn a_request_the_client_makes_passes_the_check() {
        assert_eq!(push().check(), Ok(()));
        let token = WeComRequest {
            api: WeComApi::GetToken,
            query: vec![
                ("corpid".into(), "ww1".into()),
                ("corpsecret".into(), "s3cret".into()),
            ],
            body: None,
        };
        assert_eq!(token.check(), Ok(()));
    }

    #[test]
    fn a_request_with_the_wrong_shape_or_size_is_refused_with_the_reason() {
        let mut bodiless = push();
        bodiless.body = None;
        assert!(bodiless.check().unwrap_err().contains("needs a JSON body"));

        let mut big = push();
        big.body = Some(json!({ "user": "x".repeat(MOST_REQUEST_BODY_BYTES) }));
        assert!(big.check().unwrap_err().contains("at most 65536"));

        let mut strange = push();
        strange.query.push(("redirect".into(), "elsewhere".into()));
        assert!(strange.check().unwrap_err().contains("\"redirect\""));

        let mut twice = push();
        twice.query.push(("access_token".into(), "other".into()));
        assert!(twice.check().unwrap_err().contains("given twice"));

        let mut long = push();
        long.query[0].1 = "t".repeat(LONGEST_QUERY_VALUE + 1);
        assert!(long.check().unwrap_err().contains("longer than 512"));

        let token_with_body = WeComRequest {
            api: WeComApi::GetToken,
            query: vec![],
            body: Some(json!({})),
        };
        assert!(token_with_body
            .check()
            .unwrap_err()
            .contains("takes no body"));
    }

    #[test]
    fn a_request_shows_its_query_keys_but_never_their_values() {
        let shown = format!("{:?} {:#?}", push(), push());
        assert!(shown.contains("access_token"));
        assert!(!shown.contains("tok-123"), "{shown}");
    }

    #[test]
    fn a_reply_travels_as_json_tagged_with_its_outcome() {
        let answered = WeComReply::Answered {
            status: 200,
            body: r#"{"errcode":0}"#.into(),
        };
        let wire = serde_json::to_value(&answered).expect("encodes");
        assert_eq!(wire["outcome"], "answered");
        assert_eq!(
            serde_json::from_value::<WeComReply>(wire).ok(),
            Some(answered)
        );
    }

    fn lambda() -> aws_sdk_lambda::Client {
        let config = aws_sdk_lambda::Config::builder()
            .behavior_version(aws_sdk_lambda::config::BehaviorVersion::latest())
            .region(aws_sdk_lambda::config::Region::new("us-east-1"))
            .build();
        aws_sdk_lambda::Client::from_conf(config)
    }

    #[test]
    fn each_tenant_goes_through_the_relay_of_the_address_its_budget_is_charged_to() {
        let egress = EgressAddresses::parse("203.0.113.1,203.0.113.2,203.0.113.3").expect("ok");
        let names: Vec<String> = ["relay-1", "relay-2", "relay-3"]
            .map(str::to_owned)
            .to_vec();
        let relays = Relays::new(lambda(), egress.clone(), &names).expect("one per address");
        let mut used = std::collections::BTreeSet::new();
        for n in 0..60 {
            let tenant = TenantId::parse(&format!("t{n}")).expect("valid");
            let address = egress.address_for(&tenant);
            let at = egress
                .addresses()
                .iter()
                .position(|known| known == address)
                .expect("listed");
            assert_eq!(relays.relay_for(&tenant), names[at], "tenant t{n}");
            used.insert(relays.relay_for(&tenant).to_owned());
        }
        assert_eq!(used.len(), 3, "60 tenants reach every relay");
    }

    #[tokio::test]
    async fn an_answer_longer_than_kept_is_unreachable_not_read_whole() {
        let url =
            crate::wecom::test_server::answering_once(200, vec![b' '; MOST_REPLY_BYTES + 1]).await;
        let reply = Direct::new(url, Duration::from_secs(5)).send(&push()).await;
        assert!(
            matches!(&reply, WeComReply::Unreachable { detail } if detail.contains("longer than")),
            "{reply:?}"
        );
    }

    #[tokio::test]
    async fn an_answer_within_the_bound_comes_back_as_it_was() {
        let url =
            crate::wecom::test_server::answering_once(200, br#"{"errcode":0}"#.to_vec()).await;
        let reply = Direct::new(url, Duration::from_secs(5)).send(&push()).await;
        assert_eq!(
            reply,
            WeComReply::Answered {
                status: 200,
                body: r#"{"errcode":0}"#.into()
            }
        );
    }

    #[test]
    fn a_relays_answer_gives_every_request_a_reply_in_order() {
        let answered = |n: u16| WeComReply::Answered {
            status: n,
            body: "{}".into(),
        };
        let whole = RelayAnswer {
            replies: vec![answered(1), answered(2)],
            refused: None,
        };
        assert_eq!(whole.replies(2, "relay-1"), [answered(1), answered(2)]);
        let short = RelayAnswer {
            replies: vec![answered(1)],
            refused: None,
        };
        let replies = short.replies(2, "relay-1");
        assert_eq!(replies[0], answered(1));
        assert!(
            matches!(&replies[1], WeComReply::Unreachable { detail } if detail.contains("no reply"))
        );
        let refused = RelayAnswer {
            replies: vec![],
            refused: Some("17 requests; at most 16".into()),
        };
        assert!(refused
            .replies(3, "relay-1")
            .iter()
            .all(|reply| matches!(reply, WeComReply::Refused { .. })));
    }

    #[test]
    fn relays_must_name_one_function_per_address() {
        let egress = EgressAddresses::parse("203.0.113.1,203.0.113.2").expect("ok");
        let one = ["relay-1".to_owned()];
        assert!(Relays::new(lambda(), egress.clone(), &one)
            .unwrap_err()
            .contains("1 egress relays for 2 egress addresses"));
        let blank = ["relay-1".to_owned(), " ".to_owned()];
        assert!(Relays::new(lambda(), egress, &blank)
            .unwrap_err()
            .contains("relay 2 has no name"));
    }
}
