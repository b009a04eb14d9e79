//! Issue 30's fidelity check: for each operation the scale simulation (`qrsync-scale`) meters,
//! the DynamoDB and SQS requests it counts equal what the local world's request interceptors
//! count for the same domain call from the same starting state.
//!
//! Each operation runs twice: over the real adapters (`DynamoStore`, whose `RequestCounter`
//! counts by operation, and `adapters::sqs` on a client with the interceptor below) against
//! the deployed world, and over the simulation's `MeteredStore` and queue ports on its
//! simulated DynamoDB and SQS, under a paused clock of its own. The starting state is written
//! through the same domain ports on both sides; WeCom is the domain's fake on both, since
//! the adapter under comparison is the store's and the queues'.
//!
//! Two places keep the run from touching what the deployed functions do: the queues are
//! created by the test (a FIFO and a standard queue no consumer reads, so no refresh or
//! fan-out function picks up the messages), and the tick runs on a table of the deployed
//! table's schema created by the test, since the deployed tick walks the shared cursor every
//! minute and would take the test's due item.

use adapters::dynamodb::{DynamoBudget, DynamoStore};
use adapters::sqs::{SqsFanOutQueue, SqsReasonQueue};
use domain::admin::{AdminStore, SecretsChanged, StaffChange, StoredProfile};
use domain::budget::{BudgetLayers, BudgetLimits, Spend, WeComBudget, UPDATE_CONTACT_WAY};
use domain::codes::CodeFacts;
use domain::dirty::{DirtyMarks, FanOutMarks};
use domain::facts::{AddLedger, FactOutcome, FactRecorder, QuotaLedger, StaffLedger};
use domain::fakes::{FakeWeCom, InMemoryQueues, InMemoryStore};
use domain::fanout::{CodeIndex, Expanded, Expander};
use domain::ids::{CodeId, StaffId, TenantId};
use domain::intake::InboxMessage;
use domain::landing::{Landing, LandingPage, Opener, RotationCounter};
use domain::lanes::{Lane, LanePolicy, LaneSwitch};
use domain::membership::{CodeConfig, Employment, Family, RotationSlot, Switches};
use domain::reasons::{Cause, FanOut, FanOutQueue, ReasonQueue, Source};
use domain::refresh::{
    Acquired, AfterRecord, CodeLeases, CodeRecords, FailureMarks, FencedWrite, LeaseTimes, Outcome,
    PushRecord, RefreshRequest, Refresher,
};
use domain::schedules::{CursorLease, DueIndex, DueWriter, Minute, ScheduleFacts, Subject};
use domain::schedules::{Tick, TickSettings};
use domain::tenants::{TenantProfile, Timezone};
use domain::wecom::callback::{write_flat_xml, CallbackEvent, Envelope};
use domain::wecom::crypto::CallbackCrypto;
use integration_tests::World;
use qrsync_scale::observe::Trace;
use qrsync_scale::ports::queues::{SimFanOutQueue, SimReasonQueue};
use qrsync_scale::ports::store::{MeteredBudget, MeteredStore};
use qrsync_scale::services::clock;
use qrsync_scale::services::dynamodb::{DynamoConfig, DynamoDb};
use qrsync_scale::services::sqs::{QueueConfig, Sqs};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const TOKEN: &str = "tok123";
const KEY: &str = "jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C";
/// The SQS kind both sides are compared on: the simulated SQS counts `SendMessage` and
/// `SendMessageBatch` as one send request each (per started 64 KB; these messages are small).
const SQS_SENDS: &str = "SQS SendMessage + SendMessageBatch";

/// The local world's sends by operation, shown beside the comparison but not compared.
const SQS_OF_WHICH: &str = "SQS sends, of which ";

/// Requests one operation sent, by kind ("DynamoDB GetItem", ...).
type Counts = BTreeMap<String, u64>;

