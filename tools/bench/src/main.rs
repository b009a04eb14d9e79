//! `make bench`: qrsync's refresh path under a backlog, against WeCom's rate limits.
//!
//! Against the stack deployed to MiniStack (found through its CloudFormation outputs) and the
//! WeCom sandbox, it seeds one fresh tenant with thousands of codes and a few hundred staff,
//! each staff member on tens of codes (the fan-out), then runs two phases. In each, rounds of
//! admin staff changes (online <-> offline) send one refresh reason per code of each staff
//! member changed; the bench waits until every work queue is drained and measures from the
//! outside: pushes per wall-clock minute (the sandbox's call log) against the budget the
//! refresh function was deployed with, 45009 answers, the refresh function's counters
//! (requeues, unchanged recomputes, DynamoDB requests), latency from the fact to the completed
//! push (the push log), dead letters, and whether every code's WeCom list is the recompute of
//! the final facts. Phase 1 has the sandbox's limit above the budget (no 45009 may happen);
//! phase 2 below it (45009s happen, and still nothing is lost). Exits non-zero if a must-be
//! line fails.
//!
//! Settings: `QRSYNC_STACK`, `QRSYNC_SANDBOX_URL`, optionally `QRSYNC_API_URL`, and the
//! standard AWS ones (`AWS_ENDPOINT_URL`, credentials, `AWS_REGION`).

mod drift;
mod report;
mod sandbox;
mod scenario;
mod world;

use adapters::dynamodb::keys;
use anyhow::{bail, Context, Result};
use clap::Parser;
use domain::codes::CodeFacts;
use domain::ids::TenantId;
use domain::ids::{CodeId, StaffId};
use futures::{StreamExt, TryStreamExt};
use rand::distributions::{Alphanumeric, DistString};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use report::{Convergence, Phase, Seeding};
use sandbox::{Call, Sandbox};
use serde_json::{json, Value};
use stack_client::AdminApi;
use std::collections::{BTreeMap, HashMap};
use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use world::World;

#[derive(Debug, Parser)]
#[command(
    name = "qrsync-bench",
    about = "Drives a backlog of refresh reasons through the local stack against lowered WeCom limits and prints what happened"
)]
struct Args {
    #[command(flatten)]
    target: stack_client::Target,
    /// Seed of every choice the bench makes (members of each code, who changes in each round)
    /// and of the sandbox's random streams.
    #[arg(long, default_value_t = scenario::SEED)]
    seed: u64,
    #[arg(long, default_value_t = scenario::STAFF)]
    staff: usize,
    #[arg(long, default_value_t = scenario::CODES)]
    codes: usize,
    /// Members of each code (drawn at random: each staff member sits on about
    /// codes * members / staff codes).
    #[arg(long, default_value_t = scenario::MEMBERS)]
    members: usize,
    /// Admin API requests in flight at once while seeding.
    #[arg(long, default_value_t = 8)]
    concurrency: usize,
    /// Admin staff changes in flight at once during a phase (the refresh function is busy
    /// with the same emulator then).
    #[arg(long, default_value_t = 2)]
    change_concurrency: usize,
    /// The sandbox's update_contact_way limit per minute in phase 1 (above the budget).
    #[arg(long, default_value_t = scenario::LIMIT_1)]
    limit1: u64,
    /// The same in phase 2 (below the budget: WeCom answers 45009).
    #[arg(long, default_value_t = scenario::LIMIT_2)]
    limit2: u64,
    /// Rounds of staff changes in phase 1, and staff changed per round.
    #[arg(long, default_value_t = scenario::ROUNDS_1)]
    rounds1: usize,
    #[arg(long, default_value_t = scenario::ROUND_STAFF_1)]
    round_staff1: usize,
    /// The same in phase 2.
    #[arg(long, default_value_t = scenario::ROUNDS_2)]
    rounds2: usize,
    #[arg(long, default_value_t = scenario::ROUND_STAFF_2)]
    round_staff2: usize,
    /// A round starts this long after the previous one started (or when it ends, if later).
    #[arg(long, default_value_t = scenario::ROUND_SECS)]
    round_secs: u64,
    /// A round waits until the work queues hold at most this many messages: MiniStack's SQS
    /// scans a whole queue on every send, receive and delete, so a deep backlog slows every
    /// queue operation of the stack (quadratic in the backlog), not just this bench.
    #[arg(long, default_value_t = scenario::MAX_QUEUED)]
    max_queued: u64,
    /// How long a phase may take to drain after its last round.
    #[arg(long, default_value_t = 900)]
    drain_timeout_secs: u64,
    /// Must-be: the warm drain rate of phase 1 as a share of the budget.
    #[arg(long, default_value_t = 0.9)]
    warm_share: f64,
    /// Must-be: at least this many reasons driven in phase 1, over at least this many codes.
    #[arg(long, default_value_t = 20_000)]
    min_reasons: u64,
    #[arg(long, default_value_t = 2_000)]
    min_codes: usize,
    /// Instead of the two phases: change this many contact ways behind qrsync's back after
    /// seeding and measure the sweep finding and repairing them (deploy with a read budget
    /// that covers the tenant: `make bench-drift`).
    #[arg(long, default_value_t = 0)]
    drift_codes: usize,
    /// How long the drift phase may take.
    #[arg(long, default_value_t = 900)]
    drift_timeout_secs: u64,
}

