//! `adapters::wecom::WeComClient` against the sandbox: the contact-way calls, error
//! classification (docs/rules.md rule 9) and the token cache, as a real WeCom would exercise them.
#![allow(clippy::unwrap_used)]

mod common;

use adapters::wecom::WeComClient;
use common::{Harness, CORP, SECRET};
use domain::wecom::contact_way::{
    ContactWay, ContactWayKind, ContactWayScene, CorpCredentials, NewContactWay,
};
use domain::wecom::errors::{FailureClass, WeComError};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinSet;

/// 20 s into a minute, so a rate-limit test cannot straddle a window boundary.
const FROZEN_MS: u64 = 1_800_000_020_000;

fn creds() -> CorpCredentials {
    CorpCredentials {
        tenant: domain::ids::TenantId::parse("acme").expect("valid"),
        corp_id: CORP.into(),
        corp_secret: SECRET.into(),
    }
}

fn client(h: &Harness) -> WeComClient {
    WeComClient::new(h.url.clone(), Duration::from_secs(5))
}

fn users(names: &[&str]) -> Vec<String> {
    names.iter().map(|n| n.to_string()).collect()
}

fn multi(names: &[&str], state: &str) -> NewContactWay {
    NewContactWay {
        kind: ContactWayKind::Multi,
        scene: ContactWayScene::QrCode,
        state: state.into(),
        users: users(names),
        remark: None,
        skip_verify: true,
    }
}

/// The call log for one API, oldest first.
async fn calls(h: &Harness, api: &str) -> Vec<Value> {
    let answer = h
        .ok("GET", &format!("/_sandbox/calls?api={api}"), None)
        .await;
    answer["calls"].as_array().unwrap().clone()
}

fn errcodes(calls: &[Value]) -> Vec<i64> {
    calls
        .iter()
        .map(|c| c["response"]["errcode"].as_i64().unwrap())
        .collect()
}

async fn faults(h: &Harness, rules: Value) {
    h.config(json!({ "faults": rules })).await;
}

#[tokio::test]
async fn a_multi_person_code_is_created_then_its_users_are_replaced_and_read_back() {
    let h = Harness::start(1).await;
    h.put_corp(&["alice", "bob", "carol"], None).await;
    let wecom = client(&h);

    let created = wecom
        .add_contact_way(&creds(), &multi(&["alice", "bob"], "campaign-7"))
        .await
        .unwrap();
    assert_eq!(created.config_id.len(), 32);
    assert!(created.qr_code.is_some());
    let add = &calls(&h, "add_contact_way").await[0];
    assert_eq!(
        add["request"],
        json!({"type": 2, "scene": 2, "skip_verify": true, "state": "campaign-7", "user": ["alice", "bob"]})
    );

    let read = wecom
        .get_contact_way(&creds(), &created.config_id)
        .await
        .unwrap();
    assert_eq!(
        read,
        ContactWay {
            config_id: created.config_id.clone(),
            kind: ContactWayKind::Multi,
            state: "campaign-7".into(),
            remark: String::new(),
            users: Some(users(&["alice", "bob"])),
            party: Vec::new(),
        }
    );

    wecom
        .update_contact_way_users(&creds(), &created.config_id, &users(&["carol", "alice"]))
        .await
        .unwrap();
    let read = wecom
        .get_contact_way(&creds(), &created.config_id)
        .await
        .unwrap();
    assert_eq!(
        read.users,
        Some(users(&["carol", "alice"])),
        "replaced, not merged"
    );
    assert_eq!(read.state, "campaign-7", "fields not sent are left alone");

    let update = &calls(&h, "update_contact_way").await[0];
    assert_eq!(
        update["request"],
        json!({"config_id": created.config_id, "user": ["carol", "alice"], "party": []}),
        "exactly config_id, user and no department, no other null or empty defaults"
    );
}

