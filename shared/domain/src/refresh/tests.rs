use super::*;
use crate::codes::StoredCode;
use crate::fakes::{FakeBudget, FakeWeCom, InMemoryQueues, InMemoryStore};
use crate::lanes::CodeAge;
use crate::lanes::{LanePolicy, LaneSwitch};
use crate::membership::{CodeConfig, StaffFacts};
use crate::membership::{Family, Switches};
use crate::tenants::TenantProfile;
use crate::tenants::Timezone;
use std::collections::HashMap;

fn id(raw: &str) -> StaffId {
    StaffId::parse(raw).expect("valid")
}

fn tenant() -> TenantId {
    TenantId::parse("acme").expect("valid")
}

fn code() -> CodeId {
    CodeId::parse("c1").expect("valid")
}

fn snapshot(online: &[(&str, bool)]) -> CodeSnapshot {
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
        dirty_since_ms: None,
        links: Default::default(),
        lease: Default::default(),
        age: Default::default(),
        tenant_paused: None,
    }
}

fn clock() -> u64 {
    1_000
}

const LEASE: LeaseTimes = LeaseTimes {
    duration_ms: 8_000,
    call_ms: 3_500,
};

fn refresher(state: CodeSnapshot) -> Refresher<InMemoryStore, FakeWeCom, FakeBudget> {
    with_lanes(state, LanePolicy::all_fast(), LEASE)
}

fn with_lanes(
    state: CodeSnapshot,
    lanes: LanePolicy,
    lease_times: LeaseTimes,
) -> Refresher<InMemoryStore, FakeWeCom, FakeBudget> {
    let facts = InMemoryStore::default();
    facts.load_snapshot(&tenant(), &code(), &state);
    Refresher::new(
        facts,
        FakeWeCom::default(),
        FakeBudget::default(),
        clock,
        lanes,
        lease_times,
    )
}

type TestRefresher = Refresher<InMemoryStore, FakeWeCom, FakeBudget>;

async fn on_lane(
    refresher: &TestRefresher,
    lane: Lane,
    resync: bool,
    fact_at_ms: &[u64],
) -> Result<Outcome, RefreshError> {
    before(refresher, lane, resync, fact_at_ms, u64::MAX).await
}

async fn before(
    refresher: &TestRefresher,
    lane: Lane,
    resync: bool,
    fact_at_ms: &[u64],
    deadline_ms: u64,
) -> Result<Outcome, RefreshError> {
    let (tenant, code) = (tenant(), code());
    refresher
        .refresh(RefreshRequest {
            tenant: &tenant,
            code: &code,
            fact_at_ms,
            lane,
            resync,
            deadline_ms,
        })
        .await
}

async fn fast(refresher: &TestRefresher, fact_at_ms: &[u64]) -> Result<Outcome, RefreshError> {
    on_lane(refresher, Lane::Fast, false, fact_at_ms).await
}

/// WeCom refuses these users on any contact way from now on.
fn refuse(refresher: &TestRefresher, users: &[&str]) {
    refresher.pusher.refuse(users);
}

fn wire(users: &[&str]) -> Vec<String> {
    users.iter().map(|u| (*u).to_owned()).collect()
}

#[tokio::test]
async fn a_changed_list_is_pushed_then_recorded_and_an_unchanged_one_makes_no_call() {
    let refresher = refresher(snapshot(&[("a", true), ("b", false)]));
    let first = fast(&refresher, &[900, 950]).await.expect("refreshed");
    let second = fast(&refresher, &[990]).await.expect("refreshed");
    assert_eq!(first, Outcome::Pushed(vec![id("a")]));
    assert_eq!(second, Outcome::Unchanged);
    assert_eq!(refresher.pusher.lists(), [vec!["a".to_owned()]]);
    let pushes = refresher.facts.pushes();
    assert_eq!(pushes.len(), 1);
    assert_eq!(pushes[0].fact_at_ms, [900, 950]);
    let tally = refresher.facts.tally();
    assert_eq!((tally.reasons, tally.pushes, tally.unchanged), (3, 1, 1));
}

