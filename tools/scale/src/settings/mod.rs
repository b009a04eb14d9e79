//! The settings the simulation runs with, read from `template.yaml` at every run and never
//! copied into the simulator: change the template (or pass `--parameter Name=value`) and the
//! simulation follows; a template the simulation cannot follow (a setting it reads removed,
//! renamed or turned into something it cannot evaluate) is an error naming the key.
//!
//! Two layers. The resources as AWS sees them: every queue ([`Queue`]), every function with
//! its event sources ([`Function`]), and what the bill counts ([`Account`]). Then what the
//! domain code is configured with, built into the domain's own types from the environment
//! each function is given, under the same variable names as `functions/*/src/config.rs`
//! reads ([`RefreshSettings`], [`FanOutSettings`], [`TickSettings`], [`SweepRunSettings`],
//! [`RecordFactsSettings`], [`AdminSettings`], [`CallbackSettings`]); each function is found
//! by the crate it runs (`CodeUri`). The API stage's throttles are read too ([`ApiThrottle`]).

mod template;
mod view;

#[cfg(test)]
mod tests;

pub use template::{Node, Parameter, TemplateError};

use domain::budget::BudgetLimits;
use domain::ids::TenantId;
use domain::lanes::{LanePolicy, LaneSwitch};
use domain::refresh::retry::RetryDelay;
use domain::refresh::LeaseTimes;
use domain::sweep::SweepSettings;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;
use template::{error, Template};

/// The egress relay's code: every function built from it is one relay (`Account::egress_relays`).
const RELAY_CODE: &str = "./functions/wecom-relay";
use view::View;

/// SQS's defaults for a queue property the template leaves out (SQS API reference,
/// `CreateQueue` attributes).
const SQS_DEFAULT_VISIBILITY_TIMEOUT_S: u64 = 30;
const SQS_DEFAULT_RETENTION_S: u64 = 345_600;
/// Lambda's default batch size for an SQS event source (Lambda API reference,
/// `CreateEventSourceMapping`).
const SQS_EVENT_SOURCE_DEFAULT_BATCH_SIZE: u32 = 10;
/// Lambda's defaults for a function property neither the function nor `Globals` sets.
const LAMBDA_DEFAULT_TIMEOUT_S: u64 = 3;
const LAMBDA_DEFAULT_MEMORY_MB: u32 = 128;
/// The margin the WeCom client adds to its timeout for one whole call
/// (`adapters::wecom::client::CALL_MARGIN`), which the refresh's lease must outlast.
const WECOM_CALL_MARGIN: Duration = adapters::wecom::CALL_MARGIN;

/// Where the project's template is, from this crate.
pub fn project_template() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../template.yaml")
}

/// `Name=value`, as given to `--parameter`.
pub fn parse_override(raw: &str) -> Result<(String, String), String> {
    match raw.split_once('=') {
        Some((name, value)) if !name.trim().is_empty() => {
            Ok((name.trim().to_owned(), value.to_owned()))
        }
        _ => Err(format!("`{raw}` is not Name=value")),
    }
}

#[derive(Debug, Clone)]
pub struct Settings {
    /// Every parameter, with the value this run uses.
    pub parameters: BTreeMap<String, Parameter>,
    /// By logical id.
    pub queues: BTreeMap<String, Queue>,
    /// By logical id.
    pub functions: BTreeMap<String, Function>,
    pub account: Account,
    pub refresh: RefreshSettings,
    pub fan_out: FanOutSettings,
    pub tick: TickSettings,
    pub sweep: SweepRunSettings,
    pub record_facts: RecordFactsSettings,
    pub admin: AdminSettings,
    pub callback: CallbackSettings,
    /// API Gateway's stage throttles, most specific route last (as the template lists them).
    pub api_throttles: Vec<ApiThrottle>,
}

/// The callback function: verifies, persists to the inbox, answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallbackSettings {
    pub function: String,
    pub inbox_queue: String,
    /// How long a warm container trusts a tenant's cached callback settings (a read saved).
    pub tenant_cache: Duration,
    pub max_age: Duration,
}

