//! A per-container cache in front of the tenant directory: a warm Lambda answers callbacks
//! without a DynamoDB read, and a rotated secret is picked up within `ttl`.

use super::{CallbackSettings, TenantId};
use crate::ports::{StoreError, TenantDirectory};
use std::collections::HashMap;
use std::time::{Duration, Instant};
use tokio::sync::RwLock;

pub struct CachedTenantDirectory<D> {
    inner: D,
    ttl: Duration,
    entries: RwLock<HashMap<TenantId, (Instant, Option<CallbackSettings>)>>,
}

impl<D: TenantDirectory> CachedTenantDirectory<D> {
    pub fn new(inner: D, ttl: Duration) -> Self {
        Self {
            inner,
            ttl,
            entries: RwLock::new(HashMap::new()),
        }
    }
}

#[async_trait::async_trait]
impl<D: TenantDirectory> TenantDirectory for CachedTenantDirectory<D> {
    async fn callback_settings(
        &self,
        tenant: &TenantId,
    ) -> Result<Option<CallbackSettings>, StoreError> {
        if let Some((loaded_at, settings)) = self.entries.read().await.get(tenant) {
            if loaded_at.elapsed() < self.ttl {
                return Ok(settings.clone());
            }
        }
        // Unknown tenants are cached too, so a flood of callbacks for a tenant that does not
        // exist costs one read per `ttl`, not one per request.
        let settings = self.inner.callback_settings(tenant).await?;
        self.entries
            .write()
            .await
            .insert(tenant.clone(), (Instant::now(), settings.clone()));
        Ok(settings)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapters::memory::InMemoryTenantDirectory;

    #[tokio::test]
    async fn a_warm_cache_does_not_read_the_directory_again() {
        let directory = InMemoryTenantDirectory::default();
        let tenant = TenantId::parse("t1").expect("valid");
        directory.insert(
            tenant.clone(),
            CallbackSettings {
                corp_id: "c".into(),
                callback_token: "t".into(),
                encoding_aes_key: "k".into(),
            },
        );
        let cache = CachedTenantDirectory::new(directory.clone(), Duration::from_secs(60));
        for _ in 0..3 {
            assert!(cache
                .callback_settings(&tenant)
                .await
                .expect("ok")
                .is_some());
        }
        assert_eq!(directory.reads(), 1);
    }
}
