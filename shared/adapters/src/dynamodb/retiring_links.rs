//! The sweep's retirement of resigned staff members' acquisition links (`domain::sweep`,
//! `LinkRetirements`). A resignation puts the staff item into `gsi1` under `STAFF#RESIGNED`
//! (`resignation_indexed`, in the same write that makes the member resigned, however the
//! resignation arrives); the sweep reads the index, then each item, and takes the link off the
//! item before deleting it at WeCom, so no refresh can route to a deleted link.

use super::conditions::ConditionalWriteError;
use super::{employment_name, get_s, keys, s, tenant_key, DynamoStore};
use aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder;
use domain::ids::StaffId;
use domain::ids::TenantId;
use domain::membership::Employment;
use domain::sweep::{LeavingStaff, LinkRetirements};
use domain::StoreError;

/// What a write that makes a staff member resigned adds to its `SET`, with
/// `resignation_indexed`: the one place the index of links to retire is written, for WeCom's
/// `delete_user`, the old id of a re-keyed user and the admin API alike. A member who resigned
/// and is never indexed keeps their acquisition link at WeCom for ever.
pub(super) const RESIGNATION_INDEX_SET: &str = "#rgpk = :rgpk, #rgsk = :rgsk";

/// Names the values of `RESIGNATION_INDEX_SET` on `update`: the entry sorts by `at_ms`, when
/// the member resigned. It leaves the index once nothing is left to retire (a rehire does not
/// take it out: the sweep checks, so no link is stranded).
pub(super) fn resignation_indexed(
    update: UpdateItemFluentBuilder,
    tenant: &TenantId,
    staff: &StaffId,
    at_ms: u64,
) -> UpdateItemFluentBuilder {
    update
        .expression_attribute_names("#rgpk", keys::GSI1_PK)
        .expression_attribute_names("#rgsk", keys::GSI1_SK)
        .expression_attribute_values(":rgpk", s(keys::RESIGNED_STAFF))
        .expression_attribute_values(":rgsk", s(keys::resigned_index_sort(at_ms, tenant, staff)))
}

/// The tenant and staff member of an index entry's keys.
fn staff_of(item: &super::Item) -> Option<(TenantId, StaffId)> {
    let tenant = keys::tenant_of_home(get_s(item, keys::PK)?)?;
    let staff = get_s(item, keys::SK)?.strip_prefix(keys::STAFF_PREFIX)?;
    Some((TenantId::parse(tenant).ok()?, StaffId::parse(staff).ok()?))
}

#[async_trait::async_trait]
impl LinkRetirements for DynamoStore {
    /// One index query (keys only), then each staff item read consistently.
    async fn resigned_before(
        &self,
        before_ms: u64,
        limit: usize,
    ) -> Result<Vec<LeavingStaff>, StoreError> {
        let items = self
            .index_before(keys::RESIGNED_STAFF, before_ms, limit)
            .await?;
        let mut leaving = Vec::new();
        for (tenant, staff) in items.iter().filter_map(staff_of) {
            let Some(item) = self.get(&tenant, keys::staff(&staff)).await? else {
                continue;
            };
            leaving.push(LeavingStaff {
                resigned: get_s(&item, "employment") == Some(employment_name(Employment::Resigned)),
                link_id: get_s(&item, keys::LINK_ID).map(str::to_owned),
                retiring_link_id: get_s(&item, keys::RETIRING_LINK_ID).map(str::to_owned),
                tenant,
                staff,
            });
        }
        Ok(leaving)
    }

    async fn detach_link(
        &self,
        tenant: &TenantId,
        staff: &StaffId,
        link_id: &str,
    ) -> Result<bool, StoreError> {
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(tenant_key(tenant, keys::staff(staff))))
            .update_expression("REMOVE #id, #url SET #retiring = :id")
            .condition_expression("#employment = :resigned AND #id = :id")
            .expression_attribute_names("#id", keys::LINK_ID)
            .expression_attribute_names("#url", keys::LINK_URL)
            .expression_attribute_names("#retiring", keys::RETIRING_LINK_ID)
            .expression_attribute_names("#employment", "employment")
            .expression_attribute_values(":id", s(link_id))
            .expression_attribute_values(":resigned", s(employment_name(Employment::Resigned)))
            .send()
            .await;
        match result {
            Ok(_) => Ok(true),
            Err(error) => error.refused_or_unavailable().map(|_| false),
        }
    }

    async fn link_retired(
        &self,
        tenant: &TenantId,
        staff: &StaffId,
        link_id: &str,
    ) -> Result<(), StoreError> {
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(tenant_key(tenant, keys::staff(staff))))
            .update_expression("REMOVE #retiring")
            .condition_expression("#retiring = :id")
            .expression_attribute_names("#retiring", keys::RETIRING_LINK_ID)
            .expression_attribute_values(":id", s(link_id))
            .send()
            .await;
        match result {
            Ok(_) => Ok(()),
            Err(error) => error.refused_or_unavailable().map(|_| ()),
        }
    }

    async fn nothing_to_retire(
        &self,
        tenant: &TenantId,
        staff: &StaffId,
    ) -> Result<(), StoreError> {
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(tenant_key(tenant, keys::staff(staff))))
            .update_expression("REMOVE #gpk, #gsk")
            .condition_expression(
                "attribute_exists(pk) AND attribute_not_exists(#retiring) \
                 AND (#employment <> :resigned OR attribute_not_exists(#id))",
            )
            .expression_attribute_names("#gpk", keys::GSI1_PK)
            .expression_attribute_names("#gsk", keys::GSI1_SK)
            .expression_attribute_names("#retiring", keys::RETIRING_LINK_ID)
            .expression_attribute_names("#employment", "employment")
            .expression_attribute_names("#id", keys::LINK_ID)
            .expression_attribute_values(":resigned", s(employment_name(Employment::Resigned)))
            .send()
            .await;
        match result {
            Ok(_) => Ok(()),
            Err(error) => error.refused_or_unavailable().map(|_| ()),
        }
    }
}
