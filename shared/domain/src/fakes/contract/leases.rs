//! The per-code lease (`crate::refresh::lease`): one writer at a time, free again when it
//! expires or is given back, and every record write fenced on it. The fence is the holder:
//! a new acquisition is a new holder, so an old holder's writes are refused. A limit claim
//! is held the same way: by its owner until its lease ends, taken over only as it was read.

use super::{code, now_ms, staff, Fixture};
use crate::facts::{ClaimOutcome, LimitClaim, QuotaLedger};
use crate::ids::CodeId;
use crate::ids::TenantId;
use crate::lanes::Lane;
use crate::membership::{Limit, RotationSlot};
use crate::refresh::{
    Acquired, AfterRecord, CodeLeases, CodeRecords, FencedWrite, Lease, PushRecord,
};

const DURATION_MS: u64 = 10_000;

async fn acquire<F: Fixture>(
    fixture: &F,
    tenant: &TenantId,
    id: &CodeId,
    holder: &str,
    at_ms: u64,
) -> Acquired {
    fixture
        .store()
        .acquire(tenant, id, holder, at_ms, DURATION_MS, None)
        .await
        .expect("store available")
}

async fn leased<F: Fixture>(
    fixture: &F,
    tenant: &TenantId,
    id: &CodeId,
    holder: &str,
    at_ms: u64,
) -> Lease {
    match acquire(fixture, tenant, id, holder, at_ms).await {
        Acquired::LeasedRefresh(lease) => lease,
        busy => panic!("{holder} should get the lease at {at_ms}: {busy:?}"),
    }
}

fn push(at_ms: u64) -> PushRecord {
    PushRecord {
        users: vec![staff("ann")],
        pushed_at_ms: at_ms,
        fallback: false,
        fact_at_ms: vec![at_ms],
        rotation: None,
        on_page: false,
        lane: Lane::Fast,
    }
}

/// Every fenced record write under `lease`, with its answer.
async fn record_writes<F: Fixture>(
    fixture: &F,
    tenant: &TenantId,
    id: &CodeId,
    lease: &Lease,
    at_ms: u64,
) -> [FencedWrite; 3] {
    let store = fixture.store();
    let rotation = [RotationSlot {
        staff: staff("ann"),
        takes: 1,
        link: None,
    }];
    [
        store
            .record_push(tenant, id, lease, &push(at_ms), AfterRecord::Keep)
            .await
            .expect("store available"),
        store
            .record_rotation(tenant, id, lease, &[staff("ann")], Some(&rotation))
            .await
            .expect("store available"),
        store
            .record_starved(tenant, id, lease, at_ms, false)
            .await
            .expect("store available"),
    ]
}

pub async fn a_held_lease_is_refused_to_another_writer_until_it_expires<F: Fixture>(
    fixture: &F,
    tenant: TenantId,
) {
    let id = code("leased");
    let at = now_ms();
    let first = leased(fixture, &tenant, &id, "writer-a", at).await;
    assert_eq!(
        first,
        Lease {
            holder: "writer-a".into(),
            expires_at_ms: at + DURATION_MS,
        }
    );
    assert_eq!(
        acquire(fixture, &tenant, &id, "writer-b", at + 4_000).await,
        Acquired::Busy {
            retry_after_ms: DURATION_MS - 4_000
        }
    );
    assert_eq!(
        acquire(fixture, &tenant, &id, "writer-a", at + 1).await,
        Acquired::Busy {
            retry_after_ms: DURATION_MS - 1
        },
        "a held lease is refused even to its holder asking again"
    );
    let second = leased(fixture, &tenant, &id, "writer-b", at + DURATION_MS).await;
    assert_eq!(
        second.expires_at_ms,
        at + 2 * DURATION_MS,
        "free at its expiry"
    );
    let other = leased(fixture, &tenant, &code("other"), "writer-c", at + 1).await;
    assert_eq!(other.holder, "writer-c", "each code has its own lease");
}

pub async fn a_writer_whose_lease_was_taken_over_has_every_record_write_refused<F: Fixture>(
    fixture: &F,
    tenant: TenantId,
) {
    let id = code("fenced");
    let at = now_ms();
    let old = leased(fixture, &tenant, &id, "writer-old", at).await;
    assert_eq!(
        record_writes(fixture, &tenant, &id, &old, at + 1).await,
        [FencedWrite::Written; 3]
    );
    let new = leased(fixture, &tenant, &id, "writer-new", at + DURATION_MS + 1).await;
    assert_eq!(
        record_writes(fixture, &tenant, &id, &old, at + DURATION_MS + 2).await,
        [FencedWrite::LeaseLost; 3],
        "the old holder is fenced out"
    );
    assert_eq!(
        record_writes(fixture, &tenant, &id, &new, at + DURATION_MS + 3).await,
        [FencedWrite::Written; 3]
    );
}

