//! The platform a profile describes, generated from a seed: every tenant's figures (30,000 small
//! records), and each tenant's codes and staff on demand, one at a time, so no run ever holds
//! 6M codes at once. The same seed gives the same population on every machine (ChaCha8, seeded
//! per tenant, code and staff member); another seed gives another.
//!
//! The model, in short (tools/scale/README.md has it in full):
//! - a class's code counts are log-uniform between its ends, stratified (tenant k of n draws
//!   from the k-th n-quantile), so a class's total lands near its expectation whatever the seed;
//! - staff = codes x mean members per code / codes per staff (drawn from the class's range),
//!   at least one code's worth of members; staff and codes are dealt round-robin to the
//!   departments (staff j and code i to department j mod D and i mod D), and each department
//!   holds at least one code's worth of members, so a code's members (10 to 20, uniform) are
//!   distinct staff of its own department;
//! - the campaign's tenants are drawn among the classes marked `campaign`.

use crate::profile::{Profile, Range};
use chrono_tz::Tz;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

#[derive(Debug, Clone, PartialEq)]
pub struct Population {
    pub seed: u64,
    pub tenants: Vec<TenantFigures>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TenantFigures {
    /// 0-based; the simulation names the tenant from it.
    pub index: u32,
    /// Index into the profile's size classes.
    pub class: usize,
    pub codes: u32,
    pub staff: u32,
    pub departments: u32,
    /// The ends a code's member count is drawn between (uniform).
    pub members: Range,
    /// Codes one staff member sits on, on average: the fan-out of one staff change.
    pub codes_per_staff: f64,
    pub timezone: Tz,
    /// `None`: no company-wide daily cap.
    pub company_cap: Option<u32>,
    /// One of the campaign day's tenants.
    pub campaign: bool,
    /// Its share of the day's background scans (spread by codes over every tenant)...
    pub background_scan_share: f64,
    /// ...and of the campaign's (its campaign tenants', by codes; 0 for the others).
    pub campaign_scan_share: f64,
    /// Seeds the tenant's codes and staff.
    stream_seed: u64,
}

/// A code's family ([write-up]: native codes, and sequenced and quota codes on the landing page).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    Native,
    Sequenced,
    Quota,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeFigures {
    pub index: u32,
    pub department: u32,
    pub family: Family,
    /// Staff indexes of the tenant, distinct, all of the code's department.
    pub members: Vec<u32>,
    pub offline_check: bool,
    pub daily_limit: Option<u32>,
    pub add_limit: Option<u32>,
    /// Sequenced and quota codes only.
    pub round_limit: Option<u32>,
    pub fallback: Option<u32>,
    /// Created or edited within the lane policy's quiet period: on the fast lane.
    pub recently_edited: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StaffFigures {
    pub index: u32,
    pub department: u32,
    /// Index into the profile's shifts; `None`: no schedule, always on duty.
    pub shift: Option<usize>,
}

/// One size class of a population, summed.
#[derive(Debug, Clone, PartialEq)]
pub struct ClassSummary {
    pub name: String,
    pub tenants: u32,
    pub codes: u64,
    pub staff: u64,
    pub smallest_codes: u32,
    pub largest_codes: u32,
    pub largest_staff: u32,
    pub mean_codes_per_staff: f64,
    pub largest_codes_per_staff: f64,
    pub campaign_tenants: u32,
    pub scan_share: f64,
}

impl Population {
    pub fn generate(profile: &Profile, seed: u64) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut sizes: Vec<(usize, u32)> = Vec::with_capacity(profile.platform.tenants as usize);
        for (class_index, class) in profile.size_class.iter().enumerate() {
            let n = f64::from(class.tenants);
            for k in 0..class.tenants {
                let quantile = (f64::from(k) + rng.gen::<f64>()) / n;
                sizes.push((class_index, log_uniform(class.codes, quantile)));
            }
        }
        sizes.shuffle(&mut rng);

        let members = profile.code.members;
        let mean_members = members.uniform_mean();
        let mut tenants: Vec<TenantFigures> = sizes
            .into_iter()
            .zip(0u32..)
            .map(|((class_index, codes), index)| {
                let class = &profile.size_class[class_index];
                let target_per_staff = f64::from(draw(&mut rng, class.codes_per_staff));
                let staff = ((f64::from(codes) * mean_members / target_per_staff).ceil() as u32)
                    .max(members.high);
                let departments = draw(&mut rng, class.departments)
                    .min(staff / members.high)
                    .max(1);
                let company_cap = rng
                    .gen_bool(profile.staff.company_cap_share)
                    .then(|| draw(&mut rng, profile.staff.company_cap));
                TenantFigures {
                    index,
                    class: class_index,
                    codes,
                    staff,
                    departments,
                    members,
                    codes_per_staff: f64::from(codes) * mean_members / f64::from(staff),
                    timezone: pick_timezone(profile, rng.gen()),
                    company_cap,
                    campaign: false,
                    background_scan_share: 0.0,
                    campaign_scan_share: 0.0,
                    stream_seed: rng.gen(),
                }
            })
            .collect();

        let mut eligible: Vec<usize> = tenants
            .iter()
            .filter(|t| profile.size_class[t.class].campaign)
            .map(|t| t.index as usize)
            .collect();
        eligible.shuffle(&mut rng);
        for &i in eligible.iter().take(profile.campaign.tenants as usize) {
            tenants[i].campaign = true;
        }
        let all_codes: f64 = tenants.iter().map(|t| f64::from(t.codes)).sum();
        let campaign_codes: f64 = tenants
            .iter()
            .filter(|t| t.campaign)
            .map(|t| f64::from(t.codes))
            .sum();
        for tenant in &mut tenants {
            let codes = f64::from(tenant.codes);
            tenant.background_scan_share = codes / all_codes;
            if tenant.campaign {
                tenant.campaign_scan_share = codes / campaign_codes;
            }
        }
        Self { seed, tenants }
    }

    /// The first `keep` tenants only (a small scenario), their shares of the day unchanged:
    /// they see the scans they would see on the whole platform.
    pub fn keep_first(mut self, keep: usize) -> Self {
        self.tenants.truncate(keep);
        self
    }

    pub fn total_codes(&self) -> u64 {
        self.tenants.iter().map(|t| u64::from(t.codes)).sum()
    }

    pub fn total_staff(&self) -> u64 {
        self.tenants.iter().map(|t| u64::from(t.staff)).sum()
    }

    pub fn classes(&self, profile: &Profile) -> Vec<ClassSummary> {
        profile
            .size_class
            .iter()
            .enumerate()
            .map(|(class_index, class)| {
                let members: Vec<&TenantFigures> = self
                    .tenants
                    .iter()
                    .filter(|t| t.class == class_index)
                    .collect();
                let codes: u64 = members.iter().map(|t| u64::from(t.codes)).sum();
                let staff: u64 = members.iter().map(|t| u64::from(t.staff)).sum();
                ClassSummary {
                    name: class.name.clone(),
                    tenants: u32::try_from(members.len()).unwrap_or(u32::MAX),
                    codes,
                    staff,
                    smallest_codes: members.iter().map(|t| t.codes).min().unwrap_or(0),
                    largest_codes: members.iter().map(|t| t.codes).max().unwrap_or(0),
                    largest_staff: members.iter().map(|t| t.staff).max().unwrap_or(0),
                    mean_codes_per_staff: if staff == 0 {
                        0.0
                    } else {
                        codes as f64 * profile.code.members.uniform_mean() / staff as f64
                    },
                    largest_codes_per_staff: members
                        .iter()
                        .map(|t| t.codes_per_staff)
                        .fold(0.0, f64::max),
                    campaign_tenants: u32::try_from(members.iter().filter(|t| t.campaign).count())
                        .unwrap_or(u32::MAX),
                    scan_share: members.iter().map(|t| t.scan_share(profile)).sum(),
                }
            })
            .collect()
    }
}

/// The campaign's share of the day's scans: none without campaign tenants.
pub fn campaign_share_of_day(profile: &Profile) -> f64 {
    if profile.campaign.tenants == 0 {
        0.0
    } else {
        profile.campaign.share_of_day_scans
    }
}

/// Streams of one tenant, kept apart so a code's draw never depends on a staff member's.
const CODE_STREAM: u64 = 1;
const STAFF_STREAM: u64 = 2;

impl TenantFigures {
    /// One tenant of the given shape, outside any population (the capacity planner's
    /// synthetic tenant): its codes and staff are drawn exactly as a generated tenant's are,
    /// from `seed`. Departments are kept to at least one code's worth of members each, as
    /// `Population::generate` keeps them.
    pub fn synthetic(codes: u32, staff: u32, departments: u32, members: Range, seed: u64) -> Self {
        let staff = staff.max(members.high);
        let departments = departments.min(staff / members.high).max(1);
        Self {
            index: 0,
            class: 0,
            codes,
            staff,
            departments,
            members,
            codes_per_staff: f64::from(codes) * members.uniform_mean() / f64::from(staff),
            timezone: Tz::Asia__Shanghai,
            company_cap: None,
            campaign: false,
            background_scan_share: 0.0,
            campaign_scan_share: 0.0,
            stream_seed: mix(seed),
        }
    }

