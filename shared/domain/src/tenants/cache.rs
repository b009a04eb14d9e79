//! A per-container cache in front of the tenants' callback settings: a warm Lambda answers
//! callbacks without a DynamoDB read, and a rotated secret is picked up within `ttl`.
//!
//! Both halves are bounded, and kept apart: the route is public, so anyone can send callbacks
//! for random tenant ids. Unknown ids are remembered (a flood for one id costs one read per
//! `ttl`), but in their own small cache, so a flood of random ids neither grows the container's
//! memory nor evicts the tenants that exist.

use super::CallbackSettings;
use crate::ids::TenantId;
use crate::tenants::CallbackSettingsSource;
use crate::StoreError;
use moka::future::Cache;
use std::sync::Arc;
use std::time::Duration;

/// Tenants with settings a container keeps: the whole platform (~30,000) fits, at a few
/// hundred bytes each.
pub const KNOWN_CAPACITY: u64 = 50_000;
/// Unknown tenant ids a container remembers.
pub const UNKNOWN_CAPACITY: u64 = 10_000;

pub struct CachedCallbackSettings<D> {
    inner: Arc<D>,
    known: Cache<TenantId, CallbackSettings>,
    unknown: Cache<TenantId, ()>,
}

impl<D: CallbackSettingsSource + 'static> CachedCallbackSettings<D> {
    pub fn new(inner: D, ttl: Duration) -> Self {
        Self::with_capacity(inner, ttl, KNOWN_CAPACITY, UNKNOWN_CAPACITY)
    }

    pub fn with_capacity(inner: D, ttl: Duration, known: u64, unknown: u64) -> Self {
        Self {
            inner: Arc::new(inner),
            known: Cache::builder()
                .max_capacity(known)
                .time_to_live(ttl)
                .build(),
            unknown: Cache::builder()
                .max_capacity(unknown)
                .time_to_live(ttl)
                .build(),
        }
    }

    /// Entries held now, known and unknown (after pending evictions are applied).
    pub async fn entries(&self) -> (u64, u64) {
        self.known.run_pending_tasks().await;
        self.unknown.run_pending_tasks().await;
        (self.known.entry_count(), self.unknown.entry_count())
    }
}

#[async_trait::async_trait]
impl<D: CallbackSettingsSource + 'static> CallbackSettingsSource for CachedCallbackSettings<D> {
    async fn callback_settings(
        &self,
        tenant: &TenantId,
    ) -> Result<Option<CallbackSettings>, StoreError> {
        if let Some(settings) = self.known.get(tenant).await {
            return Ok(Some(settings));
        }
        if self.unknown.contains_key(tenant) {
            return Ok(None);
        }
        match self.inner.callback_settings(tenant).await? {
            Some(settings) => {
                self.known.insert(tenant.clone(), settings.clone()).await;
                Ok(Some(settings))
            }
            None => {
                self.unknown.insert(tenant.clone(), ()).await;
                Ok(None)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fakes::InMemoryCallbackSettings;

    fn settings() -> CallbackSettings {
        CallbackSettings {
            corp_id: "c".into(),
            callback_token: "t".into(),
            encoding_aes_key: "k".into(),
            previous: None,
        }
    }

    #[tokio::test]
    async fn a_warm_cache_does_not_read_the_directory_again() {
        let directory = InMemoryCallbackSettings::default();
        let tenant = TenantId::parse("t1").expect("valid");
        directory.insert(tenant.clone(), settings());
        let cache = CachedCallbackSettings::new(directory.clone(), Duration::from_secs(60));
        for _ in 0..3 {
            assert!(cache
                .callback_settings(&tenant)
                .await
                .expect("ok")
                .is_some());
        }
        assert_eq!(directory.reads(), 1);
    }

    #[tokio::test]
    async fn an_unknown_tenant_is_read_once_per_ttl() {
        let directory = InMemoryCallbackSettings::default();
        let cache = CachedCallbackSettings::new(directory.clone(), Duration::from_secs(60));
        let nobody = TenantId::parse("nobody").expect("valid");
        for _ in 0..3 {
            assert!(cache
                .callback_settings(&nobody)
                .await
                .expect("ok")
                .is_none());
        }
        assert_eq!(directory.reads(), 1);
    }

    #[tokio::test]
    async fn a_flood_of_random_ids_stays_within_the_bound_and_keeps_the_known_tenants() {
        let directory = InMemoryCallbackSettings::default();
        let tenant = TenantId::parse("real").expect("valid");
        directory.insert(tenant.clone(), settings());
        let cache = CachedCallbackSettings::with_capacity(
            directory.clone(),
            Duration::from_secs(60),
            100,
            50,
        );
        assert!(cache
            .callback_settings(&tenant)
            .await
            .expect("ok")
            .is_some());
        for n in 0..5_000 {
            let random = TenantId::parse(&format!("flood-{n}")).expect("valid");
            assert!(cache
                .callback_settings(&random)
                .await
                .expect("ok")
                .is_none());
        }
        let (known, unknown) = cache.entries().await;
        assert_eq!(known, 1);
        assert!(unknown <= 50, "{unknown} unknown ids held");
        let reads = directory.reads();
        assert!(cache
            .callback_settings(&tenant)
            .await
            .expect("ok")
            .is_some());
        assert_eq!(directory.reads(), reads, "the real tenant was evicted");
    }
}
