//! The single writer's records: a code's age, its last-pushed record, its lease, its marks.

use super::InMemoryStore;
use crate::codes::PushedList;
use crate::dirty::{DirtyMarks, DirtyWhy};
use crate::ids::TenantId;
use crate::ids::{CodeId, StaffId};
use crate::membership::RotationSlot;
use crate::refresh::PageWrite;
use crate::refresh::{
    Acquired, AfterRecord, CodeLeases, CodeRecords, FailureMarks, FencedWrite, Lease, PushRecord,
    Requeues, Tally,
};
use crate::wecom::acquisition::AcquisitionLink;
use crate::StoreError;

impl InMemoryStore {
    /// Whether `lease` still holds the code: every record write is conditioned on it.
    fn fence(&self, tenant: &TenantId, code: &CodeId, lease: &Lease) -> FencedWrite {
        match self.code_lease(tenant, code) {
            Some(held) if held.holder == lease.holder => FencedWrite::Written,
            _ => FencedWrite::LeaseLost,
        }
    }
}

#[async_trait::async_trait]
impl CodeRecords for InMemoryStore {
    async fn record_push(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        lease: &Lease,
        push: &PushRecord,
        then: AfterRecord,
    ) -> Result<FencedWrite, StoreError> {
        if self.available()?.records_fail {
            return Err(StoreError::new(
                "table",
                "the fake records are switched off",
            ));
        }
        if self.fence(tenant, code, lease) == FencedWrite::LeaseLost {
            return Ok(FencedWrite::LeaseLost);
        }
        if let Some(page) = push.page() {
            self.write_page(tenant, code, &page);
        }
        let mut tables = self.tables();
        if !tables.history_off {
            tables.pushes.push(push.clone());
        }
        tables.pushed.insert(
            (tenant.clone(), code.clone()),
            PushedList {
                users: push.users.clone(),
                pushed_at_ms: push.pushed_at_ms,
                starved: false,
                rotation: push.rotation.clone(),
            },
        );
        if then == AfterRecord::Release {
            tables.leases.remove(&(tenant.clone(), code.clone()));
        }
        Ok(FencedWrite::Written)
    }

    async fn record_starved(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        lease: &Lease,
        _: u64,
        on_page: bool,
    ) -> Result<FencedWrite, StoreError> {
        self.available()?.starved += 1;
        let fenced = self.fence(tenant, code, lease);
        if fenced == FencedWrite::Written && on_page {
            self.write_page(tenant, code, &PageWrite::Starved);
        }
        Ok(fenced)
    }

    async fn record_rotation(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        lease: &Lease,
        wecom_list: &[StaffId],
        rotation: Option<&[RotationSlot]>,
    ) -> Result<FencedWrite, StoreError> {
        let fenced = self.fence(tenant, code, lease);
        if fenced == FencedWrite::Written {
            let page = rotation.map_or(PageWrite::NotServed, |rotation| {
                PageWrite::SameRound(rotation.to_vec())
            });
            self.write_page(tenant, code, &page);
            let mut tables = self.tables();
            let record = tables
                .pushed
                .entry((tenant.clone(), code.clone()))
                .or_insert_with(|| PushedList {
                    users: wecom_list.to_vec(),
                    pushed_at_ms: 0,
                    starved: false,
                    rotation: None,
                });
            record.rotation = rotation.map(<[RotationSlot]>::to_vec);
        }
        Ok(fenced)
    }

    async fn keep_link(
        &self,
        tenant: &TenantId,
        staff: &StaffId,
        link: &AcquisitionLink,
    ) -> Result<AcquisitionLink, StoreError> {
        let mut tables = self.available()?;
        let key = (tenant.clone(), staff.clone());
        // As the table's conditional write on the staff item: no item, no link kept.
        if !tables.staff.contains_key(&key) {
            return Err(StoreError::new(
                "table",
                "a link for a staff member who is not stored",
            ));
        }
        Ok(tables
            .links
            .entry(key)
            .or_insert_with(|| link.clone())
            .clone())
    }

    async fn record_tally(&self, _: &TenantId, _: &str, tally: &Tally) -> Result<(), StoreError> {
        let mut tables = self.available()?;
        tables.tally.absorb(tally);
        tables.tally_writes += 1;
        Ok(())
    }

