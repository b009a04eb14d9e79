//! The membership rules of docs/rules.md, case by case. Each test builds a small `World` (one
//! code, its staff, counters, departments, tenant rules and `now`) and checks `recompute`,
//! `assess`, `rotation` or `limits_reached` against a table.

use super::*;
use chrono::{NaiveTime, TimeZone, Weekday};
use chrono_tz::Asia::Shanghai;
use Employment::{Disabled, Resigned};

fn id(raw: &str) -> StaffId {
    StaffId::parse(raw).expect("valid staff id")
}

fn ids(raw: &[&str]) -> Vec<StaffId> {
    raw.iter().map(|r| id(r)).collect()
}

fn dept(raw: &str) -> DepartmentId {
    DepartmentId::parse(raw).expect("valid department id")
}

fn members(raw: &[&str]) -> Membership {
    Membership::Members(ids(raw))
}

fn fallback(raw: &[&str]) -> Membership {
    Membership::Fallback(ids(raw))
}

/// Monday 2024-05-06 10:00 in Shanghai (the tenant's default timezone).
fn monday_10am() -> DateTime<Tz> {
    Shanghai
        .with_ymd_and_hms(2024, 5, 6, 10, 0, 0)
        .single()
        .expect("one instant")
}

fn hm(raw: &str) -> NaiveTime {
    NaiveTime::parse_from_str(raw, "%H:%M").expect("HH:MM")
}

fn shifts(shifts: &[(Weekday, &str, &str)]) -> WeeklySchedule {
    WeeklySchedule {
        shifts: shifts
            .iter()
            .map(|(day, start, end)| Shift {
                day: *day,
                start: hm(start),
                end: hm(end),
            })
            .collect(),
    }
}

fn switches(
    offline_check: bool,
    add_limit: Option<u32>,
    daily_limit: Option<u32>,
    round_limit: Option<u32>,
) -> Switches {
    Switches {
        offline_check,
        add_limit,
        daily_limit,
        round_limit,
    }
}

const NO_SWITCHES: Switches = Switches {
    offline_check: false,
    add_limit: None,
    daily_limit: None,
    round_limit: None,
};

const OFFLINE_CHECK: Switches = Switches {
    offline_check: true,
    ..NO_SWITCHES
};

/// One code and everything its recompute reads.
#[derive(Clone)]
struct World {
    code: CodeConfig,
    staff: HashMap<StaffId, StaffFacts>,
    adds: HashMap<StaffId, AddCounts>,
    departments: HashMap<DepartmentId, BTreeSet<StaffId>>,
    tenant: TenantRules,
    now: DateTime<Tz>,
}

impl World {
    /// A code of `family` listing `listed`, each active and online with no adds, no switches,
    /// no company cap, Monday 10:00.
    fn new(family: Family, listed: &[&str]) -> Self {
        Self {
            code: CodeConfig {
                family,
                members: ids(listed),
                departments: vec![],
                fallback: vec![],
                switches: NO_SWITCHES,
            },
            staff: listed
                .iter()
                .map(|s| (id(s), StaffFacts::ACTIVE_ONLINE))
                .collect(),
            adds: HashMap::new(),
            departments: HashMap::new(),
            tenant: TenantRules::default(),
            now: monday_10am(),
        }
    }

    fn native(listed: &[&str]) -> Self {
        Self::new(Family::Native, listed)
    }

    fn switches(mut self, switches: Switches) -> Self {
        self.code.switches = switches;
        self
    }

    fn cap(mut self, cap: Option<u32>) -> Self {
        self.tenant.company_daily_cap = cap;
        self
    }

    /// Fallback staff, each active and online unless already known.
    fn fallback(mut self, staff: &[&str]) -> Self {
        self.code.fallback = ids(staff);
        for s in staff {
            self.staff.entry(id(s)).or_insert(StaffFacts::ACTIVE_ONLINE);
        }
        self
    }

    /// The departments the code lists, in order.
    fn lists_departments(mut self, departments: &[&str]) -> Self {
        self.code.departments = departments.iter().map(|d| dept(d)).collect();
        self
    }

    /// A department's stored members, each active and online unless already known.
    fn department(mut self, department: &str, staff: &[&str]) -> Self {
        self.departments
            .insert(dept(department), ids(staff).into_iter().collect());
        for s in staff {
            self.staff.entry(id(s)).or_insert(StaffFacts::ACTIVE_ONLINE);
        }
        self
    }

    fn staff(mut self, who: &str, facts: StaffFacts) -> Self {
        self.staff.insert(id(who), facts);
        self
    }

    fn offline(self, who: &str) -> Self {
        self.staff(
            who,
            StaffFacts {
                online: false,
                ..StaffFacts::ACTIVE_ONLINE
            },
        )
    }

    fn employment(self, who: &str, employment: Employment) -> Self {
        self.staff(
            who,
            StaffFacts {
                employment,
                ..StaffFacts::ACTIVE_ONLINE
            },
        )
    }

    fn rejected(self, who: &str) -> Self {
        self.staff(
            who,
            StaffFacts {
                rejected_by_wecom: true,
                ..StaffFacts::ACTIVE_ONLINE
            },
        )
    }

    fn unknown(mut self, who: &str) -> Self {
        self.staff.remove(&id(who));
        self
    }

    fn scheduled(self, who: &str, schedule: WeeklySchedule) -> Self {
        self.staff(
            who,
            StaffFacts {
                schedule: Some(schedule),
                ..StaffFacts::ACTIVE_ONLINE
            },
        )
    }

    /// Adds through this code today, through every code today, and through this code ever.
    fn adds(mut self, who: &str, on_code: u32, all_codes: u32, on_code_total: u32) -> Self {
        self.adds.insert(
            id(who),
            AddCounts {
                on_code,
                all_codes,
                on_code_total,
            },
        );
        self
    }

    fn at(mut self, now: DateTime<Tz>) -> Self {
        self.now = now;
        self
    }

