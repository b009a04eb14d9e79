//! The WeCom API as a client sees it: tokens, the four contact-way operations and their
//! errcodes, and the call log.
#![allow(clippy::unwrap_used)]

mod common;

use common::{Harness, CORP, SECRET};
use serde_json::json;

#[tokio::test]
async fn a_token_is_issued_for_the_right_secret_and_refused_otherwise() {
    let h = Harness::start(1).await;
    h.put_corp(&["alice"], None).await;

    let answer = h.gettoken(CORP, SECRET).await;
    assert_eq!(answer["errcode"], 0);
    assert_eq!(answer["errmsg"], "ok");
    assert_eq!(answer["expires_in"], 7200);
    assert!(answer["access_token"].as_str().unwrap().len() >= 32);

    assert_eq!(h.gettoken("ww-unknown", SECRET).await["errcode"], 40013);
    assert_eq!(h.gettoken(CORP, "wrong").await["errcode"], 40001);
}

#[tokio::test]
async fn an_expired_token_answers_42001_and_an_unknown_or_missing_one_is_refused() {
    let h = Harness::start(1).await;
    h.put_corp(&["alice"], None).await;
    let token = h.token().await;
    let get = json!({"config_id": "0123456789abcdef0123456789abcdef"});
    assert_eq!(
        h.wecom("get_contact_way", &token, get.clone()).await["errcode"],
        41044
    );

    let expired = h
        .ok(
            "POST",
            "/_sandbox/tokens/expire",
            Some(json!({"corp_id": CORP})),
        )
        .await;
    assert_eq!(expired["expired"], 1);
    assert_eq!(
        h.wecom("get_contact_way", &token, get.clone()).await["errcode"],
        42001
    );
    assert_eq!(
        h.wecom("get_contact_way", "no-such-token", get.clone())
            .await["errcode"],
        40014
    );

    let missing = h
        .http
        .post(format!("{}/cgi-bin/externalcontact/get_contact_way", h.url))
        .json(&get)
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 200);
    assert_eq!(
        missing.json::<serde_json::Value>().await.unwrap()["errcode"],
        41001
    );

    let fresh = h.token().await;
    assert_eq!(
        h.wecom("get_contact_way", &fresh, get).await["errcode"],
        41044
    );
}

#[tokio::test]
async fn several_tokens_of_one_corp_are_valid_at_once_until_each_expires() {
    let h = Harness::start(1).await;
    h.put_corp(&["alice"], None).await;
    h.config(json!({"token_lifetime_secs": 60})).await;
    h.ok(
        "PUT",
        "/_sandbox/clock",
        Some(json!({"frozen_at_ms": 1_800_000_000_000u64})),
    )
    .await;
    let first = h.token().await;
    h.ok(
        "PUT",
        "/_sandbox/clock",
        Some(json!({"advance_ms": 30_000})),
    )
    .await;
    let answer = h.gettoken(CORP, SECRET).await;
    assert_eq!(answer["expires_in"], 60);
    let second = answer["access_token"].as_str().unwrap().to_owned();
    assert_ne!(first, second);

    let add = json!({"type": 1, "scene": 1, "user": ["alice"]});
    assert_eq!(
        h.wecom("add_contact_way", &first, add.clone()).await["errcode"],
        0
    );
    assert_eq!(
        h.wecom("add_contact_way", &second, add.clone()).await["errcode"],
        0
    );

    h.ok(
        "PUT",
        "/_sandbox/clock",
        Some(json!({"advance_ms": 30_000})),
    )
    .await;
    assert_eq!(
        h.wecom("add_contact_way", &first, add.clone()).await["errcode"],
        42001
    );
    assert_eq!(h.wecom("add_contact_way", &second, add).await["errcode"], 0);
}

