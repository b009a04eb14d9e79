//! The callback route of the deployed stack: API Gateway -> callback function -> inbox.fifo,
//! with the tenant read from DynamoDB. Every request is signed and encrypted as WeCom does.

use anyhow::Result;
use base64::Engine;
use domain::wecom::crypto::CallbackCrypto;
use integration_tests::{now_secs, random_id, World};

#[tokio::test]
async fn a_signed_add_event_is_persisted_with_its_code_as_message_group() -> Result<()> {
    let world = World::connect().await?;
    world
        .set_consumer_enabled("RecordFactsFunctionName", false)
        .await?;
    let tenant = world.new_tenant().await?;
    let post = tenant.sign_post(
        &tenant.add_event("code-7", "zhangsan", "wmA", now_secs()),
        now_secs(),
    );

    let (status, body) = world.deliver(&tenant.id, &post).await?;

    assert_eq!((status, body.as_str()), (200, ""));
    let stored = world.inbox_messages(&tenant.id).await?;
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].group_id, format!("{}#code#code-7", tenant.id));
    assert_eq!(stored[0].deduplication_id, stored[0].message.event_key);
    assert_eq!(
        stored[0].message.envelope, post.body,
        "the raw envelope is what is stored"
    );
    assert_eq!(stored[0].message.msg_signature, post.msg_signature);
    assert!(stored[0].message.received_at_ms / 1000 >= now_secs() - 60);
    Ok(())
}

#[tokio::test]
async fn the_same_callback_posted_twice_concurrently_yields_one_inbox_message() -> Result<()> {
    let world = World::connect().await?;
    world
        .set_consumer_enabled("RecordFactsFunctionName", false)
        .await?;
    let tenant = world.new_tenant().await?;
    let event = tenant.add_event("code-1", "lisi", "wmB", now_secs());
    // Two deliveries of one event: WeCom re-encrypts and re-signs a retry, so the copies
    // differ in ciphertext, nonce and signature but not in the business event.
    let first = tenant.sign_post(&event, now_secs());
    let second = tenant.sign_post(&event, now_secs());

    let (first_query, second_query) = (first.query(), second.query());
    let (a, b) = tokio::join!(
        world.post_callback(&tenant.id, &first_query, first.body.clone()),
        world.post_callback(&tenant.id, &second_query, second.body.clone()),
    );

    assert_eq!(a?.0, 200);
    assert_eq!(b?.0, 200);
    assert_eq!(world.inbox_messages(&tenant.id).await?.len(), 1);
    Ok(())
}

#[tokio::test]
async fn different_customers_in_the_same_second_are_two_messages() -> Result<()> {
    let world = World::connect().await?;
    world
        .set_consumer_enabled("RecordFactsFunctionName", false)
        .await?;
    let tenant = world.new_tenant().await?;
    let now = now_secs();
    for customer in ["wmC1", "wmC2"] {
        let post = tenant.sign_post(&tenant.add_event("code-1", "lisi", customer, now), now);
        assert_eq!(world.deliver(&tenant.id, &post).await?.0, 200);
    }
    assert_eq!(world.inbox_messages(&tenant.id).await?.len(), 2);
    Ok(())
}

#[tokio::test]
async fn events_without_a_code_are_grouped_per_staff_member() -> Result<()> {
    let world = World::connect().await?;
    world
        .set_consumer_enabled("RecordFactsFunctionName", false)
        .await?;
    let tenant = world.new_tenant().await?;
    let event = domain::wecom::callback::write_flat_xml(&[
        ("ToUserName", &tenant.corp_id),
        ("FromUserName", "sys"),
        ("CreateTime", &now_secs().to_string()),
        ("MsgType", "event"),
        ("Event", "change_contact"),
        ("ChangeType", "delete_user"),
        ("UserID", "wangwu"),
    ]);
    let post = tenant.sign_post(&event, now_secs());
    assert_eq!(world.deliver(&tenant.id, &post).await?.0, 200);
    let stored = world.inbox_messages(&tenant.id).await?;
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].group_id, format!("{}#staff#wangwu", tenant.id));
    Ok(())
}

