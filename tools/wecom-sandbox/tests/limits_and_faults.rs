//! Frequency limits and injected faults, seen from a client.
#![allow(clippy::unwrap_used)]

mod common;

use common::{Harness, CORP, SECRET};
use serde_json::json;
use std::time::{Duration, Instant};

/// 20 s into a minute, so the test cannot straddle a window boundary.
const FROZEN_MS: u64 = 1_800_000_020_000;

#[tokio::test]
async fn the_minute_window_answers_45009_after_n_calls_while_another_api_is_unaffected() {
    let h = Harness::start(1).await;
    h.put_corp(&["alice"], None).await;
    h.ok(
        "PUT",
        "/_sandbox/clock",
        Some(json!({"frozen_at_ms": FROZEN_MS})),
    )
    .await;
    let token = h.token().await;
    let config_id = h.add_way(&token, 1, &["alice"], "").await;
    h.config(json!({"limit_per_minute": 3})).await;

    let get = json!({"config_id": config_id});
    for _ in 0..3 {
        assert_eq!(
            h.wecom("get_contact_way", &token, get.clone()).await["errcode"],
            0
        );
    }
    let limited = h.wecom("get_contact_way", &token, get.clone()).await;
    assert_eq!(limited["errcode"], 45009);
    assert!(limited["errmsg"]
        .as_str()
        .unwrap()
        .starts_with("api freq out of limit"));
    assert_eq!(
        h.wecom("get_contact_way", &token, get.clone()).await["errcode"],
        45009
    );

    // add_contact_way has used one call of its own window; it still has room.
    let update = json!({"config_id": config_id, "remark": "x"});
    assert_eq!(
        h.wecom("update_contact_way", &token, update).await["errcode"],
        0
    );

    // Refused calls did not count, so the next minute starts empty.
    h.ok(
        "PUT",
        "/_sandbox/clock",
        Some(json!({"advance_ms": 60_000})),
    )
    .await;
    for _ in 0..3 {
        assert_eq!(
            h.wecom("get_contact_way", &token, get.clone()).await["errcode"],
            0
        );
    }
    assert_eq!(
        h.wecom("get_contact_way", &token, get).await["errcode"],
        45009
    );
    let stats = h.ok("GET", "/_sandbox/stats", None).await;
    assert_eq!(stats["rate_limited"], 3);
}

#[tokio::test]
async fn the_hour_window_and_gettoken_are_limited_too() {
    let h = Harness::start(1).await;
    h.put_corp(&["alice"], None).await;
    h.ok(
        "PUT",
        "/_sandbox/clock",
        Some(json!({"frozen_at_ms": FROZEN_MS})),
    )
    .await;
    h.config(json!({"limit_per_hour": 2})).await;
    assert_eq!(h.gettoken(CORP, SECRET).await["errcode"], 0);
    h.ok(
        "PUT",
        "/_sandbox/clock",
        Some(json!({"advance_ms": 60_000})),
    )
    .await;
    assert_eq!(h.gettoken(CORP, SECRET).await["errcode"], 0);
    h.ok(
        "PUT",
        "/_sandbox/clock",
        Some(json!({"advance_ms": 60_000})),
    )
    .await;
    assert_eq!(h.gettoken(CORP, SECRET).await["errcode"], 45009);
    let limits = h.ok("GET", "/_sandbox/limits", None).await;
    assert_eq!(limits["windows"][CORP]["gettoken"]["hour_count"], 2);
}

#[tokio::test]
async fn a_latency_fault_delays_the_answer_then_handles_the_call() {
    let h = Harness::start(1).await;
    h.put_corp(&["alice"], None).await;
    let token = h.token().await;
    h.config(json!({"faults": [{"api": "add_contact_way", "kind": "latency", "latency_ms": 300}]}))
        .await;
    let started = Instant::now();
    let answer = h
        .wecom(
            "add_contact_way",
            &token,
            json!({"type": 1, "scene": 2, "user": ["alice"]}),
        )
        .await;
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert_eq!(answer["errcode"], 0);
    let calls = h
        .ok("GET", "/_sandbox/calls?api=add_contact_way", None)
        .await;
    assert_eq!(calls["calls"][0]["fault"], "latency 300ms");
    assert!(calls["calls"][0]["elapsed_ms"].as_u64().unwrap() >= 300);
}

#[tokio::test]
async fn an_errcode_fault_answers_system_busy_and_stops_after_first_n() {
    let h = Harness::start(1).await;
    h.put_corp(&["alice"], None).await;
    h.config(
        json!({"faults": [{"api": "gettoken", "kind": "errcode", "errcode": -1, "first": 1}]}),
    )
    .await;
    let busy = h.gettoken(CORP, SECRET).await;
    assert_eq!(busy["errcode"], -1);
    assert!(busy.get("access_token").is_none());
    assert_eq!(h.gettoken(CORP, SECRET).await["errcode"], 0);

    let config = h.ok("GET", "/_sandbox/config", None).await;
    assert_eq!(config["faults"][0]["matched"], 2);
    assert_eq!(config["faults"][0]["fired"], 1);
}

