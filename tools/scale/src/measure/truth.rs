//! The adds that happened, counted as the table's counters would count them once every add
//! is recorded: what "should no longer receive" is judged against, whatever qrsync's inbox
//! has reached.

use domain::ids::{CodeId, StaffId, TenantId};
use domain::membership::AddCounts;
use std::collections::HashMap;

#[derive(Default)]
pub struct TrueAdds {
    on_code_day: HashMap<(TenantId, CodeId, StaffId), u32>,
    all_codes_day: HashMap<(TenantId, StaffId), u32>,
    on_code_total: HashMap<(TenantId, CodeId, StaffId), u32>,
}

impl TrueAdds {
    /// One add; the stretch lies within one tenant day per tenant (`counts` is today's).
    pub fn add(&mut self, tenant: &TenantId, code: &CodeId, staff: &StaffId) {
        let code_key = (tenant.clone(), code.clone(), staff.clone());
        *self.on_code_day.entry(code_key.clone()).or_default() += 1;
        *self
            .all_codes_day
            .entry((tenant.clone(), staff.clone()))
            .or_default() += 1;
        *self.on_code_total.entry(code_key).or_default() += 1;
    }

    /// What the counters hold on top of the stored ones when the stretch began.
    pub fn counts(&self, tenant: &TenantId, code: &CodeId, staff: &StaffId) -> AddCounts {
        let code_key = (tenant.clone(), code.clone(), staff.clone());
        AddCounts {
            on_code: self.on_code_day.get(&code_key).copied().unwrap_or(0),
            all_codes: self
                .all_codes_day
                .get(&(tenant.clone(), staff.clone()))
                .copied()
                .unwrap_or(0),
            on_code_total: self.on_code_total.get(&code_key).copied().unwrap_or(0),
        }
    }
}
