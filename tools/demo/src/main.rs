//! `make demo`: qrsync running locally through a small campaign, with a report that proves it.
//!
//! Against the stack deployed to MiniStack (found through its CloudFormation outputs) and the
//! WeCom sandbox, it seeds a fresh tenant through the admin API (staff, some with a work
//! schedule whose shift ends or starts a minute or so into the campaign; native codes with the
//! offline check, daily limits, add limits and fallbacks; a company-wide daily cap), drives a
//! campaign of scans through the sandbox (10% of callbacks delivered twice concurrently),
//! takes staff offline and has one resign (WeCom's `change_contact` / `delete_user`) part-way
//! through, waits until the shift edges were walked and the queues are drained, then moves the
//! whole stack's clock (and WeCom's) to just before the tenant's midnight and waits for the
//! schedule tick to bring back the staff removed for a daily limit or the cap. It prints what
//! happened, measured from the outside, and exits non-zero if a must-be line fails.
//!
//! Settings: `QRSYNC_STACK`, `QRSYNC_SANDBOX_URL`, optionally `QRSYNC_API_URL`, and the
//! standard AWS ones (`AWS_ENDPOINT_URL`, credentials, `AWS_REGION`).

mod clock;
mod item;
mod landing;
mod measured;
mod operator;
mod plan;
mod quota;
mod report;
mod rollover;
mod sandbox;
mod world;

use adapters::dynamodb::keys;
use anyhow::{bail, Context, Result};
use clap::Parser;
use clock::{real_now_ms, StackClock};
use domain::codes::CodeFacts;
use domain::ids::TenantId;
use domain::ids::{CodeId, StaffId};
use domain::membership::Membership;
use domain::schedules::Subject;
use domain::tenants::{tenant_day, Timezone};
use futures::{StreamExt, TryStreamExt};
use measured::{Claim, Drain, FinalCode, Flip, Inputs, Push, RefreshStats, Resignation, Shifts};
use plan::{Plan, Settings};
use quota::{Crossing, LimitClaim};
use rand::distributions::{Alphanumeric, DistString};
use rollover::Rollover;
use sandbox::{Callback, Sandbox};
use serde_json::{json, Value};
use stack_client::AdminApi;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::process::ExitCode;
use std::time::{Duration, Instant};
use world::World;

