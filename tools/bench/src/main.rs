//! `make bench`: qrsync's refresh path under load, against WeCom's rate limits.
//!
//! Against the stack deployed to MiniStack (found through its CloudFormation outputs) and the
//! WeCom sandbox, it seeds one fresh tenant with thousands of codes and a few hundred staff,
//! each staff member on tens of codes (the fan-out), then drives staff changes through the admin
//! API in phases and measures from the outside: pushes per wall-clock minute (the sandbox's call
//! log) against the budget the refresh function was deployed with, 45009 answers, the refresh
//! function's counters (read about once a second, so that DynamoDB requests can be told apart
//! by the kind of refresh that sent them: `attribution`), latency from the fact to the completed
//! push (the push log), dead letters, and whether every code's WeCom list is the recompute of
//! the final facts.
//!
//! The default run's phases each hold one kind of refresh where they can: unchanged (staff send
//! their own facts again), pushed with budget to spare (staff with no code in common flipped),
//! one fan-out burst (a staff member on every code goes offline: every list changes at once,
//! drained at the budget, refreshes put off for budget whenever a minute's budget is spent, and
//! the time until every list is right), and 45009 (the sandbox's limit below the budget).
//! `--long` runs the earlier long drive instead: rounds of random staff changes over about
//! 21,000 reasons, then rounds with the sandbox's limit below the budget. Exits non-zero if a
//! must-be line fails.
//!
//! Settings: `QRSYNC_STACK`, `QRSYNC_SANDBOX_URL`, optionally `QRSYNC_API_URL`, and the
//! standard AWS ones (`AWS_ENDPOINT_URL`, credentials, `AWS_REGION`).

mod attribution;
mod burst;
mod drift;
mod report;
mod sandbox;
mod scenario;
mod world;

use adapters::dynamodb::keys;
use anyhow::{bail, Context, Result};
use attribution::Sample;
use clap::Parser;
use domain::codes::CodeFacts;
use domain::ids::TenantId;
use domain::ids::{CodeId, StaffId};
use futures::{StreamExt, TryStreamExt};
use rand::distributions::{Alphanumeric, DistString};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use report::{Checks, Convergence, Phase, Seeding};
use sandbox::{Call, Sandbox};
use serde_json::{json, Value};
use stack_client::AdminApi;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use world::World;

#[derive(Debug, Parser)]
#[command(
    name = "qrsync-bench",
    about = "Drives staff changes through the local stack against lowered WeCom limits and prints what happened"
)]
struct Args {
    #[command(flatten)]
    target: stack_client::Target,
    /// Seed of every choice the bench makes (members of each code, who changes in each phase)
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
    /// The long drive (about 40 minutes at 540 pushes a minute): `--rounds1` rounds of
    /// `--round-staff1` random staff flipped (about 21,700 reasons), then `--rounds2` rounds
    /// with the sandbox's limit below the budget, instead of the default run's phases.
    #[arg(long)]
    long: bool,
    /// The sandbox's update_contact_way limit per minute in the phases that must see no 45009
    /// (above the budget).
    #[arg(long, default_value_t = scenario::LIMIT_1)]
    limit1: u64,
    /// The same in the 45009 phase (below the budget: WeCom answers 45009).
    #[arg(long, default_value_t = scenario::LIMIT_2)]
    limit2: u64,
    /// Default run: staff who send their own facts again (every reason an unchanged refresh).
    #[arg(long, default_value_t = scenario::UNCHANGED_STAFF)]
    unchanged_staff: usize,
    /// Default run: most codes the push phase changes (never more than half the budget).
    #[arg(long, default_value_t = scenario::PUSH_CODES)]
    push_codes: usize,
    /// Default run: codes the 45009 phase changes (more than `--limit2` makes WeCom refuse).
    #[arg(long, default_value_t = scenario::THROTTLED_CODES)]
    throttled_codes: usize,
    /// Default run, must-be: the burst changes at least this many lists.
    #[arg(long, default_value_t = scenario::MIN_BURST)]
    min_burst: usize,
    /// Default run: how long the burst may take to converge.
    #[arg(long, default_value_t = 900)]
    burst_timeout_secs: u64,
    /// Long drive: rounds of staff changes in phase 1, and staff changed per round.
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
    /// How long a phase may take to drain after its last change.
    #[arg(long, default_value_t = 900)]
    drain_timeout_secs: u64,
    /// Must-be: the warm drain rate (the burst's, or the long drive's phase 1) as a share of
    /// the budget.
    #[arg(long, default_value_t = 0.9)]
    warm_share: f64,
    /// Must-be (long drive): at least this many reasons driven in phase 1.
    #[arg(long, default_value_t = 20_000)]
    min_reasons: u64,
    /// Must-be: at least this many codes seeded.
    #[arg(long, default_value_t = 2_000)]
    min_codes: usize,
    /// Instead of the phases: change this many contact ways behind qrsync's back after
    /// seeding and measure the sweep finding and repairing them (deploy with a read budget
    /// that covers the tenant: `make bench-drift`).
    #[arg(long, default_value_t = 0)]
    drift_codes: usize,
    /// How long the drift phase may take.
    #[arg(long, default_value_t = 900)]
    drift_timeout_secs: u64,
}

