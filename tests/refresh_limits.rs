//! The single writer under WeCom's limits (docs/rules.md rules 6 and 9): the shared budget under
//! concurrent workers, throttling from WeCom, an expired token, and each failure class
//! reaching its path. The sandbox's settings (rate limits, fault rules) are global, so the
//! steps share one test: the budget race first, then every other scenario side by side on
//! its own tenant, with the fault rules of all of them set at once (filtered by corp) and
//! the sandbox's settings put back at the end.

use adapters::dynamodb::{keys, DynamoBudget, DynamoStore};
use adapters::wecom::WeComClient;
use anyhow::{ensure, Context, Result};
use aws_sdk_dynamodb::types::AttributeValue;
use domain::budget::{
    BudgetLayers, BudgetLimits, BudgetSlot, Spend, WeComBudget, MOST_SHARDS, UPDATE_CONTACT_WAY,
};
use domain::ids::TenantId;
use domain::ids::{CodeId, StaffId};
use domain::wecom::contact_way::CorpCredentials;
use integration_tests::{eventually, now_ms, LiveTenant, World};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

/// Convergence after a throttle waits for the next wall-clock minute plus a retry queue's
/// delay (60 s at most): two minutes cover the worst case.
const CONVERGE: Duration = Duration::from_secs(150);

#[tokio::test]
async fn refresh_under_wecom_limits() -> Result<()> {
    let world = World::connect().await?;
    world
        .set_consumer_enabled("RecordFactsFunctionName", true)
        .await?;
    concurrent_workers_never_exceed_the_budget_in_any_window(&world).await?;

    let original = world.sandbox().get("/_sandbox/config").await?;
    let dead_letters_before = world.queue_depth("RefreshDeadLetterQueueUrl").await?;
    let storm = Storm::prepare(&world).await?;
    let gone = LiveTenant::create(&world, 2).await?;
    let transient = LiveTenant::create(&world, 2).await?;
    // Every scenario's faults at once: the sandbox keeps one rule list.
    world
        .sandbox()
        .put(
            "/_sandbox/config",
            json!({
                "limit_per_minute": Storm::SANDBOX_LIMIT,
                "faults": [
                    {"corp_id": transient.tenant.corp_id, "api": "update_contact_way",
                     "kind": "http_status", "status": 502, "first": 1, "name": "transient-502"},
                ],
            }),
        )
        .await?;
    let outcome = async {
        let (storm, budget, token, gone, unusable, transient) = tokio::join!(
            storm.run(),
            a_tenant_without_budget_is_requeued_not_failed_and_converges(&world),
            an_expired_token_is_refreshed_once_and_the_push_retried(&world),
            a_code_wecom_deleted_is_marked_gone_and_dirty_and_left_alone(&gone),
            a_staff_member_wecom_refuses_is_marked_unusable_and_the_others_pushed(&world),
            a_transient_failure_is_retried_through_the_delay_queues_and_converges(&transient),
        );
        storm.context("throttle storm")?;
        budget.context("no budget")?;
        token.context("token expiry")?;
        gone.context("code gone")?;
        unusable.context("staff unusable")?;
        transient.context("transient")?;
        eventually("every queue drained", CONVERGE, || async {
            let mut depth = 0;
            for queue in [
                "InboxQueueUrl",
                "RefreshQueueUrl",
                "RefreshRetry15sQueueUrl",
                "RefreshRetry60sQueueUrl",
                "RefreshRetry900sQueueUrl",
            ] {
                depth += world.queue_depth(queue).await?;
            }
            Ok((depth == 0).then_some(()))
        })
        .await?;
        let dead_letters = world.queue_depth("RefreshDeadLetterQueueUrl").await?;
        ensure!(
            dead_letters == dead_letters_before,
            "throttling and retried failures reached the dead-letter queue: {dead_letters_before} -> {dead_letters}"
        );
        Ok(())
    }
    .await;
    world
        .sandbox()
        .put(
            "/_sandbox/config",
            json!({
                "limit_per_minute": original["limit_per_minute"],
                "limit_per_hour": original["limit_per_hour"],
                "faults": [],
            }),
        )
        .await?;
    outcome
}

