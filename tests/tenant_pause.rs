//! A tenant WeCom will not serve is paused, not churned (docs/rules.md rule 9): WeCom (the
//! sandbox) refuses the local world's address (60020) for one tenant and the app's secret of
//! another (40001 after a reset in WeCom's console). Each tenant is paused by its first refused
//! push, with one alert on the group robot naming it; later changes make no WeCom call and
//! reach no retry or dead-letter queue; the admin API says why; and the scheduled sweep's probe
//! (every minute locally) resumes it once WeCom accepts again (the address trusted, the new
//! secret given through the admin API), after which every code converges.

use anyhow::{ensure, Context, Result};
use integration_tests::{eventually, now_ms, ops, LiveTenant, World};
use serde_json::{json, Value};
use std::time::Duration;

/// The first probe waits a minute after the pause; the sweep runs every minute; then the
/// resume's fan-out and refresh.
const RESUMED: Duration = Duration::from_secs(200);
const PAUSED: Duration = Duration::from_secs(60);

#[tokio::test]
async fn a_tenant_wecom_refuses_is_paused_once_and_resumed_when_wecom_accepts_again() -> Result<()>
{
    let world = World::connect().await?;
    let dead_letters_before = world.queue_depth("RefreshDeadLetterQueueUrl").await?;
    let (address, secret) = tokio::join!(
        an_untrusted_address_pauses_the_tenant_until_it_is_trusted(&world),
        a_reset_secret_pauses_the_tenant_until_the_admin_gives_the_new_one(&world),
    );
    address.context("untrusted address")?;
    secret.context("reset secret")?;
    let dead_letters = world.queue_depth("RefreshDeadLetterQueueUrl").await?;
    ensure!(
        dead_letters == dead_letters_before,
        "a paused tenant's refreshes reached the dead-letter queue: {dead_letters_before} -> {dead_letters}"
    );
    Ok(())
}

async fn an_untrusted_address_pauses_the_tenant_until_it_is_trusted(world: &World) -> Result<()> {
    let live = LiveTenant::create(world, 2).await?;
    let members: Vec<&str> = live.staff.iter().map(String::as_str).collect();
    let first = live.put_code("p1", &members, None).await?;
    let second = live.put_code("p2", &members, None).await?;
    world.wait_until_drained().await?;
    let corp = live.tenant.corp_id.clone();
    world
        .sandbox()
        .put(
            &format!("/_sandbox/corps/{corp}/trusted-ips"),
            json!({"trusted_ips": ["203.0.113.9"]}),
        )
        .await?;
    let robot_since = world.sandbox().get("/_sandbox/robot/messages").await?["next"].clone();

    live.set_online(&live.staff[0], false).await?;
    let pause = paused(&live).await?;
    ensure!(
        pause["class"] == "untrusted_ip" && pause["errcode"] == 60020,
        "{pause}"
    );
    ensure!(pause["address"] == "shared", "the charged address: {pause}");
    ensure!(
        pause["reason"]
            .as_str()
            .is_some_and(|r| r.contains("trusted IPs")),
        "{pause}"
    );
    let alerts = robot_messages_naming(world, &robot_since, &live.tenant.id).await?;
    ensure!(
        alerts == 1,
        "{alerts} robot messages name the tenant, not 1"
    );
    // The operator's first look says it too.
    let status = ops(&["status"]).await?;
    let listed = status["paused_tenants"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["tenant"] == live.tenant.id.as_str())
        .cloned()
        .with_context(|| format!("qrsync-ops status lists no pause of the tenant: {status}"))?;
    ensure!(listed["class"] == "untrusted_ip", "{listed}");

    // Paused, another change calls nothing: the update log of the corp stays as it is.
    let updates = update_calls(world, &corp).await?;
    live.set_online(&live.staff[1], false).await?;
    live.set_online(&live.staff[1], true).await?;
    world.wait_until_drained().await?;
    ensure!(
        update_calls(world, &corp).await? == updates,
        "a paused tenant's refresh called update_contact_way"
    );
    let retries = world.queue_depth("RefreshRetry15sQueueUrl").await?
        + world.queue_depth("RefreshRetry60sQueueUrl").await?
        + world.queue_depth("RefreshRetry900sQueueUrl").await?;
    ensure!(retries == 0, "{retries} reasons wait in the retry queues");

    let started = now_ms();
    world
        .sandbox()
        .put(
            &format!("/_sandbox/corps/{corp}/trusted-ips"),
            json!({"trusted_ips": null}),
        )
        .await?;
    resumed_and_converged(&live, &[&first, &second], &live.staff[1]).await?;
    println!(
        "untrusted address: paused, 1 robot alert, resumed and converged {:.1} s after the address was trusted",
        (now_ms() - started) as f64 / 1000.0
    );
    ensure!(
        robot_messages_naming(world, &robot_since, &live.tenant.id).await? == 1,
        "the pause was announced more than once"
    );
    Ok(())
}

