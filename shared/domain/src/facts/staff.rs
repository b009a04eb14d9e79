//! Staff lifecycle from WeCom's `change_contact` callbacks: resignation, re-keying, disabling
//! and department membership. Each writes its fact, then emits a reason for every code the
//! change can reach.

use super::StaffLedger;
use crate::ids::TenantId;
use crate::ids::{CodeId, DepartmentId, StaffId};
use crate::membership::Employment;
use crate::wecom::callback::CallbackEvent;
use crate::StoreError;
use std::collections::BTreeSet;

/// A contact change qrsync acts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StaffEvent {
    /// `delete_user`: the staff member left; never eligible again.
    Deleted { staff: StaffId },
    /// `create_user` / `update_user`: only the attributes WeCom sent (it sends changed ones).
    Changed {
        staff: StaffId,
        /// `NewUserID`: WeCom re-keyed the user.
        renamed_to: Option<StaffId>,
        employment: Option<Employment>,
        departments: Option<BTreeSet<DepartmentId>>,
    },
    /// `delete_party`: the department is gone; codes listing it lose its members.
    DepartmentDeleted { department: DepartmentId },
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct MalformedContactEvent(String);

impl StaffEvent {
    /// The contact change in `event`, `Ok(None)` for contact events that change no code
    /// (a new department, a renamed one, a tag change), or an error for an event that names
    /// ids WeCom never issues.
    pub fn from_callback(event: &CallbackEvent) -> Result<Option<Self>, MalformedContactEvent> {
        if event.event() != Some("change_contact") {
            return Ok(None);
        }
        let staff = || {
            let raw = event
                .user_id()
                .ok_or_else(|| MalformedContactEvent("no UserID".into()))?;
            StaffId::parse(raw).map_err(|e| MalformedContactEvent(format!("UserID: {e}")))
        };
        let parsed = match event.change_type() {
            Some("delete_user") => Self::Deleted { staff: staff()? },
            Some(change @ ("create_user" | "update_user")) => Self::Changed {
                staff: staff()?,
                renamed_to: event
                    .field("NewUserID")
                    .filter(|raw| !raw.is_empty())
                    .map(|raw| {
                        StaffId::parse(raw)
                            .map_err(|e| MalformedContactEvent(format!("NewUserID: {e}")))
                    })
                    .transpose()?,
                employment: match event.field("Status") {
                    Some("1") => Some(Employment::Active),
                    // Disabled, or not activated (WeCom cannot route customers to either).
                    Some("2" | "4") => Some(Employment::Disabled),
                    // A new user without a status is active; an update without one did not
                    // change it.
                    _ => (change == "create_user").then_some(Employment::Active),
                },
                departments: event
                    .field("Department")
                    .map(parse_departments)
                    .transpose()?,
            },
            Some("delete_party") => {
                let raw = event
                    .field("Id")
                    .ok_or_else(|| MalformedContactEvent("no Id".into()))?;
                Self::DepartmentDeleted {
                    department: DepartmentId::parse(raw)
                        .map_err(|e| MalformedContactEvent(format!("Id: {e}")))?,
                }
            }
            _ => return Ok(None),
        };
        Ok(Some(parsed))
    }
}

fn parse_departments(raw: &str) -> Result<BTreeSet<DepartmentId>, MalformedContactEvent> {
    raw.split(',')
        .map(str::trim)
        .filter(|part| !part.is_empty())
        .map(|part| {
            DepartmentId::parse(part).map_err(|e| MalformedContactEvent(format!("Department: {e}")))
        })
        .collect()
}

/// Writes the event's facts; answers every code whose list they may change.
pub async fn apply<L: StaffLedger + ?Sized>(
    ledger: &L,
    tenant: &TenantId,
    event: &StaffEvent,
    at_ms: u64,
) -> Result<BTreeSet<CodeId>, StoreError> {
    let mut codes = BTreeSet::new();
    match event {
        StaffEvent::Deleted { staff } => {
            ledger
                .set_employment(tenant, staff, Employment::Resigned, at_ms)
                .await?;
            codes.extend(ledger.codes_of_staff(tenant, staff).await?);
        }
        StaffEvent::Changed {
            staff,
            renamed_to,
            employment,
            departments,
        } => {
            // The re-key first: the rest of the event describes the user under its new id.
            let current = match renamed_to {
                Some(to) if to != staff => {
                    codes.extend(ledger.rename_staff(tenant, staff, to, at_ms).await?);
                    to
                }
                _ => staff,
            };
            if let Some(employment) = employment {
                ledger
                    .set_employment(tenant, current, *employment, at_ms)
                    .await?;
            }
            if let Some(departments) = departments {
                for department in ledger
                    .set_staff_departments(tenant, current, departments, at_ms)
                    .await?
                {
                    codes.extend(ledger.codes_listing_department(tenant, &department).await?);
                }
            }
            codes.extend(ledger.codes_of_staff(tenant, current).await?);
        }
        StaffEvent::DepartmentDeleted { department } => {
            ledger
                .set_department_members(tenant, department, &BTreeSet::new(), at_ms)
                .await?;
            codes.extend(ledger.codes_listing_department(tenant, department).await?);
        }
    }
    Ok(codes)
}
