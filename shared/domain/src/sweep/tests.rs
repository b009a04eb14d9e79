use super::*;
use crate::codes::{PushedList, StoredCode};
use crate::dirty::StaleSuspect;
use crate::fakes::{FakeBudget, FakeWeCom, InMemoryQueues, InMemoryStore};
use crate::ids::StaffId;
use crate::membership::{CodeConfig, Employment, Family, StaffFacts, Switches};
use crate::reasons::FanOut;
use crate::tenants::{tenant_day, TenantProfile, Timezone};
use crate::wecom::errors::WeComError;
use std::collections::HashMap;

struct Fakes;

impl SweepPorts for Fakes {
    type Store = InMemoryStore;
    type WeCom = FakeWeCom;
    type Budget = FakeBudget;
    type Reasons = InMemoryQueues;
    type FanOuts = InMemoryQueues;
    type Notifier = InMemoryQueues;
}

const NOW: u64 = 1_796_000_000_000;

fn clock() -> u64 {
    NOW
}

fn tenant() -> TenantId {
    TenantId::parse("acme").expect("valid")
}

fn code(n: usize) -> CodeId {
    CodeId::parse(&format!("c{n:02}")).expect("valid")
}

fn staff(raw: &str) -> StaffId {
    StaffId::parse(raw).expect("valid")
}

/// A code listing `members` (all online), recorded as pushed with that list.
fn snapshot(n: usize, members: &[&str]) -> CodeSnapshot {
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
                members: members.iter().map(|m| staff(m)).collect(),
                departments: vec![],
                fallback: vec![],
                switches: Switches::default(),
            },
            config_id: Some(format!("cfg-{n}")),
            created_with: vec![],
        },
        staff: members
            .iter()
            .map(|m| (staff(m), StaffFacts::ACTIVE_ONLINE))
            .collect(),
        adds: HashMap::new(),
        departments: HashMap::new(),
        now_ms: 0,
        last_pushed: Some(PushedList {
            users: members.iter().map(|m| staff(m)).collect(),
            pushed_at_ms: 1,
            starved: false,
            rotation: None,
        }),
        dirty_since_ms: None,
        links: Default::default(),
        lease: Default::default(),
        age: Default::default(),
        tenant_paused: None,
    }
}

struct World {
    sweep: Sweep<Fakes>,
}

impl World {
    /// A tenant of `codes` codes, each listing alice and bob, recorded and on WeCom alike.
    async fn with_codes(codes: usize) -> Self {
        let store = InMemoryStore::default();
        let wecom = FakeWeCom::default();
        let queues = InMemoryQueues::default();
        for n in 0..codes {
            store.load_snapshot(&tenant(), &code(n), &snapshot(n, &["alice", "bob"]));
            let wire = vec!["alice".to_owned(), "bob".to_owned()];
            wecom
                .replace_users(
                    &snapshot(n, &[]).credentials(&tenant()),
                    &format!("cfg-{n}"),
                    &wire,
                )
                .await
                .expect("pushed");
        }
        Self {
            sweep: Sweep {
                store,
                wecom,
                budget: FakeBudget::default(),
                reasons: queues.clone(),
                fan_outs: queues.clone(),
                notifier: queues,
                clock,
                settings: SweepSettings {
                    // Twelve reads per run.
                    reads_per_tenant_hour: 144,
                    ..SweepSettings::DEFAULT
                },
            },
        }
    }

    async fn run(&self) -> SweepReport {
        self.sweep
            .run("run-1", Duration::from_secs(60))
            .await
            .expect("ran")
    }

    fn resynced(&self) -> Vec<String> {
        let reasons = self.sweep.reasons.reasons();
        assert!(reasons.iter().all(|r| r.cause == Cause::Resync));
        reasons.iter().map(|r| r.code.to_string()).collect()
    }

    fn store(&self) -> &InMemoryStore {
        &self.sweep.store
    }
}

use crate::facts::{LimitClaim, QuotaLedger};
use crate::refresh::ContactWayPusher;

#[tokio::test]
async fn a_dirty_code_is_read_back_sent_a_resync_and_not_again_until_a_period_later() {
    let world = World::with_codes(1).await;
    let why = DirtyWhy::RefreshFailed(FailureClass::Transient);
    world
        .store()
        .mark_dirty(&tenant(), &code(0), why, NOW - 10)
        .await
        .expect("marked");

    let report = world.run().await;

    assert_eq!(report.dirty_due, 1);
    assert_eq!(report.resyncs_sent, 1);
    assert_eq!(world.resynced(), ["c00"]);
    let due = world.store().due_marks(NOW, 10).await.expect("read");
    assert!(due.is_empty(), "the next resync waits a period");
    let later = world
        .store()
        .due_marks(NOW + SweepSettings::DEFAULT.period_ms, 10)
        .await
        .expect("read");
    assert_eq!(later.len(), 1);
    assert_eq!(later[0].resyncs, 1);
    assert_eq!(
        world.store().dirty_mark(&tenant(), &code(0)),
        Some((NOW - 10, why)),
        "only a refresh clears the mark"
    );
}

