//! Each operation run through the domain's own code over `MeteredStore`, counting the
//! requests by kind against what the adapter sends (the table at the top of `store.rs`; the
//! local world's request interceptor measured 6 for an unchanged refresh and 8 for a push).

use super::*;
use crate::services::clock;
use crate::services::dynamodb::{DynamoConfig, READ_UNIT_BYTES, TABLE};
use domain::budget::{BudgetLayers, BudgetLimits};
use domain::codes::StoredCode;
use domain::facts::{FactOutcome, FactRecorder};
use domain::fakes::{FakeWeCom, InMemoryQueues};
use domain::fanout::{Expanded, Expander};
use domain::intake::InboxMessage;
use domain::lanes::CodeAge;
use domain::lanes::{Lane, LanePolicy, LaneSwitch};
use domain::membership::{Family, Switches};
use domain::reasons::Cause;
use domain::refresh::{LeaseTimes, Outcome, RefreshRequest, Refresher};
use domain::schedules::{Tick, TickSettings};
use domain::wecom::callback::{write_flat_xml, CallbackEvent, Envelope};
use domain::wecom::crypto::CallbackCrypto;
use std::time::Duration;

/// 20 s into a minute, so the tick's grace (15 s) leaves that minute to walk.
const START_MS: u64 = 1_796_000_000_000;
const TOKEN: &str = "tok123";
const KEY: &str = "jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C";
const CORP: &str = "wwcorp";

fn tenant() -> TenantId {
    TenantId::parse("acme").expect("valid")
}

fn code() -> CodeId {
    CodeId::parse("code-1").expect("valid")
}

fn staff(id: &str) -> StaffId {
    StaffId::parse(id).expect("valid")
}

fn members() -> Vec<StaffId> {
    (0..15).map(|i| staff(&format!("staff{i:02}"))).collect()
}

fn store() -> MeteredStore {
    clock::start_at(START_MS);
    let meter = Arc::new(DynamoDb::new(DynamoConfig::default(), 30));
    MeteredStore::new(
        InMemoryStore::without_history(),
        meter,
        Arc::new(Trace::default()),
    )
}

fn profile() -> TenantProfile {
    TenantProfile {
        corp_id: CORP.into(),
        callback_token: TOKEN.into(),
        encoding_aes_key: KEY.into(),
        previous_callback: None,
        corp_secret: "secret".into(),
        timezone: Timezone::default(),
        company_daily_cap: None,
    }
}

/// A native code of 15 online members, created just now (the fast lane), whose last push
/// holds `pushed`.
fn load_code(store: &MeteredStore, pushed: Vec<StaffId>) {
    store
        .data()
        .load_snapshot(&tenant(), &code(), &snapshot_of(pushed));
    store.data().set_age(
        &tenant(),
        &code(),
        CodeAge {
            created_at_ms: START_MS,
            updated_at_ms: START_MS,
        },
    );
}

fn snapshot_of(pushed: Vec<StaffId>) -> CodeSnapshot {
    CodeSnapshot {
        profile: profile(),
        code: StoredCode {
            config: CodeConfig {
                family: Family::Native,
                members: members(),
                departments: vec![],
                fallback: vec![],
                switches: Switches {
                    offline_check: true,
                    ..Switches::default()
                },
            },
            config_id: Some("cfg-1".into()),
            created_with: vec![],
        },
        staff: members()
            .into_iter()
            .map(|member| (member, StaffFacts::ACTIVE_ONLINE))
            .collect(),
        adds: HashMap::new(),
        departments: HashMap::new(),
        now_ms: START_MS,
        last_pushed: Some(PushedList {
            users: pushed,
            pushed_at_ms: START_MS - 60_000,
            starved: false,
            rotation: None,
        }),
        dirty_since_ms: None,
        links: HashMap::new(),
        lease: Default::default(),
        age: Default::default(),
        tenant_paused: None,
    }
}

