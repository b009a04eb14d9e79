//! Edits whose index writes do not fit one transaction (`crate::owed`): they land in chunks,
//! and what the ports read afterwards is the index of the configuration stored last.

use super::{code, config, department, now_ms, numbered_staff, Fixture};
use crate::admin::AdminStore;
use crate::facts::StaffLedger;
use crate::ids::TenantId;
use crate::ids::{CodeId, StaffId};
use crate::owed::WRITES_PER_TRANSACTION;
use std::collections::BTreeSet;

/// More staff than one transaction's index writes.
const MANY: usize = WRITES_PER_TRANSACTION + 51;

/// The staff of `staff` whose `codes_of_staff` lists `id` (none may list another code).
async fn finding<F: Fixture>(
    fixture: &F,
    tenant: &TenantId,
    staff: &[StaffId],
    id: &CodeId,
) -> BTreeSet<StaffId> {
    let mut found = BTreeSet::new();
    for who in staff {
        let codes = fixture
            .store()
            .codes_of_staff(tenant, who)
            .await
            .expect("store available");
        assert!(
            codes.iter().all(|c| c == id),
            "{who} finds only {id}: {codes:?}"
        );
        if codes.contains(id) {
            found.insert(who.clone());
        }
    }
    found
}

pub async fn a_code_seating_more_staff_than_one_transaction_takes_is_found_from_every_one<
    F: Fixture,
>(
    fixture: &F,
    tenant: TenantId,
) {
    let id = code("large");
    let members = numbered_staff("m", 0..MANY);
    let fallback = numbered_staff("f", 0..5);
    let mut large = config(members.clone());
    large.fallback = fallback.clone();
    let stored = fixture
        .store()
        .put_code(&tenant, &id, &large, None, now_ms())
        .await
        .expect("store available")
        .expect("created");
    assert_eq!(stored.code.config, large);
    let everyone: Vec<StaffId> = members.iter().chain(&fallback).cloned().collect();
    let found = finding(fixture, &tenant, &everyone, &id).await;
    assert_eq!(
        found.len(),
        everyone.len(),
        "every member and fallback finds the code"
    );
}

pub async fn an_edit_of_a_large_seat_list_moves_every_index_entry_and_a_repeat_changes_nothing<
    F: Fixture,
>(
    fixture: &F,
    tenant: TenantId,
) {
    let store = fixture.store();
    let id = code("moved");
    let before = numbered_staff("s", 0..MANY);
    let after = numbered_staff("s", MANY / 2..MANY / 2 + MANY);
    store
        .put_code(&tenant, &id, &config(before.clone()), None, now_ms())
        .await
        .expect("store available")
        .expect("created");
    let edited = store
        .put_code(&tenant, &id, &config(after.clone()), Some(1), now_ms())
        .await
        .expect("store available")
        .expect("edited");
    assert_eq!(edited.version, 2);
    let everyone: Vec<StaffId> = before
        .iter()
        .chain(&after)
        .cloned()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let wanted: BTreeSet<StaffId> = after.iter().cloned().collect();
    assert_eq!(finding(fixture, &tenant, &everyone, &id).await, wanted);
    let repeated = store
        .put_code(&tenant, &id, &config(after.clone()), Some(2), now_ms())
        .await
        .expect("store available")
        .expect("stored again");
    assert_eq!(repeated.version, 3);
    assert_eq!(finding(fixture, &tenant, &everyone, &id).await, wanted);
}

