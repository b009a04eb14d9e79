//! The one-off migration of secrets stored before sealing (`qrsync-ops seal-secrets`): each
//! plaintext secret attribute of a tenant's profile and of its corp's token item is rewritten
//! sealed, on the condition that it still holds the plaintext read, so a concurrent write
//! (which seals anyway) wins and a rerun finds nothing left to do.

use super::conditions::ConditionalWriteError;
use super::{key, keys, tenant_key, unavailable, DynamoStore, Item};
use domain::ids::TenantId;
use domain::secrets::{Purpose, SecretContext, StoredSecret};
use domain::StoreError;

/// The profile's secret attributes and their purposes.
const PROFILE_SECRETS: [(&str, Purpose); 5] = [
    ("corp_secret", Purpose::CorpSecret),
    ("callback_token", Purpose::CallbackKeys),
    ("encoding_aes_key", Purpose::CallbackKeys),
    ("previous_callback_token", Purpose::CallbackKeys),
    ("previous_encoding_aes_key", Purpose::CallbackKeys),
];

/// What one tenant's migration found (and, unless a dry run, sealed).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct SealedCount {
    /// Plaintext attributes found (sealed, unless a dry run).
    pub plaintext: usize,
    /// Attributes already sealed.
    pub already_sealed: usize,
    /// Plaintext attributes another write replaced meanwhile (it sealed them).
    pub raced: usize,
}

impl std::ops::AddAssign for SealedCount {
    fn add_assign(&mut self, other: Self) {
        self.plaintext += other.plaintext;
        self.already_sealed += other.already_sealed;
        self.raced += other.raced;
    }
}

impl DynamoStore {
    /// The tenants of the registry after `after`, at most `limit`, in id order.
    pub async fn tenants_after(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        self.index_sort_keys(keys::TENANTS_INDEX, after, Some(limit))
            .await
    }

    /// Seals `tenant`'s plaintext secrets: its profile's and its corp's access token. With
    /// `dry_run`, only counts them. Needs every purpose's key.
    pub async fn seal_plaintext_secrets(
        &self,
        tenant: &TenantId,
        dry_run: bool,
    ) -> Result<SealedCount, StoreError> {
        let mut count = SealedCount::default();
        let profile_key = tenant_key(tenant, keys::PROFILE.to_owned());
        let Some(profile) = self.item(&profile_key).await? else {
            return Ok(count);
        };
        let attributes = PROFILE_SECRETS
            .iter()
            .map(|(name, purpose)| (*name, SecretContext::tenant(*purpose, tenant)))
            .collect::<Vec<_>>();
        count += self
            .seal_attributes(&profile_key, &profile, &attributes, dry_run)
            .await?;
        if let Some(corp_id) = super::get_s(&profile, "corp_id") {
            let token_key = key(keys::wecom_token(corp_id), keys::WECOM_TOKEN_SK.to_owned());
            if let Some(token) = self.item(&token_key).await? {
                let context = SecretContext::corp(Purpose::AccessToken, corp_id);
                count += self
                    .seal_attributes(&token_key, &token, &[("token", context)], dry_run)
                    .await?;
            }
        }
        Ok(count)
    }

    async fn item(&self, key: &Item) -> Result<Option<Item>, StoreError> {
        Ok(self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(key.clone()))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| unavailable(e.into_service_error()))?
            .item)
    }

    async fn seal_attributes(
        &self,
        key: &Item,
        item: &Item,
        attributes: &[(&'static str, SecretContext)],
        dry_run: bool,
    ) -> Result<SealedCount, StoreError> {
        let mut count = SealedCount::default();
        for (name, context) in attributes {
            let plaintext = match Self::stored_secret(item, name) {
                None => continue,
                Some(StoredSecret::Sealed(_)) => {
                    count.already_sealed += 1;
                    continue;
                }
                Some(StoredSecret::Plain(value)) => value,
            };
            count.plaintext += 1;
            if dry_run {
                continue;
            }
            if !self.seals(context.purpose) {
                return Err(StoreError::new(
                    "kms",
                    format!("this process holds no {} key", context.purpose),
                ));
            }
            let sealed = self.conceal(context, &plaintext).await?;
            let result = self
                .client
                .update_item()
                .table_name(&self.table)
                .set_key(Some(key.clone()))
                .update_expression("SET #a = :sealed")
                .condition_expression("#a = :plain")
                .expression_attribute_names("#a", *name)
                .expression_attribute_values(":sealed", sealed)
                .expression_attribute_values(":plain", super::s(&plaintext))
                .send()
                .await;
            if let Err(error) = result {
                error.refused_or_unavailable()?;
                count.plaintext -= 1;
                count.raced += 1;
            }
        }
        Ok(count)
    }
}
