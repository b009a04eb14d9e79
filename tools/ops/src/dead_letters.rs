//! `dead-letters`: the dead-letter queues an operator works (docs/rules.md rules 9 and 11).
//!
//! A message the functions parked carries its failure class (`failure_class`, `poison`,
//! `transient`...) and reason as message attributes; a message SQS itself moved there after
//! the source queue's `maxReceiveCount` carries none, and is listed as `moved_by_sqs`.
//! Reading a queue receives its messages under a visibility timeout and puts back every
//! message that was not redriven or closed at once.

use crate::ops::{bar, now_ms, Ops};
use adapters::dynamodb::keys;
use anyhow::{anyhow, bail, Result};
use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_sqs::types::{MessageSystemAttributeName, QueueAttributeName};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

/// The dead-letter queues and the queue each one's messages came from.
const DEAD_LETTER_QUEUES: [(&str, &str); 4] = [
    ("InboxDeadLetter", "Inbox"),
    ("RefreshDeadLetter", "Refresh"),
    ("FanOutDeadLetter", "FanOut"),
    ("ReplayDeadLetter", "Replay"),
];
/// The class of a message SQS moved itself (no `failure_class` attribute).
const MOVED_BY_SQS: &str = "moved_by_sqs";
/// How long read messages stay hidden while the tool decides about them, at the least.
const HOLD_SECONDS: i32 = 60;
/// SQS's longest visibility timeout: 12 hours.
const LONGEST_HOLD_SECONDS: i32 = 12 * 3600;

/// How long `limit` read messages are hidden: a minute, and a tenth of a second more for each
/// (reading them 10 at a time, then redriving or closing each, takes about that), so no
/// message comes back into sight, to be read twice or to lose its receipt, before the tool is
/// done with all of them.
fn hold_seconds(limit: u32) -> i32 {
    let per_letter = i32::try_from(limit / 10).unwrap_or(LONGEST_HOLD_SECONDS);
    HOLD_SECONDS
        .saturating_add(per_letter)
        .min(LONGEST_HOLD_SECONDS)
}
/// Closed records are kept this long (the table's TTL).
const CLOSED_TTL_SECS: u64 = 400 * 24 * 3600;

#[derive(clap::Subcommand)]
pub enum Command {
    /// By queue and failure class: how many, the oldest, and a sample.
    List {
        #[command(flatten)]
        read: ReadArgs,
        /// Only dead letters about this code.
        #[arg(long)]
        code: Option<String>,
        /// Only this failure class.
        #[arg(long)]
        class: Option<String>,
    },
    /// One dead letter in full (attributes and body; the encrypted envelope and anything
    /// unparsed only by size and hash).
    Show {
        /// The dead letter's message id (or its original message id).
        id: String,
        #[command(flatten)]
        read: ReadArgs,
    },
    /// Sends a selection back to the queue it came from, then removes it.
    Redrive(Selection),
    /// Marks a selection handled: removes it and records who closed it and when.
    Close {
        #[command(flatten)]
        selection: Selection,
        /// Who closes them (default: the caller's ARN from STS).
        #[arg(long)]
        by: Option<String>,
        /// Why (kept with the record).
        #[arg(long, default_value = "")]
        note: String,
    },
    /// The record of closed dead letters: who closed which, when.
    Closed {
        /// Only this queue (Inbox, Refresh, FanOut, Replay).
        #[arg(long)]
        queue: Option<String>,
    },
}

#[derive(clap::Args, Clone)]
pub struct ReadArgs {
    /// Only this queue's dead letters (Inbox, Refresh, FanOut, Replay).
    #[arg(long)]
    queue: Option<String>,
    /// Read at most this many per queue.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    limit: u32,
}

#[derive(clap::Args, Clone)]
pub struct Selection {
    #[command(flatten)]
    read: ReadArgs,
    /// Only this failure class (`poison`, `transient`, `moved_by_sqs`...).
    #[arg(long)]
    class: Option<String>,
    /// Only dead letters about this code.
    #[arg(long)]
    code: Option<String>,
    /// Only dead letters older than this many minutes.
    #[arg(long)]
    older_than_minutes: Option<u64>,
    /// Only these message ids.
    #[arg(long = "id")]
    ids: Vec<String>,
    /// Select every dead letter read (needed when no other filter is given).
    #[arg(long)]
    all: bool,
}

