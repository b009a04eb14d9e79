//! The platform as the table and WeCom hold it when the simulated stretch begins: every
//! tenant of the population loaded into the store (profile, staff with their schedules,
//! departments, codes with their index entries, the tick's due items) and each code's
//! contact way holding the list the domain recomputes from those facts at that instant, as a
//! platform that had converged before the stretch would.
//!
//! Names are short and numbered (`t00042`, `s00017`, `c001234`, `d3`): ids are cloned into
//! every list and message, and the simulation holds millions of them.

use crate::population::{Family as DrawnFamily, Population, StaffFigures, TenantFigures};
use crate::profile::Profile;
use chrono::{NaiveTime, Weekday};
use domain::codes::StoredCode;
use domain::fakes::InMemoryStore;
use domain::ids::{CodeId, DepartmentId, StaffId, TenantId};
use domain::lanes::CodeAge;
use domain::membership::{
    recompute, CodeConfig, Facts, Family, Shift, StaffFacts, Switches, TenantRules, WeeklySchedule,
};
use domain::schedules::{plan, Minute, Subject};
use domain::tenants::{TenantProfile, Timezone};
use domain::wecom::acquisition::AcquisitionLink;
use std::collections::{BTreeSet, HashMap};

/// How long before the stretch a code not edited recently was last edited: beyond the lane
/// policy's quiet period, as most codes are in steady state.
const LONG_AGO_MS: u64 = 30 * 24 * 3_600_000;
/// A recently edited code was edited this long before the stretch.
const RECENTLY_MS: u64 = 3_600_000;

pub fn tenant_id(tenant: &TenantFigures) -> TenantId {
    TenantId::parse(&format!("t{:05}", tenant.index)).expect("a numbered tenant id is valid")
}

pub fn corp_id(tenant: &TenantFigures) -> String {
    format!("corp{:05}", tenant.index)
}

/// Fixed width, so the index's sorted entries take each new id at their end.
pub fn staff_id(index: u32) -> StaffId {
    StaffId::parse(&format!("s{index:05}")).expect("a numbered staff id is valid")
}

pub fn code_id(index: u32) -> CodeId {
    CodeId::parse(&format!("c{index:06}")).expect("a numbered code id is valid")
}

pub fn department_id(index: u32) -> DepartmentId {
    DepartmentId::parse(&format!("d{index}")).expect("a numbered department id is valid")
}

/// The contact way of a code: unique across tenants, as WeCom's config ids are, and naming
/// its code, so the measure needs no map of millions of them.
pub fn config_id(tenant: &TenantFigures, code: u32) -> String {
    config_id_of(tenant.index, code)
}

pub fn config_id_of(tenant: u32, code: u32) -> String {
    format!("cw{tenant:05}x{code:06}")
}

pub fn config_id_for(tenant: &TenantId, code: &CodeId) -> String {
    let (tenant, code) = (tenant.as_str(), code.as_str());
    format!("cw{}x{}", &tenant[1..], &code[1..])
}

/// The code a platform contact way belongs to.
pub fn code_of_config(config_id: &str) -> Option<(TenantId, CodeId)> {
    let (tenant, code) = config_id.strip_prefix("cw")?.split_once('x')?;
    Some((
        TenantId::parse(&format!("t{tenant}")).ok()?,
        CodeId::parse(&format!("c{code}")).ok()?,
    ))
}

/// The numbered ids, made once and shared by every tenant: tenants number their staff and
/// codes alike, so one tenant's `c001234` and another's are one allocation, not 6 million.
#[derive(Default)]
pub struct Names {
    staff: Vec<StaffId>,
    codes: Vec<CodeId>,
}

impl Names {
    pub fn staff(&mut self, index: u32) -> StaffId {
        numbered(&mut self.staff, index, staff_id)
    }

    pub fn code(&mut self, index: u32) -> CodeId {
        numbered(&mut self.codes, index, code_id)
    }
}

fn numbered<T: Clone>(made: &mut Vec<T>, index: u32, make: fn(u32) -> T) -> T {
    while made.len() <= index as usize {
        made.push(make(made.len() as u32));
    }
    made[index as usize].clone()
}

/// Where a code's list starts: the contact way and the users WeCom holds on it.
pub struct LoadedCode {
    pub config_id: String,
    pub users: Vec<StaffId>,
}

/// One tenant, loaded.
pub struct LoadedTenant {
    pub id: TenantId,
    pub codes: Vec<LoadedCode>,
}

