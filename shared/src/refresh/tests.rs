use super::*;
use crate::membership::{Family, Switches};
use crate::tenants::Timezone;
use std::sync::Mutex;

fn id(raw: &str) -> StaffId {
    StaffId::parse(raw).expect("valid")
}

fn tenant() -> TenantId {
    TenantId::parse("acme").expect("valid")
}

fn code() -> CodeId {
    CodeId::parse("c1").expect("valid")
}

#[derive(Default)]
struct FakeFacts {
    snapshot: Mutex<Option<CodeSnapshot>>,
    pushes: Mutex<Vec<PushRecord>>,
    fail_record: Mutex<bool>,
    starved: Mutex<u32>,
    tally: Mutex<Tally>,
}

#[async_trait::async_trait]
impl CodeFacts for FakeFacts {
    async fn snapshot(
        &self,
        _: &TenantId,
        _: &CodeId,
        _: u64,
    ) -> Result<Option<CodeSnapshot>, StoreError> {
        Ok(self.snapshot.lock().expect("lock").clone())
    }
    async fn record_push(
        &self,
        _: &TenantId,
        _: &CodeId,
        push: &PushRecord,
    ) -> Result<(), StoreError> {
        if *self.fail_record.lock().expect("lock") {
            return Err(StoreError::new("table", "switched off"));
        }
        self.pushes.lock().expect("lock").push(push.clone());
        if let Some(snapshot) = self.snapshot.lock().expect("lock").as_mut() {
            snapshot.last_pushed = Some(PushedList {
                users: push.users.clone(),
                pushed_at_ms: push.pushed_at_ms,
                starved: false,
                rotation: None,
            });
        }
        Ok(())
    }
    async fn record_starved(&self, _: &TenantId, _: &CodeId, _: u64) -> Result<(), StoreError> {
        *self.starved.lock().expect("lock") += 1;
        Ok(())
    }
    async fn record_tally(&self, _: &TenantId, _: &str, tally: &Tally) -> Result<(), StoreError> {
        let mut total = self.tally.lock().expect("lock");
        total.reasons += tally.reasons;
        total.pushes += tally.pushes;
        total.unchanged += tally.unchanged;
        Ok(())
    }
}

#[derive(Default)]
struct FakeWeCom {
    lists: Mutex<Vec<Vec<String>>>,
    fail: Mutex<bool>,
}

#[async_trait::async_trait]
impl ContactWayPusher for FakeWeCom {
    async fn replace_users(
        &self,
        _: &CorpCredentials,
        _: &str,
        users: &[String],
    ) -> Result<(), WeComError> {
        if *self.fail.lock().expect("lock") {
            return Err(WeComError::Transient {
                detail: "switched off".into(),
            });
        }
        self.lists.lock().expect("lock").push(users.to_vec());
        Ok(())
    }
}

fn snapshot(online: &[(&str, bool)]) -> CodeSnapshot {
    CodeSnapshot {
        profile: TenantProfile {
            corp_id: "corp".into(),
            callback_token: "t".into(),
            encoding_aes_key: "k".into(),
            corp_secret: "s".into(),
            timezone: Timezone::default(),
            company_daily_cap: None,
        },
        code: StoredCode {
            config: CodeConfig {
                family: Family::Native,
                members: online.iter().map(|(s, _)| id(s)).collect(),
                departments: vec![],
                fallback: vec![],
                switches: Switches {
                    offline_check: true,
                    ..Switches::default()
                },
            },
            config_id: Some("cfg1".into()),
            created_with: vec![],
        },
        staff: online
            .iter()
            .map(|(s, on)| {
                (
                    id(s),
                    StaffFacts {
                        online: *on,
                        ..StaffFacts::ACTIVE_ONLINE
                    },
                )
            })
            .collect(),
        adds: HashMap::new(),
        departments: HashMap::new(),
        now_ms: 0,
        last_pushed: None,
    }
}

fn clock() -> u64 {
    1_000
}

fn refresher(state: CodeSnapshot) -> Refresher<FakeFacts, FakeWeCom> {
    let facts = FakeFacts::default();
    *facts.snapshot.lock().expect("lock") = Some(state);
    Refresher::new(facts, FakeWeCom::default(), clock)
}

