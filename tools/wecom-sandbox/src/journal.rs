//! An append-only log with sequence numbers, read by "everything after seq N". Bounded so that
//! a long campaign cannot exhaust memory; the oldest entries go first.

use std::collections::VecDeque;

pub(crate) const DEFAULT_CAPACITY: usize = 200_000;

pub(crate) trait Sequenced {
    fn seq(&self) -> u64;
}

#[derive(Debug)]
pub(crate) struct Journal<T> {
    entries: VecDeque<T>,
    last_seq: u64,
    capacity: usize,
}

impl<T: Sequenced + Clone> Journal<T> {
    pub fn new(capacity: usize) -> Self {
        Self {
            entries: VecDeque::new(),
            last_seq: 0,
            capacity,
        }
    }

    pub fn next_seq(&mut self) -> u64 {
        self.last_seq += 1;
        self.last_seq
    }

    /// Entries must be pushed in `next_seq` order.
    pub fn push(&mut self, entry: T) {
        if self.entries.len() == self.capacity {
            self.entries.pop_front();
        }
        self.entries.push_back(entry);
    }

    pub fn last_seq(&self) -> u64 {
        self.last_seq
    }

    pub fn after(&self, since: u64, keep: impl Fn(&T) -> bool) -> Vec<T> {
        let start = self.entries.partition_point(|e| e.seq() <= since);
        self.entries
            .range(start..)
            .filter(|e| keep(e))
            .cloned()
            .collect()
    }

    pub fn get_mut(&mut self, seq: u64) -> Option<&mut T> {
        let index = self
            .entries
            .binary_search_by_key(&seq, Sequenced::seq)
            .ok()?;
        self.entries.get_mut(index)
    }

    /// Forgets the entries but not the sequence, so a reader's `since` stays meaningful.
    pub fn clear(&mut self) {
        self.entries.clear();
    }
}
