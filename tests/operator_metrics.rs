//! What an operator sees, against the deployed stack: the EMF documents the real functions
//! print, the alarms and dashboard `template.yaml` deploys, and an alarm raised by a real
//! function error reaching the team's group robot (the sandbox's webhook).
//!
//! MiniStack evaluates alarms on `AWS/Lambda` metrics only, counts them only for `Invoke`
//! calls, ignores an alarm's dimensions and evaluates only when a metric datum or an alarm is
//! put (docs/local-world.md, "MiniStack versus AWS"); the alarm test works within those limits and leaves the
//! world as other tests of its shard expect it.

use adapters::logging::LOG_LEVEL_VAR;
use anyhow::{ensure, Context, Result};
use aws_sdk_cloudwatch::types::{MetricDatum, StandardUnit, StateValue};
use aws_sdk_lambda::primitives::Blob;
use integration_tests::{eventually, now_ms, LiveTenant, World};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::time::Duration;

/// The units CloudWatch takes (`MetricDatum.Unit`).
const UNITS: &[&str] = &[
    "Seconds",
    "Microseconds",
    "Milliseconds",
    "Bytes",
    "Kilobytes",
    "Megabytes",
    "Gigabytes",
    "Terabytes",
    "Bits",
    "Kilobits",
    "Megabits",
    "Gigabits",
    "Terabits",
    "Percent",
    "Count",
    "Bytes/Second",
    "Kilobytes/Second",
    "Megabytes/Second",
    "Gigabytes/Second",
    "Terabytes/Second",
    "Bits/Second",
    "Kilobits/Second",
    "Megabits/Second",
    "Gigabits/Second",
    "Terabits/Second",
    "Count/Second",
    "None",
];

/// The EMF documents among a function's log lines.
fn documents(lines: &[String]) -> Vec<Value> {
    lines
        .iter()
        .filter_map(|line| serde_json::from_str::<Value>(line.trim()).ok())
        .filter(|doc| doc.get("_aws").is_some())
        .collect()
}

/// Checks one document against the EMF specification; returns its metric names.
fn valid_emf(doc: &Value, function: &str, levels: &[&str]) -> Result<Vec<String>> {
    let aws = &doc["_aws"];
    ensure!(aws["Timestamp"].is_u64(), "Timestamp not epoch ms: {doc}");
    let directives = aws["CloudWatchMetrics"]
        .as_array()
        .context("CloudWatchMetrics is no array")?;
    ensure!(directives.len() == 1, "{doc}");
    let directive = &directives[0];
    ensure!(directive["Namespace"] == "qrsync", "{doc}");
    let sets = directive["Dimensions"]
        .as_array()
        .context("Dimensions is no array")?;
    ensure!(!sets.is_empty(), "no dimension set: {doc}");
    for set in sets {
        let names = set.as_array().context("a dimension set is no array")?;
        ensure!(names.len() <= 30, "more than 30 dimensions: {doc}");
        ensure!(names.first() == Some(&json!("Function")), "{doc}");
        for name in names {
            let name = name.as_str().context("a dimension name is no string")?;
            ensure!(
                doc[name].is_string(),
                "dimension {name} has no string value: {doc}"
            );
            ensure!(
                !name.to_lowercase().contains("tenant"),
                "a tenant dimension: {doc}"
            );
        }
    }
    ensure!(
        doc["Function"] == function,
        "Function is not {function}: {doc}"
    );
    ensure!(
        levels.iter().any(|level| doc["level"] == *level),
        "level is not one of {levels:?}: {doc}"
    );
    let metrics = directive["Metrics"]
        .as_array()
        .context("Metrics is no array")?;
    ensure!(
        !metrics.is_empty() && metrics.len() <= 100,
        "{} metrics",
        metrics.len()
    );
    let mut names = Vec::new();
    for metric in metrics {
        let name = metric["Name"].as_str().context("a metric has no Name")?;
        ensure!(!name.is_empty() && name.len() <= 1024, "{doc}");
        if let Some(unit) = metric.get("Unit") {
            let unit = unit.as_str().context("Unit is no string")?;
            ensure!(
                UNITS.contains(&unit),
                "unit {unit} is not CloudWatch's: {doc}"
            );
        }
        let value = &doc[name];
        let fine = value.is_number()
            || value
                .as_array()
                .is_some_and(|v| !v.is_empty() && v.len() <= 100 && v.iter().all(Value::is_number));
        ensure!(fine, "metric {name} has no numeric value: {doc}");
        names.push(name.to_owned());
    }
    Ok(names)
}