    /// Its share of all the day's scans (every tenant's shares add up to one).
    pub fn scan_share(&self, profile: &Profile) -> f64 {
        let to_campaign = campaign_share_of_day(profile);
        (1.0 - to_campaign) * self.background_scan_share + to_campaign * self.campaign_scan_share
    }

    /// Code `index` (0 to `codes - 1`) of this tenant, the same every time it is asked for.
    pub fn code(&self, profile: &Profile, index: u32) -> CodeFigures {
        let mut rng = self.stream(CODE_STREAM, index);
        let shape = &profile.code;
        let department = index % self.departments;
        let in_department = self.department_size(department);
        let count = draw(&mut rng, self.members).min(in_department);
        let mut members: Vec<u32> =
            rand::seq::index::sample(&mut rng, in_department as usize, count as usize)
                .into_iter()
                .map(|position| department + position as u32 * self.departments)
                .collect();
        members.sort_unstable();
        let roll: f64 = rng.gen();
        let family = if roll < shape.native_share {
            Family::Native
        } else if roll < shape.native_share + shape.sequenced_share {
            Family::Sequenced
        } else {
            Family::Quota
        };
        let daily_limit = rng
            .gen_bool(shape.daily_limit_share)
            .then(|| draw(&mut rng, shape.daily_limit));
        let add_limit = rng
            .gen_bool(shape.add_limit_share)
            .then(|| draw(&mut rng, shape.add_limit));
        let round_limit = (family != Family::Native).then(|| draw(&mut rng, shape.round_limit));
        let fallback = rng
            .gen_bool(shape.fallback_share)
            .then(|| department + rng.gen_range(0..in_department) * self.departments);
        CodeFigures {
            index,
            department,
            family,
            members,
            offline_check: rng.gen_bool(shape.offline_check_share),
            daily_limit,
            add_limit,
            round_limit,
            fallback,
            recently_edited: rng.gen_bool(shape.edited_within_quiet_period_share),
        }
    }

