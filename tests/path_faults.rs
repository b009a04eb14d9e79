//! Faults on the path, injected from outside the functions (their configuration, a proxy on
//! the wire). The steps reconfigure deployed functions, so they run one after another in
//! this binary and put the original configuration back before asserting.

use adapters::dynamodb::DynamoStore;
use anyhow::{ensure, Result};
use domain::ids::{CodeId, TenantId};
use integration_tests::proxy::{Fault, FaultProxy};
use integration_tests::{eventually, now_secs, random_id, LiveTenant, World};
use std::sync::Arc;
use std::time::Duration;

#[tokio::test]
async fn faults_on_the_path() -> Result<()> {
    let world = World::connect().await?;
    world
        .set_consumer_enabled("RecordFactsFunctionName", true)
        .await?;
    let callback_env = world.function_environment("CallbackFunctionName").await?;
    let refresh_env = world
        .function_environment("RefreshCodesFunctionName")
        .await?;
    let landing_env = world
        .function_environment("LandingPageFunctionName")
        .await?;
    let outcome = async {
        an_add_refused_while_the_inbox_is_down_counts_once_when_retried(&world, &callback_env)
            .await?;
        a_crash_between_push_and_record_converges_without_a_visible_effect(&world, &refresh_env)
            .await?;
        a_visit_whose_counter_write_is_refused_is_answered_503_and_counts_nothing(
            &world,
            &landing_env,
        )
        .await
    }
    .await;
    world
        .set_function_environment("LandingPageFunctionName", landing_env)
        .await?;
    world
        .set_function_environment("CallbackFunctionName", callback_env)
        .await?;
    world
        .set_function_environment("RefreshCodesFunctionName", refresh_env)
        .await?;
    outcome
}

async fn an_add_refused_while_the_inbox_is_down_counts_once_when_retried(
    world: &World,
    original: &std::collections::HashMap<String, String>,
) -> Result<()> {
    let live = LiveTenant::create(world, 1).await?;
    let staff = live.staff[0].clone();
    live.put_code("down", &[&staff], None).await?;
    world.wait_until_drained().await?;
    let mut broken = original.clone();
    // Nothing listens on the discard port: every SQS call of the callback fails to connect.
    broken.insert("AWS_ENDPOINT_URL_SQS".into(), "http://127.0.0.1:9".into());
    world
        .set_function_environment("CallbackFunctionName", broken)
        .await?;
    let tenant = &live.tenant;
    eventually(
        "the callback uses the broken endpoint",
        Duration::from_secs(60),
        || async {
            let probe = tenant.sign_post(
                &tenant.add_event("probe", &staff, &random_id(8), now_secs()),
                now_secs(),
            );
            Ok((world.deliver(&tenant.id, &probe).await?.0 >= 500).then_some(()))
        },
    )
    .await?;

    let add = tenant.add_event("down", &staff, "wmDown", now_secs());
    let (status, _) = world
        .deliver(&tenant.id, &tenant.sign_post(&add, now_secs()))
        .await?;
    ensure!(
        status >= 500,
        "expected 5xx while the inbox is down, got {status}"
    );
    world
        .set_function_environment("CallbackFunctionName", original.clone())
        .await?;
    world.wait_until_drained().await?;
    assert_eq!(
        live.adds_counted("down", &staff).await?,
        0,
        "counted although never persisted"
    );

    // WeCom's retry, then a duplicate of it.
    for _ in 0..2 {
        let retry = tenant.sign_post(&add, now_secs());
        eventually("the retry is accepted", Duration::from_secs(60), || async {
            Ok((world.deliver(&tenant.id, &retry).await?.0 == 200).then_some(()))
        })
        .await?;
    }
    eventually(
        "the retried add is counted",
        Duration::from_secs(60),
        || async { Ok((live.adds_counted("down", &staff).await? >= 1).then_some(())) },
    )
    .await?;
    world.wait_until_drained().await?;
    assert_eq!(live.adds_counted("down", &staff).await?, 1);
    Ok(())
}

