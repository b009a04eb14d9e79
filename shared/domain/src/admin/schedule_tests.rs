//! The admin API's part in work schedules and the day rollover: it stores a staff member's
//! schedule and keeps the schedule tick's due items (shift edges, the tenant's midnight) in
//! step with what it writes.

use super::*;
use crate::fakes::{FakeWeCom, InMemoryQueues, InMemoryStore};
use crate::membership::{Shift, StaffFacts, WeeklySchedule};
use crate::schedules::Minute;
use chrono::{NaiveTime, Weekday};
use serde_json::json;

/// Monday 2026-11-30 23:59:59 in Shanghai (15:59:59Z).
const NOW_MS: u64 = 1_796_054_399_000;

fn clock() -> u64 {
    NOW_MS
}

fn minute(at: &str) -> Minute {
    let ms = chrono::DateTime::parse_from_rfc3339(at)
        .expect("valid instant")
        .timestamp_millis();
    Minute::containing(u64::try_from(ms).expect("after 1970"))
}

fn tenant() -> TenantId {
    TenantId::parse("demo").expect("valid")
}

fn alice() -> StaffId {
    StaffId::parse("alice").expect("valid")
}

fn tenant_body(timezone: &str) -> String {
    json!({
        "corp_id": "wx5823bf96d3bd56c7",
        "corp_secret": "s3cr3t",
        "callback_token": "QDG6eK",
        "encoding_aes_key": "jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C",
        "timezone": timezone,
    })
    .to_string()
}

type TestAdmin = Admin<InMemoryStore, InMemoryQueues, FakeWeCom>;

/// Tenant `demo` (Shanghai) with alice online on code `c1` (offline check on).
async fn admin() -> (TestAdmin, InMemoryStore, InMemoryQueues) {
    let store = InMemoryStore::default();
    let queue = InMemoryQueues::default();
    let admin = Admin::new(
        store.clone(),
        queue.clone(),
        queue.expanding_through(store.clone()),
        FakeWeCom::default(),
        clock,
    );
    admin
        .put_tenant(PutTenant::parse("demo", &tenant_body("Asia/Shanghai")).expect("valid"))
        .await
        .expect("stored");
    store.insert_staff(&tenant(), &alice(), StaffFacts::ACTIVE_ONLINE);
    let code =
        json!({"family": "native", "members": ["alice"], "switches": {"offline_check": true}});
    admin
        .put_code(PutCode::parse("demo", "c1", &code.to_string()).expect("valid"))
        .await
        .expect("stored");
    (admin, store, queue)
}

fn staff_body(schedule: serde_json::Value) -> String {
    json!({"online": true, "schedule": schedule}).to_string()
}

fn mondays_nine_to_six() -> serde_json::Value {
    json!({"shifts": [{"day": "mon", "start": "09:00", "end": "18:00"}]})
}

