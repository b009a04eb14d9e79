use super::*;
use crate::observe::Seen;
use crate::services::wecom::{Latency, Limits, WeComConfig, Window};
use domain::wecom::contact_way::{ContactWayKind, ContactWayScene};
use std::sync::Mutex;
use tokio::time::{Duration, Instant};

const LATENCY: Duration = Duration::from_millis(100);

fn corp(id: &str) -> CorpCredentials {
    CorpCredentials {
        tenant: domain::ids::TenantId::parse("acme").expect("valid"),
        corp_id: id.to_owned(),
        corp_secret: "secret".to_owned(),
    }
}

/// A WeCom whose every call takes exactly 100 ms, with the windows given.
fn service(limits: Limits) -> Arc<WeCom> {
    let config = WeComConfig {
        limits,
        latency: Latency {
            median: LATENCY,
            p99: LATENCY,
        },
    };
    Arc::new(WeCom::new(config, 3))
}

fn limits(corp_per_minute: u32, ip_per_minute: u32) -> Limits {
    Limits {
        corp_per_minute,
        ip_per_minute,
        ..Limits::PUBLISHED
    }
}

fn wecom(limits: Limits, egress: EgressIps) -> (SimWeCom, Arc<Mutex<Vec<Seen>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&seen);
    let trace = Trace::keeping(move |event| sink.lock().expect("lock").push(event));
    let contact_ways = FakeWeCom::default();
    contact_ways.forget_history();
    let wecom = SimWeCom::new(contact_ways, service(limits), egress, Arc::new(trace));
    (wecom, seen)
}

fn users(names: &[&str]) -> Vec<String> {
    names.iter().map(|n| (*n).to_owned()).collect()
}

#[tokio::test(start_paused = true)]
async fn an_accepted_update_lands_after_wecoms_latency_and_is_traced_at_that_moment() {
    clock::start_at(1_796_000_000_000);
    let (wecom, seen) = wecom(Limits::PUBLISHED, EgressIps::Pool);
    let start = Instant::now();
    wecom
        .replace_users(&corp("corp-a"), "cw-1", &users(&["alice", "bob"]))
        .await
        .expect("accepted");
    assert_eq!(start.elapsed(), LATENCY);
    assert_eq!(wecom.holds("cw-1"), users(&["alice", "bob"]));
    assert_eq!(
        *seen.lock().expect("lock"),
        [Seen::ListLanded {
            config_id: "cw-1".into(),
            users: users(&["alice", "bob"]),
            at_ms: 1_796_000_000_100,
        }]
    );
}

#[tokio::test(start_paused = true)]
async fn an_update_over_the_corps_minute_is_the_clients_45009_and_changes_nothing() {
    clock::start_at(1_796_000_000_000);
    let (wecom, seen) = wecom(limits(2, 20_000), EgressIps::Pool);
    let a = corp("corp-a");
    for list in [["alice"], ["bob"]] {
        wecom
            .replace_users(&a, "cw-1", &users(&list))
            .await
            .expect("accepted");
    }
    let refused = wecom.replace_users(&a, "cw-1", &users(&["carol"])).await;
    assert_eq!(refused, Err(WeComError::Throttled { errcode: 45009 }));
    assert_eq!(wecom.holds("cw-1"), users(&["bob"]));
    assert_eq!(
        seen.lock().expect("lock").len(),
        2,
        "only accepted lists land"
    );
    tokio::time::sleep(Duration::from_secs(60)).await;
    wecom
        .replace_users(&a, "cw-1", &users(&["carol"]))
        .await
        .expect("the next minute opens the window");
}

#[tokio::test(start_paused = true)]
async fn corps_behind_one_nat_address_share_its_window_and_in_the_pool_they_do_not() {
    for (egress, refused) in [(EgressIps::Placed(1), true), (EgressIps::Pool, false)] {
        clock::start_at(1_796_000_000_000);
        let (wecom, _) = wecom(limits(10, 3), egress.clone());
        for id in ["corp-a", "corp-a", "corp-b"] {
            wecom
                .contact_way(&corp(id), "cw-1")
                .await
                .expect("within every window");
        }
        let fourth = wecom.contact_way(&corp("corp-b"), "cw-1").await;
        assert_eq!(fourth.is_err(), refused, "{egress:?}");
        let by_window = wecom.service.counters().refused_by_window;
        assert_eq!(by_window.contains_key(&Window::IpMinute), refused);
    }
}

