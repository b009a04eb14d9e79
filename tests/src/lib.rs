//! The harness for tests against the deployed local stack. It finds everything through the
//! stack's outputs (CloudFormation `DescribeStacks`) and the standard AWS settings
//! (`AWS_ENDPOINT_URL` and friends), exactly as a client in AWS would.
//!
//! Settings: `QRSYNC_STACK` (default `qrsync-local`), `QRSYNC_SANDBOX_URL`, and optionally
//! `QRSYNC_API_URL` to override the API base derived for MiniStack.

mod admin;
mod ops;
pub mod proxy;
mod sandbox;
mod tenant_setup;

pub use admin::Admin;
pub use ops::{ops, ops_binary, ops_raw};
pub use sandbox::Sandbox;
pub use tenant_setup::LiveTenant;

use adapters::dynamodb::{keys, DynamoStore};
use adapters::secrets::KmsDataKeys;
use anyhow::{anyhow, Context, Result};
use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_sqs::types::MessageSystemAttributeName;
use domain::admin::{AdminStore, ProfileWrite, SecretsChanged, StoredProfile};
use domain::ids::TenantId;
use domain::intake::InboxMessage;
use domain::secrets::{CacheLimits, Envelope as SecretEnvelope, Purpose};
use domain::tenants::TenantProfile;
use domain::wecom::callback::{write_flat_xml, Envelope};
use domain::wecom::crypto::CallbackCrypto;
use rand::distributions::{Alphanumeric, DistString};
use stack_client::Stack;
use std::collections::HashMap;
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_secs()
}

/// The wall clock in milliseconds since the epoch.
pub fn now_ms() -> u64 {
    u64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .expect("clock after 1970")
            .as_millis(),
    )
    .expect("ms fit u64")
}

pub fn random_id(len: usize) -> String {
    Alphanumeric.sample_string(&mut rand::thread_rng(), len)
}

/// The deployed stack, its outputs and clients for it.
pub struct World {
    pub aws: aws_config::SdkConfig,
    pub outputs: HashMap<String, String>,
    pub api_url: String,
    pub sandbox_url: String,
    pub http: reqwest::Client,
    pub sqs: aws_sdk_sqs::Client,
    pub dynamodb: aws_sdk_dynamodb::Client,
    pub lambda: aws_sdk_lambda::Client,
}

