//! The dirty set on the table (`domain::dirty`): `pk = TENANT#t, sk = DIRTY#<code>` with when
//! and why the latest mark was made, the resyncs sent, and when the next is due. `gsi1pk` is
//! one of `DIRTY_SHARDS` partitions and `gsi1sk` starts with the due time, so the due marks
//! are one key-range query per shard, never a scan. Marks carry no TTL: a mark that expired
//! would be a code given up on silently.
//!
//! A fan-out given up is `pk = TENANT#t, sk = FANOUT_MARK#<hash of its fact key>` holding the
//! fan-out (its JSON), when and why, the resends and when the next is due, in `gsi1` under
//! `FANOUT_MARKS` by due time (`keys::fan_out_mark`): the sweep's due fan-outs are one query.

use super::conditions::ConditionalWriteError;
use super::{get_n, get_s, key, keys, n, s, tenant_key, unavailable, DynamoStore, Item};
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue};
use domain::dirty::{DirtyMark, DirtyMarks, DirtyWhy, FanOutMark, FanOutMarks, StaleSuspect};
use domain::ids::CodeId;
use domain::ids::TenantId;
use domain::reasons::FanOut;
use domain::sweep::{DirtyIndex, FanOutIndex};
use domain::StoreError;

const MARKED_AT: &str = "marked_at_ms";
const WHY: &str = "why";
const RESYNCS: &str = "resyncs";
const DUE_AT: &str = "due_at_ms";
const FAN_OUT: &str = "fan_out";
/// A suspect's sample figures (`StaleSuspect`); absent on any other mark.
const SUSPECT_READ: &str = "suspect_sample_read";
const SUSPECT_DRIFTED: &str = "suspect_sample_drifted";
const RESENDS: &str = "resends";

fn mark_from(item: &Item) -> Option<DirtyMark> {
    let tenant = keys::tenant_of_home(get_s(item, keys::PK)?)?;
    let code = get_s(item, keys::SK)?.strip_prefix(keys::DIRTY_PREFIX)?;
    Some(DirtyMark {
        tenant: TenantId::parse(tenant).ok()?,
        code: CodeId::parse(code).ok()?,
        marked_at_ms: get_n(item, MARKED_AT)?,
        why: get_s(item, WHY).and_then(DirtyWhy::parse),
        resyncs: get_n(item, RESYNCS).unwrap_or(0),
        due_at_ms: get_n(item, DUE_AT).unwrap_or(0),
        suspect: get_n(item, SUSPECT_READ).map(|sample_read| StaleSuspect {
            sample_read,
            sample_drifted: get_n(item, SUSPECT_DRIFTED).unwrap_or(0),
        }),
    })
}

#[async_trait::async_trait]
impl DirtyMarks for DynamoStore {
    /// One conditional `UpdateItem`. A new mark is due at once; a renewed one keeps its due
    /// time and resync count, so a code that keeps failing keeps its growing wait. A mark
    /// older than the stored one changes nothing. A renewed suspect stops being one: a path
    /// gave up on the code, which is no longer a sighting to confirm.
    async fn mark_dirty(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        why: DirtyWhy,
        at_ms: u64,
    ) -> Result<(), StoreError> {
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(tenant_key(tenant, keys::dirty(code))))
            .update_expression(
                "SET #at = :at, #why = :why, #due = if_not_exists(#due, :at), \
                 #resyncs = if_not_exists(#resyncs, :zero), #gpk = :gpk, \
                 #gsk = if_not_exists(#gsk, :gsk) ADD failures :one \
                 REMOVE #suspect_read, #suspect_drifted",
            )
            .condition_expression("attribute_not_exists(#at) OR #at <= :at")
            .expression_attribute_names("#at", MARKED_AT)
            .expression_attribute_names("#why", WHY)
            .expression_attribute_names("#due", DUE_AT)
            .expression_attribute_names("#resyncs", RESYNCS)
            .expression_attribute_names("#gpk", keys::GSI1_PK)
            .expression_attribute_names("#gsk", keys::GSI1_SK)
            .expression_attribute_names("#suspect_read", SUSPECT_READ)
            .expression_attribute_names("#suspect_drifted", SUSPECT_DRIFTED)
            .expression_attribute_values(":at", n(at_ms))
            .expression_attribute_values(":why", s(why.label()))
            .expression_attribute_values(":zero", n(0))
            .expression_attribute_values(":one", n(1))
            .expression_attribute_values(":gpk", s(keys::dirty_bucket(tenant, code)))
            .expression_attribute_values(":gsk", s(keys::dirty_index_sort(at_ms, tenant, code)))
            .send()
            .await;
        match result {
            Ok(_) => Ok(()),
            // A newer mark is stored: it stands.
            Err(error) => error.refused_or_unavailable().map(|_| ()),
        }
    }

    /// One conditional `DeleteItem` (`marked_at_ms < began`), answering the old item.
    async fn clear_dirty(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        began_ms: u64,
    ) -> Result<Option<Option<DirtyWhy>>, StoreError> {
        let result = self
            .client
            .delete_item()
            .table_name(&self.table)
            .set_key(Some(tenant_key(tenant, keys::dirty(code))))
            .condition_expression("#at < :began")
            .expression_attribute_names("#at", MARKED_AT)
            .expression_attribute_values(":began", n(began_ms))
            .return_values(ReturnValue::AllOld)
            .send()
            .await;
        match result {
            Ok(output) => Ok(output
                .attributes
                .map(|old| get_s(&old, WHY).and_then(DirtyWhy::parse))),
            Err(error) => error.refused_or_unavailable().map(|_| None),
        }
    }

    /// The code's item of the day's report: repaired, no longer differing. Written even when
    /// the difference was found the day before (a repair after midnight): the day it was
    /// repaired counts it, as the report always has.
    async fn count_repaired(
        &self,
        tenant: &TenantId,
        day: &str,
        code: &CodeId,
    ) -> Result<(), StoreError> {
        self.client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(tenant_key(tenant, keys::drift_code(day, code))))
            .update_expression("SET repaired = :yes, latest_differs = :no, #expires = :expires")
            .expression_attribute_names("#expires", keys::EXPIRES_AT)
            .expression_attribute_values(":yes", AttributeValue::Bool(true))
            .expression_attribute_values(":no", AttributeValue::Bool(false))
            .expression_attribute_values(":expires", n(super::sweep::report_expires()))
            .send()
            .await
            .map_err(|e| unavailable(e.into_service_error()))?;
        Ok(())
    }
}

