use super::*;
use crate::admin::AdminStore;
use crate::fakes::{InMemoryQueues, InMemoryStore};
use crate::ids::DepartmentId;
use crate::membership::{CodeConfig, Employment, Family, Limit, Switches};
use crate::wecom::callback::write_flat_xml;
use crate::wecom::crypto::CallbackCrypto;
use std::collections::{BTreeSet, HashMap};

const TOKEN: &str = "tok123";
const KEY: &str = "jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C";
const CORP: &str = "wwcorp";

/// The table (tenant `acme`) and the queues the recorder writes to.
struct Fakes {
    store: InMemoryStore,
    queues: InMemoryQueues,
}

type TestRecorder = FactRecorder<InMemoryStore, InMemoryStore, InMemoryQueues, InMemoryQueues>;

impl Fakes {
    fn with_company_cap(company_cap: Option<u32>) -> Self {
        let store = InMemoryStore::default();
        store.insert_profile(
            &acme(),
            TenantProfile {
                corp_id: CORP.into(),
                callback_token: TOKEN.into(),
                encoding_aes_key: KEY.into(),
                previous_callback: None,
                corp_secret: "s".into(),
                timezone: Default::default(),
                company_daily_cap: company_cap,
            },
        );
        Self {
            store,
            queues: InMemoryQueues::default(),
        }
    }

    fn recorder(&self) -> TestRecorder {
        let (store, queues) = (self.store.clone(), self.queues.clone());
        FactRecorder::new(store.clone(), store, queues.clone(), queues, clock)
    }

    /// Stores `code` with these members, departments and switches.
    async fn code(&self, code: &str, members: &[&str], departments: &[&str], switches: Switches) {
        let config = CodeConfig {
            family: Family::Native,
            members: members.iter().map(|s| staff(s)).collect(),
            departments: departments
                .iter()
                .map(|d| DepartmentId::parse(d).expect("valid"))
                .collect(),
            fallback: vec![],
            switches,
        };
        let code = CodeId::parse(code).expect("valid");
        let read_version = self.store.stored_code(&acme(), &code).map(|c| c.version);
        AdminStore::put_code(&self.store, &acme(), &code, &config, read_version, 0)
            .await
            .expect("answered")
            .expect("stored");
    }

    /// `staff` sits on each of `codes`.
    async fn seat(&self, staff: &str, codes: &[String]) {
        for code in codes {
            self.code(code, &[staff], &[], Switches::default()).await;
        }
    }

    /// Each of `codes` lists `department`.
    async fn list(&self, department: &str, codes: &[&str]) {
        for code in codes {
            self.code(code, &[], &[department], Switches::default())
                .await;
        }
    }

    /// The adds counted, as `code/staff/day` -> count.
    fn counters(&self) -> HashMap<String, u32> {
        let mut counters = HashMap::new();
        for add in self.store.counted() {
            *counters
                .entry(format!("{}/{}/{}", add.code, add.staff, add.day))
                .or_default() += 1;
        }
        counters
    }
}

impl Default for Fakes {
    fn default() -> Self {
        Self::with_company_cap(None)
    }
}

fn acme() -> TenantId {
    TenantId::parse("acme").expect("valid")
}

fn staff(id: &str) -> StaffId {
    StaffId::parse(id).expect("valid")
}

fn stored(fields: &[(&str, &str)]) -> InboxMessage {
    let crypto = CallbackCrypto::new(TOKEN, KEY, CORP).expect("valid");
    let encrypt = crypto.encrypt(&write_flat_xml(fields));
    let signature = crypto.sign("1700000000", "n", &encrypt);
    let envelope = Envelope {
        to_user_name: CORP.into(),
        agent_id: None,
        encrypt,
    }
    .to_xml();
    let event = CallbackEvent::parse(&write_flat_xml(fields)).expect("valid event");
    InboxMessage::new(
        TenantId::parse("acme").expect("valid"),
        &event,
        envelope,
        &signature,
        "1700000000",
        "n",
        0,
    )
}