impl World {
    pub async fn connect() -> Result<Self> {
        let aws = adapters::aws::load_config().await;
        let name = std::env::var("QRSYNC_STACK").unwrap_or_else(|_| "qrsync-local".into());
        let api_override = std::env::var("QRSYNC_API_URL").ok();
        let stack = Stack::discover(&aws, &name, api_override.as_deref()).await?;
        let (outputs, api_url) = (stack.outputs, stack.api_url);
        let sandbox_url =
            std::env::var("QRSYNC_SANDBOX_URL").unwrap_or_else(|_| "http://127.0.0.1:4580".into());
        Ok(Self {
            aws: aws.clone(),
            outputs,
            api_url,
            sandbox_url,
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(30))
                .build()?,
            sqs: aws_sdk_sqs::Client::new(&aws),
            dynamodb: aws_sdk_dynamodb::Client::new(&aws),
            lambda: aws_sdk_lambda::Client::new(&aws),
        })
    }

    /// Pauses or resumes a function's SQS event source mapping, as an operator would, and
    /// waits until Lambda reports the new state. The callback tests read inbox.fifo
    /// themselves, so they pause its consumer; the pipeline tests need it running.
    pub async fn set_consumer_enabled(&self, function_output: &str, enabled: bool) -> Result<()> {
        let function = self.output(function_output);
        let mappings = self
            .lambda
            .list_event_source_mappings()
            .function_name(function)
            .send()
            .await?;
        for mapping in mappings.event_source_mappings() {
            let uuid = mapping.uuid().unwrap_or_default();
            self.lambda
                .update_event_source_mapping()
                .uuid(uuid)
                .enabled(enabled)
                .send()
                .await?;
            let wanted = if enabled { "Enabled" } else { "Disabled" };
            eventually(
                "event source mapping state",
                Duration::from_secs(60),
                || async {
                    let state = self
                        .lambda
                        .get_event_source_mapping()
                        .uuid(uuid)
                        .send()
                        .await?;
                    Ok((state.state() == Some(wanted)).then_some(()))
                },
            )
            .await?;
        }
        Ok(())
    }

    /// Deletes every message in a queue (SQS allows one purge per queue per 60 s).
    pub async fn purge(&self, queue_output: &str) -> Result<()> {
        self.sqs
            .purge_queue()
            .queue_url(self.output(queue_output))
            .send()
            .await?;
        Ok(())
    }

    /// Messages in a queue, visible, in flight or delayed.
    pub async fn queue_depth(&self, queue_output: &str) -> Result<u64> {
        stack_client::queue_depth(&self.sqs, self.output(queue_output)).await
    }

    /// Waits until inbox.fifo, the fan-out queue, refresh.fifo, the slow lane's queue and the
    /// refresh retry queues (a throttled or transiently failed reason waits there) are all
    /// empty, twice in a row.
    pub async fn wait_until_drained(&self) -> Result<()> {
        // A deadline for a failure, never a wait: a throttled reason waits out the rest of
        // the minute and a retry queue's 60 s, and the emulator is slow on a loaded machine.
        let deadline = Instant::now() + Duration::from_secs(240);
        let mut empty_polls = 0;
        while empty_polls < 2 {
            let mut depth = self.queue_depth("InboxQueueUrl").await?
                + self.queue_depth("RefreshQueueUrl").await?;
            for retry in [
                "FanOutQueueUrl",
                "SlowRefreshQueueUrl",
                "RefreshRetry15sQueueUrl",
                "RefreshRetry60sQueueUrl",
                "RefreshRetry900sQueueUrl",
            ] {
                if self.outputs.contains_key(retry) {
                    depth += self.queue_depth(retry).await?;
                }
            }
            empty_polls = if depth == 0 { empty_polls + 1 } else { 0 };
            if Instant::now() > deadline {
                return Err(anyhow!("queues not drained within 240 s"));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        Ok(())
    }

    /// A function's environment variables, by the stack output naming the function.
    pub async fn function_environment(
        &self,
        function_output: &str,
    ) -> Result<HashMap<String, String>> {
        let config = self
            .lambda
            .get_function_configuration()
            .function_name(self.output(function_output))
            .send()
            .await?;
        Ok(config
            .environment()
            .and_then(|e| e.variables())
            .cloned()
            .unwrap_or_default())
    }

    /// Replaces a function's environment, as an operator would, and waits (as on AWS) until
    /// the update is no longer in progress.
    pub async fn set_function_environment(
        &self,
        function_output: &str,
        variables: HashMap<String, String>,
    ) -> Result<()> {
        use aws_sdk_lambda::types::{Environment, LastUpdateStatus};
        let name = self.output(function_output);
        self.lambda
            .update_function_configuration()
            .function_name(name)
            .environment(
                Environment::builder()
                    .set_variables(Some(variables))
                    .build(),
            )
            .send()
            .await?;
        eventually(
            "function update applied",
            Duration::from_secs(60),
            || async {
                let config = self
                    .lambda
                    .get_function_configuration()
                    .function_name(name)
                    .send()
                    .await?;
                match config.last_update_status() {
                    Some(LastUpdateStatus::InProgress) => Ok(None),
                    Some(LastUpdateStatus::Failed) => Err(anyhow!(
                        "function update failed: {:?}",
                        config.last_update_status_reason()
                    )),
                    _ => Ok(Some(())),
                }
            },
        )
        .await
    }

    /// Every log line a function wrote since `since_ms`, from its CloudWatch Logs group
    /// (`stack_client::log_group`), following pages. A line can reach CloudWatch Logs after the function's
    /// other effects, so a group not there yet holds no lines (a caller polling for a line then
    /// polls again).
    pub async fn function_logs(&self, function_output: &str, since_ms: u64) -> Result<Vec<String>> {
        let logs = aws_sdk_cloudwatchlogs::Client::new(&self.aws);
        let group = stack_client::log_group(&self.aws, self.output(function_output)).await?;
        let mut lines = Vec::new();
        let mut next = None;
        loop {
            let page = match logs
                .filter_log_events()
                .log_group_name(&group)
                .start_time(i64::try_from(since_ms)?)
                .set_next_token(next)
                .send()
                .await
            {
                Ok(page) => page,
                Err(error)
                    if error
                        .as_service_error()
                        .is_some_and(|e| e.is_resource_not_found_exception()) =>
                {
                    return Ok(lines);
                }
                Err(error) => return Err(error.into()),
            };
            lines.extend(
                page.events()
                    .iter()
                    .filter_map(|event| event.message().map(str::to_owned)),
            );
            next = page.next_token().map(str::to_owned);
            if next.is_none() {
                return Ok(lines);
            }
        }
    }

    /// Every item of `tenant`, under any of its homes (`keys::home`), whose sort key starts
    /// with `sk_prefix`: a filtered scan of the test world's table, for assertions over a whole
    /// tenant that no one query answers (the functions never scan).
    pub async fn tenant_items(
        &self,
        tenant: &TenantId,
        sk_prefix: &str,
    ) -> Result<Vec<HashMap<String, AttributeValue>>> {
        let items = self
            .dynamodb
            .scan()
            .table_name(self.output("TableName"))
            .filter_expression(
                "(pk = :tenant OR begins_with(pk, :homes)) AND begins_with(sk, :prefix)",
            )
            .expression_attribute_values(":tenant", AttributeValue::S(keys::tenant(tenant)))
            .expression_attribute_values(
                ":homes",
                AttributeValue::S(format!("{}#", keys::tenant(tenant))),
            )
            .expression_attribute_values(":prefix", AttributeValue::S(sk_prefix.to_owned()))
            .into_paginator()
            .items()
            .send()
            .collect::<Result<Vec<_>, _>>()
            .await?;
        Ok(items)
    }

    pub fn output(&self, key: &str) -> &str {
        self.outputs
            .get(key)
            .unwrap_or_else(|| panic!("stack output {key} missing"))
    }

    /// The landing page's own tables (outputs `RotationTableName`, `VisitTableName`).
    pub fn page_tables(&self) -> adapters::dynamodb::PageTables {
        adapters::dynamodb::PageTables {
            rotations: self.output("RotationTableName").to_owned(),
            visits: self.output("VisitTableName").to_owned(),
        }
    }

    pub fn callback_url(&self, tenant: &str) -> String {
        format!("{}/wecom/{tenant}/callback", self.api_url)
    }

    /// Registers a fresh tenant (random id, corp, token and key) in the table.
    pub async fn new_tenant(&self) -> Result<TestTenant> {
        let tenant = TestTenant::random();
        self.register(&tenant).await?;
        Ok(tenant)
    }

    /// The stack's keys, from its outputs (`CorpSecretKeyArn`...).
    pub fn secret_keys(&self) -> std::collections::BTreeMap<Purpose, String> {
        Purpose::ALL
            .into_iter()
            .map(|purpose| {
                let output = adapters::secrets::key_output(purpose);
                (purpose, self.output(output).to_owned())
            })
            .collect()
    }

    /// The table as the admin API writes it: every secret sealed with the stack's keys (the
    /// harness signs as the account's root, which the keys' policies let use them).
    pub fn sealing_store(&self) -> DynamoStore {
        let keys = KmsDataKeys::new(aws_sdk_kms::Client::new(&self.aws), self.secret_keys());
        DynamoStore::new(self.dynamodb.clone(), self.output("TableName").to_owned()).with_secrets(
            std::sync::Arc::new(SecretEnvelope::new(
                std::sync::Arc::new(keys),
                CacheLimits::default(),
            )),
        )
    }

    /// The AWS configuration of the execution role of the function named by `output`
    /// (MiniStack lets the root caller assume it: docs/local-world.md).
    pub async fn as_role_of(&self, output: &str) -> Result<aws_config::SdkConfig> {
        let function = self
            .lambda
            .get_function_configuration()
            .function_name(self.output(output))
            .send()
            .await?;
        let role = function.role().context("the function has a role")?;
        let assumed = aws_sdk_sts::Client::new(&self.aws)
            .assume_role()
            .role_arn(role)
            .role_session_name("secrets-test")
            .send()
            .await?;
        let credentials = assumed
            .credentials()
            .context("AssumeRole answers credentials")?;
        let credentials = aws_credential_types::Credentials::new(
            credentials.access_key_id(),
            credentials.secret_access_key(),
            Some(credentials.session_token().to_owned()),
            None,
            "function-role",
        );
        Ok(self
            .aws
            .to_builder()
            .credentials_provider(
                aws_credential_types::provider::SharedCredentialsProvider::new(credentials),
            )
            .build())
    }

    /// Stores the tenant's profile (and its corp id's claim) as the admin API does: sealed.
    pub async fn register(&self, tenant: &TestTenant) -> Result<()> {
        self.register_with(&self.sealing_store(), tenant).await
    }

    /// Stores the tenant's profile as a stack before sealing did: every secret plaintext.
    pub async fn register_plaintext(&self, tenant: &TestTenant) -> Result<()> {
        let store = DynamoStore::new(self.dynamodb.clone(), self.output("TableName").to_owned());
        self.register_with(&store, tenant).await
    }

    async fn register_with(&self, store: &DynamoStore, tenant: &TestTenant) -> Result<()> {
        let profile = StoredProfile {
            profile: tenant.profile(),
            version: 1,
            secrets_changed_at_ms: SecretsChanged::default(),
        };
        let written =
            AdminStore::put_profile(store, &TenantId::parse(&tenant.id)?, &profile, None).await?;
        anyhow::ensure!(
            written == ProfileWrite::Stored,
            "tenant {} not registered: {written:?}",
            tenant.id
        );
        Ok(())
    }

    /// Registers a tenant whose corp id is fixed (WeCom's reference vectors name theirs):
    /// when another tenant holds the corp id already (one tenant per corp), that tenant takes
    /// the settings and `tenant` takes its id.
    pub async fn register_fixed_corp(&self, tenant: &mut TestTenant) -> Result<()> {
        let claim = self
            .dynamodb
            .get_item()
            .table_name(self.output("TableName"))
            .key(keys::PK, AttributeValue::S(keys::corp(&tenant.corp_id)))
            .key(keys::SK, AttributeValue::S(keys::CORP_SK.to_owned()))
            .consistent_read(true)
            .send()
            .await?;
        let Some(holder) = claim
            .item
            .as_ref()
            .and_then(|item| item.get("tenant"))
            .and_then(|t| t.as_s().ok())
        else {
            return self.register(tenant).await;
        };
        tenant.id = holder.clone();
        let store = self.sealing_store();
        let id = TenantId::parse(&tenant.id)?;
        let previous = AdminStore::stored_profile(&store, &id).await?;
        let next = StoredProfile {
            profile: tenant.profile(),
            version: previous.as_ref().map_or(1, |p| p.version + 1),
            secrets_changed_at_ms: SecretsChanged::default(),
        };
        let written = AdminStore::put_profile(&store, &id, &next, previous.as_ref()).await?;
        anyhow::ensure!(
            written == ProfileWrite::Stored,
            "tenant {} not updated: {written:?}",
            tenant.id
        );
        Ok(())
    }

    /// Drains the inbox until it is empty and returns every message seen so far for `tenant`.
    /// Callers invoke it after their POSTs were answered, i.e. after SQS accepted (or
    /// deduplicated) each send, so an empty receive means nothing more is coming.
    pub async fn inbox_messages(&self, tenant: &str) -> Result<Vec<Persisted>> {
        inbox_tap()
            .drain(&self.sqs, self.output("InboxQueueUrl"))
            .await?;
        Ok(inbox_tap().messages_for(tenant).await)
    }

    pub async fn post_callback(
        &self,
        tenant: &str,
        query: &[(&str, &str)],
        body: String,
    ) -> Result<(u16, String)> {
        let response = self
            .http
            .post(self.callback_url(tenant))
            .query(query)
            .header("content-type", "text/xml")
            .body(body)
            .send()
            .await?;
        Ok((response.status().as_u16(), response.text().await?))
    }

    /// Posts a signed callback as WeCom would: its query parameters and its envelope.
    pub async fn deliver(&self, tenant: &str, post: &SignedPost) -> Result<(u16, String)> {
        self.post_callback(tenant, &post.query(), post.body.clone())
            .await
    }

    pub async fn get_callback(
        &self,
        tenant: &str,
        query: &[(&str, &str)],
    ) -> Result<(u16, String)> {
        let response = self
            .http
            .get(self.callback_url(tenant))
            .query(query)
            .send()
            .await?;
        Ok((response.status().as_u16(), response.text().await?))
    }
}

/// Every inbox message any test of this binary has drained. The tests of one binary run in
/// parallel and share the queue, so one of them receiving another's message must not lose it.
struct InboxTap {
    seen: tokio::sync::Mutex<Vec<Persisted>>,
}

/// An inbox message with the SQS attributes it was sent with.
#[derive(Debug, Clone)]
pub struct Persisted {
    pub group_id: String,
    pub deduplication_id: String,
    pub message: InboxMessage,
}

fn inbox_tap() -> &'static InboxTap {
    static TAP: OnceLock<InboxTap> = OnceLock::new();
    TAP.get_or_init(|| InboxTap {
        seen: tokio::sync::Mutex::new(Vec::new()),
    })
}

