use super::plan::{self, MinuteRange};
use super::*;
use crate::fakes::InMemoryQueues;
use crate::fakes::InMemoryStore;
use crate::membership::WeeklySchedule;
use crate::membership::{Limit, Shift};
use crate::reasons::{Cause, FanOut, Source};
use crate::tenants::Timezone;
use chrono::{NaiveTime, Weekday};

/// Milliseconds of an RFC 3339 instant.
fn ms(at: &str) -> u64 {
    u64::try_from(
        chrono::DateTime::parse_from_rfc3339(at)
            .expect("valid instant")
            .timestamp_millis(),
    )
    .expect("after 1970")
}

fn minute(at: &str) -> Minute {
    Minute::containing(ms(at))
}

fn tenant() -> TenantId {
    TenantId::parse("t1").expect("valid")
}

fn tenant_named(id: &str) -> TenantId {
    TenantId::parse(id).expect("valid")
}

fn staff(id: &str) -> StaffId {
    StaffId::parse(id).expect("valid")
}

fn code(id: &str) -> CodeId {
    CodeId::parse(id).expect("valid")
}

fn shanghai() -> Timezone {
    Timezone::default()
}

/// Monday to Friday, 09:00 to 18:00 local time.
fn office_hours() -> WeeklySchedule {
    hours(9, 18)
}

/// Monday to Friday, `start`:00 to `end`:00 local time.
fn hours(start: u32, end: u32) -> WeeklySchedule {
    let at = |h| NaiveTime::from_hms_opt(h, 0, 0).expect("valid time");
    WeeklySchedule {
        shifts: [
            Weekday::Mon,
            Weekday::Tue,
            Weekday::Wed,
            Weekday::Thu,
            Weekday::Fri,
        ]
        .into_iter()
        .map(|day| Shift {
            day,
            start: at(start),
            end: at(end),
        })
        .collect(),
    }
}

const SETTINGS: TickSettings = TickSettings::DEFAULT;
const BUDGET: Duration = Duration::from_secs(60);

// 2026-11-30 is a Monday; Shanghai is UTC+8, so its 09:00 is 01:00Z and its midnight 16:00Z.

/// Monday 09:00:20 in Shanghai: the 09:00 edge's grace has passed.
fn monday_0900_20() -> u64 {
    ms("2026-11-30T01:00:20Z")
}

/// Monday 09:00:05 in Shanghai: the 09:00 minute is still in its grace.
fn monday_0900_05() -> u64 {
    ms("2026-11-30T01:00:05Z")
}

/// Tuesday 00:00:20 in Shanghai.
fn tuesday_0000_20() -> u64 {
    ms("2026-11-30T16:00:20Z")
}

/// Thursday 00:00:20 in Shanghai: two midnights after Monday's.
fn thursday_0000_20() -> u64 {
    ms("2026-12-02T16:00:20Z")
}

fn tick(
    store: &InMemoryStore,
    queue: &InMemoryQueues,
    clock: Clock,
) -> Tick<InMemoryStore, InMemoryStore, InMemoryQueues, InMemoryQueues> {
    tick_with(store, queue, clock, SETTINGS)
}

fn tick_with(
    store: &InMemoryStore,
    queue: &InMemoryQueues,
    clock: Clock,
    settings: TickSettings,
) -> Tick<InMemoryStore, InMemoryStore, InMemoryQueues, InMemoryQueues> {
    Tick::new(
        store.clone(),
        store.clone(),
        queue.clone(),
        queue.clone(),
        clock,
        settings,
    )
}

/// The staff members the queued fan-outs name, in order.
fn fanned_out_staff(queue: &InMemoryQueues) -> Vec<String> {
    queue
        .fan_outs()
        .iter()
        .flat_map(|fan_out| fan_out.sources.clone())
        .map(|source| match source {
            Source::Staff { staff } => staff.to_string(),
            other => format!("{other:?}"),
        })
        .collect()
}

// ------------------------------------------------------------------ the pure part

#[test]
fn minutes_are_labelled_in_utc_and_parse_back() {
    let m = minute("2026-11-30T09:00:59Z");
    assert_eq!(m.label(), "202611300900");
    assert_eq!(Minute::parse_label("202611300900"), Some(m));
    assert_eq!(m.start_ms(), ms("2026-11-30T09:00:00Z"));
    assert_eq!(m.next().label(), "202611300901");
    assert_eq!(Minute::parse_label("2026113009"), None);
}