pub async fn deleting_a_code_takes_it_out_of_every_index<F: Fixture>(
    fixture: &F,
    tenant: TenantId,
) {
    let store = fixture.store();
    let id = code("doomed");
    let members = numbered_staff("d", 0..MANY);
    let sales = department("7");
    let mut doomed = config(members.clone());
    doomed.departments = vec![sales.clone()];
    store
        .put_code(&tenant, &id, &doomed, None, now_ms())
        .await
        .expect("store available")
        .expect("created");
    assert_eq!(
        store
            .codes_listing_department(&tenant, &sales)
            .await
            .expect("store available"),
        std::slice::from_ref(&id)
    );
    store
        .delete_code(&tenant, &id)
        .await
        .expect("store available");
    assert_eq!(
        store.code(&tenant, &id).await.expect("store available"),
        None
    );
    assert!(finding(fixture, &tenant, &members, &id).await.is_empty());
    assert!(store
        .codes_listing_department(&tenant, &sales)
        .await
        .expect("store available")
        .is_empty());
    assert!(store
        .codes_of_tenant(&tenant)
        .await
        .expect("store available")
        .is_empty());
    store
        .delete_code(&tenant, &id)
        .await
        .expect("deleting a code that is gone changes nothing");
    let recreated = store
        .put_code(&tenant, &id, &config(members[..1].to_vec()), None, now_ms())
        .await
        .expect("store available")
        .expect("a deleted code may be created again");
    assert_eq!(recreated.version, 1);
}

pub async fn an_edit_cut_short_after_storing_its_configuration_is_finished_by_the_next_edit<
    F: Fixture,
>(
    fixture: &F,
    tenant: TenantId,
) {
    let store = fixture.store();
    let id = code("cut");
    let [a, b, c, d] = [0, 1, 2, 3].map(|i| numbered_staff("k", i * 60..i * 60 + MANY));
    let everyone = numbered_staff("k", 0..3 * 60 + MANY);
    let set = |staff: &[StaffId]| staff.iter().cloned().collect::<BTreeSet<_>>();
    store
        .put_code(&tenant, &id, &config(a), None, now_ms())
        .await
        .expect("store available")
        .expect("created");
    // The configuration and what it owes land in the first transaction, the chunks never.
    fixture.fail_transactions_after(Some(1));
    let cut = store
        .put_code(&tenant, &id, &config(b.clone()), Some(1), now_ms())
        .await;
    assert!(cut.is_err(), "an edit cut short fails: {cut:?}");
    fixture.fail_transactions_after(None);
    let stored = store
        .code(&tenant, &id)
        .await
        .expect("store available")
        .expect("stored");
    assert_eq!(
        (stored.version, stored.code.config),
        (2, config(b.clone())),
        "the configuration landed"
    );
    store
        .put_code(&tenant, &id, &config(b.clone()), Some(2), now_ms())
        .await
        .expect("store available")
        .expect("the same edit again");
    assert_eq!(
        finding(fixture, &tenant, &everyone, &id).await,
        set(&b),
        "a repeat finishes what the edit owed"
    );
    fixture.fail_transactions_after(Some(1));
    let cut = store
        .put_code(&tenant, &id, &config(c), Some(3), now_ms())
        .await;
    assert!(cut.is_err(), "an edit cut short fails: {cut:?}");
    fixture.fail_transactions_after(None);
    store
        .put_code(&tenant, &id, &config(d.clone()), Some(4), now_ms())
        .await
        .expect("store available")
        .expect("another edit from the version stored");
    assert_eq!(
        finding(fixture, &tenant, &everyone, &id).await,
        set(&d),
        "another edit finishes what the one it replaced owed"
    );
}

/// The staff among `staff` whose own record lists `sales`.
async fn listing<F: Fixture>(
    fixture: &F,
    tenant: &TenantId,
    staff: &[StaffId],
    sales: &crate::ids::DepartmentId,
) -> BTreeSet<StaffId> {
    let mut listing = BTreeSet::new();
    for who in staff {
        let record = fixture
            .store()
            .staff_record(tenant, who)
            .await
            .expect("store available");
        if record.is_some_and(|r| r.departments.contains(sales)) {
            listing.insert(who.clone());
        }
    }
    listing
}

pub async fn a_department_of_more_members_than_one_transaction_takes_is_on_every_members_record<
    F: Fixture,