pub async fn a_record_write_under_a_lease_never_taken_is_refused<F: Fixture>(
    fixture: &F,
    tenant: TenantId,
) {
    let id = code("unleased");
    let at = now_ms();
    let forged = Lease {
        holder: "nobody".into(),
        expires_at_ms: at + DURATION_MS,
    };
    assert_eq!(
        record_writes(fixture, &tenant, &id, &forged, at).await,
        [FencedWrite::LeaseLost; 3]
    );
    leased(fixture, &tenant, &id, "somebody", at).await;
    assert_eq!(
        record_writes(fixture, &tenant, &id, &forged, at).await,
        [FencedWrite::LeaseLost; 3],
        "nor under another holder's lease"
    );
}

pub async fn a_released_lease_is_free_at_once_but_a_stale_release_frees_nothing<F: Fixture>(
    fixture: &F,
    tenant: TenantId,
) {
    let store = fixture.store();
    let id = code("released");
    let at = now_ms();
    let first = leased(fixture, &tenant, &id, "writer-a", at).await;
    store
        .release(&tenant, &id, &first)
        .await
        .expect("store available");
    let second = leased(fixture, &tenant, &id, "writer-b", at + 1).await;
    assert_eq!(
        record_writes(fixture, &tenant, &id, &first, at + 2).await,
        [FencedWrite::LeaseLost; 3],
        "a lease given back fences its holder out"
    );
    store
        .release(&tenant, &id, &first)
        .await
        .expect("a stale release is no error");
    assert_eq!(
        acquire(fixture, &tenant, &id, "writer-c", at + 3).await,
        Acquired::Busy {
            retry_after_ms: second.expires_at_ms - (at + 3)
        },
        "the stale release left writer-b's lease alone"
    );
    assert_eq!(
        record_writes(fixture, &tenant, &id, &second, at + 4).await,
        [FencedWrite::Written; 3]
    );
}

pub async fn a_limit_claim_is_owned_by_its_first_claimer_and_taken_over_only_as_read<F: Fixture>(
    fixture: &F,
    tenant: TenantId,
) {
    let store = fixture.store();
    let at = now_ms();
    // Leases an hour out: the deployed sweep takes over only claims whose lease has ended.
    let claim = LimitClaim {
        tenant: tenant.clone(),
        staff: staff("ann"),
        limit: Limit::CodeDaily,
        day: "2026-12-05".into(),
        code: Some(code("capped")),
        owner: "add-1".into(),
        claimed_at_ms: at,
        lease_until_ms: at + 3_600_000,
    };
    let claim_as = |owner: &str| LimitClaim {
        owner: owner.to_owned(),
        ..claim.clone()
    };
    let outcome =
        |c: LimitClaim| async move { store.claim_limit(&c).await.expect("store available") };
    assert_eq!(
        outcome(claim.clone()).await,
        ClaimOutcome::Owned { notified: false }
    );
    assert_eq!(
        outcome(claim.clone()).await,
        ClaimOutcome::Owned { notified: false },
        "a redelivery of the owner's add still owns it"
    );
    assert_eq!(
        outcome(claim_as("add-2")).await,
        ClaimOutcome::TakenByAnother
    );
    let misread = LimitClaim {
        lease_until_ms: claim.lease_until_ms + 1,
        ..claim.clone()
    };
    assert!(
        !store
            .take_over(&misread, "sweep-1", at + 7_200_000)
            .await
            .expect("store available"),
        "a take-over from a stale read is refused"
    );
    assert!(store
        .take_over(&claim, "sweep-1", at + 7_200_000)
        .await
        .expect("store available"));
    assert!(
        !store
            .take_over(&claim, "sweep-2", at + 7_200_000)
            .await
            .expect("store available"),
        "the claim as first read is gone"
    );
    store
        .mark_notified(&claim, 1)
        .await
        .expect("a former owner's mark is no error");
    assert_eq!(
        outcome(claim_as("sweep-1")).await,
        ClaimOutcome::Owned { notified: false },
        "a former owner's mark is not recorded"
    );
    assert_eq!(outcome(claim.clone()).await, ClaimOutcome::TakenByAnother);
    let taken = LimitClaim {
        owner: "sweep-1".into(),
        lease_until_ms: at + 7_200_000,
        ..claim.clone()
    };
    store
        .mark_notified(&taken, 1)
        .await
        .expect("store available");
    assert_eq!(
        outcome(claim_as("sweep-1")).await,
        ClaimOutcome::Owned { notified: true }
    );
    assert!(
        !store
            .take_over(&taken, "sweep-2", at + 9_000_000)
            .await
            .expect("store available"),
        "a notified claim is never taken over"
    );
}