#[tokio::test]
async fn a_fan_out_given_up_is_sent_again_from_its_first_code_and_not_again_until_a_period_later() {
    use crate::dirty::FanOutMarks;
    use crate::reasons::Source;
    let world = World::with_codes(1).await;
    let given_up = FanOut::new(
        tenant(),
        vec![Source::Staff {
            staff: staff("bob"),
        }],
        Cause::StaffChanged,
        NOW - 60_000,
        "staff:bob:offline".into(),
    )
    .resumed_after(&code(40));
    world
        .store()
        .mark_fan_out(&given_up, DirtyWhy::LastReceive, NOW - 10)
        .await
        .expect("marked");

    let report = world.run().await;

    assert_eq!((report.fan_outs_due, report.fan_outs_resent), (1, 1));
    let again = FanOut {
        sent_through: None,
        ..given_up.clone()
    };
    assert_eq!(
        world.sweep.fan_outs.fan_outs(),
        [again],
        "from its first code"
    );
    assert!(
        world.resynced().is_empty(),
        "its codes hear of it through the fan-out"
    );
    let mark = world
        .store()
        .fan_out_mark(&tenant(), "staff:bob:offline")
        .expect("only a completed expansion clears the mark");
    assert_eq!(mark.resends, 1);
    assert_eq!(mark.due_at_ms, NOW + SweepSettings::DEFAULT.period_ms);
    // The next run, before the wait is over, leaves it.
    let report = world.run().await;
    assert_eq!(report.fan_outs_resent, 0);
    assert_eq!(world.sweep.fan_outs.fan_outs().len(), 1);
}

#[tokio::test]
async fn a_mark_whose_code_was_deleted_is_dropped_without_a_resync() {
    let world = World::with_codes(1).await;
    let gone = code(7);
    world
        .store()
        .mark_dirty(&tenant(), &gone, DirtyWhy::LastReceive, NOW - 10)
        .await
        .expect("marked");

    let report = world.run().await;

    assert_eq!(report.marks_dropped, 1);
    assert!(world.resynced().is_empty());
    assert_eq!(world.store().dirty_mark(&tenant(), &gone), None);
}

#[tokio::test]
async fn a_list_changed_behind_our_back_is_found_by_the_sample_marked_and_resynced() {
    let world = World::with_codes(10).await;
    world
        .sweep
        .wecom
        .change_behind_our_back("cfg-3", &["mallory"]);

    let report = world.run().await;

    assert_eq!(report.read_back, 10, "every code fits the run's sample");
    assert_eq!(report.differing, 1);
    assert_eq!(report.repairs_started, 1);
    assert_eq!(world.resynced(), ["c03"]);
    let (_, why) = world
        .store()
        .dirty_mark(&tenant(), &code(3))
        .expect("marked");
    assert_eq!(why, DirtyWhy::Drift);
    let day = tenant_day(NOW, Timezone::default());
    let view = drift_view(world.store(), &tenant(), &day)
        .await
        .expect("read");
    assert_eq!(
        (view.read, view.differing, view.still_differing),
        (10, 1, 1)
    );
    assert_eq!(view.guard, None);
}

#[tokio::test]
async fn a_partial_read_back_is_not_drift() {
    let world = World::with_codes(5).await;
    for n in 0..5 {
        world
            .sweep
            .wecom
            .answer_partially(&format!("cfg-{n}"), true);
    }

    let report = world.run().await;

    assert_eq!((report.read_failures, report.differing), (5, 0));
    assert_eq!(report.guards_tripped, 0, "a glitch is no reason to stop");
    assert!(world.resynced().is_empty());
    assert_eq!(world.store().guard(&tenant()).await.expect("read"), None);
    assert_eq!(world.store().dirty_mark(&tenant(), &code(0)), None);
}

#[tokio::test]
async fn a_department_added_in_wecoms_console_is_drift_and_its_code_resynced() {
    let world = World::with_codes(10).await;
    world.sweep.wecom.add_department_behind_our_back("cfg-4", 7);

    let report = world.run().await;

    assert_eq!((report.differing, report.repairs_started), (1, 1));
    assert_eq!(world.resynced(), ["c04"]);
    let (_, why) = world
        .store()
        .dirty_mark(&tenant(), &code(4))
        .expect("marked");
    assert_eq!(why, DirtyWhy::Drift);
}

/// The settle period a stale sighting waits before it is checked again.
const SETTLE_MS: u64 = SweepSettings::DEFAULT.stale_settle_ms;

/// A run of the world's sweep with another clock.
async fn run_at(world: &World, clock: Clock, owner: &str) -> SweepReport {
    Sweep::<Fakes> {
        clock,
        store: world.store().clone(),
        wecom: world.sweep.wecom.clone(),
        budget: FakeBudget::default(),
        reasons: world.sweep.reasons.clone(),
        fan_outs: world.sweep.fan_outs.clone(),
        notifier: world.sweep.notifier.clone(),
        settings: world.sweep.settings,
    }
    .run(owner, Duration::from_secs(60))
    .await
    .expect("ran")
}

/// Takes bob offline on code `n` in the facts, with the reason telling the code lost (or
/// still queued): the record and WeCom still list him.
fn bob_offline_unannounced(world: &World, n: usize) {
    let mut stale = snapshot(n, &["alice", "bob"]);
    stale.code.config.switches.offline_check = true;
    stale.staff.insert(
        staff("bob"),
        StaffFacts {
            online: false,
            ..StaffFacts::ACTIVE_ONLINE
        },
    );
    world.store().load_snapshot(&tenant(), &code(n), &stale);
}