    /// Staff member `index` (0 to `staff - 1`) of this tenant.
    pub fn staff_member(&self, profile: &Profile, index: u32) -> StaffFigures {
        let mut rng = self.stream(STAFF_STREAM, index);
        let roll: f64 = rng.gen();
        let mut cumulative = 0.0;
        let shift = profile.shift.iter().position(|s| {
            cumulative += s.share;
            roll < cumulative
        });
        StaffFigures {
            index,
            department: index % self.departments,
            shift,
        }
    }

    /// Staff of department `d`: indexes d, d + D, d + 2D... below `staff`.
    fn department_size(&self, department: u32) -> u32 {
        (self.staff - department).div_ceil(self.departments)
    }

    fn stream(&self, stream: u64, index: u32) -> ChaCha8Rng {
        ChaCha8Rng::seed_from_u64(mix(self.stream_seed ^ mix(stream << 32 | u64::from(index))))
    }
}

/// SplitMix64's finaliser: nearby inputs (code 7 and code 8) give unrelated seeds.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn draw(rng: &mut ChaCha8Rng, range: Range) -> u32 {
    rng.gen_range(range.low..=range.high)
}

/// The `quantile` of a log-uniform distribution over the range, rounded.
fn log_uniform(range: Range, quantile: f64) -> u32 {
    let (low, high) = (f64::from(range.low), f64::from(range.high));
    let value = low * (high / low).powf(quantile.clamp(0.0, 1.0));
    (value.round() as u32).clamp(range.low, range.high)
}

