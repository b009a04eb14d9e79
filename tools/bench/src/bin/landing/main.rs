//! `make bench-landing`: the landing page of a sequenced code under a steady rate of visits.
//!
//! Against the deployed stack and the WeCom sandbox it seeds one fresh tenant (its corp in the
//! sandbox, its profile, staff and one sequenced code through the admin API), waits until the
//! single writer has recorded the code's rotation with every member's acquisition link, then
//! sends visits to `GET /l/{tenant}/{code}` at a fixed rate (300 a second by default, open
//! loop: a slow answer does not slow the next visit), and prints the answer time p50 / p99,
//! the answers by status, the distribution over the members against the rotation's, and the
//! DynamoDB requests per visit from the landing function's own log lines (`store_requests`).
//! Exits non-zero if a must-be line fails.
//!
//! With `--runtime-pool <bootstrap>` the visits skip the local world's emulated API Gateway
//! and Lambda, which queue invocations above about 100 a second here, and go to a pool of the
//! function's own `bootstrap`s fed through a Lambda Runtime API the bench serves
//! (`runtime_api`); the function still makes its one request to the local world's DynamoDB.

mod runtime_api;

use adapters::dynamodb::{DynamoStore, PageTables};
use anyhow::{ensure, Context, Result};
use aws_sdk_dynamodb::types::AttributeValue;
use clap::Parser;
use domain::ids::{CodeId, TenantId};
use rand::distributions::{Alphanumeric, DistString};
use rand::rngs::StdRng;
use rand::SeedableRng;
use serde_json::{json, Value};
use stack_client::report::{percentile, Lines};
use stack_client::{AdminApi, Stack};
use std::collections::{BTreeMap, HashMap};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

#[derive(Debug, Parser)]
#[command(
    name = "landing",
    about = "Visits a sequenced code's landing page at a steady rate and prints answer times and DynamoDB requests per visit"
)]
struct Args {
    #[command(flatten)]
    target: stack_client::Target,
    /// Seed of the tenant's ids and secrets.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Visits per second (open loop).
    #[arg(long, default_value_t = 300)]
    rate: u64,
    /// How long to visit, in seconds.
    #[arg(long, default_value_t = 20)]
    seconds: u64,
    /// Members of the code, each taking `round_limit` visitors per round.
    #[arg(long, default_value_t = 4)]
    members: usize,
    #[arg(long, default_value_t = 2)]
    round_limit: u64,
    /// Visit through a pool of this `bootstrap` (the deployed landing function's, e.g.
    /// `.aws-sam/build/LandingPageFunction/bootstrap`) fed by the bench's own Lambda Runtime
    /// API, instead of through the emulated API Gateway.
    #[arg(long)]
    runtime_pool: Option<std::path::PathBuf>,
    /// Warm execution environments in that pool (Lambda's concurrency).
    #[arg(long, default_value_t = 8)]
    environments: usize,
}

/// Where the visits go.
enum Route {
    Gateway { http: reqwest::Client, url: String },
    Pool(runtime_api::RuntimePool),
}

impl Route {
    async fn visit(&self) -> (u16, Option<String>) {
        match self {
            Self::Gateway { http, url } => match http.get(url).send().await {
                Ok(answer) => (
                    answer.status().as_u16(),
                    answer
                        .headers()
                        .get("location")
                        .and_then(|l| l.to_str().ok())
                        .map(str::to_owned),
                ),
                Err(_) => (0, None),
            },
            Self::Pool(pool) => pool.visit().await.unwrap_or((0, None)),
        }
    }
}