fn add(external: &str) -> InboxMessage {
    stored(&[
        ("ToUserName", CORP),
        ("CreateTime", "1700000000"),
        ("MsgType", "event"),
        ("Event", "change_external_contact"),
        ("ChangeType", "add_external_contact"),
        ("UserID", "zhangsan"),
        ("ExternalUserID", external),
        ("State", "code-1"),
    ])
}

fn clock() -> u64 {
    42_000
}

#[tokio::test]
async fn a_redelivered_add_is_counted_once_and_its_reason_is_the_same_reason() {
    let fakes = Fakes::default();
    fakes.seat("zhangsan", &on_codes(2)).await;
    let recorder = fakes.recorder();
    let first = recorder.record(&add("wm1")).await.expect("recorded");
    let again = recorder.record(&add("wm1")).await.expect("recorded");
    assert!(matches!(
        first,
        FactOutcome::Add {
            outcome: CountOutcome::Counted { .. },
            ..
        }
    ));
    assert!(matches!(
        again,
        FactOutcome::Add {
            outcome: CountOutcome::AlreadyCounted { at_ms: 42_000 },
            ..
        }
    ));
    assert_eq!(fakes.counters().values().sum::<u32>(), 1);
    let reasons = fakes.queues.sends();
    assert_eq!(reasons.len(), 2);
    assert_eq!(reasons[0].deduplication_id(), reasons[1].deduplication_id());
    assert_eq!(reasons[0].code.as_str(), "code-1");
    assert_eq!(reasons[0].fact_at_ms, 42_000);
}

#[tokio::test]
async fn an_add_whose_count_meets_another_write_is_tried_again_and_counted_once() {
    let fakes = Fakes::default();
    fakes.seat("zhangsan", &on_codes(2)).await;
    fakes.store.conflict_next_adds(3);
    let outcome = fakes
        .recorder()
        .record(&add("wm1"))
        .await
        .expect("recorded");
    assert!(matches!(
        outcome,
        FactOutcome::Add {
            outcome: CountOutcome::Counted { .. },
            ..
        }
    ));
    assert_eq!(fakes.counters().values().sum::<u32>(), 1);
    assert_eq!(fakes.queues.sends().len(), 1);
}

#[tokio::test]
async fn an_add_that_meets_other_writes_four_times_fails_its_message_and_counts_nothing() {
    let fakes = Fakes::default();
    fakes.seat("zhangsan", &on_codes(2)).await;
    fakes.store.conflict_next_adds(4);
    let recorder = fakes.recorder();
    let failed = recorder.record(&add("wm1")).await;
    assert!(failed.is_err(), "{failed:?}");
    assert_eq!(fakes.counters().values().sum::<u32>(), 0);
    assert!(fakes.queues.sends().is_empty());
    // Redelivered, it is counted.
    recorder.record(&add("wm1")).await.expect("recorded");
    assert_eq!(fakes.counters().values().sum::<u32>(), 1);
}

#[tokio::test]
async fn the_add_counts_toward_the_tenants_day_of_the_add() {
    let fakes = Fakes::default();
    fakes.seat("zhangsan", &on_codes(2)).await;
    let recorder = fakes.recorder();
    recorder.record(&add("wm1")).await.expect("recorded");
    // 1700000000 is 2023-11-15 06:13:20 in Shanghai.
    assert!(fakes.counters().contains_key("code-1/zhangsan/2023-11-15"));
}

#[tokio::test]
async fn events_qrsync_does_not_act_on_are_acknowledged_and_counted() {
    let fakes = Fakes::default();
    let recorder = fakes.recorder();
    let deleted = stored(&[
        ("ToUserName", CORP),
        ("CreateTime", "1"),
        ("MsgType", "event"),
        ("Event", "change_external_contact"),
        ("ChangeType", "del_follow_user"),
        ("UserID", "u"),
    ]);
    let foreign = stored(&[
        ("ToUserName", CORP),
        ("CreateTime", "1"),
        ("MsgType", "event"),
        ("Event", "change_external_contact"),
        ("ChangeType", "add_external_contact"),
        ("UserID", "u"),
        ("ExternalUserID", "wm"),
        ("State", "活码"),
    ]);
    assert!(matches!(
        recorder.record(&deleted).await,
        Ok(FactOutcome::Ignored { .. })
    ));
    assert!(matches!(
        recorder.record(&foreign).await,
        Ok(FactOutcome::Ignored { .. })
    ));
    assert_eq!(fakes.store.ignored().len(), 2);
    assert!(fakes.queues.sends().is_empty());
}