impl InboxTap {
    async fn drain(&self, sqs: &aws_sdk_sqs::Client, queue_url: &str) -> Result<()> {
        // Holding the lock across receive and delete: no other test can hold a message of
        // this queue in flight, which would hide its group from our receive.
        let mut seen = self.seen.lock().await;
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let received = sqs
                .receive_message()
                .queue_url(queue_url)
                .max_number_of_messages(10)
                .wait_time_seconds(0)
                .message_system_attribute_names(MessageSystemAttributeName::All)
                .send()
                .await?;
            let messages = received.messages();
            if messages.is_empty() {
                return Ok(());
            }
            for message in messages {
                let body = message.body().unwrap_or_default();
                let attribute = |name| {
                    message
                        .attributes()
                        .and_then(|a| a.get(&name))
                        .cloned()
                        .unwrap_or_default()
                };
                seen.push(Persisted {
                    group_id: attribute(MessageSystemAttributeName::MessageGroupId),
                    deduplication_id: attribute(MessageSystemAttributeName::MessageDeduplicationId),
                    message: serde_json::from_str(body)
                        .with_context(|| format!("inbox body {body}"))?,
                });
                sqs.delete_message()
                    .queue_url(queue_url)
                    .receipt_handle(message.receipt_handle().unwrap_or_default())
                    .send()
                    .await?;
            }
            if Instant::now() > deadline {
                return Err(anyhow!("inbox did not drain within 60 s"));
            }
        }
    }

    async fn messages_for(&self, tenant: &str) -> Vec<Persisted> {
        self.seen
            .lock()
            .await
            .iter()
            .filter(|m| m.message.tenant.as_str() == tenant)
            .cloned()
            .collect()
    }
}

