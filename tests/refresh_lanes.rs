//! The per-code lease and the lanes (docs/rules.md "Lanes"): the lease adapter against the deployed
//! table, and a code moved from the slow lane to the fast one while a slow reason is still
//! on its way, through the deployed functions. The lanes test reconfigures the refresh
//! function (a short quiet period and slow-lane interval) and puts it back at the end.

use adapters::dynamodb::{keys, DynamoStore};
use anyhow::{ensure, Context, Result};
use aws_sdk_dynamodb::types::AttributeValue;
use domain::ids::TenantId;
use domain::ids::{CodeId, StaffId};
use domain::lanes::Lane;
use domain::refresh::{
    Acquired, AfterRecord, CodeLeases, CodeRecords, FencedWrite, Lease, PushRecord,
};
use integration_tests::{eventually, now_ms, random_id, LiveTenant, World};
use std::time::Duration;

/// The lanes test's policy: quiet after this long without an edit...
const QUIET_AFTER_SECONDS: u64 = 8;
/// ...and at most one slow-lane push per code this often.
const SLOW_INTERVAL_SECONDS: u64 = 5;

fn store(world: &World) -> DynamoStore {
    DynamoStore::new(world.dynamodb.clone(), world.output("TableName").to_owned())
}

fn push(users: &[&str], at_ms: u64) -> Result<PushRecord> {
    Ok(PushRecord {
        users: users
            .iter()
            .map(|u| StaffId::parse(u))
            .collect::<Result<_, _>>()?,
        pushed_at_ms: at_ms,
        fallback: false,
        fact_at_ms: vec![at_ms],
        rotation: None,
        on_page: false,
        lane: Lane::Fast,
    })
}

async fn pushed_users(world: &World, tenant: &TenantId, code: &CodeId) -> Result<Vec<String>> {
    let item = world
        .dynamodb
        .get_item()
        .table_name(world.output("TableName"))
        .key(
            "pk",
            AttributeValue::S(keys::home(tenant, &keys::pushed(code))),
        )
        .key("sk", AttributeValue::S(keys::pushed(code)))
        .consistent_read(true)
        .send()
        .await?
        .item
        .context("no PUSHED# record")?;
    Ok(item
        .get("users")
        .and_then(|v| v.as_l().ok())
        .map(|l| l.iter().filter_map(|u| u.as_s().ok().cloned()).collect())
        .unwrap_or_default())
}

/// Writer A's lease expires while it is slow; writer B takes the code over and records its
/// push; A's late record is refused and A's release leaves B's lease alone. Time is passed
/// in, so the expiry needs no waiting.
#[tokio::test]
async fn an_expired_lease_is_taken_over_and_the_stale_writers_record_is_rejected() -> Result<()> {
    let world = World::connect().await?;
    let store = store(&world);
    let tenant = TenantId::parse(&format!("lease-{}", random_id(8)))?;
    let code = CodeId::parse("contended")?;
    let t0 = now_ms();

    let a = match store
        .acquire(&tenant, &code, "writer-a", t0, 1_000, None)
        .await?
    {
        Acquired::LeasedRefresh(lease) => lease,
        busy => anyhow::bail!("a free code's lease was refused: {busy:?}"),
    };
    let early = store
        .acquire(&tenant, &code, "writer-b", t0 + 500, 1_000, None)
        .await?;
    ensure!(
        early
            == Acquired::Busy {
                retry_after_ms: 500
            },
        "a live lease was taken: {early:?}"
    );
    let b = match store
        .acquire(&tenant, &code, "writer-b", t0 + 1_001, 1_000, None)
        .await?
    {
        Acquired::LeasedRefresh(lease) => lease,
        busy => anyhow::bail!("an expired lease was not taken over: {busy:?}"),
    };

    let fresh = store
        .record_push(
            &tenant,
            &code,
            &b,
            &push(&["bob"], t0 + 1_100)?,
            AfterRecord::Keep,
        )
        .await?;
    ensure!(
        fresh == FencedWrite::Written,
        "the holder's record: {fresh:?}"
    );
    let stale = store
        .record_push(
            &tenant,
            &code,
            &a,
            &push(&["alice"], t0 + 1_200)?,
            AfterRecord::Keep,
        )
        .await?;
    ensure!(
        stale == FencedWrite::LeaseLost,
        "the stale writer's record: {stale:?}"
    );
    ensure!(
        pushed_users(&world, &tenant, &code).await? == ["bob"],
        "the newer record was overwritten"
    );
    let history = store
        .query_prefix(&tenant, &keys::push_log_prefix(Some(&code)))
        .await?;
    ensure!(
        history.len() == 1,
        "the refused record left {} history entries",
        history.len()
    );

    store.release(&tenant, &code, &a).await?;
    let after_stale_release = store
        .acquire(&tenant, &code, "writer-c", t0 + 1_500, 1_000, None)
        .await?;
    ensure!(
        matches!(after_stale_release, Acquired::Busy { .. }),
        "the stale writer released the new holder's lease: {after_stale_release:?}"
    );
    store.release(&tenant, &code, &b).await?;
    let after_release = store
        .acquire(&tenant, &code, "writer-c", t0 + 1_500, 1_000, None)
        .await?;
    ensure!(
        matches!(after_release, Acquired::LeasedRefresh(Lease { .. })),
        "a released lease was not free: {after_release:?}"
    );
    Ok(())
}

