//! The schedule tick's due index and cursor on the single table (`domain::schedules` explains
//! the design), the staff schedules the admin API stores, and the quota loop's claims as the
//! day rollover reads them.
//!
//! A due item is `pk = TENANT#t, sk = DUE#SHIFTS | DUE#MIDNIGHT` with `gsi1pk` = its minute
//! and shard (`DUE#202611300900#3`) and `gsi1sk` = tenant, subject and the time its moments
//! were handled through, so a minute's items are `DUE_SHARDS` index queries and never a scan.
//! Each subject has one item: moving it to its next moment is an update of `gsi1pk`.

use super::conditions::ConditionalWriteError;
use super::{get_n, get_s, key, keys, n, s, tenant_key, unavailable, DynamoStore, Item};
use domain::facts::TenantProfiles;
use domain::ids::TenantId;
use domain::ids::{CodeId, StaffId};
use domain::membership::{Limit, WeeklySchedule};
use domain::schedules::{
    CursorLease, Due, DueIndex, DueWriter, LimitReached, Minute, ScheduleFacts, Subject,
};
use domain::tenants::Timezone;
use domain::StoreError;

const NEXT_MINUTE: &str = "next_minute";
const DUE_AT: &str = "due_at_ms";

fn cursor_key() -> Item {
    key(
        keys::TICK_CURSOR_PK.to_owned(),
        keys::TICK_CURSOR_SK.to_owned(),
    )
}

pub(crate) fn limit_named(name: &str) -> Option<Limit> {
    [Limit::CodeTotal, Limit::CodeDaily, Limit::CompanyDaily]
        .into_iter()
        .find(|limit| limit.name() == name)
}

/// A due item as an index query answers it (keys only): its tenant and subject from the
/// table's keys, its minute from the index partition, its handled-through time from the index
/// sort key.
fn due_from(item: &Item, minute: Minute) -> Option<Due> {
    let tenant = keys::tenant_of_home(get_s(item, keys::PK)?)?;
    Some(Due {
        tenant: TenantId::parse(tenant).ok()?,
        subject: keys::due_subject(get_s(item, keys::SK)?)?,
        minute,
        handled_through_ms: get_s(item, keys::GSI1_SK).and_then(keys::due_handled_through),
    })
}

impl DynamoStore {
    /// Stores a staff member's schedule (`None` removes it) and the time it was set. A write
    /// older than the stored one is dropped (answered `false`), so two racing admin writes
    /// leave the later one, as for the other staff facts.
    pub async fn set_staff_schedule(
        &self,
        tenant: &TenantId,
        staff: &StaffId,
        schedule: Option<&WeeklySchedule>,
        now_ms: u64,
    ) -> Result<bool, StoreError> {
        let update = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(tenant_key(tenant, keys::staff(staff))))
            .condition_expression("attribute_not_exists(#at) OR #at <= :now")
            .expression_attribute_names("#schedule", "schedule")
            .expression_attribute_names("#at", "schedule_at_ms")
            .expression_attribute_names("#spk", keys::GSI2_PK)
            .expression_attribute_names("#ssk", keys::GSI2_SK)
            .expression_attribute_values(":now", n(now_ms));
        // A scheduled staff member is listed in gsi2 under the tenant, with the schedule
        // projected (`keys::schedules_index`): the tick's one query per tenant.
        let update = match schedule {
            Some(schedule) => {
                let json =
                    serde_json::to_string(schedule).map_err(|e| StoreError::new("table", e))?;
                update
                    .update_expression(
                        "SET #schedule = :schedule, #at = :now, #spk = :spk, #ssk = :ssk",
                    )
                    .expression_attribute_values(":schedule", s(json))
                    .expression_attribute_values(":spk", s(keys::schedules_index(tenant)))
                    .expression_attribute_values(":ssk", s(staff.as_str()))
            }
            None => update.update_expression("REMOVE #schedule, #spk, #ssk SET #at = :now"),
        };
        match update.send().await {
            Ok(_) => Ok(true),
            Err(error) => error.refused_or_unavailable().map(|_| false),
        }
    }

    /// Every page of an index query for one bucket.
    async fn bucket(&self, minute: Minute, shard: u32) -> Result<Vec<Due>, StoreError> {
        let mut found = Vec::new();
        let mut start = None;
        loop {
            let output = self
                .client
                .query()
                .table_name(&self.table)
                .index_name(keys::GSI1)
                .key_condition_expression("#gpk = :bucket")
                .expression_attribute_names("#gpk", keys::GSI1_PK)
                .expression_attribute_values(":bucket", s(keys::due_bucket(minute, shard)))
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(|e| unavailable(e.into_service_error()))?;
            for item in output.items.unwrap_or_default() {
                match due_from(&item, minute) {
                    Some(due) => found.push(due),
                    None => {
                        tracing::warn!(pk = ?get_s(&item, keys::PK), sk = ?get_s(&item, keys::SK), "unreadable due item in the index; skipped")
                    }
                }
            }
            start = output.last_evaluated_key;
            if start.is_none() {
                return Ok(found);
            }
        }
    }
}