#[test]
fn a_staff_body_takes_a_schedule_removes_it_with_null_and_keeps_it_when_absent() {
    let set = PutStaff::parse("demo", "alice", &staff_body(mondays_nine_to_six())).expect("valid");
    let nine = NaiveTime::from_hms_opt(9, 0, 0).expect("valid");
    let six = NaiveTime::from_hms_opt(18, 0, 0).expect("valid");
    assert_eq!(
        set.schedule,
        Some(ScheduleEdit::Set(WeeklySchedule {
            shifts: vec![Shift {
                day: Weekday::Mon,
                start: nine,
                end: six
            }]
        }))
    );
    let removed = PutStaff::parse("demo", "alice", &staff_body(json!(null))).expect("valid");
    assert_eq!(removed.schedule, Some(ScheduleEdit::Remove));
    let kept = PutStaff::parse("demo", "alice", r#"{"online": true}"#).expect("valid");
    assert_eq!(kept.schedule, None);
    let empty = PutStaff::parse("demo", "alice", &staff_body(json!({"shifts": []})));
    assert_eq!(
        empty.expect("valid").schedule,
        Some(ScheduleEdit::Set(WeeklySchedule::default())),
        "an empty schedule is valid: never on shift"
    );
}

#[test]
fn a_bad_schedule_is_refused_naming_the_field_to_fix() {
    let shift = |day: &str, start: &str, end: &str| json!({"day": day, "start": start, "end": end});
    let too_many: Vec<_> = (0..=WeeklySchedule::MAX_SHIFTS)
        .map(|_| shift("mon", "09:00", "10:00"))
        .collect();
    let cases = [
        (json!("9 to 5"), "schedule"),
        (json!({}), "schedule.shifts"),
        (json!({"shifts": "mon"}), "schedule.shifts"),
        (
            json!({"shifts": [], "timezone": "UTC"}),
            "schedule.timezone",
        ),
        (json!({"shifts": too_many}), "schedule.shifts"),
        (json!({"shifts": ["mon 9-5"]}), "schedule.shifts[0]"),
        (
            json!({"shifts": [shift("mon", "09:00", "10:00"), shift("funday", "09:00", "10:00")]}),
            "schedule.shifts[1]",
        ),
        (
            json!({"shifts": [shift("mon", "9am", "10:00")]}),
            "schedule.shifts[0]",
        ),
        (
            json!({"shifts": [shift("mon", "09:00", "24:00")]}),
            "schedule.shifts[0]",
        ),
        (
            json!({"shifts": [{"day": "mon", "start": "09:00"}]}),
            "schedule.shifts[0].end",
        ),
        (
            json!({"shifts": [{"day": "mon", "start": "09:00", "end": "10:00", "lunch": "12:00"}]}),
            "schedule.shifts[0].lunch",
        ),
        (
            json!({"shifts": [shift("mon", "09:00", "09:00")]}),
            "schedule",
        ),
    ];
    for (schedule, field) in cases {
        match PutStaff::parse("demo", "alice", &staff_body(schedule.clone())) {
            Err(AdminError::Invalid { field: got, .. }) => {
                assert_eq!(got, field, "for {schedule}");
            }
            other => panic!("{schedule}: expected a refusal of {field}, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn a_schedule_is_stored_its_codes_get_a_reason_and_the_tenants_shift_item_is_due_next_minute()
{
    let (admin, store, queue) = admin().await;
    let before = queue.reasons().len();

    let command =
        PutStaff::parse("demo", "alice", &staff_body(mondays_nine_to_six())).expect("valid");
    let answer = admin.put_staff(command).await.expect("stored");

    // The tick finds the next edge of every schedule, this one's included, at the next
    // minute; a new item counts what came before the write as handled.
    assert_eq!(
        store.stored_due_handled(&tenant(), &Subject::Shifts),
        Some((Minute::containing(NOW_MS).next(), NOW_MS))
    );
    let stored = store.stored_staff(&tenant(), &alice()).expect("stored");
    assert_eq!(stored.schedule.as_ref(), answer.schedule.as_ref());
    assert!(answer.schedule.is_some());
    assert_eq!(queue.reasons().len(), before + 1);
    assert_eq!(
        serde_json::to_value(&answer).expect("serialises")["schedule"],
        mondays_nine_to_six()
    );
}

#[tokio::test]
async fn removing_a_schedule_moves_the_shift_item_and_a_write_without_one_leaves_it() {
    // GIVEN alice's schedule stored, and the tick since moved the item to her next edge
    let (admin, store, _) = admin().await;
    let set = PutStaff::parse("demo", "alice", &staff_body(mondays_nine_to_six())).expect("valid");
    admin.put_staff(set).await.expect("stored");
    let next_monday = minute("2026-12-07T01:00:00Z");
    store.put_due_handled(&tenant(), Subject::Shifts, next_monday, NOW_MS);

    let untouched = PutStaff::parse("demo", "alice", r#"{"online": false}"#).expect("valid");
    let answer = admin.put_staff(untouched).await.expect("stored");
    assert!(answer.schedule.is_some());
    assert_eq!(
        store.stored_due(&tenant(), &Subject::Shifts),
        Some(next_monday)
    );

    // A removal is due at once too: the tick finds no schedule left and deletes the item.
    let remove = PutStaff::parse("demo", "alice", &staff_body(json!(null))).expect("valid");
    let answer = admin.put_staff(remove).await.expect("stored");
    assert_eq!(answer.schedule, None);
    assert_eq!(
        store.stored_due(&tenant(), &Subject::Shifts),
        Some(Minute::containing(NOW_MS).next())
    );
}

#[tokio::test]
async fn a_tenant_write_points_the_midnight_item_at_the_next_midnight_of_its_zone() {
    let (admin, store, _) = admin().await;
    assert_eq!(
        store.stored_due(&tenant(), &Subject::Midnight),
        Some(minute("2026-11-30T16:00:00Z")),
        "Shanghai's midnight, a second away"
    );

    let paris = PutTenant::parse("demo", &tenant_body("Europe/Paris")).expect("valid");
    admin.put_tenant(paris).await.expect("stored");

    assert_eq!(
        store.stored_due(&tenant(), &Subject::Midnight),
        Some(minute("2026-11-30T23:00:00Z"))
    );
}

#[tokio::test]
async fn a_new_timezone_makes_every_shift_edge_due_at_once_and_the_same_zone_leaves_them() {
    let (admin, store, _) = admin().await;
    let set = PutStaff::parse("demo", "alice", &staff_body(mondays_nine_to_six())).expect("valid");
    admin.put_staff(set).await.expect("stored");
    let next_monday = minute("2026-12-07T01:00:00Z");
    store.put_due_handled(&tenant(), Subject::Shifts, next_monday, NOW_MS);

    let same = PutTenant::parse("demo", &tenant_body("Asia/Shanghai")).expect("valid");
    admin.put_tenant(same).await.expect("stored");
    assert_eq!(
        store.stored_due(&tenant(), &Subject::Shifts),
        Some(next_monday)
    );

    let paris = PutTenant::parse("demo", &tenant_body("Europe/Paris")).expect("valid");
    admin.put_tenant(paris).await.expect("stored");
    assert_eq!(
        store.stored_due_handled(&tenant(), &Subject::Shifts),
        Some((Minute::containing(NOW_MS).next(), NOW_MS)),
        "the tick recomputes it in the new zone at the next minute"
    );
}