/// The `store_requests` field of one of the landing function's log lines.
fn store_requests_of(line: &str) -> Option<u64> {
    let message = without_ansi(line);
    let rest = message.split("store_requests").nth(1)?;
    let digits: String = rest
        .chars()
        .skip_while(|c| !c.is_ascii_digit())
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// One visit: how long the answer took, its status and where it pointed.
struct Visit {
    took_us: u64,
    status: u16,
    location: Option<String>,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

struct Seeded {
    tenant: String,
    code: String,
    members: Vec<String>,
}

async fn seed(
    args: &Args,
    api_url: &str,
    admin: &AdminApi,
    http: &reqwest::Client,
) -> Result<Seeded> {
    let mut rng = StdRng::seed_from_u64(args.seed ^ now_ms());
    let mut word = |n: usize| Alphanumeric.sample_string(&mut rng, n);
    let tenant = format!("lp-{}", word(10).to_lowercase());
    let corp_id = format!("ww{}", word(16).to_lowercase());
    let (secret, token, aes_key) = (word(32), word(16), word(43));
    let members: Vec<String> = (0..args.members).map(|i| format!("m{i}")).collect();
    let corp = json!({
        "corp_secret": secret,
        "users": members,
        "callback": {"url": format!("{api_url}/wecom/{tenant}/callback"), "token": token, "encoding_aes_key": aes_key},
    });
    let answer = http
        .put(format!(
            "{}/_sandbox/corps/{corp_id}",
            args.target.sandbox_url
        ))
        .json(&corp)
        .send()
        .await?;
    ensure!(answer.status().is_success(), "the sandbox refused the corp");
    admin
        .put(
            &format!("/tenants/{tenant}"),
            &json!({"corp_id": corp_id, "corp_secret": secret, "callback_token": token, "encoding_aes_key": aes_key}),
        )
        .await?
        .expect("tenant", &[200, 201])?;
    for member in &members {
        admin
            .put(
                &format!("/tenants/{tenant}/staff/{member}"),
                &json!({"online": true}),
            )
            .await?
            .expect("staff", &[200, 201])?;
    }
    let code = "bench-seq".to_owned();
    admin
        .put(
            &format!("/tenants/{tenant}/codes/{code}"),
            &json!({"family": "sequenced", "members": members, "switches": {"offline_check": true, "round_limit": args.round_limit}}),
        )
        .await?
        .expect("code", &[200, 201])?;
    Ok(Seeded {
        tenant,
        code,
        members,
    })
}

/// The code's rotation (staff, takes, link) and the visits counted on its page's round, once
/// every slot has a link.
async fn rotation(
    dynamodb: &aws_sdk_dynamodb::Client,
    table: &str,
    store: &DynamoStore,
    seeded: &Seeded,
) -> Result<Option<(Vec<(String, u64, String)>, u64)>> {
    let key = HashMap::from([
        (
            "pk".to_owned(),
            AttributeValue::S(format!("TENANT#{}#CODE#{}", seeded.tenant, seeded.code)),
        ),
        (
            "sk".to_owned(),
            AttributeValue::S(format!("PUSHED#{}", seeded.code)),
        ),
    ]);
    let item = dynamodb
        .get_item()
        .table_name(table)
        .set_key(Some(key))
        .consistent_read(true)
        .send()
        .await?
        .item;
    let Some(item) = item else { return Ok(None) };
    let slots: Vec<Value> = match item.get("rotation").and_then(|v| v.as_s().ok()) {
        Some(raw) => serde_json::from_str(raw)?,
        None => return Ok(None),
    };
    let visits = store
        .page_seen(
            &TenantId::parse(&seeded.tenant)?,
            &CodeId::parse(&seeded.code)?,
        )
        .await?
        .map_or(0, |page| page.visits);
    let linked: Option<Vec<(String, u64, String)>> = slots
        .iter()
        .map(|slot| {
            Some((
                slot["staff"].as_str()?.to_owned(),
                slot["takes"].as_u64()?,
                slot["link"].as_str()?.to_owned(),
            ))
        })
        .collect();
    Ok(linked
        .filter(|l| l.len() == seeded.members.len())
        .map(|l| (l, visits)))
}

/// `text` without its terminal colour codes (`ESC [ ... m`), as the text log format writes them.
fn without_ansi(text: &str) -> String {
    let mut plain = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            chars.by_ref().find(|c| *c == 'm');
        } else {
            plain.push(c);
        }
    }
    plain
}

