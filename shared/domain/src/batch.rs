//! docs/rules.md rule 7, "ack and redeliver, never hold a stream": a failing code must not stall
//! other codes. SQS FIFO partial batch responses, the order-safe way: after a message of a
//! group fails, every later message of that group in the batch is reported as failed too
//! (so the group is redelivered in order), while other groups carry on.

use crate::StoreError;
use std::collections::HashSet;

/// Whether this is a message's last receive before SQS moves it to the dead-letter queue
/// without running any code of ours (a timeout, a crash): its code is then marked dirty
/// before the work it may not survive (docs/rules.md rule 11).
pub fn is_last_receive(receive_count: u32, max_receives: u32) -> bool {
    receive_count >= max_receives
}

/// One message of an SQS batch, as every consumer reads it; the edge translates a record into
/// this and the consumer beside each concern decides what to retry, drop or report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Received<'a> {
    pub message_id: &'a str,
    /// The FIFO message group (empty on a standard queue).
    pub group: &'a str,
    pub body: &'a str,
    /// SQS's `ApproximateReceiveCount` (1 on the first receive).
    pub receive_count: u32,
}

/// A dead-letter queue a consumer moves messages to itself, with their failure class, when
/// retrying cannot help (the queue's own redrive only counts receives).
#[async_trait::async_trait]
pub trait DeadLetters: Send + Sync {
    async fn park(
        &self,
        group: &str,
        message_id: &str,
        body: &str,
        failure_class: &str,
        reason: &str,
    ) -> Result<(), StoreError>;
}

#[derive(Debug, Default)]
pub struct PartialBatch {
    failed_groups: HashSet<String>,
    failed_messages: Vec<String>,
}

impl PartialBatch {
    /// True when an earlier message of `group` failed in this batch: this one must not be
    /// processed out of order, only reported.
    pub fn group_failed(&self, group: &str) -> bool {
        self.failed_groups.contains(group)
    }

    pub fn fail(&mut self, group: &str, message_id: &str) {
        self.failed_groups.insert(group.to_owned());
        self.failed_messages.push(message_id.to_owned());
    }

    /// A poison message can never succeed: it is moved to the dead-letter queue with its
    /// class and acknowledged; only if parking fails is it reported for redelivery.
    pub async fn park_poison<D: DeadLetters>(
        &mut self,
        dead_letters: &D,
        group: &str,
        message_id: &str,
        body: &str,
        reason: &str,
    ) {
        crate::telemetry::failure("poison");
        crate::telemetry::dead_lettered("poison");
        tracing::error!(
            message_id,
            group,
            reason,
            "poison message moved to the dead-letter queue"
        );
        if let Err(error) = dead_letters
            .park(group, message_id, body, "poison", reason)
            .await
        {
            tracing::error!(message_id, error = ?error, "could not park the poison message; it will be redelivered");
            self.fail(group, message_id);
        }
    }

    /// Takes in what another part of the same batch failed (its codes were refreshed side by
    /// side with this part's).
    pub fn absorb(&mut self, other: PartialBatch) {
        self.failed_groups.extend(other.failed_groups);
        self.failed_messages.extend(other.failed_messages);
    }

    /// The message ids to report in `batchItemFailures`.
    pub fn failures(self) -> Vec<String> {
        self.failed_messages
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_fails_the_rest_of_its_group_but_not_other_groups() {
        let batch = [("a", "1"), ("b", "2"), ("a", "3"), ("b", "4")];
        let mut result = PartialBatch::default();
        for (group, id) in batch {
            if result.group_failed(group) || id == "1" {
                result.fail(group, id);
            }
        }
        assert_eq!(result.failures(), ["1", "3"]);
    }
}
