//! `TokenStore` on the table: one item per corp app holding its current access token and a
//! refresh lock (`lock_until_ms`), so that one process at a time calls `gettoken`.

use super::conditions::ConditionalWriteError;
use super::{get_n, get_s, key, keys, n, s, unavailable, DynamoStore};
use crate::wecom::{SharedToken, TokenStore};
use domain::secrets::{Purpose, SecretContext};
use domain::StoreError;

#[async_trait::async_trait]
impl TokenStore for DynamoStore {
    async fn load(&self, corp_id: &str) -> Result<Option<SharedToken>, StoreError> {
        let output = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(key(
                keys::wecom_token(corp_id),
                keys::WECOM_TOKEN_SK.to_owned(),
            )))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| unavailable(e.into_service_error()))?;
        let Some(item) = output.item else {
            return Ok(None);
        };
        // A lock item without a token yet (its holder is fetching) reads as no token.
        // The token is sealed for its corp (`sealed`); one stored before sealing is plaintext.
        let context = SecretContext::corp(Purpose::AccessToken, corp_id);
        let (Some(value), Some(digest)) = (
            self.reveal(&item, "token", &context).await?,
            get_s(&item, "secret_digest"),
        ) else {
            return Ok(None);
        };
        Ok(Some(SharedToken {
            value,
            secret_digest: digest.to_owned(),
            refresh_at_ms: get_n(&item, "refresh_at_ms").unwrap_or(0),
            expires_at_ms: get_n(&item, "expires_at_ms").unwrap_or(0),
        }))
    }

    /// A conditional update: the lock is free when absent or past its time. Clocks of
    /// Lambda hosts are NTP-synced; a skew only shortens or lengthens a 10 s lock.
    async fn try_lock(
        &self,
        corp_id: &str,
        now_ms: u64,
        until_ms: u64,
    ) -> Result<bool, StoreError> {
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(key(
                keys::wecom_token(corp_id),
                keys::WECOM_TOKEN_SK.to_owned(),
            )))
            .update_expression("SET lock_until_ms = :until")
            .condition_expression("attribute_not_exists(lock_until_ms) OR lock_until_ms < :now")
            .expression_attribute_values(":until", n(until_ms))
            .expression_attribute_values(":now", n(now_ms))
            .send()
            .await;
        match result {
            Ok(_) => Ok(true),
            Err(error) => error.refused_or_unavailable().map(|_| false),
        }
    }

    /// Replaces the item: the new token, and no lock.
    async fn save(&self, corp_id: &str, token: &SharedToken) -> Result<(), StoreError> {
        let mut item = key(keys::wecom_token(corp_id), keys::WECOM_TOKEN_SK.to_owned());
        let context = SecretContext::corp(Purpose::AccessToken, corp_id);
        item.insert("token".into(), self.conceal(&context, &token.value).await?);
        item.insert("secret_digest".into(), s(&token.secret_digest));
        item.insert("refresh_at_ms".into(), n(token.refresh_at_ms));
        item.insert("expires_at_ms".into(), n(token.expires_at_ms));
        item.insert(
            keys::EXPIRES_AT.into(),
            n(token.expires_at_ms / 1000 + 3600),
        );
        self.put(item).await
    }
}