#[tokio::test]
async fn a_contact_way_can_be_added_read_updated_with_replace_semantics_and_deleted() {
    let h = Harness::start(1).await;
    h.put_corp(&["alice", "bob", "carol", "dave"], None).await;
    let token = h.token().await;

    let added = h
        .wecom(
            "add_contact_way",
            &token,
            json!({"type": 2, "scene": 2, "remark": "door", "state": "shop-1", "skip_verify": false,
                   "user": ["alice", "bob"], "party": [7]}),
        )
        .await;
    assert_eq!(added["errcode"], 0, "{added}");
    let config_id = added["config_id"].as_str().unwrap().to_owned();
    assert_eq!(config_id.len(), 32);
    assert!(config_id.bytes().all(|b| b.is_ascii_hexdigit()));
    assert!(added["qr_code"].as_str().unwrap().starts_with("http"));

    let got = h
        .wecom("get_contact_way", &token, json!({"config_id": config_id}))
        .await;
    assert_eq!(got["errcode"], 0);
    let way = &got["contact_way"];
    assert_eq!(way["config_id"], config_id.as_str());
    assert_eq!(way["type"], 2);
    assert_eq!(way["scene"], 2);
    assert_eq!(way["remark"], "door");
    assert_eq!(way["state"], "shop-1");
    assert_eq!(way["skip_verify"], false);
    assert_eq!(way["user"], json!(["alice", "bob"]));
    assert_eq!(way["party"], json!([7]));
    assert_eq!(way["qr_code"], added["qr_code"]);

    let updated = h
        .wecom(
            "update_contact_way",
            &token,
            json!({"config_id": config_id, "user": ["carol", "dave"], "remark": "window"}),
        )
        .await;
    assert_eq!(updated, json!({"errcode": 0, "errmsg": "ok"}));
    let way = h
        .wecom("get_contact_way", &token, json!({"config_id": config_id}))
        .await["contact_way"]
        .clone();
    assert_eq!(
        way["user"],
        json!(["carol", "dave"]),
        "user replaces the list"
    );
    assert_eq!(way["remark"], "window");
    assert_eq!(way["state"], "shop-1", "absent fields are kept");
    assert_eq!(way["party"], json!([7]), "absent party is kept");
    assert_eq!(way["skip_verify"], false);

    h.wecom(
        "update_contact_way",
        &token,
        json!({"config_id": config_id, "party": [], "type": 1}),
    )
    .await;
    let way = h
        .wecom("get_contact_way", &token, json!({"config_id": config_id}))
        .await["contact_way"]
        .clone();
    assert_eq!(way["party"], json!([]), "party replaces the list");
    assert_eq!(way["type"], 2, "type cannot change");

    let sandbox_view = h
        .ok("GET", &format!("/_sandbox/contact-ways/{config_id}"), None)
        .await;
    assert_eq!(sandbox_view["user"], json!(["carol", "dave"]));
    assert_eq!(sandbox_view["updates"], 2);

    let deleted = h
        .wecom("del_contact_way", &token, json!({"config_id": config_id}))
        .await;
    assert_eq!(deleted["errcode"], 0);
    let gone = h
        .wecom("get_contact_way", &token, json!({"config_id": config_id}))
        .await;
    assert_eq!(gone["errcode"], 41044);
    assert_eq!(
        h.wecom("del_contact_way", &token, json!({"config_id": config_id}))
            .await["errcode"],
        41044
    );
}

#[tokio::test]
async fn type_scene_and_the_single_user_rule_are_validated_with_wecoms_errcodes() {
    let h = Harness::start(1).await;
    h.put_corp(&["alice", "bob"], None).await;
    let token = h.token().await;
    let cases = [
        (json!({"scene": 2, "user": ["alice"]}), 41037),
        (json!({"type": 3, "scene": 2, "user": ["alice"]}), 41039),
        (json!({"type": "1", "scene": 2, "user": ["alice"]}), 41039),
        (json!({"type": 1, "user": ["alice"]}), 41038),
        (json!({"type": 1, "scene": 0, "user": ["alice"]}), 41040),
        (
            json!({"type": 1, "scene": 2, "user": ["alice", "bob"]}),
            40058,
        ),
        (json!({"type": 1, "scene": 2}), 40058),
        (
            json!({"type": 2, "scene": 2, "user": ["alice"], "state": "x".repeat(31)}),
            40058,
        ),
        (
            json!({"type": 2, "scene": 2, "user": ["alice"], "state": null}),
            40058,
        ),
    ];
    for (body, errcode) in cases {
        let answer = h.wecom("add_contact_way", &token, body.clone()).await;
        assert_eq!(answer["errcode"], errcode, "{body} -> {answer}");
        assert!(answer["errmsg"].as_str().is_some());
    }
    let thirty = "状".repeat(30);
    let answer = h
        .wecom(
            "add_contact_way",
            &token,
            json!({"type": 2, "scene": 1, "user": ["alice"], "state": thirty}),
        )
        .await;
    assert_eq!(answer["errcode"], 0, "30 characters are allowed");
    assert!(answer.get("qr_code").is_none(), "scene 1 has no QR code");
}

