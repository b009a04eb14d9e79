//! `--drift-codes N`: the backstop measured. After seeding, N contact ways of the tenant are
//! changed behind qrsync's back (through the sandbox's control API, as an operator in WeCom's
//! console would); the bench then watches the sandbox until every one routes to its code's
//! list again, and sums what the sweep's runs reported over that time (their "sweep ran" log
//! lines): contact ways read back, differences found, repairs started, DynamoDB requests.

use crate::{now_ms, say};
use anyhow::{bail, Context, Result};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use stack_client::sandbox::SandboxControl;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// What the drift phase measured.
#[derive(Debug, Clone, Default)]
pub struct Drift {
    pub codes: usize,
    pub drifted: usize,
    /// Milliseconds from the change behind qrsync's back to the list seen repaired, per code
    /// (the bench looks every 2 s).
    pub repair_ms: Vec<u64>,
    /// The sweep runs that ended within the phase, and the sums of their reports.
    pub runs: u64,
    pub read_back: u64,
    pub differing: u64,
    pub repairs_started: u64,
    pub dynamodb_requests: u64,
}

/// A count in one "sweep ran" log line, as text (`read_back: 3`, `dynamodb_requests=12`) or
/// as JSON (`"dynamodb_requests":12`).
fn field(line: &str, name: &str) -> Option<u64> {
    let plain = without_colours(line);
    [
        format!("{name}: "),
        format!("{name}="),
        format!("\"{name}\":"),
    ]
    .iter()
    .find_map(|marker| plain.split(marker.as_str()).nth(1))
    .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
    .and_then(|n| n.parse().ok())
}

/// `line` without the terminal colour codes a text log puts around field names (MiniStack
/// keeps a function's output as it was written).
fn without_colours(line: &str) -> String {
    let mut plain = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // An escape sequence runs to its final letter (`\x1b[3m`).
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            plain.push(c);
        }
    }
    plain
}

pub async fn run(
    sandbox: &SandboxControl,
    logs: &aws_sdk_cloudwatchlogs::Client,
    sweep_log_group: &str,
    corp_id: &str,
    drifted: usize,
    rng: &mut StdRng,
    timeout: Duration,
) -> Result<Drift> {
    let ways = sandbox.contact_ways(corp_id).await?;
    let mut picked: Vec<_> = ways.iter().filter(|w| w.user.len() > 1).collect();
    picked.shuffle(rng);
    picked.truncate(drifted);
    let expected: BTreeMap<String, BTreeSet<String>> = picked
        .iter()
        .map(|w| (w.config_id.clone(), w.user.iter().cloned().collect()))
        .collect();
    let started_ms = now_ms();
    let started = Instant::now();
    for way in &picked {
        let path = format!("/_sandbox/contact-ways/{}", way.config_id);
        let _: serde_json::Value = sandbox
            .call(
                reqwest::Method::PUT,
                &path,
                Some(serde_json::json!({ "user": [way.user[0]] })),
            )
            .await?;
    }
    say(format!(
        "drift: {} of {} contact ways changed behind qrsync's back; waiting for the sweep",
        picked.len(),
        ways.len()
    ));
    let mut repaired: BTreeMap<String, u64> = BTreeMap::new();
    while repaired.len() < expected.len() {
        if started.elapsed() > timeout {
            bail!(
                "drift: {} of {} lists not repaired within {} s",
                expected.len() - repaired.len(),
                expected.len(),
                timeout.as_secs()
            );
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
        for way in sandbox.contact_ways(corp_id).await? {
            let Some(wanted) = expected.get(&way.config_id) else {
                continue;
            };
            let now: BTreeSet<String> = way.user.iter().cloned().collect();
            if &now == wanted && !repaired.contains_key(&way.config_id) {
                let ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
                repaired.insert(way.config_id.clone(), ms);
            }
        }
    }
    let ended_ms = now_ms();
    let mut drift = Drift {
        codes: ways.len(),
        drifted: expected.len(),
        repair_ms: repaired.into_values().collect(),
        ..Drift::default()
    };
    let group = sweep_log_group;
    let mut next = None;
    loop {
        let page = logs
            .filter_log_events()
            .log_group_name(group)
            .start_time(i64::try_from(started_ms)?)
            .end_time(i64::try_from(ended_ms)?)
            .set_next_token(next)
            .send()
            .await
            .context("reading the sweep's logs")?;
        for line in page.events().iter().filter_map(|e| e.message()) {
            if !line.contains("sweep ran") {
                continue;
            }
            drift.runs += 1;
            drift.read_back += field(line, "read_back").unwrap_or(0);
            drift.differing += field(line, "differing").unwrap_or(0);
            drift.repairs_started += field(line, "repairs_started").unwrap_or(0);
            drift.dynamodb_requests += field(line, "dynamodb_requests").unwrap_or(0);
        }
        next = page.next_token().map(str::to_owned);
        if next.is_none() {
            return Ok(drift);
        }
    }
}

/// The phase's lines in the bench's report.
pub fn print(drift: &Drift) {
    let per_read = |n: u64| {
        if drift.read_back == 0 {
            "-".to_owned()
        } else {
            format!("{:.1}", n as f64 / drift.read_back as f64)
        }
    };
    println!("\nDrift read-back (the sweep, rule 11)");
    println!(
        "  contact ways changed behind qrsync's back   {} of {}",
        drift.drifted, drift.codes
    );
    println!(
        "  repaired (seen on WeCom)                    {} of {}",
        drift.repair_ms.len(),
        drift.drifted
    );
    println!(
        "  time from the change to the repair          {} (p50 / p95 / max)",
        stack_client::report::quantiles(drift.repair_ms.clone(), |ms| format!(
            "{:.0} s",
            ms as f64 / 1000.0
        ))
    );
    println!(
        "  sweep runs meanwhile                        {}",
        drift.runs
    );
    println!(
        "  contact ways read back (get_contact_way)    {}",
        drift.read_back
    );
    println!(
        "  differences found / repairs started         {} / {}",
        drift.differing, drift.repairs_started
    );
    println!(
        "  DynamoDB requests of those runs             {} ({} per contact way read)",
        drift.dynamodb_requests,
        per_read(drift.dynamodb_requests)
    );
}

#[cfg(test)]
mod tests {
    use super::field;

    #[test]
    fn a_count_is_read_from_a_text_or_a_json_log_line() {
        let text =
            "sweep ran report=SweepReport { read_back: 13, differing: 4 } dynamodb_requests=120";
        assert_eq!(field(text, "read_back"), Some(13));
        assert_eq!(field(text, "differing"), Some(4));
        assert_eq!(field(text, "dynamodb_requests"), Some(120));
        let json = r#"{"fields":{"message":"sweep ran","dynamodb_requests":7}}"#;
        assert_eq!(field(json, "dynamodb_requests"), Some(7));
        assert_eq!(field(text, "repairs_started"), None);
        let coloured = "sweep ran \u{1b}[3mdynamodb_requests\u{1b}[0m\u{1b}[2m=\u{1b}[0m6195";
        assert_eq!(field(coloured, "dynamodb_requests"), Some(6195));
    }
}