fn say(message: impl AsRef<str>) {
    println!("[bench] {}", message.as_ref());
}

pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    match run(args).await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(error) => {
            eprintln!("[bench] failed: {error:#}");
            ExitCode::from(2)
        }
    }
}

/// A fresh tenant and its WeCom corp, random per run (a rerun must not find the previous
/// run's counters or push log).
struct Identity {
    tenant: String,
    corp_id: String,
    corp_secret: String,
}

impl Identity {
    fn fresh() -> Self {
        let mut rng = rand::thread_rng();
        let mut draw = |n| Alphanumeric.sample_string(&mut rng, n).to_lowercase();
        Self {
            tenant: format!("bench-{}", draw(10)),
            corp_id: format!("ww{}", draw(16)),
            corp_secret: draw(32),
        }
    }
}

/// Who sits on which code: `members` distinct staff per code, drawn from the seed.
struct Plan {
    staff: Vec<String>,
    codes: Vec<(String, Vec<String>)>,
}

impl Plan {
    fn draw(rng: &mut StdRng, staff: usize, codes: usize, members: usize) -> Self {
        let staff: Vec<String> = (0..staff).map(|i| format!("staff{i:04}")).collect();
        let codes = (0..codes)
            .map(|i| {
                let chosen = staff
                    .choose_multiple(rng, members.min(staff.len()))
                    .cloned()
                    .collect();
                (format!("code-{i:05}"), chosen)
            })
            .collect();
        Self { staff, codes }
    }

    /// The codes a staff member sits on: the reasons a change of theirs fans out to.
    fn codes_of(&self, staff: &str) -> u64 {
        let on = self
            .codes
            .iter()
            .filter(|(_, members)| members.iter().any(|m| m == staff));
        on.count() as u64
    }

    /// Codes per staff member: (fewest, most).
    fn seats(&self) -> (usize, usize) {
        let mut seats: HashMap<&str, usize> = HashMap::new();
        for (_, members) in &self.codes {
            for staff in members {
                *seats.entry(staff.as_str()).or_default() += 1;
            }
        }
        let counts = self
            .staff
            .iter()
            .map(|s| seats.get(s.as_str()).copied().unwrap_or(0));
        (counts.clone().min().unwrap_or(0), counts.max().unwrap_or(0))
    }
}

struct Bench<'a> {
    args: &'a Args,
    world: &'a World,
    sandbox: &'a Sandbox,
    admin: &'a AdminApi,
    id: &'a Identity,
    tenant: TenantId,
    plan: &'a Plan,
    budget: world::Budget,
    rng: StdRng,
    /// Each staff member's online flag as last set.
    online: BTreeMap<String, bool>,
}

/// The staff changes of a phase's rounds so far.
#[derive(Default)]
struct Driven {
    changes: usize,
    reasons_sent: u64,
    admin_ms: Vec<u64>,
    admin_retries: u32,
}

