//! Rule 10's items: the archive of accepted callbacks (`ARCHIVE#<tenant>#<UTC day>`, kept for
//! `CallbackArchiveDays` by the table's TTL) and each replay run's record (`REPLAY#<run>`).

use super::conditions::ConditionalWriteError;
use super::{
    get_n, get_s, key, keys, n, s, staff_from, tenant_key, unavailable, DynamoStore, Item,
};
use aws_sdk_dynamodb::types::AttributeValue;
use domain::ids::TenantId;
use domain::ids::{CodeId, StaffId};
use domain::intake::InboxMessage;
use domain::membership::Employment;
use domain::replay::{
    code_of_group, ArchivedCallback, CallbackArchive, CodeChange, EventLine, Progress, ReplayReads,
    ReplayRuns, RunRequest, RunStart, RunStatus, Selection, StaffDelta, WouldBe,
};
use domain::StoreError;

const DAY_MS: u64 = 24 * 3600 * 1000;
/// A run's record is kept for two weeks after it was last written.
const RUN_TTL_SECS: u64 = 14 * 24 * 3600;

fn run_expiry() -> AttributeValue {
    n(crate::clock::system_clock() / 1000 + RUN_TTL_SECS)
}

fn employment_from(raw: &str) -> Option<Employment> {
    match raw {
        "active" => Some(Employment::Active),
        "resigned" => Some(Employment::Resigned),
        "disabled" => Some(Employment::Disabled),
        _ => None,
    }
}

impl DynamoStore {
    /// Every item of `pk` whose sort key starts with `prefix` (all pages).
    async fn query_run_prefix(&self, pk: &str, prefix: &str) -> Result<Vec<Item>, StoreError> {
        let mut items = Vec::new();
        let mut start = None;
        loop {
            let page = self
                .client
                .query()
                .table_name(&self.table)
                .key_condition_expression("pk = :pk AND begins_with(sk, :prefix)")
                .expression_attribute_values(":pk", s(pk))
                .expression_attribute_values(":prefix", s(prefix))
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(|e| unavailable(e.into_service_error()))?;
            items.extend(page.items().iter().cloned());
            start = page.last_evaluated_key().cloned();
            if start.is_none() {
                return Ok(items);
            }
        }
    }
}

#[async_trait::async_trait]
impl CallbackArchive for DynamoStore {
    async fn keep(
        &self,
        message: &InboxMessage,
        group_id: &str,
        expires_at_secs: u64,
    ) -> Result<(), StoreError> {
        let mut item = key(
            keys::archive(&message.tenant, message.received_at_ms / DAY_MS),
            keys::archived(message.received_at_ms, &message.event_key),
        );
        item.insert("message".into(), s(message.to_json()));
        item.insert("received_at_ms".into(), n(message.received_at_ms));
        item.insert("event_key".into(), s(&message.event_key));
        if let Some(code) = code_of_group(group_id, &message.tenant) {
            item.insert("code".into(), s(code.as_str()));
        }
        item.insert(keys::EXPIRES_AT.into(), n(expires_at_secs));
        self.put(item).await
    }

