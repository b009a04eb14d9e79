//! Tests that change the deployed callback function's configuration, through the Lambda API,
//! the way an operator would. They run alone in this binary, one step after another, and put
//! the original configuration back before asserting.

use anyhow::{anyhow, Result};
use integration_tests::{eventually, now_secs, random_id, TestTenant, World};
use std::collections::HashMap;
use std::time::Duration;

const V1_TOKEN: &str = "QDG6eK";
const V1_KEY: &str = "jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C";
const V1_CORP: &str = "wx5823bf96d3bd56c7";
const V4_TOKEN: &str = "123456";
const V4_KEY: &str = "kWxPEV2UEDyxWpmPdKC3F4dgPDmOvfKX1HGnEUDS1aR";
const V4_CORP: &str = "wx49f0ab532d5d035a";

fn vector_tenant(token: &str, key: &str, corp: &str) -> TestTenant {
    TestTenant {
        id: format!("vec-{}", random_id(10)),
        corp_id: corp.into(),
        token: token.into(),
        aes_key: key.into(),
        corp_secret: random_id(16),
    }
}

async fn function_environment(world: &World) -> Result<HashMap<String, String>> {
    let config = world
        .lambda
        .get_function_configuration()
        .function_name(world.output("CallbackFunctionName"))
        .send()
        .await?;
    Ok(config
        .environment()
        .and_then(|e| e.variables())
        .cloned()
        .unwrap_or_default())
}

/// Updates the environment and waits, as on AWS, until the update is no longer in progress.
async fn set_function_environment(world: &World, variables: HashMap<String, String>) -> Result<()> {
    let name = world.output("CallbackFunctionName");
    world
        .lambda
        .update_function_configuration()
        .function_name(name)
        .environment(
            aws_sdk_lambda::types::Environment::builder()
                .set_variables(Some(variables))
                .build(),
        )
        .send()
        .await?;
    eventually(
        "function update applied",
        Duration::from_secs(60),
        || async {
            let config = world
                .lambda
                .get_function_configuration()
                .function_name(name)
                .send()
                .await?;
            Ok(match config.last_update_status() {
                Some(aws_sdk_lambda::types::LastUpdateStatus::InProgress) => None,
                Some(aws_sdk_lambda::types::LastUpdateStatus::Failed) => {
                    return Err(anyhow!(
                        "function update failed: {:?}",
                        config.last_update_status_reason()
                    ))
                }
                _ => Some(()),
            })
        },
    )
    .await
}

#[tokio::test]
async fn reconfigured_callback_function() -> Result<()> {
    let world = World::connect().await?;
    let original = function_environment(&world).await?;
    let outcome = async {
        reference_vectors_answer_through_the_route(&world, &original).await?;
        an_unavailable_inbox_answers_5xx_persists_nothing_and_the_retry_is_stored_once(
            &world, &original,
        )
        .await
    }
    .await;
    set_function_environment(&world, original).await?;
    outcome
}

