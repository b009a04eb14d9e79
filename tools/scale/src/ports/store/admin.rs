//! The admin API's store ports (`AdminStore`, `DueWriter`) on the meter. The simulated stretch
//! calls the admin API only to send staff on a break and back (`put_staff`): the profile read
//! and the staff update are metered as the adapter sends them; the rest (tenants, codes and
//! schedules edited through the API) is forwarded unmetered, since a stretch edits none.

use super::{profile_bytes, staff_key, MeteredStore};
use crate::services::dynamodb::{Consistency, ItemKey, Touch};
use adapters::dynamodb::keys;
use domain::admin::{
    AdminStore, CodeAdds, CodeSummary, ProfileWrite, StaffChange, StaffRecord, StaffUpdate,
    StoredProfile, VersionedCode,
};
use domain::ids::{CodeId, DepartmentId, StaffId, TenantId};
use domain::membership::{CodeConfig, WeeklySchedule};
use domain::schedules::{DueWriter, Minute, Subject};
use domain::StoreError;
use std::collections::BTreeSet;

use super::Kind;

#[async_trait::async_trait]
impl AdminStore for MeteredStore {
    async fn stored_profile(&self, tenant: &TenantId) -> Result<Option<StoredProfile>, StoreError> {
        let bytes = self
            .data
            .stored_profile(tenant)
            .map_or(0, |profile| profile_bytes(tenant, &profile));
        self.get(
            Touch::new(ItemKey::of(tenant, keys::PROFILE), bytes),
            Consistency::Strong,
        )
        .await?;
        AdminStore::stored_profile(&self.data, tenant).await
    }

    async fn put_profile(
        &self,
        tenant: &TenantId,
        next: &StoredProfile,
        previous: Option<&StoredProfile>,
    ) -> Result<ProfileWrite, StoreError> {
        self.data.put_profile(tenant, next, previous).await
    }

    async fn update_staff(
        &self,
        tenant: &TenantId,
        staff: &StaffId,
        change: &StaffChange,
        now_ms: u64,
    ) -> Result<StaffUpdate, StoreError> {
        self.write(Kind::UpdateItem, self.staff_touch(tenant, staff, 0))
            .await?;
        self.data.update_staff(tenant, staff, change, now_ms).await
    }

    async fn staff_record(
        &self,
        tenant: &TenantId,
        staff: &StaffId,
    ) -> Result<Option<StaffRecord>, StoreError> {
        self.get(Touch::new(staff_key(tenant, staff), 0), Consistency::Strong)
            .await?;
        self.data.staff_record(tenant, staff).await
    }

    async fn department_members(
        &self,
        tenant: &TenantId,
        department: &DepartmentId,
    ) -> Result<Option<BTreeSet<StaffId>>, StoreError> {
        self.data.department_members(tenant, department).await
    }

    async fn codes_page(
        &self,
        tenant: &TenantId,
        after: Option<&CodeId>,
        limit: usize,
    ) -> Result<(Vec<CodeSummary>, bool), StoreError> {
        self.data.codes_page(tenant, after, limit).await
    }

    async fn adds_on_codes(
        &self,
        tenant: &TenantId,
        staff: &StaffId,
        codes: &[CodeId],
        day: &str,
    ) -> Result<Vec<CodeAdds>, StoreError> {
        self.data.adds_on_codes(tenant, staff, codes, day).await
    }

    async fn adds_on_all_codes(
        &self,
        tenant: &TenantId,
        staff: &StaffId,
        day: &str,
    ) -> Result<u32, StoreError> {
        self.data.adds_on_all_codes(tenant, staff, day).await
    }

    async fn set_schedule(
        &self,
        tenant: &TenantId,
        staff: &StaffId,
        schedule: Option<&WeeklySchedule>,
        at_ms: u64,
    ) -> Result<bool, StoreError> {
        self.data.set_schedule(tenant, staff, schedule, at_ms).await
    }

    async fn codes_of_tenant(&self, tenant: &TenantId) -> Result<Vec<CodeId>, StoreError> {
        self.data.codes_of_tenant(tenant).await
    }

    async fn code(
        &self,
        tenant: &TenantId,
        code: &CodeId,
    ) -> Result<Option<VersionedCode>, StoreError> {
        self.data.code(tenant, code).await
    }

    async fn put_code(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        config: &CodeConfig,
        read_version: Option<u64>,
        now_ms: u64,
    ) -> Result<Option<VersionedCode>, StoreError> {
        self.data
            .put_code(tenant, code, config, read_version, now_ms)
            .await
    }

    async fn delete_code(&self, tenant: &TenantId, code: &CodeId) -> Result<(), StoreError> {
        self.data.delete_code(tenant, code).await
    }

    async fn set_config_id(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        config_id: &str,
        created_with: &[String],
    ) -> Result<bool, StoreError> {
        self.data
            .set_config_id(tenant, code, config_id, created_with)
            .await
    }
}

#[async_trait::async_trait]
impl DueWriter for MeteredStore {
    async fn set_due(
        &self,
        tenant: &TenantId,
        subject: &Subject,
        minute: Minute,
        now_ms: u64,
    ) -> Result<(), StoreError> {
        self.data.set_due(tenant, subject, minute, now_ms).await
    }
}
