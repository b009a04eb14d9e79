//! A client of a deployed qrsync stack, found only through its CloudFormation outputs and the
//! standard AWS settings (`AWS_ENDPOINT_URL`, credentials, region): what a platform backend or
//! an operator would use. The integration tests, `make demo` and `make bench` share it, and
//! the WeCom sandbox's control API (`sandbox`).

mod admin;
pub mod report;
pub mod sandbox;
mod target;

pub use admin::{sigv4_headers, AdminApi, Answer, Unsigned};
pub use target::Target;

use anyhow::{anyhow, Context, Result};
use aws_sdk_sqs::types::QueueAttributeName;
use std::collections::HashMap;

/// The CloudWatch Logs group a deployed function writes to: the one its `LoggingConfig` names
/// (template.yaml gives each function its own, with the stack's retention), else Lambda's
/// `/aws/lambda/<name>`.
pub async fn log_group(aws: &aws_config::SdkConfig, function_name: &str) -> Result<String> {
    let config = aws_sdk_lambda::Client::new(aws)
        .get_function_configuration()
        .function_name(function_name)
        .send()
        .await
        .with_context(|| format!("the configuration of {function_name}"))?;
    Ok(config
        .logging_config()
        .and_then(|logging| logging.log_group())
        .map_or_else(|| format!("/aws/lambda/{function_name}"), str::to_owned))
}

/// A deployed stack's outputs and the base URL of its REST API.
pub struct Stack {
    pub name: String,
    pub outputs: HashMap<String, String>,
    pub api_url: String,
}

impl Stack {
    /// Reads the stack's outputs. `api_url` overrides the API base; otherwise it is derived
    /// for MiniStack, which serves a REST API under `/_aws/execute-api/<id>/<stage>` on the
    /// port `AWS_ENDPOINT_URL` names (AWS serves it at the `ApiUrl` output).
    pub async fn discover(
        aws: &aws_config::SdkConfig,
        name: &str,
        api_url: Option<&str>,
    ) -> Result<Self> {
        let described = aws_sdk_cloudformation::Client::new(aws)
            .describe_stacks()
            .stack_name(name)
            .send()
            .await
            .with_context(|| format!("stack {name} is not deployed (run `make deploy`)"))?;
        let outputs: HashMap<String, String> = described
            .stacks()
            .first()
            .ok_or_else(|| anyhow!("no stack {name}"))?
            .outputs()
            .iter()
            .filter_map(|o| Some((o.output_key()?.to_owned(), o.output_value()?.to_owned())))
            .collect();
        let mut stack = Self {
            name: name.to_owned(),
            outputs,
            api_url: String::new(),
        };
        stack.api_url = match api_url {
            Some(url) => url.trim_end_matches('/').to_owned(),
            None => {
                let endpoint = std::env::var("AWS_ENDPOINT_URL")
                    .context("AWS_ENDPOINT_URL must point at the local stack")?;
                format!(
                    "{}/_aws/execute-api/{}/{}",
                    endpoint.trim_end_matches('/'),
                    stack.output("ApiId")?,
                    stack.output("ApiStage")?
                )
            }
        };
        Ok(stack)
    }

    pub fn output(&self, key: &str) -> Result<&str> {
        self.outputs
            .get(key)
            .map(String::as_str)
            .ok_or_else(|| anyhow!("stack {} has no output {key}", self.name))
    }
}

/// Visible + in flight + delayed messages, as the queue reports them.
pub async fn queue_depth(sqs: &aws_sdk_sqs::Client, url: &str) -> Result<u64> {
    let answer = sqs
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