    fn facts(&self) -> Facts<'_> {
        Facts {
            code: &self.code,
            staff: &self.staff,
            adds: &self.adds,
            departments: &self.departments,
            tenant: self.tenant,
            now: self.now,
        }
    }

    fn recompute(&self) -> Membership {
        recompute(&self.facts())
    }

    fn reasons(&self) -> Vec<(String, Option<Exclusion>)> {
        assess(&self.facts())
            .into_iter()
            .map(|(staff, exclusion)| (staff.to_string(), exclusion))
            .collect()
    }

    fn reason(&self, who: &str) -> Option<Exclusion> {
        self.reasons()
            .into_iter()
            .find(|(staff, _)| staff == who)
            .unwrap_or_else(|| panic!("{who} is not a candidate"))
            .1
    }

    /// (staff, takes) of the rotation for this world's recompute.
    fn rotation(&self) -> Option<Vec<(String, u32)>> {
        let membership = self.recompute();
        rotation(&self.facts(), &membership).map(|slots| {
            slots
                .into_iter()
                .map(|slot| (slot.staff.to_string(), slot.takes))
                .collect()
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Every switch, on and off, against staff placed at and around each threshold.

const ADD_LIMIT: u32 = 10;
const DAILY_LIMIT: u32 = 3;
const COMPANY_CAP: u32 = 5;

/// The rule that removes a staff member of the `combination_cast`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RemovedBy {
    Nothing,
    OfflineCheck,
    AddLimit,
    DailyLimit,
    CompanyCap,
    Always,
}

struct Cast {
    name: &'static str,
    facts: Option<StaffFacts>,
    /// (today on this code, today on all codes, ever on this code)
    adds: (u32, u32, u32),
    removed_by: RemovedBy,
    reason: Exclusion,
}

/// Staff placed so that each is removed by exactly one rule (or by none, or always), in an
/// order that is not alphabetical.
fn combination_cast() -> Vec<Cast> {
    let active = Some(StaffFacts::ACTIVE_ONLINE);
    let with = |f: fn(&mut StaffFacts)| {
        let mut facts = StaffFacts::ACTIVE_ONLINE;
        f(&mut facts);
        Some(facts)
    };
    use Exclusion as E;
    use RemovedBy as R;
    let cast = |name, facts, adds, removed_by, reason| Cast {
        name,
        facts,
        adds,
        removed_by,
        reason,
    };
    vec![
        cast(
            "zed",
            active.clone(),
            (0, 0, 0),
            R::Nothing,
            E::UnknownStaff,
        ),
        cast(
            "offline",
            with(|f| f.online = false),
            (0, 0, 0),
            R::OfflineCheck,
            E::Offline,
        ),
        cast(
            "tuesday_only",
            with(|f| f.schedule = Some(shifts(&[(Weekday::Tue, "09:00", "18:00")]))),
            (0, 0, 0),
            R::OfflineCheck,
            E::OutsideShift,
        ),
        cast(
            "never_scheduled",
            with(|f| f.schedule = Some(WeeklySchedule::default())),
            (0, 0, 0),
            R::OfflineCheck,
            E::OutsideShift,
        ),
        cast(
            "on_shift",
            with(|f| f.schedule = Some(shifts(&[(Weekday::Mon, "09:00", "18:00")]))),
            (0, 0, 0),
            R::Nothing,
            E::UnknownStaff,
        ),
        cast(
            "total_below",
            active.clone(),
            (0, 0, ADD_LIMIT - 1),
            R::Nothing,
            E::UnknownStaff,
        ),
        cast(
            "total_at",
            active.clone(),
            (0, 0, ADD_LIMIT),
            R::AddLimit,
            E::AddLimitReached,
        ),
        cast(
            "total_over",
            active.clone(),
            (0, 0, ADD_LIMIT + 1),
            R::AddLimit,
            E::AddLimitReached,
        ),
        cast(
            "daily_below",
            active.clone(),
            (DAILY_LIMIT - 1, DAILY_LIMIT - 1, DAILY_LIMIT - 1),
            R::Nothing,
            E::UnknownStaff,
        ),
        cast(
            "daily_at",
            active.clone(),
            (DAILY_LIMIT, DAILY_LIMIT, DAILY_LIMIT),
            R::DailyLimit,
            E::DailyLimitReached,
        ),
        cast(
            "daily_over",
            active.clone(),
            (DAILY_LIMIT + 1, DAILY_LIMIT + 1, DAILY_LIMIT + 1),
            R::DailyLimit,
            E::DailyLimitReached,
        ),
        cast(
            "cap_below",
            active.clone(),
            (0, COMPANY_CAP - 1, 0),
            R::Nothing,
            E::UnknownStaff,
        ),
        cast(
            "cap_at",
            active.clone(),
            (0, COMPANY_CAP, 0),
            R::CompanyCap,
            E::CompanyCapReached,
        ),
        cast(
            "cap_over",
            active.clone(),
            (1, COMPANY_CAP + 1, 1),
            R::CompanyCap,
            E::CompanyCapReached,
        ),
        cast(
            "resigned",
            with(|f| f.employment = Resigned),
            (0, 0, 0),
            R::Always,
            E::Resigned,
        ),
        cast(
            "disabled",
            with(|f| f.employment = Disabled),
            (0, 0, 0),
            R::Always,
            E::Disabled,
        ),
        cast(
            "rejected",
            with(|f| f.rejected_by_wecom = true),
            (0, 0, 0),
            R::Always,
            E::RejectedByWeCom,
        ),
        cast("ghost", None, (0, 0, 0), R::Always, E::UnknownStaff),
        cast("amy", active, (0, 0, 0), R::Nothing, E::UnknownStaff),
    ]
}

#[test]
fn every_combination_of_the_four_switches_and_the_company_cap_removes_exactly_the_staff_it_names() {
    let cast = combination_cast();
    let names: Vec<&str> = cast.iter().map(|c| c.name).collect();
    let mut combinations = 0;
    for family in [Family::Native, Family::Sequenced, Family::Quota] {
        for bits in 0..32u32 {
            let on = |bit: u32| bits & (1 << bit) != 0;
            let sw = switches(
                on(0),
                on(1).then_some(ADD_LIMIT),
                on(2).then_some(DAILY_LIMIT),
                on(3).then_some(2),
            );
            let cap = on(4).then_some(COMPANY_CAP);
            let active = |rule: RemovedBy| match rule {
                RemovedBy::Nothing => false,
                RemovedBy::OfflineCheck => sw.offline_check,
                RemovedBy::AddLimit => sw.add_limit.is_some(),
                RemovedBy::DailyLimit => sw.daily_limit.is_some(),
                RemovedBy::CompanyCap => cap.is_some(),
                RemovedBy::Always => true,
            };
            let mut world = World::new(family, &names).switches(sw).cap(cap);
            for c in &cast {
                match &c.facts {
                    Some(facts) => world = world.staff(c.name, facts.clone()),
                    None => world = world.unknown(c.name),
                }
                world = world.adds(c.name, c.adds.0, c.adds.1, c.adds.2);
            }
            let label = format!("{family:?} {sw:?} cap {cap:?}");

            let expected: Vec<&str> = cast
                .iter()
                .filter(|c| !active(c.removed_by))
                .map(|c| c.name)
                .collect();
            assert_eq!(world.recompute(), members(&expected), "{label}");

            let expected_reasons: Vec<(String, Option<Exclusion>)> = cast
                .iter()
                .map(|c| (c.name.to_owned(), active(c.removed_by).then_some(c.reason)))
                .collect();
            assert_eq!(world.reasons(), expected_reasons, "{label}");

            let rotation = world.rotation();
            if family.rotates() {
                let listed: Vec<String> = rotation
                    .expect("rotating family")
                    .into_iter()
                    .map(|(staff, _)| staff)
                    .collect();
                assert_eq!(listed, expected, "{label}");
            } else {
                assert_eq!(rotation, None, "{label}");
            }
            combinations += 1;
        }
    }
    assert_eq!(combinations, 96);
}

#[test]
fn the_round_limit_never_changes_who_is_listed() {
    for family in [Family::Native, Family::Sequenced, Family::Quota] {
        let world = World::new(family, &["a", "b", "c"])
            .offline("b")
            .switches(OFFLINE_CHECK);
        let with_rounds = world.clone().switches(switches(true, None, None, Some(5)));
        assert_eq!(world.recompute(), members(&["a", "c"]));
        assert_eq!(with_rounds.recompute(), world.recompute(), "{family:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// Thresholds, one switch at a time.

struct Threshold {
    name: &'static str,
    switches: Switches,
    cap: Option<u32>,
    /// (today on this code, today on all codes, ever on this code) for member "a"
    adds: (u32, u32, u32),
    listed: bool,
}

#[test]
fn each_limit_removes_a_member_at_the_limit_and_above_but_not_one_below() {
    let add_1 = switches(false, Some(1), None, None);
    let add_3 = switches(false, Some(3), None, None);
    let daily_1 = switches(false, None, Some(1), None);
    let daily_3 = switches(false, None, Some(3), None);
    let t = |name, switches, cap, adds, listed| Threshold {
        name,
        switches,
        cap,
        adds,
        listed,
    };
    let table = [
        t(
            "no adds under an add limit of 1",
            add_1,
            None,
            (0, 0, 0),
            true,
        ),
        t(
            "1 add ever at an add limit of 1",
            add_1,
            None,
            (0, 0, 1),
            false,
        ),
        t(
            "2 adds ever (limit - 1) under an add limit of 3",
            add_3,
            None,
            (2, 2, 2),
            true,
        ),
        t(
            "3 adds ever (== limit) at an add limit of 3",
            add_3,
            None,
            (0, 0, 3),
            false,
        ),
        t(
            "4 adds ever (> limit) over an add limit of 3",
            add_3,
            None,
            (0, 0, 4),
            false,
        ),
        t(
            "no adds today under a daily limit of 1",
            daily_1,
            None,
            (0, 0, 9),
            true,
        ),
        t(
            "1 add today at a daily limit of 1",
            daily_1,
            None,
            (1, 1, 1),
            false,
        ),
        t(
            "2 adds today (limit - 1) under a daily limit of 3",
            daily_3,
            None,
            (2, 2, 50),
            true,
        ),
        t(
            "3 adds today (== limit) at a daily limit of 3",
            daily_3,
            None,
            (3, 3, 3),
            false,
        ),
        t(
            "4 adds today (> limit) over a daily limit of 3",
            daily_3,
            None,
            (4, 4, 4),
            false,
        ),
        t(
            "many adds today on other codes do not count toward the code's daily limit",
            daily_3,
            None,
            (0, 50, 0),
            true,
        ),
        t(
            "many adds ever do not count toward the daily limit",
            daily_3,
            None,
            (0, 0, 500),
            true,
        ),
        t(
            "adds today do not count toward an add limit they have not reached",
            add_3,
            None,
            (2, 9, 2),
            true,
        ),
        t(
            "4 adds today on all codes (cap - 1) under a cap of 5",
            NO_SWITCHES,
            Some(5),
            (0, 4, 0),
            true,
        ),
        t(
            "5 adds today on all codes (== cap) at a cap of 5",
            NO_SWITCHES,
            Some(5),
            (0, 5, 0),
            false,
        ),
        t(
            "6 adds today on all codes (> cap) over a cap of 5",
            NO_SWITCHES,
            Some(5),
            (1, 6, 1),
            false,
        ),
        t(
            "the cap counts adds on other codes, none of them on this one",
            NO_SWITCHES,
            Some(5),
            (0, 5, 0),
            false,
        ),
        t(
            "a cap of 1 is reached by the first add anywhere",
            NO_SWITCHES,
            Some(1),
            (0, 1, 0),
            false,
        ),
        t(
            "adds on this code alone do not reach the cap when all codes are below it",
            daily_3,
            Some(5),
            (2, 4, 2),
            true,
        ),
        t(
            "switches off: any number of adds is fine",
            NO_SWITCHES,
            None,
            (99, 999, 9999),
            true,
        ),
    ];
    for case in table {
        let world = World::native(&["a", "b"])
            .switches(case.switches)
            .cap(case.cap)
            .adds("a", case.adds.0, case.adds.1, case.adds.2);
        let expected = if case.listed {
            members(&["a", "b"])
        } else {
            members(&["b"])
        };
        assert_eq!(world.recompute(), expected, "{}", case.name);
    }
}

#[test]
fn a_member_at_the_daily_limit_is_excluded_until_the_next_day() {
    let today = World::native(&["a", "b"])
        .switches(switches(false, None, Some(3), None))
        .adds("a", 3, 3, 3);
    assert_eq!(today.recompute(), members(&["b"]));
    assert_eq!(today.reason("a"), Some(Exclusion::DailyLimitReached));
    // The next tenant-day's counters start from zero; the total carries over.
    let tomorrow = today
        .adds("a", 0, 0, 3)
        .at(monday_10am() + chrono::Duration::days(1));
    assert_eq!(tomorrow.recompute(), members(&["a", "b"]));
}

#[test]
fn a_member_at_the_company_cap_is_excluded_until_the_next_day() {
    let today = World::native(&["a", "b"]).cap(Some(5)).adds("a", 1, 5, 1);
    assert_eq!(today.recompute(), members(&["b"]));
    assert_eq!(today.reason("a"), Some(Exclusion::CompanyCapReached));
    let tomorrow = today.adds("a", 0, 0, 1);
    assert_eq!(tomorrow.recompute(), members(&["a", "b"]));
}

#[test]
fn a_member_at_the_add_limit_stays_excluded_on_later_days() {
    let today = World::native(&["a", "b"])
        .switches(switches(false, Some(3), Some(5), None))
        .adds("a", 3, 3, 3);
    assert_eq!(today.reason("a"), Some(Exclusion::AddLimitReached));
    let tomorrow = today.adds("a", 0, 0, 3);
    assert_eq!(tomorrow.recompute(), members(&["b"]));
}

#[test]
fn staff_without_adds_counted_have_none() {
    let world = World::native(&["a"])
        .switches(switches(false, Some(1), Some(1), None))
        .cap(Some(1));
    assert!(world.adds.is_empty());
    assert_eq!(world.recompute(), members(&["a"]));
}

#[test]
fn the_first_rule_that_applies_names_the_reason() {
    // Offline, outside a shift and over every limit at once.
    let everything = StaffFacts {
        online: false,
        schedule: Some(WeeklySchedule::default()),
        ..StaffFacts::ACTIVE_ONLINE
    };
    let all = switches(true, Some(1), Some(1), None);
    let world = |facts: StaffFacts| {
        World::native(&["a"])
            .switches(all)
            .cap(Some(1))
            .staff("a", facts)
            .adds("a", 1, 1, 1)
    };
    let table = [
        (
            StaffFacts {
                employment: Resigned,
                rejected_by_wecom: true,
                ..everything.clone()
            },
            Exclusion::Resigned,
        ),
        (
            StaffFacts {
                employment: Disabled,
                rejected_by_wecom: true,
                ..everything.clone()
            },
            Exclusion::Disabled,
        ),
        (
            StaffFacts {
                rejected_by_wecom: true,
                ..everything.clone()
            },
            Exclusion::RejectedByWeCom,
        ),
        (everything.clone(), Exclusion::Offline),
        (
            StaffFacts {
                online: true,
                ..everything
            },
            Exclusion::OutsideShift,
        ),
        (StaffFacts::ACTIVE_ONLINE, Exclusion::AddLimitReached),
    ];
    for (facts, reason) in table {
        assert_eq!(world(facts).reason("a"), Some(reason));
    }
    let daily_then_cap = World::native(&["a", "b"])
        .switches(switches(false, None, Some(1), None))
        .cap(Some(1))
        .adds("a", 1, 1, 1)
        .adds("b", 0, 1, 0);
    assert_eq!(
        daily_then_cap.reason("a"),
        Some(Exclusion::DailyLimitReached)
    );
    assert_eq!(
        daily_then_cap.reason("b"),
        Some(Exclusion::CompanyCapReached)
    );
}

// ---------------------------------------------------------------------------------------------
// The offline check: the admin flag and the work schedule.

#[test]
fn offline_staff_are_kept_when_the_offline_check_is_off() {
    let world = World::native(&["a", "b"]).offline("a");
    assert_eq!(world.recompute(), members(&["a", "b"]));
    let world = world.switches(OFFLINE_CHECK);
    assert_eq!(world.recompute(), members(&["b"]));
    assert_eq!(world.reason("a"), Some(Exclusion::Offline));
}

#[test]
fn staff_outside_their_shift_are_excluded_only_with_the_offline_check() {
    let world = World::native(&["day", "night", "always"])
        .scheduled("day", shifts(&[(Weekday::Mon, "09:00", "18:00")]))
        .scheduled("night", shifts(&[(Weekday::Sun, "22:00", "06:00")]));
    // (local time, expected members with the offline check on)
    let table: [(DateTime<Tz>, &[&str]); 6] = [
        (monday_10am(), &["day", "always"]),
        (
            Shanghai
                .with_ymd_and_hms(2024, 5, 6, 8, 59, 59)
                .single()
                .expect("t"),
            &["always"],
        ),
        (
            Shanghai
                .with_ymd_and_hms(2024, 5, 6, 18, 0, 0)
                .single()
                .expect("t"),
            &["always"],
        ),
        // Sunday night and the Monday morning after it (the week wraps).
        (
            Shanghai
                .with_ymd_and_hms(2024, 5, 12, 23, 0, 0)
                .single()
                .expect("t"),
            &["night", "always"],
        ),
        (
            Shanghai
                .with_ymd_and_hms(2024, 5, 6, 5, 59, 0)
                .single()
                .expect("t"),
            &["night", "always"],
        ),
        (
            Shanghai
                .with_ymd_and_hms(2024, 5, 6, 6, 0, 0)
                .single()
                .expect("t"),
            &["always"],
        ),
    ];
    for (now, expected) in table {
        let off = world.clone().at(now);
        assert_eq!(
            off.recompute(),
            members(&["day", "night", "always"]),
            "{now}"
        );
        let on = off.switches(OFFLINE_CHECK);
        assert_eq!(on.recompute(), members(expected), "{now}");
        for (staff, reason) in on.reasons() {
            let listed = expected.contains(&staff.as_str());
            assert_eq!(reason.is_none(), listed, "{staff} at {now}");
            if !listed {
                assert_eq!(reason, Some(Exclusion::OutsideShift), "{staff} at {now}");
            }
        }
    }
}

#[test]
fn staff_with_an_empty_schedule_are_never_on_shift_and_staff_without_one_always_are() {
    let world = World::native(&["empty", "none"])
        .scheduled("empty", WeeklySchedule::default())
        .switches(OFFLINE_CHECK);
    for hour in [0, 3, 10, 23] {
        let at = Shanghai
            .with_ymd_and_hms(2024, 5, 9, hour, 0, 0)
            .single()
            .expect("t");
        assert_eq!(world.clone().at(at).recompute(), members(&["none"]), "{at}");
    }
}

#[test]
fn an_offline_member_on_shift_is_reported_offline() {
    let world = World::native(&["a", "b"])
        .staff(
            "a",
            StaffFacts {
                online: false,
                schedule: Some(shifts(&[(Weekday::Mon, "09:00", "18:00")])),
                ..StaffFacts::ACTIVE_ONLINE
            },
        )
        .switches(OFFLINE_CHECK);
    assert_eq!(world.reason("a"), Some(Exclusion::Offline));
    assert_eq!(world.recompute(), members(&["b"]));
}

// ---------------------------------------------------------------------------------------------
// Never eligible.

#[test]
fn resigned_disabled_rejected_and_unknown_staff_are_never_eligible() {
    let world = World::native(&["gone", "off", "bad", "ghost", "ok"])
        .employment("gone", Resigned)
        .employment("off", Disabled)
        .rejected("bad")
        .unknown("ghost");
    let expected_reasons = vec![
        ("gone".to_owned(), Some(Exclusion::Resigned)),
        ("off".to_owned(), Some(Exclusion::Disabled)),
        ("bad".to_owned(), Some(Exclusion::RejectedByWeCom)),
        ("ghost".to_owned(), Some(Exclusion::UnknownStaff)),
        ("ok".to_owned(), None),
    ];
    // Whatever the switches: none of them brings such staff back.
    for sw in [
        NO_SWITCHES,
        OFFLINE_CHECK,
        switches(true, Some(100), Some(100), Some(3)),
    ] {
        for cap in [None, Some(100)] {
            let world = world.clone().switches(sw).cap(cap);
            assert_eq!(world.recompute(), members(&["ok"]), "{sw:?} {cap:?}");
            assert_eq!(world.reasons(), expected_reasons, "{sw:?} {cap:?}");
        }
    }
}

#[test]
fn a_department_member_who_resigned_or_is_unknown_is_not_listed() {
    let world = World::native(&["a"])
        .lists_departments(&["1"])
        .department("1", &["b", "c", "d"])
        .employment("b", Resigned)
        .unknown("c");
    assert_eq!(world.recompute(), members(&["a", "d"]));
}

// ---------------------------------------------------------------------------------------------
// WeCom's cap of 100 users, departments expanded.

fn numbered(prefix: &str, range: std::ops::Range<usize>) -> Vec<String> {
    range.map(|i| format!("{prefix}{i:03}")).collect()
}

fn strs(owned: &[String]) -> Vec<&str> {
    owned.iter().map(String::as_str).collect()
}

#[test]
fn at_most_one_hundred_users_are_listed() {
    let listed = numbered("u", 0..150);
    let world = World::native(&strs(&listed));
    assert_eq!(world.recompute(), members(&strs(&listed[..100])));
    let over: Vec<String> = world
        .reasons()
        .into_iter()
        .filter(|(_, e)| *e == Some(Exclusion::OverWeComCap))
        .map(|(s, _)| s)
        .collect();
    assert_eq!(over, listed[100..]);
}

#[test]
fn exactly_one_hundred_users_are_all_listed() {
    let listed = numbered("u", 0..100);
    let world = World::native(&strs(&listed));
    assert_eq!(world.recompute(), members(&strs(&listed)));
    assert!(world.reasons().iter().all(|(_, e)| e.is_none()));
}

#[test]
fn the_one_hundred_user_cap_counts_department_members_after_the_listed_members() {
    // 60 members, then a department of 60 of which 10 are already members: 110 candidates.
    let listed = numbered("m", 0..60);
    let mut department = numbered("d", 0..50);
    department.extend(numbered("m", 50..60));
    let world = World::native(&strs(&listed))
        .lists_departments(&["7"])
        .department("7", &strs(&department));
    let candidates = candidates(&world.code, &world.departments);
    assert_eq!(candidates.len(), 110);
    let mut expected = listed;
    expected.extend(numbered("d", 0..40));
    assert_eq!(world.recompute(), members(&strs(&expected)));
    let over: Vec<String> = world
        .reasons()
        .into_iter()
        .filter(|(_, e)| *e == Some(Exclusion::OverWeComCap))
        .map(|(s, _)| s)
        .collect();
    assert_eq!(over, numbered("d", 40..50));
}

#[test]
fn a_code_takes_at_most_500_candidates_from_its_departments_after_all_its_members() {
    // 20 members, then two departments of 400 (the first holding 10 of the members).
    let listed = numbered("m", 0..20);
    let mut first = numbered("a", 0..390);
    first.extend(numbered("m", 10..20));
    let second = numbered("b", 0..400);
    let world = World::native(&strs(&listed))
        .lists_departments(&["7", "8"])
        .department("7", &strs(&first))
        .department("8", &strs(&second));
    let candidates = candidates(&world.code, &world.departments);
    assert_eq!(candidates.len(), 20 + MAX_DEPARTMENT_CANDIDATES);
    let mut expected = listed;
    expected.extend(numbered("a", 0..390));
    expected.extend(numbered("b", 0..110));
    assert_eq!(candidates, ids(&strs(&expected)));
}

#[test]
fn excluded_candidates_do_not_take_places_under_the_one_hundred_user_cap() {
    // 140 members, the first 30 offline: 110 eligible, the first 100 of them listed.
    let listed = numbered("u", 0..140);
    let mut world = World::native(&strs(&listed)).switches(OFFLINE_CHECK);
    for who in &listed[..30] {
        world = world.offline(who);
    }
    assert_eq!(world.recompute(), members(&strs(&listed[30..130])));
    assert_eq!(world.reason(&listed[1]), Some(Exclusion::Offline));
    assert_eq!(world.reason(&listed[129]), None);
    assert_eq!(world.reason(&listed[130]), Some(Exclusion::OverWeComCap));
    // The first member comes online: they take a place and push the last one out.
    let world = world.staff(&listed[0], StaffFacts::ACTIVE_ONLINE);
    let mut expected = vec![listed[0].clone()];
    expected.extend_from_slice(&listed[30..129]);
    assert_eq!(world.recompute(), members(&strs(&expected)));
    assert_eq!(world.reason(&listed[129]), Some(Exclusion::OverWeComCap));
}

// ---------------------------------------------------------------------------------------------
// Departments: expansion order and dedupe.

#[test]
fn departments_expand_after_the_members_in_listed_order_each_by_user_id() {
    let world = World::native(&["zoe", "adam"])
        .lists_departments(&["20", "10"])
        .department("10", &["carl", "bea"])
        .department("20", &["yan", "xia"]);
    assert_eq!(
        world.recompute(),
        members(&["zoe", "adam", "xia", "yan", "bea", "carl"])
    );
}

#[test]
fn a_member_also_in_a_department_is_listed_once_at_their_member_position() {
    let world = World::native(&["b", "a"])
        .lists_departments(&["1"])
        .department("1", &["a", "c", "b"]);
    assert_eq!(world.recompute(), members(&["b", "a", "c"]));
    assert_eq!(world.reasons().len(), 3);
}

#[test]
fn a_person_in_two_listed_departments_is_listed_once_under_the_first() {
    let world = World::native(&[])
        .lists_departments(&["2", "1"])
        .department("1", &["a", "both"])
        .department("2", &["both", "z"]);
    assert_eq!(world.recompute(), members(&["both", "z", "a"]));
}

#[test]
fn a_member_or_department_listed_twice_appears_once() {
    let world = World::native(&["a", "b", "a"])
        .lists_departments(&["1", "1"])
        .department("1", &["c"]);
    assert_eq!(world.recompute(), members(&["a", "b", "c"]));
}

#[test]
fn departments_the_code_does_not_list_or_nobody_stored_add_nobody() {
    let world = World::native(&["a"])
        .lists_departments(&["1", "99"])
        .department("1", &["b"])
        .department("2", &["c"]);
    // Department 99 has no stored members; department 2 is stored but not listed.
    assert_eq!(world.recompute(), members(&["a", "b"]));
}

#[test]
fn a_code_of_departments_only_lists_their_members() {
    let world = World::new(Family::Sequenced, &[])
        .lists_departments(&["1"])
        .department("1", &["b", "a"]);
    assert_eq!(world.recompute(), members(&["a", "b"]));
    let empty = World::native(&[])
        .lists_departments(&["1"])
        .department("1", &[]);
    assert_eq!(empty.recompute(), Membership::Starved);
}

#[test]
fn department_members_are_subject_to_the_same_switches() {
    let world = World::native(&["a"])
        .lists_departments(&["1"])
        .department("1", &["b", "c", "d"])
        .offline("b")
        .adds("c", 2, 2, 2)
        .switches(switches(true, None, Some(2), None));
    assert_eq!(world.recompute(), members(&["a", "d"]));
    assert_eq!(world.reason("b"), Some(Exclusion::Offline));
    assert_eq!(world.reason("c"), Some(Exclusion::DailyLimitReached));
}

// ---------------------------------------------------------------------------------------------
// Fallback and starvation.

#[test]
fn nobody_eligible_pushes_the_usable_fallback_staff_in_order() {
    let world = World::native(&["a"])
        .offline("a")
        .switches(switches(true, Some(1), Some(1), None))
        .cap(Some(1))
        .fallback(&["f2", "gone", "f1", "off", "bad", "ghost", "f2"])
        .employment("gone", Resigned)
        .employment("off", Disabled)
        .rejected("bad")
        .unknown("ghost");
    assert_eq!(world.recompute(), fallback(&["f2", "f1"]));
}

#[test]
fn fallback_staff_are_not_held_to_the_codes_switches() {
    let world = World::native(&["a"])
        .offline("a")
        .switches(switches(true, Some(1), Some(1), None))
        .cap(Some(1))
        .fallback(&["tired", "asleep", "off_shift"])
        .adds("tired", 5, 5, 5)
        .offline("asleep")
        .scheduled("off_shift", WeeklySchedule::default());
    assert_eq!(
        world.recompute(),
        fallback(&["tired", "asleep", "off_shift"])
    );
}

#[test]
fn the_fallback_is_unused_while_any_member_is_eligible() {
    let world = World::native(&["a", "b"])
        .offline("a")
        .switches(OFFLINE_CHECK)
        .fallback(&["f"]);
    assert_eq!(world.recompute(), members(&["b"]));
}

#[test]
fn a_fallback_member_is_pushed_when_the_member_list_is_empty() {
    let world = World::native(&[]).fallback(&["f"]);
    assert_eq!(world.recompute(), fallback(&["f"]));
}

#[test]
fn the_fallback_is_capped_at_one_hundred_users() {
    let backups = numbered("f", 0..130);
    let world = World::native(&["a"]).unknown("a").fallback(&strs(&backups));
    assert_eq!(world.recompute(), fallback(&strs(&backups[..100])));
}

#[test]
fn nobody_eligible_and_no_usable_fallback_is_starved_never_an_empty_list() {
    let all = switches(true, Some(3), Some(3), Some(2));
    let table: [(&str, World); 5] = [
        (
            "no fallback",
            World::native(&["a"]).offline("a").switches(all),
        ),
        (
            "only unusable fallback",
            World::native(&["a", "b"])
                .switches(all)
                .cap(Some(5))
                .adds("a", 3, 3, 3)
                .offline("b")
                .fallback(&["gone", "ghost", "bad"])
                .employment("gone", Resigned)
                .unknown("ghost")
                .rejected("bad"),
        ),
        ("no members at all", World::native(&[])),
        (
            "every member over the company cap",
            World::native(&["a"]).cap(Some(1)).adds("a", 0, 1, 0),
        ),
        (
            "a department of resigned staff",
            World::native(&[])
                .lists_departments(&["1"])
                .department("1", &["r"])
                .employment("r", Resigned),
        ),
    ];
    for (name, world) in table {
        assert_eq!(world.recompute(), Membership::Starved, "{name}");
        assert_eq!(world.recompute().users(), None, "{name}");
    }
}

#[test]
fn users_are_the_members_or_the_fallback() {
    assert_eq!(members(&["a"]).users(), Some(&ids(&["a"])[..]));
    assert_eq!(fallback(&["f"]).users(), Some(&ids(&["f"])[..]));
    assert_eq!(Membership::Starved.users(), None);
}

// ---------------------------------------------------------------------------------------------
// limits_reached: which limits an add has taken a staff member to.

#[test]
fn limits_reached_names_each_scope_at_its_limit_and_above() {
    let all = switches(false, Some(10), Some(3), Some(2));
    let cap = TenantRules {
        company_daily_cap: Some(5),
    };
    let counts = |on_code, all_codes, on_code_total| AddCounts {
        on_code,
        all_codes,
        on_code_total,
    };
    use Limit::{CodeDaily, CodeTotal, CompanyDaily};
    let table: [(&str, Switches, TenantRules, AddCounts, &[Limit]); 15] = [
        ("below every limit", all, cap, counts(2, 4, 9), &[]),
        ("add limit - 1", all, cap, counts(0, 0, 9), &[]),
        ("add limit", all, cap, counts(0, 0, 10), &[CodeTotal]),
        (
            "over the add limit",
            all,
            cap,
            counts(0, 0, 11),
            &[CodeTotal],
        ),
        ("daily limit - 1", all, cap, counts(2, 2, 2), &[]),
        ("daily limit", all, cap, counts(3, 3, 3), &[CodeDaily]),
        (
            "over the daily limit",
            all,
            cap,
            counts(4, 4, 4),
            &[CodeDaily],
        ),
        ("company cap - 1", all, cap, counts(0, 4, 0), &[]),
        ("company cap", all, cap, counts(0, 5, 0), &[CompanyDaily]),
        (
            "over the company cap",
            all,
            cap,
            counts(1, 6, 1),
            &[CompanyDaily],
        ),
        (
            "every limit at once, in scope order",
            all,
            cap,
            counts(3, 5, 10),
            &[CodeTotal, CodeDaily, CompanyDaily],
        ),
        (
            "switches off",
            NO_SWITCHES,
            TenantRules::default(),
            counts(99, 99, 99),
            &[],
        ),
        (
            "only the daily limit on",
            switches(false, None, Some(3), None),
            TenantRules::default(),
            counts(3, 5, 10),
            &[CodeDaily],
        ),
        (
            "only the add limit on",
            switches(false, Some(10), None, None),
            TenantRules::default(),
            counts(3, 5, 10),
            &[CodeTotal],
        ),
        (
            "only the company cap on (the round limit is no limit on adds)",
            switches(true, None, None, Some(1)),
            cap,
            counts(3, 5, 10),
            &[CompanyDaily],
        ),
    ];
    for (name, switches, tenant, counts, expected) in table {
        assert_eq!(
            limits_reached(&switches, tenant, counts),
            expected.to_vec(),
            "{name}"
        );
    }
}

#[test]
fn limits_reached_agrees_with_the_recompute() {
    let cap = Some(5);
    let sw = switches(false, Some(10), Some(3), None);
    for on_code in 0..5 {
        for all_codes in on_code..8 {
            for on_code_total in on_code..12 {
                let world = World::native(&["a"]).switches(sw).cap(cap).adds(
                    "a",
                    on_code,
                    all_codes,
                    on_code_total,
                );
                let reached = limits_reached(
                    &sw,
                    world.tenant,
                    AddCounts {
                        on_code,
                        all_codes,
                        on_code_total,
                    },
                );
                let expected = match reached.first() {
                    None => None,
                    Some(Limit::CodeTotal) => Some(Exclusion::AddLimitReached),
                    Some(Limit::CodeDaily) => Some(Exclusion::DailyLimitReached),
                    Some(Limit::CompanyDaily) => Some(Exclusion::CompanyCapReached),
                };
                assert_eq!(
                    world.reason("a"),
                    expected,
                    "{on_code} {all_codes} {on_code_total}"
                );
            }
        }
    }
}

#[test]
fn limit_names_and_scope() {
    assert_eq!(Limit::CodeTotal.name(), "code_total");
    assert_eq!(Limit::CodeDaily.name(), "code_daily");
    assert_eq!(Limit::CompanyDaily.name(), "company_daily");
    assert!(Limit::CompanyDaily.company_wide());
    assert!(!Limit::CodeDaily.company_wide());
    assert!(!Limit::CodeTotal.company_wide());
}

// ---------------------------------------------------------------------------------------------
// Rotation.

fn slots(raw: &[(&str, u32)]) -> Option<Vec<(String, u32)>> {
    Some(raw.iter().map(|(s, t)| ((*s).to_owned(), *t)).collect())
}

#[test]
fn native_codes_have_no_rotation_whatever_their_switches() {
    for sw in [NO_SWITCHES, switches(true, Some(5), Some(5), Some(3))] {
        let world = World::native(&["a", "b"]).switches(sw);
        assert_eq!(world.rotation(), None, "{sw:?}");
    }
    let starved = World::native(&["a"]).unknown("a");
    assert_eq!(starved.rotation(), None);
}

#[test]
fn rotation_slots_take_the_round_limit_or_one_customer() {
    // (name, family, switches, adds today on this code per member a/b/c, expected slots)
    type Row = (
        &'static str,
        Family,
        Switches,
        [u32; 3],
        &'static [(&'static str, u32)],
    );
    let table: [Row; 12] = [
        (
            "sequenced without a round limit: one each",
            Family::Sequenced,
            NO_SWITCHES,
            [0, 0, 0],
            &[("a", 1), ("b", 1), ("c", 1)],
        ),
        (
            "sequenced with a round limit of 3: three each",
            Family::Sequenced,
            switches(false, None, None, Some(3)),
            [0, 0, 0],
            &[("a", 3), ("b", 3), ("c", 3)],
        ),
        (
            "a round limit of 0 still takes one",
            Family::Sequenced,
            switches(false, None, None, Some(0)),
            [0, 0, 0],
            &[("a", 1), ("b", 1), ("c", 1)],
        ),
        (
            "sequenced is not capped by what is left of the daily limit",
            Family::Sequenced,
            switches(false, None, Some(5), Some(3)),
            [4, 3, 0],
            &[("a", 3), ("b", 3), ("c", 3)],
        ),
        (
            "quota without a round limit: one each",
            Family::Quota,
            switches(false, None, Some(5), None),
            [4, 0, 2],
            &[("a", 1), ("b", 1), ("c", 1)],
        ),
        (
            "quota without a daily limit: the round limit",
            Family::Quota,
            switches(false, None, None, Some(4)),
            [10, 0, 2],
            &[("a", 4), ("b", 4), ("c", 4)],
        ),
        (
            "quota: the round limit, capped by what is left today",
            Family::Quota,
            switches(false, None, Some(5), Some(3)),
            [0, 2, 3],
            &[("a", 3), ("b", 3), ("c", 2)],
        ),
        (
            "quota: one left today (limit - 1) takes one",
            Family::Quota,
            switches(false, None, Some(5), Some(3)),
            [4, 1, 0],
            &[("a", 1), ("b", 3), ("c", 3)],
        ),
        (
            "quota: members at the daily limit are not in the rotation",
            Family::Quota,
            switches(false, None, Some(5), Some(3)),
            [5, 6, 1],
            &[("c", 3)],
        ),
        (
            "quota: a round limit above the daily limit takes what is left",
            Family::Quota,
            switches(false, None, Some(2), Some(10)),
            [0, 1, 0],
            &[("a", 2), ("b", 1), ("c", 2)],
        ),
        (
            "quota: the add limit does not cap a round",
            Family::Quota,
            switches(false, Some(100), None, Some(3)),
            [0, 0, 0],
            &[("a", 3), ("b", 3), ("c", 3)],
        ),
        (
            "sequenced: the offline check only removes members",
            Family::Sequenced,
            switches(true, None, None, Some(2)),
            [0, 0, 0],
            &[("a", 2), ("b", 2), ("c", 2)],
        ),
    ];
    for (name, family, sw, today, expected) in table {
        let mut world = World::new(family, &["a", "b", "c"]).switches(sw);
        for (who, on_code) in ["a", "b", "c"].into_iter().zip(today) {
            world = world.adds(who, on_code, on_code, on_code);
        }
        assert_eq!(world.rotation(), slots(expected), "{name}");
    }
}

#[test]
fn the_rotation_follows_the_pushed_list_in_order_departments_included() {
    let world = World::new(Family::Sequenced, &["z", "y"])
        .lists_departments(&["1"])
        .department("1", &["b", "a", "y"])
        .offline("z")
        .switches(switches(true, None, None, Some(2)));
    assert_eq!(world.recompute(), members(&["y", "a", "b"]));
    assert_eq!(world.rotation(), slots(&[("y", 2), ("a", 2), ("b", 2)]));
}

#[test]
fn a_quota_code_on_its_fallback_gives_a_fallback_member_at_the_limit_one_customer_a_round() {
    let world = World::new(Family::Quota, &["a"])
        .unknown("a")
        .fallback(&["f", "g"])
        .adds("f", 9, 9, 9)
        .adds("g", 1, 1, 1)
        .switches(switches(false, None, Some(5), Some(3)));
    assert_eq!(world.recompute(), fallback(&["f", "g"]));
    assert_eq!(world.rotation(), slots(&[("f", 1), ("g", 3)]));
}

/// A starved code pushes nothing, and its rotation is empty: whoever writes the rotation must
/// keep the last one, as WeCom keeps the last list, rather than write this.
#[test]
fn a_starved_rotating_code_has_an_empty_rotation() {
    for family in [Family::Sequenced, Family::Quota] {
        let world = World::new(family, &["a"]).unknown("a");
        assert_eq!(world.recompute(), Membership::Starved);
        assert_eq!(world.rotation(), Some(vec![]), "{family:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// Ids and serde of the configuration.

#[test]
fn staff_ids_accept_wecom_userids_only() {
    assert!(StaffId::parse("zhang.san@corp-1_x").is_ok());
    for bad in ["", "a b", "a#b", "张三", &"a".repeat(65)] {
        assert!(StaffId::parse(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn a_code_configuration_reads_with_defaults_for_what_is_left_out() {
    let code: CodeConfig =
        serde_json::from_str(r#"{"family":"quota","members":["a","b"]}"#).expect("parses");
    assert_eq!(
        code,
        CodeConfig {
            family: Family::Quota,
            members: ids(&["a", "b"]),
            departments: vec![],
            fallback: vec![],
            switches: NO_SWITCHES,
        }
    );
    let full = CodeConfig {
        family: Family::Sequenced,
        members: ids(&["a"]),
        departments: vec![dept("12")],
        fallback: ids(&["f"]),
        switches: switches(true, Some(10), Some(3), Some(2)),
    };
    let json = serde_json::to_string(&full).expect("writes");
    assert_eq!(
        serde_json::from_str::<CodeConfig>(&json).expect("reads back"),
        full
    );
}

#[test]
fn only_sequenced_and_quota_codes_rotate() {
    assert!(!Family::Native.rotates());
    assert!(Family::Sequenced.rotates());
    assert!(Family::Quota.rotates());
}
