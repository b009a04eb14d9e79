//! Conditional writes the store refuses, and what it answers for each: a refusal is an
//! answer the caller acts on, never an error, and nothing is written.

use super::{code, config, department, now_ms, staff, Fixture};
use crate::admin::{
    AdminStore, ProfileWrite, SecretsChanged, StaffChange, StaffUpdate, StoredProfile,
};
use crate::facts::{AddFact, AddLedger, CountOutcome, QuotaLedger, StaffLedger};
use crate::ids::TenantId;
use crate::ids::{CodeId, DepartmentId};
use crate::membership::{Employment, WeeklySchedule};
use crate::refresh::CodeRecords;
use crate::refresh::FailureMarks;
use crate::sweep::LinkRetirements;
use crate::tenants::{TenantProfile, Timezone};
use crate::wecom::acquisition::AcquisitionLink;
use std::collections::BTreeSet;

pub(super) fn profile(corp_id: &str, version: u64) -> StoredProfile {
    StoredProfile {
        profile: TenantProfile {
            corp_id: corp_id.to_owned(),
            callback_token: "token".into(),
            encoding_aes_key: "k".repeat(43),
            previous_callback: None,
            corp_secret: "secret".into(),
            timezone: Timezone::default(),
            company_daily_cap: None,
        },
        version,
        secrets_changed_at_ms: SecretsChanged::default(),
    }
}

/// Gives `tenant` a profile of a corp of its own: a snapshot is read only for a tenant with one.
pub(super) async fn with_profile<S: crate::admin::AdminStore>(store: &S, tenant: &TenantId) {
    store
        .put_profile(tenant, &profile(&fresh_corp(), 1), None)
        .await
        .expect("store available");
}

/// A corp id no other tenant holds (corp ids are claimed across the whole table).
pub(super) fn fresh_corp() -> String {
    format!("wwcontract{:016x}", rand::random::<u64>())
}

pub async fn a_second_creation_of_one_code_is_refused_and_the_first_stands<F: Fixture>(
    fixture: &F,
    tenant: TenantId,
) {
    let store = fixture.store();
    let id = code("twice");
    let first = config(vec![staff("ann")]);
    let created = store
        .put_code(&tenant, &id, &first, None, now_ms())
        .await
        .expect("store available")
        .expect("created");
    assert_eq!(created.version, 1);
    let second = store
        .put_code(&tenant, &id, &config(vec![staff("bob")]), None, now_ms())
        .await
        .expect("store available");
    assert_eq!(second, None, "a second creation is refused");
    let stored = store
        .code(&tenant, &id)
        .await
        .expect("store available")
        .expect("stored");
    assert_eq!((stored.version, stored.code.config), (1, first));
    let from_nothing = store
        .put_code(&tenant, &code("absent"), &config(vec![]), Some(1), now_ms())
        .await
        .expect("store available");
    assert_eq!(
        from_nothing, None,
        "an edit of a code not stored is refused"
    );
    assert_eq!(
        store
            .code(&tenant, &code("absent"))
            .await
            .expect("store available"),
        None
    );
}

pub async fn an_edit_from_a_stale_version_is_refused_and_changes_nothing<F: Fixture>(
    fixture: &F,
    tenant: TenantId,
) {
    let store = fixture.store();
    let id = code("edited");
    store
        .put_code(&tenant, &id, &config(vec![staff("ann")]), None, now_ms())
        .await
        .expect("store available")
        .expect("created");
    let newer = config(vec![staff("bob")]);
    let edited = store
        .put_code(&tenant, &id, &newer, Some(1), now_ms())
        .await
        .expect("store available")
        .expect("edited from the version stored");
    assert_eq!(edited.version, 2);
    let stale = store
        .put_code(&tenant, &id, &config(vec![staff("cat")]), Some(1), now_ms())
        .await
        .expect("store available");
    assert_eq!(
        stale, None,
        "an edit from version 1 after version 2 is refused"
    );
    let stored = store
        .code(&tenant, &id)
        .await
        .expect("store available")
        .expect("stored");
    assert_eq!((stored.version, stored.code.config), (2, newer));
    assert_eq!(
        store
            .codes_of_staff(&tenant, &staff("cat"))
            .await
            .expect("store available"),
        Vec::<CodeId>::new(),
        "the refused edit seated nobody"
    );
}

