//! The roles `template.yaml` gives the functions, checked where IAM is evaluated (MiniStack
//! runs with `AUTH=true`): the test takes the internet-facing callback function's role and
//! tries, with its credentials, what the function does and what it must never do.

use adapters::dynamodb::keys;
use anyhow::{anyhow, Context, Result};
use aws_sdk_dynamodb::types::AttributeValue;
use domain::ids::TenantId;
use integration_tests::World;
use std::collections::HashMap;

/// A DynamoDB client signing as the callback function's execution role.
async fn as_callback_role(world: &World) -> Result<aws_sdk_dynamodb::Client> {
    as_role_of(world, "CallbackFunctionName").await
}

/// A DynamoDB client signing as the execution role of the function named by `output`.
async fn as_role_of(world: &World, output: &str) -> Result<aws_sdk_dynamodb::Client> {
    let function = world
        .lambda
        .get_function_configuration()
        .function_name(world.output(output))
        .send()
        .await?;
    let role = function
        .role()
        .context("the callback function has a role")?;
    let assumed = aws_sdk_sts::Client::new(&world.aws)
        .assume_role()
        .role_arn(role)
        .role_session_name("least-privilege-test")
        .send()
        .await?;
    let credentials = assumed
        .credentials()
        .context("AssumeRole answers credentials")?;
    let credentials = aws_credential_types::Credentials::new(
        credentials.access_key_id(),
        credentials.secret_access_key(),
        Some(credentials.session_token().to_owned()),
        None,
        "callback-role",
    );
    let config = aws_sdk_dynamodb::config::Builder::from(&world.aws)
        .credentials_provider(credentials)
        .build();
    Ok(aws_sdk_dynamodb::Client::from_conf(config))
}

fn key(pk: String, sk: &str) -> HashMap<String, AttributeValue> {
    HashMap::from([
        (keys::PK.to_owned(), AttributeValue::S(pk)),
        (keys::SK.to_owned(), AttributeValue::S(sk.to_owned())),
    ])
}

fn denied<T, E: std::fmt::Debug>(result: Result<T, aws_sdk_dynamodb::error::SdkError<E>>) -> bool {
    match result {
        Ok(_) => false,
        Err(error) => format!("{error:?}").contains("AccessDenied"),
    }
}

#[tokio::test]
async fn the_callback_role_reads_callback_settings_and_nothing_else() -> Result<()> {
    let world = World::connect().await?;
    let tenant = world.new_tenant().await?;
    let table = world.output("TableName").to_owned();
    let profile = key(
        keys::home(&TenantId::parse(&tenant.id)?, keys::PROFILE),
        keys::PROFILE,
    );
    let callback = as_callback_role(&world).await?;

    let settings = callback
        .get_item()
        .table_name(&table)
        .set_key(Some(profile.clone()))
        // Exactly what the callback function sends: the current keys and the pair a rotation
        // replaced, with when (docs/design/safety.md, "Rotating callback keys").
        .projection_expression(adapters::dynamodb::CALLBACK_PROJECTION)
        .send()
        .await
        .map_err(|e| anyhow!("the callback's own read was refused: {e:?}"))?;
    let item = settings.item().context("the profile is there")?;
    assert_eq!(
        item.get("corp_id"),
        Some(&AttributeValue::S(tenant.corp_id.clone()))
    );
    assert!(!item.contains_key("corp_secret"));

    let mut refusals = Vec::new();
    let whole_profile = callback
        .get_item()
        .table_name(&table)
        .set_key(Some(profile.clone()))
        .send()
        .await;
    if !denied(whole_profile) {
        refusals.push("the whole profile item (with the corp secret)");
    }
    let secret = callback
        .get_item()
        .table_name(&table)
        .set_key(Some(profile.clone()))
        .projection_expression("corp_id, corp_secret")
        .send()
        .await;
    if !denied(secret) {
        refusals.push("the corp secret by name");
    }
    let token = callback
        .get_item()
        .table_name(&table)
        .set_key(Some(key(
            keys::wecom_token(&tenant.corp_id),
            keys::WECOM_TOKEN_SK,
        )))
        .send()
        .await;
    if !denied(token) {
        refusals.push("a stored access token");
    }
    let partition = callback
        .query()
        .table_name(&table)
        .key_condition_expression("pk = :pk")
        .expression_attribute_values(
            ":pk",
            AttributeValue::S(keys::tenant(&TenantId::parse(&tenant.id)?)),
        )
        .send()
        .await;
    if !denied(partition) {
        refusals.push("a query over the tenant's items");
    }
    let write = callback
        .put_item()
        .table_name(&table)
        .set_item(Some(key(
            keys::home(&TenantId::parse(&tenant.id)?, "STAFF#intruder"),
            "STAFF#intruder",
        )))
        .send()
        .await;
    if !denied(write) {
        refusals.push("a write");
    }
    assert!(
        refusals.is_empty(),
        "the callback role was allowed: {refusals:?}"
    );
    Ok(())
}

