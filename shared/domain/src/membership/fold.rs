//! How facts combine into what a recompute reads: a small pure model of the store.
//!
//! Facts arrive at least once and in any order: SQS redelivers, callbacks for one staff member
//! race each other on different codes' queues, the admin API races WeCom's change events. So
//! folding a set of facts must give one state whatever the order and however often each fact
//! arrives (the fold is commutative and idempotent), and a recompute of that state then gives
//! one list. The rules:
//!
//! - An add counts once per business key: counters are the size of a set of keys, never a
//!   number read, incremented and written back. (A key names one add; should two facts name
//!   different adds with one key, the smaller wins, so even that is order-free.)
//! - Every other field of a staff member is last-writer-wins by the fact's `at_ms`. At equal
//!   times the values are compared, and the one that sends fewer customers to the staff
//!   member wins: offline over online, disabled over resigned over active, a schedule over
//!   none (schedules and department sets otherwise by their order).
//! - WeCom's rejection of a user is sticky: only WeCom's answers set it and nothing clears it.
//! - A department's members are derived from the staff members' department sets; there is no
//!   second record of them to drift.
//! - A staff member is known from their first staff fact on; before it (adds only) they are
//!   unknown to the recompute. A known member's unset fields read as offline, active, not
//!   rejected and without a schedule.
//!
//! The store mirrors these rules with conditional writes on `<field>_at_ms` (the write lands
//! when the stored `<field>_at_ms` is absent or older, or equal with the tie-break in the
//! fact's favour) and claims keyed by business key (`attribute_not_exists`, one item per
//! add), counting only through the claim that lands.

use super::{
    candidates, AddCounts, CodeConfig, Employment, Facts, StaffFacts, TenantRules, WeeklySchedule,
};
use crate::ids::{CodeId, DepartmentId, StaffId};
use chrono::{DateTime, NaiveTime};
use chrono_tz::Tz;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// One fact about a tenant, as the store receives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fact {
    /// An add through `code` on the tenant's `day` (`YYYY-MM-DD`), named by its business key.
    AddCounted {
        key: String,
        staff: StaffId,
        code: CodeId,
        day: String,
    },
    /// The admin's online flag.
    Online {
        staff: StaffId,
        online: bool,
        at_ms: u64,
    },
    Employment {
        staff: StaffId,
        employment: Employment,
        at_ms: u64,
    },
    Schedule {
        staff: StaffId,
        schedule: Option<WeeklySchedule>,
        at_ms: u64,
    },
    /// Every department the staff member is in, as of `at_ms`.
    Departments {
        staff: StaffId,
        departments: BTreeSet<DepartmentId>,
        at_ms: u64,
    },
    /// WeCom refused the user for contact ways.
    RejectedByWeCom { staff: StaffId, at_ms: u64 },
}

/// What one add counted for.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct CountedAdd {
    staff: StaffId,
    code: CodeId,
    day: String,
}

/// A value and the time of the fact that set it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stamped<T> {
    at_ms: u64,
    value: T,
}

/// Keeps the later of the stored and the offered value; at equal times the one with the
/// greater `rank` (which must tell different values apart).
fn last_writer_wins<T: Clone, R: Ord>(
    slot: &mut Option<Stamped<T>>,
    at_ms: u64,
    value: &T,
    rank: impl Fn(&T) -> R,
) {
    let wins = slot
        .as_ref()
        .is_none_or(|stored| (at_ms, rank(value)) > (stored.at_ms, rank(&stored.value)));
    if wins {
        *slot = Some(Stamped {
            at_ms,
            value: value.clone(),
        });
    }
}

/// The tie-break of the online flag: offline wins.
fn online_rank(online: &bool) -> bool {
    !online
}

/// The tie-break of employment: disabled, then resigned, then active.
fn employment_rank(employment: &Employment) -> u8 {
    match employment {
        Employment::Active => 0,
        Employment::Resigned => 1,
        Employment::Disabled => 2,
    }
}

