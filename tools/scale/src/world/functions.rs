//! Each function's handler: the domain's own consumer, built as `functions/<name>/src/main.rs`
//! builds it and called as its `handler.rs` calls it, on the simulated ports. A batch from an
//! event source becomes the domain's `Received` (or the refresh consumer's `Delivery`, its
//! inlet told from the source queue by the adapter's own `QueueInlets`), the invocation's
//! time left (less the handler's reserve) its `time_left_ms`, and `PartialBatch::failures()`
//! the batch response. The clock is virtual time (`clock::now_ms`).

use super::{SimStore, World};
use crate::ports::queues::{
    QuotaEvents, SimDeadLetters, SimFanOutQueue, SimReasonQueue, SimRetryQueues,
};
use crate::ports::wecom::SimWeCom;
use crate::services::clock;
use crate::services::lambda::{
    handler, EventSource, EventSourceConfig, Handler, Invocation, ACCOUNT_CONCURRENCY,
};
use crate::services::scheduler::{scheduled, Schedule, ScheduleConfig, ScheduledCode};
use crate::services::sqs::Delivered;
use adapters::sqs::QueueInlets;
use anyhow::anyhow;
use domain::batch::Received;
use domain::budget::BudgetLimits;
use domain::facts::FactRecorder;
use domain::fanout::{consumer as fan_out, Expander};
use domain::inbox::{InboxConsumer, InboxExits, InboxPorts};
use domain::refresh::consumer::{Delivery, RefreshConsumer, RefreshPorts};
use domain::refresh::Refresher;
use domain::replay::Archiving;
use domain::schedules::{Tick, TickSettings};
use domain::sweep::{Sweep, SweepPorts, SweepReport};
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// `functions/refresh-codes/src/handler.rs` `FINISH_RESERVE_MS`: a code's work ends this long
/// before the invocation's deadline.
pub const REFRESH_FINISH_RESERVE_MS: u64 = 1_500;
/// `functions/fan-out/src/handler.rs` `RESERVE_MS`: kept back from the deadline.
pub const FAN_OUT_RESERVE_MS: u64 = 3_000;

/// The refresh's ports in the simulation (`functions/refresh-codes/src/main.rs`'s `Deployed`).
pub struct SimRefresh<S>(PhantomData<S>);

impl<S: SimStore> RefreshPorts for SimRefresh<S> {
    type Facts = S;
    type Pusher = SimWeCom;
    type Budget = S::Budget;
    type DeadLetters = SimDeadLetters;
    type Retries = SimRetryQueues;
}

/// The inbox's ports in the simulation (`functions/record-facts/src/main.rs`'s `Deployed`).
pub struct SimInbox<S>(PhantomData<S>);

impl<S: SimStore> InboxPorts for SimInbox<S> {
    type Tenants = S;
    type Ledger = S;
    type Reasons = SimReasonQueue;
    type Notifier = QuotaEvents;
    type DeadLetters = SimDeadLetters;
    type Archive = S;
}

/// The sweep's ports in the simulation (`functions/sweep/src/main.rs`'s `Deployed`).
pub struct SimSweep<S>(PhantomData<S>);

impl<S: SimStore> SweepPorts for SimSweep<S> {
    type Store = S;
    type WeCom = SimWeCom;
    type Budget = S::Budget;
    type Reasons = SimReasonQueue;
    type FanOuts = SimFanOutQueue;
    type Notifier = QuotaEvents;
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// A delivered message as `adapters::sqs::received` reads a record.
fn received(message: &Delivered) -> Received<'_> {
    Received {
        message_id: &message.message_id,
        group: &message.group,
        body: &message.body,
        receive_count: message.receive_count,
    }
}

/// Polls every queue a function the simulation runs reads, with the template's batch size and
/// maximum concurrency (none: the account's concurrency bounds it).
pub(super) fn start_event_sources<S: SimStore>(
    world: &World<S>,
) -> anyhow::Result<Vec<JoinHandle<()>>> {
    // One consumer for every refresh source, as one container serves them all: its budget
    // is the tenant's one budget, whichever queue a reason came from.
    let refresh = Arc::new(refresh_consumer(world));
    let mut tasks = Vec::new();
    for function in world.settings.functions.values() {
        for source in &function.queue_sources {
            let Some(code) = handler_for(world, &refresh, &function.package, &source.queue)? else {
                continue;
            };
            let config = EventSourceConfig::new(
                &source.queue,
                usize::try_from(source.batch_size).unwrap_or(usize::MAX),
                source.maximum_concurrency.unwrap_or(ACCOUNT_CONCURRENCY),
            );
            let task = EventSource::new(config, &function.id)
                .spawn(Arc::clone(&world.account), Arc::clone(&world.sqs), code)
                .map_err(|e| anyhow!("{}: {e}", function.id))?;
            tasks.push(task);
        }
    }
    Ok(tasks)
}

/// The functions whose event sources the simulation does not poll (nothing of the day feeds
/// them): their queues keep what is sent to them.
pub const UNWIRED_CONSUMERS: [&str; 1] = ["replay"];