/// The vectors of wecom-api.md §1.8 carry 2014 timestamps, so the window is widened for them.
async fn reference_vectors_answer_through_the_route(
    world: &World,
    original: &HashMap<String, String>,
) -> Result<()> {
    let mut widened = original.clone();
    widened.insert("CALLBACK_MAX_AGE_SECONDS".into(), "3000000000".into());
    set_function_environment(world, widened).await?;
    let v1 = vector_tenant(V1_TOKEN, V1_KEY, V1_CORP);
    let v4 = vector_tenant(V4_TOKEN, V4_KEY, V4_CORP);
    world.register(&v1).await?;
    world.register(&v4).await?;

    // V1: URL verification, echostr with '+', '/' and '=' percent-encoded by the client.
    let v1_get = [
        ("msg_signature", "5c45ff5e21c57e6ad56bac8758b79b1d9ac89fd3"),
        ("timestamp", "1409659589"),
        ("nonce", "263014780"),
        ("echostr", "P9nAzCzyDtyTWESHep1vC5X9xho/qYX3Zpb4yKa9SKld1DsH3Iyt3tP3zNdtp+4RPcs8TgAE7OaBO+FZXvnaqQ=="),
    ];
    assert_eq!(
        world.get_callback(&v1.id, &v1_get).await?,
        (200, "1616140317555161061".to_owned())
    );

    // V2: POST whose plaintext ends in pad byte 30 (a 32-byte PKCS#7 block).
    let v2_body = format!(
        "<xml><ToUserName><![CDATA[{V1_CORP}]]></ToUserName><Encrypt><![CDATA[{}]]></Encrypt><AgentID><![CDATA[218]]></AgentID></xml>",
        "RypEvHKD8QQKFhvQ6QleEB4J58tiPdvo+rtK1I9qca6aM/wvqnLSV5zEPeusUiX5L5X/0lWfrf0QADHHhGd3QczcdCUpj911L3vg3W/sYYvuJTs3TUUkSUXxaccAS0qhxchrRYt66wiSpGLYL42aM6A8dTT+6k4aSknmPj48kzJs8qLjvd4Xgpue06DOdnLxAUHzM6+kDZ+HMZfJYuR+LtwGc2hgf5gsijff0ekUNXZiqATP7PF5mZxZ3Izoun1s4zG4LUMnvw2r+KqCKIw+3IQH03v+BCA9nMELNqbSf6tiWSrXJB3LAVGUcallcrw8V2t9EL4EhzJWrQUax5wLVMNS0+rUPA3k22Ncx4XXZS9o0MBH27Bo6BpNelZpS+/uh9KsNlY6bHCmJU9p8g7m3fVKn28H3KDYA5Pl/T8Z1ptDAVe0lXdQ2YoyyH2uyPIGHBZZIs2pDBS8R07+qN+E7Q=="
    );
    let v2_query = [
        ("msg_signature", "477715d11cdb4164915debcba66cb864d751f3e6"),
        ("timestamp", "1409659813"),
        ("nonce", "1372623149"),
    ];
    assert_eq!(
        world
            .post_callback(&v1.id, &v2_query, v2_body.clone())
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
    let echostr =
        "4ByGGj+sVCYcvGeQYhaKIk1o0pQRNbRjxybjTGblXrBaXlTXeOo1+bXFXDQQb1o6co6Yh9Bv41n7hOchLF6p+Q==";
    let v4_get = |nonce: &'static str| {
        [
            ("msg_signature", "dd6b9c95b495b3f7e2901bfbc76c664930ffdb96"),
            ("timestamp", "1411443780"),
            ("nonce", nonce),
            ("echostr", echostr),
        ]
    };
    assert_eq!(
        world.get_callback(&v4.id, &v4_get("437374425")).await?,
        (200, "5927782489442352469".to_owned())
    );
    assert_eq!(
        world.get_callback(&v4.id, &v4_get("437374424")).await?.0,
        401
    );

    // V4: a POST whose plaintext ends in pad byte 1.
    let v4_encrypt = "RgqEoJj5A4EMYlLvWO1F86ioRjZfaex/gePD0gOXTxpsq5Yj4GNglrBb8I2BAJVODGajiFnXBu7mCPatfjsu6IHCrsTyeDXzF6Bv283dGymzxh6ydJRvZsryDyZbLTE7rhnus50qGPMfp2wASFlzEgMW9z1ef/RD8XzaFYgm7iTdaXpXaG4+BiYyolBug/gYNx410cvkKR2/nPwBiT+P4hIiOAQqGp/TywZBtDh1yCF2KOd0gpiMZ5jSw3e29mTvmUHzkVQiMS6td7vXUaWOMZnYZlF3So2SjHnwh4jYFxdgpkHHqIrH/54SNdshoQgWYEvccTKe7FS709/5t6NMxuGhcUGAPOQipvWTT4dShyqio7mlsl5noTrb++x6En749zCpQVhDpbV6GDnTbcX2e8K9QaNWHp91eBdCRxthuL0=";
    let v4_body = format!("<xml><ToUserName><![CDATA[{V4_CORP}]]></ToUserName><Encrypt><![CDATA[{v4_encrypt}]]></Encrypt><AgentID><![CDATA[1]]></AgentID></xml>");
    let v4_query = [
        ("msg_signature", "74d92dfeb87ba7c714f89d98870ae5eb62dff26d"),
        ("timestamp", "1411525903"),
        ("nonce", "461056294"),
    ];
    assert_eq!(
        world.post_callback(&v4.id, &v4_query, v4_body).await?.0,
        200
    );
    assert_eq!(world.inbox_messages(&v4.id).await?.len(), 1);

    // V4b: the encrypt-side vector is a passive reply, addressed (inner ToUserName) to a
    // user rather than to the corp; as an inbound callback it is refused and not stored.
    let v4b_encrypt = "9s4gMv99m88kKTh/H8IdkOiMg6bisoy3ypwy9H4hvSPe9nsGaqyw5hhSjdYbcrKk+j3nba4HMOTzHrluLBYqxgNcBqGsL8GqxlhZgURnAtObvesEl5nZ+uBE8bviY0LWke8Zy9V/QYKxNV2FqllNXcfmstttyIkMKCCmVbCFM2JTF5wY0nFhHZSjPUL2Q1qvSUCUld+/WIXrx0oyKQmpB6o8NRrrNrsDf03oxI1p9FxUgMnwKKZeOA/uu+2IEvEBtb7muXsVbwbgX05UPPJvFurDXafG0RQyPR+mf1nDnAtQmmNOuiR5MIkdQ39xn1vWwi1O5oazPoQJz0nTYjxxEE8kv3kFxtAGVRe3ypD3WeK2XeFYFMNMpatF9XiKzHo3";
    let v4b_body = format!("<xml><ToUserName><![CDATA[{V4_CORP}]]></ToUserName><Encrypt><![CDATA[{v4b_encrypt}]]></Encrypt></xml>");
    let v4b_query = [
        ("msg_signature", "407518b7649e86ef23978113f92d27afa9296533"),
        ("timestamp", "1411525903"),
        ("nonce", "461056294"),
    ];
    let (status, body) = world.post_callback(&v4.id, &v4b_query, v4b_body).await?;
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
    set_function_environment(world, broken).await?;
    // Lambda applies the update to new invocations; probe until the function sees it.
    eventually(
        "the function uses the broken endpoint",
        Duration::from_secs(60),
        || async {
            let post = probe.sign_post(
                &probe.add_event("probe", "u", &random_id(8), now_secs()),
                now_secs(),
            );
            let (status, _) = world
                .post_callback(&probe.id, &post.query(), post.body.clone())
                .await?;
            Ok((status >= 500).then_some(()))
        },
    )
    .await?;

    let event = tenant.add_event("code-down", "qianqi", "wmDown", now_secs());
    let first_try = tenant.sign_post(&event, now_secs());
    let (status, body) = world
        .post_callback(&tenant.id, &first_try.query(), first_try.body.clone())
        .await?;
    assert!(
        status >= 500,
        "expected 5xx while the inbox is unreachable, got {status} {body}"
    );
    assert!(
        !body.contains("127.0.0.1:9"),
        "the 5xx body must stay opaque: {body}"
    );

    set_function_environment(world, original.clone()).await?;
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
            let (status, _) = world
                .post_callback(&tenant.id, &retry.query(), retry.body.clone())
                .await?;
            Ok((status == 200).then_some(()))
        },
    )
    .await?;
    assert_eq!(world.inbox_messages(&tenant.id).await?.len(), 1);
    Ok(())
}
