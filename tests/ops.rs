//! The operator's CLI (`qrsync-ops`) against the deployed stack, one test per command. The
//! dead-letter commands share the stack's dead-letter queues, so one test walks them in the
//! order an operator would: list, show, redrive, close, closed.

use anyhow::{ensure, Result};
use integration_tests::{eventually, ops, ops_raw, random_id, LiveTenant, World};
use serde_json::{json, Value};
use std::time::Duration;

const CONVERGE: Duration = Duration::from_secs(120);

#[tokio::test]
async fn every_command_has_help() -> Result<()> {
    for command in [
        vec!["--help"],
        vec!["status", "--help"],
        vec!["dead-letters", "--help"],
        vec!["dead-letters", "list", "--help"],
        vec!["dead-letters", "show", "--help"],
        vec!["dead-letters", "redrive", "--help"],
        vec!["dead-letters", "close", "--help"],
        vec!["dead-letters", "closed", "--help"],
        vec!["replay", "--help"],
        vec!["drift", "--help"],
        vec!["plan", "--help"],
        vec!["admin", "--help"],
    ] {
        let (ok, stdout, stderr) = ops_raw(&command).await?;
        ensure!(
            ok && stdout.contains("Usage:"),
            "{command:?}: {stdout}{stderr}"
        );
    }
    let (ok, _, stderr) = ops_raw(&["dead-letters", "redrive"]).await?;
    ensure!(
        !ok && stderr.contains("--all"),
        "a redrive without a selection: {stderr}"
    );
    Ok(())
}

#[tokio::test]
async fn status_shows_the_queues_dirty_codes_and_a_throttled_requeue() -> Result<()> {
    let world = World::connect().await?;
    let live = LiveTenant::create(&world, 2).await?;
    let staff: Vec<&str> = live.staff.iter().map(String::as_str).collect();
    let config_id = live.put_code("status", &staff, None).await?;
    eventually("both listed", CONVERGE, || async {
        Ok((live.wecom_list(&config_id).await?.len() == 2).then_some(()))
    })
    .await?;
    let before = ops(&["status"]).await?;
    // WeCom throttles the next push of this corp once (45009): the refresh requeues it.
    world
        .sandbox()
        .put(
            "/_sandbox/config",
            json!({"faults": [{"corp_id": live.tenant.corp_id, "api": "update_contact_way",
                               "kind": "errcode", "errcode": 45009, "first": 1,
                               "name": "ops-status-throttle"}]}),
        )
        .await?;
    let outcome = async {
        live.set_online(staff[0], false).await?;
        eventually(
            "the throttled push is retried and lands",
            CONVERGE,
            || async { Ok((live.wecom_list(&config_id).await? == [staff[1]]).then_some(())) },
        )
        .await?;
        ops(&["status"]).await
    }
    .await;
    world
        .sandbox()
        .put("/_sandbox/config", json!({"faults": []}))
        .await?;
    let after = outcome?;
    println!(
        "requeued in the last hour: {} before, {} after",
        before["requeued_last_hour"], after["requeued_last_hour"]
    );
    let throttled = |s: &Value| s["requeued_last_hour"]["throttled"].as_u64().unwrap_or(0);
    assert!(throttled(&after) > throttled(&before), "{before} {after}");
    let queues = after["queues"].as_array().cloned().unwrap_or_default();
    let refresh = queues
        .iter()
        .find(|q| q["queue"] == "Refresh")
        .cloned()
        .unwrap_or_default();
    for field in ["visible", "in_flight", "delayed"] {
        assert!(refresh[field].is_u64(), "{refresh}");
    }
    assert!(refresh.get("oldest_age_seconds").is_some(), "{refresh}");
    assert!(
        queues.iter().any(|q| q["queue"] == "InboxDeadLetter"),
        "{after}"
    );
    assert!(after["dirty_codes"].is_u64(), "{after}");
    Ok(())
}

#[tokio::test]
async fn drift_reads_the_sweeps_report_of_a_tenant() -> Result<()> {
    let world = World::connect().await?;
    let live = LiveTenant::create(&world, 1).await?;
    let report = ops(&["drift", "--tenant", &live.tenant.id]).await?;
    assert!(
        report.is_object() && !report.as_object().is_some_and(|o| o.is_empty()),
        "{report}"
    );
    let (ok, _, stderr) =
        ops_raw(&["drift", "--tenant", &live.tenant.id, "--day", "03/12"]).await?;
    assert!(!ok && stderr.contains("--day"), "{stderr}");
    Ok(())
}

