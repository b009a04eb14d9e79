//! No function logs a secret, whatever its level. The HTTP functions are switched to `trace`
//! (as `LogLevel=trace` does), driven through a tenant PUT (three secrets in its body), a code
//! creation (an access token fetched and used) and a delivered callback (the settings read
//! back from the table), and their CloudWatch logs are searched for every secret.

use adapters::logging::LOG_LEVEL_VAR;
use anyhow::{ensure, Context, Result};
use integration_tests::{eventually, now_ms, LiveTenant, World};
use serde_json::json;
use std::time::Duration;

const TRACED: [&str; 2] = ["AdminApiFunctionName", "CallbackFunctionName"];

#[tokio::test]
async fn at_trace_no_function_logs_a_secret() -> Result<()> {
    let world = World::connect().await?;
    world
        .set_consumer_enabled("RecordFactsFunctionName", true)
        .await?;
    let mut saved = Vec::new();
    for function in TRACED {
        let environment = world.function_environment(function).await?;
        let mut traced = environment.clone();
        traced.insert(LOG_LEVEL_VAR.into(), "trace".into());
        world.set_function_environment(function, traced).await?;
        saved.push((function, environment));
    }
    let outcome = drive_and_search(&world).await;
    for (function, environment) in saved {
        world
            .set_function_environment(function, environment)
            .await?;
    }
    outcome
}

async fn drive_and_search(world: &World) -> Result<()> {
    let since_ms = now_ms();
    let live = LiveTenant::create(world, 2).await?;
    let members: Vec<&str> = live.staff.iter().map(String::as_str).collect();
    let config_id = live.put_code("traced", &members, None).await?;
    let scan = world
        .sandbox()
        .post(
            "/_sandbox/scan",
            json!({"corp_id": live.tenant.corp_id, "config_id": config_id}),
        )
        .await?;
    ensure!(
        scan["delivery"]["delivered"] == true
            || scan["delivery"]["deliveries"][0]["delivered"] == true,
        "{scan}"
    );
    world.wait_until_drained().await?;
    // The admin API stored it sealed: opened here with the stack's keys, as a WeCom caller
    // would.
    let access_token =
        adapters::wecom::TokenStore::load(&world.sealing_store(), &live.tenant.corp_id)
            .await?
            .context("the admin API stored the access token it fetched")?
            .value;
    let secrets = [
        ("corp secret", live.tenant.corp_secret.as_str()),
        ("callback token", live.tenant.token.as_str()),
        ("EncodingAESKey", live.tenant.aes_key.as_str()),
        ("access token", access_token.as_str()),
    ];
    // Lines reach the log group shortly after the invocation; wait for the admin's debug line,
    // which also proves the level really was lifted.
    let logs = eventually(
        "the traced functions' logs",
        Duration::from_secs(30),
        || async {
            let mut lines = world
                .function_logs("AdminApiFunctionName", since_ms)
                .await?;
            let lifted = lines
                .iter()
                .any(|l| l.contains("fetched a WeCom access token"));
            lines.extend(
                world
                    .function_logs("CallbackFunctionName", since_ms)
                    .await?,
            );
            let delivered = lines.iter().any(|l| l.contains("callback persisted"));
            Ok((lifted && delivered).then_some(lines))
        },
    )
    .await?;
    let leaks: Vec<String> = secrets
        .iter()
        .flat_map(|(what, secret)| {
            logs.iter()
                .filter(move |line| line.contains(secret))
                .map(move |line| format!("{what}: {}", &line[..line.len().min(200)]))
        })
        .collect();
    ensure!(
        leaks.is_empty(),
        "{} log lines carry a secret: {leaks:#?}",
        leaks.len()
    );
    println!(
        "{} log lines at trace searched, no secret in any",
        logs.len()
    );
    Ok(())
}