/// The push history of a code: (pushed at, lane, users), oldest first.
async fn history(
    world: &World,
    tenant: &TenantId,
    code: &CodeId,
) -> Result<Vec<(u64, String, Vec<String>)>> {
    let mut entries: Vec<(u64, String, Vec<String>)> = store(world)
        .query_prefix(tenant, &keys::push_log_prefix(Some(code)))
        .await?
        .iter()
        .map(|item| {
            let at = item
                .get("pushed_at_ms")
                .and_then(|v| v.as_n().ok())
                .and_then(|n| n.parse().ok())
                .unwrap_or(0);
            let lane = item
                .get("lane")
                .and_then(|v| v.as_s().ok())
                .cloned()
                .unwrap_or_default();
            let users = item
                .get("users")
                .and_then(|v| v.as_l().ok())
                .map(|l| l.iter().filter_map(|u| u.as_s().ok().cloned()).collect())
                .unwrap_or_default();
            (at, lane, users)
        })
        .collect();
    entries.sort();
    Ok(entries)
}

async fn tally(world: &World, tenant: &TenantId, attribute: &str) -> Result<u64> {
    let items = store(world).refresh_tallies(tenant, None).await?;
    Ok(items
        .iter()
        .filter_map(|item| item.get(attribute)?.as_n().ok()?.parse::<u64>().ok())
        .sum())
}

#[tokio::test]
async fn a_code_moved_from_slow_to_fast_mid_stream_ends_with_one_correct_list() -> Result<()> {
    let world = World::connect().await?;
    world.wait_until_drained().await?;
    let original = world
        .function_environment("RefreshCodesFunctionName")
        .await?;
    let mut lanes = original.clone();
    lanes.insert("SLOW_LANE_SWITCH".into(), "auto".into());
    lanes.insert(
        "SLOW_LANE_QUIET_AFTER_SECONDS".into(),
        QUIET_AFTER_SECONDS.to_string(),
    );
    lanes.insert(
        "SLOW_LANE_INTERVAL_SECONDS".into(),
        SLOW_INTERVAL_SECONDS.to_string(),
    );
    world
        .set_function_environment("RefreshCodesFunctionName", lanes)
        .await?;
    let outcome = slow_then_fast(&world).await;
    world.wait_until_drained().await?;
    world
        .set_function_environment("RefreshCodesFunctionName", original)
        .await?;
    outcome
}

async fn slow_then_fast(world: &World) -> Result<()> {
    let live = LiveTenant::create(world, 4).await?;
    let tenant = TenantId::parse(&live.tenant.id)?;
    let code = CodeId::parse("lanes")?;
    let [a, b, c, d] = [0, 1, 2, 3].map(|i| live.staff[i].clone());
    let created_at = now_ms();
    let config_id = live.put_code("lanes", &[&a, &b, &c], None).await?;
    world.wait_until_drained().await?;

    // The code goes quiet: the policy now sends its reasons to the slow lane.
    eventually(
        "the code is quiet",
        Duration::from_secs(QUIET_AFTER_SECONDS + 10),
        || async { Ok((now_ms() > created_at + QUIET_AFTER_SECONDS * 1000 + 500).then_some(())) },
    )
    .await?;
    live.set_online(&b, false).await?;
    eventually(
        "the slow lane pushes b's absence",
        Duration::from_secs(30),
        || async {
            let pushes = history(world, &tenant, &code).await?;
            Ok(pushes
                .iter()
                .any(|(_, lane, users)| lane == "slow" && !users.contains(&b))
                .then_some(()))
        },
    )
    .await?;
    // Within the slow lane's interval: this change waits in a retry queue...
    live.set_online(&c, false).await?;
    eventually(
        "the slow lane puts the second push off",
        Duration::from_secs(30),
        || async { Ok((tally(world, &tenant, "slow_interval_waits").await? >= 1).then_some(())) },
    )
    .await?;
    // ...while an edit makes the code recent again: the fast lane takes it at once.
    live.put_code("lanes", &[&a, &b, &c, &d], None).await?;
    world.wait_until_drained().await?;

    // The contact way was created with a, b and c: the first push is the slow lane's.
    let pushes = history(world, &tenant, &code).await?;
    let lanes: Vec<&str> = pushes.iter().map(|(_, lane, _)| lane.as_str()).collect();
    println!("pushes by lane, oldest first: {pushes:?}");
    ensure!(
        lanes.first() == Some(&"slow") && lanes.last() == Some(&"fast"),
        "pushes by lane, oldest first: {lanes:?}"
    );
    let slow_at = pushes
        .iter()
        .filter(|(_, lane, _)| lane == "slow")
        .map(|(at, _, _)| *at)
        .collect::<Vec<_>>();
    for pair in slow_at.windows(2) {
        ensure!(
            pair[1] - pair[0] >= SLOW_INTERVAL_SECONDS * 1000,
            "two slow-lane pushes {} ms apart",
            pair[1] - pair[0]
        );
    }
    let expected = vec![a.clone(), d.clone()];
    let mut on_wecom = live.wecom_list(&config_id).await?;
    on_wecom.sort();
    let mut wanted = expected.clone();
    wanted.sort();
    ensure!(
        on_wecom == wanted,
        "WeCom holds {on_wecom:?}, the facts say {wanted:?}"
    );
    let mut recorded = pushed_users(world, &tenant, &code).await?;
    recorded.sort();
    ensure!(recorded == wanted, "the record says {recorded:?}");
    Ok(())
}
