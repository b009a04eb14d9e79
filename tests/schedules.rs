//! Work schedules and the day rollover on the deployed stack: a shift start, a shift end and a
//! tenant's midnight each change a code's WeCom list with no event of ours, through the
//! schedule tick alone (EventBridge Scheduler, `rate(1 minute)`, over the due index).
//!
//! The tests run one at a time (`SERIAL`): the rollover test moves the whole stack's clock
//! (`QRSYNC_CLOCK_OFFSET_SECONDS` on every function, and the sandbox's clock with it), which
//! restarts the functions and would shift the other test's edges.

use anyhow::{ensure, Result};
use aws_sdk_dynamodb::types::AttributeValue;
use domain::tenants::{zone_with_the_next_midnight, Timezone};
use integration_tests::{eventually, LiveTenant, World};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const OFFSET_VAR: &str = adapters::clock::CLOCK_OFFSET_VAR;
/// A tick runs every 60-70 s locally and walks a minute 15 s after it began; a refresh
/// follows within a second or two. With `make test`'s four worlds on two cores, the first
/// tick after the stack's clock moved once took longer than 150 s (the functions' new
/// environment starts cold everywhere at once), so the patience is four periods.
const TICK_LATENCY: Duration = Duration::from_secs(240);
const CONVERGE: Duration = Duration::from_secs(60);
const HOUR_MS: u64 = 3_600_000;

fn real_now_ms() -> u64 {
    u64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .expect("clock after 1970")
            .as_millis(),
    )
    .expect("fits")
}

async fn world() -> Result<World> {
    let world = World::connect().await?;
    world
        .set_consumer_enabled("RecordFactsFunctionName", true)
        .await?;
    world
        .set_consumer_enabled("RefreshCodesFunctionName", true)
        .await?;
    Ok(world)
}

/// The stack's clock offset now, in seconds (the schedule tick's; every function has the same).
async fn clock_offset_secs(world: &World) -> Result<i64> {
    let env = world
        .function_environment("ScheduleTickFunctionName")
        .await?;
    Ok(env
        .get(OFFSET_VAR)
        .map(|v| v.parse())
        .transpose()?
        .unwrap_or(0))
}

/// The stack's functions (every `...FunctionName` output) with their environments.
async fn function_environments(world: &World) -> Result<Vec<(String, HashMap<String, String>)>> {
    let mut functions = Vec::new();
    for output in world.outputs.keys().filter(|k| k.ends_with("FunctionName")) {
        functions.push((output.clone(), world.function_environment(output).await?));
    }
    Ok(functions)
}

/// Moves every function's clock to `offset_secs` and the sandbox's by the difference, as an
/// operator would. Only with the queues drained: MiniStack restarts a function on a
/// configuration change and ends an invocation in flight.
async fn set_stack_clock(
    world: &World,
    functions: &[(String, HashMap<String, String>)],
    offset_secs: i64,
) -> Result<()> {
    let before = clock_offset_secs(world).await?;
    world.wait_until_drained().await?;
    for (output, env) in functions {
        let mut env = env.clone();
        env.insert(OFFSET_VAR.to_owned(), offset_secs.to_string());
        world.set_function_environment(output, env).await?;
    }
    world
        .sandbox()
        .put(
            "/_sandbox/clock",
            json!({"advance_ms": (offset_secs - before) * 1000}),
        )
        .await?;
    Ok(())
}

/// `due_at_ms` of a due item (`DUE#SHIFTS` or `DUE#MIDNIGHT`), if it exists.
async fn due_at_ms(world: &World, tenant: &str, sk: &str) -> Result<Option<u64>> {
    let item = world
        .dynamodb
        .get_item()
        .table_name(world.output("TableName"))
        .key(
            "pk",
            AttributeValue::S(adapters::dynamodb::keys::home(
                &domain::ids::TenantId::parse(tenant)?,
                sk,
            )),
        )
        .key("sk", AttributeValue::S(sk.to_owned()))
        .consistent_read(true)
        .send()
        .await?
        .item;
    Ok(item
        .as_ref()
        .and_then(|i| i.get("due_at_ms"))
        .and_then(|v| v.as_n().ok())
        .and_then(|n| n.parse().ok()))
}

/// One shift in `zone`'s local time from `start_ms` to `end_ms`, as the admin API takes it.
fn shift(zone: Timezone, start_ms: u64, end_ms: u64) -> Value {
    let start = zone.at(start_ms);
    json!({
        "day": start.format("%a").to_string().to_lowercase(),
        "start": start.format("%H:%M").to_string(),
        "end": zone.at(end_ms).format("%H:%M").to_string(),
    })
}

async fn set_schedule(live: &LiveTenant<'_>, staff: &str, shifts: Vec<Value>) -> Result<Value> {
    live.world
        .admin()
        .put(
            &format!("/tenants/{}/staff/{staff}", live.tenant.id),
            json!({"online": true, "schedule": {"shifts": shifts}}),
        )
        .await
}

