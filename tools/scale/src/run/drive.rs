//! The stretch, second by second (see `run`).

use super::RunOptions;
use crate::happenings::{Happening, Happenings, BREAK_MS};
use crate::measure::{routed_member, EndedWithoutPush, Measure, Routed, TrueAdds};
use crate::memory;
use crate::observe::Trace;
use crate::platform::{self, code_of_config};
use crate::population::Population;
use crate::ports::store::MeteredStore;
use crate::profile::Profile;
use crate::services::clock;
use crate::services::dynamodb::{
    DynamoConfig, DynamoDb, KeyPattern, Peak, Splits, Usage as DynamoUsage,
};
use crate::services::lambda::FunctionCounters;
use crate::services::scheduler::ScheduleCounters;
use crate::services::sqs::{QueueCounters, QueueSample};
use crate::services::wecom::WeComCounters;
use crate::settings::Settings;
use crate::world::{CallbackAnswer, SweepTotals, World, WorldOptions};
use anyhow::Context;
use chrono::{DateTime, TimeZone, Timelike, Utc};
use chrono_tz::Tz;
use domain::admin::{PutStaff, StaffChange};
use domain::codes::CodeFacts;
use domain::facts::{QuotaLedger, StaffLedger};
use domain::fakes::InMemoryStore;
use domain::ids::{CodeId, StaffId, TenantId};
use domain::intake::InboxMessage;
use domain::membership::{limits_reached, Employment, Membership, TenantRules};
use domain::wecom::callback::{write_flat_xml, CallbackEvent, Envelope};
use domain::wecom::crypto::CallbackCrypto;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// WeCom retries a callback that got no 200 this many times, this far apart [assumption:
/// WeCom documents retries, not their spacing].
const CALLBACK_TRIES: u32 = 3;
const CALLBACK_RETRY_AFTER: Duration = Duration::from_secs(5);
/// How often queue depths and the tick's cursor are sampled.
const SAMPLE_EVERY_MS: u64 = 60_000;

/// What a stretch did, for the report.
pub struct Outcome {
    pub seed: u64,
    pub start_ms: u64,
    pub end_ms: u64,
    pub settled_ms: u64,
    pub tenants: usize,
    /// The simulated tenants' share of the platform's scans (1 with every tenant).
    pub scan_share: f64,
    pub codes: u64,
    pub staff: u64,
    pub class_names: Vec<String>,
    /// The tenants the campaign's scans go to (the others are judged beside their quiet day).
    pub campaign_tenants: HashSet<TenantId>,
    pub measure: Measure,
    pub waiting_at_end: u64,
    /// Codes checked at the end, and those whose WeCom list differs from the recompute.
    pub checked: u64,
    pub differ: u64,
    pub happened: Happened,
    pub functions: Vec<(String, FunctionCounters)>,
    pub concurrency: Vec<(String, Vec<(u64, u32)>)>,
    pub queues: Vec<(String, QueueCounters)>,
    pub depths: Vec<(String, Vec<QueueSample>)>,
    pub dynamo: DynamoUsage,
    pub dynamo_by_minute: Vec<(u64, DynamoUsage)>,
    pub throttles: BTreeMap<KeyPattern, u64>,
    pub splits: Splits,
    /// The table's and indexes' warm throughput and quotas the stretch ran with (the
    /// profile's).
    pub dynamo_config: DynamoConfig,
    /// The busiest second's units, for the table (`"table"`) and each index.
    pub dynamo_peaks: BTreeMap<String, Peak>,
    /// The stretch's units per space and kind of sort key (`table STAFF#*`).
    pub dynamo_by_kind: BTreeMap<String, Peak>,
    pub wecom: WeComCounters,
    /// Per size class: tenants WeCom answered 45009 at least once, and those answers.
    pub refused_by_class: Vec<(u64, u64)>,
    pub sweep: SweepTotals,
    pub schedules: Vec<(String, ScheduleCounters)>,
    /// Each sample: (minute's start, minutes the tick's cursor is behind, facts waiting, the
    /// oldest waiting fact's age in ms).
    pub timeline: Vec<(u64, u64, u64, u64)>,
    /// The usage counted by each minute's start, from the stretch's start to the end of
    /// settling: the month's cost tells the day's usual minutes from the waves' by it.
    pub usage_by_minute: Vec<UsageSoFar>,
    /// The simulated tenants' staff by zone, and on each of the profile's shifts: what the
    /// day's shift edges and midnights move, for weighing the stretch's against the day's.
    pub staff_by_zone: Vec<ZoneStaff>,
    /// Why the run stopped before the stretch's end, if it did.
    pub stopped: Option<String>,
    pub load_seconds: f64,
    pub wall_seconds: f64,
    pub peak_resident_bytes: u64,
}