/// Loads every tenant of `population` into `store` as of `now_ms`; `each` sees every code's
/// starting list (the simulated WeCom holds it).
pub fn load(
    store: &InMemoryStore,
    profile: &Profile,
    population: &Population,
    now_ms: u64,
    mut each: impl FnMut(&TenantFigures, u32, &LoadedCode),
) {
    let mut names = Names::default();
    for tenant in &population.tenants {
        let loaded = load_tenant(store, profile, tenant, now_ms, &mut names);
        for (index, code) in loaded.codes.iter().enumerate() {
            each(tenant, index as u32, code);
        }
    }
}

/// Loads one tenant: its profile, staff, departments, schedules and due items, and codes
/// whose `created_with` is the recompute of their facts at `now_ms` (what WeCom holds).
pub fn load_tenant(
    store: &InMemoryStore,
    profile: &Profile,
    tenant: &TenantFigures,
    now_ms: u64,
    names: &mut Names,
) -> LoadedTenant {
    let id = tenant_id(tenant);
    let timezone: Timezone = tenant
        .timezone
        .name()
        .parse()
        .expect("the profile's zones are IANA names");
    store.insert_profile(
        &id,
        TenantProfile {
            corp_id: corp_id(tenant),
            callback_token: SIMULATED_TOKEN.into(),
            encoding_aes_key: SIMULATED_AES_KEY.into(),
            previous_callback: None,
            corp_secret: "simulated".into(),
            timezone,
            company_daily_cap: tenant.company_cap,
        },
    );
    store.insert_tenant(&id, timezone);
    let staff: Vec<StaffId> = (0..tenant.staff).map(|index| names.staff(index)).collect();
    let mut facts_of: HashMap<StaffId, StaffFacts> = HashMap::with_capacity(staff.len());
    let mut departments: Vec<BTreeSet<StaffId>> =
        vec![BTreeSet::new(); tenant.departments as usize];
    // The tenant's shift item, as the tick leaves it: at the earliest next edge of any staff
    // member, handled through the load's moment.
    let mut next_edge: Option<Minute> = None;
    for index in 0..tenant.staff {
        let figures = tenant.staff_member(profile, index);
        let member = &staff[index as usize];
        departments[figures.department as usize].insert(member.clone());
        let mut facts = StaffFacts::ACTIVE_ONLINE;
        if let Some(schedule) = staff_schedule(profile, &figures) {
            if let Some(edge) = plan::next_shift_edge(Some(&schedule), timezone, now_ms) {
                next_edge = Some(next_edge.map_or(edge, |earliest| earliest.min(edge)));
            }
            facts.schedule = Some(schedule);
        }
        store.insert_staff(&id, member, facts.clone());
        facts_of.insert(member.clone(), facts);
    }
    if let Some(edge) = next_edge {
        store.put_due_handled(&id, Subject::Shifts, edge, now_ms);
    }
    for (index, members) in departments.into_iter().enumerate() {
        store.insert_department(&id, &department_id(index as u32), members);
    }
    store.put_due(
        &id,
        Subject::Midnight,
        plan::next_midnight(timezone, now_ms),
    );
    let (no_adds, no_departments) = (HashMap::new(), HashMap::new());
    let rules = TenantRules {
        company_daily_cap: tenant.company_cap,
    };
    let now = timezone.at(now_ms);
    let mut codes = Vec::with_capacity(tenant.codes as usize);
    let mut rotating: BTreeSet<u32> = BTreeSet::new();
    for index in 0..tenant.codes {
        let figures = tenant.code(profile, index);
        let code = names.code(index);
        if figures.family != DrawnFamily::Native {
            rotating.extend(figures.members.iter().chain(&figures.fallback));
        }
        let config = CodeConfig {
            family: match figures.family {
                DrawnFamily::Native => Family::Native,
                DrawnFamily::Sequenced => Family::Sequenced,
                DrawnFamily::Quota => Family::Quota,
            },
            members: figures
                .members
                .iter()
                .map(|m| staff[*m as usize].clone())
                .collect(),
            departments: Vec::new(),
            fallback: figures
                .fallback
                .map(|f| vec![staff[f as usize].clone()])
                .unwrap_or_default(),
            switches: Switches {
                offline_check: figures.offline_check,
                add_limit: figures.add_limit,
                daily_limit: figures.daily_limit,
                round_limit: figures.round_limit,
            },
        };
        let edited_ms = now_ms.saturating_sub(if figures.recently_edited {
            RECENTLY_MS
        } else {
            LONG_AGO_MS
        });
        let config_id = config_id(tenant, index);
        // The domain's recompute of the facts just stored (no adds yet today, no departments
        // listed), read from the loader's own copy rather than a snapshot of each code.
        let users = recompute(&Facts {
            code: &config,
            staff: &facts_of,
            adds: &no_adds,
            departments: &no_departments,
            tenant: rules,
            now,
        })
        .users()
        .map(<[StaffId]>::to_vec)
        .unwrap_or_default();
        store.insert_code(
            &id,
            &code,
            StoredCode {
                config,
                config_id: Some(config_id.clone()),
                created_with: users.clone(),
            },
            CodeAge {
                created_at_ms: edited_ms,
                updated_at_ms: edited_ms,
            },
        );
        codes.push(LoadedCode { config_id, users });
    }
    // A platform that has run a while: whoever sits on a sequenced or quota code had an
    // acquisition link created the first time they joined its rotation, and it stays until
    // they resign (`sweep`). The day's refreshes create links only for newcomers.
    for member in rotating {
        let staff_id = &staff[member as usize];
        let link_id = format!("wl{id}x{staff_id}");
        store.insert_link(
            &id,
            staff_id,
            AcquisitionLink {
                url: format!("https://work.weixin.qq.com/ca/{link_id}"),
                link_id,
            },
        );
    }
    LoadedTenant { id, codes }
}

