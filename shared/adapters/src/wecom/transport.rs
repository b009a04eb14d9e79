//! How a WeCom request reaches WeCom: straight from this process ([`Direct`]), or through the
//! egress relay of the tenant's address ([`Relays`]): a small function that runs only in the
//! subnet whose NAT gateway holds that address, so the address WeCom sees is the one the
//! tenant's budget is charged to (docs/design/egress.md). A function placed in several
//! subnets leaves from whichever one Lambda put its execution environment in; the relay is
//! what makes the address the tenant's.
//!
//! The relay carries a [`WeComRequest`] (one of the calls in [`WeComApi`], nothing else) and
//! answers a [`WeComReply`]; both are plain JSON, so the relay needs no AWS client and holds
//! no permission beyond its logs.

use super::redaction::{scrub, transport_error};
use aws_sdk_lambda::primitives::Blob;
use domain::budget::EgressAddresses;
use domain::ids::TenantId;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::HashMap;
use std::fmt;
use std::time::Duration;

/// The most a request's JSON body may take: WeCom's largest, a list push of 100 user ids, is
/// a few KB.
pub const MOST_REQUEST_BODY_BYTES: usize = 64 * 1024;
/// The most of an answer kept: a `list_contact_way` page of 1,000 config ids is about 60 KB;
/// anything far beyond is not WeCom's JSON and would only grow the relay's reply.
pub const MOST_REPLY_BYTES: usize = 1024 * 1024;
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
        let mut body = Vec::new();
        loop {
            match response.chunk().await {
                Ok(Some(chunk)) if body.len() + chunk.len() <= MOST_REPLY_BYTES => {
                    body.extend_from_slice(&chunk);
                }
                Ok(Some(_)) => {
                    return WeComReply::Unreachable {
                        detail: format!(
                            "HTTP {status}: an answer longer than {MOST_REPLY_BYTES} bytes"
                        ),
                    }
                }
                Ok(None) => break,
                Err(error) => {
                    return WeComReply::Unreachable {
                        detail: transport_error(error, &secrets),
                    }
                }
            }
        }
        WeComReply::Answered {
            status,
            body: String::from_utf8_lossy(&body).into_owned(),
        }
    }
}

/// Sends each tenant's requests through the relay of the address it is charged to.
#[derive(Debug, Clone)]
pub struct Relays {
    lambda: aws_sdk_lambda::Client,
    egress: EgressAddresses,
    /// The relay function of each address.
    functions: HashMap<String, String>,
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
        let functions = egress
            .addresses()
            .iter()
            .cloned()
            .zip(functions.iter().map(|name| name.trim().to_owned()))
            .collect();
        Ok(Self {
            lambda,
            egress,
            functions,
        })
    }

    /// The relay `tenant`'s requests go through.
    pub fn relay_for(&self, tenant: &TenantId) -> &str {
        let address = self.egress.address_for(tenant);
        self.functions.get(address).map_or("", String::as_str)
    }

    /// Invokes `tenant`'s relay with `request` and reads its reply. A relay that cannot be
    /// invoked, fails, or answers something else leaves WeCom unreached, as far as the caller
    /// can tell (whether the relay's call reached WeCom is unknown).
    pub async fn send(&self, tenant: &TenantId, request: &WeComRequest) -> WeComReply {
        let function = self.relay_for(tenant);
        let secrets = request.secrets();
        let unreachable = |detail: String| WeComReply::Unreachable {
            detail: scrub(&detail, &secrets),
        };
        let payload = match serde_json::to_vec(request) {
            Ok(payload) => payload,
            Err(error) => return unreachable(format!("request not encoded: {error}")),
        };
        let invoked = self
            .lambda
            .invoke()
            .function_name(function)
            .payload(Blob::new(payload))
            .send()
            .await;
        let output = match invoked {
            Ok(output) => output,
            Err(error) => {
                return unreachable(format!(
                    "egress relay {function} not invoked: {}",
                    aws_sdk_lambda::error::DisplayErrorContext(&error)
                ))
            }
        };
        if let Some(failure) = output.function_error() {
            return unreachable(format!("egress relay {function} failed: {failure}"));
        }
        let bytes = output.payload().map(Blob::as_ref).unwrap_or_default();
        serde_json::from_slice(bytes).unwrap_or_else(|_| {
            unreachable(format!("egress relay {function} answered something else"))
        })
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
