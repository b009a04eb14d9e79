//! WeCom's per-address window, shared by every tenant calling from one address (docs/rules.md
//! rule 6, docs/design/egress.md): three tenants whose own budgets each allow every push of a
//! burst, behind the one address the local world leaves from, together need more pushes than
//! the sandbox's per-IP minute allows. The refresh function charges each push to the tenant's
//! budget and to the address's, so WeCom never answers 45009 and every list converges a minute
//! later. The sandbox's settings and the function's environment are put back at the end.

use anyhow::{ensure, Context, Result};
use integration_tests::{eventually, now_ms, LiveTenant, World};
use serde_json::json;
use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

/// Codes per tenant: each tenant's burst is well within its own budget (9,000 a minute).
const CODES: usize = 10;
const TENANTS: usize = 3;
/// The sandbox's per-IP window for the test, and the address budget the refresh function is
/// given: below the burst (30 pushes), the budget a tenth under the window as deployed.
const SANDBOX_PER_IP_PER_MINUTE: u64 = 22;
const ADDRESS_BUDGET_PER_MINUTE: u32 = 20;
/// The burst waits for the next wall-clock minute and a retry queue's delay (60 s at most).
const CONVERGE: Duration = Duration::from_secs(200);

#[tokio::test]
async fn three_tenants_behind_one_address_never_meet_its_window_and_all_converge() -> Result<()> {
    let world = World::connect().await?;
    let mut tenants = Vec::new();
    for _ in 0..TENANTS {
        let live = LiveTenant::create(&world, 2).await?;
        let members: Vec<&str> = live.staff.iter().map(String::as_str).collect();
        let mut codes = Vec::new();
        for i in 0..CODES {
            codes.push(live.put_code(&format!("w{i}"), &members, None).await?);
        }
        tenants.push((live, codes));
    }
    world.wait_until_drained().await?;

    let original_config = world.sandbox().get("/_sandbox/config").await?;
    let original_env = world
        .function_environment("RefreshCodesFunctionName")
        .await?;
    let mut lowered: HashMap<String, String> = original_env.clone();
    lowered.insert(
        "WECOM_BUDGET_PER_ADDRESS_PER_MINUTE".into(),
        ADDRESS_BUDGET_PER_MINUTE.to_string(),
    );
    world
        .set_function_environment("RefreshCodesFunctionName", lowered)
        .await?;
    world
        .sandbox()
        .put(
            "/_sandbox/config",
            json!({"limit_per_ip_per_minute": SANDBOX_PER_IP_PER_MINUTE}),
        )
        .await?;

    let outcome = async {
        // The burst starts with a wall-clock minute, so without the address's budget all 30
        // pushes would meet the sandbox's window of 22 in that one minute.
        let into_minute = now_ms() % 60_000;
        if into_minute > 2_000 {
            tokio::time::sleep(Duration::from_millis(60_000 - into_minute + 200)).await;
        }
        let started_ms = now_ms();
        let started = Instant::now();
        // Every code of every tenant loses its first member at once: 30 pushes.
        for (live, _) in &tenants {
            live.set_online(&live.staff[0], false).await?;
        }
        eventually("every list without the offline member", CONVERGE, || async {
            for (live, codes) in &tenants {
                for config_id in codes {
                    if live.wecom_list(config_id).await? != [live.staff[1].clone()] {
                        return Ok(None);
                    }
                }
            }
            Ok(Some(()))
        })
        .await?;
        let converged = started.elapsed();

        let mut per_minute: BTreeMap<u64, u64> = BTreeMap::new();
        let mut throttled = 0;
        let mut pushes = 0;
        for (live, _) in &tenants {
            let log = world
                .sandbox()
                .get(&format!(
                    "/_sandbox/calls?corp_id={}&api=update_contact_way",
                    live.tenant.corp_id
                ))
                .await?;
            for call in log["calls"].as_array().cloned().unwrap_or_default() {
                let at = call["at_ms"].as_u64().context("a call's time")?;
                if at < started_ms {
                    continue;
                }
                pushes += 1;
                if call["response"]["errcode"].as_i64() == Some(45009) {
                    throttled += 1;
                }
                *per_minute.entry(at / 60_000).or_default() += 1;
            }
        }
        println!(
            "{TENANTS} tenants x {CODES} codes behind one address, window {SANDBOX_PER_IP_PER_MINUTE}/min, \
             budget {ADDRESS_BUDGET_PER_MINUTE}/min: {pushes} update_contact_way calls, {throttled} x 45009, \
             per minute {:?}, converged in {:.1} s",
            per_minute.values().collect::<Vec<_>>(),
            converged.as_secs_f64()
        );
        ensure!(throttled == 0, "WeCom answered 45009 {throttled} times");
        ensure!(
            pushes >= TENANTS * CODES,
            "only {pushes} pushes for {} codes",
            TENANTS * CODES
        );
        ensure!(
            per_minute
                .values()
                .all(|n| *n <= u64::from(ADDRESS_BUDGET_PER_MINUTE)),
            "a minute over the address's budget: {per_minute:?}"
        );
        ensure!(
            per_minute.len() >= 2,
            "the burst fit in one minute, so the window was never shared: {per_minute:?}"
        );
        Ok(())
    }
    .await;

    world
        .set_function_environment("RefreshCodesFunctionName", original_env)
        .await?;
    world
        .sandbox()
        .put(
            "/_sandbox/config",
            json!({
                "limit_per_ip_per_minute": original_config["limit_per_ip_per_minute"],
            }),
        )
        .await?;
    outcome
}