#[tokio::test]
async fn a_stored_message_that_fails_verification_is_poison() {
    let fakes = Fakes::default();
    let recorder = fakes.recorder();
    let mut tampered = add("wm1");
    tampered.nonce = "other".into();
    assert!(matches!(
        recorder.record(&tampered).await,
        Err(FactsError::Poison(_))
    ));
    let mut unknown = add("wm1");
    unknown.tenant = TenantId::parse("nobody").expect("valid");
    assert!(matches!(
        recorder.record(&unknown).await,
        Err(FactsError::Poison(_))
    ));
    assert!(fakes.counters().is_empty());
}

fn add_by(staff: &str, external: &str, code: &str) -> InboxMessage {
    add_at(staff, external, code, "1700000000")
}

/// An add made at `created` (WeCom's CreateTime, seconds).
fn add_at(staff: &str, external: &str, code: &str, created: &str) -> InboxMessage {
    stored(&[
        ("ToUserName", CORP),
        ("CreateTime", created),
        ("MsgType", "event"),
        ("Event", "change_external_contact"),
        ("ChangeType", "add_external_contact"),
        ("UserID", staff),
        ("ExternalUserID", external),
        ("State", code),
    ])
}

fn contact(fields: &[(&str, &str)]) -> InboxMessage {
    let mut all = vec![
        ("ToUserName", CORP),
        ("CreateTime", "1700000000"),
        ("MsgType", "event"),
        ("Event", "change_contact"),
    ];
    all.extend_from_slice(fields);
    stored(&all)
}

fn on_codes(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("code-{i}")).collect()
}

fn reasons_with(fakes: &Fakes, cause: Cause) -> Vec<RefreshReason> {
    fakes
        .queues
        .sends()
        .into_iter()
        .filter(|r| r.cause == cause)
        .collect()
}

#[tokio::test]
async fn reaching_the_company_cap_emits_one_reason_per_code_of_the_staff_member_and_one_notification(
) {
    let fakes = Fakes::with_company_cap(Some(2));
    fakes.seat("zhangsan", &on_codes(150)).await;
    let recorder = fakes.recorder();
    recorder
        .record(&add_by("zhangsan", "wm1", "code-1"))
        .await
        .expect("recorded");
    assert!(
        reasons_with(&fakes, Cause::LimitReached).is_empty(),
        "one add is below the cap"
    );

    let second = recorder
        .record(&add_by("zhangsan", "wm2", "code-7"))
        .await
        .expect("recorded");

    let FactOutcome::Add { crossings, .. } = second else {
        panic!("an add: {second:?}")
    };
    assert_eq!(
        crossings,
        [Crossing {
            limit: Limit::CompanyDaily,
            reasons: 150,
            notified: true
        }]
    );
    let fan_out = reasons_with(&fakes, Cause::LimitReached);
    let distinct: BTreeSet<&str> = fan_out.iter().map(|r| r.code.as_str()).collect();
    assert_eq!((fan_out.len(), distinct.len()), (150, 150));
    let notifications = fakes.queues.published();
    assert_eq!(notifications.len(), 1);
    assert_eq!(
        (notifications[0].limit, notifications[0].codes),
        (Limit::CompanyDaily, 150)
    );
}