/// Drives a callback, an add and a push, then checks every document the four functions on
/// that path printed.
#[tokio::test]
async fn the_functions_print_valid_emf_documents_with_tenants_as_properties() -> Result<()> {
    let world = World::connect().await?;
    world
        .set_consumer_enabled("RecordFactsFunctionName", true)
        .await?;
    let since_ms = now_ms();
    let live = LiveTenant::create(&world, 2).await?;
    let members: Vec<&str> = live.staff.iter().map(String::as_str).collect();
    let config_id = live.put_code("metered", &members, None).await?;
    world
        .sandbox()
        .post(
            "/_sandbox/scan",
            json!({"corp_id": live.tenant.corp_id, "config_id": config_id}),
        )
        .await?;
    world.wait_until_drained().await?;
    let wanted = [
        ("CallbackFunctionName", "CallbacksAccepted"),
        ("RecordFactsFunctionName", "AddsCounted"),
        ("RefreshCodesFunctionName", "RefreshReasons"),
        ("AdminApiFunctionName", "AdminAnswers"),
    ];
    let mut checked = 0;
    for (function, metric) in wanted {
        let name = world.output(function).to_owned();
        let docs = eventually(
            &format!("{function}'s {metric} document"),
            Duration::from_secs(30),
            || async {
                let docs = documents(&world.function_logs(function, since_ms).await?);
                let seen = docs.iter().any(|d| d.get(metric).is_some());
                Ok(seen.then_some(docs))
            },
        )
        .await?;
        // The level test below moves the callback function to `error` meanwhile.
        for doc in &docs {
            valid_emf(doc, &name, &["INFO", "ERROR"])?;
        }
        checked += docs.len();
    }
    let tenant = live.tenant.id.as_str();
    let refresh_docs = documents(
        &world
            .function_logs("RefreshCodesFunctionName", since_ms)
            .await?,
    );
    ensure!(
        refresh_docs.iter().any(|d| d["TenantIds"]
            .as_array()
            .is_some_and(|ids| ids.contains(&json!(tenant)))),
        "no refresh document names tenant {tenant} in TenantIds"
    );
    println!("{checked} EMF documents from 4 functions checked");
    Ok(())
}

/// With `LogLevel` at error the functions' own info lines are gone, but the metrics are not:
/// each document carries the level Lambda's filter keeps (`AWS_LAMBDA_LOG_LEVEL` on AWS;
/// MiniStack passes only our `QRSYNC_LOG_LEVEL`).
#[tokio::test]
async fn at_log_level_error_the_metrics_are_still_printed_at_a_level_lambda_keeps() -> Result<()> {
    let world = World::connect().await?;
    let function = "CallbackFunctionName";
    let environment = world.function_environment(function).await?;
    let mut quiet = environment.clone();
    quiet.insert(LOG_LEVEL_VAR.into(), "error".into());
    world.set_function_environment(function, quiet).await?;
    let outcome = async {
        let since_ms = now_ms();
        let live = LiveTenant::create(&world, 1).await?;
        let timestamp = integration_tests::now_secs().to_string();
        let query = [
            ("msg_signature", "0000000000000000000000000000000000000000"),
            ("timestamp", timestamp.as_str()),
            ("nonce", "metered"),
            ("echostr", "bm90IGEgcmVhbCBlY2hvc3Ry"),
        ];
        let (status, _) = world.get_callback(&live.tenant.id, &query).await?;
        ensure!(status == 401, "a bad signature answered {status}");
        let name = world.output(function).to_owned();
        let docs = eventually(
            "the refusal's document",
            Duration::from_secs(30),
            || async {
                let lines = world.function_logs(function, since_ms).await?;
                let docs = documents(&lines);
                let refused = docs.iter().any(|d| d.get("CallbacksRefused").is_some());
                Ok(refused.then_some((docs, lines)))
            },
        )
        .await?;
        // The documents of this test's refusal (the test above may add its own meanwhile).
        for doc in docs
            .0
            .iter()
            .filter(|d| d.get("CallbacksRefused").is_some())
        {
            valid_emf(doc, &name, &["ERROR"])?;
        }
        ensure!(
            !docs.1.iter().any(|l| l.contains("callback refused")),
            "an info line was printed at error"
        );
        Ok(())
    }
    .await;
    world
        .set_function_environment(function, environment)
        .await?;
    outcome
}