#[tokio::test]
async fn more_than_100_users_are_refused_with_41041() {
    let h = Harness::start(1).await;
    let users: Vec<String> = (0..101).map(|i| format!("user{i:03}")).collect();
    let refs: Vec<&str> = users.iter().map(String::as_str).collect();
    h.put_corp(&refs, None).await;
    let token = h.token().await;

    let answer = h
        .wecom(
            "add_contact_way",
            &token,
            json!({"type": 2, "scene": 2, "user": users}),
        )
        .await;
    assert_eq!(answer["errcode"], 41041);

    let config_id = h.add_way(&token, 2, &refs[..100], "").await;
    let answer = h
        .wecom(
            "update_contact_way",
            &token,
            json!({"config_id": config_id, "user": users}),
        )
        .await;
    assert_eq!(answer["errcode"], 41041);
}

#[tokio::test]
async fn an_unknown_config_id_answers_41044_and_a_missing_one_41043() {
    let h = Harness::start(1).await;
    h.put_corp(&["alice"], None).await;
    let token = h.token().await;
    for api in ["get_contact_way", "update_contact_way", "del_contact_way"] {
        let unknown = h
            .wecom(
                api,
                &token,
                json!({"config_id": "ffffffffffffffffffffffffffffffff"}),
            )
            .await;
        assert_eq!(unknown["errcode"], 41044, "{api}");
        assert_eq!(
            h.wecom(api, &token, json!({})).await["errcode"],
            41043,
            "{api}"
        );
    }

    let config_id = h.add_way(&token, 1, &["alice"], "").await;
    h.ok(
        "PUT",
        "/_sandbox/corps/ww-other",
        Some(json!({"corp_secret": "other", "users": ["alice"]})),
    )
    .await;
    let other_token = h.gettoken("ww-other", "other").await["access_token"]
        .as_str()
        .unwrap()
        .to_owned();
    let answer = h
        .wecom(
            "get_contact_way",
            &other_token,
            json!({"config_id": config_id}),
        )
        .await;
    assert_eq!(answer["errcode"], 41044, "another corp's config is unknown");
}

#[tokio::test]
async fn a_userid_outside_the_directory_answers_60111_and_a_departed_member_stays_listed() {
    let h = Harness::start(1).await;
    h.put_corp(&["alice", "bob"], None).await;
    let token = h.token().await;
    let answer = h
        .wecom(
            "add_contact_way",
            &token,
            json!({"type": 2, "scene": 2, "user": ["alice", "mallory"]}),
        )
        .await;
    assert_eq!(answer["errcode"], 60111);

    let config_id = h.add_way(&token, 2, &["alice", "bob"], "").await;
    let removed = h
        .ok("DELETE", &format!("/_sandbox/corps/{CORP}/users/bob"), None)
        .await;
    assert_eq!(removed["still_listed_on"], json!([config_id]));

    let way = h
        .wecom("get_contact_way", &token, json!({"config_id": config_id}))
        .await;
    assert_eq!(way["contact_way"]["user"], json!(["alice", "bob"]));
    let answer = h
        .wecom(
            "update_contact_way",
            &token,
            json!({"config_id": config_id, "user": ["alice", "bob"]}),
        )
        .await;
    assert_eq!(answer["errcode"], 60111);
    let answer = h
        .wecom(
            "update_contact_way",
            &token,
            json!({"config_id": config_id, "remark": "ok"}),
        )
        .await;
    assert_eq!(answer["errcode"], 0, "other fields can still change");

    h.ok("PUT", &format!("/_sandbox/corps/{CORP}/users/bob"), None)
        .await;
    h.set_users(&token, &config_id, &["bob"]).await;
}