pub async fn a_code_keeps_the_first_contact_way_stored_for_it_through_later_edits<F: Fixture>(
    fixture: &F,
    tenant: TenantId,
) {
    let store = fixture.store();
    let id = code("way");
    store
        .put_code(&tenant, &id, &config(vec![staff("ann")]), None, now_ms())
        .await
        .expect("store available")
        .expect("created");
    let ann = ["ann".to_owned()];
    assert!(store
        .set_config_id(&tenant, &id, "cfg-first", &ann)
        .await
        .expect("store available"));
    assert!(
        !store
            .set_config_id(&tenant, &id, "cfg-second", &["bob".to_owned()])
            .await
            .expect("store available"),
        "a second contact way is refused"
    );
    assert!(
        !store
            .set_config_id(&tenant, &code("absent"), "cfg", &ann)
            .await
            .expect("store available"),
        "a code not stored takes no contact way"
    );
    let edited = store
        .put_code(&tenant, &id, &config(vec![staff("bob")]), Some(1), now_ms())
        .await
        .expect("store available")
        .expect("edited");
    assert_eq!(edited.code.config_id.as_deref(), Some("cfg-first"));
    let stored = store
        .code(&tenant, &id)
        .await
        .expect("store available")
        .expect("stored");
    assert_eq!(stored.code.config_id.as_deref(), Some("cfg-first"));
    assert_eq!(stored.code.created_with, [staff("ann")]);
}

pub async fn a_profile_written_from_a_stale_read_is_refused_as_raced<F: Fixture>(
    fixture: &F,
    tenant: TenantId,
) {
    let store = fixture.store();
    let corp = fresh_corp();
    let first = profile(&corp, 1);
    assert_eq!(
        store
            .put_profile(&tenant, &first, None)
            .await
            .expect("store available"),
        ProfileWrite::Stored
    );
    assert_eq!(
        store
            .put_profile(&tenant, &profile(&corp, 1), None)
            .await
            .expect("store available"),
        ProfileWrite::Raced,
        "a second first write"
    );
    let second = profile(&corp, 2);
    assert_eq!(
        store
            .put_profile(&tenant, &second, Some(&first))
            .await
            .expect("store available"),
        ProfileWrite::Stored
    );
    assert_eq!(
        store
            .put_profile(&tenant, &profile(&corp, 2), Some(&first))
            .await
            .expect("store available"),
        ProfileWrite::Raced,
        "a write from version 1 after version 2"
    );
    let stored = store
        .stored_profile(&tenant)
        .await
        .expect("store available")
        .expect("stored");
    assert_eq!(stored, second);
}

pub async fn a_corp_id_another_tenant_holds_is_refused_until_it_lets_go<F: Fixture>(
    fixture: &F,
    tenant: TenantId,
) {
    let store = fixture.store();
    let other = super::fresh_tenant();
    let (corp, elsewhere) = (fresh_corp(), fresh_corp());
    let held = profile(&corp, 1);
    assert_eq!(
        store
            .put_profile(&other, &held, None)
            .await
            .expect("store available"),
        ProfileWrite::Stored
    );
    assert_eq!(
        store
            .put_profile(&tenant, &profile(&corp, 1), None)
            .await
            .expect("store available"),
        ProfileWrite::CorpIdTaken
    );
    assert_eq!(
        store
            .stored_profile(&tenant)
            .await
            .expect("store available"),
        None,
        "nothing written"
    );
    assert_eq!(
        store
            .put_profile(&other, &profile(&elsewhere, 2), Some(&held))
            .await
            .expect("store available"),
        ProfileWrite::Stored,
        "the holder moves to another corp id"
    );
    assert_eq!(
        store
            .put_profile(&tenant, &profile(&corp, 1), None)
            .await
            .expect("store available"),
        ProfileWrite::Stored,
        "the corp id let go is free"
    );
}