#[tokio::test]
async fn a_later_add_past_a_claimed_limit_neither_notifies_nor_fans_out_again() {
    let fakes = Fakes::with_company_cap(Some(1));
    fakes.seat("zhangsan", &on_codes(3)).await;
    let recorder = fakes.recorder();
    recorder
        .record(&add_by("zhangsan", "wm1", "code-1"))
        .await
        .expect("recorded");
    let later = recorder
        .record(&add_by("zhangsan", "wm2", "code-2"))
        .await
        .expect("recorded");
    assert!(matches!(later, FactOutcome::Add { ref crossings, .. } if crossings.is_empty()));
    assert_eq!(fakes.queues.published().len(), 1);
    assert_eq!(reasons_with(&fakes, Cause::LimitReached).len(), 3);
}

#[tokio::test]
async fn a_redelivered_add_that_reached_a_limit_re_sends_its_reasons_but_notifies_once() {
    let fakes = Fakes::default();
    let switches = Switches {
        daily_limit: Some(1),
        ..Switches::default()
    };
    fakes.code("code-1", &["zhangsan"], &[], switches).await;
    let recorder = fakes.recorder();
    recorder
        .record(&add_by("zhangsan", "wm1", "code-1"))
        .await
        .expect("recorded");
    let again = recorder
        .record(&add_by("zhangsan", "wm1", "code-1"))
        .await
        .expect("recorded");
    assert!(matches!(
        again,
        FactOutcome::Add { ref crossings, .. }
            if crossings == &[Crossing { limit: Limit::CodeDaily, reasons: 1, notified: false }]
    ));
    let fan_out = reasons_with(&fakes, Cause::LimitReached);
    assert_eq!(fan_out.len(), 2, "re-sent, with the same dedupe id");
    assert_eq!(fan_out[0].deduplication_id(), fan_out[1].deduplication_id());
    assert_eq!(fakes.queues.published().len(), 1);
}

#[tokio::test]
async fn a_code_without_limits_never_claims_anything() {
    let fakes = Fakes::default();
    fakes.seat("zhangsan", &on_codes(2)).await;
    let recorder = fakes.recorder();
    for i in 0..5 {
        recorder
            .record(&add_by("zhangsan", &format!("wm{i}"), "code-1"))
            .await
            .expect("recorded");
    }
    assert!(fakes.store.limit_claims().is_empty());
    assert!(fakes.queues.published().is_empty());
}

#[tokio::test]
async fn a_deleted_user_is_resigned_and_every_code_they_sit_on_gets_a_reason() {
    let fakes = Fakes::default();
    fakes.seat("lisi", &on_codes(4)).await;
    let recorder = fakes.recorder();
    let recorded = recorder
        .record(&contact(&[
            ("ChangeType", "delete_user"),
            ("UserID", "lisi"),
        ]))
        .await
        .expect("recorded");
    assert!(matches!(
        recorded,
        FactOutcome::StaffChanged { codes: 4, .. }
    ));
    assert_eq!(
        fakes.store.stored_employment(&acme(), &staff("lisi")),
        Some((Employment::Resigned, 1_700_000_000_000))
    );
    assert_eq!(reasons_with(&fakes, Cause::StaffChanged).len(), 4);
}

#[tokio::test]
async fn a_new_user_id_re_keys_the_staff_member_before_the_rest_of_the_event_applies() {
    let fakes = Fakes::default();
    fakes.seat("lisi", &on_codes(2)).await;
    let recorder = fakes.recorder();
    recorder
        .record(&contact(&[
            ("ChangeType", "update_user"),
            ("UserID", "lisi"),
            ("NewUserID", "lisi001"),
            ("Status", "2"),
        ]))
        .await
        .expect("recorded");
    assert_eq!(fakes.store.renames(), [(staff("lisi"), staff("lisi001"))]);
    let employment = |id: &str| fakes.store.stored_employment(&acme(), &staff(id));
    assert_eq!(
        employment("lisi001").map(|e| e.0),
        Some(Employment::Disabled)
    );
    assert!(employment("lisi").is_none());
    assert_eq!(reasons_with(&fakes, Cause::StaffChanged).len(), 2);
}