fn refresher(
    store: &MeteredStore,
    limits: BudgetLimits,
) -> Refresher<MeteredStore, FakeWeCom, MeteredBudget> {
    let lanes = LanePolicy {
        switch: LaneSwitch::Auto,
        quiet_after_ms: 3 * 24 * 3_600_000,
        fast_tenants: BTreeSet::new(),
        slow_interval_ms: 60_000,
    };
    let lease = LeaseTimes {
        duration_ms: 8_000,
        call_ms: 3_500,
    };
    Refresher::new(
        store.clone(),
        FakeWeCom::default(),
        MeteredBudget::new(store.clone(), BudgetLayers::behind_one_address(limits)),
        clock::now_ms,
        lanes,
        lease,
    )
}

async fn refresh(refresher: &Refresher<MeteredStore, FakeWeCom, MeteredBudget>) -> Outcome {
    let (tenant, code) = (tenant(), code());
    let fact_at_ms = [clock::now_ms()];
    refresher
        .refresh(RefreshRequest {
            tenant: &tenant,
            code: &code,
            fact_at_ms: &fact_at_ms,
            lane: Lane::Fast,
            resync: false,
            deadline_ms: clock::now_ms() + 60_000,
        })
        .await
        .expect("refreshed")
}

fn sent(counts: &[(Kind, u64)]) -> BTreeMap<Kind, u64> {
    counts.iter().copied().collect()
}

#[tokio::test(start_paused = true)]
async fn an_unchanged_refresh_sends_the_three_requests_the_adapter_sends() {
    let store = store();
    load_code(&store, members());
    let outcome = refresh(&refresher(&store, BudgetLimits::default())).await;
    assert_eq!(outcome, Outcome::Unchanged);
    // Snapshot (its first keys, the lease on the code's record among them, then the 15
    // people's staff items: the code has no limits, so no add counter is read), tally: the
    // lease is free and there is nothing to write, so it is never taken. The lane policy reads the code's age from the
    // snapshot: no read of its own.
    assert_eq!(
        store.requests().by_kind(),
        sent(&[(Kind::BatchGetItem, 2), (Kind::UpdateItem, 1)])
    );
    assert_eq!(store.requests().total(), 3);
    assert_eq!(
        store.requests().attempts(),
        3,
        "nothing throttled, nothing retried"
    );
}

/// The read units of one snapshot of `snapshot`'s code (strongly consistent, each key its own).
async fn snapshot_read_units(snapshot: &CodeSnapshot) -> f64 {
    let store = store();
    store.data().load_snapshot(&tenant(), &code(), snapshot);
    store
        .snapshot(&tenant(), &code(), START_MS)
        .await
        .expect("store available")
        .expect("a code");
    store.meter().total().read_units()
}

#[tokio::test(start_paused = true)]
async fn a_snapshot_reads_only_the_add_counters_of_the_limits_the_code_has() {
    // 15 members: the first keys (profile, pause, code, the record with its lease, mark: 5
    // units), then each
    // member's staff item; with every limit on, the code's two counter items (today's and
    // all-time, a count per member in each) and each member's company-cap counter.
    let without = snapshot_read_units(&snapshot_of(members())).await;
    let mut limited = snapshot_of(members());
    limited.code.config.switches.daily_limit = Some(20);
    limited.code.config.switches.add_limit = Some(500);
    limited.profile.company_daily_cap = Some(100);
    let with_every_limit = snapshot_read_units(&limited).await;
    assert_eq!(without, 5.0 + 15.0);
    assert_eq!(with_every_limit, 5.0 + 15.0 * 2.0 + 2.0);
}