#[tokio::test]
async fn the_call_log_redacts_secrets_and_filters_by_api() {
    let h = Harness::start(1).await;
    h.put_corp(&["alice"], None).await;
    let token = h.token().await;
    let config_id = h.add_way(&token, 1, &["alice"], "s").await;
    h.wecom(
        "get_contact_way",
        &token,
        json!({"config_id": config_id, "access_token": token}),
    )
    .await;

    let log = h.ok("GET", "/_sandbox/calls?since=0", None).await;
    let calls = log["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 3);
    assert_eq!(log["next"], 3);
    let text = log.to_string();
    assert!(!text.contains(SECRET), "corpsecret is redacted");
    assert!(!text.contains(&token), "access_token is redacted");
    assert_eq!(calls[0]["api"], "gettoken");
    assert_eq!(calls[0]["request"]["corpid"], CORP);
    assert_eq!(calls[1]["api"], "add_contact_way");
    assert_eq!(calls[1]["corp_id"], CORP);
    assert_eq!(calls[1]["request"]["user"], json!(["alice"]));
    assert_eq!(calls[1]["response"]["config_id"], config_id.as_str());
    assert_eq!(calls[1]["http_status"], 200);
    assert!(calls[1]["fault"].is_null());

    let filtered = h
        .ok("GET", "/_sandbox/calls?since=1&api=get_contact_way", None)
        .await;
    assert_eq!(filtered["calls"].as_array().unwrap().len(), 1);
    assert_eq!(filtered["calls"][0]["seq"], 3);

    h.ok("DELETE", "/_sandbox/calls", None).await;
    let after = h.ok("GET", "/_sandbox/calls?since=0", None).await;
    assert_eq!(after["calls"], json!([]));
    assert_eq!(after["next"], 3, "clearing keeps the sequence");
}

#[tokio::test]
async fn reset_forgets_corps_tokens_codes_and_settings() {
    let h = Harness::start(1).await;
    h.put_corp(&["alice"], None).await;
    let token = h.token().await;
    h.add_way(&token, 1, &["alice"], "").await;
    h.config(json!({"limit_per_minute": 1})).await;

    h.ok("POST", "/_sandbox/reset", None).await;
    assert_eq!(
        h.ok("GET", "/_sandbox/contact-ways", None).await["contact_ways"],
        json!([])
    );
    assert_eq!(
        h.ok("GET", "/_sandbox/config", None).await["limit_per_minute"],
        10_000
    );
    assert_eq!(h.gettoken(CORP, SECRET).await["errcode"], 40013);
    assert_eq!(
        h.wecom("get_contact_way", &token, json!({"config_id": "x"}))
            .await["errcode"],
        40014
    );
    assert_eq!(h.ok("GET", "/_sandbox/health", None).await["status"], "ok");
}

#[tokio::test]
async fn list_contact_way_pages_through_the_corps_contact_ways_created_in_the_window() {
    let h = Harness::start(1).await;
    h.put_corp(&["alice"], None).await;
    let token = h.token().await;
    let mut made = Vec::new();
    for state in ["a", "b", "c"] {
        let added = h
            .wecom(
                "add_contact_way",
                &token,
                json!({"type": 2, "scene": 2, "state": state, "user": ["alice"]}),
            )
            .await;
        made.push(added["config_id"].as_str().unwrap().to_owned());
    }

    let mut listed = Vec::new();
    let mut cursor = String::new();
    loop {
        let page = h
            .wecom(
                "list_contact_way",
                &token,
                json!({"limit": 2, "cursor": cursor}),
            )
            .await;
        assert_eq!(page["errcode"], 0, "{page}");
        let ways = page["contact_way"].as_array().unwrap();
        assert!(ways.len() <= 2);
        listed.extend(
            ways.iter()
                .map(|w| w["config_id"].as_str().unwrap().to_owned()),
        );
        cursor = page["next_cursor"].as_str().unwrap().to_owned();
        if cursor.is_empty() {
            break;
        }
    }
    listed.sort();
    made.sort();
    assert_eq!(listed, made);

    let long_ago = h
        .wecom(
            "list_contact_way",
            &token,
            json!({"start_time": 1, "end_time": 2}),
        )
        .await;
    assert_eq!(long_ago["contact_way"], json!([]));
    assert_eq!(long_ago["next_cursor"], "");
    let refused = h
        .wecom("list_contact_way", &token, json!({"limit": 1001}))
        .await;
    assert_eq!(refused["errcode"], 40058);
}