#[test]
fn a_run_walks_from_the_cursor_to_the_last_minute_past_its_grace() {
    let now = monday_0900_20();
    assert_eq!(
        plan::window(Some(minute("2026-11-30T00:58:00Z")), now, &SETTINGS),
        MinuteRange {
            first: minute("2026-11-30T00:58:00Z"),
            last: minute("2026-11-30T01:00:00Z"),
            rewound: false
        }
    );
    // Five seconds into 09:00 a writer may still be putting an item into it.
    let early = plan::window(
        Some(minute("2026-11-30T01:00:00Z")),
        monday_0900_05(),
        &SETTINGS,
    );
    assert!(early.first > early.last, "{early:?}");
}

#[test]
fn the_first_run_ever_looks_back_and_a_cursor_ahead_of_the_clock_is_rewound() {
    let now = monday_0900_20();
    let first_ever = plan::window(None, now, &SETTINGS);
    assert_eq!(
        first_ever.last.since(first_ever.first),
        SETTINGS.max_minutes - 1
    );

    let ahead = plan::window(Some(minute("2026-11-30T02:00:00Z")), now, &SETTINGS);
    assert!(ahead.rewound);
    assert_eq!(
        (ahead.first, ahead.last),
        (first_ever.last, first_ever.last)
    );
}

#[test]
fn the_next_edge_is_the_next_shift_start_or_end_in_the_tenants_zone() {
    let schedule = office_hours();
    // Monday 08:00 local: the shift starts at 09:00 local = 01:00Z.
    assert_eq!(
        plan::next_shift_edge(Some(&schedule), shanghai(), ms("2026-11-30T00:00:00Z")),
        Some(minute("2026-11-30T01:00:00Z"))
    );
    // Just after the start: the end at 18:00 local = 10:00Z.
    assert_eq!(
        plan::next_shift_edge(Some(&schedule), shanghai(), monday_0900_20()),
        Some(minute("2026-11-30T10:00:00Z"))
    );
    // Friday after work: Monday's start.
    assert_eq!(
        plan::next_shift_edge(Some(&schedule), shanghai(), ms("2026-12-04T11:00:00Z")),
        Some(minute("2026-12-07T01:00:00Z"))
    );
    assert_eq!(
        plan::next_shift_edge(None, shanghai(), monday_0900_20()),
        None
    );
    let never = WeeklySchedule { shifts: vec![] };
    assert_eq!(
        plan::next_shift_edge(Some(&never), shanghai(), monday_0900_20()),
        None
    );
}

#[test]
fn the_next_midnight_and_the_days_that_ended_are_the_tenants() {
    assert_eq!(
        plan::next_midnight(shanghai(), monday_0900_20()),
        minute("2026-11-30T16:00:00Z")
    );
    let utc: Timezone = "UTC".parse().expect("valid zone");
    assert_eq!(
        plan::next_midnight(utc, monday_0900_20()),
        minute("2026-12-01T00:00:00Z")
    );
    let midnight = minute("2026-11-30T16:00:00Z");
    assert_eq!(
        plan::days_ended(midnight, tuesday_0000_20(), shanghai()),
        ("2026-11-30".to_owned(), "2026-11-30".to_owned())
    );
    // A tick two days late covers every day since.
    assert_eq!(
        plan::days_ended(midnight, thursday_0000_20(), shanghai()),
        ("2026-11-30".to_owned(), "2026-12-02".to_owned())
    );
}

#[test]
fn a_rollover_brings_back_daily_limits_and_the_company_cap_but_not_add_limits() {
    let claims = [
        LimitReached {
            staff: staff("a"),
            limit: Limit::CodeDaily,
            code: Some(code("c1")),
        },
        LimitReached {
            staff: staff("b"),
            limit: Limit::CodeDaily,
            code: Some(code("c1")),
        },
        LimitReached {
            staff: staff("b"),
            limit: Limit::CompanyDaily,
            code: None,
        },
        LimitReached {
            staff: staff("c"),
            limit: Limit::CodeTotal,
            code: Some(code("c9")),
        },
    ];
    let back = plan::rollover(&claims);
    assert_eq!(back.codes.into_iter().collect::<Vec<_>>(), vec![code("c1")]);
    assert_eq!(
        back.staff_on_every_code.into_iter().collect::<Vec<_>>(),
        vec![staff("b")]
    );
}

