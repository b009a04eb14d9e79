use super::*;
use crate::dirty::{DirtyWhy, FanOutMarks};
use crate::fakes::{InMemoryQueues, InMemoryStore};
use crate::ids::TenantId;
use crate::ids::{DepartmentId, StaffId};
use crate::reasons::{Cause, Source};
use std::sync::atomic::{AtomicUsize, Ordering};

/// When the expansions under test begin.
const BEGAN: u64 = 1_796_000_000_000;

fn code(n: usize) -> CodeId {
    CodeId::parse(&format!("c{n:04}")).expect("valid")
}

fn staff(name: &str) -> Source {
    Source::Staff {
        staff: StaffId::parse(name).expect("valid"),
    }
}

fn fan_out(sources: Vec<Source>) -> FanOut {
    FanOut::new(
        TenantId::parse("t1").expect("valid"),
        sources,
        Cause::StaffChanged,
        42,
        "staff:alice:42".into(),
    )
}

/// The staff -> codes and department -> codes indexes holding `entries`.
fn index(entries: Vec<(Source, Vec<CodeId>)>) -> InMemoryStore {
    let store = InMemoryStore::default();
    let tenant = TenantId::parse("t1").expect("valid");
    for (source, codes) in entries {
        let codes: Vec<&CodeId> = codes.iter().collect();
        match source {
            Source::Staff { staff } => store.seat(&tenant, &staff, &codes),
            Source::Department { department } => {
                store.list_department(&tenant, &department, &codes)
            }
            Source::Tenant => unreachable!("the tests index staff and departments"),
        }
    }
    store
}

#[tokio::test]
async fn every_code_of_every_source_gets_one_reason_alike_but_for_the_code() {
    let department = Source::Department {
        department: DepartmentId::parse("7").expect("valid"),
    };
    let index = index(vec![
        (staff("alice"), vec![code(1), code(2)]),
        (department.clone(), vec![code(2), code(3)]),
    ]);
    let sent = InMemoryQueues::default();
    let expander = Expander::new(index.clone(), sent.clone(), sent.clone(), index);

    let expanded = expander
        .expand(&fan_out(vec![staff("alice"), department]), BEGAN, || false)
        .await
        .expect("sent");

    assert_eq!(expanded, Expanded::Done { reasons: 3 });
    let reasons = sent.reasons();
    let codes: Vec<&str> = reasons.iter().map(|r| r.code.as_str()).collect();
    assert_eq!(codes, ["c0001", "c0002", "c0003"]);
    assert!(reasons.iter().all(|r| r.fact_key == "staff:alice:42"
        && r.fact_at_ms == 42
        && r.cause == Cause::StaffChanged));
}

#[tokio::test]
async fn out_of_time_the_rest_continues_after_the_last_code_sent_and_nothing_is_lost() {
    let all: Vec<CodeId> = (0..1_000).map(code).collect();
    let index = index(vec![(staff("alice"), all.clone())]);
    let sent = InMemoryQueues::default();
    let expander = Expander::new(index.clone(), sent.clone(), sent.clone(), index);
    let mut next = Some(fan_out(vec![staff("alice")]));
    let mut invocations = 0;
    while let Some(part) = next.take() {
        invocations += 1;
        // Time runs out after three pages in every invocation (asked before pages 2, 3, 4).
        let checks = AtomicUsize::new(0);
        let out_of_time = || checks.fetch_add(1, Ordering::SeqCst) + 1 >= 3;
        match expander
            .expand(&part, BEGAN, out_of_time)
            .await
            .expect("sent")
        {
            Expanded::Done { .. } => {}
            Expanded::Continued { sent_through, .. } => {
                let queued = sent.fan_outs().last().cloned();
                assert_eq!(
                    queued.as_ref().and_then(|f| f.sent_through.clone()),
                    Some(sent_through)
                );
                next = queued;
            }
            Expanded::Paced { .. } => panic!("an unpaced expander paced"),
        }
    }

    let reasons = sent.reasons();
    let codes: Vec<CodeId> = reasons.iter().map(|r| r.code.clone()).collect();
    assert_eq!(codes, all, "each code exactly once, in order");
    assert_eq!(
        invocations, 4,
        "1,000 codes at 3 pages of 100 per invocation"
    );
}

#[tokio::test]
async fn a_paced_fan_out_sends_a_minutes_budget_and_queues_the_rest_a_minute_later() {
    let all: Vec<CodeId> = (0..250).map(code).collect();
    let index = index(vec![(staff("alice"), all.clone())]);
    let sent = InMemoryQueues::default();
    let expander = Expander::new(index.clone(), sent.clone(), sent.clone(), index).paced(120);

    let mut next = Some(fan_out(vec![staff("alice")]));
    let mut sent_per_expansion = Vec::new();
    while let Some(part) = next.take() {
        let before = sent.reasons().len();
        match expander.expand(&part, BEGAN, || false).await.expect("sent") {
            Expanded::Done { reasons } => sent_per_expansion.push(reasons),
            Expanded::Paced {
                reasons,
                sent_through,
            } => {
                sent_per_expansion.push(reasons);
                let (queued, delay_s) = sent.fan_outs_later().last().cloned().expect("queued");
                assert_eq!(delay_s, PACE_DELAY_S);
                assert_eq!(queued.sent_through, Some(sent_through));
                next = Some(queued);
            }
            Expanded::Continued { .. } => panic!("time never ran out"),
        }
        assert_eq!(
            sent.reasons().len() - before,
            *sent_per_expansion.last().unwrap_or(&0)
        );
    }

    assert_eq!(sent_per_expansion, [120, 120, 10], "at most 120 a minute");
    let codes: Vec<CodeId> = sent.reasons().iter().map(|r| r.code.clone()).collect();
    assert_eq!(codes, all, "each code exactly once, in order");
    assert!(
        sent.fan_outs().is_empty(),
        "no continuation without its delay"
    );
}