#[tokio::test]
async fn url_verification_answers_the_bare_echostr() -> Result<()> {
    let world = World::connect().await?;
    world
        .set_consumer_enabled("RecordFactsFunctionName", false)
        .await?;
    let tenant = world.new_tenant().await?;
    let crypto = tenant.crypto();
    let echostr = crypto.encrypt("7311951207651374302");
    let timestamp = now_secs().to_string();
    let signature = crypto.sign(&timestamp, "n1", &echostr);

    let (status, body) = world
        .get_callback(
            &tenant.id,
            &[
                ("msg_signature", &signature),
                ("timestamp", &timestamp),
                ("nonce", "n1"),
                ("echostr", &echostr),
            ],
        )
        .await?;

    assert_eq!((status, body.as_str()), (200, "7311951207651374302"));
    Ok(())
}

/// What was wrong, the query, the body, and the status it must get.
type BadCase = (&'static str, Vec<(String, String)>, String, u16);

/// Each case: what was wrong, the request, and the status it must get.
#[tokio::test]
async fn bad_input_of_every_kind_is_refused_with_a_4xx_and_nothing_is_persisted() -> Result<()> {
    let world = World::connect().await?;
    world
        .set_consumer_enabled("RecordFactsFunctionName", false)
        .await?;
    let tenant = world.new_tenant().await?;
    let now = now_secs();
    let event = tenant.add_event("code-9", "zhaoliu", "wmBad", now);
    let good = tenant.sign_post(&event, now);
    let mut cases: Vec<BadCase> = Vec::new();
    let query = |post: &integration_tests::SignedPost| -> Vec<(String, String)> {
        post.query()
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };

    let mut tampered = query(&good);
    tampered[0].1 = "0".repeat(40);
    cases.push(("bad signature", tampered, good.body.clone(), 401));

    let mut other_nonce = query(&good);
    other_nonce[2].1 = "another-nonce".into();
    cases.push((
        "nonce not covered by the signature",
        other_nonce,
        good.body.clone(),
        401,
    ));

    let not_base64 = tenant.sign_envelope(&tenant.corp_id, "%%%not-base64%%%".into(), now);
    cases.push((
        "ciphertext not base64",
        query(&not_base64),
        not_base64.body.clone(),
        400,
    ));

    let random_bytes = base64::engine::general_purpose::STANDARD.encode(random_id(64));
    let garbage = tenant.sign_envelope(&tenant.corp_id, random_bytes, now);
    cases.push((
        "ciphertext that does not decrypt",
        query(&garbage),
        garbage.body.clone(),
        400,
    ));

    let for_other_corp =
        CallbackCrypto::new(&tenant.token, &tenant.aes_key, "ww-another-corp")?.encrypt(&event);
    let wrong_receiver = tenant.sign_envelope(&tenant.corp_id, for_other_corp, now);
    cases.push((
        "encrypted for another corp",
        query(&wrong_receiver),
        wrong_receiver.body.clone(),
        400,
    ));

    let addressed_elsewhere =
        tenant.sign_envelope("ww-another-corp", tenant.crypto().encrypt(&event), now);
    cases.push((
        "envelope addressed to another corp",
        query(&addressed_elsewhere),
        addressed_elsewhere.body.clone(),
        400,
    ));

    cases.push((
        "outer XML malformed",
        query(&good),
        good.body.replace("</xml>", "</xm"),
        400,
    ));
    cases.push((
        "outer XML without Encrypt",
        query(&good),
        "<xml><ToUserName>x</ToUserName></xml>".into(),
        400,
    ));
    cases.push((
        "not XML at all",
        query(&good),
        "{\"json\": true}".into(),
        400,
    ));

    let inner_malformed = tenant.sign_post("<xml><ToUserName>broken", now);
    cases.push((
        "decrypted event is not XML",
        query(&inner_malformed),
        inner_malformed.body.clone(),
        400,
    ));

    let stale = tenant.sign_post(&event, now - 3600);
    cases.push((
        "timestamp an hour old",
        query(&stale),
        stale.body.clone(),
        400,
    ));
    let future = tenant.sign_post(&event, now + 3600);
    cases.push((
        "timestamp an hour ahead",
        query(&future),
        future.body.clone(),
        400,
    ));

    let mut missing = query(&good);
    missing.remove(0);
    cases.push(("msg_signature missing", missing, good.body.clone(), 400));

    let mut failures = Vec::new();
    for (what, query, body, expected) in &cases {
        let pairs: Vec<(&str, &str)> = query
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let (status, answer) = world
            .post_callback(&tenant.id, &pairs, body.clone())
            .await?;
        if status != *expected {
            failures.push(format!(
                "{what}: expected {expected}, got {status} {answer}"
            ));
        }
        if answer.contains(&tenant.token) || answer.contains(&tenant.aes_key) {
            failures.push(format!("{what}: the answer leaks a secret"));
        }
    }
    // No answer may tell an unknown tenant from a known one with a wrong signature.
    let mut forged = query(&good);
    forged[0].1 = "0".repeat(40);
    let forged: Vec<(&str, &str)> = forged
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let bad_signature = world
        .post_callback(&tenant.id, &forged, good.body.clone())
        .await?;
    for unknown in ["no-such-tenant", "no%23such"] {
        let answer = world
            .post_callback(unknown, &good.query(), good.body.clone())
            .await?;
        if answer != bad_signature || answer.0 != 401 {
            failures.push(format!(
                "unknown tenant {unknown}: {answer:?}, a bad signature: {bad_signature:?}"
            ));
        }
    }
    let stale_elsewhere = world
        .post_callback("no-such-tenant", &stale.query(), stale.body.clone())
        .await?;
    if stale_elsewhere.0 != 400 {
        failures.push(format!(
            "stale callback for an unknown tenant: expected 400 as for a known one, got {stale_elsewhere:?}"
        ));
    }
    // Refused before it is parsed, whatever its size.
    for size in [64 * 1024 + 1, 10 * 1024 * 1024] {
        let started = std::time::Instant::now();
        let (status, answer) = world
            .post_callback(&tenant.id, &good.query(), "<xml>".repeat(size / 5 + 1))
            .await?;
        println!(
            "a {size}-byte body: {status} in {} ms",
            started.elapsed().as_millis()
        );
        if status != 413 {
            failures.push(format!(
                "a {size}-byte body: expected 413, got {status} {answer}"
            ));
        }
    }
    let (status, _) = world
        .get_callback(
            &tenant.id,
            &[
                ("msg_signature", "0"),
                ("timestamp", &now.to_string()),
                ("nonce", "n"),
                ("echostr", "abc"),
            ],
        )
        .await?;
    if status != 401 {
        failures.push(format!(
            "GET with a bad signature: expected 401, got {status}"
        ));
    }

    assert!(failures.is_empty(), "{failures:#?}");
    assert!(
        world.inbox_messages(&tenant.id).await?.is_empty(),
        "a refused callback was persisted"
    );
    // The good request still goes through afterwards: the refusals were about the input.
    assert_eq!(world.deliver(&tenant.id, &good).await?.0, 200);
    assert_eq!(world.inbox_messages(&tenant.id).await?.len(), 1);
    Ok(())
}

#[tokio::test]
async fn a_sandbox_scan_reaches_the_inbox_through_the_route_once_even_when_delivered_twice(
) -> Result<()> {
    let world = World::connect().await?;
    world
        .set_consumer_enabled("RecordFactsFunctionName", false)
        .await?;
    let tenant = world.new_tenant().await?;
    let sandbox = world.sandbox();
    sandbox
        .add_corp(
            &tenant,
            Some(&world.callback_url(&tenant.id)),
            &["alice", "bob"],
        )
        .await?;
    let token = sandbox.token(&tenant).await?;
    let code_id = format!("code-{}", random_id(8));
    let created = sandbox
        .call(
            "add_contact_way",
            &token,
            serde_json::json!({"type": 2, "scene": 2, "state": code_id, "user": ["alice", "bob"]}),
        )
        .await?;
    assert_eq!(created["errcode"], 0, "{created}");
    let config_id = created["config_id"].as_str().unwrap_or_default().to_owned();

    let scan = sandbox.post("/_sandbox/scan", serde_json::json!({"corp_id": tenant.corp_id, "config_id": config_id, "duplicate": true})).await?;

    let deliveries = scan["delivery"]["deliveries"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(deliveries.len(), 2, "{scan}");
    assert!(deliveries.iter().all(|d| d["delivered"] == true), "{scan}");
    let stored = world.inbox_messages(&tenant.id).await?;
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].group_id, format!("{}#code#{code_id}", tenant.id));
    let picked = scan["scan"]["userid"].as_str().unwrap_or_default();
    assert!(["alice", "bob"].contains(&picked), "{scan}");
    Ok(())
}