#[tokio::test]
async fn a_record_the_facts_no_longer_recompute_to_is_a_stale_suspect_not_resynced_at_first_sight()
{
    let world = World::with_codes(2).await;
    bob_offline_unannounced(&world, 1);

    let report = world.run().await;

    assert!(world.resynced().is_empty(), "nothing pushed at first sight");
    assert_eq!((report.differing, report.stale_suspects), (1, 1));
    assert_eq!(report.guards_tripped, 0);
    let mark = world
        .store()
        .dirty_entry(&tenant(), &code(1))
        .expect("marked");
    assert_eq!(mark.why, Some(DirtyWhy::Stale));
    assert_eq!(
        mark.due_at_ms,
        NOW + SETTLE_MS,
        "due after the settle period"
    );
    assert_eq!(
        mark.suspect,
        Some(StaleSuspect {
            sample_read: 2,
            sample_drifted: 0
        }),
        "it carries its sample's figures"
    );
    // Within the settle period a run leaves it alone.
    let report = run_at(&world, || NOW + SETTLE_MS - 1, "run-2").await;
    assert_eq!(report.dirty_due, 0);
    assert!(world.resynced().is_empty());
}

#[tokio::test]
async fn a_queued_reason_that_refreshes_the_code_clears_the_suspect_and_the_sweep_pushes_nothing() {
    let world = World::with_codes(2).await;
    bob_offline_unannounced(&world, 1);
    world.run().await;

    // The queued reason arrives: its refresh began after the mark, pushed alice alone and
    // cleared the mark as every completed refresh does (`Refresher::clear_dirty`).
    let mut caught_up = snapshot(1, &["alice", "bob"]);
    caught_up.code.config.switches.offline_check = true;
    caught_up.staff.insert(
        staff("bob"),
        StaffFacts {
            online: false,
            ..StaffFacts::ACTIVE_ONLINE
        },
    );
    caught_up.last_pushed = Some(PushedList {
        users: vec![staff("alice")],
        pushed_at_ms: NOW + 1_000,
        starved: false,
        rotation: None,
    });
    world.store().load_snapshot(&tenant(), &code(1), &caught_up);
    world
        .sweep
        .wecom
        .replace_users(
            &caught_up.credentials(&tenant()),
            "cfg-1",
            &["alice".to_owned()],
        )
        .await
        .expect("pushed");
    let cleared = world
        .store()
        .clear_dirty(&tenant(), &code(1), NOW + 1_000)
        .await
        .expect("cleared");
    assert_eq!(cleared, Some(Some(DirtyWhy::Stale)));

    let report = run_at(&world, || NOW + SETTLE_MS, "run-2").await;

    assert_eq!((report.dirty_due, report.stale_confirmed), (0, 0));
    assert!(world.resynced().is_empty(), "the sweep pushes nothing");
}

#[tokio::test]
async fn a_suspect_that_caught_up_by_its_due_time_is_dropped_without_a_resync() {
    let world = World::with_codes(2).await;
    bob_offline_unannounced(&world, 1);
    world.run().await;
    // bob came back online before anything was pushed: the record matches the facts again.
    world
        .store()
        .load_snapshot(&tenant(), &code(1), &snapshot(1, &["alice", "bob"]));

    let report = run_at(&world, || NOW + SETTLE_MS, "run-2").await;

    assert_eq!((report.stale_settled, report.stale_confirmed), (1, 0));
    assert!(world.resynced().is_empty());
    assert_eq!(world.store().dirty_mark(&tenant(), &code(1)), None);
    let day = tenant_day(NOW, Timezone::default());
    let view = drift_view(world.store(), &tenant(), &day)
        .await
        .expect("read");
    assert_eq!(view.still_differing, 0, "what the sample counted is gone");
}

#[tokio::test]
async fn a_suspect_still_stale_after_the_settle_period_is_confirmed_and_resynced() {
    let world = World::with_codes(2).await;
    bob_offline_unannounced(&world, 1);
    world.run().await;

    let report = run_at(&world, || NOW + SETTLE_MS, "run-2").await;

    assert_eq!(report.stale_confirmed, 1);
    assert_eq!(
        report.guards_tripped, 0,
        "one of two is not a guard's share"
    );
    assert_eq!(world.resynced(), ["c01"]);
    let mark = world
        .store()
        .dirty_entry(&tenant(), &code(1))
        .expect("only its refresh clears the mark");
    assert_eq!(mark.suspect, None, "a plain mark now, resynced as one");
    assert_eq!(mark.resyncs, 1);
    let day = tenant_day(NOW + SETTLE_MS, Timezone::default());
    let view = drift_view(world.store(), &tenant(), &day)
        .await
        .expect("read");
    assert_eq!(view.stale_confirmed, 1);
}

