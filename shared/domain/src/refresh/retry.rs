//! Where a refresh that did not finish goes (docs/rules.md rules 6 and 9): pure decisions, no I/O.
//!
//! SQS FIFO queues accept no per-message delay (docs/aws-semantics.md §1.3), so the delays are
//! fixed, one retry queue per delay. A retry queue is only a timer: its consumer forwards
//! the reason back to refresh.fifo (the code's message group), which stays the one input of
//! the single writer; the retry queues never refresh a code themselves, so two of them can
//! never write one code at the same moment.

use super::{Destination, Requeue, Unsent};
use crate::reasons::RefreshReason;
use crate::wecom::errors::FailureClass;
use crate::StoreError;
use sha2::{Digest, Sha256};
use std::future::Future;

/// The retry queues' fixed delays, shortest first (`template.yaml`'s `RefreshRetry*Queue`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RetryDelay {
    Seconds15,
    Seconds60,
    Seconds900,
}

impl RetryDelay {
    pub const ALL: [Self; 3] = [Self::Seconds15, Self::Seconds60, Self::Seconds900];

    pub fn seconds(self) -> u64 {
        match self {
            Self::Seconds15 => 15,
            Self::Seconds60 => 60,
            Self::Seconds900 => 900,
        }
    }

    /// The shortest delay that covers `wait_ms`; the longest if none does (the reason then
    /// comes back early, finds the window still closed for one conditional write, and waits
    /// again).
    pub fn covering(wait_ms: u64) -> Self {
        Self::ALL
            .into_iter()
            .find(|d| d.seconds() * 1000 >= wait_ms)
            .unwrap_or(Self::Seconds900)
    }
}

/// Where each `Destination` is: a queue's URL, or its name in the simulation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequeueQueues {
    pub refresh: String,
    pub slow_lane: String,
    pub retries: Vec<(RetryDelay, String)>,
}

/// Sending at most this many messages is one `SendMessageBatch` (SQS's limit).
pub const REQUEUES_PER_SEND: usize = 10;

impl RequeueQueues {
    pub fn of(&self, to: Destination) -> Option<&str> {
        match to {
            Destination::RefreshQueue => Some(&self.refresh),
            Destination::SlowLane => Some(&self.slow_lane),
            Destination::Retry(delay) => self
                .retries
                .iter()
                .find(|(d, _)| *d == delay)
                .map(|(_, queue)| queue.as_str()),
        }
    }

    /// `RetryQueues::send_all` over `send`, one `SendMessageBatch` of at most ten requeues to
    /// one queue (`Err`: the indices it did not send, and why). The requeues are grouped by
    /// queue in their order, ten to a send, and the sends go side by side: each reason is its
    /// own code's message group, so nothing orders two of them. A destination without a queue
    /// is not sent.
    pub async fn send_all<'s, 'r, Send, Sent>(
        &'s self,
        requeues: &'r [Requeue],
        send: Send,
    ) -> Result<(), Unsent>
    where
        Send: Fn(&'s str, Vec<(usize, &'r Requeue)>) -> Sent,
        Sent: Future<Output = Result<(), (Vec<usize>, StoreError)>>,
    {
        let mut by_queue: Vec<(&str, Vec<(usize, &Requeue)>)> = Vec::new();
        let mut unsent = Vec::new();
        for (index, requeue) in requeues.iter().enumerate() {
            let Some(queue) = self.of(requeue.to) else {
                unsent.push(index);
                continue;
            };
            match by_queue.iter_mut().find(|(q, _)| *q == queue) {
                Some((_, entries)) => entries.push((index, requeue)),
                None => by_queue.push((queue, vec![(index, requeue)])),
            }
        }
        let sends = by_queue.iter().flat_map(|(queue, entries)| {
            entries
                .chunks(REQUEUES_PER_SEND)
                .map(|chunk| send(queue, chunk.to_vec()))
        });
        let mut error = None;
        for result in futures::future::join_all(sends).await {
            if let Err((indices, why)) = result {
                unsent.extend(indices);
                error = Some(why);
            }
        }
        if unsent.is_empty() {
            return Ok(());
        }
        unsent.sort_unstable();
        Err(Unsent {
            indices: unsent,
            error: error
                .unwrap_or_else(|| StoreError::new("retry queue", "no queue for this delay")),
        })
    }
}

