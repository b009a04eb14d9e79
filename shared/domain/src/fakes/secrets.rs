//! `FakeKms`: data keys in memory, for the envelope's tests and the functions' own.

use crate::secrets::{DataKey, DataKeys, Purpose, SecretContext};
use crate::StoreError;
use rand::RngCore;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A key service holding the keys of `purposes`. A wrapped key is the context's pairs and the
/// key itself (a fake: nothing here is secret), and unwrapping checks both as KMS does: the
/// caller must hold the purpose's key, and the context must be the one the key was made for.
pub struct FakeKms {
    purposes: BTreeSet<Purpose>,
    pub generated: AtomicUsize,
    pub unwrapped: AtomicUsize,
}

impl FakeKms {
    pub fn holding(purposes: &[Purpose]) -> Self {
        Self {
            purposes: purposes.iter().copied().collect(),
            generated: AtomicUsize::new(0),
            unwrapped: AtomicUsize::new(0),
        }
    }

    fn label(context: &SecretContext) -> Vec<u8> {
        format!("{:?}", context.pairs()).into_bytes()
    }

    fn denied(purpose: Purpose) -> StoreError {
        StoreError::new(
            "kms",
            format!("AccessDeniedException: no permission on the {purpose} key"),
        )
    }
}

#[async_trait::async_trait]
impl DataKeys for FakeKms {
    fn holds(&self, purpose: Purpose) -> bool {
        self.purposes.contains(&purpose)
    }

    async fn generate(&self, context: &SecretContext) -> Result<DataKey, StoreError> {
        if !self.holds(context.purpose) {
            return Err(Self::denied(context.purpose));
        }
        self.generated.fetch_add(1, Ordering::SeqCst);
        let mut plaintext = [0u8; 32];
        rand::thread_rng().fill_bytes(&mut plaintext);
        let mut wrapped = Self::label(context);
        wrapped.extend_from_slice(&plaintext);
        Ok(DataKey { plaintext, wrapped })
    }

    async fn unwrap(
        &self,
        context: &SecretContext,
        wrapped: &[u8],
    ) -> Result<[u8; 32], StoreError> {
        if !self.holds(context.purpose) {
            return Err(Self::denied(context.purpose));
        }
        self.unwrapped.fetch_add(1, Ordering::SeqCst);
        let label = Self::label(context);
        wrapped
            .strip_prefix(label.as_slice())
            .and_then(|key| <[u8; 32]>::try_from(key).ok())
            .ok_or_else(|| StoreError::new("kms", "InvalidCiphertextException"))
    }
}