#[tokio::test(start_paused = true)]
async fn a_push_sends_seven_requests_and_the_minutes_first_spend_three_more_for_the_roster() {
    let store = store();
    load_code(&store, members()[..14].to_vec());
    let outcome = refresh(&refresher(&store, BudgetLimits::default())).await;
    assert_eq!(outcome, Outcome::Pushed(members()));
    // The tenant's first spend of the minute in this function also counts it on its
    // address's roster (its mark, the count) and reads the roster once: 2 `UpdateItem`s and
    // the `GetItem` (`a_tenants_later_spends_in_a_minute_ask_nothing_of_the_roster`).
    assert_eq!(
        store.requests().by_kind(),
        sent(&[
            (Kind::BatchGetItem, 2),
            (Kind::UpdateItem, 5 + 2),
            (Kind::PutItem, 1),
            (Kind::GetItem, 1),
        ])
    );
    // Lease, the spend's two layers (the tenant's budget, then its address's), the record (one
    // update of the item that holds the lease, fenced on it and freeing it), the push log
    // entry after it, tally: each item under 1 KB and none in a transaction, so 5 write units
    // for the push (8 when the lease was an item of its own, fenced in a transaction), 1 for
    // the tally; and the roster's 2, once a minute.
    let usage = store.meter().total();
    assert_eq!(usage.write_units, 1 + 2 + 1 + 1 + 1 + 2);
}

#[tokio::test(start_paused = true)]
async fn a_tenants_later_spends_in_a_minute_ask_nothing_of_the_roster() {
    let store = store();
    let budget = MeteredBudget::new(
        store.clone(),
        BudgetLayers::behind_one_address(BudgetLimits::default()),
    );
    let spend = |at_ms: u64| {
        let budget = budget.clone();
        async move {
            budget
                .spend(&tenant(), "api", at_ms)
                .await
                .expect("store available")
        }
    };
    let minute_start = START_MS - START_MS % 60_000;
    assert_eq!(spend(minute_start + 1_000).await, Spend::Granted);
    assert_eq!(
        store.requests().by_kind(),
        sent(&[(Kind::UpdateItem, 2 + 2), (Kind::GetItem, 1)]),
        "the two layers, the mark and the count, the roster's read"
    );
    assert_eq!(spend(minute_start + 2_000).await, Spend::Granted);
    assert_eq!(
        store.requests().by_kind(),
        sent(&[(Kind::UpdateItem, 4 + 2), (Kind::GetItem, 1)]),
        "the two layers only"
    );
    assert_eq!(spend(minute_start + 61_000).await, Spend::Granted);
    assert_eq!(
        store.requests().by_kind(),
        sent(&[(Kind::UpdateItem, 6 + 4), (Kind::GetItem, 2)]),
        "a new minute: counted and read again"
    );
}

/// The local world measured 7 at a commit before the refresh counted its put-off refreshes
/// per minute (`record_requeues`, an `UpdateItem` after the tally write, so the interceptor
/// gives it to the next refresh's count), and the lane policy read the code's age on its own:
/// the adapter now sends 7.
#[tokio::test(start_paused = true)]
async fn a_refresh_put_off_for_budget_sends_seven_requests_the_last_one_after_its_tally() {
    let store = store();
    load_code(&store, members()[..14].to_vec());
    let spent = BudgetLimits {
        per_minute: 0,
        per_hour: 0,
    };
    let outcome = refresh(&refresher(&store, spent)).await;
    assert!(matches!(outcome, Outcome::PutOff { .. }), "{outcome:?}");
    // Snapshot (2), lease, refused spend, release, tally, the minute's requeue count: the
    // first of the tenant's put-offs in a container; the next ones are put off unread.
    assert_eq!(
        store.requests().by_kind(),
        sent(&[(Kind::BatchGetItem, 2), (Kind::UpdateItem, 5)])
    );
}

