//! Tests that change the deployed callback function's configuration, through the Lambda API,
//! the way an operator would. They run alone in this binary, one step after another, and put
//! the original configuration back before asserting.

use anyhow::Result;
use domain::wecom::reference_vectors::{self as vectors, Settings, Signed};
use integration_tests::{eventually, now_secs, random_id, TestTenant, World};
use std::collections::HashMap;
use std::time::Duration;

/// The tenant of a reference vector's corp. The official sample's corp is the samples' `demo`
/// tenant (`events/`, the same settings), so running the samples after these tests finds it
/// unchanged but for its secret, which seeding the samples sets again.
fn vector_tenant(settings: &Settings) -> TestTenant {
    TestTenant {
        id: if settings.corp_id == vectors::V1.corp_id {
            "demo".to_owned()
        } else {
            format!("vec-{}", settings.corp_id)
        },
        corp_id: settings.corp_id.into(),
        token: settings.token.into(),
        aes_key: settings.encoding_aes_key.into(),
        corp_secret: random_id(16),
    }
}

fn query(signed: &Signed) -> [(&'static str, &'static str); 3] {
    [
        ("msg_signature", signed.msg_signature),
        ("timestamp", signed.timestamp),
        ("nonce", signed.nonce),
    ]
}

fn verify_query(signed: &Signed) -> [(&'static str, &'static str); 4] {
    let [signature, timestamp, nonce] = query(signed);
    [signature, timestamp, nonce, ("echostr", signed.encrypt)]
}

fn envelope(corp_id: &str, signed: &Signed) -> String {
    format!("<xml><ToUserName><![CDATA[{corp_id}]]></ToUserName><Encrypt><![CDATA[{}]]></Encrypt></xml>", signed.encrypt)
}

#[tokio::test]
async fn reconfigured_callback_function() -> Result<()> {
    let world = World::connect().await?;
    world
        .set_consumer_enabled("RecordFactsFunctionName", false)
        .await?;
    let original = world.function_environment("CallbackFunctionName").await?;
    let outcome = async {
        reference_vectors_answer_through_the_route(&world, &original).await?;
        an_unavailable_inbox_answers_5xx_persists_nothing_and_the_retry_is_stored_once(
            &world, &original,
        )
        .await
    }
    .await;
    world
        .set_function_environment("CallbackFunctionName", original)
        .await?;
    outcome
}

/// The vectors of docs/wecom-api.md §1.8 carry 2014 timestamps, so the window is widened for them.
async fn reference_vectors_answer_through_the_route(
    world: &World,
    original: &HashMap<String, String>,
) -> Result<()> {
    let mut widened = original.clone();
    widened.insert("CALLBACK_MAX_AGE_SECONDS".into(), "3000000000".into());
    world
        .set_function_environment("CallbackFunctionName", widened)
        .await?;
    let mut v1 = vector_tenant(&vectors::V1);
    let mut v4 = vector_tenant(&vectors::V4);
    world.register_fixed_corp(&mut v1).await?;
    world.register_fixed_corp(&mut v4).await?;

    // V1: URL verification; reqwest percent-encodes the echostr's '+', '/' and '='.
    let answer = world
        .get_callback(&v1.id, &verify_query(&vectors::V1_VERIFY))
        .await?;
    assert_eq!(answer, (200, vectors::V1_REPLY.to_owned()));

    // V2: a POST whose plaintext ends in pad byte 30 (a 32-byte PKCS#7 block).
    let v2_body = envelope(vectors::V1.corp_id, &vectors::V2_POST);
    assert_eq!(
        world
            .post_callback(&v1.id, &query(&vectors::V2_POST), v2_body.clone())
            .await?
            .0,
        200
    );
    let stored = world.inbox_messages(&v1.id).await?;
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].message.envelope, v2_body);
    assert_eq!(
        stored[0].group_id,
        format!("{}#tenant", v1.id),
        "a text message names no code or staff"
    );

    // V4: an independent implementation's vectors; a changed nonce must fail.
    let answer = world
        .get_callback(&v4.id, &verify_query(&vectors::V4_VERIFY))
        .await?;
    assert_eq!(answer, (200, vectors::V4_REPLY.to_owned()));
    let wrong_nonce = Signed {
        nonce: vectors::V4_WRONG_NONCE,
        ..vectors::V4_VERIFY
    };
    assert_eq!(
        world
            .get_callback(&v4.id, &verify_query(&wrong_nonce))
            .await?
            .0,
        401
    );

    // V4: a POST whose plaintext ends in pad byte 1.
    let v4_body = envelope(vectors::V4.corp_id, &vectors::V4_POST);
    assert_eq!(
        world
            .post_callback(&v4.id, &query(&vectors::V4_POST), v4_body)
            .await?
            .0,
        200
    );
    assert_eq!(world.inbox_messages(&v4.id).await?.len(), 1);

    // V4b: the encrypt-side vector is a passive reply, addressed (inner ToUserName) to a
    // user rather than to the corp; as an inbound callback it is refused and not stored.
    let v4b_body = envelope(vectors::V4.corp_id, &vectors::V4B_REPLY);
    let (status, body) = world
        .post_callback(&v4.id, &query(&vectors::V4B_REPLY), v4b_body)
        .await?;
    assert_eq!(status, 400, "{body}");
    assert_eq!(world.inbox_messages(&v4.id).await?.len(), 1);
    Ok(())
}

async fn an_unavailable_inbox_answers_5xx_persists_nothing_and_the_retry_is_stored_once(
    world: &World,
    original: &HashMap<String, String>,
) -> Result<()> {
    let tenant = world.new_tenant().await?;
    let probe = world.new_tenant().await?;
    let mut broken = original.clone();
    // Nothing listens on the discard port: every SQS call of the function fails to connect.
    broken.insert("AWS_ENDPOINT_URL_SQS".into(), "http://127.0.0.1:9".into());
    world
        .set_function_environment("CallbackFunctionName", broken)
        .await?;
    // Lambda applies the update to new invocations; probe until the function sees it.
    eventually(
        "the function uses the broken endpoint",
        Duration::from_secs(60),
        || async {
            let post = probe.sign_post(
                &probe.add_event("probe", "u", &random_id(8), now_secs()),
                now_secs(),
            );
            let (status, _) = world.deliver(&probe.id, &post).await?;
            Ok((status >= 500).then_some(()))
        },
    )
    .await?;

    let event = tenant.add_event("code-down", "qianqi", "wmDown", now_secs());
    let first_try = tenant.sign_post(&event, now_secs());
    let (status, body) = world.deliver(&tenant.id, &first_try).await?;
    assert!(
        status >= 500,
        "expected 5xx while the inbox is unreachable, got {status} {body}"
    );
    assert!(
        !body.contains("127.0.0.1:9"),
        "the 5xx body must stay opaque: {body}"
    );

    world
        .set_function_environment("CallbackFunctionName", original.clone())
        .await?;
    assert!(
        world.inbox_messages(&tenant.id).await?.is_empty(),
        "persisted while the inbox was down"
    );

    // WeCom retries: the same event, re-encrypted and re-signed.
    let retry = tenant.sign_post(&event, now_secs());
    eventually(
        "the retried delivery is accepted",
        Duration::from_secs(60),
        || async {
            let (status, _) = world.deliver(&tenant.id, &retry).await?;
            Ok((status == 200).then_some(()))
        },
    )
    .await?;
    assert_eq!(world.inbox_messages(&tenant.id).await?.len(), 1);
    Ok(())
}
