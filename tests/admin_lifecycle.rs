//! The admin API's lifecycle operations on the deployed stack: config edits, code deletion,
//! department membership and resignation, each checked where it matters, in WeCom (the
//! sandbox) and in the table.

use adapters::dynamodb::{keys, DynamoStore};
use anyhow::Result;
use domain::ids::TenantId;
use domain::ids::{CodeId, DepartmentId, StaffId};
use integration_tests::{eventually, LiveTenant, World};
use serde_json::{json, Value};
use std::time::Duration;

const CONVERGE: Duration = Duration::from_secs(60);

// Every code here is native: a new sequenced or quota code whose first recompute leaves
// WeCom's list as created fails that refresh (`record_rotation` needs a last-pushed record
// the code does not have yet) and holds its message group for a visibility timeout; these
// tests are about the admin API, not that.

async fn world() -> Result<World> {
    let world = World::connect().await?;
    world
        .set_consumer_enabled("RecordFactsFunctionName", true)
        .await?;
    Ok(world)
}

/// Creates or edits a code with `body`; answers its config id.
async fn put_code(live: &LiveTenant<'_>, code: &str, body: Value) -> Result<String> {
    let answer = live
        .world
        .admin()
        .put(&format!("/tenants/{}/codes/{code}", live.tenant.id), body)
        .await?;
    Ok(answer["config_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no config id in {answer}"))
        .to_owned())
}

async fn put_department(
    live: &LiveTenant<'_>,
    department: &str,
    members: &[&str],
) -> Result<Value> {
    live.world
        .admin()
        .put(
            &format!("/tenants/{}/departments/{department}", live.tenant.id),
            json!({ "members": members }),
        )
        .await
}

/// Waits until the sandbox lists exactly `expected` on the contact way.
async fn until_listed(live: &LiveTenant<'_>, config_id: &str, expected: &[&str]) -> Result<()> {
    eventually(
        &format!("the sandbox lists {expected:?} on {config_id}"),
        CONVERGE,
        || async { Ok((live.wecom_list(config_id).await? == expected).then_some(())) },
    )
    .await
}

fn store(world: &World) -> DynamoStore {
    DynamoStore::new(world.dynamodb.clone(), world.output("TableName").to_owned())
}

/// Whether the tenant has an item with exactly this sort key.
async fn item_exists(world: &World, tenant: &str, sk: &str) -> Result<bool> {
    let items = store(world)
        .query_prefix(&TenantId::parse(tenant)?, sk)
        .await?;
    Ok(items.iter().any(|item| {
        item.get(keys::SK)
            .and_then(|v| v.as_s().ok())
            .map(String::as_str)
            == Some(sk)
    }))
}

#[tokio::test]
async fn a_reorder_and_an_offline_check_switched_off_reach_the_sandbox_list() -> Result<()> {
    let world = world().await?;
    let live = LiveTenant::create(&world, 3).await?;
    let s: Vec<&str> = live.staff.iter().map(String::as_str).collect();
    live.set_online(s[2], false).await?;
    let body = |members: [&str; 3], offline_check: bool| {
        json!({"family": "native", "members": members,
               "switches": {"offline_check": offline_check}})
    };
    let config_id = put_code(&live, "edited", body([s[0], s[1], s[2]], true)).await?;
    until_listed(&live, &config_id, &[s[0], s[1]]).await?;

    put_code(&live, "edited", body([s[2], s[1], s[0]], true)).await?;
    until_listed(&live, &config_id, &[s[1], s[0]]).await?;

    put_code(&live, "edited", body([s[2], s[1], s[0]], false)).await?;
    until_listed(&live, &config_id, &[s[2], s[1], s[0]]).await?;

    let status = world
        .admin()
        .get(&format!("/tenants/{}/codes/edited", live.tenant.id))
        .await?;
    assert_eq!(status["version"], 3, "{status}");
    assert_eq!(
        status["eligible_now"],
        json!([s[2], s[1], s[0]]),
        "{status}"
    );
    Ok(())
}