#[tokio::test]
async fn a_shift_start_and_a_shift_end_each_change_a_list_with_no_other_event() -> Result<()> {
    let _serial = SERIAL.lock().await;
    let world = world().await?;
    let live = LiveTenant::create(&world, 3).await?;
    let (early, late, always) = (&live.staff[0], &live.staff[1], &live.staff[2]);
    let zone = Timezone::default();
    // `early` starts a shift at the edge and `late` ends one there; each sits on its own code
    // beside `always` (no schedule: always on shift), so each list proves its own edge.
    let starts = live
        .put_code("starts", &[early.as_str(), always.as_str()], None)
        .await?;
    let ends = live
        .put_code("ends", &[late.as_str(), always.as_str()], None)
        .await?;
    // The edge at least 80 s ahead: the setup below (two schedules, their lists converged,
    // the queues drained) took past a closer edge on a loaded machine.
    let edge_ms = {
        let now = real_now_ms().saturating_add_signed(clock_offset_secs(&world).await? * 1000);
        ((now + 80_000) / 60_000 + 1) * 60_000
    };
    set_schedule(
        &live,
        early,
        vec![shift(zone, edge_ms, edge_ms + 2 * HOUR_MS)],
    )
    .await?;
    set_schedule(
        &live,
        late,
        vec![shift(zone, edge_ms - 2 * HOUR_MS, edge_ms)],
    )
    .await?;
    let before = (vec![always.clone()], vec![late.clone(), always.clone()]);
    eventually("off shift before the edge", CONVERGE, || async {
        let lists = (
            live.wecom_list(&starts).await?,
            live.wecom_list(&ends).await?,
        );
        Ok((lists == before).then_some(()))
    })
    .await?;
    world.wait_until_drained().await?;
    ensure!(
        real_now_ms() < edge_ms,
        "setup took past the edge; nothing proven"
    );

    // No event of ours from here on: the tick alone brings the edge to both codes.
    let after = (vec![early.clone(), always.clone()], vec![always.clone()]);
    let wait = Duration::from_millis(edge_ms - real_now_ms()) + TICK_LATENCY;
    eventually("both edges reached WeCom", wait, || async {
        let lists = (
            live.wecom_list(&starts).await?,
            live.wecom_list(&ends).await?,
        );
        Ok((lists == after).then_some(()))
    })
    .await?;
    let seen_ms = real_now_ms();
    println!(
        "edge at {edge_ms}: lists changed {:.1} s after it",
        (seen_ms - edge_ms) as f64 / 1000.0
    );

    // The tenant's shift item moved on to the earliest next edge: `early`'s shift end (before
    // `late`'s next week).
    let tenant = &live.tenant.id;
    assert_eq!(
        due_at_ms(&world, tenant, "DUE#SHIFTS").await?,
        Some(edge_ms + 2 * HOUR_MS)
    );
    Ok(())
}

#[tokio::test]
async fn the_tenants_midnight_brings_back_a_member_removed_for_the_daily_limit() -> Result<()> {
    let _serial = SERIAL.lock().await;
    let world = world().await?;
    let functions = function_environments(&world).await?;
    let live = LiveTenant::create(&world, 2).await?;
    let members: Vec<&str> = live.staff.iter().map(String::as_str).collect();
    // Setup takes well under three minutes; the clock then jumps to just past the midnight.
    let (zone, midnight_ms) = zone_with_the_next_midnight(real_now_ms() + 180_000);
    world
        .admin()
        .put(
            &format!("/tenants/{}", live.tenant.id),
            json!({
                "corp_id": live.tenant.corp_id,
                "corp_secret": live.tenant.corp_secret,
                "callback_token": live.tenant.token,
                "encoding_aes_key": live.tenant.aes_key,
                "timezone": zone.name(),
            }),
        )
        .await?;
    assert_eq!(
        due_at_ms(&world, &live.tenant.id, "DUE#MIDNIGHT").await?,
        Some(midnight_ms),
        "PUT tenant points the midnight item at {zone}'s next midnight"
    );
    let config_id = live.put_code("daily", &members, Some(1)).await?;
    eventually("both listed", CONVERGE, || async {
        Ok((live.wecom_list(&config_id).await? == members).then_some(()))
    })
    .await?;

    let scan = world
        .sandbox()
        .post(
            "/_sandbox/scan",
            json!({"corp_id": live.tenant.corp_id, "config_id": config_id}),
        )
        .await?;
    let picked = scan["scan"]["userid"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let other: Vec<&str> = members.iter().copied().filter(|m| *m != picked).collect();
    eventually("the member at the limit is removed", CONVERGE, || async {
        Ok((live.wecom_list(&config_id).await? == other).then_some(()))
    })
    .await?;
    // The quota loop's claim is what the rollover reads.
    let day = zone.at(real_now_ms()).format("%Y-%m-%d").to_string();
    let claim = world
        .dynamodb
        .get_item()
        .table_name(world.output("TableName"))
        .key(
            "pk",
            AttributeValue::S(format!("TENANT#{}", live.tenant.id)),
        )
        .key(
            "sk",
            AttributeValue::S(format!("REMOVED#{day}#code_daily#{picked}#daily")),
        )
        .consistent_read(true)
        .send()
        .await?;
    ensure!(
        claim.item.is_some(),
        "no daily-limit claim for {picked} on {day}"
    );

    // Just past the tenant's midnight; nothing else happens from here on.
    let offset_secs = i64::try_from((midnight_ms + 20_000 - real_now_ms()) / 1000 + 1)?;
    let before = clock_offset_secs(&world).await?;
    set_stack_clock(&world, &functions, offset_secs).await?;
    let rolled = eventually(
        "the member is back after midnight",
        TICK_LATENCY,
        || async { Ok((live.wecom_list(&config_id).await? == members).then_some(())) },
    )
    .await;
    // The list may be back before the tick has run: the sweep's read-back finds the record
    // behind the new day's facts and resyncs the code itself.
    let moved_on = eventually("the midnight item moves on", TICK_LATENCY, || async {
        Ok(due_at_ms(&world, &live.tenant.id, "DUE#MIDNIGHT")
            .await?
            .filter(|next| *next != midnight_ms))
    })
    .await;
    // Back to the real clock whatever happened, for the tests after this one.
    set_stack_clock(&world, &functions, before).await?;
    rolled?;
    let next = moved_on?;
    assert_eq!(next, zone.next_midnight_ms(midnight_ms + 1));
    println!("{zone}: clock moved {offset_secs} s; rolled over");
    Ok(())
}
