//! The deployment the simulated day runs: every queue, function, SQS event source and schedule
//! `template.yaml` declares (read through `crate::settings`, never copied), built on the
//! simulated services, with each function's handler running the domain's own consumer as
//! `functions/<name>/src/main.rs` wires it (`functions.rs`). tools/scale/README.md, "The ports
//! and the functions".
//!
//! The world is generic over the table (`SimStore`): `domain::fakes::InMemoryStore` keeps the
//! items, and a store that meters each request as DynamoDB would (`ports::store`) implements
//! the same ports.

mod functions;

#[cfg(test)]
mod tests;

pub use functions::{
    SimRefresh, SimSweep, SweepTotals, FAN_OUT_RESERVE_MS, REFRESH_FINISH_RESERVE_MS,
    UNWIRED_CONSUMERS,
};

use crate::observe::Trace;
use crate::ports::queues::{QuotaEvents, SimFanOutQueue, SimInbox, SimReasonQueue};
use crate::ports::wecom::{EgressIps, SimWeCom};
use crate::services::clock;
use crate::services::lambda::{Account, FunctionConfig, Invoked, ACCOUNT_CONCURRENCY};
use crate::services::scheduler::Schedule;
use crate::services::sqs::{QueueConfig, Sqs};
use crate::services::wecom::{WeCom, WeComConfig};
use crate::settings::{self, Settings};
use anyhow::{anyhow, Context};
use domain::admin::{Admin, AdminStore};
use domain::budget::{BudgetLayers, BudgetLimits, EgressAddresses, WeComBudget};
use domain::codes::CodeFacts;
use domain::dirty::{DirtyMarks, FanOutMarks};
use domain::facts::{AddLedger, QuotaLedger, StaffLedger, TenantProfiles};
use domain::fakes::{FakeBudget, FakeWeCom, InMemoryStore};
use domain::fanout::CodeIndex;
use domain::intake::{Inbox, InboxMessage};
use domain::refresh::{CodeLeases, CodeRecords, FailureMarks};
use domain::replay::CallbackArchive;
use domain::schedules::{DueIndex, ScheduleFacts};
use domain::sweep::{
    CreationIntents, DirtyIndex, DriftLedger, FanOutIndex, LinkRetirements, SweepRuns,
    TenantRegistry,
};
use domain::tenants::TenantPauses;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::task::JoinHandle;

/// The table as every function's store port reads and writes it, and the WeCom budgets kept
/// in it (`adapters::dynamodb::DynamoBudget` keeps them in the same table).
pub trait SimStore:
    CodeFacts
    + CodeRecords
    + FailureMarks
    + DirtyMarks
    + CodeLeases
    + AddLedger
    + StaffLedger
    + QuotaLedger
    + TenantProfiles
    + CallbackArchive
    + CodeIndex
    + FanOutMarks
    + DueIndex
    + ScheduleFacts
    + DirtyIndex
    + FanOutIndex
    + DriftLedger
    + SweepRuns
    + TenantRegistry
    + CreationIntents
    + LinkRetirements
    + AdminStore
    + TenantPauses
    + Clone
    + 'static
{
    type Budget: WeComBudget + Clone + 'static;
    /// A budget of `layers` per tenant, address and API, spent as the table spends it. The
    /// world asks once per function (refresh, admin, the sweep's read-back), each on its own
    /// APIs, so a budget that counts apart from the others (`FakeBudget`) spends as the shared
    /// table does.
    fn budget(&self, layers: BudgetLayers) -> Self::Budget;
}

impl SimStore for crate::ports::store::MeteredStore {
    type Budget = crate::ports::store::MeteredBudget;

    fn budget(&self, layers: BudgetLayers) -> Self::Budget {
        crate::ports::store::MeteredBudget::new(self.clone(), layers)
    }
}

impl SimStore for InMemoryStore {
    type Budget = FakeBudget;

    fn budget(&self, layers: BudgetLayers) -> FakeBudget {
        FakeBudget::layered(layers)
    }
}

/// What the template does not say: the services' seeds and assumed figures.
#[derive(Clone)]
pub struct WorldOptions {
    pub seed: u64,
    pub wecom: WeComConfig,
    /// Every function's cold start and how long an idle environment stays warm (`None`: the
    /// lambda service's assumed defaults).
    pub cold_start: Option<Duration>,
    pub keep_warm: Option<Duration>,
    pub account_concurrency: u32,
    /// Standard queues: the at-least-once copies per million receives.
    pub duplicates_per_million: u32,
    /// Where the ports report what they saw.
    pub trace: Arc<Trace>,
}