    /// `after` is `<day>|<sort key>`: the day and the last key DynamoDB evaluated there.
    async fn page(
        &self,
        selection: &Selection,
        after: Option<&str>,
        limit: usize,
        now_secs: u64,
    ) -> Result<(Vec<ArchivedCallback>, Option<String>), StoreError> {
        let last_day = selection.to_ms / DAY_MS;
        let (mut day, mut start_sk) = match after.and_then(|a| a.split_once('|')) {
            Some((day, sk)) => (
                day.parse::<u64>()
                    .map_err(|e| StoreError::new("replay position", e))?,
                (!sk.is_empty()).then(|| sk.to_owned()),
            ),
            None => (selection.from_ms / DAY_MS, None),
        };
        let mut callbacks = Vec::new();
        while day <= last_day {
            let pk = keys::archive(&selection.tenant, day);
            let mut query = self
                .client
                .query()
                .table_name(&self.table)
                .key_condition_expression("pk = :pk AND sk BETWEEN :from AND :to")
                .expression_attribute_values(":pk", s(&pk))
                .expression_attribute_values(":from", s(format!("{:013}", selection.from_ms)))
                .expression_attribute_values(":to", s(format!("{:013}~", selection.to_ms)))
                // Expired but not yet deleted by the TTL (which may take days): not replayed.
                .expression_attribute_names("#expires", keys::EXPIRES_AT)
                .expression_attribute_values(":now", n(now_secs))
                .limit(i32::try_from(limit - callbacks.len()).unwrap_or(i32::MAX));
            query = match &selection.code {
                Some(code) => query
                    .filter_expression("#expires > :now AND code = :code")
                    .expression_attribute_values(":code", s(code.as_str())),
                None => query.filter_expression("#expires > :now"),
            };
            if let Some(sk) = &start_sk {
                query = query.set_exclusive_start_key(Some(key(pk.clone(), sk.clone())));
            }
            let answer = query
                .send()
                .await
                .map_err(|e| unavailable(e.into_service_error()))?;
            for item in answer.items() {
                let sk = get_s(item, keys::SK).unwrap_or_default();
                let message: InboxMessage = get_s(item, "message")
                    .and_then(|raw| serde_json::from_str(raw).ok())
                    .ok_or_else(|| super::corrupt("archived callback"))?;
                callbacks.push(ArchivedCallback {
                    position: format!("{day}|{sk}"),
                    message,
                });
            }
            start_sk = answer
                .last_evaluated_key()
                .and_then(|k| k.get(keys::SK))
                .and_then(|v| v.as_s().ok())
                .cloned();
            if start_sk.is_none() {
                day += 1;
            }
            if callbacks.len() >= limit {
                break;
            }
        }
        let next = (day <= last_day).then(|| format!("{day}|{}", start_sk.unwrap_or_default()));
        Ok((callbacks, next))
    }
}

