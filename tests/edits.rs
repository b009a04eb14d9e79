//! Admin writes that cannot end half done (`domain::owed`): a code edit owing more index
//! writes than one transaction takes, cut short by failed transactions on the wire and
//! retried; and a department of 2,000 members stored in one PUT. The first step reconfigures
//! the admin function (its DynamoDB endpoint goes through a `FaultProxy`), so the steps run
//! one after another and the original configuration is put back before asserting.

use anyhow::{ensure, Result};
use aws_sdk_dynamodb::types::AttributeValue;
use domain::ids::TenantId;
use integration_tests::proxy::FaultProxy;
use integration_tests::{eventually, LiveTenant, World};
use serde_json::{json, Value};
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[tokio::test]
async fn edits_that_cannot_end_half_done() -> Result<()> {
    let world = World::connect().await?;
    a_department_of_2000_members_is_stored_in_one_put_and_every_member_lists_it(&world).await?;
    let admin_env = world.function_environment("AdminApiFunctionName").await?;
    let outcome =
        a_code_edit_cut_short_mid_way_and_retried_ends_with_the_index_matching(&world, &admin_env)
            .await;
    world
        .set_function_environment("AdminApiFunctionName", admin_env)
        .await?;
    outcome
}

fn numbered(prefix: &str, range: std::ops::Range<usize>) -> Vec<String> {
    range.map(|i| format!("{prefix}{i:04}")).collect()
}

/// The (staff, code) pairs of the tenant's staff -> codes index, in every staff member's home.
async fn seats(world: &World, tenant: &TenantId) -> Result<BTreeSet<(String, String)>> {
    Ok(world
        .tenant_items(tenant, "SEAT#")
        .await?
        .iter()
        .filter_map(|item| {
            let sk = item.get("sk")?.as_s().ok()?;
            let (staff, code) = sk.strip_prefix("SEAT#")?.rsplit_once('#')?;
            Some((staff.to_owned(), code.to_owned()))
        })
        .collect())
}

/// The tenant's records of index work still owed.
async fn owed_items(world: &World, tenant: &TenantId) -> Result<usize> {
    Ok(world.tenant_items(tenant, "OWED#").await?.len())
}

/// The staff whose own record lists department `7`, read from every staff item of the tenant.
async fn listing_department_7(world: &World, tenant: &TenantId) -> Result<BTreeSet<String>> {
    Ok(world
        .tenant_items(tenant, "STAFF#")
        .await?
        .iter()
        .filter(|item| match item.get("departments") {
            Some(AttributeValue::Ss(set)) => set.iter().any(|d| d == "7"),
            _ => false,
        })
        .filter_map(|item| {
            let sk = item.get("sk")?.as_s().ok()?;
            sk.strip_prefix("STAFF#").map(str::to_owned)
        })
        .collect())
}

async fn a_department_of_2000_members_is_stored_in_one_put_and_every_member_lists_it(
    world: &World,
) -> Result<()> {
    let live = LiveTenant::create(world, 1).await?;
    let tenant = TenantId::parse(&live.tenant.id)?;
    let path = format!("/tenants/{}/departments/7", live.tenant.id);
    let mut answers_ms = Vec::new();
    for members in [numbered("m", 0..2000), numbered("n", 0..2000)] {
        let asked = Instant::now();
        let answer = world
            .admin()
            .put(&path, json!({ "members": members }))
            .await?;
        answers_ms.push(asked.elapsed().as_millis());
        ensure!(
            answer["members"].as_array().map(Vec::len) == Some(2000),
            "the answer lists the 2,000 members: {answer}"
        );
        assert_eq!(
            listing_department_7(world, &tenant).await?,
            members.into_iter().collect::<BTreeSet<_>>()
        );
        assert_eq!(owed_items(world, &tenant).await?, 0, "nothing is left owed");
    }
    println!(
        "a department of 2000 members: stored in {} ms, replaced by 2000 others in {} ms",
        answers_ms[0], answers_ms[1]
    );
    Ok(())
}

async fn a_code_edit_cut_short_mid_way_and_retried_ends_with_the_index_matching(
    world: &World,
    original: &HashMap<String, String>,
) -> Result<()> {
    let live = LiveTenant::create(world, 2).await?;
    let tenant = TenantId::parse(&live.tenant.id)?;
    // Two staff WeCom knows (so the contact way is created), and ids nobody stored: each is a
    // seat in the index, never eligible. 152 and 202 seats, more than one transaction takes.
    let body = |extra: &[String]| -> Value {
        let mut members: Vec<String> = live.staff.clone();
        members.extend(extra.iter().cloned());
        json!({"family": "native", "members": members})
    };
    let bodies = [body(&numbered("x", 0..150)), body(&numbered("x", 100..300))];
    let path = format!("/tenants/{}/codes/wide", live.tenant.id);
    world.admin().put(&path, bodies[0].clone()).await?;
    world.wait_until_drained().await?;

    // Every chunk transaction of the edit but the first fails: the fence of a chunk is the
    // only `version = :v` condition (the code's own write conditions on `:seen`).
    let endpoint = std::env::var("AWS_ENDPOINT_URL")?;
    let chunks_seen = Arc::new(AtomicUsize::new(0));
    let tenant_id = live.tenant.id.clone();
    let seen = chunks_seen.clone();
    let chunks_after_the_first = Arc::new(move |target: &str, body: &str| {
        target.ends_with("TransactWriteItems")
            && body.contains(&tenant_id)
            && body.contains("OWED#CODE#wide#")
            && body.contains("\"version = :v\"")
            && seen.fetch_add(1, Ordering::SeqCst) >= 1
    });
    let proxy = FaultProxy::start(&endpoint, chunks_after_the_first).await?;
    let mut through_proxy = original.clone();
    through_proxy.insert("AWS_ENDPOINT_URL_DYNAMODB".into(), proxy.url.clone());
    world
        .set_function_environment("AdminApiFunctionName", through_proxy)
        .await?;

    // Until the function runs with the proxy an edit succeeds; alternating the two bodies,
    // every attempt owes chunks, so the first attempt through the proxy is cut short.
    let mut attempt = 0usize;
    let cut_short = eventually(
        "an edit is cut short by the proxy",
        Duration::from_secs(120),
        || {
            attempt += 1;
            let edit = bodies[attempt % 2].clone();
            let path = &path;
            async move {
                let answer = world
                    .admin()
                    .answer("PUT", path, Some(edit.clone()))
                    .await?;
                Ok((answer.status >= 500).then_some(edit))
            }
        },
    )
    .await?;
    ensure!(proxy.failed() >= 1, "the proxy failed a chunk");
    ensure!(
        owed_items(world, &tenant).await? >= 1,
        "the cut-short edit left its owed work recorded"
    );

    // The retry, with the same body, finishes what the cut-short edit owed.
    proxy.disarm();
    world.admin().put(&path, cut_short.clone()).await?;
    world
        .set_function_environment("AdminApiFunctionName", original.clone())
        .await?;

    let wanted: BTreeSet<(String, String)> = cut_short["members"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| Some((m.as_str()?.to_owned(), "wide".to_owned())))
        .collect();
    let indexed: BTreeSet<(String, String)> = seats(world, &tenant)
        .await?
        .into_iter()
        .filter(|(_, code)| code == "wide")
        .collect();
    assert_eq!(indexed.len(), wanted.len());
    assert_eq!(indexed, wanted, "the staff -> codes index matches the code");
    assert_eq!(owed_items(world, &tenant).await?, 0, "nothing is left owed");
    Ok(())
}