impl Default for WorldOptions {
    fn default() -> Self {
        Self {
            seed: 30,
            wecom: WeComConfig::default(),
            cold_start: None,
            keep_warm: None,
            account_concurrency: ACCOUNT_CONCURRENCY,
            duplicates_per_million: 0,
            trace: Arc::new(Trace::default()),
        }
    }
}

/// What the callback route answered WeCom.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallbackAnswer {
    /// 200: the inbox accepted the event.
    Persisted,
    /// No concurrency for the function: API Gateway answers an error, WeCom retries.
    Throttled,
    TimedOut,
    /// 5xx: the inbox refused it.
    Failed(String),
}

/// The deployed stack on the simulated services. Queues are named by their logical ids, and
/// functions too.
pub struct World<S: SimStore> {
    pub settings: Settings,
    pub store: S,
    pub sqs: Arc<Sqs>,
    pub account: Arc<Account>,
    pub wecom: SimWeCom,
    pub quota_events: QuotaEvents,
    /// The tick's and the sweep's schedules, by function.
    pub schedules: BTreeMap<String, Arc<Schedule>>,
    /// What the sweep's runs reported, summed.
    pub sweeps: Arc<Mutex<SweepTotals>>,
    options: WorldOptions,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

impl<S: SimStore> World<S> {
    /// Creates every queue and function of `settings` (nothing runs until `start`). Contact
    /// ways live in a `FakeWeCom` that keeps no history.
    pub fn build(settings: Settings, store: S, options: WorldOptions) -> anyhow::Result<Self> {
        let sqs = Arc::new(Sqs::new(options.seed));
        for queue in settings.queues.values() {
            sqs.create_queue(queue_config(queue, options.duplicates_per_million));
        }
        let account = Arc::new(Account::new(options.account_concurrency));
        for function in settings.functions.values() {
            let mut config =
                FunctionConfig::new(&function.id, function.timeout, function.memory_mb);
            config.reserved_concurrency = function.reserved_concurrency;
            if let Some(cold_start) = options.cold_start {
                config.cold_start = cold_start;
            }
            if let Some(keep_warm) = options.keep_warm {
                config.keep_warm = keep_warm;
            }
            account
                .create_function(config)
                .map_err(|e| anyhow!("{}: {e}", function.id))?;
        }
        let contact_ways = FakeWeCom::default();
        contact_ways.forget_history();
        let wecom = SimWeCom::new(
            contact_ways,
            Arc::new(WeCom::new(options.wecom, options.seed.wrapping_add(1))),
            EgressIps::of_template(
                settings.account.nat_gateways,
                settings.account.egress_relays.len(),
                egress_addresses(&settings),
            ),
            Arc::clone(&options.trace),
        )
        .through_relays(
            Arc::clone(&account),
            &egress_addresses(&settings),
            &settings.account.egress_relays,
        );
        let quota_events = QuotaEvents::new(Arc::clone(&sqs), quota_target(&settings).as_deref());
        Ok(Self {
            settings,
            store,
            sqs,
            account,
            wecom,
            quota_events,
            schedules: BTreeMap::new(),
            sweeps: Arc::default(),
            options,
            tasks: Mutex::new(Vec::new()),
        })
    }

    /// Starts every SQS event source whose function the simulation runs, and the tick's and
    /// the sweep's schedules. Call inside the paused runtime, after `clock::start_at`.
    pub fn start(&mut self) -> anyhow::Result<()> {
        let mut tasks = functions::start_event_sources(self)?;
        tasks.extend(functions::start_schedules(self));
        self.tasks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .extend(tasks);
        Ok(())
    }

    /// Stops every poller and schedule (runs in progress are dropped).
    pub fn stop(&self) {
        for task in self
            .tasks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .drain(..)
        {
            task.abort();
        }
    }

    /// The queue a function's environment variable names (its logical id).
    pub fn queue_of(&self, function: &str, variable: &str) -> anyhow::Result<String> {
        queue_of(&self.settings, function, variable)
    }

    /// The admin API's commands on the world's table, queues and WeCom, as
    /// `functions/admin-api` wires them (its budget spent before a contact way is created).
    /// Run directly, not as a Lambda invocation.
    pub fn admin(&self) -> anyhow::Result<Admin<S, SimReasonQueue, SimWeCom>> {
        let function = &self.settings.admin.function;
        let reasons = SimReasonQueue::new(
            Arc::clone(&self.sqs),
            &self.queue_of(function, "REFRESH_QUEUE_URL")?,
        );
        let fan_outs = SimFanOutQueue::new(
            Arc::clone(&self.sqs),
            &self.queue_of(function, "FAN_OUT_QUEUE_URL")?,
        );
        Ok(Admin::new(
            self.store.clone(),
            reasons,
            fan_outs,
            self.wecom.clone(),
            clock::now_ms,
        )
        .with_budget(self.store.budget(self.layers(self.settings.admin.budget))))
    }