#[test]
fn the_staff_told_of_an_edge_are_those_with_one_since_the_last_handling_and_the_next_is_the_earliest(
) {
    let schedules = vec![
        (staff("alice"), office_hours()),
        (staff("bob"), hours(10, 19)),
        (staff("carol"), hours(9, 17)),
    ];
    // Handled through just before 09:00 local; now 09:00:20.
    let edges = plan::shift_edges(
        &schedules,
        shanghai(),
        ms("2026-11-30T01:00:00Z") - 1,
        monday_0900_20(),
    );
    assert_eq!(
        edges.staff_by_edge.into_iter().collect::<Vec<_>>(),
        vec![(
            minute("2026-11-30T01:00:00Z"),
            vec![staff("alice"), staff("carol")]
        )]
    );
    // bob starts at 10:00 local, before anyone's 17:00 or 18:00.
    assert_eq!(edges.next, Some(minute("2026-11-30T02:00:00Z")));
}

#[test]
fn a_tick_far_behind_tells_each_staff_member_once_at_their_latest_edge() {
    let schedules = vec![(staff("alice"), office_hours())];
    // Handled through Monday 08:00 local; now Monday 19:00 local: both of alice's edges passed.
    let edges = plan::shift_edges(
        &schedules,
        shanghai(),
        ms("2026-11-30T00:00:00Z"),
        ms("2026-11-30T11:00:00Z"),
    );
    assert_eq!(
        edges.staff_by_edge.into_iter().collect::<Vec<_>>(),
        vec![(minute("2026-11-30T10:00:00Z"), vec![staff("alice")])]
    );
    assert_eq!(edges.next, Some(minute("2026-12-01T01:00:00Z")));
    let none = plan::shift_edges(&[], shanghai(), 0, monday_0900_20());
    assert_eq!(none, plan::ShiftEdges::default());
}

#[test]
fn the_same_edges_give_the_same_fan_outs_of_at_most_a_hundred_staff_each() {
    let edge = minute("2026-11-30T01:00:00Z");
    let many: Vec<StaffId> = (0..250).map(|n| staff(&format!("s{n:03}"))).collect();
    let by_edge = std::collections::BTreeMap::from([(edge, many)]);
    let once = plan::shift_fan_outs(&tenant(), &by_edge);
    assert_eq!(once, plan::shift_fan_outs(&tenant(), &by_edge));
    assert_eq!(
        once.iter().map(|f| f.sources.len()).collect::<Vec<_>>(),
        [100, 100, 50]
    );
    assert_eq!(
        once.iter().map(FanOut::mark_key).collect::<Vec<_>>(),
        [
            "shifts:202611300100",
            "shifts:202611300100#1",
            "shifts:202611300100#2"
        ]
    );
    assert!(once
        .iter()
        .all(|f| f.cause == Cause::ShiftChanged && f.fact_at_ms == edge.start_ms()));
    let later = std::collections::BTreeMap::from([(edge.plus(540), vec![staff("a")])]);
    assert_ne!(
        plan::shift_fan_outs(&tenant(), &later)[0].fact_key,
        once[0].fact_key
    );
}

#[test]
fn an_edge_moving_more_than_three_hundred_staff_is_one_fan_out_to_every_code_of_the_tenant() {
    let edge = minute("2026-11-30T01:00:00Z");
    let crowd: Vec<StaffId> = (0..=plan::TENANT_WIDE_AFTER_STAFF)
        .map(|n| staff(&format!("s{n:04}")))
        .collect();
    let by_edge = std::collections::BTreeMap::from([(edge, crowd.clone())]);
    let fan_outs = plan::shift_fan_outs(&tenant(), &by_edge);
    assert_eq!(fan_outs.len(), 1);
    assert_eq!(fan_outs[0].sources, vec![Source::Tenant]);
    assert_eq!(fan_outs[0].mark_key(), "shifts:202611300100");
    assert_eq!(fan_outs[0].cause, Cause::ShiftChanged);
    // One fewer is still told staff by staff, in parts.
    let by_edge = std::collections::BTreeMap::from([(edge, crowd[1..].to_vec())]);
    let parts = plan::shift_fan_outs(&tenant(), &by_edge);
    assert_eq!(parts.len(), 3);
    assert!(parts
        .iter()
        .all(|f| f.sources.iter().all(|s| matches!(s, Source::Staff { .. }))));
}

#[test]
fn a_code_two_parts_of_one_edge_reach_is_sent_reasons_refresh_fifo_takes_for_one() {
    let edge = minute("2026-11-30T01:00:00Z");
    let many: Vec<StaffId> = (0..150).map(|n| staff(&format!("s{n:03}"))).collect();
    let by_edge = std::collections::BTreeMap::from([(edge, many)]);
    let parts = plan::shift_fan_outs(&tenant(), &by_edge);
    assert_eq!(parts.len(), 2);
    assert_ne!(
        parts[0].mark_key(),
        parts[1].mark_key(),
        "each part is marked on its own"
    );
    let shared = CodeId::parse("c-1").expect("valid");
    let [first, second] = [&parts[0], &parts[1]].map(|part| part.fact().reason_for(&shared));
    assert_eq!(first.deduplication_id(), second.deduplication_id());
    assert_eq!(first.group_id(), second.group_id());
    let rollover = plan::rollover_fan_outs(&tenant(), "2026-11-30", edge, [staff("s000")]);
    assert_ne!(
        rollover[0].fact().reason_for(&shared).deduplication_id(),
        first.deduplication_id(),
        "another fact is another reason"
    );
}