/// A transient failure is retried this many times (15 s, 60 s, 900 s later), then dead-lettered.
pub const TRANSIENT_RETRIES: u32 = 3;

/// What happens to a code's reasons after its refresh.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Path {
    /// Requeued through a retry queue; the received messages are acknowledged. `attempt` is
    /// the failed-attempt count the requeued reason carries (throttling does not raise it).
    Requeue { delay: RetryDelay, attempt: u32 },
    /// Moved to the dead-letter queue with this class, the code marked dirty.
    DeadLetter(FailureClass),
}

/// The path for a refresh that was throttled (our budget or WeCom's 45009/45033) or put off
/// (a busy lease, the slow lane's interval): it never counts as a failed attempt.
pub fn throttled(retry_after_ms: u64, attempt: u32) -> Path {
    Path::Requeue {
        delay: RetryDelay::covering(retry_after_ms),
        attempt,
    }
}

/// The path for a WeCom failure the refresh could not resolve itself, after `attempt` failed
/// attempts before this one. Code gone and staff unusable are resolved inside the refresh.
pub fn failed(class: FailureClass, attempt: u32) -> Path {
    match class {
        FailureClass::Throttled => throttled(0, attempt),
        // A token still refused after the client's one refresh-and-retry is retried like a
        // busy WeCom: a rotated secret may be fixed by the admin in the meantime.
        FailureClass::Transient | FailureClass::Token => match attempt {
            n if n < TRANSIENT_RETRIES => Path::Requeue {
                delay: RetryDelay::ALL[n as usize],
                attempt: n + 1,
            },
            _ => Path::DeadLetter(class),
        },
        // A paused tenant's refresh ends as `Outcome::Paused` and never reaches here; an
        // admin's or the sweep's call that meets these has no retry queue of its own.
        FailureClass::CodeGone
        | FailureClass::StaffUnusable
        | FailureClass::ListTooLong
        | FailureClass::UntrustedIp
        | FailureClass::Forbidden
        | FailureClass::Rejected => Path::DeadLetter(class),
    }
}