/// The stage throttles every route (template parameters `ApiThrottleRatePerSecond` and
/// `ApiThrottleBurst`): the deployed stage carries the limits, and a stage over its limit
/// answers 429 without running a function.
#[tokio::test]
async fn the_stage_throttles_a_flood_before_any_function_runs() -> Result<()> {
    use aws_sdk_apigateway::types::{Op, PatchOperation};
    let world = World::connect().await?;
    let apigateway = aws_sdk_apigateway::Client::new(&world.aws);
    let (api, stage) = (world.output("ApiId"), world.output("ApiStage"));
    let deployed = apigateway
        .get_stage()
        .rest_api_id(api)
        .stage_name(stage)
        .send()
        .await?;
    let limits = deployed
        .method_settings()
        .and_then(|settings| settings.get("*/*"))
        .context("the stage has stage-wide method settings")?;
    assert!(
        limits.throttling_rate_limit() > 0.0 && limits.throttling_burst_limit() > 0,
        "{limits:?}"
    );
    let set = |rate: String, burst: String| {
        apigateway
            .update_stage()
            .rest_api_id(api)
            .stage_name(stage)
            .patch_operations(
                PatchOperation::builder()
                    .op(Op::Replace)
                    .path("/*/*/throttling/rateLimit")
                    .value(rate)
                    .build(),
            )
            .patch_operations(
                PatchOperation::builder()
                    .op(Op::Replace)
                    .path("/*/*/throttling/burstLimit")
                    .value(burst)
                    .build(),
            )
            .send()
    };
    set("1".into(), "2".into()).await?;
    let mut statuses = Vec::new();
    for _ in 0..10 {
        let (status, _) = world.post_callback("flood", &[], String::new()).await?;
        statuses.push(status);
    }
    set(
        limits.throttling_rate_limit().to_string(),
        limits.throttling_burst_limit().to_string(),
    )
    .await?;
    let throttled = statuses.iter().filter(|s| **s == 429).count();
    assert!(throttled >= 7, "statuses of a flood at 1/s: {statuses:?}");
    Ok(())
}

/// The public landing page's role counts visits (`UpdateItem`) and does nothing else: no read,
/// no put. (Its `dynamodb:LeadingKeys` condition, tenant partitions only, is for AWS: MiniStack
/// does not evaluate that key, the callback role's reads included.)
#[tokio::test]
async fn the_landing_role_counts_visits_and_nothing_else() -> Result<()> {
    let world = World::connect().await?;
    let tenant = world.new_tenant().await?;
    let table = world.output("TableName").to_owned();
    let pk = keys::tenant(&TenantId::parse(&tenant.id)?);
    let landing = as_role_of(&world, "LandingPageFunctionName").await?;
    // Its own call, refused by the condition (no such record) rather than by IAM.
    let own = landing
        .update_item()
        .table_name(&table)
        .set_key(Some(key(
            keys::home(&TenantId::parse(&tenant.id)?, "PUSHED#nope"),
            "PUSHED#nope",
        )))
        .update_expression("ADD visits :one")
        .condition_expression("attribute_exists(rotation)")
        .expression_attribute_values(":one", AttributeValue::N("1".into()))
        .send()
        .await;
    assert!(!denied(own), "the landing role may count a visit");
    let mut allowed = Vec::new();
    let read = landing
        .get_item()
        .table_name(&table)
        .set_key(Some(key(pk.clone(), keys::PROFILE)))
        .send()
        .await;
    if !denied(read) {
        allowed.push("a read of the profile");
    }
    let put = landing
        .put_item()
        .table_name(&table)
        .set_item(Some(key(pk.clone(), "STAFF#intruder")))
        .send()
        .await;
    if !denied(put) {
        allowed.push("a put");
    }
    assert!(
        allowed.is_empty(),
        "the landing role was allowed: {allowed:?}"
    );
    Ok(())
}

/// The landing page has its own, lower limit on the stage (`LandingThrottleRatePerSecond`,
/// `LandingThrottleBurst`), applied before the function runs.
#[tokio::test]
async fn the_landing_route_is_throttled_on_its_own() -> Result<()> {
    use aws_sdk_apigateway::types::{Op, PatchOperation};
    let world = World::connect().await?;
    let apigateway = aws_sdk_apigateway::Client::new(&world.aws);
    let (api, stage) = (world.output("ApiId"), world.output("ApiStage"));
    let route = "/~1l~1{tenant}~1{code}/GET";
    let deployed = apigateway
        .get_stage()
        .rest_api_id(api)
        .stage_name(stage)
        .send()
        .await?;
    let limits = deployed
        .method_settings()
        .and_then(|settings| {
            settings
                .get(route)
                .or_else(|| settings.get(route.trim_start_matches('/')))
        })
        .context("the landing route has its own method settings")?
        .clone();
    let set = |rate: String, burst: String| {
        apigateway
            .update_stage()
            .rest_api_id(api)
            .stage_name(stage)
            .patch_operations(
                PatchOperation::builder()
                    .op(Op::Replace)
                    .path(format!("{route}/throttling/rateLimit"))
                    .value(rate)
                    .build(),
            )
            .patch_operations(
                PatchOperation::builder()
                    .op(Op::Replace)
                    .path(format!("{route}/throttling/burstLimit"))
                    .value(burst)
                    .build(),
            )
            .send()
    };
    set("1".into(), "2".into()).await?;
    let mut statuses = Vec::new();
    for _ in 0..10 {
        let answer = world
            .http
            .get(format!("{}/l/flood/nope", world.api_url))
            .send()
            .await?;
        statuses.push(answer.status().as_u16());
    }
    set(
        limits.throttling_rate_limit().to_string(),
        limits.throttling_burst_limit().to_string(),
    )
    .await?;
    let throttled = statuses.iter().filter(|s| **s == 429).count();
    assert!(throttled >= 7, "statuses of a flood at 1/s: {statuses:?}");
    Ok(())
}
