//! The landing page's home (docs/design/landing-page.md, "The page's home"): two tables of its
//! own, apart from the platform's table, so the landing function's role names them and nothing
//! else. The rotation table holds each landing code's page (its rotation, round, order key,
//! starved mark), written only by the code's single writer in the same transaction as the
//! code's record, which the lease fences: a page never changes without its record, nor under a
//! writer that lost the lease. The landing function may only read it. The visit table holds one
//! counter per round, the only thing the landing function writes.

use super::{corrupt, get_bool, get_n, get_s, keys, n, s, unavailable, DynamoStore, Item};
use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::{AttributeValue, Put, ReturnValue, TransactWriteItem, Update};
use domain::ids::{CodeId, TenantId};
use domain::landing::{Counted, OrderKey, RotationCounter};
use domain::membership::RotationSlot;
use domain::refresh::PageWrite;
use domain::StoreError;
use std::collections::HashMap;

/// A round's counter outlives its last visit by this long, then the TTL collects it. A round
/// can stay current for longer (a code nobody edits): its next visit then starts the counter
/// again at one, which only starts a round early.
const COUNTER_TTL_SECS: u64 = 30 * 24 * 3600;

/// The landing page's two tables.
#[derive(Debug, Clone)]
pub struct PageTables {
    pub rotations: String,
    pub visits: String,
}

impl DynamoStore {
    /// A store of the landing page's tables only (the landing function's): the platform's
    /// table is not named, so no request of it can reach that table.
    pub fn for_pages(client: aws_sdk_dynamodb::Client, tables: PageTables) -> Self {
        Self::new(client, String::new()).with_pages(tables)
    }

    /// The same store, also writing (the single writer) or reading (the landing function) the
    /// landing page's tables.
    pub fn with_pages(mut self, tables: PageTables) -> Self {
        self.pages = Some(tables);
        self
    }

    fn pages(&self) -> Result<&PageTables, StoreError> {
        self.pages
            .as_ref()
            .ok_or_else(|| StoreError::new("landing tables", "not configured for this function"))
    }

    /// `write` as one item of the record's transaction.
    pub(super) fn page_write(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        write: &PageWrite,
    ) -> Result<TransactWriteItem, StoreError> {
        let table = &self.pages()?.rotations;
        let key: Item = HashMap::from([(keys::PAGE.to_owned(), s(keys::page(tenant, code)))]);
        let rotation = |slots: &[RotationSlot]| {
            serde_json::to_string(slots)
                .map(s)
                .map_err(|_| corrupt("rotation"))
        };
        let round = || s(format!("{:016x}", rand::random::<u64>()));
        let order_key = || AttributeValue::B(Blob::new(rand::random::<[u8; OrderKey::LEN]>()));
        let put = |mut item: Item| {
            item.extend(key.clone());
            Put::builder()
                .table_name(table)
                .set_item(Some(item))
                .build()
                .map(|put| TransactWriteItem::builder().put(put).build())
                .map_err(|error| corrupt(&error.to_string()))
        };
        let update = |expression: &str, values: Item| {
            Update::builder()
                .table_name(table)
                .set_key(Some(key.clone()))
                .update_expression(expression)
                .set_expression_attribute_values(Some(values))
                .build()
                .map(|update| TransactWriteItem::builder().update(update).build())
                .map_err(|error| corrupt(&error.to_string()))
        };
        match write {
            PageWrite::NewRound(slots) => put(HashMap::from([
                ("rotation".to_owned(), rotation(slots)?),
                ("round".to_owned(), round()),
                ("order_key".to_owned(), order_key()),
            ])),
            PageWrite::SameRound(slots) => update(
                "SET rotation = :rotation, round = if_not_exists(round, :round), \
                 order_key = if_not_exists(order_key, :key) REMOVE starved",
                HashMap::from([
                    (":rotation".to_owned(), rotation(slots)?),
                    (":round".to_owned(), round()),
                    (":key".to_owned(), order_key()),
                ]),
            ),
            PageWrite::Starved => update(
                "SET starved = :yes",
                HashMap::from([(":yes".to_owned(), AttributeValue::Bool(true))]),
            ),
            PageWrite::NotServed => put(HashMap::new()),
        }
    }

    /// Deletes the code's page (the code was deleted, its record first).
    pub(super) async fn delete_page(
        &self,
        tenant: &TenantId,
        code: &CodeId,
    ) -> Result<(), StoreError> {
        self.client
            .delete_item()
            .table_name(&self.pages()?.rotations)
            .key(keys::PAGE, s(keys::page(tenant, code)))
            .send()
            .await
            .map_err(|e| unavailable(e.into_service_error()))?;
        Ok(())
    }
}