fn stored_add(external: &str) -> InboxMessage {
    let fields = [
        ("ToUserName", CORP),
        ("CreateTime", "1796000000"),
        ("MsgType", "event"),
        ("Event", "change_external_contact"),
        ("ChangeType", "add_external_contact"),
        ("UserID", "staff00"),
        ("ExternalUserID", external),
        ("State", "code-1"),
    ];
    let crypto = CallbackCrypto::new(TOKEN, KEY, CORP).expect("valid");
    let encrypt = crypto.encrypt(&write_flat_xml(&fields));
    let signature = crypto.sign("1796000000", "n", &encrypt);
    let envelope = Envelope {
        to_user_name: CORP.into(),
        agent_id: None,
        encrypt,
    }
    .to_xml();
    let event = CallbackEvent::parse(&write_flat_xml(&fields)).expect("valid event");
    InboxMessage::new(
        tenant(),
        &event,
        envelope,
        &signature,
        "1796000000",
        "n",
        START_MS,
    )
}

#[tokio::test(start_paused = true)]
async fn an_add_recorded_sends_the_profile_and_code_reads_the_counting_transaction_and_the_counter_read(
) {
    let store = store();
    load_code(&store, members());
    let queues = InMemoryQueues::default();
    let recorder = FactRecorder::new(
        store.clone(),
        store.clone(),
        queues.clone(),
        queues,
        clock::now_ms,
    );
    let outcome = recorder.record(&stored_add("wm1")).await.expect("recorded");
    assert!(matches!(outcome, FactOutcome::Add { .. }), "{outcome:?}");
    // Profile; the code's item (whether it lists the member by name, and the switches the
    // quota loop reads: no seat query for a code that lists its members by name); claim and
    // three counters in one transaction; the three counters read back.
    assert_eq!(
        store.requests().by_kind(),
        sent(&[
            (Kind::GetItem, 2),
            (Kind::TransactWriteItems, 1),
            (Kind::BatchGetItem, 1),
        ])
    );
    // The transaction's four items at twice a write each.
    assert_eq!(store.meter().total().write_units, 8);
}

#[tokio::test(start_paused = true)]
async fn a_fan_out_of_a_staff_member_on_a_hundred_codes_is_one_page_of_seats_their_item_and_the_mark_cleared(
) {
    let store = store();
    let member = staff("staff00");
    store
        .data()
        .insert_staff(&tenant(), &member, StaffFacts::ACTIVE_ONLINE);
    let codes: Vec<CodeId> = (0..100)
        .map(|i| CodeId::parse(&format!("code-{i:03}")).expect("valid"))
        .collect();
    store
        .data()
        .seat(&tenant(), &member, &codes.iter().collect::<Vec<_>>());
    let queues = InMemoryQueues::default();
    let expander = Expander::new(store.clone(), queues.clone(), queues.clone(), store.clone());
    let fan_out = FanOut::new(
        tenant(),
        vec![Source::Staff { staff: member }],
        Cause::StaffChanged,
        START_MS,
        "staff00-online".into(),
    );
    let expanded = expander
        .expand(&fan_out, START_MS, || false)
        .await
        .expect("expanded");
    assert_eq!(expanded, Expanded::Done { reasons: 100 });
    assert_eq!(
        store.requests().by_kind(),
        sent(&[(Kind::Query, 1), (Kind::GetItem, 1), (Kind::DeleteItem, 1)])
    );
}

