//! The backstop against the deployed stack: faults injected behind the single writer's back,
//! then the scheduled sweep (every minute locally, `SweepPeriodMinutes=1`) seen repairing
//! them within two of its periods. Each step has its own tenant and they run at once; the
//! guard's step raises the sweep's read budget (every tenant is sampled more meanwhile, which
//! the other steps do not mind) and the original is put back.
//!
//! A fan-out given up and a stale record are injected as the state they leave, written
//! through the real table: a staff fact changed with no reason sent, and (for the fan-out)
//! the mark the fan-out function writes on its last receive.

use adapters::dynamodb::{keys, DynamoStore};
use anyhow::{ensure, Result};
use aws_sdk_dynamodb::types::AttributeValue;
use domain::dirty::{DirtyWhy, FanOutMarks};
use domain::ids::TenantId;
use domain::ids::{CodeId, StaffId};
use domain::reasons::{Cause, FanOut, Source};
use domain::sweep::{CreationIntent, CreationIntents};
use integration_tests::{eventually, LiveTenant, World};
use serde_json::json;
use std::collections::HashMap;
use std::time::Duration;

/// Two sweep periods, and the refresh that follows the second one's resync.
const TWO_SWEEPS: Duration = Duration::from_secs(150);

#[tokio::test]
async fn the_sweep_repairs_what_the_single_writer_missed() -> Result<()> {
    let world = World::connect().await?;
    let sweep_env = world.function_environment("SweepFunctionName").await?;
    // Each step has its own tenant: they run at once, as the sweep would meet them.
    let outcome = tokio::try_join!(
        a_list_changed_behind_qrsyncs_back_is_read_back_and_repaired(&world),
        a_refresh_dead_lettered_for_good_is_resynced(&world),
        a_limit_claim_whose_notification_failed_is_finished(&world),
        a_contact_way_created_but_never_recorded_is_deleted(&world),
        drift_on_most_of_a_tenants_sample_stops_its_repair_until_resumed(&world, &sweep_env),
        a_fan_out_given_up_is_sent_again_and_its_codes_converge(&world),
        a_stale_record_is_confirmed_after_its_settle_period_and_repaired(&world),
        a_resigned_members_acquisition_link_is_deleted_after_the_grace(&world),
    )
    .map(|_| ());
    world
        .set_function_environment("SweepFunctionName", sweep_env)
        .await?;
    world
        .sandbox()
        .put("/_sandbox/config", json!({"faults": []}))
        .await?;
    outcome
}

async fn converged<'a>(live: &LiveTenant<'a>, config_id: &str, expected: &[&str]) -> Result<()> {
    converged_within(live, config_id, expected, TWO_SWEEPS).await
}

async fn converged_within<'a>(
    live: &LiveTenant<'a>,
    config_id: &str,
    expected: &[&str],
    patience: Duration,
) -> Result<()> {
    let mut expected: Vec<String> = expected.iter().map(|s| (*s).to_owned()).collect();
    expected.sort();
    eventually(
        &format!("WeCom routes {config_id} to {expected:?} again"),
        patience,
        || async {
            let mut list = live.wecom_list(config_id).await?;
            list.sort();
            Ok((list == expected).then_some(()))
        },
    )
    .await
}

async fn a_list_changed_behind_qrsyncs_back_is_read_back_and_repaired(world: &World) -> Result<()> {
    let live = LiveTenant::create(world, 2).await?;
    let members: Vec<&str> = live.staff.iter().map(String::as_str).collect();
    let config_id = live.put_code("drifted", &members, None).await?;
    converged(&live, &config_id, &members).await?;

    world
        .sandbox()
        .put(
            &format!("/_sandbox/contact-ways/{config_id}"),
            json!({"user": [members[0]]}),
        )
        .await?;
    converged(&live, &config_id, &members).await?;

    let drift_path = format!("/tenants/{}/drift", live.tenant.id);
    let report = eventually("the drift report counts the repair", TWO_SWEEPS, || async {
        let report = world.admin().get(&drift_path).await?;
        Ok(
            (report["differing"].as_u64() >= Some(1) && report["repaired"].as_u64() >= Some(1))
                .then_some(report),
        )
    })
    .await?;
    ensure!(report["read"].as_u64() >= Some(1), "{report}");
    ensure!(report["guard"].is_null(), "{report}");
    Ok(())
}

