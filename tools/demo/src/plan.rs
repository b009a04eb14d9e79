//! The campaign's cast, drawn from the seed: staff, codes and their members, which codes have
//! a daily limit or a fallback, who goes offline and when, who resigns, whose shift ends or
//! starts during the run, and the "hubs" who sit on many codes (the company cap's fan-out).
//!
//! Besides the campaign's codes there are a few "quiet" codes the campaign never scans: their
//! members are the staff with a shift edge and one "steady" staff member who sits on nothing
//! else, so no event of the run touches them and only the schedule tick can change them.

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use std::collections::HashMap;

#[derive(Debug, Clone)]
pub struct Settings {
    pub seed: u64,
    pub staff: usize,
    pub codes: usize,
    pub limited_codes: usize,
    pub daily_limit: u32,
    pub limited_weight: usize,
    pub fallback_codes: usize,
    /// Codes with an add limit (adds through the code, ever), among those with a fallback
    /// and no daily limit.
    pub add_limited_codes: usize,
    pub add_limit: u32,
    pub offline: usize,
    /// Staff who resign (WeCom's `delete_user`) during the campaign.
    pub resign: usize,
    /// Staff whose shift ends during the run, and staff whose shift starts then.
    pub shift_ends: usize,
    pub shift_starts: usize,
    /// Staff seated on `hub_codes` codes more than the others.
    pub hubs: usize,
    pub hub_codes: usize,
    /// Codes outside the campaign, listing the staff with a shift edge and a steady member.
    pub quiet_codes: usize,
}

#[derive(Debug, Clone)]
pub struct CodePlan {
    pub id: String,
    pub members: Vec<String>,
    pub fallback: Vec<String>,
    pub daily_limit: Option<u32>,
    pub add_limit: Option<u32>,
    /// How often the code appears in the campaign's list (the sandbox draws uniformly).
    pub weight: usize,
}

#[derive(Debug, Clone)]
pub struct OfflineFlip {
    pub staff: String,
    /// Flip once this fraction of the campaign's scans has started.
    pub at_fraction: f64,
}

#[derive(Debug, Clone)]
pub struct Plan {
    pub staff: Vec<String>,
    pub codes: Vec<CodePlan>,
    pub offline: Vec<OfflineFlip>,
    /// Resign once this fraction of the scans has started (same shape as an offline flip).
    pub resign: Vec<OfflineFlip>,
    pub shift_ends: Vec<String>,
    pub shift_starts: Vec<String>,
    pub hubs: Vec<String>,
    /// The member of the quiet codes who is on no campaign code (keeps their lists non-empty).
    pub steady: Vec<String>,
}

/// Staff kept as fallback: never taken offline and never members of a code they back up, so
/// a scan routed to them by the fallback rule is never mistaken for a wrong route.
const FALLBACK_STAFF: usize = 2;