#[async_trait::async_trait]
impl DueIndex for DynamoStore {
    async fn acquire(
        &self,
        owner: &str,
        now_ms: u64,
        lease_until_ms: u64,
    ) -> Result<CursorLease, StoreError> {
        let cursor = (keys::TICK_CURSOR_PK, keys::TICK_CURSOR_SK);
        Ok(
            match self
                .take_run_lease(cursor, owner, now_ms, lease_until_ms)
                .await?
            {
                Some(item) => CursorLease::Acquired {
                    next: get_n::<u64>(&item, NEXT_MINUTE).map(Minute::from_u64),
                },
                None => CursorLease::HeldElsewhere,
            },
        )
    }

    async fn advance(
        &self,
        owner: &str,
        from: Option<Minute>,
        to: Minute,
    ) -> Result<bool, StoreError> {
        let update = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(cursor_key()))
            .update_expression("SET #next = :to")
            .expression_attribute_names("#owner", "owner")
            .expression_attribute_names("#next", NEXT_MINUTE)
            .expression_attribute_values(":owner", s(owner))
            .expression_attribute_values(":to", n(to.as_u64()));
        let update = match from {
            Some(from) => update
                .condition_expression("#owner = :owner AND #next = :from")
                .expression_attribute_values(":from", n(from.as_u64())),
            None => update.condition_expression("#owner = :owner AND attribute_not_exists(#next)"),
        };
        match update.send().await {
            Ok(_) => Ok(true),
            Err(error) => error.refused_or_unavailable().map(|_| false),
        }
    }

    async fn release(&self, owner: &str) -> Result<(), StoreError> {
        let cursor = (keys::TICK_CURSOR_PK, keys::TICK_CURSOR_SK);
        self.give_back_run_lease(cursor, owner).await
    }

    async fn due_in(&self, minute: Minute) -> Result<Vec<Due>, StoreError> {
        let shards = (0..keys::DUE_SHARDS).map(|shard| self.bucket(minute, shard));
        Ok(futures::future::try_join_all(shards)
            .await?
            .into_iter()
            .flatten()
            .collect())
    }

    async fn reschedule(
        &self,
        due: &Due,
        next: Option<Minute>,
        handled_through_ms: u64,
    ) -> Result<(), StoreError> {
        let shard = keys::due_shard(&due.tenant, &due.subject);
        let item_key = tenant_key(&due.tenant, keys::due(&due.subject));
        let old = s(keys::due_bucket(due.minute, shard));
        // A refusal means a writer moved or deleted the item since the tick read it: the
        // writer's version stands.
        match next {
            Some(next) => self
                .client
                .update_item()
                .table_name(&self.table)
                .set_key(Some(item_key))
                .update_expression("SET #gpk = :new, #gsk = :sort, #at = :at")
                .condition_expression("#gpk = :old")
                .expression_attribute_names("#gpk", keys::GSI1_PK)
                .expression_attribute_names("#gsk", keys::GSI1_SK)
                .expression_attribute_names("#at", DUE_AT)
                .expression_attribute_values(":new", s(keys::due_bucket(next, shard)))
                .expression_attribute_values(
                    ":sort",
                    s(keys::due_index_sort(
                        &due.tenant,
                        &due.subject,
                        handled_through_ms,
                    )),
                )
                .expression_attribute_values(":at", n(next.start_ms()))
                .expression_attribute_values(":old", old)
                .send()
                .await
                .map(|_| ())
                .or_else(|error| error.refused_or_unavailable().map(|_| ())),
            None => self
                .client
                .delete_item()
                .table_name(&self.table)
                .set_key(Some(item_key))
                .condition_expression("#gpk = :old")
                .expression_attribute_names("#gpk", keys::GSI1_PK)
                .expression_attribute_values(":old", old)
                .send()
                .await
                .map(|_| ())
                .or_else(|error| error.refused_or_unavailable().map(|_| ())),
        }
    }
}