fn alarm_prefix(world: &World) -> String {
    world.output("AlarmNamePrefix").to_owned()
}

/// One call of SNS's query API, signed with the test's own credentials (the tests carry no SNS
/// SDK): its status and body.
async fn sns(world: &World, params: &[(&str, &str)]) -> Result<(u16, String)> {
    fn encoded(raw: &str) -> String {
        raw.bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                    char::from(b).to_string()
                }
                _ => format!("%{b:02X}"),
            })
            .collect()
    }
    let url = format!(
        "{}/",
        world
            .aws
            .endpoint_url()
            .context("AWS_ENDPOINT_URL")?
            .trim_end_matches('/')
    );
    let body = params
        .iter()
        .chain(&[("Version", "2010-03-31")])
        .map(|(name, value)| format!("{name}={}", encoded(value)))
        .collect::<Vec<_>>()
        .join("&");
    let content_type = "application/x-www-form-urlencoded";
    let request = stack_client::Unsigned {
        method: "POST",
        url: &url,
        content_type,
        payload: body.as_bytes(),
    };
    let credentials = world.aws.credentials_provider().context("credentials")?;
    let region = world.aws.region().context("a region")?.to_string();
    let headers = stack_client::sigv4_headers(&credentials, &region, "sns", &request).await?;
    let mut call = world
        .http
        .post(&url)
        .header("content-type", content_type)
        .body(body);
    for (name, value) in headers {
        call = call.header(name, value);
    }
    let answer = call.send().await?;
    Ok((answer.status().as_u16(), answer.text().await?))
}

/// The alarm topic's policy (`AlarmTopicPolicy`): only this stack's alarms publish, and no
/// machine but the alarm robot subscribes. The test's credentials are a principal of the
/// stack's own account (its root, locally), which the topic's default policy would let do
/// both; MiniStack evaluates a topic's policy on each call (`AUTH=true`), so its Denies refuse
/// them. CloudWatch's own deliveries are not evaluated by MiniStack (an alarm's change reaches
/// the robot whatever the policy says: `an_alarm_raised_by_a_function_error_reaches_the_group_robot`
/// shows the path), so the Allow for this stack's alarms is AWS's to enforce.
#[tokio::test]
async fn the_alarm_topic_takes_only_this_stacks_alarms() -> Result<()> {
    let world = World::connect().await?;
    let topic = world.output("AlarmTopicArn");
    let (status, body) = sns(
        &world,
        &[
            ("Action", "Publish"),
            ("TopicArn", topic),
            ("Subject", "ALARM: everything is fine"),
            ("Message", "a forged alarm for the group robot"),
        ],
    )
    .await?;
    ensure!(
        status == 403 && body.contains("AuthorizationError"),
        "a principal of the account published to the alarm topic: {status} {body}"
    );
    let eavesdropper = topic
        .replace(":sns:", ":sqs:")
        .replace("-alarms", "-eavesdropper");
    let (status, body) = sns(
        &world,
        &[
            ("Action", "Subscribe"),
            ("TopicArn", topic),
            ("Protocol", "sqs"),
            ("Endpoint", &eavesdropper),
        ],
    )
    .await?;
    ensure!(
        status == 403 && body.contains("AuthorizationError"),
        "a queue subscribed to the alarm topic: {status} {body}"
    );
    let (status, body) = sns(
        &world,
        &[("Action", "ListSubscriptionsByTopic"), ("TopicArn", topic)],
    )
    .await?;
    ensure!(status == 200, "the topic's subscriptions: {status} {body}");
    let lambdas = body.matches("<Protocol>lambda</Protocol>").count();
    ensure!(
        lambdas == 1 && body.contains("AlarmRobot") && !body.contains("eavesdropper"),
        "the alarm robot alone reads the topic: {body}"
    );
    println!("publish and a queue's subscribe refused; {lambdas} function subscribed (the robot)");
    Ok(())
}

