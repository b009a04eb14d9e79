//! A staff change reaches every code the staff member sits on, however many: the admin API
//! answers once the fact and one fan-out are written, and the fan-out function expands it
//! into a reason per code, continuing in new messages when its deadline comes.

use anyhow::{ensure, Result};
use integration_tests::{eventually, LiveTenant, World};
use std::time::{Duration, Instant};

const CODES: usize = 1_000;
/// Answers timed (printed, not asserted); an even count, so the samples leave the member
/// online.
const SAMPLES: usize = 20;

#[tokio::test]
async fn a_staff_member_on_a_thousand_codes_is_answered_at_once_and_every_code_refreshed(
) -> Result<()> {
    let world = World::connect().await?;
    let live = LiveTenant::create(&world, 2).await?;
    let [leaving, staying] = [live.staff[0].as_str(), live.staff[1].as_str()];
    live.seed_native_codes("many", CODES, &[leaving, staying])
        .await?;

    // The answer's time, over several samples: the fan-out consumer is paused so the samples'
    // fan-outs pile up unexpanded (they are purged after), then the last change is expanded.
    world
        .set_consumer_enabled("FanOutFunctionName", false)
        .await?;
    let mut answers_ms = Vec::with_capacity(SAMPLES);
    for sample in 0..SAMPLES {
        let asked = Instant::now();
        let answer = live.set_online(leaving, sample % 2 == 1).await?;
        answers_ms.push(asked.elapsed().as_secs_f64() * 1000.0);
        ensure!(answer["fan_out"].is_string(), "{answer}");
    }
    // Every answer came back with its fan-out still queued, none of it expanded: the answer
    // does not wait on the codes, however many (the timings below are a figure, not a test).
    let queued = world.queue_depth("FanOutQueueUrl").await?;
    world.purge("FanOutQueueUrl").await?;
    world
        .set_consumer_enabled("FanOutFunctionName", true)
        .await?;
    ensure!(
        queued == SAMPLES as u64,
        "{queued} fan-outs queued after {SAMPLES} answers"
    );
    answers_ms.sort_by(f64::total_cmp);
    let p95 = answers_ms[(SAMPLES * 95).div_ceil(100) - 1];
    println!(
        "PUT staff online/offline, on {CODES} codes, {SAMPLES} samples: p50 {:.0} ms, p95 {p95:.0} ms, max {:.0} ms",
        answers_ms[SAMPLES / 2],
        answers_ms[SAMPLES - 1]
    );

    let asked = Instant::now();
    let answer = live.set_online(leaving, false).await?;
    ensure!(answer["fan_out"].is_string(), "{answer}");
    let converged = eventually(
        "every code drops the staff member",
        Duration::from_secs(300),
        || async {
            let lists = live.wecom_lists().await?;
            let left: Vec<&String> = lists
                .iter()
                .filter(|(_, users)| users.iter().any(|u| u == leaving))
                .map(|(code, _)| code)
                .collect();
            Ok((lists.len() == CODES && left.is_empty()).then_some(lists.len()))
        },
    )
    .await?;
    println!(
        "{converged} codes refreshed {:.0} s after the answer",
        asked.elapsed().as_secs_f64()
    );
    ensure!(
        world.queue_depth("FanOutDeadLetterQueueUrl").await? == 0,
        "a fan-out was dead-lettered"
    );
    Ok(())
}
