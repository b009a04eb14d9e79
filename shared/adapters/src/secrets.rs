//! Secrets at rest on AWS: `KmsDataKeys` wraps data keys with each purpose's customer-managed
//! key (`domain::secrets`), and `robot_webhook_url` reads the group robot's URL from its
//! Secrets Manager secret at cold start.

use aws_config::SdkConfig;
use aws_sdk_kms::primitives::Blob;
use aws_sdk_kms::types::DataKeySpec;
use domain::secrets::{CacheLimits, DataKey, DataKeys, Envelope, Purpose, SecretContext};
use domain::StoreError;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The environment variable naming `purpose`'s key. A function is given only the keys its
/// role may use (`template.yaml`).
pub fn key_variable(purpose: Purpose) -> &'static str {
    match purpose {
        Purpose::CorpSecret => "CORP_SECRET_KEY_ARN",
        Purpose::AccessToken => "ACCESS_TOKEN_KEY_ARN",
        Purpose::CallbackKeys => "CALLBACK_KEYS_KEY_ARN",
    }
}

/// The stack output naming `purpose`'s key, for tools outside the functions (the operator's
/// `seal-secrets`, the tests).
pub fn key_output(purpose: Purpose) -> &'static str {
    match purpose {
        Purpose::CorpSecret => "CorpSecretKeyArn",
        Purpose::AccessToken => "AccessTokenKeyArn",
        Purpose::CallbackKeys => "CallbackKeysKeyArn",
    }
}

/// The 32-byte key KMS answered in `blob`, or the store unavailable saying what `operation`
/// answered instead.
fn data_key(blob: Option<Blob>, operation: &str) -> Result<[u8; 32], StoreError> {
    blob.and_then(|blob| <[u8; 32]>::try_from(blob.into_inner()).ok())
        .ok_or_else(|| StoreError::new("kms", format!("{operation} answered no 32-byte key")))
}

/// Data keys from KMS: `GenerateDataKey` and `Decrypt` on the purpose's key, with the secret's
/// encryption context.
pub struct KmsDataKeys {
    client: aws_sdk_kms::Client,
    keys: BTreeMap<Purpose, String>,
}

impl KmsDataKeys {
    pub fn new(client: aws_sdk_kms::Client, keys: BTreeMap<Purpose, String>) -> Self {
        Self { client, keys }
    }

    /// The keys named in this process's environment (none: nothing sealed can be opened, and
    /// writes stay plaintext, as in a tool run without them).
    pub fn from_env(aws: &SdkConfig) -> Self {
        let keys = Purpose::ALL
            .into_iter()
            .filter_map(|purpose| {
                std::env::var(key_variable(purpose))
                    .ok()
                    .filter(|arn| !arn.trim().is_empty())
                    .map(|arn| (purpose, arn))
            })
            .collect();
        Self::new(aws_sdk_kms::Client::new(aws), keys)
    }

    fn key(&self, purpose: Purpose) -> Result<&str, StoreError> {
        self.keys
            .get(&purpose)
            .map(String::as_str)
            .ok_or_else(|| StoreError::new("kms", format!("no key for {purpose} in this process")))
    }
}

/// The envelope of a process: its keys from the environment, the default cache bounds.
pub fn envelope_from_env(aws: &SdkConfig) -> Arc<Envelope> {
    Arc::new(Envelope::new(
        Arc::new(KmsDataKeys::from_env(aws)),
        CacheLimits::default(),
    ))
}

#[async_trait::async_trait]
impl DataKeys for KmsDataKeys {
    fn holds(&self, purpose: Purpose) -> bool {
        self.keys.contains_key(&purpose)
    }

    async fn generate(&self, context: &SecretContext) -> Result<DataKey, StoreError> {
        let mut request = self
            .client
            .generate_data_key()
            .key_id(self.key(context.purpose)?)
            .key_spec(DataKeySpec::Aes256);
        for (name, value) in context.pairs() {
            request = request.encryption_context(name, value);
        }
        let output = request
            .send()
            .await
            .map_err(|e| StoreError::new("kms", e.into_service_error()))?;
        let plaintext = data_key(output.plaintext, "GenerateDataKey")?;
        let wrapped = output
            .ciphertext_blob
            .map(Blob::into_inner)
            .ok_or_else(|| StoreError::new("kms", "GenerateDataKey answered no wrapped key"))?;
        Ok(DataKey { plaintext, wrapped })
    }

    async fn unwrap(
        &self,
        context: &SecretContext,
        wrapped: &[u8],
    ) -> Result<[u8; 32], StoreError> {
        let mut request = self
            .client
            .decrypt()
            .key_id(self.key(context.purpose)?)
            .ciphertext_blob(Blob::new(wrapped));
        for (name, value) in context.pairs() {
            request = request.encryption_context(name, value);
        }
        let output = request
            .send()
            .await
            .map_err(|e| StoreError::new("kms", e.into_service_error()))?;
        data_key(output.plaintext, "Decrypt")
    }
}

/// The group robot's webhook URL, from the secret `ALARM_ROBOT_SECRET_ARN` names (read once, at
/// cold start); `None` when no robot is configured. The URL holds the robot's key, so it is in
/// no function's configuration.
pub async fn robot_webhook_url(aws: &SdkConfig) -> Result<Option<String>, StoreError> {
    let Some(arn) = std::env::var("ALARM_ROBOT_SECRET_ARN")
        .ok()
        .filter(|arn| !arn.trim().is_empty())
    else {
        return Ok(None);
    };
    let output = aws_sdk_secretsmanager::Client::new(aws)
        .get_secret_value()
        .secret_id(arn)
        .send()
        .await
        .map_err(|e| StoreError::new("secretsmanager", e.into_service_error()))?;
    Ok(output.secret_string.filter(|url| !url.trim().is_empty()))
}