#[test]
fn a_rollover_fans_out_to_the_staff_back_from_the_company_cap_and_to_nobody_else() {
    let midnight = minute("2026-11-30T16:00:00Z");
    let fan_outs: Vec<FanOut> =
        plan::rollover_fan_outs(&tenant(), "2026-11-30", midnight, [staff("bob")]);
    assert_eq!(fan_outs.len(), 1);
    assert_eq!(
        fan_outs[0].sources,
        vec![Source::Staff {
            staff: staff("bob")
        }]
    );
    assert_eq!(
        (fan_outs[0].cause, fan_outs[0].fact_key.as_str()),
        (Cause::DayRolledOver, "day-rolled-over:2026-11-30")
    );
    assert!(plan::rollover_fan_outs(&tenant(), "2026-11-30", midnight, []).is_empty());
}

// ------------------------------------------------------------------ a tick over fakes

#[tokio::test]
async fn a_shift_edge_sends_one_fan_out_of_the_staff_with_it_then_moves_to_the_tenants_next_edge() {
    // GIVEN alice on two codes starting at 09:00 and bob at 10:00, the tenant's shift item due
    // at Monday's 09:00
    let (store, queue) = (InMemoryStore::default(), InMemoryQueues::default());
    store.insert_tenant(&tenant(), shanghai());
    store.insert_schedule(&tenant(), &staff("alice"), office_hours());
    store.insert_schedule(&tenant(), &staff("bob"), hours(10, 19));
    store.seat(&tenant(), &staff("alice"), &[&code("c1"), &code("c2")]);
    let shifts = Subject::Shifts;
    store.put_due(&tenant(), shifts.clone(), minute("2026-11-30T01:00:00Z"));
    store.set_cursor(minute("2026-11-30T00:59:00Z"));

    // WHEN the tick runs at 09:00:20 local
    let report = tick(&store, &queue, monday_0900_20)
        .run("run-1", BUDGET)
        .await
        .expect("tick ran");

    // THEN one fan-out of alice (the fan-out function pages her codes), no reason of the
    // tick's own, and the item is due at bob's 10:00 local, handled through the run's moment
    assert_eq!(fanned_out_staff(&queue), ["alice"]);
    assert_eq!(queue.fan_outs()[0].fact_key, "shifts:202611300100");
    assert!(queue.reasons().is_empty());
    assert_eq!(
        store.stored_due_handled(&tenant(), &shifts),
        Some((minute("2026-11-30T02:00:00Z"), monday_0900_20()))
    );
    assert_eq!(report.minutes_walked, 2);
    assert_eq!(
        (report.due_items, report.reasons_sent, report.fan_outs_sent),
        (1, 0, 1)
    );
    assert_eq!(store.cursor(), Some(minute("2026-11-30T01:01:00Z")));
    assert_eq!(store.cursor_lease().1, 0, "the cursor is released");
}

#[tokio::test]
async fn a_tenant_whose_schedules_are_all_removed_has_its_shift_item_deleted() {
    let (store, queue) = (InMemoryStore::default(), InMemoryQueues::default());
    store.insert_tenant(&tenant(), shanghai());
    store.seat(&tenant(), &staff("bob"), &[&code("c1")]);
    store.put_due(&tenant(), Subject::Shifts, minute("2026-11-30T01:00:00Z"));
    store.set_cursor(minute("2026-11-30T01:00:00Z"));

    tick(&store, &queue, monday_0900_20)
        .run("run-1", BUDGET)
        .await
        .expect("tick ran");

    assert!(queue.fan_outs().is_empty());
    assert_eq!(store.stored_due(&tenant(), &Subject::Shifts), None);
}