async fn a_refresh_dead_lettered_for_good_is_resynced(world: &World) -> Result<()> {
    let live = LiveTenant::create(world, 2).await?;
    let members: Vec<&str> = live.staff.iter().map(String::as_str).collect();
    let config_id = live.put_code("refused", &members, None).await?;
    converged(&live, &config_id, &members).await?;

    // WeCom refuses the next push of this corp with an errcode retrying cannot fix: the
    // refresh dead-letters its reason at once and marks the code dirty.
    world
        .sandbox()
        .put(
            "/_sandbox/config",
            json!({"faults": [{
                "api": "update_contact_way",
                "corp_id": live.tenant.corp_id,
                "kind": "errcode",
                "errcode": 40058,
                "remaining": 1,
                "name": "refused-for-good",
            }]}),
        )
        .await?;
    live.set_online(members[1], false).await?;
    let refused = eventually("the push is refused", Duration::from_secs(60), || async {
        let config = world.sandbox().get("/_sandbox/config").await?;
        Ok((config["faults"][0]["fired"].as_u64() == Some(1)).then_some(()))
    })
    .await;
    refused?;
    ensure!(
        live.wecom_list(&config_id).await?.len() == 2,
        "the refused push changed nothing"
    );
    // No further event arrives: only the sweep's resync brings the list to the facts.
    converged(&live, &config_id, &members[..1]).await
}

