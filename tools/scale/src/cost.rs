//! A month's AWS bill at list prices, from the usage the simulation counts.
//!
//! The prices are in one place ([`LIST_PRICES`]), each with where it comes from; they are
//! us-east-1 on-demand list prices as of [`PRICES_AS_OF`] (tools/scale/README.md lists them
//! and what is left out). Free tiers are ignored (a few dollars a month against a platform's
//! bill) except EventBridge Scheduler's, whose 14 million free invocations a month cover the
//! tick and the sweep entirely.

use std::time::Duration;

pub const REGION: &str = "us-east-1";
/// When these prices were last compared with AWS's pricing pages.
pub const PRICES_AS_OF: &str = "2026-12";

/// What AWS bills by, one price each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Item {
    LambdaGbSecondX86,
    LambdaGbSecondArm,
    LambdaRequests,
    ApiRestRequests,
    SqsFifoRequests,
    SqsStandardRequests,
    DynamoWriteUnits,
    DynamoReadUnits,
    DynamoStorage,
    DynamoPointInTimeRecovery,
    LogsIngested,
    LogsStored,
    CustomMetrics,
    Alarms,
    Dashboards,
    NatGatewayHours,
    NatGatewayData,
    PublicIpv4Hours,
    InterfaceEndpointHours,
    SchedulerInvocations,
}

/// `usd` for every `per` units; the first `free_per_month` units of a month cost nothing.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Price {
    pub item: Item,
    pub usd: f64,
    pub per: f64,
    pub unit: &'static str,
    pub free_per_month: f64,
    pub source: &'static str,
}

const MILLION: f64 = 1_000_000.0;

pub const LIST_PRICES: &[Price] = &[
    Price { item: Item::LambdaGbSecondX86, usd: 0.000_016_666_7, per: 1.0, unit: "GB-s", free_per_month: 0.0,
        source: "AWS Lambda pricing, duration, x86, first 6 billion GB-s a month" },
    Price { item: Item::LambdaGbSecondArm, usd: 0.000_013_333_4, per: 1.0, unit: "GB-s", free_per_month: 0.0,
        source: "AWS Lambda pricing, duration, Arm (Graviton2), first 7.5 billion GB-s a month" },
    Price { item: Item::LambdaRequests, usd: 0.20, per: MILLION, unit: "requests", free_per_month: 0.0,
        source: "AWS Lambda pricing, requests" },
    Price { item: Item::ApiRestRequests, usd: 3.50, per: MILLION, unit: "requests", free_per_month: 0.0,
        source: "Amazon API Gateway pricing, REST APIs, first 333 million a month" },
    Price { item: Item::SqsFifoRequests, usd: 0.50, per: MILLION, unit: "requests", free_per_month: 0.0,
        source: "Amazon SQS pricing, FIFO requests (each 64 KB chunk of a call is one request)" },
    Price { item: Item::SqsStandardRequests, usd: 0.40, per: MILLION, unit: "requests", free_per_month: 0.0,
        source: "Amazon SQS pricing, standard requests (each 64 KB chunk of a call is one request)" },
    Price { item: Item::DynamoWriteUnits, usd: 0.625, per: MILLION, unit: "WRU", free_per_month: 0.0,
        source: "Amazon DynamoDB pricing, on-demand write request units (after the November 2024 cut)" },
    Price { item: Item::DynamoReadUnits, usd: 0.125, per: MILLION, unit: "RRU", free_per_month: 0.0,
        source: "Amazon DynamoDB pricing, on-demand read request units (after the November 2024 cut)" },
    Price { item: Item::DynamoStorage, usd: 0.25, per: 1.0, unit: "GB-month", free_per_month: 0.0,
        source: "Amazon DynamoDB pricing, Standard table class storage" },
    Price { item: Item::DynamoPointInTimeRecovery, usd: 0.20, per: 1.0, unit: "GB-month", free_per_month: 0.0,
        source: "Amazon DynamoDB pricing, continuous backups (point-in-time recovery)" },
    Price { item: Item::LogsIngested, usd: 0.50, per: 1.0, unit: "GB", free_per_month: 0.0,
        source: "Amazon CloudWatch pricing, Logs, Standard class collection (ingestion)" },
    Price { item: Item::LogsStored, usd: 0.03, per: 1.0, unit: "GB-month", free_per_month: 0.0,
        source: "Amazon CloudWatch pricing, Logs, storage (archived); no retention means kept forever" },
    Price { item: Item::CustomMetrics, usd: 0.30, per: 1.0, unit: "metric-months", free_per_month: 0.0,
        source: "Amazon CloudWatch pricing, custom metrics, first 10,000 a month (EMF metrics are custom metrics)" },
    Price { item: Item::Alarms, usd: 0.10, per: 1.0, unit: "alarm-months", free_per_month: 0.0,
        source: "Amazon CloudWatch pricing, standard-resolution alarm per metric" },
    Price { item: Item::Dashboards, usd: 3.00, per: 1.0, unit: "dashboard-months", free_per_month: 0.0,
        source: "Amazon CloudWatch pricing, dashboards" },
    Price { item: Item::NatGatewayHours, usd: 0.045, per: 1.0, unit: "gateway-hours", free_per_month: 0.0,
        source: "Amazon VPC pricing, NAT gateway per hour" },
    Price { item: Item::NatGatewayData, usd: 0.045, per: 1.0, unit: "GB", free_per_month: 0.0,
        source: "Amazon VPC pricing, NAT gateway per GB processed" },
    Price { item: Item::PublicIpv4Hours, usd: 0.005, per: 1.0, unit: "address-hours", free_per_month: 0.0,
        source: "Amazon VPC pricing, public IPv4 address (a NAT gateway's Elastic IP)" },
    Price { item: Item::InterfaceEndpointHours, usd: 0.01, per: 1.0, unit: "endpoint-zone-hours", free_per_month: 0.0,
        source: "AWS PrivateLink pricing, interface VPC endpoint per availability zone per hour" },
    Price { item: Item::SchedulerInvocations, usd: 1.00, per: MILLION, unit: "invocations", free_per_month: 14.0 * MILLION,
        source: "Amazon EventBridge pricing, Scheduler, after 14 million free invocations a month" },
];