/// Everything an operation's domain call runs on, and the requests sent so far.
trait Side {
    type Store: AdminStore
        + CodeFacts
        + CodeRecords
        + CodeLeases
        + FailureMarks
        + DirtyMarks
        + AddLedger
        + QuotaLedger
        + StaffLedger
        + CodeIndex
        + FanOutMarks
        + DueIndex
        + ScheduleFacts
        + RotationCounter
        + Clone
        + Send
        + Sync
        + 'static;
    type Budget: WeComBudget;
    type Reasons: ReasonQueue;
    type FanOuts: FanOutQueue;

    fn store(&self) -> &Self::Store;
    fn budget(&self, limits: BudgetLimits) -> Self::Budget;
    fn reasons(&self) -> Self::Reasons;
    fn fan_outs(&self) -> Self::FanOuts;
    fn clock(&self) -> fn() -> u64;
    /// Every request sent so far, by kind.
    fn sent(&self) -> Counts;
}

/// The deployed world's table (or the test's copy of it) and the test's queues.
struct Real {
    store: DynamoStore,
    sqs: aws_sdk_sqs::Client,
    sqs_requests: SqsRequests,
    reasons_url: String,
    fan_outs_url: String,
}

/// Counts the requests an SQS client transmits, by operation (`X-Amz-Target`, as
/// `DynamoStore`'s `RequestCounter` does).
#[derive(Debug, Clone, Default)]
struct SqsRequests(Arc<Mutex<Counts>>);

impl aws_sdk_sqs::config::Intercept for SqsRequests {
    fn name(&self) -> &'static str {
        "SqsRequests"
    }

    fn read_before_transmit(
        &self,
        context: &aws_sdk_sqs::config::interceptors::BeforeTransmitInterceptorContextRef<'_>,
        _runtime_components: &aws_sdk_sqs::config::RuntimeComponents,
        _cfg: &mut aws_sdk_sqs::config::ConfigBag,
    ) -> Result<(), aws_sdk_sqs::error::BoxError> {
        let target = context.request().headers().get("x-amz-target");
        let operation = target.map_or("unknown", |t| t.rsplit('.').next().unwrap_or(t));
        *self
            .0
            .lock()
            .expect("not poisoned")
            .entry(operation.to_owned())
            .or_default() += 1;
        Ok(())
    }
}

impl Real {
    async fn connect(world: &World, table: String) -> Self {
        let sqs_requests = SqsRequests::default();
        let config = aws_sdk_sqs::config::Builder::from(&world.aws)
            .interceptor(sqs_requests.clone())
            .build();
        let sqs = aws_sdk_sqs::Client::from_conf(config);
        let run = format!("{:08x}", rand::random::<u32>());
        let reasons_url = sqs
            .create_queue()
            .queue_name(format!("fidelity-refresh-{run}.fifo"))
            .attributes(aws_sdk_sqs::types::QueueAttributeName::FifoQueue, "true")
            .send()
            .await
            .expect("the refresh queue's stand-in is created")
            .queue_url
            .expect("a queue url");
        let fan_outs_url = sqs
            .create_queue()
            .queue_name(format!("fidelity-fan-out-{run}"))
            .send()
            .await
            .expect("the fan-out queue's stand-in is created")
            .queue_url
            .expect("a queue url");
        Self {
            store: DynamoStore::new(world.dynamodb.clone(), table).with_pages(world.page_tables()),
            sqs,
            sqs_requests,
            reasons_url,
            fan_outs_url,
        }
    }

    async fn delete_queues(&self) {
        for url in [&self.reasons_url, &self.fan_outs_url] {
            let deleted = self.sqs.delete_queue().queue_url(url).send().await;
            deleted.expect("the test's queue is deleted");
        }
    }
}

impl Side for Real {
    type Store = DynamoStore;
    type Budget = DynamoBudget;
    type Reasons = SqsReasonQueue;
    type FanOuts = SqsFanOutQueue;

    fn store(&self) -> &DynamoStore {
        &self.store
    }

    fn budget(&self, limits: BudgetLimits) -> DynamoBudget {
        DynamoBudget::new(self.store.clone(), BudgetLayers::behind_one_address(limits))
    }

    fn reasons(&self) -> SqsReasonQueue {
        SqsReasonQueue::new(self.sqs.clone(), self.reasons_url.clone())
    }