#[tokio::test]
async fn most_of_a_tenants_sample_confirmed_stale_trips_the_guard_and_nothing_is_resynced_until_resume(
) {
    let world = World::with_codes(10).await;
    for n in 0..4 {
        bob_offline_unannounced(&world, n);
    }

    let first = world.run().await;
    assert_eq!((first.stale_suspects, first.guards_tripped), (4, 0));
    assert!(world.resynced().is_empty());

    let settled = run_at(&world, || NOW + SETTLE_MS, "run-2").await;

    assert_eq!(settled.stale_confirmed, 4);
    assert_eq!(settled.guards_tripped, 1);
    assert_eq!(settled.held_by_guard, 4);
    assert!(world.resynced().is_empty(), "no possibly wrong list pushed");
    let guard = world
        .store()
        .guard(&tenant())
        .await
        .expect("read")
        .expect("tripped");
    assert_eq!((guard.sampled, guard.differing), (10, 4));
    // Held while the guard stands...
    let held = run_at(
        &world,
        || NOW + SETTLE_MS + SweepSettings::DEFAULT.period_ms,
        "run-3",
    )
    .await;
    assert_eq!(held.held_by_guard, 4);
    assert!(world.resynced().is_empty());
    // ...and resynced, not counted again, once an operator resumes.
    assert!(world.store().resume(&tenant()).await.expect("resumed"));
    let resumed = run_at(
        &world,
        || NOW + SETTLE_MS + 2 * SweepSettings::DEFAULT.period_ms,
        "run-4",
    )
    .await;
    assert_eq!((resumed.resyncs_sent, resumed.guards_tripped), (4, 0));
    assert_eq!(world.resynced(), ["c00", "c01", "c02", "c03"]);
}

#[tokio::test]
async fn clean_codes_cost_no_wecom_call_beyond_the_sample() {
    let world = World::with_codes(30).await;

    let report = world.run().await;

    assert_eq!(report.read_back, 12, "the run's share of the hour's reads");
    assert_eq!(world.sweep.wecom.reads(), 12);
    assert_eq!(report.differing, 0);
    assert!(world.resynced().is_empty());
    // The next run reads on from where this one stopped, then wraps to the first codes.
    world.run().await;
    world.run().await;
    assert_eq!(
        world.store().sample_cursor(&tenant()).await.expect("read"),
        Some(code(5)),
        "36 reads over 30 codes"
    );
}

#[tokio::test]
async fn a_spent_read_budget_stops_the_sample_without_failing_the_run() {
    let world = World::with_codes(10).await;
    world.sweep.budget.set_left(Some(4));

    let report = world.run().await;

    assert_eq!(report.read_back, 4);
    assert_eq!(report.budget_refusals, 1);
    assert_eq!(
        world.store().sample_cursor(&tenant()).await.expect("read"),
        Some(code(3)),
        "the next sample starts after the last code read"
    );
}

#[tokio::test]
async fn drift_on_more_than_the_guards_share_stops_the_repair_until_an_operator_resumes_it() {
    let world = World::with_codes(10).await;
    for n in 0..4 {
        world
            .sweep
            .wecom
            .change_behind_our_back(&format!("cfg-{n}"), &["mallory"]);
    }

    let report = world.run().await;

    assert_eq!(report.guards_tripped, 1);
    assert_eq!(report.differing, 4);
    assert!(world.resynced().is_empty(), "no possibly wrong list pushed");
    let guard = world
        .store()
        .guard(&tenant())
        .await
        .expect("read")
        .expect("tripped");
    assert_eq!((guard.sampled, guard.differing), (10, 4));
    // The marks wait: a later run holds them while the guard is tripped...
    let later = || async {
        Sweep::<Fakes> {
            clock: || NOW + SweepSettings::DEFAULT.period_ms,
            store: world.store().clone(),
            wecom: world.sweep.wecom.clone(),
            budget: FakeBudget::default(),
            reasons: world.sweep.reasons.clone(),
            fan_outs: world.sweep.fan_outs.clone(),
            notifier: world.sweep.notifier.clone(),
            settings: world.sweep.settings,
        }
        .run("run-2", Duration::from_secs(60))
        .await
        .expect("ran")
    };
    let held = later().await;
    assert_eq!(held.held_by_guard, 4);
    assert!(world.resynced().is_empty());
    // ...and resyncs them once the operator resumes.
    assert!(world.store().resume(&tenant()).await.expect("resumed"));
    let resumed = Sweep::<Fakes> {
        clock: || NOW + 2 * SweepSettings::DEFAULT.period_ms,
        store: world.store().clone(),
        wecom: world.sweep.wecom.clone(),
        budget: FakeBudget::default(),
        reasons: world.sweep.reasons.clone(),
        fan_outs: world.sweep.fan_outs.clone(),
        notifier: world.sweep.notifier.clone(),
        settings: world.sweep.settings,
    }
    .run("run-3", Duration::from_secs(60))
    .await
    .expect("ran");
    assert_eq!(resumed.resyncs_sent, 4);
    assert_eq!(
        resumed.guards_tripped, 0,
        "known differences do not trip it again"
    );
    assert_eq!(world.resynced(), ["c00", "c01", "c02", "c03"]);
}

/// The guard's re-check, after it tripped at `NOW`.
const RECHECK_MS: u64 = SweepSettings::DEFAULT.guard_recheck_ms;