/// Waits until the tenant's own reasons have been worked off: its refresh tally has counted
/// one and stayed still for a few seconds. The code's creation and its staff's fan-outs
/// (which may expand after the code exists) each send one, and a refresh reads the facts as
/// they are: a fact changed in the table before they ran would heal without the sweep.
async fn reasons_worked_off(live: &LiveTenant<'_>) -> Result<()> {
    let store = DynamoStore::new(
        live.world.dynamodb.clone(),
        live.world.output("TableName").to_owned(),
    );
    let tenant = TenantId::parse(&live.tenant.id)?;
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    let (mut seen, mut still_since) = (0, std::time::Instant::now());
    loop {
        let reasons: u64 = store
            .refresh_tallies(&tenant, None)
            .await?
            .iter()
            .filter_map(|tally| tally.get("reasons")?.as_n().ok()?.parse::<u64>().ok())
            .sum();
        if reasons != seen {
            (seen, still_since) = (reasons, std::time::Instant::now());
        }
        if seen >= 1 && still_since.elapsed() >= Duration::from_secs(5) {
            return Ok(());
        }
        ensure!(
            std::time::Instant::now() < deadline,
            "the tenant's reasons were not worked off within 90 s ({seen} counted)"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Takes `staff` offline in the table itself, as a fact written whose reasons never left.
async fn offline_behind_the_writers_back(live: &LiveTenant<'_>, staff: &str) -> Result<()> {
    let world = live.world;
    let tenant = TenantId::parse(&live.tenant.id)?;
    world
        .dynamodb
        .update_item()
        .table_name(world.output("TableName"))
        .key(
            "pk",
            AttributeValue::S(keys::staff_home(&tenant, &StaffId::parse(staff)?)),
        )
        .key(
            "sk",
            AttributeValue::S(keys::staff(&StaffId::parse(staff)?)),
        )
        .update_expression("SET #online = :off")
        .expression_attribute_names("#online", "online")
        .expression_attribute_values(":off", AttributeValue::Bool(false))
        .send()
        .await?;
    Ok(())
}

async fn a_fan_out_given_up_is_sent_again_and_its_codes_converge(world: &World) -> Result<()> {
    let live = LiveTenant::create(world, 2).await?;
    let members: Vec<&str> = live.staff.iter().map(String::as_str).collect();
    let config_id = live.put_code("fanned", &members, None).await?;
    converged(&live, &config_id, &members).await?;
    reasons_worked_off(&live).await?;

    // The fault, injected as the state it leaves: the staff fact written, and its fan-out
    // marked on its last receive by the fan-out function, which then died before sending
    // a single reason (the message went to the dead-letter queue).
    offline_behind_the_writers_back(&live, members[1]).await?;
    let now = integration_tests::now_ms();
    let given_up = FanOut::new(
        TenantId::parse(&live.tenant.id)?,
        vec![Source::Staff {
            staff: StaffId::parse(members[1])?,
        }],
        Cause::StaffChanged,
        now,
        format!("staff:{}:{now}", members[1]),
    );
    let store = DynamoStore::new(world.dynamodb.clone(), world.output("TableName").to_owned());
    store
        .mark_fan_out(&given_up, DirtyWhy::LastReceive, now - 1)
        .await?;
    ensure!(
        live.wecom_list(&config_id).await?.len() == 2,
        "nothing told the code yet"
    );

    // Only the sweep sends the fan-out again; its expansion reaches the code.
    converged(&live, &config_id, &members[..1]).await?;
    let mark_key = keys::fan_out_mark(&given_up.fact_key);
    eventually(
        "the completed expansion clears the mark",
        TWO_SWEEPS,
        || async {
            let item = world
                .dynamodb
                .get_item()
                .table_name(world.output("TableName"))
                .key(
                    "pk",
                    AttributeValue::S(keys::home(&given_up.tenant, &mark_key)),
                )
                .key("sk", AttributeValue::S(mark_key.clone()))
                .consistent_read(true)
                .send()
                .await?;
            Ok(item.item.is_none().then_some(()))
        },
    )
    .await
}

async fn a_stale_record_is_confirmed_after_its_settle_period_and_repaired(
    world: &World,
) -> Result<()> {
    let live = LiveTenant::create(world, 2).await?;
    let members: Vec<&str> = live.staff.iter().map(String::as_str).collect();
    let config_id = live.put_code("stale", &members, None).await?;
    converged(&live, &config_id, &members).await?;
    reasons_worked_off(&live).await?;

    // The fault, injected as the state it leaves: a staff fact written whose reason never
    // reached the code. Record and WeCom agree; the facts recompute to another list.
    offline_behind_the_writers_back(&live, members[1]).await?;

    // The sample finds it, marks it a suspect (`DriftStaleSettleMinutes=1` locally), and a
    // run after the settle period confirms it and resyncs it: up to three sweeps and the settle.
    converged_within(
        &live,
        &config_id,
        &members[..1],
        TWO_SWEEPS + Duration::from_secs(120),
    )
    .await?;
    let drift_path = format!("/tenants/{}/drift", live.tenant.id);
    let report = eventually("the report counts the confirmation", TWO_SWEEPS, || async {
        let report = world.admin().get(&drift_path).await?;
        Ok((report["stale_confirmed"].as_u64() >= Some(1)).then_some(report))
    })
    .await?;
    ensure!(
        report["guard"].is_null(),
        "one stale code of one is below the guard's sample: {report}"
    );
    Ok(())
}

/// The tenant's limit claims as stored (`REMOVED#...`).
async fn claims(world: &World, tenant: &str) -> Result<Vec<HashMap<String, AttributeValue>>> {
    let store = DynamoStore::new(world.dynamodb.clone(), world.output("TableName").to_owned());
    Ok(store
        .query_prefix(&TenantId::parse(tenant)?, "REMOVED#")
        .await?)
}

async fn a_limit_claim_whose_notification_failed_is_finished(world: &World) -> Result<()> {
    let live = LiveTenant::create(world, 2).await?;
    let (capped, other) = (live.staff[0].as_str(), live.staff[1].as_str());
    live.set_company_daily_cap(Some(1)).await?;
    let config_id = live.put_code("capped", &[capped, other], None).await?;
    converged(&live, &config_id, &[capped, other]).await?;
    live.deliver_add(capped, "capped", "wm-claim-1").await?;
    let tenant = live.tenant.id.clone();
    let claim = eventually("the owner finishes its claim", TWO_SWEEPS, || async {
        let claims = claims(world, &tenant).await?;
        Ok(claims
            .first()
            .filter(|claim| notified(claim) == Some(true))
            .cloned())
    })
    .await?;
    converged(&live, &config_id, &[other]).await?;
    ensure!(
        notifications(world, &tenant).await?.len() == 1,
        "the owner published once"
    );

    // The fault, injected where it leaves its trace: the claim as a publish that failed
    // leaves it (not notified), its owner dead (the add's message dead-lettered) and its
    // lease over.
    let expired = integration_tests::now_ms() - 1;
    let sk = claim
        .get("sk")
        .and_then(|sk| sk.as_s().ok())
        .cloned()
        .unwrap_or_default();
    world
        .dynamodb
        .update_item()
        .table_name(world.output("TableName"))
        .key("pk", AttributeValue::S(keys::home(&TenantId::parse(&tenant)?, &sk)))
        .key("sk", AttributeValue::S(sk.clone()))
        .update_expression(
            "SET notified = :no, #owner = :dead, lease_until_ms = :expired, gsi1pk = :open, gsi1sk = :sort",
        )
        .expression_attribute_names("#owner", "owner")
        .expression_attribute_values(":no", AttributeValue::Bool(false))
        .expression_attribute_values(":dead", AttributeValue::S("add-that-died".into()))
        .expression_attribute_values(":expired", AttributeValue::N(expired.to_string()))
        .expression_attribute_values(":open", AttributeValue::S(keys::OPEN_CLAIMS.into()))
        .expression_attribute_values(
            ":sort",
            AttributeValue::S(keys::open_claim_sort(
                expired,
                &TenantId::parse(&tenant)?,
                &sk,
            )),
        )
        .send()
        .await?;

    let finished = eventually("the sweep finishes the claim", TWO_SWEEPS, || async {
        let claims = claims(world, &tenant).await?;
        Ok(claims
            .first()
            .filter(|claim| notified(claim) == Some(true))
            .cloned())
    })
    .await?;
    let owner = finished
        .get("owner")
        .and_then(|owner| owner.as_s().ok())
        .map(String::as_str)
        .unwrap_or_default();
    ensure!(owner.starts_with("sweep:"), "finished by {owner}");
    let published = eventually("its notification is published", TWO_SWEEPS, || async {
        let seen = notifications(world, &tenant).await?;
        Ok((!seen.is_empty()).then_some(seen))
    })
    .await?;
    ensure!(published.len() == 1, "one more notification: {published:?}");
    let detail = &published[0]["detail"];
    ensure!(
        detail["staff"] == json!(capped) && detail["limit"] == json!("company_daily"),
        "{detail}"
    );
    ensure!(
        detail["id"]
            .as_str()
            .is_some_and(|id| id.starts_with("limit:")),
        "the same id as the owner's, for consumers to drop the repeat: {detail}"
    );
    converged(&live, &config_id, &[other]).await
}

fn notified(claim: &HashMap<String, AttributeValue>) -> Option<bool> {
    claim
        .get("notified")
        .and_then(|v| v.as_bool().ok())
        .copied()
}

async fn a_contact_way_created_but_never_recorded_is_deleted(world: &World) -> Result<()> {
    let live = LiveTenant::create(world, 1).await?;
    let member = live.staff[0].as_str();
    let recorded = live.put_code("orphaned", &[member], None).await?;

    // The crash between WeCom's answer and our record, injected where it leaves its trace:
    // the intent recorded before the call, and a contact way WeCom made for the code whose
    // config id never reached the table.
    // The contact way carries the intent's marker, as the admin API's creation sets it: the
    // sweep deletes only a contact way of the code's state that has it.
    let store = DynamoStore::new(world.dynamodb.clone(), world.output("TableName").to_owned());
    let intent = CreationIntent {
        tenant: TenantId::parse(&live.tenant.id)?,
        code: CodeId::parse("orphaned")?,
        started_at_ms: integration_tests::now_ms(),
    };
    store.record_intent(&intent).await?;
    let token = world.sandbox().token(&live.tenant).await?;
    let made = world
        .sandbox()
        .call(
            "add_contact_way",
            &token,
            json!({"type": 2, "scene": 2, "state": "orphaned", "user": [member],
                   "remark": intent.marker()}),
        )
        .await?;
    let orphan = made["config_id"].as_str().unwrap_or_default().to_owned();
    ensure!(
        !orphan.is_empty(),
        "the sandbox made no contact way: {made}"
    );

    // Past the intent's grace (2 minutes), the next sweep deletes it.
    let corp = live.tenant.corp_id.clone();
    eventually(
        "the orphan contact way is deleted",
        Duration::from_secs(120) + TWO_SWEEPS,
        || async {
            let ways = world
                .sandbox()
                .get(&format!("/_sandbox/contact-ways?corp_id={corp}"))
                .await?;
            let ids: Vec<&str> = ways["contact_ways"]
                .as_array()
                .map(|ways| {
                    ways.iter()
                        .filter_map(|w| w["config_id"].as_str())
                        .collect()
                })
                .unwrap_or_default();
            Ok((!ids.contains(&orphan.as_str())).then_some(ids.contains(&recorded.as_str())))
        },
    )
    .await
    .and_then(|kept| {
        ensure!(kept, "the recorded contact way is kept");
        Ok(())
    })
}

/// The `StaffQuotaReached` events of `tenant` on the stack's own notification queue.
async fn notifications(world: &World, tenant: &str) -> Result<Vec<serde_json::Value>> {
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
        if received.messages().is_empty() {
            return Ok(seen);
        }
        for message in received.messages() {
            let event: serde_json::Value =
                serde_json::from_str(message.body().unwrap_or_default())?;
            if event["detail"]["tenant"] == json!(tenant) {
                seen.push(event);
            }
        }
    }
}

async fn drift_on_most_of_a_tenants_sample_stops_its_repair_until_resumed(
    world: &World,
    original: &std::collections::HashMap<String, String>,
) -> Result<()> {
    let live = LiveTenant::create(world, 2).await?;
    let members: Vec<&str> = live.staff.iter().map(String::as_str).collect();
    let mut config_ids = Vec::new();
    for n in 0..6 {
        config_ids.push(live.put_code(&format!("bulk-{n}"), &members, None).await?);
    }
    for config_id in &config_ids {
        converged(&live, config_id, &members).await?;
    }
    // Ten reads per run and tenant: the whole tenant is sampled in one run.
    let mut sampled = original.clone();
    sampled.insert("DRIFT_READS_PER_TENANT_HOUR".into(), "600".into());
    world
        .set_function_environment("SweepFunctionName", sampled)
        .await?;
    for config_id in &config_ids[..4] {
        world
            .sandbox()
            .put(
                &format!("/_sandbox/contact-ways/{config_id}"),
                json!({"user": [members[0]]}),
            )
            .await?;
    }
    let drift_path = format!("/tenants/{}/drift", live.tenant.id);
    let report = eventually("the guard trips", TWO_SWEEPS, || async {
        let report = world.admin().get(&drift_path).await?;
        Ok((!report["guard"].is_null()).then_some(report))
    })
    .await?;
    ensure!(
        report["guard"]["differing"].as_u64() >= Some(4),
        "the guard names the drift: {report}"
    );
    // A later run finds the tenant's marks and holds them: nothing is pushed to those codes.
    let tripped_at = report["guard"]["tripped_at_ms"].as_u64().unwrap_or(0);
    eventually("a later sweep holds the marks", TWO_SWEEPS, || async {
        let lines = world.function_logs("SweepFunctionName", tripped_at).await?;
        Ok(lines
            .iter()
            .any(|line| held_by_guard(line) >= 4)
            .then_some(()))
    })
    .await?;
    for config_id in &config_ids[..4] {
        ensure!(
            live.wecom_list(config_id).await? == [members[0]],
            "no list pushed while the guard holds {config_id}"
        );
    }
    let resumed = world
        .admin()
        .answer("POST", &format!("{drift_path}/resume"), None)
        .await?;
    ensure!(
        resumed.status == 200 && resumed.body["resumed"] == true,
        "resume answered {} {}",
        resumed.status,
        resumed.body
    );
    for config_id in &config_ids[..4] {
        converged(&live, config_id, &members).await?;
    }
    Ok(())
}

/// The marks a sweep run's report (its "sweep ran" log line) says the guard held.
fn held_by_guard(line: &str) -> u64 {
    line.split("held_by_guard: ")
        .nth(1)
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// The acquisition links the sandbox holds for `corp_id`, as (link id, user).
async fn links_of(world: &World, corp_id: &str) -> Result<Vec<(String, String)>> {
    let all = world.sandbox().get("/_sandbox/links").await?;
    Ok(all["links"]
        .as_array()
        .map(|links| {
            links
                .iter()
                .filter(|l| l["corp_id"] == corp_id)
                .filter_map(|l| {
                    let id = l["link_id"].as_str()?;
                    let user = l["user_list"].get(0)?.as_str()?;
                    Some((id.to_owned(), user.to_owned()))
                })
                .collect()
        })
        .unwrap_or_default())
}

/// A sequenced code gives both members a link; one resigns through WeCom's callback, leaves
/// the rotation, and once the grace (`LinkRetireGraceMinutes=1` locally) is over the sweep
/// deletes their link and takes it off their staff item and out of the index; the other
/// member's link stays.
async fn a_resigned_members_acquisition_link_is_deleted_after_the_grace(
    world: &World,
) -> Result<()> {
    let live = LiveTenant::create(world, 2).await?;
    let (leaving, staying) = (live.staff[0].as_str(), live.staff[1].as_str());
    world
        .admin()
        .put(
            &format!("/tenants/{}/codes/rotating", live.tenant.id),
            json!({ "family": "sequenced", "members": [leaving, staying] }),
        )
        .await?;
    let corp = live.tenant.corp_id.clone();
    let links = eventually("both members have a link", TWO_SWEEPS, || async {
        let links = links_of(world, &corp).await?;
        Ok((links.len() == 2).then_some(links))
    })
    .await?;
    let link_of = |user: &str| {
        links
            .iter()
            .find(|(_, u)| u == user)
            .map(|(id, _)| id.clone())
            .unwrap_or_default()
    };
    let (gone, kept) = (link_of(leaving), link_of(staying));

    live.deliver_contact_change(&[("ChangeType", "delete_user"), ("UserID", leaving)])
        .await?;

    eventually(
        "the resigned member's link is deleted and the other kept",
        Duration::from_secs(60) + TWO_SWEEPS,
        || async {
            let ids: Vec<String> = links_of(world, &corp)
                .await?
                .into_iter()
                .map(|l| l.0)
                .collect();
            Ok((!ids.contains(&gone)).then_some(ids.contains(&kept)))
        },
    )
    .await
    .and_then(|kept| {
        ensure!(kept, "the staying member's link is kept");
        Ok(())
    })?;
    // The sweep forgets the link and takes the member out of its index in two writes after
    // WeCom's deletion: polled, not read once.
    let table = world.output("TableName").to_owned();
    eventually(
        "the resigned member's item holds no link and is out of the index",
        TWO_SWEEPS,
        || async {
            let item = world
                .dynamodb
                .get_item()
                .table_name(&table)
                .key(
                    "pk",
                    AttributeValue::S(format!("TENANT#{}#STAFF#{leaving}", live.tenant.id)),
                )
                .key("sk", AttributeValue::S(format!("STAFF#{leaving}")))
                .consistent_read(true)
                .send()
                .await?
                .item
                .unwrap_or_default();
            let held = [
                keys::LINK_ID,
                keys::LINK_URL,
                keys::RETIRING_LINK_ID,
                keys::GSI1_PK,
            ]
            .iter()
            .any(|attribute| item.contains_key(*attribute));
            Ok((!held).then_some(()))
        },
    )
    .await?;
    Ok(())
}