#[tokio::test]
async fn a_schedule_write_that_moves_the_item_skips_no_edge_of_another_staff_member() {
    // GIVEN the item due at 09:00 with alice's 09:00 start, and an admin write at 09:00:05
    // (bob's new schedule) that moves it to the next minute
    let (store, queue) = (InMemoryStore::default(), InMemoryQueues::default());
    store.insert_tenant(&tenant(), shanghai());
    store.insert_schedule(&tenant(), &staff("alice"), office_hours());
    let edge = minute("2026-11-30T01:00:00Z");
    store.put_due(&tenant(), Subject::Shifts, edge);
    store.set_cursor(edge);
    store.insert_schedule(&tenant(), &staff("bob"), hours(10, 19));
    DueWriter::set_due(
        &store,
        &tenant(),
        &Subject::Shifts,
        edge.next(),
        monday_0900_05(),
    )
    .await
    .expect("written");

    // WHEN the tick walks 09:00 and 09:01
    tick(&store, &queue, || ms("2026-11-30T01:01:20Z"))
        .run("run-1", BUDGET)
        .await
        .expect("tick ran");

    // THEN alice's 09:00 start still went out (the item kept what it was handled through)
    assert_eq!(fanned_out_staff(&queue), ["alice"]);
    assert_eq!(
        store.stored_due(&tenant(), &Subject::Shifts),
        Some(minute("2026-11-30T02:00:00Z"))
    );
}

#[tokio::test]
async fn a_tick_that_read_an_item_before_a_writer_moved_it_leaves_the_writers_minute() {
    let store = InMemoryStore::default();
    let edge = minute("2026-11-30T01:00:00Z");
    store.put_due(&tenant(), Subject::Shifts, edge);
    let read = store.due_in(edge).await.expect("read").remove(0);
    DueWriter::set_due(
        &store,
        &tenant(),
        &Subject::Shifts,
        edge.next(),
        monday_0900_20(),
    )
    .await
    .expect("written");

    store
        .reschedule(&read, Some(edge.plus(540)), monday_0900_20())
        .await
        .expect("answered");

    assert_eq!(
        store.stored_due_handled(&tenant(), &Subject::Shifts),
        Some((edge.next(), edge.start_ms() - 1))
    );
}

#[tokio::test]
async fn a_midnight_brings_back_the_codes_of_the_day_that_ended_and_waits_for_the_next() {
    // GIVEN claims of Monday: alice at c1's daily limit, bob at the company cap (on c2, c3),
    // carol at c4's add limit, and a claim of Sunday that is not this rollover's
    let (store, queue) = (InMemoryStore::default(), InMemoryQueues::default());
    store.insert_tenant(&tenant(), shanghai());
    store.seat(&tenant(), &staff("bob"), &[&code("c2"), &code("c3")]);
    let claim = |who: &str, limit, on: Option<&str>| LimitReached {
        staff: staff(who),
        limit,
        code: on.map(code),
    };
    store.insert_claim(
        &tenant(),
        "2026-11-30",
        claim("alice", Limit::CodeDaily, Some("c1")),
    );
    store.insert_claim(
        &tenant(),
        "2026-11-30",
        claim("bob", Limit::CompanyDaily, None),
    );
    store.insert_claim(
        &tenant(),
        "2026-11-30",
        claim("carol", Limit::CodeTotal, Some("c4")),
    );
    store.insert_claim(
        &tenant(),
        "2026-11-29",
        claim("dave", Limit::CodeDaily, Some("c5")),
    );
    store.put_due(&tenant(), Subject::Midnight, minute("2026-11-30T16:00:00Z"));
    store.set_cursor(minute("2026-11-30T16:00:00Z"));

    // WHEN the tick runs 20 s after Shanghai's midnight
    let report = tick(&store, &queue, tuesday_0000_20)
        .run("run-1", BUDGET)
        .await
        .expect("tick ran");

    // THEN c1 got a reason, bob's codes a fan-out of the same fact, and the next midnight
    // is Tuesday's
    let codes: Vec<_> = queue.reasons().iter().map(|r| r.code.to_string()).collect();
    assert_eq!(codes, ["c1"]);
    assert_eq!(fanned_out_staff(&queue), ["bob"]);
    assert_eq!(queue.fan_outs()[0].fact_key, "day-rolled-over:2026-11-30");
    assert!(queue
        .reasons()
        .iter()
        .all(|r| r.cause == Cause::DayRolledOver && r.fact_key == "day-rolled-over:2026-11-30"));
    assert_eq!(
        store.stored_due(&tenant(), &Subject::Midnight),
        Some(minute("2026-12-01T16:00:00Z"))
    );
    assert_eq!((report.reasons_sent, report.fan_outs_sent), (1, 1));
}

