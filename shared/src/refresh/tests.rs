use super::*;
use crate::membership::{Family, Switches};
use crate::tenants::Timezone;
use std::collections::{HashSet, VecDeque};
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
    marks: Mutex<Marks>,
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
struct Marks {
    gone: Vec<CodeId>,
    unusable: Vec<StaffId>,
    dirty: Vec<(CodeId, FailureClass)>,
}

#[async_trait::async_trait]
impl FailureMarks for FakeFacts {
    async fn mark_code_gone(&self, _: &TenantId, code: &CodeId, _: u64) -> Result<(), StoreError> {
        self.marks.lock().expect("lock").gone.push(code.clone());
        Ok(())
    }
    async fn mark_staff_unusable(
        &self,
        _: &TenantId,
        staff: &StaffId,
        _: i64,
        _: u64,
    ) -> Result<(), StoreError> {
        self.marks
            .lock()
            .expect("lock")
            .unusable
            .push(staff.clone());
        Ok(())
    }
    async fn mark_dirty(
        &self,
        _: &TenantId,
        code: &CodeId,
        class: FailureClass,
        _: u64,
    ) -> Result<(), StoreError> {
        self.marks
            .lock()
            .expect("lock")
            .dirty
            .push((code.clone(), class));
        Ok(())
    }
}

/// A budget of `left` calls (unlimited when `None`).
#[derive(Default)]
struct FakeBudget {
    left: Mutex<Option<u32>>,
}

#[async_trait::async_trait]
impl WeComBudget for FakeBudget {
    async fn spend(&self, _: &TenantId, _: &str, now_ms: u64) -> Result<Spend, StoreError> {
        let mut left = self.left.lock().expect("lock");
        match left.as_mut() {
            Some(0) => Ok(Spend::Exhausted {
                window: Window::Minute,
                retry_after_ms: reopens_in(Window::Minute, now_ms),
            }),
            Some(n) => {
                *n -= 1;
                Ok(Spend::Granted)
            }
            None => Ok(Spend::Granted),
        }
    }
}

#[derive(Default)]
struct FakeWeCom {
    /// Every list WeCom accepted, in order.
    lists: Mutex<Vec<Vec<String>>>,
    /// Every list sent, accepted or not.
    calls: Mutex<Vec<Vec<String>>>,
    fail: Mutex<bool>,
    /// Answers for the next calls, before anything else.
    scripted: Mutex<VecDeque<WeComError>>,
    /// Users WeCom refuses with 60111 (a list holding any of them is refused).
    refused: Mutex<HashSet<String>>,
}

