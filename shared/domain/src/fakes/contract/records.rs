//! Records read back as they were written: a code's age (in its snapshot), the drift read-back's own records,
//! a replay run's record.

use super::{code, config, now_ms, staff, Fixture};
use crate::admin::AdminStore;
use crate::codes::CodeFacts;
use crate::dirty::DirtyMarks;
use crate::ids::CodeId;
use crate::ids::TenantId;
use crate::lanes::CodeAge;
use crate::replay::{ReplayRuns, RunRequest, RunStart, Selection};
use crate::sweep::{DriftCounts, DriftLedger, DriftReport, GuardTrip};

async fn age<S: CodeFacts>(store: &S, tenant: &TenantId, id: &CodeId) -> Option<CodeAge> {
    store
        .snapshot(tenant, id, now_ms())
        .await
        .expect("store available")
        .map(|snapshot| snapshot.age)
}

pub async fn a_codes_age_keeps_its_creation_and_moves_with_each_edit<F: Fixture>(
    fixture: &F,
    tenant: TenantId,
) {
    let store = fixture.store();
    super::conditions::with_profile(store, &tenant).await;
    let id = code("aged");
    assert_eq!(age(store, &tenant, &id).await, None);
    let created = now_ms();
    store
        .put_code(&tenant, &id, &config(vec![staff("ann")]), None, created)
        .await
        .expect("store available")
        .expect("created");
    assert_eq!(
        age(store, &tenant, &id).await,
        Some(CodeAge {
            created_at_ms: created,
            updated_at_ms: created,
        })
    );
    store
        .put_code(
            &tenant,
            &id,
            &config(vec![staff("bob")]),
            Some(1),
            created + 500,
        )
        .await
        .expect("store available")
        .expect("edited");
    assert_eq!(
        age(store, &tenant, &id).await,
        Some(CodeAge {
            created_at_ms: created,
            updated_at_ms: created + 500,
        })
    );
}

pub async fn a_drift_report_adds_up_and_a_tripped_guard_holds_until_resumed<F: Fixture>(
    fixture: &F,
    tenant: TenantId,
) {
    let store = fixture.store();
    let day = "2026-12-05";
    let empty = DriftReport {
        day: day.to_owned(),
        ..DriftReport::default()
    };
    assert_eq!(
        store.report(&tenant, day).await.expect("store available"),
        empty
    );
    for (read, stale_confirmed) in [(5, 1), (3, 0)] {
        let counts = DriftCounts {
            read,
            stale_confirmed,
        };
        store
            .add_to_report(&tenant, day, &counts)
            .await
            .expect("store available");
    }
    // c1 differs twice, then is repaired; c2 differs, then a read agrees; c3 differs; c4
    // only ever agrees.
    for (code_id, differs) in [
        ("c1", true),
        ("c2", true),
        ("c1", true),
        ("c3", true),
        ("c2", false),
        ("c4", false),
    ] {
        store
            .record_read(&tenant, day, &code(code_id), differs)
            .await
            .expect("store available");
    }
    store
        .count_repaired(&tenant, day, &code("c1"))
        .await
        .expect("store available");
    assert_eq!(
        store.report(&tenant, day).await.expect("store available"),
        DriftReport {
            day: day.to_owned(),
            read: 8,
            differing: 3,
            repaired: 1,
            still_differing: 1,
            stale_confirmed: 1,
        },
        "each code once; only c3's latest read differs unrepaired"
    );
    assert_eq!(
        store
            .report(&tenant, "2026-12-06")
            .await
            .expect("store available")
            .read,
        0,
        "each day has its own report"
    );
    assert_eq!(store.guard(&tenant).await.expect("store available"), None);
    assert!(
        !store.resume(&tenant).await.expect("store available"),
        "nothing to resume"
    );
    let trip = GuardTrip {
        tripped_at_ms: now_ms(),
        sampled: 10,
        differing: 7,
        codes: vec![code("c3"), code("c1")],
        recheck_at_ms: now_ms() + 900_000,
        confirmed_at_ms: None,
    };
    store
        .trip_guard(&tenant, &trip)
        .await
        .expect("store available");
    assert_eq!(
        store.guard(&tenant).await.expect("store available"),
        Some(trip.clone())
    );
    assert!(
        !store
            .confirm_guard(&tenant, trip.tripped_at_ms + 1, trip.recheck_at_ms)
            .await
            .expect("store available"),
        "another trip is not confirmed"
    );
    assert!(store
        .confirm_guard(&tenant, trip.tripped_at_ms, trip.recheck_at_ms)
        .await
        .expect("store available"));
    assert_eq!(
        store
            .guard(&tenant)
            .await
            .expect("store available")
            .and_then(|guard| guard.confirmed_at_ms),
        Some(trip.recheck_at_ms)
    );
    assert!(store.resume(&tenant).await.expect("store available"));
    assert!(
        !store
            .confirm_guard(&tenant, trip.tripped_at_ms, trip.recheck_at_ms)
            .await
            .expect("store available"),
        "a resumed guard is not brought back"
    );
    assert_eq!(store.guard(&tenant).await.expect("store available"), None);
    assert_eq!(
        store.sample_cursor(&tenant).await.expect("store available"),
        None
    );
    for after in [code("c1"), code("c0")] {
        store
            .save_sample_cursor(&tenant, &after)
            .await
            .expect("store available");
        assert_eq!(
            store.sample_cursor(&tenant).await.expect("store available"),
            Some(after),
            "the cursor saved last, even an earlier code"
        );
    }
}