/// The tie-break of schedules: any schedule over none, then by the shifts.
fn schedule_rank(schedule: &Option<WeeklySchedule>) -> Option<Vec<(u32, NaiveTime, NaiveTime)>> {
    schedule.as_ref().map(|schedule| {
        schedule
            .shifts
            .iter()
            .map(|shift| (shift.day.num_days_from_monday(), shift.start, shift.end))
            .collect()
    })
}

/// What is stored about one staff member.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct StaffRecord {
    online: Option<Stamped<bool>>,
    employment: Option<Stamped<Employment>>,
    schedule: Option<Stamped<Option<WeeklySchedule>>>,
    departments: Option<Stamped<BTreeSet<DepartmentId>>>,
    /// The latest rejection by WeCom (there is no un-rejecting).
    rejected_at_ms: Option<u64>,
}

impl StaffRecord {
    fn facts(&self) -> StaffFacts {
        StaffFacts {
            online: self.online.as_ref().is_some_and(|s| s.value),
            employment: self
                .employment
                .as_ref()
                .map_or(Employment::Active, |s| s.value),
            rejected_by_wecom: self.rejected_at_ms.is_some(),
            schedule: self.schedule.as_ref().and_then(|s| s.value.clone()),
        }
    }

    fn departments(&self) -> impl Iterator<Item = &DepartmentId> {
        self.departments.iter().flat_map(|s| s.value.iter())
    }
}

/// Everything known about one tenant, folded from its facts in any order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TenantFacts {
    /// Counted adds by business key.
    adds: BTreeMap<String, CountedAdd>,
    /// Staff known from at least one staff fact.
    staff: BTreeMap<StaffId, StaffRecord>,
}

/// What a recompute of one code reads, loaded from `TenantFacts` for one tenant-day.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoadedFacts {
    /// The code's candidates and fallback staff that are known.
    pub staff: HashMap<StaffId, StaffFacts>,
    /// Their adds on the day (through the code and through every code) and ever (through the
    /// code); staff without adds are left out.
    pub adds: HashMap<StaffId, AddCounts>,
    /// The members of each department the code lists (those with any).
    pub departments: HashMap<DepartmentId, BTreeSet<StaffId>>,
}

impl LoadedFacts {
    /// The recompute's input for `code` under `tenant` rules at `now`.
    pub fn facts<'a>(
        &'a self,
        code: &'a CodeConfig,
        tenant: TenantRules,
        now: DateTime<Tz>,
    ) -> Facts<'a> {
        Facts {
            code,
            staff: &self.staff,
            adds: &self.adds,
            departments: &self.departments,
            tenant,
            now,
        }
    }
}

impl TenantFacts {
    pub fn new() -> Self {
        Self::default()
    }