/// A stage's `MethodSettings` throttle: beyond it API Gateway answers 429 before any function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiThrottle {
    /// `/*` for every route, or one route (`/~1l~1{tenant}~1{code}`, `/` written `~1`).
    pub resource_path: String,
    pub http_method: String,
    pub rate_per_second: u32,
    pub burst: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Queue {
    pub id: String,
    pub fifo: bool,
    pub content_based_deduplication: bool,
    /// FIFO high throughput (`DeduplicationScope: messageGroup` and `FifoThroughputLimit:
    /// perMessageGroupId`).
    pub high_throughput: bool,
    pub visibility_timeout: Duration,
    /// The queue's `DelaySeconds` (FIFO queues take no per-message delay).
    pub delay: Duration,
    pub retention: Duration,
    pub redrive: Option<Redrive>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redrive {
    /// The dead-letter queue's logical id.
    pub dead_letter_queue: String,
    pub max_receive_count: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Function {
    pub id: String,
    /// The crate it runs (`CodeUri`'s last part: `refresh-codes`).
    pub package: String,
    pub timeout: Duration,
    pub memory_mb: u32,
    /// `x86_64` or `arm64` (Lambda bills them differently).
    pub architecture: String,
    pub reserved_concurrency: Option<u32>,
    /// Each variable as the template gives it; a resource as its logical id.
    pub environment: BTreeMap<String, String>,
    pub queue_sources: Vec<QueueSource>,
    pub schedules: Vec<Schedule>,
    /// `Api` events (REST API routes): `METHOD /path`.
    pub routes: Vec<String>,
}

/// An SQS event source mapping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueSource {
    pub event: String,
    /// The queue's logical id.
    pub queue: String,
    pub batch_size: u32,
    /// `ScalingConfig.MaximumConcurrency`; `None`: bounded only by the function and account.
    pub maximum_concurrency: Option<u32>,
    pub batching_window: Duration,
    pub report_batch_item_failures: bool,
}

/// An EventBridge Scheduler schedule invoking the function at a fixed rate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    pub event: String,
    pub rate: Duration,
    pub maximum_retry_attempts: Option<u32>,
    pub maximum_event_age: Option<Duration>,
}

/// What the month's bill counts besides usage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    pub alarms: u32,
    pub dashboards: u32,
    /// Log groups the template declares with a retention (`AWS::Logs::LogGroup`); a function
    /// without one logs to a group Lambda creates, kept forever.
    pub log_groups_with_retention: u32,
    /// The longest retention a log group declares, in days (`None`: none declares one).
    pub log_retention_days: Option<u32>,
    pub nat_gateways: u32,
    /// The egress relay functions (`functions/wecom-relay`, `RelayWeComCalls`), in the order
    /// of the addresses they send from: each WeCom call of a tenant goes through the relay of
    /// its address, so it leaves from that address.
    pub egress_relays: Vec<String>,
    /// Interface VPC endpoints' network interfaces: one per subnet (zone) each lists.
    pub interface_endpoint_zones: u32,
    pub table_on_demand: bool,
    pub point_in_time_recovery: bool,
    /// Secondary indexes of the table (each write to an indexed item is written again there).
    pub table_indexes: u32,
}

