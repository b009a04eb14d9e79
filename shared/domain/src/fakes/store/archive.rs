//! The archive of accepted callbacks, in memory.

use super::InMemoryStore;
use crate::ids::TenantId;
use crate::ids::{CodeId, StaffId};
use crate::intake::InboxMessage;
use crate::membership::Employment;
use crate::replay::{
    code_of_group, ArchivedCallback, CallbackArchive, CodeChange, EventLine, Progress, ReplayReads,
    ReplayRuns, RunRequest, RunStart, RunStatus, Selection, StaffDelta, WouldBe,
};
use crate::StoreError;
use std::collections::{BTreeSet, HashMap, HashSet};

impl InMemoryStore {
    /// The archived callbacks, in the order they were kept, with their expiry (seconds).
    pub fn archived(&self) -> Vec<(InboxMessage, u64)> {
        self.tables()
            .archive
            .iter()
            .map(|(message, _, expires)| (message.clone(), *expires))
            .collect()
    }
}

#[async_trait::async_trait]
impl CallbackArchive for InMemoryStore {
    async fn keep(
        &self,
        message: &InboxMessage,
        group_id: &str,
        expires_at_secs: u64,
    ) -> Result<(), StoreError> {
        let mut tables = self.available()?;
        let code = code_of_group(group_id, &message.tenant);
        tables
            .archive
            .retain(|(kept, _, _)| kept.event_key != message.event_key);
        tables
            .archive
            .push((message.clone(), code, expires_at_secs));
        Ok(())
    }

    async fn page(
        &self,
        selection: &Selection,
        after: Option<&str>,
        limit: usize,
        now_secs: u64,
    ) -> Result<(Vec<ArchivedCallback>, Option<String>), StoreError> {
        let tables = self.available()?;
        let mut matching: Vec<ArchivedCallback> = tables
            .archive
            .iter()
            .filter(|(message, code, expires_at_secs)| {
                *expires_at_secs > now_secs
                    && message.tenant == selection.tenant
                    && (selection.from_ms..=selection.to_ms).contains(&message.received_at_ms)
                    && selection
                        .code
                        .as_ref()
                        .is_none_or(|wanted| code.as_ref() == Some(wanted))
            })
            .map(|(message, _, _)| ArchivedCallback {
                position: format!("{:013}#{}", message.received_at_ms, message.event_key),
                message: message.clone(),
            })
            .collect();
        matching.sort_by(|a, b| a.position.cmp(&b.position));
        let page: Vec<ArchivedCallback> = matching
            .into_iter()
            .filter(|c| after.is_none_or(|after| c.position.as_str() > after))
            .take(limit + 1)
            .collect();
        let next = (page.len() > limit).then(|| page[limit - 1].position.clone());
        Ok((page.into_iter().take(limit).collect(), next))
    }
}

/// One replay run, as the table keeps it.
#[derive(Default)]
pub(super) struct Run {
    request: Option<RunRequest>,
    status: Option<RunStatus>,
    progress: Vec<Progress>,
    seen: HashSet<String>,
    adds: Vec<(CodeId, StaffId, String)>,
    employment: HashMap<StaffId, (Employment, u64)>,
    codes: BTreeSet<CodeId>,
    events: Vec<EventLine>,
    changes: Vec<CodeChange>,
}

impl InMemoryStore {
    /// The request a run's record keeps (who started it, and what).
    pub fn replay_request(&self, run: &str) -> Option<RunRequest> {
        self.tables().replays.get(run)?.request.clone()
    }

    /// A run's status, report lines and code changes.
    pub fn replay_run(
        &self,
        run: &str,
    ) -> Option<(Option<RunStatus>, Vec<EventLine>, Vec<CodeChange>)> {
        let tables = self.tables();
        let run = tables.replays.get(run)?;
        Some((run.status, run.events.clone(), run.changes.clone()))
    }
}

#[async_trait::async_trait]
impl ReplayRuns for InMemoryStore {
    async fn create(
        &self,
        run: &str,
        request: &RunRequest,
        _now_ms: u64,
    ) -> Result<RunStart, StoreError> {
        let mut tables = self.available()?;
        let kept = tables.replays.entry(run.to_owned()).or_default();
        Ok(match &kept.request {
            None => {
                kept.request = Some(request.clone());
                RunStart::New
            }
            Some(kept) if kept == request => RunStart::Resumed,
            Some(_) => RunStart::Taken,
        })
    }