impl Args {
    /// Every count within bounds: a typo must not seed a million codes or wait for a day.
    fn check(&self) -> Result<()> {
        let bounded: [(&str, u64, std::ops::RangeInclusive<u64>); 17] = [
            ("--staff", self.staff as u64, 1..=5_000),
            ("--codes", self.codes as u64, 1..=20_000),
            ("--members", self.members as u64, 1..=99),
            ("--concurrency", self.concurrency as u64, 1..=64),
            (
                "--change-concurrency",
                self.change_concurrency as u64,
                1..=64,
            ),
            ("--unchanged-staff", self.unchanged_staff as u64, 1..=5_000),
            ("--push-codes", self.push_codes as u64, 1..=20_000),
            ("--throttled-codes", self.throttled_codes as u64, 1..=20_000),
            ("--burst-timeout-secs", self.burst_timeout_secs, 10..=7_200),
            ("--rounds1", self.rounds1 as u64, 0..=1_000),
            ("--round-staff1", self.round_staff1 as u64, 1..=5_000),
            ("--rounds2", self.rounds2 as u64, 0..=1_000),
            ("--round-staff2", self.round_staff2 as u64, 1..=5_000),
            ("--round-secs", self.round_secs, 1..=3_600),
            ("--drain-timeout-secs", self.drain_timeout_secs, 10..=7_200),
            ("--drift-codes", self.drift_codes as u64, 0..=20_000),
            ("--drift-timeout-secs", self.drift_timeout_secs, 10..=7_200),
        ];
        for (flag, value, range) in bounded {
            if !range.contains(&value) {
                bail!(
                    "{flag} {value} is out of bounds ({} to {})",
                    range.start(),
                    range.end()
                );
            }
        }
        if !(0.0..=1.0).contains(&self.warm_share) {
            bail!("--warm-share {} is not a share (0 to 1)", self.warm_share);
        }
        Ok(())
    }
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

/// The staff member the default run seats on every code, for its burst.
const BURST_MEMBER: &str = "staff-all";

/// Who sits on which code: `members` distinct staff per code, drawn from the seed, and in the
/// default run one more staff member on every code (the burst's).
struct Plan {
    /// The staff drawn onto codes (the burst member is not among them).
    staff: Vec<String>,
    burst_member: Option<String>,
    codes: Vec<(String, Vec<String>)>,
}

impl Plan {
    fn draw(rng: &mut StdRng, staff: usize, codes: usize, members: usize, burst: bool) -> Self {
        let staff: Vec<String> = (0..staff).map(|i| format!("staff{i:04}")).collect();
        let burst_member = burst.then(|| BURST_MEMBER.to_owned());
        let codes = (0..codes)
            .map(|i| {
                let mut chosen: Vec<String> = staff
                    .choose_multiple(rng, members.min(staff.len()))
                    .cloned()
                    .collect();
                chosen.extend(burst_member.clone());
                (format!("code-{i:05}"), chosen)
            })
            .collect();
        Self {
            staff,
            burst_member,
            codes,
        }
    }