#[tokio::test]
async fn a_run_walks_at_most_its_bound_and_the_next_run_goes_on_from_there() {
    let (store, queue) = (InMemoryStore::default(), InMemoryQueues::default());
    store.insert_tenant(&tenant(), shanghai());
    // Two hours behind (the tick was stopped, or the clock moved forward).
    store.set_cursor(minute("2026-11-29T23:00:00Z"));
    store.insert_schedule(&tenant(), &staff("alice"), office_hours());
    store.seat(&tenant(), &staff("alice"), &[&code("c1")]);
    store.put_due(&tenant(), Subject::Shifts, minute("2026-11-30T00:30:00Z"));

    let first = tick(&store, &queue, monday_0900_20)
        .run("run-1", BUDGET)
        .await
        .expect("tick ran");
    assert_eq!(first.minutes_walked, SETTINGS.max_minutes);
    assert_eq!(store.cursor(), Some(minute("2026-11-30T00:00:00Z")));
    assert_eq!(first.minutes_behind, 61);
    assert!(queue.fan_outs().is_empty());

    let second = tick(&store, &queue, monday_0900_20)
        .run("run-2", BUDGET)
        .await
        .expect("tick ran");
    assert_eq!(second.minutes_walked, SETTINGS.max_minutes);
    assert_eq!(queue.fan_outs().len(), 1, "the 00:30 item was reached");
    assert_eq!(second.minutes_behind, 1);
    let minutes = store.minutes_read();
    assert!(
        minutes.windows(2).all(|w| w[1] == w[0].next()),
        "no minute skipped or walked twice"
    );
}

#[tokio::test]
async fn a_run_leaves_the_index_alone_while_another_run_holds_the_cursor() {
    let (store, queue) = (InMemoryStore::default(), InMemoryQueues::default());
    store.set_cursor(minute("2026-11-30T00:50:00Z"));
    store.hold_cursor_lease("run-0", monday_0900_20() + 30_000);

    let report = tick(&store, &queue, monday_0900_20)
        .run("run-1", BUDGET)
        .await
        .expect("tick ran");

    assert!(report.held_elsewhere);
    assert!(store.minutes_read().is_empty());
    assert_eq!(store.cursor(), Some(minute("2026-11-30T00:50:00Z")));
    assert_eq!(store.cursor_lease().0.as_deref(), Some("run-0"));
}

#[tokio::test]
async fn a_crashed_runs_lease_expires_and_the_next_run_walks_its_minute_again() {
    let (store, queue) = (InMemoryStore::default(), InMemoryQueues::default());
    store.insert_tenant(&tenant(), shanghai());
    store.insert_schedule(&tenant(), &staff("alice"), office_hours());
    store.seat(&tenant(), &staff("alice"), &[&code("c1")]);
    store.put_due(&tenant(), Subject::Shifts, minute("2026-11-30T01:00:00Z"));
    store.set_cursor(minute("2026-11-30T01:00:00Z"));
    store.hold_cursor_lease("crashed", monday_0900_20() - 1);

    let report = tick(&store, &queue, monday_0900_20)
        .run("run-1", BUDGET)
        .await
        .expect("tick ran");

    assert!(!report.held_elsewhere);
    assert_eq!(queue.fan_outs().len(), 1);
}

#[tokio::test]
async fn a_lease_taken_under_a_clock_since_set_back_does_not_hold_the_cursor() {
    let (store, queue) = (InMemoryStore::default(), InMemoryQueues::default());
    store.set_cursor(minute("2026-11-30T01:30:00Z"));
    // A run killed at 01:30 while the stack's clock was half an hour ahead.
    store.hold_cursor_lease("killed", ms("2026-11-30T01:32:00Z"));

    let report = tick(&store, &queue, monday_0900_20)
        .run("run-1", BUDGET)
        .await
        .expect("tick ran");

    assert!(!report.held_elsewhere);
    assert!(report.rewound);
    assert_eq!(store.cursor(), Some(minute("2026-11-30T01:01:00Z")));
}

#[tokio::test]
async fn a_failing_item_is_tried_again_next_minute_without_holding_up_the_others() {
    // GIVEN two tenants' items in one minute, the first's schedules unreadable
    let (store, queue) = (InMemoryStore::default(), InMemoryQueues::default());
    let other = tenant_named("t2");
    store.insert_tenant(&tenant(), shanghai());
    store.insert_tenant(&other, shanghai());
    store.insert_schedule(&tenant(), &staff("alice"), office_hours());
    store.insert_schedule(&other, &staff("bob"), office_hours());
    store.seat(&tenant(), &staff("alice"), &[&code("c1")]);
    store.seat(&other, &staff("bob"), &[&code("c2")]);
    let edge = minute("2026-11-30T01:00:00Z");
    store.put_due(&tenant(), Subject::Shifts, edge);
    store.put_due(&other, Subject::Shifts, edge);
    store.set_cursor(edge);
    store.make_unreadable(&staff("alice"), true);

    let report = tick(&store, &queue, monday_0900_20)
        .run("run-1", BUDGET)
        .await
        .expect("tick ran");

    assert_eq!(report.retried, 1);
    assert_eq!(fanned_out_staff(&queue), ["bob"]);
    assert_eq!(
        store.stored_due_handled(&tenant(), &Subject::Shifts),
        Some((edge.next(), edge.start_ms() - 1)),
        "tried again next minute with the same edges to send"
    );
    assert_eq!(store.cursor(), Some(edge.next()));
}

