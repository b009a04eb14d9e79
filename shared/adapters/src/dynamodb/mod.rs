//! The DynamoDB adapter: one table holds every item, and `DynamoStore` implements every port
//! that reads or writes it. `keys` is the only place that knows how items are keyed.

mod admin;
mod budget;
mod codes;
mod conditions;
mod dirty;
mod due;
mod failure_marks;
pub mod keys;
mod leases;
mod ledger;
mod owed;
mod pages;
mod replay;
mod retiring_links;
mod run_lease;
mod seal_migration;
mod sealed;
mod staff;
mod sweep;
mod tenants;
mod tokens;

pub use budget::DynamoBudget;
pub use codes::{CodeRecord, SeatChange};
pub use pages::{PageSeen, PageTables};
pub use seal_migration::SealedCount;
pub use tenants::CALLBACK_PROJECTION;

use aws_sdk_dynamodb::types::AttributeValue;
use domain::ids::{CodeId, TenantId};
use domain::membership::{Employment, StaffFacts};
use domain::StoreError;
use std::collections::HashMap;

/// The waits between BatchGetItem rounds that left keys unprocessed (DynamoDB throttling),
/// 750 ms in all for one read: a snapshot must finish well inside its code's lease (8 s),
/// and a read still refused after them is better retried from the queue.
const BATCH_GET_BACKOFF_MS: [u64; 5] = [25, 50, 100, 200, 375];
/// Single-item requests of one call sent together (a staff member's department writes, the
/// queries of their departments' codes): bounded so one request never floods the table's
/// connection pool.
const ITEM_REQUESTS_IN_FLIGHT: usize = 16;

pub(crate) type Item = HashMap<String, AttributeValue>;

#[derive(Clone)]
pub struct DynamoStore {
    client: aws_sdk_dynamodb::Client,
    table: String,
    /// The landing page's own tables, for the functions that write or read pages.
    pages: Option<PageTables>,
    requests: RequestCounter,
    /// Seals and opens secret attributes (`sealed`); `None` in tools run without the keys.
    secrets: Option<std::sync::Arc<domain::secrets::Envelope>>,
}

impl DynamoStore {
    /// Wraps `client` so every request it sends (each retry included) is counted.
    pub fn new(client: aws_sdk_dynamodb::Client, table: String) -> Self {
        let requests = RequestCounter::default();
        let config = client
            .config()
            .to_builder()
            .interceptor(requests.clone())
            .build();
        Self {
            client: aws_sdk_dynamodb::Client::from_conf(config),
            table,
            pages: None,
            requests,
            secrets: None,
        }
    }

    /// Writes `item` whole, unconditionally (one `PutItem`).
    async fn put(&self, item: Item) -> Result<(), StoreError> {
        self.client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .send()
            .await
            .map_err(|e| unavailable(e.into_service_error()))?;
        Ok(())
    }

