//! The stack as the operator's tool sees it: its outputs and clients.

use anyhow::{anyhow, Result};
use stack_client::{AdminApi, Stack};

pub struct Ops {
    pub aws: aws_config::SdkConfig,
    pub stack: Stack,
    pub sqs: aws_sdk_sqs::Client,
    pub dynamodb: aws_sdk_dynamodb::Client,
    pub json: bool,
}

impl Ops {
    pub async fn connect(name: &str, api_url: Option<&str>, json: bool) -> Result<Self> {
        let aws = adapters::aws::load_config().await;
        let local = std::env::var_os("AWS_ENDPOINT_URL").is_some();
        // On AWS the API is served at the `ApiUrl` output; MiniStack's form is derived.
        let mut stack = Stack::discover(&aws, name, api_url.or((!local).then_some(""))).await?;
        if api_url.is_none() && !local {
            stack.api_url = stack.output("ApiUrl")?.to_owned();
        }
        Ok(Self {
            sqs: aws_sdk_sqs::Client::new(&aws),
            dynamodb: aws_sdk_dynamodb::Client::new(&aws),
            aws,
            stack,
            json,
        })
    }

    pub fn output(&self, key: &str) -> Result<&str> {
        self.stack.output(key)
    }

    pub fn table(&self) -> Result<&str> {
        self.output("TableName")
    }

    pub fn admin(&self) -> Result<AdminApi> {
        AdminApi::new(&self.stack.api_url, &self.aws)
    }

    /// Every queue of the stack: (output name without `QueueUrl`, URL), in name order.
    pub fn queues(&self) -> Vec<(String, String)> {
        let mut queues: Vec<(String, String)> = self
            .stack
            .outputs
            .iter()
            .filter_map(|(key, url)| Some((key.strip_suffix("QueueUrl")?.to_owned(), url.clone())))
            .collect();
        queues.sort();
        queues
    }

    /// Who is at the keyboard, by the credentials in use (for the record of a closed dead
    /// letter, the initiator of a replay run), with `named` (`--by`) added to it, never in its
    /// place: "<arn> as <named>".
    /// When STS does not answer, `named` alone, marked unverified.
    pub async fn caller(&self, named: Option<&str>) -> Result<String> {
        let identity = aws_sdk_sts::Client::new(&self.aws)
            .get_caller_identity()
            .send()
            .await;
        let arn = identity
            .as_ref()
            .ok()
            .and_then(|i| i.arn())
            .map(ToOwned::to_owned);
        match (arn, named) {
            (Some(arn), Some(named)) => Ok(format!("{arn} as {named}")),
            (Some(arn), None) => Ok(arn),
            (None, Some(named)) => Ok(format!("{named} (unverified: STS did not say who)")),
            (None, None) => Err(match identity {
                Err(e) => anyhow!("who is at the keyboard (STS GetCallerIdentity): {e}; pass --by"),
                Ok(_) => anyhow!("STS named no caller; pass --by"),
            }),
        }
    }
}

pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

pub fn spinner(message: &str, json: bool) -> indicatif::ProgressBar {
    if json {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new_spinner();
    bar.set_message(message.to_owned());
    bar.enable_steady_tick(std::time::Duration::from_millis(200));
    bar
}

pub fn bar(length: u64, json: bool) -> indicatif::ProgressBar {
    if json {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(length);
    if let Ok(style) =
        indicatif::ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} ({elapsed})")
    {
        bar.set_style(style.progress_chars("=> "));
    }
    bar
}