    async fn record_requeues(&self, _: u64, requeues: Requeues) -> Result<(), StoreError> {
        let mut tables = self.available()?;
        let (total, writes) = &mut tables.requeues;
        total.budget += requeues.budget;
        total.throttled += requeues.throttled;
        *writes += 1;
        Ok(())
    }
}

#[async_trait::async_trait]
impl CodeLeases for InMemoryStore {
    async fn acquire(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        holder: &str,
        now_ms: u64,
        duration_ms: u64,
        expected: Option<u64>,
    ) -> Result<Acquired, StoreError> {
        let mut tables = self.available()?;
        let key = (tenant.clone(), code.clone());
        if let Some(held) = tables.leases.get(&key).filter(|l| l.expires_at_ms > now_ms) {
            return Ok(Acquired::Busy {
                retry_after_ms: held.expires_at_ms - now_ms,
            });
        }
        let taken = tables.lease_acquisitions.get(&key).copied().unwrap_or(0);
        if expected.is_some_and(|expected| expected != taken) {
            return Ok(Acquired::TakenSince);
        }
        tables.lease_acquisitions.insert(key.clone(), taken + 1);
        let mine = Lease {
            holder: holder.to_owned(),
            expires_at_ms: now_ms + duration_ms,
        };
        let stored = if tables.leases_taken_over {
            Lease {
                holder: "another writer".into(),
                expires_at_ms: 0,
            }
        } else {
            mine.clone()
        };
        tables.leases.insert(key, stored);
        Ok(Acquired::LeasedRefresh(mine))
    }

    async fn release(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        lease: &Lease,
    ) -> Result<(), StoreError> {
        let mut tables = self.available()?;
        let key = (tenant.clone(), code.clone());
        if tables
            .leases
            .get(&key)
            .is_some_and(|l| l.holder == lease.holder)
        {
            tables.leases.remove(&key);
        }
        Ok(())
    }
}

#[async_trait::async_trait]
impl FailureMarks for InMemoryStore {
    async fn mark_code_gone(&self, _: &TenantId, code: &CodeId, _: u64) -> Result<(), StoreError> {
        let mut tables = self.available()?;
        if !tables.history_off {
            tables.marks.gone.push(code.clone());
        }
        Ok(())
    }

    async fn mark_staff_unusable(
        &self,
        tenant: &TenantId,
        staff: &StaffId,
        _: i64,
        _: u64,
    ) -> Result<(), StoreError> {
        let mut tables = self.available()?;
        if !tables.history_off {
            tables.marks.unusable.push(staff.clone());
        }
        // As the table's update of the staff item: one not stored yet is stored, refused.
        tables
            .staff
            .entry((tenant.clone(), staff.clone()))
            .or_insert(super::NEW_STAFF)
            .rejected_by_wecom = true;
        Ok(())
    }
}

#[async_trait::async_trait]
impl DirtyMarks for InMemoryStore {
    async fn mark_dirty(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        why: DirtyWhy,
        at_ms: u64,
    ) -> Result<(), StoreError> {
        let mut tables = self.available()?;
        if !tables.history_off {
            tables.marks.dirty.push((code.clone(), why));
        }
        let key = (tenant.clone(), code.clone());
        let resyncs = tables.dirty_due.get(&key).map_or(0, |(n, _)| *n);
        tables.dirty.insert(key.clone(), (at_ms, why));
        tables.dirty_suspects.remove(&key);
        tables.dirty_due.insert(key, (resyncs, at_ms));
        Ok(())
    }

    async fn clear_dirty(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        began_ms: u64,
    ) -> Result<Option<Option<DirtyWhy>>, StoreError> {
        let mut tables = self.available()?;
        let key = (tenant.clone(), code.clone());
        match tables.dirty.get(&key) {
            Some((at, why)) if *at < began_ms => {
                let why = *why;
                tables.dirty.remove(&key);
                tables.dirty_due.remove(&key);
                tables.dirty_suspects.remove(&key);
                Ok(Some(Some(why)))
            }
            _ => Ok(None),
        }
    }

    async fn count_repaired(
        &self,
        tenant: &TenantId,
        day: &str,
        code: &CodeId,
    ) -> Result<(), StoreError> {
        let mut tables = self.available()?;
        let drift = tables
            .drift_codes
            .entry((tenant.clone(), day.to_owned(), code.clone()))
            .or_default();
        drift.repaired = true;
        drift.latest_differs = false;
        Ok(())
    }
}