/// Four of ten codes changed behind our back trip the guard at `NOW`.
async fn guard_tripped_by_four_of_ten() -> World {
    let world = World::with_codes(10).await;
    for n in 0..4 {
        world
            .sweep
            .wecom
            .change_behind_our_back(&format!("cfg-{n}"), &["mallory"]);
    }
    let report = world.run().await;
    assert_eq!((report.guards_tripped, report.guards_confirmed), (1, 0));
    let guard = world
        .store()
        .guard(&tenant())
        .await
        .expect("read")
        .expect("tripped");
    assert_eq!(guard.codes, [code(0), code(1), code(2), code(3)]);
    assert_eq!(guard.recheck_at_ms, NOW + RECHECK_MS);
    assert_eq!(guard.confirmed_at_ms, None, "nobody asked to act yet");
    world
}

#[tokio::test]
async fn a_guard_tripped_by_a_glitch_lifts_itself_on_its_recheck_and_its_codes_are_resynced() {
    let world = guard_tripped_by_four_of_ten().await;
    // WeCom answers what we pushed again.
    for n in 0..4 {
        world
            .sweep
            .wecom
            .change_behind_our_back(&format!("cfg-{n}"), &["alice", "bob"]);
    }
    let before = run_at(&world, || NOW + RECHECK_MS - 1, "run-2").await;
    assert_eq!(before.guards_lifted, 0, "not before its time");

    let rechecked = run_at(&world, || NOW + RECHECK_MS, "run-3").await;

    assert_eq!(
        (rechecked.guards_lifted, rechecked.guards_confirmed),
        (1, 0)
    );
    assert_eq!(world.store().guard(&tenant()).await.expect("read"), None);
    let next = run_at(
        &world,
        || NOW + RECHECK_MS + SweepSettings::DEFAULT.period_ms,
        "run-4",
    )
    .await;
    assert_eq!(next.resyncs_sent, 4, "the held marks are resynced");
    assert_eq!(world.resynced(), ["c00", "c01", "c02", "c03"]);
}

#[tokio::test]
async fn a_guard_whose_codes_still_differ_on_its_recheck_is_confirmed_and_waits_for_an_operator() {
    let world = guard_tripped_by_four_of_ten().await;

    let rechecked = run_at(&world, || NOW + RECHECK_MS, "run-2").await;

    assert_eq!(
        (rechecked.guards_confirmed, rechecked.guards_lifted),
        (1, 0)
    );
    let guard = world
        .store()
        .guard(&tenant())
        .await
        .expect("read")
        .expect("still tripped");
    assert_eq!(guard.confirmed_at_ms, Some(NOW + RECHECK_MS));
    assert!(world.resynced().is_empty(), "no possibly wrong list pushed");
    let reads = world.sweep.wecom.reads();
    let later = run_at(&world, || NOW + 2 * RECHECK_MS, "run-3").await;
    assert_eq!(later.guards_confirmed, 0, "checked once");
    assert_eq!(world.sweep.wecom.reads(), reads, "nothing read again");
}

#[tokio::test]
async fn a_code_read_differing_again_counts_once_and_stops_differing_when_a_read_agrees() {
    let world = guard_tripped_by_four_of_ten().await;
    let day = tenant_day(NOW, Timezone::default());
    let view = || async {
        drift_view(world.store(), &tenant(), &day)
            .await
            .expect("read")
    };
    assert_eq!(
        (view().await.differing, view().await.still_differing),
        (4, 4)
    );
    // Resumed: the held marks are read back again (WeCom still differs) and resynced.
    assert!(world.store().resume(&tenant()).await.expect("resumed"));
    let resumed = run_at(&world, || NOW + SweepSettings::DEFAULT.period_ms, "run-2").await;
    assert_eq!(resumed.resyncs_sent, 4);
    let after = view().await;
    assert_eq!(
        (after.read, after.differing, after.still_differing),
        (20, 4, 4),
        "ten sampled, four read again, six sampled again: each differing code once"
    );
    // Their refreshes land: WeCom agrees, and the next reads of the marked codes say so.
    for n in 0..4 {
        world
            .sweep
            .wecom
            .change_behind_our_back(&format!("cfg-{n}"), &["alice", "bob"]);
    }
    let again = run_at(
        &world,
        || NOW + 3 * SweepSettings::DEFAULT.period_ms,
        "run-3",
    )
    .await;
    assert_eq!(again.dirty_due, 4, "the marks are read back again");
    let agreed = view().await;
    assert_eq!((agreed.differing, agreed.still_differing), (4, 0));
}

#[tokio::test]
async fn when_another_run_holds_the_lease_the_sweep_leaves_the_work_to_it() {
    let world = World::with_codes(3).await;
    world
        .store()
        .acquire("run-0", NOW, NOW + 60_000)
        .await
        .expect("taken");

    let report = world.run().await;

    assert!(report.held_elsewhere);
    assert_eq!(world.sweep.wecom.reads(), 0);
}

#[tokio::test]
async fn a_run_and_the_claims_it_takes_over_are_leased_until_its_deadline_and_the_grace_not_longer()
{
    let world = World::with_codes(1).await;
    let stale = claim("add-1", NOW - 1);
    world.store().claim_limit(&stale).await.expect("claimed");

    world.run().await;

    let taken = world
        .store()
        .limit_claims()
        .into_iter()
        .find(|c| c.id() == stale.id())
        .expect("the claim is kept, finished");
    assert_eq!(taken.owner, "sweep:run-1");
    assert_eq!(
        taken.lease_until_ms,
        NOW + 60_000 + SweepSettings::DEFAULT.lease_grace_ms,
        "the run's budget is 60 s"
    );
}

