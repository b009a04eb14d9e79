//! What the simulated ports tell the report: when a code's facts were read for a refresh, when
//! WeCom came to hold a list, and when the refresh let the code go. The ports call these as
//! the domain's calls reach them; the report turns them into staleness (from each fact to the
//! moment WeCom holds a list recomputed from it) and mis-assignments.

use domain::ids::{CodeId, TenantId};
use domain::refresh::Tally;
use std::sync::Mutex;

/// One port-level event the report reads, in virtual epoch milliseconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    /// `CodeFacts::snapshot` returned the code's facts (the refresh recomputes from these).
    SnapshotRead {
        tenant: TenantId,
        code: CodeId,
        at_ms: u64,
    },
    /// WeCom accepted `update_contact_way` for this contact way: from `at_ms` it holds `users`.
    ListLanded {
        config_id: String,
        users: Vec<String>,
        at_ms: u64,
    },
    /// `CodeRecords::record_tally`: what one refresh invocation did for the tenant.
    Tallied { tenant: TenantId, tally: Tally },
    /// `CodeLeases::release`: the refresh of this code is over.
    LeaseReleased {
        tenant: TenantId,
        code: CodeId,
        at_ms: u64,
    },
    /// `AddLedger::count_add` counted the add of this customer (its external user id): from
    /// `at_ms` a snapshot reads it.
    AddCounted { customer: String, at_ms: u64 },
}

/// Where the ports report what they saw. `Trace::default()` keeps nothing until a consumer is
/// attached with `Trace::keeping`, so ports built for a fidelity check cost nothing.
#[derive(Default)]
pub struct Trace {
    sink: Mutex<Option<Sink>>,
}

type Sink = Box<dyn FnMut(Seen) + Send>;

impl Trace {
    /// A trace that hands every event to `sink`, in the order the ports saw them.
    pub fn keeping(sink: impl FnMut(Seen) + Send + 'static) -> Self {
        Self {
            sink: Mutex::new(Some(Box::new(sink))),
        }
    }

    pub fn snapshot_read(&self, tenant: &TenantId, code: &CodeId, at_ms: u64) {
        self.see(|| Seen::SnapshotRead {
            tenant: tenant.clone(),
            code: code.clone(),
            at_ms,
        });
    }

    pub fn list_landed(&self, config_id: &str, users: &[String], at_ms: u64) {
        self.see(|| Seen::ListLanded {
            config_id: config_id.to_owned(),
            users: users.to_vec(),
            at_ms,
        });
    }

    pub fn tallied(&self, tenant: &TenantId, tally: &Tally) {
        self.see(|| Seen::Tallied {
            tenant: tenant.clone(),
            tally: *tally,
        });
    }

    pub fn lease_released(&self, tenant: &TenantId, code: &CodeId, at_ms: u64) {
        self.see(|| Seen::LeaseReleased {
            tenant: tenant.clone(),
            code: code.clone(),
            at_ms,
        });
    }

    pub fn add_counted(&self, customer: &str, at_ms: u64) {
        self.see(|| Seen::AddCounted {
            customer: customer.to_owned(),
            at_ms,
        });
    }

    fn see(&self, event: impl FnOnce() -> Seen) {
        let mut sink = self
            .sink
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(sink) = sink.as_mut() {
            sink(event());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_trace_hands_events_to_its_sink_in_order_and_a_default_one_keeps_nothing() {
        let kept = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&kept);
        let trace = Trace::keeping(move |seen| sink.lock().expect("lock").push(seen));
        let tenant = TenantId::parse("t1").expect("valid");
        let code = CodeId::parse("c1").expect("valid");
        trace.snapshot_read(&tenant, &code, 5);
        trace.list_landed("cfg", &["alice".to_owned()], 7);
        trace.lease_released(&tenant, &code, 9);
        let kept = kept.lock().expect("lock");
        assert_eq!(kept.len(), 3);
        assert!(matches!(kept[0], Seen::SnapshotRead { at_ms: 5, .. }));
        assert!(matches!(kept[2], Seen::LeaseReleased { at_ms: 9, .. }));
        Trace::default().snapshot_read(&tenant, &code, 1);
    }
}
