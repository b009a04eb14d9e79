//! `status`: what an on-call engineer looks at first.

use crate::ops::{now_ms, Ops};
use adapters::dynamodb::{keys, DynamoStore};
use anyhow::Result;
use aws_sdk_dynamodb::types::{AttributeValue, KeysAndAttributes, Select};
use aws_sdk_sqs::types::QueueAttributeName;
use domain::admin::PausedView;
use domain::tenants::TenantPauses;
use serde_json::{json, Value};
use std::collections::HashMap;

/// The queues the single writer reads from, whose oldest message says how far behind it is.
const REFRESH_QUEUES: [&str; 5] = [
    "Refresh",
    "SlowRefresh",
    "RefreshRetry15s",
    "RefreshRetry60s",
    "RefreshRetry900s",
];

pub async fn run(ops: &Ops) -> Result<()> {
    let cloudwatch = aws_sdk_cloudwatch::Client::new(&ops.aws);
    let mut queues = Vec::new();
    for (name, url) in ops.queues() {
        let attributes = ops
            .sqs
            .get_queue_attributes()
            .queue_url(&url)
            .attribute_names(QueueAttributeName::All)
            .send()
            .await?;
        let get = |attribute: QueueAttributeName| -> u64 {
            attributes
                .attributes()
                .and_then(|a| a.get(&attribute))
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
        };
        let mut queue = json!({
            "queue": name,
            "visible": get(QueueAttributeName::ApproximateNumberOfMessages),
            "in_flight": get(QueueAttributeName::ApproximateNumberOfMessagesNotVisible),
            "delayed": get(QueueAttributeName::ApproximateNumberOfMessagesDelayed),
        });
        if REFRESH_QUEUES.contains(&name.as_str()) {
            let queue_name = url.rsplit('/').next().unwrap_or_default();
            queue["oldest_age_seconds"] = oldest_age(&cloudwatch, queue_name).await;
        }
        queues.push(queue);
    }
    let dirty = dirty_codes(ops).await?;
    let (budget, throttled) = requeues_last_hour(ops).await?;
    let paused = paused_tenants(ops).await?;
    let report = json!({
        "stack": ops.stack.name,
        "queues": queues,
        "dirty_codes": dirty,
        "paused_tenants": paused,
        "requeued_last_hour": {"budget": budget, "throttled": throttled, "total": budget + throttled},
    });
    if ops.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    println!("stack {}", ops.stack.name);
    println!(
        "{:<22} {:>8} {:>9} {:>8} {:>11}",
        "queue", "visible", "in flight", "delayed", "oldest (s)"
    );
    for queue in &report["queues"].as_array().cloned().unwrap_or_default() {
        let oldest = match &queue["oldest_age_seconds"] {
            Value::Number(age) => age.to_string(),
            Value::Null if queue.get("oldest_age_seconds").is_some() => "no data".into(),
            _ => "-".into(),
        };
        println!(
            "{:<22} {:>8} {:>9} {:>8} {:>11}",
            queue["queue"].as_str().unwrap_or_default(),
            queue["visible"].as_u64().unwrap_or(0),
            queue["in_flight"].as_u64().unwrap_or(0),
            queue["delayed"].as_u64().unwrap_or(0),
            oldest
        );
    }
    println!("dirty codes: {dirty}");
    let paused = report["paused_tenants"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    println!("paused tenants: {}", paused.len());
    for tenant in &paused {
        println!(
            "  {} since {} (class {}, address {}, {} probes refused): {}",
            tenant["tenant"].as_str().unwrap_or_default(),
            tenant["since_ms"],
            tenant["class"].as_str().unwrap_or_default(),
            tenant["address"].as_str().unwrap_or_default(),
            tenant["probes"],
            tenant["reason"].as_str().unwrap_or_default()
        );
    }
    println!(
        "refreshes requeued in the last hour: {} (budget spent {budget}, WeCom throttled {throttled})",
        budget + throttled
    );
    Ok(())
}

/// Every paused tenant with its pause and what to fix (`domain::tenants::TenantPause`), from
/// the registry of paused tenants: the same store the refresh and the sweep use.
async fn paused_tenants(ops: &Ops) -> Result<Vec<Value>> {
    let store = DynamoStore::new(ops.dynamodb.clone(), ops.table()?.to_owned());
    let mut paused = Vec::new();
    for tenant in store.paused_tenants().await? {
        if let Some(pause) = store.pause_of(&tenant).await? {
            let mut view = serde_json::to_value(PausedView::of(pause))?;
            view["tenant"] = json!(tenant.as_str());
            paused.push(view);
        }
    }
    Ok(paused)
}

/// CloudWatch's `ApproximateAgeOfOldestMessage` of the queue over the last 5 minutes (the
/// most recent minute's maximum); null when CloudWatch has no datapoint.
async fn oldest_age(cloudwatch: &aws_sdk_cloudwatch::Client, queue_name: &str) -> Value {
    let now = std::time::SystemTime::now();
    let answer = cloudwatch
        .get_metric_statistics()
        .namespace("AWS/SQS")
        .metric_name("ApproximateAgeOfOldestMessage")
        .dimensions(
            aws_sdk_cloudwatch::types::Dimension::builder()
                .name("QueueName")
                .value(queue_name)
                .build(),
        )
        .start_time((now - std::time::Duration::from_secs(300)).into())
        .end_time(now.into())
        .period(60)
        .statistics(aws_sdk_cloudwatch::types::Statistic::Maximum)
        .send()
        .await;
    let Ok(answer) = answer else {
        return Value::Null;
    };
    answer
        .datapoints()
        .iter()
        .max_by_key(|d| d.timestamp().map(|t| t.secs()))
        .and_then(|d| d.maximum())
        .map_or(Value::Null, |age| json!(age.round() as u64))
}

/// Codes in the dirty set: a count over the `gsi1` partitions that hold the marks.
async fn dirty_codes(ops: &Ops) -> Result<u64> {
    let mut total = 0u64;
    for shard in 0..keys::DIRTY_SHARDS {
        let mut start = None;
        loop {
            let page = ops
                .dynamodb
                .query()
                .table_name(ops.table()?)
                .index_name("gsi1")
                .key_condition_expression("gsi1pk = :pk")
                .expression_attribute_values(":pk", AttributeValue::S(keys::dirty_shard(shard)))
                .select(Select::Count)
                .set_exclusive_start_key(start)
                .send()
                .await?;
            total += u64::try_from(page.count()).unwrap_or(0);
            start = page.last_evaluated_key().cloned();
            if start.is_none() {
                break;
            }
        }
    }
    Ok(total)
}

/// Refreshes requeued for the budget and for a throttle in the last 60 minutes: the refresh
/// function's per-minute counters (`STATS#REQUEUES#<shard>`), read in one `BatchGetItem` per
/// 100 keys.
async fn requeues_last_hour(ops: &Ops) -> Result<(u64, u64)> {
    let minute_now = now_ms() / 60_000;
    let mut keys_wanted = Vec::new();
    for shard in 0..keys::REQUEUE_SHARDS {
        for minute in minute_now.saturating_sub(59)..=minute_now {
            keys_wanted.push(HashMap::from([
                (
                    keys::PK.to_owned(),
                    AttributeValue::S(keys::requeues(shard)),
                ),
                (
                    keys::SK.to_owned(),
                    AttributeValue::S(keys::requeues_minute(minute)),
                ),
            ]));
        }
    }
    let (mut budget, mut throttled) = (0u64, 0u64);
    for chunk in keys_wanted.chunks(100) {
        let mut pending = Some(
            KeysAndAttributes::builder()
                .set_keys(Some(chunk.to_vec()))
                .consistent_read(true)
                .build()?,
        );
        for _ in 0..5 {
            let Some(request) = pending.take() else { break };
            let answer = ops
                .dynamodb
                .batch_get_item()
                .request_items(ops.table()?, request)
                .send()
                .await?;
            for item in answer
                .responses()
                .and_then(|r| r.get(ops.table().unwrap_or_default()))
                .map(Vec::as_slice)
                .unwrap_or_default()
            {
                let number = |name: &str| {
                    item.get(name)
                        .and_then(|v| v.as_n().ok())
                        .and_then(|n| n.parse::<u64>().ok())
                        .unwrap_or(0)
                };
                budget += number("requeued_budget");
                throttled += number("requeued_throttled");
            }
            pending = answer
                .unprocessed_keys()
                .and_then(|u| u.get(ops.table().unwrap_or_default()))
                .cloned();
        }
    }
    Ok((budget, throttled))
}
