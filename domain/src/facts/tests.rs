use super::*;
use crate::membership::{AddCounts, DepartmentId, Employment, Limit, Switches};
use crate::wecom::callback::write_flat_xml;
use crate::wecom::crypto::CallbackCrypto;
use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;

const TOKEN: &str = "tok123";
const KEY: &str = "jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C";
const CORP: &str = "wwcorp";

#[derive(Default)]
struct Fakes {
    claims: Mutex<HashMap<String, u64>>,
    counters: Mutex<HashMap<String, u32>>,
    ignored: Mutex<Vec<String>>,
    reasons: Mutex<Vec<RefreshReason>>,
    company_cap: Option<u32>,
    switches: HashMap<String, Switches>,
    /// staff -> codes it sits on
    seats: HashMap<String, Vec<String>>,
    /// department -> codes listing it
    listing: HashMap<String, Vec<String>>,
    /// claim id -> (owner, notified)
    limit_claims: Mutex<HashMap<String, (String, bool)>>,
    notifications: Mutex<Vec<StaffQuotaReached>>,
    employment: Mutex<HashMap<String, (Employment, u64)>>,
    renames: Mutex<Vec<(String, String)>>,
    departments: Mutex<HashMap<String, BTreeSet<DepartmentId>>>,
}

#[async_trait::async_trait]
impl QuotaLedger for &Fakes {
    async fn code_switches(
        &self,
        _: &TenantId,
        code: &CodeId,
    ) -> Result<Option<Switches>, StoreError> {
        Ok(Some(
            self.switches
                .get(code.as_str())
                .copied()
                .unwrap_or_default(),
        ))
    }
    async fn counts(
        &self,
        _: &TenantId,
        code: &CodeId,
        staff: &StaffId,
        day: &str,
    ) -> Result<AddCounts, StoreError> {
        let counters = self.counters.lock().expect("lock");
        let sum = |keep: &dyn Fn(&[&str]) -> bool| {
            counters
                .iter()
                .filter(|(k, _)| keep(&k.split('/').collect::<Vec<_>>()))
                .map(|(_, v)| *v)
                .sum()
        };
        Ok(AddCounts {
            on_code: sum(&|k| k == [code.as_str(), staff.as_str(), day]),
            all_codes: sum(&|k| k[1] == staff.as_str() && k[2] == day),
            on_code_total: sum(&|k| k[0] == code.as_str() && k[1] == staff.as_str()),
        })
    }
    async fn claim_limit(&self, claim: &LimitClaim) -> Result<ClaimOutcome, StoreError> {
        let mut claims = self.limit_claims.lock().expect("lock");
        match claims.get(&claim.id()) {
            Some((owner, notified)) if *owner == claim.owner => Ok(ClaimOutcome::Owned {
                notified: *notified,
            }),
            Some(_) => Ok(ClaimOutcome::TakenByAnother),
            None => {
                claims.insert(claim.id(), (claim.owner.clone(), false));
                Ok(ClaimOutcome::Owned { notified: false })
            }
        }
    }
    async fn mark_notified(&self, claim: &LimitClaim, _: usize) -> Result<(), StoreError> {
        if let Some(entry) = self.limit_claims.lock().expect("lock").get_mut(&claim.id()) {
            entry.1 = true;
        }
        Ok(())
    }
}

#[async_trait::async_trait]
impl QuotaNotifier for &Fakes {
    async fn publish(&self, event: &StaffQuotaReached) -> Result<(), StoreError> {
        self.notifications.lock().expect("lock").push(event.clone());
        Ok(())
    }
}

#[async_trait::async_trait]
impl StaffLedger for &Fakes {
    async fn set_employment(
        &self,
        _: &TenantId,
        staff: &StaffId,
        employment: Employment,
        at_ms: u64,
    ) -> Result<bool, StoreError> {
        let mut stored = self.employment.lock().expect("lock");
        if stored
            .get(staff.as_str())
            .is_some_and(|(_, at)| *at > at_ms)
        {
            return Ok(false);
        }
        stored.insert(staff.to_string(), (employment, at_ms));
        Ok(true)
    }
    async fn rename_staff(
        &self,
        _: &TenantId,
        from: &StaffId,
        to: &StaffId,
        _: u64,
    ) -> Result<Vec<CodeId>, StoreError> {
        self.renames
            .lock()
            .expect("lock")
            .push((from.to_string(), to.to_string()));
        Ok(codes(self.seats.get(from.as_str())))
    }
    async fn set_staff_departments(
        &self,
        _: &TenantId,
        staff: &StaffId,
        departments: &BTreeSet<DepartmentId>,
        _: u64,
    ) -> Result<Vec<DepartmentId>, StoreError> {
        let mut stored = self.departments.lock().expect("lock");
        let before = stored
            .insert(staff.to_string(), departments.clone())
            .unwrap_or_default();
        Ok(before.symmetric_difference(departments).cloned().collect())
    }
    async fn set_department_members(
        &self,
        _: &TenantId,
        _: &DepartmentId,
        _: &BTreeSet<StaffId>,
        _: u64,
    ) -> Result<Vec<StaffId>, StoreError> {
        Ok(Vec::new())
    }
    async fn codes_of_staff(
        &self,
        _: &TenantId,
        staff: &StaffId,
    ) -> Result<Vec<CodeId>, StoreError> {
        Ok(codes(self.seats.get(staff.as_str())))
    }
    async fn codes_listing_department(
        &self,
        _: &TenantId,
        department: &DepartmentId,
    ) -> Result<Vec<CodeId>, StoreError> {
        Ok(codes(self.listing.get(department.as_str())))
    }
}