#[tokio::test(start_paused = true)]
async fn a_tick_over_one_shift_item_reads_the_minutes_eight_shards_and_handles_the_tenants_item_in_three_requests(
) {
    let store = store();
    let member = staff("staff00");
    store.data().insert_tenant(&tenant(), Timezone::default());
    store
        .data()
        .insert_staff(&tenant(), &member, StaffFacts::ACTIVE_ONLINE);
    store.data().seat(&tenant(), &member, &[&code()]);
    let minute = Minute::containing(START_MS);
    store.data().put_due(&tenant(), Subject::Shifts, minute);
    store.data().set_cursor(minute);
    let tick = Tick::new(
        store.clone(),
        store.clone(),
        InMemoryQueues::default(),
        InMemoryQueues::default(),
        clock::now_ms,
        TickSettings::DEFAULT,
    );
    let report = tick
        .run("run-1", Duration::from_secs(60))
        .await
        .expect("ran");
    assert_eq!((report.minutes_walked, report.due_items), (1, 1));
    // The run: cursor taken, the minute's 8 shard queries, the cursor moved and given back.
    // The item: tenant's profile, one query of gsi2 for the tenant's scheduled staff, and
    // its deletion (no schedule: no next edge); codes are the fan-out function's to read.
    assert_eq!(
        store.requests().by_kind(),
        sent(&[
            (Kind::UpdateItem, 3),
            (Kind::Query, 9),
            (Kind::GetItem, 1),
            (Kind::DeleteItem, 1),
        ])
    );
    // No staff member has a schedule: the gsi2 query reads nothing (billed as the minimum).
    assert_eq!(
        store
            .meter()
            .peaks()
            .get(keys::GSI2)
            .map(|p| p.read_half_units),
        Some(1)
    );
}

#[tokio::test(start_paused = true)]
async fn a_tenant_wide_fan_out_lists_its_codes_from_gsi1_keys_only_not_their_items() {
    let store = store();
    let template = CodeSnapshot {
        now_ms: START_MS,
        ..snapshot_of(members())
    };
    let codes = 4_000;
    for i in 0..codes {
        let code = CodeId::parse(&format!("code-{i:04}")).expect("valid");
        store.data().load_snapshot(&tenant(), &code, &template);
    }
    let found = store
        .codes_of(&tenant(), &Source::Tenant)
        .await
        .expect("read");
    assert_eq!(found.len(), codes);
    // Each code is its own partition key: one query of the tenant's codes partition of
    // `gsi1`, whose entries are keys (about 100 bytes), where the code items are kilobytes.
    let entry = code_index_bytes(&tenant(), &found[0]);
    let item = store.code_touch(&tenant(), &found[0]).bytes;
    assert!(entry * 4 < item, "{entry} bytes an entry, {item} an item");
    assert_eq!(store.requests().by_kind(), sent(&[(Kind::Query, 1)]));
    let read_half_units = (codes * entry).div_ceil(READ_UNIT_BYTES) as u64;
    assert_eq!(
        store
            .meter()
            .peaks()
            .get(keys::GSI1)
            .map(|p| p.read_half_units),
        Some(read_half_units),
        "eventually consistent, on gsi1"
    );
    assert_eq!(store.meter().peaks().get(TABLE), None, "no table read");
}

/// `store`'s data behind a meter whose requests are tried once (no SDK retries) and served
/// at once: a throttled request fails its call.
fn without_retries(store: &MeteredStore) -> MeteredStore {
    let config = DynamoConfig {
        request_latency: Duration::ZERO,
        retry: crate::services::dynamodb::RetryPolicy {
            max_attempts: 1,
            ..Default::default()
        },
        ..DynamoConfig::default()
    };
    MeteredStore::new(
        store.data().clone(),
        Arc::new(DynamoDb::new(config, 1)),
        Arc::new(Trace::default()),
    )
}

#[tokio::test(start_paused = true)]
async fn a_request_still_throttled_after_the_sdks_attempts_fails_the_call_and_writes_nothing() {
    let store = store();
    load_code(&store, members());
    let throttled = without_retries(&store);
    // A partition takes 1,000 write units a second: releases of a lease the code does not
    // have spend all of the record's.
    let stale = Lease {
        holder: "gone".into(),
        expires_at_ms: START_MS,
    };
    for _ in 0..1_000 {
        CodeLeases::release(&throttled, &tenant(), &code(), &stale)
            .await
            .expect("served");
    }
    let failed =
        CodeLeases::acquire(&throttled, &tenant(), &code(), "me", START_MS, 8_000, None).await;
    let error = failed.expect_err("throttled");
    assert!(error.to_string().contains("table"), "{error}");
    assert_eq!(store.data().code_lease(&tenant(), &code()), None);
    assert_eq!(throttled.meter().total().failed_requests, 1);
    assert_eq!(throttled.requests().total(), 1_001);
    assert_eq!(throttled.requests().attempts(), 1_001);
}