    /// Folds `facts`, in the order given (which does not matter).
    pub fn from_facts<'a>(facts: impl IntoIterator<Item = &'a Fact>) -> Self {
        let mut folded = Self::new();
        for fact in facts {
            folded.apply(fact);
        }
        folded
    }

    /// Folds one fact in. Applying a fact twice, or facts in another order, gives the same
    /// state.
    pub fn apply(&mut self, fact: &Fact) {
        match fact {
            Fact::AddCounted {
                key,
                staff,
                code,
                day,
            } => {
                let add = CountedAdd {
                    staff: staff.clone(),
                    code: code.clone(),
                    day: day.clone(),
                };
                match self.adds.get_mut(key) {
                    Some(stored) if *stored <= add => {}
                    Some(stored) => *stored = add,
                    None => {
                        self.adds.insert(key.clone(), add);
                    }
                }
            }
            Fact::Online {
                staff,
                online,
                at_ms,
            } => last_writer_wins(&mut self.record(staff).online, *at_ms, online, online_rank),
            Fact::Employment {
                staff,
                employment,
                at_ms,
            } => last_writer_wins(
                &mut self.record(staff).employment,
                *at_ms,
                employment,
                employment_rank,
            ),
            Fact::Schedule {
                staff,
                schedule,
                at_ms,
            } => last_writer_wins(
                &mut self.record(staff).schedule,
                *at_ms,
                schedule,
                schedule_rank,
            ),
            Fact::Departments {
                staff,
                departments,
                at_ms,
            } => last_writer_wins(
                &mut self.record(staff).departments,
                *at_ms,
                departments,
                Clone::clone,
            ),
            Fact::RejectedByWeCom { staff, at_ms } => {
                let record = self.record(staff);
                record.rejected_at_ms = record.rejected_at_ms.max(Some(*at_ms));
            }
        }
    }

    fn record(&mut self, staff: &StaffId) -> &mut StaffRecord {
        self.staff.entry(staff.clone()).or_default()
    }

    /// The staff member's facts, or `None` when no staff fact named them.
    pub fn staff_facts(&self, staff: &StaffId) -> Option<StaffFacts> {
        self.staff.get(staff).map(StaffRecord::facts)
    }

    /// The staff member's adds through `code` on `day`, through every code on `day`, and
    /// through `code` ever.
    pub fn add_counts(&self, staff: &StaffId, code: &CodeId, day: &str) -> AddCounts {
        let mut counts = AddCounts::default();
        for add in self.adds.values().filter(|add| add.staff == *staff) {
            let today = add.day == day;
            let on_code = add.code == *code;
            counts.on_code += u32::from(today && on_code);
            counts.all_codes += u32::from(today);
            counts.on_code_total += u32::from(on_code);
        }
        counts
    }

    /// The members of `department`: the staff whose latest department set holds it.
    pub fn department_members(&self, department: &DepartmentId) -> BTreeSet<StaffId> {
        self.staff
            .iter()
            .filter(|(_, record)| record.departments().any(|d| d == department))
            .map(|(staff, _)| staff.clone())
            .collect()
    }

    /// What a recompute of `code` (stored as `code_id`) reads on the tenant's `day`.
    pub fn facts_for(&self, code: &CodeConfig, code_id: &CodeId, day: &str) -> LoadedFacts {
        let departments: HashMap<DepartmentId, BTreeSet<StaffId>> = code
            .departments
            .iter()
            .map(|department| (department.clone(), self.department_members(department)))
            .filter(|(_, members)| !members.is_empty())
            .collect();
        let mut loaded = LoadedFacts {
            departments,
            ..LoadedFacts::default()
        };
        let people: BTreeSet<StaffId> = candidates(code, &loaded.departments)
            .into_iter()
            .chain(code.fallback.iter().cloned())
            .collect();
        for person in people {
            if let Some(facts) = self.staff_facts(&person) {
                loaded.staff.insert(person.clone(), facts);
            }
            let counts = self.add_counts(&person, code_id, day);
            if counts != AddCounts::default() {
                loaded.adds.insert(person, counts);
            }
        }
        loaded
    }
}

#[cfg(test)]
mod tests {
    use super::super::{assess, recompute, rotation, Family, Membership, Shift, Switches};
    use super::*;
    use chrono::{TimeZone, Weekday};
    use chrono_tz::Asia::Shanghai;
    use proptest::prelude::*;
    use proptest::test_runner::{Config as ProptestConfig, RngSeed};

    fn id(raw: &str) -> StaffId {
        StaffId::parse(raw).expect("staff id")
    }

    fn code_id(raw: &str) -> CodeId {
        CodeId::parse(raw).expect("code id")
    }

    fn dept(raw: &str) -> DepartmentId {
        DepartmentId::parse(raw).expect("department id")
    }

    fn add(key: &str, staff: &str, code: &str, day: &str) -> Fact {
        Fact::AddCounted {
            key: key.into(),
            staff: id(staff),
            code: code_id(code),
            day: day.into(),
        }
    }

    fn online(staff: &str, online: bool, at_ms: u64) -> Fact {
        Fact::Online {
            staff: id(staff),
            online,
            at_ms,
        }
    }

    fn employment(staff: &str, employment: Employment, at_ms: u64) -> Fact {
        Fact::Employment {
            staff: id(staff),
            employment,
            at_ms,
        }
    }

    fn departments(staff: &str, departments: &[&str], at_ms: u64) -> Fact {
        Fact::Departments {
            staff: id(staff),
            departments: departments.iter().map(|d| dept(d)).collect(),
            at_ms,
        }
    }

