//! Rotating a tenant's callback keys loses nothing (issue 33, item 6; docs/design/safety.md,
//! "Rotating callback keys"): adds signed with the keys a rotation replaced, stored before it
//! and still arriving at the route after it, are counted, and a replay of the archive opens
//! them; callbacks signed with keys the tenant never had, or with a pair dropped by a second
//! rotation, are refused at the route and park as poison in a replay.

use anyhow::{ensure, Result};
use integration_tests::{
    eventually, now_ms, now_secs, ops, random_id, LiveTenant, SignedPost, TestTenant, World,
};
use serde_json::{json, Value};
use std::time::Duration;

/// The callback function's tenant cache (`TenantCacheSeconds`) and the queues, with room.
const CONVERGE: Duration = Duration::from_secs(150);

/// An add of `staff` through `code` by `customer`, signed and encrypted with `keys`.
fn add(keys: &TestTenant, code: &str, staff: &str, customer: &str) -> SignedPost {
    keys.sign_post(
        &keys.add_event(code, staff, customer, now_secs()),
        now_secs(),
    )
}

/// The tenant's callback keys set to `keys`'s through the admin API, with `extra` fields.
async fn rotate(world: &World, keys: &TestTenant, extra: Value) -> Result<Value> {
    let mut body = json!({"callback_token": keys.token, "encoding_aes_key": keys.aes_key});
    body.as_object_mut()
        .expect("an object")
        .extend(extra.as_object().cloned().unwrap_or_default());
    world
        .admin()
        .put(&format!("/tenants/{}", keys.id), body)
        .await
}

/// Delivers `post` until the route answers 200: the callback function's cached settings may
/// predate the last rotation for up to `TenantCacheSeconds`.
async fn delivered_once_the_route_knows(
    world: &World,
    tenant: &str,
    post: &SignedPost,
) -> Result<()> {
    eventually("the route verifies with the new keys", CONVERGE, || async {
        Ok((world.deliver(tenant, post).await?.0 == 200).then_some(()))
    })
    .await
}

/// The replay dry run's outcome of each archived event of the window.
async fn dry_run_outcomes(tenant: &str, from_ms: u64, to_ms: u64) -> Result<Vec<String>> {
    let (from, to) = (from_ms.to_string(), to_ms.to_string());
    let dry = ops(&["replay", "--tenant", tenant, "--from", &from, "--to", &to]).await?;
    ensure!(dry["status"] == "done", "{dry}");
    let mut outcomes: Vec<String> = dry["events"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|e| e["outcome"].as_str().unwrap_or("?").to_owned())
        .collect();
    outcomes.sort();
    Ok(outcomes)
}

#[tokio::test]
async fn adds_signed_with_replaced_callback_keys_are_counted_and_replayed_and_dropped_keys_are_refused(
) -> Result<()> {
    let world = World::connect().await?;
    world
        .set_consumer_enabled("RecordFactsFunctionName", true)
        .await?;
    let live = LiveTenant::create(&world, 2).await?;
    let member = live.staff[0].clone();
    let code = format!("rot-{}", random_id(6).to_lowercase());
    live.put_code(&code, &[member.as_str()], None).await?;
    let old = live.tenant.clone();
    let fresh_keys = || TestTenant {
        token: random_id(24),
        aes_key: random_id(43),
        ..old.clone()
    };
    let (new, never) = (fresh_keys(), fresh_keys());

    // An add stored under the old keys waits in the inbox (its recorder paused) while the
    // tenant rotates them; WeCom goes on signing with them for a while after.
    let from_ms = now_ms();
    world
        .set_consumer_enabled("RecordFactsFunctionName", false)
        .await?;
    let in_flight = async {
        let (status, body) = world
            .deliver(&old.id, &add(&old, &code, &member, "wmRotOld1"))
            .await?;
        ensure!(status == 200, "{status} {body}");
        rotate(&world, &new, json!({})).await?;
        let view = world.admin().get(&format!("/tenants/{}", old.id)).await?;
        let shown = view.to_string();
        ensure!(
            !shown.contains(&old.token) && !shown.contains(&old.aes_key),
            "the previous keys are never answered: {shown}"
        );
        let previous = &view["secrets"]["previous_callback_keys"];
        ensure!(
            previous["replaced_at_ms"].as_u64() >= Some(from_ms)
                && previous["kept_until_ms"].as_u64() > previous["edge_until_ms"].as_u64(),
            "{view}"
        );
        delivered_once_the_route_knows(&world, &old.id, &add(&new, &code, &member, "wmRotNew1"))
            .await?;
        let (status, body) = world
            .deliver(&old.id, &add(&old, &code, &member, "wmRotOld2"))
            .await?;
        ensure!(
            status == 200,
            "the replaced keys verify within the overlap: {status} {body}"
        );
        let (status, _) = world
            .deliver(&old.id, &add(&never, &code, &member, "wmRotNever"))
            .await?;
        ensure!(status == 401, "keys the tenant never had: {status}");
        world
            .set_consumer_enabled("RecordFactsFunctionName", true)
            .await?;
        world.wait_until_drained().await
    }
    .await;
    world
        .set_consumer_enabled("RecordFactsFunctionName", true)
        .await?;
    in_flight?;
    eventually("the three adds are counted", CONVERGE, || async {
        Ok((live.adds_counted(&code, &member).await? == 3).then_some(()))
    })
    .await?;
    let to_ms = now_ms();

    // The archive replays them: each opens (two with the replaced keys), each already counted.
    let outcomes = dry_run_outcomes(&old.id, from_ms, to_ms).await?;
    println!("after the rotation, the archive's dry run: {outcomes:?}");
    assert_eq!(outcomes, ["already_counted"; 3]);

    // A second rotation while the replaced pair is kept is refused unless it drops that pair.
    let third = fresh_keys();
    let refused = rotate(&world, &third, json!({})).await;
    assert!(
        refused.as_ref().is_err_and(|e| {
            let e = e.to_string();
            e.contains("409") && e.contains("previous_callback_keys_held")
        }),
        "{refused:?}"
    );
    rotate(&world, &third, json!({"previous_callback_keys": null})).await?;
    delivered_once_the_route_knows(&world, &old.id, &add(&third, &code, &member, "wmRotThird"))
        .await?;
    // The oldest keys are no longer kept: the route refuses them, and the replay parks the two
    // adds they signed as poison; the one signed with the second pair (now the previous)
    // still opens.
    let (status, _) = world
        .deliver(&old.id, &add(&old, &code, &member, "wmRotOld3"))
        .await?;
    assert_eq!(status, 401, "keys dropped by the second rotation");
    let (status, _) = world
        .deliver(&old.id, &add(&new, &code, &member, "wmRotNew2"))
        .await?;
    assert_eq!(status, 200, "the pair the second rotation replaced");
    let outcomes = dry_run_outcomes(&old.id, from_ms, to_ms).await?;
    println!("after a second rotation that dropped them, the same window: {outcomes:?}");
    assert_eq!(outcomes, ["already_counted", "poison", "poison"]);
    eventually(
        "the adds of both later pairs are counted",
        CONVERGE,
        || async { Ok((live.adds_counted(&code, &member).await? == 5).then_some(())) },
    )
    .await?;
    Ok(())
}
