//! The egress relay (docs/design/egress.md): with `WeComRelay=on` (shard 4 of `make test`
//! deploys its world so; `FixedEgress=on` always does on AWS) the functions that call WeCom
//! send every call through the relay function of the tenant's address instead of calling
//! WeCom themselves, and the relay forwards qrsync's calls and nothing else.
//!
//! The sandbox records each call's user agent, and the relay's calls say `egress-relay`: a
//! tenant's token, its codes' creation (the admin API) and their pushes (the refresh) must all
//! carry it, and the pushes made together must travel together (the relay logs one line an
//! invocation with the requests it carried). The relay is then invoked as a caller would, with
//! one request it must refuse and one it must forward.

use anyhow::{ensure, Context, Result};
use aws_sdk_lambda::primitives::Blob;
use integration_tests::{eventually, now_ms, LiveTenant, World};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const RELAYED: &str = "egress-relay";
/// Codes of the tenant whose lists change at once: one refresh batch's worth.
const CODES: usize = 10;

/// The requests one relay invocation carried, from its `relayed` line: JSON as on AWS
/// (`LogFormat: JSON`), or the text (with colours) MiniStack keeps.
fn requests_relayed(line: &str) -> Option<u64> {
    if let Ok(json) = serde_json::from_str::<Value>(line) {
        return (json["fields"]["message"] == "relayed")
            .then(|| json["fields"]["requests"].as_u64())
            .flatten();
    }
    let mut plain = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // An ANSI colour: ESC [ ... m
            for skipped in chars.by_ref() {
                if skipped == 'm' {
                    break;
                }
            }
        } else {
            plain.push(c);
        }
    }
    let count = plain.split(": relayed requests=").nth(1)?;
    count.split_whitespace().next()?.parse().ok()
}

async fn invoke(world: &World, relay: &str, payload: Value) -> Result<Value> {
    let output = world
        .lambda
        .invoke()
        .function_name(relay)
        .payload(Blob::new(serde_json::to_vec(&payload)?))
        .send()
        .await?;
    ensure!(
        output.function_error().is_none(),
        "the relay failed: {:?}",
        output.function_error()
    );
    let bytes = output.payload().map(Blob::as_ref).unwrap_or_default();
    Ok(serde_json::from_slice(bytes)?)
}

#[tokio::test]
async fn every_call_of_a_tenant_goes_through_the_relay_and_the_relay_carries_nothing_else(
) -> Result<()> {
    let world = World::connect().await?;
    let relays = world.output("WeComRelays").to_owned();
    ensure!(
        relays != "direct" && !relays.is_empty(),
        "this world calls WeCom directly (WeComRelays = {relays:?}): deploy it with \
         QRSYNC_PARAMETER_OVERRIDES=WeComRelay=on, as shard 4 of `make test` does"
    );
    let relay = relays.split(',').next().context("one relay")?.to_owned();

    let started_ms = now_ms();
    let started = Instant::now();
    let live = LiveTenant::create(&world, 2).await?;
    let members: Vec<&str> = live.staff.iter().map(String::as_str).collect();
    let mut codes = Vec::new();
    for i in 0..CODES {
        codes.push(
            live.put_code(&format!("relayed{i}"), &members, None)
                .await?,
        );
    }
    let pushed_from_ms = now_ms();
    live.set_online(&live.staff[0], false).await?;
    eventually(
        "every list without the offline member",
        Duration::from_secs(60),
        || async {
            for config_id in &codes {
                if live.wecom_list(config_id).await? != [live.staff[1].clone()] {
                    return Ok(None);
                }
            }
            Ok(Some(()))
        },
    )
    .await?;
    let converged = started.elapsed();

    let log = world
        .sandbox()
        .get(&format!("/_sandbox/calls?corp_id={}", live.tenant.corp_id))
        .await?;
    let calls: Vec<Value> = log["calls"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|call| call["at_ms"].as_u64().unwrap_or(0) >= started_ms)
        .collect();
    let count = |api: &str| calls.iter().filter(|c| c["api"] == api).count();
    let direct: Vec<String> = calls
        .iter()
        .filter(|c| !c["user_agent"].as_str().unwrap_or("").contains(RELAYED))
        .map(|c| format!("{} ({})", c["api"], c["user_agent"]))
        .collect();
    println!(
        "{} calls of the tenant's corp ({} gettoken, {} add_contact_way, {} update_contact_way), \
         {} not through the relay; list converged in {:.1} s",
        calls.len(),
        count("gettoken"),
        count("add_contact_way"),
        count("update_contact_way"),
        direct.len(),
        converged.as_secs_f64()
    );
    ensure!(
        count("add_contact_way") >= 1 && count("update_contact_way") >= 1,
        "the admin API's creation and the refresh's push are both among {} calls",
        calls.len()
    );
    ensure!(
        direct.is_empty(),
        "calls that left without the relay: {direct:?}"
    );

    // The pushes of one refresh batch went out in fewer invocations than calls.
    let relay_output = "WeComRelays";
    let carried = eventually(
        "the relay's lines for the pushes",
        Duration::from_secs(30),
        || async {
            let carried: Vec<u64> = world
                .function_logs(relay_output, pushed_from_ms)
                .await?
                .iter()
                .filter_map(|line| requests_relayed(line))
                .collect();
            Ok((carried.iter().sum::<u64>() >= CODES as u64).then_some(carried))
        },
    )
    .await?;
    println!(
        "{} update_contact_way calls for {CODES} codes went in {} relay invocations (requests each: {carried:?})",
        count("update_contact_way"),
        carried.len()
    );
    ensure!(
        carried.iter().any(|&requests| requests > 1),
        "no invocation carried more than one request: {carried:?}"
    );

    // Invoked as a caller would: a call outside qrsync's is refused without an echo...
    let answer = invoke(
        &world,
        &relay,
        json!({ "requests": [{ "api": "user/get", "query": [["access_token", "tok-must-not-echo"]], "body": {} }] }),
    )
    .await?;
    println!("the relay's answer to user/get: {answer}");
    ensure!(answer["replies"][0]["outcome"] == "refused", "{answer}");
    ensure!(
        !answer.to_string().contains("tok-must-not-echo"),
        "{answer}"
    );
    // ...and gettoken with a wrong secret reaches WeCom, whose answer comes back as it was.
    let answer = invoke(
        &world,
        &relay,
        json!({ "requests": [{ "api": "gettoken", "query": [["corpid", live.tenant.corp_id], ["corpsecret", "wrong-secret"]] }] }),
    )
    .await?;
    let answered = &answer["replies"][0];
    ensure!(answered["outcome"] == "answered", "{answered}");
    let body: Value = serde_json::from_str(answered["body"].as_str().unwrap_or("null"))?;
    println!(
        "the relay's answer to gettoken with a wrong secret: errcode {}",
        body["errcode"]
    );
    ensure!(body["errcode"] == 40001, "{body}");
    Ok(())
}