#[tokio::test]
async fn a_department_change_reaches_the_codes_listing_the_departments_left_and_joined() {
    let fakes = Fakes::default();
    fakes.list("1", &["code-a"]).await;
    fakes.list("2", &["code-b"]).await;
    fakes.list("3", &["code-c"]).await;
    let recorder = fakes.recorder();
    recorder
        .record(&contact(&[
            ("ChangeType", "create_user"),
            ("UserID", "wangwu"),
            ("Department", "1,2"),
        ]))
        .await
        .expect("recorded");
    fakes.queues.clear_reasons();
    recorder
        .record(&contact(&[
            ("ChangeType", "update_user"),
            ("UserID", "wangwu"),
            ("Department", "2,3"),
        ]))
        .await
        .expect("recorded");
    let reached: BTreeSet<String> = reasons_with(&fakes, Cause::StaffChanged)
        .iter()
        .map(|r| r.code.to_string())
        .collect();
    // code-b lists department 2, which wangwu stays in: the staff member's own codes (through
    // their departments, as the table answers) are told too, so it is reached as well.
    assert_eq!(
        reached,
        BTreeSet::from([
            "code-a".to_owned(),
            "code-b".to_owned(),
            "code-c".to_owned()
        ])
    );
}

#[tokio::test]
async fn a_contact_event_naming_an_impossible_user_id_is_poison() {
    let fakes = Fakes::default();
    let recorder = fakes.recorder();
    let bad = contact(&[("ChangeType", "delete_user"), ("UserID", "has space")]);
    assert!(matches!(
        recorder.record(&bad).await,
        Err(FactsError::Poison(_))
    ));
    assert!(fakes.queues.sends().is_empty());
}

#[tokio::test]
async fn an_add_whose_state_names_a_code_that_does_not_exist_counts_nothing() {
    let fakes = Fakes::default();
    fakes.seat("zhangsan", &on_codes(1)).await;
    let recorder = fakes.recorder();
    // code-0 exists and lists zhangsan; code-9 was never created.
    let recorded = recorder
        .record(&add_by("zhangsan", "wm1", "code-9"))
        .await
        .expect("recorded");
    assert!(
        matches!(&recorded, FactOutcome::Ignored { kind } if kind.ends_with(":not_on_code")),
        "{recorded:?}"
    );
    assert!(fakes.counters().is_empty());
    assert!(
        fakes.queues.sends().is_empty(),
        "no reason for a code that is not there"
    );
    assert_eq!(
        fakes.store.ignored().len(),
        1,
        "acknowledged and counted as ignored"
    );
}

#[tokio::test]
async fn an_add_to_a_member_the_code_does_not_list_counts_nothing() {
    let fakes = Fakes::default();
    fakes.seat("lisi", &on_codes(1)).await;
    fakes.seat("zhangsan", &["other".to_owned()]).await;
    let recorder = fakes.recorder();
    // zhangsan's own link opened with code-0 as its channel: code-0 lists only lisi.
    let recorded = recorder
        .record(&add_by("zhangsan", "wm1", "code-0"))
        .await
        .expect("recorded");
    assert!(
        matches!(recorded, FactOutcome::Ignored { .. }),
        "{recorded:?}"
    );
    assert!(fakes.counters().is_empty());
    let listed = recorder
        .record(&add_by("lisi", "wm1", "code-0"))
        .await
        .expect("recorded");
    assert!(matches!(listed, FactOutcome::Add { .. }), "{listed:?}");
}

#[tokio::test]
async fn an_add_to_a_member_through_a_department_the_code_lists_counts() {
    let fakes = Fakes::default();
    fakes.list("7", &["code-d"]).await;
    let recorder = fakes.recorder();
    recorder
        .record(&contact(&[
            ("ChangeType", "create_user"),
            ("UserID", "wangwu"),
            ("Department", "7"),
        ]))
        .await
        .expect("recorded");
    let recorded = recorder
        .record(&add_by("wangwu", "wm1", "code-d"))
        .await
        .expect("recorded");
    assert!(matches!(recorded, FactOutcome::Add { .. }), "{recorded:?}");
    assert_eq!(fakes.counters().values().sum::<u32>(), 1);
}

