//! One sweep run per invocation (EventBridge Scheduler, every `SweepPeriodMinutes`). The
//! event's content is not read: a run works from the stored marks, cursor and clock, so a
//! late, repeated or extra invocation is harmless (one that finds the lease held returns).
//!
//! Failure policy: a failure to take the lease or read the dirty index fails the invocation,
//! so it shows as a Lambda error; the work stays where it was for the next run. A failure on
//! one code or one tenant is logged and left to the next run.

use adapters::clock::time_to_deadline;
use domain::sweep::{Sweep, SweepPorts, SweepReport};
use lambda_runtime::{Error, LambdaEvent};
use serde_json::Value;
use std::time::{Duration, SystemTime};

/// A run's time when the invocation carries no deadline (a hand-run `sam local invoke`).
const FALLBACK_BUDGET: Duration = Duration::from_secs(30);

/// The run's report, and what it cost: DynamoDB requests sent (the WeCom calls are its
/// `read_back` and `read_failures`).
#[derive(Debug, serde::Serialize)]
pub(crate) struct RunCost {
    #[serde(flatten)]
    pub report: SweepReport,
    pub dynamodb_requests: u64,
}

/// Runs one sweep; `requests_sent` reads the store's request counter.
pub(crate) async fn handle<P: SweepPorts>(
    sweep: &Sweep<P>,
    requests_sent: impl Fn() -> u64,
    event: LambdaEvent<Value>,
) -> Result<RunCost, Error> {
    let budget = time_to_deadline(event.context.deadline, SystemTime::now(), FALLBACK_BUDGET);
    let before = requests_sent();
    let report = sweep.run(&event.context.request_id, budget).await?;
    domain::telemetry::swept(
        report.dirty_due,
        report.read_back,
        report.differing,
        report.repairs_started + report.resyncs_sent,
        // The alarm asks an operator to act: only a guard its re-check confirmed needs one.
        report.guards_confirmed,
    );
    let cost = RunCost {
        report,
        dynamodb_requests: requests_sent().saturating_sub(before),
    };
    if cost.report.out_of_time {
        tracing::warn!(report = ?cost.report, dynamodb_requests = cost.dynamodb_requests, "sweep ran out of time; the next run carries on");
    } else {
        tracing::info!(report = ?cost.report, dynamodb_requests = cost.dynamodb_requests, "sweep ran");
    }
    Ok(cost)
}

#[cfg(test)]
mod tests {
    use super::*;
    use domain::dirty::{DirtyMarks, DirtyWhy};
    use domain::fakes::{FakeBudget, FakeWeCom, InMemoryQueues, InMemoryStore};
    use domain::ids::CodeId;
    use domain::ids::TenantId;
    use domain::sweep::SweepSettings;
    use domain::tenants::Timezone;
    use lambda_runtime::Context;

    struct Fakes;

    impl SweepPorts for Fakes {
        type Store = InMemoryStore;
        type WeCom = FakeWeCom;
        type Budget = FakeBudget;
        type Reasons = InMemoryQueues;
        type FanOuts = InMemoryQueues;
        type Notifier = InMemoryQueues;
    }

    fn clock() -> u64 {
        1_796_000_430_000
    }

    fn sample(request_id: &str) -> LambdaEvent<Value> {
        let path = format!(
            "{}/../../events/scheduler-sweep.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let event = serde_json::from_str(&std::fs::read_to_string(path).expect("sample exists"))
            .expect("JSON");
        let mut context = Context::default();
        context.request_id = request_id.to_owned();
        context.deadline = 0;
        LambdaEvent::new(event, context)
    }

    #[tokio::test]
    async fn the_sample_event_runs_a_sweep_over_the_due_marks() {
        let store = InMemoryStore::default();
        let tenant = TenantId::parse("demo").expect("valid");
        let code = CodeId::parse("welcome").expect("valid");
        store.insert_tenant(&tenant, Timezone::default());
        store.seat(
            &tenant,
            &domain::ids::StaffId::parse("alice").expect("valid"),
            &[&code],
        );
        store
            .mark_dirty(&tenant, &code, DirtyWhy::LastReceive, clock() - 1)
            .await
            .expect("marked");
        let queue = InMemoryQueues::default();
        let sweep = Sweep::<Fakes> {
            store: store.clone(),
            wecom: FakeWeCom::default(),
            budget: FakeBudget::default(),
            reasons: queue.clone(),
            fan_outs: queue.clone(),
            notifier: queue.clone(),
            clock,
            settings: SweepSettings::DEFAULT,
        };

        let report = handle(&sweep, || 0, sample("req-1"))
            .await
            .expect("ran")
            .report;

        assert!(!report.held_elsewhere);
        assert_eq!(report.dirty_due, 1);
        assert_eq!(report.marks_dropped, 1, "no such code is stored");
        assert!(queue.reasons().is_empty());
    }
}