pub async fn a_resigned_staff_member_cannot_be_made_active_or_disabled_again<F: Fixture>(
    fixture: &F,
    tenant: TenantId,
) {
    let store = fixture.store();
    let who = staff("leaver");
    let change = |online, employment| StaffChange { online, employment };
    let Ok(StaffUpdate::Stored(facts)) = store
        .update_staff(&tenant, &who, &change(Some(true), None), now_ms())
        .await
    else {
        panic!("a first staff write is stored");
    };
    assert!(facts.online);
    assert_eq!(
        facts.employment,
        Employment::Active,
        "a new staff member is active"
    );
    let resigned = store
        .update_staff(
            &tenant,
            &who,
            &change(None, Some(Employment::Resigned)),
            now_ms(),
        )
        .await
        .expect("store available");
    assert!(
        matches!(resigned, StaffUpdate::Stored(f) if f.employment == Employment::Resigned && f.online)
    );
    for back in [Employment::Active, Employment::Disabled] {
        assert_eq!(
            store
                .update_staff(&tenant, &who, &change(Some(false), Some(back)), now_ms())
                .await
                .expect("store available"),
            StaffUpdate::ResignationIsFinal,
            "{back:?}"
        );
    }
    let record = store
        .staff_record(&tenant, &who)
        .await
        .expect("store available")
        .expect("stored");
    assert_eq!(record.facts.employment, Employment::Resigned);
    assert!(record.facts.online, "the refused write changed nothing");
    let again = store
        .update_staff(
            &tenant,
            &who,
            &change(Some(false), Some(Employment::Resigned)),
            now_ms(),
        )
        .await
        .expect("store available");
    assert!(
        matches!(again, StaffUpdate::Stored(f) if !f.online),
        "resigned again is allowed"
    );
    // Nothing to retire: out of the index the deployed sweep polls.
    store
        .nothing_to_retire(&tenant, &who)
        .await
        .expect("store available");
}

/// The tenant's entries in the resigned-staff index, by staff id, and whether each is
/// resigned as the index's reader sees them.
async fn resigned_of<S: LinkRetirements>(
    store: &S,
    tenant: &TenantId,
    before_ms: u64,
) -> Vec<(String, bool)> {
    let mut leaving: Vec<(String, bool)> = store
        .resigned_before(before_ms, 1_000)
        .await
        .expect("store available")
        .into_iter()
        .filter(|leaving| leaving.tenant == *tenant)
        .map(|leaving| (leaving.staff.to_string(), leaving.resigned))
        .collect();
    leaving.sort();
    leaving
}

pub async fn a_resignation_enters_the_resigned_staff_index_however_it_arrives<F: Fixture>(
    fixture: &F,
    tenant: TenantId,
) {
    let store = fixture.store();
    // A rename needs the tenant's day.
    let profile = profile(&fresh_corp(), 1);
    store
        .put_profile(&tenant, &profile, None)
        .await
        .expect("store available");
    // A day ahead: the deployed sweep looks only at resignations older than its grace, so
    // it never takes these out while the case reads them.
    let at = now_ms() + 24 * 3_600_000;
    let active = StaffChange {
        online: Some(true),
        employment: None,
    };
    for who in ["by-admin", "renamed"] {
        store
            .update_staff(&tenant, &staff(who), &active, at)
            .await
            .expect("store available");
    }
    assert_eq!(resigned_of(store, &tenant, at + 10).await, []);

    // WeCom's delete_user, the admin API, and the old id of a re-keyed user.
    assert!(store
        .set_employment(&tenant, &staff("by-wecom"), Employment::Resigned, at)
        .await
        .expect("store available"));
    let resign = StaffChange {
        online: None,
        employment: Some(Employment::Resigned),
    };
    store
        .update_staff(&tenant, &staff("by-admin"), &resign, at + 1)
        .await
        .expect("store available");
    store
        .rename_staff(&tenant, &staff("renamed"), &staff("renamed-to"), at + 2)
        .await
        .expect("store available");

    let indexed = resigned_of(store, &tenant, at + 10).await;
    let expected = [("by-admin", true), ("by-wecom", true), ("renamed", true)]
        .map(|(who, resigned)| (who.to_owned(), resigned));
    assert_eq!(indexed, expected);
    assert_eq!(
        resigned_of(store, &tenant, at + 1).await,
        [("by-wecom".to_owned(), true)],
        "each by when it resigned"
    );
    for who in ["by-wecom", "by-admin", "renamed"] {
        store
            .nothing_to_retire(&tenant, &staff(who))
            .await
            .expect("store available");
    }
    assert_eq!(
        resigned_of(store, &tenant, at + 10).await,
        [],
        "nothing left to retire"
    );
}