/// A staff member on a shift works it every day of the week.
fn staff_schedule(profile: &Profile, figures: &StaffFigures) -> Option<WeeklySchedule> {
    let shift = &profile.shift[figures.shift?];
    let time = |minute: u16| {
        NaiveTime::from_hms_opt(u32::from(minute / 60), u32::from(minute % 60), 0)
            .expect("the profile's times are checked")
    };
    let (start, end) = (
        time(shift.start.minute_of_day),
        time(shift.end.minute_of_day),
    );
    Some(WeeklySchedule {
        shifts: [
            Weekday::Mon,
            Weekday::Tue,
            Weekday::Wed,
            Weekday::Thu,
            Weekday::Fri,
            Weekday::Sat,
            Weekday::Sun,
        ]
        .into_iter()
        .map(|day| Shift { day, start, end })
        .collect(),
    })
}

/// Every simulated tenant signs its callbacks with the reference vectors' token and key:
/// the crypto costs what it costs, and no tenant's secret is made up.
pub const SIMULATED_TOKEN: &str = domain::wecom::reference_vectors::V1.token;
pub const SIMULATED_AES_KEY: &str = domain::wecom::reference_vectors::V1.encoding_aes_key;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_contact_way_names_its_code_and_back() {
        let config = config_id_of(42, 1234);
        assert_eq!(config, "cw00042x001234");
        let (tenant, code) = code_of_config(&config).expect("a platform contact way");
        assert_eq!((tenant.as_str(), code.as_str()), ("t00042", "c001234"));
        assert_eq!(config_id_for(&tenant, &code), config);
        assert!(code_of_config("cw-7").is_none());
    }

    #[tokio::test]
    async fn whoever_sits_on_a_rotating_code_starts_with_a_link_and_nobody_else_does() {
        use domain::codes::CodeFacts;
        let profile = Profile::load_default().expect("profile.toml is valid");
        let population = Population::generate(&profile, 7);
        let (mut with_link, mut without) = (0, 0);
        for tenant in population.tenants.iter().filter(|t| t.codes < 60).take(20) {
            let store = InMemoryStore::default();
            let loaded = load_tenant(&store, &profile, tenant, 0, &mut Names::default());
            let figures: Vec<_> = (0..tenant.codes)
                .map(|i| tenant.code(&profile, i))
                .collect();
            let rotating: BTreeSet<StaffId> = figures
                .iter()
                .filter(|f| f.family != DrawnFamily::Native)
                .flat_map(|f| f.members.iter().chain(&f.fallback))
                .map(|m| Names::default().staff(*m))
                .collect();
            for index in 0..tenant.codes {
                let snapshot = store
                    .snapshot(&loaded.id, &Names::default().code(index), 0)
                    .await
                    .expect("store")
                    .expect("the code was loaded");
                for member in &snapshot.code.config.members {
                    let has = snapshot.links.contains_key(member);
                    assert_eq!(has, rotating.contains(member), "{member} on {index}");
                    if has {
                        with_link += 1;
                    } else {
                        without += 1;
                    }
                }
            }
        }
        assert!(with_link > 0 && without > 0, "{with_link} {without}");
    }
}