#[derive(Debug, Parser)]
#[command(
    name = "qrsync-demo",
    about = "Runs a campaign against the local stack and prints what happened"
)]
struct Args {
    #[command(flatten)]
    target: stack_client::Target,
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
    /// Of those, codes with an add limit (adds through the code, ever).
    #[arg(long, default_value_t = 3)]
    add_limited_codes: usize,
    #[arg(long, default_value_t = 8)]
    add_limit: u32,
    /// The tenant's company-wide daily cap per staff member (0: off).
    #[arg(long, default_value_t = 120)]
    company_daily_cap: u32,
    /// Staff who sit on `hub_codes` more codes than the others: they reach the cap first, and
    /// its fan-out reaches many codes.
    #[arg(long, default_value_t = 2)]
    hubs: usize,
    #[arg(long, default_value_t = 8)]
    hub_codes: usize,
    /// Codes the campaign never scans, listing the staff with a shift edge and a member who is
    /// on no other code: only the schedule tick changes them.
    #[arg(long, default_value_t = 3)]
    quiet_codes: usize,
    /// Staff taken offline during the campaign.
    #[arg(long, default_value_t = 3)]
    offline: usize,
    /// Staff who resign (WeCom's delete_user callback) half-way through the campaign.
    #[arg(long, default_value_t = 1)]
    resign: usize,
    /// Staff whose shift ends, and staff whose shift starts, during the campaign.
    #[arg(long, default_value_t = 2)]
    shift_ends: usize,
    #[arg(long, default_value_t = 1)]
    shift_starts: usize,
    /// The shift edge is the first whole minute at least this long after the staff are seeded.
    #[arg(long, default_value_t = 20)]
    shift_lead_secs: u64,
    /// The tenant's timezone. Default: the zone whose midnight comes soonest after the
    /// campaign (plus `--rollover-margin-secs`), so the clock jump to it stays small.
    #[arg(long)]
    timezone: Option<String>,
    /// Leave out the day rollover (no clock change).
    #[arg(long)]
    no_rollover: bool,
    /// Time allowed after the campaign before the tenant's midnight may come (edges, drain).
    #[arg(long, default_value_t = 150)]
    rollover_margin_secs: u64,
    /// The clock jumps to this long before the tenant's midnight.
    #[arg(long, default_value_t = 5)]
    before_midnight_secs: u64,
    /// How long to wait for the schedule tick after a shift edge or the jump.
    #[arg(long, default_value_t = 200)]
    tick_timeout_secs: u64,
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

/// One shift in `zone`'s local time from `start_ms` to `end_ms`, as the admin API takes it.
fn shift(zone: Timezone, start_ms: u64, end_ms: u64) -> Value {
    let start = zone.at(start_ms);
    json!({
        "day": start.format("%a").to_string().to_lowercase(),
        "start": start.format("%H:%M").to_string(),
        "end": zone.at(end_ms).format("%H:%M").to_string(),
    })
}

const MINUTE_MS: u64 = 60_000;
const HOUR_MS: u64 = 3_600_000;

async fn run(args: Args) -> Result<bool> {
    let started = Instant::now();
    let world = World::connect(&args.target.stack, args.target.api_url.as_deref()).await?;
    let sandbox = Sandbox::new(&args.target.sandbox_url)?;
    sandbox.health().await?;
    let mark = operator::mark(&sandbox).await;
    let admin = AdminApi::new(&world.api_url, &world.aws)?;
    let mut clock = clock_back_to_real(&world, &sandbox).await?;
    let stack_now = || clock.as_ref().map_or_else(real_now_ms, StackClock::now_ms);
    let plan = Plan::draw(&args.plan_settings());
    let (timezone, midnight_ms) = tenant_zone(&args, &stack_now)?;
    let id = Identity::fresh();
    let demo = Demo {
        tenant: TenantId::parse(&id.tenant)?,
        cap: (args.company_daily_cap > 0).then_some(args.company_daily_cap),
        args: &args,
        world: &world,
        sandbox: &sandbox,
        admin: &admin,
        plan: &plan,
        id: &id,
        timezone,
    };
    demo.announce(midnight_ms, &stack_now);
    let seeded = demo.seed(started, &stack_now).await?;
    let mut campaign = demo.campaign(&seeded).await?;
    let walked = demo
        .wait_for_the_shift_edge(seeded.edge_ms, &stack_now)
        .await?;
    say("waiting for the queues to drain");
    let drained = wait_drained(&world, Duration::from_secs(args.drain_timeout_secs), 5).await?;
    demo.drop_resigned_from_directory(&mut campaign.resignations)
        .await?;
    let measured = demo.measure(&seeded, &campaign, &stack_now).await?;
    let rollover = demo
        .rollover_or_why_not(clock.as_mut(), &seeded, midnight_ms, &campaign, &measured)
        .await?;
    let operator = operator::look(&world, &sandbox, &mark)
        .await
        .map_err(|e| format!("{e:#}"));
    let passed = demo.print_report(Outcome {
        operator,
        seeded,
        campaign,
        walked,
        drained,
        measured,
        rollover,
        run_secs: started.elapsed().as_secs_f64(),
    });
    say("the landing page: a sequenced and a quota code of a tenant of their own");
    let landing = landing::run(&world, &admin, &args.target.sandbox_url, args.seed).await?;
    print!("{}", landing.text);
    Ok(passed && landing.passed())
}

impl Args {
    fn plan_settings(&self) -> Settings {
        Settings {
            seed: self.seed,
            staff: self.staff,
            codes: self.codes,
            limited_codes: self.limited_codes.min(self.codes),
            daily_limit: self.daily_limit,
            limited_weight: self.limited_weight,
            fallback_codes: self.fallback_codes,
            add_limited_codes: self.add_limited_codes,
            add_limit: self.add_limit,
            offline: self.offline,
            resign: self.resign,
            shift_ends: self.shift_ends,
            shift_starts: self.shift_starts,
            hubs: self.hubs,
            hub_codes: self.hub_codes,
            quiet_codes: self.quiet_codes,
        }
    }
}

/// The stack's clock, back to the real one if an earlier run left it moved; `None` when the
/// stack's clock cannot be moved.
async fn clock_back_to_real(world: &World, sandbox: &Sandbox) -> Result<Option<StackClock>> {
    let mut clock = StackClock::read(world).await?;
    if let Some(clock) = clock.as_mut().filter(|c| c.offset_secs() != 0) {
        say(format!(
            "the stack's clock was {} s off; back to 0",
            clock.offset_secs()
        ));
        clock.set(world, sandbox, 0).await?;
    }
    Ok(clock)
}

/// The tenant's timezone and its next midnight.
fn tenant_zone(args: &Args, stack_now: &impl Fn() -> u64) -> Result<(Timezone, u64)> {
    let campaign_ms = (args.scans as f64 / args.per_second * 1000.0) as u64;
    Ok(match &args.timezone {
        Some(name) => {
            let zone: Timezone = name.parse().map_err(anyhow::Error::msg)?;
            (zone, zone.next_midnight_ms(stack_now()))
        }
        None if args.no_rollover => {
            let zone = Timezone::default();
            (zone, zone.next_midnight_ms(stack_now()))
        }
        None => domain::tenants::zone_with_the_next_midnight(
            stack_now() + 30_000 + campaign_ms + args.rollover_margin_secs * 1000,
        ),
    })
}

/// What every step of the run works with: the stack, the sandbox, and the fresh tenant with
/// its plan.
struct Demo<'a> {
    args: &'a Args,
    world: &'a World,
    sandbox: &'a Sandbox,
    admin: &'a AdminApi,
    plan: &'a Plan,
    id: &'a Identity,
    tenant: TenantId,
    timezone: Timezone,
    cap: Option<u32>,
}

