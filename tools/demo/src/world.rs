//! The deployed stack, found only through its CloudFormation outputs and the standard AWS
//! settings (`AWS_ENDPOINT_URL`, credentials, region), through `stack_client`.

use adapters::dynamodb::{keys, DynamoStore, PageTables};
use anyhow::Result;
use aws_sdk_dynamodb::types::AttributeValue;
use domain::ids::TenantId;
use stack_client::{queue_depth, Stack};
use std::collections::BTreeMap;

pub struct World {
    pub aws: aws_config::SdkConfig,
    pub stack: String,
    pub api_url: String,
    pub table: String,
    pub inbox: String,
    pub refresh: String,
    /// Queues that hand refreshes back to `refresh` later (retry delays), when the stack has
    /// them: outputs `RefreshRetry...QueueUrl`.
    pub refresh_retries: Vec<String>,
    pub dead_letters: Vec<(String, String)>,
    /// The quota loop's notifications (the EventBridge rule's default target), when the stack
    /// has them.
    pub quota_notifications: Option<String>,
    /// Every function of the stack: output name (`...FunctionName`) -> function name.
    pub functions: BTreeMap<String, String>,
    pub sqs: aws_sdk_sqs::Client,
    pub dynamodb: aws_sdk_dynamodb::Client,
    pub lambda: aws_sdk_lambda::Client,
    pub store: DynamoStore,
}

impl World {
    pub async fn connect(stack: &str, api_override: Option<&str>) -> Result<Self> {
        let aws = adapters::aws::load_config().await;
        let found = Stack::discover(&aws, stack, api_override).await?;
        let dead_letters = found
            .outputs
            .iter()
            .filter(|(key, _)| key.ends_with("DeadLetterQueueUrl"))
            .map(|(key, url)| {
                (
                    key.trim_end_matches("DeadLetterQueueUrl").to_owned(),
                    url.clone(),
                )
            })
            .collect::<BTreeMap<_, _>>()
            .into_iter()
            .collect();
        let functions = found
            .outputs
            .iter()
            .filter(|(key, _)| key.ends_with("FunctionName"))
            .map(|(key, name)| (key.clone(), name.clone()))
            .collect();
        let table = found.output("TableName")?.to_owned();
        let pages = PageTables {
            rotations: found.output("RotationTableName")?.to_owned(),
            visits: found.output("VisitTableName")?.to_owned(),
        };
        let dynamodb = aws_sdk_dynamodb::Client::new(&aws);
        Ok(Self {
            stack: stack.to_owned(),
            inbox: found.output("InboxQueueUrl")?.to_owned(),
            refresh: found.output("RefreshQueueUrl")?.to_owned(),
            refresh_retries: found
                .outputs
                .iter()
                .filter(|(key, _)| {
                    (key.starts_with("RefreshRetry")
                        || *key == "SlowRefreshQueueUrl"
                        || *key == "FanOutQueueUrl")
                        && key.ends_with("QueueUrl")
                })
                .map(|(_, url)| url.clone())
                .collect(),
            quota_notifications: found.outputs.get("QuotaNotificationsQueueUrl").cloned(),
            api_url: found.api_url,
            dead_letters,
            functions,
            sqs: aws_sdk_sqs::Client::new(&aws),
            lambda: aws_sdk_lambda::Client::new(&aws),
            store: DynamoStore::new(dynamodb.clone(), table.clone()).with_pages(pages),
            dynamodb,
            table,
            aws,
        })
    }

    /// Visible + in flight + delayed messages, as the queue reports them.
    pub async fn queue_depth(&self, url: &str) -> Result<u64> {
        queue_depth(&self.sqs, url).await
    }

    /// Inbox and refresh queue depths (refresh with the slow lane and the retry queues).
    pub async fn work_queues(&self) -> Result<(u64, u64)> {
        let mut refresh = self.queue_depth(&self.refresh).await?;
        for url in &self.refresh_retries {
            refresh += self.queue_depth(url).await?;
        }
        Ok((self.queue_depth(&self.inbox).await?, refresh))
    }

    /// A number attribute of one of the tenant's items (strongly consistent read), e.g.
    /// `due_at_ms` of `DUE#MIDNIGHT`.
    pub async fn item_number(
        &self,
        tenant: &TenantId,
        sk: &str,
        name: &str,
    ) -> Result<Option<u64>> {
        let item = self
            .dynamodb
            .get_item()
            .table_name(&self.table)
            .key("pk", AttributeValue::S(keys::home(tenant, sk)))
            .key("sk", AttributeValue::S(sk.to_owned()))
            .consistent_read(true)
            .send()
            .await?
            .item;
        Ok(item
            .as_ref()
            .and_then(|i| i.get(name))
            .and_then(|v| v.as_n().ok())
            .and_then(|n| n.parse().ok()))
    }
}