impl Plan {
    pub fn draw(settings: &Settings) -> Plan {
        let mut rng = StdRng::seed_from_u64(settings.seed);
        let staff: Vec<String> = (1..=settings.staff)
            .map(|i| format!("staff{i:02}"))
            .collect();
        let mut shuffled = staff.clone();
        shuffled.shuffle(&mut rng);
        let backups: Vec<String> = shuffled.iter().take(FALLBACK_STAFF).cloned().collect();
        // Every role goes to different staff, so each effect is seen on its own.
        let mut cast = shuffled.iter().skip(FALLBACK_STAFF).cloned();
        let mut take = |n: usize| cast.by_ref().take(n).collect::<Vec<String>>();
        let offline_staff = take(settings.offline);
        let resign = take(settings.resign)
            .into_iter()
            .map(|staff| OfflineFlip {
                staff,
                at_fraction: 0.5,
            })
            .collect();
        let shift_ends = take(settings.shift_ends);
        let shift_starts = take(settings.shift_starts);
        let hubs = take(settings.hubs);
        let steady = take(usize::from(settings.quiet_codes > 0));
        let offline: Vec<OfflineFlip> = offline_staff
            .iter()
            .enumerate()
            .map(|(i, staff)| OfflineFlip {
                staff: staff.clone(),
                // Spread over the middle of the campaign: 25% .. 65% of the scans started.
                at_fraction: if settings.offline > 1 {
                    0.25 + 0.4 * i as f64 / (settings.offline - 1) as f64
                } else {
                    0.4
                },
            })
            .collect();

        // Members: 4 to 6 per code, always from the staff on the fewest codes so far (ties
        // broken at random), so everybody sits on several codes.
        let mut seats: HashMap<String, usize> = staff.iter().map(|s| (s.clone(), 0)).collect();
        let mut codes = Vec::with_capacity(settings.codes);
        for i in 0..settings.codes {
            let limited = i < settings.limited_codes;
            let has_fallback = limited || i < settings.limited_codes + settings.fallback_codes;
            let wanted = rng.gen_range(4..=6usize);
            let mut candidates: Vec<String> = staff
                .iter()
                .filter(|s| !(steady.contains(s) || has_fallback && backups.contains(s)))
                .cloned()
                .collect();
            candidates.shuffle(&mut rng);
            candidates.sort_by_key(|s| seats[s]);
            let mut members: Vec<String> = candidates.into_iter().take(wanted).collect();
            members.sort();
            for member in &members {
                *seats.entry(member.clone()).or_default() += 1;
            }
            codes.push(CodePlan {
                id: format!("code-{i:02}"),
                members,
                fallback: if has_fallback {
                    backups.clone()
                } else {
                    Vec::new()
                },
                daily_limit: limited.then_some(settings.daily_limit),
                add_limit: (i >= settings.limited_codes
                    && i < settings.limited_codes
                        + settings.add_limited_codes.min(settings.fallback_codes))
                .then_some(settings.add_limit),
                weight: if limited {
                    settings.limited_weight.max(1)
                } else {
                    1
                },
            });
        }
        // Hubs take a seat on `hub_codes` more codes (never one they back up).
        for hub in &hubs {
            let mut open: Vec<usize> = (0..codes.len())
                .filter(|&i| !codes[i].members.contains(hub) && !codes[i].fallback.contains(hub))
                .collect();
            open.shuffle(&mut rng);
            for i in open.into_iter().take(settings.hub_codes) {
                codes[i].members.push(hub.clone());
                codes[i].members.sort();
            }
        }
        // Which codes are limited or backed up should not depend on their position.
        codes.shuffle(&mut rng);
        let mut quiet_members: Vec<String> = shift_ends
            .iter()
            .chain(&shift_starts)
            .chain(&steady)
            .cloned()
            .collect();
        quiet_members.sort();
        for i in 0..settings.quiet_codes {
            codes.push(CodePlan {
                id: format!("quiet-{i}"),
                members: quiet_members.clone(),
                fallback: Vec::new(),
                daily_limit: None,
                add_limit: None,
                weight: 0,
            });
        }
        Plan {
            staff,
            codes,
            offline,
            resign,
            shift_ends,
            shift_starts,
            hubs,
            steady,
        }
    }

    /// Codes the campaign never scans (weight 0).
    pub fn quiet(&self) -> impl Iterator<Item = &CodePlan> {
        self.codes.iter().filter(|c| c.weight == 0)
    }

    pub fn code(&self, id: &str) -> Option<&CodePlan> {
        self.codes.iter().find(|c| c.id == id)
    }

    /// The codes `staff` sits on, as a member or as a fallback: the codes a company-cap
    /// crossing or a resignation must reach.
    pub fn codes_of(&self, staff: &str) -> Vec<&CodePlan> {
        self.codes
            .iter()
            .filter(|c| c.members.iter().chain(&c.fallback).any(|s| s == staff))
            .collect()
    }

    /// The codes `staff` is a member of.
    pub fn member_of(&self, staff: &str) -> Vec<&CodePlan> {
        self.codes
            .iter()
            .filter(|c| c.members.iter().any(|s| s == staff))
            .collect()
    }

