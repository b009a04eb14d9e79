//! The store contract: what every implementation of the table's ports must answer alike,
//! written once and run against the in-memory fakes (the unit tests, `tests.rs` here) and
//! against `adapters::dynamodb`'s `DynamoStore` and `DynamoBudget` on a deployed local world
//! (`tests/store_contract.rs`). Where the two disagree the table is right and the fake is
//! fixed: the fakes stand in for it in every other unit test.
//!
//! Each case is a function of a `Fixture` (the store and budget under test) and a fresh
//! tenant, asserting only what the ports answer: pagination (`pagination.rs`), refused
//! conditional writes (`conditions.rs`), edits whose index writes land in owed chunks
//! (`owed.rs`), the per-code leases, the writes fenced on them and the limit claims
//! (`leases.rs`), the shared WeCom budget (`budget.rs`), and records read back as written
//! (`records.rs`). `store_contract!` makes one test per case, so a case added to its list runs
//! against both stores.
//!
//! The cases touch only items under their own tenants (and replay runs named after them),
//! never the table's singletons (the schedule tick's cursor, the sweep's lease), and leave
//! nothing in the indexes the deployed functions poll (dirty marks, open claims, creation
//! intents, resigned staff, due items): the one limit claim is open for its case's seconds
//! with its lease an hour out, and resignations are dated a day ahead (the sweep reads only
//! those past its grace) and taken out of the index before the case ends. So they run beside the other integration tests on one world.

mod budget;
mod conditions;
mod leases;
mod owed;
mod pages;
mod pagination;
mod records;
#[cfg(test)]
mod tests;

pub use budget::*;
pub use conditions::*;
pub use leases::*;
pub use owed::*;
pub use pages::*;
pub use pagination::*;
pub use records::*;

use crate::admin::AdminStore;
use crate::budget::{BudgetLayers, WeComBudget};
use crate::dirty::DirtyMarks;
use crate::facts::{AddLedger, QuotaLedger, StaffLedger};
use crate::ids::TenantId;
use crate::ids::{CodeId, DepartmentId, StaffId};
use crate::membership::{CodeConfig, Family, Switches};
use crate::refresh::{CodeLeases, CodeRecords, FailureMarks};
use crate::replay::ReplayRuns;
use crate::sweep::{DriftLedger, LinkRetirements};

/// A store under contract, and its budget.
pub trait Fixture: Send + Sync {
    type Store: AdminStore
        + StaffLedger
        + AddLedger
        + QuotaLedger
        + DriftLedger
        + LinkRetirements
        + CodeRecords
        + CodeLeases
        + FailureMarks
        + DirtyMarks
        + ReplayRuns
        + crate::replay::CallbackArchive
        + crate::landing::RotationCounter
        + crate::tenants::CallbackSettingsSource
        + Send
        + Sync;
    type Budget: WeComBudget;

    fn store(&self) -> &Self::Store;
    /// A budget of `layers` on the same storage.
    fn budget(&self, layers: BudgetLayers) -> Self::Budget;
    /// After `transactions` more `TransactWriteItems` succeed, every one fails (as an outage
    /// or a timed-out function cuts an edit short); `None` heals the store.
    fn fail_transactions_after(&self, transactions: Option<usize>);
}

/// A tenant no other case (nor an earlier run on the same table) has written under.
pub fn fresh_tenant() -> TenantId {
    TenantId::parse(&format!("contract-{:016x}", rand::random::<u64>())).expect("valid tenant id")
}

/// The wall clock: the table's TTLs are set from the times the ports are given, so the cases
/// stay near now.
fn now_ms() -> u64 {
    u64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock after 1970")
            .as_millis(),
    )
    .expect("ms fit u64")
}

fn code(raw: &str) -> CodeId {
    CodeId::parse(raw).expect("valid code id")
}

fn staff(raw: &str) -> StaffId {
    StaffId::parse(raw).expect("valid staff id")
}

fn department(raw: &str) -> DepartmentId {
    DepartmentId::parse(raw).expect("valid department id")
}

/// Staff ids `{prefix}NNNN` for each number of `range`, in id order.
fn numbered_staff(prefix: &str, range: std::ops::Range<usize>) -> Vec<StaffId> {
    range.map(|i| staff(&format!("{prefix}{i:04}"))).collect()
}

fn config(members: Vec<StaffId>) -> CodeConfig {
    CodeConfig {
        family: Family::Sequenced,
        members,
        departments: Vec::new(),
        fallback: Vec::new(),
        switches: Switches::default(),
    }
}

