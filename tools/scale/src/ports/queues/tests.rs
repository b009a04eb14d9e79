use super::*;
use crate::services::sqs::{Delivered, QueueConfig};
use domain::batch::DeadLetters;
use domain::ids::{CodeId, StaffId, TenantId};
use domain::membership::Limit;
use domain::reasons::{Cause, Fact, Source};
use domain::refresh::retry::RetriedReason;
use domain::refresh::Destination;
use tokio::time::Duration;

const VISIBILITY: Duration = Duration::from_secs(60);

fn tenant() -> TenantId {
    TenantId::parse("t1").expect("tenant")
}

fn code(n: usize) -> CodeId {
    CodeId::parse(&format!("c{n:03}")).expect("code")
}

fn fact(key: &str) -> Fact {
    Fact {
        tenant: tenant(),
        cause: Cause::StaffChanged,
        at_ms: 42,
        key: key.to_owned(),
    }
}

/// refresh.fifo, its slow lane, a 15 s retry queue, a dead-letter queue and a fan-out queue.
fn sqs() -> Arc<Sqs> {
    let sqs = Arc::new(Sqs::new(1));
    for name in ["refresh.fifo", "slow.fifo", "dlq.fifo", "inbox.fifo"] {
        sqs.create_queue(QueueConfig::fifo(name, VISIBILITY));
    }
    sqs.create_queue(
        QueueConfig::fifo("retry-15s.fifo", VISIBILITY).with_delay(Duration::from_secs(15)),
    );
    sqs.create_queue(QueueConfig::standard("fan-out", VISIBILITY));
    sqs.create_queue(QueueConfig::standard("quota", VISIBILITY));
    sqs
}

fn retries(sqs: &Arc<Sqs>) -> SimRetryQueues {
    SimRetryQueues::new(
        Arc::clone(sqs),
        "refresh.fifo",
        "slow.fifo",
        vec![(RetryDelay::Seconds15, "retry-15s.fifo".to_owned())],
    )
}

fn requeue(delay: RetryDelay, reason: &RetriedReason) -> Requeue {
    Requeue {
        to: Destination::Retry(delay),
        reason: reason.clone(),
    }
}

fn drain(sqs: &Sqs, queue: &str) -> Vec<Delivered> {
    let mut all = Vec::new();
    loop {
        let batch = sqs.receive(queue, 10).expect("receive");
        if batch.is_empty() {
            return all;
        }
        let receipts: Vec<_> = batch.iter().map(|m| m.receipt).collect();
        sqs.delete_batch(queue, &receipts).expect("delete");
        all.extend(batch);
    }
}

#[tokio::test(start_paused = true)]
async fn a_fan_out_of_25_reasons_is_three_send_message_batch_requests_in_each_codes_group() {
    let sqs = sqs();
    let reasons: Vec<RefreshReason> = (0..25)
        .map(|n| fact("staff:alice:1").reason_for(&code(n)))
        .collect();
    SimReasonQueue::new(Arc::clone(&sqs), "refresh.fifo")
        .send_all(&reasons)
        .await
        .expect("sent");
    assert_eq!(sqs.counters("refresh.fifo").map(|c| c.send_requests), Ok(3));
    let delivered = drain(&sqs, "refresh.fifo");
    assert_eq!(delivered.len(), 25);
    for (message, reason) in delivered.iter().zip(&reasons) {
        assert_eq!(message.group, reason.group_id());
        assert_eq!(message.body, reason.to_json());
    }
}

#[tokio::test(start_paused = true)]
async fn a_page_of_a_hundred_reasons_takes_one_requests_time_its_ten_batches_side_by_side() {
    let sqs = sqs();
    let reasons: Vec<RefreshReason> = (0..100)
        .map(|n| fact("shifts:1").reason_for(&code(n)))
        .collect();
    let started = tokio::time::Instant::now();
    SimReasonQueue::new(Arc::clone(&sqs), "refresh.fifo")
        .send_all(&reasons)
        .await
        .expect("sent");
    assert_eq!(started.elapsed(), crate::services::sqs::REQUEST_LATENCY);
    assert_eq!(
        sqs.counters("refresh.fifo").map(|c| c.send_requests),
        Ok(10)
    );
    assert_eq!(drain(&sqs, "refresh.fifo").len(), 100);
}