#[tokio::test]
async fn deleting_a_code_deletes_its_contact_way_in_wecom_and_its_items() -> Result<()> {
    let world = world().await?;
    let live = LiveTenant::create(&world, 3).await?;
    let s: Vec<&str> = live.staff.iter().map(String::as_str).collect();
    let tenant = live.tenant.id.clone();
    put_department(&live, "4", &[s[2]]).await?;
    let config_id = put_code(
        &live,
        "doomed",
        json!({"family": "native", "members": [s[0], s[1]], "departments": ["4"],
               "fallback": [s[2]], "switches": {"offline_check": true}}),
    )
    .await?;
    let kept = put_code(
        &live,
        "kept",
        json!({"family": "native", "members": [s[0]], "departments": ["4"]}),
    )
    .await?;
    // A push, so that the code has a last-pushed record to delete too.
    live.set_online(s[1], false).await?;
    until_listed(&live, &config_id, &[s[0], s[2]]).await?;
    let path = format!("/tenants/{tenant}/codes/doomed");
    eventually("the push is recorded", CONVERGE, || async {
        let status = world.admin().get(&path).await?;
        Ok((status["in_sync"] == true && !status["last_pushed"].is_null()).then_some(()))
    })
    .await?;
    let code = CodeId::parse("doomed")?;
    let department = DepartmentId::parse("4")?;
    let mut doomed_items = vec![keys::code(&code), keys::pushed(&code)];
    for staff in [s[0], s[1], s[2]] {
        doomed_items.push(keys::seat(&StaffId::parse(staff)?, &code));
    }
    doomed_items.push(keys::department_seat(&department, &code));
    for sk in &doomed_items {
        assert!(
            item_exists(&world, &tenant, sk).await?,
            "{sk} before the delete"
        );
    }

    let answer = world.admin().delete(&path).await?;

    assert_eq!(answer, json!({"code": "doomed", "config_id": config_id}));
    let way = world
        .http
        .get(format!(
            "{}/_sandbox/contact-ways/{config_id}",
            world.sandbox_url
        ))
        .send()
        .await?;
    assert_eq!(
        way.status().as_u16(),
        404,
        "the sandbox still has {config_id}"
    );
    for sk in &doomed_items {
        assert!(
            !item_exists(&world, &tenant, sk).await?,
            "{sk} after the delete"
        );
    }
    assert_eq!(world.admin().answer("GET", &path, None).await?.status, 404);
    let again = world.admin().answer("DELETE", &path, None).await?;
    assert_eq!(again.status, 404, "{}", again.body);
    // The other code of the same staff and department is untouched.
    assert_eq!(live.wecom_list(&kept).await?, [s[0], s[2]]);
    let kept_seat = keys::department_seat(&department, &CodeId::parse("kept")?);
    assert!(item_exists(&world, &tenant, &kept_seat).await?);
    Ok(())
}

#[tokio::test]
async fn a_department_change_reaches_every_code_listing_the_department() -> Result<()> {
    let world = world().await?;
    let live = LiveTenant::create(&world, 5).await?;
    let s: Vec<&str> = live.staff.iter().map(String::as_str).collect();
    put_department(&live, "7", &[s[0], s[1]]).await?;
    let a = put_code(
        &live,
        "dept-a",
        json!({"family": "native", "members": [s[4]], "departments": ["7"]}),
    )
    .await?;
    let b = put_code(
        &live,
        "dept-b",
        json!({"family": "native", "departments": ["7"], "switches": {"offline_check": true}}),
    )
    .await?;
    let c = put_code(
        &live,
        "dept-c",
        json!({"family": "native", "members": [s[3]], "departments": ["9", "7"]}),
    )
    .await?;
    until_listed(&live, &a, &[s[4], s[0], s[1]]).await?;
    until_listed(&live, &b, &[s[0], s[1]]).await?;
    until_listed(&live, &c, &[s[3], s[0], s[1]]).await?;

    let answer = put_department(&live, "7", &[s[2], s[1]]).await?;

    assert!(answer["fan_out"].is_string(), "{answer}");
    until_listed(&live, &a, &[s[4], s[1], s[2]]).await?;
    until_listed(&live, &b, &[s[1], s[2]]).await?;
    until_listed(&live, &c, &[s[3], s[1], s[2]]).await?;

    // The same membership, changed from the staff member's side.
    let answer = live
        .world
        .admin()
        .put(
            &format!("/tenants/{}/staff/{}", live.tenant.id, s[0]),
            json!({"online": true, "departments": ["7"]}),
        )
        .await?;
    assert!(answer["fan_out"].is_string(), "{answer}");
    until_listed(&live, &a, &[s[4], s[0], s[1], s[2]]).await?;
    until_listed(&live, &b, &[s[0], s[1], s[2]]).await?;
    until_listed(&live, &c, &[s[3], s[0], s[1], s[2]]).await?;
    Ok(())
}

#[tokio::test]
async fn a_resignation_through_the_admin_api_removes_the_staff_member_from_every_code() -> Result<()>
{
    let world = world().await?;
    let live = LiveTenant::create(&world, 4).await?;
    let s: Vec<&str> = live.staff.iter().map(String::as_str).collect();
    put_department(&live, "5", &[s[0], s[3]]).await?;
    let x = put_code(
        &live,
        "quits-x",
        json!({"family": "native", "members": [s[0], s[1]]}),
    )
    .await?;
    let y = put_code(
        &live,
        "quits-y",
        json!({"family": "native", "members": [s[2], s[0]], "switches": {"offline_check": true}}),
    )
    .await?;
    let z = put_code(
        &live,
        "quits-z",
        json!({"family": "native", "members": [s[1]], "departments": ["5"]}),
    )
    .await?;
    until_listed(&live, &x, &[s[0], s[1]]).await?;
    until_listed(&live, &y, &[s[2], s[0]]).await?;
    until_listed(&live, &z, &[s[1], s[0], s[3]]).await?;

    let answer = live
        .world
        .admin()
        .put(
            &format!("/tenants/{}/staff/{}", live.tenant.id, s[0]),
            json!({"online": true, "employment": "resigned"}),
        )
        .await?;

    assert_eq!(answer["employment"], "resigned", "{answer}");
    assert!(answer["fan_out"].is_string(), "{answer}");
    until_listed(&live, &x, &[s[1]]).await?;
    until_listed(&live, &y, &[s[2]]).await?;
    until_listed(&live, &z, &[s[1], s[3]]).await?;
    let status = world
        .admin()
        .get(&format!("/tenants/{}/codes/quits-z", live.tenant.id))
        .await?;
    assert_eq!(
        status["excluded"],
        json!([{"staff": s[0], "reason": "resigned"}]),
        "{status}"
    );
    Ok(())
}
