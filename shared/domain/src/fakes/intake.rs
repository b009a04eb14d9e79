//! The callback's ports: the tenants' callback settings and the inbox.

use crate::ids::TenantId;
use crate::intake::Inbox;
use crate::intake::InboxMessage;
use crate::tenants::CallbackSettings;
use crate::tenants::CallbackSettingsSource;
use crate::StoreError;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

#[derive(Clone, Default)]
pub struct InMemoryCallbackSettings {
    tenants: Arc<Mutex<HashMap<TenantId, CallbackSettings>>>,
    reads: Arc<AtomicUsize>,
}

impl InMemoryCallbackSettings {
    pub fn insert(&self, tenant: TenantId, settings: CallbackSettings) {
        self.tenants
            .lock()
            .expect("fake store lock")
            .insert(tenant, settings);
    }

    pub fn reads(&self) -> usize {
        self.reads.load(Ordering::SeqCst)
    }
}

#[async_trait::async_trait]
impl CallbackSettingsSource for InMemoryCallbackSettings {
    async fn callback_settings(
        &self,
        tenant: &TenantId,
    ) -> Result<Option<CallbackSettings>, StoreError> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        Ok(self
            .tenants
            .lock()
            .expect("fake store lock")
            .get(tenant)
            .cloned())
    }
}

/// Keeps persisted messages, deduplicating by id as SQS FIFO does; can be switched to fail.
#[derive(Clone, Default)]
pub struct InMemoryInbox {
    messages: Arc<Mutex<Vec<InboxMessage>>>,
    unavailable: Arc<AtomicBool>,
}

impl InMemoryInbox {
    pub fn messages(&self) -> Vec<InboxMessage> {
        self.messages.lock().expect("fake inbox lock").clone()
    }

    pub fn set_unavailable(&self, unavailable: bool) {
        self.unavailable.store(unavailable, Ordering::SeqCst);
    }
}

#[async_trait::async_trait]
impl Inbox for InMemoryInbox {
    async fn persist(&self, message: &InboxMessage) -> Result<(), StoreError> {
        if self.unavailable.load(Ordering::SeqCst) {
            return Err(StoreError::new("inbox", "the fake inbox is switched off"));
        }
        let mut messages = self.messages.lock().expect("fake inbox lock");
        if !messages
            .iter()
            .any(|m| m.deduplication_id() == message.deduplication_id())
        {
            messages.push(message.clone());
        }
        Ok(())
    }
}