#[tokio::test]
async fn the_alarms_and_the_dashboard_deploy() -> Result<()> {
    let world = World::connect().await?;
    let cloudwatch = aws_sdk_cloudwatch::Client::new(&world.aws);
    let alarms = cloudwatch
        .describe_alarms()
        .alarm_name_prefix(alarm_prefix(&world))
        .max_records(100)
        .send()
        .await?;
    let alarms = alarms.metric_alarms();
    let topic = world.output("AlarmTopicArn");
    for alarm in alarms {
        let name = alarm.alarm_name().unwrap_or_default();
        ensure!(
            alarm.alarm_actions().iter().any(|a| a == topic),
            "{name} does not alarm the topic"
        );
        ensure!(
            alarm.ok_actions().iter().any(|a| a == topic),
            "{name} does not tell the topic it is OK again"
        );
    }
    let metrics: BTreeSet<(String, String)> = alarms
        .iter()
        .map(|a| {
            (
                a.namespace().unwrap_or_default().to_owned(),
                a.metric_name().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    for (namespace, metric) in [
        ("AWS/SQS", "ApproximateNumberOfMessagesVisible"),
        ("AWS/SQS", "ApproximateAgeOfOldestMessage"),
        ("AWS/Lambda", "Errors"),
        ("AWS/Lambda", "Throttles"),
        ("qrsync", "WeComThrottled"),
        ("qrsync", "StarvedCodes"),
        ("qrsync", "DriftFound"),
        ("qrsync", "DriftGuardTripped"),
        ("qrsync", "BudgetUsedPercent"),
        ("qrsync", "AddressBudgetUsedPercent"),
        ("qrsync", "TenantsPaused"),
    ] {
        ensure!(
            metrics.contains(&(namespace.to_owned(), metric.to_owned())),
            "no alarm on {namespace} {metric}"
        );
    }
    let per_function = |metric: &str| {
        alarms
            .iter()
            .filter(|a| a.metric_name() == Some(metric))
            .count()
    };
    // One of each per function but the robot (a failing robot cannot report itself).
    ensure!(per_function("Errors") == 9 && per_function("Throttles") == 9);
    let dashboard = cloudwatch
        .get_dashboard()
        .dashboard_name(world.output("OperatorDashboardName"))
        .send()
        .await?;
    let body: Value = serde_json::from_str(dashboard.dashboard_body().unwrap_or_default())?;
    let widgets = body["widgets"].as_array().context("no widgets")?;
    let shown = widgets
        .iter()
        .find(|w| w["type"] == "alarm")
        .and_then(|w| w["properties"]["alarms"].as_array())
        .context("no alarm widget")?;
    ensure!(
        shown.len() == alarms.len(),
        "the dashboard shows {} alarms of {}",
        shown.len(),
        alarms.len()
    );
    println!(
        "{} alarms on the topic, a dashboard of {} widgets",
        alarms.len(),
        widgets.len()
    );
    Ok(())
}

/// An `Invoke` the fan-out function cannot read fails it; its errors alarm goes to ALARM and
/// the robot function posts the change to the sandbox's group robot.
///
/// Locally the alarm is evaluated when a datum is put (this test puts probes), on every
/// function's errors (MiniStack ignores the dimension), and keeps its state while no new datum
/// falls in its window. So the test sets it OK itself, forces the error and probes; if another
/// evaluation came in between (the window still held an earlier error), it tries again. The
/// robot takes 20 messages a minute, as WeCom's does, and a first evaluation changes all 14
/// function alarms at once: the test starts when the robot's last minute is quiet enough.
#[tokio::test]
async fn a_forced_function_error_raises_its_alarm_and_the_robot_tells_the_team() -> Result<()> {
    let world = World::connect().await?;
    let cloudwatch = aws_sdk_cloudwatch::Client::new(&world.aws);
    let alarm = format!("{}FanOutErrors", alarm_prefix(&world));
    let evaluate = || async {
        cloudwatch
            .put_metric_data()
            .namespace("qrsync/tests")
            .metric_data(
                MetricDatum::builder()
                    .metric_name("AlarmProbe")
                    .value(1.0)
                    .unit(StandardUnit::Count)
                    .build(),
            )
            .send()
            .await?;
        let described = cloudwatch
            .describe_alarms()
            .alarm_names(&alarm)
            .send()
            .await?;
        let state = described
            .metric_alarms()
            .first()
            .and_then(|a| a.state_value().cloned())
            .context("the alarm is deployed")?;
        anyhow::Ok(state)
    };
    eventually(
        "a quiet minute on the robot",
        Duration::from_secs(90),
        || async {
            let now_ms = world.sandbox().get("/_sandbox/clock").await?["now_ms"]
                .as_u64()
                .unwrap_or(0);
            let log = world.sandbox().get("/_sandbox/robot/messages").await?;
            let recent = log["messages"]
                .as_array()
                .map(|m| {
                    m.iter()
                        .filter(|m| m["at_ms"].as_u64().unwrap_or(0) + 60_000 > now_ms)
                        .count()
                })
                .unwrap_or(0);
            Ok((recent <= 4).then_some(()))
        },
    )
    .await?;
    for attempt in 1..=3 {
        let since = world.sandbox().get("/_sandbox/robot/messages").await?["next"]
            .as_u64()
            .unwrap_or(0);
        cloudwatch
            .set_alarm_state()
            .alarm_name(&alarm)
            .state_value(StateValue::Ok)
            .state_reason("operator_metrics: starting from OK")
            .send()
            .await?;
        let invoked = world
            .lambda
            .invoke()
            .function_name(world.output("FanOutFunctionName"))
            .payload(Blob::new(
                br#"{"Records": "not a list of messages"}"#.to_vec(),
            ))
            .send()
            .await?;
        ensure!(
            invoked.function_error().is_some(),
            "the fan-out function took a payload it cannot read"
        );
        eventually("the alarm in ALARM", Duration::from_secs(30), || async {
            Ok((evaluate().await? == StateValue::Alarm).then_some(()))
        })
        .await?;
        let message = eventually(
            "the robot's message about the alarm",
            Duration::from_secs(20),
            || async {
                let answer = world
                    .sandbox()
                    .get(&format!("/_sandbox/robot/messages?since={since}"))
                    .await?;
                let messages = answer["messages"].as_array().cloned().unwrap_or_default();
                Ok(messages.into_iter().find(|m| {
                    let first = m["content"]
                        .as_str()
                        .and_then(|c| c.lines().next())
                        .unwrap_or_default();
                    first.ends_with(&alarm) && first.contains(">ALARM<")
                }))
            },
        )
        .await;
        match message {
            Ok(message) => {
                ensure!(message["msgtype"] == "markdown", "{message}");
                println!(
                    "attempt {attempt}: robot message: {}",
                    message["content"].as_str().unwrap_or_default()
                );
                return Ok(());
            }
            Err(error) => println!("attempt {attempt}: {error}"),
        }
    }
    anyhow::bail!("no robot message about {alarm} in 3 attempts")
}