#[tokio::test]
async fn a_minute_in_its_grace_is_left_for_the_next_run() {
    let (store, queue) = (InMemoryStore::default(), InMemoryQueues::default());
    store.insert_tenant(&tenant(), shanghai());
    store.insert_schedule(&tenant(), &staff("alice"), office_hours());
    store.seat(&tenant(), &staff("alice"), &[&code("c1")]);
    let edge = minute("2026-11-30T01:00:00Z");
    store.put_due(&tenant(), Subject::Shifts, edge);
    store.set_cursor(edge);

    let report = tick(&store, &queue, monday_0900_05)
        .run("run-1", BUDGET)
        .await
        .expect("tick ran");

    assert_eq!(report.minutes_walked, 0);
    assert!(queue.fan_outs().is_empty());
    assert_eq!(store.cursor(), Some(edge));
}

thread_local! {
    /// The clock of a waiting run's test: its pause moves it on (each `#[tokio::test]` runs on
    /// a thread of its own).
    static NOW_MS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

fn moving_clock() -> u64 {
    NOW_MS.with(std::cell::Cell::get)
}

fn pause_moving_the_clock(wait: Duration) -> futures::future::BoxFuture<'static, ()> {
    let waited = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
    NOW_MS.with(|now| now.set(now.get() + waited));
    Box::pin(std::future::ready(()))
}

/// Alice's 09:00 edge due, the cursor on 09:00, and the clock at `at`.
fn nine_oclock_edge_at(at: u64) -> (InMemoryStore, InMemoryQueues, Minute) {
    let (store, queue) = (InMemoryStore::default(), InMemoryQueues::default());
    store.insert_tenant(&tenant(), shanghai());
    store.insert_schedule(&tenant(), &staff("alice"), office_hours());
    store.seat(&tenant(), &staff("alice"), &[&code("c1")]);
    let edge = minute("2026-11-30T01:00:00Z");
    store.put_due(&tenant(), Subject::Shifts, edge);
    store.set_cursor(edge);
    NOW_MS.with(|now| now.set(at));
    (store, queue, edge)
}

#[tokio::test]
async fn a_run_fired_inside_a_minutes_grace_waits_for_it_and_walks_the_minute_as_it_ends() {
    let (store, queue, edge) = nine_oclock_edge_at(monday_0900_05());

    let report = tick(&store, &queue, moving_clock)
        .waiting_with(pause_moving_the_clock)
        .run_waiting("run-1", Duration::from_secs(120))
        .await
        .expect("tick ran");

    assert_eq!(fanned_out_staff(&queue), ["alice"]);
    let grace_ended = edge.start_ms() + SETTINGS.grace_ms;
    assert_eq!(
        store
            .stored_due_handled(&tenant(), &Subject::Shifts)
            .map(|(_, handled_through)| handled_through),
        Some(grace_ended),
        "the edge was handled the moment its grace ended"
    );
    assert!(report.waits >= 1);
    assert_eq!(report.minutes_behind, 0);
    assert!(store.cursor() > Some(edge));
    assert_eq!(store.cursor_lease().1, 0, "the cursor is released");
}

#[tokio::test]
async fn a_run_by_hand_walks_what_is_due_and_never_waits() {
    let (store, queue, edge) = nine_oclock_edge_at(monday_0900_05());

    let report = tick(&store, &queue, moving_clock)
        .waiting_with(pause_moving_the_clock)
        .run("run-1", Duration::from_secs(120))
        .await
        .expect("tick ran");

    assert_eq!(report.waits, 0);
    assert!(queue.fan_outs().is_empty(), "09:00 is still in its grace");
    assert_eq!(store.cursor(), Some(edge));
}

#[tokio::test]
async fn a_waiting_run_stops_waiting_when_its_budget_leaves_no_room_for_another_walk() {
    // 09:00:05 with 39 s: the minute may be walked in 10 s, and 10 s + 2 x 15 s kept back
    // is more than 39 s.
    let (store, queue, edge) = nine_oclock_edge_at(monday_0900_05());

    let report = tick(&store, &queue, moving_clock)
        .waiting_with(pause_moving_the_clock)
        .run_waiting("run-1", Duration::from_secs(39))
        .await
        .expect("tick ran");

    assert_eq!(report.waits, 0);
    assert!(queue.fan_outs().is_empty());
    assert_eq!(store.cursor(), Some(edge));
    assert_eq!(moving_clock(), monday_0900_05(), "no time was waited");
}