async fn run(args: Args) -> Result<bool> {
    let started = Instant::now();
    let world = World::connect(&args.target.stack, args.target.api_url.as_deref()).await?;
    let sandbox = Sandbox::new(&args.target.sandbox_url)?;
    sandbox.health().await?;
    let admin = AdminApi::new(&world.api_url, &world.aws)?;
    let budget = world.budget().await?;
    let mut rng = StdRng::seed_from_u64(args.seed);
    let plan = Plan::draw(&mut rng, args.staff, args.codes, args.members);
    let id = Identity::fresh();
    let tenant = TenantId::parse(&id.tenant)?;
    let (fewest, most) = plan.seats();
    say(format!(
        "stack {} (table {}), API {}, sandbox {}",
        world.stack, world.table, world.api_url, args.target.sandbox_url
    ));
    say(format!(
        "budget of the refresh function: {} pushes/min, {}/h; work queues: {}",
        budget.per_minute,
        budget.per_hour,
        world
            .work_queues
            .keys()
            .cloned()
            .collect::<Vec<_>>()
            .join(", ")
    ));
    say(format!(
        "tenant {} (corp {}), seed {}: {} staff, {} codes of {} members (each staff member on {fewest} to {most} codes)",
        id.tenant, id.corp_id, args.seed, plan.staff.len(), plan.codes.len(), args.members
    ));
    if args.limit1 <= budget.per_minute || args.limit2 >= budget.per_minute {
        say(format!(
            "warning: phase 1's limit ({}) should be above the budget and phase 2's ({}) below it",
            args.limit1, args.limit2
        ));
    }

    let mut bench = Bench {
        args: &args,
        world: &world,
        sandbox: &sandbox,
        admin: &admin,
        id: &id,
        tenant,
        plan: &plan,
        budget,
        rng,
        online: plan.staff.iter().map(|s| (s.clone(), true)).collect(),
    };
    if args.drift_codes > 0 {
        world.pause_sweep(true).await?;
    }
    let seeding = bench.seed().await;
    if args.drift_codes > 0 {
        world.pause_sweep(false).await?;
    }
    let seeding = seeding?;
    if args.drift_codes > 0 {
        let logs = aws_sdk_cloudwatchlogs::Client::new(&world.aws);
        let sweep_log_group = stack_client::log_group(&world.aws, &world.sweep_function).await?;
        let measured = drift::run(
            &bench.sandbox.0,
            &logs,
            &sweep_log_group,
            &id.corp_id,
            args.drift_codes,
            &mut bench.rng,
            Duration::from_secs(args.drift_timeout_secs),
        )
        .await?;
        drift::print(&measured);
        println!(
            "\nseeding: {} codes in {:.0} s; run {:.0} s",
            seeding.codes,
            seeding.codes_secs,
            started.elapsed().as_secs_f64()
        );
        return Ok(measured.repair_ms.len() == measured.drifted && measured.drifted > 0);
    }
    let phase1 = bench
        .phase("phase 1", args.limit1, args.rounds1, args.round_staff1)
        .await?;
    let phase2 = bench
        .phase("phase 2", args.limit2, args.rounds2, args.round_staff2)
        .await?;
    let passed = report::print(&report::Inputs {
        tenant: &id.tenant,
        seed: args.seed,
        staff: plan.staff.len(),
        members: args.members,
        seats: (fewest, most),
        budget,
        seeding,
        phases: vec![phase1, phase2],
        warm_share: args.warm_share,
        min_reasons: args.min_reasons,
        min_codes: args.min_codes,
        run_secs: started.elapsed().as_secs_f64(),
    });
    Ok(passed)
}

/// Sets a staff member's online flag; answers how long the answer took and how many tries
/// failed first. The answer comes once the fact and its fan-out are written; the fan-out
/// function sends the reasons after it.
async fn put_staff(
    admin: &AdminApi,
    tenant: &str,
    staff: &str,
    online: bool,
) -> Result<(u64, u32)> {
    let sent = Instant::now();
    let (answer, retries) = put(
        admin,
        &format!("/tenants/{tenant}/staff/{staff}"),
        &json!({ "online": online }),
    )
    .await?;
    answer
        .get("fan_out")
        .and_then(Value::as_str)
        .with_context(|| format!("PUT staff {staff}: no fan_out"))?;
    Ok((sent.elapsed().as_millis() as u64, retries))
}