#[tokio::test]
async fn when_wecom_fails_nothing_is_recorded_so_the_retry_pushes_again() {
    let refresher = refresher(snapshot(&[("a", true)]));
    refresher.pusher.fail_pushes(true);
    assert!(fast(&refresher, &[1]).await.is_err());
    assert!(refresher.facts.pushes().is_empty());
    refresher.pusher.fail_pushes(false);
    assert_eq!(
        fast(&refresher, &[1]).await.expect("ok"),
        Outcome::Pushed(vec![id("a")])
    );
}

#[tokio::test]
async fn a_crash_between_push_and_record_converges_on_the_next_reason_with_the_same_list() {
    let refresher = refresher(snapshot(&[("a", true), ("b", true)]));
    refresher.facts.fail_records(true);
    assert!(fast(&refresher, &[1]).await.is_err());
    refresher.facts.fail_records(false);
    fast(&refresher, &[2]).await.expect("ok");
    let lists = refresher.pusher.lists();
    assert_eq!(lists.len(), 2, "the unrecorded push is repeated");
    assert_eq!(
        lists[0], lists[1],
        "with the same list: nothing visible changes"
    );
    assert_eq!(
        fast(&refresher, &[3]).await.expect("ok"),
        Outcome::Unchanged
    );
}

#[tokio::test]
async fn a_starved_code_is_recorded_once_and_nothing_is_pushed() {
    let refresher = refresher(snapshot(&[("a", false)]));
    for _ in 0..2 {
        assert_eq!(fast(&refresher, &[1]).await.expect("ok"), Outcome::Starved);
        refresher.facts.set_pushed(
            &tenant(),
            &code(),
            PushedList {
                users: vec![],
                pushed_at_ms: 0,
                starved: true,
                rotation: None,
            },
        );
    }
    assert!(refresher.pusher.lists().is_empty());
    assert_eq!(refresher.facts.starved(), 1);
}

#[tokio::test]
async fn a_code_without_a_contact_way_is_left_to_its_creation() {
    let mut state = snapshot(&[("a", true)]);
    state.code.config_id = None;
    let refresher = refresher(state);
    assert_eq!(
        fast(&refresher, &[1]).await.expect("ok"),
        Outcome::NotCreated
    );
    assert!(refresher.pusher.lists().is_empty());
}

#[tokio::test]
async fn a_code_created_with_its_current_list_is_not_pushed_again() {
    let mut state = snapshot(&[("a", true), ("b", false)]);
    state.code.created_with = vec![id("a")];
    let refresher = refresher(state);
    assert_eq!(
        fast(&refresher, &[1]).await.expect("ok"),
        Outcome::Unchanged
    );
    assert!(refresher.pusher.lists().is_empty());
}

#[tokio::test]
async fn without_budget_nothing_is_sent_and_the_reasons_wait_for_the_next_minute() {
    let refresher = refresher(snapshot(&[("a", true)]));
    refresher.budget.set_left(Some(0));
    let outcome = fast(&refresher, &[1]).await.expect("not a failure");
    assert_eq!(
        outcome,
        Outcome::PutOff {
            cause: PutOffCause::Budget,
            retry_after_ms: 59_000
        }
    );
    assert!(refresher.pusher.calls().is_empty());
    assert!(refresher.facts.pushes().is_empty());
}

#[tokio::test]
async fn wecom_throttling_is_backpressure_not_a_failure() {
    for errcode in [45009, 45033] {
        let refresher = refresher(snapshot(&[("a", true)]));
        refresher.pusher.script(WeComError::Throttled { errcode });
        let outcome = fast(&refresher, &[1]).await.expect("not a failure");
        assert_eq!(
            outcome,
            Outcome::PutOff {
                cause: PutOffCause::Throttled,
                retry_after_ms: 59_000
            }
        );
        assert!(refresher.facts.pushes().is_empty());
    }
}

#[tokio::test]
async fn a_code_wecom_no_longer_knows_is_marked_gone_and_dirty_and_nothing_is_recorded() {
    let refresher = refresher(snapshot(&[("a", true)]));
    refresher
        .pusher
        .script(WeComError::CodeGone { errcode: 41044 });
    let outcome = fast(&refresher, &[1]).await.expect("handled");
    assert_eq!(outcome, Outcome::CodeGone);
    let marks = refresher.facts.marks();
    assert_eq!(marks.gone, [code()]);
    assert_eq!(
        marks.dirty,
        [(code(), DirtyWhy::RefreshFailed(FailureClass::CodeGone))]
    );
    assert!(refresher.facts.pushes().is_empty());
}

