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
use crate::services::wecom::WeCom;
use domain::admin::ContactWays;
use domain::fakes::FakeWeCom;
use domain::refresh::{AcquisitionLinks, ContactWayPusher};
use domain::sweep::{ContactWayReader, OrphanFinder};
use domain::wecom::acquisition::AcquisitionLink;
use domain::wecom::contact_way::{CorpCredentials, CreatedContactWay, NewContactWay};
use domain::wecom::errors::WeComError;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// What WeCom answers over a window, as its `errmsg` reads.
const FREQUENCY_LIMIT_ERRMSG: &str = "api freq out of limit";
/// `list_contact_way`'s page, as the client asks for it (`limit: 1000`).
const LIST_PAGE: usize = 1_000;

/// The address WeCom sees a call come from, which decides whose per-IP window it counts in:
/// read from the template (`Settings::egress`, its NAT gateways: `FixedEgress`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EgressIps {
    /// No VPC (`FixedEgress=off`): the functions' calls leave from AWS's shared pool, so no two
    /// of the platform's corps are seen behind one address. Each corp is given an address of
    /// its own: its per-IP windows (20,000 a minute) are then wider than its per-corp ones
    /// (10,000) and never refuse first, as in the pool.
    Pool,
    /// A VPC with this many NAT addresses (`FixedEgress=on`, `EgressAddresses`): Lambda places
    /// each execution environment in one of the private subnets, so a call leaves from any of
    /// them, whatever its corp (docs/design/egress.md). Every corp's calls share the windows of
    /// the address each call happens to leave from.
    Fixed(u32),
}

impl EgressIps {
    /// The template's egress: its NAT gateways, each with one address (none: the pool).
    pub fn of_nat_gateways(nat_gateways: u32) -> Self {
        match nat_gateways {
            0 => Self::Pool,
            n => Self::Fixed(n),
        }
    }

    /// The address the `draw`-th call of `corp` leaves from (`draw`: a number that looks
    /// random, one per call).
    pub fn address_of(self, corp_id: &str, draw: u64) -> String {
        match self {
            Self::Pool => format!("pool/{corp_id}"),
            Self::Fixed(addresses) => format!("nat-{}", draw % u64::from(addresses.max(1))),
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
}

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
        let ip = self.egress.address_of(&corp.corp_id, draw);
        self.service
            .call(&corp.corp_id, &ip, api)
            .await
            .map_err(|refused| {
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
    async fn users(
        &self,
        corp: &CorpCredentials,
        config_id: &str,
    ) -> Result<Vec<String>, WeComError> {
        self.call(corp, "get_contact_way").await?;
        ContactWayReader::users(&self.contact_ways, corp, config_id).await
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

    async fn state_of(
        &self,
        corp: &CorpCredentials,
        config_id: &str,
    ) -> Result<String, WeComError> {
        self.call(corp, "get_contact_way").await?;
        self.contact_ways.state_of(corp, config_id).await
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