fn codes(raw: Option<&Vec<String>>) -> Vec<CodeId> {
    raw.into_iter()
        .flatten()
        .map(|c| CodeId::parse(c).expect("valid"))
        .collect()
}

#[async_trait::async_trait]
impl TenantProfiles for &Fakes {
    async fn profile(&self, tenant: &TenantId) -> Result<Option<TenantProfile>, StoreError> {
        Ok((tenant.as_str() == "acme").then(|| TenantProfile {
            corp_id: CORP.into(),
            callback_token: TOKEN.into(),
            encoding_aes_key: KEY.into(),
            corp_secret: "s".into(),
            timezone: Default::default(),
            company_daily_cap: self.company_cap,
        }))
    }
}

#[async_trait::async_trait]
impl AddLedger for &Fakes {
    async fn count_add(&self, add: &AddFact, now_ms: u64) -> Result<CountOutcome, StoreError> {
        let mut claims = self.claims.lock().expect("lock");
        if let Some(at_ms) = claims.get(&add.business_key()) {
            return Ok(CountOutcome::AlreadyCounted { at_ms: *at_ms });
        }
        claims.insert(add.business_key(), now_ms);
        *self
            .counters
            .lock()
            .expect("lock")
            .entry(format!("{}/{}/{}", add.code, add.staff, add.day))
            .or_default() += 1;
        Ok(CountOutcome::Counted { at_ms: now_ms })
    }
    async fn record_ignored(&self, _: &TenantId, kind: &str) -> Result<(), StoreError> {
        self.ignored.lock().expect("lock").push(kind.to_owned());
        Ok(())
    }
}

#[async_trait::async_trait]
impl ReasonQueue for &Fakes {
    async fn send(&self, reason: &RefreshReason) -> Result<(), StoreError> {
        self.reasons.lock().expect("lock").push(reason.clone());
        Ok(())
    }
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
    let recorder = FactRecorder::new(&fakes, &fakes, &fakes, &fakes, clock);
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
    assert_eq!(
        fakes.counters.lock().expect("lock").values().sum::<u32>(),
        1
    );
    let reasons = fakes.reasons.lock().expect("lock");
    assert_eq!(reasons.len(), 2);
    assert_eq!(reasons[0].deduplication_id(), reasons[1].deduplication_id());
    assert_eq!(reasons[0].code.as_str(), "code-1");
    assert_eq!(reasons[0].fact_at_ms, 42_000);
}

#[tokio::test]
async fn the_add_counts_toward_the_tenants_day_of_the_add() {
    let fakes = Fakes::default();
    let recorder = FactRecorder::new(&fakes, &fakes, &fakes, &fakes, clock);
    recorder.record(&add("wm1")).await.expect("recorded");
    // 1700000000 is 2023-11-15 06:13:20 in Shanghai.
    assert!(fakes
        .counters
        .lock()
        .expect("lock")
        .contains_key("code-1/zhangsan/2023-11-15"));
}

#[tokio::test]
async fn events_qrsync_does_not_act_on_are_acknowledged_and_counted() {
    let fakes = Fakes::default();
    let recorder = FactRecorder::new(&fakes, &fakes, &fakes, &fakes, clock);
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
    assert_eq!(fakes.ignored.lock().expect("lock").len(), 2);
    assert!(fakes.reasons.lock().expect("lock").is_empty());
}

#[tokio::test]
async fn a_stored_message_that_fails_verification_is_poison() {
    let fakes = Fakes::default();
    let recorder = FactRecorder::new(&fakes, &fakes, &fakes, &fakes, clock);
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
    assert!(fakes.counters.lock().expect("lock").is_empty());
}