#[async_trait::async_trait]
impl DirtyIndex for DynamoStore {
    /// One query per shard for the keys of the marks due (`gsi1sk` below the next
    /// millisecond), then one strongly consistent batch read of the marks themselves (the
    /// index projects keys only).
    async fn due_marks(&self, now_ms: u64, limit: usize) -> Result<Vec<DirtyMark>, StoreError> {
        let upper = format!("{:013}", now_ms.saturating_add(1));
        let page = i32::try_from(limit).unwrap_or(i32::MAX);
        let mut keys_due = Vec::new();
        for shard in 0..keys::DIRTY_SHARDS {
            let output = self
                .client
                .query()
                .table_name(&self.table)
                .index_name(keys::GSI1)
                .key_condition_expression("#gpk = :gpk AND #gsk < :upper")
                .expression_attribute_names("#gpk", keys::GSI1_PK)
                .expression_attribute_names("#gsk", keys::GSI1_SK)
                .expression_attribute_values(":gpk", s(keys::dirty_shard(shard)))
                .expression_attribute_values(":upper", s(&upper))
                .limit(page)
                .send()
                .await
                .map_err(|e| unavailable(e.into_service_error()))?;
            for item in output.items.unwrap_or_default() {
                let (Some(pk), Some(sk), Some(sort)) = (
                    get_s(&item, keys::PK),
                    get_s(&item, keys::SK),
                    get_s(&item, keys::GSI1_SK),
                ) else {
                    continue;
                };
                keys_due.push((sort.to_owned(), key(pk.to_owned(), sk.to_owned())));
            }
        }
        keys_due.sort_by(|a, b| a.0.cmp(&b.0));
        keys_due.truncate(limit);
        let items = self
            .batch_get(keys_due.into_iter().map(|(_, key)| key).collect())
            .await?;
        let mut marks: Vec<DirtyMark> = items.iter().filter_map(mark_from).collect();
        // Cleared or moved since the query: only what is still due.
        marks.retain(|mark| mark.due_at_ms <= now_ms);
        marks.sort_by_key(|mark| mark.due_at_ms);
        Ok(marks)
    }