/// A refresh reason on its way through a retry queue: the reason itself (so a plain reason
/// parses as one with no attempts) plus how often it failed and which message it replaces.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RetriedReason {
    #[serde(flatten)]
    pub reason: RefreshReason,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub attempt: u32,
    /// The SQS message id this one replaces; empty for a first delivery.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub retry_of: String,
    /// A writer lost the code's lease after pushing: the next refresh pushes even a list the
    /// record says WeCom has (`refresh::PutOffCause::LeaseLost`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub resync: bool,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl RetriedReason {
    pub fn first(reason: RefreshReason) -> Self {
        Self {
            reason,
            attempt: 0,
            retry_of: String::new(),
            resync: false,
        }
    }

    /// The reason requeued in place of SQS message `message_id`.
    pub fn requeued(reason: RefreshReason, attempt: u32, message_id: &str) -> Self {
        Self {
            reason,
            attempt,
            retry_of: message_id.to_owned(),
            resync: false,
        }
    }

    /// The reason's own deduplication id for a first delivery. A requeue is a new message:
    /// its id comes from the message it replaces, so the same reason can be requeued again
    /// later (FIFO deduplication lasts 5 minutes), while a redelivered batch that requeues
    /// the same message twice sends one copy.
    pub fn deduplication_id(&self) -> String {
        if self.retry_of.is_empty() {
            return self.reason.deduplication_id();
        }
        let mut hasher = Sha256::new();
        for part in [
            "retry",
            &self.reason.deduplication_id(),
            &self.retry_of,
            &self.attempt.to_string(),
        ] {
            hasher.update(part.as_bytes());
            hasher.update([0u8]);
        }
        hex::encode(hasher.finalize())
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a refresh reason always serialises")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::CodeId;
    use crate::ids::TenantId;
    use crate::reasons::Cause;
    use std::sync::Mutex;

    #[tokio::test]
    async fn requeues_go_ten_to_a_send_per_queue_and_one_whose_queue_is_missing_is_unsent() {
        let queues = RequeueQueues {
            refresh: "refresh".into(),
            slow_lane: "slow".into(),
            retries: vec![(RetryDelay::Seconds60, "retry-60".into())],
        };
        let to = |n: usize| match n % 4 {
            0 => Destination::RefreshQueue,
            3 => Destination::Retry(RetryDelay::Seconds900),
            _ => Destination::Retry(RetryDelay::Seconds60),
        };
        let requeues: Vec<Requeue> = (0..24)
            .map(|n| Requeue {
                to: to(n),
                reason: RetriedReason::first(reason()),
            })
            .collect();
        let sends = Mutex::new(Vec::new());
        let unsent = queues
            .send_all(&requeues, |queue, chunk| {
                let indices: Vec<usize> = chunk.iter().map(|(index, _)| *index).collect();
                sends
                    .lock()
                    .expect("lock")
                    .push((queue.to_owned(), indices));
                async { Ok(()) }
            })
            .await
            .expect_err("no 900 s queue");
        let sends = sends.into_inner().expect("lock");
        let sizes: Vec<(&str, usize)> = sends.iter().map(|(q, i)| (q.as_str(), i.len())).collect();
        assert_eq!(sizes, [("refresh", 6), ("retry-60", 10), ("retry-60", 2)]);
        assert_eq!(unsent.indices, [3, 7, 11, 15, 19, 23]);
    }

    fn reason() -> RefreshReason {
        RefreshReason {
            tenant: TenantId::parse("acme").expect("valid"),
            code: CodeId::parse("c1").expect("valid"),
            cause: Cause::AddCounted,
            fact_at_ms: 5,
            fact_key: "k".into(),
        }
    }

    #[test]
    fn a_throttled_reason_waits_in_the_shortest_queue_covering_the_window() {
        assert_eq!(
            throttled(14_000, 0),
            Path::Requeue {
                delay: RetryDelay::Seconds15,
                attempt: 0
            }
        );
        assert_eq!(
            throttled(40_000, 2),
            Path::Requeue {
                delay: RetryDelay::Seconds60,
                attempt: 2
            }
        );
        assert_eq!(
            throttled(3_000_000, 0),
            Path::Requeue {
                delay: RetryDelay::Seconds900,
                attempt: 0
            }
        );
    }

    #[test]
    fn a_transient_failure_is_retried_with_growing_delays_then_dead_lettered() {
        let delays: Vec<Path> = (0..4).map(|n| failed(FailureClass::Transient, n)).collect();
        assert_eq!(
            delays,
            [
                Path::Requeue {
                    delay: RetryDelay::Seconds15,
                    attempt: 1
                },
                Path::Requeue {
                    delay: RetryDelay::Seconds60,
                    attempt: 2
                },
                Path::Requeue {
                    delay: RetryDelay::Seconds900,
                    attempt: 3
                },
                Path::DeadLetter(FailureClass::Transient),
            ]
        );
    }

    #[test]
    fn a_refused_request_goes_straight_to_the_dead_letter_queue() {
        assert_eq!(
            failed(FailureClass::Rejected, 0),
            Path::DeadLetter(FailureClass::Rejected)
        );
        assert_eq!(
            failed(FailureClass::ListTooLong, 0),
            Path::DeadLetter(FailureClass::ListTooLong)
        );
    }

    #[test]
    fn a_throttled_failure_never_reaches_the_dead_letter_queue_however_often_it_happens() {
        assert!(matches!(
            failed(FailureClass::Throttled, 99),
            Path::Requeue { .. }
        ));
    }

    #[test]
    fn a_plain_reason_parses_as_a_first_delivery_and_a_requeue_round_trips() {
        let plain: RetriedReason =
            serde_json::from_str(&reason().to_json()).expect("a plain reason parses");
        assert_eq!(plain, RetriedReason::first(reason()));
        let requeued = RetriedReason::requeued(reason(), 2, "m-1");
        let back: RetriedReason = serde_json::from_str(&requeued.to_json()).expect("parses");
        assert_eq!(back, requeued);
        let as_reason: RefreshReason =
            serde_json::from_str(&requeued.to_json()).expect("older consumers read the reason");
        assert_eq!(as_reason, reason());
    }

    #[test]
    fn each_requeue_of_a_reason_gets_its_own_deduplication_id_and_a_repeat_the_same() {
        let first = RetriedReason::first(reason()).deduplication_id();
        assert_eq!(first, reason().deduplication_id());
        let a = RetriedReason::requeued(reason(), 0, "m-1").deduplication_id();
        let b = RetriedReason::requeued(reason(), 0, "m-2").deduplication_id();
        assert_ne!(a, first);
        assert_ne!(a, b);
        assert_eq!(
            a,
            RetriedReason::requeued(reason(), 0, "m-1").deduplication_id()
        );
    }
}
