//! The refresh port on WeCom's contact-way API.

use crate::refresh::ContactWayPusher;
use crate::wecom::api::{CorpCredentials, WeComClient, WeComError};

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
