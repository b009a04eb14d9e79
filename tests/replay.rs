//! Replay (docs/rules.md rule 10) on the deployed stack, the intake write-up's scenario:
//! callbacks that could not be processed under an older rule are parked as poison, the rule
//! is fixed, and a dry-run replay of the window reports exactly the changes they would make
//! with no WeCom call; the applied replay then writes them and every code converges.
//!
//! The "older rule" here is the tenant's callback token: the callbacks were accepted and
//! stored under the right one, then an operator set a wrong one, so the fact recorder's
//! re-verification refused each stored callback (poison) until the token was put back. The
//! same path serves a parser fixed in a new release: the archive keeps the raw envelope.

use adapters::dynamodb::keys;
use anyhow::{ensure, Result};
use aws_sdk_dynamodb::types::AttributeValue;
use integration_tests::{eventually, now_ms, ops, ops_raw, random_id, LiveTenant, World};
use serde_json::{json, Value};
use std::time::Duration;

const CONVERGE: Duration = Duration::from_secs(120);

/// The corp's WeCom calls the sandbox logged, but the sweep's drift read-backs
/// (`get_contact_way`: a read, made by the backstop on its own schedule).
async fn wecom_calls(world: &World, corp_id: &str) -> Result<Vec<Value>> {
    let log = world
        .sandbox()
        .get(&format!("/_sandbox/calls?corp_id={corp_id}"))
        .await?;
    Ok(log["calls"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|call| call["api"] != json!("get_contact_way"))
        .collect())
}

/// Rotates the tenant's callback token, dropping the pair an earlier rotation kept.
async fn set_token(world: &World, tenant: &str, token: &str) -> Result<()> {
    let answer = world
        .admin()
        .put(
            &format!("/tenants/{tenant}"),
            json!({"callback_token": token, "previous_callback_keys": null}),
        )
        .await?;
    ensure!(answer.get("code").is_none(), "token not set: {answer}");
    Ok(())
}

async fn dirty(world: &World, tenant: &str, code: &str) -> Result<bool> {
    let item = world
        .dynamodb
        .get_item()
        .table_name(world.output("TableName"))
        .key(
            "pk",
            AttributeValue::S(keys::code_home(
                &domain::ids::TenantId::parse(tenant)?,
                &domain::ids::CodeId::parse(code)?,
            )),
        )
        .key(
            "sk",
            AttributeValue::S(keys::dirty(&domain::ids::CodeId::parse(code)?)),
        )
        .consistent_read(true)
        .send()
        .await?;
    Ok(item.item.is_some())
}