#[tokio::test]
async fn a_deleted_code_is_code_gone_for_the_next_update_read_and_delete() {
    let h = Harness::start(1).await;
    h.put_corp(&["alice"], None).await;
    let wecom = client(&h);
    let config_id = wecom
        .add_contact_way(&creds(), &multi(&["alice"], ""))
        .await
        .unwrap()
        .config_id;

    wecom.del_contact_way(&creds(), &config_id).await.unwrap();

    let gone = WeComError::CodeGone { errcode: 41044 };
    let error = wecom
        .update_contact_way_users(&creds(), &config_id, &users(&["alice"]))
        .await
        .unwrap_err();
    assert_eq!(error, gone);
    assert_eq!(error.class(), FailureClass::CodeGone);
    assert!(!error.is_retryable());
    assert_eq!(
        wecom
            .get_contact_way(&creds(), &config_id)
            .await
            .unwrap_err(),
        gone
    );
    assert_eq!(
        wecom
            .del_contact_way(&creds(), &config_id)
            .await
            .unwrap_err(),
        gone
    );
}

#[tokio::test]
async fn a_list_of_101_users_is_list_too_long_on_add_and_on_update() {
    let h = Harness::start(1).await;
    let names: Vec<String> = (0..101).map(|i| format!("user{i:03}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    h.put_corp(&refs, None).await;
    let wecom = client(&h);

    let error = wecom
        .add_contact_way(&creds(), &multi(&refs, ""))
        .await
        .unwrap_err();
    assert_eq!(error, WeComError::ListTooLong);
    assert_eq!(error.class(), FailureClass::ListTooLong);
    assert_eq!(error.errcode(), Some(41041));

    let config_id = wecom
        .add_contact_way(&creds(), &multi(&refs[..100], ""))
        .await
        .unwrap()
        .config_id;
    assert_eq!(
        wecom
            .update_contact_way_users(&creds(), &config_id, &names)
            .await
            .unwrap_err(),
        WeComError::ListTooLong
    );
}

#[tokio::test]
async fn an_unknown_user_makes_the_call_staff_unusable_with_errcode_60111() {
    let h = Harness::start(1).await;
    h.put_corp(&["alice"], None).await;
    let wecom = client(&h);
    let config_id = wecom
        .add_contact_way(&creds(), &multi(&["alice"], ""))
        .await
        .unwrap()
        .config_id;

    let error = wecom
        .update_contact_way_users(&creds(), &config_id, &users(&["alice", "mallory"]))
        .await
        .unwrap_err();
    assert!(
        matches!(error, WeComError::StaffUnusable { errcode: 60111, .. }),
        "{error:?}"
    );
    assert_eq!(error.class(), FailureClass::StaffUnusable);
    assert!(!error.is_retryable());
    let read = wecom.get_contact_way(&creds(), &config_id).await.unwrap();
    assert_eq!(
        read.users,
        Some(users(&["alice"])),
        "a refused update changes nothing"
    );
}

#[tokio::test]
async fn several_calls_share_one_cached_token() {
    let h = Harness::start(1).await;
    h.put_corp(&["alice", "bob"], None).await;
    let wecom = client(&h);
    let config_id = wecom
        .add_contact_way(&creds(), &multi(&["alice"], ""))
        .await
        .unwrap()
        .config_id;
    for list in [&["bob"][..], &["alice", "bob"], &["alice"]] {
        wecom
            .update_contact_way_users(&creds(), &config_id, &users(list))
            .await
            .unwrap();
        wecom.get_contact_way(&creds(), &config_id).await.unwrap();
    }
    assert_eq!(calls(&h, "gettoken").await.len(), 1);
}

#[tokio::test]
async fn an_expired_token_costs_one_gettoken_and_one_retried_call() {
    let h = Harness::start(1).await;
    h.put_corp(&["alice"], None).await;
    let wecom = client(&h);
    let config_id = wecom
        .add_contact_way(&creds(), &multi(&["alice"], ""))
        .await
        .unwrap()
        .config_id;
    let expired = h
        .ok(
            "POST",
            "/_sandbox/tokens/expire",
            Some(json!({"corp_id": CORP})),
        )
        .await;
    assert_eq!(expired["expired"], 1);

    let read = wecom.get_contact_way(&creds(), &config_id).await.unwrap();
    assert_eq!(read.users, Some(users(&["alice"])));

    assert_eq!(
        calls(&h, "gettoken").await.len(),
        2,
        "one at start, one refresh"
    );
    assert_eq!(errcodes(&calls(&h, "get_contact_way").await), [42001, 0]);
    // The refreshed token is cached in its turn.
    wecom.get_contact_way(&creds(), &config_id).await.unwrap();
    assert_eq!(calls(&h, "gettoken").await.len(), 2);
}

#[tokio::test]
async fn a_token_refused_again_after_the_refresh_is_a_token_error_not_a_loop() {
    let h = Harness::start(1).await;
    h.put_corp(&["alice"], None).await;
    let wecom = client(&h);
    let config_id = wecom
        .add_contact_way(&creds(), &multi(&["alice"], ""))
        .await
        .unwrap()
        .config_id;
    faults(
        &h,
        json!([{"api": "get_contact_way", "kind": "errcode", "errcode": 40014}]),
    )
    .await;

    let error = wecom
        .get_contact_way(&creds(), &config_id)
        .await
        .unwrap_err();
    assert_eq!(error, WeComError::Token { errcode: 40014 });
    assert_eq!(error.class(), FailureClass::Token);
    assert_eq!(
        errcodes(&calls(&h, "get_contact_way").await),
        [40014, 40014]
    );
    assert_eq!(calls(&h, "gettoken").await.len(), 2);
}

#[tokio::test]
async fn a_wrong_secret_is_a_token_error_that_does_not_show_the_secret() {
    let h = Harness::start(1).await;
    h.put_corp(&["alice"], None).await;
    let wrong = CorpCredentials {
        tenant: domain::ids::TenantId::parse("acme").expect("valid"),
        corp_id: CORP.into(),
        corp_secret: "not-the-secret-xyz".into(),
    };
    let error = client(&h)
        .add_contact_way(&wrong, &multi(&["alice"], ""))
        .await
        .unwrap_err();
    assert_eq!(error, WeComError::Token { errcode: 40001 });
    let shown = format!("{error} {error:?} {wrong:?}");
    assert!(!shown.contains("not-the-secret-xyz"), "{shown}");
}

#[tokio::test]
async fn system_busy_is_transient() {
    let h = Harness::start(1).await;
    h.put_corp(&["alice"], None).await;
    faults(
        &h,
        json!([{"api": "add_contact_way", "kind": "errcode", "errcode": -1, "first": 1}]),
    )
    .await;
    let wecom = client(&h);

    let error = wecom
        .add_contact_way(&creds(), &multi(&["alice"], ""))
        .await
        .unwrap_err();
    assert!(matches!(error, WeComError::Transient { .. }), "{error:?}");
    assert_eq!(error.class(), FailureClass::Transient);
    assert!(error.is_retryable());
    // The client leaves the retry to its caller; the next attempt goes through.
    assert_eq!(calls(&h, "add_contact_way").await.len(), 1);
    wecom
        .add_contact_way(&creds(), &multi(&["alice"], ""))
        .await
        .unwrap();
}

#[tokio::test]
async fn an_http_502_is_transient() {
    let h = Harness::start(1).await;
    h.put_corp(&["alice"], None).await;
    faults(
        &h,
        json!([{"api": "add_contact_way", "kind": "http_status", "status": 502}]),
    )
    .await;
    let error = client(&h)
        .add_contact_way(&creds(), &multi(&["alice"], ""))
        .await
        .unwrap_err();
    assert!(
        matches!(&error, WeComError::Transient { detail } if detail.contains("502")),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_dropped_connection_is_transient_and_leaks_no_token() {
    let h = Harness::start(1).await;
    h.put_corp(&["alice"], None).await;
    faults(
        &h,
        json!([{"api": "add_contact_way", "kind": "drop", "remaining": 1}]),
    )
    .await;
    let wecom = client(&h);

    let error = wecom
        .add_contact_way(&creds(), &multi(&["alice"], ""))
        .await
        .unwrap_err();
    let WeComError::Transient { detail } = &error else {
        panic!("{error:?}");
    };
    assert!(!detail.contains("access_token"), "{detail}");
    assert!(
        !detail.contains("127.0.0.1"),
        "no URL in the detail: {detail}"
    );
    wecom
        .add_contact_way(&creds(), &multi(&["alice"], ""))
        .await
        .unwrap();
}

#[tokio::test]
async fn a_dropped_gettoken_is_transient_and_leaks_no_secret() {
    let h = Harness::start(1).await;
    h.put_corp(&["alice"], None).await;
    faults(
        &h,
        json!([{"api": "gettoken", "kind": "drop", "remaining": 1}]),
    )
    .await;
    let error = client(&h)
        .add_contact_way(&creds(), &multi(&["alice"], ""))
        .await
        .unwrap_err();
    assert_eq!(error.class(), FailureClass::Transient);
    let shown = format!("{error} {error:?}");
    assert!(!shown.contains(SECRET), "{shown}");
    assert!(!shown.contains("corpsecret"), "{shown}");
}

#[tokio::test]
async fn a_call_slower_than_the_client_timeout_is_transient() {
    let h = Harness::start(1).await;
    h.put_corp(&["alice"], None).await;
    faults(
        &h,
        json!([{"api": "add_contact_way", "kind": "latency", "latency_ms": 3000}]),
    )
    .await;
    let wecom = WeComClient::new(h.url.clone(), Duration::from_millis(300));
    let error = wecom
        .add_contact_way(&creds(), &multi(&["alice"], ""))
        .await
        .unwrap_err();
    assert!(
        matches!(&error, WeComError::Transient { detail } if detail.starts_with("timed out")),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_lowered_minute_limit_is_throttled_with_errcode_45009() {
    let h = Harness::start(1).await;
    h.put_corp(&["alice"], None).await;
    h.ok(
        "PUT",
        "/_sandbox/clock",
        Some(json!({"frozen_at_ms": FROZEN_MS})),
    )
    .await;
    let wecom = client(&h);
    let config_id = wecom
        .add_contact_way(&creds(), &multi(&["alice"], ""))
        .await
        .unwrap()
        .config_id;
    h.config(json!({"limit_per_minute": 2})).await;

    for _ in 0..2 {
        wecom.get_contact_way(&creds(), &config_id).await.unwrap();
    }
    let error = wecom
        .get_contact_way(&creds(), &config_id)
        .await
        .unwrap_err();
    assert_eq!(error, WeComError::Throttled { errcode: 45009 });
    assert_eq!(error.class(), FailureClass::Throttled);
    assert!(error.is_retryable());
}

#[tokio::test]
async fn a_concurrency_limit_is_throttled_with_errcode_45033() {
    let h = Harness::start(1).await;
    h.put_corp(&["alice"], None).await;
    faults(
        &h,
        json!([{"api": "add_contact_way", "kind": "errcode", "errcode": 45033}]),
    )
    .await;
    let error = client(&h)
        .add_contact_way(&creds(), &multi(&["alice"], ""))
        .await
        .unwrap_err();
    assert_eq!(error, WeComError::Throttled { errcode: 45033 });
}

#[tokio::test]
async fn concurrent_first_calls_for_one_corp_fetch_exactly_one_token() {
    let h = Harness::start(1).await;
    h.put_corp(&["alice"], None).await;
    // A slow gettoken keeps the window open in which every caller finds the cache empty.
    faults(
        &h,
        json!([{"api": "gettoken", "kind": "latency", "latency_ms": 300}]),
    )
    .await;
    let wecom = Arc::new(client(&h));

    let mut tasks = JoinSet::new();
    for i in 0..10 {
        let wecom = Arc::clone(&wecom);
        tasks.spawn(async move {
            wecom
                .add_contact_way(&creds(), &multi(&["alice"], &format!("s{i}")))
                .await
        });
    }
    while let Some(outcome) = tasks.join_next().await {
        outcome.unwrap().unwrap();
    }
    assert_eq!(calls(&h, "gettoken").await.len(), 1);
    assert_eq!(calls(&h, "add_contact_way").await.len(), 10);
}

#[tokio::test]
async fn callers_waiting_on_a_failed_gettoken_share_its_failure_instead_of_retrying_it() {
    let h = Harness::start(1).await;
    h.put_corp(&["alice"], None).await;
    faults(
        &h,
        json!([
            {"api": "gettoken", "kind": "latency", "latency_ms": 300},
            {"api": "gettoken", "kind": "errcode", "errcode": -1, "first": 1}
        ]),
    )
    .await;
    let wecom = Arc::new(client(&h));

    let mut tasks = JoinSet::new();
    for _ in 0..5 {
        let wecom = Arc::clone(&wecom);
        tasks.spawn(async move {
            wecom
                .add_contact_way(&creds(), &multi(&["alice"], ""))
                .await
        });
    }
    while let Some(outcome) = tasks.join_next().await {
        let error = outcome.unwrap().unwrap_err();
        assert_eq!(error.class(), FailureClass::Transient);
    }
    assert_eq!(errcodes(&calls(&h, "gettoken").await), [-1]);

    // The failure is not cached: the next caller tries again.
    wecom
        .add_contact_way(&creds(), &multi(&["alice"], ""))
        .await
        .unwrap();
    assert_eq!(errcodes(&calls(&h, "gettoken").await), [-1, 0]);
}

#[tokio::test]
async fn each_corp_uses_its_own_token() {
    let h = Harness::start(1).await;
    h.put_corp(&["alice"], None).await;
    h.ok(
        "PUT",
        "/_sandbox/corps/ww-other",
        Some(json!({"corp_secret": "other-secret", "users": ["zoe"]})),
    )
    .await;
    let other = CorpCredentials {
        tenant: domain::ids::TenantId::parse("acme").expect("valid"),
        corp_id: "ww-other".into(),
        corp_secret: "other-secret".into(),
    };
    let wecom = client(&h);

    wecom
        .add_contact_way(&creds(), &multi(&["alice"], ""))
        .await
        .unwrap();
    // zoe exists only in the other corp: this succeeds only with the other corp's token.
    let created = wecom
        .add_contact_way(&other, &multi(&["zoe"], ""))
        .await
        .unwrap();
    let ways = h
        .ok("GET", "/_sandbox/contact-ways?corp_id=ww-other", None)
        .await;
    assert_eq!(ways["contact_ways"][0]["config_id"], created.config_id);
    assert_eq!(calls(&h, "gettoken").await.len(), 2);
}

#[tokio::test]
async fn a_rotated_secret_fetches_a_new_token_instead_of_reusing_the_old_one() {
    let h = Harness::start(1).await;
    h.put_corp(&["alice"], None).await;
    let wecom = client(&h);
    wecom
        .add_contact_way(&creds(), &multi(&["alice"], ""))
        .await
        .unwrap();

    h.ok(
        "PUT",
        &format!("/_sandbox/corps/{CORP}"),
        Some(json!({"corp_secret": "rotated-secret", "users": ["alice"]})),
    )
    .await;
    let rotated = CorpCredentials {
        tenant: domain::ids::TenantId::parse("acme").expect("valid"),
        corp_id: CORP.into(),
        corp_secret: "rotated-secret".into(),
    };
    wecom
        .add_contact_way(&rotated, &multi(&["alice"], ""))
        .await
        .unwrap();
    assert_eq!(calls(&h, "gettoken").await.len(), 2);
}

/// A `TokenStore` in memory: what several processes share through the table.
#[derive(Default)]
struct MemoryTokens {
    token: std::sync::Mutex<Option<adapters::wecom::SharedToken>>,
    lock_until_ms: std::sync::Mutex<u64>,
}

#[async_trait::async_trait]
impl adapters::wecom::TokenStore for MemoryTokens {
    async fn load(
        &self,
        _: &str,
    ) -> Result<Option<adapters::wecom::SharedToken>, domain::StoreError> {
        Ok(self.token.lock().unwrap().clone())
    }
    async fn try_lock(
        &self,
        _: &str,
        now_ms: u64,
        until_ms: u64,
    ) -> Result<bool, domain::StoreError> {
        let mut lock = self.lock_until_ms.lock().unwrap();
        if *lock >= now_ms {
            return Ok(false);
        }
        *lock = until_ms;
        Ok(true)
    }
    async fn save(
        &self,
        _: &str,
        token: &adapters::wecom::SharedToken,
    ) -> Result<(), domain::StoreError> {
        *self.token.lock().unwrap() = Some(token.clone());
        *self.lock_until_ms.lock().unwrap() = 0;
        Ok(())
    }
}

/// Three "containers" (clients) sharing one store.
fn containers(h: &Harness, store: &Arc<MemoryTokens>) -> Vec<Arc<WeComClient>> {
    (0..3)
        .map(|_| {
            let shared: Arc<dyn adapters::wecom::TokenStore> = store.clone();
            Arc::new(client(h).with_token_store(shared))
        })
        .collect()
}

#[tokio::test]
async fn processes_sharing_a_token_store_fetch_one_token_between_them() {
    let h = Harness::start(1).await;
    h.put_corp(&["alice"], None).await;
    faults(
        &h,
        json!([{"api": "gettoken", "kind": "latency", "latency_ms": 300}]),
    )
    .await;
    let store = Arc::new(MemoryTokens::default());
    let mut tasks = JoinSet::new();
    for (i, wecom) in containers(&h, &store).into_iter().enumerate() {
        for j in 0..3 {
            let wecom = Arc::clone(&wecom);
            tasks.spawn(async move {
                wecom
                    .add_contact_way(&creds(), &multi(&["alice"], &format!("s{i}{j}")))
                    .await
            });
        }
    }
    while let Some(outcome) = tasks.join_next().await {
        outcome.unwrap().unwrap();
    }
    assert_eq!(calls(&h, "gettoken").await.len(), 1);
    assert!(store.token.lock().unwrap().is_some());
}

#[tokio::test]
async fn an_expired_shared_token_is_replaced_once_for_every_process() {
    let h = Harness::start(1).await;
    h.put_corp(&["alice"], None).await;
    let store = Arc::new(MemoryTokens::default());
    let processes = containers(&h, &store);
    for wecom in &processes {
        wecom
            .add_contact_way(&creds(), &multi(&["alice"], ""))
            .await
            .unwrap();
    }
    assert_eq!(calls(&h, "gettoken").await.len(), 1, "one token for all");
    h.ok("POST", "/_sandbox/tokens/expire", Some(json!({})))
        .await;
    for wecom in &processes {
        wecom
            .add_contact_way(&creds(), &multi(&["alice"], ""))
            .await
            .unwrap();
    }
    assert_eq!(
        calls(&h, "gettoken").await.len(),
        2,
        "the first process to meet 42001 fetched; the others took its token"
    );
    let adds = errcodes(&calls(&h, "add_contact_way").await);
    assert_eq!(adds.iter().filter(|c| **c == 42001).count(), 3);
}