#[tokio::test]
async fn a_transient_failure_is_returned_for_the_handler_to_retry() {
    let refresher = refresher(snapshot(&[("a", true)]));
    refresher.pusher.fail_pushes(true);
    let error = fast(&refresher, &[1]).await.expect_err("fails");
    assert!(matches!(error, RefreshError::WeCom(e) if e.class() == FailureClass::Transient));
}

#[tokio::test]
async fn a_refused_new_member_is_marked_unusable_and_the_others_pushed_in_the_same_refresh() {
    let mut state = snapshot(&[("a", true), ("b", true), ("x", true)]);
    state.code.created_with = vec![id("a"), id("b")];
    let refresher = refresher(state);
    refuse(&refresher, &["x"]);
    let outcome = fast(&refresher, &[1]).await.expect("handled");
    // The list WeCom holds did not change: a and b were accepted before.
    assert_eq!(outcome, Outcome::Pushed(vec![id("a"), id("b")]));
    assert_eq!(refresher.facts.marks().unusable, [id("x")]);
    assert_eq!(
        refresher.pusher.calls(),
        [wire(&["a", "b", "x"]), wire(&["a", "b"])],
        "the list without the suspect proves it in one call"
    );
}

#[tokio::test]
async fn several_new_members_are_tried_one_at_a_time_and_only_the_refused_ones_marked() {
    let mut state = snapshot(&[("a", true), ("x", true), ("c", true), ("y", true)]);
    state.code.created_with = vec![id("a")];
    let refresher = refresher(state);
    refuse(&refresher, &["x", "y"]);
    let outcome = fast(&refresher, &[1]).await.expect("handled");
    assert_eq!(outcome, Outcome::Pushed(vec![id("a"), id("c")]));
    assert_eq!(refresher.facts.marks().unusable, [id("x"), id("y")]);
    let last = refresher.facts.pushes().last().cloned();
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
    refuse(&refresher, &["a"]);
    let outcome = fast(&refresher, &[1]).await.expect("handled");
    assert_eq!(outcome, Outcome::Pushed(vec![id("b")]));
    assert_eq!(refresher.facts.marks().unusable, [id("a")]);
}

#[tokio::test]
async fn probing_stops_when_the_budget_runs_out_and_what_was_found_is_kept() {
    let mut state = snapshot(&[("a", true), ("x", true)]);
    state.code.created_with = vec![id("a")];
    let refresher = refresher(state);
    refuse(&refresher, &["x"]);
    refresher.budget.set_left(Some(1));
    let outcome = fast(&refresher, &[1]).await.expect("handled");
    assert!(matches!(
        outcome,
        Outcome::PutOff {
            cause: PutOffCause::Budget,
            ..
        }
    ));
    assert_eq!(refresher.pusher.calls().len(), 1, "never beyond the budget");
    assert!(refresher.facts.marks().unusable.is_empty());
}

fn slow_after_an_hour() -> LanePolicy {
    LanePolicy {
        switch: LaneSwitch::Auto,
        quiet_after_ms: 3_600_000,
        fast_tenants: Default::default(),
        slow_interval_ms: 60_000,
    }
}

/// Quiet after 0.5 s, so a code untouched since 0 is quiet when the clock reads 1 s.
fn quiet_after_half_a_second() -> LanePolicy {
    LanePolicy {
        quiet_after_ms: 500,
        ..slow_after_an_hour()
    }
}

#[tokio::test]
async fn a_quiet_code_on_the_fast_lane_is_pushed_there_once_its_slow_interval_is_over() {
    // The clock reads 1_000: untouched for 1 s, quiet after 0.5 s; never pushed.
    let quiet = with_lanes(snapshot(&[("a", true)]), quiet_after_half_a_second(), LEASE);
    assert_eq!(
        fast(&quiet, &[1]).await.expect("ok"),
        Outcome::Pushed(vec![id("a")]),
        "no hop through the slow queue: the interval is all the slow lane asks"
    );
    let pushes = quiet.facts.pushes();
    assert_eq!(pushes.len(), 1);
    assert_eq!(
        pushes[0].lane,
        Lane::Slow,
        "recorded as the slow lane's push"
    );
    // Untouched for 1 s is not quiet for an hour: the push is the fast lane's.
    let recent = with_lanes(snapshot(&[("a", true)]), slow_after_an_hour(), LEASE);
    assert_eq!(
        fast(&recent, &[1]).await.expect("ok"),
        Outcome::Pushed(vec![id("a")])
    );
    assert_eq!(recent.facts.pushes()[0].lane, Lane::Fast);
}