fn handler_for<S: SimStore>(
    world: &World<S>,
    refresh: &Arc<RefreshConsumer<SimRefresh<S>>>,
    package: &str,
    queue: &str,
) -> anyhow::Result<Option<Handler>> {
    Ok(match package {
        "refresh-codes" => Some(refresh_codes(world, Arc::clone(refresh), queue)),
        "record-facts" => Some(record_facts(world)?),
        "fan-out" => Some(fan_out_handler(world)),
        _ => None,
    })
}

/// The refresh function's consumer, as `functions/refresh-codes/src/main.rs` builds it.
fn refresh_consumer<S: SimStore>(world: &World<S>) -> RefreshConsumer<SimRefresh<S>> {
    let settings = &world.settings.refresh;
    let sqs = &world.sqs;
    let refresher = Refresher::new(
        world.store.clone(),
        world.wecom.clone(),
        world.store.budget(world.layers(settings.budget)),
        clock::now_ms,
        settings.lanes.clone(),
        settings.lease_times,
    )
    .with_fan_outs(SimFanOutQueue::new(
        Arc::clone(sqs),
        &settings.fan_out_queue,
    ));
    RefreshConsumer::<SimRefresh<S>> {
        refresher,
        dead_letters: SimDeadLetters::new(Arc::clone(sqs), &settings.dead_letter_queue),
        retries: SimRetryQueues::new(
            Arc::clone(sqs),
            &settings.fast_queue,
            &settings.slow_queue,
            settings.retry_queues.clone(),
        ),
        max_receives: settings.max_receives,
    }
}

/// refresh-codes: `RefreshConsumer::consume`, each message's inlet told from its source queue.
fn refresh_codes<S: SimStore>(
    world: &World<S>,
    consumer: Arc<RefreshConsumer<SimRefresh<S>>>,
    queue: &str,
) -> Handler {
    let settings = &world.settings.refresh;
    let inlets = QueueInlets::new(
        &settings.slow_queue,
        settings
            .retry_queues
            .iter()
            .map(|(_, queue)| queue.as_str()),
    );
    let inlet = inlets.inlet_of(queue);
    handler(move |invocation: Invocation| {
        let consumer = Arc::clone(&consumer);
        async move {
            let left_ms = millis(invocation.time_left()).saturating_sub(REFRESH_FINISH_RESERVE_MS);
            let deliveries: Vec<Delivery<'_>> = invocation
                .messages
                .iter()
                .map(|message| Delivery {
                    message_id: &message.message_id,
                    group: &message.group,
                    body: &message.body,
                    inlet,
                    receive_count: message.receive_count,
                })
                .collect();
            consumer.consume(&deliveries, left_ms).await.failures()
        }
    })
}

/// record-facts: `domain::inbox::InboxConsumer`, the `FactRecorder` and the inbox's exits.
fn record_facts<S: SimStore>(world: &World<S>) -> anyhow::Result<Handler> {
    let settings = &world.settings.record_facts;
    let sqs = &world.sqs;
    let recorder = FactRecorder::new(
        world.store.clone(),
        world.store.clone(),
        SimReasonQueue::new(Arc::clone(sqs), &settings.refresh_queue),
        world.quota_events.clone(),
        clock::now_ms,
    )
    .with_owner_lease(millis(settings.claim_owner_lease))
    .waiting_with(|wait| Box::pin(tokio::time::sleep(wait)));
    let dead_letters = world.queue_of(&settings.function, "DEAD_LETTER_QUEUE_URL")?;
    let exits = InboxExits {
        dead_letters: SimDeadLetters::new(Arc::clone(sqs), &dead_letters),
        max_receives: settings.inbox_max_receives,
        archive: Archiving::new(
            world.store.clone(),
            u64::from(settings.callback_archive_days),
            clock::now_ms,
        ),
    };
    let consumer = Arc::new(InboxConsumer::<SimInbox<S>> { recorder, exits });
    Ok(handler(move |invocation: Invocation| {
        let consumer = Arc::clone(&consumer);
        async move {
            let messages: Vec<Received<'_>> = invocation.messages.iter().map(received).collect();
            consumer.consume(&messages).await.failures()
        }
    }))
}

/// fan-out: `fanout::consumer::consume` with the `Expander` over the code indexes.
fn fan_out_handler<S: SimStore>(world: &World<S>) -> Handler {
    let settings = &world.settings.fan_out;
    let sqs = &world.sqs;
    let expander = Arc::new(
        Expander::new(
            world.store.clone(),
            SimReasonQueue::new(Arc::clone(sqs), &settings.refresh_queue),
            SimFanOutQueue::new(Arc::clone(sqs), &settings.queue),
            world.store.clone(),
        )
        .paced(settings.pace_per_minute),
    );
    let max_receives = settings.max_receives;
    handler(move |invocation: Invocation| {
        let expander = Arc::clone(&expander);
        async move {
            let left_ms = millis(invocation.time_left()).saturating_sub(FAN_OUT_RESERVE_MS);
            let messages: Vec<Received<'_>> = invocation.messages.iter().map(received).collect();
            fan_out::consume(&expander, max_receives, clock::now_ms, &messages, left_ms)
                .await
                .failures()
        }
    })
}

