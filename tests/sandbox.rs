//! The WeCom sandbox process started by the local tooling, through its WeCom API: the error
//! codes qrsync relies on, the frequency limits (45009) and token expiry (42001).
//! These tests share the sandbox's global settings and clock, so they run as one sequence.

use anyhow::{Context, Result};
use integration_tests::{random_id, Sandbox, TestTenant, World};
use serde_json::{json, Value};

async fn corp_with_code(
    sandbox: &Sandbox<'_>,
    users: &[&str],
) -> Result<(TestTenant, String, String)> {
    let tenant = TestTenant::random();
    sandbox.add_corp(&tenant, None, users).await?;
    let token = sandbox.token(&tenant).await?;
    let created = sandbox
        .call(
            "add_contact_way",
            &token,
            json!({"type": 2, "scene": 2, "state": random_id(8), "user": users}),
        )
        .await?;
    assert_eq!(created["errcode"], 0, "{created}");
    Ok((
        tenant,
        token,
        created["config_id"].as_str().unwrap_or_default().to_owned(),
    ))
}

fn errcode(answer: &Value) -> i64 {
    answer["errcode"].as_i64().unwrap_or(i64::MIN)
}

#[tokio::test]
async fn sandbox_speaks_wecom() -> Result<()> {
    let world = World::connect().await?;
    let sandbox = world.sandbox();
    let before = sandbox.get("/_sandbox/config").await?;
    let clock_before = sandbox.get("/_sandbox/clock").await?;
    let outcome = async {
        contact_way_errors_are_wecoms(&sandbox).await?;
        an_expired_token_gets_42001_and_a_fresh_one_works(&sandbox).await?;
        the_minute_and_hour_windows_answer_45009_per_corp_and_api(&sandbox).await
    }
    .await;
    let restore = json!({
        "limit_per_minute": before["limit_per_minute"],
        "limit_per_hour": before["limit_per_hour"],
        "token_lifetime_secs": before["token_lifetime_secs"],
    });
    sandbox.put("/_sandbox/config", restore).await?;
    // The clock back where it was: later tests' callbacks are signed with the sandbox's time,
    // and the callback route refuses one more than CallbackMaxAgeSeconds away from its own.
    let unfrozen = sandbox
        .put("/_sandbox/clock", json!({"frozen_at_ms": null}))
        .await?;
    let offset = |clock: &Value| clock["offset_ms"].as_i64().unwrap_or(0);
    sandbox
        .put(
            "/_sandbox/clock",
            json!({"advance_ms": offset(&clock_before) - offset(&unfrozen)}),
        )
        .await?;
    outcome
}

async fn contact_way_errors_are_wecoms(sandbox: &Sandbox<'_>) -> Result<()> {
    let (_, token, config_id) = corp_with_code(sandbox, &["alice", "bob"]).await?;
    let many: Vec<String> = (0..101).map(|i| format!("u{i}")).collect();
    let too_many = sandbox
        .call(
            "update_contact_way",
            &token,
            json!({"config_id": config_id, "user": many}),
        )
        .await?;
    assert_eq!(errcode(&too_many), 41041, "{too_many}");
    let unknown_code = sandbox
        .call(
            "update_contact_way",
            &token,
            json!({"config_id": "0".repeat(32), "user": ["alice"]}),
        )
        .await?;
    assert_eq!(errcode(&unknown_code), 41044, "{unknown_code}");
    let unknown_user = sandbox
        .call(
            "update_contact_way",
            &token,
            json!({"config_id": config_id, "user": ["mallory"]}),
        )
        .await?;
    assert_eq!(errcode(&unknown_user), 60111, "{unknown_user}");
    let bad_token = sandbox
        .call(
            "get_contact_way",
            "not-a-token",
            json!({"config_id": config_id}),
        )
        .await?;
    assert_eq!(errcode(&bad_token), 40014, "{bad_token}");

    let replaced = sandbox
        .call(
            "update_contact_way",
            &token,
            json!({"config_id": config_id, "user": ["bob"]}),
        )
        .await?;
    assert_eq!(errcode(&replaced), 0, "{replaced}");
    let read = sandbox
        .call("get_contact_way", &token, json!({"config_id": config_id}))
        .await?;
    assert_eq!(
        read["contact_way"]["user"],
        json!(["bob"]),
        "update replaces the whole list"
    );
    Ok(())
}