    fn schedule(staff: &str, schedule: Option<WeeklySchedule>, at_ms: u64) -> Fact {
        Fact::Schedule {
            staff: id(staff),
            schedule,
            at_ms,
        }
    }

    fn shift(day: Weekday, start: &str, end: &str) -> WeeklySchedule {
        WeeklySchedule {
            shifts: vec![Shift {
                day,
                start: NaiveTime::parse_from_str(start, "%H:%M").expect("time"),
                end: NaiveTime::parse_from_str(end, "%H:%M").expect("time"),
            }],
        }
    }

    /// Every order of `facts` folds to the same state as the given one.
    fn fold_in_every_order(facts: &[Fact]) -> TenantFacts {
        let first = TenantFacts::from_facts(facts);
        let mut reversed = facts.to_vec();
        reversed.reverse();
        assert_eq!(TenantFacts::from_facts(&reversed), first, "reversed");
        for rotate in 1..facts.len() {
            let mut rotated = facts.to_vec();
            rotated.rotate_left(rotate);
            assert_eq!(TenantFacts::from_facts(&rotated), first, "rotated {rotate}");
        }
        first
    }

    #[test]
    fn a_redelivered_add_is_counted_once() {
        let day = "2024-05-06";
        let folded = fold_in_every_order(&[
            add("add:1", "ann", "c1", day),
            add("add:1", "ann", "c1", day),
            add("add:2", "ann", "c1", day),
            add("add:1", "ann", "c1", day),
        ]);
        assert_eq!(
            folded.add_counts(&id("ann"), &code_id("c1"), day),
            AddCounts {
                on_code: 2,
                all_codes: 2,
                on_code_total: 2
            }
        );
    }

    #[test]
    fn adds_count_through_the_code_today_through_every_code_today_and_through_the_code_ever() {
        let folded = fold_in_every_order(&[
            add("k1", "ann", "c1", "2024-05-06"),
            add("k2", "ann", "c1", "2024-05-05"),
            add("k3", "ann", "c2", "2024-05-06"),
            add("k4", "ann", "c2", "2024-05-04"),
            add("k5", "bob", "c1", "2024-05-06"),
        ]);
        assert_eq!(
            folded.add_counts(&id("ann"), &code_id("c1"), "2024-05-06"),
            AddCounts {
                on_code: 1,
                all_codes: 2,
                on_code_total: 2
            }
        );
        assert_eq!(
            folded.add_counts(&id("ann"), &code_id("c1"), "2024-05-07"),
            AddCounts {
                on_code: 0,
                all_codes: 0,
                on_code_total: 2
            },
            "a new day starts from zero; the total does not"
        );
        assert_eq!(
            folded.add_counts(&id("cat"), &code_id("c1"), "2024-05-06"),
            AddCounts::default()
        );
    }

    #[test]
    fn two_adds_claiming_one_key_count_once_as_the_smaller() {
        let folded = fold_in_every_order(&[
            add("k", "bob", "c1", "2024-05-06"),
            add("k", "ann", "c1", "2024-05-06"),
        ]);
        assert_eq!(
            folded
                .add_counts(&id("ann"), &code_id("c1"), "2024-05-06")
                .on_code,
            1
        );
        assert_eq!(
            folded
                .add_counts(&id("bob"), &code_id("c1"), "2024-05-06")
                .on_code,
            0
        );
    }

    #[test]
    fn the_latest_fact_wins_whatever_order_the_facts_arrive_in() {
        let folded = fold_in_every_order(&[
            online("ann", true, 10),
            online("ann", false, 30),
            online("ann", true, 20),
            employment("ann", Employment::Resigned, 5),
            employment("ann", Employment::Active, 6),
            departments("ann", &["1"], 1),
            departments("ann", &["2", "3"], 2),
            schedule("ann", Some(shift(Weekday::Mon, "09:00", "18:00")), 7),
            schedule("ann", None, 8),
        ]);
        assert_eq!(
            folded.staff_facts(&id("ann")),
            Some(StaffFacts {
                online: false,
                employment: Employment::Active,
                rejected_by_wecom: false,
                schedule: None,
            })
        );
        assert!(folded.department_members(&dept("1")).is_empty());
        assert_eq!(
            folded.department_members(&dept("3")),
            [id("ann")].into_iter().collect()
        );
    }