/// A tenant with its WeCom callback secrets, able to sign and encrypt like WeCom.
#[derive(Clone)]
pub struct TestTenant {
    pub id: String,
    pub corp_id: String,
    pub token: String,
    pub aes_key: String,
    pub corp_secret: String,
}

/// A signed, encrypted POST as WeCom sends it.
pub struct SignedPost {
    pub msg_signature: String,
    pub timestamp: String,
    pub nonce: String,
    pub body: String,
}

impl SignedPost {
    pub fn query(&self) -> [(&str, &str); 3] {
        [
            ("msg_signature", self.msg_signature.as_str()),
            ("timestamp", self.timestamp.as_str()),
            ("nonce", self.nonce.as_str()),
        ]
    }
}

impl TestTenant {
    pub fn random() -> Self {
        Self {
            id: format!("t-{}", random_id(12)),
            corp_id: format!("ww{}", random_id(16)),
            token: random_id(24),
            aes_key: random_id(43),
            corp_secret: random_id(32),
        }
    }

    /// The profile the tenant is registered with (Asia/Shanghai, no cap).
    pub fn profile(&self) -> TenantProfile {
        TenantProfile {
            corp_id: self.corp_id.clone(),
            callback_token: self.token.clone(),
            encoding_aes_key: self.aes_key.clone(),
            previous_callback: None,
            corp_secret: self.corp_secret.clone(),
            timezone: Default::default(),
            company_daily_cap: None,
        }
    }