#[tokio::test(start_paused = true)]
async fn one_reason_is_one_send_message_and_its_repeat_within_five_minutes_is_dropped_by_its_id() {
    let sqs = sqs();
    let queue = SimReasonQueue::new(Arc::clone(&sqs), "refresh.fifo");
    let reason = fact("add:1").reason_for(&code(1));
    queue.send(&reason).await.expect("sent");
    queue.send(&reason).await.expect("sent");
    let counters = sqs.counters("refresh.fifo").expect("counters");
    assert_eq!((counters.send_requests, counters.deduplicated), (2, 1));
    assert_eq!(drain(&sqs, "refresh.fifo").len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_delayed_reason_waits_in_the_queue_of_its_delay_and_is_then_in_its_codes_group() {
    let sqs = sqs();
    let retried = RetriedReason::requeued(fact("add:2").reason_for(&code(2)), 1, "m7");
    retries(&sqs)
        .send_all(&[requeue(RetryDelay::Seconds15, &retried)])
        .await
        .expect("sent");
    tokio::time::sleep(Duration::from_secs(14)).await;
    assert!(drain(&sqs, "retry-15s.fifo").is_empty());
    tokio::time::sleep(Duration::from_secs(1)).await;
    let delivered = drain(&sqs, "retry-15s.fifo");
    assert_eq!(delivered.len(), 1);
    assert_eq!(delivered[0].group, retried.reason.group_id());
    assert_eq!(delivered[0].body, retried.to_json());
}

#[tokio::test(start_paused = true)]
async fn a_delay_without_its_queue_is_an_error_like_the_adapters_and_the_rest_are_sent() {
    let sqs = sqs();
    let missing = RetriedReason::requeued(fact("add:3").reason_for(&code(3)), 0, "m8");
    let kept = RetriedReason::requeued(fact("add:4").reason_for(&code(4)), 0, "m9");
    let unsent = retries(&sqs)
        .send_all(&[
            requeue(RetryDelay::Seconds15, &kept),
            requeue(RetryDelay::Seconds900, &missing),
        ])
        .await
        .expect_err("no 900 s queue");
    assert_eq!(unsent.indices, vec![1]);
    tokio::time::sleep(Duration::from_secs(15)).await;
    assert_eq!(drain(&sqs, "retry-15s.fifo")[0].body, kept.to_json());
}

#[tokio::test(start_paused = true)]
async fn forwarded_and_slowed_reasons_go_to_refresh_fifo_and_the_slow_lane() {
    let sqs = sqs();
    let retries = retries(&sqs);
    let forwarded = RetriedReason::requeued(fact("a").reason_for(&code(4)), 1, "m1");
    let slowed = RetriedReason::requeued(fact("b").reason_for(&code(5)), 0, "m2");
    let requeues = [
        Requeue {
            to: Destination::RefreshQueue,
            reason: forwarded.clone(),
        },
        Requeue {
            to: Destination::SlowLane,
            reason: slowed.clone(),
        },
    ];
    retries.send_all(&requeues).await.expect("sent");
    assert_eq!(drain(&sqs, "refresh.fifo")[0].body, forwarded.to_json());
    assert_eq!(drain(&sqs, "slow.fifo")[0].body, slowed.to_json());
}

#[tokio::test(start_paused = true)]
async fn a_batchs_requeues_are_ten_to_a_request_per_queue_sent_side_by_side() {
    let sqs = sqs();
    let reasons: Vec<RetriedReason> = (0..25)
        .map(|n| RetriedReason::requeued(fact("shifts:2").reason_for(&code(n)), 0, "m"))
        .collect();
    let requeues: Vec<Requeue> = reasons
        .iter()
        .enumerate()
        .map(|(n, reason)| match n % 5 {
            0 => Requeue {
                to: Destination::RefreshQueue,
                reason: reason.clone(),
            },
            _ => requeue(RetryDelay::Seconds15, reason),
        })
        .collect();
    let started = tokio::time::Instant::now();
    retries(&sqs).send_all(&requeues).await.expect("sent");
    assert_eq!(started.elapsed(), crate::services::sqs::REQUEST_LATENCY);
    let sends = |queue| sqs.counters(queue).map(|c| c.send_requests);
    // 5 forwards in one request, 20 delays in two.
    assert_eq!(
        (sends("refresh.fifo"), sends("retry-15s.fifo")),
        (Ok(1), Ok(2))
    );
    assert_eq!(drain(&sqs, "refresh.fifo").len(), 5);
}

#[tokio::test(start_paused = true)]
async fn a_parked_message_keeps_its_group_or_unknown_and_is_deduplicated_by_its_id() {
    let sqs = sqs();
    let dead_letters = SimDeadLetters::new(Arc::clone(&sqs), "dlq.fifo");
    dead_letters
        .park("", "m1", "not json", "poison", "unreadable")
        .await
        .expect("parked");
    dead_letters
        .park("", "m1", "not json", "poison", "unreadable")
        .await
        .expect("parked");
    let parked = drain(&sqs, "dlq.fifo");
    assert_eq!(parked.len(), 1);
    assert_eq!(
        (parked[0].group.as_str(), parked[0].body.as_str()),
        ("unknown", "not json")
    );
}

#[tokio::test(start_paused = true)]
async fn a_fan_out_is_one_send_message_on_the_standard_queue() {
    let sqs = sqs();
    let fan_out = FanOut::new(
        tenant(),
        vec![Source::Staff {
            staff: StaffId::parse("alice").expect("staff"),
        }],
        Cause::StaffChanged,
        42,
        "staff:alice:42".into(),
    );
    SimFanOutQueue::new(Arc::clone(&sqs), "fan-out")
        .send(&fan_out)
        .await
        .expect("sent");
    let delivered = drain(&sqs, "fan-out");
    assert_eq!(delivered[0].body, fan_out.to_json());
    assert_eq!(sqs.counters("fan-out").map(|c| c.send_requests), Ok(1));
}

#[tokio::test(start_paused = true)]
async fn each_quota_event_is_one_put_events_and_lands_on_the_rules_queue() {
    let sqs = sqs();
    let notifier = QuotaEvents::new(Arc::clone(&sqs), Some("quota"));
    let event = StaffQuotaReached {
        id: "claim-1".into(),
        tenant: tenant(),
        staff: StaffId::parse("alice").expect("staff"),
        limit: Limit::CodeDaily,
        day: "2026-12-06".into(),
        code: Some(code(1)),
        codes: 1,
        reached_at_ms: 42,
    };
    notifier.publish(&event).await.expect("published");
    assert_eq!(notifier.put_events(), 1);
    let landed: serde_json::Value =
        serde_json::from_str(&drain(&sqs, "quota")[0].body).expect("JSON");
    assert_eq!(landed["detail-type"], "StaffQuotaReached");
    assert_eq!(landed["detail"]["id"], "claim-1");
    let counted_only = QuotaEvents::new(Arc::clone(&sqs), None);
    counted_only.publish(&event).await.expect("published");
    assert_eq!(counted_only.put_events(), 1);
    assert!(drain(&sqs, "quota").is_empty());
}