    #[test]
    fn at_the_same_time_the_value_that_routes_fewer_customers_wins() {
        let monday = shift(Weekday::Mon, "09:00", "18:00");
        let folded = fold_in_every_order(&[
            online("ann", true, 7),
            online("ann", false, 7),
            employment("ann", Employment::Active, 7),
            employment("ann", Employment::Disabled, 7),
            employment("ann", Employment::Resigned, 7),
            schedule("ann", None, 7),
            schedule("ann", Some(monday.clone()), 7),
        ]);
        assert_eq!(
            folded.staff_facts(&id("ann")),
            Some(StaffFacts {
                online: false,
                employment: Employment::Disabled,
                rejected_by_wecom: false,
                schedule: Some(monday),
            })
        );
    }

    #[test]
    fn a_rejection_by_wecom_is_never_undone() {
        let folded = fold_in_every_order(&[
            Fact::RejectedByWeCom {
                staff: id("ann"),
                at_ms: 5,
            },
            online("ann", true, 9),
            employment("ann", Employment::Active, 9),
        ]);
        assert!(folded
            .staff_facts(&id("ann"))
            .is_some_and(|f| f.rejected_by_wecom));
    }

    #[test]
    fn staff_known_only_by_their_adds_are_unknown_and_a_known_members_unset_fields_are_defaults() {
        let folded = TenantFacts::from_facts(&[
            add("k", "ann", "c1", "2024-05-06"),
            departments("bob", &["1"], 1),
        ]);
        assert_eq!(folded.staff_facts(&id("ann")), None);
        assert_eq!(
            folded.staff_facts(&id("bob")),
            Some(StaffFacts {
                online: false,
                ..StaffFacts::ACTIVE_ONLINE
            })
        );
    }

    #[test]
    fn facts_for_a_code_load_its_candidates_fallback_and_departments() {
        let day = "2024-05-06";
        let folded = TenantFacts::from_facts(&[
            online("ann", true, 1),
            online("bob", true, 1),
            departments("bob", &["1"], 1),
            departments("cat", &["1", "2"], 1),
            online("fay", true, 1),
            online("out", true, 1),
            add("k1", "ann", "c1", day),
            add("k2", "ann", "c2", day),
            add("k3", "out", "c1", day),
        ]);
        let code = CodeConfig {
            family: Family::Native,
            members: vec![id("ann"), id("ghost")],
            departments: vec![dept("1"), dept("9")],
            fallback: vec![id("fay")],
            switches: Switches::default(),
        };
        let loaded = folded.facts_for(&code, &code_id("c1"), day);
        let names: BTreeSet<&str> = loaded.staff.keys().map(StaffId::as_str).collect();
        assert_eq!(names, ["ann", "bob", "cat", "fay"].into_iter().collect());
        assert_eq!(
            loaded.adds,
            [(
                id("ann"),
                AddCounts {
                    on_code: 1,
                    all_codes: 2,
                    on_code_total: 1
                }
            )]
            .into_iter()
            .collect()
        );
        assert_eq!(
            loaded.departments,
            [(dept("1"), [id("bob"), id("cat")].into_iter().collect())]
                .into_iter()
                .collect()
        );
    }

    #[test]
    fn a_recompute_from_folded_facts_applies_the_daily_limit_to_counted_adds() {
        let day = "2024-05-06";
        let now = Shanghai
            .with_ymd_and_hms(2024, 5, 6, 10, 0, 0)
            .single()
            .expect("instant");
        let code = CodeConfig {
            family: Family::Quota,
            members: vec![id("ann"), id("bob")],
            departments: vec![],
            fallback: vec![],
            switches: Switches {
                daily_limit: Some(2),
                round_limit: Some(3),
                ..Switches::default()
            },
        };
        let mut facts = vec![online("ann", true, 1), online("bob", true, 1)];
        // Bob's second add arrives three times; it still is his second.
        facts.extend([
            add("a1", "ann", "c1", day),
            add("b1", "bob", "c1", day),
            add("b2", "bob", "c1", day),
            add("b2", "bob", "c1", day),
            add("b2", "bob", "c1", day),
        ]);
        let folded = fold_in_every_order(&facts);
        let loaded = folded.facts_for(&code, &code_id("c1"), day);
        let input = loaded.facts(&code, TenantRules::default(), now);
        let membership = recompute(&input);
        assert_eq!(membership, Membership::Members(vec![id("ann")]));
        let slots = rotation(&input, &membership).expect("quota rotates");
        assert_eq!(slots.len(), 1);
        assert_eq!(slots[0].takes, 1, "one left of ann's daily limit");
    }