#[test]
fn a_corps_calls_leave_from_every_placed_address_from_its_own_relayed_one_and_in_the_pool_from_its_own(
) {
    let placed = EgressIps::Placed(4);
    let used: std::collections::BTreeSet<String> = (1..=100)
        .map(|n| placed.address_of(&corp("corp-a"), domain::fakes::scrambled(n)))
        .collect();
    assert_eq!(used.len(), 4, "{used:?}");
    assert_eq!(
        EgressIps::Pool.address_of(&corp("corp-a"), 1),
        EgressIps::Pool.address_of(&corp("corp-a"), 2)
    );
    let addresses = EgressAddresses::parse("198.51.100.1,198.51.100.2").expect("two");
    let relayed = EgressIps::Relayed(addresses.clone());
    let tenant_a = corp("corp-a");
    let charged = addresses.address_for(&tenant_a.tenant).to_owned();
    for n in 1..=100 {
        assert_eq!(
            relayed.address_of(&tenant_a, domain::fakes::scrambled(n)),
            charged,
            "every call leaves from the address the budget charges"
        );
    }
    assert_eq!(
        EgressIps::of_template(0, 0, addresses.clone()),
        EgressIps::Pool
    );
    assert_eq!(
        EgressIps::of_template(2, 0, addresses.clone()),
        EgressIps::Placed(2)
    );
    assert_eq!(
        EgressIps::of_template(2, 2, addresses.clone()),
        EgressIps::Relayed(addresses)
    );
}

#[tokio::test(start_paused = true)]
async fn listing_contact_ways_is_one_call_per_page_of_a_thousand() {
    clock::start_at(1_796_000_000_000);
    let (wecom, _) = wecom(Limits::PUBLISHED, EgressIps::Pool);
    let a = corp("corp-a");
    let way = NewContactWay {
        kind: ContactWayKind::Multi,
        scene: ContactWayScene::QrCode,
        state: "code-1".into(),
        users: users(&["alice"]),
        remark: None,
        skip_verify: true,
    };
    for _ in 0..1_001 {
        wecom
            .contact_ways()
            .create(&a, &way)
            .await
            .expect("created");
    }
    let before = wecom.service.counters().accepted;
    let ids = wecom
        .created_between(&a, 0, u64::MAX)
        .await
        .expect("listed");
    assert_eq!(ids.len(), 1_001);
    assert_eq!(wecom.service.counters().accepted - before, 2);
    let way = wecom.contact_way(&a, "cw-7").await.expect("read");
    assert_eq!(way.state, "code-1");
}

#[tokio::test(start_paused = true)]
async fn calls_of_one_address_made_together_go_in_one_relay_invocation() {
    use crate::services::lambda::{Account, FunctionConfig};
    clock::start_at(1_796_000_000_000);
    let account = Arc::new(Account::new(1_000));
    account
        .create_function(FunctionConfig::new(
            "WeComRelay1Function",
            Duration::from_secs(10),
            128,
        ))
        .expect("created");
    let addresses = EgressAddresses::parse("198.51.100.1").expect("one");
    let (wecom, _) = wecom(Limits::PUBLISHED, EgressIps::Relayed(addresses.clone()));
    let wecom = wecom.through_relays(
        Arc::clone(&account),
        &addresses,
        &["WeComRelay1Function".to_owned()],
    );
    let a = corp("corp-a");
    let reads = (0..5).map(|_| wecom.contact_way(&a, "cw-1"));
    for read in futures::future::join_all(reads).await {
        read.expect("WeCom answered through the relay");
    }
    let together = account
        .counters("WeComRelay1Function")
        .expect("counted")
        .invocations;
    tokio::time::sleep(Duration::from_secs(1)).await;
    wecom
        .contact_way(&a, "cw-1")
        .await
        .expect("WeCom answered through the relay");
    let later = account
        .counters("WeComRelay1Function")
        .expect("counted")
        .invocations;
    assert_eq!(
        (together, later),
        (1, 2),
        "five at once in one, a later one alone"
    );
}