#[test]
fn the_guard_trips_on_more_than_its_share_of_a_large_enough_sample() {
    assert!(!guard_trips(10, 2, 20, 5), "exactly the share");
    assert!(guard_trips(10, 3, 20, 5));
    assert!(!guard_trips(4, 4, 20, 5), "too small a sample");
    assert_eq!(sample_size(60, 5 * 60_000), 5);
    assert_eq!(sample_size(1, 60_000), 1);
}

#[test]
fn a_recheck_counts_what_still_differs_against_the_trips_sample_and_a_trip_without_codes_stands() {
    let trip = GuardTrip {
        tripped_at_ms: NOW,
        sampled: 10,
        differing: 4,
        codes: vec![code(0), code(1), code(2), code(3)],
        recheck_at_ms: NOW + RECHECK_MS,
        confirmed_at_ms: None,
    };
    assert!(!trip.recheck_due(NOW + RECHECK_MS - 1));
    assert!(trip.recheck_due(NOW + RECHECK_MS));
    assert!(trip.still_trips(3, 20, 5), "3 of 10");
    assert!(
        !trip.still_trips(2, 20, 5),
        "2 of 10 is the share, not more"
    );
    let half_kept = GuardTrip {
        codes: vec![code(0), code(1)],
        ..trip
    };
    assert!(
        half_kept.still_trips(2, 20, 5),
        "2 of 2 kept stands for 4 of 10"
    );
    assert!(
        !half_kept.still_trips(1, 20, 5),
        "1 of 2 kept stands for 2 of 10"
    );
    let no_codes = GuardTrip {
        codes: Vec::new(),
        ..trip
    };
    assert!(
        no_codes.still_trips(0, 20, 5),
        "nothing to read again: it stands"
    );
    let confirmed = GuardTrip {
        confirmed_at_ms: Some(NOW + RECHECK_MS),
        ..trip
    };
    assert!(!confirmed.recheck_due(u64::MAX), "checked once");
}

fn claim(owner: &str, lease_until_ms: u64) -> LimitClaim {
    LimitClaim {
        tenant: tenant(),
        staff: staff("alice"),
        limit: crate::membership::Limit::CodeDaily,
        day: "2026-11-30".into(),
        code: Some(code(0)),
        owner: owner.into(),
        claimed_at_ms: lease_until_ms - crate::facts::OWNER_LEASE_MS,
        lease_until_ms,
    }
}

#[tokio::test]
async fn a_stale_unfinished_claim_is_taken_over_and_finished_once_and_a_live_one_is_left_alone() {
    let world = World::with_codes(1).await;
    let stale = claim("add-1", NOW - 1);
    let live = LimitClaim {
        staff: staff("bob"),
        ..claim("add-2", NOW + 60_000)
    };
    for c in [&stale, &live] {
        world.store().claim_limit(c).await.expect("claimed");
    }

    let report = world.run().await;

    assert_eq!(report.claims_finished, 1);
    let published = world.sweep.notifier.published();
    assert_eq!(published.len(), 1);
    assert_eq!(
        published[0].id,
        stale.id(),
        "the notification's id is the claim's"
    );
    let reasons = world.sweep.reasons.reasons();
    assert!(reasons
        .iter()
        .any(|r| r.cause == Cause::LimitReached && r.fact_key == stale.id()));
    let claims = world.store().limit_claims();
    assert!(claims
        .iter()
        .any(|c| c.id() == live.id() && c.owner == "add-2"));
    // The dead owner's late redelivery no longer owns it, and a second run finds nothing stale.
    let again = world.run().await;
    assert_eq!(again.claims_finished, 0);
    assert_eq!(
        world.store().claim_limit(&stale).await.expect("read"),
        crate::facts::ClaimOutcome::TakenByAnother
    );
}

/// A contact way WeCom made with `state` and `remark` (`None`: none).
async fn created_with(world: &World, state: &str, remark: Option<String>) -> String {
    use crate::admin::ContactWays;
    use crate::wecom::contact_way::{ContactWayKind, ContactWayScene, NewContactWay};
    let way = NewContactWay {
        kind: ContactWayKind::Multi,
        scene: ContactWayScene::QrCode,
        state: state.into(),
        users: vec!["alice".into()],
        remark,
        skip_verify: true,
    };
    world
        .sweep
        .wecom
        .create(&snapshot(0, &[]).credentials(&tenant()), &way)
        .await
        .expect("created")
        .config_id
}

/// The intent of a creation of `code` that started `ago_ms` before `NOW`.
fn intent_of(code: CodeId, ago_ms: u64) -> CreationIntent {
    CreationIntent {
        tenant: tenant(),
        code,
        started_at_ms: NOW - ago_ms,
    }
}

