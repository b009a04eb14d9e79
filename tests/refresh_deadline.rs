//! A refresh batch always finishes inside its invocation's timeout. With every WeCom call
//! hanging close to its own timeout, a batch of codes cannot all be pushed in one
//! invocation: the handler requeues the codes it has no time left for, so each code is
//! refreshed later, nothing reaches the dead-letter queue, and no reason is lost.

use anyhow::{ensure, Result};
use integration_tests::{eventually, now_ms, LiveTenant, World};
use serde_json::json;
use std::time::{Duration, Instant};

const CODES: usize = 10;
/// Below the stack's WeComTimeoutMs (3,000): each call succeeds, slowly. Three of them no
/// longer fit the refresh function's 10 s.
const LATENCY_MS: u64 = 2_800;

#[tokio::test]
async fn a_batch_whose_wecom_calls_all_hang_near_the_timeout_refreshes_every_code_later_and_loses_nothing(
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
        let requeued = logs
            .iter()
            .filter(|line| line.contains("no time left in this invocation"))
            .count();
        let timed_out = logs
            .iter()
            .filter(|line| line.contains("Task timed out"))
            .count();
        println!("codes requeued at the deadline: {requeued}; invocations timed out: {timed_out}");
        ensure!(requeued > 0, "no code was requeued at the deadline, so the batch did not need to be cut");
        ensure!(timed_out == 0, "{timed_out} invocations ran out of time");
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
