//! `replay`: starts a replay run in the stack (its first page on the replay queue) and
//! follows the run's record until it is done; the replay function does the work, one page
//! per invocation, so closing the laptop does not stop it (`--no-follow`, then `--run` to
//! follow it again).

use crate::ops::{now_ms, spinner, Ops};
use adapters::dynamodb::keys;
use anyhow::{anyhow, bail, Context, Result};
use aws_sdk_dynamodb::types::AttributeValue;
use domain::ids::CodeId;
use domain::ids::TenantId;
use domain::replay::{check_run_id, Page, Phase, Selection};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::time::{Duration, Instant};

#[derive(clap::Args)]
pub struct Args {
    /// The tenant whose archived callbacks are replayed.
    #[arg(long, required_unless_present = "follow")]
    tenant: Option<String>,
    /// Received at or after: RFC 3339 (`2026-12-03T08:00:00Z`) or ms since the epoch.
    #[arg(long, required_unless_present = "follow")]
    from: Option<String>,
    /// Received at or before (default: now).
    #[arg(long)]
    to: Option<String>,
    /// Only callbacks about this code.
    #[arg(long)]
    code: Option<String>,
    /// Only events of this type (`change_external_contact`, `change_contact/delete_user`).
    #[arg(long)]
    event_type: Option<String>,
    /// Write the missing facts and send refresh reasons (default: a dry run that writes
    /// nothing and calls WeCom zero times).
    #[arg(long)]
    apply: bool,
    /// The run's id (default: made from the time). An id names one run: a run that exists
    /// under it is an error.
    #[arg(long)]
    run: Option<String>,
    /// Your name, added to the caller's STS identity as the run's initiator ("<arn> as
    /// <name>"); needed when STS does not answer.
    #[arg(long)]
    by: Option<String>,
    /// Follow a run already started (its id), instead of starting one.
    #[arg(long, conflicts_with_all = ["tenant", "from", "apply", "run", "by"])]
    follow: Option<String>,
    /// Start the run and return at once.
    #[arg(long)]
    no_follow: bool,
    /// Stop following after this many seconds (the run goes on in the stack).
    #[arg(long, default_value_t = 3600)]
    timeout_secs: u64,
}

fn instant(raw: &str, what: &str) -> Result<u64> {
    if let Ok(ms) = raw.parse::<u64>() {
        return Ok(ms);
    }
    let at = chrono::DateTime::parse_from_rfc3339(raw)
        .with_context(|| format!("--{what}: RFC 3339 or ms since the epoch"))?;
    u64::try_from(at.timestamp_millis()).map_err(|_| anyhow!("--{what}: before 1970"))
}

pub async fn run(ops: &Ops, args: Args) -> Result<()> {
    let run = match &args.follow {
        Some(run) => run.clone(),
        None => start(ops, &args).await?,
    };
    check_run_id(&run).map_err(|e| anyhow!("--follow: {e}"))?;
    if args.no_follow {
        if ops.json {
            println!("{}", json!({"run": run}));
        } else {
            println!("replay run {run} started; follow it with `qrsync-ops replay --follow {run}`");
        }
        return Ok(());
    }
    let record = follow(ops, &run, Duration::from_secs(args.timeout_secs)).await?;
    report(ops, &run, &record).await
}

async fn start(ops: &Ops, args: &Args) -> Result<String> {
    let tenant = TenantId::parse(args.tenant.as_deref().unwrap_or_default())
        .map_err(|e| anyhow!("--tenant: {e}"))?;
    let from_ms = instant(args.from.as_deref().unwrap_or_default(), "from")?;
    let to_ms = match &args.to {
        Some(raw) => instant(raw, "to")?,
        None => now_ms(),
    };
    let code = args
        .code
        .as_deref()
        .map(CodeId::parse)
        .transpose()
        .map_err(|e| anyhow!("--code: {e}"))?;
    let selection = Selection {
        tenant,
        from_ms,
        to_ms,
        code,
        event_type: args.event_type.clone(),
    };
    selection.check().map_err(|e| anyhow!("{e}"))?;
    let run = args.run.clone().unwrap_or_else(|| {
        format!(
            "{}-{}",
            if args.apply { "apply" } else { "dry" },
            chrono::Utc::now().format("%Y%m%d-%H%M%S-%3f")
        )
    });
    check_run_id(&run).map_err(|e| anyhow!("--run: {e}"))?;
    // A run id names one run: a page of a new selection under an old id would add its
    // figures to the old run's record.
    let existing = ops
        .dynamodb
        .get_item()
        .table_name(ops.table()?)
        .key(keys::PK, AttributeValue::S(keys::replay_run(&run)))
        .key(keys::SK, AttributeValue::S(keys::REPLAY_RUN_SK.to_owned()))
        .send()
        .await
        .context("the run's record")?;
    if let Some(item) = existing.item() {
        bail!(
            "--run: run {run} exists (started at {} ms by {}, status {}); choose another id, \
             or leave --run out for a new one",
            number(item, "started_at_ms"),
            started_by(item),
            text(item, "status")
        );
    }
    // Who asked, and when: with the selection, what the replay function compares when the
    // first page comes again (the same request resumes the run; another is refused).
    let by = ops.caller(args.by.as_deref()).await?;
    let page = Page {
        run: run.clone(),
        selection,
        apply: args.apply,
        phase: Phase::Events,
        after: None,
        by,
        requested_at_ms: now_ms(),
    };
    ops.sqs
        .send_message()
        .queue_url(ops.output("ReplayQueueUrl")?)
        .message_body(serde_json::to_string(&page)?)
        .send()
        .await
        .context("the replay queue")?;
    Ok(run)
}

