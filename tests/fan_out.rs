//! A staff change reaches every code the staff member sits on, however many: the admin API
//! answers once the fact and one fan-out are written, and the fan-out function expands it
//! into a reason per code, continuing in new messages when its deadline comes.

use anyhow::{ensure, Context, Result};
use futures::{StreamExt, TryStreamExt};
use integration_tests::{eventually, now_ms, LiveTenant, World};
use serde_json::{json, Value};
use shared::adapters::dynamodb::DynamoStore;
use shared::membership::{CodeConfig, CodeId};
use shared::tenants::TenantId;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

const CODES: usize = 1_000;

/// The tenant's contact ways and their lists, as WeCom (the sandbox) holds them.
async fn lists(world: &World, corp_id: &str) -> Result<BTreeMap<String, Vec<String>>> {
    let ways = world
        .sandbox()
        .get(&format!("/_sandbox/contact-ways?corp_id={corp_id}"))
        .await?;
    Ok(ways["contact_ways"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|way| {
            let users = way["user"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect();
            (way["state"].as_str().unwrap_or_default().to_owned(), users)
        })
        .collect())
}

/// `CODES` native codes listing both staff members, created as the admin API would (a
/// contact way in WeCom, the code and its seats in the table), many at a time.
async fn seed_codes(live: &LiveTenant<'_>, members: [&str; 2]) -> Result<()> {
    let world = live.world;
    let store = DynamoStore::new(world.dynamodb.clone(), world.output("TableName").to_owned());
    let tenant = TenantId::parse(&live.tenant.id)?;
    let token = world.sandbox().token(&live.tenant).await?;
    let config: CodeConfig = serde_json::from_value(json!({
        "family": "native", "members": members, "switches": {"offline_check": true}
    }))?;
    futures::stream::iter(0..CODES)
        .map(|n| {
            let (store, tenant, token, config) = (&store, &tenant, &token, &config);
            async move {
                let code = CodeId::parse(&format!("many-{n:04}"))?;
                let created = world
                    .sandbox()
                    .call(
                        "add_contact_way",
                        token,
                        json!({"type": 2, "scene": 2, "state": code.as_str(), "user": members}),
                    )
                    .await?;
                let config_id = created["config_id"].as_str().context("created")?;
                store.put_code(tenant, &code, config, now_ms()).await?;
                let users: Vec<String> = members.iter().map(|m| (*m).to_owned()).collect();
                store
                    .set_config_id(tenant, &code, config_id, &users)
                    .await?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(16)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}

#[tokio::test]
async fn a_staff_member_on_a_thousand_codes_is_answered_at_once_and_every_code_refreshed(
) -> Result<()> {
    let world = World::connect().await?;
    let live = LiveTenant::create(&world, 2).await?;
    let [leaving, staying] = [live.staff[0].as_str(), live.staff[1].as_str()];
    seed_codes(&live, [leaving, staying]).await?;

    let asked = Instant::now();
    let answer = live.set_online(leaving, false).await?;
    let answered_ms = asked.elapsed().as_millis();
    ensure!(answer["fan_out"].is_string(), "{answer}");
    println!("PUT staff offline, on {CODES} codes: answered in {answered_ms} ms");

    let converged = eventually(
        "every code drops the staff member",
        Duration::from_secs(300),
        || async {
            let lists = lists(&world, &live.tenant.corp_id).await?;
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
