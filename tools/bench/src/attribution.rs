//! DynamoDB requests per refresh, told apart by kind.
//!
//! The refresh function's DynamoDB adapter counts every request its client sends; each write to
//! one of the tenant's daily tally shards (`STATS#REFRESH#<shard>#<day>`) adds the requests sent
//! since that container's previous tally write, itself included, as `store_requests`, in the same
//! `UpdateItem` that adds the batch's outcome counters (one write per tenant and day per SQS
//! batch). So the requests of one batch arrive together with what its refreshes did, and a
//! batch's requests can be charged to a kind of refresh only when every refresh it tallied was
//! of that kind.
//!
//! The bench reads the tally about once a second during each phase (`Sample`). Between two
//! readings the item grew by whole batches; an interval in which exactly one outcome counter
//! grew (only `unchanged`, only `pushes`, only `requeued_budget`, ...) holds refreshes of that
//! kind alone, and its `store_requests` growth is theirs. Intervals where two kinds grew are
//! counted as mixed and charged to no kind. What a container sent between its tally writes that
//! tallied nothing (a refresh put off before it knew the tenant's day, the per-minute requeue
//! count written after a put-off batch's tally) rides on its next tally write.

use std::collections::BTreeMap;

/// One reading of the tenant's refresh tally: each counter summed over the days present.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sample {
    pub at_ms: u64,
    pub tally: BTreeMap<String, u64>,
}

/// The tally's outcome counters: each tallied refresh grows exactly one of them.
pub const OUTCOMES: [&str; 8] = [
    "unchanged",
    "pushes",
    "requeued_budget",
    "requeued_throttled",
    "starved",
    "requeued_lease",
    "to_slow_lane",
    "slow_interval_waits",
];

/// The requests charged to one kind of refresh (or to the mixed intervals).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Charged {
    pub refreshes: u64,
    pub requests: u64,
    /// Tally intervals that contributed.
    pub intervals: u64,
}

impl Charged {
    pub fn per_refresh(&self) -> Option<f64> {
        (self.refreshes > 0).then(|| self.requests as f64 / self.refreshes as f64)
    }

    fn add(&mut self, other: &Charged) {
        self.refreshes += other.refreshes;
        self.requests += other.requests;
        self.intervals += other.intervals;
    }
}

/// What a run of samples says, by kind.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Attribution {
    /// Outcome counter name -> what the intervals of that kind alone held.
    pub by_kind: BTreeMap<String, Charged>,
    /// Intervals where more than one outcome counter grew (or `recomputes` did not add up).
    pub mixed: Charged,
}

impl Attribution {
    pub fn kind(&self, outcome: &str) -> Charged {
        self.by_kind.get(outcome).copied().unwrap_or_default()
    }

    /// These intervals and `other`'s together (several phases).
    pub fn absorb(&mut self, other: &Attribution) {
        for (kind, charged) in &other.by_kind {
            self.by_kind.entry(kind.clone()).or_default().add(charged);
        }
        self.mixed.add(&other.mixed);
    }
}

fn grew(before: &BTreeMap<String, u64>, after: &BTreeMap<String, u64>, name: &str) -> u64 {
    let now = after.get(name).copied().unwrap_or(0);
    now.saturating_sub(before.get(name).copied().unwrap_or(0))
}

