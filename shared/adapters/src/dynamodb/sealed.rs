//! Secret attributes (`domain::secrets`): a string attribute is plaintext stored before
//! sealing, a binary one is sealed. Reads take either; writes seal when this process holds the
//! purpose's key (every deployed writer does), else store plaintext (a tool run without keys).

use super::{DynamoStore, Item};
use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::AttributeValue;
use domain::secrets::{SecretContext, StoredSecret, SEALED_PLACEHOLDER};
use domain::StoreError;
use std::sync::Arc;

impl DynamoStore {
    /// Seals the secrets this store writes, and opens those it reads, with `envelope`.
    pub fn with_secrets(mut self, envelope: Arc<domain::secrets::Envelope>) -> Self {
        self.secrets = Some(envelope);
        self
    }

    /// The secret attribute `name` of `item`, as stored.
    pub(crate) fn stored_secret(item: &Item, name: &str) -> Option<StoredSecret> {
        match item.get(name)? {
            AttributeValue::S(value) => Some(StoredSecret::Plain(value.clone())),
            AttributeValue::B(blob) => Some(StoredSecret::Sealed(blob.as_ref().to_vec())),
            _ => None,
        }
    }

    /// The plaintext of the secret attribute `name`, opened if sealed (or the placeholder when
    /// this process may not open it).
    pub(crate) async fn reveal(
        &self,
        item: &Item,
        name: &'static str,
        context: &SecretContext,
    ) -> Result<Option<String>, StoreError> {
        let Some(stored) = Self::stored_secret(item, name) else {
            return Ok(None);
        };
        match (&self.secrets, stored) {
            (_, StoredSecret::Plain(value)) => Ok(Some(value)),
            (None, StoredSecret::Sealed(_)) => Ok(Some(SEALED_PLACEHOLDER.to_owned())),
            (Some(envelope), stored) => envelope.reveal(context, &stored).await.map(Some),
        }
    }

    /// `value` as this store writes it: sealed for `context` when it may, else plaintext.
    pub(crate) async fn conceal(
        &self,
        context: &SecretContext,
        value: &str,
    ) -> Result<AttributeValue, StoreError> {
        match &self.secrets {
            Some(envelope) if envelope.holds(context.purpose) => Ok(AttributeValue::B(Blob::new(
                envelope.seal(context, value).await?,
            ))),
            _ => Ok(AttributeValue::S(value.to_owned())),
        }
    }

    /// Whether this store seals `purpose` when it writes it.
    pub fn seals(&self, purpose: domain::secrets::Purpose) -> bool {
        self.secrets.as_ref().is_some_and(|e| e.holds(purpose))
    }
}