impl Selection {
    fn check(&self) -> Result<()> {
        let filtered = self.class.is_some()
            || self.code.is_some()
            || self.older_than_minutes.is_some()
            || !self.ids.is_empty();
        if !filtered && !self.all {
            bail!("name a selection (--class, --code, --older-than-minutes, --id) or --all");
        }
        Ok(())
    }

    fn selects(&self, letter: &Letter, now_ms: u64) -> bool {
        self.class.as_deref().is_none_or(|c| c == letter.class)
            && self
                .code
                .as_deref()
                .is_none_or(|c| letter.code.as_deref() == Some(c))
            && self
                .older_than_minutes
                .is_none_or(|m| now_ms.saturating_sub(letter.sent_at_ms) >= m * 60_000)
            && (self.ids.is_empty()
                || self
                    .ids
                    .iter()
                    .any(|id| *id == letter.id || Some(id) == letter.original_id.as_ref()))
    }
}

/// One dead letter as read.
struct Letter {
    queue: String,
    queue_url: String,
    id: String,
    original_id: Option<String>,
    receipt: String,
    body: String,
    class: String,
    reason: Option<String>,
    code: Option<String>,
    group: Option<String>,
    sent_at_ms: u64,
    receives: u64,
    source_arn: Option<String>,
    /// Every message attribute it carries, sent again with it on a redrive.
    attributes: std::collections::HashMap<String, aws_sdk_sqs::types::MessageAttributeValue>,
}

impl Letter {
    fn summary(&self, now_ms: u64) -> Value {
        json!({
            "queue": self.queue,
            "id": self.id,
            "original_id": self.original_id,
            "class": self.class,
            "moved_by_sqs": self.class == MOVED_BY_SQS,
            "reason": self.reason,
            "code": self.code,
            "age_seconds": now_ms.saturating_sub(self.sent_at_ms) / 1000,
        })
    }

    fn full(&self, now_ms: u64) -> Value {
        let mut shown = self.summary(now_ms);
        shown["group"] = json!(self.group);
        shown["sent_at_ms"] = json!(self.sent_at_ms);
        shown["receives"] = json!(self.receives);
        shown["source_arn"] = json!(self.source_arn);
        shown["body"] = without_secrets(&self.body);
        shown
    }
}

/// The body with nothing secret in it: a JSON body's encrypted envelope (and any field
/// named like a secret) replaced by its size and hash; a body that is not JSON only by its
/// size and hash.
fn without_secrets(body: &str) -> Value {
    let digest = |text: &str| json!({"bytes": text.len(), "sha256": hex::encode(Sha256::digest(text.as_bytes()))});
    match serde_json::from_str::<Value>(body) {
        Ok(Value::Object(fields)) => Value::Object(
            fields
                .into_iter()
                .map(|(name, value)| {
                    let lower = name.to_ascii_lowercase();
                    let hidden = lower == "envelope"
                        || ["secret", "token", "aes", "key"].iter().any(|word| {
                            lower.contains(word) && lower != "event_key" && lower != "fact_key"
                        });
                    let value = match value {
                        Value::String(text) if hidden => digest(&text),
                        other if hidden => digest(&other.to_string()),
                        other => other,
                    };
                    (name, value)
                })
                .collect(),
        ),
        Ok(other) => other,
        Err(_) => digest(body),
    }
}

pub async fn run(ops: &Ops, command: Command) -> Result<()> {
    match command {
        Command::List { read, code, class } => {
            list(ops, &read, code.as_deref(), class.as_deref()).await
        }
        Command::Show { id, read } => show(ops, &read, &id).await,
        Command::Redrive(selection) => {
            selection.check()?;
            work(ops, &selection, Work::Redrive).await
        }
        Command::Close {
            selection,
            by,
            note,
        } => {
            selection.check()?;
            if note.len() > 1000 {
                bail!("--note: at most 1000 bytes");
            }
            let by = ops.caller(by.as_deref()).await?;
            work(ops, &selection, Work::Close { by, note }).await
        }
        Command::Closed { queue } => closed(ops, queue.as_deref()).await,
    }
}

