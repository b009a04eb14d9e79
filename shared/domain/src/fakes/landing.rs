//! The landing page's rotation records.

use crate::ids::CodeId;
use crate::ids::TenantId;
use crate::landing::{Counted, OrderKey, RotationCounter};
use crate::membership::RotationSlot;
use crate::StoreError;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

#[derive(Debug, Clone)]
enum Record {
    Rotating {
        rotation: Vec<RotationSlot>,
        visits: u64,
        starved: bool,
        order: OrderKey,
    },
    Native,
}

/// Rotation records by (tenant, code); `count_visit` adds under one lock, as the table's
/// conditional update does on its item. Order keys come from a seeded stream (`with_seed`;
/// seed 0 by default), so a test's picks are the same on every run.
#[derive(Clone)]
pub struct InMemoryRotations {
    records: Arc<Mutex<HashMap<(TenantId, CodeId), Record>>>,
    keys: Arc<Mutex<ChaCha20Rng>>,
    unavailable: Arc<Mutex<bool>>,
}

impl Default for InMemoryRotations {
    fn default() -> Self {
        Self::with_seed(0)
    }
}

impl InMemoryRotations {
    pub fn with_seed(seed: u64) -> Self {
        Self {
            records: Arc::default(),
            keys: Arc::new(Mutex::new(ChaCha20Rng::seed_from_u64(seed))),
            unavailable: Arc::default(),
        }
    }

    /// Records `rotation` as a push does: a new record, its counter back at zero, a new order
    /// key (the table's record gets one with its first visit).
    pub fn record(&self, tenant: &TenantId, code: &CodeId, rotation: Vec<RotationSlot>) {
        let order = OrderKey::new(self.keys.lock().expect("not poisoned").gen());
        self.lock().insert(
            (tenant.clone(), code.clone()),
            Record::Rotating {
                rotation,
                visits: 0,
                starved: false,
                order,
            },
        );
    }

    /// How many visits the code's record has counted (0 without a rotating record).
    pub fn visits(&self, tenant: &TenantId, code: &CodeId) -> u64 {
        match self.lock().get(&(tenant.clone(), code.clone())) {
            Some(Record::Rotating { visits, .. }) => *visits,
            _ => 0,
        }
    }

    pub fn record_native(&self, tenant: &TenantId, code: &CodeId) {
        self.lock()
            .insert((tenant.clone(), code.clone()), Record::Native);
    }

    pub fn mark_starved(&self, tenant: &TenantId, code: &CodeId) {
        if let Some(Record::Rotating { starved, .. }) =
            self.lock().get_mut(&(tenant.clone(), code.clone()))
        {
            *starved = true;
        }
    }

    pub fn set_unavailable(&self, unavailable: bool) {
        *self.unavailable.lock().expect("not poisoned") = unavailable;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(TenantId, CodeId), Record>> {
        self.records.lock().expect("not poisoned")
    }
}

#[async_trait::async_trait]
impl RotationCounter for InMemoryRotations {
    async fn count_visit(&self, tenant: &TenantId, code: &CodeId) -> Result<Counted, StoreError> {
        if *self.unavailable.lock().expect("not poisoned") {
            return Err(StoreError::new("table", "switched off by the test"));
        }
        let mut records = self.lock();
        Ok(match records.get_mut(&(tenant.clone(), code.clone())) {
            None => Counted::NoSuchCode,
            Some(Record::Native) => Counted::NotRotating,
            Some(Record::Rotating { starved: true, .. }) => Counted::Starved,
            Some(Record::Rotating {
                rotation,
                visits,
                order,
                ..
            }) => {
                *visits += 1;
                Counted::Visit {
                    number: *visits,
                    rotation: rotation.clone(),
                    order: order.clone(),
                }
            }
        })
    }
}