/// One test per case against the fixture the async fn `$fixture` builds, each on a fresh
/// tenant. The list is the suite: a case added here runs against every store.
#[macro_export]
macro_rules! store_contract {
    ($fixture:path) => {
        $crate::store_contract!(@cases $fixture;
            codes_come_back_a_page_at_a_time_in_id_order_with_none_lost_or_repeated,
            a_last_page_that_is_exactly_full_says_no_more_follow,
            the_drift_sample_pages_through_a_tenants_codes_after_its_cursor,
            one_tenants_pages_hold_none_of_another_tenants_codes,
            a_second_creation_of_one_code_is_refused_and_the_first_stands,
            an_edit_from_a_stale_version_is_refused_and_changes_nothing,
            a_code_keeps_the_first_contact_way_stored_for_it_through_later_edits,
            a_profile_written_from_a_stale_read_is_refused_as_raced,
            a_profiles_previous_callback_keys_read_back_as_written_and_go_when_it_drops_them,
            a_corp_id_another_tenant_holds_is_refused_until_it_lets_go,
            a_resigned_staff_member_cannot_be_made_active_or_disabled_again,
            a_resignation_enters_the_resigned_staff_index_however_it_arrives,
            an_older_employment_fact_never_replaces_a_newer_one,
            an_older_department_list_never_replaces_a_newer_one,
            an_older_schedule_never_replaces_a_newer_one,
            wecoms_refusal_of_a_staff_member_survives_every_later_staff_write,
            an_add_delivered_twice_is_counted_once_at_its_first_time,
            the_first_link_kept_for_a_staff_member_is_the_one_every_writer_gets,
            a_link_for_a_staff_member_not_stored_is_kept_nowhere,
            a_code_seating_more_staff_than_one_transaction_takes_is_found_from_every_one,
            an_edit_of_a_large_seat_list_moves_every_index_entry_and_a_repeat_changes_nothing,
            deleting_a_code_takes_it_out_of_every_index,
            an_edit_cut_short_after_storing_its_configuration_is_finished_by_the_next_edit,
            a_department_of_more_members_than_one_transaction_takes_is_on_every_members_record,
            a_department_replacement_cut_short_is_finished_by_the_next_one,
            a_code_listing_a_department_is_found_from_each_of_its_members_and_no_one_else,
            a_codes_age_keeps_its_creation_and_moves_with_each_edit,
            a_drift_report_adds_up_and_a_tripped_guard_holds_until_resumed,
            a_replay_run_is_created_once_sees_each_callback_once_and_pages_its_codes,
            an_archived_callback_past_its_expiry_is_never_paged,
            a_held_lease_is_refused_to_another_writer_until_it_expires,
            a_lease_taken_with_a_count_expected_is_refused_once_anyone_took_it_since,
            a_writer_whose_lease_was_taken_over_has_every_record_write_refused,
            a_record_write_under_a_lease_never_taken_is_refused,
            a_released_lease_is_free_at_once_but_a_stale_release_frees_nothing,
            a_code_leased_before_its_first_record_has_none_and_its_records_keep_the_lease,
            a_landing_codes_page_changes_with_its_record_and_never_without_it,
            a_limit_claim_is_owned_by_its_first_claimer_and_taken_over_only_as_read,
            spends_beyond_the_minutes_budget_are_refused_until_the_next_minute,
            spends_beyond_the_hours_budget_are_refused_until_the_next_hour,
            each_tenant_and_each_api_spends_its_own_budget,
            a_budget_kept_in_shards_never_grants_more_than_its_hour_in_all,
            tenants_behind_one_address_share_its_window_and_a_refusal_there_costs_the_tenant_nothing,
            a_tenant_past_its_fair_share_of_a_busy_address_leaves_the_last_fifth_to_tenants_within_theirs,
            a_tenant_alone_behind_an_address_may_use_all_of_its_minute,
            a_unit_the_address_refused_is_given_back_to_the_tenants_hour,
            an_addresses_spent_hour_refuses_every_tenant_behind_it_until_the_hour,
            a_45009_holds_the_tenants_minute_and_one_in_the_next_minute_its_hour,
        );
    };
    (@cases $fixture:path; $($case:ident),+ $(,)?) => {
        $(
            #[tokio::test]
            async fn $case() {
                let fixture = $fixture().await;
                $crate::fakes::contract::$case(&fixture, $crate::fakes::contract::fresh_tenant())
                    .await;
            }
        )+
    };
}
