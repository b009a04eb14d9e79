use super::*;

fn id(raw: &str) -> StaffId {
    StaffId::parse(raw).expect("valid staff id")
}

fn now() -> DateTime<Tz> {
    use chrono::TimeZone;
    chrono_tz::Asia::Shanghai
        .with_ymd_and_hms(2024, 5, 6, 10, 0, 0)
        .unwrap()
}

fn ids(raw: &[&str]) -> Vec<StaffId> {
    raw.iter().map(|r| id(r)).collect()
}

struct Case {
    name: &'static str,
    members: &'static [&'static str],
    fallback: &'static [&'static str],
    switches: Switches,
    cap: Option<u32>,
    /// (staff, online, employment, rejected by WeCom); staff not listed are unknown.
    staff: &'static [(&'static str, bool, Employment, bool)],
    /// (staff, adds today on this code, adds today on all codes)
    today: &'static [(&'static str, u32, u32)],
    expected: Membership,
}

const OFFLINE_CHECK: Switches = Switches {
    offline_check: true,
    daily_limit: None,
    add_limit: None,
    round_limit: None,
};
const NO_SWITCHES: Switches = Switches {
    offline_check: false,
    daily_limit: None,
    add_limit: None,
    round_limit: None,
};
const DAILY_3: Switches = Switches {
    offline_check: false,
    daily_limit: Some(3),
    add_limit: None,
    round_limit: None,
};
const ALL: Switches = Switches {
    offline_check: true,
    daily_limit: Some(3),
    add_limit: None,
    round_limit: None,
};
use Employment::{Active, Disabled, Resigned};

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "every usable member, in member order",
            members: &["c", "a", "b"],
            fallback: &[],
            switches: NO_SWITCHES,
            cap: None,
            staff: &[
                ("a", true, Active, false),
                ("b", true, Active, false),
                ("c", true, Active, false),
            ],
            today: &[],
            expected: Membership::Members(ids(&["c", "a", "b"])),
        },
        Case {
            name: "offline staff are kept when the offline check is off",
            members: &["a", "b"],
            fallback: &[],
            switches: NO_SWITCHES,
            cap: None,
            staff: &[("a", false, Active, false), ("b", true, Active, false)],
            today: &[],
            expected: Membership::Members(ids(&["a", "b"])),
        },
        Case {
            name: "offline staff are dropped when the offline check is on",
            members: &["a", "b"],
            fallback: &[],
            switches: OFFLINE_CHECK,
            cap: None,
            staff: &[("a", false, Active, false), ("b", true, Active, false)],
            today: &[],
            expected: Membership::Members(ids(&["b"])),
        },
        Case {
            name: "the daily limit drops staff at the limit, not below it",
            members: &["a", "b"],
            fallback: &[],
            switches: DAILY_3,
            cap: None,
            staff: &[("a", true, Active, false), ("b", true, Active, false)],
            today: &[("a", 3, 3), ("b", 2, 9)],
            expected: Membership::Members(ids(&["b"])),
        },
        Case {
            name: "adds on other codes do not count toward a code's daily limit",
            members: &["a"],
            fallback: &[],
            switches: DAILY_3,
            cap: None,
            staff: &[("a", true, Active, false)],
            today: &[("a", 0, 50)],
            expected: Membership::Members(ids(&["a"])),
        },
        Case {
            name: "the company cap counts adds on every code",
            members: &["a", "b"],
            fallback: &[],
            switches: NO_SWITCHES,
            cap: Some(10),
            staff: &[("a", true, Active, false), ("b", true, Active, false)],
            today: &[("a", 1, 10), ("b", 9, 9)],
            expected: Membership::Members(ids(&["b"])),
        },
        Case {
            name: "resigned, disabled, rejected and unknown staff are never eligible",
            members: &["gone", "off", "bad", "ghost", "ok"],
            fallback: &[],
            switches: NO_SWITCHES,
            cap: None,
            staff: &[
                ("gone", true, Resigned, false),
                ("off", true, Disabled, false),
                ("bad", true, Active, true),
                ("ok", true, Active, false),
            ],
            today: &[],
            expected: Membership::Members(ids(&["ok"])),
        },
        Case {
            name: "nobody eligible pushes the usable fallback staff",
            members: &["a"],
            fallback: &["f1", "gone", "f2"],
            switches: ALL,
            cap: None,
            staff: &[
                ("a", false, Active, false),
                ("f1", false, Active, false),
                ("gone", true, Resigned, false),
                ("f2", true, Active, false),
            ],
            today: &[],
            expected: Membership::Fallback(ids(&["f1", "f2"])),
        },
        Case {
            name: "nobody eligible and no usable fallback is starved, never an empty list",
            members: &["a", "b"],
            fallback: &["gone"],
            switches: ALL,
            cap: Some(5),
            staff: &[
                ("a", true, Active, false),
                ("b", false, Active, false),
                ("gone", true, Resigned, false),
            ],
            today: &[("a", 3, 3)],
            expected: Membership::Starved,
        },
        Case {
            name: "a member listed twice appears once",
            members: &["a", "b", "a"],
            fallback: &[],
            switches: NO_SWITCHES,
            cap: None,
            staff: &[("a", true, Active, false), ("b", true, Active, false)],
            today: &[],
            expected: Membership::Members(ids(&["a", "b"])),
        },
    ]
}

