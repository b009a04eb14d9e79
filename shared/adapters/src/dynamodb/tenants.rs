//! Tenant profiles.

use super::conditions::ConditionalWriteError;
use super::{get_n, get_s, key, keys, n, s, tenant_key, unavailable, DynamoStore};
use aws_sdk_dynamodb::types::{Delete, Put, TransactWriteItem};
use domain::admin::{ProfileWrite, SecretsChanged, StoredProfile};
use domain::facts::TenantProfiles;
use domain::ids::TenantId;
use domain::secrets::{Purpose, SecretContext};
use domain::tenants::{CallbackSettings, PreviousCallbackKeys, TenantProfile};
use domain::tenants::{CallbackSettingsSource, TenantPause, TenantPauses};
use domain::StoreError;

impl DynamoStore {
    /// Reads the profile item with its version and secret times.
    pub(crate) async fn read_stored_profile(
        &self,
        tenant: &TenantId,
    ) -> Result<Option<StoredProfile>, StoreError> {
        let output = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(tenant_key(tenant, keys::PROFILE.to_owned())))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| unavailable(e.into_service_error()))?;
        let Some(item) = output.item else {
            return Ok(None);
        };
        let at = |name: &str| get_n(&item, name).unwrap_or(0);
        Ok(Some(StoredProfile {
            profile: self.profile_from(tenant, &item).await?,
            version: at("version"),
            secrets_changed_at_ms: SecretsChanged {
                corp_secret: at("corp_secret_changed_at_ms"),
                callback_token: at("callback_token_changed_at_ms"),
                encoding_aes_key: at("encoding_aes_key_changed_at_ms"),
            },
        }))
    }

    /// One transaction: the profile item conditioned on the version read, the claim on the
    /// new corp id (unless another tenant holds it), and the release of the previous one.
    pub(crate) async fn write_profile(
        &self,
        tenant: &TenantId,
        next: &StoredProfile,
        previous: Option<&StoredProfile>,
    ) -> Result<ProfileWrite, StoreError> {
        let profile = &next.profile;
        let profile_put = Put::builder()
            .table_name(&self.table)
            .set_item(Some(self.profile_item(tenant, next).await?));
        let profile_put = match previous {
            None => profile_put.condition_expression("attribute_not_exists(pk)"),
            // Stored before profiles had versions.
            Some(previous) if previous.version == 0 => profile_put
                .condition_expression("attribute_exists(pk) AND attribute_not_exists(version)"),
            Some(previous) => profile_put
                .condition_expression("version = :read")
                .expression_attribute_values(":read", n(previous.version)),
        };
        let mut claim = key(keys::corp(&profile.corp_id), keys::CORP_SK.to_owned());
        claim.insert("tenant".into(), s(tenant.as_str()));
        let claim_put = Put::builder()
            .table_name(&self.table)
            .set_item(Some(claim))
            .condition_expression("attribute_not_exists(pk) OR tenant = :tenant")
            .expression_attribute_values(":tenant", s(tenant.as_str()));
        let mut writes = vec![
            TransactWriteItem::builder()
                .put(profile_put.build().map_err(unavailable)?)
                .build(),
            TransactWriteItem::builder()
                .put(claim_put.build().map_err(unavailable)?)
                .build(),
        ];
        if let Some(previous) = previous.filter(|p| p.profile.corp_id != profile.corp_id) {
            let release = Delete::builder()
                .table_name(&self.table)
                .set_key(Some(key(
                    keys::corp(&previous.profile.corp_id),
                    keys::CORP_SK.to_owned(),
                )))
                .condition_expression("attribute_not_exists(pk) OR tenant = :tenant")
                .expression_attribute_values(":tenant", s(tenant.as_str()))
                .build()
                .map_err(unavailable)?;
            writes.push(TransactWriteItem::builder().delete(release).build());
        }
        match self
            .client
            .transact_write_items()
            .set_transact_items(Some(writes))
            .send()
            .await
        {
            Ok(_) => Ok(ProfileWrite::Stored),
            Err(error) => {
                let refused = error.refused_or_unavailable()?;
                Ok(match refused.first_refused_item() {
                    1 => ProfileWrite::CorpIdTaken,
                    _ => ProfileWrite::Raced,
                })
            }
        }
    }

    /// A profile item's settings, its secrets opened where this process may open them.
    pub(crate) async fn profile_from(
        &self,
        tenant: &TenantId,
        item: &super::Item,
    ) -> Result<TenantProfile, StoreError> {
        let field = |name: &'static str| {
            get_s(item, name)
                .map(str::to_owned)
                .ok_or_else(|| super::corrupt(name))
        };
        let keys = self.callback_keys_from(tenant, item).await?;
        let corp_secret = SecretContext::tenant(Purpose::CorpSecret, tenant);
        Ok(TenantProfile {
            corp_id: field("corp_id")?,
            callback_token: keys.callback_token,
            encoding_aes_key: keys.encoding_aes_key,
            previous_callback: keys.previous,
            corp_secret: self
                .reveal(item, "corp_secret", &corp_secret)
                .await?
                .ok_or_else(|| super::corrupt("corp_secret"))?,
            timezone: get_s(item, "timezone")
                .map(str::parse)
                .transpose()
                .map_err(|_| super::corrupt("timezone"))?
                .unwrap_or_default(),
            company_daily_cap: get_n(item, "company_daily_cap"),
        })
    }

    /// The callback keys of a profile item (whole or projected), opened where this process may.
    async fn callback_keys_from(
        &self,
        tenant: &TenantId,
        item: &super::Item,
    ) -> Result<CallbackSettings, StoreError> {
        let context = SecretContext::tenant(Purpose::CallbackKeys, tenant);
        let secret = |name: &'static str| {
            let context = &context;
            async move {
                self.reveal(item, name, context)
                    .await?
                    .ok_or_else(|| super::corrupt(name))
            }
        };
        let callback_token = secret("callback_token").await?;
        let encoding_aes_key = secret("encoding_aes_key").await?;
        let previous = match (
            self.reveal(item, "previous_callback_token", &context)
                .await?,
            self.reveal(item, "previous_encoding_aes_key", &context)
                .await?,
            get_n(item, "callback_keys_replaced_at_ms"),
        ) {
            (Some(callback_token), Some(encoding_aes_key), Some(replaced_at_ms)) => {
                Some(PreviousCallbackKeys {
                    callback_token,
                    encoding_aes_key,
                    replaced_at_ms,
                })
            }
            _ => None,
        };
        Ok(CallbackSettings {
            corp_id: get_s(item, "corp_id")
                .map(str::to_owned)
                .ok_or_else(|| super::corrupt("corp_id"))?,
            callback_token,
            encoding_aes_key,
            previous,
        })
    }

    /// The profile's item as stored: settings, version, when each secret changed, and its
    /// place in the registry the sweep walks (`keys::TENANTS_INDEX`). Its secrets are sealed
    /// (`sealed`).
    async fn profile_item(
        &self,
        tenant: &TenantId,
        next: &StoredProfile,
    ) -> Result<super::Item, StoreError> {
        let profile = &next.profile;
        let callback = SecretContext::tenant(Purpose::CallbackKeys, tenant);
        let corp_secret = SecretContext::tenant(Purpose::CorpSecret, tenant);
        let mut item = tenant_key(tenant, keys::PROFILE.to_owned());
        item.insert("corp_id".into(), s(&profile.corp_id));
        item.insert(
            "callback_token".into(),
            self.conceal(&callback, &profile.callback_token).await?,
        );
        item.insert(
            "encoding_aes_key".into(),
            self.conceal(&callback, &profile.encoding_aes_key).await?,
        );
        if let Some(previous) = &profile.previous_callback {
            item.insert(
                "previous_callback_token".into(),
                self.conceal(&callback, &previous.callback_token).await?,
            );
            item.insert(
                "previous_encoding_aes_key".into(),
                self.conceal(&callback, &previous.encoding_aes_key).await?,
            );
            item.insert(
                "callback_keys_replaced_at_ms".into(),
                n(previous.replaced_at_ms),
            );
        }
        item.insert(
            "corp_secret".into(),
            self.conceal(&corp_secret, &profile.corp_secret).await?,
        );
        item.insert("timezone".into(), s(profile.timezone.name()));
        if let Some(cap) = profile.company_daily_cap {
            item.insert("company_daily_cap".into(), n(cap));
        }
        item.insert("version".into(), n(next.version));
        item.insert(keys::GSI1_PK.into(), s(keys::TENANTS_INDEX));
        item.insert(keys::GSI1_SK.into(), s(tenant.as_str()));
        let at = next.secrets_changed_at_ms;
        item.insert("corp_secret_changed_at_ms".into(), n(at.corp_secret));
        item.insert("callback_token_changed_at_ms".into(), n(at.callback_token));
        item.insert(
            "encoding_aes_key_changed_at_ms".into(),
            n(at.encoding_aes_key),
        );
        Ok(item)
    }
}