type Item = HashMap<String, AttributeValue>;

fn number(item: &Item, name: &str) -> u64 {
    item.get(name)
        .and_then(|v| v.as_n().ok())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn text<'a>(item: &'a Item, name: &str) -> &'a str {
    item.get(name)
        .and_then(|v| v.as_s().ok())
        .map(String::as_str)
        .unwrap_or_default()
}

/// The run's initiator, as its record keeps it (a run started before initiators were kept
/// names none).
fn started_by(item: &Item) -> &str {
    match text(item, "started_by") {
        "" => "(not recorded)",
        by => by,
    }
}

/// Polls the run's record (every 500 ms) until it is done or refused, or the timeout.
async fn follow(ops: &Ops, run: &str, timeout: Duration) -> Result<Item> {
    let bar = spinner(&format!("replay {run}: starting"), ops.json);
    let deadline = Instant::now() + timeout;
    loop {
        let item = ops
            .dynamodb
            .get_item()
            .table_name(ops.table()?)
            .key(keys::PK, AttributeValue::S(keys::replay_run(run)))
            .key(keys::SK, AttributeValue::S(keys::REPLAY_RUN_SK.to_owned()))
            .consistent_read(true)
            .send()
            .await?
            .item;
        if let Some(item) = item {
            let status = text(&item, "status").to_owned();
            bar.set_message(format!(
                "replay {run} (started by {}): {status}, {} events in {} pages, {} codes \
                 recomputed",
                started_by(&item),
                number(&item, "events"),
                number(&item, "pages"),
                number(&item, "codes")
            ));
            if status == "done" || status == "refused" {
                bar.finish_and_clear();
                return Ok(item);
            }
        }
        if Instant::now() >= deadline {
            bar.finish_and_clear();
            bail!(
                "run {run} not done within {} s; it goes on in the stack (--follow {run})",
                timeout.as_secs()
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

async fn query_prefix(ops: &Ops, run: &str, prefix: &str) -> Result<Vec<Item>> {
    let mut items = Vec::new();
    let mut start = None;
    loop {
        let page = ops
            .dynamodb
            .query()
            .table_name(ops.table()?)
            .key_condition_expression("pk = :pk AND begins_with(sk, :prefix)")
            .expression_attribute_values(":pk", AttributeValue::S(keys::replay_run(run)))
            .expression_attribute_values(":prefix", AttributeValue::S(prefix.to_owned()))
            .consistent_read(true)
            .set_exclusive_start_key(start)
            .send()
            .await?;
        items.extend(page.items().iter().cloned());
        start = page.last_evaluated_key().cloned();
        if start.is_none() {
            return Ok(items);
        }
    }
}

const COUNTERS: [&str; 16] = [
    "events",
    "filtered",
    "would_count",
    "already_counted",
    "duplicates",
    "staff_differs",
    "staff_same",
    "staff_other",
    "counted",
    "staff_written",
    "poison",
    "no_fact",
    "codes",
    "codes_changing",
    "crossings",
    "pages",
];

async fn report(ops: &Ops, run: &str, record: &Item) -> Result<()> {
    let parse = |item: &Item, field: &str| -> Value {
        serde_json::from_str(text(item, field)).unwrap_or(Value::Null)
    };
    let events: Vec<Value> = query_prefix(ops, run, "EVENT#")
        .await?
        .iter()
        .map(|item| parse(item, "line"))
        .collect();
    let codes: Vec<Value> = query_prefix(ops, run, "CODE#")
        .await?
        .iter()
        .filter(|item| item.contains_key("change"))
        .map(|item| parse(item, "change"))
        .collect();
    let counters: serde_json::Map<String, Value> = COUNTERS
        .iter()
        .map(|name| ((*name).to_owned(), json!(number(record, name))))
        .collect();
    let apply = record
        .get("apply")
        .and_then(|v| v.as_bool().ok())
        .copied()
        .unwrap_or(false);
    let whole = json!({
        "run": run,
        "mode": if apply { "apply" } else { "dry_run" },
        "status": text(record, "status"),
        "started_by": started_by(record),
        "started_at_ms": number(record, "started_at_ms"),
        "selection": parse(record, "selection"),
        "counters": counters,
        "events": events,
        "codes": codes,
    });
    if ops.json {
        println!("{}", serde_json::to_string_pretty(&whole)?);
        return Ok(());
    }
    println!(
        "replay {run} ({}): {}, started by {} at {} ms",
        whole["mode"].as_str().unwrap_or_default(),
        whole["status"].as_str().unwrap_or_default(),
        started_by(record),
        number(record, "started_at_ms")
    );
    for (name, value) in &counters {
        if value.as_u64().unwrap_or(0) > 0 {
            println!("  {name}: {value}");
        }
    }
    println!("events:");
    for line in &events {
        println!(
            "  {} {:<45} {:<20} code {} staff {} {}",
            line["received_at_ms"],
            line["kind"].as_str().unwrap_or_default(),
            line["outcome"].as_str().unwrap_or_default(),
            line["code"].as_str().unwrap_or("-"),
            line["staff"].as_str().unwrap_or("-"),
            line["detail"].as_str().unwrap_or_default()
        );
    }
    if !apply {
        println!("codes whose WeCom list would change:");
        for change in codes.iter().filter(|c| c["would_change"] == json!(true)) {
            println!(
                "  {}: {} -> {} {}",
                change["code"].as_str().unwrap_or_default(),
                change["wecom_list"],
                change["would_push"],
                change["crossings"]
            );
        }
    }
    Ok(())
}