    fn fan_outs(&self) -> SqsFanOutQueue {
        SqsFanOutQueue::new(self.sqs.clone(), self.fan_outs_url.clone())
    }

    fn clock(&self) -> fn() -> u64 {
        integration_tests::now_ms
    }

    fn sent(&self) -> Counts {
        let mut counts: Counts = self
            .store
            .requests_by_operation()
            .into_iter()
            .map(|(operation, sent)| (format!("DynamoDB {operation}"), sent))
            .collect();
        for (operation, sent) in self.sqs_requests.0.lock().expect("not poisoned").iter() {
            let kind = match operation.as_str() {
                "SendMessage" | "SendMessageBatch" => {
                    counts.insert(format!("{SQS_OF_WHICH}{operation}"), *sent);
                    SQS_SENDS.to_owned()
                }
                other => format!("SQS {other}"),
            };
            *counts.entry(kind).or_default() += sent;
        }
        counts
    }
}

/// The simulation's ports on its simulated DynamoDB and SQS.
struct Simulated {
    store: MeteredStore,
    sqs: Arc<Sqs>,
}

const SIM_REASONS: &str = "refresh.fifo";
const SIM_FAN_OUTS: &str = "fan-out";

impl Simulated {
    fn new() -> Self {
        let sqs = Arc::new(Sqs::new(7));
        sqs.create_queue(QueueConfig::fifo(SIM_REASONS, Duration::from_secs(60)));
        sqs.create_queue(QueueConfig::standard(SIM_FAN_OUTS, Duration::from_secs(60)));
        let meter = Arc::new(DynamoDb::new(DynamoConfig::default(), 7));
        Self {
            store: MeteredStore::new(
                InMemoryStore::without_history(),
                meter,
                Arc::new(Trace::default()),
            ),
            sqs,
        }
    }
}

impl Side for Simulated {
    type Store = MeteredStore;
    type Budget = MeteredBudget;
    type Reasons = SimReasonQueue;
    type FanOuts = SimFanOutQueue;

    fn store(&self) -> &MeteredStore {
        &self.store
    }

    fn budget(&self, limits: BudgetLimits) -> MeteredBudget {
        MeteredBudget::new(self.store.clone(), BudgetLayers::behind_one_address(limits))
    }

    fn reasons(&self) -> SimReasonQueue {
        SimReasonQueue::new(self.sqs.clone(), SIM_REASONS)
    }

    fn fan_outs(&self) -> SimFanOutQueue {
        SimFanOutQueue::new(self.sqs.clone(), SIM_FAN_OUTS)
    }

    fn clock(&self) -> fn() -> u64 {
        clock::now_ms
    }

    fn sent(&self) -> Counts {
        let mut counts: Counts = self
            .store
            .requests()
            .by_kind()
            .into_iter()
            .map(|(kind, sent)| (format!("DynamoDB {kind:?}"), sent))
            .collect();
        let sends: u64 = [SIM_REASONS, SIM_FAN_OUTS]
            .iter()
            .map(|queue| self.sqs.counters(queue).expect("created").send_requests)
            .sum();
        if sends > 0 {
            counts.insert(SQS_SENDS.to_owned(), sends);
        }
        counts
    }
}

/// What `after` sent beyond `before`, kinds that sent nothing left out.
fn since(before: &Counts, after: Counts) -> Counts {
    after
        .into_iter()
        .map(|(kind, sent)| {
            let earlier = before.get(&kind).copied().unwrap_or(0);
            (kind, sent - earlier)
        })
        .filter(|(_, sent)| *sent > 0)
        .collect()
}

/// Runs `operation` (its setup uncounted) and answers the requests it sent.
async fn counted<S: Side, T>(side: &S, operation: impl std::future::Future<Output = T>) -> Counts {
    let before = side.sent();
    operation.await;
    since(&before, side.sent())
}

fn staff(id: &str) -> StaffId {
    StaffId::parse(id).expect("valid")
}

fn code(id: &str) -> CodeId {
    CodeId::parse(id).expect("valid")
}

fn members() -> Vec<StaffId> {
    (0..15).map(|i| staff(&format!("staff{i:02}"))).collect()
}