#[async_trait::async_trait]
impl ContactWayPusher for FakeWeCom {
    async fn replace_users(
        &self,
        _: &CorpCredentials,
        _: &str,
        users: &[String],
    ) -> Result<(), WeComError> {
        self.calls.lock().expect("lock").push(users.to_vec());
        if let Some(error) = self.scripted.lock().expect("lock").pop_front() {
            return Err(error);
        }
        if *self.fail.lock().expect("lock") {
            return Err(WeComError::Transient {
                detail: "switched off".into(),
            });
        }
        if users
            .iter()
            .any(|u| self.refused.lock().expect("lock").contains(u))
        {
            return Err(WeComError::StaffUnusable {
                errcode: 60111,
                errmsg: "invalid userid".into(),
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

fn refresher(state: CodeSnapshot) -> Refresher<FakeFacts, FakeWeCom, FakeBudget> {
    let facts = FakeFacts::default();
    *facts.snapshot.lock().expect("lock") = Some(state);
    Refresher::new(facts, FakeWeCom::default(), FakeBudget::default(), clock)
}

fn wire(users: &[&str]) -> Vec<String> {
    users.iter().map(|u| (*u).to_owned()).collect()
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

#[tokio::test]
async fn without_budget_nothing_is_sent_and_the_reasons_wait_for_the_next_minute() {
    let refresher = refresher(snapshot(&[("a", true)]));
    *refresher.budget.left.lock().expect("lock") = Some(0);
    let outcome = refresher
        .refresh(&tenant(), &code(), &[1])
        .await
        .expect("not a failure");
    assert_eq!(
        outcome,
        Outcome::Throttled {
            retry_after_ms: 59_000
        }
    );
    assert!(refresher.pusher.calls.lock().expect("lock").is_empty());
    assert!(refresher.facts.pushes.lock().expect("lock").is_empty());
}

#[tokio::test]
async fn wecom_throttling_is_backpressure_not_a_failure() {
    for errcode in [45009, 45033] {
        let refresher = refresher(snapshot(&[("a", true)]));
        refresher
            .pusher
            .scripted
            .lock()
            .expect("lock")
            .push_back(WeComError::Throttled { errcode });
        let outcome = refresher
            .refresh(&tenant(), &code(), &[1])
            .await
            .expect("not a failure");
        assert_eq!(
            outcome,
            Outcome::Throttled {
                retry_after_ms: 59_000
            }
        );
        assert!(refresher.facts.pushes.lock().expect("lock").is_empty());
    }
}

#[tokio::test]
async fn a_code_wecom_no_longer_knows_is_marked_gone_and_dirty_and_nothing_is_recorded() {
    let refresher = refresher(snapshot(&[("a", true)]));
    refresher
        .pusher
        .scripted
        .lock()
        .expect("lock")
        .push_back(WeComError::CodeGone { errcode: 41044 });
    let outcome = refresher
        .refresh(&tenant(), &code(), &[1])
        .await
        .expect("handled");
    assert_eq!(outcome, Outcome::CodeGone);
    let marks = refresher.facts.marks.lock().expect("lock");
    assert_eq!(marks.gone, [code()]);
    assert_eq!(marks.dirty, [(code(), FailureClass::CodeGone)]);
    assert!(refresher.facts.pushes.lock().expect("lock").is_empty());
}

#[tokio::test]
async fn a_transient_failure_is_returned_for_the_handler_to_retry() {
    let refresher = refresher(snapshot(&[("a", true)]));
    *refresher.pusher.fail.lock().expect("lock") = true;
    let error = refresher
        .refresh(&tenant(), &code(), &[1])
        .await
        .expect_err("fails");
    assert!(matches!(error, RefreshError::WeCom(e) if e.class() == FailureClass::Transient));
}

#[tokio::test]
async fn a_refused_new_member_is_marked_unusable_and_the_others_pushed_in_the_same_refresh() {
    let mut state = snapshot(&[("a", true), ("b", true), ("x", true)]);
    state.code.created_with = vec![id("a"), id("b")];
    let refresher = refresher(state);
    refresher
        .pusher
        .refused
        .lock()
        .expect("lock")
        .insert("x".into());
    let outcome = refresher
        .refresh(&tenant(), &code(), &[1])
        .await
        .expect("handled");
    // The list WeCom holds did not change: a and b were accepted before.
    assert_eq!(outcome, Outcome::Pushed(vec![id("a"), id("b")]));
    assert_eq!(
        refresher.facts.marks.lock().expect("lock").unusable,
        [id("x")]
    );
    assert_eq!(
        *refresher.pusher.calls.lock().expect("lock"),
        [wire(&["a", "b", "x"]), wire(&["a", "b"])],
        "the list without the suspect proves it in one call"
    );
}

#[tokio::test]
async fn several_new_members_are_tried_one_at_a_time_and_only_the_refused_ones_marked() {
    let mut state = snapshot(&[("a", true), ("x", true), ("c", true), ("y", true)]);
    state.code.created_with = vec![id("a")];
    let refresher = refresher(state);
    refresher
        .pusher
        .refused
        .lock()
        .expect("lock")
        .extend(["x".to_owned(), "y".to_owned()]);
    let outcome = refresher
        .refresh(&tenant(), &code(), &[1])
        .await
        .expect("handled");
    assert_eq!(outcome, Outcome::Pushed(vec![id("a"), id("c")]));
    assert_eq!(
        refresher.facts.marks.lock().expect("lock").unusable,
        [id("x"), id("y")]
    );
    let last = refresher.facts.pushes.lock().expect("lock").last().cloned();
    assert_eq!(
        last.map(|p| p.users),
        Some(vec![id("a"), id("c")]),
        "every accepted probe is recorded"
    );
}

#[tokio::test]
async fn a_member_wecom_held_before_and_now_refuses_is_found_among_everyone() {
    let mut state = snapshot(&[("a", true), ("b", true)]);
    state.code.created_with = vec![id("a")];
    let refresher = refresher(state);
    // a left the corp: WeCom refuses any list with a, including the one it held.
    refresher
        .pusher
        .refused
        .lock()
        .expect("lock")
        .insert("a".into());
    let outcome = refresher
        .refresh(&tenant(), &code(), &[1])
        .await
        .expect("handled");
    assert_eq!(outcome, Outcome::Pushed(vec![id("b")]));
    assert_eq!(
        refresher.facts.marks.lock().expect("lock").unusable,
        [id("a")]
    );
}

#[tokio::test]
async fn probing_stops_when_the_budget_runs_out_and_what_was_found_is_kept() {
    let mut state = snapshot(&[("a", true), ("x", true)]);
    state.code.created_with = vec![id("a")];
    let refresher = refresher(state);
    refresher
        .pusher
        .refused
        .lock()
        .expect("lock")
        .insert("x".into());
    *refresher.budget.left.lock().expect("lock") = Some(1);
    let outcome = refresher
        .refresh(&tenant(), &code(), &[1])
        .await
        .expect("handled");
    assert!(matches!(outcome, Outcome::Throttled { .. }));
    assert_eq!(
        refresher.pusher.calls.lock().expect("lock").len(),
        1,
        "never beyond the budget"
    );
    assert!(refresher
        .facts
        .marks
        .lock()
        .expect("lock")
        .unusable
        .is_empty());
}