/// `a` and `b` online; WeCom holds `[a]`, pushed at 0 (the clock reads 1 s).
fn a_and_b_online_wecom_holding_a_pushed_at_zero() -> CodeSnapshot {
    let mut state = snapshot(&[("a", true), ("b", true)]);
    state.last_pushed = Some(PushedList {
        users: vec![id("a")],
        pushed_at_ms: 0,
        starved: false,
        rotation: None,
    });
    state
}

#[tokio::test]
async fn a_quiet_code_on_the_fast_lane_pushed_within_its_interval_is_put_off_without_a_call() {
    let state = a_and_b_online_wecom_holding_a_pushed_at_zero();
    let quiet = with_lanes(state, quiet_after_half_a_second(), LEASE);
    assert_eq!(
        fast(&quiet, &[1]).await.expect("ok"),
        Outcome::PutOff {
            cause: PutOffCause::SlowInterval,
            retry_after_ms: 59_000
        }
    );
    assert!(quiet.pusher.calls().is_empty());
    // An edit makes it recent: the same reason is pushed at once.
    quiet.facts.set_age(
        &tenant(),
        &code(),
        CodeAge {
            created_at_ms: 0,
            updated_at_ms: 900,
        },
    );
    assert_eq!(
        fast(&quiet, &[1]).await.expect("ok"),
        Outcome::Pushed(vec![id("a"), id("b")])
    );
}

#[tokio::test]
async fn the_all_switch_sheds_a_fast_lane_code_to_the_slow_queue_without_a_read_lease_or_call() {
    let shed = with_lanes(
        snapshot(&[("a", true)]),
        LanePolicy {
            switch: LaneSwitch::AllSlow,
            ..slow_after_an_hour()
        },
        LEASE,
    );
    assert_eq!(fast(&shed, &[1]).await.expect("ok"), Outcome::ToSlowLane);
    assert!(shed.facts.code_lease(&tenant(), &code()).is_none());
    assert_eq!(shed.facts.snapshots_read().len(), 0);
    assert!(shed.pusher.calls().is_empty());
    // On the slow queue itself it is refreshed.
    assert_eq!(
        on_lane(&shed, Lane::Slow, false, &[1]).await.expect("ok"),
        Outcome::Pushed(vec![id("a")])
    );
}

#[tokio::test]
async fn the_slow_lane_pushes_a_code_at_most_once_per_interval_and_requeues_the_rest() {
    let state = a_and_b_online_wecom_holding_a_pushed_at_zero();
    let refresher = with_lanes(state, slow_after_an_hour(), LEASE);
    let outcome = on_lane(&refresher, Lane::Slow, false, &[1])
        .await
        .expect("ok");
    assert_eq!(
        outcome,
        Outcome::PutOff {
            cause: PutOffCause::SlowInterval,
            retry_after_ms: 59_000
        },
        "pushed at 0, the clock at 1 s: 59 s left of the 60 s interval"
    );
    assert!(refresher.pusher.calls().is_empty());
    assert!(
        refresher.facts.code_lease(&tenant(), &code()).is_none(),
        "the lease is given back"
    );
    // With nothing to push, the interval does not matter.
    let mut b = refresher
        .facts
        .stored_staff(&tenant(), &id("b"))
        .expect("b");
    b.online = false;
    refresher.facts.insert_staff(&tenant(), &id("b"), b);
    assert_eq!(
        on_lane(&refresher, Lane::Slow, false, &[2])
            .await
            .expect("ok"),
        Outcome::Unchanged
    );
    let tally = refresher.facts.tally();
    assert_eq!(tally.slow_interval_waits, 1);
}