pub async fn a_replay_run_is_created_once_sees_each_callback_once_and_pages_its_codes<
    F: Fixture,
>(
    fixture: &F,
    tenant: TenantId,
) {
    let store = fixture.store();
    // Run ids are global: the tenant's makes it unique.
    let run = format!("run-{tenant}");
    let selection = Selection {
        tenant: tenant.clone(),
        from_ms: now_ms() - 3_600_000,
        to_ms: now_ms(),
        code: None,
        event_type: None,
    };
    let request = RunRequest {
        selection,
        apply: false,
        by: "arn:aws:iam::000000000000:user/ops as ann".into(),
        requested_at_ms: now_ms(),
    };
    assert_eq!(
        store
            .create(&run, &request, now_ms())
            .await
            .expect("store available"),
        RunStart::New
    );
    assert_eq!(
        store
            .create(&run, &request, now_ms())
            .await
            .expect("store available"),
        RunStart::Resumed,
        "its first page again carries on with the run"
    );
    let other = RunRequest {
        apply: true,
        ..request.clone()
    };
    assert_eq!(
        store
            .create(&run, &other, now_ms())
            .await
            .expect("store available"),
        RunStart::Taken,
        "another request under the same id is refused"
    );
    let later = RunRequest {
        requested_at_ms: request.requested_at_ms + 1,
        ..request.clone()
    };
    assert_eq!(
        store
            .create(&run, &later, now_ms())
            .await
            .expect("store available"),
        RunStart::Taken,
        "the same selection asked again is another request"
    );
    assert!(store
        .first_sight(&run, "key-1")
        .await
        .expect("store available"));
    assert!(!store
        .first_sight(&run, "key-1")
        .await
        .expect("store available"));
    assert!(store
        .first_sight(&run, "key-2")
        .await
        .expect("store available"));
    let noted = ["q", "b", "x", "b", "a", "q"].map(code);
    for id in &noted {
        store.note_code(&run, id).await.expect("store available");
    }
    let mut read: Vec<Vec<CodeId>> = Vec::new();
    let mut after: Option<CodeId> = None;
    loop {
        let page = store
            .codes(&run, after.as_ref(), 2)
            .await
            .expect("store available");
        if page.is_empty() || read.len() > 10 {
            break;
        }
        after = page.last().cloned();
        read.push(page);
    }
    assert_eq!(
        read,
        [vec![code("a"), code("b")], vec![code("q"), code("x")]],
        "each code once, in code order, pages of at most the limit"
    );
}