    /// Codes each staff member sits on as a member.
    pub fn seats(&self) -> HashMap<&str, usize> {
        let mut seats: HashMap<&str, usize> = self.staff.iter().map(|s| (s.as_str(), 0)).collect();
        for code in &self.codes {
            for member in &code.members {
                *seats.entry(member.as_str()).or_default() += 1;
            }
        }
        seats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> Settings {
        Settings {
            seed: 7,
            staff: 24,
            codes: 50,
            limited_codes: 10,
            daily_limit: 15,
            limited_weight: 2,
            fallback_codes: 5,
            add_limited_codes: 3,
            add_limit: 8,
            offline: 3,
            resign: 1,
            shift_ends: 2,
            shift_starts: 1,
            hubs: 2,
            hub_codes: 8,
            quiet_codes: 3,
        }
    }

    #[test]
    fn the_same_seed_draws_the_same_plan() {
        let (a, b) = (Plan::draw(&settings()), Plan::draw(&settings()));
        assert_eq!(
            a.codes.iter().map(|c| &c.members).collect::<Vec<_>>(),
            b.codes.iter().map(|c| &c.members).collect::<Vec<_>>()
        );
    }

    #[test]
    fn everybody_sits_on_several_codes_and_backups_never_back_up_their_own_code() {
        let plan = Plan::draw(&settings());
        let seats = plan.seats();
        assert!(
            plan.staff
                .iter()
                .filter(|s| !plan.steady.contains(s))
                .all(|s| seats[s.as_str()] >= 3),
            "{seats:?}"
        );
        for code in plan.codes.iter().filter(|c| c.weight > 0) {
            assert!((4..=8).contains(&code.members.len()));
            assert!(code.fallback.iter().all(|f| !code.members.contains(f)));
            assert!(plan
                .offline
                .iter()
                .all(|o| !code.fallback.contains(&o.staff)));
        }
        assert_eq!(
            plan.codes
                .iter()
                .filter(|c| c.daily_limit.is_some())
                .count(),
            10
        );
        assert_eq!(
            plan.codes.iter().filter(|c| !c.fallback.is_empty()).count(),
            15
        );
        let add_limited: Vec<_> = plan
            .codes
            .iter()
            .filter(|c| c.add_limit.is_some())
            .collect();
        assert_eq!(add_limited.len(), 3);
        assert!(add_limited
            .iter()
            .all(|c| c.daily_limit.is_none() && !c.fallback.is_empty()));
    }

    #[test]
    fn roles_go_to_different_staff_and_hubs_sit_on_more_codes() {
        let plan = Plan::draw(&settings());
        let mut cast: Vec<&String> = plan
            .offline
            .iter()
            .chain(&plan.resign)
            .map(|f| &f.staff)
            .chain(&plan.shift_ends)
            .chain(&plan.shift_starts)
            .chain(&plan.hubs)
            .collect();
        cast.extend(&plan.steady);
        assert_eq!(cast.len(), 3 + 1 + 2 + 1 + 2 + 1);
        cast.sort();
        cast.dedup();
        assert_eq!(cast.len(), 10, "a staff member has two roles");
        let seats = plan.seats();
        let most_others = plan
            .staff
            .iter()
            .filter(|s| !plan.hubs.contains(s))
            .map(|s| seats[s.as_str()])
            .max()
            .unwrap_or(0);
        for hub in &plan.hubs {
            assert!(seats[hub.as_str()] > most_others, "{hub}: {seats:?}");
            assert_eq!(plan.member_of(hub).len(), seats[hub.as_str()]);
        }
    }

    #[test]
    fn quiet_codes_list_only_the_staff_with_a_shift_edge_and_the_steady_member() {
        let plan = Plan::draw(&settings());
        let quiet: Vec<&CodePlan> = plan.quiet().collect();
        assert_eq!(quiet.len(), 3);
        for code in quiet {
            assert_eq!(code.members.len(), 2 + 1 + 1);
            assert!(code.daily_limit.is_none() && code.fallback.is_empty());
        }
        // The steady member sits on the quiet codes only.
        assert_eq!(plan.codes_of(&plan.steady[0]).len(), 3);
    }
}
