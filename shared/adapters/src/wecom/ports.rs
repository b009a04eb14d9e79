//! The domain's ports on WeCom's contact-way API: the refresh's push, the sweep's read-back and the admin API's
//! creation and deletion, both on the one client.

use super::WeComClient;
use domain::admin::ContactWays;
use domain::refresh::{AcquisitionLinks, ContactWayPusher};
use domain::sweep::{ContactWayReader, OrphanFinder};
use domain::wecom::acquisition::AcquisitionLink;
use domain::wecom::contact_way::{ContactWay, CorpCredentials, CreatedContactWay, NewContactWay};
use domain::wecom::errors::WeComError;

#[async_trait::async_trait]
impl ContactWayPusher for WeComClient {
    async fn replace_users(
        &self,
        corp: &CorpCredentials,
        config_id: &str,
        users: &[String],
    ) -> Result<(), WeComError> {
        self.update_contact_way_users(corp, config_id, users).await
    }
}

#[async_trait::async_trait]
impl AcquisitionLinks for WeComClient {
    async fn create_link(
        &self,
        corp: &CorpCredentials,
        user: &str,
    ) -> Result<AcquisitionLink, WeComError> {
        self.create_acquisition_link(corp, user).await
    }

    async fn delete_link(&self, corp: &CorpCredentials, link_id: &str) -> Result<(), WeComError> {
        self.delete_acquisition_link(corp, link_id).await
    }
}

#[async_trait::async_trait]
impl ContactWays for WeComClient {
    async fn create(
        &self,
        corp: &CorpCredentials,
        way: &NewContactWay,
    ) -> Result<CreatedContactWay, WeComError> {
        self.add_contact_way(corp, way).await
    }

    async fn delete(&self, corp: &CorpCredentials, config_id: &str) -> Result<(), WeComError> {
        self.del_contact_way(corp, config_id).await
    }
}

#[async_trait::async_trait]
impl ContactWayReader for WeComClient {
    async fn contact_way(
        &self,
        corp: &CorpCredentials,
        config_id: &str,
    ) -> Result<ContactWay, WeComError> {
        self.get_contact_way(corp, config_id).await
    }
}

#[async_trait::async_trait]
impl OrphanFinder for WeComClient {
    async fn created_between(
        &self,
        corp: &CorpCredentials,
        from_secs: u64,
        to_secs: u64,
    ) -> Result<Vec<String>, WeComError> {
        self.list_contact_ways(corp, from_secs, to_secs).await
    }

    async fn delete(&self, corp: &CorpCredentials, config_id: &str) -> Result<(), WeComError> {
        self.del_contact_way(corp, config_id).await
    }
}
