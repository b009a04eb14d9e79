use super::*;
use crate::codes::{CodeSnapshot, StoredCode};
use crate::ids::StaffId;
use crate::membership::{CodeConfig, Family, StaffFacts, Switches};
use crate::tenants::{TenantProfile, Timezone};
use std::collections::HashMap;

fn id(raw: &str) -> StaffId {
    StaffId::parse(raw).expect("valid")
}

fn selection() -> Selection {
    Selection {
        tenant: TenantId::parse("acme").expect("valid"),
        from_ms: 1_000,
        to_ms: 2_000,
        code: None,
        event_type: None,
    }
}

/// A native code of `members`, all online, created with all of them, daily limit 2.
fn snapshot(members: &[&str]) -> CodeSnapshot {
    CodeSnapshot {
        profile: TenantProfile {
            corp_id: "corp".into(),
            callback_token: "t".into(),
            encoding_aes_key: "k".into(),
            previous_callback: None,
            corp_secret: "s".into(),
            timezone: Timezone::default(),
            company_daily_cap: None,
        },
        code: StoredCode {
            config: CodeConfig {
                family: Family::Native,
                members: members.iter().map(|s| id(s)).collect(),
                departments: vec![],
                fallback: vec![],
                switches: Switches {
                    daily_limit: Some(2),
                    ..Switches::default()
                },
            },
            config_id: Some("cfg1".into()),
            created_with: members.iter().map(|s| id(s)).collect(),
        },
        staff: members
            .iter()
            .map(|s| (id(s), StaffFacts::ACTIVE_ONLINE))
            .collect(),
        adds: HashMap::new(),
        departments: HashMap::new(),
        now_ms: 0,
        last_pushed: None,
        dirty_since_ms: None,
        links: HashMap::new(),
        lease: Default::default(),
        age: Default::default(),
        tenant_paused: None,
    }
}

#[test]
fn a_window_that_ends_before_it_starts_or_spans_more_than_90_days_is_refused() {
    let mut backwards = selection();
    backwards.to_ms = 10;
    assert_eq!(backwards.check(), Err("to: before from".into()));
    let mut long = selection();
    long.to_ms = long.from_ms + MAX_WINDOW_MS + 1;
    assert!(long.check().is_err());
    assert_eq!(selection().check(), Ok(()));
}

#[test]
fn an_event_type_filter_is_bounded_and_matches_the_event_or_event_and_change_type() {
    let mut filtered = selection();
    filtered.event_type = Some("change_contact".into());
    assert!(filtered.matches("change_contact/delete_user"));
    assert!(!filtered.matches("change_external_contact/add_external_contact"));
    filtered.event_type = Some("change_contact/delete_user".into());
    assert!(filtered.matches("change_contact/delete_user"));
    filtered.event_type = Some("x".repeat(MAX_EVENT_TYPE_BYTES + 1));
    assert!(filtered.check().is_err());
    filtered.event_type = Some("a b".into());
    assert!(filtered.check().is_err());
}

#[test]
fn a_run_id_is_short_and_plain() {
    assert!(check_run_id("r-20261203-abc").is_ok());
    assert!(check_run_id("").is_err());
    assert!(check_run_id("a/b").is_err());
    assert!(check_run_id(&"a".repeat(MAX_RUN_ID_BYTES + 1)).is_err());
}

#[test]
fn would_be_adds_that_reach_the_daily_limit_take_the_staff_member_off_the_list() {
    let code = CodeId::parse("c1").expect("valid");
    let snapshot = snapshot(&["ann", "bob"]);
    let mut would = WouldBe::default();
    would.adds.insert(
        id("ann"),
        StaffDelta {
            on_code: 2,
            all_codes: 2,
            on_code_total: 2,
        },
    );
    let change = what_if(&code, &snapshot, &would);
    assert_eq!(change.wecom_list, ["ann", "bob"]);
    assert_eq!(change.would_push, Some(vec!["bob".to_owned()]));
    assert!(change.would_change && change.because_of_replay);
    assert_eq!(change.crossings, ["ann:code_daily"]);
}

#[test]
fn a_would_be_resignation_is_recomputed_and_one_add_under_the_limit_changes_nothing() {
    let code = CodeId::parse("c1").expect("valid");
    let snapshot = snapshot(&["ann", "bob"]);
    let mut would = WouldBe::default();
    would.adds.insert(
        id("ann"),
        StaffDelta {
            on_code: 1,
            all_codes: 1,
            on_code_total: 1,
        },
    );
    assert!(!what_if(&code, &snapshot, &would).would_change);
    would.employment.insert(id("bob"), Employment::Resigned);
    let change = what_if(&code, &snapshot, &would);
    assert_eq!(change.would_push, Some(vec!["ann".to_owned()]));
    assert!(change.crossings.is_empty());
}

#[test]
fn a_poison_reason_is_reported_by_its_class_only() {
    assert_eq!(poison_class("signature: does not match"), "signature");
    assert_eq!(poison_class("no tenant acme"), "no tenant acme");
}