fn facts_of(
    case: &Case,
) -> (
    CodeConfig,
    HashMap<StaffId, StaffFacts>,
    HashMap<StaffId, AddCounts>,
) {
    let code = CodeConfig {
        family: Family::Native,
        members: ids(case.members),
        departments: vec![],
        fallback: ids(case.fallback),
        switches: case.switches,
    };
    let staff = case
        .staff
        .iter()
        .map(|(s, online, employment, rejected)| {
            (
                id(s),
                StaffFacts {
                    online: *online,
                    employment: *employment,
                    rejected_by_wecom: *rejected,
                    schedule: None,
                },
            )
        })
        .collect();
    let today = case
        .today
        .iter()
        .map(|(s, on_code, all_codes)| {
            (
                id(s),
                AddCounts {
                    on_code: *on_code,
                    all_codes: *all_codes,
                    on_code_total: 0,
                },
            )
        })
        .collect();
    (code, staff, today)
}

#[test]
fn recompute_follows_the_membership_rules() {
    for case in cases() {
        let (code, staff, today) = facts_of(&case);
        let facts = Facts {
            code: &code,
            staff: &staff,
            adds: &today,
            departments: &HashMap::new(),
            now: now(),
            tenant: TenantRules {
                company_daily_cap: case.cap,
            },
        };
        assert_eq!(recompute(&facts), case.expected, "{}", case.name);
    }
}

#[test]
fn at_most_one_hundred_users_are_listed() {
    let members: Vec<StaffId> = (0..150).map(|i| id(&format!("u{i}"))).collect();
    let staff = members
        .iter()
        .map(|m| (m.clone(), StaffFacts::ACTIVE_ONLINE))
        .collect();
    let code = CodeConfig {
        family: Family::Native,
        members: members.clone(),
        departments: vec![],
        fallback: vec![],
        switches: Switches::default(),
    };
    let facts = Facts {
        code: &code,
        staff: &staff,
        adds: &HashMap::new(),
        departments: &HashMap::new(),
        now: now(),
        tenant: TenantRules::default(),
    };
    assert_eq!(
        recompute(&facts),
        Membership::Members(members[..100].to_vec())
    );
    let over: Vec<_> = assess(&facts)
        .into_iter()
        .filter(|(_, e)| *e == Some(Exclusion::OverWeComCap))
        .collect();
    assert_eq!(over.len(), 50);
}

#[test]
fn assess_names_the_reason_for_each_exclusion() {
    let case = &cases()[6];
    let (code, staff, today) = facts_of(case);
    let facts = Facts {
        code: &code,
        staff: &staff,
        adds: &today,
        departments: &HashMap::new(),
        now: now(),
        tenant: TenantRules::default(),
    };
    let reasons: Vec<Option<Exclusion>> = assess(&facts).into_iter().map(|(_, e)| e).collect();
    assert_eq!(
        reasons,
        [
            Some(Exclusion::Resigned),
            Some(Exclusion::Disabled),
            Some(Exclusion::RejectedByWeCom),
            Some(Exclusion::UnknownStaff),
            None
        ]
    );
}

#[test]
fn staff_ids_accept_wecom_userids_only() {
    assert!(StaffId::parse("zhang.san@corp-1_x").is_ok());
    for bad in ["", "a b", "a#b", "张三", &"a".repeat(65)] {
        assert!(StaffId::parse(bad).is_err(), "{bad:?}");
    }
}