async fn a_reset_secret_pauses_the_tenant_until_the_admin_gives_the_new_one(
    world: &World,
) -> Result<()> {
    let live = LiveTenant::create(world, 2).await?;
    let members: Vec<&str> = live.staff.iter().map(String::as_str).collect();
    let code = live.put_code("s1", &members, None).await?;
    world.wait_until_drained().await?;
    let corp = live.tenant.corp_id.clone();
    let new_secret = format!("{}-reset", live.tenant.corp_secret);
    world
        .sandbox()
        .put(
            &format!("/_sandbox/corps/{corp}/secret"),
            json!({"corp_secret": new_secret}),
        )
        .await?;
    world
        .sandbox()
        .post("/_sandbox/tokens/expire", json!({"corp_id": corp}))
        .await?;

    live.set_online(&live.staff[0], false).await?;
    let pause = paused(&live).await?;
    ensure!(pause["class"] == "token", "{pause}");
    ensure!(pause["errcode"] == 40001, "{pause}");

    let started = now_ms();
    world
        .admin()
        .put(
            &format!("/tenants/{}", live.tenant.id),
            json!({
                "corp_id": corp,
                "corp_secret": new_secret,
                "callback_token": live.tenant.token,
                "encoding_aes_key": live.tenant.aes_key,
            }),
        )
        .await?;
    resumed_and_converged(&live, &[&code], &live.staff[1]).await?;
    println!(
        "reset secret: paused, resumed and converged {:.1} s after the admin gave the new one",
        (now_ms() - started) as f64 / 1000.0
    );
    Ok(())
}

/// The tenant's pause as the admin API shows it, once it is there.
async fn paused(live: &LiveTenant<'_>) -> Result<Value> {
    eventually("the tenant paused", PAUSED, || async {
        let view = live
            .world
            .admin()
            .get(&format!("/tenants/{}", live.tenant.id))
            .await?;
        Ok(view.get("paused").filter(|p| !p.is_null()).cloned())
    })
    .await
}

async fn resumed_and_converged(
    live: &LiveTenant<'_>,
    config_ids: &[&str],
    only: &str,
) -> Result<()> {
    eventually("resumed and every list converged", RESUMED, || async {
        let view = live
            .world
            .admin()
            .get(&format!("/tenants/{}", live.tenant.id))
            .await?;
        if view.get("paused").is_some_and(|p| !p.is_null()) {
            return Ok(None);
        }
        for config_id in config_ids {
            if live.wecom_list(config_id).await? != [only.to_owned()] {
                return Ok(None);
            }
        }
        Ok(Some(()))
    })
    .await
}

async fn update_calls(world: &World, corp: &str) -> Result<usize> {
    let log = world
        .sandbox()
        .get(&format!(
            "/_sandbox/calls?corp_id={corp}&api=update_contact_way"
        ))
        .await?;
    Ok(log["calls"].as_array().map_or(0, Vec::len))
}

async fn robot_messages_naming(world: &World, since: &Value, tenant: &str) -> Result<usize> {
    let since = since.as_u64().unwrap_or(0);
    let log = world
        .sandbox()
        .get(&format!("/_sandbox/robot/messages?since={since}"))
        .await?;
    Ok(log["messages"].as_array().map_or(0, |messages| {
        messages
            .iter()
            .filter(|m| {
                m["content"]
                    .as_str()
                    .is_some_and(|c| c.contains("tenant paused") && c.contains(tenant))
            })
            .count()
    }))
}