/// A code's page as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
struct StoredPage {
    /// `None`: the code is not served by the page (edited to native).
    pub rotation: Option<Vec<RotationSlot>>,
    pub starved: bool,
    /// The round's id (the key of its counter) and order key; `None` on a page without a
    /// rotation.
    round: Option<(String, OrderKey)>,
}

/// A code's page with the visits counted on its round, for reports (the demo, the benches).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageSeen {
    pub rotation: Option<Vec<RotationSlot>>,
    pub starved: bool,
    pub visits: u64,
}

impl DynamoStore {
    /// The code's page, strongly consistent; `None` when it has none.
    async fn stored_page(
        &self,
        tenant: &TenantId,
        code: &CodeId,
    ) -> Result<Option<StoredPage>, StoreError> {
        let item = self
            .client
            .get_item()
            .table_name(&self.pages()?.rotations)
            .key(keys::PAGE, s(keys::page(tenant, code)))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| unavailable(e.into_service_error()))?
            .item;
        let Some(item) = item else {
            return Ok(None);
        };
        let rotation = get_s(&item, "rotation")
            .map(|raw| serde_json::from_str(raw).map_err(|_| corrupt("rotation")))
            .transpose()?;
        let round = match rotation {
            None => None,
            Some(_) => {
                let id = get_s(&item, "round").ok_or_else(|| corrupt("page round"))?;
                let order = item
                    .get("order_key")
                    .and_then(|key| key.as_b().ok())
                    .and_then(|key| OrderKey::from_slice(key.as_ref()))
                    .ok_or_else(|| corrupt("order key"))?;
                Some((id.to_owned(), order))
            }
        };
        Ok(Some(StoredPage {
            rotation,
            starved: get_bool(&item, "starved").unwrap_or(false),
            round,
        }))
    }

    /// The code's page and the visits counted on its current round (two reads).
    pub async fn page_seen(
        &self,
        tenant: &TenantId,
        code: &CodeId,
    ) -> Result<Option<PageSeen>, StoreError> {
        let Some(page) = self.stored_page(tenant, code).await? else {
            return Ok(None);
        };
        let visits = match &page.round {
            None => 0,
            Some((round, _)) => self
                .client
                .get_item()
                .table_name(&self.pages()?.visits)
                .key(keys::ROUND, s(keys::round(tenant, code, round)))
                .consistent_read(true)
                .send()
                .await
                .map_err(|e| unavailable(e.into_service_error()))?
                .item
                .and_then(|item| get_n(&item, "visits"))
                .unwrap_or(0),
        };
        Ok(Some(PageSeen {
            rotation: page.rotation,
            starved: page.starved,
            visits,
        }))
    }
}

#[async_trait::async_trait]
impl RotationCounter for DynamoStore {
    /// Two requests: a strongly consistent `GetItem` of the code's page, then, for a page with
    /// a rotation, `ADD visits` on its round's counter (`UPDATED_NEW`: the counter alone). A
    /// visit is counted against the rotation its read found: a page written after the read is
    /// seen by every visit that reads after it (docs/design/landing-page.md).
    async fn count_visit(&self, tenant: &TenantId, code: &CodeId) -> Result<Counted, StoreError> {
        let Some(page) = self.stored_page(tenant, code).await? else {
            return Ok(Counted::NoSuchCode);
        };
        if page.starved {
            return Ok(Counted::Starved);
        }
        let (Some(rotation), Some((round, order))) = (page.rotation, page.round) else {
            return Ok(Counted::NotRotating);
        };
        let now_secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_secs());
        let counted = self
            .client
            .update_item()
            .table_name(&self.pages()?.visits)
            .key(keys::ROUND, s(keys::round(tenant, code, &round)))
            .update_expression("ADD visits :one SET expires_at = :expires")
            .expression_attribute_values(":one", n(1))
            .expression_attribute_values(":expires", n(now_secs + COUNTER_TTL_SECS))
            .return_values(ReturnValue::UpdatedNew)
            .send()
            .await
            .map_err(|e| unavailable(e.into_service_error()))?;
        let number = counted
            .attributes
            .as_ref()
            .and_then(|item| get_n(item, "visits"))
            .ok_or_else(|| corrupt("visit counter"))?;
        Ok(Counted::Visit {
            number,
            rotation,
            order,
        })
    }
}