    /// Requests this store's client has transmitted since it was built (each retry counted):
    /// a function's report reads the difference over one invocation.
    pub fn requests_sent(&self) -> u64 {
        self.requests
            .sent
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// `requests_sent` by operation (`GetItem`, `TransactWriteItems`...), for comparing with
    /// what the scale simulation meters for the same domain call (`tests/scale_fidelity.rs`).
    pub fn requests_by_operation(&self) -> std::collections::BTreeMap<String, u64> {
        self.requests
            .by_operation
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

/// Counts the requests a client transmits, for the refresh tally's `store_requests` (the
/// bench's "DynamoDB requests per refresh"). A container runs one invocation at a time and a
/// refresh batch refreshes its codes one after another, so the requests sent since the last
/// tally write are the current refresh's, plus those of any refresh put off before it had a
/// tenant day to count in (it writes no tally of its own).
#[derive(Debug, Clone, Default)]
struct RequestCounter {
    sent: std::sync::Arc<std::sync::atomic::AtomicU64>,
    /// `sent` as it will be once the last tally write has gone out.
    at_last_tally: std::sync::Arc<std::sync::atomic::AtomicU64>,
    /// `sent` by operation, named by the request's `X-Amz-Target` (`DynamoDB_20120810.GetItem`).
    by_operation: std::sync::Arc<std::sync::Mutex<std::collections::BTreeMap<String, u64>>>,
}

impl RequestCounter {
    /// The requests since the last tally, the tally write about to be sent included.
    fn since_last_tally(&self) -> u64 {
        let after_this_write = self.sent.load(std::sync::atomic::Ordering::Relaxed) + 1;
        let before = self
            .at_last_tally
            .swap(after_this_write, std::sync::atomic::Ordering::Relaxed);
        after_this_write.saturating_sub(before)
    }
}

impl aws_sdk_dynamodb::config::Intercept for RequestCounter {
    fn name(&self) -> &'static str {
        "RequestCounter"
    }

    fn read_before_transmit(
        &self,
        context: &aws_sdk_dynamodb::config::interceptors::BeforeTransmitInterceptorContextRef<'_>,
        _runtime_components: &aws_sdk_dynamodb::config::RuntimeComponents,
        _cfg: &mut aws_sdk_dynamodb::config::ConfigBag,
    ) -> Result<(), aws_sdk_dynamodb::error::BoxError> {
        self.sent.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let target = context.request().headers().get("x-amz-target");
        let operation = target.map_or("unknown", |t| t.rsplit('.').next().unwrap_or(t));
        *self
            .by_operation
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry(operation.to_owned())
            .or_default() += 1;
        Ok(())
    }
}

fn unavailable(error: impl std::error::Error + Send + Sync + 'static) -> StoreError {
    StoreError::new("table", error)
}

fn s(value: impl Into<String>) -> AttributeValue {
    AttributeValue::S(value.into())
}

fn n(value: impl ToString) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

/// The key of a tenant's item with sort key `sk`, under the item's home (`keys::home`).
fn tenant_key(tenant: &TenantId, sk: String) -> Item {
    key(keys::home(tenant, &sk), sk)
}

fn key(pk: String, sk: String) -> Item {
    HashMap::from([(keys::PK.to_owned(), s(pk)), (keys::SK.to_owned(), s(sk))])
}

fn get_s<'a>(item: &'a Item, name: &str) -> Option<&'a str> {
    item.get(name)
        .and_then(|v| v.as_s().ok())
        .map(String::as_str)
}

fn get_n<T: std::str::FromStr>(item: &Item, name: &str) -> Option<T> {
    item.get(name)
        .and_then(|v| v.as_n().ok())
        .and_then(|v| v.parse().ok())
}

fn get_bool(item: &Item, name: &str) -> Option<bool> {
    item.get(name).and_then(|v| v.as_bool().ok()).copied()
}

/// A list of strings, or a string set (in DynamoDB's order).
fn get_strings(item: &Item, name: &str) -> Vec<String> {
    match item.get(name) {
        Some(AttributeValue::L(list)) => {
            list.iter().filter_map(|v| v.as_s().ok().cloned()).collect()
        }
        Some(AttributeValue::Ss(set)) => set.clone(),
        _ => Vec::new(),
    }
}

fn strings(values: impl IntoIterator<Item = impl Into<String>>) -> AttributeValue {
    AttributeValue::L(values.into_iter().map(|v| s(v)).collect())
}

fn corrupt(what: &str) -> StoreError {
    StoreError::new("table", format!("stored item is malformed: {what}"))
}

/// A staff item as the recompute reads it; absent attributes mean "not known": offline,
/// active, not rejected.
pub(crate) fn staff_from(item: &Item) -> StaffFacts {
    StaffFacts {
        online: get_bool(item, "online").unwrap_or(false),
        employment: match get_s(item, "employment") {
            Some("resigned") => Employment::Resigned,
            Some("disabled") => Employment::Disabled,
            _ => Employment::Active,
        },
        rejected_by_wecom: get_bool(item, "rejected_by_wecom").unwrap_or(false),
        // An unreadable schedule is treated as none: the admin API validates what it stores.
        schedule: get_s(item, "schedule").and_then(|raw| serde_json::from_str(raw).ok()),
    }
}

pub(crate) fn employment_name(employment: Employment) -> &'static str {
    match employment {
        Employment::Active => "active",
        Employment::Resigned => "resigned",
        Employment::Disabled => "disabled",
    }
}

