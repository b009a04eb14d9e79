//! What the in-memory table holds per code and what a metered refresh costs, measured: `cargo
//! test -p qrsync-scale --release --test store_memory -- --ignored --nocapture --exact <test>`,
//! one test at a time (memory freed by one test is reused by the next, which then grows less).
//! Its own test binary, so nothing else runs in the process while it measures.

use domain::budget::BudgetLayers;
use domain::codes::{CodeSnapshot, PushedList, StoredCode};
use domain::fakes::InMemoryStore;
use domain::ids::{CodeId, StaffId, TenantId};
use domain::lanes::CodeAge;
use domain::membership::{CodeConfig, Family, StaffFacts, Switches};
use domain::tenants::{TenantProfile, Timezone};
use std::collections::HashMap;

/// Staff members of the measured tenant: a giant's 2,000 (profile.toml), each on about
/// 1,500 codes of 200,000.
const STAFF: usize = 2_000;
const MEMBERS: usize = 15;

fn resident_bytes() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").expect("a Linux /proc");
    let kb: usize = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/self/status");
    kb * 1024
}

fn snapshot(members: Vec<StaffId>, at_ms: u64) -> CodeSnapshot {
    CodeSnapshot {
        profile: TenantProfile {
            corp_id: "wwcorp0000000001".into(),
            callback_token: "token".into(),
            encoding_aes_key: "jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C".into(),
            previous_callback: None,
            corp_secret: "secret".into(),
            timezone: Timezone::default(),
            company_daily_cap: None,
        },
        code: StoredCode {
            config: CodeConfig {
                family: Family::Native,
                members: members.clone(),
                departments: vec![],
                fallback: vec![],
                switches: Switches {
                    offline_check: true,
                    ..Switches::default()
                },
            },
            config_id: Some(format!("cfg{at_ms:013}")),
            created_with: vec![],
        },
        staff: members
            .iter()
            .map(|member| (member.clone(), StaffFacts::ACTIVE_ONLINE))
            .collect(),
        adds: HashMap::new(),
        departments: HashMap::new(),
        now_ms: at_ms,
        // Every code pushed once: the record a day's refreshes keep rewriting.
        last_pushed: Some(PushedList {
            users: members,
            pushed_at_ms: at_ms,
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

#[test]
#[ignore = "a measurement: run it alone, in release, with --nocapture"]
fn the_in_memory_table_holds_a_code_of_fifteen_members_in_so_many_bytes() {
    let codes: usize = std::env::var("STORE_MEMORY_CODES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(200_000);
    let tenant = TenantId::parse("giant").expect("valid");
    let staff: Vec<StaffId> = (0..STAFF)
        .map(|j| StaffId::parse(&format!("staff{j:05}")).expect("valid"))
        .collect();
    let store = InMemoryStore::without_history();
    let before = resident_bytes();
    for i in 0..codes {
        let code = CodeId::parse(&format!("code-{i:07}")).expect("valid");
        let members = (0..MEMBERS)
            .map(|k| staff[(i * 7 + k * 131) % STAFF].clone())
            .collect();
        let at_ms = 1_796_000_000_000 + i as u64;
        store.load_snapshot(&tenant, &code, &snapshot(members, at_ms));
        store.set_age(
            &tenant,
            &code,
            CodeAge {
                created_at_ms: at_ms,
                updated_at_ms: at_ms,
            },
        );
    }
    let grown = resident_bytes().saturating_sub(before);
    let per_code = grown / codes.max(1);
    println!(
        "{codes} codes of {MEMBERS} members over {STAFF} staff: RSS grew {} MB, {per_code} bytes per code",
        grown / (1024 * 1024)
    );
    assert!(per_code > 0, "loading {codes} codes grew nothing");
    assert!(store
        .stored_code(&tenant, &CodeId::parse("code-0000000").expect("valid"))
        .is_some());
}

/// What one metered refresh costs in wall time: `STORE_REFRESH_CODES` codes (20,000 by
/// default) refreshed once each, unchanged, through the domain's `Refresher` over
/// `MeteredStore` on tokio's paused clock.
#[test]
#[ignore = "a measurement: run it alone, in release, with --nocapture"]
fn a_metered_unchanged_refresh_takes_so_many_microseconds_of_wall_time() {
    use domain::fakes::FakeWeCom;
    use domain::lanes::{Lane, LanePolicy, LaneSwitch};
    use domain::refresh::{LeaseTimes, Outcome, RefreshRequest, Refresher};
    use qrsync_scale::observe::Trace;
    use qrsync_scale::ports::store::{MeteredBudget, MeteredStore};
    use qrsync_scale::services::clock;
    use qrsync_scale::services::dynamodb::{DynamoConfig, DynamoDb};
    use std::sync::Arc;

    let codes: usize = std::env::var("STORE_REFRESH_CODES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(20_000);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let start_ms = 1_796_000_000_000;
        clock::start_at(start_ms);
        let tenant = TenantId::parse("giant").expect("valid");
        let staff: Vec<StaffId> = (0..STAFF)
            .map(|j| StaffId::parse(&format!("staff{j:05}")).expect("valid"))
            .collect();
        let store = MeteredStore::new(
            InMemoryStore::without_history(),
            Arc::new(DynamoDb::new(DynamoConfig::default(), 30)),
            Arc::new(Trace::default()),
        );
        let ids: Vec<CodeId> = (0..codes)
            .map(|i| CodeId::parse(&format!("code-{i:07}")).expect("valid"))
            .collect();
        for (i, code) in ids.iter().enumerate() {
            let members = (0..MEMBERS)
                .map(|k| staff[(i * 7 + k * 131) % STAFF].clone())
                .collect();
            store
                .data()
                .load_snapshot(&tenant, code, &snapshot(members, start_ms));
            let age = CodeAge {
                created_at_ms: start_ms,
                updated_at_ms: start_ms,
            };
            store.data().set_age(&tenant, code, age);
        }
        let lanes = LanePolicy {
            switch: LaneSwitch::Auto,
            quiet_after_ms: 3 * 24 * 3_600_000,
            fast_tenants: Default::default(),
            slow_interval_ms: 60_000,
        };
        let refresher = Refresher::new(
            store.clone(),
            FakeWeCom::default(),
            MeteredBudget::new(store.clone(), BudgetLayers::behind_one_address(Default::default())),
            clock::now_ms,
            lanes,
            LeaseTimes {
                duration_ms: 8_000,
                call_ms: 3_500,
            },
        );
        let wall = std::time::Instant::now();
        for code in &ids {
            let fact_at_ms = [clock::now_ms()];
            let outcome = refresher
                .refresh(RefreshRequest {
                    tenant: &tenant,
                    code,
                    fact_at_ms: &fact_at_ms,
                    lane: Lane::Fast,
                    resync: false,
                    deadline_ms: clock::now_ms() + 60_000,
                })
                .await
                .expect("refreshed");
            assert_eq!(outcome, Outcome::Unchanged);
        }
        let elapsed = wall.elapsed();
        let per_refresh = elapsed.as_micros() / codes.max(1) as u128;
        println!(
            "{codes} unchanged refreshes in {} ms of wall time: {per_refresh} us each, {} requests, {:.1} read units",
            elapsed.as_millis(),
            store.requests().total(),
            store.meter().total().read_units(),
        );
        assert_eq!(store.requests().total(), 6 * codes as u64);
    });
}
