//! Scans and callback delivery: what reaches qrsync's callback URL, and how often.
#![allow(clippy::unwrap_used)]

mod common;

use common::{eventually, Harness, Receiver, AES_KEY, CORP, TOKEN};
use domain::wecom::callback::{CallbackEvent, Envelope};
use domain::wecom::crypto::CallbackCrypto;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::time::Duration;

fn crypto() -> CallbackCrypto {
    CallbackCrypto::new(TOKEN, AES_KEY, CORP).unwrap()
}

/// Checks the signature and decrypts, as qrsync's callback function must.
fn open(hit: &common::Hit) -> CallbackEvent {
    let envelope = Envelope::parse(&hit.body).unwrap();
    assert_eq!(envelope.to_user_name, CORP);
    assert_eq!(envelope.agent_id, None);
    let crypto = crypto();
    crypto
        .verify(
            &hit.query["msg_signature"],
            &hit.query["timestamp"],
            &hit.query["nonce"],
            &envelope.encrypt,
        )
        .unwrap();
    let plain = crypto.decrypt(&envelope.encrypt).unwrap();
    assert_eq!(plain.receive_id, CORP);
    CallbackEvent::parse(&plain.message).unwrap()
}

async fn setup(receiver: &Receiver, users: &[&str]) -> (Harness, String) {
    let h = Harness::start(7).await;
    h.put_corp(users, Some(&receiver.url)).await;
    let token = h.token().await;
    (h, token)
}

#[tokio::test]
async fn a_scan_delivers_a_signed_encrypted_add_external_contact_event() {
    let receiver = Receiver::start(vec![], Duration::ZERO).await;
    let (h, token) = setup(&receiver, &["alice"]).await;
    let config_id = h.add_way(&token, 1, &["alice"], "shop-42").await;

    let (status, outcome) = h.scan(&config_id, false).await;
    assert_eq!(status, 200, "{outcome}");
    let scan = &outcome["scan"];
    assert_eq!(scan["userid"], "alice");
    assert_eq!(scan["state"], "shop-42");
    assert_eq!(scan["routed"], true);
    let external = scan["external_userid"].as_str().unwrap();
    assert_eq!(external.len(), 30);
    assert!(external.starts_with("wm") && external.bytes().all(|b| b.is_ascii_alphanumeric()));
    assert_eq!(outcome["delivery"]["duplicated"], false);
    assert_eq!(outcome["delivery"]["deliveries"][0]["delivered"], true);
    assert_eq!(
        outcome["delivery"]["deliveries"][0]["attempts"][0]["status"],
        200
    );
    assert_eq!(scan["delivery"]["delivered"], true);

    let hits = receiver.hits();
    assert_eq!(hits.len(), 1);
    let timestamp: u64 = hits[0].query["timestamp"].parse().unwrap();
    let event = open(&hits[0]);
    assert_eq!(event.field("ToUserName"), Some(CORP));
    assert_eq!(event.field("FromUserName"), Some("sys"));
    assert_eq!(event.field("MsgType"), Some("event"));
    assert_eq!(event.event(), Some("change_external_contact"));
    assert_eq!(event.change_type(), Some("add_external_contact"));
    assert_eq!(event.user_id(), Some("alice"));
    assert_eq!(event.field("ExternalUserID"), Some(external));
    assert_eq!(event.state(), Some("shop-42"));
    assert!(event.field("WelcomeCode").is_some_and(|c| c.len() >= 16));
    let create_time: u64 = event.create_time().unwrap().parse().unwrap();
    assert!(create_time.abs_diff(timestamp) <= 1);

    let scans = h.ok("GET", "/_sandbox/scans?since=0", None).await;
    assert_eq!(scans["scans"][0]["external_userid"], external);
    assert_eq!(scans["scans"][0]["delivery"]["attempts"], 1);
}

