//! What the callback function writes to `inbox.fifo`, and how it picks the message group and
//! the deduplication id.

use crate::ids::TenantId;
use crate::wecom::callback::CallbackEvent;
use sha2::{Digest, Sha256};

/// SQS allows 1 to 128 characters of ASCII letters, digits and punctuation in group and
/// deduplication ids.
fn is_sqs_id_safe(value: &str) -> bool {
    !value.is_empty() && value.bytes().all(|b| b.is_ascii_graphic())
}

fn sha256_hex(parts: &[&str]) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update(part.as_bytes());
        hasher.update([0u8]);
    }
    hex::encode(hasher.finalize())
}

/// The ordering scope of an inbox message: everything about one QR code is processed in
/// order by one consumer; events that name no code are ordered per staff member, or per
/// tenant when they name nobody.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MessageGroup {
    Code { tenant: TenantId, code: String },
    Staff { tenant: TenantId, user_id: String },
    Tenant(TenantId),
}

/// What a message group's messages reach (`MessageGroup::reach_of`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupReach {
    Code(TenantId, crate::ids::CodeId),
    /// A staff member's or the tenant's group: which codes it reaches is in the message.
    Tenant(TenantId),
}

impl MessageGroup {
    pub fn of(tenant: &TenantId, event: &CallbackEvent) -> Self {
        if let Some(code) = event.state() {
            return Self::Code {
                tenant: tenant.clone(),
                code: code.to_owned(),
            };
        }
        match event.user_id() {
            Some(user_id) => Self::Staff {
                tenant: tenant.clone(),
                user_id: user_id.to_owned(),
            },
            None => Self::Tenant(tenant.clone()),
        }
    }

    /// What a message of the group `group_id` reaches, as far as its id says: a code's group
    /// its code; a staff member's group (hashed or not) or the tenant's, the tenant. `None` for
    /// a code id SQS would have refused (only its hash is in the id; no code of ours is one)
    /// and for an id no group of ours has.
    pub fn reach_of(group_id: &str) -> Option<GroupReach> {
        if let Some((tenant, code)) = Self::code_of(group_id) {
            return Some(GroupReach::Code(tenant, code));
        }
        let mut parts = group_id.splitn(3, '#');
        let (tenant, kind) = (parts.next()?, parts.next()?);
        match kind {
            "staff" | "staff-sha256" | "tenant" => {
                Some(GroupReach::Tenant(TenantId::parse(tenant).ok()?))
            }
            _ => None,
        }
    }

    /// The tenant and code a `MessageGroupId` of a code's group names; `None` for any other
    /// group, and for a code id SQS would have refused (only its hash is in the id).
    pub fn code_of(group_id: &str) -> Option<(TenantId, crate::ids::CodeId)> {
        let mut parts = group_id.splitn(3, '#');
        let (tenant, kind, code) = (parts.next()?, parts.next()?, parts.next()?);
        if kind != "code" {
            return None;
        }
        Some((
            TenantId::parse(tenant).ok()?,
            crate::ids::CodeId::parse(code).ok()?,
        ))
    }

    /// The SQS `MessageGroupId`. A code id or user id that SQS would refuse (non-ASCII
    /// `State` set outside qrsync, say) is replaced by its hash, which keeps it one group.
    pub fn id(&self) -> String {
        let scoped = |tenant: &TenantId, kind: &str, value: &str| {
            if is_sqs_id_safe(value) && tenant.as_str().len() + kind.len() + value.len() + 2 <= 128
            {
                format!("{tenant}#{kind}#{value}")
            } else {
                format!("{tenant}#{kind}-sha256#{}", &sha256_hex(&[value])[..40])
            }
        };
        match self {
            Self::Code { tenant, code } => scoped(tenant, "code", code),
            Self::Staff { tenant, user_id } => scoped(tenant, "staff", user_id),
            Self::Tenant(tenant) => format!("{tenant}#tenant"),
        }
    }
}