async fn a_crash_between_push_and_record_converges_without_a_visible_effect(
    world: &World,
    original: &std::collections::HashMap<String, String>,
) -> Result<()> {
    let live = LiveTenant::create(world, 2).await?;
    let members: Vec<&str> = live.staff.iter().map(String::as_str).collect();
    let config_id = live.put_code("crash", &members, None).await?;
    // MiniStack restarts a function when its configuration changes, killing an invocation
    // in flight (AWS lets it finish): reconfigure only once the code's first refresh is done.
    world.wait_until_drained().await?;
    assert_eq!(live.wecom_list(&config_id).await?.len(), 2);

    // Every attempt to record a push fails, after WeCom accepted it: the "crash". The record
    // is the write of the code's `PUSHED#` item that sets `pushed_at_ms` (the lease's writes
    // of the same item set no such attribute, and go through).
    let endpoint = std::env::var("AWS_ENDPOINT_URL")?;
    let records_push = Arc::new(|target: &str, body: &str| {
        target.ends_with("UpdateItem")
            && body.contains("PUSHED#crash")
            && body.contains("pushed_at_ms")
    });
    let proxy = FaultProxy::start(&endpoint, records_push).await?;
    let mut through_proxy = original.clone();
    through_proxy.insert("AWS_ENDPOINT_URL_DYNAMODB".into(), proxy.url.clone());
    world
        .set_function_environment("RefreshCodesFunctionName", through_proxy)
        .await?;

    live.set_online(members[0], false).await?;
    // The SDK makes three attempts before the refresh gives up; the proxy stays armed until
    // all three failed, so the invocation really ends without its record.
    eventually(
        "WeCom got the push whose record failed",
        Duration::from_secs(60),
        || async {
            Ok(
                (live.wecom_list(&config_id).await? == [members[1]] && proxy.failed() >= 3)
                    .then_some(()),
            )
        },
    )
    .await?;
    proxy.disarm();

    // The failed reason is redelivered after its visibility timeout; the writer recomputes,
    // finds no record of the landed push, and pushes the same list again.
    let status_path = format!("/tenants/{}/codes/crash", live.tenant.id);
    let status = eventually("the push is recorded", Duration::from_secs(150), || async {
        let status = world.admin().get(&status_path).await?;
        Ok((status["in_sync"] == true
            && status["last_pushed"]["users"] == serde_json::json!([members[1]]))
        .then_some(status))
    })
    .await?;
    world
        .set_function_environment("RefreshCodesFunctionName", original.clone())
        .await?;

    let calls = world
        .sandbox()
        .get(&format!(
            "/_sandbox/calls?api=update_contact_way&corp_id={}",
            live.tenant.corp_id
        ))
        .await?;
    let lists: Vec<serde_json::Value> = calls["calls"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|call| call["request"]["config_id"] == config_id.as_str())
        .map(|call| call["request"]["user"].clone())
        .collect();
    let after_flip: Vec<&serde_json::Value> = lists
        .iter()
        .skip_while(|users| users.as_array().map(Vec::len) == Some(2))
        .collect();
    assert!(
        after_flip.len() >= 2,
        "the unrecorded push was repeated: {lists:?} ({status})"
    );
    assert!(
        after_flip.iter().all(|users| **users == serde_json::json!([members[1]])),
        "every push after the flip carried the same list, so WeCom never showed anything else: {lists:?}"
    );
    Ok(())
}

/// A write AWS refuses for a reason the emulator never produces (`TransactionConflictException`
/// while a transaction in flight names the item; throttling): the landing page makes no retry,
/// since a retried `ADD visits` that had landed would count one visitor twice. The visitor is
/// answered 503 with `Retry-After` and nothing is counted; every 302 is counted exactly once.
async fn a_visit_whose_counter_write_is_refused_is_answered_503_and_counts_nothing(
    world: &World,
    original: &std::collections::HashMap<String, String>,
) -> Result<()> {
    let live = LiveTenant::create(world, 2).await?;
    let members: Vec<&str> = live.staff.iter().map(String::as_str).collect();
    world
        .admin()
        .put(
            &format!("/tenants/{}/codes/busy", live.tenant.id),
            serde_json::json!({ "family": "sequenced", "members": members }),
        )
        .await?;
    let store = DynamoStore::new(world.dynamodb.clone(), world.output("TableName").to_owned())
        .with_pages(world.page_tables());
    let (tenant, code) = (TenantId::parse(&live.tenant.id)?, CodeId::parse("busy")?);
    let page = || async {
        store
            .page_seen(&tenant, &code)
            .await
            .map_err(|error| anyhow::anyhow!("{error}"))
    };
    eventually(
        "the code's page links every member",
        Duration::from_secs(120),
        || async {
            Ok(page().await?.filter(|page| {
                page.rotation
                    .as_ref()
                    .is_some_and(|slots| slots.len() == 2 && slots.iter().all(|s| s.link.is_some()))
            }))
        },
    )
    .await?;
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()?;
    let url = format!("{}/l/{}/busy", world.api_url, live.tenant.id);
    let redirected = std::sync::atomic::AtomicU64::new(0);
    let visit = || {
        let (http, url) = (http.clone(), url.clone());
        async move {
            let answer = http.get(&url).send().await?;
            let retry_after = answer.headers().contains_key("retry-after");
            anyhow::Ok((answer.status().as_u16(), retry_after))
        }
    };
    ensure!(visit().await?.0 == 302, "the page serves the code");
    redirected.fetch_add(1, std::sync::atomic::Ordering::SeqCst);

    let endpoint = std::env::var("AWS_ENDPOINT_URL")?;
    let visits_table = world.output("VisitTableName").to_owned();
    let counts_a_visit = Arc::new(move |target: &str, body: &str| {
        target.ends_with("UpdateItem") && body.contains(&visits_table)
    });
    let proxy =
        FaultProxy::start_with(&endpoint, counts_a_visit, Fault::TRANSACTION_CONFLICT).await?;
    let mut through_proxy = original.clone();
    through_proxy.insert("AWS_ENDPOINT_URL_DYNAMODB".into(), proxy.url.clone());
    world
        .set_function_environment("LandingPageFunctionName", through_proxy)
        .await?;
    let refused = eventually(
        "a visit meets the refusal",
        Duration::from_secs(60),
        || async {
            let (status, retry_after) = visit().await?;
            if status == 302 {
                redirected.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
            Ok((status != 302).then_some((status, retry_after)))
        },
    )
    .await?;
    let conflicts = proxy.failed();
    world
        .set_function_environment("LandingPageFunctionName", original.clone())
        .await?;
    proxy.disarm();
    ensure!(
        refused == (503, true),
        "a refused visit is answered 503 with Retry-After, not {refused:?}"
    );
    ensure!(
        conflicts == 1,
        "one request per visit, never retried: {conflicts} refused"
    );
    eventually("the page serves again", Duration::from_secs(60), || async {
        Ok((visit().await?.0 == 302).then_some(()))
    })
    .await?;
    let redirected = redirected.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
    let counted = page().await?.map_or(0, |page| page.visits);
    ensure!(
        counted == redirected,
        "{redirected} visits were sent to a member and {counted} were counted"
    );
    Ok(())
}