#[async_trait::async_trait]
impl DueWriter for DynamoStore {
    async fn set_due(
        &self,
        tenant: &TenantId,
        subject: &Subject,
        minute: Minute,
        now_ms: u64,
    ) -> Result<(), StoreError> {
        let shard = keys::due_shard(tenant, subject);
        self.client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(tenant_key(tenant, keys::due(subject))))
            .update_expression("SET #gpk = :bucket, #gsk = if_not_exists(#gsk, :sort), #at = :at")
            .expression_attribute_names("#gpk", keys::GSI1_PK)
            .expression_attribute_names("#gsk", keys::GSI1_SK)
            .expression_attribute_names("#at", DUE_AT)
            .expression_attribute_values(":bucket", s(keys::due_bucket(minute, shard)))
            .expression_attribute_values(":sort", s(keys::due_index_sort(tenant, subject, now_ms)))
            .expression_attribute_values(":at", n(minute.start_ms()))
            .send()
            .await
            .map_err(|e| unavailable(e.into_service_error()))?;
        Ok(())
    }
}

#[async_trait::async_trait]
impl ScheduleFacts for DynamoStore {
    async fn timezone(&self, tenant: &TenantId) -> Result<Option<Timezone>, StoreError> {
        Ok(TenantProfiles::profile(self, tenant)
            .await?
            .map(|profile| profile.timezone))
    }

    async fn schedules(
        &self,
        tenant: &TenantId,
    ) -> Result<Vec<(StaffId, WeeklySchedule)>, StoreError> {
        let items: Vec<Item> = self
            .client
            .query()
            .table_name(&self.table)
            .index_name(keys::GSI2)
            .key_condition_expression("#spk = :spk")
            .projection_expression("#ssk, #schedule")
            .expression_attribute_names("#spk", keys::GSI2_PK)
            .expression_attribute_names("#ssk", keys::GSI2_SK)
            .expression_attribute_names("#schedule", "schedule")
            .expression_attribute_values(":spk", s(keys::schedules_index(tenant)))
            // An index is eventually consistent: a schedule write moves the tenant's item to
            // the next minute, and the tick walks a minute 15 s into it at the earliest
            // (`TickSettings::grace_ms`), far past an index's usual propagation (under a
            // second). Documented as a difference where it is not (docs/design/keys.md).
            .into_paginator()
            .items()
            .send()
            .collect::<Result<Vec<Item>, _>>()
            .await
            .map_err(|e| unavailable(e.into_service_error()))?;
        Ok(items
            .iter()
            .filter_map(|item| {
                let staff = get_s(item, keys::GSI2_SK)?;
                // Read as the recompute reads it (`staff_from`): an unreadable schedule is none.
                let schedule = serde_json::from_str(get_s(item, "schedule")?).ok()?;
                Some((StaffId::parse(staff).ok()?, schedule))
            })
            .collect())
    }