    /// One conditional `UpdateItem` that makes the mark only where none is.
    async fn mark_suspect(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        suspect: StaleSuspect,
        at_ms: u64,
        due_ms: u64,
    ) -> Result<(), StoreError> {
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(tenant_key(tenant, keys::dirty(code))))
            .update_expression(
                "SET #at = :at, #why = :why, #due = :due, #resyncs = :zero, #gpk = :gpk, \
                 #gsk = :gsk, #suspect_read = :read, #suspect_drifted = :drifted \
                 ADD failures :one",
            )
            .condition_expression("attribute_not_exists(#at)")
            .expression_attribute_names("#at", MARKED_AT)
            .expression_attribute_names("#why", WHY)
            .expression_attribute_names("#due", DUE_AT)
            .expression_attribute_names("#resyncs", RESYNCS)
            .expression_attribute_names("#gpk", keys::GSI1_PK)
            .expression_attribute_names("#gsk", keys::GSI1_SK)
            .expression_attribute_names("#suspect_read", SUSPECT_READ)
            .expression_attribute_names("#suspect_drifted", SUSPECT_DRIFTED)
            .expression_attribute_values(":at", n(at_ms))
            .expression_attribute_values(":why", s(DirtyWhy::Stale.label()))
            .expression_attribute_values(":due", n(due_ms))
            .expression_attribute_values(":zero", n(0))
            .expression_attribute_values(":one", n(1))
            .expression_attribute_values(":gpk", s(keys::dirty_bucket(tenant, code)))
            .expression_attribute_values(":gsk", s(keys::dirty_index_sort(due_ms, tenant, code)))
            .expression_attribute_values(":read", n(suspect.sample_read))
            .expression_attribute_values(":drifted", n(suspect.sample_drifted))
            .send()
            .await;
        match result {
            Ok(_) => Ok(()),
            // Marked already: that mark stands as it is.
            Err(error) => error.refused_or_unavailable().map(|_| ()),
        }
    }

    async fn resync_sent(
        &self,
        mark: &DirtyMark,
        resyncs: u32,
        next_due_ms: u64,
    ) -> Result<(), StoreError> {
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(tenant_key(&mark.tenant, keys::dirty(&mark.code))))
            .update_expression(
                "SET #resyncs = :resyncs, #due = :due, #gsk = :gsk \
                 REMOVE #suspect_read, #suspect_drifted",
            )
            .condition_expression("#at = :seen")
            .expression_attribute_names("#suspect_read", SUSPECT_READ)
            .expression_attribute_names("#suspect_drifted", SUSPECT_DRIFTED)
            .expression_attribute_names("#at", MARKED_AT)
            .expression_attribute_names("#resyncs", RESYNCS)
            .expression_attribute_names("#due", DUE_AT)
            .expression_attribute_names("#gsk", keys::GSI1_SK)
            .expression_attribute_values(":seen", n(mark.marked_at_ms))
            .expression_attribute_values(":resyncs", n(resyncs))
            .expression_attribute_values(":due", n(next_due_ms))
            .expression_attribute_values(
                ":gsk",
                s(keys::dirty_index_sort(
                    next_due_ms,
                    &mark.tenant,
                    &mark.code,
                )),
            )
            .send()
            .await;
        match result {
            Ok(_) => Ok(()),
            // Renewed or cleared since it was read.
            Err(error) => error.refused_or_unavailable().map(|_| ()),
        }
    }

    async fn drop_mark(&self, mark: &DirtyMark) -> Result<(), StoreError> {
        let result = self
            .client
            .delete_item()
            .table_name(&self.table)
            .set_key(Some(tenant_key(&mark.tenant, keys::dirty(&mark.code))))
            .condition_expression("#at = :seen")
            .expression_attribute_names("#at", MARKED_AT)
            .expression_attribute_values(":seen", n(mark.marked_at_ms))
            .send()
            .await;
        match result {
            Ok(_) => Ok(()),
            Err(error) => error.refused_or_unavailable().map(|_| ()),
        }
    }
}

fn fan_out_mark_from(item: &Item) -> Option<FanOutMark> {
    Some(FanOutMark {
        fan_out: serde_json::from_str(get_s(item, FAN_OUT)?).ok()?,
        marked_at_ms: get_n(item, MARKED_AT)?,
        why: get_s(item, WHY).and_then(DirtyWhy::parse),
        resends: get_n(item, RESENDS).unwrap_or(0),
        due_at_ms: get_n(item, DUE_AT).unwrap_or(0),
    })
}

fn fan_out_key(fan_out: &FanOut) -> Item {
    tenant_key(&fan_out.tenant, keys::fan_out_mark(&fan_out.mark_key()))
}