impl DynamoStore {
    /// Every item of a tenant whose sort key starts with `prefix` (a query of the prefix's
    /// home, never a scan), following pages; `keys_only` reads just the keys. A prefix that
    /// spans homes (`keys::spans_homes`: every code, every push log) has no one query: an
    /// error, so a caller that needs it goes through an index.
    pub(crate) async fn query_tenant(
        &self,
        tenant: &TenantId,
        prefix: &str,
        keys_only: bool,
    ) -> Result<Vec<Item>, StoreError> {
        if keys::spans_homes(prefix) {
            return Err(StoreError::new(
                "table",
                format!("items under {prefix} live under many partition keys: read them through an index"),
            ));
        }
        let mut items = Vec::new();
        let mut start = None;
        loop {
            let mut query = self
                .client
                .query()
                .table_name(&self.table)
                .key_condition_expression("#pk = :pk AND begins_with(#sk, :prefix)")
                .expression_attribute_names("#pk", keys::PK)
                .expression_attribute_names("#sk", keys::SK)
                .expression_attribute_values(":pk", s(keys::home(tenant, prefix)))
                .expression_attribute_values(":prefix", s(prefix))
                .consistent_read(true)
                .set_exclusive_start_key(start);
            if keys_only {
                query = query.projection_expression("#pk, #sk");
            }
            let output = query
                .send()
                .await
                .map_err(|e| unavailable(e.into_service_error()))?;
            items.extend(output.items.unwrap_or_default());
            start = output.last_evaluated_key;
            if start.is_none() {
                return Ok(items);
            }
        }
    }

    /// The first `limit` entries (keys only) of `gsi1` partition `partition` whose sort key,
    /// which starts with a 13-digit time, is before `before_ms`: one query of an index kept
    /// in time order (open claims, creation intents, resigned staff).
    pub(crate) async fn index_before(
        &self,
        partition: &str,
        before_ms: u64,
        limit: usize,
    ) -> Result<Vec<Item>, StoreError> {
        self.index_before_after(partition, before_ms, None, limit)
            .await
    }

    /// `index_before`, from after `start` (the keys of an entry: the table's and the index's).
    pub(crate) async fn index_before_after(
        &self,
        partition: &str,
        before_ms: u64,
        start: Option<Item>,
        limit: usize,
    ) -> Result<Vec<Item>, StoreError> {
        let output = self
            .client
            .query()
            .table_name(&self.table)
            .index_name(keys::GSI1)
            .set_exclusive_start_key(start)
            .key_condition_expression("#gpk = :gpk AND #gsk < :before")
            .expression_attribute_names("#gpk", keys::GSI1_PK)
            .expression_attribute_names("#gsk", keys::GSI1_SK)
            .expression_attribute_values(":gpk", s(partition))
            .expression_attribute_values(":before", s(format!("{before_ms:013}")))
            .limit(i32::try_from(limit).unwrap_or(i32::MAX))
            .send()
            .await
            .map_err(|e| unavailable(e.into_service_error()))?;
        Ok(output.items.unwrap_or_default())
    }

    /// A tenant's code ids from `gsi1` (`keys::codes_index`), in id order, those after
    /// `after`, at most `limit` (every one when `None`). The index is eventually consistent: a
    /// code created a moment ago may be missing from it, and one deleted a moment ago still
    /// listed (its item then reads as absent).
    pub async fn code_ids(
        &self,
        tenant: &TenantId,
        after: Option<&CodeId>,
        limit: Option<usize>,
    ) -> Result<Vec<CodeId>, StoreError> {
        self.index_sort_keys(&keys::codes_index(tenant), after.map(CodeId::as_str), limit)
            .await?
            .iter()
            .map(|id| CodeId::parse(id).map_err(|_| corrupt("code index entry")))
            .collect()
    }

