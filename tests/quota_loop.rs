//! The quota loop on the deployed stack: a counted add that takes a staff member to the
//! company-wide daily cap claims the crossing once, publishes one `StaffQuotaReached` through
//! the EventBridge bus, and sends one refresh reason to every code the staff member sits on,
//! found through the staff -> codes index.
//!
//! One test per binary: it pauses the refresh consumer to count the reasons it fans out.

use anyhow::{ensure, Result};
use integration_tests::{eventually, LiveTenant, World};
use serde_json::{json, Value};
use std::time::Duration;

const CODES: usize = 150;
const CONVERGE: Duration = Duration::from_secs(180);

/// Everything on the stack's own notification queue (the rule's default target).
async fn notifications(world: &World) -> Result<Vec<Value>> {
    let mut seen = Vec::new();
    loop {
        let received = world
            .sqs
            .receive_message()
            .queue_url(world.output("QuotaNotificationsQueueUrl"))
            .max_number_of_messages(10)
            .visibility_timeout(300)
            .send()
            .await?;
        let messages = received.messages();
        if messages.is_empty() {
            return Ok(seen);
        }
        for message in messages {
            seen.push(serde_json::from_str(message.body().unwrap_or_default())?);
        }
    }
}

#[tokio::test]
async fn reaching_the_company_cap_on_150_codes_sends_150_reasons_one_notification_and_fixes_every_list(
) -> Result<()> {
    let world = World::connect().await?;
    world
        .set_consumer_enabled("RecordFactsFunctionName", true)
        .await?;
    world
        .set_consumer_enabled("RefreshCodesFunctionName", true)
        .await?;
    let live = LiveTenant::create(&world, 2).await?;
    let (capped, other) = (live.staff[0].clone(), live.staff[1].clone());
    live.set_company_daily_cap(Some(1)).await?;
    let mut config_ids = Vec::with_capacity(CODES);
    for i in 0..CODES {
        config_ids.push(
            live.put_code(&format!("q{i}"), &[&capped, &other], None)
                .await?,
        );
    }
    world.wait_until_drained().await?;

    world
        .set_consumer_enabled("RefreshCodesFunctionName", false)
        .await?;
    let outcome = async {
        live.deliver_add(&capped, "q7", "wm-cap-1").await?;
        let reasons = eventually(
            "the add and its fan-out reach refresh.fifo",
            CONVERGE,
            || async {
                let inbox = world.queue_depth("InboxQueueUrl").await?;
                let refresh = world.queue_depth("RefreshQueueUrl").await?;
                Ok((inbox == 0 && refresh > CODES as u64).then_some(refresh))
            },
        )
        .await?;
        // One reason for the add itself (code q7) and one per code of the capped staff member.
        ensure!(
            reasons == CODES as u64 + 1,
            "{reasons} reasons, expected {} (fan-out {CODES} + the add's own)",
            CODES + 1
        );
        Ok::<_, anyhow::Error>(())
    }
    .await;
    world
        .set_consumer_enabled("RefreshCodesFunctionName", true)
        .await?;
    outcome?;

    for config_id in &config_ids {
        eventually("the capped member leaves every code", CONVERGE, || async {
            Ok((live.wecom_list(config_id).await? == [other.clone()]).then_some(()))
        })
        .await?;
    }
    world.wait_until_drained().await?;
    let published: Vec<Value> = notifications(&world)
        .await?
        .into_iter()
        .filter(|event| event["detail"]["tenant"] == json!(live.tenant.id))
        .collect();
    assert_eq!(published.len(), 1, "{published:?}");
    let detail = &published[0]["detail"];
    assert_eq!(detail["staff"], json!(capped));
    assert_eq!(detail["limit"], json!("company_daily"));
    assert_eq!(detail["codes"], json!(CODES));
    assert_eq!(published[0]["detail-type"], json!("StaffQuotaReached"));
    Ok(())
}