#[tokio::test]
async fn callbacks_parked_under_an_older_rule_are_reported_by_a_dry_run_and_converge_when_applied(
) -> Result<()> {
    let world = World::connect().await?;
    world
        .set_consumer_enabled("RecordFactsFunctionName", true)
        .await?;
    let live = LiveTenant::create(&world, 3).await?;
    let tenant = live.tenant.id.clone();
    let staff: Vec<&str> = live.staff.iter().map(String::as_str).collect();
    let code = format!("camp-{}", random_id(6).to_lowercase());
    let config_id = live.put_code(&code, &staff, Some(2)).await?;
    eventually("the code lists its three members", CONVERGE, || async {
        Ok((live.wecom_list(&config_id).await? == staff).then_some(()))
    })
    .await?;

    // Three adds are stored while the consumer is paused: two for staff 0 (its daily limit
    // on this code), one for staff 1.
    let from_ms = now_ms();
    world
        .set_consumer_enabled("RecordFactsFunctionName", false)
        .await?;
    let parked = async {
        live.deliver_add(staff[0], &code, "wmReplayA1").await?;
        live.deliver_add(staff[0], &code, "wmReplayA2").await?;
        live.deliver_add(staff[1], &code, "wmReplayB1").await?;
        // The older rule: the stored callbacks no longer verify. A rotation keeps the pair it
        // replaces (issue 33 item 6), so the tenant's token is rotated twice, each time dropping
        // the pair kept before: the one the callbacks were signed with is gone.
        set_token(&world, &tenant, &random_id(24)).await?;
        set_token(&world, &tenant, &random_id(24)).await?;
        world
            .set_consumer_enabled("RecordFactsFunctionName", true)
            .await?;
        world.wait_until_drained().await
    }
    .await;
    world
        .set_consumer_enabled("RecordFactsFunctionName", true)
        .await?;
    parked?;
    let to_ms = now_ms();
    assert_eq!(
        live.adds_counted(&code, staff[0]).await?,
        0,
        "parked, not counted"
    );
    assert_eq!(live.wecom_list(&config_id).await?, staff);

    // The rule is fixed. The parking marked the code dirty; the sweep's resync of it comes
    // first, so the dry run's window of WeCom calls is the replay's own.
    set_token(&world, &tenant, &live.tenant.token).await?;
    eventually("the sweep resynced the dirty code", CONVERGE, || async {
        Ok((!dirty(&world, &tenant, &code).await?).then_some(()))
    })
    .await?;
    world.wait_until_drained().await?;

    let calls_before = wecom_calls(&world, &live.tenant.corp_id).await?.len();
    let (from, to) = (from_ms.to_string(), to_ms.to_string());
    let dry = ops(&[
        "replay",
        "--tenant",
        &tenant,
        "--from",
        &from,
        "--to",
        &to,
        "--by",
        "replay-test",
    ])
    .await?;
    let calls_during_dry_run =
        wecom_calls(&world, &live.tenant.corp_id).await?.len() - calls_before;
    println!(
        "dry run: {} events, {} would count, {} codes would change, {} WeCom calls",
        dry["counters"]["events"],
        dry["counters"]["would_count"],
        dry["counters"]["codes_changing"],
        calls_during_dry_run
    );
    assert_eq!(dry["mode"], "dry_run", "{dry}");
    // The run records who started it: the caller's STS identity, with the --by name added.
    let by = dry["started_by"].as_str().unwrap_or_default();
    assert!(
        by.starts_with("arn:") && by.ends_with(" as replay-test"),
        "{dry}"
    );
    assert_eq!(dry["status"], "done", "{dry}");
    assert_eq!(calls_during_dry_run, 0, "a dry run calls WeCom zero times");
    let events = dry["events"].as_array().cloned().unwrap_or_default();
    assert_eq!(events.len(), 3, "{dry}");
    assert!(
        events
            .iter()
            .all(|e| e["outcome"] == "would_count_add" && e["code"] == json!(code)),
        "{dry}"
    );
    assert_eq!(dry["counters"]["would_count"], 3, "{dry}");
    let changes: Vec<&Value> = dry["codes"]
        .as_array()
        .map(|codes| codes.iter().filter(|c| c["would_change"] == true).collect())
        .unwrap_or_default();
    assert_eq!(changes.len(), 1, "{dry}");
    assert_eq!(changes[0]["code"], json!(code));
    assert_eq!(changes[0]["wecom_list"], json!(staff));
    assert_eq!(changes[0]["would_push"], json!([staff[1], staff[2]]));
    assert_eq!(
        changes[0]["crossings"],
        json!([format!("{}:code_daily", staff[0])])
    );
    assert_eq!(
        live.adds_counted(&code, staff[0]).await?,
        0,
        "a dry run writes no fact"
    );

    let applied = ops(&[
        "replay", "--tenant", &tenant, "--from", &from, "--to", &to, "--apply",
    ])
    .await?;
    println!(
        "applied: {} events, {} counted",
        applied["counters"]["events"], applied["counters"]["counted"]
    );
    assert_eq!(applied["counters"]["counted"], 3, "{applied}");
    eventually("the code converges without staff 0", CONVERGE, || async {
        Ok((live.wecom_list(&config_id).await? == [staff[1], staff[2]]).then_some(()))
    })
    .await?;
    assert_eq!(live.adds_counted(&code, staff[0]).await?, 2);
    assert_eq!(live.adds_counted(&code, staff[1]).await?, 1);

    // Applying again writes nothing new: every fact is claimed by its business key.
    let again = ops(&[
        "replay", "--tenant", &tenant, "--from", &from, "--to", &to, "--apply",
    ])
    .await?;
    assert_eq!(again["counters"]["already_counted"], 3, "{again}");
    assert_eq!(live.adds_counted(&code, staff[0]).await?, 2);

    // A run id names one run: starting another under it is refused before anything is sent.
    let run = applied["run"].as_str().unwrap_or_default();
    let (ok, _, stderr) = ops_raw(&[
        "replay", "--tenant", &tenant, "--from", &from, "--to", &to, "--run", run,
    ])
    .await?;
    assert!(!ok && stderr.contains("exists"), "{stderr}");
    let applied_by = applied["started_by"].as_str().unwrap_or_default();
    assert!(applied_by.starts_with("arn:"), "{applied}");

    // Two operators racing (or a page sent by hand) past that check: a first page of another
    // request under the run's id reaches the replay function, which refuses it and leaves the
    // run as it was (it would otherwise add its figures to the applied run's record).
    let record = || async {
        let item = world
            .dynamodb
            .get_item()
            .table_name(world.output("TableName"))
            .key(keys::PK, AttributeValue::S(keys::replay_run(run)))
            .key(keys::SK, AttributeValue::S(keys::REPLAY_RUN_SK.to_owned()))
            .consistent_read(true)
            .send()
            .await?
            .item
            .unwrap_or_default();
        let field = |name: &str| {
            item.get(name)
                .and_then(|v| v.as_n().or_else(|_| v.as_s()).ok())
                .cloned()
                .unwrap_or_default()
        };
        anyhow::Ok(
            [
                "events",
                "counted",
                "already_counted",
                "pages",
                "status",
                "started_by",
            ]
            .map(field),
        )
    };
    let before = record().await?;
    let intruder = json!({
        "run": run,
        "selection": {"tenant": tenant, "from_ms": from_ms, "to_ms": to_ms},
        "apply": true,
        "phase": "events",
        "by": "someone else",
        "requested_at_ms": now_ms(),
    });
    let queue = world.output("ReplayQueueUrl");
    world
        .sqs
        .send_message()
        .queue_url(queue)
        .message_body(intruder.to_string())
        .send()
        .await?;
    eventually("the replay queue drains", CONVERGE, || async {
        Ok((stack_client::queue_depth(&world.sqs, queue).await? == 0).then_some(()))
    })
    .await?;
    assert_eq!(record().await?, before, "the taken run is left as it was");
    println!("a second request under run {run} refused; the run still {before:?}");

    // The parked callbacks are handled: closed, with who and when on record.
    let closed = ops(&[
        "dead-letters",
        "close",
        "--queue",
        "Inbox",
        "--code",
        &code,
        "--by",
        "replay-test",
    ])
    .await?;
    assert_eq!(closed.as_array().map(Vec::len), Some(3), "{closed}");
    Ok(())
}
