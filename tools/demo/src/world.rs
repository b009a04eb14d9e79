//! The deployed stack, found only through its CloudFormation outputs and the standard AWS
//! settings (`AWS_ENDPOINT_URL`, credentials, region), as tests/src/lib.rs does.

use anyhow::{anyhow, Context, Result};
use aws_sdk_sqs::types::QueueAttributeName;
use shared::adapters::dynamodb::DynamoStore;
use std::collections::HashMap;

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
        let described = aws_sdk_cloudformation::Client::new(&aws)
            .describe_stacks()
            .stack_name(stack)
            .send()
            .await
            .with_context(|| format!("stack {stack} is not deployed (run `make deploy`)"))?;
        let outputs: HashMap<String, String> = described
            .stacks()
            .first()
            .ok_or_else(|| anyhow!("no stack {stack}"))?
            .outputs()
            .iter()
            .filter_map(|o| Some((o.output_key()?.to_owned(), o.output_value()?.to_owned())))
            .collect();
        let output = |key: &str| {
            outputs
                .get(key)
                .cloned()
                .ok_or_else(|| anyhow!("stack {stack} has no output {key}"))
        };
        let api_url = match api_override {
            Some(url) => url.trim_end_matches('/').to_owned(),
            None => {
                // MiniStack serves a REST API under /_aws/execute-api/<id>/<stage> on its port.
                let endpoint = std::env::var("AWS_ENDPOINT_URL")
                    .context("AWS_ENDPOINT_URL must point at the local stack")?;
                format!(
                    "{}/_aws/execute-api/{}/{}",
                    endpoint.trim_end_matches('/'),
                    output("ApiId")?,
                    output("ApiStage")?
                )
            }
        };
        let dead_letters = outputs
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
        let table = output("TableName")?;
        Ok(Self {
            stack: stack.to_owned(),
            api_url,
            inbox: output("InboxQueueUrl")?,
            refresh: output("RefreshQueueUrl")?,
            dead_letters,
            sqs: aws_sdk_sqs::Client::new(&aws),
            store: DynamoStore::new(aws_sdk_dynamodb::Client::new(&aws), table.clone()),
            table,
            aws,
        })
    }

    /// Visible + in flight + delayed messages, as the queue reports them.
    pub async fn queue_depth(&self, url: &str) -> Result<u64> {
        let answer = self
            .sqs
            .get_queue_attributes()
            .queue_url(url)
            .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
            .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
            .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesDelayed)
            .send()
            .await
            .with_context(|| format!("GetQueueAttributes {url}"))?;
        Ok(answer
            .attributes()
            .map(|a| a.values().filter_map(|v| v.parse::<u64>().ok()).sum())
            .unwrap_or(0))
    }

    /// Inbox and refresh queue depths.
    pub async fn work_queues(&self) -> Result<(u64, u64)> {
        Ok((
            self.queue_depth(&self.inbox).await?,
            self.queue_depth(&self.refresh).await?,
        ))
    }
}