fn store(world: &World) -> DynamoStore {
    DynamoStore::new(world.dynamodb.clone(), world.output("TableName").to_owned())
}

/// update_contact_way calls the sandbox logged for a corp: (start ms, errcode or HTTP status, config id).
async fn updates(world: &World, corp_id: &str) -> Result<Vec<(u64, i64, String)>> {
    let log = world
        .sandbox()
        .get(&format!(
            "/_sandbox/calls?corp_id={corp_id}&api=update_contact_way"
        ))
        .await?;
    Ok(log["calls"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|call| {
            let at = call["at_ms"].as_u64().unwrap_or(0);
            let started = at.saturating_sub(call["elapsed_ms"].as_u64().unwrap_or(0));
            let outcome = call["response"]["errcode"]
                .as_i64()
                .unwrap_or_else(|| call["http_status"].as_i64().unwrap_or(-2));
            let config = call["request"]["config_id"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            (started, outcome, config)
        })
        .collect())
}

/// N workers of one tenant race for one budget, each spending before every call as the
/// refresh function does; the sandbox's log must show no window over its budget.
async fn concurrent_workers_never_exceed_the_budget_in_any_window(world: &World) -> Result<()> {
    let wecom = Arc::new(WeComClient::new(
        world.sandbox_url.clone(),
        Duration::from_secs(5),
    ));
    for (limits, rounds) in [
        // The minute window binds.
        (
            BudgetLimits {
                per_minute: 12,
                per_hour: 1_000,
            },
            3,
        ),
        // The hour window binds, on a budget of two shards.
        (
            BudgetLimits {
                per_minute: 1_000,
                per_hour: 20,
            },
            3,
        ),
    ] {
        // Each case on a tenant of its own: a budget's shards follow its limits, so limits
        // changed within an hour start that hour again in the new shards (documented in
        // docs/design/refresh.md, "Shards"), which no deployment does between two spends.
        let live = LiveTenant::create(world, 1).await?;
        let config_id = live.put_code("race", &[&live.staff[0]], None).await?;
        world.wait_until_drained().await?;
        let tenant = TenantId::parse(&live.tenant.id)?;
        let creds = CorpCredentials {
            tenant: domain::ids::TenantId::parse("acme").expect("valid"),
            corp_id: live.tenant.corp_id.clone(),
            corp_secret: live.tenant.corp_secret.clone(),
        };
        let users = vec![live.staff[0].clone()];
        let before = updates(world, &creds.corp_id).await?.len();
        let budget = Arc::new(DynamoBudget::new(
            store(world),
            BudgetLayers::behind_one_address(limits),
        ));
        let workers = (0..8).map(|_| {
            let (budget, wecom, tenant, creds, users, config_id) = (
                budget.clone(),
                wecom.clone(),
                tenant.clone(),
                creds.clone(),
                users.clone(),
                config_id.clone(),
            );
            tokio::spawn(async move {
                let mut granted = 0u32;
                let mut refused = 0u32;
                while refused < rounds {
                    match budget.spend(&tenant, UPDATE_CONTACT_WAY, now_ms()).await? {
                        Spend::Granted => {
                            granted += 1;
                            wecom
                                .update_contact_way_users(&creds, &config_id, &users)
                                .await?;
                        }
                        Spend::Exhausted { .. } => refused += 1,
                    }
                }
                anyhow::Ok(granted)
            })
        });
        let mut granted = 0;
        for worker in futures::future::join_all(workers).await {
            granted += worker??;
        }
        let calls = updates(world, &creds.corp_id).await?;
        let new_calls = &calls[before..];
        ensure!(
            new_calls.len() == usize::try_from(granted)?,
            "every granted spend is one call"
        );
        let mut per_minute: BTreeMap<u64, u32> = BTreeMap::new();
        let mut per_hour: BTreeMap<u64, u32> = BTreeMap::new();
        // The workers' calls only: the refresh function's push of the new code spends from
        // the deployed budget (its own limits, so its own shards), not from these.
        for (started, outcome, _) in new_calls {
            ensure!(*outcome == 0, "WeCom refused a budgeted call: {outcome}");
            *per_minute.entry(started / 60_000).or_default() += 1;
            *per_hour.entry(started / 3_600_000).or_default() += 1;
        }
        ensure!(
            per_minute.values().all(|n| *n <= limits.per_minute),
            "a minute over budget {}: {per_minute:?}",
            limits.per_minute
        );
        ensure!(
            per_hour.values().all(|n| *n <= limits.per_hour),
            "an hour over budget {}: {per_hour:?}",
            limits.per_hour
        );
        ensure!(granted > 0, "the workers got nothing");
    }
    Ok(())
}

/// Eight codes need a push at once while the sandbox allows fewer calls per minute than
/// that (and our budget more): WeCom answers 45009, the refused pushes are requeued, and
/// every code converges in a later minute without a dead letter.
struct Storm<'a> {
    live: LiveTenant<'a>,
    codes: Vec<String>,
}

