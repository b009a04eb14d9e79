//! One run of the schedule tick per invocation (EventBridge Scheduler, every minute). A run
//! works from the stored cursor and the clock, so a late, repeated or extra invocation is
//! harmless (one that finds the cursor held returns at once). The event says one thing: the
//! schedule's input is `{"wait_for_next_minute": true}`, and such a run, caught up, waits for
//! the next minute's grace and walks it too (`Tick::run_waiting`); any other event (an
//! operator's run by hand) walks what is due and returns.
//!
//! Failure policy: a failure to read the index or move an item fails the invocation, so it
//! shows as a Lambda error; the cursor stays on the minute in hand and the next run walks it
//! again. A failure while handling one item only moves that item to a later minute.

use adapters::clock::time_to_deadline;
use domain::reasons::{FanOutQueue, ReasonQueue};
use domain::schedules::{DueIndex, ScheduleFacts, Tick, TickReport};
use lambda_runtime::{Error, LambdaEvent};
use serde_json::Value;
use std::time::{Duration, SystemTime};

/// A run's time when the invocation carries no deadline (a hand-run `sam local invoke`).
const FALLBACK_BUDGET: Duration = Duration::from_secs(30);

pub(crate) async fn handle<I: DueIndex, F: ScheduleFacts, Q: ReasonQueue, O: FanOutQueue>(
    tick: &Tick<I, F, Q, O>,
    event: LambdaEvent<Value>,
) -> Result<TickReport, Error> {
    let budget = time_to_deadline(event.context.deadline, SystemTime::now(), FALLBACK_BUDGET);
    let owner = &event.context.request_id;
    let report = if waits_for_next_minute(&event.payload) {
        tick.run_waiting(owner, budget).await?
    } else {
        tick.run(owner, budget).await?
    };
    domain::telemetry::tick_reasons(report.reasons_sent as u64);
    domain::telemetry::tick_fan_outs(report.fan_outs_sent as u64);
    if report.minutes_behind > 0 {
        tracing::warn!(?report, "schedule tick is behind; the next runs catch up");
    } else {
        tracing::info!(?report, "schedule tick ran");
    }
    Ok(report)
}

/// Whether the event is the schedule's (template.yaml, `ScheduleTickFunction`'s `Input`).
fn waits_for_next_minute(event: &Value) -> bool {
    event.get("wait_for_next_minute") == Some(&Value::Bool(true))
}

#[cfg(test)]
mod tests {
    use super::*;
    use domain::fakes::InMemoryQueues;
    use domain::fakes::InMemoryStore;
    use domain::ids::TenantId;
    use domain::ids::{CodeId, StaffId};
    use domain::schedules::{Minute, Subject, TickSettings};
    use lambda_runtime::Context;

    /// Monday 2026-11-30 09:00:30 in Shanghai (01:00:30Z).
    fn clock() -> u64 {
        1_796_000_430_000
    }

    fn sample(request_id: &str) -> LambdaEvent<Value> {
        let path = format!(
            "{}/../../events/scheduler-tick.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let event = serde_json::from_str(&std::fs::read_to_string(path).expect("sample exists"))
            .expect("JSON");
        let mut context = Context::default();
        context.request_id = request_id.to_owned();
        context.deadline = 0;
        LambdaEvent::new(event, context)
    }

    fn staff_due_at_0900() -> (InMemoryStore, TenantId) {
        let store = InMemoryStore::default();
        let tenant = TenantId::parse("demo").expect("valid");
        let alice = StaffId::parse("alice").expect("valid");
        store.insert_tenant(&tenant, Default::default());
        let nine_to_six: domain::membership::WeeklySchedule = serde_json::from_value(
            serde_json::json!({"shifts": [{"day": "mon", "start": "09:00", "end": "18:00"}]}),
        )
        .expect("a schedule");
        store.insert_schedule(&tenant, &alice, nine_to_six);
        store.seat(
            &tenant,
            &alice,
            &[&CodeId::parse("welcome").expect("valid")],
        );
        let edge = Minute::containing(clock() - 30_000);
        store.put_due(&tenant, Subject::Shifts, edge);
        store.set_cursor(edge);
        (store, tenant)
    }

    #[tokio::test]
    async fn when_a_shift_edge_is_due_the_sample_tick_sends_a_fan_out_of_the_staff_with_it() {
        let (store, tenant) = staff_due_at_0900();
        let queue = InMemoryQueues::default();
        let tick = Tick::new(
            store.clone(),
            store.clone(),
            queue.clone(),
            queue.clone(),
            clock,
            TickSettings::DEFAULT,
        );

        let report = handle(&tick, sample("req-1")).await.expect("ran");

        assert_eq!((report.reasons_sent, report.fan_outs_sent), (0, 1));
        let fan_outs = queue.fan_outs();
        assert_eq!(fan_outs[0].tenant, tenant);
        assert_eq!(
            fan_outs[0].sources,
            vec![domain::reasons::Source::Staff {
                staff: StaffId::parse("alice").expect("valid")
            }]
        );
        assert_eq!(store.cursor_lease().0.as_deref(), Some("req-1"));
    }

    fn no_pause(_: Duration) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> {
        Box::pin(std::future::ready(()))
    }

    /// `input` with two minutes to its deadline.
    fn scheduled(input: Value) -> LambdaEvent<Value> {
        let mut context = Context::default();
        context.request_id = "req-1".to_owned();
        context.deadline = u64::try_from(
            SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .expect("after 1970")
                .as_millis(),
        )
        .expect("fits")
            + 120_000;
        LambdaEvent::new(input, context)
    }

    #[tokio::test]
    async fn the_schedules_input_makes_a_caught_up_run_wait_for_the_next_minute_and_no_other_does()
    {
        for (input, waits) in [
            (serde_json::json!({"wait_for_next_minute": true}), 1),
            (serde_json::json!({}), 0),
            (serde_json::json!({"wait_for_next_minute": "yes"}), 0),
        ] {
            let (store, _) = staff_due_at_0900();
            let queue = InMemoryQueues::default();
            let tick = Tick::new(
                store.clone(),
                store.clone(),
                queue.clone(),
                queue.clone(),
                clock,
                TickSettings::DEFAULT,
            )
            .waiting_with(no_pause);

            let report = handle(&tick, scheduled(input.clone())).await.expect("ran");

            // The clock stands still: one wait, then nothing more to walk ends the run.
            assert_eq!(report.waits, waits, "{input}");
            assert_eq!(report.fan_outs_sent, 1, "{input}");
        }
    }

    #[tokio::test]
    async fn when_another_run_holds_the_cursor_the_tick_returns_without_walking() {
        let (store, _) = staff_due_at_0900();
        store.hold_cursor_lease("req-0", clock() + 60_000);
        let queue = InMemoryQueues::default();
        let tick = Tick::new(
            store.clone(),
            store.clone(),
            queue.clone(),
            queue.clone(),
            clock,
            TickSettings::DEFAULT,
        );

        let report = handle(&tick, sample("req-1")).await.expect("ran");

        assert!(report.held_elsewhere);
        assert!(queue.fan_outs().is_empty());
    }
}
