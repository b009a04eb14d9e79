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
    Ok(aws_sdk_dynamodb::Client::new(
        &world.as_role_of(output).await?,
    ))
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

/// The public landing page's role reads pages and counts visits in its own two tables, and
/// nothing else: not a conditional no-op update of a tenant's profile that would answer the
/// whole item on refusal (`ReturnValuesOnConditionCheckFailure=ALL_OLD`: the corp secret), not
/// an update without a condition that would create or rewrite any item of the platform's
/// table, not a rewrite of a page's rotation links. (On AWS its policy also holds its writes to
/// a counter's attributes and their answer to the counter: MiniStack evaluates neither
/// `dynamodb:Attributes` nor `dynamodb:ReturnValues` on `UpdateItem`, so no local test can
/// show those two; the tables are the resources it does check.)
#[tokio::test]
async fn the_landing_role_reads_pages_and_counts_visits_and_nothing_else() -> Result<()> {
    use aws_sdk_dynamodb::types::{ReturnValue, ReturnValuesOnConditionCheckFailure};
    let world = World::connect().await?;
    let tenant = world.new_tenant().await?;
    let tenant_id = TenantId::parse(&tenant.id)?;
    let table = world.output("TableName").to_owned();
    let pages = world.page_tables();
    let landing = as_role_of(&world, "LandingPageFunctionName").await?;
    let page_key = |code: &str| {
        HashMap::from([(
            keys::PAGE.to_owned(),
            AttributeValue::S(format!("{}#{code}", tenant.id)),
        )])
    };

    // Its own calls: a page read, a visit counted on a round's counter.
    let read = landing
        .get_item()
        .table_name(&pages.rotations)
        .set_key(Some(page_key("nope")))
        .consistent_read(true)
        .send()
        .await;
    assert!(!denied(read), "the landing role may read a page");
    let counted = landing
        .update_item()
        .table_name(&pages.visits)
        .key(
            keys::ROUND,
            AttributeValue::S(format!("{}#nope#0000000000000000", tenant.id)),
        )
        .update_expression("ADD visits :one SET expires_at = :expires")
        .expression_attribute_values(":one", AttributeValue::N("1".into()))
        .expression_attribute_values(":expires", AttributeValue::N("1".into()))
        .return_values(ReturnValue::UpdatedNew)
        .send()
        .await;
    assert!(!denied(counted), "the landing role may count a visit");

    let mut allowed = Vec::new();
    let profile = key(keys::home(&tenant_id, keys::PROFILE), keys::PROFILE);
    let secret_on_refusal = landing
        .update_item()
        .table_name(&table)
        .set_key(Some(profile.clone()))
        .update_expression("SET touched = :x")
        .condition_expression("attribute_not_exists(pk)")
        .expression_attribute_values(":x", AttributeValue::S("x".into()))
        .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
        .send()
        .await;
    if !denied(secret_on_refusal) {
        allowed.push("a conditional no-op update of the profile answering ALL_OLD");
    }
    let upsert = landing
        .update_item()
        .table_name(&table)
        .set_key(Some(key(
            keys::home(&tenant_id, "PUSHED#planted"),
            "PUSHED#planted",
        )))
        .update_expression("SET rotation = :r")
        .expression_attribute_values(":r", AttributeValue::S("[]".into()))
        .send()
        .await;
    if !denied(upsert) {
        allowed.push("an update without a condition of the platform's table");
    }
    let rewrite_page = landing
        .update_item()
        .table_name(&pages.rotations)
        .set_key(Some(page_key("printed")))
        .update_expression("SET rotation = :r")
        .expression_attribute_values(
            ":r",
            AttributeValue::S(
                r#"[{"staff":"eve","takes":1,"link":"https://evil.example/"}]"#.into(),
            ),
        )
        .send()
        .await;
    if !denied(rewrite_page) {
        allowed.push("a rewrite of a page's rotation links");
    }
    let put_page = landing
        .put_item()
        .table_name(&pages.rotations)
        .set_item(Some(page_key("planted")))
        .send()
        .await;
    if !denied(put_page) {
        allowed.push("a page put");
    }
    let read_profile = landing
        .get_item()
        .table_name(&table)
        .set_key(Some(profile))
        .send()
        .await;
    if !denied(read_profile) {
        allowed.push("a read of the profile");
    }
    let put = landing
        .put_item()
        .table_name(&table)
        .set_item(Some(key(keys::tenant(&tenant_id), "STAFF#intruder")))
        .send()
        .await;
    if !denied(put) {
        allowed.push("a put in the platform's table");
    }
    assert!(
        allowed.is_empty(),
        "the landing role was allowed: {allowed:?}"
    );
    Ok(())
}