#[tokio::test]
async fn a_contact_way_made_for_a_code_but_never_recorded_is_deleted_and_the_recorded_one_kept() {
    let world = World::with_codes(2).await;
    let intent = intent_of(code(0), INTENT_GRACE_MS + 1);
    let retry = intent_of(code(0), INTENT_GRACE_MS);
    // A creation whose record never landed (cw-1), then the retry that was recorded (cw-2),
    // and another code's contact way (cw-3).
    let orphan = created_with(&world, "c00", Some(intent.marker())).await;
    let kept = created_with(&world, "c00", Some(retry.marker())).await;
    let other = created_with(&world, "c01", None).await;
    let mut recorded = snapshot(0, &["alice", "bob"]);
    recorded.code.config_id = Some(kept.clone());
    world.store().load_snapshot(&tenant(), &code(0), &recorded);
    world
        .store()
        .record_intent(&intent)
        .await
        .expect("recorded");

    let report = world.run().await;

    assert_eq!(report.orphans_deleted, 1);
    assert_eq!(world.sweep.wecom.deleted(), [orphan]);
    assert!(!world.sweep.wecom.deleted().contains(&kept));
    assert!(!world.sweep.wecom.deleted().contains(&other));
    assert!(world.store().creation_intents().is_empty());
}

#[tokio::test]
async fn a_contact_way_of_another_tool_with_the_codes_state_is_never_deleted() {
    let world = World::with_codes(1).await;
    let intent = intent_of(code(0), INTENT_GRACE_MS + 1);
    // The tenant's own tool uses "c00" as a state too, with or without a remark of its own.
    let theirs = created_with(&world, "c00", None).await;
    let also_theirs = created_with(&world, "c00", Some("campaign c00".into())).await;
    world
        .store()
        .record_intent(&intent)
        .await
        .expect("recorded");

    let report = world.run().await;

    assert_eq!(report.orphans_deleted, 0);
    assert!(
        world.sweep.wecom.deleted().is_empty(),
        "{theirs}, {also_theirs} kept"
    );
    assert!(
        world.store().creation_intents().is_empty(),
        "looked, nothing of ours"
    );
}

#[tokio::test]
async fn intents_the_sweep_cannot_settle_never_hold_up_newer_ones() {
    let world = World::with_codes(1).await;
    // A hundred and one older intents of a tenant whose contact ways cannot be listed.
    let stuck = TenantId::parse("stuck").expect("valid");
    let mut stuck_profile = snapshot(0, &["alice"]);
    stuck_profile.profile.corp_id = "corp-stuck".into();
    world
        .store()
        .load_snapshot(&stuck, &code(0), &stuck_profile);
    world.sweep.wecom.fail_listings_of(
        "corp-stuck",
        Some(WeComError::Transient {
            detail: "timeout".into(),
        }),
    );
    for n in 0..=100 {
        let old = CreationIntent {
            tenant: stuck.clone(),
            code: code(n),
            started_at_ms: NOW - 3_600_000 - 1_000,
        };
        world.store().record_intent(&old).await.expect("recorded");
    }
    let intent = intent_of(code(0), INTENT_GRACE_MS + 1);
    let orphan = created_with(&world, "c00", Some(intent.marker())).await;
    world
        .store()
        .record_intent(&intent)
        .await
        .expect("recorded");

    let report = world.run().await;

    assert_eq!(report.orphans_deleted, 1);
    assert_eq!(world.sweep.wecom.deleted(), [orphan]);
    let left = world.store().creation_intents();
    assert_eq!(left.len(), 101, "the stuck ones wait for WeCom");
    assert!(left.iter().all(|i| i.tenant == stuck));
}

#[tokio::test]
async fn a_creation_still_within_its_grace_is_left_to_its_request() {
    let world = World::with_codes(1).await;
    let intent = intent_of(code(0), 1_000);
    created_with(&world, "c00", Some(intent.marker())).await;
    world
        .store()
        .record_intent(&intent)
        .await
        .expect("recorded");

    let report = world.run().await;

    assert_eq!(report.orphans_deleted, 0);
    assert!(world.sweep.wecom.deleted().is_empty());
    assert_eq!(world.store().creation_intents(), [intent]);
}

/// Carol holds an acquisition link and resigned at `resigned_at_ms`.
async fn carol_resigned_with_a_link(world: &World, resigned_at_ms: u64) -> String {
    use crate::facts::StaffLedger;
    use crate::refresh::CodeRecords;
    use crate::wecom::acquisition::AcquisitionLink;
    let link = AcquisitionLink {
        link_id: "link-carol".into(),
        url: "https://work.weixin.qq.com/ca/link-carol".into(),
    };
    // Stored first: the table keeps a link only on a stored staff member.
    world
        .store()
        .set_employment(
            &tenant(),
            &staff("carol"),
            Employment::Resigned,
            resigned_at_ms,
        )
        .await
        .expect("set");
    world
        .store()
        .keep_link(&tenant(), &staff("carol"), &link)
        .await
        .expect("kept");
    link.link_id
}

async fn leaving(world: &World) -> Vec<LeavingStaff> {
    world
        .store()
        .resigned_before(u64::MAX, 10)
        .await
        .expect("read")
}

#[tokio::test]
async fn a_resigned_members_link_is_deleted_after_the_grace_and_taken_off_their_staff_item() {
    let world = World::with_codes(1).await;
    let link_id = carol_resigned_with_a_link(
        &world,
        NOW - SweepSettings::DEFAULT.link_retire_grace_ms - 1,
    )
    .await;

    let report = world.run().await;

    assert_eq!(report.links_retired, 1);
    assert_eq!(world.sweep.wecom.links_deleted(), [link_id]);
    assert_eq!(leaving(&world).await, []);
}

