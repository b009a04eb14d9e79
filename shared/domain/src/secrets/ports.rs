use super::{Purpose, SecretContext};
use crate::StoreError;

/// A data key: its plaintext (held in memory only) and its copy wrapped by the purpose's key,
/// stored beside what it seals.
#[derive(Clone)]
pub struct DataKey {
    pub plaintext: [u8; 32],
    pub wrapped: Vec<u8>,
}

impl std::fmt::Debug for DataKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DataKey")
            .field("wrapped_len", &self.wrapped.len())
            .finish_non_exhaustive()
    }
}

/// The key service that wraps data keys (KMS, `adapters::kms`; `fakes::FakeKms`).
#[async_trait::async_trait]
pub trait DataKeys: Send + Sync {
    /// Whether this process holds the key of `purpose` (may seal and open it at all).
    fn holds(&self, purpose: Purpose) -> bool;

    /// A new data key for `context` (KMS `GenerateDataKey` with the context).
    async fn generate(&self, context: &SecretContext) -> Result<DataKey, StoreError>;

    /// The plaintext of `wrapped` (KMS `Decrypt` with the context): refused when the caller
    /// may not use the purpose's key or the context is not the one it was wrapped under.
    async fn unwrap(&self, context: &SecretContext, wrapped: &[u8])
        -> Result<[u8; 32], StoreError>;
}