/// One admin PUT (200 or 201), tried again when the admin API answers 429 (the tenant's
/// add_contact_way budget is spent: after the wait it names, at most a minute) or a 5xx (the
/// emulator's 10 s function timeout under load, up to 3 times: every PUT the bench sends is
/// idempotent, and a repeated reason only costs a recompute). Answers the body and the tries
/// that failed first.
async fn put(admin: &AdminApi, path: &str, body: &Value) -> Result<(Value, u32)> {
    let mut retries = 0;
    loop {
        let answer = admin.put(path, body).await?;
        let wait = match answer.status {
            429 => {
                let detail = answer.body.get("detail").and_then(Value::as_str);
                let secs = detail
                    .and_then(|d| d.split("retry in ").nth(1))
                    .and_then(|d| d.split(' ').next())
                    .and_then(|n| n.parse::<u64>().ok())
                    .unwrap_or(5);
                Some(Duration::from_secs(secs.clamp(1, 60)))
            }
            500.. if retries < 3 => Some(Duration::from_secs(1)),
            _ => None,
        };
        match wait {
            Some(wait) => {
                retries += 1;
                if answer.status >= 500 {
                    say(format!(
                        "PUT {path} answered {}; trying again",
                        answer.status
                    ));
                }
                tokio::time::sleep(wait).await;
            }
            None => return Ok((answer.expect(&format!("PUT {path}"), &[200, 201])?, retries)),
        }
    }
}