/// Charges each interval between consecutive samples to the one kind of refresh it tallied, or
/// to the mixed intervals. Intervals in which no outcome counter grew are left out (a tally
/// write always carries at least one tallied refresh, so they hold no request of a refresh).
pub fn attribute(samples: &[Sample]) -> Attribution {
    let mut attribution = Attribution::default();
    for pair in samples.windows(2) {
        let (before, after) = (&pair[0].tally, &pair[1].tally);
        let requests = grew(before, after, "store_requests");
        let outcomes: Vec<(&str, u64)> = OUTCOMES
            .iter()
            .map(|name| (*name, grew(before, after, name)))
            .filter(|(_, n)| *n > 0)
            .collect();
        let refreshes: u64 = outcomes.iter().map(|(_, n)| n).sum();
        if refreshes == 0 {
            continue;
        }
        // Every recompute ends as a push, an unchanged list or a starved code; a put-off
        // recomputes nothing. Anything else means the counters moved for a reason this
        // reading does not know, and the interval is charged to no kind.
        let recomputes_add_up = grew(before, after, "recomputes")
            == grew(before, after, "pushes")
                + grew(before, after, "unchanged")
                + grew(before, after, "starved");
        let charged = Charged {
            refreshes,
            requests,
            intervals: 1,
        };
        match outcomes.as_slice() {
            [(kind, _)] if recomputes_add_up => attribution
                .by_kind
                .entry((*kind).to_owned())
                .or_default()
                .add(&charged),
            _ => attribution.mixed.add(&charged),
        }
    }
    attribution
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(at_ms: u64, counters: &[(&str, u64)]) -> Sample {
        Sample {
            at_ms,
            tally: counters
                .iter()
                .map(|(name, n)| ((*name).to_owned(), *n))
                .collect(),
        }
    }

    #[test]
    fn an_interval_where_one_outcome_grew_charges_its_requests_to_that_kind() {
        let samples = [
            sample(
                0,
                &[("recomputes", 5), ("unchanged", 5), ("store_requests", 20)],
            ),
            sample(
                1_000,
                &[
                    ("recomputes", 15),
                    ("unchanged", 15),
                    ("store_requests", 60),
                ],
            ),
            sample(
                2_000,
                &[
                    ("recomputes", 18),
                    ("unchanged", 15),
                    ("pushes", 3),
                    ("store_requests", 84),
                ],
            ),
        ];
        let attribution = attribute(&samples);
        assert_eq!(
            attribution.kind("unchanged"),
            Charged {
                refreshes: 10,
                requests: 40,
                intervals: 1
            }
        );
        assert_eq!(attribution.kind("unchanged").per_refresh(), Some(4.0));
        assert_eq!(attribution.kind("pushes").per_refresh(), Some(8.0));
        assert_eq!(attribution.mixed, Charged::default());
    }

    #[test]
    fn an_interval_where_two_outcomes_grew_is_mixed_and_charged_to_no_kind() {
        let samples = [
            sample(0, &[]),
            sample(
                1_000,
                &[
                    ("recomputes", 2),
                    ("pushes", 2),
                    ("requeued_budget", 8),
                    ("store_requests", 30),
                ],
            ),
        ];
        let attribution = attribute(&samples);
        assert!(attribution.by_kind.is_empty());
        assert_eq!(
            attribution.mixed,
            Charged {
                refreshes: 10,
                requests: 30,
                intervals: 1
            }
        );
    }

    #[test]
    fn a_put_off_interval_that_also_recomputed_is_mixed() {
        let samples = [
            sample(0, &[]),
            sample(
                1_000,
                &[
                    ("recomputes", 1),
                    ("requeued_budget", 4),
                    ("store_requests", 9),
                ],
            ),
        ];
        let attribution = attribute(&samples);
        assert_eq!(attribution.kind("requeued_budget"), Charged::default());
        assert_eq!(attribution.mixed.refreshes, 4);
    }

    #[test]
    fn quiet_intervals_are_left_out_and_phases_add_up() {
        let quiet = [
            sample(0, &[("requeued_budget", 3), ("store_requests", 7)]),
            sample(1_000, &[("requeued_budget", 3), ("store_requests", 7)]),
            sample(2_000, &[("requeued_budget", 13), ("store_requests", 17)]),
        ];
        let mut all = attribute(&quiet);
        assert_eq!(
            all.kind("requeued_budget"),
            Charged {
                refreshes: 10,
                requests: 10,
                intervals: 1
            }
        );
        all.absorb(&attribute(&quiet));
        assert_eq!(all.kind("requeued_budget").refreshes, 20);
        assert_eq!(all.kind("requeued_budget").intervals, 2);
        assert_eq!(Charged::default().per_refresh(), None);
    }
}
