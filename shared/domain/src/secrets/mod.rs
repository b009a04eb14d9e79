//! Secrets at rest (docs/design/safety.md, "Secrets at rest"): a corp secret, a cached access
//! token and the callback keys are stored sealed, each with a data key that only the
//! customer-managed key of its purpose can unwrap, under an encryption context naming the
//! purpose and whose secret it is. Each purpose has its own key, so a role that may not read a
//! purpose holds no permission on its key at all.
//!
//! A value stored before sealing (plaintext) is still read as it is until it is rewritten;
//! every write of a process that holds the purpose's key seals (`qrsync-ops seal-secrets`
//! rewrites the rest).

mod envelope;
mod ports;
#[cfg(test)]
mod tests;

pub use envelope::{CacheLimits, Envelope, StoredSecret, SEALED_PLACEHOLDER};
pub use ports::{DataKey, DataKeys};

use crate::ids::TenantId;
use std::fmt;

/// What a sealed secret is for: each purpose is its own customer-managed key and the
/// encryption context's `purpose`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Purpose {
    /// A tenant's corp (customer-contact app) secret: read by the functions that call WeCom.
    CorpSecret,
    /// A corp's cached access token: shared by the functions that call WeCom.
    AccessToken,
    /// A tenant's callback token and EncodingAESKey, current and previous: read by the
    /// functions that verify callbacks (the callback, the fact recorder, replay).
    CallbackKeys,
}

impl Purpose {
    pub const ALL: [Purpose; 3] = [Self::CorpSecret, Self::AccessToken, Self::CallbackKeys];

    /// The encryption context's `purpose` value.
    pub fn name(self) -> &'static str {
        match self {
            Self::CorpSecret => "corp-secret",
            Self::AccessToken => "access-token",
            Self::CallbackKeys => "callback-keys",
        }
    }
}

impl fmt::Display for Purpose {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Whose secret it is: a tenant's profile, or a corp's token item (tokens are keyed by corp id,
/// which one tenant alone claims).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Owner {
    Tenant(TenantId),
    Corp(String),
}

/// A secret's encryption context: `{purpose, tenant}` or `{purpose, corp_id}`. KMS binds a
/// data key to it, and the envelope binds the sealed value to it, so a value copied to
/// another tenant's item, or to another purpose's attribute, does not open.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SecretContext {
    pub purpose: Purpose,
    pub owner: Owner,
}

impl SecretContext {
    pub fn tenant(purpose: Purpose, tenant: &TenantId) -> Self {
        Self {
            purpose,
            owner: Owner::Tenant(tenant.clone()),
        }
    }

    pub fn corp(purpose: Purpose, corp_id: &str) -> Self {
        Self {
            purpose,
            owner: Owner::Corp(corp_id.to_owned()),
        }
    }

    /// The encryption context's pairs, as KMS is given them.
    pub fn pairs(&self) -> [(&'static str, String); 2] {
        let owner = match &self.owner {
            Owner::Tenant(tenant) => ("tenant", tenant.as_str().to_owned()),
            Owner::Corp(corp) => ("corp_id", corp.clone()),
        };
        [("purpose", self.purpose.name().to_owned()), owner]
    }

    /// The same pairs as the envelope's associated data.
    fn associated_data(&self) -> Vec<u8> {
        let [(_, purpose), (owner_key, owner)] = self.pairs();
        format!("qrsync-secret-v1\npurpose={purpose}\n{owner_key}={owner}").into_bytes()
    }
}