    // -----------------------------------------------------------------------------------------
    // Any order of any facts gives the same recompute.

    const STAFF: [&str; 4] = ["ann", "bob", "cat", "dan"];
    const CODES: [&str; 2] = ["c1", "c2"];
    const DEPARTMENTS: [&str; 3] = ["1", "2", "3"];
    const DAYS: [&str; 2] = ["2024-05-06", "2024-05-07"];

    fn any_staff() -> impl Strategy<Value = StaffId> {
        prop::sample::select(STAFF.to_vec()).prop_map(id)
    }

    /// Staff as a code lists them: a few never named by any fact.
    fn any_listed_staff() -> impl Strategy<Value = StaffId> {
        prop::sample::select(vec!["ann", "bob", "cat", "dan", "zed"]).prop_map(id)
    }

    fn any_code() -> impl Strategy<Value = CodeId> {
        prop::sample::select(CODES.to_vec()).prop_map(code_id)
    }

    fn any_day() -> impl Strategy<Value = String> {
        prop::sample::select(DAYS.to_vec()).prop_map(str::to_owned)
    }

    /// Few distinct times, so that ties are common.
    fn any_at_ms() -> impl Strategy<Value = u64> {
        0u64..4
    }

    fn any_schedule() -> impl Strategy<Value = Option<WeeklySchedule>> {
        prop_oneof![
            Just(None),
            Just(Some(WeeklySchedule::default())),
            Just(Some(shift(Weekday::Mon, "09:00", "18:00"))),
            Just(Some(shift(Weekday::Sun, "22:00", "06:00"))),
            Just(Some(shift(Weekday::Tue, "00:00", "12:00"))),
        ]
    }

    /// Mostly active, so that recomputes have members to list.
    fn any_employment() -> impl Strategy<Value = Employment> {
        prop_oneof![
            4 => Just(Employment::Active),
            1 => Just(Employment::Resigned),
            1 => Just(Employment::Disabled),
        ]
    }

    fn any_fact() -> impl Strategy<Value = Fact> {
        prop_oneof![
            // Keys that name one add (redelivery gives the same key and the same add).
            8 => (any_staff(), any_code(), any_day(), 0u8..3).prop_map(|(staff, code, day, n)| {
                Fact::AddCounted {
                    key: format!("add:{staff}:{code}:{day}:{n}"),
                    staff,
                    code,
                    day,
                }
            }),
            // Keys shared by different adds.
            1 => (0u8..3, any_staff(), any_code(), any_day()).prop_map(|(n, staff, code, day)| {
                Fact::AddCounted {
                    key: format!("shared:{n}"),
                    staff,
                    code,
                    day,
                }
            }),
            4 => (any_staff(), prop::bool::weighted(0.75), any_at_ms())
                .prop_map(|(staff, online, at_ms)| Fact::Online { staff, online, at_ms }),
            3 => (any_staff(), any_employment(), any_at_ms()).prop_map(
                |(staff, employment, at_ms)| Fact::Employment {
                    staff,
                    employment,
                    at_ms
                }
            ),
            2 => (any_staff(), any_schedule(), any_at_ms())
                .prop_map(|(staff, schedule, at_ms)| Fact::Schedule { staff, schedule, at_ms }),
            3 => (
                any_staff(),
                prop::collection::btree_set(
                    prop::sample::select(DEPARTMENTS.to_vec()).prop_map(dept),
                    0..=3
                ),
                any_at_ms()
            )
                .prop_map(|(staff, departments, at_ms)| Fact::Departments {
                    staff,
                    departments,
                    at_ms
                }),
            1 => (any_staff(), any_at_ms())
                .prop_map(|(staff, at_ms)| Fact::RejectedByWeCom { staff, at_ms }),
        ]
    }