>(
    fixture: &F,
    tenant: TenantId,
) {
    let store = fixture.store();
    let sales = department("42");
    let first: BTreeSet<StaffId> = numbered_staff("e", 0..MANY).into_iter().collect();
    let changed = store
        .set_department_members(&tenant, &sales, &first, now_ms())
        .await
        .expect("store available");
    assert_eq!(changed, first.iter().cloned().collect::<Vec<_>>());
    assert_eq!(
        store
            .department_members(&tenant, &sales)
            .await
            .expect("store available"),
        Some(first.clone())
    );
    let everyone = numbered_staff("e", 0..MANY + 40);
    assert_eq!(listing(fixture, &tenant, &everyone, &sales).await, first);
    let second: BTreeSet<StaffId> = numbered_staff("e", 40..MANY + 40).into_iter().collect();
    let changed = store
        .set_department_members(&tenant, &sales, &second, now_ms())
        .await
        .expect("store available");
    let moved: Vec<StaffId> = first.symmetric_difference(&second).cloned().collect();
    assert_eq!(changed, moved, "those who left and joined, in id order");
    assert_eq!(listing(fixture, &tenant, &everyone, &sales).await, second);
    let left = store
        .staff_record(&tenant, &everyone[0])
        .await
        .expect("store available")
        .expect("a member who left keeps their record");
    assert!(left.departments.is_empty());
}

pub async fn a_department_replacement_cut_short_is_finished_by_the_next_one<F: Fixture>(
    fixture: &F,
    tenant: TenantId,
) {
    let store = fixture.store();
    let sales = department("77");
    let [a, b, c] = [0, 1, 2].map(|i| {
        numbered_staff("r", i * 60..i * 60 + MANY)
            .into_iter()
            .collect::<BTreeSet<_>>()
    });
    let everyone = numbered_staff("r", 0..2 * 60 + MANY);
    store
        .set_department_members(&tenant, &sales, &a, now_ms())
        .await
        .expect("store available");
    fixture.fail_transactions_after(Some(1));
    let cut = store
        .set_department_members(&tenant, &sales, &b, now_ms())
        .await;
    assert!(cut.is_err(), "a replacement cut short fails: {cut:?}");
    fixture.fail_transactions_after(None);
    assert_eq!(
        store
            .department_members(&tenant, &sales)
            .await
            .expect("store available"),
        Some(b),
        "the members landed"
    );
    store
        .set_department_members(&tenant, &sales, &c, now_ms())
        .await
        .expect("store available");
    assert_eq!(
        listing(fixture, &tenant, &everyone, &sales).await,
        c,
        "the next replacement finishes what the one it replaced owed"
    );
}

pub async fn a_code_listing_a_department_is_found_from_each_of_its_members_and_no_one_else<
    F: Fixture,
>(
    fixture: &F,
    tenant: TenantId,
) {
    let store = fixture.store();
    let sales = department("9");
    let members: BTreeSet<StaffId> = numbered_staff("g", 0..3).into_iter().collect();
    store
        .set_department_members(&tenant, &sales, &members, now_ms())
        .await
        .expect("store available");
    let id = code("bydept");
    let mut listed = config(Vec::new());
    listed.departments = vec![sales.clone()];
    store
        .put_code(&tenant, &id, &listed, None, now_ms())
        .await
        .expect("store available")
        .expect("created");
    let everyone = numbered_staff("g", 0..5);
    let wanted = members.clone();
    assert_eq!(finding(fixture, &tenant, &everyone, &id).await, wanted);
    let fewer: BTreeSet<StaffId> = numbered_staff("g", 1..3).into_iter().collect();
    store
        .set_department_members(&tenant, &sales, &fewer, now_ms())
        .await
        .expect("store available");
    assert_eq!(finding(fixture, &tenant, &everyone, &id).await, fewer);
    assert_eq!(
        store
            .codes_listing_department(&tenant, &sales)
            .await
            .expect("store available"),
        [id]
    );
}