/// What happened outside qrsync, counted.
#[derive(Debug, Clone, Default)]
pub struct Happened {
    pub scans: u64,
    pub scans_nowhere: u64,
    pub adds: u64,
    pub breaks: u64,
    pub resignations: u64,
    pub moves: u64,
    pub callbacks_retried: u64,
    pub callbacks_lost: u64,
    pub admin_failures: u64,
    /// A break is two flips, offline then online; those done (a break's end may fall after
    /// the stretch).
    pub staff_flips: u64,
    pub reasons: ReasonsMade,
}

/// The changes the day's activity made the lists owe, by what made them: the month's cost
/// weighs each by how often it happens in a day (`report::month`). Counted as the measure
/// counts facts (a flip's on the staff member's codes with the offline check, a resignation's
/// on all their codes), and an add's own reason with the facts of the limits it crossed.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReasonsMade {
    pub by_adds: u64,
    pub by_flips: u64,
    pub by_resignations: u64,
}

impl ReasonsMade {
    pub fn total(&self) -> u64 {
        self.by_adds + self.by_flips + self.by_resignations
    }
}

/// Everything counted by one instant, from the stretch's start.
#[derive(Debug, Clone)]
pub struct UsageSoFar {
    pub at_ms: u64,
    pub happened: Happened,
    /// WeCom calls accepted so far: the refresh logs one `info` line per push.
    pub wecom_accepted: u64,
    pub queues: Vec<(String, QueueCounters)>,
    pub functions: Vec<(String, FunctionCounters)>,
}

/// One zone's staff among the simulated tenants: all of them, and those on each of the
/// profile's shifts (in the profile's order).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZoneStaff {
    pub zone: Tz,
    pub staff: u64,
    pub on_shift: Vec<u64>,
}

/// The truth the measure judges routing against: adds as they happened, and who resigned.
#[derive(Default)]
struct Truth {
    adds: TrueAdds,
    resigned: HashSet<(TenantId, StaffId)>,
}

struct Shared {
    measure: Mutex<Measure>,
    truth: Mutex<Truth>,
    happened: Mutex<Happened>,
    /// Happenings still under way outside qrsync (a customer about to add, a break not over,
    /// WeCom retrying a callback): the stretch is not drained while any is.
    under_way: std::sync::atomic::AtomicU64,
}

impl Shared {
    /// Runs `work` as a task counted as under way until it ends.
    fn spawn(self: &Arc<Self>, work: impl std::future::Future<Output = ()> + Send + 'static) {
        use std::sync::atomic::Ordering::SeqCst;
        self.under_way.fetch_add(1, SeqCst);
        let shared = Arc::clone(self);
        tokio::spawn(async move {
            work.await;
            shared.under_way.fetch_sub(1, SeqCst);
        });
    }