#[tokio::test]
async fn an_http_status_fault_answers_502_without_json() {
    let h = Harness::start(1).await;
    h.put_corp(&["alice"], None).await;
    let token = h.token().await;
    h.config(json!({"faults": [{"kind": "http_status", "status": 502, "corp_id": CORP}]}))
        .await;
    let response = h
        .send("get_contact_way", &token, &json!({"config_id": "x"}))
        .await
        .unwrap();
    assert_eq!(response.status(), 502);
    assert!(response.json::<serde_json::Value>().await.is_err());
    let calls = h
        .ok("GET", "/_sandbox/calls?api=get_contact_way", None)
        .await;
    assert_eq!(calls["calls"][0]["http_status"], 502);
    assert!(calls["calls"][0]["response"].is_null());
}

#[tokio::test]
async fn a_drop_fault_closes_the_connection_without_any_response() {
    let h = Harness::start(1).await;
    h.put_corp(&["alice"], None).await;
    let token = h.token().await;
    h.config(json!({"faults": [{"api": "add_contact_way", "kind": "drop", "remaining": 1}]}))
        .await;
    let body = json!({"type": 1, "scene": 2, "user": ["alice"]});
    let error = h.send("add_contact_way", &token, &body).await.unwrap_err();
    assert!(
        error.status().is_none(),
        "no HTTP response at all: {error:?}"
    );
    assert!(
        error.is_request() || error.is_connect() || error.is_body(),
        "{error:?}"
    );

    // The rule is spent; the same client goes on working.
    let answer = h.wecom("add_contact_way", &token, body).await;
    assert_eq!(answer["errcode"], 0);
    let calls = h
        .ok("GET", "/_sandbox/calls?api=add_contact_way", None)
        .await;
    assert!(calls["calls"][0]["http_status"].is_null());
    assert!(calls["calls"][0]["response"].is_null());
    assert_eq!(calls["calls"][0]["fault"], "drop");
    assert_eq!(
        h.ok("GET", "/_sandbox/contact-ways", None).await["contact_ways"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test]
async fn calls_selects_exactly_the_listed_matching_calls() {
    let h = Harness::start(1).await;
    h.put_corp(&["alice"], None).await;
    let token = h.token().await;
    let config_id = h.add_way(&token, 1, &["alice"], "").await;
    h.config(json!({"faults": [
        {"api": "get_contact_way", "kind": "errcode", "errcode": 45033, "calls": [1, 3], "name": "busy"}
    ]}))
    .await;
    let mut codes = Vec::new();
    for _ in 0..4 {
        // Calls to other APIs do not advance the rule's count.
        h.wecom(
            "update_contact_way",
            &token,
            json!({"config_id": config_id, "remark": "r"}),
        )
        .await;
        codes.push(
            h.wecom("get_contact_way", &token, json!({"config_id": config_id}))
                .await["errcode"]
                .clone(),
        );
    }
    assert_eq!(codes, [json!(45033), json!(0), json!(45033), json!(0)]);
    let calls = h
        .ok("GET", "/_sandbox/calls?api=get_contact_way", None)
        .await;
    assert_eq!(calls["calls"][0]["fault"], "busy");
    assert!(calls["calls"][1]["fault"].is_null());
}

#[tokio::test]
async fn a_rate_fault_fires_the_same_way_for_the_same_seed() {
    async fn pattern(seed: u64) -> Vec<i64> {
        let h = Harness::start(seed).await;
        h.put_corp(&["alice"], None).await;
        h.config(
            json!({"faults": [{"api": "gettoken", "kind": "errcode", "errcode": -1, "rate": 0.5}]}),
        )
        .await;
        let mut codes = Vec::new();
        for _ in 0..24 {
            codes.push(h.gettoken(CORP, SECRET).await["errcode"].as_i64().unwrap());
        }
        codes
    }
    let first = pattern(42).await;
    assert_eq!(first, pattern(42).await);
    assert!(first.contains(&-1) && first.contains(&0), "{first:?}");
}

#[tokio::test]
async fn bad_fault_rules_are_refused_with_a_400() {
    let h = Harness::start(1).await;
    for rule in [
        json!({"kind": "latency"}),
        json!({"kind": "drop", "rate": 2.0}),
        json!({"kind": "drop", "api": "list_everything"}),
        json!({"kind": "drop", "calls": [0]}),
        json!({"kind": "explode"}),
    ] {
        let (status, body) = h
            .control("PUT", "/_sandbox/config", Some(json!({"faults": [rule]})))
            .await;
        assert_eq!(status, 400, "{body}");
        assert!(body["error"].is_string());
    }
    let (status, _) = h
        .control(
            "PUT",
            "/_sandbox/config",
            Some(json!({"limit_per_minuet": 1})),
        )
        .await;
    assert_eq!(status, 400, "unknown keys are refused");
}
