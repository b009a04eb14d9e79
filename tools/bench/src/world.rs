//! The deployed stack, found through its CloudFormation outputs (`stack_client`): its queues,
//! the budget its refresh function was deployed with, and the tenant's items in the table.

use adapters::dynamodb::DynamoStore;
use anyhow::{anyhow, Context, Result};
use aws_sdk_dynamodb::types::AttributeValue;
use domain::ids::TenantId;
use stack_client::{queue_depth, Stack};
use std::collections::{BTreeMap, HashMap};

pub type Item = HashMap<String, AttributeValue>;

pub fn number(item: &Item, name: &str) -> Option<u64> {
    item.get(name)?.as_n().ok()?.parse().ok()
}

pub struct World {
    pub aws: aws_config::SdkConfig,
    pub stack: String,
    pub api_url: String,
    pub table: String,
    /// Queues holding work (output name -> URL): every `...QueueUrl` output but the dead
    /// letters and the quota notifications, so refresh.fifo, its retry delay queues, the inbox
    /// and a slow lane when the stack has one.
    pub work_queues: BTreeMap<String, String>,
    /// `...DeadLetterQueueUrl` outputs.
    pub dead_letters: BTreeMap<String, String>,
    refresh_function: String,
    /// The sweep function (its logs hold each run's report).
    pub sweep_function: String,
    sqs: aws_sdk_sqs::Client,
    lambda: aws_sdk_lambda::Client,
    pub store: DynamoStore,
}

/// What the refresh function was deployed with (its environment).
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    pub per_minute: u64,
    pub per_hour: u64,
}

impl World {
    pub async fn connect(stack: &str, api_override: Option<&str>) -> Result<Self> {
        let aws = adapters::aws::load_config().await;
        let found = Stack::discover(&aws, stack, api_override).await?;
        let queues = |keep: &dyn Fn(&str) -> bool| -> BTreeMap<String, String> {
            found
                .outputs
                .iter()
                .filter(|(key, _)| key.ends_with("QueueUrl") && keep(key))
                .map(|(key, url)| (key.trim_end_matches("QueueUrl").to_owned(), url.clone()))
                .collect()
        };
        let work_queues =
            queues(&|key| !key.contains("DeadLetter") && !key.starts_with("QuotaNotifications"));
        let dead_letters = queues(&|key| key.contains("DeadLetter"));
        let table = found.output("TableName")?.to_owned();
        Ok(Self {
            stack: stack.to_owned(),
            api_url: found.api_url.clone(),
            refresh_function: found.output("RefreshCodesFunctionName")?.to_owned(),
            sweep_function: found.output("SweepFunctionName")?.to_owned(),
            work_queues,
            dead_letters,
            sqs: aws_sdk_sqs::Client::new(&aws),
            lambda: aws_sdk_lambda::Client::new(&aws),
            store: DynamoStore::new(aws_sdk_dynamodb::Client::new(&aws), table.clone()),
            table,
            aws,
        })
    }

    /// The WeCom budget the refresh function spends, from its environment.
    pub async fn budget(&self) -> Result<Budget> {
        let config = self
            .lambda
            .get_function_configuration()
            .function_name(&self.refresh_function)
            .send()
            .await
            .with_context(|| format!("GetFunctionConfiguration {}", self.refresh_function))?;
        let variables = config
            .environment()
            .and_then(|e| e.variables())
            .ok_or_else(|| anyhow!("{} has no environment", self.refresh_function))?;
        let read = |name: &str| -> Result<u64> {
            variables
                .get(name)
                .ok_or_else(|| anyhow!("{} has no {name}", self.refresh_function))?
                .parse()
                .with_context(|| format!("{name} of {}", self.refresh_function))
        };
        Ok(Budget {
            per_minute: read("WECOM_BUDGET_PER_MINUTE")?,
            per_hour: read("WECOM_BUDGET_PER_HOUR")?,
        })
    }

    /// Pauses (reserved concurrency 0) or resumes the sweep. The bench seeds its tenant with
    /// the sweep paused: a run reading a tenant that is still being seeded measures nothing
    /// and competes with the seeding for the emulator's one process.
    pub async fn pause_sweep(&self, paused: bool) -> Result<()> {
        if paused {
            self.lambda
                .put_function_concurrency()
                .function_name(&self.sweep_function)
                .reserved_concurrent_executions(0)
                .send()
                .await
                .with_context(|| format!("PutFunctionConcurrency {}", self.sweep_function))?;
        } else {
            self.lambda
                .delete_function_concurrency()
                .function_name(&self.sweep_function)
                .send()
                .await
                .with_context(|| format!("DeleteFunctionConcurrency {}", self.sweep_function))?;
        }
        Ok(())
    }

    /// Depth (visible + in flight + delayed) of each queue named.
    pub async fn depths(&self, queues: &BTreeMap<String, String>) -> Result<Vec<(String, u64)>> {
        let mut depths = Vec::new();
        for (name, url) in queues {
            depths.push((name.clone(), queue_depth(&self.sqs, url).await?));
        }
        Ok(depths)
    }

    /// The refresh function's counters of the tenant (`STATS#REFRESH#<shard>#<day>`), summed over
    /// the days present. An attribute a stack does not write is absent from the map.
    pub async fn tally(&self, tenant: &TenantId) -> Result<BTreeMap<String, u64>> {
        let mut tally = BTreeMap::new();
        for item in self.store.refresh_tallies(tenant, None).await? {
            for (name, value) in &item {
                if let Some(n) = value.as_n().ok().and_then(|n| n.parse::<u64>().ok()) {
                    *tally.entry(name.clone()).or_insert(0) += n;
                }
            }
        }
        Ok(tally)
    }
}
