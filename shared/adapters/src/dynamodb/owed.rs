//! Edits whose index writes do not fit one transaction (`domain::owed`): the owner's item (a
//! code or a department) is written together with the owed writes, inline when they fit, or
//! else as `OWED#<owner>#<n>` chunk items (`version`, `owed_put`, `owed_delete`: string sets
//! of entries). Each chunk then lands in one transaction with its index writes and the delete
//! of its chunk item conditioned on the edit's version: the fence. A later edit rewrites the
//! chunk items with its own version, so a chunk of the edit it replaced cannot land after it.
//!
//! Chunks fence on their own items, never on the owner's, so `CHUNKS_IN_FLIGHT` of them run
//! at once without DynamoDB cancelling them for touching one item concurrently. Only
//! `PutItem`, `UpdateItem` and `DeleteItem` go into the transactions: no `ConditionCheckItem`.

use super::conditions::ConditionalWriteError;
use super::{get_s, keys, n, tenant_key, unavailable, DynamoStore, Item};
use aws_sdk_dynamodb::types::{AttributeValue, Delete, Put, TransactWriteItem};
use domain::ids::TenantId;
use domain::owed::{Owed, CHUNKS_IN_FLIGHT, WRITES_PER_TRANSACTION};
use domain::StoreError;
use futures::{StreamExt, TryStreamExt};
use std::collections::BTreeSet;

/// DynamoDB's cap on items in one transaction.
const TRANSACTION_ITEMS: usize = 100;

/// What is still owed under an owner, and the chunk items holding it.
#[derive(Default)]
pub(crate) struct OwedRead {
    pub owed: Owed<String>,
    chunk_keys: BTreeSet<String>,
}

/// An edit of an owner: its item's write (conditioned on the version read), the version it
/// writes, what was owed before and what it owes now (`domain::owed::replan`).
pub(crate) struct OwedEdit<'a> {
    pub owner: &'a str,
    pub version: u64,
    pub owner_write: TransactWriteItem,
    pub before: OwedRead,
    pub plan: Owed<String>,
}

/// One index write of an owed entry: `true` to put (or add), `false` to delete (or remove).
pub(crate) type IndexWrite<'a> =
    &'a (dyn Fn(&str, bool) -> Result<TransactWriteItem, StoreError> + Sync);

fn set_of(item: &Item, name: &str) -> BTreeSet<String> {
    match item.get(name) {
        Some(AttributeValue::Ss(set)) => set.iter().cloned().collect(),
        _ => BTreeSet::new(),
    }
}

fn string_set(values: &BTreeSet<String>) -> Option<AttributeValue> {
    (!values.is_empty()).then(|| AttributeValue::Ss(values.iter().cloned().collect()))
}

impl OwedRead {
    /// The chunk items holding what is owed.
    pub fn chunk_keys(&self) -> &BTreeSet<String> {
        &self.chunk_keys
    }
}

impl DynamoStore {
    /// The owed chunks of `owner` (one query).
    pub(crate) async fn read_owed(
        &self,
        tenant: &TenantId,
        owner: &str,
    ) -> Result<OwedRead, StoreError> {
        let mut read = OwedRead {
            owed: Owed::default(),
            chunk_keys: BTreeSet::new(),
        };
        for item in self
            .query_tenant(tenant, &keys::owed_of(owner), false)
            .await?
        {
            if let Some(sk) = get_s(&item, keys::SK) {
                read.chunk_keys.insert(sk.to_owned());
            }
            read.owed.absorb(Owed {
                put: set_of(&item, "owed_put"),
                delete: set_of(&item, "owed_delete"),
            });
        }
        Ok(read)
    }