#[tokio::test(start_paused = true)]
async fn a_busy_codes_visits_spend_nothing_of_its_records_partition() {
    let store = store();
    load_code(&store, members());
    let metered = without_retries(&store);
    let Acquired::LeasedRefresh(lease) =
        CodeLeases::acquire(&metered, &tenant(), &code(), "me", START_MS, 8_000, None)
            .await
            .expect("served")
    else {
        panic!("the lease is free");
    };
    let rotation = vec![RotationSlot {
        staff: members()[0].clone(),
        takes: 1,
        link: Some("https://work.weixin.qq.com/ca/x".into()),
    }];
    let push = PushRecord {
        users: members(),
        pushed_at_ms: START_MS,
        fallback: false,
        fact_at_ms: vec![START_MS],
        rotation: Some(rotation),
        on_page: true,
        lane: Lane::Fast,
    };
    let recorded = metered
        .record_push(&tenant(), &code(), &lease, &push, AfterRecord::Release)
        .await
        .expect("served");
    assert_eq!(recorded, FencedWrite::Written);
    // 1,000 visits in the same second: each a read of the page and a write of its round's
    // counter, in the landing page's own tables.
    for visit in 1..=1_000 {
        let counted = metered
            .count_visit(&tenant(), &code())
            .await
            .expect("served");
        assert!(matches!(counted, Counted::Visit { number, .. } if number == visit));
    }
    let taken = CodeLeases::acquire(&metered, &tenant(), &code(), "next", START_MS, 8_000, None)
        .await
        .expect("the record's partition has its write units");
    assert!(matches!(taken, Acquired::LeasedRefresh(_)), "{taken:?}");
    assert_eq!(metered.meter().total().failed_requests, 0);
}

#[tokio::test(start_paused = true)]
async fn a_refresh_tells_the_trace_when_it_read_the_snapshot_and_let_the_code_go() {
    clock::start_at(START_MS);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&seen);
    let trace = Trace::keeping(move |event| sink.lock().expect("lock").push(event));
    let store = MeteredStore::new(
        InMemoryStore::without_history(),
        Arc::new(DynamoDb::new(DynamoConfig::default(), 30)),
        Arc::new(trace),
    );
    load_code(&store, members());
    refresh(&refresher(&store, BudgetLimits::default())).await;
    let seen = seen.lock().expect("lock");
    assert_eq!(seen.len(), 3, "{seen:?}");
    assert!(
        matches!(&seen[2], crate::observe::Seen::Tallied { tally, .. } if tally.unchanged == 1),
        "{seen:?}"
    );
    assert!(
        matches!(seen[0], crate::observe::Seen::SnapshotRead { at_ms, .. } if at_ms > START_MS)
    );
    assert!(
        matches!(seen[1], crate::observe::Seen::LeaseReleased { at_ms, .. } if at_ms > START_MS)
    );
}

/// The sweep's store, budget and queues: this compiles only if `MeteredStore` has every port
/// `SweepPorts::Store` asks for.
enum SimulatedSweep {}

impl domain::sweep::SweepPorts for SimulatedSweep {
    type Store = MeteredStore;
    type WeCom = FakeWeCom;
    type Budget = MeteredBudget;
    type Reasons = InMemoryQueues;
    type FanOuts = InMemoryQueues;
    type Notifier = InMemoryQueues;
}

#[test]
fn the_metered_store_and_budget_are_what_a_sweep_runs_on() {
    fn runs_a_sweep<P: domain::sweep::SweepPorts>() -> &'static str {
        std::any::type_name::<P::Store>()
    }
    assert!(runs_a_sweep::<SimulatedSweep>().ends_with("MeteredStore"));
}