#[tokio::test]
async fn a_customer_who_deletes_and_adds_again_the_same_day_counts_once() {
    let fakes = Fakes::default();
    let switches = Switches {
        add_limit: Some(2),
        daily_limit: Some(2),
        ..Switches::default()
    };
    fakes.code("code-1", &["zhangsan"], &[], switches).await;
    let recorder = fakes.recorder();
    // 06:13:20, 07:13:20 and 23:59:59 of 2023-11-15 in Shanghai: three adds by one WeChat
    // account (each re-add after a delete is a new event with its own CreateTime).
    for created in ["1700000000", "1700003600", "1700063999"] {
        recorder
            .record(&add_at("zhangsan", "wm1", "code-1", created))
            .await
            .expect("recorded");
    }
    assert_eq!(
        fakes.counters(),
        HashMap::from([("code-1/zhangsan/2023-11-15".to_owned(), 1)])
    );
    assert!(
        fakes.store.limit_claims().is_empty(),
        "one customer alone reaches no limit of 2"
    );
    // Another customer is another add.
    recorder
        .record(&add_at("zhangsan", "wm2", "code-1", "1700003600"))
        .await
        .expect("recorded");
    assert_eq!(fakes.counters().values().sum::<u32>(), 2);
}

#[tokio::test]
async fn a_customer_who_adds_again_on_another_day_counts_on_that_day() {
    let fakes = Fakes::default();
    fakes.seat("zhangsan", &on_codes(2)).await;
    let recorder = fakes.recorder();
    // 2023-11-15 and 2023-11-16 in Shanghai.
    for created in ["1700000000", "1700086400"] {
        recorder
            .record(&add_at("zhangsan", "wm1", "code-1", created))
            .await
            .expect("recorded");
    }
    assert_eq!(
        fakes.counters(),
        HashMap::from([
            ("code-1/zhangsan/2023-11-15".to_owned(), 1),
            ("code-1/zhangsan/2023-11-16".to_owned(), 1)
        ])
    );
}

/// `acme`'s keys rotated at 0 from (`TOKEN`, `KEY`) to new ones; the recorder's clock reads
/// 42 000, and the previous keys are kept for `kept_ms`.
fn rotated_recorder(fakes: &Fakes, kept_ms: u64) -> TestRecorder {
    let mut profile = fakes.store.stored_profile(&acme()).expect("stored");
    profile.previous_callback = Some(crate::tenants::PreviousCallbackKeys {
        callback_token: profile.callback_token.clone(),
        encoding_aes_key: profile.encoding_aes_key.clone(),
        replaced_at_ms: 0,
    });
    profile.callback_token = "newtoken".into();
    profile.encoding_aes_key = "N".repeat(43);
    fakes.store.insert_profile(&acme(), profile);
    fakes
        .recorder()
        .with_key_rotation(crate::tenants::KeyRotation {
            edge_ms: 0,
            stored_ms: kept_ms,
        })
}

#[tokio::test]
async fn a_stored_add_signed_with_the_replaced_keys_is_counted_while_they_are_kept() {
    let fakes = Fakes::default();
    fakes.seat("zhangsan", &on_codes(2)).await;
    let recorder = rotated_recorder(&fakes, 42_001);
    let outcome = recorder.record(&add("wm1")).await.expect("recorded");
    assert!(
        matches!(
            outcome,
            FactOutcome::Add {
                outcome: CountOutcome::Counted { .. },
                ..
            }
        ),
        "{outcome:?}"
    );
    assert_eq!(fakes.counters().values().sum::<u32>(), 1);
}

#[tokio::test]
async fn a_stored_add_signed_with_the_replaced_keys_is_poison_once_they_are_no_longer_kept() {
    let fakes = Fakes::default();
    fakes.seat("zhangsan", &on_codes(2)).await;
    let recorder = rotated_recorder(&fakes, 42_000);
    assert!(matches!(
        recorder.record(&add("wm1")).await,
        Err(FactsError::Poison(reason)) if reason.starts_with("signature")
    ));
    assert!(fakes.counters().is_empty());
}