impl<'a> Storm<'a> {
    const SANDBOX_LIMIT: u32 = 5;
    const CODES: usize = 8;

    async fn prepare(world: &'a World) -> Result<Self> {
        let live = LiveTenant::create(world, 2).await?;
        let members: Vec<&str> = live.staff.iter().map(String::as_str).collect();
        let mut codes = Vec::new();
        for i in 0..Self::CODES {
            codes.push(live.put_code(&format!("storm{i}"), &members, None).await?);
        }
        world.wait_until_drained().await?;
        Ok(Self { live, codes })
    }

    async fn run(&self) -> Result<()> {
        let world = self.live.world;
        self.live.set_online(&self.live.staff[1], false).await?;
        let wanted = vec![self.live.staff[0].clone()];
        for config_id in &self.codes {
            eventually("a stormed code converges", CONVERGE, || async {
                Ok((self.live.wecom_list(config_id).await? == wanted).then_some(()))
            })
            .await?;
        }
        let calls = updates(world, &self.live.tenant.corp_id).await?;
        let minutes: std::collections::BTreeSet<u64> = calls
            .iter()
            .map(|(started, _, _)| started / 60_000)
            .collect();
        // Eight pushes over a minute edge fit two minutes' limits: throttling is then not
        // certain, though convergence still is.
        ensure!(
            calls.iter().any(|(_, outcome, _)| *outcome == 45009) || minutes.len() > 1,
            "the storm was never throttled: {calls:?}"
        );
        Ok(())
    }
}

/// The tenant's budget for this minute is already spent (as if other workers had spent it):
/// the push waits in a retry queue instead of calling WeCom, and lands in a later minute.
async fn a_tenant_without_budget_is_requeued_not_failed_and_converges(world: &World) -> Result<()> {
    let live = LiveTenant::create(world, 2).await?;
    let members: Vec<&str> = live.staff.iter().map(String::as_str).collect();
    let config_id = live.put_code("nobudget", &members, None).await?;
    world.wait_until_drained().await?;
    let now = now_ms();
    let slot = BudgetSlot::at(now);
    let tenant = TenantId::parse(&live.tenant.id)?;
    // Every shard the budget could be kept in, whatever the deployed limits make of it.
    for shard in 0..MOST_SHARDS {
        let budget_item = keys::budget(UPDATE_CONTACT_WAY, shard, slot.hour);
        world
            .dynamodb
            .update_item()
            .table_name(world.output("TableName"))
            .key("pk", AttributeValue::S(keys::home(&tenant, &budget_item)))
            .key("sk", AttributeValue::S(budget_item))
            .update_expression("SET #m = :spent")
            .expression_attribute_names("#m", &slot.minute_counter)
            .expression_attribute_values(":spent", AttributeValue::N("150000".into()))
            .send()
            .await?;
    }
    live.set_online(&live.staff[1], false).await?;
    let wanted = vec![live.staff[0].clone()];
    eventually("the unbudgeted code converges", CONVERGE, || async {
        Ok((live.wecom_list(&config_id).await? == wanted).then_some(()))
    })
    .await?;
    let calls = updates(world, &live.tenant.corp_id).await?;
    ensure!(
        calls
            .iter()
            .all(|(started, _, _)| started / 60_000 != now / 60_000 || *started < now),
        "a call was made in the minute whose budget was spent: {calls:?}"
    );
    Ok(())
}