pub async fn an_older_employment_fact_never_replaces_a_newer_one<F: Fixture>(
    fixture: &F,
    tenant: TenantId,
) {
    let store = fixture.store();
    let who = staff("flip");
    let at = now_ms();
    assert!(store
        .set_employment(&tenant, &who, Employment::Disabled, at)
        .await
        .expect("store available"));
    assert!(
        !store
            .set_employment(&tenant, &who, Employment::Active, at - 1)
            .await
            .expect("store available"),
        "an older fact is refused"
    );
    let employment =
        |record: Option<crate::admin::StaffRecord>| record.expect("stored").facts.employment;
    assert_eq!(
        employment(
            store
                .staff_record(&tenant, &who)
                .await
                .expect("store available")
        ),
        Employment::Disabled
    );
    assert!(
        store
            .set_employment(&tenant, &who, Employment::Active, at)
            .await
            .expect("store available"),
        "a fact of the same time is taken"
    );
    assert_eq!(
        employment(
            store
                .staff_record(&tenant, &who)
                .await
                .expect("store available")
        ),
        Employment::Active
    );
}

async fn members<F: Fixture>(
    fixture: &F,
    tenant: &TenantId,
    department: &DepartmentId,
) -> BTreeSet<crate::ids::StaffId> {
    fixture
        .store()
        .department_members(tenant, department)
        .await
        .expect("store available")
        .unwrap_or_default()
}

pub async fn an_older_department_list_never_replaces_a_newer_one<F: Fixture>(
    fixture: &F,
    tenant: TenantId,
) {
    let store = fixture.store();
    let who = staff("mover");
    let (one, two, three) = (department("1"), department("2"), department("3"));
    let at = now_ms();
    let first: BTreeSet<DepartmentId> = [one.clone(), two.clone()].into();
    assert_eq!(
        store
            .set_staff_departments(&tenant, &who, &first, at)
            .await
            .expect("store available"),
        [one.clone(), two.clone()],
        "the departments joined, in id order"
    );
    assert_eq!(
        store
            .set_staff_departments(&tenant, &who, &[three.clone()].into(), at - 1)
            .await
            .expect("store available"),
        Vec::<DepartmentId>::new(),
        "an older list changes nothing"
    );
    let record = store
        .staff_record(&tenant, &who)
        .await
        .expect("store available")
        .expect("the list stored the staff member");
    assert_eq!(record.departments, first);
    assert_eq!(record.facts.employment, Employment::Active);
    assert!(members(fixture, &tenant, &one).await.contains(&who));
    assert!(!members(fixture, &tenant, &three).await.contains(&who));
    assert_eq!(
        store
            .set_staff_departments(&tenant, &who, &[two.clone(), three.clone()].into(), at + 1)
            .await
            .expect("store available"),
        [one.clone(), three.clone()],
        "those left and joined, in id order"
    );
    assert!(!members(fixture, &tenant, &one).await.contains(&who));
    assert!(members(fixture, &tenant, &three).await.contains(&who));
}

pub async fn an_older_schedule_never_replaces_a_newer_one<F: Fixture>(
    fixture: &F,
    tenant: TenantId,
) {
    let store = fixture.store();
    let who = staff("shifted");
    let never = WeeklySchedule::default();
    let at = now_ms();
    assert!(store
        .set_schedule(&tenant, &who, Some(&never), at)
        .await
        .expect("store available"));
    assert!(
        !store
            .set_schedule(&tenant, &who, None, at - 1)
            .await
            .expect("store available"),
        "an older removal is refused"
    );
    let schedule = |record: Option<crate::admin::StaffRecord>| {
        record
            .expect("the schedule stored the staff member")
            .facts
            .schedule
    };
    assert_eq!(
        schedule(
            store
                .staff_record(&tenant, &who)
                .await
                .expect("store available")
        ),
        Some(never)
    );
    assert!(store
        .set_schedule(&tenant, &who, None, at + 1)
        .await
        .expect("store available"));
    assert_eq!(
        schedule(
            store
                .staff_record(&tenant, &who)
                .await
                .expect("store available")
        ),
        None
    );
}

pub async fn wecoms_refusal_of_a_staff_member_survives_every_later_staff_write<F: Fixture>(
    fixture: &F,
    tenant: TenantId,
) {
    let store = fixture.store();
    let who = staff("refused");
    store
        .mark_staff_unusable(&tenant, &who, 60111, now_ms())
        .await
        .expect("store available");
    let rejected = |record: Option<crate::admin::StaffRecord>| {
        record
            .expect("the mark stored the staff member")
            .facts
            .rejected_by_wecom
    };
    assert!(rejected(
        store
            .staff_record(&tenant, &who)
            .await
            .expect("store available")
    ));
    let change = StaffChange {
        online: Some(true),
        employment: Some(Employment::Active),
    };
    let Ok(StaffUpdate::Stored(facts)) = store.update_staff(&tenant, &who, &change, now_ms()).await
    else {
        panic!("the admin's write is stored");
    };
    assert!(facts.rejected_by_wecom && facts.online);
    store
        .set_employment(&tenant, &who, Employment::Disabled, now_ms())
        .await
        .expect("store available");
    store
        .set_schedule(&tenant, &who, None, now_ms())
        .await
        .expect("store available");
    assert!(rejected(
        store
            .staff_record(&tenant, &who)
            .await
            .expect("store available")
    ));
}

