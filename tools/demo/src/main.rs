//! `make demo`: qrsync running locally through a small campaign, with a report that proves it.
//!
//! Against the stack deployed to MiniStack (found through its CloudFormation outputs) and the
//! WeCom sandbox, it seeds a fresh tenant through the admin API (staff, native codes with the
//! offline check, daily limits and fallbacks), drives a campaign of scans through the sandbox
//! (10% of callbacks delivered twice concurrently), takes staff offline part-way through,
//! waits until the queues are drained, and prints what happened, measured from the outside.
//! It exits non-zero if a must-be line fails.
//!
//! Settings: `QRSYNC_STACK`, `QRSYNC_SANDBOX_URL`, optionally `QRSYNC_API_URL`, and the
//! standard AWS ones (`AWS_ENDPOINT_URL`, credentials, `AWS_REGION`).

mod plan;
mod report;
mod sandbox;
mod world;

use anyhow::{bail, Context, Result};
use clap::Parser;
use futures::{StreamExt, TryStreamExt};
use plan::{Plan, Settings};
use rand::distributions::{Alphanumeric, DistString};
use report::{Claim, Drain, FinalCode, Flip, Inputs, Push, RefreshStats};
use sandbox::{Callback, Sandbox};
use serde_json::{json, Value};
use shared::membership::{CodeId, Membership};
use shared::refresh::CodeFacts;
use shared::tenants::TenantId;
use stack_client::AdminApi;
use std::collections::{BTreeMap, HashMap};
use std::process::ExitCode;
use std::time::{Duration, Instant};
use world::World;

#[derive(Debug, Parser)]
#[command(
    name = "qrsync-demo",
    about = "Runs a campaign against the local stack and prints what happened"
)]
struct Args {
    /// CloudFormation stack to find everything in.
    #[arg(long, env = "QRSYNC_STACK", default_value = "qrsync-local")]
    stack: String,
    /// The WeCom sandbox's base URL.
    #[arg(
        long,
        env = "QRSYNC_SANDBOX_URL",
        default_value = "http://127.0.0.1:4580"
    )]
    sandbox_url: String,
    /// API base URL; derived from the stack's outputs and AWS_ENDPOINT_URL when absent.
    #[arg(long, env = "QRSYNC_API_URL")]
    api_url: Option<String>,
    /// Seed of every choice the demo makes (members, limits, who goes offline) and of the
    /// sandbox's random streams (which code each scan hits, which member it reaches).
    #[arg(long, default_value_t = 42)]
    seed: u64,
    #[arg(long, default_value_t = 24)]
    staff: usize,
    #[arg(long, default_value_t = 50)]
    codes: usize,
    #[arg(long, default_value_t = 2000)]
    scans: u64,
    /// Scans per second the sandbox's campaign driver starts.
    #[arg(long, default_value_t = 16.0)]
    per_second: f64,
    #[arg(long, default_value_t = 0.1)]
    duplicate_fraction: f64,
    /// Codes with a daily limit.
    #[arg(long, default_value_t = 10)]
    limited_codes: usize,
    #[arg(long, default_value_t = 15)]
    daily_limit: u32,
    /// How many times more often a limited code is scanned than the others.
    #[arg(long, default_value_t = 2)]
    limited_weight: usize,
    /// Codes with a fallback besides the limited ones (which all have one).
    #[arg(long, default_value_t = 5)]
    fallback_codes: usize,
    /// Staff taken offline during the campaign.
    #[arg(long, default_value_t = 3)]
    offline: usize,
    /// The sandbox's pause between callback delivery attempts.
    #[arg(long, default_value_t = 200)]
    retry_pause_ms: u64,
    /// How long to wait for the queues to drain after the campaign.
    #[arg(long, default_value_t = 180)]
    drain_timeout_secs: u64,
    /// Admin API requests in flight at once while seeding.
    #[arg(long, default_value_t = 4)]
    concurrency: usize,
}

fn now_ms() -> u64 {
    shared::system_clock()
}

fn say(message: impl AsRef<str>) {
    println!("[demo] {}", message.as_ref());
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    match run(args).await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(error) => {
            eprintln!("[demo] failed: {error:#}");
            ExitCode::from(2)
        }
    }
}

/// A fresh tenant and its WeCom corp. Random per run (a rerun with the same seed must not
/// find the previous run's counters); everything else comes from the seed.
struct Identity {
    tenant: String,
    corp_id: String,
    corp_secret: String,
    token: String,
    aes_key: String,
}