#[tokio::test]
async fn a_receiver_failing_twice_gets_three_attempts_and_the_third_succeeds() {
    let receiver = Receiver::start(vec![500, 500], Duration::ZERO).await;
    let (h, token) = setup(&receiver, &["alice"]).await;
    let config_id = h.add_way(&token, 1, &["alice"], "s").await;

    let (_, outcome) = h.scan(&config_id, false).await;
    let copy = &outcome["delivery"]["deliveries"][0];
    let statuses: Vec<Value> = copy["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["status"].clone())
        .collect();
    assert_eq!(statuses, [json!(500), json!(500), json!(200)]);
    assert_eq!(copy["delivered"], true);

    let hits = receiver.hits();
    assert_eq!(hits.len(), 3);
    assert!(hits
        .iter()
        .all(|hit| hit.body == hits[0].body && hit.query == hits[0].query));
    let stats = h.ok("GET", "/_sandbox/stats", None).await;
    assert_eq!(stats["retried_attempts"], 2);
    assert_eq!(stats["callbacks_delivered"], 1);
}

#[tokio::test]
async fn a_receiver_that_never_answers_200_gets_three_attempts_and_a_failed_delivery() {
    let receiver = Receiver::start(vec![503; 10], Duration::ZERO).await;
    let (h, token) = setup(&receiver, &["alice"]).await;
    let config_id = h.add_way(&token, 1, &["alice"], "s").await;

    let (_, outcome) = h.scan(&config_id, false).await;
    assert_eq!(outcome["delivery"]["deliveries"][0]["delivered"], false);
    assert_eq!(
        outcome["delivery"]["deliveries"][0]["attempts"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
    assert_eq!(receiver.hits().len(), 3);
    assert_eq!(h.ok("GET", "/_sandbox/stats", None).await["failures"], 1);
}

#[tokio::test]
async fn a_slow_receiver_times_out_on_each_attempt() {
    let receiver = Receiver::start(vec![], Duration::from_millis(500)).await;
    let (h, token) = setup(&receiver, &["alice"]).await;
    h.config(json!({"delivery_timeout_ms": 100})).await;
    let config_id = h.add_way(&token, 1, &["alice"], "s").await;

    let (_, outcome) = h.scan(&config_id, false).await;
    let attempts = outcome["delivery"]["deliveries"][0]["attempts"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(attempts.len(), 3);
    for attempt in attempts {
        assert!(
            attempt["error"].as_str().unwrap().contains("timed out"),
            "{attempt}"
        );
        assert!(attempt.get("status").is_none());
    }
}

#[tokio::test]
async fn a_duplicate_scan_sends_two_identical_posts_concurrently() {
    // The receiver takes 500 ms to answer, so overlapping copies prove concurrency.
    let receiver = Receiver::start(vec![], Duration::from_millis(500)).await;
    let (h, token) = setup(&receiver, &["alice", "bob"]).await;
    let config_id = h.add_way(&token, 2, &["alice", "bob"], "dup").await;

    let (_, outcome) = h.scan(&config_id, true).await;
    let delivery = &outcome["delivery"];
    assert_eq!(delivery["duplicated"], true);
    let delay = delivery["duplicate_delay_ms"].as_u64().unwrap();
    assert!((20..=50).contains(&delay), "{delay}");
    assert_eq!(delivery["deliveries"].as_array().unwrap().len(), 2);

    let hits = receiver.hits();
    assert_eq!(hits.len(), 2);
    assert_eq!(hits[0].body, hits[1].body);
    assert_eq!(hits[0].query, hits[1].query);
    assert!(
        hits[1].arrived < hits[0].answered,
        "the second copy arrived while the first was in flight"
    );
    let gap = hits[1].arrived - hits[0].arrived;
    assert!(
        gap >= Duration::from_millis(5) && gap < Duration::from_millis(450),
        "{gap:?}"
    );
    assert_eq!(open(&hits[0]).business_key(), open(&hits[1]).business_key());
    assert_eq!(h.ok("GET", "/_sandbox/stats", None).await["duplicates"], 1);
}

#[tokio::test]
async fn scans_pick_only_members_on_the_current_list() {
    let receiver = Receiver::start(vec![], Duration::ZERO).await;
    let (h, token) = setup(&receiver, &["alice", "bob", "carol", "dave"]).await;
    let config_id = h.add_way(&token, 2, &["alice", "bob"], "s").await;
    h.set_users(&token, &config_id, &["carol", "dave"]).await;

    let mut picked = BTreeSet::new();
    for _ in 0..40 {
        let (status, outcome) = h.scan(&config_id, false).await;
        assert_eq!(status, 200);
        picked.insert(outcome["scan"]["userid"].as_str().unwrap().to_owned());
    }
    assert_eq!(
        picked,
        BTreeSet::from(["carol".to_owned(), "dave".to_owned()])
    );
    let delivered: BTreeSet<String> = receiver
        .hits()
        .iter()
        .map(|hit| open(hit).user_id().unwrap().to_owned())
        .collect();
    assert_eq!(delivered, picked);
}

#[tokio::test]
async fn the_same_seed_routes_the_same_scans_in_two_sandboxes() {
    async fn run() -> Vec<(String, String)> {
        let receiver = Receiver::start(vec![], Duration::ZERO).await;
        let (h, token) = setup(&receiver, &["u1", "u2", "u3", "u4", "u5"]).await;
        let config_id = h
            .add_way(&token, 2, &["u1", "u2", "u3", "u4", "u5"], "s")
            .await;
        let mut picks = Vec::new();
        for _ in 0..20 {
            let (_, outcome) = h.scan(&config_id, false).await;
            picks.push((
                outcome["scan"]["userid"].as_str().unwrap().to_owned(),
                outcome["scan"]["external_userid"]
                    .as_str()
                    .unwrap()
                    .to_owned(),
            ));
        }
        picks
    }
    let first = run().await;
    assert_eq!(first, run().await);
    let distinct: BTreeSet<&str> = first.iter().map(|(u, _)| u.as_str()).collect();
    assert!(
        distinct.len() >= 3,
        "picks spread over the list: {distinct:?}"
    );
}

#[tokio::test]
async fn a_scan_of_an_empty_list_is_a_409_and_logged_as_unroutable() {
    let receiver = Receiver::start(vec![], Duration::ZERO).await;
    let (h, token) = setup(&receiver, &["alice"]).await;
    let config_id = h.add_way(&token, 2, &["alice"], "s").await;
    h.set_users(&token, &config_id, &[]).await;

    let (status, body) = h.scan(&config_id, false).await;
    assert_eq!(status, 409);
    assert!(body["error"].as_str().unwrap().contains("nobody"));
    assert_eq!(body["scan"]["routed"], false);
    assert!(body["scan"]["userid"].is_null());
    assert!(receiver.hits().is_empty());
    let scans = h.ok("GET", "/_sandbox/scans", None).await;
    assert_eq!(scans["scans"][0]["routed"], false);
    assert_eq!(
        h.ok("GET", "/_sandbox/stats", None).await["unroutable_scans"],
        1
    );

    let (status, _) = h.scan("ffffffffffffffffffffffffffffffff", false).await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn a_member_who_left_the_directory_is_skipped_by_scans_but_named_in_the_record() {
    let receiver = Receiver::start(vec![], Duration::ZERO).await;
    let (h, token) = setup(&receiver, &["alice", "bob"]).await;
    let config_id = h.add_way(&token, 2, &["alice", "bob"], "s").await;
    h.ok("DELETE", &format!("/_sandbox/corps/{CORP}/users/bob"), None)
        .await;

    for _ in 0..10 {
        let (_, outcome) = h.scan(&config_id, false).await;
        assert_eq!(outcome["scan"]["userid"], "alice");
        assert_eq!(outcome["scan"]["stale_members"], json!(["bob"]));
    }
}

#[tokio::test]
async fn a_generic_callback_is_delivered_with_the_given_fields_in_order() {
    let receiver = Receiver::start(vec![], Duration::ZERO).await;
    let (h, _) = setup(&receiver, &["alice"]).await;
    let fields = json!([
        ["ToUserName", CORP],
        ["FromUserName", "sys"],
        ["CreateTime", "1700000000"],
        ["MsgType", "event"],
        ["Event", "change_contact"],
        ["ChangeType", "delete_user"],
        ["UserID", "alice"]
    ]);
    let report = h
        .ok(
            "POST",
            "/_sandbox/callbacks",
            Some(json!({"corp_id": CORP, "fields": fields})),
        )
        .await;
    assert_eq!(report["deliveries"][0]["delivered"], true);
    let plaintext = report["plaintext"].as_str().unwrap();
    assert!(plaintext.find("<ToUserName>").unwrap() < plaintext.find("<UserID>").unwrap());

    let hits = receiver.hits();
    let event = open(&hits[0]);
    assert_eq!(event.event(), Some("change_contact"));
    assert_eq!(event.change_type(), Some("delete_user"));
    assert_eq!(event.user_id(), Some("alice"));
    assert_eq!(event.create_time(), Some("1700000000"));

    let raw = format!("<xml><ToUserName><![CDATA[{CORP}]]></ToUserName><CreateTime>1</CreateTime><MsgType><![CDATA[event]]></MsgType></xml>");
    let report = h
        .ok(
            "POST",
            "/_sandbox/callbacks",
            Some(json!({"corp_id": CORP, "plaintext": raw, "duplicate": true})),
        )
        .await;
    assert_eq!(report["deliveries"].as_array().unwrap().len(), 2);
    let hits = receiver.hits();
    assert_eq!(hits.len(), 3);
    let envelope = Envelope::parse(&hits[2].body).unwrap();
    assert_eq!(crypto().decrypt(&envelope.encrypt).unwrap().message, raw);
}

#[tokio::test]
async fn a_campaign_runs_its_scans_in_the_background_and_reports_progress() {
    let receiver = Receiver::start(vec![], Duration::ZERO).await;
    let (h, token) = setup(&receiver, &["alice", "bob", "carol"]).await;
    let first = h.add_way(&token, 2, &["alice", "bob"], "a").await;
    let second = h.add_way(&token, 1, &["carol"], "b").await;

    let started = h
        .ok(
            "POST",
            "/_sandbox/campaigns",
            Some(
                json!({"corp_id": CORP, "config_ids": [first, second], "scans": 30,
                        "per_second": 500.0, "duplicate_fraction": 0.2}),
            ),
        )
        .await;
    let id = started["campaign_id"].as_u64().unwrap();
    let done = eventually(Duration::from_secs(20), || async {
        let progress = h
            .ok("GET", &format!("/_sandbox/campaigns/{id}"), None)
            .await;
        (progress["running"] == false).then_some(progress)
    })
    .await;
    assert_eq!(done["done"], 30);
    assert_eq!(done["total"], 30);
    assert_eq!(done["failures"], 0);
    let duplicates = done["duplicates"].as_u64().unwrap();
    assert_eq!(receiver.hits().len() as u64, 30 + duplicates);
    let stats = h.ok("GET", "/_sandbox/stats", None).await;
    assert_eq!(stats["scans"], 30);
    assert_eq!(stats["duplicates"], duplicates);
}

#[tokio::test]
async fn a_campaign_can_be_stopped_and_reset_stops_them_all() {
    let receiver = Receiver::start(vec![], Duration::ZERO).await;
    let (h, token) = setup(&receiver, &["alice"]).await;
    let config_id = h.add_way(&token, 1, &["alice"], "a").await;
    let body =
        json!({"corp_id": CORP, "config_ids": [config_id], "scans": 100_000, "per_second": 20.0});
    let first = h
        .ok("POST", "/_sandbox/campaigns", Some(body.clone()))
        .await["campaign_id"]
        .clone();
    let second = h.ok("POST", "/_sandbox/campaigns", Some(body)).await["campaign_id"].clone();

    let stopped = h
        .ok("DELETE", &format!("/_sandbox/campaigns/{first}"), None)
        .await;
    assert_eq!(stopped["running"], false);
    let progress = h
        .ok("GET", &format!("/_sandbox/campaigns/{second}"), None)
        .await;
    assert_eq!(progress["running"], true);

    h.ok("POST", "/_sandbox/reset", None).await;
    let (status, _) = h
        .control("GET", &format!("/_sandbox/campaigns/{second}"), None)
        .await;
    assert_eq!(status, 404);
    let (status, _) = h
        .control(
            "POST",
            "/_sandbox/campaigns",
            Some(json!({"corp_id": CORP, "config_ids": ["x"], "scans": 1, "per_second": 1.0})),
        )
        .await;
    assert_eq!(status, 404, "the corp is gone after reset");
}

#[tokio::test]
async fn corp_setup_refuses_unusable_callback_settings() {
    let h = Harness::start(1).await;
    for callback in [
        json!({"url": "http://127.0.0.1:1/cb", "token": "t", "encoding_aes_key": "short"}),
        json!({"url": "ftp://127.0.0.1/cb", "token": "t", "encoding_aes_key": AES_KEY}),
        json!({"url": "http://127.0.0.1:1/cb", "token": "not ok!", "encoding_aes_key": AES_KEY}),
    ] {
        let (status, body) = h
            .control(
                "PUT",
                &format!("/_sandbox/corps/{CORP}"),
                Some(json!({"corp_secret": "s", "users": [], "callback": callback})),
            )
            .await;
        assert_eq!(status, 400, "{body}");
    }
}