#[tokio::test]
async fn a_fan_out_within_its_pace_is_sent_at_once() {
    let all: Vec<CodeId> = (0..250).map(code).collect();
    let index = index(vec![(staff("alice"), all)]);
    let sent = InMemoryQueues::default();
    let expander = Expander::new(index.clone(), sent.clone(), sent.clone(), index).paced(250);

    let expanded = expander
        .expand(&fan_out(vec![staff("alice")]), BEGAN, || false)
        .await
        .expect("sent");

    assert_eq!(expanded, Expanded::Done { reasons: 250 });
    assert!(sent.fan_outs_later().is_empty());
}

#[tokio::test]
async fn a_failed_send_is_an_error_and_the_redelivered_fan_out_resends_from_its_resume_point() {
    let all: Vec<CodeId> = (0..250).map(code).collect();
    let sent = InMemoryQueues::default();
    sent.fail_reasons_after(Some(130));
    let index = index(vec![(staff("alice"), all.clone())]);
    let expander = Expander::new(index.clone(), sent.clone(), sent.clone(), index);

    let failed = expander
        .expand(&fan_out(vec![staff("alice")]), BEGAN, || false)
        .await;

    assert!(failed.is_err());
    assert!(sent.fan_outs().is_empty());
}

#[tokio::test]
async fn a_fan_out_always_makes_progress_even_when_time_is_short_from_the_start() {
    let index = index(vec![(staff("alice"), (0..150).map(code).collect())]);
    let sent = InMemoryQueues::default();
    let expander = Expander::new(index.clone(), sent.clone(), sent.clone(), index);

    let expanded = expander
        .expand(&fan_out(vec![staff("alice")]), BEGAN, || true)
        .await
        .expect("sent");

    assert_eq!(
        expanded,
        Expanded::Continued {
            reasons: PAGE,
            sent_through: code(PAGE - 1)
        }
    );
}

#[test]
fn a_fan_out_survives_its_queue_as_json() {
    let original = fan_out(vec![staff("alice"), Source::Tenant]).resumed_after(&code(9));
    let back: FanOut = serde_json::from_str(&original.to_json()).expect("parses");
    assert_eq!(back, original);
}

#[tokio::test]
async fn a_fan_out_on_its_last_receive_is_marked_given_up_before_it_expands() {
    let index = index(vec![(staff("alice"), vec![code(1)])]);
    let sent = InMemoryQueues::default();
    sent.set_unavailable(true);
    let expander = Expander::new(index.clone(), sent.clone(), sent.clone(), index.clone());
    let given_up = fan_out(vec![staff("alice")]);

    expander
        .mark_given_up(&given_up, BEGAN)
        .await
        .expect("marked");
    // The receive that may not survive: its sends fail (or it times out).
    assert!(expander.expand(&given_up, BEGAN, || false).await.is_err());

    let mark = index
        .fan_out_mark(&given_up.tenant, &given_up.mark_key())
        .expect("the fan-out is marked");
    assert_eq!(mark.fan_out, given_up, "the mark holds the fan-out itself");
    assert_eq!(
        mark.marked_at_ms,
        BEGAN - 1,
        "made before the expansion began"
    );
    assert_eq!(mark.why, Some(DirtyWhy::LastReceive));
    assert_eq!(mark.due_at_ms, BEGAN - 1, "due for the sweep at once");
}

#[tokio::test]
async fn the_expansion_that_follows_its_mark_and_completes_clears_it() {
    let all: Vec<CodeId> = (0..150).map(code).collect();
    let index = index(vec![(staff("alice"), all)]);
    let sent = InMemoryQueues::default();
    let expander = Expander::new(index.clone(), sent.clone(), sent.clone(), index.clone());
    let given_up = fan_out(vec![staff("alice")]);
    expander
        .mark_given_up(&given_up, BEGAN)
        .await
        .expect("marked");

    // Cut short after a page: the mark stays until the last part completes.
    let first = expander
        .expand(&given_up, BEGAN, || true)
        .await
        .expect("sent");
    assert!(matches!(first, Expanded::Continued { .. }));
    assert!(index
        .fan_out_mark(&given_up.tenant, &given_up.mark_key())
        .is_some());
    let rest = sent.fan_outs().last().cloned().expect("a continuation");
    let last = expander
        .expand(&rest, BEGAN + 5, || false)
        .await
        .expect("sent");

    assert_eq!(last, Expanded::Done { reasons: 50 });
    assert_eq!(
        index.fan_out_mark(&given_up.tenant, &given_up.mark_key()),
        None
    );
}

#[tokio::test]
async fn a_completed_expansion_that_began_before_a_newer_mark_leaves_it() {
    let index = index(vec![(staff("alice"), vec![code(1)])]);
    let sent = InMemoryQueues::default();
    let expander = Expander::new(index.clone(), sent.clone(), sent.clone(), index.clone());
    let given_up = fan_out(vec![staff("alice")]);
    // Another receive of the fan-out gave up while this expansion was running.
    index
        .mark_fan_out(&given_up, DirtyWhy::LastReceive, BEGAN + 10)
        .await
        .expect("marked");

    let done = expander
        .expand(&given_up, BEGAN, || false)
        .await
        .expect("sent");

    assert_eq!(done, Expanded::Done { reasons: 1 });
    let mark = index
        .fan_out_mark(&given_up.tenant, &given_up.mark_key())
        .expect("the newer mark stands");
    assert_eq!(mark.marked_at_ms, BEGAN + 10);
}