fn add_by(staff: &str, external: &str, code: &str) -> InboxMessage {
    stored(&[
        ("ToUserName", CORP),
        ("CreateTime", "1700000000"),
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
        .reasons
        .lock()
        .expect("lock")
        .iter()
        .filter(|r| r.cause == cause)
        .cloned()
        .collect()
}

#[tokio::test]
async fn reaching_the_company_cap_emits_one_reason_per_code_of_the_staff_member_and_one_notification(
) {
    let fakes = Fakes {
        company_cap: Some(2),
        seats: HashMap::from([("zhangsan".to_owned(), on_codes(150))]),
        ..Fakes::default()
    };
    let recorder = FactRecorder::new(&fakes, &fakes, &fakes, &fakes, clock);
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
    let notifications = fakes.notifications.lock().expect("lock");
    assert_eq!(notifications.len(), 1);
    assert_eq!(
        (notifications[0].limit, notifications[0].codes),
        (Limit::CompanyDaily, 150)
    );
}

#[tokio::test]
async fn a_later_add_past_a_claimed_limit_neither_notifies_nor_fans_out_again() {
    let fakes = Fakes {
        company_cap: Some(1),
        seats: HashMap::from([("zhangsan".to_owned(), on_codes(3))]),
        ..Fakes::default()
    };
    let recorder = FactRecorder::new(&fakes, &fakes, &fakes, &fakes, clock);
    recorder
        .record(&add_by("zhangsan", "wm1", "code-1"))
        .await
        .expect("recorded");
    let later = recorder
        .record(&add_by("zhangsan", "wm2", "code-2"))
        .await
        .expect("recorded");
    assert!(matches!(later, FactOutcome::Add { ref crossings, .. } if crossings.is_empty()));
    assert_eq!(fakes.notifications.lock().expect("lock").len(), 1);
    assert_eq!(reasons_with(&fakes, Cause::LimitReached).len(), 3);
}

#[tokio::test]
async fn a_redelivered_add_that_reached_a_limit_re_sends_its_reasons_but_notifies_once() {
    let fakes = Fakes {
        switches: HashMap::from([(
            "code-1".to_owned(),
            Switches {
                daily_limit: Some(1),
                ..Switches::default()
            },
        )]),
        ..Fakes::default()
    };
    let recorder = FactRecorder::new(&fakes, &fakes, &fakes, &fakes, clock);
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
    assert_eq!(fakes.notifications.lock().expect("lock").len(), 1);
}

#[tokio::test]
async fn a_code_without_limits_never_claims_anything() {
    let fakes = Fakes::default();
    let recorder = FactRecorder::new(&fakes, &fakes, &fakes, &fakes, clock);
    for i in 0..5 {
        recorder
            .record(&add_by("zhangsan", &format!("wm{i}"), "code-1"))
            .await
            .expect("recorded");
    }
    assert!(fakes.limit_claims.lock().expect("lock").is_empty());
    assert!(fakes.notifications.lock().expect("lock").is_empty());
}

#[tokio::test]
async fn a_deleted_user_is_resigned_and_every_code_they_sit_on_gets_a_reason() {
    let fakes = Fakes {
        seats: HashMap::from([("lisi".to_owned(), on_codes(4))]),
        ..Fakes::default()
    };
    let recorder = FactRecorder::new(&fakes, &fakes, &fakes, &fakes, clock);
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
        fakes.employment.lock().expect("lock").get("lisi"),
        Some(&(Employment::Resigned, 1_700_000_000_000))
    );
    assert_eq!(reasons_with(&fakes, Cause::StaffChanged).len(), 4);
}

#[tokio::test]
async fn a_new_user_id_re_keys_the_staff_member_before_the_rest_of_the_event_applies() {
    let fakes = Fakes {
        seats: HashMap::from([("lisi".to_owned(), on_codes(2))]),
        ..Fakes::default()
    };
    let recorder = FactRecorder::new(&fakes, &fakes, &fakes, &fakes, clock);
    recorder
        .record(&contact(&[
            ("ChangeType", "update_user"),
            ("UserID", "lisi"),
            ("NewUserID", "lisi001"),
            ("Status", "2"),
        ]))
        .await
        .expect("recorded");
    assert_eq!(
        *fakes.renames.lock().expect("lock"),
        [("lisi".to_owned(), "lisi001".to_owned())]
    );
    let employment = fakes.employment.lock().expect("lock");
    assert_eq!(
        employment.get("lisi001").map(|e| e.0),
        Some(Employment::Disabled)
    );
    assert!(!employment.contains_key("lisi"));
    assert_eq!(reasons_with(&fakes, Cause::StaffChanged).len(), 2);
}

#[tokio::test]
async fn a_department_change_reaches_the_codes_listing_the_departments_left_and_joined() {
    let fakes = Fakes {
        listing: HashMap::from([
            ("1".to_owned(), vec!["code-a".to_owned()]),
            ("2".to_owned(), vec!["code-b".to_owned()]),
            ("3".to_owned(), vec!["code-c".to_owned()]),
        ]),
        ..Fakes::default()
    };
    let recorder = FactRecorder::new(&fakes, &fakes, &fakes, &fakes, clock);
    recorder
        .record(&contact(&[
            ("ChangeType", "create_user"),
            ("UserID", "wangwu"),
            ("Department", "1,2"),
        ]))
        .await
        .expect("recorded");
    fakes.reasons.lock().expect("lock").clear();
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
    assert_eq!(
        reached,
        BTreeSet::from(["code-a".to_owned(), "code-c".to_owned()])
    );
}

#[tokio::test]
async fn a_contact_event_naming_an_impossible_user_id_is_poison() {
    let fakes = Fakes::default();
    let recorder = FactRecorder::new(&fakes, &fakes, &fakes, &fakes, clock);
    let bad = contact(&[("ChangeType", "delete_user"), ("UserID", "has space")]);
    assert!(matches!(
        recorder.record(&bad).await,
        Err(FactsError::Poison(_))
    ));
    assert!(fakes.reasons.lock().expect("lock").is_empty());
}