#[tokio::test]
async fn a_code_whose_lease_another_writer_holds_is_requeued_after_one_read_without_calling() {
    let refresher = refresher(snapshot(&[("a", true)]));
    refresher.facts.set_code_lease(
        &tenant(),
        &code(),
        Some(Lease {
            holder: "the slow lane".into(),
            expires_at_ms: 5_000,
        }),
    );
    assert_eq!(
        fast(&refresher, &[1]).await.expect("ok"),
        Outcome::PutOff {
            cause: PutOffCause::LeaseBusy,
            retry_after_ms: 4_000
        }
    );
    // Read first (a free lease with nothing to write would have ended there), then refused.
    assert_eq!(refresher.facts.snapshots_read().len(), 1);
    assert!(refresher.pusher.calls().is_empty());
    assert_eq!(
        refresher
            .facts
            .code_lease(&tenant(), &code())
            .as_ref()
            .map(|l| l.holder.as_str()),
        Some("the slow lane"),
        "another writer's lease is not released"
    );
}

#[tokio::test]
async fn an_unchanged_code_whose_lease_is_free_is_done_without_taking_the_lease() {
    let mut state = snapshot(&[("a", true)]);
    state.last_pushed = Some(crate::codes::PushedList {
        users: vec![id("a")],
        pushed_at_ms: 0,
        starved: false,
        rotation: None,
    });
    let refresher = refresher(state);

    assert_eq!(
        fast(&refresher, &[1]).await.expect("ok"),
        Outcome::Unchanged
    );

    assert_eq!(refresher.facts.lease_acquisitions(&tenant(), &code()), 0);
    assert!(refresher.pusher.calls().is_empty());
    assert_eq!(refresher.facts.tally().unchanged, 1);
}

#[tokio::test]
async fn a_push_gives_the_lease_back_with_its_record() {
    let refresher = refresher(snapshot(&[("a", true), ("b", true)]));

    assert!(matches!(
        fast(&refresher, &[1]).await.expect("ok"),
        Outcome::Pushed(_)
    ));

    assert_eq!(refresher.facts.lease_acquisitions(&tenant(), &code()), 1);
    assert_eq!(refresher.facts.code_lease(&tenant(), &code()), None);
}

#[tokio::test]
async fn after_a_budget_refusal_the_tenants_other_codes_are_put_off_unread_until_the_window_reopens(
) {
    let refresher = refresher(snapshot(&[("a", true), ("b", true)]));
    refresher.budget.set_left(Some(0));

    let first = fast(&refresher, &[1]).await.expect("ok");
    let Outcome::PutOff {
        cause: PutOffCause::Budget,
        retry_after_ms,
    } = first
    else {
        panic!("expected a budget put-off, got {first:?}");
    };
    let reads = refresher.facts.snapshots_read().len();

    let again = fast(&refresher, &[1]).await.expect("ok");
    assert!(
        matches!(again, Outcome::PutOff { cause: PutOffCause::Budget, retry_after_ms: r } if r <= retry_after_ms),
        "{again:?}"
    );
    assert_eq!(
        refresher.facts.snapshots_read().len(),
        reads,
        "not read again"
    );
    let (requeues, _) = refresher.facts.requeues();
    assert_eq!(requeues.budget, 2, "the platform's minute counts both");
}

#[tokio::test]
async fn a_batchs_put_offs_are_one_write_of_the_platforms_minute_whatever_their_tenants() {
    let refresher = refresher(snapshot(&[("a", true), ("b", true)]));
    refresher.budget.set_left(Some(0));
    let (other, code) = (TenantId::parse("t2").expect("valid"), code());
    refresher
        .facts
        .load_snapshot(&other, &code, &snapshot(&[("a", true)]));
    let tenant = tenant();
    let asks = [&tenant, &other].map(|tenant| RefreshRequest {
        tenant,
        code: &code,
        fact_at_ms: &[1],
        lane: Lane::Fast,
        resync: false,
        deadline_ms: u64::MAX,
    });
    let tallies = Tallies::default();
    let outcomes = refresher.refresh_batch(&asks, &tallies).await;
    assert!(outcomes.iter().all(|o| matches!(
        o,
        Ok(Outcome::PutOff {
            cause: PutOffCause::Budget,
            ..
        })
    )));
    refresher.record_tallies(tallies).await;
    assert_eq!(refresher.facts.tally_writes(), 2, "one per tenant");
    assert_eq!(
        refresher.facts.requeues(),
        (
            Requeues {
                budget: 2,
                throttled: 0
            },
            1
        ),
        "both put-offs, in one write"
    );
}

