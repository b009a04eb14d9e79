//! The admin API's contract on the deployed stack, as a black-box client meets it: merge-patch
//! PUTs, resources read back, resignation final, one tenant per corp id, bounds named, and a
//! refused request changing nothing.

use anyhow::{ensure, Result};
use integration_tests::{random_id, LiveTenant, World};
use serde_json::{json, Value};

async fn answer(
    world: &World,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> Result<(u16, Value)> {
    let answer = world.admin().answer(method, path, body).await?;
    Ok((answer.status, answer.body))
}

#[tokio::test]
async fn a_black_box_client_meets_the_documented_contract() -> Result<()> {
    let world = World::connect().await?;
    let live = LiveTenant::create(&world, 2).await?;
    let t = live.tenant.id.clone();
    let [s0, s1] = [live.staff[0].as_str(), live.staff[1].as_str()];

    // A tenant reads back without its secrets; a PUT of one field keeps the others.
    let before = world.admin().get(&format!("/tenants/{t}")).await?;
    let shown = before.to_string();
    for secret in [
        &live.tenant.corp_secret,
        &live.tenant.token,
        &live.tenant.aes_key,
    ] {
        ensure!(!shown.contains(secret.as_str()), "a secret in {shown}");
    }
    ensure!(
        before["secrets"]["corp_secret"]["set"] == json!(true),
        "{before}"
    );
    world
        .admin()
        .put(
            &format!("/tenants/{t}"),
            json!({"timezone": "Europe/Paris"}),
        )
        .await?;
    let patched = world.admin().get(&format!("/tenants/{t}")).await?;
    ensure!(
        patched["timezone"] == "Europe/Paris" && patched["corp_id"] == before["corp_id"],
        "{patched}"
    );
    world
        .admin()
        .put(&format!("/tenants/{t}"), json!({"timezone": null}))
        .await?;
    let reset = world.admin().get(&format!("/tenants/{t}")).await?;
    ensure!(
        reset["timezone"] == "Asia/Shanghai",
        "null is the default: {reset}"
    );

    // Bounds: a 10,240-byte secret is refused naming the field, and changes nothing.
    let (status, body) = answer(
        &world,
        "PUT",
        &format!("/tenants/{t}"),
        Some(json!({"corp_secret": "s".repeat(10_240)})),
    )
    .await?;
    ensure!(
        status == 400
            && body["detail"]
                .as_str()
                .unwrap_or_default()
                .starts_with("corp_secret"),
        "{status} {body}"
    );
    ensure!(
        world.admin().get(&format!("/tenants/{t}")).await?["version"] == reset["version"],
        "the refusal wrote"
    );

    // One tenant per corp id.
    let other = format!("t-{}", random_id(10));
    let (status, body) = answer(
        &world,
        "PUT",
        &format!("/tenants/{other}"),
        Some(json!({"corp_id": live.tenant.corp_id, "corp_secret": "x", "callback_token": live.tenant.token, "encoding_aes_key": live.tenant.aes_key})),
    )
    .await?;
    ensure!(
        status == 409 && body["code"] == "corp_id_taken",
        "{status} {body}"
    );
    let (status, _) = answer(&world, "GET", &format!("/tenants/{other}"), None).await?;
    ensure!(status == 404, "the refused tenant exists: {status}");

    // Resignation is final, and the refusal changes nothing.
    let staff = format!("/tenants/{t}/staff/{s1}");
    world
        .admin()
        .put(&staff, json!({"employment": "resigned"}))
        .await?;
    let (status, body) = answer(
        &world,
        "PUT",
        &staff,
        Some(json!({"employment": "active", "online": false})),
    )
    .await?;
    ensure!(
        status == 409 && body["code"] == "resigned",
        "{status} {body}"
    );
    let read = world.admin().get(&staff).await?;
    ensure!(
        read["employment"] == "resigned" && read["online"] == true,
        "{read}"
    );

    // Department ids are strings.
    let (status, body) = answer(
        &world,
        "PUT",
        &format!("/tenants/{t}/staff/{s0}"),
        Some(json!({"departments": [2]})),
    )
    .await?;
    ensure!(
        status == 400
            && body["detail"]
                .as_str()
                .unwrap_or_default()
                .starts_with("departments[0]"),
        "{status} {body}"
    );

    // A code created with a list keeps reporting it as WeCom's until the first push.
    live.put_code("c-contract", &[s0], None).await?;
    let status = world
        .admin()
        .get(&format!("/tenants/{t}/codes/c-contract"))
        .await?;
    ensure!(status["last_pushed"]["users"] == json!([s0]), "{status}");

    // Listings read back what was written, in pages.
    live.put_code("c-contract-2", &[s0], Some(3)).await?;
    let page = world
        .admin()
        .get(&format!("/tenants/{t}/codes?limit=1"))
        .await?;
    ensure!(
        page["codes"].as_array().map(Vec::len) == Some(1) && page["next_cursor"].is_string(),
        "{page}"
    );
    let mine = world
        .admin()
        .get(&format!("/tenants/{t}/staff/{s0}/codes"))
        .await?;
    let codes: Vec<&str> = mine["codes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["code"].as_str())
        .collect();
    ensure!(codes == ["c-contract", "c-contract-2"], "{mine}");
    ensure!(
        mine["codes"][1]["adds_today"] == json!({"adds": 0, "limit": 3}),
        "{mine}"
    );
    let read = world
        .admin()
        .get(&format!("/tenants/{t}/staff/{s0}"))
        .await?;
    ensure!(
        read["adds_today_all_codes"] == json!({"adds": 0, "limit": null}),
        "{read}"
    );
    Ok(())
}
