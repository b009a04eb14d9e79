//! DynamoDB adapters. One table holds every item; `keys` is the only place that knows how
//! items are keyed.

use crate::ports::{StoreError, TenantDirectory};
use crate::tenants::{CallbackSettings, TenantId};
use aws_sdk_dynamodb::types::AttributeValue;
use std::collections::HashMap;

pub mod keys {
    use crate::tenants::TenantId;

    pub const PK: &str = "pk";
    pub const SK: &str = "sk";

    pub fn tenant(tenant: &TenantId) -> String {
        format!("TENANT#{tenant}")
    }

    pub const TENANT_PROFILE: &str = "PROFILE";
}

/// A tenant's stored profile: the WeCom corp and the secrets qrsync holds for it.
#[derive(Clone, PartialEq, Eq)]
pub struct TenantProfile {
    pub corp_id: String,
    pub callback_token: String,
    pub encoding_aes_key: String,
    pub corp_secret: String,
}

impl std::fmt::Debug for TenantProfile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TenantProfile")
            .field("corp_id", &self.corp_id)
            .finish_non_exhaustive()
    }
}

#[derive(Clone)]
pub struct DynamoTenantDirectory {
    client: aws_sdk_dynamodb::Client,
    table: String,
}

impl DynamoTenantDirectory {
    pub fn new(client: aws_sdk_dynamodb::Client, table: String) -> Self {
        Self { client, table }
    }

    /// Creates or replaces a tenant's profile.
    pub async fn put_profile(
        &self,
        tenant: &TenantId,
        profile: &TenantProfile,
    ) -> Result<(), StoreError> {
        let item = HashMap::from([
            (keys::PK.to_owned(), AttributeValue::S(keys::tenant(tenant))),
            (
                keys::SK.to_owned(),
                AttributeValue::S(keys::TENANT_PROFILE.to_owned()),
            ),
            (
                "corp_id".to_owned(),
                AttributeValue::S(profile.corp_id.clone()),
            ),
            (
                "callback_token".to_owned(),
                AttributeValue::S(profile.callback_token.clone()),
            ),
            (
                "encoding_aes_key".to_owned(),
                AttributeValue::S(profile.encoding_aes_key.clone()),
            ),
            (
                "corp_secret".to_owned(),
                AttributeValue::S(profile.corp_secret.clone()),
            ),
        ]);
        self.client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .send()
            .await
            .map_err(|e| StoreError::new("tenant table", e.into_service_error()))?;
        Ok(())
    }
}

fn string_attribute(item: &HashMap<String, AttributeValue>, name: &str) -> Option<String> {
    item.get(name).and_then(|v| v.as_s().ok()).cloned()
}

#[async_trait::async_trait]
impl TenantDirectory for DynamoTenantDirectory {
    #[tracing::instrument(skip(self), fields(tenant = %tenant))]
    async fn callback_settings(
        &self,
        tenant: &TenantId,
    ) -> Result<Option<CallbackSettings>, StoreError> {
        let output = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(keys::PK, AttributeValue::S(keys::tenant(tenant)))
            .key(keys::SK, AttributeValue::S(keys::TENANT_PROFILE.to_owned()))
            .projection_expression("corp_id, callback_token, encoding_aes_key")
            .send()
            .await
            .map_err(|e| StoreError::new("tenant table", e.into_service_error()))?;
        let Some(item) = output.item else {
            return Ok(None);
        };
        let field = |name: &'static str| {
            string_attribute(&item, name).ok_or_else(|| {
                StoreError::new("tenant table", format!("tenant profile lacks {name}"))
            })
        };
        Ok(Some(CallbackSettings {
            corp_id: field("corp_id")?,
            callback_token: field("callback_token")?,
            encoding_aes_key: field("encoding_aes_key")?,
        }))
    }
}