    async fn first_sight(&self, run: &str, business_key: &str) -> Result<bool, StoreError> {
        let mut tables = self.available()?;
        Ok(tables
            .replays
            .entry(run.to_owned())
            .or_default()
            .seen
            .insert(business_key.to_owned()))
    }

    async fn note_add(
        &self,
        run: &str,
        code: &CodeId,
        staff: &StaffId,
        day: &str,
    ) -> Result<(), StoreError> {
        let mut tables = self.available()?;
        let entry = tables.replays.entry(run.to_owned()).or_default();
        entry
            .adds
            .push((code.clone(), staff.clone(), day.to_owned()));
        Ok(())
    }

    async fn note_employment(
        &self,
        run: &str,
        staff: &StaffId,
        employment: Employment,
        at_ms: u64,
    ) -> Result<(), StoreError> {
        let mut tables = self.available()?;
        let entry = tables.replays.entry(run.to_owned()).or_default();
        let noted = entry
            .employment
            .entry(staff.clone())
            .or_insert((employment, at_ms));
        if noted.1 <= at_ms {
            *noted = (employment, at_ms);
        }
        Ok(())
    }

    async fn note_code(&self, run: &str, code: &CodeId) -> Result<(), StoreError> {
        let mut tables = self.available()?;
        let entry = tables.replays.entry(run.to_owned()).or_default();
        entry.codes.insert(code.clone());
        Ok(())
    }

    async fn record_event(&self, run: &str, line: &EventLine) -> Result<(), StoreError> {
        let mut tables = self.available()?;
        let entry = tables.replays.entry(run.to_owned()).or_default();
        // One line per archive position, as the table's item per position: a page done again
        // rewrites its lines.
        match entry
            .events
            .iter_mut()
            .find(|e| e.position == line.position)
        {
            Some(kept) => *kept = line.clone(),
            None => entry.events.push(line.clone()),
        }
        Ok(())
    }

    async fn record_code(&self, run: &str, change: &CodeChange) -> Result<(), StoreError> {
        let mut tables = self.available()?;
        let entry = tables.replays.entry(run.to_owned()).or_default();
        entry.changes.push(change.clone());
        Ok(())
    }

    async fn progress(
        &self,
        run: &str,
        delta: &Progress,
        status: RunStatus,
        _now_ms: u64,
    ) -> Result<(), StoreError> {
        let mut tables = self.available()?;
        let entry = tables.replays.entry(run.to_owned()).or_default();
        entry.progress.push(delta.clone());
        entry.status = Some(status);
        Ok(())
    }

    async fn codes(
        &self,
        run: &str,
        after: Option<&CodeId>,
        limit: usize,
    ) -> Result<Vec<CodeId>, StoreError> {
        let tables = self.available()?;
        Ok(tables
            .replays
            .get(run)
            .map(|entry| {
                entry
                    .codes
                    .iter()
                    .filter(|code| after.is_none_or(|after| *code > after))
                    .take(limit)
                    .cloned()
                    .collect()
            })
            .unwrap_or_default())
    }

    async fn would_be(
        &self,
        run: &str,
        code: &CodeId,
        staff: &[StaffId],
        today: &str,
    ) -> Result<WouldBe, StoreError> {
        let tables = self.available()?;
        let mut would = WouldBe::default();
        let Some(entry) = tables.replays.get(run) else {
            return Ok(would);
        };
        for (on, who, day) in &entry.adds {
            let delta = would
                .adds
                .entry(who.clone())
                .or_insert_with(StaffDelta::default);
            if on == code {
                delta.on_code_total += 1;
                delta.on_code += u32::from(day == today);
            }
            if day == today && staff.contains(who) {
                delta.all_codes += 1;
            }
        }
        for (who, (employment, _)) in &entry.employment {
            if staff.contains(who) {
                would.employment.insert(who.clone(), *employment);
            }
        }
        Ok(would)
    }
}

#[async_trait::async_trait]
impl ReplayReads for InMemoryStore {
    async fn add_counted(
        &self,
        _tenant: &TenantId,
        business_key: &str,
    ) -> Result<bool, StoreError> {
        Ok(self.available()?.add_claims.contains_key(business_key))
    }

    async fn employment(
        &self,
        tenant: &TenantId,
        staff: &StaffId,
    ) -> Result<Option<Employment>, StoreError> {
        Ok(self
            .available()?
            .staff
            .get(&(tenant.clone(), staff.clone()))
            .map(|facts| facts.employment))
    }
}