/// The refresh function (the single writer) as the domain's `Refresher` is configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefreshSettings {
    pub function: String,
    pub budget: BudgetLimits,
    /// Each egress address's budget, shared by its tenants (the admin API and the sweep read
    /// the same parameter).
    pub address_budget: BudgetLimits,
    pub lanes: LanePolicy,
    pub lease_times: LeaseTimes,
    pub max_receives: u32,
    pub wecom_timeout: Duration,
    /// Queues by role (logical ids), as the function's environment names them.
    pub fast_queue: String,
    pub slow_queue: String,
    pub fan_out_queue: String,
    pub dead_letter_queue: String,
    pub retry_queues: Vec<(RetryDelay, String)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FanOutSettings {
    pub function: String,
    pub max_receives: u32,
    pub queue: String,
    pub refresh_queue: String,
    /// The most reasons one expansion sends (`Expander::paced`): the tenant's budget a minute.
    pub pace_per_minute: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TickSettings {
    pub function: String,
    /// How often Scheduler invokes it.
    pub rate: Duration,
    pub refresh_queue: String,
    pub fan_out_queue: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SweepRunSettings {
    pub function: String,
    pub rate: Duration,
    pub settings: SweepSettings,
    pub wecom_timeout: Duration,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordFactsSettings {
    pub function: String,
    pub inbox_queue: String,
    pub inbox_max_receives: u32,
    pub claim_owner_lease: Duration,
    pub callback_archive_days: u32,
    pub refresh_queue: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminSettings {
    pub function: String,
    pub budget: BudgetLimits,
}

impl Settings {
    /// Reads the project's own `template.yaml`.
    pub fn read_project(overrides: &[(String, String)]) -> Result<Self, TemplateError> {
        Self::read_file(&project_template(), overrides)
    }

    pub fn read_file(path: &Path, overrides: &[(String, String)]) -> Result<Self, TemplateError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| error(&path.display().to_string(), format!("cannot be read: {e}")))?;
        Self::read(&text, overrides)
    }

    pub fn read(text: &str, overrides: &[(String, String)]) -> Result<Self, TemplateError> {
        let template = Template::parse(text, overrides)?;
        let mut queues = BTreeMap::new();
        let mut functions = BTreeMap::new();
        for resource in &template.resources {
            let at = format!("Resources.{}.Properties", resource.id);
            let props = View::new(&resource.properties, at);
            match resource.kind.as_str() {
                "AWS::SQS::Queue" => {
                    queues.insert(resource.id.clone(), queue(&resource.id, &props)?);
                }
                "AWS::Serverless::Function" => {
                    functions.insert(resource.id.clone(), function(&resource.id, &props)?);
                }
                _ => {}
            }
        }
        for function in functions.values() {
            for source in &function.queue_sources {
                if !queues.contains_key(&source.queue) {
                    return Err(error(
                        &format!(
                            "Resources.{}.Properties.Events.{}",
                            function.id, source.event
                        ),
                        format!(
                            "reads {}, which is not a queue of the template",
                            source.queue
                        ),
                    ));
                }
            }
        }
        let account = account(&template)?;
        let api_throttles = api_throttles(&template)?;
        let wiring = Wiring {
            queues: &queues,
            functions: &functions,
        };
        Ok(Self {
            refresh: wiring.refresh()?,
            fan_out: wiring.fan_out()?,
            tick: wiring.tick()?,
            sweep: wiring.sweep()?,
            record_facts: wiring.record_facts()?,
            admin: wiring.admin()?,
            callback: wiring.callback()?,
            api_throttles,
            parameters: template.parameters,
            queues,
            functions,
            account,
        })
    }

    /// # Panics
    /// When `id` is not a queue of the template (the ids the settings name all are).
    pub fn queue(&self, id: &str) -> &Queue {
        // Every queue a settings struct names was checked to exist when read.
        &self.queues[id]
    }

    /// # Panics
    /// When `id` is not a function of the template (the ids the settings name all are).
    pub fn function(&self, id: &str) -> &Function {
        &self.functions[id]
    }

    /// The event source mapping that reads `queue`.
    pub fn source_of(&self, queue: &str) -> Option<(&Function, &QueueSource)> {
        self.functions.values().find_map(|f| {
            f.queue_sources
                .iter()
                .find(|s| s.queue == queue)
                .map(|s| (f, s))
        })
    }
}

fn seconds(view: &View) -> Result<Duration, TemplateError> {
    Ok(Duration::from_secs(view.u64()?))
}

fn queue(id: &str, props: &View) -> Result<Queue, TemplateError> {
    let fifo = props
        .opt("FifoQueue")
        .map(|v| v.bool())
        .transpose()?
        .unwrap_or(false);
    let text_is = |key: &str, wanted: &str| -> Result<bool, TemplateError> {
        Ok(props.opt(key).map(|v| v.text()).transpose()?.as_deref() == Some(wanted))
    };
    let redrive = match props.opt("RedrivePolicy") {
        Some(policy) => Some(Redrive {
            dead_letter_queue: policy.key("deadLetterTargetArn")?.resource()?,
            max_receive_count: policy.key("maxReceiveCount")?.u32()?,
        }),
        None => None,
    };
    Ok(Queue {
        id: id.to_owned(),
        fifo,
        content_based_deduplication: props
            .opt("ContentBasedDeduplication")
            .map(|v| v.bool())
            .transpose()?
            .unwrap_or(false),
        high_throughput: text_is("DeduplicationScope", "messageGroup")?
            && text_is("FifoThroughputLimit", "perMessageGroupId")?,
        visibility_timeout: match props.opt("VisibilityTimeout") {
            Some(v) => seconds(&v)?,
            None => Duration::from_secs(SQS_DEFAULT_VISIBILITY_TIMEOUT_S),
        },
        delay: match props.opt("DelaySeconds") {
            Some(v) => seconds(&v)?,
            None => Duration::ZERO,
        },
        retention: match props.opt("MessageRetentionPeriod") {
            Some(v) => seconds(&v)?,
            None => Duration::from_secs(SQS_DEFAULT_RETENTION_S),
        },
        redrive,
    })
}

fn function(id: &str, props: &View) -> Result<Function, TemplateError> {
    let code_uri = props.key("CodeUri")?.text()?;
    let package = code_uri
        .trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or_default()
        .to_owned();
    let architecture = match props.opt("Architectures") {
        Some(list) => match list.items()?.as_slice() {
            [one] => one.text()?,
            _ => return Err(error(&list.at, "a function has one architecture")),
        },
        None => "x86_64".to_owned(),
    };
    let mut environment = BTreeMap::new();
    if let Some(variables) = props.opt("Environment").and_then(|e| e.opt("Variables")) {
        for (name, value) in variables.entries()? {
            let rendered = match value.node {
                Node::Resource(id) => id.clone(),
                Node::Attribute {
                    resource,
                    attribute,
                } => format!("{resource}.{attribute}"),
                _ => value.text()?,
            };
            environment.insert(name, rendered);
        }
    }
    let mut queue_sources = Vec::new();
    let mut schedules = Vec::new();
    let mut routes = Vec::new();
    if let Some(events) = props.opt("Events") {
        for (event, definition) in events.entries()? {
            let kind = definition.key("Type")?.text()?;
            let event_props = definition.key("Properties")?;
            match kind.as_str() {
                "SQS" => queue_sources.push(queue_source(&event, &event_props)?),
                "ScheduleV2" | "Schedule" => schedules.push(schedule(&event, &event_props)?),
                "Api" => routes.push(format!(
                    "{} {}",
                    event_props.key("Method")?.text()?.to_uppercase(),
                    event_props.key("Path")?.text()?
                )),
                _ => {}
            }
        }
    }
    Ok(Function {
        id: id.to_owned(),
        package,
        timeout: match props.opt("Timeout") {
            Some(v) => seconds(&v)?,
            None => Duration::from_secs(LAMBDA_DEFAULT_TIMEOUT_S),
        },
        memory_mb: match props.opt("MemorySize") {
            Some(v) => v.u32()?,
            None => LAMBDA_DEFAULT_MEMORY_MB,
        },
        architecture,
        reserved_concurrency: props
            .opt("ReservedConcurrentExecutions")
            .map(|v| v.u32())
            .transpose()?,
        environment,
        queue_sources,
        schedules,
        routes,
    })
}

fn queue_source(event: &str, props: &View) -> Result<QueueSource, TemplateError> {
    let report_batch_item_failures = match props.opt("FunctionResponseTypes") {
        Some(types) => types
            .items()?
            .iter()
            .map(View::text)
            .collect::<Result<Vec<_>, _>>()?
            .iter()
            .any(|t| t == "ReportBatchItemFailures"),
        None => false,
    };
    Ok(QueueSource {
        event: event.to_owned(),
        queue: props.key("Queue")?.resource()?,
        batch_size: match props.opt("BatchSize") {
            Some(v) => v.u32()?,
            None => SQS_EVENT_SOURCE_DEFAULT_BATCH_SIZE,
        },
        maximum_concurrency: props
            .opt("ScalingConfig")
            .and_then(|s| s.opt("MaximumConcurrency"))
            .map(|v| v.u32())
            .transpose()?,
        batching_window: match props.opt("MaximumBatchingWindowInSeconds") {
            Some(v) => seconds(&v)?,
            None => Duration::ZERO,
        },
        report_batch_item_failures,
    })
}

fn schedule(event: &str, props: &View) -> Result<Schedule, TemplateError> {
    let expression = props.key("ScheduleExpression")?;
    let retry = props.opt("RetryPolicy");
    Ok(Schedule {
        event: event.to_owned(),
        rate: rate(&expression.text()?).map_err(|p| error(&expression.at, p))?,
        maximum_retry_attempts: retry
            .as_ref()
            .and_then(|r| r.opt("MaximumRetryAttempts"))
            .map(|v| v.u32())
            .transpose()?,
        maximum_event_age: retry
            .as_ref()
            .and_then(|r| r.opt("MaximumEventAgeInSeconds"))
            .map(|v| seconds(&v))
            .transpose()?,
    })
}

/// `rate(5 minutes)`: the only schedules the simulation fires (a `cron(...)` would need a
/// calendar it does not keep).
fn rate(expression: &str) -> Result<Duration, String> {
    let inner = expression
        .trim()
        .strip_prefix("rate(")
        .and_then(|rest| rest.strip_suffix(')'))
        .ok_or_else(|| format!("`{expression}`: the simulation fires rate(...) schedules only"))?;
    let (count, unit) = inner
        .trim()
        .split_once(' ')
        .ok_or_else(|| format!("`{expression}` is not rate(N unit)"))?;
    let count: u64 = count
        .parse()
        .map_err(|_| format!("`{expression}`: {count} is not a whole number"))?;
    let unit_seconds = match unit.trim() {
        "minute" | "minutes" => 60,
        "hour" | "hours" => 3_600,
        "day" | "days" => 86_400,
        other => return Err(format!("`{expression}`: unknown unit {other}")),
    };
    Ok(Duration::from_secs(count * unit_seconds))
}

/// The template's resource id of the platform's table.
const PLATFORM_TABLE: &str = "Table";

fn account(template: &Template) -> Result<Account, TemplateError> {
    let count = |kind: &str| {
        u32::try_from(template.resources.iter().filter(|r| r.kind == kind).count())
            .unwrap_or(u32::MAX)
    };
    let tables: Vec<_> = template
        .resources
        .iter()
        .filter(|r| r.kind == "AWS::DynamoDB::Table")
        .collect();
    // The platform's table (`Table`) is the one the simulation models; the landing page's own
    // tables (pages and their visit counters) are metered as partitions of their own in it
    // (`ports::store::page_touch`), so they must bill as it does.
    let Some(platform) = tables.iter().find(|r| r.id == PLATFORM_TABLE) else {
        return Err(error(
            "Resources",
            format!(
                "no {PLATFORM_TABLE} among the template's {} tables",
                tables.len()
            ),
        ));
    };
    for other in tables.iter().filter(|r| r.id != PLATFORM_TABLE) {
        let props = View::new(
            &other.properties,
            format!("Resources.{}.Properties", other.id),
        );
        if props.key("BillingMode")?.text()? != "PAY_PER_REQUEST" {
            return Err(error(
                &format!("Resources.{}.Properties.BillingMode", other.id),
                "the simulation meters every table on demand, as the platform's",
            ));
        }
    }
    let table = View::new(
        &platform.properties,
        format!("Resources.{}.Properties", platform.id),
    );
    // Each resource of `kind`'s properties, as a view that names where a bad value is.
    let properties_of = |kind: &'static str| {
        template
            .resources
            .iter()
            .filter(move |r| r.kind == kind)
            .map(|r| View::new(&r.properties, format!("Resources.{}.Properties", r.id)))
    };
    Ok(Account {
        alarms: count("AWS::CloudWatch::Alarm"),
        dashboards: count("AWS::CloudWatch::Dashboard"),
        log_groups_with_retention: u32::try_from(
            template
                .resources
                .iter()
                .filter(|r| {
                    r.kind == "AWS::Logs::LogGroup" && r.properties.get("RetentionInDays").is_some()
                })
                .count(),
        )
        .unwrap_or(u32::MAX),
        log_retention_days: properties_of("AWS::Logs::LogGroup")
            .filter_map(|props| props.opt("RetentionInDays").map(|days| days.u32()))
            .collect::<Result<Vec<u32>, TemplateError>>()?
            .into_iter()
            .max(),
        nat_gateways: count("AWS::EC2::NatGateway"),
        // Template order: WeComRelay1Function first, as EGRESS_RELAYS lists them.
        egress_relays: template
            .resources
            .iter()
            .filter(|r| {
                r.kind == "AWS::Serverless::Function"
                    && matches!(r.properties.get("CodeUri"), Some(Node::Text(uri)) if uri.trim_end_matches('/') == RELAY_CODE)
            })
            .map(|r| r.id.clone())
            .collect(),
        interface_endpoint_zones: properties_of("AWS::EC2::VPCEndpoint")
            .map(|props| {
                let interface = match props.opt("VpcEndpointType") {
                    Some(kind) => kind.text()? == "Interface",
                    None => false,
                };
                Ok(match props.opt("SubnetIds") {
                    Some(subnets) if interface => {
                        u32::try_from(subnets.items()?.len()).unwrap_or(u32::MAX)
                    }
                    _ => 0,
                })
            })
            .collect::<Result<Vec<u32>, TemplateError>>()?
            .into_iter()
            .sum(),
        table_on_demand: table.key("BillingMode")?.text()? == "PAY_PER_REQUEST",
        point_in_time_recovery: match table
            .opt("PointInTimeRecoverySpecification")
            .and_then(|p| p.opt("PointInTimeRecoveryEnabled"))
        {
            Some(v) => v.bool()?,
            None => false,
        },
        table_indexes: match table.opt("GlobalSecondaryIndexes") {
            Some(list) => u32::try_from(list.items()?.len()).unwrap_or(u32::MAX),
            None => 0,
        },
    })
}

fn api_throttles(template: &Template) -> Result<Vec<ApiThrottle>, TemplateError> {
    let mut out = Vec::new();
    for api in template
        .resources
        .iter()
        .filter(|r| r.kind == "AWS::Serverless::Api")
    {
        let props = View::new(&api.properties, format!("Resources.{}.Properties", api.id));
        let Some(settings) = props.opt("MethodSettings") else {
            continue;
        };
        for setting in settings.items()? {
            if setting.opt("ThrottlingRateLimit").is_none() {
                continue;
            }
            out.push(ApiThrottle {
                resource_path: setting.key("ResourcePath")?.text()?,
                http_method: setting.key("HttpMethod")?.text()?,
                rate_per_second: setting.key("ThrottlingRateLimit")?.u32()?,
                burst: setting.key("ThrottlingBurstLimit")?.u32()?,
            });
        }
    }
    Ok(out)
}

/// What each function's environment says, turned into the domain's types.
struct Wiring<'s> {
    queues: &'s BTreeMap<String, Queue>,
    functions: &'s BTreeMap<String, Function>,
}