/// The tick's and the sweep's schedules, each firing its function at the template's rate.
pub(super) fn start_schedules<S: SimStore>(world: &mut World<S>) -> Vec<JoinHandle<()>> {
    let seed = world.options.seed;
    let runs: [(String, Duration, ScheduledCode); 2] = [
        (
            world.settings.tick.function.clone(),
            world.settings.tick.rate,
            schedule_tick(world),
        ),
        (
            world.settings.sweep.function.clone(),
            world.settings.sweep.rate,
            sweep(world),
        ),
    ];
    let mut tasks = Vec::new();
    for (n, (function, rate, code)) in (2u64..).zip(runs) {
        let schedule = Schedule::new(ScheduleConfig::rate(&function, rate), seed.wrapping_add(n));
        tasks.push(schedule.spawn(Arc::clone(&world.account), code));
        world.schedules.insert(function, schedule);
    }
    tasks
}

/// The time a scheduled run has: to its deadline, as `adapters::clock::time_to_deadline`.
fn budget_to(deadline: Instant) -> Duration {
    deadline.saturating_duration_since(Instant::now())
}

/// schedule-tick: one `Tick::run` per invocation, with `TickSettings::DEFAULT` and the wait
/// for a minute's grace as its main builds it, and the time to the deadline as its budget. Each run is named (the request id).
fn schedule_tick<S: SimStore>(world: &World<S>) -> ScheduledCode {
    let tick = Arc::new(
        Tick::new(
            world.store.clone(),
            world.store.clone(),
            SimReasonQueue::new(Arc::clone(&world.sqs), &world.settings.tick.refresh_queue),
            SimFanOutQueue::new(Arc::clone(&world.sqs), &world.settings.tick.fan_out_queue),
            clock::now_ms,
            TickSettings::DEFAULT,
        )
        .waiting_with(|wait| Box::pin(tokio::time::sleep(wait))),
    );
    let runs = Arc::new(AtomicU64::new(0));
    scheduled(move |deadline| {
        let tick = Arc::clone(&tick);
        let owner = format!("tick-{}", runs.fetch_add(1, Ordering::Relaxed));
        async move {
            // What the schedule's input asks (`wait_for_next_minute`).
            tick.run_waiting(&owner, budget_to(deadline))
                .await
                .map(|_| ())
                .map_err(|error| error.to_string())
        }
    })
}

/// What the sweep's runs reported, summed: the report's coverage of the read-back.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SweepTotals {
    pub runs: u64,
    pub held_elsewhere: u64,
    pub out_of_time: u64,
    pub tenants_sampled: u64,
    pub read_back: u64,
    pub differing: u64,
    pub repairs_started: u64,
    pub resyncs_sent: u64,
}

impl SweepTotals {
    fn add(&mut self, report: &SweepReport) {
        self.runs += 1;
        self.held_elsewhere += u64::from(report.held_elsewhere);
        self.out_of_time += u64::from(report.out_of_time);
        self.tenants_sampled += u64::from(report.tenants_sampled);
        self.read_back += u64::from(report.read_back);
        self.differing += u64::from(report.differing);
        self.repairs_started += u64::from(report.repairs_started);
        self.resyncs_sent += u64::from(report.resyncs_sent);
    }
}

/// sweep: one `Sweep::run` per invocation, its read-back spending its own budget
/// (`functions/sweep/src/config.rs`: the reads per tenant-hour, in one minute at most the
/// default budget's minute).
fn sweep<S: SimStore>(world: &World<S>) -> ScheduledCode {
    let settings = &world.settings.sweep;
    let reads = settings.settings.reads_per_tenant_hour;
    let read_budget = BudgetLimits {
        per_minute: reads.min(BudgetLimits::default().per_minute),
        per_hour: reads,
    };
    let queue = |variable: &str| {
        world
            .queue_of(&settings.function, variable)
            .unwrap_or_default()
    };
    let sweep = Arc::new(Sweep::<SimSweep<S>> {
        store: world.store.clone(),
        wecom: world.wecom.clone(),
        budget: world.store.budget(world.layers(read_budget)),
        reasons: SimReasonQueue::new(Arc::clone(&world.sqs), &queue("REFRESH_QUEUE_URL")),
        fan_outs: SimFanOutQueue::new(Arc::clone(&world.sqs), &queue("FAN_OUT_QUEUE_URL")),
        notifier: world.quota_events.clone(),
        clock: clock::now_ms,
        settings: settings.settings,
    });
    let runs = Arc::new(AtomicU64::new(0));
    let totals = Arc::clone(&world.sweeps);
    scheduled(move |deadline| {
        let sweep = Arc::clone(&sweep);
        let totals = Arc::clone(&totals);
        let owner = format!("sweep-{}", runs.fetch_add(1, Ordering::Relaxed));
        async move {
            sweep
                .run(&owner, budget_to(deadline))
                .await
                .map(|report| {
                    totals
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .add(&report);
                })
                .map_err(|error| error.to_string())
        }
    })
}