fn queues(ops: &Ops, only: Option<&str>) -> Result<Vec<(&'static str, &'static str, String)>> {
    if let Some(only) = only {
        if !DEAD_LETTER_QUEUES.iter().any(|(_, source)| *source == only) {
            bail!("--queue: one of Inbox, Refresh, FanOut, Replay");
        }
    }
    Ok(DEAD_LETTER_QUEUES
        .iter()
        .filter(|(_, source)| only.is_none_or(|o| o == *source))
        .filter_map(|(dlq, source)| {
            let url = ops.output(&format!("{dlq}QueueUrl")).ok()?;
            Some((*dlq, *source, url.to_owned()))
        })
        .collect())
}

/// Receives up to `limit` messages of the queue, each held for `HOLD_SECONDS`. On a FIFO
/// queue, messages behind a held one of the same group are not returned; they are counted
/// by the queue's approximate figure instead.
async fn read(ops: &Ops, source: &str, url: &str, limit: u32) -> Result<Vec<Letter>> {
    let mut letters: Vec<Letter> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let hold = hold_seconds(limit);
    'reading: while letters.len() < limit as usize {
        let answer = ops
            .sqs
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(10.min(limit as i32 - letters.len() as i32))
            .visibility_timeout(hold)
            .message_attribute_names("All")
            .message_system_attribute_names(MessageSystemAttributeName::All)
            .wait_time_seconds(0)
            .send()
            .await?;
        let messages = answer.messages();
        if messages.is_empty() {
            break;
        }
        for message in messages {
            // A message read before is back in sight: the queue has been read round.
            if !seen.insert(message.message_id().unwrap_or_default().to_owned()) {
                break 'reading;
            }
            let attribute = |name: &str| {
                message
                    .message_attributes()
                    .and_then(|a| a.get(name))
                    .and_then(|v| v.string_value())
                    .map(ToOwned::to_owned)
            };
            let system = |name: MessageSystemAttributeName| {
                message.attributes().and_then(|a| a.get(&name)).cloned()
            };
            let body = message.body().unwrap_or_default().to_owned();
            let group = system(MessageSystemAttributeName::MessageGroupId);
            let code = serde_json::from_str::<Value>(&body)
                .ok()
                .and_then(|b| b.get("code").and_then(Value::as_str).map(ToOwned::to_owned))
                .or_else(|| {
                    group
                        .as_deref()
                        .and_then(domain::intake::MessageGroup::code_of)
                        .map(|(_, code)| code.to_string())
                });
            letters.push(Letter {
                queue: source.to_owned(),
                queue_url: url.to_owned(),
                id: message.message_id().unwrap_or_default().to_owned(),
                original_id: attribute("original_message_id"),
                receipt: message.receipt_handle().unwrap_or_default().to_owned(),
                class: attribute("failure_class").unwrap_or_else(|| MOVED_BY_SQS.to_owned()),
                reason: attribute("failure_reason"),
                code,
                group,
                sent_at_ms: system(MessageSystemAttributeName::SentTimestamp)
                    .and_then(|t| t.parse().ok())
                    .unwrap_or(0),
                receives: system(MessageSystemAttributeName::ApproximateReceiveCount)
                    .and_then(|t| t.parse().ok())
                    .unwrap_or(0),
                source_arn: system(MessageSystemAttributeName::DeadLetterQueueSourceArn),
                attributes: message.message_attributes().cloned().unwrap_or_default(),
                body,
            });
        }
    }
    Ok(letters)
}

/// Makes the letters visible again at once.
async fn release(ops: &Ops, letters: &[Letter]) {
    for letter in letters {
        let _ = ops
            .sqs
            .change_message_visibility()
            .queue_url(&letter.queue_url)
            .receipt_handle(&letter.receipt)
            .visibility_timeout(0)
            .send()
            .await;
    }
}

async fn approximate(ops: &Ops, url: &str) -> Result<u64> {
    let answer = ops
        .sqs
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
        .send()
        .await?;
    Ok(answer
        .attributes()
        .map(|a| a.values().filter_map(|v| v.parse::<u64>().ok()).sum())
        .unwrap_or(0))
}