    /// Every staff member of the tenant: the drawn ones and the burst member.
    fn everyone(&self) -> Vec<String> {
        let mut everyone = self.staff.clone();
        everyone.extend(self.burst_member.clone());
        everyone
    }

    /// The codes a staff member sits on (indices into `codes`): the reasons a change of theirs
    /// fans out to.
    fn seats_of(&self, staff: &str) -> BTreeSet<usize> {
        self.codes
            .iter()
            .enumerate()
            .filter(|(_, (_, members))| members.iter().any(|m| m == staff))
            .map(|(i, _)| i)
            .collect()
    }

    fn codes_of(&self, staff: &str) -> u64 {
        self.seats_of(staff).len() as u64
    }

    /// Codes per drawn staff member: (fewest, most).
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

    /// Staff taken in `order` whose codes are none of those taken before, while the codes
    /// taken stay within `max_codes`: flipped together, each of their codes gets exactly one
    /// reason and one list change.
    fn disjoint(&self, order: Vec<String>, max_codes: usize) -> Vec<String> {
        let mut taken: BTreeSet<usize> = BTreeSet::new();
        let mut chosen = Vec::new();
        for staff in order {
            let seats = self.seats_of(&staff);
            if seats.is_empty()
                || taken.len() + seats.len() > max_codes
                || !taken.is_disjoint(&seats)
            {
                continue;
            }
            taken.extend(seats);
            chosen.push(staff);
        }
        chosen
    }

    /// Staff taken in `order` until their codes together number at least `codes` (or nobody
    /// is left).
    fn reaching(&self, order: Vec<String>, codes: usize) -> Vec<String> {
        let mut reached: BTreeSet<usize> = BTreeSet::new();
        let mut chosen = Vec::new();
        for staff in order {
            if reached.len() >= codes {
                break;
            }
            reached.extend(self.seats_of(&staff));
            chosen.push(staff);
        }
        chosen
    }