/// One stored callback: the raw encrypted envelope and its signature parameters, so the
/// consumer (and any replay) verifies exactly what WeCom sent; plus when it arrived.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct InboxMessage {
    pub tenant: TenantId,
    pub received_at_ms: u64,
    pub msg_signature: String,
    pub timestamp: String,
    pub nonce: String,
    pub envelope: String,
    /// SHA-256 of the tenant and the event's business key; the SQS deduplication id.
    pub event_key: String,
    #[serde(skip)]
    pub group: Option<MessageGroup>,
}

impl InboxMessage {
    pub fn new(
        tenant: TenantId,
        event: &CallbackEvent,
        envelope: String,
        msg_signature: &str,
        timestamp: &str,
        nonce: &str,
        received_at_ms: u64,
    ) -> Self {
        let event_key = sha256_hex(&[tenant.as_str(), &event.business_key()]);
        let group = MessageGroup::of(&tenant, event);
        Self {
            tenant,
            received_at_ms,
            msg_signature: msg_signature.to_owned(),
            timestamp: timestamp.to_owned(),
            nonce: nonce.to_owned(),
            envelope,
            event_key,
            group: Some(group),
        }
    }

    pub fn group_id(&self) -> String {
        self.group
            .as_ref()
            .map(MessageGroup::id)
            .unwrap_or_else(|| MessageGroup::Tenant(self.tenant.clone()).id())
    }

    /// A duplicate delivery of the same business event (WeCom's retry, or the same callback
    /// posted twice) yields the same id, and SQS drops it within its 5-minute window.
    pub fn deduplication_id(&self) -> &str {
        &self.event_key
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("an inbox message always serialises")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(fields: &str) -> CallbackEvent {
        CallbackEvent::parse(&format!(
            "<xml><ToUserName>corp</ToUserName><CreateTime>1700000000</CreateTime><MsgType>event</MsgType>{fields}</xml>"
        ))
        .expect("valid event")
    }

    fn tenant() -> TenantId {
        TenantId::parse("acme").expect("valid")
    }

    #[test]
    fn an_event_with_a_state_is_grouped_by_its_code() {
        let add = event(
            "<Event>change_external_contact</Event><UserID>u1</UserID><State>code-42</State>",
        );
        assert_eq!(MessageGroup::of(&tenant(), &add).id(), "acme#code#code-42");
    }

    #[test]
    fn events_without_a_code_fall_back_to_staff_then_tenant_groups() {
        let staff = event(
            "<Event>change_contact</Event><ChangeType>delete_user</ChangeType><UserID>u1</UserID>",
        );
        let tenant_wide =
            event("<Event>change_contact</Event><ChangeType>create_party</ChangeType><Id>2</Id>");
        assert_eq!(MessageGroup::of(&tenant(), &staff).id(), "acme#staff#u1");
        assert_eq!(
            MessageGroup::of(&tenant(), &tenant_wide).id(),
            "acme#tenant"
        );
    }

    #[test]
    fn a_state_sqs_would_refuse_becomes_a_stable_hashed_group() {
        let chinese = event("<State>活码一号</State>");
        let id = MessageGroup::of(&tenant(), &chinese).id();
        assert!(id.starts_with("acme#code-sha256#") && id.is_ascii() && id.len() <= 128);
        assert_eq!(id, MessageGroup::of(&tenant(), &chinese).id());
    }

    #[test]
    fn the_deduplication_id_is_the_same_for_a_redelivery_and_differs_per_tenant() {
        let add = event("<UserID>u1</UserID><ExternalUserID>wm1</ExternalUserID><State>c</State>");
        let first = InboxMessage::new(tenant(), &add, "a".into(), "s1", "1", "n1", 1);
        let again = InboxMessage::new(tenant(), &add, "b".into(), "s2", "2", "n2", 2);
        let other = InboxMessage::new(
            TenantId::parse("other").expect("valid"),
            &add,
            "a".into(),
            "s1",
            "1",
            "n1",
            1,
        );
        assert_eq!(first.deduplication_id(), again.deduplication_id());
        assert_ne!(first.deduplication_id(), other.deduplication_id());
        assert_eq!(first.deduplication_id().len(), 64);
    }
}