/// A tenant no other run has written under, with a corp id of its own.
struct Fixture {
    tenant: TenantId,
    corp: String,
}

impl Fixture {
    fn new(id: &str) -> Self {
        Self {
            tenant: TenantId::parse(id).expect("valid"),
            corp: format!("ww{id}"),
        }
    }

    fn profile(&self) -> TenantProfile {
        TenantProfile {
            corp_id: self.corp.clone(),
            callback_token: TOKEN.into(),
            encoding_aes_key: KEY.into(),
            previous_callback: None,
            corp_secret: "secret".into(),
            timezone: Timezone::default(),
            company_daily_cap: None,
        }
    }

    /// The profile, `members` active and online, and `code` listing them natively with the
    /// offline check, its contact way created.
    async fn load<S: Side>(&self, side: &S, code: &CodeId, members: &[StaffId]) {
        let store = side.store();
        let now_ms = (side.clock())();
        if store
            .stored_profile(&self.tenant)
            .await
            .expect("read")
            .is_none()
        {
            let profile = StoredProfile {
                profile: self.profile(),
                version: 1,
                secrets_changed_at_ms: SecretsChanged::default(),
            };
            store
                .put_profile(&self.tenant, &profile, None)
                .await
                .expect("stored");
        }
        for member in members {
            let change = StaffChange {
                online: Some(true),
                employment: Some(Employment::Active),
            };
            store
                .update_staff(&self.tenant, member, &change, now_ms)
                .await
                .expect("stored");
        }
        let config = CodeConfig {
            family: Family::Native,
            members: members.to_vec(),
            departments: vec![],
            fallback: vec![],
            switches: Switches {
                offline_check: true,
                ..Switches::default()
            },
        };
        let stored = store
            .put_code(&self.tenant, code, &config, None, now_ms)
            .await
            .expect("stored");
        assert!(stored.is_some(), "a new code");
        store
            .set_config_id(&self.tenant, code, "cfg-1", &[])
            .await
            .expect("stored");
    }

    /// Records a push of `users` (and `rotation`) a minute ago, as a refresh would.
    async fn pushed<S: Side>(
        &self,
        side: &S,
        code: &CodeId,
        users: Vec<StaffId>,
        rotation: Option<Vec<RotationSlot>>,
    ) {
        let store = side.store();
        let now_ms = (side.clock())();
        let acquired = CodeLeases::acquire(store, &self.tenant, code, "setup", now_ms, 8_000, None)
            .await
            .expect("store available");
        let Acquired::LeasedRefresh(lease) = acquired else {
            panic!("the code's lease is free: {acquired:?}");
        };
        let push = PushRecord {
            users,
            pushed_at_ms: now_ms - 60_000,
            fallback: false,
            fact_at_ms: vec![now_ms - 60_000],
            rotation,
            on_page: false,
            lane: Lane::Fast,
        };
        let written = store
            .record_push(&self.tenant, code, &lease, &push, AfterRecord::Release)
            .await
            .expect("store available");
        assert_eq!(written, FencedWrite::Written);
    }
}

async fn refresh<S: Side>(
    side: &S,
    fixture: &Fixture,
    code: &CodeId,
    budget: S::Budget,
) -> Outcome {
    let lanes = LanePolicy {
        switch: LaneSwitch::Auto,
        quiet_after_ms: 3 * 24 * 3_600_000,
        fast_tenants: BTreeSet::new(),
        slow_interval_ms: 60_000,
    };
    let lease = LeaseTimes {
        duration_ms: 8_000,
        call_ms: 3_500,
    };
    let refresher = Refresher::new(
        side.store().clone(),
        FakeWeCom::default(),
        budget,
        side.clock(),
        lanes,
        lease,
    );
    let now_ms = (side.clock())();
    refresher
        .refresh(RefreshRequest {
            tenant: &fixture.tenant,
            code,
            fact_at_ms: &[now_ms],
            lane: Lane::Fast,
            resync: false,
            deadline_ms: now_ms + 60_000,
        })
        .await
        .expect("refreshed")
}