async fn list(ops: &Ops, args: &ReadArgs, code: Option<&str>, class: Option<&str>) -> Result<()> {
    let now = now_ms();
    let mut report = Vec::new();
    for (_, source, url) in queues(ops, args.queue.as_deref())? {
        let letters = read(ops, source, &url, args.limit).await?;
        let mut classes: BTreeMap<String, Vec<&Letter>> = BTreeMap::new();
        let wanted = |letter: &&Letter| {
            code.is_none_or(|c| letter.code.as_deref() == Some(c))
                && class.is_none_or(|c| letter.class == c)
        };
        for letter in letters.iter().filter(wanted) {
            classes
                .entry(letter.class.clone())
                .or_default()
                .push(letter);
        }
        let approximate = approximate(ops, &url).await?;
        for (class, of_class) in &classes {
            let oldest = of_class
                .iter()
                .min_by_key(|l| l.sent_at_ms)
                .map(|l| l.summary(now));
            report.push(json!({
                "queue": source,
                "class": class,
                "moved_by_sqs": class == MOVED_BY_SQS,
                "count": of_class.len(),
                "oldest": oldest,
                "sample": of_class.iter().take(3).map(|l| l.summary(now)).collect::<Vec<_>>(),
            }));
        }
        if letters.is_empty() && approximate > 0 && code.is_none() && class.is_none() {
            report.push(json!({"queue": source, "class": "unread", "count": approximate, "oldest": null, "sample": []}));
        }
        release(ops, &letters).await;
    }
    if ops.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    if report.is_empty() {
        println!("no dead letters");
    }
    for row in &report {
        println!(
            "{:<8} {:<14} {:>5}  oldest {}s ({})",
            row["queue"].as_str().unwrap_or_default(),
            row["class"].as_str().unwrap_or_default(),
            row["count"],
            row["oldest"]["age_seconds"],
            row["oldest"]["id"].as_str().unwrap_or("-"),
        );
        for sample in row["sample"].as_array().cloned().unwrap_or_default() {
            println!(
                "    {}  code {}  {}",
                sample["id"].as_str().unwrap_or_default(),
                sample["code"].as_str().unwrap_or("-"),
                sample["reason"].as_str().unwrap_or("")
            );
        }
    }
    Ok(())
}

async fn show(ops: &Ops, args: &ReadArgs, id: &str) -> Result<()> {
    let now = now_ms();
    for (_, source, url) in queues(ops, args.queue.as_deref())? {
        let letters = read(ops, source, &url, args.limit).await?;
        let found = letters
            .iter()
            .find(|l| l.id == id || l.original_id.as_deref() == Some(id))
            .map(|l| l.full(now));
        release(ops, &letters).await;
        if let Some(found) = found {
            println!("{}", serde_json::to_string_pretty(&found)?);
            return Ok(());
        }
    }
    Err(anyhow!("no dead letter {id}"))
}

enum Work {
    Redrive,
    Close { by: String, note: String },
}

async fn work(ops: &Ops, selection: &Selection, work: Work) -> Result<()> {
    let now = now_ms();
    let mut done = Vec::new();
    for (_, source, url) in queues(ops, selection.read.queue.as_deref())? {
        let letters = read(ops, source, &url, selection.read.limit).await?;
        let (chosen, others): (Vec<Letter>, Vec<Letter>) =
            letters.into_iter().partition(|l| selection.selects(l, now));
        release(ops, &others).await;
        let progress = bar(chosen.len() as u64, ops.json);
        progress.set_message(match work {
            Work::Redrive => format!("redriving {source}"),
            Work::Close { .. } => format!("closing {source}"),
        });
        for letter in &chosen {
            let outcome = match &work {
                Work::Redrive => redrive(ops, letter).await,
                Work::Close { by, note } => close(ops, letter, by, note, now).await,
            };
            match outcome {
                Ok(target) => {
                    ops.sqs
                        .delete_message()
                        .queue_url(&letter.queue_url)
                        .receipt_handle(&letter.receipt)
                        .send()
                        .await?;
                    let mut row = letter.summary(now);
                    row["to"] = json!(target);
                    done.push(row);
                }
                Err(error) => {
                    release(ops, std::slice::from_ref(letter)).await;
                    progress.finish_and_clear();
                    return Err(error.context(format!("dead letter {} (left in place)", letter.id)));
                }
            }
            progress.inc(1);
        }
        progress.finish_and_clear();
    }
    if ops.json {
        println!("{}", serde_json::to_string_pretty(&done)?);
    } else {
        let verb = match work {
            Work::Redrive => "redriven",
            Work::Close { .. } => "closed",
        };
        println!("{} dead letters {verb}", done.len());
        for row in &done {
            println!(
                "  {} {} {} -> {}",
                row["queue"].as_str().unwrap_or_default(),
                row["class"].as_str().unwrap_or_default(),
                row["id"].as_str().unwrap_or_default(),
                row["to"].as_str().unwrap_or_default()
            );
        }
    }
    Ok(())
}