    pub fn crypto(&self) -> CallbackCrypto {
        CallbackCrypto::new(&self.token, &self.aes_key, &self.corp_id)
            .expect("random settings are valid")
    }

    /// An `add_external_contact` event through code `state`, as WeCom's sample shows it.
    pub fn add_event(
        &self,
        state: &str,
        user: &str,
        external_user: &str,
        create_time: u64,
    ) -> String {
        write_flat_xml(&[
            ("ToUserName", &self.corp_id),
            ("FromUserName", "sys"),
            ("CreateTime", &create_time.to_string()),
            ("MsgType", "event"),
            ("Event", "change_external_contact"),
            ("ChangeType", "add_external_contact"),
            ("UserID", user),
            ("ExternalUserID", external_user),
            ("State", state),
            ("WelcomeCode", &random_id(16)),
        ])
    }

    pub fn sign_post(&self, plaintext: &str, timestamp: u64) -> SignedPost {
        let crypto = self.crypto();
        let encrypt = crypto.encrypt(plaintext);
        self.sign_envelope(&self.corp_id, encrypt, timestamp)
    }

    /// Signs an envelope whose ciphertext and addressee the caller chose.
    pub fn sign_envelope(&self, to_user_name: &str, encrypt: String, timestamp: u64) -> SignedPost {
        let timestamp = timestamp.to_string();
        let nonce = random_id(10);
        let msg_signature = self.crypto().sign(&timestamp, &nonce, &encrypt);
        SignedPost {
            msg_signature,
            timestamp,
            nonce,
            body: Envelope {
                to_user_name: to_user_name.to_owned(),
                agent_id: None,
                encrypt,
            }
            .to_xml(),
        }
    }
}

/// Polls `check` until it yields `Some`, or fails after `timeout`.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Option<T>>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check().await? {
            return Ok(value);
        }
        if Instant::now() > deadline {
            return Err(anyhow!("{what}: not reached within {timeout:?}"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
