//! A refresh batch always finishes inside its invocation's timeout. With every WeCom call
//! hanging close to its own timeout, ten codes pushed one after another would need 28 s of a
//! 10 s invocation; the codes of a batch are pushed side by side (each is its own message
//! group and its own lease), so the batch ends in about one call's time: every code is
//! refreshed, no invocation times out, nothing reaches the dead-letter queue. The deadline cut
//! that requeues the codes an invocation has no time left for stays the guard for a slow
//! store; the refresh function's handler tests cover it.

use anyhow::{ensure, Result};
use integration_tests::{eventually, now_ms, LiveTenant, World};
use serde_json::json;
use std::time::{Duration, Instant};

const CODES: usize = 10;
/// Below the stack's WeComTimeoutMs (3,000): each call succeeds, slowly. Four of them one
/// after another would not fit the refresh function's 10 s.
const LATENCY_MS: u64 = 2_800;

#[tokio::test]
async fn a_batch_whose_wecom_calls_all_hang_near_the_timeout_is_pushed_side_by_side_in_time_and_loses_nothing(
) -> Result<()> {
    let world = World::connect().await?;
    let live = LiveTenant::create(&world, 2).await?;
    let [leaving, staying] = [live.staff[0].as_str(), live.staff[1].as_str()];
    live.seed_native_codes("slow", CODES, &[leaving, staying])
        .await?;
    let dead_letters_before = world.queue_depth("RefreshDeadLetterQueueUrl").await?;
    world
        .sandbox()
        .put(
            "/_sandbox/config",
            json!({"faults": [{
                "corp_id": live.tenant.corp_id, "api": "update_contact_way",
                "kind": "latency", "latency_ms": LATENCY_MS, "name": "hang-near-timeout",
            }]}),
        )
        .await?;
    let since_ms = now_ms();
    let started = Instant::now();
    let outcome = async {
        live.set_online(leaving, false).await?;
        eventually(
            "every code drops the staff member",
            Duration::from_secs(240),
            || async {
                let lists = live.wecom_lists().await?;
                let done = lists.len() == CODES
                    && lists.values().all(|users| users == &[staying.to_owned()]);
                Ok(done.then_some(()))
            },
        )
        .await?;
        println!(
            "{CODES} codes, every update_contact_way {LATENCY_MS} ms: all refreshed {:.0} s after the change",
            started.elapsed().as_secs_f64()
        );
        let logs = world
            .function_logs("RefreshCodesFunctionName", since_ms)
            .await?;
        let timed_out = logs
            .iter()
            .filter(|line| line.contains("Task timed out"))
            .count();
        let overlapping = most_calls_at_once(&world, &live.tenant.corp_id).await?;
        println!("invocations timed out: {timed_out}; most update_contact_way calls in flight at once: {overlapping}");
        ensure!(timed_out == 0, "{timed_out} invocations ran out of time");
        // The emulator runs one batch of the queue at a time, so calls in flight together
        // come from one batch's codes.
        ensure!(
            overlapping > 1,
            "no two pushes were in flight together: the batch's codes waited on each other"
        );
        let dead_letters = world.queue_depth("RefreshDeadLetterQueueUrl").await?;
        ensure!(
            dead_letters == dead_letters_before,
            "reasons reached the dead-letter queue: {dead_letters_before} -> {dead_letters}"
        );
        Ok(())
    }
    .await;
    world
        .sandbox()
        .put("/_sandbox/config", json!({"faults": []}))
        .await?;
    outcome
}

/// The most of the corp's hung `update_contact_way` calls (those that took the fault's
/// latency) the sandbox was serving at one moment; each is logged with when it arrived and
/// how long it took.
async fn most_calls_at_once(world: &World, corp_id: &str) -> Result<usize> {
    let log = world
        .sandbox()
        .get(&format!(
            "/_sandbox/calls?corp_id={corp_id}&api=update_contact_way"
        ))
        .await?;
    let spans: Vec<(u64, u64)> = log["calls"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .filter_map(|call| {
            let at = call["at_ms"].as_u64()?;
            let elapsed = call["elapsed_ms"].as_u64().filter(|&ms| ms >= LATENCY_MS)?;
            Some((at, at + elapsed))
        })
        .collect();
    Ok(spans
        .iter()
        .map(|&(start, _)| {
            spans
                .iter()
                .filter(|&&(other_start, other_end)| other_start <= start && start < other_end)
                .count()
        })
        .max()
        .unwrap_or(0))
}