    /// The sort keys of `gsi1` partition `partition` after `after`, in order, at most `limit`
    /// (all when `None`), following pages: a registry kept in an index partition (the
    /// tenants, a tenant's codes).
    pub(crate) async fn index_sort_keys(
        &self,
        partition: &str,
        after: Option<&str>,
        limit: Option<usize>,
    ) -> Result<Vec<String>, StoreError> {
        let mut found = Vec::new();
        if limit == Some(0) {
            return Ok(found);
        }
        let mut start = None;
        loop {
            let wanted = limit.map(|limit| limit.saturating_sub(found.len()));
            let query = self
                .client
                .query()
                .table_name(&self.table)
                .index_name(keys::GSI1)
                .expression_attribute_names("#gpk", keys::GSI1_PK)
                .expression_attribute_values(":gpk", s(partition))
                .set_limit(wanted.map(|w| i32::try_from(w).unwrap_or(i32::MAX)))
                .set_exclusive_start_key(start);
            let query = match after {
                Some(after) => query
                    .key_condition_expression("#gpk = :gpk AND #gsk > :after")
                    .expression_attribute_names("#gsk", keys::GSI1_SK)
                    .expression_attribute_values(":after", s(after)),
                None => query.key_condition_expression("#gpk = :gpk"),
            };
            let output = query
                .send()
                .await
                .map_err(|e| unavailable(e.into_service_error()))?;
            for item in output.items.unwrap_or_default() {
                let sort = get_s(&item, keys::GSI1_SK).ok_or_else(|| corrupt("index entry"))?;
                found.push(sort.to_owned());
            }
            start = output.last_evaluated_key;
            let full = limit.is_some_and(|limit| found.len() >= limit);
            if start.is_none() || full {
                return Ok(found);
            }
        }
    }

    /// The rest of each sort key under `prefix`, e.g. the code ids of `SEAT#{staff}#`.
    pub(crate) async fn keys_under(
        &self,
        tenant: &TenantId,
        prefix: &str,
    ) -> Result<Vec<String>, StoreError> {
        Ok(self
            .query_tenant(tenant, prefix, true)
            .await?
            .iter()
            .filter_map(|item| {
                get_s(item, keys::SK)?
                    .strip_prefix(prefix)
                    .map(str::to_owned)
            })
            .collect())
    }

    /// Strongly consistent `BatchGetItem` of any number of keys, retrying unprocessed keys.
    /// BatchGetItem answers at most 100 keys per request, so a large read takes several.
    async fn batch_get(&self, keys: Vec<Item>) -> Result<Vec<Item>, StoreError> {
        let mut found = Vec::with_capacity(keys.len());
        // One allowance for the whole read, however many chunks it takes.
        let mut backoffs = BATCH_GET_BACKOFF_MS.iter();
        for chunk in keys.chunks(100) {
            let mut pending = chunk.to_vec();
            while !pending.is_empty() {
                let request = aws_sdk_dynamodb::types::KeysAndAttributes::builder()
                    .set_keys(Some(pending))
                    .consistent_read(true)
                    .build()
                    .map_err(unavailable)?;
                let output = self
                    .client
                    .batch_get_item()
                    .request_items(&self.table, request)
                    .send()
                    .await
                    .map_err(|e| unavailable(e.into_service_error()))?;
                if let Some(mut responses) = output.responses {
                    found.extend(responses.remove(&self.table).unwrap_or_default());
                }
                pending = output
                    .unprocessed_keys
                    .and_then(|mut u| u.remove(&self.table))
                    .map(|k| k.keys)
                    .unwrap_or_default();
                if !pending.is_empty() {
                    // Unprocessed keys mean throttling: back off before asking again, but
                    // never longer in all than `BATCH_GET_BACKOFF_MS` adds up to, so a
                    // snapshot stays well inside its code's lease; after that the refresh
                    // fails as the table unavailable and its reasons come back.
                    let Some(backoff_ms) = backoffs.next() else {
                        return Err(StoreError::new(
                            "table",
                            "BatchGetItem left keys unprocessed",
                        ));
                    };
                    tokio::time::sleep(std::time::Duration::from_millis(*backoff_ms)).await;
                }
            }
        }
        Ok(found)
    }
}

#[cfg(test)]
mod request_counter_tests {
    use super::RequestCounter;
    use std::sync::atomic::Ordering;

    #[test]
    fn each_tally_counts_the_requests_since_the_last_one_and_its_own_write() {
        let counter = RequestCounter::default();
        counter.sent.fetch_add(4, Ordering::Relaxed);
        assert_eq!(counter.since_last_tally(), 5);
        // The tally write goes out, then the next refresh sends two requests.
        counter.sent.fetch_add(1 + 2, Ordering::Relaxed);
        assert_eq!(counter.since_last_tally(), 3);
    }
}
