//! Index work an edit still owes, so an edit too big for one transaction cannot end half done.
//!
//! An edit of a code (its seats in the staff -> codes index) or of a department (its members'
//! department sets) first stores the new configuration together with the index writes it
//! owes, in one conditional write; the owed writes then land in chunks, each chunk in one
//! transaction that also strikes it from the owed record and is fenced on the edit's version.
//! A retried edit reads the configuration and what is still owed, and plans from both
//! (`replan`), so it finishes the work of the edit it interrupted.
//!
//! The invariant, for the stored `target` set and what is `owed`:
//! `target - owed.put ⊆ index ⊆ target ∪ owed.delete`, so once nothing is owed the index is
//! exactly the target. `replan` keeps it whatever part of the owed work landed meanwhile.

use std::collections::BTreeSet;

/// DynamoDB takes at most 100 items in a transaction: 99 index writes and the fence.
pub const WRITES_PER_TRANSACTION: usize = 99;

/// Chunks written at once. Each chunk fences on its own owed item, so chunks in flight never
/// touch the same item (DynamoDB cancels concurrent transactions on one item); four keeps a
/// 2,000-for-2,000 department replacement (41 chunks) to 11 rounds inside the admin API's
/// 10 s, without a burst that trips the table's throttling.
pub const CHUNKS_IN_FLIGHT: usize = 4;

/// Index entries to write (`put`) and to remove (`delete`); never both for one entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owed<T: Ord> {
    pub put: BTreeSet<T>,
    pub delete: BTreeSet<T>,
}

impl<T: Ord> Default for Owed<T> {
    fn default() -> Self {
        Self {
            put: BTreeSet::new(),
            delete: BTreeSet::new(),
        }
    }
}

impl<T: Ord + Clone> Owed<T> {
    pub fn is_empty(&self) -> bool {
        self.put.is_empty() && self.delete.is_empty()
    }

    pub fn len(&self) -> usize {
        self.put.len() + self.delete.len()
    }

    /// Every entry this owes a write to, puts first.
    pub fn entries(&self) -> impl Iterator<Item = (&T, bool)> {
        self.put
            .iter()
            .map(|e| (e, true))
            .chain(self.delete.iter().map(|e| (e, false)))
    }

    /// Adds `other`'s entries (chunks read back from the table).
    pub fn absorb(&mut self, other: Owed<T>) {
        self.put.extend(other.put);
        self.delete.extend(other.delete);
    }

    /// The owed work in chunks of at most `size` writes, in a stable order.
    pub fn chunks(&self, size: usize) -> Vec<Owed<T>> {
        let mut chunks: Vec<Owed<T>> = Vec::new();
        for (entry, put) in self.entries() {
            if chunks.last().is_none_or(|c| c.len() >= size) {
                chunks.push(Owed::default());
            }
            let chunk = chunks.last_mut().expect("pushed above");
            if put {
                chunk.put.insert(entry.clone());
            } else {
                chunk.delete.insert(entry.clone());
            }
        }
        chunks
    }
}

/// What an edit from `stored` (with `owed` still owed) to `next` owes the index.
///
/// Conservative where another writer's chunk may have landed since `owed` was read: an entry
/// of `next` that may be missing is put again, and an entry outside `next` that may be
/// present is deleted again (both are idempotent). With nothing owed it is the plain
/// difference between `stored` and `next`.
pub fn replan<T: Ord + Clone>(stored: &BTreeSet<T>, owed: &Owed<T>, next: &BTreeSet<T>) -> Owed<T> {
    let surely_present: BTreeSet<&T> = stored.iter().filter(|e| !owed.put.contains(e)).collect();
    Owed {
        put: next
            .iter()
            .filter(|e| !surely_present.contains(e))
            .cloned()
            .collect(),
        delete: stored
            .iter()
            .chain(&owed.delete)
            .filter(|e| !next.contains(e))
            .cloned()
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(items: &[u32]) -> BTreeSet<u32> {
        items.iter().copied().collect()
    }

    /// Applies `owed` to `index` as its chunks would, stopping after `landed` chunks.
    fn apply(index: &mut BTreeSet<u32>, owed: &Owed<u32>, landed: usize) -> Owed<u32> {
        let chunks = owed.chunks(2);
        let mut left = Owed::default();
        for (i, chunk) in chunks.into_iter().enumerate() {
            if i < landed {
                index.extend(chunk.put.iter().copied());
                index.retain(|e| !chunk.delete.contains(e));
            } else {
                left.absorb(chunk);
            }
        }
        left
    }

    #[test]
    fn with_nothing_owed_an_edit_owes_the_difference() {
        let owed = replan(&set(&[1, 2, 3]), &Owed::default(), &set(&[2, 3, 4]));
        assert_eq!((owed.put, owed.delete), (set(&[4]), set(&[1])));
    }

    #[test]
    fn a_repeat_of_an_interrupted_edit_owes_what_did_not_land() {
        let mut index = set(&[1, 2, 3]);
        let next = set(&[4, 5, 6, 7, 8]);
        let first = replan(&set(&[1, 2, 3]), &Owed::default(), &next);
        let left = apply(&mut index, &first, 1);
        let again = replan(&next, &left, &next);
        assert_eq!(again, left);
        apply(&mut index, &again, usize::MAX);
        assert_eq!(index, next);
    }

    #[test]
    fn any_interruption_then_any_edit_ends_with_the_index_equal_to_the_last_config() {
        let configs = [set(&[1, 2]), set(&[3, 4, 5, 6, 7]), set(&[1, 7]), set(&[])];
        for landed in 0..4 {
            for stale in [false, true] {
                let mut index = set(&[1, 2]);
                let mut stored = set(&[1, 2]);
                let mut owed = Owed::default();
                for next in &configs[1..] {
                    let plan = replan(&stored, &owed, next);
                    // A stale read of `owed`: chunks of the earlier edit landed after it.
                    if stale {
                        apply(&mut index, &owed, landed);
                    }
                    owed = apply(&mut index, &plan, landed);
                    stored = next.clone();
                }
                let last = replan(&stored, &owed, &stored);
                apply(&mut index, &last, usize::MAX);
                assert_eq!(index, stored, "landed {landed}, stale {stale}");
            }
        }
    }

    #[test]
    fn chunks_hold_at_most_the_given_number_of_writes() {
        let owed = replan(&set(&[1, 2, 3]), &Owed::default(), &set(&[4, 5]));
        let chunks = owed.chunks(2);
        assert_eq!(chunks.iter().map(Owed::len).collect::<Vec<_>>(), [2, 2, 1]);
    }
}