async fn unchanged_refresh<S: Side>(side: &S, fixture: &Fixture) -> Counts {
    let code = code("unchanged");
    fixture.load(side, &code, &members()).await;
    fixture.pushed(side, &code, members(), None).await;
    counted(side, async {
        let budget = side.budget(BudgetLimits::default());
        let outcome = refresh(side, fixture, &code, budget).await;
        assert_eq!(outcome, Outcome::Unchanged);
    })
    .await
}

async fn push<S: Side>(side: &S, fixture: &Fixture) -> Counts {
    let code = code("pushed");
    fixture.load(side, &code, &members()).await;
    fixture
        .pushed(side, &code, members()[..14].to_vec(), None)
        .await;
    counted(side, async {
        let budget = side.budget(BudgetLimits::default());
        let outcome = refresh(side, fixture, &code, budget).await;
        assert_eq!(outcome, Outcome::Pushed(members()));
    })
    .await
}

async fn put_off_refresh<S: Side>(side: &S, fixture: &Fixture) -> Counts {
    let code = code("put-off");
    fixture.load(side, &code, &members()).await;
    fixture
        .pushed(side, &code, members()[..14].to_vec(), None)
        .await;
    // One call a minute and an hour, taken before the refresh through the same budget (the
    // simulation's windows live in the budget, the adapter's in the table). A limit of 0 is
    // no way to spend it: the table's conditional add lets the first call through where no
    // window is stored yet (`attribute_not_exists`), where `FakeBudget::limited` refuses it.
    let one = BudgetLimits {
        per_minute: 1,
        per_hour: 1,
    };
    let budget = side.budget(one);
    let taken = budget
        .spend(&fixture.tenant, UPDATE_CONTACT_WAY, (side.clock())())
        .await
        .expect("store available");
    assert_eq!(taken, Spend::Granted, "the budget's one call");
    counted(side, async {
        let outcome = refresh(side, fixture, &code, budget).await;
        assert!(matches!(outcome, Outcome::PutOff { .. }), "{outcome:?}");
    })
    .await
}

/// An `add_external_contact` through `code`, as the callback stored it in the inbox.
fn stored_add(fixture: &Fixture, code: &CodeId, now_ms: u64) -> InboxMessage {
    let created = (now_ms / 1_000).to_string();
    let fields = [
        ("ToUserName", fixture.corp.as_str()),
        ("CreateTime", created.as_str()),
        ("MsgType", "event"),
        ("Event", "change_external_contact"),
        ("ChangeType", "add_external_contact"),
        ("UserID", "staff00"),
        ("ExternalUserID", "wm-fidelity"),
        ("State", code.as_str()),
    ];
    let crypto = CallbackCrypto::new(TOKEN, KEY, &fixture.corp).expect("valid");
    let encrypt = crypto.encrypt(&write_flat_xml(&fields));
    let signature = crypto.sign(&created, "n", &encrypt);
    let envelope = Envelope {
        to_user_name: fixture.corp.clone(),
        agent_id: None,
        encrypt,
    }
    .to_xml();
    let event = CallbackEvent::parse(&write_flat_xml(&fields)).expect("valid event");
    InboxMessage::new(
        fixture.tenant.clone(),
        &event,
        envelope,
        &signature,
        &created,
        "n",
        now_ms,
    )
}

async fn add<S: Side>(side: &S, fixture: &Fixture) -> Counts {
    let code = code("added");
    fixture.load(side, &code, &members()).await;
    let recorder = FactRecorder::new(
        side.store().clone(),
        side.store().clone(),
        side.reasons(),
        InMemoryQueues::default(),
        side.clock(),
    );
    let message = stored_add(fixture, &code, (side.clock())());
    counted(side, async {
        let outcome = recorder.record(&message).await.expect("recorded");
        assert!(matches!(outcome, FactOutcome::Add { .. }), "{outcome:?}");
    })
    .await
}

