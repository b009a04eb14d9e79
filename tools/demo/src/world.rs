//! The deployed stack, found only through its CloudFormation outputs and the standard AWS
//! settings (`AWS_ENDPOINT_URL`, credentials, region), through `stack_client`.

use anyhow::Result;
use shared::adapters::dynamodb::DynamoStore;
use stack_client::{queue_depth, Stack};

pub struct World {
    pub aws: aws_config::SdkConfig,
    pub stack: String,
    pub api_url: String,
    pub table: String,
    pub inbox: String,
    pub refresh: String,
    pub dead_letters: Vec<(String, String)>,
    pub sqs: aws_sdk_sqs::Client,
    pub store: DynamoStore,
}

impl World {
    pub async fn connect(stack: &str, api_override: Option<&str>) -> Result<Self> {
        let aws = aws_config::load_from_env().await;
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
            .collect::<std::collections::BTreeMap<_, _>>()
            .into_iter()
            .collect();
        let table = found.output("TableName")?.to_owned();
        Ok(Self {
            stack: stack.to_owned(),
            inbox: found.output("InboxQueueUrl")?.to_owned(),
            refresh: found.output("RefreshQueueUrl")?.to_owned(),
            api_url: found.api_url,
            dead_letters,
            sqs: aws_sdk_sqs::Client::new(&aws),
            store: DynamoStore::new(aws_sdk_dynamodb::Client::new(&aws), table.clone()),
            table,
            aws,
        })
    }

    /// Visible + in flight + delayed messages, as the queue reports them.
    pub async fn queue_depth(&self, url: &str) -> Result<u64> {
        queue_depth(&self.sqs, url).await
    }

    /// Inbox and refresh queue depths.
    pub async fn work_queues(&self) -> Result<(u64, u64)> {
        Ok((
            self.queue_depth(&self.inbox).await?,
            self.queue_depth(&self.refresh).await?,
        ))
    }
}