pub fn price(item: Item) -> &'static Price {
    LIST_PRICES
        .iter()
        .find(|p| p.item == item)
        .expect("every Item has a row (the test every_item_has_one_price keeps it so)")
}

/// A month's counted usage: what the simulation counts, scaled to a month by its caller.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MonthUsage {
    pub tenants: u64,
    pub scans: u64,
    pub functions: Vec<FunctionUsage>,
    pub api_rest_requests: u64,
    pub sqs: SqsRequests,
    pub dynamo: DynamoUsage,
    pub logs: LogsUsage,
    pub custom_metrics: u64,
    pub alarms: u64,
    pub dashboards: u64,
    /// `None`: the functions reach WeCom without a NAT gateway (as the template deploys today).
    pub nat: Option<NatUsage>,
    pub scheduler_invocations: u64,
}

impl MonthUsage {
    /// Both months' usage together: a month counted in parts (the day's activity, the waves)
    /// is billed as one. A function in both is one function; the tenants, the storage and the
    /// NAT gateways are `self`'s when `other` has none.
    pub fn plus(&self, other: &MonthUsage) -> MonthUsage {
        let mut functions = self.functions.clone();
        for theirs in &other.functions {
            match functions.iter_mut().find(|f| f.function == theirs.function) {
                Some(ours) => {
                    ours.invocations += theirs.invocations;
                    ours.billed_ms += theirs.billed_ms;
                }
                None => functions.push(theirs.clone()),
            }
        }
        MonthUsage {
            tenants: self.tenants.max(other.tenants),
            scans: self.scans + other.scans,
            functions,
            api_rest_requests: self.api_rest_requests + other.api_rest_requests,
            sqs: SqsRequests {
                fifo: self.sqs.fifo + other.sqs.fifo,
                standard: self.sqs.standard + other.sqs.standard,
            },
            dynamo: DynamoUsage {
                read_units: self.dynamo.read_units + other.dynamo.read_units,
                write_units: self.dynamo.write_units + other.dynamo.write_units,
                storage_gb: self.dynamo.storage_gb + other.dynamo.storage_gb,
                point_in_time_recovery: self.dynamo.point_in_time_recovery
                    || other.dynamo.point_in_time_recovery,
            },
            logs: LogsUsage {
                ingested_gb: self.logs.ingested_gb + other.logs.ingested_gb,
                stored_gb: self.logs.stored_gb + other.logs.stored_gb,
            },
            custom_metrics: self.custom_metrics.max(other.custom_metrics),
            alarms: self.alarms.max(other.alarms),
            dashboards: self.dashboards.max(other.dashboards),
            nat: self.nat.clone().or_else(|| other.nat.clone()),
            scheduler_invocations: self.scheduler_invocations + other.scheduler_invocations,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct FunctionUsage {
    pub function: String,
    pub arm64: bool,
    pub memory_mb: u32,
    pub invocations: u64,
    /// Lambda bills each invocation's duration rounded up to the millisecond.
    pub billed_ms: u64,
}

impl FunctionUsage {
    pub fn invoked(&mut self, duration: Duration) {
        self.invocations += 1;
        self.billed_ms += u64::try_from(duration.as_micros().div_ceil(1000)).unwrap_or(u64::MAX);
    }

    pub fn gb_seconds(&self) -> f64 {
        f64::from(self.memory_mb) / 1024.0 * self.billed_ms as f64 / 1000.0
    }
}

/// SQS bills a call (send, receive, delete, in a batch of up to 10 or alone) as one request
/// for each 64 KB (65,536 bytes) of its payload, at least one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SqsRequests {
    pub fifo: u64,
    pub standard: u64,
}

pub const SQS_CHUNK_BYTES: u64 = 65_536;
pub const SQS_MAX_BATCH: u64 = 10;

impl SqsRequests {
    /// One API call carrying `payload_bytes` in all.
    pub fn call(&mut self, fifo: bool, payload_bytes: u64) {
        let billed = payload_bytes.div_ceil(SQS_CHUNK_BYTES).max(1);
        if fifo {
            self.fifo += billed;
        } else {
            self.standard += billed;
        }
    }

    /// `messages` of `bytes_each`, sent (or received, or deleted) in batches of ten.
    pub fn batched(&mut self, fifo: bool, messages: u64, bytes_each: u64) {
        let full = messages / SQS_MAX_BATCH;
        for _ in 0..full {
            self.call(fifo, SQS_MAX_BATCH * bytes_each);
        }
        let rest = messages % SQS_MAX_BATCH;
        if rest > 0 {
            self.call(fifo, rest * bytes_each);
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct DynamoUsage {
    pub read_units: f64,
    pub write_units: f64,
    /// The table's average size over the month (indexes included).
    pub storage_gb: f64,
    pub point_in_time_recovery: bool,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct LogsUsage {
    pub ingested_gb: f64,
    /// Average stored over the month: with no retention, every earlier month's logs too.
    pub stored_gb: f64,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct NatUsage {
    pub gateways: u32,
    pub hours: f64,
    pub processed_gb: f64,
    /// Interface endpoints' network interfaces, one per zone each, billed by the hour too.
    pub endpoint_zones: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct CostLine {
    pub service: &'static str,
    pub what: String,
    pub quantity: f64,
    pub unit: &'static str,
    pub usd: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct MonthCost {
    /// Every line with a quantity, largest first.
    pub lines: Vec<CostLine>,
    pub total_usd: f64,
    pub per_tenant_month_usd: Option<f64>,
    pub per_million_scans_usd: Option<f64>,
}

impl MonthCost {
    /// The `n` most expensive lines.
    pub fn top(&self, n: usize) -> &[CostLine] {
        &self.lines[..n.min(self.lines.len())]
    }
}

pub fn month_cost(usage: &MonthUsage) -> MonthCost {
    let mut lines = Vec::new();
    let mut line = |service: &'static str, what: String, item: Item, quantity: f64| {
        if quantity > 0.0 {
            let price = price(item);
            let billed = (quantity - price.free_per_month).max(0.0);
            lines.push(CostLine {
                service,
                what,
                quantity,
                unit: price.unit,
                usd: billed / price.per * price.usd,
            });
        }
    };
    for function in &usage.functions {
        let item = if function.arm64 {
            Item::LambdaGbSecondArm
        } else {
            Item::LambdaGbSecondX86
        };
        line(
            "Lambda",
            format!("{} compute", function.function),
            item,
            function.gb_seconds(),
        );
    }
    let invocations: u64 = usage.functions.iter().map(|f| f.invocations).sum();
    line(
        "Lambda",
        "requests".into(),
        Item::LambdaRequests,
        invocations as f64,
    );
    line(
        "API Gateway",
        "REST API requests".into(),
        Item::ApiRestRequests,
        usage.api_rest_requests as f64,
    );
    line(
        "SQS",
        "FIFO requests".into(),
        Item::SqsFifoRequests,
        usage.sqs.fifo as f64,
    );
    line(
        "SQS",
        "standard requests".into(),
        Item::SqsStandardRequests,
        usage.sqs.standard as f64,
    );
    line(
        "DynamoDB",
        "read request units".into(),
        Item::DynamoReadUnits,
        usage.dynamo.read_units,
    );
    line(
        "DynamoDB",
        "write request units".into(),
        Item::DynamoWriteUnits,
        usage.dynamo.write_units,
    );
    line(
        "DynamoDB",
        "storage".into(),
        Item::DynamoStorage,
        usage.dynamo.storage_gb,
    );
    if usage.dynamo.point_in_time_recovery {
        line(
            "DynamoDB",
            "point-in-time recovery".into(),
            Item::DynamoPointInTimeRecovery,
            usage.dynamo.storage_gb,
        );
    }
    line(
        "CloudWatch",
        "Logs ingested".into(),
        Item::LogsIngested,
        usage.logs.ingested_gb,
    );
    line(
        "CloudWatch",
        "Logs stored".into(),
        Item::LogsStored,
        usage.logs.stored_gb,
    );
    line(
        "CloudWatch",
        "custom metrics".into(),
        Item::CustomMetrics,
        usage.custom_metrics as f64,
    );
    line(
        "CloudWatch",
        "alarms".into(),
        Item::Alarms,
        usage.alarms as f64,
    );
    line(
        "CloudWatch",
        "dashboards".into(),
        Item::Dashboards,
        usage.dashboards as f64,
    );
    if let Some(nat) = &usage.nat {
        let gateway_hours = f64::from(nat.gateways) * nat.hours;
        line(
            "VPC",
            "NAT gateway hours".into(),
            Item::NatGatewayHours,
            gateway_hours,
        );
        line(
            "VPC",
            "NAT gateway data".into(),
            Item::NatGatewayData,
            nat.processed_gb,
        );
        line(
            "VPC",
            "NAT gateways' public IPv4".into(),
            Item::PublicIpv4Hours,
            gateway_hours,
        );
        line(
            "VPC",
            "interface endpoints".into(),
            Item::InterfaceEndpointHours,
            f64::from(nat.endpoint_zones) * nat.hours,
        );
    }
    line(
        "EventBridge",
        "Scheduler invocations".into(),
        Item::SchedulerInvocations,
        usage.scheduler_invocations as f64,
    );
    lines.sort_by(|a, b| b.usd.total_cmp(&a.usd));
    // Folded from +0: an empty month's total prints as $0, not -0.
    let total_usd = lines.iter().fold(0.0, |total, l| total + l.usd);
    MonthCost {
        lines,
        total_usd,
        per_tenant_month_usd: (usage.tenants > 0).then(|| total_usd / usage.tenants as f64),
        per_million_scans_usd: (usage.scans > 0)
            .then(|| total_usd / (usage.scans as f64 / MILLION)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-6
    }

    fn usd(cost: &MonthCost, what: &str) -> f64 {
        cost.lines
            .iter()
            .find(|l| l.what == what)
            .map_or(0.0, |l| l.usd)
    }

    #[test]
    fn every_item_has_one_price() {
        let items = [
            Item::LambdaGbSecondX86,
            Item::LambdaGbSecondArm,
            Item::LambdaRequests,
            Item::ApiRestRequests,
            Item::SqsFifoRequests,
            Item::SqsStandardRequests,
            Item::DynamoWriteUnits,
            Item::DynamoReadUnits,
            Item::DynamoStorage,
            Item::DynamoPointInTimeRecovery,
            Item::LogsIngested,
            Item::LogsStored,
            Item::CustomMetrics,
            Item::Alarms,
            Item::Dashboards,
            Item::NatGatewayHours,
            Item::NatGatewayData,
            Item::PublicIpv4Hours,
            Item::InterfaceEndpointHours,
            Item::SchedulerInvocations,
        ];
        for item in items {
            assert_eq!(
                LIST_PRICES.iter().filter(|p| p.item == item).count(),
                1,
                "{item:?}"
            );
        }
        assert_eq!(LIST_PRICES.len(), items.len());
    }

    #[test]
    fn a_million_tenth_second_runs_at_256_mb_cost_their_gb_seconds_and_requests() {
        let mut refresh = FunctionUsage {
            function: "Refresh".into(),
            memory_mb: 256,
            ..Default::default()
        };
        for _ in 0..1_000 {
            refresh.invoked(Duration::from_micros(99_001)); // billed as 100 ms
        }
        refresh.invocations *= 1_000;
        refresh.billed_ms *= 1_000;
        // 1e6 x 0.1 s x 0.25 GB = 25,000 GB-s at $0.0000166667.
        assert!(close(refresh.gb_seconds(), 25_000.0));
        let cost = month_cost(&MonthUsage {
            functions: vec![refresh],
            ..Default::default()
        });
        assert!(close(usd(&cost, "Refresh compute"), 0.416_667_5));
        assert!(close(usd(&cost, "requests"), 0.20));
    }

    #[test]
    fn sqs_bills_a_call_per_64_kb_and_ten_messages_share_a_call() {
        let mut sqs = SqsRequests::default();
        sqs.batched(true, 25, 1_024); // 3 calls of at most 10 KB
        assert_eq!(sqs.fifo, 3);
        sqs.batched(false, 10, 10_240); // one call of 100 KB: two chunks
        assert_eq!(sqs.standard, 2);
        sqs.call(false, 65_536);
        sqs.call(false, 65_537);
        sqs.call(false, 0); // an empty receive is still a request
        assert_eq!(sqs.standard, 2 + 1 + 2 + 1);
        let cost = month_cost(&MonthUsage {
            sqs: SqsRequests {
                fifo: 4_000_000,
                standard: 1_000_000,
            },
            ..Default::default()
        });
        assert!(close(usd(&cost, "FIFO requests"), 2.0));
        assert!(close(usd(&cost, "standard requests"), 0.40));
    }

    #[test]
    fn dynamodb_bills_units_storage_and_its_backups() {
        let cost = month_cost(&MonthUsage {
            dynamo: DynamoUsage {
                read_units: 64e6,
                write_units: 10e6,
                storage_gb: 10.0,
                point_in_time_recovery: true,
            },
            ..Default::default()
        });
        assert!(close(usd(&cost, "read request units"), 8.0));
        assert!(close(usd(&cost, "write request units"), 6.25));
        assert!(close(usd(&cost, "storage"), 2.50));
        assert!(close(usd(&cost, "point-in-time recovery"), 2.0));
        assert!(close(cost.total_usd, 18.75));
    }

    #[test]
    fn the_scheduler_is_free_below_fourteen_million_a_month() {
        let tick_and_sweep = MonthUsage {
            scheduler_invocations: 30 * (1_440 + 288),
            ..Default::default()
        };
        assert!(close(month_cost(&tick_and_sweep).total_usd, 0.0));
        let many = MonthUsage {
            scheduler_invocations: 20_000_000,
            ..Default::default()
        };
        assert!(close(month_cost(&many).total_usd, 6.0));
    }

    #[test]
    fn a_nat_gateway_costs_its_hours_data_and_address_and_an_endpoint_its_zones_hours() {
        let cost = month_cost(&MonthUsage {
            nat: Some(NatUsage {
                gateways: 2,
                hours: 720.0,
                processed_gb: 100.0,
                endpoint_zones: 2,
            }),
            ..Default::default()
        });
        // 1,440 gateway-hours x $0.045 + 100 GB x $0.045 + 1,440 address-hours x $0.005
        // + 1,440 endpoint-zone-hours x $0.01
        assert!(close(cost.total_usd, 64.8 + 4.5 + 7.2 + 14.4));
    }

    #[test]
    fn a_month_counted_in_parts_costs_what_its_parts_cost() {
        let function = |invocations, billed_ms| FunctionUsage {
            function: "Refresh".into(),
            memory_mb: 512,
            invocations,
            billed_ms,
            ..Default::default()
        };
        let day = MonthUsage {
            tenants: 300,
            scans: 1_000_000,
            functions: vec![function(1_000_000, 50_000_000)],
            sqs: SqsRequests {
                fifo: 2_000_000,
                standard: 10,
            },
            dynamo: DynamoUsage {
                read_units: 1e6,
                write_units: 1e6,
                storage_gb: 10.0,
                point_in_time_recovery: false,
            },
            scheduler_invocations: 50_000,
            ..Default::default()
        };
        let waves = MonthUsage {
            functions: vec![function(3_000_000, 90_000_000)],
            sqs: SqsRequests {
                fifo: 6_000_000,
                standard: 0,
            },
            dynamo: DynamoUsage {
                read_units: 4e6,
                write_units: 2e6,
                ..Default::default()
            },
            logs: LogsUsage {
                ingested_gb: 2.0,
                stored_gb: 2.0,
            },
            ..Default::default()
        };
        let whole = day.plus(&waves);
        assert_eq!(whole.tenants, 300);
        assert_eq!(whole.functions.len(), 1, "one function, billed once");
        assert_eq!(whole.functions[0].invocations, 4_000_000);
        assert_eq!(whole.sqs.fifo, 8_000_000);
        assert!(close(whole.dynamo.storage_gb, 10.0));
        let parts = month_cost(&day).total_usd + month_cost(&waves).total_usd;
        assert!(close(month_cost(&whole).total_usd, parts));
        assert!(close(
            usd(&month_cost(&whole), "FIFO requests"),
            usd(&month_cost(&waves), "FIFO requests") * 4.0 / 3.0
        ));
    }

    #[test]
    fn the_total_divides_per_tenant_and_per_million_scans_and_the_top_lines_come_first() {
        let cost = month_cost(&MonthUsage {
            tenants: 30_000,
            scans: 20_000_000,
            api_rest_requests: 10_000_000, // $35
            logs: LogsUsage {
                ingested_gb: 100.0,
                stored_gb: 1_000.0,
            }, // $50 + $30
            custom_metrics: 100,           // $30
            alarms: 30,                    // $3
            dashboards: 1,                 // $3
            ..Default::default()
        });
        assert!(close(cost.total_usd, 151.0));
        assert!(close(
            cost.per_tenant_month_usd.unwrap_or_default(),
            151.0 / 30_000.0
        ));
        assert!(close(
            cost.per_million_scans_usd.unwrap_or_default(),
            151.0 / 20.0
        ));
        let top: Vec<&str> = cost.top(2).iter().map(|l| l.what.as_str()).collect();
        assert_eq!(top, ["Logs ingested", "REST API requests"]);
        assert_eq!(cost.top(100).len(), 6);
    }
}