async fn landing_visit<S: Side>(side: &S, fixture: &Fixture) -> Counts {
    let code = code("landing");
    let rotating = &members()[..2];
    fixture.load(side, &code, rotating).await;
    let rotation = rotating
        .iter()
        .map(|member| RotationSlot {
            staff: member.clone(),
            takes: 1,
            link: Some(format!("https://work.weixin.qq.com/ca/{member}")),
        })
        .collect();
    fixture
        .pushed(side, &code, rotating.to_vec(), Some(rotation))
        .await;
    let page = LandingPage::new(side.store().clone());
    counted(side, async {
        let landing = page
            .visit(fixture.tenant.as_str(), code.as_str(), Opener::Person)
            .await
            .expect("counted");
        assert!(
            matches!(landing, Landing::Chat { number: 1, .. }),
            "{landing:?}"
        );
    })
    .await
}

/// A staff member seated on 100 codes changes: one page of their seats, 100 reasons.
async fn fan_out_page<S: Side>(side: &S, fixture: &Fixture) -> Counts {
    let member = staff("staff00");
    let codes: Vec<CodeId> = (0..100).map(|i| code(&format!("seat-{i:03}"))).collect();
    for seat in &codes {
        fixture
            .load(side, seat, std::slice::from_ref(&member))
            .await;
    }
    let expander = Expander::new(
        side.store().clone(),
        side.reasons(),
        side.fan_outs(),
        side.store().clone(),
    );
    let now_ms = (side.clock())();
    let fan_out = FanOut::new(
        fixture.tenant.clone(),
        vec![Source::Staff { staff: member }],
        Cause::StaffChanged,
        now_ms,
        "staff00-online".into(),
    );
    counted(side, async {
        let expanded = expander
            .expand(&fan_out, now_ms, || false)
            .await
            .expect("expanded");
        assert_eq!(expanded, Expanded::Done { reasons: 100 });
    })
    .await
}

/// One shift item due in the minute the cursor stands on: a run walks that minute alone.
async fn tick_item<S: Side>(side: &S, fixture: &Fixture) -> Counts {
    let member = staff("staff00");
    fixture
        .load(side, &code("shift"), std::slice::from_ref(&member))
        .await;
    let store = side.store();
    let settings = TickSettings {
        max_minutes: 1,
        ..TickSettings::DEFAULT
    };
    let now_ms = (side.clock())();
    let minute = Minute::containing(now_ms - settings.grace_ms).minus(1);
    store
        .set_due(&fixture.tenant, &Subject::Shifts, minute, now_ms)
        .await
        .expect("stored");
    let lease = DueIndex::acquire(store, "setup", now_ms, now_ms + 60_000)
        .await
        .expect("store available");
    let CursorLease::Acquired { next } = lease else {
        panic!("the cursor is free on the test's own table");
    };
    assert!(store.advance("setup", next, minute).await.expect("moved"));
    DueIndex::release(store, "setup").await.expect("released");
    let tick = Tick::new(
        store.clone(),
        store.clone(),
        side.reasons(),
        side.fan_outs(),
        side.clock(),
        settings,
    );
    counted(side, async {
        let report = tick
            .run("tick", Duration::from_secs(60))
            .await
            .expect("ran");
        assert_eq!(
            (report.minutes_walked, report.due_items),
            (1, 1),
            "{report:?}"
        );
    })
    .await
}

/// The deployed table's key schema and index on a table of the test's own.
async fn copy_of_table(world: &World, name: &str) -> String {
    let deployed = world
        .dynamodb
        .describe_table()
        .table_name(world.output("TableName"))
        .send()
        .await
        .expect("the deployed table is described")
        .table
        .expect("a table");
    let indexes = deployed
        .global_secondary_indexes()
        .iter()
        .map(|index| {
            aws_sdk_dynamodb::types::GlobalSecondaryIndex::builder()
                .set_index_name(index.index_name.clone())
                .set_key_schema(index.key_schema.clone())
                .set_projection(index.projection.clone())
                .build()
                .expect("a whole index")
        })
        .collect();
    world
        .dynamodb
        .create_table()
        .table_name(name)
        .set_key_schema(deployed.key_schema.clone())
        .set_attribute_definitions(deployed.attribute_definitions.clone())
        .set_global_secondary_indexes(Some(indexes))
        .billing_mode(aws_sdk_dynamodb::types::BillingMode::PayPerRequest)
        .send()
        .await
        .expect("the copy is created");
    name.to_owned()
}

