//! Staff lifecycle from WeCom's `change_contact` callbacks, through the callback route, on the
//! deployed stack: each change writes its fact and reaches every code the staff member sits on.

use anyhow::Result;
use integration_tests::{eventually, LiveTenant, World};
use std::time::Duration;

const CONVERGE: Duration = Duration::from_secs(90);

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

async fn lists_become(
    live: &LiveTenant<'_>,
    config_ids: &[String],
    expected: &[&str],
) -> Result<()> {
    for config_id in config_ids {
        eventually(
            &format!("{config_id} lists {expected:?}"),
            CONVERGE,
            || async { Ok((live.wecom_list(config_id).await? == expected).then_some(())) },
        )
        .await?;
    }
    Ok(())
}

#[tokio::test]
async fn a_deleted_user_leaves_every_code_and_never_comes_back() -> Result<()> {
    let world = world().await?;
    let live = LiveTenant::create(&world, 3).await?;
    let s: Vec<&str> = live.staff.iter().map(String::as_str).collect();
    let mut codes = Vec::new();
    for name in ["r1", "r2", "r3"] {
        codes.push(live.put_code(name, &s, None).await?);
    }
    lists_become(&live, &codes, &s).await?;

    live.deliver_contact_change(&[("ChangeType", "delete_user"), ("UserID", s[1])])
        .await?;
    lists_become(&live, &codes, &[s[0], s[2]]).await?;

    // An admin marking the resigned member online again changes nothing: resigned is never
    // eligible.
    live.set_online(s[1], true).await?;
    world.wait_until_drained().await?;
    lists_become(&live, &codes, &[s[0], s[2]]).await?;
    Ok(())
}

#[tokio::test]
async fn a_new_user_id_re_keys_the_member_in_place_on_every_code() -> Result<()> {
    let world = world().await?;
    let live = LiveTenant::create(&world, 3).await?;
    let s: Vec<&str> = live.staff.iter().map(String::as_str).collect();
    let first = live.put_code("k1", &s, None).await?;
    let second = live.put_code("k2", &[s[2], s[1], s[0]], None).await?;
    lists_become(&live, std::slice::from_ref(&first), &s).await?;
    lists_become(&live, std::slice::from_ref(&second), &[s[2], s[1], s[0]]).await?;

    let renamed = format!("{}-new", s[1]);
    world
        .sandbox()
        .put(
            &format!("/_sandbox/corps/{}/users/{renamed}", live.tenant.corp_id),
            serde_json::json!({}),
        )
        .await?;
    live.deliver_contact_change(&[
        ("ChangeType", "update_user"),
        ("UserID", s[1]),
        ("NewUserID", &renamed),
    ])
    .await?;

    lists_become(&live, &[first], &[s[0], &renamed, s[2]]).await?;
    lists_become(&live, &[second], &[s[2], &renamed, s[0]]).await?;
    let status = world
        .admin()
        .get(&format!("/tenants/{}/codes/k1", live.tenant.id))
        .await?;
    assert_eq!(
        status["eligible_now"],
        serde_json::json!([s[0], renamed, s[2]]),
        "{status}"
    );
    Ok(())
}

#[tokio::test]
async fn a_disabled_user_leaves_the_codes_and_returns_when_enabled() -> Result<()> {
    let world = world().await?;
    let live = LiveTenant::create(&world, 2).await?;
    let s: Vec<&str> = live.staff.iter().map(String::as_str).collect();
    let codes = vec![
        live.put_code("d1", &s, None).await?,
        live.put_code("d2", &s, None).await?,
    ];
    lists_become(&live, &codes, &s).await?;

    let disabled_at = integration_tests::now_secs();
    let enabled_at = (disabled_at + 1).to_string();
    let disabled_at = disabled_at.to_string();
    live.deliver_contact_change(&[
        ("ChangeType", "update_user"),
        ("UserID", s[0]),
        ("Status", "2"),
        ("CreateTime", &disabled_at),
    ])
    .await?;
    lists_become(&live, &codes, &[s[1]]).await?;

    // One second later by WeCom's clock: the later fact wins.
    live.deliver_contact_change(&[
        ("ChangeType", "update_user"),
        ("UserID", s[0]),
        ("Status", "1"),
        ("CreateTime", &enabled_at),
    ])
    .await?;
    lists_become(&live, &codes, &s).await?;
    Ok(())
}

#[tokio::test]
async fn department_changes_from_wecom_reach_every_code_listing_the_department() -> Result<()> {
    let world = world().await?;
    let live = LiveTenant::create(&world, 3).await?;
    let s: Vec<&str> = live.staff.iter().map(String::as_str).collect();
    let mut by_department = Vec::new();
    for (code, department) in [("dep-a", "70"), ("dep-b", "70"), ("dep-c", "71")] {
        let answer = world
            .admin()
            .put(
                &format!("/tenants/{}/codes/{code}", live.tenant.id),
                serde_json::json!({
                    "family": "native",
                    "members": [s[0]],
                    "departments": [department],
                    "switches": {"offline_check": true},
                }),
            )
            .await?;
        by_department.push((
            department,
            answer["config_id"].as_str().unwrap_or_default().to_owned(),
        ));
    }
    let listing = |department: &str| -> Vec<String> {
        by_department
            .iter()
            .filter(|(d, _)| *d == department)
            .map(|(_, config_id)| config_id.clone())
            .collect()
    };
    let at = integration_tests::now_secs();

    // A new member of department 70 joins both codes listing it, after the listed member.
    live.deliver_contact_change(&[
        ("ChangeType", "create_user"),
        ("UserID", s[1]),
        ("Department", "70"),
        ("CreateTime", &at.to_string()),
    ])
    .await?;
    lists_become(&live, &listing("70"), &[s[0], s[1]]).await?;
    lists_become(&live, &listing("71"), &[s[0]]).await?;

    // Moving to department 71 leaves 70's codes and joins 71's.
    live.deliver_contact_change(&[
        ("ChangeType", "update_user"),
        ("UserID", s[1]),
        ("Department", "71"),
        ("CreateTime", &(at + 1).to_string()),
    ])
    .await?;
    lists_become(&live, &listing("70"), &[s[0]]).await?;
    lists_become(&live, &listing("71"), &[s[0], s[1]]).await?;

    // WeCom deleting department 71 empties it on every code listing it.
    live.deliver_contact_change(&[
        ("ChangeType", "delete_party"),
        ("Id", "71"),
        ("CreateTime", &(at + 2).to_string()),
    ])
    .await?;
    lists_become(&live, &listing("71"), &[s[0]]).await?;
    Ok(())
}