impl Identity {
    fn fresh() -> Self {
        let mut rng = rand::thread_rng();
        Self {
            tenant: format!(
                "demo-{}",
                Alphanumeric.sample_string(&mut rng, 10).to_lowercase()
            ),
            corp_id: format!(
                "ww{}",
                Alphanumeric.sample_string(&mut rng, 16).to_lowercase()
            ),
            corp_secret: Alphanumeric.sample_string(&mut rng, 32),
            token: Alphanumeric.sample_string(&mut rng, 24),
            aes_key: Alphanumeric.sample_string(&mut rng, 43),
        }
    }
}

async fn run(args: Args) -> Result<bool> {
    let started = Instant::now();
    let world = World::connect(&args.stack, args.api_url.as_deref()).await?;
    let sandbox = Sandbox::new(&args.sandbox_url)?;
    sandbox.health().await?;
    let admin = AdminApi::new(&world.api_url, &world.aws)?;
    let plan = Plan::draw(&Settings {
        seed: args.seed,
        staff: args.staff,
        codes: args.codes,
        limited_codes: args.limited_codes.min(args.codes),
        daily_limit: args.daily_limit,
        limited_weight: args.limited_weight,
        fallback_codes: args.fallback_codes,
        offline: args.offline,
    });
    let id = Identity::fresh();
    let tenant = TenantId::parse(&id.tenant)?;
    say(format!(
        "stack {} (table {}), API {}, sandbox {}",
        world.stack, world.table, world.api_url, args.sandbox_url
    ));
    say(format!(
        "tenant {} (corp {}), seed {}: {} staff, {} codes, {} scans at {}/s",
        id.tenant,
        id.corp_id,
        args.seed,
        plan.staff.len(),
        plan.codes.len(),
        args.scans,
        args.per_second
    ));

    // ---------------------------------------------------------------- seed
    sandbox.configure(args.retry_pause_ms, args.seed).await?;
    let callback_url = format!("{}/wecom/{}/callback", world.api_url, id.tenant);
    sandbox
        .put_corp(
            &id.corp_id,
            &id.corp_secret,
            &plan.staff,
            &Callback {
                url: &callback_url,
                token: &id.token,
                encoding_aes_key: &id.aes_key,
            },
        )
        .await?;
    admin
        .put(
            &format!("/tenants/{}", id.tenant),
            &json!({
                "corp_id": id.corp_id,
                "corp_secret": id.corp_secret,
                "callback_token": id.token,
                "encoding_aes_key": id.aes_key,
                "timezone": "Asia/Shanghai",
                "company_daily_cap": null,
            }),
        )
        .await?
        .expect("PUT tenant", &[200, 201])?;
    futures::stream::iter(plan.staff.iter())
        .map(|staff| {
            let admin = &admin;
            let path = format!("/tenants/{}/staff/{staff}", id.tenant);
            async move {
                admin
                    .put(&path, &json!({ "online": true }))
                    .await?
                    .expect(&format!("PUT staff {staff}"), &[200, 201])
            }
        })
        .buffer_unordered(args.concurrency.max(1))
        .try_collect::<Vec<_>>()
        .await?;
    let config_ids: BTreeMap<String, String> = futures::stream::iter(plan.codes.iter())
        .map(|code| {
            let admin = &admin;
            let path = format!("/tenants/{}/codes/{}", id.tenant, code.id);
            let body = json!({
                "family": "native",
                "members": code.members,
                "fallback": code.fallback,
                "switches": { "offline_check": true, "daily_limit": code.daily_limit },
            });
            async move {
                let answer = admin
                    .put(&path, &body)
                    .await?
                    .expect(&format!("PUT code {}", code.id), &[201])?;
                let config_id = answer
                    .get("config_id")
                    .and_then(Value::as_str)
                    .with_context(|| format!("PUT code {}: no config_id in {answer}", code.id))?;
                Ok::<_, anyhow::Error>((code.id.clone(), config_id.to_owned()))
            }
        })
        .buffer_unordered(args.concurrency.max(1))
        .try_collect()
        .await?;
    say(format!(
        "seeded through the admin API in {:.1} s: tenant, {} staff online, {} codes with their contact ways",
        started.elapsed().as_secs_f64(),
        plan.staff.len(),
        config_ids.len()
    ));
    let settled = wait_drained(&world, Duration::from_secs(120), 3).await?;
    let statuses: Vec<Value> = futures::stream::iter(plan.codes.iter())
        .map(|code| {
            let admin = &admin;
            let path = format!("/tenants/{}/codes/{}", id.tenant, code.id);
            async move {
                admin
                    .get(&path)
                    .await?
                    .expect(&format!("GET code {}", code.id), &[200])
            }
        })
        .buffer_unordered(args.concurrency.max(1))
        .try_collect()
        .await?;
    let in_sync = statuses
        .iter()
        .filter(|s| s.get("in_sync").and_then(Value::as_bool) == Some(true))
        .count();
    say(format!(
        "initial refreshes drained in {:.1} s; codes in sync by the admin API's status: {in_sync}/{}",
        settled.secs,
        statuses.len()
    ));

    // ---------------------------------------------------------------- campaign
    let before = sandbox.stats().await?;
    let weighted: Vec<String> = plan
        .codes
        .iter()
        .flat_map(|code| std::iter::repeat_n(config_ids[&code.id].clone(), code.weight))
        .collect();
    let campaign_id = sandbox
        .start_campaign(
            &id.corp_id,
            &weighted,
            args.scans,
            args.per_second,
            args.duplicate_fraction,
        )
        .await?;
    say(format!("campaign {campaign_id} started"));
    let outcome = drive(
        &world,
        &sandbox,
        &admin,
        &plan,
        &id.tenant,
        campaign_id,
        args.scans,
    )
    .await;
    let (flips, campaign) = match outcome {
        Ok(done) => done,
        Err(error) => {
            let _ = sandbox.stop_campaign(campaign_id).await;
            return Err(error);
        }
    };
    say(format!(
        "campaign finished: {} scans done, {} failures; waiting for the queues to drain",
        campaign.done, campaign.failures
    ));
    let drained = wait_drained(&world, Duration::from_secs(args.drain_timeout_secs), 5).await?;

    // ---------------------------------------------------------------- measure
    let stats = sandbox.stats().await?.since(&before);
    let scans = sandbox.scans(&id.corp_id).await?;
    let update_calls = sandbox.calls(&id.corp_id, "update_contact_way").await?;
    let created_lists = created_lists(&sandbox.calls(&id.corp_id, "add_contact_way").await?);
    let contact_ways = sandbox.contact_ways(&id.corp_id).await?;
    let store = &world.store;
    let adds_counted = store
        .query_prefix(&tenant, "ADDS#TOTAL#")
        .await?
        .iter()
        .filter_map(|item| report::n(item, "adds"))
        .sum();
    let claims: Vec<Claim> = store
        .query_prefix(&tenant, "CLAIM#add:")
        .await?
        .iter()
        .filter_map(Claim::from_item)
        .collect();
    let refresh_items = store.query_prefix(&tenant, "STATS#REFRESH#").await?;
    let refresh = (!refresh_items.is_empty()).then(|| RefreshStats::from_items(&refresh_items));
    let pushes: Vec<(String, Push)> = store
        .query_prefix(&tenant, "PUSHLOG#")
        .await?
        .iter()
        .filter_map(Push::from_item)
        .collect();
    let sandbox_lists: HashMap<&str, &Vec<String>> = contact_ways
        .iter()
        .map(|w| (w.config_id.as_str(), &w.user))
        .collect();
    let mut final_codes = Vec::new();
    for code in &plan.codes {
        let snapshot = store
            .snapshot(&tenant, &CodeId::parse(&code.id)?, now_ms())
            .await?
            .with_context(|| format!("code {} is not in the table", code.id))?;
        let membership = snapshot.recompute();
        let names = |users: &[shared::membership::StaffId]| {
            users
                .iter()
                .map(|u| u.as_str().to_owned())
                .collect::<Vec<_>>()
        };
        let expected = match membership.users() {
            Some(users) => Some(names(users)),
            None => snapshot.last_pushed.as_ref().map(|p| names(&p.users)),
        };
        final_codes.push(FinalCode {
            code: code.id.clone(),
            expected,
            starved: membership.users().is_none(),
            fallback: matches!(membership, Membership::Fallback(_)),
            sandbox: sandbox_lists
                .get(config_ids[&code.id].as_str())
                .map(|u| (*u).clone()),
        });
    }
    let mut dead_letters = Vec::new();
    for (name, url) in &world.dead_letters {
        dead_letters.push((name.clone(), world.queue_depth(url).await?));
    }
    let scans_planned = args.scans;
    let passed = report::print(&Inputs {
        plan: &plan,
        tenant: &id.tenant,
        seed: args.seed,
        scans_planned,
        per_second: args.per_second,
        config_ids: &config_ids,
        flips: &flips,
        stats,
        campaign,
        scans,
        update_calls,
        created_lists,
        adds_counted,
        claims,
        refresh,
        pushes,
        final_codes,
        dead_letters,
        drained,
        run_secs: started.elapsed().as_secs_f64(),
    });
    Ok(passed)
}