#[tokio::test]
async fn a_resignation_within_the_grace_keeps_its_link_for_the_codes_still_catching_up() {
    let world = World::with_codes(1).await;
    carol_resigned_with_a_link(&world, NOW - 1_000).await;

    let report = world.run().await;

    assert_eq!(report.links_retired, 0);
    assert!(world.sweep.wecom.links_deleted().is_empty());
    assert_eq!(
        leaving(&world).await[0].link_id.as_deref(),
        Some("link-carol")
    );
}

#[tokio::test]
async fn a_member_rehired_before_the_sweep_keeps_their_link_and_leaves_the_index() {
    use crate::facts::StaffLedger;
    let world = World::with_codes(1).await;
    carol_resigned_with_a_link(
        &world,
        NOW - SweepSettings::DEFAULT.link_retire_grace_ms - 2,
    )
    .await;
    world
        .store()
        .set_employment(
            &tenant(),
            &staff("carol"),
            Employment::Active,
            NOW - SweepSettings::DEFAULT.link_retire_grace_ms - 1,
        )
        .await
        .expect("set");

    let report = world.run().await;

    assert_eq!(report.links_retired, 0);
    assert!(world.sweep.wecom.links_deleted().is_empty());
    assert_eq!(leaving(&world).await, []);
}

#[tokio::test]
async fn a_link_wecom_failed_to_delete_stays_off_the_staff_item_and_the_next_run_deletes_it() {
    let world = World::with_codes(1).await;
    let link_id = carol_resigned_with_a_link(
        &world,
        NOW - SweepSettings::DEFAULT.link_retire_grace_ms - 1,
    )
    .await;
    world
        .sweep
        .wecom
        .fail_link_deletes(Some(WeComError::Transient {
            detail: "timeout".into(),
        }));

    let first = run_at(&world, clock, "run-1").await;

    assert_eq!(first.links_retired, 0);
    let waiting = leaving(&world).await;
    assert_eq!(waiting.len(), 1);
    assert_eq!(
        waiting[0].link_id, None,
        "no refresh may route to it any more"
    );
    assert_eq!(
        waiting[0].retiring_link_id.as_deref(),
        Some(link_id.as_str())
    );

    world.sweep.wecom.fail_link_deletes(None);
    let second = run_at(&world, clock, "run-2").await;

    assert_eq!(second.links_retired, 1);
    assert_eq!(world.sweep.wecom.links_deleted(), [link_id]);
    assert_eq!(leaving(&world).await, []);
}

mod paused_tenants {
    use super::*;
    use crate::tenants::{TenantPause, TenantPauses};

    async fn paused_world() -> World {
        let world = World::with_codes(3).await;
        let pause = TenantPause::new(
            FailureClass::UntrustedIp,
            Some(60020),
            "shared",
            "cfg-0",
            NOW - 120_000,
        );
        assert!(world
            .store()
            .pause(&tenant(), &pause)
            .await
            .expect("paused"));
        world
    }

    #[tokio::test]
    async fn a_probe_wecom_refuses_again_puts_the_next_one_twice_as_far_off() {
        let world = paused_world().await;
        world
            .sweep
            .wecom
            .fail_reads_with(Some(WeComError::UntrustedIp));
        let report = world.run().await;
        assert_eq!(report.pauses_probed, 1);
        assert_eq!(report.tenants_resumed, 0);
        let pause = world
            .store()
            .pause_of(&tenant())
            .await
            .expect("store")
            .expect("still paused");
        assert_eq!(pause.probes, 1);
        assert_eq!(pause.next_probe_ms, NOW + 120_000);
        assert!(world.sweep.fan_outs.fan_outs().is_empty());
        let again = world.run().await;
        assert_eq!(again.pauses_probed, 0, "not due again within two minutes");
    }

    #[tokio::test]
    async fn a_probe_wecom_accepts_lifts_the_pause_and_recomputes_every_code_of_the_tenant() {
        let world = paused_world().await;
        let report = world.run().await;
        assert_eq!((report.pauses_probed, report.tenants_resumed), (1, 1));
        assert_eq!(
            world.store().pause_of(&tenant()).await.expect("store"),
            None
        );
        assert!(world
            .store()
            .paused_tenants()
            .await
            .expect("store")
            .is_empty());
        let fan_outs = world.sweep.fan_outs.fan_outs();
        assert_eq!(fan_outs.len(), 1);
        assert_eq!(fan_outs[0].tenant, tenant());
        assert_eq!(fan_outs[0].sources, [crate::reasons::Source::Tenant]);
    }

    #[tokio::test]
    async fn a_pause_not_due_is_not_probed_and_spends_nothing() {
        let world = World::with_codes(1).await;
        let pause = TenantPause::new(FailureClass::Token, Some(40001), "shared", "cfg-0", NOW);
        world
            .store()
            .pause(&tenant(), &pause)
            .await
            .expect("paused");
        let report = world.run().await;
        assert_eq!(report.pauses_probed, 0);
        assert!(world
            .store()
            .pause_of(&tenant())
            .await
            .expect("store")
            .is_some());
    }
}