/// The queue a letter came from: the one SQS names (`DeadLetterQueueSourceArn`) when it is
/// one of the stack's, else the queue its dead-letter queue serves.
fn source_url(ops: &Ops, letter: &Letter) -> Result<String> {
    if let Some(arn) = &letter.source_arn {
        let name = arn.rsplit(':').next().unwrap_or_default();
        if let Some((_, url)) = ops
            .queues()
            .into_iter()
            .find(|(_, url)| url.ends_with(&format!("/{name}")))
        {
            return Ok(url);
        }
    }
    Ok(ops.output(&format!("{}QueueUrl", letter.queue))?.to_owned())
}

async fn redrive(ops: &Ops, letter: &Letter) -> Result<String> {
    let target = source_url(ops, letter)?;
    // Its attributes go with it: why it failed stays readable if it fails again.
    let mut send = ops
        .sqs
        .send_message()
        .queue_url(&target)
        .message_body(&letter.body)
        .set_message_attributes((!letter.attributes.is_empty()).then(|| letter.attributes.clone()));
    if target.ends_with(".fifo") {
        // The same message group keeps the code's order; a redrive of the same dead letter
        // within SQS's 5-minute window is dropped as a repeat.
        send = send
            .message_group_id(letter.group.clone().unwrap_or_else(|| "redriven".into()))
            .message_deduplication_id(format!("redrive-{}", letter.id));
    }
    send.send().await?;
    Ok(target.rsplit('/').next().unwrap_or_default().to_owned())
}

async fn close(ops: &Ops, letter: &Letter, by: &str, note: &str, now: u64) -> Result<String> {
    let s = |v: &str| AttributeValue::S(v.to_owned());
    let n = |v: u64| AttributeValue::N(v.to_string());
    let mut item = std::collections::HashMap::from([
        (
            keys::PK.to_owned(),
            s(&keys::closed_dead_letter(&letter.queue)),
        ),
        (keys::SK.to_owned(), s(&format!("{now:013}#{}", letter.id))),
        ("message_id".to_owned(), s(&letter.id)),
        ("class".to_owned(), s(&letter.class)),
        ("closed_by".to_owned(), s(by)),
        ("closed_at_ms".to_owned(), n(now)),
        ("sent_at_ms".to_owned(), n(letter.sent_at_ms)),
        (
            "body_sha256".to_owned(),
            s(&hex::encode(Sha256::digest(letter.body.as_bytes()))),
        ),
        (keys::EXPIRES_AT.to_owned(), n(now / 1000 + CLOSED_TTL_SECS)),
    ]);
    if !note.is_empty() {
        item.insert("note".into(), s(note));
    }
    if let Some(code) = &letter.code {
        item.insert("code".into(), s(code));
    }
    if let Some(reason) = &letter.reason {
        item.insert("reason".into(), s(reason));
    }
    ops.dynamodb
        .put_item()
        .table_name(ops.table()?)
        .set_item(Some(item))
        .send()
        .await?;
    Ok("closed".into())
}