/// `store_requests` of every landing-page log line since `since_ms`.
async fn store_requests(
    logs: &aws_sdk_cloudwatchlogs::Client,
    group: &str,
    since_ms: u64,
) -> Result<Vec<u64>> {
    let mut found = Vec::new();
    let mut next: Option<String> = None;
    loop {
        let page = logs
            .filter_log_events()
            .log_group_name(group)
            .start_time(since_ms as i64)
            .set_next_token(next.clone())
            .send()
            .await?;
        found.extend(
            page.events()
                .iter()
                .filter_map(|event| store_requests_of(event.message().unwrap_or_default())),
        );
        next = page.next_token().map(str::to_owned);
        if next.is_none() || page.events().is_empty() {
            return Ok(found);
        }
    }
}

async fn run(args: Args) -> Result<bool> {
    let aws = adapters::aws::load_config().await;
    let stack = Stack::discover(&aws, &args.target.stack, args.target.api_url.as_deref()).await?;
    let admin = AdminApi::new(&stack.api_url, &aws)?;
    let table = stack.output("TableName")?.to_owned();
    let function = stack.output("LandingPageFunctionName")?.to_owned();
    let dynamodb = aws_sdk_dynamodb::Client::new(&aws);
    let store = DynamoStore::new(dynamodb.clone(), table.clone()).with_pages(PageTables {
        rotations: stack.output("RotationTableName")?.to_owned(),
        visits: stack.output("VisitTableName")?.to_owned(),
    });
    let logs = aws_sdk_cloudwatchlogs::Client::new(&aws);
    let log_group = stack_client::log_group(&aws, &function).await?;
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(10))
        .pool_max_idle_per_host(512)
        .build()?;
    let seeded = seed(&args, &stack.api_url, &admin, &http).await?;
    let deadline = Instant::now() + Duration::from_secs(120);
    let (slots, _) = loop {
        if let Some(found) = rotation(&dynamodb, &table, &store, &seeded).await? {
            break found;
        }
        ensure!(
            Instant::now() < deadline,
            "the code's rotation was not recorded with links within 120 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let by_link: HashMap<String, String> = slots
        .iter()
        .map(|(staff, _, link)| (link.clone(), staff.clone()))
        .collect();
    let route = match &args.runtime_pool {
        Some(bootstrap) => {
            let deployed = runtime_api::Deployed::read(&aws, &function, bootstrap.clone()).await?;
            Route::Pool(
                runtime_api::RuntimePool::start(
                    &deployed,
                    args.environments,
                    &seeded.tenant,
                    &seeded.code,
                )
                .await?,
            )
        }
        None => {
            let url = format!("{}/l/{}/{}", stack.api_url, seeded.tenant, seeded.code);
            // Warm the function once so the figures are of the steady state, not a cold start.
            http.get(&url).send().await?;
            Route::Gateway {
                http: http.clone(),
                url,
            }
        }
    };
    let route = Arc::new(route);
    let (_, counted_before) = rotation(&dynamodb, &table, &store, &seeded)
        .await?
        .context("rotation")?;
    let since_ms = now_ms();
    let total = args.rate * args.seconds;
    let visits: Arc<Mutex<Vec<Visit>>> = Arc::default();
    let mut ticks = tokio::time::interval(Duration::from_micros(1_000_000 / args.rate.max(1)));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let mut sent = Vec::with_capacity(total as usize);
    let started = Instant::now();
    for _ in 0..total {
        ticks.tick().await;
        let (route, visits) = (route.clone(), visits.clone());
        sent.push(tokio::spawn(async move {
            let at = Instant::now();
            let (status, location) = route.visit().await;
            let took_us = at.elapsed().as_micros() as u64;
            visits.lock().expect("not poisoned").push(Visit {
                took_us,
                status,
                location,
            });
        }));
    }
    let sending = started.elapsed();
    for visit in sent {
        visit.await?;
    }
    let visits = std::mem::take(&mut *visits.lock().expect("not poisoned"));
    let (_, counted_after) = rotation(&dynamodb, &table, &store, &seeded)
        .await?
        .context("rotation")?;
    // The landing function's log lines reach the log store shortly after it answers.
    let wanted = visits.len();
    let log_deadline = Instant::now() + Duration::from_secs(60);
    let requests = loop {
        let found = match route.as_ref() {
            Route::Pool(pool) => pool.store_requests(),
            Route::Gateway { .. } => store_requests(&logs, &log_group, since_ms).await?,
        };
        if found.len() >= wanted || Instant::now() > log_deadline {
            break found;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };

    let mut times: Vec<u64> = visits.iter().map(|v| v.took_us).collect();
    times.sort_unstable();
    let mut statuses: BTreeMap<u16, u64> = BTreeMap::new();
    let mut per_member: BTreeMap<String, u64> = BTreeMap::new();
    for visit in &visits {
        *statuses.entry(visit.status).or_default() += 1;
        if let Some((link, _)) = visit
            .location
            .as_deref()
            .and_then(|l| l.split_once("?customer_channel="))
        {
            *per_member
                .entry(
                    by_link
                        .get(link)
                        .cloned()
                        .unwrap_or_else(|| link.to_owned()),
                )
                .or_default() += 1;
        }
    }
    let redirected = statuses.get(&302).copied().unwrap_or(0);
    let round: u64 = slots.iter().map(|s| s.1).sum();
    // Visits counted since the warm-up: the counter's numbers `counted_before + 1 ..=
    // counted_after`, each a position of the round; expected shares follow from them.
    let mut expected: BTreeMap<String, u64> = BTreeMap::new();
    for number in counted_before + 1..=counted_after {
        let mut position = (number - 1) % round;
        for (staff, takes, _) in &slots {
            if position < *takes {
                *expected.entry(staff.clone()).or_default() += 1;
                break;
            }
            position -= takes;
        }
    }
    let per_visit = if requests.is_empty() {
        f64::NAN
    } else {
        requests.iter().sum::<u64>() as f64 / requests.len() as f64
    };
    let ms = |us: u64| format!("{:.1} ms", us as f64 / 1000.0);
    let mut out = Lines::new(44, 24);
    out.head(&format!(
        "Landing page: {total} visits at {}/s to a sequenced code of {} members (round_limit {}), {}",
        args.rate,
        args.members,
        args.round_limit,
        match &args.runtime_pool {
            Some(_) => format!(
                "through {} warm environments of the function's bootstrap (no API Gateway hop)",
                args.environments
            ),
            None => "through the emulated API Gateway".to_owned(),
        }
    ));
    out.line(
        "sent in",
        format!(
            "{:.1} s ({:.0} visits/s)",
            sending.as_secs_f64(),
            total as f64 / sending.as_secs_f64()
        ),
    );
    out.line(
        "answer time p50 / p99 / max",
        format!(
            "{} / {} / {}",
            ms(percentile(&times, 50.0)),
            ms(percentile(&times, 99.0)),
            ms(times.last().copied().unwrap_or(0))
        ),
    );
    out.line("answers by status", format!("{statuses:?}"));
    out.line("visits per member", format!("{per_member:?}"));
    out.must(
        "every visit redirected",
        format!("{redirected} of {total}"),
        redirected == total,
    );
    out.must(
        "visits counted = visits sent",
        counted_after - counted_before,
        counted_after - counted_before == total,
    );
    out.must(
        "distribution = the rotation's",
        format!("{}", per_member == expected),
        per_member == expected,
    );
    out.must(
        "DynamoDB requests per visit",
        format!("{per_visit:.3} ({} log lines)", requests.len()),
        requests.len() == wanted && requests.iter().all(|n| *n == 1),
    );
    print!("{}", out.text);
    Ok(out.passed())
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    match run(args).await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(error) => {
            eprintln!("landing bench failed: {error:#}");
            ExitCode::FAILURE
        }
    }
}