/// Follows the campaign to its end, taking staff offline at their planned points.
async fn drive(
    world: &World,
    sandbox: &Sandbox,
    admin: &AdminApi,
    plan: &Plan,
    tenant: &str,
    campaign_id: u64,
    total: u64,
) -> Result<(Vec<Flip>, sandbox::Campaign)> {
    let mut flips = Vec::new();
    let mut pending = plan.offline.iter().peekable();
    let started = Instant::now();
    let mut last_progress = Instant::now();
    loop {
        let campaign = sandbox.campaign(campaign_id).await?;
        while let Some(flip) =
            pending.next_if(|f| campaign.started as f64 >= f.at_fraction * total as f64)
        {
            let sent_ms = now_ms();
            let answer = admin
                .put(
                    &format!("/tenants/{tenant}/staff/{}", flip.staff),
                    &json!({ "online": false }),
                )
                .await?
                .expect(&format!("PUT staff {} offline", flip.staff), &[200, 201])?;
            let acked_ms = now_ms();
            let codes_refreshed = answer.get("codes_refreshed").and_then(Value::as_u64);
            say(format!(
                "{} taken offline after {} scans (acknowledged in {} ms, {} codes to refresh)",
                flip.staff,
                campaign.started,
                acked_ms - sent_ms,
                codes_refreshed.map_or("?".into(), |n| n.to_string())
            ));
            flips.push(Flip {
                staff: flip.staff.clone(),
                sent_ms,
                acked_ms,
                codes_refreshed,
            });
        }
        if !campaign.running {
            if campaign.started < campaign.total {
                bail!(
                    "campaign {campaign_id} stopped after {} of {} scans",
                    campaign.started,
                    campaign.total
                );
            }
            return Ok((flips, campaign));
        }
        if last_progress.elapsed() >= Duration::from_secs(15) {
            last_progress = Instant::now();
            let (inbox, refresh) = world.work_queues().await?;
            say(format!(
                "t+{:>3.0} s: {} of {} scans started, {} done; queued: inbox {inbox}, refresh {refresh}",
                started.elapsed().as_secs_f64(),
                campaign.started,
                campaign.total,
                campaign.done
            ));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits until inbox and refresh report no message (visible, in flight or delayed) on
/// `quiet_polls` consecutive polls a second apart, or `timeout` passed.
async fn wait_drained(world: &World, timeout: Duration, quiet_polls: u32) -> Result<Drain> {
    let started = Instant::now();
    let mut quiet = 0;
    loop {
        let (inbox, refresh) = world.work_queues().await?;
        quiet = if inbox + refresh == 0 { quiet + 1 } else { 0 };
        let secs = started.elapsed().as_secs_f64();
        if quiet >= quiet_polls {
            return Ok(Drain {
                drained: true,
                secs,
                inbox,
                refresh,
            });
        }
        if started.elapsed() > timeout {
            say(format!(
                "queues not drained after {secs:.0} s: inbox {inbox}, refresh {refresh}"
            ));
            return Ok(Drain {
                drained: false,
                secs,
                inbox,
                refresh,
            });
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// The user list each contact way was created with, by state (the code id).
fn created_lists(calls: &[sandbox::Call]) -> HashMap<String, Vec<String>> {
    calls
        .iter()
        .filter(|c| c.errcode() == Some(0))
        .filter_map(|c| {
            let state = c.request.get("state")?.as_str()?.to_owned();
            let users = c
                .request
                .get("user")?
                .as_array()?
                .iter()
                .filter_map(|u| u.as_str().map(str::to_owned))
                .collect();
            Some((state, users))
        })
        .collect()
}
