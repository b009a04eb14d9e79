//! The landing page's home (`crate::refresh::PageWrite`): a landing code's page is written
//! with its record, under the record's fence, and a visit counts on the page's round.

use super::{code, now_ms, staff, Fixture};
use crate::ids::TenantId;
use crate::landing::{Counted, OrderKey, RotationCounter};
use crate::lanes::Lane;
use crate::membership::RotationSlot;
use crate::refresh::{
    Acquired, AfterRecord, CodeLeases, CodeRecords, FencedWrite, Lease, PushRecord,
};

fn slot(name: &str) -> RotationSlot {
    RotationSlot {
        staff: staff(name),
        takes: 1,
        link: Some(format!("https://work.weixin.qq.com/ca/{name}")),
    }
}

fn push_of(rotation: Vec<RotationSlot>, at_ms: u64) -> PushRecord {
    PushRecord {
        users: rotation.iter().map(|slot| slot.staff.clone()).collect(),
        pushed_at_ms: at_ms,
        fallback: false,
        fact_at_ms: vec![at_ms],
        rotation: Some(rotation),
        on_page: true,
        lane: Lane::Fast,
    }
}

/// The visit's number, rotation and order key; panics on anything but a counted visit.
async fn visit<F: Fixture>(
    fixture: &F,
    tenant: &TenantId,
    id: &crate::ids::CodeId,
) -> (u64, Vec<RotationSlot>, OrderKey) {
    match fixture
        .store()
        .count_visit(tenant, id)
        .await
        .expect("store available")
    {
        Counted::Visit {
            number,
            rotation,
            order,
        } => (number, rotation, order),
        other => panic!("a counted visit, not {other:?}"),
    }
}

pub async fn a_landing_codes_page_changes_with_its_record_and_never_without_it<F: Fixture>(
    fixture: &F,
    tenant: TenantId,
) {
    let store = fixture.store();
    let id = code("paged");
    let at = now_ms();
    let counted = |counted: Result<Counted, crate::StoreError>| counted.expect("store available");
    assert_eq!(
        counted(store.count_visit(&tenant, &id).await),
        Counted::NoSuchCode
    );
    let Acquired::LeasedRefresh(lease) = store
        .acquire(&tenant, &id, "writer", at, 10_000, None)
        .await
        .expect("store available")
    else {
        panic!("the lease of a new code is free");
    };
    let written =
        |written: Result<FencedWrite, crate::StoreError>| written.expect("store available");

    // A push: a new round, counted from one.
    let first = push_of(vec![slot("ann"), slot("bob")], at);
    assert_eq!(
        written(
            store
                .record_push(&tenant, &id, &lease, &first, AfterRecord::Keep)
                .await
        ),
        FencedWrite::Written
    );
    let (number, rotation, key) = visit(fixture, &tenant, &id).await;
    assert_eq!((number, rotation), (1, vec![slot("ann"), slot("bob")]));
    assert_eq!(
        visit(fixture, &tenant, &id).await,
        (2, vec![slot("ann"), slot("bob")], key.clone())
    );

    // The same round with a changed rotation: the counter and the key go on.
    assert_eq!(
        written(
            store
                .record_rotation(
                    &tenant,
                    &id,
                    &lease,
                    &[staff("ann"), staff("bob")],
                    Some(&[slot("ann")])
                )
                .await
        ),
        FencedWrite::Written
    );
    assert_eq!(
        visit(fixture, &tenant, &id).await,
        (3, vec![slot("ann")], key.clone())
    );

    // The next push: a new round under a new key.
    let second = push_of(vec![slot("bob")], at + 1);
    assert_eq!(
        written(
            store
                .record_push(&tenant, &id, &lease, &second, AfterRecord::Keep)
                .await
        ),
        FencedWrite::Written
    );
    let (number, rotation, new_key) = visit(fixture, &tenant, &id).await;
    assert_eq!((number, rotation), (1, vec![slot("bob")]));
    assert_ne!(new_key, key, "each round is ordered by a key of its own");

    // Starved, then served again by a push.
    assert_eq!(
        written(
            store
                .record_starved(&tenant, &id, &lease, at + 2, true)
                .await
        ),
        FencedWrite::Written
    );
    assert_eq!(
        counted(store.count_visit(&tenant, &id).await),
        Counted::Starved
    );

    // A writer whose lease is not the code's changes neither the record nor the page.
    let forged = Lease {
        holder: "intruder".into(),
        expires_at_ms: at + 10_000,
    };
    let third = push_of(vec![slot("eve")], at + 3);
    assert_eq!(
        written(
            store
                .record_push(&tenant, &id, &forged, &third, AfterRecord::Keep)
                .await
        ),
        FencedWrite::LeaseLost
    );
    assert_eq!(
        written(
            store
                .record_rotation(&tenant, &id, &forged, &[staff("eve")], Some(&[slot("eve")]))
                .await
        ),
        FencedWrite::LeaseLost
    );
    assert_eq!(
        counted(store.count_visit(&tenant, &id).await),
        Counted::Starved
    );

    // Edited to native: visitors are told the page does not serve it.
    assert_eq!(
        written(
            store
                .record_rotation(&tenant, &id, &lease, &[staff("bob")], None)
                .await
        ),
        FencedWrite::Written
    );
    assert_eq!(
        counted(store.count_visit(&tenant, &id).await),
        Counted::NotRotating
    );
}