#[tokio::test]
async fn admin_sends_a_signed_request_and_never_prints_the_secret_it_carries() -> Result<()> {
    let world = World::connect().await?;
    let live = LiveTenant::create(&world, 1).await?;
    let tenant = &live.tenant;
    let body = std::env::temp_dir().join(format!("qrsync-ops-admin-{}.json", random_id(8)));
    std::fs::write(
        &body,
        json!({
            "corp_id": tenant.corp_id,
            "corp_secret": tenant.corp_secret,
            "callback_token": tenant.token,
            "encoding_aes_key": tenant.aes_key,
            "company_daily_cap": 7,
        })
        .to_string(),
    )?;
    let path = format!("/tenants/{}", tenant.id);
    let body_arg = body.display().to_string();
    let (ok, stdout, stderr) = ops_raw(&["admin", "PUT", &path, "--body", &body_arg]).await?;
    std::fs::remove_file(&body)?;
    ensure!(ok && stdout.starts_with("200 "), "{stdout}{stderr}");
    ensure!(
        !stdout.contains(&tenant.corp_secret) && !stderr.contains(&tenant.corp_secret),
        "the secret was printed"
    );
    let read = ops(&["admin", "get", &path]).await?;
    ensure!(read["status"] == 200, "{read}");
    ensure!(read["body"]["company_daily_cap"] == 7, "{read}");
    ensure!(
        read["body"]["secrets"]["corp_secret"]["set"] == true,
        "{read}"
    );
    let (ok, _, stderr) = ops_raw(&["admin", "PATCH", &path]).await?;
    ensure!(
        !ok && stderr.contains("GET, PUT, DELETE or POST"),
        "{stderr}"
    );
    let (ok, _, stderr) = ops_raw(&["admin", "PUT", &path]).await?;
    ensure!(!ok && stderr.contains("--body"), "{stderr}");
    let missing = format!("/tenants/{}/codes/none", tenant.id);
    let (ok, stdout, _) = ops_raw(&["admin", "GET", &missing]).await?;
    ensure!(!ok && stdout.starts_with("404 "), "{stdout}");
    Ok(())
}

#[tokio::test]
async fn plan_reads_a_tenants_seats_from_the_table() -> Result<()> {
    let world = World::connect().await?;
    let live = LiveTenant::create(&world, 3).await?;
    let staff: Vec<&str> = live.staff.iter().map(String::as_str).collect();
    live.put_code("plan-a", &staff[..2], None).await?;
    live.put_code("plan-b", &staff[..1], None).await?;
    let plan = ops(&["plan", "--tenant", &live.tenant.id]).await?;
    // staff[0] sits on both codes, staff[1] on one, staff[2] on none: the plan reads the
    // codes' configurations, so it sees the two who sit on a code (the third reaches nothing).
    assert_eq!(plan["codes"], 2, "{plan}");
    assert_eq!(plan["staff"], 2, "{plan}");
    assert_eq!(plan["codes_per_staff"]["max"], 2, "{plan}");
    assert_eq!(plan["codes_per_staff"]["min"], 1, "{plan}");
    assert_eq!(plan["worst_staff_change"]["pushes"], 2, "{plan}");
    let (ok, _, stderr) =
        ops_raw(&["plan", "--tenant", &live.tenant.id, "--max-items", "1"]).await?;
    assert!(!ok && stderr.contains("--max-items"), "{stderr}");
    Ok(())
}

/// Receives `message_id` from inbox.fifo without deleting it until SQS itself moves it to
/// the dead-letter queue (after `maxReceiveCount` receives), as a consumer that keeps
/// crashing would.
async fn exhaust_receives(world: &World, message_id: &str) -> Result<()> {
    eventually(
        "SQS moves the message to the dead-letter queue",
        CONVERGE,
        || async {
            let answer = world
                .sqs
                .receive_message()
                .queue_url(world.output("InboxQueueUrl"))
                .max_number_of_messages(10)
                .visibility_timeout(0)
                .send()
                .await?;
            let seen = answer
                .messages()
                .iter()
                .any(|m| m.message_id() == Some(message_id));
            let moved = !seen && world.queue_depth("InboxQueueUrl").await? == 0;
            Ok(moved.then_some(()))
        },
    )
    .await
}

