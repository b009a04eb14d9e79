//! The landing page's rotation records.

use crate::ids::CodeId;
use crate::ids::TenantId;
use crate::landing::{Counted, RotationCounter};
use crate::membership::RotationSlot;
use crate::StoreError;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

#[derive(Debug, Clone)]
enum Record {
    Rotating {
        rotation: Vec<RotationSlot>,
        visits: u64,
        starved: bool,
    },
    Native,
}

/// Rotation records by (tenant, code); `count_visit` adds under one lock, as the table's
/// conditional update does on its item.
#[derive(Clone, Default)]
pub struct InMemoryRotations {
    records: Arc<Mutex<HashMap<(TenantId, CodeId), Record>>>,
    unavailable: Arc<Mutex<bool>>,
}

impl InMemoryRotations {
    /// Records `rotation` as a push does: a new record, its counter back at zero.
    pub fn record(&self, tenant: &TenantId, code: &CodeId, rotation: Vec<RotationSlot>) {
        self.lock().insert(
            (tenant.clone(), code.clone()),
            Record::Rotating {
                rotation,
                visits: 0,
                starved: false,
            },
        );
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
                rotation, visits, ..
            }) => {
                *visits += 1;
                Counted::Visit {
                    number: *visits,
                    rotation: rotation.clone(),
                }
            }
        })
    }
}