/// Every token of the corp expires: the next push gets 42001, one new token is fetched and
/// the push is sent once more.
async fn an_expired_token_is_refreshed_once_and_the_push_retried(world: &World) -> Result<()> {
    let live = LiveTenant::create(world, 2).await?;
    let members: Vec<&str> = live.staff.iter().map(String::as_str).collect();
    let config_id = live.put_code("token", &members, None).await?;
    // A push first, so the refresh function holds a token for this corp.
    live.set_online(&live.staff[1], false).await?;
    let first = vec![live.staff[0].clone()];
    eventually("the first push lands", CONVERGE, || async {
        Ok((live.wecom_list(&config_id).await? == first).then_some(()))
    })
    .await?;
    let expired = world
        .sandbox()
        .post(
            "/_sandbox/tokens/expire",
            json!({"corp_id": live.tenant.corp_id}),
        )
        .await?;
    ensure!(
        expired["expired"].as_u64() >= Some(1),
        "no token expired: {expired}"
    );
    live.set_online(&live.staff[1], true).await?;
    let both = live.staff.clone();
    eventually("the push after expiry lands", CONVERGE, || async {
        Ok((live.wecom_list(&config_id).await? == both).then_some(()))
    })
    .await?;
    let outcomes: Vec<i64> = updates(world, &live.tenant.corp_id)
        .await?
        .into_iter()
        .map(|(_, outcome, _)| outcome)
        .collect();
    ensure!(
        outcomes.windows(2).any(|w| w == [42001, 0]),
        "expected a refused call retried at once: {outcomes:?}"
    );
    Ok(())
}

/// Someone deleted the contact way in WeCom: the next push gets 41044, the code is marked
/// gone and dirty, and later reasons make no call.
async fn a_code_wecom_deleted_is_marked_gone_and_dirty_and_left_alone(
    live: &LiveTenant<'_>,
) -> Result<()> {
    let world = live.world;
    let members: Vec<&str> = live.staff.iter().map(String::as_str).collect();
    let config_id = live.put_code("gone", &members, None).await?;
    let staff = live.staff[1].clone();
    let token = world.sandbox().token(&live.tenant).await?;
    let deleted = world
        .sandbox()
        .call("del_contact_way", &token, json!({"config_id": config_id}))
        .await?;
    ensure!(deleted["errcode"] == 0, "not deleted: {deleted}");
    let tenant = TenantId::parse(&live.tenant.id)?;
    let code = CodeId::parse("gone")?;
    live.set_online(&staff, false).await?;
    let dirty = eventually("the code is marked dirty", CONVERGE, || async {
        item(world, &tenant, &keys::dirty(&code)).await
    })
    .await?;
    ensure!(
        dirty.get("why") == Some(&AttributeValue::S("refresh_failed:code_gone".into())),
        "dirty mark {dirty:?}"
    );
    let code_item = item(world, &tenant, &keys::code(&code))
        .await?
        .context("code item")?;
    ensure!(
        code_item.contains_key("wecom_gone_at_ms"),
        "not marked gone"
    );
    // Later reasons for the code make no call.
    live.set_online(&staff, true).await?;
    world.wait_until_drained().await?;
    let calls = updates(world, &live.tenant.corp_id).await?;
    let on_gone = calls.iter().filter(|(_, _, c)| *c == config_id).count();
    ensure!(
        on_gone == 1,
        "the gone code was called {on_gone} times: {calls:?}"
    );
    Ok(())
}