pub async fn a_lease_taken_with_a_count_expected_is_refused_once_anyone_took_it_since<
    F: Fixture,
>(
    fixture: &F,
    tenant: TenantId,
) {
    let id = code("counted");
    let store = fixture.store();
    let at = now_ms();
    let take = |holder: &'static str, at_ms: u64, expected: Option<u64>| {
        let (tenant, id) = (tenant.clone(), id.clone());
        async move {
            store
                .acquire(&tenant, &id, holder, at_ms, DURATION_MS, expected)
                .await
                .expect("store available")
        }
    };
    // Never taken: the count a snapshot reads is 0.
    let Acquired::LeasedRefresh(first) = take("writer-a", at, Some(0)).await else {
        panic!("a lease never taken is taken with 0 expected");
    };
    store
        .release(&tenant, &id, &first)
        .await
        .expect("store available");
    assert_eq!(
        take("writer-b", at + 1, Some(0)).await,
        Acquired::TakenSince,
        "free, but taken since a read that saw 0"
    );
    let Acquired::LeasedRefresh(second) = take("writer-b", at + 2, Some(1)).await else {
        panic!("taken with the count as it is");
    };
    // A record that gives the lease back leaves it free at once, the count moved on.
    let written = store
        .record_push(&tenant, &id, &second, &push(at + 3), AfterRecord::Release)
        .await
        .expect("store available");
    assert_eq!(written, FencedWrite::Written);
    assert!(matches!(
        take("writer-c", at + 4, Some(2)).await,
        Acquired::LeasedRefresh(_)
    ));
}

/// The lease and the code's record may share an item (the DynamoDB adapter keeps the lease on
/// the record): taking the lease makes no record, and writing the record neither frees the
/// lease nor forgets how often it was taken, unless the write gives it back.
pub async fn a_code_leased_before_its_first_record_has_none_and_its_records_keep_the_lease<
    F: Fixture,
>(
    fixture: &F,
    tenant: TenantId,
) {
    use crate::admin::AdminStore;
    use crate::codes::{CodeFacts, LeaseSeen};
    let store = fixture.store();
    super::conditions::with_profile(store, &tenant).await;
    let id = code("leased-first");
    let at = now_ms();
    store
        .put_code(&tenant, &id, &super::config(vec![staff("ann")]), None, at)
        .await
        .expect("store available")
        .expect("created");
    let seen = |at_ms: u64| {
        let (tenant, id) = (tenant.clone(), id.clone());
        async move {
            let snapshot = store
                .snapshot(&tenant, &id, at_ms)
                .await
                .expect("store available")
                .expect("the code is stored");
            (
                snapshot.last_pushed.map(|pushed| pushed.users),
                snapshot.lease,
            )
        }
    };
    let Acquired::LeasedRefresh(lease) = store
        .acquire(&tenant, &id, "writer-a", at, DURATION_MS, Some(0))
        .await
        .expect("store available")
    else {
        panic!("a lease never taken is taken with 0 expected");
    };
    let held = LeaseSeen {
        acquisitions: 1,
        held_until_ms: at + DURATION_MS,
    };
    assert_eq!(
        seen(at + 1).await,
        (None, held),
        "a lease alone is no record"
    );

    let kept = store
        .record_push(&tenant, &id, &lease, &push(at + 2), AfterRecord::Keep)
        .await
        .expect("store available");
    assert_eq!(kept, FencedWrite::Written);
    assert_eq!(
        seen(at + 3).await,
        (Some(vec![staff("ann")]), held),
        "a record written under the lease keeps it"
    );

    let released = store
        .record_push(&tenant, &id, &lease, &push(at + 4), AfterRecord::Release)
        .await
        .expect("store available");
    assert_eq!(released, FencedWrite::Written);
    let (record, free) = seen(at + 5).await;
    assert_eq!(record, Some(vec![staff("ann")]));
    assert_eq!(free.acquisitions, 1, "the count survives the record");
    assert!(
        free.held_until_ms <= at + 5,
        "given back by the record: {free:?}"
    );
    assert!(matches!(
        store
            .acquire(&tenant, &id, "writer-b", at + 6, DURATION_MS, Some(1))
            .await
            .expect("store available"),
        Acquired::LeasedRefresh(_)
    ));
}