#[async_trait::async_trait]
impl TenantProfiles for DynamoStore {
    async fn profile(&self, tenant: &TenantId) -> Result<Option<TenantProfile>, StoreError> {
        Ok(self
            .read_stored_profile(tenant)
            .await?
            .map(|stored| stored.profile))
    }
}

#[async_trait::async_trait]
impl CallbackSettingsSource for DynamoStore {
    #[tracing::instrument(skip(self), fields(tenant = %tenant))]
    async fn callback_settings(
        &self,
        tenant: &TenantId,
    ) -> Result<Option<CallbackSettings>, StoreError> {
        let output = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(tenant_key(tenant, keys::PROFILE.to_owned())))
            .projection_expression(CALLBACK_PROJECTION)
            .send()
            .await
            .map_err(|e| unavailable(e.into_service_error()))?;
        let Some(item) = output.item else {
            return Ok(None);
        };
        self.callback_keys_from(tenant, &item).await.map(Some)
    }
}

/// The attributes the callback function reads, and all it may read (`template.yaml`,
/// `ReadCallbackSettingsOnly`; `tests/least_privilege.rs`).
pub const CALLBACK_PROJECTION: &str = "corp_id, callback_token, encoding_aes_key, previous_callback_token, previous_encoding_aes_key, callback_keys_replaced_at_ms";