pub async fn an_add_delivered_twice_is_counted_once_at_its_first_time<F: Fixture>(
    fixture: &F,
    tenant: TenantId,
) {
    let store = fixture.store();
    let add = AddFact {
        tenant: tenant.clone(),
        code: code("counted"),
        staff: staff("ann"),
        external_user: "wmExternal".into(),
        created_at_secs: now_ms() / 1000,
        day: "2026-12-05".into(),
    };
    let first_at = now_ms();
    assert_eq!(
        store
            .count_add(&add, first_at)
            .await
            .expect("store available"),
        CountOutcome::Counted { at_ms: first_at }
    );
    assert_eq!(
        store
            .count_add(&add, first_at + 5)
            .await
            .expect("store available"),
        CountOutcome::AlreadyCounted { at_ms: first_at }
    );
    let counts = store
        .counts(&tenant, &add.code, &add.staff, &add.day)
        .await
        .expect("store available");
    assert_eq!(
        (counts.on_code, counts.all_codes, counts.on_code_total),
        (1, 1, 1)
    );
    let re_added = AddFact {
        created_at_secs: add.created_at_secs + 1,
        ..add.clone()
    };
    assert_eq!(
        store
            .count_add(&re_added, first_at + 7)
            .await
            .expect("store available"),
        CountOutcome::AlreadyCounted { at_ms: first_at },
        "the same customer deleting and adding again that day is the same add"
    );
    let next_day = AddFact {
        created_at_secs: add.created_at_secs + 86_400,
        day: "2026-12-06".into(),
        ..add.clone()
    };
    assert_eq!(
        store
            .count_add(&next_day, first_at + 9)
            .await
            .expect("store available"),
        CountOutcome::Counted {
            at_ms: first_at + 9
        },
        "the same customer on another day is another day's add"
    );
    assert_eq!(
        store
            .adds_on_all_codes(&tenant, &add.staff, &add.day)
            .await
            .expect("store available"),
        1
    );
    let other = code("uncounted");
    let adds = store
        .adds_on_codes(
            &tenant,
            &add.staff,
            &[add.code.clone(), other.clone()],
            &add.day,
        )
        .await
        .expect("store available");
    let read: Vec<(CodeId, u32, u32, bool)> = adds
        .into_iter()
        .map(|a| (a.code, a.today, a.total, a.switches.is_some()))
        .collect();
    assert_eq!(
        read,
        [(add.code.clone(), 1, 2, false), (other, 0, 0, false)],
        "each code's adds, and no limits for codes not stored"
    );
}

fn link(id: &str) -> AcquisitionLink {
    AcquisitionLink {
        link_id: id.to_owned(),
        url: format!("https://work.weixin.qq.com/ca/{id}"),
    }
}

pub async fn the_first_link_kept_for_a_staff_member_is_the_one_every_writer_gets<F: Fixture>(
    fixture: &F,
    tenant: TenantId,
) {
    let store = fixture.store();
    let who = staff("linked");
    store
        .update_staff(
            &tenant,
            &who,
            &StaffChange {
                online: Some(true),
                employment: None,
            },
            now_ms(),
        )
        .await
        .expect("store available");
    assert_eq!(
        store
            .keep_link(&tenant, &who, &link("first"))
            .await
            .expect("store available"),
        link("first")
    );
    assert_eq!(
        store
            .keep_link(&tenant, &who, &link("second"))
            .await
            .expect("store available"),
        link("first"),
        "a second writer is answered the link kept"
    );
}

pub async fn a_link_for_a_staff_member_not_stored_is_kept_nowhere<F: Fixture>(
    fixture: &F,
    tenant: TenantId,
) {
    let kept = fixture
        .store()
        .keep_link(&tenant, &staff("nobody"), &link("stray"))
        .await;
    assert!(kept.is_err(), "answered {kept:?}");
}