/// A staff member left WeCom's directory but not ours: the push listing them gets 60111;
/// they are marked unusable on the tenant and the others are pushed in the same refresh.
/// Every other code they sit on is told by the refresh that found out (a query of the staff
/// -> codes index), before its own next push fails on them: here a second code gets no other
/// reason, and its list loses them without a refused call of its own.
async fn a_staff_member_wecom_refuses_is_marked_unusable_and_the_others_pushed(
    world: &World,
) -> Result<()> {
    let live = LiveTenant::create(world, 4).await?;
    let [s0, s1, leaver, s3] = [0, 1, 2, 3].map(|i| live.staff[i].as_str());
    let config_id = live.put_code("unusable", &[s0, s1, leaver], None).await?;
    let other_config = live.put_code("unusable-too", &[s3, leaver], None).await?;
    for (config, wanted) in [
        (&config_id, vec![s0, s1, leaver]),
        (&other_config, vec![s3, leaver]),
    ] {
        eventually("both codes list the leaver", CONVERGE, || async {
            Ok((live.wecom_list(config).await? == wanted).then_some(()))
        })
        .await?;
    }
    world.wait_until_drained().await?;
    let removed = world
        .http
        .delete(format!(
            "{}/_sandbox/corps/{}/users/{leaver}",
            world.sandbox_url, live.tenant.corp_id
        ))
        .send()
        .await?;
    ensure!(
        removed.status().is_success(),
        "user not removed from the sandbox"
    );
    // s1 sits on the first code only: its reason reaches that code and no other.
    live.set_online(s1, false).await?;
    let tenant = TenantId::parse(&live.tenant.id)?;
    let staff_item = eventually("the leaver is marked unusable", CONVERGE, || async {
        Ok(item(world, &tenant, &keys::staff(&StaffId::parse(leaver)?))
            .await?
            .filter(|i| i.get("rejected_by_wecom") == Some(&AttributeValue::Bool(true))))
    })
    .await?;
    ensure!(
        staff_item.get("rejected_errcode") == Some(&AttributeValue::N("60111".into())),
        "{staff_item:?}"
    );
    eventually("the other code drops the leaver", CONVERGE, || async {
        Ok((live.wecom_list(&other_config).await? == [s3]).then_some(()))
    })
    .await?;
    world.wait_until_drained().await?;
    ensure!(live.wecom_list(&config_id).await? == [s0]);
    let refused_on_other: Vec<_> = updates(world, &live.tenant.corp_id)
        .await?
        .into_iter()
        .filter(|(_, outcome, config)| *config == other_config && *outcome != 0)
        .collect();
    ensure!(
        refused_on_other.is_empty(),
        "the other code found out by its own refused push: {refused_on_other:?}"
    );
    let status = world
        .admin()
        .get(&format!("/tenants/{}/codes/unusable", live.tenant.id))
        .await?;
    ensure!(
        status.to_string().contains(leaver) && status["in_sync"] == Value::Bool(true),
        "status after the rejection: {status}"
    );
    Ok(())
}

/// WeCom answers 502: the reason waits in the first delay queue (15 s; later attempts would
/// wait longer) and the push lands without a dead letter.
async fn a_transient_failure_is_retried_through_the_delay_queues_and_converges(
    live: &LiveTenant<'_>,
) -> Result<()> {
    let world = live.world;
    let members: Vec<&str> = live.staff.iter().map(String::as_str).collect();
    let config_id = live.put_code("flaky", &members, None).await?;
    live.set_online(&live.staff[1], false).await?;
    let wanted = vec![live.staff[0].clone()];
    eventually("the flaky push lands", CONVERGE, || async {
        Ok((live.wecom_list(&config_id).await? == wanted).then_some(()))
    })
    .await?;
    let outcomes: Vec<i64> = updates(world, &live.tenant.corp_id)
        .await?
        .into_iter()
        .map(|(_, outcome, _)| outcome)
        .collect();
    ensure!(outcomes == [502, 0], "calls {outcomes:?}");
    Ok(())
}

async fn item(
    world: &World,
    tenant: &TenantId,
    sk: &str,
) -> Result<Option<HashMap<String, AttributeValue>>> {
    Ok(world
        .dynamodb
        .get_item()
        .table_name(world.output("TableName"))
        .key("pk", AttributeValue::S(keys::home(tenant, sk)))
        .key("sk", AttributeValue::S(sk.to_owned()))
        .consistent_read(true)
        .send()
        .await?
        .item)
}
