//! The flow of docs/rules.md end to end on the deployed stack: WeCom callback -> inbox ->
//! facts -> refresh reason -> the single writer -> WeCom (the sandbox), and the admin API.

use anyhow::Result;
use integration_tests::{eventually, LiveTenant, World};
use serde_json::json;
use std::time::Duration;

const CONVERGE: Duration = Duration::from_secs(60);

async fn world() -> Result<World> {
    let world = World::connect().await?;
    world
        .set_consumer_enabled("RecordFactsFunctionName", true)
        .await?;
    Ok(world)
}

#[tokio::test]
async fn a_new_code_lists_its_online_members_in_wecom() -> Result<()> {
    let world = world().await?;
    let live = LiveTenant::create(&world, 3).await?;
    let members: Vec<&str> = live.staff.iter().map(String::as_str).collect();
    live.set_online(members[1], false).await?;

    let config_id = live.put_code("welcome", &members, None).await?;

    let expected = vec![members[0].to_owned(), members[2].to_owned()];
    eventually("the sandbox lists the online members", CONVERGE, || async {
        Ok((live.wecom_list(&config_id).await? == expected).then_some(()))
    })
    .await?;
    let status = world
        .admin()
        .get(&format!("/tenants/{}/codes/welcome", live.tenant.id))
        .await?;
    assert_eq!(status["eligible_now"], json!(expected), "{status}");
    Ok(())
}

#[tokio::test]
async fn an_offline_flip_reaches_the_wecom_list_and_back() -> Result<()> {
    let world = world().await?;
    let live = LiveTenant::create(&world, 3).await?;
    let members: Vec<&str> = live.staff.iter().map(String::as_str).collect();
    let config_id = live.put_code("flip", &members, None).await?;
    eventually("all three listed", CONVERGE, || async {
        Ok((live.wecom_list(&config_id).await?.len() == 3).then_some(()))
    })
    .await?;

    let answer = live.set_online(members[0], false).await?;
    assert!(answer["fan_out"].is_string(), "{answer}");
    eventually("the offline member is removed", CONVERGE, || async {
        Ok((live.wecom_list(&config_id).await? == members[1..]).then_some(()))
    })
    .await?;

    live.set_online(members[0], true).await?;
    eventually("the member is back, in member order", CONVERGE, || async {
        Ok((live.wecom_list(&config_id).await? == members).then_some(()))
    })
    .await?;
    Ok(())
}

#[tokio::test]
async fn the_same_add_delivered_twice_concurrently_counts_once() -> Result<()> {
    let world = world().await?;
    let live = LiveTenant::create(&world, 2).await?;
    let members: Vec<&str> = live.staff.iter().map(String::as_str).collect();
    let config_id = live.put_code("twice", &members, None).await?;

    let scan = world
        .sandbox()
        .post(
            "/_sandbox/scan",
            json!({"corp_id": live.tenant.corp_id, "config_id": config_id, "duplicate": true}),
        )
        .await?;
    let picked = scan["scan"]["userid"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert_eq!(
        scan["delivery"]["deliveries"].as_array().map(Vec::len),
        Some(2),
        "{scan}"
    );

    eventually("the add is counted", CONVERGE, || async {
        Ok((live.adds_counted("twice", &picked).await? >= 1).then_some(()))
    })
    .await?;
    world.wait_until_drained().await?;
    assert_eq!(live.adds_counted("twice", &picked).await?, 1);
    Ok(())
}

#[tokio::test]
async fn a_member_who_reaches_the_daily_limit_leaves_the_list() -> Result<()> {
    let world = world().await?;
    let live = LiveTenant::create(&world, 2).await?;
    let members: Vec<&str> = live.staff.iter().map(String::as_str).collect();
    let config_id = live.put_code("limited", &members, Some(1)).await?;
    eventually("both listed", CONVERGE, || async {
        Ok((live.wecom_list(&config_id).await?.len() == 2).then_some(()))
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

    let other: Vec<String> = members
        .iter()
        .filter(|m| **m != picked)
        .map(|m| m.to_string())
        .collect();
    eventually("the member at the limit is removed", CONVERGE, || async {
        Ok((live.wecom_list(&config_id).await? == other).then_some(()))
    })
    .await?;
    assert_eq!(live.adds_counted("limited", &picked).await?, 1);
    Ok(())
}