impl Wiring<'_> {
    /// The function that runs `functions/<package>`.
    fn running(&self, package: &str) -> Result<&Function, TemplateError> {
        self.functions
            .values()
            .find(|f| f.package == package)
            .ok_or_else(|| {
                error(
                    "Resources",
                    format!("no AWS::Serverless::Function runs ./functions/{package}"),
                )
            })
    }

    fn env<'f>(&self, function: &'f Function, name: &str) -> Result<&'f str, TemplateError> {
        function
            .environment
            .get(name)
            .map(String::as_str)
            .ok_or_else(|| {
                error(
                    &format!(
                        "Resources.{}.Properties.Environment.Variables.{name}",
                        function.id
                    ),
                    "missing, and the function reads it",
                )
            })
    }

    fn number<T: std::str::FromStr>(
        &self,
        function: &Function,
        name: &str,
    ) -> Result<T, TemplateError> {
        let raw = self.env(function, name)?;
        raw.trim().parse().map_err(|_| {
            error(
                &format!(
                    "Resources.{}.Properties.Environment.Variables.{name}",
                    function.id
                ),
                format!("`{raw}` is not a number the function can read"),
            )
        })
    }

    /// A variable holding a queue's URL (`!Ref SomeQueue`): the queue's logical id.
    fn queue(&self, function: &Function, name: &str) -> Result<String, TemplateError> {
        let id = self.env(function, name)?;
        if self.queues.contains_key(id) {
            Ok(id.to_owned())
        } else {
            Err(error(
                &format!(
                    "Resources.{}.Properties.Environment.Variables.{name}",
                    function.id
                ),
                format!("`{id}` is not a queue of the template"),
            ))
        }
    }

    fn only_schedule(&self, function: &Function) -> Result<Duration, TemplateError> {
        match function.schedules.as_slice() {
            [one] => Ok(one.rate),
            other => Err(error(
                &format!("Resources.{}.Properties.Events", function.id),
                format!(
                    "the simulation fires one schedule per function; found {}",
                    other.len()
                ),
            )),
        }
    }

    fn only_source(&self, function: &Function) -> Result<String, TemplateError> {
        match function.queue_sources.as_slice() {
            [one] => Ok(one.queue.clone()),
            other => Err(error(
                &format!("Resources.{}.Properties.Events", function.id),
                format!("expected one queue event source; found {}", other.len()),
            )),
        }
    }

    fn budget(&self, function: &Function) -> Result<BudgetLimits, TemplateError> {
        Ok(BudgetLimits {
            per_minute: self.number(function, "WECOM_BUDGET_PER_MINUTE")?,
            per_hour: self.number(function, "WECOM_BUDGET_PER_HOUR")?,
        })
    }

    fn refresh(&self) -> Result<RefreshSettings, TemplateError> {
        let f = self.running("refresh-codes")?;
        let at = |name: &str| format!("Resources.{}.Properties.Environment.Variables.{name}", f.id);
        let wecom_timeout = Duration::from_millis(self.number(f, "WECOM_TIMEOUT_MS")?);
        let lease_times = LeaseTimes {
            duration_ms: self.number::<u64>(f, "CODE_LEASE_SECONDS")? * 1000,
            call_ms: millis(wecom_timeout + WECOM_CALL_MARGIN),
        };
        if lease_times.duration_ms <= lease_times.call_ms {
            return Err(error(
                &at("CODE_LEASE_SECONDS"),
                "a lease must outlast one WeCom call (WECOM_TIMEOUT_MS plus 500 ms)",
            ));
        }
        let switch: LaneSwitch = self
            .env(f, "SLOW_LANE_SWITCH")?
            .parse()
            .map_err(|e: String| error(&at("SLOW_LANE_SWITCH"), e))?;
        let fast_tenants = self
            .env(f, "FAST_LANE_TENANTS")
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|raw| !raw.is_empty())
            .map(|raw| {
                TenantId::parse(raw)
                    .map_err(|e| error(&at("FAST_LANE_TENANTS"), format!("`{raw}`: {e}")))
            })
            .collect::<Result<_, _>>()?;
        let mut retry_queues = Vec::new();
        for delay in RetryDelay::ALL {
            let name = format!("RETRY_QUEUE_URL_{}S", delay.seconds());
            let queue = self.queue(f, &name)?;
            // The domain picks a retry queue by the delay it names; a queue whose DelaySeconds
            // says otherwise would make the simulation (and production) wait the wrong time.
            let queue_delay = self.queues[&queue].delay;
            if queue_delay != Duration::from_secs(delay.seconds()) {
                return Err(error(
                    &format!("Resources.{queue}.Properties.DelaySeconds"),
                    format!(
                        "is {} s, but the refresh sends it reasons to wait {} s ({name})",
                        queue_delay.as_secs(),
                        delay.seconds()
                    ),
                ));
            }
            retry_queues.push((delay, queue));
        }
        Ok(RefreshSettings {
            function: f.id.clone(),
            budget: self.budget(f)?,
            address_budget: BudgetLimits {
                per_minute: self.number(f, "WECOM_BUDGET_PER_ADDRESS_PER_MINUTE")?,
                per_hour: self.number(f, "WECOM_BUDGET_PER_ADDRESS_PER_HOUR")?,
            },
            lanes: LanePolicy {
                switch,
                quiet_after_ms: self.number::<u64>(f, "SLOW_LANE_QUIET_AFTER_SECONDS")? * 1000,
                fast_tenants,
                slow_interval_ms: self.number::<u64>(f, "SLOW_LANE_INTERVAL_SECONDS")? * 1000,
            },
            lease_times,
            max_receives: self.number(f, "REFRESH_MAX_RECEIVES")?,
            wecom_timeout,
            fast_queue: self.queue(f, "REFRESH_QUEUE_URL")?,
            slow_queue: self.queue(f, "SLOW_REFRESH_QUEUE_URL")?,
            fan_out_queue: self.queue(f, "FAN_OUT_QUEUE_URL")?,
            dead_letter_queue: self.queue(f, "DEAD_LETTER_QUEUE_URL")?,
            retry_queues,
        })
    }

    fn fan_out(&self) -> Result<FanOutSettings, TemplateError> {
        let f = self.running("fan-out")?;
        Ok(FanOutSettings {
            function: f.id.clone(),
            max_receives: self.number(f, "FAN_OUT_MAX_RECEIVES")?,
            queue: self.only_source(f)?,
            refresh_queue: self.queue(f, "REFRESH_QUEUE_URL")?,
            pace_per_minute: self.number(f, "WECOM_BUDGET_PER_MINUTE")?,
        })
    }

    fn tick(&self) -> Result<TickSettings, TemplateError> {
        let f = self.running("schedule-tick")?;
        // The run's lease on the cursor must outlive the run, or a second run walks beside it.
        let lease = Duration::from_millis(domain::schedules::TickSettings::DEFAULT.lease_ms);
        if f.timeout >= lease {
            return Err(error(
                &format!("Resources.{}.Properties.Timeout", f.id),
                format!(
                    "{} s is not shorter than the tick's cursor lease ({} s, TickSettings::DEFAULT)",
                    f.timeout.as_secs(),
                    lease.as_secs()
                ),
            ));
        }
        Ok(TickSettings {
            function: f.id.clone(),
            rate: self.only_schedule(f)?,
            refresh_queue: self.queue(f, "REFRESH_QUEUE_URL")?,
            fan_out_queue: self.queue(f, "FAN_OUT_QUEUE_URL")?,
        })
    }

    fn sweep(&self) -> Result<SweepRunSettings, TemplateError> {
        let f = self.running("sweep")?;
        let at = |name: &str| format!("Resources.{}.Properties.Environment.Variables.{name}", f.id);
        let guard_share_percent: u32 = self.number(f, "DRIFT_GUARD_SHARE_PERCENT")?;
        if !(1..=100).contains(&guard_share_percent) {
            return Err(error(
                &at("DRIFT_GUARD_SHARE_PERCENT"),
                format!("{guard_share_percent} is not a share of 1 to 100 percent"),
            ));
        }
        let minutes = |name: &str| -> Result<u64, TemplateError> {
            Ok(self.number::<u64>(f, name)?.saturating_mul(60_000))
        };
        let rate = self.only_schedule(f)?;
        let period_ms = minutes("SWEEP_PERIOD_MINUTES")?;
        // The sweep's backoff starts from the period it is told; a schedule firing at another
        // rate would make the two disagree.
        if millis(rate) != period_ms {
            return Err(error(
                &at("SWEEP_PERIOD_MINUTES"),
                format!(
                    "says {} min, but the function's schedule fires every {} s",
                    period_ms / 60_000,
                    rate.as_secs()
                ),
            ));
        }
        Ok(SweepRunSettings {
            function: f.id.clone(),
            rate,
            settings: SweepSettings {
                period_ms,
                reads_per_tenant_hour: self.number(f, "DRIFT_READS_PER_TENANT_HOUR")?,
                guard_share_percent,
                stale_settle_ms: minutes("DRIFT_STALE_SETTLE_MINUTES")?,
                link_retire_grace_ms: minutes("LINK_RETIRE_GRACE_MINUTES")?,
                ..SweepSettings::DEFAULT
            },
            wecom_timeout: Duration::from_millis(self.number(f, "WECOM_TIMEOUT_MS")?),
        })
    }

    fn record_facts(&self) -> Result<RecordFactsSettings, TemplateError> {
        let f = self.running("record-facts")?;
        Ok(RecordFactsSettings {
            function: f.id.clone(),
            inbox_queue: self.only_source(f)?,
            inbox_max_receives: self.number(f, "INBOX_MAX_RECEIVES")?,
            claim_owner_lease: Duration::from_secs(self.number(f, "CLAIM_OWNER_LEASE_SECONDS")?),
            callback_archive_days: self.number(f, "CALLBACK_ARCHIVE_DAYS")?,
            refresh_queue: self.queue(f, "REFRESH_QUEUE_URL")?,
        })
    }

    fn callback(&self) -> Result<CallbackSettings, TemplateError> {
        let f = self.running("wecom-callback")?;
        Ok(CallbackSettings {
            function: f.id.clone(),
            inbox_queue: self.queue(f, "INBOX_QUEUE_URL")?,
            tenant_cache: Duration::from_secs(self.number(f, "TENANT_CACHE_SECONDS")?),
            max_age: Duration::from_secs(self.number(f, "CALLBACK_MAX_AGE_SECONDS")?),
        })
    }

    fn admin(&self) -> Result<AdminSettings, TemplateError> {
        let f = self.running("admin-api")?;
        Ok(AdminSettings {
            function: f.id.clone(),
            budget: self.budget(f)?,
        })
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}