#[tokio::test]
async fn a_queue_outage_keeps_the_item_for_a_later_minute() {
    let (store, queue) = (InMemoryStore::default(), InMemoryQueues::default());
    store.insert_tenant(&tenant(), shanghai());
    store.insert_schedule(&tenant(), &staff("alice"), office_hours());
    store.seat(&tenant(), &staff("alice"), &[&code("c1")]);
    let edge = minute("2026-11-30T01:00:00Z");
    store.put_due(&tenant(), Subject::Shifts, edge);
    store.set_cursor(edge);
    queue.set_fan_outs_unavailable(true);

    tick(&store, &queue, monday_0900_20)
        .run("run-1", BUDGET)
        .await
        .expect("tick ran");
    assert_eq!(
        store.stored_due(&tenant(), &Subject::Shifts),
        Some(edge.next()),
        "not moved to 18:00 before its fan-out went out"
    );

    queue.set_fan_outs_unavailable(false);
    tick(&store, &queue, || ms("2026-11-30T01:01:20Z"))
        .run("run-2", BUDGET)
        .await
        .expect("tick ran");
    assert_eq!(queue.fan_outs().len(), 1);
    assert_eq!(
        store.stored_due(&tenant(), &Subject::Shifts),
        Some(minute("2026-11-30T10:00:00Z"))
    );
}

#[tokio::test]
async fn a_due_item_of_a_tenant_that_is_gone_is_deleted() {
    let (store, queue) = (InMemoryStore::default(), InMemoryQueues::default());
    let edge = minute("2026-11-30T01:00:00Z");
    store.put_due(&tenant(), Subject::Midnight, edge);
    store.set_cursor(edge);

    tick(&store, &queue, monday_0900_20)
        .run("run-1", BUDGET)
        .await
        .expect("tick ran");

    assert_eq!(store.stored_due(&tenant(), &Subject::Midnight), None);
    assert!(queue.reasons().is_empty() && queue.fan_outs().is_empty());
}

#[tokio::test]
async fn a_run_out_of_time_inside_a_minute_keeps_the_cursor_there_and_the_next_run_finishes_it() {
    // GIVEN forty tenants' shift edges in one minute, and a clock that advances a second on
    // every read: a run with 25 s and a 15 s reserve has time for a few items only
    static NOW: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    fn ticking() -> u64 {
        NOW.fetch_add(1_000, std::sync::atomic::Ordering::SeqCst)
    }
    let (store, queue) = (InMemoryStore::default(), InMemoryQueues::default());
    let edge = minute("2026-11-30T01:00:00Z");
    for n in 0..40 {
        let of = tenant_named(&format!("t{n:02}"));
        store.insert_tenant(&of, shanghai());
        store.insert_schedule(&of, &staff(&format!("s{n:02}")), office_hours());
        store.put_due(&of, Subject::Shifts, edge);
    }
    store.set_cursor(edge);
    NOW.store(monday_0900_20(), std::sync::atomic::Ordering::SeqCst);
    let settings = TickSettings {
        concurrency: 1,
        ..SETTINGS
    };

    // WHEN a run with little time walks the minute
    let first = tick_with(&store, &queue, ticking, settings)
        .run("run-1", Duration::from_secs(25))
        .await
        .expect("tick ran");

    // THEN it stopped inside it: the items it handled moved on, the cursor did not
    assert!(first.stopped_inside_minute, "{first:?}");
    assert!(
        first.fan_outs_sent > 0 && first.fan_outs_sent < 40,
        "{first:?}"
    );
    assert_eq!(first.minutes_walked, 0);
    assert_eq!(store.cursor(), Some(edge));

    // AND the next run, with time, sends the rest, each tenant's fan-out once
    let second = tick_with(&store, &queue, ticking, settings)
        .run("run-2", Duration::from_secs(600))
        .await
        .expect("tick ran");
    assert!(!second.stopped_inside_minute, "{second:?}");
    assert_eq!(first.fan_outs_sent + second.fan_outs_sent, 40);
    let mut fanned = fanned_out_staff(&queue);
    fanned.sort();
    fanned.dedup();
    assert_eq!(fanned.len(), 40);
    assert!(store.cursor() > Some(edge), "the minute is walked");
}