async fn an_expired_token_gets_42001_and_a_fresh_one_works(sandbox: &Sandbox<'_>) -> Result<()> {
    sandbox
        .put("/_sandbox/config", json!({"token_lifetime_secs": 60}))
        .await?;
    let (tenant, token, config_id) = corp_with_code(sandbox, &["alice"]).await?;
    let issued = sandbox
        .gettoken(&tenant.corp_id, &tenant.corp_secret)
        .await?;
    assert_eq!(
        issued["expires_in"], 60,
        "the configured lifetime is announced: {issued}"
    );

    // Time passes on the sandbox's clock, not in the test.
    sandbox
        .put("/_sandbox/clock", json!({"advance_ms": 61_000}))
        .await?;
    let expired = sandbox
        .call("get_contact_way", &token, json!({"config_id": config_id}))
        .await?;
    assert_eq!(errcode(&expired), 42001, "{expired}");

    let fresh = sandbox.token(&tenant).await?;
    let read = sandbox
        .call("get_contact_way", &fresh, json!({"config_id": config_id}))
        .await?;
    assert_eq!(errcode(&read), 0, "{read}");
    sandbox
        .post(
            "/_sandbox/tokens/expire",
            json!({"corp_id": tenant.corp_id}),
        )
        .await?;
    let revoked = sandbox
        .call("get_contact_way", &fresh, json!({"config_id": config_id}))
        .await?;
    assert_eq!(errcode(&revoked), 42001, "{revoked}");
    Ok(())
}

async fn the_minute_and_hour_windows_answer_45009_per_corp_and_api(
    sandbox: &Sandbox<'_>,
) -> Result<()> {
    sandbox
        .put("/_sandbox/config", json!({"token_lifetime_secs": 7200}))
        .await?;
    // A frozen clock keeps all calls inside one minute, whatever the wall clock does; frozen 20 s
    // into the next hour, so the minute this test later moves on to is in the same hour (frozen
    // at the wall clock's minute, a run in an hour's last minute crossed into the next hour and
    // found its hour window empty).
    let now = sandbox.get("/_sandbox/clock").await?["now_ms"]
        .as_u64()
        .context("the sandbox's clock")?;
    const HOUR_MS: u64 = 3_600_000;
    let frozen_at_ms = (now / HOUR_MS + 1) * HOUR_MS + 20_000;
    sandbox
        .put("/_sandbox/clock", json!({"frozen_at_ms": frozen_at_ms}))
        .await?;
    let (tenant, token, config_id) = corp_with_code(sandbox, &["alice"]).await?;
    let (_, other_token, other_config) = corp_with_code(sandbox, &["alice"]).await?;
    let used = sandbox.get("/_sandbox/limits").await?;
    sandbox
        .put(
            "/_sandbox/config",
            json!({"limit_per_minute": 5, "limit_per_hour": 1000}),
        )
        .await?;

    let mut answers = Vec::new();
    for _ in 0..6 {
        answers.push(errcode(
            &sandbox
                .call("get_contact_way", &token, json!({"config_id": config_id}))
                .await?,
        ));
    }
    assert_eq!(answers, [0, 0, 0, 0, 0, 45009], "limits before: {used}");
    let other_api = sandbox
        .call(
            "update_contact_way",
            &token,
            json!({"config_id": config_id, "user": ["alice"]}),
        )
        .await?;
    assert_eq!(
        errcode(&other_api),
        0,
        "another API has its own window: {other_api}"
    );
    let other_corp = sandbox
        .call(
            "get_contact_way",
            &other_token,
            json!({"config_id": other_config}),
        )
        .await?;
    assert_eq!(
        errcode(&other_corp),
        0,
        "another corp has its own window: {other_corp}"
    );

    sandbox
        .put("/_sandbox/clock", json!({"advance_ms": 60_000}))
        .await?;
    let next_minute = sandbox
        .call("get_contact_way", &token, json!({"config_id": config_id}))
        .await?;
    assert_eq!(
        errcode(&next_minute),
        0,
        "a new minute opens the window: {next_minute}"
    );

    // The hour window: 6 admitted so far this hour, limit 8, generous minute limit.
    sandbox
        .put(
            "/_sandbox/config",
            json!({"limit_per_minute": 1000, "limit_per_hour": 8}),
        )
        .await?;
    let hour: Vec<i64> = futures::future::join_all(
        (0..4).map(|_| sandbox.call("get_contact_way", &token, json!({"config_id": config_id}))),
    )
    .await
    .into_iter()
    .map(|a| a.map(|v| errcode(&v)))
    .collect::<Result<_>>()?;
    assert_eq!(hour.iter().filter(|&&c| c == 0).count(), 2, "{hour:?}");
    assert_eq!(hour.iter().filter(|&&c| c == 45009).count(), 2, "{hour:?}");
    let gettoken = sandbox
        .gettoken(&tenant.corp_id, &tenant.corp_secret)
        .await?;
    assert_eq!(
        errcode(&gettoken),
        0,
        "gettoken has its own window: {gettoken}"
    );
    Ok(())
}