fn pick_timezone(profile: &Profile, roll: f64) -> Tz {
    let mut cumulative = 0.0;
    for zone in &profile.timezone {
        cumulative += zone.share;
        if roll < cumulative {
            return zone.name;
        }
    }
    // Shares add up to one within the profile's slack; a roll in the slack takes the last.
    profile
        .timezone
        .last()
        .map_or(Tz::Asia__Shanghai, |z| z.name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn profile() -> Profile {
        Profile::load_default().expect("profile.toml is valid")
    }

    #[test]
    fn the_totals_land_within_one_percent_of_the_profiles_expectation() {
        let profile = profile();
        for seed in [1, 2, 3] {
            let population = Population::generate(&profile, seed);
            assert_eq!(population.tenants.len(), 30_000);
            let codes = population.total_codes() as f64;
            let off = (codes / profile.expected_codes() - 1.0).abs();
            assert!(
                off < 0.01,
                "seed {seed}: {codes} codes, {:.3}% off",
                off * 100.0
            );
            let from_platform = (codes / profile.platform.codes as f64 - 1.0).abs() * 100.0;
            assert!(
                from_platform < profile.platform.codes_tolerance_percent,
                "{from_platform}"
            );
        }
    }

    #[test]
    fn the_same_seed_gives_the_same_population_and_another_seed_another() {
        let profile = profile();
        let first = Population::generate(&profile, 30);
        let again = Population::generate(&profile, 30);
        let other = Population::generate(&profile, 31);
        assert_eq!(first, again);
        assert_ne!(first.tenants, other.tenants);
        let largest = |p: &Population| {
            p.tenants
                .iter()
                .max_by_key(|t| t.codes)
                .cloned()
                .expect("tenants")
        };
        let (a, b) = (largest(&first), largest(&again));
        assert_eq!(a.code(&profile, 12_345), b.code(&profile, 12_345));
        assert_eq!(a.staff_member(&profile, 7), b.staff_member(&profile, 7));
        assert_ne!(
            a.code(&profile, 12_345),
            largest(&other).code(&profile, 12_345)
        );
    }

    #[test]
    fn the_largest_tenants_hold_100k_to_200k_codes_and_up_to_about_2000_staff_on_1500_codes_each() {
        let profile = profile();
        let population = Population::generate(&profile, 7);
        let giants = &population.classes(&profile)[0];
        assert_eq!(giants.tenants, 10);
        assert!(
            giants.smallest_codes >= 100_000 && giants.largest_codes <= 200_000,
            "{giants:?}"
        );
        assert!(giants.largest_staff <= 2_500, "{giants:?}");
        assert!(giants.largest_codes_per_staff <= 1_500.0, "{giants:?}");
        assert!(giants.mean_codes_per_staff >= 1_200.0, "{giants:?}");
    }

    #[test]
    fn a_tenants_codes_streamed_one_by_one_seat_each_staff_member_on_its_mean_share() {
        let profile = profile();
        let population = Population::generate(&profile, 7);
        let tenant = population
            .tenants
            .iter()
            .filter(|t| profile.size_class[t.class].name == "large")
            .max_by_key(|t| t.codes)
            .expect("a large tenant");
        let mut seats = vec![0u32; tenant.staff as usize];
        let mut members_total = 0u64;
        for i in 0..tenant.codes {
            let code = tenant.code(&profile, i);
            assert!((10..=20).contains(&code.members.len()), "{code:?}");
            let mut distinct = code.members.clone();
            distinct.dedup();
            assert_eq!(distinct.len(), code.members.len(), "{code:?}");
            for &m in &code.members {
                assert_eq!(m % tenant.departments, code.department, "{code:?}");
                seats[m as usize] += 1;
            }
            members_total += code.members.len() as u64;
        }
        let mean_members = members_total as f64 / f64::from(tenant.codes);
        assert!((mean_members - 15.0).abs() < 0.2, "{mean_members}");
        let mean_seats = seats.iter().map(|&s| f64::from(s)).sum::<f64>() / f64::from(tenant.staff);
        assert!(
            (mean_seats / tenant.codes_per_staff - 1.0).abs() < 0.02,
            "{mean_seats} vs {}",
            tenant.codes_per_staff
        );
        let busiest = f64::from(*seats.iter().max().unwrap_or(&0));
        assert!(
            busiest < tenant.codes_per_staff * 1.3,
            "{busiest} vs {}",
            tenant.codes_per_staff
        );
    }

    #[test]
    fn the_campaign_tenants_are_heavy_and_every_tenants_scan_share_adds_up_to_one() {
        let profile = profile();
        let population = Population::generate(&profile, 7);
        let campaign: Vec<&TenantFigures> =
            population.tenants.iter().filter(|t| t.campaign).collect();
        assert_eq!(campaign.len(), 6);
        assert!(campaign
            .iter()
            .all(|t| profile.size_class[t.class].campaign));
        let total: f64 = population
            .tenants
            .iter()
            .map(|t| t.scan_share(&profile))
            .sum();
        assert!((total - 1.0).abs() < 1e-9, "{total}");
        let campaign_shares: f64 = campaign.iter().map(|t| t.campaign_scan_share).sum();
        assert!((campaign_shares - 1.0).abs() < 1e-9, "{campaign_shares}");
        let to_campaign: f64 = campaign.iter().map(|t| t.scan_share(&profile)).sum();
        assert!(
            to_campaign > profile.campaign.share_of_day_scans,
            "{to_campaign}"
        );
    }

    #[test]
    fn most_tenants_keep_shanghai_time_and_most_staff_a_shift() {
        let profile = profile();
        let population = Population::generate(&profile, 7);
        let mut zones: BTreeMap<String, u32> = BTreeMap::new();
        for t in &population.tenants {
            *zones.entry(t.timezone.name().to_owned()).or_default() += 1;
        }
        let shanghai = f64::from(zones["Asia/Shanghai"]) / 30_000.0;
        assert!((shanghai - 0.92).abs() < 0.01, "{zones:?}");
        let largest = population
            .tenants
            .iter()
            .max_by_key(|t| t.staff)
            .expect("tenants");
        let on_shift = (0..largest.staff)
            .filter(|&j| largest.staff_member(&profile, j).shift.is_some())
            .count() as f64
            / f64::from(largest.staff);
        // The shipped shifts' shares add up to 0.8.
        assert!((on_shift - 0.8).abs() < 0.05, "{on_shift}");
    }
}