    /// The list each code routes to when `online` says who is online (every code has the
    /// offline check and no limit): its members online, sorted; `None` when nobody is (the
    /// code starves and WeCom keeps its last list).
    fn expected(&self, online: &BTreeMap<String, bool>) -> Vec<(String, Option<Vec<String>>)> {
        self.codes
            .iter()
            .map(|(code, members)| {
                let mut list: Vec<String> = members
                    .iter()
                    .filter(|m| online.get(*m).copied().unwrap_or(false))
                    .cloned()
                    .collect();
                list.sort();
                (code.clone(), (!list.is_empty()).then_some(list))
            })
            .collect()
    }
}

/// What a phase does to the tenant.
enum Drive {
    /// The long drive's rounds: `round_staff` staff drawn from the seed flipped per round.
    Rounds { rounds: usize, round_staff: usize },
    /// These staff send the facts they have again (`online` as it is): every code they sit on
    /// gets a reason and nothing to change.
    SameFacts(Vec<String>),
    /// These staff flipped online <-> offline.
    Flip(Vec<String>),
    /// The burst member goes offline, and the lists are watched until every one is right.
    Burst,
}

struct Spec {
    name: &'static str,
    /// What the drive is, for the report.
    what: String,
    limit: u64,
    drive: Drive,
    checks: Checks,
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

/// The staff changes of a phase so far.
#[derive(Default)]
struct Driven {
    rounds: usize,
    changes: usize,
    reasons_sent: u64,
    admin_ms: Vec<u64>,
    admin_retries: u32,
}

async fn run(args: Args) -> Result<bool> {
    args.check()?;
    let started = Instant::now();
    let world = World::connect(&args.target.stack, args.target.api_url.as_deref()).await?;
    let sandbox = Sandbox::new(&args.target.sandbox_url)?;
    sandbox.health().await?;
    let admin = AdminApi::new(&world.api_url, &world.aws)?;
    let budget = world.budget().await?;
    let mut rng = StdRng::seed_from_u64(args.seed);
    // The long drive and the sweep's bench keep the tenant they always had.
    let burst = !args.long && args.drift_codes == 0;
    let plan = Plan::draw(&mut rng, args.staff, args.codes, args.members, burst);
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
        "tenant {} (corp {}), seed {}: {} staff, {} codes of {} members{} (each drawn staff member on {fewest} to {most} codes)",
        id.tenant,
        id.corp_id,
        args.seed,
        plan.staff.len(),
        plan.codes.len(),
        args.members,
        if burst { format!(" and {BURST_MEMBER}") } else { String::new() }
    ));
    if args.limit1 <= budget.per_minute || args.limit2 >= budget.per_minute {
        say(format!(
            "warning: the sandbox's limit ({}) should be above the budget and the 45009 phase's ({}) below it",
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
        online: plan.everyone().into_iter().map(|s| (s, true)).collect(),
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
    let mut phases = Vec::new();
    for spec in bench.specs() {
        phases.push(bench.phase(spec).await?);
    }
    let passed = report::print(&report::Inputs {
        tenant: &id.tenant,
        seed: args.seed,
        long: args.long,
        staff: plan.staff.len(),
        burst_member: plan.burst_member.clone(),
        members: args.members,
        seats: (fewest, most),
        budget,
        seeding,
        phases,
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

/// Reads the tenant's refresh tally about once a second until `done` is set, then once more.
/// A failed read only widens an interval (the next reading covers it), so it is skipped.
async fn sample_tally(
    world: &World,
    tenant: &TenantId,
    first: Sample,
    done: &AtomicBool,
) -> Vec<Sample> {
    let mut samples = vec![first];
    let mut failures = 0u32;
    loop {
        let last = done.load(Ordering::Acquire);
        match world.tally(tenant).await {
            Ok(tally) => samples.push(Sample {
                at_ms: now_ms(),
                tally,
            }),
            Err(error) => {
                failures += 1;
                if failures == 1 {
                    say(format!("a tally reading failed (skipped): {error:#}"));
                }
            }
        }
        if last {
            return samples;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

impl Bench<'_> {
    /// The phases of the run: the default run's, or the long drive's.
    fn specs(&mut self) -> Vec<Spec> {
        let args = self.args;
        let above = Checks {
            min_reasons: None,
            min_burst: None,
            warm_share: None,
            throttled: false,
            minutes: false,
        };
        if args.long {
            return vec![
                Spec {
                    name: "phase 1",
                    what: format!(
                        "{} rounds of {} staff flipped online <-> offline, one every {} s",
                        args.rounds1, args.round_staff1, args.round_secs
                    ),
                    limit: args.limit1,
                    drive: Drive::Rounds {
                        rounds: args.rounds1,
                        round_staff: args.round_staff1,
                    },
                    checks: Checks {
                        min_reasons: Some(args.min_reasons),
                        warm_share: Some(args.warm_share),
                        minutes: true,
                        ..above
                    },
                },
                Spec {
                    name: "phase 2",
                    what: format!(
                        "{} rounds of {} staff flipped online <-> offline, one every {} s",
                        args.rounds2, args.round_staff2, args.round_secs
                    ),
                    limit: args.limit2,
                    drive: Drive::Rounds {
                        rounds: args.rounds2,
                        round_staff: args.round_staff2,
                    },
                    checks: Checks {
                        throttled: true,
                        minutes: true,
                        ..above
                    },
                },
            ];
        }
        let unchanged = self.draw_online(args.unchanged_staff);
        let push_codes = (args.push_codes as u64).min(self.budget.per_minute / 2) as usize;
        let push = self.disjoint_staff(push_codes);
        let push_reaches: usize = push.iter().map(|s| self.plan.codes_of(s) as usize).sum();
        vec![
            Spec {
                name: "unchanged",
                what: format!(
                    "{} staff send their own facts again (online: true while online)",
                    unchanged.len()
                ),
                limit: args.limit1,
                drive: Drive::SameFacts(unchanged),
                checks: above,
            },
            Spec {
                name: "push",
                what: format!(
                    "{} staff with no code in common go offline: {push_reaches} codes, at most half the budget",
                    push.len()
                ),
                limit: args.limit1,
                drive: Drive::Flip(push),
                checks: above,
            },
            Spec {
                name: "burst",
                what: format!("{BURST_MEMBER}, on every code, goes offline"),
                limit: args.limit1,
                drive: Drive::Burst,
                checks: Checks {
                    min_burst: Some(args.min_burst),
                    warm_share: Some(args.warm_share),
                    minutes: true,
                    ..above
                },
            },
            Spec {
                name: "45009",
                // Drawn when the phase starts: after the push phase's flips.
                what: String::new(),
                limit: args.limit2,
                drive: Drive::Flip(Vec::new()),
                checks: Checks {
                    throttled: true,
                    minutes: true,
                    ..above
                },
            },
        ]
    }

    /// `n` drawn staff members who are online now, drawn from the seed.
    fn draw_online(&mut self, n: usize) -> Vec<String> {
        let online: Vec<&String> = self.plan.staff.iter().filter(|s| self.online[*s]).collect();
        online
            .choose_multiple(&mut self.rng, n.min(online.len()))
            .map(|s| (*s).clone())
            .collect()
    }

    /// Online drawn staff with no code in common, their codes together within `max_codes`
    /// (`Plan::disjoint`), tried in an order drawn from the seed.
    fn disjoint_staff(&mut self, max_codes: usize) -> Vec<String> {
        let order = self.draw_online(self.plan.staff.len());
        self.plan.disjoint(order, max_codes)
    }

    /// Online drawn staff, in an order drawn from the seed, until their codes together number
    /// at least `codes` (`Plan::reaching`).
    fn staff_reaching(&mut self, codes: usize) -> Vec<String> {
        let order = self.draw_online(self.plan.staff.len());
        self.plan.reaching(order, codes)
    }

    /// The tenant, its staff (all online) and its codes (offline check on), through the admin
    /// API with the sandbox's limits raised; then the codes' first refreshes drain.
    async fn seed(&mut self) -> Result<Seeding> {
        let started = Instant::now();
        let (id, admin, plan) = (self.id, self.admin, self.plan);
        let everyone = plan.everyone();
        self.sandbox
            .set_limits(1_000_000, 60_000_000, self.args.seed)
            .await?;
        self.sandbox
            .put_corp(&id.corp_id, &id.corp_secret, &everyone)
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
        let concurrency = self.args.concurrency;
        futures::stream::iter(&everyone)
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
            everyone.len(),
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

    /// One phase: the sandbox's limit set, the drive, the drain, then the measurements; the
    /// tenant's tally read about once a second throughout.
    async fn phase(&mut self, mut spec: Spec) -> Result<Phase> {
        if spec.name == "45009" {
            let staff = self.staff_reaching(self.args.throttled_codes);
            let reaches = staff
                .iter()
                .flat_map(|s| self.plan.seats_of(s))
                .collect::<BTreeSet<_>>()
                .len();
            spec.what = format!(
                "{} staff go offline: {reaches} codes, more than the sandbox's {} a minute",
                staff.len(),
                spec.limit
            );
            spec.drive = Drive::Flip(staff);
        }
        let (name, limit) = (spec.name, spec.limit);
        self.sandbox
            .set_limits(limit, limit * 60, self.args.seed)
            .await?;
        let tally_before = self.world.tally(&self.tenant).await?;
        let started_ms = now_ms();
        let started = Instant::now();
        say(format!(
            "{name}: sandbox limit {limit}/min, budget {}/min; {}",
            self.budget.per_minute, spec.what
        ));
        let (world, tenant) = (self.world, self.tenant.clone());
        let first = Sample {
            at_ms: started_ms,
            tally: tally_before.clone(),
        };
        let done = AtomicBool::new(false);
        let work = async {
            let driven = self.drive_and_drain(name, &spec.drive).await;
            done.store(true, Ordering::Release);
            driven
        };
        let (driven, samples) = tokio::join!(work, sample_tally(world, &tenant, first, &done));
        let (driven, driven_secs, burst, drain) = driven?;
        let ended_ms = now_ms();
        say(format!(
            "{name}: {} {:.0} s after the last change ({:.0} s in all)",
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
            what: spec.what,
            limit,
            checks: spec.checks,
            started_ms,
            ended_ms,
            rounds: driven.rounds,
            changes: driven.changes,
            reasons_sent: driven.reasons_sent,
            driven_secs,
            drain,
            admin_ms: driven.admin_ms,
            admin_retries: driven.admin_retries,
            tally_before,
            tally_after: self.world.tally(&self.tenant).await?,
            samples,
            calls: self.update_calls(started_ms, ended_ms).await?,
            pushes: self.pushes(started_ms, ended_ms).await?,
            burst,
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

    /// The phase's drive, then the drain: what was driven, the seconds it took, the burst's
    /// measurements (a burst phase) and the drain.
    async fn drive_and_drain(
        &mut self,
        name: &str,
        drive: &Drive,
    ) -> Result<(Driven, f64, Option<report::Burst>, report::Drain)> {
        let started = Instant::now();
        let mut driven = Driven::default();
        let mut burst = None;
        match drive {
            Drive::Rounds {
                rounds,
                round_staff,
            } => {
                self.rounds(name, *rounds, *round_staff, &mut driven)
                    .await?
            }
            Drive::SameFacts(staff) => {
                let staff: Vec<(String, bool)> =
                    staff.iter().map(|s| (s.clone(), self.online[s])).collect();
                self.change(&staff, &mut driven).await?;
            }
            Drive::Flip(staff) => {
                let staff: Vec<(String, bool)> =
                    staff.iter().map(|s| (s.clone(), !self.online[s])).collect();
                self.change(&staff, &mut driven).await?;
            }
            Drive::Burst => burst = Some(self.burst(&mut driven).await?),
        }
        let driven_secs = started.elapsed().as_secs_f64();
        let drain = self
            .drain(Duration::from_secs(self.args.drain_timeout_secs))
            .await?;
        Ok((driven, driven_secs, burst, drain))
    }

    /// The long drive's rounds: `round_staff` staff drawn from the seed flipped per round.
    async fn rounds(
        &mut self,
        name: &str,
        rounds: usize,
        round_staff: usize,
        driven: &mut Driven,
    ) -> Result<()> {
        let started = Instant::now();
        for round in 0..rounds {
            let due = started + Duration::from_secs(self.args.round_secs * round as u64);
            tokio::time::sleep_until(due.into()).await;
            self.wait_below_max_queued(name).await?;
            let chosen: Vec<(String, bool)> = self
                .plan
                .staff
                .choose_multiple(&mut self.rng, round_staff.min(self.plan.staff.len()))
                .map(|staff| (staff.clone(), !self.online[staff]))
                .collect();
            let reasons_before = driven.reasons_sent;
            self.change(&chosen, driven).await?;
            let depth: u64 = self.depths().await?.iter().map(|(_, d)| d).sum();
            say(format!(
                "{name}: t+{:>3.0} s round {}/{rounds}: {} staff changed, {} reasons ({} so far); {} staff offline; queued {depth}",
                started.elapsed().as_secs_f64(),
                round + 1,
                chosen.len(),
                driven.reasons_sent - reasons_before,
                driven.reasons_sent,
                self.online.values().filter(|o| !**o).count()
            ));
        }
        Ok(())
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

    /// Sets each staff member's online flag as given (a flip, or the flag they have), through
    /// the admin API; counts the changes and the reasons they fan out to.
    async fn change(&mut self, chosen: &[(String, bool)], driven: &mut Driven) -> Result<()> {
        let (admin, tenant) = (self.admin, &self.id.tenant);
        let answers: Vec<(u64, u32)> = futures::stream::iter(chosen)
            .map(|(staff, online)| put_staff(admin, tenant, staff, *online))
            .buffer_unordered(self.args.change_concurrency)
            .try_collect()
            .await?;
        let reasons: u64 = chosen
            .iter()
            .map(|(staff, _)| self.plan.codes_of(staff))
            .sum();
        for (staff, online) in chosen {
            self.online.insert(staff.clone(), *online);
        }
        driven.rounds += 1;
        driven.reasons_sent += reasons;
        driven.changes += answers.len();
        driven.admin_ms.extend(answers.iter().map(|(ms, _)| ms));
        driven.admin_retries += answers.iter().map(|(_, retries)| retries).sum::<u32>();
        Ok(())
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

    /// Every code's WeCom list (the sandbox) as a sorted list, by code.
    async fn lists(&self) -> Result<HashMap<String, Vec<String>>> {
        Ok(self
            .sandbox
            .contact_ways(&self.id.corp_id)
            .await?
            .into_iter()
            .map(|w| {
                let mut users = w.user;
                users.sort();
                (w.state, users)
            })
            .collect())
    }

    /// Every code's WeCom list (the sandbox) beside the recompute of the current facts.
    async fn convergence(&self) -> Result<Convergence> {
        let started = Instant::now();
        let lists = self.lists().await?;
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
        let model: HashMap<String, Option<Vec<String>>> =
            self.plan.expected(&self.online).into_iter().collect();
        for (code, expected) in expected {
            let expected = expected.map(|mut users| {
                users.sort();
                users
            });
            if let (Some(recomputed), Some(Some(modelled))) = (&expected, model.get(&code)) {
                if recomputed != modelled {
                    convergence.model_differs += 1;
                }
            }
            match (expected, lists.get(&code).cloned()) {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(burst: bool) -> Plan {
        Plan::draw(&mut StdRng::seed_from_u64(7), 40, 200, 5, burst)
    }

    #[test]
    fn the_burst_member_sits_on_every_code_and_leaves_the_drawn_members_as_they_were() {
        let (with, without) = (plan(true), plan(false));
        assert_eq!(with.codes_of(BURST_MEMBER), 200);
        for ((code, members), (same_code, drawn)) in with.codes.iter().zip(&without.codes) {
            assert_eq!(code, same_code);
            assert_eq!(&members[..5], drawn.as_slice());
            assert_eq!(members[5], BURST_MEMBER);
        }
        assert_eq!(with.everyone().len(), 41);
        assert_eq!(without.everyone().len(), 40);
    }

    #[test]
    fn a_code_routes_to_its_members_online_and_starves_when_nobody_is() {
        let plan = plan(false);
        let (code, members) = &plan.codes[0];
        let mut online: BTreeMap<String, bool> =
            plan.staff.iter().map(|s| (s.clone(), true)).collect();
        online.insert(members[0].clone(), false);
        let expected: HashMap<String, Option<Vec<String>>> =
            plan.expected(&online).into_iter().collect();
        let mut left: Vec<String> = members[1..].to_vec();
        left.sort();
        assert_eq!(expected[code], Some(left));
        for member in members {
            online.insert(member.clone(), false);
        }
        assert_eq!(plan.expected(&online)[0].1, None);
    }

    #[test]
    fn staff_taken_for_the_push_phase_share_no_code_and_stay_within_the_codes_allowed() {
        let plan = plan(true);
        let chosen = plan.disjoint(plan.staff.clone(), 60);
        assert!(!chosen.is_empty());
        let mut seen = BTreeSet::new();
        for staff in &chosen {
            let seats = plan.seats_of(staff);
            assert!(seen.is_disjoint(&seats), "{staff} shares a code");
            seen.extend(seats);
        }
        assert!(seen.len() <= 60);
        // The burst member sits on every code: never taken beside anyone.
        assert!(plan.disjoint(vec![BURST_MEMBER.to_owned()], 60).is_empty());
    }

    #[test]
    fn staff_are_taken_until_their_codes_reach_the_count_asked() {
        let plan = plan(false);
        let chosen = plan.reaching(plan.staff.clone(), 100);
        let reached: BTreeSet<usize> = chosen.iter().flat_map(|s| plan.seats_of(s)).collect();
        assert!(reached.len() >= 100);
        let fewer: BTreeSet<usize> = chosen[..chosen.len() - 1]
            .iter()
            .flat_map(|s| plan.seats_of(s))
            .collect();
        assert!(fewer.len() < 100);
        assert_eq!(plan.reaching(Vec::new(), 100), Vec::<String>::new());
    }
}