/// The tenant as seeded: the shift edge and each code's WeCom config id.
struct Seeded {
    edge_ms: u64,
    config_ids: BTreeMap<String, String>,
}

/// The campaign as the demo drove it.
struct CampaignRun {
    /// The sandbox's counters before it.
    before: sandbox::Stats,
    flips: Vec<Flip>,
    resignations: Vec<Resignation>,
    campaign: sandbox::Campaign,
}

/// What the demo read back from the sandbox and the table after the campaign.
struct Measured {
    stats: sandbox::Stats,
    scans: Vec<sandbox::Scan>,
    update_calls: Vec<sandbox::Call>,
    created_lists: HashMap<String, Vec<String>>,
    adds_counted: u64,
    claims: Vec<Claim>,
    limit_claims: Vec<LimitClaim>,
    notifications: Option<Vec<quota::Notification>>,
    refresh: Option<RefreshStats>,
    pushes: Vec<(String, Push)>,
    final_codes: Vec<FinalCode>,
    dead_letters: Vec<(String, u64)>,
    /// The limit crossings the delivered adds must have caused.
    expected: BTreeSet<Crossing>,
}

/// Everything the report is made of besides the demo's settings.
struct Outcome {
    seeded: Seeded,
    campaign: CampaignRun,
    walked: Option<bool>,
    drained: Drain,
    measured: Measured,
    rollover: Rollover,
    operator: Result<operator::Seen, String>,
    run_secs: f64,
}