    /// Up to 40 facts, some delivered more than once.
    fn any_facts() -> impl Strategy<Value = Vec<Fact>> {
        prop::collection::vec(any_fact(), 0..32).prop_flat_map(|facts| {
            let len = facts.len();
            let redelivered = prop::collection::vec(0..len.max(1), 0..8);
            (Just(facts), redelivered).prop_map(move |(mut facts, again)| {
                if len > 0 {
                    for i in again {
                        facts.push(facts[i].clone());
                    }
                }
                facts
            })
        })
    }

    fn any_limit() -> impl Strategy<Value = Option<u32>> {
        prop::option::of(1u32..6)
    }

    fn any_code_config() -> impl Strategy<Value = CodeConfig> {
        (
            prop::sample::select(vec![Family::Native, Family::Sequenced, Family::Quota]),
            prop::collection::vec(any_listed_staff(), 1..6),
            prop::collection::vec(
                prop::sample::select(vec!["1", "2", "3", "9"]).prop_map(dept),
                0..3,
            ),
            prop::collection::vec(any_listed_staff(), 0..3),
            (any::<bool>(), any_limit(), any_limit(), any_limit()),
        )
            .prop_map(
                |(family, members, departments, fallback, switches)| CodeConfig {
                    family,
                    members,
                    departments,
                    fallback,
                    switches: Switches {
                        offline_check: switches.0,
                        add_limit: switches.1,
                        daily_limit: switches.2,
                        round_limit: switches.3,
                    },
                },
            )
    }

    /// Monday 10:00, Monday 03:00 (inside Sunday's night shift) and Tuesday 03:00.
    fn any_now() -> impl Strategy<Value = DateTime<Tz>> {
        prop::sample::select(vec![(6, 10), (6, 3), (7, 3)]).prop_map(|(day, hour)| {
            Shanghai
                .with_ymd_and_hms(2024, 5, day, hour, 0, 0)
                .single()
                .expect("instant")
        })
    }

    /// The same facts in two orders.
    fn two_orders() -> impl Strategy<Value = (Vec<Fact>, Vec<Fact>)> {
        any_facts().prop_flat_map(|facts| {
            (
                Just(facts.clone()).prop_shuffle(),
                Just(facts).prop_shuffle(),
            )
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: 256,
            rng_seed: RngSeed::Fixed(0x9e37_79b9_7f4a_7c15),
            failure_persistence: None,
            ..ProptestConfig::default()
        })]

        #[test]
        fn facts_applied_in_any_order_give_the_same_recompute_and_rotation(
            (first, second) in two_orders(),
            code in any_code_config(),
            code_id in any_code(),
            cap in any_limit(),
            now in any_now(),
        ) {
            let day = now.date_naive().to_string();
            let tenant = TenantRules { company_daily_cap: cap };

            let one = TenantFacts::from_facts(&first);
            let other = TenantFacts::from_facts(&second);
            prop_assert_eq!(&one, &other);

            // Delivering everything again changes nothing.
            let mut again = one.clone();
            for fact in &second {
                again.apply(fact);
            }
            prop_assert_eq!(&again, &one);

            let loaded_one = one.facts_for(&code, &code_id, &day);
            let loaded_other = other.facts_for(&code, &code_id, &day);
            prop_assert_eq!(&loaded_one, &loaded_other);

            let facts_one = loaded_one.facts(&code, tenant, now);
            let facts_other = loaded_other.facts(&code, tenant, now);
            let membership = recompute(&facts_one);
            prop_assert_eq!(&membership, &recompute(&facts_other));
            prop_assert_eq!(assess(&facts_one), assess(&facts_other));
            prop_assert_eq!(
                rotation(&facts_one, &membership),
                rotation(&facts_other, &recompute(&facts_other))
            );
            if membership != Membership::Starved {
                prop_assert!(membership.users().is_some_and(|users| !users.is_empty()));
            }
        }
    }
}