/// A pause as stored: the pause as JSON (it holds no secret), its start on its own for the
/// conditions, and its entry in the registry of paused tenants.
fn pause_item(tenant: &TenantId, pause: &TenantPause) -> Result<super::Item, StoreError> {
    let mut item = tenant_key(tenant, keys::PAUSE.to_owned());
    let json = serde_json::to_string(pause).map_err(|e| StoreError::new("table", e))?;
    item.insert("pause".into(), s(json));
    item.insert("since_ms".into(), n(pause.since_ms));
    item.insert(keys::GSI1_PK.into(), s(keys::PAUSED_INDEX));
    item.insert(keys::GSI1_SK.into(), s(tenant.as_str()));
    Ok(item)
}

/// The pause an item holds, if it is one.
pub(crate) fn pause_from(item: &super::Item) -> Result<TenantPause, StoreError> {
    let json = get_s(item, "pause").ok_or_else(|| super::corrupt("pause"))?;
    serde_json::from_str(json).map_err(|_| super::corrupt("pause"))
}

#[async_trait::async_trait]
impl TenantPauses for DynamoStore {
    /// One conditional `PutItem` (the item must not exist yet): of every refresh that meets
    /// the refusal at once, one pauses the tenant and raises the alert.
    async fn pause(&self, tenant: &TenantId, pause: &TenantPause) -> Result<bool, StoreError> {
        let result = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(pause_item(tenant, pause)?))
            .condition_expression("attribute_not_exists(pk)")
            .send()
            .await;
        match result {
            Ok(_) => Ok(true),
            Err(error) => error.refused_or_unavailable().map(|_| false),
        }
    }

    async fn pause_of(&self, tenant: &TenantId) -> Result<Option<TenantPause>, StoreError> {
        let output = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(tenant_key(tenant, keys::PAUSE.to_owned())))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| unavailable(e.into_service_error()))?;
        output.item.as_ref().map(pause_from).transpose()
    }

    async fn paused_tenants(&self) -> Result<Vec<TenantId>, StoreError> {
        self.index_sort_keys(keys::PAUSED_INDEX, None, None)
            .await?
            .iter()
            .map(|id| TenantId::parse(id).map_err(|_| super::corrupt("paused tenant entry")))
            .collect()
    }

    async fn update_pause(&self, tenant: &TenantId, pause: &TenantPause) -> Result<(), StoreError> {
        let result = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(pause_item(tenant, pause)?))
            .condition_expression("since_ms = :since")
            .expression_attribute_values(":since", n(pause.since_ms))
            .send()
            .await;
        match result {
            Ok(_) => Ok(()),
            // Resumed (or paused anew) meanwhile: that pause stands.
            Err(error) => error.refused_or_unavailable().map(|_| ()),
        }
    }

    async fn lift_pause(&self, tenant: &TenantId, since_ms: u64) -> Result<bool, StoreError> {
        let result = self
            .client
            .delete_item()
            .table_name(&self.table)
            .set_key(Some(tenant_key(tenant, keys::PAUSE.to_owned())))
            .condition_expression("since_ms = :since")
            .expression_attribute_values(":since", n(since_ms))
            .send()
            .await;
        match result {
            Ok(_) => Ok(true),
            Err(error) => error.refused_or_unavailable().map(|_| false),
        }
    }
}