/// The public routes' buckets on the stage, each method's its own: the landing page's
/// (`LandingThrottleRatePerSecond`, `LandingThrottleBurst`) and the callback's
/// (`CallbackThrottleRatePerSecond`, `CallbackThrottleBurst`), beside the stage-wide one the
/// admin API keeps (`ApiThrottleRatePerSecond`). A route over its limit answers 429 before its
/// function runs, and the other route answers all the while: a flood of one does not starve
/// the other. One test, the routes one after another, so neither flood meets the other's
/// lowered limit. (The per-client, per-tenant and per-code limits in front of the stage are
/// WAF's, which MiniStack does not run: tools/template_check.py holds them to the template.)
#[tokio::test]
async fn each_public_route_is_throttled_on_its_own() -> Result<()> {
    use aws_sdk_apigateway::types::{MethodSetting, Op, PatchOperation};
    let world = World::connect().await?;
    let apigateway = aws_sdk_apigateway::Client::new(&world.aws);
    let (api, stage) = (world.output("ApiId"), world.output("ApiStage"));
    let deployed = apigateway
        .get_stage()
        .rest_api_id(api)
        .stage_name(stage)
        .send()
        .await?;
    let settings = deployed
        .method_settings()
        .context("the stage has method settings")?;
    let limits = |route: &str| -> Result<MethodSetting> {
        settings
            .get(route)
            .or_else(|| settings.get(route.trim_start_matches('/')))
            .cloned()
            .with_context(|| format!("{route} has method settings of its own: {settings:?}"))
    };
    let stage_wide = limits("*/*")?;
    assert!(
        stage_wide.throttling_rate_limit() > 0.0 && stage_wide.throttling_burst_limit() > 0,
        "{stage_wide:?}"
    );
    let landing = "/~1l~1{tenant}~1{code}/GET";
    let callback = "/~1wecom~1{tenant}~1callback/POST";
    let (landing_limits, callback_limits) = (limits(landing)?, limits(callback)?);
    limits("/~1wecom~1{tenant}~1callback/GET")?;
    let set = |route: &'static str, rate: String, burst: String| {
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
    let visit = || async {
        let answer = world
            .http
            .get(format!("{}/l/flood/nope", world.api_url))
            .send()
            .await?;
        anyhow::Ok(answer.status().as_u16())
    };
    let post = || async {
        let (status, _) = world.post_callback("flood", &[], String::new()).await?;
        anyhow::Ok(status)
    };
    // The landing route flooded at 1/s; the callback answers each time.
    set(landing, "1".into(), "2".into()).await?;
    let (mut visits, mut callbacks) = (Vec::new(), Vec::new());
    for _ in 0..10 {
        visits.push(visit().await?);
        callbacks.push(post().await?);
    }
    set(
        landing,
        landing_limits.throttling_rate_limit().to_string(),
        landing_limits.throttling_burst_limit().to_string(),
    )
    .await?;
    // Then the callback route flooded at 1/s; the landing page answers each time.
    set(callback, "1".into(), "2".into()).await?;
    let (mut flood, mut visits_meanwhile) = (Vec::new(), Vec::new());
    for _ in 0..10 {
        flood.push(post().await?);
        visits_meanwhile.push(visit().await?);
    }
    set(
        callback,
        callback_limits.throttling_rate_limit().to_string(),
        callback_limits.throttling_burst_limit().to_string(),
    )
    .await?;
    let throttled = |statuses: &[u16]| statuses.iter().filter(|s| **s == 429).count();
    assert!(
        throttled(&visits) >= 7,
        "statuses of a landing flood at 1/s: {visits:?}"
    );
    assert_eq!(
        throttled(&callbacks),
        0,
        "callbacks during the landing flood: {callbacks:?}"
    );
    assert!(
        throttled(&flood) >= 7,
        "statuses of a callback flood at 1/s: {flood:?}"
    );
    assert_eq!(
        throttled(&visits_meanwhile),
        0,
        "visits during the callback flood: {visits_meanwhile:?}"
    );
    println!(
        "landing flood {visits:?} beside callbacks {callbacks:?}; callback flood {flood:?} beside visits {visits_meanwhile:?}"
    );
    Ok(())
}