    fn quiet(&self) -> bool {
        self.under_way.load(std::sync::atomic::Ordering::SeqCst) == 0
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A tenant as the driver needs it: its id, corp, class, zone and who works which shift.
struct TenantView {
    id: TenantId,
    corp: String,
    zone: Tz,
    rules: TenantRules,
    by_shift: Vec<Vec<u32>>,
}

pub(super) async fn drive(
    profile: &Profile,
    population: &Population,
    settings: Settings,
    options: &RunOptions,
) -> anyhow::Result<Outcome> {
    let wall = std::time::Instant::now();
    let zone = profile.campaign.timezone;
    let stretch = &options.stretch;
    let local = |time| {
        zone.from_local_datetime(&stretch.date.and_time(time))
            .earliest()
            .map(|t| t.with_timezone(&Utc))
            .context("the stretch's times exist in the campaign's zone")
    };
    let (start, until) = (local(stretch.from)?, local(stretch.until)?);
    anyhow::ensure!(until > start, "the stretch must end after it starts");
    let start_ms = u64::try_from(start.timestamp_millis())?;
    let end_ms = u64::try_from(until.timestamp_millis())?;
    clock::start_at(start_ms);

    let shared = Arc::new(Shared {
        measure: Mutex::new(
            Measure::new(start_ms, profile.size_class.len(), code_of_config).with_budget(
                settings.refresh.budget.per_minute,
                settings.refresh.budget.per_hour,
            ),
        ),
        truth: Mutex::new(Truth::default()),
        happened: Mutex::new(Happened::default()),
        under_way: std::sync::atomic::AtomicU64::new(0),
    });
    let sink = Arc::clone(&shared);
    let trace = Arc::new(Trace::keeping(move |seen| lock(&sink.measure).seen(seen)));
    let data = InMemoryStore::without_history();
    // The production table's warm throughput, from the profile: not a new table's; and the
    // account's quota on it and on each index, from the profile too.
    let dynamo_config = DynamoConfig {
        table: profile.dynamodb.table(),
        index: profile.dynamodb.index(),
        table_quota: profile.dynamodb.table_quota(),
        index_quota: profile.dynamodb.index_quota(),
        ..DynamoConfig::default()
    };
    let dynamo = Arc::new(DynamoDb::new(dynamo_config, options.seed));
    let store = MeteredStore::new(data.clone(), Arc::clone(&dynamo), Arc::clone(&trace));

    let loading = std::time::Instant::now();
    let mut tenants = Vec::with_capacity(population.tenants.len());
    let (mut codes, mut staff) = (0u64, 0u64);
    let mut names = platform::Names::default();
    for tenant in &population.tenants {
        let loaded = platform::load_tenant(&data, profile, tenant, start_ms, &mut names);
        lock(&shared.measure).tenant(&loaded.id, tenant.class, loaded.codes.len() as u64);
        codes += loaded.codes.len() as u64;
        staff += u64::from(tenant.staff);
        let mut by_shift = vec![Vec::new(); profile.shift.len()];
        for index in 0..tenant.staff {
            if let Some(shift) = tenant.staff_member(profile, index).shift {
                by_shift[shift].push(index);
            }
        }
        tenants.push(TenantView {
            id: loaded.id,
            corp: platform::corp_id(tenant),
            zone: tenant.timezone,
            rules: TenantRules {
                company_daily_cap: tenant.company_cap,
            },
            by_shift,
        });
    }
    let load_seconds = loading.elapsed().as_secs_f64();
    let staff_by_zone = staff_by_zone(population, &tenants, profile.shift.len());
    let tenants = Arc::new(tenants);

    let world_options = WorldOptions {
        seed: options.seed,
        trace: Arc::clone(&trace),
        ..WorldOptions::default()
    };
    let mut world = World::build(settings, store, world_options)?;
    world.start()?;
    let world = Arc::new(world);
    let sampler = world
        .sqs
        .spawn_sampler(Duration::from_millis(SAMPLE_EVERY_MS));
    let mut happenings = Happenings::new(profile, population, options.seed);
    let mut timeline = Vec::new();
    let mut usage_by_minute = Vec::new();
    let mut zones: Vec<Tz> = tenants.iter().map(|t| t.zone).collect();
    zones.sort_by_key(|z| z.name());
    zones.dedup();

    let mut now_ms = start_ms;
    let mut stopped = None;
    while now_ms < end_ms {
        let at = at_ms(now_ms);
        if now_ms % 60_000 == 0 {
            shift_edges(profile, &tenants, &zones, &data, &shared, at, now_ms).await;
            let sampled = sample(&data, &shared, now_ms);
            usage_by_minute.push(usage_so_far(&world, &shared, now_ms));
            if (now_ms - start_ms) % (5 * 60_000) == 0 {
                progress(&world, zone, sampled, wall.elapsed());
            }
            timeline.push(sampled);
            stopped = over_memory(
                options,
                &format!("stopped at {}", at.with_timezone(&zone).format("%H:%M")),
                "what the stretch held until then is reported, nothing was left to settle",
            );
            if stopped.is_some() {
                break;
            }
        }
        for timed in happenings.second(at) {
            let instant_ms = now_ms + u64::from(timed.after_ms);
            tokio::time::sleep_until(
                tokio::time::Instant::now()
                    + Duration::from_millis(instant_ms.saturating_sub(clock::now_ms())),
            )
            .await;
            happen(timed.happening, &world, &data, &tenants, &shared, options).await;
        }
        settle_ended(&world, &data, &shared).await;
        now_ms += 1_000;
        tokio::time::sleep_until(
            tokio::time::Instant::now()
                + Duration::from_millis(now_ms.saturating_sub(clock::now_ms())),
        )
        .await;
    }
    let end_ms = if stopped.is_some() {
        clock::now_ms()
    } else {
        end_ms
    };
    let settled_ms = if stopped.is_some() {
        end_ms
    } else {
        end_ms + u64::try_from(stretch.settle.as_millis())?
    };
    while clock::now_ms() < settled_ms {
        if clock::now_ms() % 60_000 < 1_000 {
            timeline.push(sample(&data, &shared, clock::now_ms()));
            usage_by_minute.push(usage_so_far(&world, &shared, clock::now_ms()));
            stopped = over_memory(
                options,
                &format!(
                    "stopped settling at {}",
                    at_ms(clock::now_ms()).with_timezone(&zone).format("%H:%M")
                ),
                "the whole stretch ran; what was still queued or waiting then is reported as such",
            );
            if stopped.is_some() {
                break;
            }
        }
        settle_ended(&world, &data, &shared).await;
        if drained(&world, &shared) {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let settled_ms = clock::now_ms();
    settle_ended(&world, &data, &shared).await;
    world.stop();
    sampler.abort();

    let (checked, differ) = end_check(&world, &data, &shared).await;
    let waiting_at_end = lock(&shared.measure).close(settled_ms);
    let functions: Vec<(String, FunctionCounters)> = world
        .settings
        .functions
        .keys()
        .filter_map(|name| Some((name.clone(), world.account.counters(name).ok()?)))
        .collect();
    let concurrency = world
        .settings
        .functions
        .keys()
        .filter_map(|name| {
            Some((
                name.clone(),
                world.account.concurrency_by_second(name).ok()?,
            ))
        })
        .collect();
    let queues = world
        .settings
        .queues
        .keys()
        .filter_map(|name| Some((name.clone(), world.sqs.counters(name).ok()?)))
        .collect();
    let depths = world
        .settings
        .queues
        .keys()
        .filter_map(|name| Some((name.clone(), world.sqs.samples(name).ok()?)))
        .collect();
    let schedules = world
        .schedules
        .iter()
        .map(|(name, schedule)| (name.clone(), schedule.counters()))
        .collect();
    let mut dynamo_by_minute: BTreeMap<u64, DynamoUsage> = BTreeMap::new();
    for (second, usage) in dynamo.by_second() {
        dynamo_by_minute
            .entry(second / 60 * 60_000)
            .or_default()
            .absorb(&usage);
    }
    let wecom = world.wecom.service().counters();
    let sweep = lock(&world.sweeps).clone();
    let happened = lock(&shared.happened).clone();
    drop(world);
    // Tasks still waiting (a callback's retry, a break's end) hold the trace: take what the
    // measure gathered, not the measure's owner.
    let measure = std::mem::replace(
        &mut *lock(&shared.measure),
        Measure::new(start_ms, 0, code_of_config),
    );
    let mut refused_by_class = vec![(0, 0); profile.size_class.len()];
    let tenant_of_corp: HashMap<&str, &TenantId> =
        tenants.iter().map(|t| (t.corp.as_str(), &t.id)).collect();
    for (corp, answers) in &wecom.refused_by_corp {
        let class = tenant_of_corp
            .get(corp.as_str())
            .and_then(|tenant| measure.class_of(tenant));
        if let Some(figures) = class.and_then(|class| refused_by_class.get_mut(class)) {
            figures.0 += 1;
            figures.1 += answers;
        }
    }
    Ok(Outcome {
        seed: options.seed,
        start_ms,
        end_ms,
        settled_ms,
        tenants: tenants.len(),
        scan_share: population
            .tenants
            .iter()
            .map(|t| t.scan_share(profile))
            .sum(),
        codes,
        staff,
        class_names: profile.size_class.iter().map(|c| c.name.clone()).collect(),
        campaign_tenants: population
            .tenants
            .iter()
            .filter(|t| t.campaign_scan_share > 0.0)
            .map(platform::tenant_id)
            .collect(),
        measure,
        waiting_at_end,
        checked,
        differ,
        happened,
        functions,
        concurrency,
        queues,
        depths,
        dynamo: dynamo.total(),
        dynamo_by_minute: dynamo_by_minute.into_iter().collect(),
        throttles: dynamo.throttles_by_pattern(),
        splits: dynamo.splits(),
        dynamo_config,
        dynamo_peaks: dynamo.peaks(),
        dynamo_by_kind: dynamo.served_by_kind(),
        wecom,
        refused_by_class,
        sweep,
        schedules,
        timeline,
        usage_by_minute,
        staff_by_zone,
        stopped,
        load_seconds,
        wall_seconds: wall.elapsed().as_secs_f64(),
        peak_resident_bytes: memory::peak_resident_bytes(),
    })
}

/// Why the run stops, once its resident memory is past `--max-memory-gb`: `when` it stopped,
/// and what the report then holds.
fn over_memory(options: &RunOptions, when: &str, reported: &str) -> Option<String> {
    let resident = memory::resident_bytes();
    (resident > options.memory_limit_bytes).then(|| {
        format!(
            "{when} with {:.1} GB resident, over the run's limit of {:.1} GB (--max-memory-gb): {reported}",
            resident as f64 / 1e9,
            options.memory_limit_bytes as f64 / 1e9
        )
    })
}

/// Nothing under way outside qrsync, no message in a queue a function consumes (dead letters
/// and the platform's quota events stay where they are), no fact waiting.
fn drained(world: &World<MeteredStore>, shared: &Shared) -> bool {
    let consumed = |queue: &str| {
        world
            .settings
            .functions
            .values()
            .any(|f| f.queue_sources.iter().any(|source| source.queue == queue))
    };
    shared.quiet()
        && lock(&shared.measure).waiting_now(0).0 == 0
        && world
            .sqs
            .sample()
            .iter()
            .filter(|(queue, _)| consumed(queue))
            .all(|(_, s)| s.visible + s.in_flight + s.delayed == 0)
}

/// A line on stderr every five simulated minutes, for whoever waits on a long run.
fn progress(world: &World<MeteredStore>, zone: Tz, sampled: (u64, u64, u64, u64), wall: Duration) {
    let (at, behind, waiting, oldest) = sampled;
    let queued: usize = world
        .sqs
        .sample()
        .iter()
        .map(|(_, s)| s.visible + s.in_flight + s.delayed)
        .sum();
    eprintln!(
        "{} after {:.0} s: {waiting} facts waiting (oldest {} s), {queued} messages queued, the tick {behind} min behind",
        at_ms(at).with_timezone(&zone).format("%H:%M"),
        wall.as_secs_f64(),
        oldest / 1000
    );
}

/// The usage counted so far, every queue's and function's (in the template's order).
fn usage_so_far(world: &World<MeteredStore>, shared: &Shared, now_ms: u64) -> UsageSoFar {
    UsageSoFar {
        at_ms: now_ms,
        happened: lock(&shared.happened).clone(),
        wecom_accepted: world.wecom.service().counters().accepted,
        queues: world
            .settings
            .queues
            .keys()
            .filter_map(|name| Some((name.clone(), world.sqs.counters(name).ok()?)))
            .collect(),
        functions: world
            .settings
            .functions
            .keys()
            .filter_map(|name| Some((name.clone(), world.account.counters(name).ok()?)))
            .collect(),
    }
}

/// The tenants' staff summed by zone, in all and on each shift.
fn staff_by_zone(population: &Population, tenants: &[TenantView], shifts: usize) -> Vec<ZoneStaff> {
    let mut zones: Vec<ZoneStaff> = Vec::new();
    for (figures, view) in population.tenants.iter().zip(tenants) {
        let at = match zones.iter().position(|z| z.zone == view.zone) {
            Some(at) => at,
            None => {
                zones.push(ZoneStaff {
                    zone: view.zone,
                    staff: 0,
                    on_shift: vec![0; shifts],
                });
                zones.len() - 1
            }
        };
        let zone = &mut zones[at];
        zone.staff += u64::from(figures.staff);
        for (on_shift, staff) in zone.on_shift.iter_mut().zip(&view.by_shift) {
            *on_shift += staff.len() as u64;
        }
    }
    zones.sort_by_key(|z| z.zone.name());
    zones
}

fn at_ms(ms: u64) -> DateTime<Utc> {
    Utc.timestamp_millis_opt(i64::try_from(ms).unwrap_or(i64::MAX))
        .single()
        .unwrap_or_default()
}

fn sample(data: &InMemoryStore, shared: &Shared, now_ms: u64) -> (u64, u64, u64, u64) {
    let behind = data.cursor().map_or(0, |cursor| {
        (now_ms / 60_000).saturating_sub(cursor.as_u64())
    });
    let (waiting, oldest) = lock(&shared.measure).waiting_now(now_ms);
    (now_ms, behind, waiting, oldest)
}

/// At a minute where a shift starts or ends in a tenant's zone, every code with the offline
/// check that one of that shift's staff sits on must change: a fact on each.
async fn shift_edges(
    profile: &Profile,
    tenants: &[TenantView],
    zones: &[Tz],
    data: &InMemoryStore,
    shared: &Shared,
    at: DateTime<Utc>,
    now_ms: u64,
) {
    for zone in zones {
        let local = at.with_timezone(zone);
        let minute = u16::try_from(local.hour() * 60 + local.minute()).unwrap_or(0);
        let edges: Vec<usize> = profile
            .shift
            .iter()
            .enumerate()
            .filter(|(_, s)| s.start.minute_of_day == minute || s.end.minute_of_day == minute)
            .map(|(n, _)| n)
            .collect();
        if edges.is_empty() {
            continue;
        }
        for tenant in tenants.iter().filter(|t| t.zone == *zone) {
            for shift in &edges {
                for staff in &tenant.by_shift[*shift] {
                    let staff = platform::staff_id(*staff);
                    facts_on_codes_of(data, shared, &tenant.id, &staff, now_ms, true, Gate::AtOnce)
                        .await;
                }
            }
        }
    }
}

/// A fact at `at_ms` on every code `staff` sits on (only those with the offline check on, if
/// `offline_check_only`); how many.
/// When qrsync's store holds a fact: at once (an admin's write), or once an add is counted.
#[derive(Clone, Copy)]
enum Gate<'a> {
    AtOnce,
    OnceCounted(&'a str),
}

async fn facts_on_codes_of(
    data: &InMemoryStore,
    shared: &Shared,
    tenant: &TenantId,
    staff: &StaffId,
    at_ms: u64,
    offline_check_only: bool,
    gate: Gate<'_>,
) -> u64 {
    let Ok(codes) = StaffLedger::codes_of_staff(data, tenant, staff).await else {
        return 0;
    };
    let mut affected = Vec::with_capacity(codes.len());
    for code in codes {
        if offline_check_only {
            let switches = data
                .code_config(tenant, &code)
                .await
                .ok()
                .flatten()
                .map(|config| config.switches);
            if !switches.is_some_and(|s| s.offline_check) {
                continue;
            }
        }
        affected.push(code);
    }
    let mut measure = lock(&shared.measure);
    for code in &affected {
        match gate {
            Gate::AtOnce => measure.fact(tenant, code, at_ms),
            Gate::OnceCounted(customer) => measure.fact_once_counted(tenant, code, at_ms, customer),
        }
    }
    affected.len() as u64
}

/// What WeCom holds for the code: the last list it took, or the one it was created with.
fn held(
    world: &World<MeteredStore>,
    data: &InMemoryStore,
    tenant: &TenantId,
    code: &CodeId,
    config_id: &str,
) -> Vec<StaffId> {
    match world.wecom.contact_ways().held(config_id) {
        Some(users) => users
            .iter()
            .filter_map(|u| StaffId::parse(u).ok())
            .collect(),
        None => data
            .stored_code(tenant, code)
            .map(|stored| stored.code.created_with)
            .unwrap_or_default(),
    }
}

/// The recompute of the code by the true facts now: the stored facts with the adds as they
/// happened and the resignations as they happened.
async fn true_recompute(
    data: &InMemoryStore,
    shared: &Shared,
    tenant: &TenantId,
    code: &CodeId,
) -> Option<Membership> {
    let mut snapshot = data.snapshot(tenant, code, clock::now_ms()).await.ok()??;
    {
        let truth = lock(&shared.truth);
        let people: Vec<StaffId> = snapshot.staff.keys().cloned().collect();
        for person in people {
            let counts = truth.adds.counts(tenant, code, &person);
            snapshot.adds.insert(person.clone(), counts);
            if truth.resigned.contains(&(tenant.clone(), person.clone())) {
                if let Some(facts) = snapshot.staff.get_mut(&person) {
                    facts.employment = Employment::Resigned;
                }
            }
        }
    }
    Some(snapshot.recompute())
}

/// Whether WeCom holding `held` is what the rules make of `recomputed`: its list, or, when
/// nobody is eligible and there is no fallback, whatever list it had (an empty list cannot be
/// pushed, so the last one stays and the code's alert is raised: `Refresher::starved`).
fn holds(recomputed: &Membership, held: &[StaffId]) -> bool {
    recomputed.users().is_none_or(|users| users == held)
}

#[allow(clippy::too_many_arguments)]
async fn happen(
    happening: Happening,
    world: &Arc<World<MeteredStore>>,
    data: &InMemoryStore,
    tenants: &Arc<Vec<TenantView>>,
    shared: &Arc<Shared>,
    options: &RunOptions,
) {
    match happening {
        Happening::Scan { tenant, code, pick } => {
            let view = &tenants[tenant as usize];
            let code_id = platform::code_id(code);
            let config_id = platform::config_id_of(tenant, code);
            let held = held(world, data, &view.id, &code_id, &config_id);
            lock(&shared.happened).scans += 1;
            let Some(member) = routed_member(&held, pick).cloned() else {
                lock(&shared.happened).scans_nowhere += 1;
                return;
            };
            let routed = match true_recompute(data, shared, &view.id, &code_id)
                .await
                .as_ref()
                .map(Membership::users)
            {
                Some(None) => Routed::Starved,
                Some(Some(users)) if users.contains(&member) => Routed::Listed,
                _ => Routed::NotListed,
            };
            lock(&shared.measure).scan(&view.id, &code_id, routed);
            let (world, data, tenants, shared) = (
                Arc::clone(world),
                data.clone(),
                Arc::clone(tenants),
                Arc::clone(shared),
            );
            let after = options.add_after;
            let spawner = Arc::clone(&shared);
            spawner.spawn(async move {
                tokio::time::sleep(after).await;
                let view = &tenants[tenant as usize];
                add(&world, &data, &shared, view, &code_id, &member).await;
            });
        }
        Happening::Break { tenant, staff } => {
            lock(&shared.happened).breaks += 1;
            let (world, data, tenants, shared) = (
                Arc::clone(world),
                data.clone(),
                Arc::clone(tenants),
                Arc::clone(shared),
            );
            let spawner = Arc::clone(&shared);
            spawner.spawn(async move {
                let view = &tenants[tenant as usize];
                let staff = platform::staff_id(staff);
                set_online(&world, &data, &shared, view, &staff, false).await;
                tokio::time::sleep(Duration::from_millis(BREAK_MS)).await;
                set_online(&world, &data, &shared, view, &staff, true).await;
            });
        }
        Happening::Resignation { tenant, staff } => {
            lock(&shared.happened).resignations += 1;
            let view = &tenants[tenant as usize];
            let staff = platform::staff_id(staff);
            lock(&shared.truth)
                .resigned
                .insert((view.id.clone(), staff.clone()));
            // Held from the resignation's instant, though qrsync learns it from the callback
            // after: a snapshot read in between resolves it early (one or two a stretch).
            let now = clock::now_ms();
            let facts =
                facts_on_codes_of(data, shared, &view.id, &staff, now, false, Gate::AtOnce).await;
            lock(&shared.happened).reasons.by_resignations += facts;
            let message = contact_callback(
                view,
                &[("ChangeType", "delete_user"), ("UserID", staff.as_str())],
            );
            spawn_callback(world, shared, message);
        }
        Happening::DepartmentMove { tenant, staff, to } => {
            lock(&shared.happened).moves += 1;
            let view = &tenants[tenant as usize];
            let staff = platform::staff_id(staff);
            let department = platform::department_id(to);
            let message = contact_callback(
                view,
                &[
                    ("ChangeType", "update_user"),
                    ("UserID", staff.as_str()),
                    ("Department", department.as_str()),
                ],
            );
            spawn_callback(world, shared, message);
        }
    }
}

/// The customer adds `member`: the truth counts it, a limit it crosses is a fact on the codes
/// it reaches, and WeCom posts the add callback.
async fn add(
    world: &Arc<World<MeteredStore>>,
    data: &InMemoryStore,
    shared: &Arc<Shared>,
    view: &TenantView,
    code: &CodeId,
    member: &StaffId,
) {
    let switches = data
        .code_config(&view.id, code)
        .await
        .ok()
        .flatten()
        .map(|config| config.switches)
        .unwrap_or_default();
    let crossed = {
        let mut truth = lock(&shared.truth);
        let before = limits_reached(
            &switches,
            view.rules,
            truth.adds.counts(&view.id, code, member),
        );
        truth.adds.add(&view.id, code, member);
        let after = limits_reached(
            &switches,
            view.rules,
            truth.adds.counts(&view.id, code, member),
        );
        after
            .into_iter()
            .filter(|limit| !before.contains(limit))
            .collect::<Vec<_>>()
    };
    let now = clock::now_ms();
    let customer = format!("wm{}x{}", clock::now_ms(), member.as_str());
    // The add's own reason on its code, and the facts of the limits it crossed: qrsync learns
    // them once the add's callback is counted.
    let crossing_facts = if crossed.iter().any(|limit| limit.company_wide()) {
        let gate = Gate::OnceCounted(&customer);
        facts_on_codes_of(data, shared, &view.id, member, now, false, gate).await
    } else if !crossed.is_empty() {
        lock(&shared.measure).fact_once_counted(&view.id, code, now, &customer);
        1
    } else {
        0
    };
    {
        let mut happened = lock(&shared.happened);
        happened.adds += 1;
        happened.reasons.by_adds += 1 + crossing_facts;
    }
    let message = add_callback(view, code, member, &customer);
    spawn_callback(world, shared, message);
}

async fn set_online(
    world: &World<MeteredStore>,
    data: &InMemoryStore,
    shared: &Shared,
    view: &TenantView,
    staff: &StaffId,
    online: bool,
) {
    let facts = facts_on_codes_of(
        data,
        shared,
        &view.id,
        staff,
        clock::now_ms(),
        true,
        Gate::AtOnce,
    )
    .await;
    {
        let mut happened = lock(&shared.happened);
        happened.staff_flips += 1;
        happened.reasons.by_flips += facts;
    }
    let Ok(admin) = world.admin() else {
        lock(&shared.happened).admin_failures += 1;
        return;
    };
    let command = PutStaff {
        tenant: view.id.clone(),
        staff: staff.clone(),
        change: StaffChange {
            online: Some(online),
            employment: None,
        },
        departments: None,
        schedule: None,
    };
    if admin.put_staff(command).await.is_err() {
        lock(&shared.happened).admin_failures += 1;
    }
}

/// WeCom posts the callback, and posts it again after an error, up to its tries.
fn spawn_callback(world: &Arc<World<MeteredStore>>, shared: &Arc<Shared>, message: InboxMessage) {
    let (world, spawner) = (Arc::clone(world), Arc::clone(shared));
    let shared = Arc::clone(shared);
    spawner.spawn(async move {
        for attempt in 1..=CALLBACK_TRIES {
            if world.deliver_callback(&message).await == CallbackAnswer::Persisted {
                return;
            }
            if attempt < CALLBACK_TRIES {
                lock(&shared.happened).callbacks_retried += 1;
                tokio::time::sleep(CALLBACK_RETRY_AFTER).await;
            }
        }
        lock(&shared.happened).callbacks_lost += 1;
    });
}

fn add_callback(view: &TenantView, code: &CodeId, staff: &StaffId, customer: &str) -> InboxMessage {
    let fields = [
        ("Event", "change_external_contact"),
        ("ChangeType", "add_external_contact"),
        ("UserID", staff.as_str()),
        ("ExternalUserID", customer),
        ("State", code.as_str()),
    ];
    sealed(view, &fields)
}

fn contact_callback(view: &TenantView, fields: &[(&str, &str)]) -> InboxMessage {
    let mut all = vec![("Event", "change_contact")];
    all.extend_from_slice(fields);
    sealed(view, &all)
}

/// The event as WeCom posts it, sealed with the tenant's key and signed with its token, and
/// as the callback function stores it once verified.
fn sealed(view: &TenantView, fields: &[(&str, &str)]) -> InboxMessage {
    let now_ms = clock::now_ms();
    let now_secs = (now_ms / 1000).to_string();
    let mut all = vec![
        ("ToUserName", view.corp.as_str()),
        ("FromUserName", "sys"),
        ("CreateTime", now_secs.as_str()),
        ("MsgType", "event"),
    ];
    all.extend_from_slice(fields);
    let plaintext = write_flat_xml(&all);
    let crypto = CallbackCrypto::new(
        platform::SIMULATED_TOKEN,
        platform::SIMULATED_AES_KEY,
        &view.corp,
    )
    .expect("the reference key is valid");
    let encrypt = crypto.encrypt_with_random(&[7; 16], &plaintext);
    let signature = crypto.sign(&now_secs, "nonce", &encrypt);
    let envelope = Envelope {
        to_user_name: view.corp.clone(),
        agent_id: None,
        encrypt,
    };
    let event = CallbackEvent::parse(&plaintext).expect("a flat event parses");
    InboxMessage::new(
        view.id.clone(),
        &event,
        envelope.to_xml(),
        &signature,
        &now_secs,
        "nonce",
        now_ms,
    )
}

/// Refreshes that ended without a push: resolved where WeCom holds the recompute.
async fn settle_ended(world: &World<MeteredStore>, data: &InMemoryStore, shared: &Shared) {
    let ended: Vec<EndedWithoutPush> = lock(&shared.measure).take_ended();
    for ended in ended {
        let config_id = platform::config_id_for(&ended.tenant, &ended.code);
        let held = held(world, data, &ended.tenant, &ended.code, &config_id);
        let recomputed = data
            .snapshot(&ended.tenant, &ended.code, clock::now_ms())
            .await
            .ok()
            .flatten()
            .map(|s| s.recompute());
        if recomputed.is_some_and(|recomputed| holds(&recomputed, &held)) {
            lock(&shared.measure).held_at_read(&ended);
        }
    }
}

/// Every code that saw a fact or a refresh: does WeCom hold the recompute of its true facts?
async fn end_check(
    world: &World<MeteredStore>,
    data: &InMemoryStore,
    shared: &Shared,
) -> (u64, u64) {
    let touched: Vec<(TenantId, CodeId)> = lock(&shared.measure).touched().cloned().collect();
    let (mut checked, mut differ) = (0, 0);
    for (tenant, code) in touched {
        let config_id = platform::config_id_for(&tenant, &code);
        let held = held(world, data, &tenant, &code, &config_id);
        if let Some(recomputed) = true_recompute(data, shared, &tenant, &code).await {
            checked += 1;
            differ += u64::from(!holds(&recomputed, &held));
        }
    }
    (checked, differ)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn staff(ids: &[&str]) -> Vec<StaffId> {
        ids.iter()
            .map(|id| StaffId::parse(id).expect("staff id"))
            .collect()
    }

    #[test]
    fn wecom_holds_a_recompute_when_it_has_its_list_or_the_fallback() {
        let held = staff(&["a", "b"]);
        assert!(holds(&Membership::Members(staff(&["a", "b"])), &held));
        assert!(!holds(&Membership::Members(staff(&["a"])), &held));
        assert!(holds(&Membership::Fallback(staff(&["a", "b"])), &held));
        assert!(!holds(&Membership::Fallback(staff(&["c"])), &held));
    }

    #[test]
    fn a_starved_recompute_is_held_by_whatever_list_wecom_keeps() {
        assert!(holds(&Membership::Starved, &staff(&["a"])));
        assert!(holds(&Membership::Starved, &[]));
    }
}
