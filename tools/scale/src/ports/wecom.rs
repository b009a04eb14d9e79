//! The domain's WeCom ports on the simulated WeCom: every call first passes WeCom's rate
//! windows and latency (`services::wecom::WeCom`), then acts on the contact ways
//! `domain::fakes::FakeWeCom` holds. A call over a window is answered 45009 and becomes the
//! `WeComError` the real client (`adapters::wecom`) makes of that errcode
//! (`WeComError::from_errcode`), and nothing changes on WeCom's side.
//!
//! The API named to the windows is the path the real client calls (`update_contact_way`,
//! `get_contact_way`, `customer_acquisition/create_link` ...); `list_contact_way` is one call
//! per page of 1,000, as the client pages it. The client's token calls are left out.

use crate::observe::Trace;
use crate::services::clock;
use crate::services::lambda::{Account, Invoked};
use crate::services::wecom::{Refused, WeCom};
use adapters::coalesce::Coalescer;
use adapters::wecom::{MOST_REQUESTS_PER_INVOCATION, RELAY_LINGER};
use domain::admin::ContactWays;
use domain::budget::EgressAddresses;
use domain::fakes::FakeWeCom;
use domain::refresh::{AcquisitionLinks, ContactWayPusher};
use domain::sweep::{ContactWayReader, OrphanFinder};
use domain::wecom::acquisition::AcquisitionLink;
use domain::wecom::contact_way::{ContactWay, CorpCredentials, CreatedContactWay, NewContactWay};
use domain::wecom::errors::WeComError;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// What WeCom answers over a window, as its `errmsg` reads.
const FREQUENCY_LIMIT_ERRMSG: &str = "api freq out of limit";
/// `list_contact_way`'s page, as the client asks for it (`limit: 1000`).
const LIST_PAGE: usize = 1_000;

/// The address WeCom sees a call come from, which decides whose per-IP window it counts in:
/// read from the template (`Settings::account`: its NAT gateways, `FixedEgress`, and its egress
/// relays).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EgressIps {
    /// No VPC (`FixedEgress=off`): the functions' calls leave from AWS's shared pool, so no two
    /// of the platform's corps are seen behind one address. Each corp is given an address of
    /// its own: its per-IP windows (20,000 a minute) are then wider than its per-corp ones
    /// (10,000) and never refuse first, as in the pool.
    Pool,
    /// NAT addresses with functions placed in all their subnets: Lambda places each execution
    /// environment in one of them, so a call leaves from any address, whatever its tenant.
    /// Every corp's calls share the windows of the address each call happens to leave from.
    Placed(u32),
    /// NAT addresses each with its egress relay (`FixedEgress=on` today): every call of a
    /// tenant leaves from the address its budget is charged to (docs/design/egress.md).
    Relayed(EgressAddresses),
}

impl EgressIps {
    /// The template's egress: its NAT gateways, each with one address (none: the pool), and
    /// whether calls go through a relay per address (`addresses`: the budget's).
    pub fn of_template(nat_gateways: u32, relays: usize, addresses: EgressAddresses) -> Self {
        match (nat_gateways, relays) {
            (0, _) => Self::Pool,
            (n, 0) => Self::Placed(n),
            _ => Self::Relayed(addresses),
        }
    }

    /// The address the `draw`-th call of `corp` leaves from (`draw`: a number that looks
    /// random, one per call).
    pub fn address_of(&self, corp: &CorpCredentials, draw: u64) -> String {
        match self {
            Self::Pool => format!("pool/{}", corp.corp_id),
            Self::Placed(addresses) => format!("nat-{}", draw % u64::from((*addresses).max(1))),
            Self::Relayed(addresses) => addresses.address_for(&corp.tenant).to_owned(),
        }
    }
}

/// Every WeCom port of the domain on the simulated WeCom. Clones share everything.
#[derive(Clone)]
pub struct SimWeCom {
    contact_ways: FakeWeCom,
    service: Arc<WeCom>,
    egress: EgressIps,
    /// Calls made, scrambled into each call's draw of its address (repeatable per seed).
    calls: Arc<AtomicU64>,
    trace: Arc<Trace>,
    /// With egress relays, each call is one invocation of its address's relay function,
    /// holding one of the account's concurrency for as long as WeCom takes.
    relays: Option<Relays>,
}