#[tokio::test]
async fn a_writer_whose_lease_was_taken_over_has_its_record_refused_and_the_next_refresh_pushes_again(
) {
    let refresher = refresher(snapshot(&[("a", true)]));
    refresher.facts.set_leases_taken_over(true);
    assert_eq!(
        fast(&refresher, &[1]).await.expect("ok"),
        Outcome::PutOff {
            cause: PutOffCause::LeaseLost,
            retry_after_ms: 0
        }
    );
    assert!(
        refresher.facts.pushes().is_empty(),
        "the stale writer's record is refused"
    );
    // The next writer's record says WeCom has ["a"] (the other writer recorded it), but
    // WeCom may hold the stale writer's list: a resync pushes even an unchanged list.
    refresher.facts.set_leases_taken_over(false);
    refresher.facts.set_code_lease(&tenant(), &code(), None);
    refresher.facts.set_pushed(
        &tenant(),
        &code(),
        PushedList {
            users: vec![id("a")],
            pushed_at_ms: 0,
            starved: false,
            rotation: None,
        },
    );
    assert_eq!(
        on_lane(&refresher, Lane::Fast, true, &[2])
            .await
            .expect("ok"),
        Outcome::Pushed(vec![id("a")])
    );
    assert_eq!(
        fast(&refresher, &[3]).await.expect("ok"),
        Outcome::Unchanged
    );
    assert_eq!(refresher.pusher.calls().len(), 2);
}

#[tokio::test]
async fn no_wecom_call_starts_when_too_little_of_the_lease_is_left_to_cover_it() {
    let short = LeaseTimes {
        duration_ms: 3_000,
        call_ms: 3_500,
    };
    let refresher = with_lanes(snapshot(&[("a", true)]), LanePolicy::all_fast(), short);
    assert_eq!(
        fast(&refresher, &[1]).await.expect("ok"),
        Outcome::PutOff {
            cause: PutOffCause::LeaseBusy,
            retry_after_ms: 0
        }
    );
    assert!(refresher.pusher.calls().is_empty());
}

#[tokio::test]
async fn a_code_is_not_started_when_the_invocation_ends_before_one_call_could() {
    let refresher = refresher(snapshot(&[("a", true)]));
    // The fixed clock reads 1,000 ms; a call may take 3,500 ms.
    let outcome = before(&refresher, Lane::Fast, false, &[1], 4_000).await;
    assert_eq!(
        outcome.expect("ok"),
        Outcome::PutOff {
            cause: PutOffCause::OutOfTime,
            retry_after_ms: 0
        }
    );
    assert!(refresher.pusher.calls().is_empty());
    assert_eq!(refresher.facts.snapshots_read().len(), 0);
    assert!(refresher.facts.code_lease(&tenant(), &code()).is_none());
    let pushed = before(&refresher, Lane::Fast, false, &[1], 4_501).await;
    assert_eq!(pushed.expect("ok"), Outcome::Pushed(vec![id("a")]));
}

#[tokio::test]
async fn a_staff_member_wecom_refuses_is_recomputed_away_from_their_other_codes_too() {
    let mut state = snapshot(&[("a", true), ("x", true)]);
    state.code.created_with = vec![id("a")];
    let fan_outs = InMemoryQueues::default().expanding_through(InMemoryStore::default());
    let refresher = refresher(state).with_fan_outs(fan_outs.clone());
    refuse(&refresher, &["x"]);
    fast(&refresher, &[1]).await.expect("handled");
    let sent: Vec<(Vec<crate::reasons::Source>, Cause)> = fan_outs
        .fan_outs()
        .into_iter()
        .map(|f| (f.sources, f.cause))
        .collect();
    assert_eq!(
        sent,
        [(
            vec![crate::reasons::Source::Staff { staff: id("x") }],
            Cause::StaffChanged
        )],
        "one fan-out to every code of the refused staff member"
    );
}

fn recorded(users: &[&str]) -> PushedList {
    PushedList {
        users: users.iter().map(|u| id(u)).collect(),
        pushed_at_ms: 1,
        starved: false,
        rotation: None,
    }
}

