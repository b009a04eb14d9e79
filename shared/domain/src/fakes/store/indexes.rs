//! The fake table's two indexes, kept both ways so a read costs what the table's Query costs
//! (the entries of one key), not a scan of every tenant's items: the scale simulation
//! (tools/scale) holds millions of codes and due items in one `InMemoryStore`.

use super::{CodeKey, Seat};
use crate::facts::AddFact;
use crate::ids::{CodeId, StaffId, TenantId};
use crate::membership::AddCounts;
use crate::schedules::{Minute, Subject};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// The staff -> codes and department -> codes indexes: each code's seats, and each seat's
/// codes, always the same entries seen from either side. Sorted vectors, not trees: a code
/// has about 20 seats and a seat at most a few thousand codes, and millions of them must fit.
#[derive(Default)]
pub(super) struct SeatIndex {
    by_code: HashMap<CodeKey, SortedSet<Seat>>,
    by_seat: HashMap<(TenantId, Seat), SortedSet<CodeId>>,
}

impl SeatIndex {
    pub(super) fn seats_of(&self, key: &CodeKey) -> Option<&[Seat]> {
        self.by_code.get(key).map(|seats| seats.0.as_slice())
    }

    pub(super) fn insert(&mut self, key: &CodeKey, seat: Seat) {
        self.by_seat
            .entry((key.0.clone(), seat.clone()))
            .or_default()
            .insert(key.1.clone());
        self.by_code.entry(key.clone()).or_default().insert(seat);
    }

    /// Keeps the code's (possibly empty) entry, as an emptied index item list does.
    pub(super) fn remove(&mut self, key: &CodeKey, seat: &Seat) {
        if let Some(seats) = self.by_code.get_mut(key) {
            seats.remove(seat);
        }
        self.forget_seat(key, seat);
    }

    pub(super) fn replace(&mut self, key: &CodeKey, seats: BTreeSet<Seat>) {
        self.remove_code(key);
        for seat in &seats {
            self.by_seat
                .entry((key.0.clone(), seat.clone()))
                .or_default()
                .insert(key.1.clone());
        }
        self.by_code
            .insert(key.clone(), SortedSet(seats.into_iter().collect()));
    }

    pub(super) fn remove_code(&mut self, key: &CodeKey) {
        if let Some(seats) = self.by_code.remove(key) {
            for seat in &seats.0 {
                self.forget_seat(key, seat);
            }
        }
    }

    /// The tenant's codes with any of `seats`, in order.
    pub(super) fn codes_with_any(&self, tenant: &TenantId, seats: &[Seat]) -> Vec<CodeId> {
        let mut codes = BTreeSet::new();
        for seat in seats {
            if let Some(found) = self.by_seat.get(&(tenant.clone(), seat.clone())) {
                codes.extend(found.0.iter().cloned());
            }
        }
        codes.into_iter().collect()
    }

    /// Every code of the tenant holding `seat` (a fixture reseats them all).
    pub(super) fn clear_seat(&mut self, tenant: &TenantId, seat: &Seat) {
        if let Some(codes) = self.by_seat.remove(&(tenant.clone(), seat.clone())) {
            for code in codes.0 {
                if let Some(seats) = self.by_code.get_mut(&(tenant.clone(), code)) {
                    seats.remove(seat);
                }
            }
        }
    }

    fn forget_seat(&mut self, key: &CodeKey, seat: &Seat) {
        let seat_key = (key.0.clone(), seat.clone());
        if let Some(codes) = self.by_seat.get_mut(&seat_key) {
            codes.remove(&key.1);
            if codes.0.is_empty() {
                self.by_seat.remove(&seat_key);
            }
        }
    }
}

/// A set kept as a sorted vector.
struct SortedSet<T>(Vec<T>);

impl<T> Default for SortedSet<T> {
    fn default() -> Self {
        Self(Vec::new())
    }
}

impl<T: Ord> SortedSet<T> {
    fn insert(&mut self, value: T) {
        if let Err(at) = self.0.binary_search(&value) {
            self.0.insert(at, value);
        }
    }

    fn remove(&mut self, value: &T) {
        if let Ok(at) = self.0.binary_search(value) {
            self.0.remove(at);
        }
    }
}

/// The schedule tick's due items: each subject's minute and the time it was handled through,
/// and each minute's subjects, in the order the index's Query returns them.
#[derive(Default)]
pub(super) struct DueTable {
    by_subject: BTreeMap<(TenantId, Subject), (Minute, u64)>,
    by_minute: BTreeMap<Minute, BTreeSet<(TenantId, Subject)>>,
}

impl DueTable {
    pub(super) fn get(&self, key: &(TenantId, Subject)) -> Option<(Minute, u64)> {
        self.by_subject.get(key).copied()
    }

    pub(super) fn insert(
        &mut self,
        key: (TenantId, Subject),
        minute: Minute,
        handled_through_ms: u64,
    ) {
        self.remove(&key);
        self.by_minute
            .entry(minute)
            .or_default()
            .insert(key.clone());
        self.by_subject.insert(key, (minute, handled_through_ms));
    }

    pub(super) fn remove(&mut self, key: &(TenantId, Subject)) {
        if let Some((minute, _)) = self.by_subject.remove(key) {
            if let Some(subjects) = self.by_minute.get_mut(&minute) {
                subjects.remove(key);
                if subjects.is_empty() {
                    self.by_minute.remove(&minute);
                }
            }
        }
    }