#[async_trait::async_trait]
impl ReplayRuns for DynamoStore {
    async fn create(
        &self,
        run: &str,
        request: &RunRequest,
        now_ms: u64,
    ) -> Result<RunStart, StoreError> {
        let json = |e| StoreError::new("replay run", e);
        let request_json = serde_json::to_string(request).map_err(json)?;
        let mut item = key(keys::replay_run(run), keys::REPLAY_RUN_SK.to_owned());
        item.insert(
            "selection".into(),
            s(serde_json::to_string(&request.selection).map_err(json)?),
        );
        item.insert("tenant".into(), s(request.selection.tenant.as_str()));
        item.insert("apply".into(), AttributeValue::Bool(request.apply));
        item.insert("started_by".into(), s(&request.by));
        item.insert("request".into(), s(&request_json));
        item.insert("status".into(), s(RunStatus::Events.label()));
        item.insert("started_at_ms".into(), n(now_ms));
        item.insert("updated_at_ms".into(), n(now_ms));
        item.insert(keys::EXPIRES_AT.into(), run_expiry());
        match self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(pk)")
            .send()
            .await
        {
            Ok(_) => return Ok(RunStart::New),
            Err(error) => {
                error.refused_or_unavailable()?;
            }
        }
        // The run exists: the same request resumes it (its first page again), any other is
        // refused. A record from before requests were kept has none, and matches nothing.
        let kept = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(key(
                keys::replay_run(run),
                keys::REPLAY_RUN_SK.to_owned(),
            )))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| unavailable(e.into_service_error()))?;
        let same = kept
            .item()
            .and_then(|item| get_s(item, "request"))
            .and_then(|raw| serde_json::from_str::<RunRequest>(raw).ok())
            .is_some_and(|kept| &kept == request);
        Ok(if same {
            RunStart::Resumed
        } else {
            RunStart::Taken
        })
    }

    async fn first_sight(&self, run: &str, business_key: &str) -> Result<bool, StoreError> {
        let mut item = key(keys::replay_run(run), keys::replay_seen(business_key));
        item.insert(keys::EXPIRES_AT.into(), run_expiry());
        match self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(pk)")
            .send()
            .await
        {
            Ok(_) => Ok(true),
            Err(error) => error.refused_or_unavailable().map(|_| false),
        }
    }

    async fn note_add(
        &self,
        run: &str,
        code: &CodeId,
        staff: &StaffId,
        day: &str,
    ) -> Result<(), StoreError> {
        for sk in [
            keys::replay_note_add(code, staff, day),
            keys::replay_note_day(day, staff),
        ] {
            self.client
                .update_item()
                .table_name(&self.table)
                .set_key(Some(key(keys::replay_run(run), sk)))
                .update_expression(
                    "ADD adds :one SET staff = :staff, #day = :day, expires_at = :exp",
                )
                .expression_attribute_names("#day", "day")
                .expression_attribute_values(":one", n(1))
                .expression_attribute_values(":staff", s(staff.as_str()))
                .expression_attribute_values(":day", s(day))
                .expression_attribute_values(":exp", run_expiry())
                .send()
                .await
                .map_err(|e| unavailable(e.into_service_error()))?;
        }
        Ok(())
    }

    async fn note_employment(
        &self,
        run: &str,
        staff: &StaffId,
        employment: Employment,
        at_ms: u64,
    ) -> Result<(), StoreError> {
        let written = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(key(
                keys::replay_run(run),
                keys::replay_note_staff(staff),
            )))
            .update_expression(
                "SET staff = :staff, employment = :employment, at_ms = :at, expires_at = :exp",
            )
            .condition_expression("attribute_not_exists(at_ms) OR at_ms <= :at")
            .expression_attribute_values(":staff", s(staff.as_str()))
            .expression_attribute_values(":employment", s(super::employment_name(employment)))
            .expression_attribute_values(":at", n(at_ms))
            .expression_attribute_values(":exp", run_expiry())
            .send()
            .await;
        match written {
            Ok(_) => Ok(()),
            // A later change of the same staff member is noted already.
            Err(error) => error.refused_or_unavailable().map(|_| ()),
        }
    }

    async fn note_code(&self, run: &str, code: &CodeId) -> Result<(), StoreError> {
        self.client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(key(keys::replay_run(run), keys::replay_code(code))))
            .update_expression("SET code = :code, expires_at = :exp")
            .expression_attribute_values(":code", s(code.as_str()))
            .expression_attribute_values(":exp", run_expiry())
            .send()
            .await
            .map_err(|e| unavailable(e.into_service_error()))?;
        Ok(())
    }

    async fn record_event(&self, run: &str, line: &EventLine) -> Result<(), StoreError> {
        let mut item = key(keys::replay_run(run), keys::replay_event(&line.position));
        item.insert(
            "line".into(),
            s(serde_json::to_string(line).map_err(|e| StoreError::new("replay event", e))?),
        );
        item.insert(keys::EXPIRES_AT.into(), run_expiry());
        self.put(item).await
    }

    async fn record_code(&self, run: &str, change: &CodeChange) -> Result<(), StoreError> {
        self.client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(key(
                keys::replay_run(run),
                format!("CODE#{}", change.code),
            )))
            .update_expression("SET change = :change, would_change = :would")
            .expression_attribute_values(
                ":change",
                s(serde_json::to_string(change).map_err(|e| StoreError::new("replay code", e))?),
            )
            .expression_attribute_values(":would", AttributeValue::Bool(change.would_change))
            .send()
            .await
            .map_err(|e| unavailable(e.into_service_error()))?;
        Ok(())
    }

    async fn progress(
        &self,
        run: &str,
        delta: &Progress,
        status: RunStatus,
        now_ms: u64,
    ) -> Result<(), StoreError> {
        let counters = serde_json::to_value(delta).map_err(|e| StoreError::new("replay run", e))?;
        let mut update = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(key(
                keys::replay_run(run),
                keys::REPLAY_RUN_SK.to_owned(),
            )))
            .expression_attribute_names("#status", "status")
            .expression_attribute_values(":status", s(status.label()))
            .expression_attribute_values(":now", n(now_ms));
        let mut adds = Vec::new();
        if let Some(fields) = counters.as_object() {
            for (index, (name, value)) in fields.iter().enumerate() {
                update = update
                    .expression_attribute_names(format!("#c{index}"), name)
                    .expression_attribute_values(
                        format!(":c{index}"),
                        n(value.as_u64().unwrap_or(0)),
                    );
                adds.push(format!("#c{index} :c{index}"));
            }
        }
        update
            .update_expression(format!(
                "SET #status = :status, updated_at_ms = :now ADD {}",
                adds.join(", ")
            ))
            .send()
            .await
            .map_err(|e| unavailable(e.into_service_error()))?;
        Ok(())
    }

    async fn codes(
        &self,
        run: &str,
        after: Option<&CodeId>,
        limit: usize,
    ) -> Result<Vec<CodeId>, StoreError> {
        let pk = keys::replay_run(run);
        let answer = self
            .client
            .query()
            .table_name(&self.table)
            .key_condition_expression("pk = :pk AND begins_with(sk, :prefix)")
            .expression_attribute_values(":pk", s(&pk))
            .expression_attribute_values(":prefix", s("CODE#"))
            .set_exclusive_start_key(after.map(|code| key(pk.clone(), keys::replay_code(code))))
            .limit(i32::try_from(limit).unwrap_or(i32::MAX))
            .send()
            .await
            .map_err(|e| unavailable(e.into_service_error()))?;
        Ok(answer
            .items()
            .iter()
            .filter_map(|item| CodeId::parse(get_s(item, "code")?).ok())
            .collect())
    }

    /// Reads the code's add notes and the run's notes of `today` and of employment: a run
    /// notes at most one item per add and per staff member it would change, and a dry run
    /// is bounded by its window.
    async fn would_be(
        &self,
        run: &str,
        code: &CodeId,
        staff: &[StaffId],
        today: &str,
    ) -> Result<WouldBe, StoreError> {
        let pk = keys::replay_run(run);
        let mut would = WouldBe::default();
        let note_staff =
            |item: &Item| get_s(item, "staff").and_then(|raw| StaffId::parse(raw).ok());
        for item in self
            .query_run_prefix(&pk, &format!("NOTE#ADD#{code}#"))
            .await?
        {
            let Some(id) = note_staff(&item) else {
                continue;
            };
            let adds: u32 = get_n(&item, "adds").unwrap_or(0);
            let delta = would.adds.entry(id).or_insert_with(StaffDelta::default);
            delta.on_code_total += adds;
            if get_s(&item, "day") == Some(today) {
                delta.on_code += adds;
            }
        }
        for item in self
            .query_run_prefix(&pk, &format!("NOTE#DAY#{today}#"))
            .await?
        {
            let Some(id) = note_staff(&item) else {
                continue;
            };
            if staff.contains(&id) {
                let delta = would.adds.entry(id).or_insert_with(StaffDelta::default);
                delta.all_codes += get_n::<u32>(&item, "adds").unwrap_or(0);
            }
        }
        for item in self.query_run_prefix(&pk, "NOTE#STAFF#").await? {
            let Some(id) = note_staff(&item) else {
                continue;
            };
            if let Some(employment) = get_s(&item, "employment").and_then(employment_from) {
                if staff.contains(&id) {
                    would.employment.insert(id, employment);
                }
            }
        }
        Ok(would)
    }
}

#[async_trait::async_trait]
impl ReplayReads for DynamoStore {
    async fn add_counted(&self, tenant: &TenantId, business_key: &str) -> Result<bool, StoreError> {
        let answer = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(tenant_key(tenant, keys::claim(business_key))))
            .projection_expression("pk")
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| unavailable(e.into_service_error()))?;
        Ok(answer.item().is_some())
    }

    async fn employment(
        &self,
        tenant: &TenantId,
        staff: &StaffId,
    ) -> Result<Option<Employment>, StoreError> {
        let answer = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(tenant_key(tenant, keys::staff(staff))))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| unavailable(e.into_service_error()))?;
        Ok(answer.item().map(|item| staff_from(item).employment))
    }
}