async fn closed(ops: &Ops, queue: Option<&str>) -> Result<()> {
    let mut rows = Vec::new();
    for (_, source, _) in queues(ops, queue)? {
        let mut start = None;
        loop {
            let page = ops
                .dynamodb
                .query()
                .table_name(ops.table()?)
                .key_condition_expression("pk = :pk")
                .expression_attribute_values(
                    ":pk",
                    AttributeValue::S(keys::closed_dead_letter(source)),
                )
                .set_exclusive_start_key(start)
                .send()
                .await?;
            for item in page.items() {
                let text = |name: &str| item.get(name).and_then(|v| v.as_s().ok()).cloned();
                let number = |name: &str| {
                    item.get(name)
                        .and_then(|v| v.as_n().ok())
                        .and_then(|v| v.parse::<u64>().ok())
                };
                rows.push(json!({
                    "queue": source,
                    "id": text("message_id"),
                    "class": text("class"),
                    "code": text("code"),
                    "closed_by": text("closed_by"),
                    "closed_at_ms": number("closed_at_ms"),
                    "note": text("note"),
                }));
            }
            start = page.last_evaluated_key().cloned();
            if start.is_none() {
                break;
            }
        }
    }
    if ops.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    println!("{} closed dead letters", rows.len());
    for row in &rows {
        let at = row["closed_at_ms"]
            .as_u64()
            .and_then(|ms| chrono::DateTime::from_timestamp_millis(ms as i64))
            .map(|t| t.to_rfc3339())
            .unwrap_or_default();
        println!(
            "  {} {} {} closed by {} at {} {}",
            row["queue"].as_str().unwrap_or_default(),
            row["class"].as_str().unwrap_or_default(),
            row["id"].as_str().unwrap_or_default(),
            row["closed_by"].as_str().unwrap_or_default(),
            at,
            row["note"].as_str().unwrap_or_default()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn letter(class: &str, code: Option<&str>, sent_at_ms: u64) -> Letter {
        Letter {
            queue: "Inbox".into(),
            queue_url: "http://q".into(),
            id: "m-1".into(),
            original_id: Some("o-1".into()),
            receipt: "r".into(),
            body: "{}".into(),
            class: class.into(),
            reason: None,
            code: code.map(str::to_owned),
            group: None,
            sent_at_ms,
            receives: 1,
            source_arn: None,
            attributes: std::collections::HashMap::new(),
        }
    }

    #[test]
    fn the_hold_covers_reading_and_handling_the_limit_and_never_passes_sqss_longest() {
        assert_eq!(hold_seconds(10), 61);
        assert_eq!(hold_seconds(1_000), 160);
        assert_eq!(hold_seconds(10_000), 1_060);
        assert_eq!(hold_seconds(u32::MAX), LONGEST_HOLD_SECONDS);
    }

    fn selection() -> Selection {
        Selection {
            read: ReadArgs {
                queue: None,
                limit: 10,
            },
            class: None,
            code: None,
            older_than_minutes: None,
            ids: vec![],
            all: false,
        }
    }

    #[test]
    fn an_envelope_and_secret_looking_fields_are_shown_only_by_size_and_hash() {
        let shown = without_secrets(
            r#"{"tenant":"acme","envelope":"<xml>cipher</xml>","corp_secret":"s3cr3t","event_key":"k"}"#,
        );
        assert_eq!(shown["tenant"], "acme");
        assert_eq!(shown["event_key"], "k");
        assert_eq!(shown["envelope"]["bytes"], 17);
        assert!(!shown.to_string().contains("cipher") && !shown.to_string().contains("s3cr3t"));
    }

    #[test]
    fn a_body_that_is_not_json_is_shown_only_by_size_and_hash() {
        let shown = without_secrets("token=abc");
        assert_eq!(shown["bytes"], 9);
        assert!(!shown.to_string().contains("abc"));
    }

    #[test]
    fn a_redrive_or_close_needs_a_selection_or_all() {
        assert!(selection().check().is_err());
        let everything = Selection {
            all: true,
            ..selection()
        };
        assert!(everything.check().is_ok());
    }

    #[test]
    fn a_selection_by_class_code_age_and_id_picks_only_matching_letters() {
        let now = 10 * 60_000;
        let old_poison = letter("poison", Some("c1"), 0);
        let new_moved = letter(MOVED_BY_SQS, Some("c2"), now);
        let by_class = Selection {
            class: Some("poison".into()),
            ..selection()
        };
        assert!(by_class.selects(&old_poison, now) && !by_class.selects(&new_moved, now));
        let by_code = Selection {
            code: Some("c2".into()),
            ..selection()
        };
        assert!(!by_code.selects(&old_poison, now) && by_code.selects(&new_moved, now));
        let by_age = Selection {
            older_than_minutes: Some(5),
            ..selection()
        };
        assert!(by_age.selects(&old_poison, now) && !by_age.selects(&new_moved, now));
        let by_original_id = Selection {
            ids: vec!["o-1".into()],
            ..selection()
        };
        assert!(by_original_id.selects(&old_poison, now));
    }
}