    /// Writes `owner_write` (conditioned by its caller on the owner's version) with the
    /// `plan` it owes, then lands the owed chunks fenced on `version`. `index_write` makes an
    /// entry's index write. Fails when another edit took over (its chunks are its own).
    pub(crate) async fn write_owed(
        &self,
        tenant: &TenantId,
        edit: OwedEdit<'_>,
        index_write: IndexWrite<'_>,
    ) -> Result<(), StoreError> {
        let OwedEdit {
            owner,
            version,
            owner_write,
            before,
            plan,
        } = edit;
        let mut first = vec![owner_write];
        let stale = |keep: &BTreeSet<String>| -> Result<Vec<TransactWriteItem>, StoreError> {
            before
                .chunk_keys
                .difference(keep)
                .map(|sk| {
                    Ok(TransactWriteItem::builder()
                        .delete(
                            Delete::builder()
                                .table_name(&self.table)
                                .set_key(Some(tenant_key(tenant, sk.clone())))
                                .build()
                                .map_err(unavailable)?,
                        )
                        .build())
                })
                .collect()
        };
        // Small edits (the usual ones) stay one transaction, with nothing recorded as owed.
        if 1 + before.chunk_keys.len() + plan.len() <= TRANSACTION_ITEMS {
            first.extend(stale(&BTreeSet::new())?);
            for (entry, put) in plan.entries() {
                first.push(index_write(entry, put)?);
            }
            return self.transact(first).await.map(|_| ());
        }
        let chunks = plan.chunks(WRITES_PER_TRANSACTION);
        let chunk_keys: BTreeSet<String> =
            (0..chunks.len()).map(|i| keys::owed(owner, i)).collect();
        let stale = stale(&chunk_keys)?;
        if 1 + chunks.len() + stale.len() > TRANSACTION_ITEMS {
            return Err(StoreError::new(
                "table",
                format!("an edit of {owner} owes more index writes than one edit may"),
            ));
        }
        first.extend(stale);
        for (i, chunk) in chunks.iter().enumerate() {
            let mut item = tenant_key(tenant, keys::owed(owner, i));
            item.insert("version".into(), n(version));
            if let Some(set) = string_set(&chunk.put) {
                item.insert("owed_put".into(), set);
            }
            if let Some(set) = string_set(&chunk.delete) {
                item.insert("owed_delete".into(), set);
            }
            first.push(self.put_in_transaction(item)?);
        }
        self.transact(first).await?;
        futures::stream::iter(chunks.into_iter().enumerate())
            .map(|(i, chunk)| self.land_chunk(tenant, owner, i, version, chunk, index_write))
            .buffer_unordered(CHUNKS_IN_FLIGHT)
            .try_collect::<Vec<()>>()
            .await?;
        Ok(())
    }

    async fn land_chunk(
        &self,
        tenant: &TenantId,
        owner: &str,
        i: usize,
        version: u64,
        chunk: Owed<String>,
        index_write: IndexWrite<'_>,
    ) -> Result<(), StoreError> {
        let mut writes = chunk
            .entries()
            .map(|(entry, put)| index_write(entry, put))
            .collect::<Result<Vec<_>, _>>()?;
        let fence_at = writes.len();
        writes.push(
            TransactWriteItem::builder()
                .delete(
                    Delete::builder()
                        .table_name(&self.table)
                        .set_key(Some(tenant_key(tenant, keys::owed(owner, i))))
                        .condition_expression("version = :v")
                        .expression_attribute_values(":v", n(version))
                        .build()
                        .map_err(unavailable)?,
                )
                .build(),
        );
        if self.transact(writes).await? == Some(fence_at) {
            return Err(StoreError::new(
                "table",
                format!("another edit of {owner} took over its index writes"),
            ));
        }
        Ok(())
    }

    /// One `TransactWriteItems`; `Ok(Some(i))` when it was cancelled because item `i`'s
    /// condition failed, `i` > 0 (every other failure, a refused first item included, is an
    /// error).
    async fn transact(&self, items: Vec<TransactWriteItem>) -> Result<Option<usize>, StoreError> {
        match self
            .client
            .transact_write_items()
            .set_transact_items(Some(items))
            .send()
            .await
        {
            Ok(_) => Ok(None),
            Err(error) => {
                let refused = error.refused_or_unavailable()?;
                match refused.first_refused_item() {
                    0 => Err(refused.into_unavailable()),
                    i => Ok(Some(i)),
                }
            }
        }
    }
}

impl DynamoStore {
    /// An unconditional put, as one item of a transaction.
    pub(super) fn put_in_transaction(&self, item: Item) -> Result<TransactWriteItem, StoreError> {
        let put = Put::builder()
            .table_name(&self.table)
            .set_item(Some(item))
            .build()
            .map_err(unavailable)?;
        Ok(TransactWriteItem::builder().put(put).build())
    }

    /// An unconditional delete, as one item of a transaction.
    pub(super) fn delete_in_transaction(&self, key: Item) -> Result<TransactWriteItem, StoreError> {
        let delete = Delete::builder()
            .table_name(&self.table)
            .set_key(Some(key))
            .build()
            .map_err(unavailable)?;
        Ok(TransactWriteItem::builder().delete(delete).build())
    }
}