    async fn limits_reached(
        &self,
        tenant: &TenantId,
        first_day: &str,
        last_day: &str,
    ) -> Result<Vec<LimitReached>, StoreError> {
        // `REMOVED#<first>#` up to everything of `REMOVED#<last>#...` ('$' sorts after '#').
        let from = keys::limits_reached_on(first_day);
        let to = format!(
            "{}$",
            keys::limits_reached_on(last_day).trim_end_matches('#')
        );
        let mut claims = Vec::new();
        let mut start = None;
        loop {
            let output = self
                .client
                .query()
                .table_name(&self.table)
                .key_condition_expression("#pk = :pk AND #sk BETWEEN :from AND :to")
                .expression_attribute_names("#pk", keys::PK)
                .expression_attribute_names("#sk", keys::SK)
                .expression_attribute_values(":pk", s(keys::tenant(tenant)))
                .expression_attribute_values(":from", s(&from))
                .expression_attribute_values(":to", s(&to))
                .consistent_read(true)
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(|e| unavailable(e.into_service_error()))?;
            for item in output.items.unwrap_or_default() {
                let claim = (|| {
                    Some(LimitReached {
                        staff: StaffId::parse(get_s(&item, "staff")?).ok()?,
                        limit: limit_named(get_s(&item, "limit")?)?,
                        code: match get_s(&item, "code") {
                            Some(code) => Some(CodeId::parse(code).ok()?),
                            None => None,
                        },
                    })
                })();
                match claim {
                    Some(claim) => claims.push(claim),
                    None => {
                        tracing::warn!(sk = ?get_s(&item, keys::SK), "unreadable limit claim; skipped")
                    }
                }
            }
            start = output.last_evaluated_key;
            if start.is_none() {
                return Ok(claims);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_due_item_is_read_back_from_its_keys() {
        let tenant = TenantId::parse("t1").expect("valid");
        let minute = Minute::containing(1_796_000_000_000);
        let through = 1_795_999_999_999;
        for subject in [Subject::Shifts, Subject::Midnight] {
            let mut item = tenant_key(&tenant, keys::due(&subject));
            item.insert(
                keys::GSI1_SK.into(),
                s(keys::due_index_sort(&tenant, &subject, through)),
            );
            assert_eq!(
                due_from(&item, minute),
                Some(Due {
                    tenant: tenant.clone(),
                    subject,
                    minute,
                    handled_through_ms: Some(through),
                })
            );
        }
        let seat = tenant_key(&tenant, "SEAT#alice#c1".to_owned());
        assert_eq!(due_from(&seat, minute), None);
    }

    #[test]
    fn a_per_staff_item_of_the_layout_before_tenant_items_is_not_read_as_one() {
        let tenant = TenantId::parse("t1").expect("valid");
        let old = tenant_key(&tenant, "DUE#STAFF#alice".to_owned());
        assert_eq!(due_from(&old, Minute::containing(1_796_000_000_000)), None);
        assert_eq!(keys::due_handled_through("TENANT#t1#DUE#SHIFTS"), None);
    }

    #[test]
    fn due_items_spread_over_every_shard_and_keep_theirs() {
        let shards: std::collections::BTreeSet<u32> = (0..200)
            .map(|i| {
                let tenant = TenantId::parse(&format!("t{i}")).expect("valid");
                let shard = keys::due_shard(&tenant, &Subject::Shifts);
                assert_eq!(shard, keys::due_shard(&tenant, &Subject::Shifts));
                shard
            })
            .collect();
        assert_eq!(shards.len(), keys::DUE_SHARDS as usize);
    }

    #[test]
    fn the_claims_of_a_range_of_days_are_one_key_range() {
        let to = format!(
            "{}$",
            keys::limits_reached_on("2026-12-02").trim_end_matches('#')
        );
        let inside = "REMOVED#2026-12-02#code_daily#alice#c1";
        let after = "REMOVED#2026-12-03#code_daily#alice#c1";
        assert!(inside < to.as_str() && after > to.as_str());
        assert!(keys::limits_reached_on("2026-11-30").as_str() <= "REMOVED#2026-11-30#x");
        assert_eq!(limit_named("company_daily"), Some(Limit::CompanyDaily));
        assert_eq!(limit_named("weekly"), None);
    }
}