/// The operations, in the order of the issue.
const OPERATIONS: [&str; 7] = [
    "unchanged refresh",
    "push",
    "put-off refresh",
    "add",
    "landing visit",
    "fan-out page",
    "tick item",
];

async fn run<S: Side>(side: &S, operation: &str, run_id: &str) -> Counts {
    let fixture = Fixture::new(&format!(
        "fidelity-{run_id}-{}",
        operation.replace(' ', "-")
    ));
    match operation {
        "unchanged refresh" => unchanged_refresh(side, &fixture).await,
        "push" => push(side, &fixture).await,
        "put-off refresh" => put_off_refresh(side, &fixture).await,
        "add" => add(side, &fixture).await,
        "landing visit" => landing_visit(side, &fixture).await,
        "fan-out page" => fan_out_page(side, &fixture).await,
        "tick item" => tick_item(side, &fixture).await,
        other => unreachable!("{other}"),
    }
}

/// Every operation over the real adapters (the tick on the test's copy of the table).
async fn real_counts(run_id: &str) -> Vec<Counts> {
    let world = World::connect().await.expect("the local world is deployed");
    let deployed = Real::connect(&world, world.output("TableName").to_owned()).await;
    let copy = copy_of_table(&world, &format!("fidelity-{run_id}")).await;
    let own = Real::connect(&world, copy.clone()).await;
    let mut counts = Vec::new();
    for operation in OPERATIONS {
        let side = if operation == "tick item" {
            &own
        } else {
            &deployed
        };
        counts.push(run(side, operation, run_id).await);
    }
    deployed.delete_queues().await;
    own.delete_queues().await;
    world
        .dynamodb
        .delete_table()
        .table_name(copy)
        .send()
        .await
        .expect("the copy is deleted");
    counts
}

/// Every operation over the simulation's ports, each on fresh simulated services, from
/// `start_ms` on the simulated clock.
async fn simulated_counts(run_id: &str, start_ms: u64) -> Vec<Counts> {
    clock::start_at(start_ms);
    let mut counts = Vec::new();
    for operation in OPERATIONS {
        counts.push(run(&Simulated::new(), operation, run_id).await);
    }
    counts
}

#[test]
fn each_operation_sends_the_requests_the_simulation_counts_for_it() {
    let run_id = format!("{:08x}", rand::random::<u32>());
    let start_ms = integration_tests::now_ms();
    let real = tokio::runtime::Runtime::new()
        .expect("a runtime")
        .block_on(real_counts(&run_id));
    let simulated = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("a paused runtime")
        .block_on(simulated_counts(&run_id, start_ms));

    println!("| operation | kind | local world | simulation |");
    println!("|---|---|---:|---:|");
    let mut differing = Vec::new();
    for ((operation, real), simulated) in OPERATIONS.iter().zip(&real).zip(&simulated) {
        let kinds: BTreeSet<&String> = real.keys().chain(simulated.keys()).collect();
        for kind in kinds {
            let world = real.get(kind).copied().unwrap_or(0);
            if kind.starts_with(SQS_OF_WHICH) {
                println!("| {operation} | {kind} | {world} | |");
                continue;
            }
            let sim = simulated.get(kind).copied().unwrap_or(0);
            let mark = if world == sim { "" } else { " (differs)" };
            println!("| {operation} | {kind} | {world} | {sim}{mark} |");
            if world != sim {
                differing.push(format!("{operation}: {kind} {world} vs {sim}"));
            }
        }
        let (world, sim): (u64, u64) = (
            real.iter()
                .filter(|(k, _)| k.starts_with("DynamoDB"))
                .map(|(_, n)| n)
                .sum(),
            simulated
                .iter()
                .filter(|(k, _)| k.starts_with("DynamoDB"))
                .map(|(_, n)| n)
                .sum(),
        );
        println!("| {operation} | DynamoDB, all | {world} | {sim} |");
    }
    assert!(differing.is_empty(), "the counts differ: {differing:#?}");
}
