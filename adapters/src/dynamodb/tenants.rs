//! Tenant profiles.

use super::{get_n, get_s, key, keys, n, s, unavailable, DynamoStore};
use domain::facts::TenantProfiles;
use domain::tenants::TenantDirectory;
use domain::tenants::{CallbackSettings, TenantId, TenantProfile};
use domain::StoreError;

impl DynamoStore {
    /// Creates or replaces a tenant's profile.
    pub async fn put_profile(
        &self,
        tenant: &TenantId,
        profile: &TenantProfile,
    ) -> Result<(), StoreError> {
        let mut item = key(keys::tenant(tenant), keys::PROFILE.to_owned());
        item.insert("corp_id".into(), s(&profile.corp_id));
        item.insert("callback_token".into(), s(&profile.callback_token));
        item.insert("encoding_aes_key".into(), s(&profile.encoding_aes_key));
        item.insert("corp_secret".into(), s(&profile.corp_secret));
        item.insert("timezone".into(), s(profile.timezone.name()));
        if let Some(cap) = profile.company_daily_cap {
            item.insert("company_daily_cap".into(), n(cap));
        }
        self.client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .send()
            .await
            .map_err(|e| unavailable(e.into_service_error()))?;
        Ok(())
    }

    pub(crate) fn profile_from(item: &super::Item) -> Result<TenantProfile, StoreError> {
        let field = |name: &'static str| {
            get_s(item, name)
                .map(str::to_owned)
                .ok_or_else(|| super::corrupt(name))
        };
        Ok(TenantProfile {
            corp_id: field("corp_id")?,
            callback_token: field("callback_token")?,
            encoding_aes_key: field("encoding_aes_key")?,
            corp_secret: field("corp_secret")?,
            timezone: get_s(item, "timezone")
                .map(str::parse)
                .transpose()
                .map_err(|_| super::corrupt("timezone"))?
                .unwrap_or_default(),
            company_daily_cap: get_n(item, "company_daily_cap"),
        })
    }
}

#[async_trait::async_trait]
impl TenantProfiles for DynamoStore {
    async fn profile(&self, tenant: &TenantId) -> Result<Option<TenantProfile>, StoreError> {
        let output = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(key(keys::tenant(tenant), keys::PROFILE.to_owned())))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| unavailable(e.into_service_error()))?;
        output.item.as_ref().map(Self::profile_from).transpose()
    }
}

#[async_trait::async_trait]
impl TenantDirectory for DynamoStore {
    #[tracing::instrument(skip(self), fields(tenant = %tenant))]
    async fn callback_settings(
        &self,
        tenant: &TenantId,
    ) -> Result<Option<CallbackSettings>, StoreError> {
        let output = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(key(keys::tenant(tenant), keys::PROFILE.to_owned())))
            .projection_expression("corp_id, callback_token, encoding_aes_key")
            .send()
            .await
            .map_err(|e| unavailable(e.into_service_error()))?;
        let Some(item) = output.item else {
            return Ok(None);
        };
        let field = |name: &'static str| {
            get_s(&item, name)
                .map(str::to_owned)
                .ok_or_else(|| super::corrupt(name))
        };
        Ok(Some(CallbackSettings {
            corp_id: field("corp_id")?,
            callback_token: field("callback_token")?,
            encoding_aes_key: field("encoding_aes_key")?,
        }))
    }
}
