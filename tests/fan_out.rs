//! A staff change reaches every code the staff member sits on, however many: the admin API
//! answers once the fact and one fan-out are written, and the fan-out function expands it
//! into a reason per code, continuing in new messages when its deadline comes.

use anyhow::{ensure, Result};
use integration_tests::{eventually, LiveTenant, World};
use std::time::{Duration, Instant};

const CODES: usize = 1_000;

#[tokio::test]
async fn a_staff_member_on_a_thousand_codes_is_answered_at_once_and_every_code_refreshed(
) -> Result<()> {
    let world = World::connect().await?;
    let live = LiveTenant::create(&world, 2).await?;
    let [leaving, staying] = [live.staff[0].as_str(), live.staff[1].as_str()];
    live.seed_native_codes("many", CODES, &[leaving, staying])
        .await?;

    let asked = Instant::now();
    let answer = live.set_online(leaving, false).await?;
    let answered_ms = asked.elapsed().as_millis();
    ensure!(answer["fan_out"].is_string(), "{answer}");
    println!("PUT staff offline, on {CODES} codes: answered in {answered_ms} ms");

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