/// The relay function of each address, invoked on the simulated account.
#[derive(Clone)]
struct Relays {
    account: Arc<Account>,
    addresses: EgressAddresses,
    function_of: Arc<HashMap<String, RelayOf>>,
}

/// One relay: its function, and the coalescer that gathers its calls made together
/// (`adapters::coalesce`, as `adapters::wecom::Relays` does), started on first use.
struct RelayOf {
    function: String,
    coalescer: tokio::sync::OnceCell<Coalescer<RelayedCall, RelayedAnswer>>,
}

/// A call as a relay carries it: the corp, the address WeCom sees, the API.
type RelayedCall = (String, String, String);
/// What the relay's invocation made of it: WeCom's answer, or the invocation's own failure.
type RelayedAnswer = Result<Result<(), Refused>, String>;

impl SimWeCom {
    /// `contact_ways` should forget its histories (`FakeWeCom::forget_history`) for a long run.
    pub fn new(
        contact_ways: FakeWeCom,
        service: Arc<WeCom>,
        egress: EgressIps,
        trace: Arc<Trace>,
    ) -> Self {
        Self {
            contact_ways,
            service,
            egress,
            calls: Arc::new(AtomicU64::new(0)),
            trace,
            relays: None,
        }
    }

    /// Sends each call through the relay function of the address it leaves from (`functions`,
    /// in the order of `addresses`), as `EGRESS_RELAYS` does in a deployment: the calls of one
    /// relay made within `RELAY_LINGER` go in one invocation, at most
    /// `MOST_REQUESTS_PER_INVOCATION`.
    #[must_use]
    pub fn through_relays(
        mut self,
        account: Arc<Account>,
        addresses: &EgressAddresses,
        functions: &[String],
    ) -> Self {
        if functions.is_empty() {
            return self;
        }
        let function_of = addresses
            .addresses()
            .iter()
            .cloned()
            .zip(functions.iter().map(|function| RelayOf {
                function: function.clone(),
                coalescer: tokio::sync::OnceCell::new(),
            }))
            .collect();
        self.relays = Some(Relays {
            account,
            addresses: addresses.clone(),
            function_of: Arc::new(function_of),
        });
        self
    }

    /// One relay invocation of `function` carrying `calls`, each through WeCom's windows at
    /// once; every call fails alike when the invocation does.
    async fn relayed(
        account: Arc<Account>,
        service: Arc<WeCom>,
        function: String,
        calls: Vec<RelayedCall>,
    ) -> Vec<RelayedAnswer> {
        let count = calls.len();
        let invoked = account
            .invoke(&function, |_deadline| async {
                let each = calls
                    .iter()
                    .map(|(corp, ip, api)| service.call(corp, ip, api));
                futures::future::join_all(each).await
            })
            .await;
        let failed = |why: &str| vec![Err(why.to_owned()); count];
        match invoked {
            Ok(Invoked::Done(answers)) => answers.into_iter().map(Ok).collect(),
            Ok(Invoked::Throttled) => failed("egress relay throttled"),
            Ok(Invoked::TimedOut) => failed("egress relay timed out"),
            Err(error) => failed(&error.to_string()),
        }
    }

    /// What WeCom holds for the contact way now: the list a scan of its code is routed to.
    pub fn holds(&self, config_id: &str) -> Vec<String> {
        self.contact_ways.holds(config_id)
    }

    /// The simulated WeCom's windows and counters.
    pub fn service(&self) -> &WeCom {
        &self.service
    }

    pub fn contact_ways(&self) -> &FakeWeCom {
        &self.contact_ways
    }