#[async_trait::async_trait]
impl FanOutMarks for DynamoStore {
    /// One conditional `UpdateItem`, as a code's mark: a new mark is due at once, a renewed
    /// one keeps its due time and resends, an older one changes nothing.
    async fn mark_fan_out(
        &self,
        fan_out: &FanOut,
        why: DirtyWhy,
        at_ms: u64,
    ) -> Result<(), StoreError> {
        let sk = keys::fan_out_mark(&fan_out.mark_key());
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(fan_out_key(fan_out)))
            .update_expression(
                "SET #fan_out = :fan_out, #at = :at, #why = :why, \
                 #due = if_not_exists(#due, :at), #resends = if_not_exists(#resends, :zero), \
                 #gpk = :gpk, #gsk = if_not_exists(#gsk, :gsk)",
            )
            .condition_expression("attribute_not_exists(#at) OR #at <= :at")
            .expression_attribute_names("#fan_out", FAN_OUT)
            .expression_attribute_names("#at", MARKED_AT)
            .expression_attribute_names("#why", WHY)
            .expression_attribute_names("#due", DUE_AT)
            .expression_attribute_names("#resends", RESENDS)
            .expression_attribute_names("#gpk", keys::GSI1_PK)
            .expression_attribute_names("#gsk", keys::GSI1_SK)
            .expression_attribute_values(":fan_out", s(fan_out.to_json()))
            .expression_attribute_values(":at", n(at_ms))
            .expression_attribute_values(":why", s(why.label()))
            .expression_attribute_values(":zero", n(0))
            .expression_attribute_values(":gpk", s(keys::FAN_OUT_MARKS))
            .expression_attribute_values(
                ":gsk",
                s(keys::fan_out_mark_sort(at_ms, &fan_out.tenant, &sk)),
            )
            .send()
            .await;
        match result {
            Ok(_) => Ok(()),
            // A newer mark is stored: it stands.
            Err(error) => error.refused_or_unavailable().map(|_| ()),
        }
    }

    /// One conditional `DeleteItem` (`marked_at_ms < began`).
    async fn clear_fan_out(&self, fan_out: &FanOut, began_ms: u64) -> Result<bool, StoreError> {
        let result = self
            .client
            .delete_item()
            .table_name(&self.table)
            .set_key(Some(fan_out_key(fan_out)))
            .condition_expression("#at < :began")
            .expression_attribute_names("#at", MARKED_AT)
            .expression_attribute_values(":began", n(began_ms))
            .send()
            .await;
        match result {
            Ok(_) => Ok(true),
            // No mark, or a newer one.
            Err(error) => error.refused_or_unavailable().map(|_| false),
        }
    }
}

#[async_trait::async_trait]
impl FanOutIndex for DynamoStore {
    /// One query on `FANOUT_MARKS` for the keys due, then one strongly consistent batch read
    /// of the marks (the index projects keys only).
    async fn due_fan_outs(&self, now_ms: u64, limit: usize) -> Result<Vec<FanOutMark>, StoreError> {
        let upper = format!("{:013}", now_ms.saturating_add(1));
        let output = self
            .client
            .query()
            .table_name(&self.table)
            .index_name(keys::GSI1)
            .key_condition_expression("#gpk = :gpk AND #gsk < :upper")
            .expression_attribute_names("#gpk", keys::GSI1_PK)
            .expression_attribute_names("#gsk", keys::GSI1_SK)
            .expression_attribute_values(":gpk", s(keys::FAN_OUT_MARKS))
            .expression_attribute_values(":upper", s(&upper))
            .limit(i32::try_from(limit).unwrap_or(i32::MAX))
            .send()
            .await
            .map_err(|e| unavailable(e.into_service_error()))?;
        let keys_due: Vec<Item> = output
            .items
            .unwrap_or_default()
            .iter()
            .filter_map(|item| {
                let pk = get_s(item, keys::PK)?;
                let sk = get_s(item, keys::SK)?;
                Some(key(pk.to_owned(), sk.to_owned()))
            })
            .collect();
        let items = self.batch_get(keys_due).await?;
        let mut marks: Vec<FanOutMark> = items.iter().filter_map(fan_out_mark_from).collect();
        // Cleared or moved since the query: only what is still due.
        marks.retain(|mark| mark.due_at_ms <= now_ms);
        marks.sort_by_key(|mark| mark.due_at_ms);
        Ok(marks)
    }

    async fn fan_out_resent(
        &self,
        mark: &FanOutMark,
        resends: u32,
        next_due_ms: u64,
    ) -> Result<(), StoreError> {
        let sk = keys::fan_out_mark(&mark.fan_out.mark_key());
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(fan_out_key(&mark.fan_out)))
            .update_expression("SET #resends = :resends, #due = :due, #gsk = :gsk")
            .condition_expression("#at = :seen")
            .expression_attribute_names("#at", MARKED_AT)
            .expression_attribute_names("#resends", RESENDS)
            .expression_attribute_names("#due", DUE_AT)
            .expression_attribute_names("#gsk", keys::GSI1_SK)
            .expression_attribute_values(":seen", n(mark.marked_at_ms))
            .expression_attribute_values(":resends", n(resends))
            .expression_attribute_values(":due", n(next_due_ms))
            .expression_attribute_values(
                ":gsk",
                s(keys::fan_out_mark_sort(
                    next_due_ms,
                    &mark.fan_out.tenant,
                    &sk,
                )),
            )
            .send()
            .await;
        match result {
            Ok(_) => Ok(()),
            // Renewed or cleared since it was read.
            Err(error) => error.refused_or_unavailable().map(|_| ()),
        }
    }
}