#[tokio::test(start_paused = true)]
async fn the_sweeps_due_marks_are_a_query_per_dirty_shard_and_one_batch_read() {
    let store = store();
    for i in 0..3 {
        let code = CodeId::parse(&format!("code-{i}")).expect("valid");
        DirtyMarks::mark_dirty(&store, &tenant(), &code, DirtyWhy::LastReceive, START_MS)
            .await
            .expect("marked");
    }
    let before = store.requests().by_kind();
    assert_eq!(before, sent(&[(Kind::UpdateItem, 3)]));
    // Each new mark also wrote its index entry: three writes on the table, three on gsi1.
    assert_eq!(store.meter().total().write_units, 6);
    let due = store.due_marks(START_MS + 1, 100).await.expect("read");
    assert_eq!(due.len(), 3);
    let mut after = store.requests().by_kind();
    after.remove(&Kind::UpdateItem);
    assert_eq!(
        after,
        sent(&[
            (Kind::Query, u64::from(keys::DIRTY_SHARDS)),
            (Kind::BatchGetItem, 1)
        ])
    );
}

#[tokio::test(start_paused = true)]
async fn the_codes_of_a_staff_member_in_a_department_add_a_query_of_the_departments_seats() {
    let store = store();
    let member = staff("staff00");
    let sales = DepartmentId::parse("sales").expect("valid");
    let departments = BTreeSet::from([sales.clone()]);
    StaffLedger::set_staff_departments(store.data(), &tenant(), &member, &departments, START_MS)
        .await
        .expect("stored");
    let own = CodeId::parse("own").expect("valid");
    store.data().seat(&tenant(), &member, &[&own]);
    store.data().list_department(&tenant(), &sales, &[&code()]);
    let codes = StaffLedger::codes_of_staff(&store, &tenant(), &member)
        .await
        .expect("read");
    assert_eq!(codes.len(), 2);
    assert_eq!(
        store.requests().by_kind(),
        sent(&[(Kind::Query, 2), (Kind::GetItem, 1)])
    );
}

#[tokio::test(start_paused = true)]
async fn a_landing_visit_reads_the_page_and_counts_on_its_rounds_counter() {
    let rotating = store();
    let rotation: Vec<RotationSlot> = members()[..2]
        .iter()
        .map(|member| RotationSlot {
            staff: member.clone(),
            takes: 1,
            link: Some(format!("https://work.weixin.qq.com/ca/{member}")),
        })
        .collect();
    let mut snapshot = snapshot_of(members()[..2].to_vec());
    if let Some(pushed) = snapshot.last_pushed.as_mut() {
        pushed.rotation = Some(rotation);
    }
    rotating.data().load_snapshot(&tenant(), &code(), &snapshot);
    let page = domain::landing::LandingPage::new(rotating.clone());
    let mut picked = Vec::new();
    for _ in 0..3 {
        match page
            .visit("acme", "code-1", domain::landing::Opener::Person)
            .await
            .expect("counted")
        {
            domain::landing::Landing::Chat { staff, number, .. } => picked.push((staff, number)),
            other => panic!("{other:?}"),
        }
    }
    let numbers: Vec<u64> = picked.iter().map(|(_, number)| *number).collect();
    assert_eq!(numbers, [1, 2, 3]);
    assert_ne!(picked[0].0, picked[1].0, "the rotation moves on");
    assert_eq!(
        rotating.requests().by_kind(),
        sent(&[(Kind::GetItem, 3), (Kind::UpdateItem, 3)])
    );
    // A native code has no page: its visit is one read and counts nothing.
    let native = store();
    load_code(&native, members());
    let landing = domain::landing::LandingPage::new(native.clone())
        .visit("acme", "code-1", domain::landing::Opener::Person)
        .await
        .expect("counted");
    assert_eq!(landing, domain::landing::Landing::UnknownCode);
    assert_eq!(native.requests().by_kind(), sent(&[(Kind::GetItem, 1)]));
}
