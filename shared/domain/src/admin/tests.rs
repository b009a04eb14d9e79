use super::*;
use crate::codes::PushedList;
use crate::facts::StaffLedger;
use crate::fakes::{AdminWorld, FakeBudget};
use crate::http::ErrorAnswer;
use crate::ids::DepartmentId;
use crate::membership::{
    AddCounts, CodeConfig, Employment, Exclusion, Family, StaffFacts, Switches, WeeklySchedule,
};
use crate::wecom::errors::WeComError;
use serde_json::json;
use std::collections::BTreeSet;

const NOW_MS: u64 = 1_796_054_399_000;
const TOKEN: &str = "QDG6eK";
const AES_KEY: &str = "jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C";
const SECRET: &str = "s3cr3t-corp-secret";

fn fixed_clock() -> u64 {
    NOW_MS
}

fn tenant() -> TenantId {
    TenantId::parse("demo").expect("valid tenant")
}

fn staff(raw: &str) -> StaffId {
    StaffId::parse(raw).expect("valid staff id")
}

fn code(raw: &str) -> CodeId {
    CodeId::parse(raw).expect("valid code id")
}

fn department(raw: &str) -> DepartmentId {
    DepartmentId::parse(raw).expect("valid department id")
}

fn profile() -> TenantProfile {
    TenantProfile {
        corp_id: "wx5823bf96d3bd56c7".into(),
        callback_token: TOKEN.into(),
        encoding_aes_key: AES_KEY.into(),
        previous_callback: None,
        corp_secret: SECRET.into(),
        timezone: Default::default(),
        company_daily_cap: None,
    }
}

fn tenant_body() -> serde_json::Value {
    json!({
        "corp_id": "wx5823bf96d3bd56c7",
        "corp_secret": SECRET,
        "callback_token": TOKEN,
        "encoding_aes_key": AES_KEY,
        "timezone": "Europe/Paris",
        "company_daily_cap": 40
    })
}

fn online(facts_online: bool) -> StaffFacts {
    StaffFacts {
        online: facts_online,
        ..StaffFacts::ACTIVE_ONLINE
    }
}

/// A tenant `demo` with staff a, b (online) and c (offline).
fn world() -> AdminWorld {
    let world = AdminWorld::new(fixed_clock);
    world.store.insert_profile(&tenant(), profile());
    world
        .store
        .insert_staff(&tenant(), &staff("a"), online(true));
    world
        .store
        .insert_staff(&tenant(), &staff("b"), online(true));
    world
        .store
        .insert_staff(&tenant(), &staff("c"), online(false));
    world
}

/// The configuration a code body creates.
fn config_of(command: PutCode) -> CodeConfig {
    command.patch.apply(None).expect("a valid configuration")
}

/// The profile a tenant body creates.
fn profile_of(command: &PutTenant) -> crate::tenants::TenantProfile {
    command
        .patch
        .clone()
        .apply(None, NOW_MS, crate::tenants::KeyRotation::default())
        .expect("a valid profile")
}

fn put_code(id: &str, body: serde_json::Value) -> PutCode {
    PutCode::parse("demo", id, &body.to_string()).expect("valid code body")
}

fn offline_checked(members: &[&str]) -> serde_json::Value {
    json!({"family": "native", "members": members, "switches": {"offline_check": true}})
}

fn invalid_field(result: Result<impl std::fmt::Debug, AdminError>) -> String {
    match result {
        Err(AdminError::Invalid { field, .. }) => field,
        other => panic!("expected an invalid field, got {other:?}"),
    }
}

// ---------------------------------------------------------------- validation

#[test]
fn a_full_tenant_body_becomes_a_profile() {
    let command = PutTenant::parse("demo", &tenant_body().to_string()).expect("valid");
    assert_eq!(command.tenant, tenant());
    assert_eq!(profile_of(&command).corp_secret, SECRET);
    assert_eq!(profile_of(&command).timezone.name(), "Europe/Paris");
    assert_eq!(profile_of(&command).company_daily_cap, Some(40));
}

#[test]
fn a_tenant_without_timezone_or_cap_gets_shanghai_and_no_cap() {
    let mut body = tenant_body();
    body["company_daily_cap"] = json!(null);
    body.as_object_mut().expect("object").remove("timezone");
    let command = PutTenant::parse("demo", &body.to_string()).expect("valid");
    assert_eq!(profile_of(&command).timezone.name(), "Asia/Shanghai");
    assert_eq!(profile_of(&command).company_daily_cap, None);
}

#[test]
fn each_bad_tenant_field_is_named() {
    let cases: Vec<(&str, serde_json::Value, &str)> = vec![
        ("corp_id", json!(""), "corp_id"),
        ("corp_id", json!("w".repeat(65)), "corp_id"),
        ("corp_id", json!(7), "corp_id"),
        ("corp_secret", json!(""), "corp_secret"),
        ("corp_secret", json!(null), "corp_secret"),
        ("callback_token", json!("has space"), "callback_token"),
        ("callback_token", json!("t".repeat(33)), "callback_token"),
        ("encoding_aes_key", json!("short"), "encoding_aes_key"),
        ("timezone", json!("Mars/Olympus"), "timezone"),
        ("company_daily_cap", json!(0), "company_daily_cap"),
        ("company_daily_cap", json!(-1), "company_daily_cap"),
        ("company_daily_cap", json!(1.5), "company_daily_cap"),
        ("company_daily_cap", json!("10"), "company_daily_cap"),
        ("compnay_daily_cap", json!(10), "compnay_daily_cap"),
    ];
    for (name, value, field) in cases {
        let mut body = tenant_body();
        body[name] = value.clone();
        let result = PutTenant::parse("demo", &body.to_string());
        assert_eq!(invalid_field(result), field, "{name} = {value}");
    }
}

#[test]
fn a_body_that_is_not_a_json_object_is_invalid_as_a_body() {
    for body in ["", "not json", "[1]", "\"x\"", "{\"corp_id\": "] {
        assert_eq!(
            invalid_field(PutTenant::parse("demo", body)),
            "body",
            "{body:?}"
        );
    }
}

#[test]
fn refusals_never_echo_the_secrets_of_the_body() {
    let mut bad_zone = tenant_body();
    bad_zone["timezone"] = json!("Nowhere/Land");
    let truncated = format!("{{\"corp_secret\": \"{SECRET}\", \"callback_token\": \"{TOKEN}");
    for body in [bad_zone.to_string(), truncated] {
        let error = PutTenant::parse("demo", &body).expect_err("refused");
        let shown = format!("{error} {error:?} {}", ErrorAnswer::from(&error).body());
        for secret in [SECRET, TOKEN, AES_KEY] {
            assert!(!shown.contains(secret), "{secret} leaked in {shown}");
        }
    }
}

#[test]
fn bad_path_parameters_are_named() {
    let body = tenant_body().to_string();
    assert_eq!(invalid_field(PutTenant::parse("a/b", &body)), "tenant");
    let staff_body = r#"{"online": true}"#;
    assert_eq!(
        invalid_field(PutStaff::parse("demo", "a b", staff_body)),
        "staff"
    );
    assert_eq!(
        invalid_field(GetCode::parse("demo", &"c".repeat(31))),
        "code"
    );
    assert_eq!(invalid_field(GetCode::parse("", "c1")), "tenant");
}