#[tokio::test]
async fn dead_letters_are_listed_shown_redriven_and_closed() -> Result<()> {
    let world = World::connect().await?;
    world
        .set_consumer_enabled("RecordFactsFunctionName", true)
        .await?;
    let live = LiveTenant::create(&world, 2).await?;
    let staff: Vec<&str> = live.staff.iter().map(String::as_str).collect();
    let code = format!("dl-{}", random_id(6).to_lowercase());
    // A daily limit of 1: the add that comes back through the redrive takes staff 0 off.
    let config_id = live.put_code(&code, &staff, Some(1)).await?;
    eventually("both listed", CONVERGE, || async {
        Ok((live.wecom_list(&config_id).await? == staff).then_some(()))
    })
    .await?;

    // One add SQS moves to the dead-letter queue itself, then a poison message the fact
    // recorder parks with its class.
    world
        .set_consumer_enabled("RecordFactsFunctionName", false)
        .await?;
    let group = format!("{}#code#{code}", live.tenant.id);
    let stored = async {
        live.deliver_add(staff[0], &code, "wmDeadLetter").await?;
        let peek = world
            .sqs
            .receive_message()
            .queue_url(world.output("InboxQueueUrl"))
            .visibility_timeout(0)
            .send()
            .await?;
        let add_id = peek
            .messages()
            .first()
            .and_then(|m| m.message_id())
            .unwrap_or_default()
            .to_owned();
        exhaust_receives(&world, &add_id).await?;
        let poison = world
            .sqs
            .send_message()
            .queue_url(world.output("InboxQueueUrl"))
            .message_group_id(&group)
            .message_deduplication_id(random_id(20))
            .message_body("not an inbox message")
            .send()
            .await?;
        Ok::<_, anyhow::Error>(poison.message_id().unwrap_or_default().to_owned())
    }
    .await;
    world
        .set_consumer_enabled("RecordFactsFunctionName", true)
        .await?;
    let poison_id = stored?;
    world.wait_until_drained().await?;

    let listed = eventually("both dead letters are listed", CONVERGE, || async {
        let rows = ops(&["dead-letters", "list", "--queue", "Inbox", "--code", &code]).await?;
        let classes: Vec<String> = rows
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .filter_map(|r| r["class"].as_str().map(str::to_owned))
            .collect();
        Ok((classes == ["moved_by_sqs", "poison"]).then_some(rows))
    })
    .await?;
    println!("listed: {listed}");
    let moved = &listed[0];
    assert_eq!(moved["moved_by_sqs"], true);
    assert_eq!(moved["count"], 1);
    assert!(moved["oldest"]["age_seconds"].is_u64(), "{moved}");
    assert_eq!(
        listed[1]["sample"][0]["reason"]
            .as_str()
            .map(|r| r.starts_with("not an inbox message")),
        Some(true),
        "{listed}"
    );

    // Shown in full, secrets excluded: the envelope and an unparsed body only by size and hash.
    let moved_id = moved["sample"][0]["id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let shown = ops(&["dead-letters", "show", &moved_id, "--queue", "Inbox"]).await?;
    assert_eq!(shown["body"]["tenant"], json!(live.tenant.id), "{shown}");
    assert!(shown["body"]["envelope"]["sha256"].is_string(), "{shown}");
    let text = shown.to_string();
    for secret in [
        &live.tenant.token,
        &live.tenant.aes_key,
        &live.tenant.corp_secret,
    ] {
        assert!(!text.contains(secret.as_str()), "a secret in {text}");
    }
    let poison = ops(&["dead-letters", "show", &poison_id, "--queue", "Inbox"]).await?;
    assert!(
        !poison.to_string().contains("not an inbox message\""),
        "{poison}"
    );
    assert_eq!(poison["class"], "poison");

    // Redriven to inbox.fifo, the add is counted and the code converges.
    let redriven = ops(&[
        "dead-letters",
        "redrive",
        "--queue",
        "Inbox",
        "--code",
        &code,
        "--class",
        "moved_by_sqs",
    ])
    .await?;
    assert_eq!(redriven.as_array().map(Vec::len), Some(1), "{redriven}");
    eventually("the redriven add converges the code", CONVERGE, || async {
        Ok((live.wecom_list(&config_id).await? == [staff[1]]).then_some(()))
    })
    .await?;
    assert_eq!(live.adds_counted(&code, staff[0]).await?, 1);

    // Closed: gone from the queue, on the record with who and when.
    let closed = ops(&[
        "dead-letters",
        "close",
        "--queue",
        "Inbox",
        "--code",
        &code,
        "--by",
        "ops-test",
        "--note",
        "not a WeCom callback",
    ])
    .await?;
    assert_eq!(closed.as_array().map(Vec::len), Some(1), "{closed}");
    let left = ops(&["dead-letters", "list", "--queue", "Inbox", "--code", &code]).await?;
    assert_eq!(left, json!([]), "{left}");
    let record = ops(&["dead-letters", "closed", "--queue", "Inbox"]).await?;
    let ours = record
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .find(|r| r["code"] == json!(code))
        .unwrap_or_default();
    // --by names who it was for; the credentials' own identity is kept beside it.
    let by = ours["closed_by"].as_str().unwrap_or_default();
    assert!(
        by.starts_with("arn:") && by.ends_with(" as ops-test"),
        "{record}"
    );
    assert_eq!(ours["class"], "poison");
    assert!(ours["closed_at_ms"].is_u64());
    Ok(())
}