    /// One call of `api` through WeCom's windows and latency.
    async fn call(&self, corp: &CorpCredentials, api: &str) -> Result<(), WeComError> {
        let draw = domain::fakes::scrambled(self.calls.fetch_add(1, Ordering::Relaxed) + 1);
        let ip = self.egress.address_of(corp, draw);
        let relay = self.relays.as_ref().and_then(|relays| {
            let address = relays.addresses.address_for(&corp.tenant);
            Some((relays, relays.function_of.get(address)?))
        });
        let answer = match relay {
            None => self.service.call(&corp.corp_id, &ip, api).await,
            Some((relays, relay)) => {
                let coalescer = relay
                    .coalescer
                    .get_or_init(|| async {
                        let (account, service, function) = (
                            Arc::clone(&relays.account),
                            Arc::clone(&self.service),
                            relay.function.clone(),
                        );
                        Coalescer::start(
                            RELAY_LINGER,
                            MOST_REQUESTS_PER_INVOCATION,
                            move |calls: Vec<RelayedCall>| {
                                Self::relayed(
                                    Arc::clone(&account),
                                    Arc::clone(&service),
                                    function.clone(),
                                    calls,
                                )
                            },
                        )
                    })
                    .await;
                let call = (corp.corp_id.clone(), ip.clone(), api.to_owned());
                match coalescer.call(call).await {
                    Some(Ok(answer)) => answer,
                    Some(Err(why)) => return Err(WeComError::transient(why)),
                    None => return Err(WeComError::transient("egress relay gave no reply")),
                }
            }
        };
        answer.map_err(|refused| {
            WeComError::from_errcode(refused.errcode, FREQUENCY_LIMIT_ERRMSG).unwrap_or(
                WeComError::Throttled {
                    errcode: refused.errcode,
                },
            )
        })
    }
}

#[async_trait::async_trait]
impl ContactWayPusher for SimWeCom {
    async fn replace_users(
        &self,
        corp: &CorpCredentials,
        config_id: &str,
        users: &[String],
    ) -> Result<(), WeComError> {
        self.call(corp, "update_contact_way").await?;
        self.contact_ways
            .replace_users(corp, config_id, users)
            .await?;
        self.trace.list_landed(config_id, users, clock::now_ms());
        Ok(())
    }
}

#[async_trait::async_trait]
impl AcquisitionLinks for SimWeCom {
    async fn create_link(
        &self,
        corp: &CorpCredentials,
        user: &str,
    ) -> Result<AcquisitionLink, WeComError> {
        self.call(corp, "customer_acquisition/create_link").await?;
        self.contact_ways.create_link(corp, user).await
    }

    async fn delete_link(&self, corp: &CorpCredentials, link_id: &str) -> Result<(), WeComError> {
        self.call(corp, "customer_acquisition/delete_link").await?;
        self.contact_ways.delete_link(corp, link_id).await
    }
}

#[async_trait::async_trait]
impl ContactWayReader for SimWeCom {
    async fn contact_way(
        &self,
        corp: &CorpCredentials,
        config_id: &str,
    ) -> Result<ContactWay, WeComError> {
        self.call(corp, "get_contact_way").await?;
        self.contact_ways.contact_way(corp, config_id).await
    }
}

#[async_trait::async_trait]
impl OrphanFinder for SimWeCom {
    async fn created_between(
        &self,
        corp: &CorpCredentials,
        from_secs: u64,
        to_secs: u64,
    ) -> Result<Vec<String>, WeComError> {
        self.call(corp, "list_contact_way").await?;
        let ids = self
            .contact_ways
            .created_between(corp, from_secs, to_secs)
            .await?;
        // The client asks for the next page while the answer gives a cursor.
        for _ in 1..ids.len().div_ceil(LIST_PAGE) {
            self.call(corp, "list_contact_way").await?;
        }
        Ok(ids)
    }

    async fn delete(&self, corp: &CorpCredentials, config_id: &str) -> Result<(), WeComError> {
        self.call(corp, "del_contact_way").await?;
        OrphanFinder::delete(&self.contact_ways, corp, config_id).await
    }
}

#[async_trait::async_trait]
impl ContactWays for SimWeCom {
    async fn create(
        &self,
        corp: &CorpCredentials,
        way: &NewContactWay,
    ) -> Result<CreatedContactWay, WeComError> {
        self.call(corp, "add_contact_way").await?;
        self.contact_ways.create(corp, way).await
    }

    async fn delete(&self, corp: &CorpCredentials, config_id: &str) -> Result<(), WeComError> {
        self.call(corp, "del_contact_way").await?;
        ContactWays::delete(&self.contact_ways, corp, config_id).await
    }
}

#[cfg(test)]
mod tests;