/// An archived callback past its expiry is not paged, though the table's TTL may still keep it:
/// its add's claim expires no earlier, and replayed after it could count again.
pub async fn an_archived_callback_past_its_expiry_is_never_paged<F: Fixture>(
    fixture: &F,
    tenant: TenantId,
) {
    use crate::intake::InboxMessage;
    use crate::replay::CallbackArchive;
    let store = fixture.store();
    let now = now_ms();
    let message = |key: &str, received_at_ms: u64| InboxMessage {
        tenant: tenant.clone(),
        received_at_ms,
        msg_signature: "signature".into(),
        timestamp: "1".into(),
        nonce: "nonce".into(),
        envelope: "envelope".into(),
        event_key: key.into(),
        group: None,
    };
    let group = format!("{tenant}#tenant");
    let now_secs = now / 1000;
    for (key, received, expires) in [
        ("kept", now - 2_000, now_secs + 3_600),
        ("expired", now - 1_000, now_secs),
    ] {
        store
            .keep(&message(key, received), &group, expires)
            .await
            .expect("store available");
    }
    let selection = Selection {
        tenant: tenant.clone(),
        from_ms: now - 3_600_000,
        to_ms: now,
        code: None,
        event_type: None,
    };
    let (paged, next) = store
        .page(&selection, None, 10, now_secs)
        .await
        .expect("store available");
    let keys: Vec<&str> = paged.iter().map(|c| c.message.event_key.as_str()).collect();
    assert_eq!(keys, ["kept"], "the expired callback is not paged");
    assert_eq!(next, None);
    let (before, _) = store
        .page(&selection, None, 10, now_secs - 1)
        .await
        .expect("store available");
    assert_eq!(before.len(), 2, "a second earlier, both were paged");
}

pub async fn a_profiles_previous_callback_keys_read_back_as_written_and_go_when_it_drops_them<
    F: Fixture,
>(
    fixture: &F,
    tenant: TenantId,
) {
    use crate::tenants::PreviousCallbackKeys;
    let store = fixture.store();
    let corp = super::conditions::fresh_corp();
    let first = super::conditions::profile(&corp, 1);
    store
        .put_profile(&tenant, &first, None)
        .await
        .expect("store available");
    assert_eq!(settings(store, &tenant).await.previous, None);

    let mut rotated = super::conditions::profile(&corp, 2);
    rotated.profile.callback_token = "newtoken".into();
    rotated.profile.previous_callback = Some(PreviousCallbackKeys {
        callback_token: first.profile.callback_token.clone(),
        encoding_aes_key: first.profile.encoding_aes_key.clone(),
        replaced_at_ms: now_ms(),
    });
    store
        .put_profile(&tenant, &rotated, Some(&first))
        .await
        .expect("store available");
    let stored = store
        .stored_profile(&tenant)
        .await
        .expect("store available")
        .expect("stored");
    assert_eq!(stored, rotated);
    // The callback function's projection holds the previous pair too.
    assert_eq!(
        settings(store, &tenant).await,
        rotated.profile.callback_settings()
    );

    let mut dropped = rotated.clone();
    dropped.version = 3;
    dropped.profile.previous_callback = None;
    store
        .put_profile(&tenant, &dropped, Some(&rotated))
        .await
        .expect("store available");
    assert_eq!(settings(store, &tenant).await.previous, None);
}

async fn settings<S: crate::tenants::CallbackSettingsSource>(
    store: &S,
    tenant: &TenantId,
) -> crate::tenants::CallbackSettings {
    store
        .callback_settings(tenant)
        .await
        .expect("store available")
        .expect("the tenant's settings")
}