impl Demo<'_> {
    fn announce(&self, midnight_ms: u64, stack_now: &impl Fn() -> u64) {
        let (args, world, id, plan) = (self.args, self.world, self.id, self.plan);
        say(format!(
            "stack {} (table {}), API {}, sandbox {}",
            world.stack, world.table, world.api_url, args.target.sandbox_url
        ));
        say(format!(
            "tenant {} (corp {}, timezone {}, next midnight {} from now), seed {}: {} staff, {} codes, {} scans at {}/s",
            id.tenant,
            id.corp_id,
            self.timezone,
            report::ms(midnight_ms.saturating_sub(stack_now())),
            args.seed,
            plan.staff.len(),
            plan.codes.len(),
            args.scans,
            args.per_second
        ));
    }

    /// The tenant, its staff and codes through the admin API, the corp in the sandbox; waits
    /// for the codes' first refreshes.
    async fn seed(&self, started: Instant, stack_now: &impl Fn() -> u64) -> Result<Seeded> {
        self.put_corp_and_tenant().await?;
        // Shifts: one edge for everybody, a whole minute (the tick's unit) shortly after seeding.
        let edge_ms =
            (stack_now() + self.args.shift_lead_secs * 1000).div_ceil(MINUTE_MS) * MINUTE_MS;
        self.put_staff(edge_ms).await?;
        let config_ids = self.put_codes().await?;
        let plan = self.plan;
        say(format!(
            "seeded through the admin API in {:.1} s: tenant (cap {}), {} staff online ({} with a shift edge at {} local), {} codes with their contact ways",
            started.elapsed().as_secs_f64(),
            self.cap.map_or("off".into(), |c| c.to_string()),
            plan.staff.len(),
            plan.shift_ends.len() + plan.shift_starts.len(),
            self.timezone.at(edge_ms).format("%H:%M"),
            config_ids.len()
        ));
        self.wait_for_the_first_refreshes().await?;
        Ok(Seeded {
            edge_ms,
            config_ids,
        })
    }

    async fn put_corp_and_tenant(&self) -> Result<()> {
        let (world, sandbox, id) = (self.world, self.sandbox, self.id);
        sandbox
            .set_delivery(self.args.retry_pause_ms, self.args.seed)
            .await?;
        let callback_url = format!("{}/wecom/{}/callback", world.api_url, id.tenant);
        sandbox
            .put_corp(
                &id.corp_id,
                &id.corp_secret,
                &self.plan.staff,
                &Callback {
                    url: &callback_url,
                    token: &id.token,
                    encoding_aes_key: &id.aes_key,
                },
            )
            .await?;
        self.admin
            .put(
                &format!("/tenants/{}", id.tenant),
                &json!({
                    "corp_id": id.corp_id,
                    "corp_secret": id.corp_secret,
                    "callback_token": id.token,
                    "encoding_aes_key": id.aes_key,
                    "timezone": self.timezone.name(),
                    "company_daily_cap": self.cap,
                }),
            )
            .await?
            .expect("PUT tenant", &[200, 201])?;
        Ok(())
    }

    /// Every staff member online; those with a shift edge with the shift it ends or starts.
    async fn put_staff(&self, edge_ms: u64) -> Result<()> {
        let (plan, timezone) = (self.plan, self.timezone);
        let schedule_of = |staff: &String| {
            if plan.shift_ends.contains(staff) {
                Some(json!({ "shifts": [shift(timezone, edge_ms - 3 * HOUR_MS, edge_ms)] }))
            } else if plan.shift_starts.contains(staff) {
                Some(json!({ "shifts": [shift(timezone, edge_ms, edge_ms + 6 * HOUR_MS)] }))
            } else {
                None
            }
        };
        futures::stream::iter(plan.staff.iter())
            .map(|staff| {
                let admin = self.admin;
                let path = format!("/tenants/{}/staff/{staff}", self.id.tenant);
                let body = match schedule_of(staff) {
                    Some(schedule) => json!({ "online": true, "schedule": schedule }),
                    None => json!({ "online": true }),
                };
                async move {
                    admin
                        .put(&path, &body)
                        .await?
                        .expect(&format!("PUT staff {staff}"), &[200, 201])
                }
            })
            .buffer_unordered(self.args.concurrency.max(1))
            .try_collect::<Vec<_>>()
            .await?;
        Ok(())
    }

    /// Every code; answers each code's WeCom config id.
    async fn put_codes(&self) -> Result<BTreeMap<String, String>> {
        futures::stream::iter(self.plan.codes.iter())
            .map(|code| {
                let admin = self.admin;
                let path = format!("/tenants/{}/codes/{}", self.id.tenant, code.id);
                let mut switches =
                    json!({ "offline_check": true, "daily_limit": code.daily_limit });
                if let Some(limit) = code.add_limit {
                    switches["add_limit"] = json!(limit);
                }
                let body = json!({
                    "family": "native",
                    "members": code.members,
                    "fallback": code.fallback,
                    "switches": switches,
                });
                async move {
                    let answer = admin
                        .put(&path, &body)
                        .await?
                        .expect(&format!("PUT code {}", code.id), &[201])?;
                    let config_id = answer
                        .get("config_id")
                        .and_then(Value::as_str)
                        .with_context(|| {
                            format!("PUT code {}: no config_id in {answer}", code.id)
                        })?;
                    Ok::<_, anyhow::Error>((code.id.clone(), config_id.to_owned()))
                }
            })
            .buffer_unordered(self.args.concurrency.max(1))
            .try_collect()
            .await
    }

    async fn wait_for_the_first_refreshes(&self) -> Result<()> {
        let settled = wait_drained(self.world, Duration::from_secs(120), 3).await?;
        let statuses: Vec<Value> = futures::stream::iter(self.plan.codes.iter())
            .map(|code| {
                let admin = self.admin;
                let path = format!("/tenants/{}/codes/{}", self.id.tenant, code.id);
                async move {
                    admin
                        .get(&path)
                        .await?
                        .expect(&format!("GET code {}", code.id), &[200])
                }
            })
            .buffer_unordered(self.args.concurrency.max(1))
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
        Ok(())
    }

    /// Starts the sandbox's campaign and drives it to its end (stopping it if driving failed).
    async fn campaign(&self, seeded: &Seeded) -> Result<CampaignRun> {
        let (sandbox, args) = (self.sandbox, self.args);
        let before = sandbox.stats().await?;
        let weighted: Vec<String> = self
            .plan
            .codes
            .iter()
            .flat_map(|code| std::iter::repeat_n(seeded.config_ids[&code.id].clone(), code.weight))
            .collect();
        let campaign_id = sandbox
            .start_campaign(
                &self.id.corp_id,
                &weighted,
                args.scans,
                args.per_second,
                args.duplicate_fraction,
            )
            .await?;
        say(format!("campaign {campaign_id} started"));
        let outcome = drive(
            self.world,
            sandbox,
            self.admin,
            self.plan,
            self.id,
            campaign_id,
            args.scans,
        )
        .await;
        let (flips, resignations, campaign) = match outcome {
            Ok(done) => done,
            Err(error) => {
                let _ = sandbox.stop_campaign(campaign_id).await;
                return Err(error);
            }
        };
        say(format!(
            "campaign finished: {} scans done, {} failures",
            campaign.done, campaign.failures
        ));
        Ok(CampaignRun {
            before,
            flips,
            resignations,
            campaign,
        })
    }

    /// The shift edge reaches the lists through the schedule tick alone: waits until it was
    /// walked (the tenant's shift item moved on past it). `None` when
    /// nobody has a schedule.
    async fn wait_for_the_shift_edge(
        &self,
        edge_ms: u64,
        stack_now: &impl Fn() -> u64,
    ) -> Result<Option<bool>> {
        let plan = self.plan;
        let scheduled: Vec<&String> = plan.shift_ends.iter().chain(&plan.shift_starts).collect();
        if scheduled.is_empty() {
            return Ok(None);
        }
        let deadline = edge_ms + self.args.tick_timeout_secs * 1000;
        let now = stack_now();
        say(format!(
            "waiting for the schedule tick to walk the shift edge ({} {})",
            report::ms(edge_ms.abs_diff(now)),
            if edge_ms > now { "from now" } else { "ago" }
        ));
        let mut walked = false;
        while !walked && stack_now() < deadline {
            let due = self
                .world
                .item_number(&self.tenant, &keys::due(&Subject::Shifts), "due_at_ms")
                .await?;
            walked = due.is_some_and(|d| d > edge_ms);
            if !walked {
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
        Ok(Some(walked))
    }

    /// A resignation whose lists had not all dropped the staff member during the campaign:
    /// WeCom removes them from the directory now.
    async fn drop_resigned_from_directory(&self, resignations: &mut [Resignation]) -> Result<()> {
        for resignation in resignations
            .iter_mut()
            .filter(|r| r.still_listed_on.is_none())
        {
            resignation.still_listed_on = Some(
                self.sandbox
                    .remove_user(&self.id.corp_id, &resignation.staff)
                    .await?,
            );
        }
        Ok(())
    }

    async fn measure(
        &self,
        seeded: &Seeded,
        run: &CampaignRun,
        stack_now: &impl Fn() -> u64,
    ) -> Result<Measured> {
        let (world, sandbox, corp_id, tenant) =
            (self.world, self.sandbox, &self.id.corp_id, &self.tenant);
        let stats = sandbox.stats().await?.since(&run.before);
        let scans = sandbox.scans(corp_id).await?;
        let update_calls = sandbox.calls(corp_id, "update_contact_way").await?;
        let created_lists = created_lists(&sandbox.calls(corp_id, "add_contact_way").await?);
        let contact_ways = sandbox.contact_ways(corp_id).await?;
        let store = &world.store;
        // Each code's all-time counter item: a count per member who had adds on it.
        let adds_counted = store
            .query_each_code(tenant, keys::code_adds_total)
            .await?
            .iter()
            .flat_map(|item| {
                item.keys()
                    .filter(|name| name.starts_with(keys::COUNT_PREFIX))
                    .filter_map(|name| item::n(item, name))
            })
            .sum();
        let claims = store
            .query_prefix(tenant, "CLAIM#add:")
            .await?
            .iter()
            .filter_map(Claim::from_item)
            .collect();
        let limit_claims = store
            .query_prefix(tenant, "REMOVED#")
            .await?
            .iter()
            .filter_map(LimitClaim::from_item)
            .collect();
        let notifications = match &world.quota_notifications {
            Some(url) => Some(
                quota::receive_notifications(world, url, &self.id.tenant, Duration::from_secs(3))
                    .await?,
            ),
            None => None,
        };
        let refresh_items = store.refresh_tallies(tenant, None).await?;
        let refresh = (!refresh_items.is_empty()).then(|| RefreshStats::from_items(&refresh_items));
        let pushes = push_log(world, tenant).await?;
        let final_codes = final_codes(
            world,
            tenant,
            self.plan,
            &seeded.config_ids,
            &contact_ways,
            stack_now(),
        )
        .await?;
        let mut dead_letters = Vec::new();
        for (name, url) in &world.dead_letters {
            dead_letters.push((name.clone(), world.queue_depth(url).await?));
        }
        let adds = quota::delivered_adds(&scans);
        let expected = quota::expected_crossings(&adds, self.plan, self.cap, self.timezone);
        Ok(Measured {
            stats,
            scans,
            update_calls,
            created_lists,
            adds_counted,
            claims,
            limit_claims,
            notifications,
            refresh,
            pushes,
            final_codes,
            dead_letters,
            expected,
        })
    }

    /// The day rollover, or why it did not run.
    async fn rollover_or_why_not(
        &self,
        clock: Option<&mut StackClock>,
        seeded: &Seeded,
        midnight_ms: u64,
        run: &CampaignRun,
        measured: &Measured,
    ) -> Result<Rollover> {
        if self.args.no_rollover {
            return Ok(Rollover {
                skipped: Some("left out (--no-rollover)".into()),
                left_out: true,
                ..Rollover::default()
            });
        }
        let Some(clock) = clock else {
            return Ok(Rollover {
                skipped: Some(format!(
                    "the stack has no controllable clock ({} on its functions)",
                    adapters::clock::CLOCK_OFFSET_VAR
                )),
                ..Rollover::default()
            });
        };
        let mut context = RolloverContext {
            world: self.world,
            sandbox: self.sandbox,
            tenant: &self.tenant,
            corp_id: &self.id.corp_id,
            plan: self.plan,
            config_ids: &seeded.config_ids,
            timezone: self.timezone,
            midnight_ms,
            expected: &measured.expected,
            flips: &run.flips,
            resignations: &run.resignations,
            args: self.args,
        };
        day_rollover(&mut context, clock).await
    }

    /// Prints the report; true when every must-be line passed.
    fn print_report(&self, outcome: Outcome) -> bool {
        let Outcome {
            seeded,
            campaign,
            walked,
            drained,
            measured,
            rollover,
            operator,
            run_secs,
        } = outcome;
        let plan = self.plan;
        report::print(&Inputs {
            plan,
            tenant: &self.id.tenant,
            seed: self.args.seed,
            timezone: self.timezone,
            company_daily_cap: self.cap,
            scans_planned: self.args.scans,
            per_second: self.args.per_second,
            config_ids: &seeded.config_ids,
            flips: &campaign.flips,
            resignations: &campaign.resignations,
            shifts: Shifts {
                edge_ms: seeded.edge_ms,
                ends: plan.shift_ends.clone(),
                starts: plan.shift_starts.clone(),
                walked,
            },
            stats: measured.stats,
            campaign: campaign.campaign,
            scans: measured.scans,
            update_calls: measured.update_calls,
            created_lists: measured.created_lists,
            adds_counted: measured.adds_counted,
            claims: measured.claims,
            expected_crossings: measured.expected,
            limit_claims: measured.limit_claims,
            notifications: measured.notifications,
            refresh: measured.refresh,
            pushes: measured.pushes,
            final_codes: measured.final_codes,
            dead_letters: measured.dead_letters,
            drained,
            rollover,
            operator,
            run_secs,
        })
    }
}

/// The push log of the tenant: (code, push).
async fn push_log(world: &World, tenant: &TenantId) -> Result<Vec<(String, Push)>> {
    Ok(world
        .store
        .query_each_code(tenant, |code| keys::push_log_prefix(Some(code)))
        .await?
        .iter()
        .filter_map(Push::from_item)
        .collect())
}

/// Every code's recompute of the facts at `now_ms` (the stack's time) beside WeCom's list.
async fn final_codes(
    world: &World,
    tenant: &TenantId,
    plan: &Plan,
    config_ids: &BTreeMap<String, String>,
    contact_ways: &[sandbox::ContactWay],
    now_ms: u64,
) -> Result<Vec<FinalCode>> {
    let sandbox_lists: HashMap<&str, &Vec<String>> = contact_ways
        .iter()
        .map(|w| (w.config_id.as_str(), &w.user))
        .collect();
    let names = |users: &[StaffId]| {
        users
            .iter()
            .map(|u| u.as_str().to_owned())
            .collect::<Vec<_>>()
    };
    let mut final_codes = Vec::new();
    for code in &plan.codes {
        let snapshot = world
            .store
            .snapshot(tenant, &CodeId::parse(&code.id)?, now_ms)
            .await?
            .with_context(|| format!("code {} is not in the table", code.id))?;
        let membership = snapshot.recompute();
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
    Ok(final_codes)
}

/// Follows the campaign to its end, taking staff offline and having staff resign at their
/// planned points.
async fn drive(
    world: &World,
    sandbox: &Sandbox,
    admin: &AdminApi,
    plan: &Plan,
    id: &Identity,
    campaign_id: u64,
    total: u64,
) -> Result<(Vec<Flip>, Vec<Resignation>, sandbox::Campaign)> {
    let mut flips = Vec::new();
    let mut resignations: Vec<Resignation> = Vec::new();
    let mut pending = plan.offline.iter().peekable();
    let mut resigning = plan.resign.iter().peekable();
    let started = Instant::now();
    let mut last_progress = Instant::now();
    let mut last_lists = Instant::now();
    loop {
        let campaign = sandbox.campaign(campaign_id).await?;
        let due = |f: &&plan::OfflineFlip| campaign.started as f64 >= f.at_fraction * total as f64;
        while let Some(flip) = pending.next_if(due) {
            flips.push(take_offline(admin, plan, id, flip, campaign.started).await?);
        }
        while let Some(resign) = resigning.next_if(due) {
            resignations.push(resign_by_callback(sandbox, id, resign, campaign.started).await?);
        }
        if resignations.iter().any(|r| r.off_lists_ms.is_none())
            && last_lists.elapsed() >= Duration::from_secs(1)
        {
            last_lists = Instant::now();
            let ways = sandbox.contact_ways(&id.corp_id).await?;
            for resignation in resignations.iter_mut().filter(|r| r.off_lists_ms.is_none()) {
                if ways.iter().all(|w| !w.user.contains(&resignation.staff)) {
                    resignation.off_lists_ms = Some(sandbox.now_ms().await?);
                    resignation.still_listed_on =
                        Some(sandbox.remove_user(&id.corp_id, &resignation.staff).await?);
                }
            }
        }
        if !campaign.running {
            if campaign.started < campaign.total {
                bail!(
                    "campaign {campaign_id} stopped after {} of {} scans",
                    campaign.started,
                    campaign.total
                );
            }
            return Ok((flips, resignations, campaign));
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

/// Takes `flip`'s staff member offline through the admin API, `started` scans into the
/// campaign.
async fn take_offline(
    admin: &AdminApi,
    plan: &Plan,
    id: &Identity,
    flip: &plan::OfflineFlip,
    started: u64,
) -> Result<Flip> {
    let sent_ms = real_now_ms();
    let answer = admin
        .put(
            &format!("/tenants/{}/staff/{}", id.tenant, flip.staff),
            &json!({ "online": false }),
        )
        .await?
        .expect(&format!("PUT staff {} offline", flip.staff), &[200, 201])?;
    let acked_ms = real_now_ms();
    // The fan-out function sends the reasons after the answer: the plan says how many.
    answer
        .get("fan_out")
        .and_then(Value::as_str)
        .with_context(|| format!("PUT staff {}: no fan_out in {answer}", flip.staff))?;
    let codes_refreshed = Some(plan.codes_of(&flip.staff).len() as u64);
    say(format!(
        "{} taken offline after {} scans (acknowledged in {} ms, {} codes to refresh)",
        flip.staff,
        started,
        acked_ms - sent_ms,
        codes_refreshed.map_or("?".into(), |n| n.to_string())
    ));
    Ok(Flip {
        staff: flip.staff.clone(),
        sent_ms,
        acked_ms,
        codes_refreshed,
    })
}

/// Has `resign`'s staff member resign: WeCom's `delete_user` callback, `started` scans into the
/// campaign.
async fn resign_by_callback(
    sandbox: &Sandbox,
    id: &Identity,
    resign: &plan::OfflineFlip,
    started: u64,
) -> Result<Resignation> {
    // WeCom tells the corp's callback that the member was deleted; once no list
    // names them any more, WeCom's directory drops them too (drive watches for it).
    let sent_ms = sandbox.now_ms().await?;
    let delivered = sandbox
        .deliver_event(
            &id.corp_id,
            &[
                ("Event", "change_contact"),
                ("ChangeType", "delete_user"),
                ("UserID", resign.staff.as_str()),
            ],
        )
        .await?;
    say(format!(
        "{} resigned after {} scans (delete_user callback {})",
        resign.staff,
        started,
        if delivered {
            "delivered"
        } else {
            "NOT delivered"
        }
    ));
    Ok(Resignation {
        staff: resign.staff.clone(),
        sent_ms,
        delivered,
        off_lists_ms: None,
        still_listed_on: None,
    })
}

struct RolloverContext<'a> {
    world: &'a World,
    sandbox: &'a Sandbox,
    tenant: &'a TenantId,
    corp_id: &'a str,
    plan: &'a Plan,
    config_ids: &'a BTreeMap<String, String>,
    timezone: Timezone,
    midnight_ms: u64,
    expected: &'a BTreeSet<Crossing>,
    flips: &'a [Flip],
    resignations: &'a [Resignation],
    args: &'a Args,
}

/// Jumps the stack's clock to just before the tenant's midnight, waits for the tick to roll
/// the day over, measures, and puts the clock back (also when something failed).
async fn day_rollover(ctx: &mut RolloverContext<'_>, clock: &mut StackClock) -> Result<Rollover> {
    let base = clock.offset_secs();
    let mut rollover = Rollover {
        midnight_ms: ctx.midnight_ms,
        ..Rollover::default()
    };
    if ctx
        .world
        .item_number(ctx.tenant, &keys::due(&Subject::Midnight), "due_at_ms")
        .await?
        .is_none()
    {
        rollover.skipped = Some(
            "the tenant has no midnight due item (DUE#MIDNIGHT): the stack does not schedule day rollovers".into(),
        );
        return Ok(rollover);
    }
    let target_ms = ctx.midnight_ms - ctx.args.before_midnight_secs * 1000;
    if clock.now_ms() >= target_ms {
        rollover.skipped = Some(format!(
            "the run reached the tenant's midnight before the jump (raise --rollover-margin-secs above {})",
            ctx.args.rollover_margin_secs
        ));
        return Ok(rollover);
    }
    let measured = rollover_measured(ctx, clock, &mut rollover, target_ms).await;
    if let Err(error) = clock.set(ctx.world, ctx.sandbox, base).await {
        rollover.restore_error = Some(format!("{error:#}"));
    } else {
        say(format!("clock restored (offset {base} s)"));
    }
    measured.map(|()| rollover)
}

async fn rollover_measured(
    ctx: &mut RolloverContext<'_>,
    clock: &mut StackClock,
    rollover: &mut Rollover,
    target_ms: u64,
) -> Result<()> {
    rollover.expected_back = expected_back(ctx);
    jump_and_wait_for_the_tick(ctx, clock, rollover, target_ms).await?;
    read_back_the_new_day(ctx, clock, rollover).await
}

fn expected_back(ctx: &RolloverContext<'_>) -> Vec<(String, String)> {
    let day = tenant_day(ctx.midnight_ms - 1, ctx.timezone);
    // Who must come back: every (code, staff) pair of a member removed on the day that ends
    // for the code's daily limit or the cap, unless something else still keeps them off
    // (offline, resigned, off shift, the code's all-time add limit).
    let kept_off: BTreeSet<&str> = ctx
        .flips
        .iter()
        .map(|f| f.staff.as_str())
        .chain(ctx.resignations.iter().map(|r| r.staff.as_str()))
        .chain(ctx.plan.shift_ends.iter().map(String::as_str))
        .collect();
    let over_add_limit: BTreeSet<(&str, &str)> = ctx
        .expected
        .iter()
        .filter(|c| c.limit == quota::CODE_TOTAL)
        .filter_map(|c| Some((c.code.as_deref()?, c.staff.as_str())))
        .collect();
    let mut expected_back = BTreeSet::new();
    for crossing in ctx.expected.iter().filter(|c| c.day == day) {
        if kept_off.contains(crossing.staff.as_str()) {
            continue;
        }
        let codes: Vec<&str> = match (crossing.limit.as_str(), &crossing.code) {
            (quota::CODE_DAILY, Some(code)) => ctx
                .plan
                .code(code)
                .filter(|c| c.members.contains(&crossing.staff))
                .map(|c| vec![c.id.as_str()])
                .unwrap_or_default(),
            (quota::COMPANY_DAILY, _) => ctx
                .plan
                .member_of(&crossing.staff)
                .iter()
                .map(|c| c.id.as_str())
                .collect(),
            _ => Vec::new(),
        };
        for code in codes {
            if !over_add_limit.contains(&(code, crossing.staff.as_str())) {
                expected_back.insert((code.to_owned(), crossing.staff.clone()));
            }
        }
    }
    expected_back.into_iter().collect()
}

/// Moves the clock to `target_ms`, waits for the tick to move the midnight item on, and for
/// the queues to drain.
async fn jump_and_wait_for_the_tick(
    ctx: &RolloverContext<'_>,
    clock: &mut StackClock,
    rollover: &mut Rollover,
    target_ms: u64,
) -> Result<()> {
    let world = ctx.world;
    let delta_secs = i64::try_from((target_ms - clock.now_ms()) / 1000)?;
    rollover.jump_secs = delta_secs;
    let started = Instant::now();
    clock
        .set(world, ctx.sandbox, clock.offset_secs() + delta_secs)
        .await?;
    rollover.jumped_to_ms = clock.now_ms();
    say(format!(
        "clock moved {delta_secs} s forward (functions and WeCom) in {:.1} s: {} in {}, {} before midnight; waiting for the schedule tick",
        started.elapsed().as_secs_f64(),
        ctx.timezone.at(rollover.jumped_to_ms).format("%H:%M:%S"),
        ctx.timezone,
        report::ms(ctx.midnight_ms.saturating_sub(rollover.jumped_to_ms))
    ));
    let deadline = Instant::now() + Duration::from_secs(ctx.args.tick_timeout_secs);
    while Instant::now() < deadline {
        let due = world
            .item_number(ctx.tenant, &keys::due(&Subject::Midnight), "due_at_ms")
            .await?;
        if due.is_some_and(|d| d > ctx.midnight_ms) {
            rollover.tick_secs = Some(started.elapsed().as_secs_f64());
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    rollover.drained = wait_drained(world, Duration::from_secs(60), 3)
        .await?
        .drained;
    say(format!(
        "day rolled over {}; queues drained",
        rollover.tick_secs.map_or(
            "NOT (the midnight item never moved on)".into(),
            |s| format!("{s:.0} s after the jump")
        )
    ));
    Ok(())
}

/// Who is back on which list, the pushes serving midnight, the new day's counters, and the
/// lists against the recompute at the new day.
async fn read_back_the_new_day(
    ctx: &RolloverContext<'_>,
    clock: &StackClock,
    rollover: &mut Rollover,
) -> Result<()> {
    let world = ctx.world;
    let contact_ways = ctx.sandbox.contact_ways(ctx.corp_id).await?;
    let lists: HashMap<&str, &Vec<String>> = contact_ways
        .iter()
        .map(|w| (w.config_id.as_str(), &w.user))
        .collect();
    rollover.back = rollover
        .expected_back
        .iter()
        .filter(|(code, staff)| {
            lists
                .get(ctx.config_ids[code].as_str())
                .is_some_and(|users| users.contains(staff))
        })
        .cloned()
        .collect();
    for (code, push) in push_log(world, ctx.tenant).await? {
        if push.pushed_at_ms < rollover.jumped_to_ms {
            continue;
        }
        if push.pushed_at_ms < ctx.midnight_ms {
            rollover.pushes_before_midnight += 1;
        } else if push.fact_at_ms.contains(&ctx.midnight_ms) {
            rollover.pushes.push((code, push.pushed_at_ms));
        }
    }
    let new_day = tenant_day(ctx.midnight_ms, ctx.timezone);
    let shards = world
        .store
        .refresh_tallies(ctx.tenant, Some(&new_day))
        .await?;
    rollover.new_day = (!shards.is_empty()).then(|| {
        let sum = |name| -> u64 { shards.iter().filter_map(|item| item::n(item, name)).sum() };
        (sum("reasons"), sum("recomputes"), sum("pushes"))
    });
    let finals = final_codes(
        world,
        ctx.tenant,
        ctx.plan,
        ctx.config_ids,
        &contact_ways,
        clock.now_ms(),
    )
    .await?;
    rollover.codes = finals.len();
    rollover.differ = report::differing(&finals).0;
    Ok(())
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