    pub(super) fn due_in(
        &self,
        minute: Minute,
    ) -> impl Iterator<Item = crate::schedules::Due> + '_ {
        self.by_minute
            .get(&minute)
            .into_iter()
            .flatten()
            .map(move |(tenant, subject)| crate::schedules::Due {
                tenant: tenant.clone(),
                subject: subject.clone(),
                minute,
                handled_through_ms: self
                    .by_subject
                    .get(&(tenant.clone(), subject.clone()))
                    .map(|(_, through)| *through),
            })
    }
}

/// What the add counters hold: each is one item the table increments in the add's transaction.
#[derive(Default)]
pub(super) struct AddCounters {
    on_code_day: HashMap<(TenantId, String, CodeId, StaffId), u32>,
    all_codes_day: HashMap<(TenantId, String, StaffId), u32>,
    on_code_total: HashMap<(TenantId, CodeId, StaffId), u32>,
}

impl AddCounters {
    pub(super) fn count(&mut self, add: &AddFact) {
        let (tenant, code, staff) = (&add.tenant, &add.code, &add.staff);
        *self
            .on_code_day
            .entry((tenant.clone(), add.day.clone(), code.clone(), staff.clone()))
            .or_default() += 1;
        *self
            .all_codes_day
            .entry((tenant.clone(), add.day.clone(), staff.clone()))
            .or_default() += 1;
        *self
            .on_code_total
            .entry((tenant.clone(), code.clone(), staff.clone()))
            .or_default() += 1;
    }

    pub(super) fn all_codes(&self, tenant: &TenantId, staff: &StaffId, day: &str) -> u32 {
        self.all_codes_day
            .get(&(tenant.clone(), day.to_owned(), staff.clone()))
            .copied()
            .unwrap_or(0)
    }

    /// A counter never written counts 0.
    pub(super) fn counts(
        &self,
        tenant: &TenantId,
        code: &CodeId,
        staff: &StaffId,
        day: &str,
    ) -> AddCounts {
        let day = day.to_owned();
        AddCounts {
            on_code: self
                .on_code_day
                .get(&(tenant.clone(), day.clone(), code.clone(), staff.clone()))
                .copied()
                .unwrap_or(0),
            all_codes: self
                .all_codes_day
                .get(&(tenant.clone(), day, staff.clone()))
                .copied()
                .unwrap_or(0),
            on_code_total: self
                .on_code_total
                .get(&(tenant.clone(), code.clone(), staff.clone()))
                .copied()
                .unwrap_or(0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tenant(id: &str) -> TenantId {
        TenantId::parse(id).expect("valid")
    }

    fn code(id: &str) -> CodeId {
        CodeId::parse(id).expect("valid")
    }

    fn staff(id: &str) -> Seat {
        Seat::Staff(StaffId::parse(id).expect("valid"))
    }

    #[test]
    fn a_seats_codes_follow_every_insert_remove_and_replace_and_stay_within_the_tenant() {
        let mut index = SeatIndex::default();
        let (t1, t2) = (tenant("t1"), tenant("t2"));
        index.insert(&(t1.clone(), code("c1")), staff("alice"));
        index.insert(&(t1.clone(), code("c2")), staff("alice"));
        index.insert(&(t2.clone(), code("c1")), staff("alice"));
        assert_eq!(
            index.codes_with_any(&t1, &[staff("alice")]),
            vec![code("c1"), code("c2")]
        );
        index.remove(&(t1.clone(), code("c1")), &staff("alice"));
        index.replace(
            &(t1.clone(), code("c2")),
            [staff("bob")].into_iter().collect(),
        );
        assert!(index.codes_with_any(&t1, &[staff("alice")]).is_empty());
        assert_eq!(index.codes_with_any(&t1, &[staff("bob")]), vec![code("c2")]);
        assert_eq!(
            index.codes_with_any(&t2, &[staff("alice")]),
            vec![code("c1")]
        );
        index.clear_seat(&t1, &staff("bob"));
        index.remove_code(&(t2.clone(), code("c1")));
        assert!(index.codes_with_any(&t1, &[staff("bob")]).is_empty());
        assert!(index.codes_with_any(&t2, &[staff("alice")]).is_empty());
        assert_eq!(index.seats_of(&(t1, code("c2"))), Some(&[][..]));
    }

    #[test]
    fn a_due_item_moved_to_another_minute_is_due_only_there() {
        let mut due = DueTable::default();
        let key = (tenant("t1"), Subject::Midnight);
        due.insert(key.clone(), Minute::containing(60_000), 1);
        due.insert(key.clone(), Minute::containing(120_000), 2);
        assert_eq!(due.due_in(Minute::containing(60_000)).count(), 0);
        let found: Vec<_> = due.due_in(Minute::containing(120_000)).collect();
        assert_eq!(found.len(), 1);
        assert_eq!((&found[0].tenant, &found[0].subject), (&key.0, &key.1));
        assert_eq!(found[0].handled_through_ms, Some(2));
        due.remove(&key);
        assert_eq!(due.due_in(Minute::containing(120_000)).count(), 0);
        assert_eq!(due.get(&key), None);
    }
}