#[tokio::test]
async fn a_changed_list_is_pushed_then_recorded_and_an_unchanged_one_makes_no_call() {
    let refresher = refresher(snapshot(&[("a", true), ("b", false)]));
    let first = refresher
        .refresh(&tenant(), &code(), &[900, 950])
        .await
        .expect("refreshed");
    let second = refresher
        .refresh(&tenant(), &code(), &[990])
        .await
        .expect("refreshed");
    assert_eq!(first, Outcome::Pushed(vec![id("a")]));
    assert_eq!(second, Outcome::Unchanged);
    assert_eq!(
        *refresher.pusher.lists.lock().expect("lock"),
        [vec!["a".to_owned()]]
    );
    let pushes = refresher.facts.pushes.lock().expect("lock");
    assert_eq!(pushes.len(), 1);
    assert_eq!(pushes[0].fact_at_ms, [900, 950]);
    let tally = *refresher.facts.tally.lock().expect("lock");
    assert_eq!((tally.reasons, tally.pushes, tally.unchanged), (3, 1, 1));
}

#[tokio::test]
async fn when_wecom_fails_nothing_is_recorded_so_the_retry_pushes_again() {
    let refresher = refresher(snapshot(&[("a", true)]));
    *refresher.pusher.fail.lock().expect("lock") = true;
    assert!(refresher.refresh(&tenant(), &code(), &[1]).await.is_err());
    assert!(refresher.facts.pushes.lock().expect("lock").is_empty());
    *refresher.pusher.fail.lock().expect("lock") = false;
    assert_eq!(
        refresher
            .refresh(&tenant(), &code(), &[1])
            .await
            .expect("ok"),
        Outcome::Pushed(vec![id("a")])
    );
}

#[tokio::test]
async fn a_crash_between_push_and_record_converges_on_the_next_reason_with_the_same_list() {
    let refresher = refresher(snapshot(&[("a", true), ("b", true)]));
    *refresher.facts.fail_record.lock().expect("lock") = true;
    assert!(refresher.refresh(&tenant(), &code(), &[1]).await.is_err());
    *refresher.facts.fail_record.lock().expect("lock") = false;
    refresher
        .refresh(&tenant(), &code(), &[2])
        .await
        .expect("ok");
    let lists = refresher.pusher.lists.lock().expect("lock").clone();
    assert_eq!(lists.len(), 2, "the unrecorded push is repeated");
    assert_eq!(
        lists[0], lists[1],
        "with the same list: nothing visible changes"
    );
    assert_eq!(
        refresher
            .refresh(&tenant(), &code(), &[3])
            .await
            .expect("ok"),
        Outcome::Unchanged
    );
}

#[tokio::test]
async fn a_starved_code_is_recorded_once_and_nothing_is_pushed() {
    let refresher = refresher(snapshot(&[("a", false)]));
    for _ in 0..2 {
        assert_eq!(
            refresher
                .refresh(&tenant(), &code(), &[1])
                .await
                .expect("ok"),
            Outcome::Starved
        );
        if let Some(s) = refresher.facts.snapshot.lock().expect("lock").as_mut() {
            s.last_pushed = Some(PushedList {
                users: vec![],
                pushed_at_ms: 0,
                starved: true,
                rotation: None,
            });
        }
    }
    assert!(refresher.pusher.lists.lock().expect("lock").is_empty());
    assert_eq!(*refresher.facts.starved.lock().expect("lock"), 1);
}

#[tokio::test]
async fn a_code_without_a_contact_way_is_left_to_its_creation() {
    let mut state = snapshot(&[("a", true)]);
    state.code.config_id = None;
    let refresher = refresher(state);
    assert_eq!(
        refresher
            .refresh(&tenant(), &code(), &[1])
            .await
            .expect("ok"),
        Outcome::NotCreated
    );
    assert!(refresher.pusher.lists.lock().expect("lock").is_empty());
}

#[tokio::test]
async fn a_code_created_with_its_current_list_is_not_pushed_again() {
    let mut state = snapshot(&[("a", true), ("b", false)]);
    state.code.created_with = vec![id("a")];
    let refresher = refresher(state);
    assert_eq!(
        refresher
            .refresh(&tenant(), &code(), &[1])
            .await
            .expect("ok"),
        Outcome::Unchanged
    );
    assert!(refresher.pusher.lists.lock().expect("lock").is_empty());
}