impl Bench<'_> {
    /// The tenant, its staff (all online) and its codes (offline check on), through the admin
    /// API with the sandbox's limits raised; then the codes' first refreshes drain.
    async fn seed(&mut self) -> Result<Seeding> {
        let started = Instant::now();
        let (id, admin, plan) = (self.id, self.admin, self.plan);
        self.sandbox
            .set_limits(1_000_000, 60_000_000, self.args.seed)
            .await?;
        self.sandbox
            .put_corp(&id.corp_id, &id.corp_secret, &plan.staff)
            .await?;
        admin
            .put(
                &format!("/tenants/{}", id.tenant),
                &json!({
                    "corp_id": id.corp_id,
                    "corp_secret": id.corp_secret,
                    "callback_token": Alphanumeric.sample_string(&mut rand::thread_rng(), 24),
                    "encoding_aes_key": Alphanumeric.sample_string(&mut rand::thread_rng(), 43),
                }),
            )
            .await?
            .expect("PUT tenant", &[200, 201])?;
        let concurrency = self.args.concurrency.max(1);
        futures::stream::iter(&plan.staff)
            .map(|staff| async move {
                let path = format!("/tenants/{}/staff/{staff}", id.tenant);
                put(admin, &path, &json!({ "online": true })).await
            })
            .buffer_unordered(concurrency)
            .try_collect::<Vec<_>>()
            .await?;
        let staff_secs = started.elapsed().as_secs_f64();
        let mut done = 0usize;
        let mut last_progress = Instant::now();
        let mut creations = futures::stream::iter(&plan.codes)
            .map(|(code, members)| async move {
                let path = format!("/tenants/{}/codes/{code}", id.tenant);
                let body = json!({
                    "family": "native",
                    "members": members,
                    "switches": { "offline_check": true },
                });
                put(admin, &path, &body).await
            })
            .buffer_unordered(concurrency);
        while let Some(created) = creations.next().await {
            created?;
            done += 1;
            if last_progress.elapsed() >= Duration::from_secs(15) {
                last_progress = Instant::now();
                say(format!(
                    "seeding: {done} of {} codes created ({:.0} s)",
                    plan.codes.len(),
                    started.elapsed().as_secs_f64()
                ));
            }
        }
        let codes_secs = started.elapsed().as_secs_f64() - staff_secs;
        say(format!(
            "seeded through the admin API in {:.1} s: {} staff in {staff_secs:.1} s, {} codes with their contact ways in {codes_secs:.1} s",
            started.elapsed().as_secs_f64(),
            plan.staff.len(),
            plan.codes.len()
        ));
        let drain = self
            .drain(Duration::from_secs(self.args.drain_timeout_secs))
            .await?;
        say(format!(
            "the codes' first refreshes drained in {:.1} s",
            drain.secs
        ));
        if !drain.drained {
            bail!("the seeding's refreshes did not drain");
        }
        Ok(Seeding {
            codes: plan.codes.len(),
            staff_secs,
            codes_secs,
            drain_secs: drain.secs,
        })
    }

    /// Rounds of staff changes with the sandbox's limit at `limit` per minute, then the drain,
    /// then the measurements.
    async fn phase(
        &mut self,
        name: &str,
        limit: u64,
        rounds: usize,
        round_staff: usize,
    ) -> Result<Phase> {
        self.sandbox
            .set_limits(limit, limit * 60, self.args.seed)
            .await?;
        let tally_before = self.world.tally(&self.tenant).await?;
        let started_ms = now_ms();
        let started = Instant::now();
        say(format!(
            "{name}: sandbox limit {limit}/min, budget {}/min; {rounds} rounds of {round_staff} staff changes, one every {} s",
            self.budget.per_minute, self.args.round_secs
        ));
        let mut driven = Driven::default();
        for round in 0..rounds {
            let due = started + Duration::from_secs(self.args.round_secs * round as u64);
            tokio::time::sleep_until(due.into()).await;
            self.wait_below_max_queued(name).await?;
            let (round_changes, round_reasons) =
                self.change_round(round_staff, &mut driven).await?;
            let depth: u64 = self.depths().await?.iter().map(|(_, d)| d).sum();
            say(format!(
                "{name}: t+{:>3.0} s round {}/{rounds}: {round_changes} staff changed, {round_reasons} reasons ({} so far); {} staff offline; queued {depth}",
                started.elapsed().as_secs_f64(),
                round + 1,
                driven.reasons_sent,
                self.online.values().filter(|o| !**o).count()
            ));
        }
        let driven_secs = started.elapsed().as_secs_f64();
        let drain = self
            .drain(Duration::from_secs(self.args.drain_timeout_secs))
            .await?;
        let ended_ms = now_ms();
        say(format!(
            "{name}: {} {:.0} s after the last round ({:.0} s in all)",
            if drain.drained {
                "drained"
            } else {
                "NOT drained"
            },
            drain.secs,
            started.elapsed().as_secs_f64()
        ));
        let phase = Phase {
            name: name.to_owned(),
            limit,
            started_ms,
            ended_ms,
            rounds,
            changes: driven.changes,
            reasons_sent: driven.reasons_sent,
            driven_secs,
            drain,
            admin_ms: driven.admin_ms,
            admin_retries: driven.admin_retries,
            tally_before,
            tally_after: self.world.tally(&self.tenant).await?,
            calls: self.update_calls(started_ms, ended_ms).await?,
            pushes: self.pushes(started_ms, ended_ms).await?,
            convergence: self.convergence().await?,
            dead_letters: self.world.depths(&self.world.dead_letters).await?,
        };
        say(format!(
            "{name}: {} pushes accepted, {} answered 45009; {} codes differ from the recompute",
            phase.ok_calls(),
            phase.errcode_count(45009),
            phase.convergence.differ.len()
        ));
        Ok(phase)
    }

    /// Holds a round back while the work queues hold more than `max_queued` messages.
    async fn wait_below_max_queued(&self, name: &str) -> Result<()> {
        let fed = Instant::now();
        while self.depths().await?.iter().map(|(_, d)| d).sum::<u64>() > self.args.max_queued {
            if fed.elapsed() > Duration::from_secs(self.args.drain_timeout_secs) {
                bail!(
                    "{name}: the queues stayed above {} messages",
                    self.args.max_queued
                );
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        Ok(())
    }

    /// Flips `round_staff` staff members, drawn from the seed, online or offline; answers the
    /// changes made and the reasons they fanned out to.
    async fn change_round(
        &mut self,
        round_staff: usize,
        driven: &mut Driven,
    ) -> Result<(usize, u64)> {
        let chosen: Vec<(String, bool)> = self
            .plan
            .staff
            .choose_multiple(&mut self.rng, round_staff.min(self.plan.staff.len()))
            .map(|staff| (staff.clone(), !self.online[staff]))
            .collect();
        let (admin, tenant) = (self.admin, &self.id.tenant);
        let answers: Vec<(u64, u32)> = futures::stream::iter(&chosen)
            .map(|(staff, online)| put_staff(admin, tenant, staff, *online))
            .buffer_unordered(self.args.change_concurrency.max(1))
            .try_collect()
            .await?;
        let round_reasons: u64 = chosen
            .iter()
            .map(|(staff, _)| self.plan.codes_of(staff))
            .sum();
        for (staff, online) in chosen {
            self.online.insert(staff, online);
        }
        driven.reasons_sent += round_reasons;
        driven.changes += answers.len();
        driven.admin_ms.extend(answers.iter().map(|(ms, _)| ms));
        driven.admin_retries += answers.iter().map(|(_, retries)| retries).sum::<u32>();
        Ok((answers.len(), round_reasons))
    }

    /// The corp's update_contact_way calls between `started_ms` and `ended_ms`.
    async fn update_calls(&self, started_ms: u64, ended_ms: u64) -> Result<Vec<Call>> {
        Ok(self
            .sandbox
            .calls(&self.id.corp_id, "update_contact_way")
            .await?
            .into_iter()
            .filter(|c| (started_ms..=ended_ms).contains(&c.at_ms))
            .collect())
    }

    /// The push log entries between `started_ms` and `ended_ms`: (pushed at, fact times).
    async fn pushes(&self, started_ms: u64, ended_ms: u64) -> Result<Vec<(u64, Vec<u64>)>> {
        Ok(self
            .world
            .store
            .query_each_code(&self.tenant, |code| keys::push_log_prefix(Some(code)))
            .await?
            .iter()
            .filter_map(|item| {
                let pushed = world::number(item, "pushed_at_ms")?;
                let facts = item
                    .get("fact_at_ms")?
                    .as_l()
                    .ok()?
                    .iter()
                    .filter_map(|v| v.as_n().ok()?.parse().ok())
                    .collect();
                Some((pushed, facts))
            })
            .filter(|(pushed, _)| (started_ms..=ended_ms).contains(pushed))
            .collect())
    }

    async fn depths(&self) -> Result<Vec<(String, u64)>> {
        self.world.depths(&self.world.work_queues).await
    }

    /// Waits until every work queue reports no message (visible, in flight or delayed) on 5
    /// consecutive polls two seconds apart, or `timeout` passed.
    async fn drain(&self, timeout: Duration) -> Result<report::Drain> {
        let started = Instant::now();
        let mut quiet = 0;
        let mut last_progress = Instant::now();
        loop {
            let depths = self.depths().await?;
            let total: u64 = depths.iter().map(|(_, d)| d).sum();
            quiet = if total == 0 { quiet + 1 } else { 0 };
            let secs = started.elapsed().as_secs_f64();
            let drained = quiet >= 5;
            if drained || started.elapsed() > timeout {
                if !drained {
                    say(format!("queues not drained after {secs:.0} s: {depths:?}"));
                }
                return Ok(report::Drain { drained, secs });
            }
            if last_progress.elapsed() >= Duration::from_secs(20) {
                last_progress = Instant::now();
                let queued: Vec<String> = depths
                    .iter()
                    .filter(|(_, d)| *d > 0)
                    .map(|(name, d)| format!("{name} {d}"))
                    .collect();
                say(format!(
                    "draining, {secs:>4.0} s: queued {}",
                    if queued.is_empty() {
                        "nothing".into()
                    } else {
                        queued.join(", ")
                    }
                ));
            }
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
    }

    /// Every code's WeCom list (the sandbox) beside the recompute of the current facts.
    async fn convergence(&self) -> Result<Convergence> {
        let started = Instant::now();
        let lists: HashMap<String, Vec<String>> = self
            .sandbox
            .contact_ways(&self.id.corp_id)
            .await?
            .into_iter()
            .map(|w| (w.state, w.user))
            .collect();
        let now = now_ms();
        let (store, tenant) = (&self.world.store, &self.tenant);
        let expected: Vec<(String, Option<Vec<String>>)> = futures::stream::iter(&self.plan.codes)
            .map(|(code, _)| async move {
                let snapshot = store
                    .snapshot(tenant, &CodeId::parse(code)?, now)
                    .await?
                    .with_context(|| format!("code {code} is not in the table"))?;
                let names = |users: &[StaffId]| -> Vec<String> {
                    users.iter().map(|u| u.as_str().to_owned()).collect()
                };
                // Starved (nobody eligible, no fallback): WeCom keeps the last list pushed.
                let expected = match snapshot.recompute().users() {
                    Some(users) => Some(names(users)),
                    None => snapshot.last_pushed.as_ref().map(|p| names(&p.users)),
                };
                Ok::<_, anyhow::Error>((code.clone(), expected))
            })
            .buffer_unordered(16)
            .try_collect()
            .await?;
        let mut convergence = Convergence {
            codes: expected.len(),
            ..Convergence::default()
        };
        for (code, expected) in expected {
            let sorted = |mut users: Vec<String>| {
                users.sort();
                users
            };
            match (expected.map(sorted), lists.get(&code).cloned().map(sorted)) {
                (None, _) => convergence.unverifiable += 1,
                (Some(expected), Some(actual)) if expected == actual => {}
                (Some(expected), actual) => convergence
                    .differ
                    .push(format!("{code}: recompute {expected:?}, WeCom {actual:?}")),
            }
        }
        convergence.secs = started.elapsed().as_secs_f64();
        Ok(convergence)
    }
}