    /// `tenant` limits with the template's per-address ones, behind the addresses its NAT
    /// gateways give (one shared address without): what `adapters::env::budget_layers` reads
    /// from a function's environment, where the addresses are the Elastic IPs' (here made up,
    /// one per gateway, as the simulated WeCom's `EgressIps` makes them up).
    pub fn layers(&self, tenant: BudgetLimits) -> BudgetLayers {
        BudgetLayers {
            tenant,
            address: self.settings.refresh.address_budget,
            egress: egress_addresses(&self.settings),
        }
    }

    /// The callback function after it verified and decrypted an event (`domain::intake`): the
    /// stored callback persisted to the inbox queue, in one invocation of the function. The
    /// tenant's callback settings it reads first (cached per container) are not counted here.
    pub async fn deliver_callback(&self, message: &InboxMessage) -> CallbackAnswer {
        let inbox = SimInbox::new(Arc::clone(&self.sqs), &self.settings.callback.inbox_queue);
        let invoked = self
            .account
            .invoke(&self.settings.callback.function, |_deadline| async move {
                inbox.persist(message).await
            })
            .await;
        match invoked {
            Ok(Invoked::Done(Ok(()))) => CallbackAnswer::Persisted,
            Ok(Invoked::Done(Err(error))) => CallbackAnswer::Failed(error.to_string()),
            Ok(Invoked::Throttled) => CallbackAnswer::Throttled,
            Ok(Invoked::TimedOut) => CallbackAnswer::TimedOut,
            Err(error) => CallbackAnswer::Failed(error.to_string()),
        }
    }

    /// What WeCom holds for a contact way now (where a scan of its code goes).
    pub fn holds(&self, config_id: &str) -> Vec<String> {
        self.wecom.holds(config_id)
    }

    pub fn options(&self) -> &WorldOptions {
        &self.options
    }
}

impl<S: SimStore> Drop for World<S> {
    fn drop(&mut self) {
        self.stop();
    }
}

fn queue_config(queue: &settings::Queue, duplicates_per_million: u32) -> QueueConfig {
    let config = if queue.fifo {
        QueueConfig::fifo(&queue.id, queue.visibility_timeout)
    } else {
        QueueConfig::standard(&queue.id, queue.visibility_timeout)
            .with_duplicates_per_million(duplicates_per_million)
    };
    let config = config.with_delay(queue.delay);
    match &queue.redrive {
        Some(redrive) => {
            config.with_dead_letters(&redrive.dead_letter_queue, redrive.max_receive_count)
        }
        None => config,
    }
}

/// The queue `function`'s environment names in `variable` (`!Ref SomeQueue`).
fn queue_of(settings: &Settings, function: &str, variable: &str) -> anyhow::Result<String> {
    let id = settings
        .functions
        .get(function)
        .with_context(|| format!("no function {function} in the template"))?
        .environment
        .get(variable)
        .with_context(|| {
            format!("Resources.{function}.Properties.Environment.Variables.{variable}: missing")
        })?;
    if settings.queues.contains_key(id) {
        Ok(id.clone())
    } else {
        Err(anyhow!(
            "Resources.{function}.Properties.Environment.Variables.{variable}: `{id}` is not a queue"
        ))
    }
}

/// The queue the quota bus's rule delivers to: the stack's own `QuotaNotificationsQueue`
/// unless `QuotaNotificationTargetArn` names a target outside the stack (then the events
/// leave the simulation, counted only).
fn quota_target(settings: &Settings) -> Option<String> {
    const OWN_QUEUE: &str = "QuotaNotificationsQueue";
    let own_target = settings
        .parameters
        .get("QuotaNotificationTargetArn")
        .and_then(|p| p.value.as_deref())
        .is_none_or(str::is_empty);
    (own_target && settings.queues.contains_key(OWN_QUEUE)).then(|| OWN_QUEUE.to_owned())
}

/// The addresses of the template's NAT gateways (one shared address without), made up one per
/// gateway: what `EGRESS_ADDRESSES` lists in a deployment, where they are the Elastic IPs'.
pub fn egress_addresses(settings: &Settings) -> EgressAddresses {
    let names: Vec<String> = (1..=settings.account.nat_gateways)
        .map(|n| format!("198.51.100.{n}"))
        .collect();
    EgressAddresses::parse(&names.join(",")).unwrap_or_default()
}