#[test]
fn a_staff_body_may_leave_out_any_field_and_accepts_the_three_employments() {
    let parsed = PutStaff::parse("demo", "a", r#"{"online": false}"#).expect("valid");
    assert_eq!(
        parsed.change,
        StaffChange {
            online: Some(false),
            employment: None
        }
    );
    for (name, employment) in [
        ("active", Employment::Active),
        ("resigned", Employment::Resigned),
        ("disabled", Employment::Disabled),
    ] {
        let body = json!({"online": true, "employment": name}).to_string();
        let parsed = PutStaff::parse("demo", "a", &body).expect("valid");
        assert_eq!(parsed.change.employment, Some(employment));
    }
    let empty = PutStaff::parse("demo", "a", "{}").expect("valid");
    assert_eq!(
        (empty.change, empty.departments, empty.schedule),
        (
            StaffChange {
                online: None,
                employment: None
            },
            None,
            None
        )
    );
    let cases = [
        (json!({"online": "yes"}), "online"),
        (
            json!({"online": true, "employment": "rejected_by_wecom"}),
            "employment",
        ),
        (
            json!({"online": true, "rejected_by_wecom": false}),
            "rejected_by_wecom",
        ),
    ];
    for (body, field) in cases {
        let result = PutStaff::parse("demo", "a", &body.to_string());
        assert_eq!(invalid_field(result), field, "{body}");
    }
}

#[test]
fn a_code_body_becomes_a_configuration() {
    let body = json!({
        "family": "quota",
        "members": ["a", "b"],
        "fallback": ["z"],
        "switches": {"offline_check": true, "daily_limit": 5}
    });
    let command = put_code("spring-01", body);
    assert_eq!(
        config_of(command),
        CodeConfig {
            family: Family::Quota,
            members: vec![staff("a"), staff("b")],
            departments: vec![],
            fallback: vec![staff("z")],
            switches: Switches {
                offline_check: true,
                daily_limit: Some(5),
                ..Switches::default()
            },
        }
    );
    let minimal = config_of(put_code(
        "c1",
        json!({"family": "native", "members": ["a"]}),
    ));
    assert_eq!(minimal.fallback, Vec::<StaffId>::new());
    assert_eq!(minimal.switches, Switches::default());
}

#[test]
fn each_bad_code_field_is_named() {
    let too_many: Vec<String> = (0..=commands::MAX_MEMBERS)
        .map(|i| format!("s{i}"))
        .collect();
    let too_many_departments: Vec<String> = (0..=commands::MAX_CODE_DEPARTMENTS)
        .map(|i| i.to_string())
        .collect();
    let cases = [
        (json!({"members": ["a"]}), "family"),
        (json!({"family": "random", "members": ["a"]}), "family"),
        (json!({"family": "native"}), "members"),
        (json!({"family": "native", "members": []}), "members"),
        (json!({"family": "native", "members": "a"}), "members"),
        (json!({"family": "native", "members": too_many}), "members"),
        (
            json!({"family": "native", "members": ["a", "b", "a"]}),
            "members[2]",
        ),
        (
            json!({"family": "native", "members": ["a", "b c"]}),
            "members[1]",
        ),
        (json!({"family": "native", "members": [1]}), "members[0]"),
        (
            json!({"family": "native", "members": ["a"], "fallback": ["z", "z"]}),
            "fallback[1]",
        ),
        (
            json!({"family": "native", "members": ["a"], "switches": true}),
            "switches",
        ),
        (
            json!({"family": "native", "members": ["a"], "switches": {"daily_limit": 0}}),
            "switches.daily_limit",
        ),
        (
            json!({"family": "native", "members": ["a"], "switches": {"offline_check": 1}}),
            "switches.offline_check",
        ),
        (
            json!({"family": "native", "members": ["a"], "switches": {"round_limit": 2}}),
            "switches.round_limit",
        ),
        (
            json!({"family": "native", "members": ["a"], "name": "x"}),
            "name",
        ),
        (
            json!({"family": "native", "members": [], "departments": []}),
            "members",
        ),
        (
            json!({"family": "native", "departments": "2"}),
            "departments",
        ),
        (
            json!({"family": "native", "departments": ["2", 2]}),
            "departments[1]",
        ),
        (
            json!({"family": "native", "departments": ["2", "x-y"]}),
            "departments[1]",
        ),
        (
            json!({"family": "native", "departments": [-1]}),
            "departments[0]",
        ),
        (
            json!({"family": "native", "departments": too_many_departments}),
            "departments",
        ),
        (
            json!({"family": "quota", "members": ["a"], "switches": {"round_limit": 0}}),
            "switches.round_limit",
        ),
        (
            json!({"family": "quota", "members": ["a"], "switches": {"round_limit": commands::MAX_ROUND_LIMIT + 1}}),
            "switches.round_limit",
        ),
        (
            json!({"family": "native", "members": ["a"], "switches": {"daily_limit": commands::MAX_DAILY_LIMIT + 1}}),
            "switches.daily_limit",
        ),
        (
            json!({"family": "native", "members": ["a"], "switches": {"add_limit": commands::MAX_ADD_LIMIT + 1}}),
            "switches.add_limit",
        ),
        (
            json!({"family": "native", "members": ["a"], "switches": {"add_limit": 0}}),
            "switches.add_limit",
        ),
    ];
    for (body, field) in cases {
        // Some refusals are of a field (parse), some of the whole configuration (apply).
        let result = PutCode::parse("demo", "c1", &body.to_string())
            .and_then(|command| command.patch.apply(None));
        assert_eq!(invalid_field(result), field, "{body}");
    }
}

// ---------------------------------------------------------------- tenants

#[tokio::test]
async fn putting_a_tenant_stores_the_profile_and_answers_without_secrets() {
    let AdminWorld { store, admin, .. } = AdminWorld::new(fixed_clock);
    let command = PutTenant::parse("acme", &tenant_body().to_string()).expect("valid");

    let answer = admin.put_tenant(command).await.expect("stored");

    let acme = TenantId::parse("acme").expect("valid");
    assert_eq!(
        store.stored_profile(&acme).map(|p| p.corp_secret),
        Some(SECRET.into())
    );
    let shown = serde_json::to_value(&answer).expect("serialises");
    assert_eq!(
        shown,
        json!({"tenant": "acme", "corp_id": "wx5823bf96d3bd56c7", "timezone": "Europe/Paris",
               "company_daily_cap": 40, "version": 1})
    );
}

#[tokio::test]
async fn changing_the_company_cap_sends_every_code_of_the_tenant_for_a_recompute() {
    let w = world();
    w.admin
        .put_code(put_code("c1", offline_checked(&["a"])))
        .await
        .expect("stored");
    w.admin
        .put_code(put_code("c2", offline_checked(&["b"])))
        .await
        .expect("stored");
    let before = w.queue.reasons().len();

    let mut body = tenant_body();
    body["timezone"] = json!("Asia/Shanghai");
    let answer = w
        .admin
        .put_tenant(PutTenant::parse("demo", &body.to_string()).expect("valid"))
        .await
        .expect("stored");

    assert_eq!(answer.fan_out, Some(format!("tenant-rules:{NOW_MS}")));
    let sent: Vec<_> = w.queue.reasons().into_iter().skip(before).collect();
    assert_eq!(
        sent.iter().map(|r| r.code.as_str()).collect::<Vec<_>>(),
        ["c1", "c2"]
    );
    assert!(sent
        .iter()
        .all(|r| r.cause == Cause::Requested && r.fact_at_ms == NOW_MS));
}

#[tokio::test]
async fn resending_the_same_tenant_rules_refreshes_nothing() {
    let w = world();
    w.admin
        .put_code(put_code("c1", offline_checked(&["a"])))
        .await
        .expect("stored");
    let mut body = tenant_body();
    body["timezone"] = json!("Asia/Shanghai");
    body["company_daily_cap"] = json!(null);

    let answer = w
        .admin
        .put_tenant(PutTenant::parse("demo", &body.to_string()).expect("valid"))
        .await
        .expect("stored");

    assert_eq!(answer.fan_out, None);
}

// ---------------------------------------------------------------- staff

#[tokio::test]
async fn a_staff_change_is_written_then_sent_to_every_code_the_staff_sits_on() {
    let w = world();
    w.admin
        .put_code(put_code("c1", offline_checked(&["a", "b"])))
        .await
        .expect("stored");
    w.admin
        .put_code(put_code(
            "c2",
            json!({"family": "native", "members": ["b"], "fallback": ["a"]}),
        ))
        .await
        .expect("stored");
    w.admin
        .put_code(put_code("c3", offline_checked(&["b"])))
        .await
        .expect("stored");
    let before = w.queue.reasons().len();

    let command = PutStaff::parse("demo", "a", r#"{"online": false}"#).expect("valid");
    let answer = w.admin.put_staff(command).await.expect("stored");

    assert_eq!(
        w.store.stored_staff(&tenant(), &staff("a")),
        Some(online(false))
    );
    assert_eq!(answer.fan_out, format!("staff:a:{NOW_MS}"));
    let sent: Vec<_> = w.queue.reasons().into_iter().skip(before).collect();
    assert_eq!(
        sent.iter().map(|r| r.code.as_str()).collect::<Vec<_>>(),
        ["c1", "c2"]
    );
    for reason in sent {
        assert_eq!(reason.cause, Cause::StaffChanged);
        assert_eq!(reason.fact_at_ms, NOW_MS);
        assert_eq!(reason.fact_key, format!("staff:a:{NOW_MS}"));
    }
    assert_eq!(
        serde_json::to_value(&answer).expect("serialises"),
        json!({"staff": "a", "online": false, "employment": "active", "rejected_by_wecom": false,
               "fan_out": format!("staff:a:{NOW_MS}")})
    );
}

#[tokio::test]
async fn a_staff_change_keeps_the_stored_employment_and_wecoms_rejection() {
    let w = world();
    let rejected_resigned = StaffFacts {
        online: false,
        employment: Employment::Resigned,
        rejected_by_wecom: true,
        schedule: None,
    };
    w.store
        .insert_staff(&tenant(), &staff("r"), rejected_resigned.clone());

    let command = PutStaff::parse("demo", "r", r#"{"online": true}"#).expect("valid");
    let answer = w.admin.put_staff(command).await.expect("stored");

    assert_eq!(answer.employment, Employment::Resigned);
    assert_eq!(
        w.store.stored_staff(&tenant(), &staff("r")),
        Some(StaffFacts {
            online: true,
            ..rejected_resigned
        })
    );
}

#[tokio::test]
async fn a_new_staff_member_without_employment_starts_active_on_no_code() {
    let w = world();
    let command = PutStaff::parse("demo", "newbie", r#"{"online": true}"#).expect("valid");

    let answer = w.admin.put_staff(command).await.expect("stored");

    assert_eq!(answer.employment, Employment::Active);
    assert!(w.queue.reasons().is_empty());
    assert_eq!(
        w.store.stored_staff(&tenant(), &staff("newbie")),
        Some(StaffFacts::ACTIVE_ONLINE)
    );
}

#[tokio::test]
async fn a_staff_change_for_an_unknown_tenant_is_not_found_and_writes_nothing() {
    let w = world();
    let command = PutStaff::parse("nobody", "a", r#"{"online": true}"#).expect("valid");

    let error = w.admin.put_staff(command).await.expect_err("refused");

    assert!(matches!(error, AdminError::NotFound { .. }), "{error:?}");
    let nobody = TenantId::parse("nobody").expect("valid");
    assert_eq!(w.store.stored_staff(&nobody, &staff("a")), None);
}

#[tokio::test]
async fn a_staff_member_on_many_codes_sends_one_reason_per_code() {
    let w = world();
    for i in 0..40 {
        w.admin
            .put_code(put_code(&format!("c{i:02}"), offline_checked(&["a"])))
            .await
            .expect("stored");
    }
    let before = w.queue.reasons().len();

    let command = PutStaff::parse("demo", "a", r#"{"online": true}"#).expect("valid");
    let answer = w.admin.put_staff(command).await.expect("stored");

    assert_eq!(answer.fan_out, format!("staff:a:{NOW_MS}"));
    let mut sent: Vec<String> = w
        .queue
        .reasons()
        .into_iter()
        .skip(before)
        .map(|r| r.code.to_string())
        .collect();
    sent.sort();
    let expected: Vec<String> = (0..40).map(|i| format!("c{i:02}")).collect();
    assert_eq!(sent, expected);
}

#[tokio::test]
async fn when_the_queue_is_down_a_staff_change_is_unavailable_but_its_fact_is_kept() {
    let w = world();
    w.admin
        .put_code(put_code("c1", offline_checked(&["a"])))
        .await
        .expect("stored");
    w.queue.set_unavailable(true);

    let command = PutStaff::parse("demo", "a", r#"{"online": false}"#).expect("valid");
    let error = w.admin.put_staff(command).await.expect_err("refused");

    assert!(matches!(error, AdminError::Unavailable(_)), "{error:?}");
    assert_eq!(
        w.store.stored_staff(&tenant(), &staff("a")),
        Some(online(false))
    );
}

// ---------------------------------------------------------------- codes

#[tokio::test]
async fn a_new_code_gets_a_multi_user_qr_contact_way_listing_who_is_eligible_now() {
    let w = world();

    let answer = w
        .admin
        .put_code(put_code("spring-01", offline_checked(&["c", "a", "b"])))
        .await
        .expect("stored");

    assert_eq!(
        answer,
        CodeAnswer {
            code: code("spring-01"),
            config_id: "cw-1".into(),
            version: 1,
            created: true,
            qr_code: Some("https://wework.example/qr/cw-1".into()),
        }
    );
    let created = w.wecom.created();
    assert_eq!(created.len(), 1);
    let (creds, way) = &created[0];
    assert_eq!(creds.corp_id, "wx5823bf96d3bd56c7");
    assert_eq!(creds.corp_secret, SECRET);
    assert_eq!(way.kind, ContactWayKind::Multi);
    assert_eq!(way.scene, ContactWayScene::QrCode);
    assert_eq!(way.state, "spring-01");
    assert_eq!(way.users, ["a", "b"]);
    let stored = w
        .store
        .stored_code(&tenant(), &code("spring-01"))
        .expect("stored");
    assert_eq!(stored.code.config_id.as_deref(), Some("cw-1"));
    let reasons = w.queue.reasons();
    assert_eq!(reasons.len(), 1);
    assert_eq!(reasons[0].cause, Cause::CodeEdited);
    assert_eq!(reasons[0].fact_key, "code:spring-01:v1");
    assert_eq!(reasons[0].fact_at_ms, NOW_MS);
}

#[tokio::test]
async fn editing_a_code_keeps_its_contact_way_and_leaves_the_list_to_the_refresh() {
    let w = world();
    w.admin
        .put_code(put_code("c1", offline_checked(&["a"])))
        .await
        .expect("stored");

    let answer = w
        .admin
        .put_code(put_code("c1", offline_checked(&["a", "b"])))
        .await
        .expect("stored");

    assert_eq!(
        (answer.config_id.as_str(), answer.version, answer.created),
        ("cw-1", 2, false)
    );
    assert_eq!(answer.qr_code, None);
    assert_eq!(w.wecom.created().len(), 1);
    let keys: Vec<String> = w.queue.reasons().into_iter().map(|r| r.fact_key).collect();
    assert_eq!(keys, ["code:c1:v1", "code:c1:v2"]);
}

#[tokio::test]
async fn a_new_code_nobody_can_take_is_stored_and_created_by_a_later_put() {
    let w = world();

    let error = w
        .admin
        .put_code(put_code("c1", offline_checked(&["c"])))
        .await
        .expect_err("starved");

    assert!(
        matches!(error, AdminError::NoEligibleMember { .. }),
        "{error:?}"
    );
    let stored = w
        .store
        .stored_code(&tenant(), &code("c1"))
        .expect("config kept");
    assert_eq!(stored.code.config_id, None);
    assert!(w.wecom.created().is_empty());
    assert!(w.queue.reasons().is_empty());

    w.store.insert_staff(&tenant(), &staff("c"), online(true));
    let answer = w
        .admin
        .put_code(put_code("c1", offline_checked(&["c"])))
        .await
        .expect("created");
    assert_eq!((answer.created, answer.version), (true, 2));
    assert_eq!(w.wecom.created()[0].1.users, ["c"]);
}

#[tokio::test]
async fn a_new_code_whose_members_are_all_out_is_created_with_its_fallback() {
    let w = world();
    let body = json!({"family": "native", "members": ["c"], "fallback": ["b"], "switches": {"offline_check": true}});

    w.admin
        .put_code(put_code("c1", body))
        .await
        .expect("created");

    assert_eq!(w.wecom.created()[0].1.users, ["b"]);
    assert!(
        w.store.creation_intents().is_empty(),
        "a recorded creation leaves no intent"
    );
}

#[tokio::test]
async fn when_wecom_refuses_the_creation_the_config_stays_without_contact_way() {
    let w = world();
    w.wecom.fail_with(WeComError::Throttled { errcode: 45009 });

    let error = w
        .admin
        .put_code(put_code("c1", offline_checked(&["a"])))
        .await
        .expect_err("refused");

    assert_eq!(
        ErrorAnswer::from(&error),
        ErrorAnswer {
            status: 502,
            code: "wecom_error",
            detail: "throttled errcode 45009".into()
        }
    );
    let stored = w
        .store
        .stored_code(&tenant(), &code("c1"))
        .expect("config kept");
    assert_eq!(stored.code.config_id, None);
    assert!(w.queue.reasons().is_empty());
    assert!(
        w.store.creation_intents().is_empty(),
        "WeCom's own answer says nothing was made: the creation's intent ends"
    );
}

#[tokio::test]
async fn a_creation_whose_answer_was_lost_keeps_its_intent_for_the_sweep() {
    let w = world();
    w.wecom.fail_with(WeComError::Transient {
        detail: "timeout".into(),
    });

    w.admin
        .put_code(put_code("c1", offline_checked(&["a"])))
        .await
        .expect_err("failed");

    let intents = w.store.creation_intents();
    assert_eq!(intents.len(), 1, "WeCom may have made it");
}

#[tokio::test]
async fn a_contact_way_is_created_with_its_intents_marker_as_its_remark() {
    let w = world();

    w.admin
        .put_code(put_code("c1", offline_checked(&["a"])))
        .await
        .expect("created");

    let intent = CreationIntent {
        tenant: tenant(),
        code: code("c1"),
        started_at_ms: fixed_clock(),
    };
    assert_eq!(w.wecom.created()[0].1.remark, Some(intent.marker()));
    assert!(intent.marker().len() <= 30, "WeCom's bound on a remark");
}

#[tokio::test]
async fn losing_the_creation_race_deletes_our_contact_way_and_answers_the_winners() {
    let w = world();
    w.store
        .lose_next_creation_race(&tenant(), &code("c1"), "cw-winner");

    let answer = w
        .admin
        .put_code(put_code("c1", offline_checked(&["a"])))
        .await
        .expect("stored");

    assert_eq!(
        (answer.config_id.as_str(), answer.created),
        ("cw-winner", false)
    );
    assert_eq!(w.wecom.deleted(), ["cw-1"]);
    let stored = w.store.stored_code(&tenant(), &code("c1")).expect("stored");
    assert_eq!(stored.code.config_id.as_deref(), Some("cw-winner"));
    assert_eq!(w.queue.reasons().len(), 1);
    assert!(
        w.store.creation_intents().is_empty(),
        "ours is deleted: nothing left to look for"
    );
}

#[tokio::test]
async fn a_code_for_an_unknown_tenant_is_not_found_and_stores_nothing() {
    let w = world();
    let command =
        PutCode::parse("nobody", "c1", &offline_checked(&["a"]).to_string()).expect("valid");

    let error = w.admin.put_code(command).await.expect_err("refused");

    assert_eq!(ErrorAnswer::from(&error).status, 404);
    let nobody = TenantId::parse("nobody").expect("valid");
    assert_eq!(w.store.stored_code(&nobody, &code("c1")), None);
}

#[tokio::test]
async fn when_the_table_is_down_a_code_edit_is_unavailable_with_an_opaque_answer() {
    let w = world();
    w.store.set_unavailable(true);

    let error = w
        .admin
        .put_code(put_code("c1", offline_checked(&["a"])))
        .await
        .expect_err("refused");

    assert_eq!(
        ErrorAnswer::from(&error).body(),
        r#"{"code":"unavailable","detail":"try again later"}"#
    );
}

// ---------------------------------------------------------------- code status

#[tokio::test]
async fn the_status_shows_who_is_eligible_who_is_not_and_why() {
    let w = world();
    let body = json!({"family": "sequenced", "members": ["a", "b", "c", "ghost"], "switches": {"offline_check": true, "daily_limit": 3}});
    w.admin
        .put_code(put_code("c1", body))
        .await
        .expect("stored");
    let counts = AddCounts {
        on_code: 3,
        all_codes: 3,
        on_code_total: 3,
    };
    w.store
        .set_today(&tenant(), &code("c1"), &staff("b"), counts);

    let status = w
        .admin
        .code_status(GetCode::parse("demo", "c1").expect("valid"))
        .await
        .expect("found");

    assert_eq!(
        serde_json::to_value(&status).expect("serialises"),
        json!({
            "code": "c1", "family": "sequenced", "departments": [], "config_id": "cw-1",
            "version": 1, "eligible_now": ["a"], "outcome": "members",
            "excluded": [
                {"staff": "b", "reason": "daily_limit_reached"},
                {"staff": "c", "reason": "offline"},
                {"staff": "ghost", "reason": "unknown_staff"}
            ],
            // WeCom holds the list the contact way was created with until the first push.
            "last_pushed": {"users": ["a", "b"], "pushed_at_ms": null, "starved": false},
            "in_sync": false
        })
    );
}

#[tokio::test]
async fn the_status_is_in_sync_once_wecom_has_the_recomputed_list() {
    let w = world();
    w.admin
        .put_code(put_code("c1", offline_checked(&["a", "b"])))
        .await
        .expect("stored");
    let pushed = |users: &[&str]| PushedList {
        users: users.iter().map(|u| staff(u)).collect(),
        pushed_at_ms: NOW_MS - 1,
        starved: false,
        rotation: None,
    };
    let status = || {
        w.admin
            .code_status(GetCode::parse("demo", "c1").expect("valid"))
    };

    w.store
        .set_pushed(&tenant(), &code("c1"), pushed(&["a", "b"]));
    let synced = status().await.expect("found");
    assert!(synced.in_sync);
    assert_eq!(
        synced.last_pushed,
        Some(LastPushed {
            users: vec![staff("a"), staff("b")],
            pushed_at_ms: Some(NOW_MS - 1),
            starved: false
        })
    );

    w.store
        .set_pushed(&tenant(), &code("c1"), pushed(&["b", "a"]));
    assert!(
        !status().await.expect("found").in_sync,
        "order matters to rotation"
    );
}

#[tokio::test]
async fn a_starved_code_is_never_in_sync() {
    let w = world();
    w.admin
        .put_code(put_code("c1", offline_checked(&["a"])))
        .await
        .expect("stored");
    w.store.set_pushed(
        &tenant(),
        &code("c1"),
        PushedList {
            users: vec![staff("a")],
            pushed_at_ms: NOW_MS - 1,
            starved: false,
            rotation: None,
        },
    );
    w.store.insert_staff(&tenant(), &staff("a"), online(false));

    let status = w
        .admin
        .code_status(GetCode::parse("demo", "c1").expect("valid"))
        .await
        .expect("found");

    assert_eq!(status.outcome, RoutingOutcome::Starved);
    assert!(status.eligible_now.is_empty());
    assert!(!status.in_sync);
}

#[tokio::test]
async fn the_status_of_an_unknown_code_is_not_found() {
    let w = world();

    let error = w
        .admin
        .code_status(GetCode::parse("demo", "nope").expect("valid"))
        .await
        .expect_err("refused");

    assert_eq!(
        ErrorAnswer::from(&error),
        ErrorAnswer {
            status: 404,
            code: "not_found",
            detail: "code nope of tenant demo does not exist".into()
        }
    );
}

#[test]
fn every_exclusion_has_a_wire_name() {
    assert_eq!(
        exclusion_name(Exclusion::RejectedByWeCom),
        "rejected_by_wecom"
    );
    assert_eq!(exclusion_name(Exclusion::OverWeComCap), "over_wecom_cap");
}

// ---------------------------------------------------------------- departments: validation

#[test]
fn a_code_may_list_departments_with_or_without_members() {
    let only_departments = config_of(put_code(
        "c1",
        json!({"family": "native", "departments": ["2", "3"]}),
    ));
    assert_eq!(only_departments.members, Vec::<StaffId>::new());
    assert_eq!(
        only_departments.departments,
        [department("2"), department("3")]
    );
    let both = config_of(put_code(
        "c1",
        json!({"family": "native", "members": ["a"], "departments": ["7"]}),
    ));
    assert_eq!(both.members, [staff("a")]);
    assert_eq!(both.departments, [department("7")]);
}

#[test]
fn a_round_limit_is_accepted_on_rotating_codes_and_refused_on_native_ones() {
    for family in ["sequenced", "quota"] {
        let body = json!({"family": family, "members": ["a"], "switches": {"round_limit": 3}});
        assert_eq!(
            config_of(put_code("c1", body)).switches.round_limit,
            Some(3)
        );
    }
    let native = json!({"family": "native", "members": ["a"], "switches": {"round_limit": 3}});
    match put_code("c1", native).patch.apply(None) {
        Err(AdminError::Invalid { field, reason }) => {
            assert_eq!(field, "switches.round_limit");
            assert!(reason.contains("native"), "{reason}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn limits_at_their_bounds_are_accepted() {
    let body = json!({"family": "quota", "members": ["a"], "switches": {
        "add_limit": commands::MAX_ADD_LIMIT,
        "daily_limit": commands::MAX_DAILY_LIMIT,
        "round_limit": commands::MAX_ROUND_LIMIT,
    }});
    let switches = config_of(put_code("c1", body)).switches;
    assert_eq!(switches.add_limit, Some(commands::MAX_ADD_LIMIT));
    assert_eq!(switches.daily_limit, Some(commands::MAX_DAILY_LIMIT));
    assert_eq!(switches.round_limit, Some(commands::MAX_ROUND_LIMIT));
}

#[test]
fn a_staff_body_may_set_the_departments_the_staff_member_is_in() {
    let parsed = PutStaff::parse(
        "demo",
        "a",
        r#"{"online": true, "departments": ["3", "2"]}"#,
    )
    .expect("valid");
    assert_eq!(
        parsed.departments,
        Some([department("2"), department("3")].into_iter().collect())
    );
    let emptied =
        PutStaff::parse("demo", "a", r#"{"online": true, "departments": []}"#).expect("valid");
    assert_eq!(emptied.departments, Some(BTreeSet::new()));
    let kept = PutStaff::parse("demo", "a", r#"{"online": true}"#).expect("valid");
    assert_eq!(kept.departments, None);
    let cases = [
        (json!({"online": true, "departments": "2"}), "departments"),
        (
            json!({"online": true, "departments": ["2", "2"]}),
            "departments[1]",
        ),
        (
            json!({"online": true, "departments": [true]}),
            "departments[0]",
        ),
        // Department ids are strings, like every other id; WeCom's numbers are refused.
        (
            json!({"online": true, "departments": ["2", 3]}),
            "departments[1]",
        ),
    ];
    for (body, field) in cases {
        let result = PutStaff::parse("demo", "a", &body.to_string());
        assert_eq!(invalid_field(result), field, "{body}");
    }
}

#[test]
fn a_department_body_lists_its_members_and_may_empty_it() {
    let parsed = PutDepartment::parse("demo", "2", r#"{"members": ["b", "a"]}"#).expect("valid");
    assert_eq!(parsed.department, department("2"));
    assert_eq!(
        parsed.members,
        Some([staff("a"), staff("b")].into_iter().collect())
    );
    let emptied = PutDepartment::parse("demo", "2", r#"{"members": []}"#).expect("valid");
    assert_eq!(emptied.members, Some(BTreeSet::new()));
    let too_many: Vec<String> = (0..=commands::MAX_DEPARTMENT_MEMBERS)
        .map(|i| format!("s{i}"))
        .collect();
    let kept = PutDepartment::parse("demo", "2", "{}").expect("valid");
    assert_eq!(kept.members, None);
    let cases = [
        (json!({"members": "a"}), "members"),
        (json!({"members": too_many}), "members"),
        (json!({"members": ["a", "a"]}), "members[1]"),
        (json!({"members": ["a b"]}), "members[0]"),
        (json!({"members": [], "name": "sales"}), "name"),
    ];
    for (body, field) in cases {
        let result = PutDepartment::parse("demo", "2", &body.to_string());
        assert_eq!(invalid_field(result), field, "{body}");
    }
    let body = r#"{"members": []}"#;
    assert_eq!(
        invalid_field(PutDepartment::parse("demo", "sales-2", body)),
        "department"
    );
    assert_eq!(
        invalid_field(PutDepartment::parse("a b", "2", body)),
        "tenant"
    );
}

#[test]
fn a_delete_names_a_bad_tenant_or_code() {
    assert_eq!(invalid_field(DeleteCode::parse("demo", "a b")), "code");
    assert_eq!(invalid_field(DeleteCode::parse("", "c1")), "tenant");
    assert_eq!(
        DeleteCode::parse("demo", "c1").expect("valid").code,
        code("c1")
    );
}

// ---------------------------------------------------------------- config edits

/// The reasons sent since `before`, as (code, cause, fact key).
fn sent_since(w: &AdminWorld, before: usize) -> Vec<(String, Cause, String)> {
    w.queue
        .reasons()
        .into_iter()
        .skip(before)
        .map(|r| (r.code.to_string(), r.cause, r.fact_key))
        .collect()
}

/// A change to a code's JSON body.
type BodyEdit = fn(&mut serde_json::Value);

#[tokio::test]
async fn every_kind_of_config_edit_sends_that_code_one_reason() {
    let w = world();
    let base = json!({
        "family": "sequenced", "members": ["a", "b"], "fallback": ["c"],
        "switches": {"offline_check": true, "daily_limit": 5}
    });
    w.admin
        .put_code(put_code("c1", base.clone()))
        .await
        .expect("created");
    w.admin
        .put_code(put_code("other", offline_checked(&["a"])))
        .await
        .expect("created");
    let edits: Vec<(&str, BodyEdit)> = vec![
        ("members", |b| b["members"] = json!(["a", "b", "c"])),
        ("order", |b| b["members"] = json!(["b", "a"])),
        ("fallback", |b| b["fallback"] = json!(["a"])),
        ("offline check off", |b| {
            b["switches"]["offline_check"] = json!(false)
        }),
        ("daily limit", |b| b["switches"]["daily_limit"] = json!(9)),
        ("add limit", |b| b["switches"]["add_limit"] = json!(100)),
        ("round limit", |b| b["switches"]["round_limit"] = json!(2)),
        ("family", |b| b["family"] = json!("quota")),
        ("departments", |b| b["departments"] = json!(["2"])),
        ("nothing at all", |_| {}),
    ];
    let mut body = base;
    let mut version = 1;
    for (edit, apply) in edits {
        let before = w.queue.reasons().len();
        apply(&mut body);
        version += 1;

        let answer = w
            .admin
            .put_code(put_code("c1", body.clone()))
            .await
            .expect("stored");

        assert_eq!(answer.version, version, "{edit}");
        assert_eq!(
            sent_since(&w, before),
            [(
                "c1".to_owned(),
                Cause::CodeEdited,
                format!("code:c1:v{version}")
            )],
            "{edit}"
        );
    }
    let stored = w.store.stored_code(&tenant(), &code("c1")).expect("stored");
    assert_eq!(stored.code.config.family, Family::Quota);
    assert_eq!(stored.code.config.members, [staff("b"), staff("a")]);
    assert_eq!(stored.code.config.departments, [department("2")]);
    assert_eq!(w.wecom.created().len(), 2, "edits never create another way");
}

#[tokio::test]
async fn a_code_listing_only_a_department_is_created_with_the_departments_members() {
    let w = world();
    w.admin
        .put_department(
            PutDepartment::parse("demo", "2", r#"{"members": ["c", "b", "a"]}"#).expect("valid"),
        )
        .await
        .expect("stored");

    w.admin
        .put_code(put_code(
            "c1",
            json!({"family": "native", "departments": ["2"], "switches": {"offline_check": true}}),
        ))
        .await
        .expect("created");

    assert_eq!(w.wecom.created()[0].1.users, ["a", "b"]);
}

#[tokio::test]
async fn the_status_lists_the_departments_expands_them_and_names_the_new_exclusions() {
    let w = world();
    w.store.insert_staff(
        &tenant(),
        &staff("d"),
        StaffFacts {
            schedule: Some(WeeklySchedule::default()),
            ..StaffFacts::ACTIVE_ONLINE
        },
    );
    w.store.insert_staff(&tenant(), &staff("e"), online(true));
    w.admin
        .put_department(
            PutDepartment::parse("demo", "2", r#"{"members": ["e", "d", "a"]}"#).expect("valid"),
        )
        .await
        .expect("stored");
    let body = json!({"family": "quota", "members": ["b"], "departments": ["2"],
                      "switches": {"offline_check": true, "add_limit": 10}});
    w.admin
        .put_code(put_code("c1", body))
        .await
        .expect("created");
    let reached = AddCounts {
        on_code_total: 10,
        ..AddCounts::default()
    };
    w.store
        .set_today(&tenant(), &code("c1"), &staff("b"), reached);

    let status = w
        .admin
        .code_status(GetCode::parse("demo", "c1").expect("valid"))
        .await
        .expect("found");

    let shown = serde_json::to_value(&status).expect("serialises");
    assert_eq!(shown["departments"], json!(["2"]));
    assert_eq!(shown["eligible_now"], json!(["a", "e"]));
    assert_eq!(
        shown["excluded"],
        json!([
            {"staff": "b", "reason": "add_limit_reached"},
            {"staff": "d", "reason": "outside_shift"}
        ])
    );
}

// ---------------------------------------------------------------- departments

async fn put_department(w: &AdminWorld, id: &str, members: &[&str]) -> DepartmentAnswer {
    let body = json!({ "members": members }).to_string();
    w.admin
        .put_department(PutDepartment::parse("demo", id, &body).expect("valid"))
        .await
        .expect("stored")
}

#[tokio::test]
async fn a_department_change_is_sent_to_every_code_listing_the_department() {
    let w = world();
    put_department(&w, "2", &["a"]).await;
    for (id, departments) in [
        ("c1", json!(["2"])),
        ("c2", json!(["5", "2"])),
        ("c3", json!(["5"])),
    ] {
        let body = json!({"family": "native", "members": ["b"], "departments": departments});
        w.admin.put_code(put_code(id, body)).await.expect("created");
    }
    let before = w.queue.reasons().len();

    let answer = put_department(&w, "2", &["b", "c"]).await;

    assert_eq!(
        w.store.stored_department(&tenant(), &department("2")),
        Some([staff("b"), staff("c")].into_iter().collect())
    );
    assert_eq!(
        serde_json::to_value(&answer).expect("serialises"),
        json!({"department": "2", "members": ["b", "c"], "changed": ["a", "b", "c"], "fan_out": format!("department:2:{NOW_MS}")})
    );
    let key = format!("department:2:{NOW_MS}");
    assert_eq!(
        sent_since(&w, before),
        [
            ("c1".to_owned(), Cause::StaffChanged, key.clone()),
            ("c2".to_owned(), Cause::StaffChanged, key)
        ]
    );
}

#[tokio::test]
async fn repeating_a_department_change_sends_its_reasons_again() {
    let w = world();
    let body = json!({"family": "native", "departments": ["2"]});
    put_department(&w, "2", &["a"]).await;
    w.admin
        .put_code(put_code("c1", body))
        .await
        .expect("created");
    w.queue.set_unavailable(true);
    let body = json!({ "members": ["a", "b"] }).to_string();
    let command = PutDepartment::parse("demo", "2", &body).expect("valid");
    let error = w
        .admin
        .put_department(command.clone())
        .await
        .expect_err("queue down");
    assert!(matches!(error, AdminError::Unavailable(_)), "{error:?}");
    w.queue.set_unavailable(false);
    let before = w.queue.reasons().len();

    let answer = w.admin.put_department(command).await.expect("stored");

    assert!(
        answer.changed.is_empty(),
        "the fact was written the first time"
    );
    assert_eq!(sent_since(&w, before).len(), 1);
}

#[tokio::test]
async fn a_department_of_an_unknown_tenant_is_not_found() {
    let w = world();
    let command = PutDepartment::parse("nobody", "2", r#"{"members": ["a"]}"#).expect("valid");

    let error = w.admin.put_department(command).await.expect_err("refused");

    assert!(matches!(error, AdminError::NotFound { .. }), "{error:?}");
    let nobody = TenantId::parse("nobody").expect("valid");
    assert_eq!(w.store.stored_department(&nobody, &department("2")), None);
}

#[tokio::test]
async fn a_staff_departments_change_reaches_the_codes_of_departments_joined_and_left() {
    let w = world();
    put_department(&w, "2", &["a"]).await;
    put_department(&w, "3", &[]).await;
    let codes = [
        (
            "on-2",
            json!({"family": "native", "members": ["b"], "departments": ["2"]}),
        ),
        (
            "on-3",
            json!({"family": "native", "members": ["b"], "departments": ["3"]}),
        ),
        ("seated", json!({"family": "native", "members": ["a"]})),
        (
            "unrelated",
            json!({"family": "native", "members": ["b"], "departments": ["9"]}),
        ),
    ];
    for (id, body) in codes {
        w.admin.put_code(put_code(id, body)).await.expect("created");
    }
    let before = w.queue.reasons().len();

    let command =
        PutStaff::parse("demo", "a", r#"{"online": true, "departments": ["3"]}"#).expect("valid");
    let answer = w.admin.put_staff(command).await.expect("stored");

    assert_eq!(answer.departments, Some(vec![department("3")]));
    let mut sent: Vec<String> = sent_since(&w, before).into_iter().map(|r| r.0).collect();
    sent.sort();
    assert_eq!(sent, ["on-2", "on-3", "seated"]);
    assert_eq!(
        w.store.stored_department(&tenant(), &department("2")),
        Some(BTreeSet::new())
    );
    assert_eq!(
        w.store.stored_department(&tenant(), &department("3")),
        Some([staff("a")].into_iter().collect())
    );
}

#[tokio::test]
async fn a_member_resigned_through_the_admin_api_enters_the_index_the_sweep_retires_links_from() {
    use crate::sweep::LinkRetirements;
    let w = world();
    let command = PutStaff::parse("demo", "a", r#"{"employment": "resigned"}"#).expect("valid");

    w.admin.put_staff(command).await.expect("stored");

    let leaving = w.store.resigned_before(u64::MAX, 10).await.expect("read");
    assert_eq!(leaving.len(), 1, "as WeCom's resignations are");
    assert_eq!(
        (leaving[0].staff.as_str(), leaving[0].resigned),
        ("a", true)
    );
    assert!(
        w.store
            .resigned_before(fixed_clock(), 10)
            .await
            .expect("read")
            .is_empty(),
        "dated when it was written"
    );
}

#[tokio::test]
async fn going_offline_reaches_the_codes_listing_a_department_of_the_staff_member() {
    let w = world();
    put_department(&w, "2", &["a"]).await;
    let body = json!({"family": "native", "members": ["b"], "departments": ["2"]});
    w.admin
        .put_code(put_code("c1", body))
        .await
        .expect("created");
    let before = w.queue.reasons().len();

    let command = PutStaff::parse("demo", "a", r#"{"online": false}"#).expect("valid");
    let answer = w.admin.put_staff(command).await.expect("stored");

    assert_eq!(sent_since(&w, before).len(), 1);
    assert_eq!(answer.departments, None);
    assert_eq!(sent_since(&w, before)[0].0, "c1");
}

#[tokio::test]
async fn a_resignation_reaches_every_code_the_staff_member_is_on_and_removes_them() {
    let w = world();
    put_department(&w, "2", &["a"]).await;
    let codes = [
        ("member", json!({"family": "native", "members": ["a", "b"]})),
        (
            "fallback",
            json!({"family": "native", "members": ["b"], "fallback": ["a"]}),
        ),
        (
            "department",
            json!({"family": "native", "members": ["b"], "departments": ["2"]}),
        ),
        ("elsewhere", json!({"family": "native", "members": ["b"]})),
    ];
    for (id, body) in codes {
        w.admin.put_code(put_code(id, body)).await.expect("created");
    }
    let before = w.queue.reasons().len();

    let command = PutStaff::parse("demo", "a", r#"{"online": true, "employment": "resigned"}"#)
        .expect("valid");
    let answer = w.admin.put_staff(command).await.expect("stored");

    assert_eq!(answer.employment, Employment::Resigned);
    let sent: Vec<String> = sent_since(&w, before).into_iter().map(|r| r.0).collect();
    assert_eq!(sent, ["department", "fallback", "member"]);
    for id in ["member", "department"] {
        let status = w
            .admin
            .code_status(GetCode::parse("demo", id).expect("valid"))
            .await
            .expect("found");
        assert_eq!(status.eligible_now, [staff("b")], "{id}");
        assert!(status.excluded.contains(&ExcludedMember {
            staff: staff("a"),
            reason: "resigned"
        }));
    }
}

// ---------------------------------------------------------------- deleting codes

#[tokio::test]
async fn deleting_a_code_deletes_its_contact_way_then_its_items() {
    let w = world();
    w.admin
        .put_code(put_code("c1", offline_checked(&["a"])))
        .await
        .expect("created");
    w.admin
        .put_code(put_code("c2", offline_checked(&["a"])))
        .await
        .expect("created");
    w.store.set_pushed(
        &tenant(),
        &code("c1"),
        PushedList {
            users: vec![staff("a")],
            pushed_at_ms: NOW_MS - 1,
            starved: false,
            rotation: None,
        },
    );
    let before = w.queue.reasons().len();

    let answer = w
        .admin
        .delete_code(DeleteCode::parse("demo", "c1").expect("valid"))
        .await
        .expect("deleted");

    assert_eq!(
        serde_json::to_value(&answer).expect("serialises"),
        json!({"code": "c1", "config_id": "cw-1"})
    );
    assert_eq!(w.wecom.deleted(), ["cw-1"]);
    assert_eq!(w.store.stored_code(&tenant(), &code("c1")), None);
    assert_eq!(w.store.stored_pushed(&tenant(), &code("c1")), None);
    assert!(w.store.stored_code(&tenant(), &code("c2")).is_some());
    assert_eq!(sent_since(&w, before), []);
    let codes_of_a = w
        .store
        .codes_of_staff(&tenant(), &staff("a"))
        .await
        .expect("read");
    assert_eq!(codes_of_a, [code("c2")]);
}

#[tokio::test]
async fn deleting_a_code_whose_contact_way_wecom_already_lost_still_deletes_it() {
    let w = world();
    w.store
        .lose_next_creation_race(&tenant(), &code("c1"), "cw-never-made");
    w.admin
        .put_code(put_code("c1", offline_checked(&["a"])))
        .await
        .expect("stored");

    let answer = w
        .admin
        .delete_code(DeleteCode::parse("demo", "c1").expect("valid"))
        .await
        .expect("deleted");

    assert_eq!(answer.config_id.as_deref(), Some("cw-never-made"));
    assert_eq!(w.store.stored_code(&tenant(), &code("c1")), None);
}

#[tokio::test]
async fn when_wecom_fails_the_delete_the_code_is_kept_and_a_retry_finishes_it() {
    let w = world();
    w.admin
        .put_code(put_code("c1", offline_checked(&["a"])))
        .await
        .expect("created");
    w.wecom
        .fail_deletes_with(Some(WeComError::Throttled { errcode: 45009 }));
    let command = DeleteCode::parse("demo", "c1").expect("valid");

    let error = w
        .admin
        .delete_code(command.clone())
        .await
        .expect_err("refused");

    assert_eq!(ErrorAnswer::from(&error).status, 502);
    assert!(w.store.stored_code(&tenant(), &code("c1")).is_some());

    w.wecom.fail_deletes_with(None);
    w.admin.delete_code(command).await.expect("deleted");
    assert_eq!(w.wecom.deleted(), ["cw-1"]);
    assert_eq!(w.store.stored_code(&tenant(), &code("c1")), None);
}

#[tokio::test]
async fn a_retry_after_the_table_failed_mid_delete_finishes_it() {
    let w = world();
    w.admin
        .put_code(put_code("c1", offline_checked(&["a"])))
        .await
        .expect("created");
    let command = DeleteCode::parse("demo", "c1").expect("valid");
    // WeCom deletes, then the table fails: simulated by deleting in WeCom first.
    w.wecom
        .delete(
            &CorpCredentials {
                tenant: tenant(),
                corp_id: "wx5823bf96d3bd56c7".into(),
                corp_secret: SECRET.into(),
            },
            "cw-1",
        )
        .await
        .expect("deleted in WeCom");

    w.admin.delete_code(command).await.expect("deleted");

    assert_eq!(w.store.stored_code(&tenant(), &code("c1")), None);
}

#[tokio::test]
async fn a_code_never_created_in_wecom_is_deleted_without_calling_wecom() {
    let w = world();
    w.admin
        .put_code(put_code("c1", offline_checked(&["c"])))
        .await
        .expect_err("nobody eligible yet");

    let answer = w
        .admin
        .delete_code(DeleteCode::parse("demo", "c1").expect("valid"))
        .await
        .expect("deleted");

    assert_eq!(answer.config_id, None);
    assert!(w.wecom.deleted().is_empty());
    assert_eq!(w.store.stored_code(&tenant(), &code("c1")), None);
}

#[tokio::test]
async fn deleting_an_unknown_code_or_a_deleted_one_again_is_not_found() {
    let w = world();
    w.admin
        .put_code(put_code("c1", offline_checked(&["a"])))
        .await
        .expect("created");
    let command = DeleteCode::parse("demo", "c1").expect("valid");
    w.admin.delete_code(command.clone()).await.expect("deleted");

    let again = w.admin.delete_code(command).await.expect_err("gone");
    let unknown = w
        .admin
        .delete_code(DeleteCode::parse("demo", "nope").expect("valid"))
        .await
        .expect_err("never existed");
    let no_tenant = w
        .admin
        .delete_code(DeleteCode::parse("nobody", "c1").expect("valid"))
        .await
        .expect_err("no tenant");

    for error in [again, unknown, no_tenant] {
        assert_eq!(ErrorAnswer::from(&error).status, 404, "{error:?}");
    }
    assert_eq!(w.wecom.deleted(), ["cw-1"]);
}

/// The world's admin, with `budget` for its WeCom calls.
fn budgeted(
    w: &AdminWorld,
    budget: FakeBudget,
) -> Admin<crate::fakes::InMemoryStore, crate::fakes::InMemoryQueues, crate::fakes::FakeWeCom> {
    Admin::new(
        w.store.clone(),
        w.queue.clone(),
        w.queue.expanding_through(w.store.clone()),
        w.wecom.clone(),
        fixed_clock,
    )
    .with_budget(budget)
}

#[tokio::test]
async fn a_code_is_not_created_in_wecom_when_the_tenants_budget_is_spent() {
    let w = world();
    let admin = budgeted(&w, FakeBudget::spent_for(12_300));

    let error = admin
        .put_code(put_code("c1", offline_checked(&["a"])))
        .await
        .expect_err("refused");

    assert_eq!(
        ErrorAnswer::from(&error),
        ErrorAnswer {
            status: 429,
            code: "throttled",
            detail: "the tenant's WeCom budget for add_contact_way is spent; retry in 13 s".into()
        }
    );
    assert!(w.wecom.created().is_empty(), "no call made");
    let stored = w
        .store
        .stored_code(&tenant(), &code("c1"))
        .expect("config kept");
    assert_eq!(stored.code.config_id, None);
}

#[tokio::test]
async fn a_45009_holds_the_tenants_budget_so_the_next_creation_waits_without_a_call() {
    let w = world();
    let admin = budgeted(
        &w,
        FakeBudget::limited(crate::budget::BudgetLimits {
            per_minute: 9_000,
            per_hour: 135_000,
        }),
    );
    w.wecom.fail_with(WeComError::Throttled { errcode: 45009 });

    let first = admin
        .put_code(put_code("c1", offline_checked(&["a"])))
        .await
        .expect_err("throttled");
    let answer = ErrorAnswer::from(&first);
    assert_eq!(
        (answer.status, answer.code),
        (429, "throttled"),
        "{answer:?}"
    );
    assert!(answer.detail.contains("add_contact_way"), "{answer:?}");

    // WeCom would take the next creation, but the minute WeCom said was spent is held.
    w.wecom.stop_failing_creates();
    let second = admin
        .put_code(put_code("c2", offline_checked(&["a"])))
        .await
        .expect_err("the minute is held");
    assert_eq!(ErrorAnswer::from(&second).status, 429);
    assert!(w.wecom.created().is_empty(), "the held minute made no call");
}

// ---------------------------------------------------------------- edits that cannot end half done

fn numbered(prefix: &str, range: std::ops::Range<usize>) -> Vec<String> {
    range.map(|i| format!("{prefix}{i:04}")).collect()
}

fn staff_set(ids: &[String]) -> BTreeSet<StaffId> {
    ids.iter().map(|id| staff(id)).collect()
}

#[tokio::test]
async fn a_code_edit_interrupted_after_its_first_chunk_then_retried_ends_with_the_index_matching_the_config(
) {
    let w = world();
    for id in numbered("s", 0..500) {
        w.store.insert_staff(&tenant(), &staff(&id), online(true));
    }
    let first = numbered("s", 0..300);
    let edited = numbered("s", 200..500);
    w.admin
        .put_code(put_code(
            "c1",
            json!({"family": "native", "members": first}),
        ))
        .await
        .expect("created");
    assert_eq!(
        w.store.staff_seated_on(&tenant(), &code("c1")),
        staff_set(&first)
    );

    // 200 seats added and 200 removed: the configuration with the work it owes, then five
    // chunks. The table fails after the configuration and the first chunk.
    w.store.fail_transactions_after(Some(2));
    let edit = json!({"family": "native", "members": edited});
    w.admin
        .put_code(put_code("c1", edit.clone()))
        .await
        .expect_err("cut short");
    assert_eq!(
        w.store
            .stored_code(&tenant(), &code("c1"))
            .expect("stored")
            .code
            .config
            .members,
        staff_set(&edited).into_iter().collect::<Vec<_>>()
    );
    assert!(w.store.code_owes_index_writes(&tenant(), &code("c1")));
    assert_ne!(
        w.store.staff_seated_on(&tenant(), &code("c1")),
        staff_set(&edited)
    );

    // The same body again: the stored configuration equals it, and the retry still finishes
    // the index writes the cut-short edit owed.
    w.store.fail_transactions_after(None);
    w.admin
        .put_code(put_code("c1", edit))
        .await
        .expect("retried");

    assert!(!w.store.code_owes_index_writes(&tenant(), &code("c1")));
    assert_eq!(
        w.store.staff_seated_on(&tenant(), &code("c1")),
        staff_set(&edited)
    );
    let codes = |id: &str| {
        let store = w.store.clone();
        let id = staff(id);
        async move { store.codes_of_staff(&tenant(), &id).await.expect("read") }
    };
    assert_eq!(codes("s0000").await, Vec::<CodeId>::new());
    assert_eq!(codes("s0499").await, [code("c1")]);
}

#[tokio::test]
async fn a_retry_after_an_interrupted_code_edit_may_change_the_config_again_and_the_index_follows_the_last_one(
) {
    let w = world();
    for id in numbered("s", 0..500) {
        w.store.insert_staff(&tenant(), &staff(&id), online(true));
    }
    w.admin
        .put_code(put_code(
            "c1",
            json!({"family": "native", "members": numbered("s", 0..250)}),
        ))
        .await
        .expect("created");
    w.store.fail_transactions_after(Some(2));
    w.admin
        .put_code(put_code(
            "c1",
            json!({"family": "native", "members": numbered("s", 250..500)}),
        ))
        .await
        .expect_err("cut short");
    w.store.fail_transactions_after(None);

    let last = numbered("s", 100..200);
    w.admin
        .put_code(put_code("c1", json!({"family": "native", "members": last})))
        .await
        .expect("stored");

    assert!(!w.store.code_owes_index_writes(&tenant(), &code("c1")));
    assert_eq!(
        w.store.staff_seated_on(&tenant(), &code("c1")),
        staff_set(&last)
    );
}

#[tokio::test]
async fn a_small_code_edit_is_one_transaction() {
    let w = world();
    w.admin
        .put_code(put_code("c1", offline_checked(&["a"])))
        .await
        .expect("created");
    let before = w.store.transactions();
    w.admin
        .put_code(put_code("c1", offline_checked(&["a", "b"])))
        .await
        .expect("edited");
    assert_eq!(w.store.transactions() - before, 1);
}

#[tokio::test]
async fn a_department_replacement_of_2000_members_for_2000_others_interrupted_midway_then_retried_ends_correct(
) {
    let w = world();
    let old = numbered("d", 0..2000);
    let new = numbered("e", 0..2000);
    put_department(&w, "7", &old.iter().map(String::as_str).collect::<Vec<_>>()).await;
    let before = w.store.transactions();

    // 4,000 staff updates: the department with what it owes, then 41 chunks of 99. The
    // table fails after the department and 20 chunks.
    w.store.fail_transactions_after(Some(21));
    let body = json!({ "members": new }).to_string();
    let command = || PutDepartment::parse("demo", "7", &body).expect("valid");
    w.admin
        .put_department(command())
        .await
        .expect_err("cut short");
    assert_eq!(w.store.transactions() - before, 21);
    assert!(w
        .store
        .department_owes_staff_updates(&tenant(), &department("7")));

    w.store.fail_transactions_after(None);
    let answer = w.admin.put_department(command()).await.expect("retried");

    // The retry wrote only what was still owed: 21 chunks of the 41, and the department.
    assert_eq!(w.store.transactions() - before, 21 + 1 + 21);
    assert_eq!(answer.members.len(), 2000);
    assert!(!w
        .store
        .department_owes_staff_updates(&tenant(), &department("7")));
    let seven: BTreeSet<DepartmentId> = [department("7")].into_iter().collect();
    for id in &new {
        assert_eq!(
            w.store.stored_staff_departments(&tenant(), &staff(id)),
            seven,
            "{id}"
        );
    }
    for id in &old {
        assert!(
            w.store
                .stored_staff_departments(&tenant(), &staff(id))
                .is_empty(),
            "{id}"
        );
    }
    assert_eq!(
        w.store.stored_department(&tenant(), &department("7")),
        Some(staff_set(&new))
    );
}

#[tokio::test]
async fn a_2000_for_2000_department_replacement_takes_42_transactions_not_4000_writes() {
    let w = world();
    let old = numbered("d", 0..2000);
    put_department(&w, "7", &old.iter().map(String::as_str).collect::<Vec<_>>()).await;
    let before = w.store.transactions();

    let new = numbered("e", 0..2000);
    put_department(&w, "7", &new.iter().map(String::as_str).collect::<Vec<_>>()).await;

    // One for the department and what it owes, then ceil(4,000 / 99) = 41 chunks (landed
    // `owed::CHUNKS_IN_FLIGHT` at a time by the table's adapter: 11 rounds).
    assert_eq!(w.store.transactions() - before, 42);
}

// ---------------------------------------------------------------- the contract: merge patches

async fn put_tenant_body(
    w: &AdminWorld,
    tenant: &str,
    body: serde_json::Value,
) -> Result<TenantAnswer, AdminError> {
    let command = PutTenant::parse(tenant, &body.to_string())?;
    w.admin.put_tenant(command).await
}

#[tokio::test]
async fn a_tenant_put_keeps_what_it_leaves_out_and_resets_what_it_sets_to_null() {
    let w = AdminWorld::new(fixed_clock);
    put_tenant_body(&w, "acme", tenant_body())
        .await
        .expect("created");

    let answer = put_tenant_body(&w, "acme", json!({"company_daily_cap": 7}))
        .await
        .expect("patched");

    let acme = TenantId::parse("acme").expect("valid");
    let stored = w.store.stored_profile(&acme).expect("stored");
    assert_eq!(stored.corp_secret, SECRET, "a secret left out is kept");
    assert_eq!(stored.timezone.name(), "Europe/Paris", "left out: kept");
    assert_eq!(stored.company_daily_cap, Some(7));
    assert_eq!(answer.version, 2);

    put_tenant_body(
        &w,
        "acme",
        json!({"timezone": null, "company_daily_cap": null}),
    )
    .await
    .expect("reset");
    let stored = w.store.stored_profile(&acme).expect("stored");
    assert_eq!(stored.timezone.name(), "Asia/Shanghai", "null: the default");
    assert_eq!(stored.company_daily_cap, None, "null: the default");
}

#[tokio::test]
async fn a_new_tenant_needs_every_field_without_a_default_and_null_never_clears_a_secret() {
    let w = AdminWorld::new(fixed_clock);
    let mut body = tenant_body();
    body.as_object_mut().expect("object").remove("corp_secret");
    let missing = put_tenant_body(&w, "acme", body).await;
    assert_eq!(invalid_field(missing), "corp_secret");

    put_tenant_body(&w, "acme", tenant_body())
        .await
        .expect("created");
    let cleared = put_tenant_body(&w, "acme", json!({"corp_secret": null})).await;
    assert_eq!(invalid_field(cleared), "corp_secret");
    let acme = TenantId::parse("acme").expect("valid");
    assert_eq!(
        w.store.stored_profile(&acme).map(|p| p.corp_secret),
        Some(SECRET.into())
    );
}

#[test]
fn each_tenant_field_is_bounded_and_the_refusal_names_it_without_echoing_it() {
    let long_secret = "s".repeat(10_240);
    let cases = [
        ("corp_secret", json!(long_secret)),
        ("corp_secret", json!("has spaces in it")),
        ("corp_secret", json!("")),
        ("callback_token", json!("ab")),
        ("callback_token", json!("t".repeat(33))),
        ("encoding_aes_key", json!(&AES_KEY[..42])),
        ("corp_id", json!("c".repeat(65))),
        ("corp_id", json!("wx-5823")),
        ("timezone", json!("Z".repeat(65))),
        ("timezone", json!(8)),
        ("company_daily_cap", json!(0)),
    ];
    for (field, value) in cases {
        let mut body = tenant_body();
        body[field] = value.clone();
        let refused = PutTenant::parse("demo", &body.to_string());
        let Err(AdminError::Invalid {
            field: named,
            reason,
        }) = refused
        else {
            panic!("{field} = {value} was not refused");
        };
        assert_eq!(named, field);
        assert!(!reason.contains(&long_secret[..20]), "{reason}");
    }
}

#[tokio::test]
async fn a_corp_id_belongs_to_one_tenant_and_is_released_when_its_tenant_moves_on() {
    let w = AdminWorld::new(fixed_clock);
    put_tenant_body(&w, "acme", tenant_body())
        .await
        .expect("created");

    let taken = put_tenant_body(&w, "globex", tenant_body()).await;
    assert!(
        matches!(taken, Err(AdminError::CorpIdTaken { .. })),
        "{taken:?}"
    );
    assert_eq!(ErrorAnswer::from(&taken.expect_err("refused")).status, 409);
    let globex = TenantId::parse("globex").expect("valid");
    assert_eq!(w.store.stored_profile(&globex), None, "nothing written");

    put_tenant_body(&w, "acme", json!({"corp_id": "wwnewcorp"}))
        .await
        .expect("acme moves to another corp");
    put_tenant_body(&w, "globex", tenant_body())
        .await
        .expect("the released corp id is free");
}

#[tokio::test]
async fn a_resigned_staff_member_is_never_made_active_again_and_the_refusal_changes_nothing() {
    let w = world();
    w.store.insert_staff(
        &tenant(),
        &staff("r1"),
        StaffFacts {
            online: false,
            employment: Employment::Resigned,
            ..StaffFacts::ACTIVE_ONLINE
        },
    );
    let before = w.queue.reasons().len();

    for body in [
        json!({"employment": "active", "online": true}),
        json!({"employment": "disabled"}),
        json!({"employment": null}),
    ] {
        let command = PutStaff::parse("demo", "r1", &body.to_string()).expect("valid");
        let refused = w.admin.put_staff(command).await;
        assert!(
            matches!(refused, Err(AdminError::Resigned { .. })),
            "{body}: {refused:?}"
        );
    }

    let stored = w
        .store
        .stored_staff(&tenant(), &staff("r1"))
        .expect("stored");
    assert_eq!(
        (stored.employment, stored.online),
        (Employment::Resigned, false)
    );
    assert_eq!(w.queue.reasons().len(), before, "no fan-out for a refusal");
    let still_resigned = PutStaff::parse("demo", "r1", r#"{"online": true}"#).expect("valid");
    let answer = w
        .admin
        .put_staff(still_resigned)
        .await
        .expect("a PUT that keeps the resignation");
    assert_eq!(answer.employment, Employment::Resigned);
}

#[tokio::test]
async fn a_staff_put_keeps_what_it_leaves_out() {
    let w = world();
    let command = PutStaff::parse("demo", "a", r#"{"employment": "disabled"}"#).expect("valid");
    w.admin.put_staff(command).await.expect("stored");
    let stored = w
        .store
        .stored_staff(&tenant(), &staff("a"))
        .expect("stored");
    assert!(stored.online, "online left out: kept");
    assert_eq!(stored.employment, Employment::Disabled);
    let command =
        PutStaff::parse("demo", "a", r#"{"employment": null, "online": null}"#).expect("valid");
    w.admin.put_staff(command).await.expect("stored");
    let stored = w
        .store
        .stored_staff(&tenant(), &staff("a"))
        .expect("stored");
    assert_eq!(
        (stored.employment, stored.online),
        (Employment::Active, false),
        "null: defaults"
    );
}

#[tokio::test]
async fn a_code_put_patches_the_stored_configuration() {
    let w = world();
    let created = json!({"family": "quota", "members": ["a", "b"], "switches": {"daily_limit": 5, "offline_check": true}});
    w.admin
        .put_code(put_code("c1", created))
        .await
        .expect("created");

    w.admin
        .put_code(put_code("c1", json!({"switches": {"daily_limit": null}})))
        .await
        .expect("patched");

    let stored = w
        .store
        .stored_code(&tenant(), &code("c1"))
        .expect("stored")
        .code
        .config;
    assert_eq!(stored.family, Family::Quota, "left out: kept");
    assert_eq!(stored.members, [staff("a"), staff("b")]);
    assert_eq!(stored.switches.daily_limit, None, "null: no limit");
    assert!(
        stored.switches.offline_check,
        "a sibling switch left out: kept"
    );

    let missing_family = w
        .admin
        .put_code(put_code("c2", json!({"members": ["a"]})))
        .await;
    assert_eq!(invalid_field(missing_family), "family");
    assert_eq!(w.store.stored_code(&tenant(), &code("c2")), None);
}

// ---------------------------------------------------------------- the contract: reads

#[tokio::test]
async fn a_tenant_reads_back_without_its_secrets_but_with_when_they_changed() {
    let w = AdminWorld::new(fixed_clock);
    put_tenant_body(&w, "acme", tenant_body())
        .await
        .expect("created");

    let view = w
        .admin
        .tenant(GetTenant::parse("acme").expect("valid"))
        .await
        .expect("found");

    let shown = serde_json::to_string(&view).expect("serialises");
    for secret in [SECRET, TOKEN, AES_KEY] {
        assert!(!shown.contains(secret), "{shown}");
    }
    assert_eq!(
        serde_json::to_value(&view.secrets).expect("serialises"),
        json!({
            "corp_secret": {"set": true, "changed_at_ms": NOW_MS},
            "callback_token": {"set": true, "changed_at_ms": NOW_MS},
            "encoding_aes_key": {"set": true, "changed_at_ms": NOW_MS},
            "previous_callback_keys": null
        })
    );
    let unknown = w
        .admin
        .tenant(GetTenant::parse("nobody").expect("valid"))
        .await;
    assert!(matches!(unknown, Err(AdminError::NotFound { .. })));
}

#[tokio::test]
async fn a_staff_member_reads_back_with_todays_adds_against_the_limits() {
    let w = world();
    w.store.insert_profile(
        &tenant(),
        TenantProfile {
            company_daily_cap: Some(30),
            ..profile()
        },
    );
    let body = json!({"family": "native", "members": ["a"], "switches": {"daily_limit": 4, "add_limit": 9}});
    w.admin
        .put_code(put_code("c1", body))
        .await
        .expect("created");
    let day = crate::tenants::tenant_day(NOW_MS, Default::default());
    for n in 0..3 {
        let add = crate::facts::AddFact {
            tenant: tenant(),
            code: code("c1"),
            staff: staff("a"),
            external_user: format!("wm{n}"),
            created_at_secs: NOW_MS / 1000,
            day: day.clone(),
        };
        crate::facts::AddLedger::count_add(&w.store, &add, NOW_MS)
            .await
            .expect("counted");
    }

    let view = w
        .admin
        .staff(GetStaff::parse("demo", "a").expect("valid"))
        .await
        .expect("found");
    let codes = w
        .admin
        .staff_codes(ListCodes::parse("demo", Some("a"), None, None).expect("valid"))
        .await
        .expect("listed");

    assert_eq!(view.day, day);
    assert_eq!(
        view.adds_today_all_codes,
        AddsAgainst {
            adds: 3,
            limit: Some(30)
        }
    );
    assert_eq!(
        serde_json::to_value(&codes.codes).expect("serialises"),
        json!([{"code": "c1", "adds_today": {"adds": 3, "limit": 4}, "adds_total": {"adds": 3, "limit": 9}}])
    );
    let unknown = w
        .admin
        .staff(GetStaff::parse("demo", "ghost").expect("valid"))
        .await;
    assert!(matches!(unknown, Err(AdminError::NotFound { .. })));
}

#[tokio::test]
async fn the_codes_of_a_tenant_come_in_pages_that_miss_none_and_repeat_none() {
    let w = world();
    for i in 0..7 {
        let body = json!({"family": "native", "members": ["a"]});
        w.admin
            .put_code(put_code(&format!("c{i}"), body))
            .await
            .expect("created");
    }

    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let query = ListCodes::parse("demo", None, Some("3"), cursor.as_deref()).expect("valid");
        let page = w.admin.codes(query).await.expect("listed");
        pages += 1;
        assert!(page.codes.len() <= 3);
        seen.extend(page.codes.into_iter().map(|c| c.code.to_string()));
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }

    assert_eq!(pages, 3);
    assert_eq!(seen, ["c0", "c1", "c2", "c3", "c4", "c5", "c6"]);
    for (limit, cursor, field) in [
        (Some("0"), None, "limit"),
        (Some("101"), None, "limit"),
        (None, Some("a b"), "cursor"),
    ] {
        assert_eq!(
            invalid_field(ListCodes::parse("demo", None, limit, cursor)),
            field
        );
    }
}

#[tokio::test]
async fn a_department_reads_back_its_members() {
    let w = world();
    let command = PutDepartment::parse("demo", "7", r#"{"members": ["b", "a"]}"#).expect("valid");
    w.admin.put_department(command).await.expect("stored");

    let view = w
        .admin
        .department(GetDepartment::parse("demo", "7").expect("valid"))
        .await
        .expect("found");

    assert_eq!(view.members, [staff("a"), staff("b")]);
    let unknown = w
        .admin
        .department(GetDepartment::parse("demo", "8").expect("valid"))
        .await;
    assert!(matches!(unknown, Err(AdminError::NotFound { .. })));
}

#[tokio::test]
async fn a_code_that_starved_after_its_creation_still_reports_the_list_wecom_holds() {
    let w = world();
    w.admin
        .put_code(put_code(
            "c1",
            json!({"family": "native", "members": ["a", "b"]}),
        ))
        .await
        .expect("created");
    // Nobody eligible any more: the refresh records the code starved and pushes nothing.
    for name in ["a", "b"] {
        w.store.insert_staff(&tenant(), &staff(name), online(false));
    }
    w.store.set_pushed(
        &tenant(),
        &code("c1"),
        PushedList {
            users: vec![],
            pushed_at_ms: 0,
            starved: true,
            rotation: None,
        },
    );

    let status = w
        .admin
        .code_status(GetCode::parse("demo", "c1").expect("valid"))
        .await
        .expect("found");

    assert_eq!(
        status.last_pushed,
        Some(LastPushed {
            users: vec![staff("a"), staff("b")],
            pushed_at_ms: None,
            starved: true
        })
    );
    assert!(!status.in_sync);
}

#[tokio::test]
async fn a_code_patch_applied_to_a_version_another_edit_replaced_is_applied_again_to_the_new_one() {
    let w = world();
    let created = json!({"family": "native", "members": ["a"], "switches": {"daily_limit": 5}});
    w.admin
        .put_code(put_code("c1", created))
        .await
        .expect("created");
    // Another edit lands between this request's read and its write: the write, conditioned on
    // the version read, is refused, and the patch is applied again to the other edit's result.
    w.store
        .edit_before_next_code_write(&tenant(), &code("c1"), &[staff("a"), staff("b")]);

    let answer = w
        .admin
        .put_code(put_code("c1", json!({"switches": {"daily_limit": null}})))
        .await
        .expect("patched");

    let stored = w.store.stored_code(&tenant(), &code("c1")).expect("stored");
    assert_eq!(
        stored.code.config.members,
        [staff("a"), staff("b")],
        "the other edit kept"
    );
    assert_eq!(
        stored.code.config.switches.daily_limit, None,
        "this patch applied"
    );
    assert_eq!((answer.version, stored.version), (3, 3));
}

// ---------------------------------------------------------------- rotating callback keys

const NEW_TOKEN: &str = "newtoken";

fn patch(body: serde_json::Value) -> TenantPatch {
    PutTenant::parse("demo", &body.to_string())
        .expect("valid body")
        .patch
}

fn kept_ms() -> u64 {
    crate::tenants::KeyRotation::default().stored_ms
}

#[test]
fn a_new_callback_token_keeps_the_replaced_pair_with_when_it_was_replaced() {
    let rotated = patch(json!({"callback_token": NEW_TOKEN}))
        .apply(Some(&profile()), NOW_MS, Default::default())
        .expect("rotated");
    assert_eq!(rotated.callback_token, NEW_TOKEN);
    assert_eq!(
        rotated.previous_callback,
        Some(crate::tenants::PreviousCallbackKeys {
            callback_token: TOKEN.into(),
            encoding_aes_key: AES_KEY.into(),
            replaced_at_ms: NOW_MS,
        })
    );
}

#[test]
fn a_put_that_keeps_the_callback_keys_keeps_the_previous_pair_untouched() {
    let rotated = patch(json!({"callback_token": NEW_TOKEN}))
        .apply(Some(&profile()), NOW_MS, Default::default())
        .expect("rotated");
    let later = patch(json!({"timezone": "Europe/Paris", "callback_token": NEW_TOKEN}))
        .apply(Some(&rotated), NOW_MS + 1_000, Default::default())
        .expect("stored");
    assert_eq!(later.previous_callback, rotated.previous_callback);
}

#[test]
fn a_second_rotation_while_the_previous_pair_is_kept_is_refused() {
    let rotated = patch(json!({"callback_token": NEW_TOKEN}))
        .apply(Some(&profile()), NOW_MS, Default::default())
        .expect("rotated");
    let again = patch(json!({"callback_token": "thirdtoken"})).apply(
        Some(&rotated),
        NOW_MS + kept_ms() - 1,
        Default::default(),
    );
    assert!(
        matches!(again, Err(AdminError::PreviousKeysHeld { kept_until_ms }) if kept_until_ms == NOW_MS + kept_ms()),
        "{again:?}"
    );
    let answer = ErrorAnswer::from(&again.unwrap_err());
    assert_eq!(
        (answer.status, answer.code),
        (409, "previous_callback_keys_held")
    );
    assert!(!answer.detail.contains(TOKEN) && !answer.detail.contains(NEW_TOKEN));
}

#[test]
fn a_second_rotation_that_drops_the_previous_pair_keeps_the_pair_it_replaces() {
    let rotated = patch(json!({"callback_token": NEW_TOKEN}))
        .apply(Some(&profile()), NOW_MS, Default::default())
        .expect("rotated");
    let again = patch(json!({"callback_token": "thirdtoken", "previous_callback_keys": null}))
        .apply(Some(&rotated), NOW_MS + 5, Default::default())
        .expect("the held pair dropped on purpose");
    let previous = again.previous_callback.expect("the replaced pair is kept");
    assert_eq!(
        (previous.callback_token.as_str(), previous.replaced_at_ms),
        (NEW_TOKEN, NOW_MS + 5)
    );
}

#[test]
fn a_rotation_once_the_previous_pair_has_expired_needs_no_drop() {
    let rotated = patch(json!({"encoding_aes_key": "N".repeat(43)}))
        .apply(Some(&profile()), NOW_MS, Default::default())
        .expect("rotated");
    let again = patch(json!({"encoding_aes_key": "M".repeat(43)}))
        .apply(Some(&rotated), NOW_MS + kept_ms(), Default::default())
        .expect("the expired pair is no longer kept");
    let previous = again.previous_callback.expect("the replaced pair is kept");
    assert_eq!(previous.encoding_aes_key, "N".repeat(43));
}

#[test]
fn previous_callback_keys_null_alone_drops_them_at_once() {
    let rotated = patch(json!({"callback_token": NEW_TOKEN}))
        .apply(Some(&profile()), NOW_MS, Default::default())
        .expect("rotated");
    let revoked = patch(json!({"previous_callback_keys": null}))
        .apply(Some(&rotated), NOW_MS + 1, Default::default())
        .expect("dropped");
    assert_eq!(revoked.previous_callback, None);
    assert_eq!(revoked.callback_token, NEW_TOKEN);
}

#[test]
fn previous_callback_keys_can_only_be_null() {
    for value in [json!({}), json!("x"), json!(true)] {
        let refused = PutTenant::parse(
            "demo",
            &json!({"previous_callback_keys": value}).to_string(),
        );
        assert_eq!(invalid_field(refused), "previous_callback_keys");
    }
}

#[tokio::test]
async fn a_tenant_after_a_rotation_reads_back_until_when_its_previous_keys_verify_never_them() {
    let w = AdminWorld::new(fixed_clock);
    put_tenant_body(&w, "acme", tenant_body())
        .await
        .expect("created");
    put_tenant_body(&w, "acme", json!({"callback_token": NEW_TOKEN}))
        .await
        .expect("rotated");
    let refused = put_tenant_body(&w, "acme", json!({"callback_token": "thirdtoken"})).await;
    assert!(
        matches!(refused, Err(AdminError::PreviousKeysHeld { .. })),
        "{refused:?}"
    );

    let view = w
        .admin
        .tenant(GetTenant::parse("acme").expect("valid"))
        .await
        .expect("found");
    let shown = serde_json::to_string(&view).expect("serialises");
    for secret in [SECRET, TOKEN, NEW_TOKEN, AES_KEY] {
        assert!(!shown.contains(secret), "{shown}");
    }
    let rotation = crate::tenants::KeyRotation::default();
    assert_eq!(
        serde_json::to_value(view.secrets.previous_callback_keys).expect("serialises"),
        json!({
            "replaced_at_ms": NOW_MS,
            "edge_until_ms": NOW_MS + rotation.edge_ms,
            "kept_until_ms": NOW_MS + rotation.stored_ms
        })
    );
}
