use super::*;
use crate::wecom::callback::write_flat_xml;
use crate::wecom::crypto::CallbackCrypto;
use std::collections::HashMap;
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
            company_daily_cap: None,
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
    let recorder = FactRecorder::new(&fakes, &fakes, &fakes, clock);
    let first = recorder.record(&add("wm1")).await.expect("recorded");
    let again = recorder.record(&add("wm1")).await.expect("recorded");
    assert!(matches!(
        first,
        Recorded::Add {
            outcome: CountOutcome::Counted { .. },
            ..
        }
    ));
    assert!(matches!(
        again,
        Recorded::Add {
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
    let recorder = FactRecorder::new(&fakes, &fakes, &fakes, clock);
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
    let recorder = FactRecorder::new(&fakes, &fakes, &fakes, clock);
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
        Ok(Recorded::Ignored { .. })
    ));
    assert!(matches!(
        recorder.record(&foreign).await,
        Ok(Recorded::Ignored { .. })
    ));
    assert_eq!(fakes.ignored.lock().expect("lock").len(), 2);
    assert!(fakes.reasons.lock().expect("lock").is_empty());
}

#[tokio::test]
async fn a_stored_message_that_fails_verification_is_poison() {
    let fakes = Fakes::default();
    let recorder = FactRecorder::new(&fakes, &fakes, &fakes, clock);
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