#[tokio::test]
async fn a_dirty_code_is_pushed_even_when_its_record_says_wecom_has_the_list_and_its_mark_is_cleared(
) {
    let mut state = snapshot(&[("a", true)]);
    state.last_pushed = Some(recorded(&["a"]));
    let refresher = refresher(state);
    refresher
        .facts
        .mark_dirty(&tenant(), &code(), DirtyWhy::Drift, clock() - 1)
        .await
        .expect("marked");
    let outcome = fast(&refresher, &[1]).await.expect("handled");
    assert_eq!(outcome, Outcome::Pushed(vec![id("a")]));
    assert_eq!(refresher.facts.dirty_mark(&tenant(), &code()), None);
    let day = crate::tenants::tenant_day(clock(), Timezone::default());
    assert_eq!(
        refresher.facts.repaired(&tenant(), &day),
        1,
        "a drift repaired"
    );
}

#[tokio::test]
async fn a_mark_made_after_the_refresh_began_outlives_it() {
    let mut state = snapshot(&[("a", true)]);
    state.last_pushed = Some(recorded(&["a"]));
    let refresher = refresher(state);
    let why = DirtyWhy::RefreshFailed(FailureClass::Transient);
    refresher
        .facts
        .mark_dirty(&tenant(), &code(), why, clock())
        .await
        .expect("marked");
    let outcome = fast(&refresher, &[1]).await.expect("handled");
    assert_eq!(outcome, Outcome::Pushed(vec![id("a")]), "still pushed");
    assert_eq!(
        refresher.facts.dirty_mark(&tenant(), &code()),
        Some((clock(), why))
    );
}

#[tokio::test]
async fn a_clean_code_whose_record_matches_makes_no_call() {
    let mut state = snapshot(&[("a", true)]);
    state.last_pushed = Some(recorded(&["a"]));
    let refresher = refresher(state);
    let outcome = fast(&refresher, &[1]).await.expect("handled");
    assert_eq!(outcome, Outcome::Unchanged);
    assert!(refresher.pusher.calls().is_empty());
}

fn sequenced(online: &[(&str, bool)]) -> CodeSnapshot {
    let mut state = snapshot(online);
    state.code.config.family = Family::Sequenced;
    state.code.config.switches.round_limit = Some(2);
    state
}

fn rotation_links(refresher: &TestRefresher) -> Vec<(String, u32, Option<String>)> {
    refresher
        .store()
        .pushes()
        .last()
        .and_then(|p| p.rotation.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|slot| (slot.staff.to_string(), slot.takes, slot.link))
        .collect()
}

#[tokio::test]
async fn a_rotating_codes_record_carries_each_members_link_created_once_per_member() {
    let refresher = refresher(sequenced(&[("a", true), ("b", true)]));
    assert_eq!(
        fast(&refresher, &[1]).await.expect("refreshed"),
        Outcome::Pushed(vec![id("a"), id("b")])
    );
    assert_eq!(
        rotation_links(&refresher),
        [
            (
                "a".into(),
                2,
                Some("https://work.weixin.qq.com/ca/link-1".into())
            ),
            (
                "b".into(),
                2,
                Some("https://work.weixin.qq.com/ca/link-2".into())
            ),
        ]
    );
    // b goes offline: the next record names only a, with the link kept, and none is created.
    let mut offline = sequenced(&[("a", true), ("b", false)]);
    offline.last_pushed = refresher.store().pushes().last().map(|p| PushedList {
        users: p.users.clone(),
        pushed_at_ms: p.pushed_at_ms,
        starved: false,
        rotation: p.rotation.clone(),
    });
    refresher
        .store()
        .load_snapshot(&tenant(), &code(), &offline);
    fast(&refresher, &[2]).await.expect("refreshed");
    assert_eq!(
        rotation_links(&refresher),
        [(
            "a".into(),
            2,
            Some("https://work.weixin.qq.com/ca/link-1".into())
        )]
    );
    assert_eq!(refresher.pusher.links().len(), 2);
}

