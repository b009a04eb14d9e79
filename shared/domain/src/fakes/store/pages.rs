//! The landing page's home: each landing code's page, written only with the code's record
//! (`CodeRecords`), and the visits counted on its rounds (`RotationCounter`).

use super::InMemoryStore;
use crate::ids::CodeId;
use crate::ids::TenantId;
use crate::landing::{Counted, OrderKey, RotationCounter};
use crate::membership::RotationSlot;
use crate::refresh::PageWrite;
use crate::StoreError;

/// A code's page as the rotation table keeps it; `visits` is the counter of its round (a new
/// round is a new page).
#[derive(Debug, Clone)]
pub(super) struct Page {
    rotation: Option<Vec<RotationSlot>>,
    starved: bool,
    /// How many rounds the page has had: each new one is ordered by a key of its own.
    round: u64,
    order: OrderKey,
    visits: u64,
}

/// A round's order key, as at random but the same on every run (the table's is random): a
/// test's or the simulation's visits are routed the same way each time.
fn order_key(tenant: &TenantId, code: &CodeId, round: u64) -> OrderKey {
    use rand::SeedableRng;
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    (tenant, code, round).hash(&mut hasher);
    OrderKey::new(rand::Rng::gen(
        &mut rand_chacha::ChaCha20Rng::seed_from_u64(hasher.finish()),
    ))
}

impl InMemoryStore {
    /// Applies `write` to the code's page, as the record's transaction does.
    pub(super) fn write_page(&self, tenant: &TenantId, code: &CodeId, write: &PageWrite) {
        let mut tables = self.tables();
        let key = (tenant.clone(), code.clone());
        let round = tables.pages.get(&key).map_or(0, |page| page.round) + 1;
        let fresh = |rotation| Page {
            rotation,
            starved: false,
            round,
            order: order_key(tenant, code, round),
            visits: 0,
        };
        match write {
            PageWrite::NewRound(rotation) => {
                tables.pages.insert(key, fresh(Some(rotation.clone())));
            }
            PageWrite::SameRound(rotation) => {
                let page = tables
                    .pages
                    .entry(key)
                    .or_insert_with(|| fresh(Some(rotation.clone())));
                page.rotation = Some(rotation.clone());
                page.starved = false;
            }
            PageWrite::Starved => {
                tables
                    .pages
                    .entry(key)
                    .or_insert_with(|| fresh(None))
                    .starved = true;
            }
            PageWrite::NotServed => {
                let page = tables.pages.entry(key).or_insert_with(|| fresh(None));
                page.rotation = None;
                page.starved = false;
            }
        }
    }
}

#[async_trait::async_trait]
impl RotationCounter for InMemoryStore {
    async fn count_visit(&self, tenant: &TenantId, code: &CodeId) -> Result<Counted, StoreError> {
        let mut tables = self.available()?;
        let Some(page) = tables.pages.get_mut(&(tenant.clone(), code.clone())) else {
            return Ok(Counted::NoSuchCode);
        };
        if page.starved {
            return Ok(Counted::Starved);
        }
        let Some(rotation) = page.rotation.clone() else {
            return Ok(Counted::NotRotating);
        };
        page.visits += 1;
        Ok(Counted::Visit {
            number: page.visits,
            rotation,
            order: page.order.clone(),
        })
    }
}