#[tokio::test]
async fn a_member_whose_link_cannot_be_created_is_left_out_of_the_rotation_and_the_code_marked_dirty(
) {
    let refresher = refresher(sequenced(&[("a", true)]));
    refresher.pusher.fail_links(Some(WeComError::Transient {
        detail: "down".into(),
    }));
    assert_eq!(
        fast(&refresher, &[1]).await.expect("refreshed"),
        Outcome::Pushed(vec![id("a")])
    );
    assert_eq!(rotation_links(&refresher), []);
    assert_eq!(
        refresher.store().marks().dirty,
        [(code(), DirtyWhy::RefreshFailed(FailureClass::Transient))]
    );
}

#[tokio::test]
async fn a_rotating_code_edited_to_native_with_the_same_list_loses_its_rotation() {
    let refresher = refresher(sequenced(&[("a", true)]));
    fast(&refresher, &[1]).await.expect("refreshed");
    let pushed = refresher
        .store()
        .stored_pushed(&tenant(), &code())
        .expect("a record");
    assert!(
        pushed.rotation.is_some(),
        "a sequenced code's record has a rotation"
    );
    // Edited to native: WeCom's list stays the same, so nothing is pushed, but the landing page
    // must stop routing the code.
    let mut native = snapshot(&[("a", true)]);
    native.last_pushed = Some(pushed);
    refresher.store().load_snapshot(&tenant(), &code(), &native);
    let outcome = fast(&refresher, &[2]).await.expect("refreshed");
    assert_eq!(outcome, Outcome::Unchanged);
    let after = refresher
        .store()
        .stored_pushed(&tenant(), &code())
        .expect("a record");
    assert_eq!(after.rotation, None);
    assert_eq!(after.users, vec![id("a")]);
}

#[tokio::test]
async fn a_push_refused_for_the_callers_address_pauses_the_tenant_once_and_then_calls_nothing() {
    let refresher = refresher(snapshot(&[("a", true)]));
    refresher.pusher.script(WeComError::UntrustedIp);
    let outcome = fast(&refresher, &[1]).await.expect("a pause is no error");
    assert_eq!(outcome, Outcome::Paused);
    let pause = refresher
        .facts
        .pause_of(&tenant())
        .await
        .expect("store")
        .expect("paused");
    assert_eq!(pause.class, FailureClass::UntrustedIp);
    assert_eq!(pause.errcode, Some(60020));
    assert_eq!(pause.address, crate::budget::SHARED_ADDRESS);
    assert_eq!(pause.probe_config_id, "cfg1");
    assert_eq!(pause.since_ms, clock());
    let calls = refresher.pusher.calls().len();
    assert_eq!(fast(&refresher, &[2]).await.expect("ok"), Outcome::Paused);
    assert_eq!(
        refresher.pusher.calls().len(),
        calls,
        "a paused tenant's refresh calls nothing"
    );
    assert!(refresher.facts.pushes().is_empty());
    assert_eq!(
        consumer::next_step(&Ok(Outcome::Paused), 0, false),
        consumer::NextStep::Done,
        "its reasons are dropped: the resume recomputes every code"
    );
}

#[tokio::test]
async fn a_secret_that_no_longer_works_and_a_missing_permission_pause_the_tenant_too() {
    for (error, class) in [
        (WeComError::Token { errcode: 40001 }, FailureClass::Token),
        (WeComError::Forbidden, FailureClass::Forbidden),
    ] {
        let refresher = refresher(snapshot(&[("a", true)]));
        refresher.pusher.script(error);
        assert_eq!(fast(&refresher, &[1]).await.expect("ok"), Outcome::Paused);
        let pause = refresher.facts.pause_of(&tenant()).await.expect("store");
        assert_eq!(pause.map(|p| p.class), Some(class));
    }
}

#[tokio::test]
async fn a_second_refusal_while_paused_keeps_the_first_pause_and_raises_no_second_alert() {
    let refresher = refresher(snapshot(&[("a", true)]));
    let first = TenantPause::new(FailureClass::UntrustedIp, Some(60020), "shared", "cfg0", 10);
    assert!(
        crate::tenants::pause_tenant(&refresher.facts, &tenant(), &first)
            .await
            .expect("store")
    );
    let again = TenantPause::new(FailureClass::Token, Some(40001), "shared", "cfg1", 20);
    assert!(
        !crate::tenants::pause_tenant(&refresher.facts, &tenant(), &again)
            .await
            .expect("store")
    );
    let kept = refresher.facts.pause_of(&tenant()).await.expect("store");
    assert_eq!(kept, Some(first));
}
