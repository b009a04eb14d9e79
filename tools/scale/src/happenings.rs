//! What happens to the platform, second by second, outside qrsync: customers scanning codes
//! (the background spread over every tenant by its codes, the campaign's spikes on its
//! tenants' printed codes), admins sending staff on a break and back, staff resigning and
//! moving departments. Drawn from the profile with seeded streams, so a seed gives the same
//! stretch every time: the campaign's scans from a stream of their own and everything else from
//! another, so the same seed on a quiet day (`Profile::quiet_day`) gives every tenant the same
//! happenings at the same instants, less the campaign's (what `qrsync-scale compare` needs to
//! put a tenant's staleness beside its own). The simulation turns each into what reaches qrsync (a callback,
//! an admin call); qrsync's own reactions (the tick's shift waves and midnights, refreshes,
//! sweeps) are not here: the domain decides those.

use crate::day::{local_second, DayCurve};
use crate::population::{Population, TenantFigures};
use crate::profile::Profile;
use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// A break lasts this long: the admin marks the staff member offline, then online again
/// [assumption].
pub const BREAK_MS: u64 = 30 * 60 * 1_000;

#[derive(Debug, Clone, PartialEq)]
pub enum Happening {
    /// A customer scans code `code` of tenant `tenant` (indexes into the population); `pick`,
    /// uniform in [0, 1), is WeCom's choice among the members the code lists.
    Scan { tenant: u32, code: u32, pick: f64 },
    /// An admin marks the staff member offline now and online `BREAK_MS` later.
    Break { tenant: u32, staff: u32 },
    /// The staff member leaves the company (WeCom's `delete_user`).
    Resignation { tenant: u32, staff: u32 },
    /// The staff member moves to another department (WeCom's `update_user`).
    DepartmentMove { tenant: u32, staff: u32, to: u32 },
}

/// A happening and when in its second it happens.
#[derive(Debug, Clone, PartialEq)]
pub struct Timed {
    /// Milliseconds into the second (0 to 999).
    pub after_ms: u32,
    pub happening: Happening,
}

/// Tenants weighted for one kind of draw, by cumulative weight.
struct Weighted {
    tenants: Vec<u32>,
    cumulative: Vec<f64>,
}

impl Weighted {
    fn new(tenants: impl Iterator<Item = (u32, f64)>) -> Self {
        let mut total = 0.0;
        let (tenants, cumulative) = tenants
            .filter(|(_, weight)| *weight > 0.0)
            .map(|(tenant, weight)| {
                total += weight;
                (tenant, total)
            })
            .unzip();
        Self {
            tenants,
            cumulative,
        }
    }

    fn total(&self) -> f64 {
        self.cumulative.last().copied().unwrap_or(0.0)
    }

    fn draw(&self, rng: &mut ChaCha8Rng) -> Option<u32> {
        let target = rng.gen::<f64>() * self.total();
        let at = self.cumulative.partition_point(|c| *c <= target);
        self.tenants
            .get(at.min(self.tenants.len().saturating_sub(1)))
            .copied()
    }
}

/// One timezone's tenants: weighted by background scans, and by staff.
struct Zone {
    zone: Tz,
    by_scans: Weighted,
    by_staff: Weighted,
}

pub struct Happenings {
    rng: ChaCha8Rng,
    campaign_rng: ChaCha8Rng,
    curve: DayCurve,
    campaign_zone: Tz,
    campaign: Weighted,
    zones: Vec<Zone>,
    active: (u32, u32),
    hot_code_share: f64,
    /// Per staff member per active second.
    break_rate: f64,
    resignation_rate: f64,
    move_rate: f64,
    tenants: Vec<(u32, u32, u32)>,
}

impl Happenings {
    pub fn new(profile: &Profile, population: &Population, seed: u64) -> Self {
        let active = (
            u32::from(profile.scans.active_from.minute_of_day) * 60,
            u32::from(profile.scans.active_until.minute_of_day) * 60,
        );
        let active_seconds = f64::from(active.1.saturating_sub(active.0).max(1));
        let mut zones: Vec<Tz> = population.tenants.iter().map(|t| t.timezone).collect();
        zones.sort_by_key(|z| z.name());
        zones.dedup();
        let zones = zones
            .into_iter()
            .map(|zone| {
                let of_zone = || {
                    population
                        .tenants
                        .iter()
                        .filter(move |t| t.timezone == zone)
                };
                Zone {
                    zone,
                    by_scans: Weighted::new(of_zone().map(|t| (t.index, t.background_scan_share))),
                    by_staff: Weighted::new(of_zone().map(|t| (t.index, f64::from(t.staff)))),
                }
            })
            .collect();
        let staff = &profile.staff;
        Self {
            rng: ChaCha8Rng::seed_from_u64(seed ^ 0x4841_5050_454e_494e),
            campaign_rng: ChaCha8Rng::seed_from_u64(seed ^ 0x4341_4d50_4149_474e),
            curve: DayCurve::new(profile, population),
            campaign_zone: profile.campaign.timezone,
            campaign: Weighted::new(
                population
                    .tenants
                    .iter()
                    .map(|t| (t.index, t.campaign_scan_share)),
            ),
            zones,
            active,
            hot_code_share: profile.campaign.hot_code_share,
            break_rate: staff.offline_flips_per_day / 2.0 / active_seconds,
            resignation_rate: staff.resignations_per_thousand_per_day / 1_000.0 / active_seconds,
            move_rate: staff.department_changes_per_thousand_per_day / 1_000.0 / active_seconds,
            tenants: population
                .tenants
                .iter()
                .map(|t| (t.codes, t.staff, t.departments))
                .collect(),
        }
    }

    /// Everything that happens in the second starting at `at`, in the order it happens. A
    /// Poisson process's arrivals, given how many fall in a second, are spread uniformly over
    /// it: each happening draws its instant from the stream that drew it.
    pub fn second(&mut self, at: DateTime<Utc>) -> Vec<Timed> {
        let mut happening = Vec::new();
        let campaign_rate = self
            .curve
            .campaign_rate(local_second(self.campaign_zone, at));
        for _ in 0..poisson(&mut self.campaign_rng, campaign_rate) {
            if let Some(tenant) = self.campaign.draw(&mut self.campaign_rng) {
                let codes = self.tenants[tenant as usize].0;
                let hot = ((f64::from(codes) * self.hot_code_share).ceil() as u32).clamp(1, codes);
                let code = self.campaign_rng.gen_range(0..hot);
                let pick = self.campaign_rng.gen();
                let after_ms = self.campaign_rng.gen_range(0..1_000);
                happening.push(Timed {
                    after_ms,
                    happening: Happening::Scan { tenant, code, pick },
                });
            }
        }
        for zone in 0..self.zones.len() {
            let local = local_second(self.zones[zone].zone, at);
            let scans = self.curve.background_rate(local) * self.zones[zone].by_scans.total();
            for _ in 0..poisson(&mut self.rng, scans) {
                if let Some(tenant) = self.zones[zone].by_scans.draw(&mut self.rng) {
                    let code = self
                        .rng
                        .gen_range(0..self.tenants[tenant as usize].0.max(1));
                    let pick = self.rng.gen();
                    let after_ms = self.rng.gen_range(0..1_000);
                    happening.push(Timed {
                        after_ms,
                        happening: Happening::Scan { tenant, code, pick },
                    });
                }
            }
            if !(self.active.0..self.active.1).contains(&local) {
                continue;
            }
            let staff = self.zones[zone].by_staff.total();
            for _ in 0..poisson(&mut self.rng, staff * self.break_rate) {
                if let Some((tenant, staff)) = self.staff_member(zone) {
                    let after_ms = self.rng.gen_range(0..1_000);
                    happening.push(Timed {
                        after_ms,
                        happening: Happening::Break { tenant, staff },
                    });
                }
            }
            for _ in 0..poisson(&mut self.rng, staff * self.resignation_rate) {
                if let Some((tenant, staff)) = self.staff_member(zone) {
                    let after_ms = self.rng.gen_range(0..1_000);
                    happening.push(Timed {
                        after_ms,
                        happening: Happening::Resignation { tenant, staff },
                    });
                }
            }
            for _ in 0..poisson(&mut self.rng, staff * self.move_rate) {
                if let Some((tenant, staff)) = self.staff_member(zone) {
                    let departments = self.tenants[tenant as usize].2.max(1);
                    let to = self.rng.gen_range(0..departments);
                    let after_ms = self.rng.gen_range(0..1_000);
                    happening.push(Timed {
                        after_ms,
                        happening: Happening::DepartmentMove { tenant, staff, to },
                    });
                }
            }
        }
        // Stable: two happenings of one instant keep the order they were drawn in.
        happening.sort_by_key(|timed| timed.after_ms);
        happening
    }

    fn staff_member(&mut self, zone: usize) -> Option<(u32, u32)> {
        let tenant = self.zones[zone].by_staff.draw(&mut self.rng)?;
        let staff = self.tenants[tenant as usize].1;
        (staff > 0).then(|| (tenant, self.rng.gen_range(0..staff)))
    }
}

/// A Poisson draw: the number of exponential gaps that fit in one unit of time.
fn poisson(rng: &mut ChaCha8Rng, rate: f64) -> u32 {
    if rate <= 0.0 {
        return 0;
    }
    let mut elapsed = 0.0;
    let mut count = 0;
    loop {
        elapsed += -(1.0 - rng.gen::<f64>()).ln() / rate;
        if elapsed > 1.0 {
            return count;
        }
        count += 1;
    }
}

/// The tenant figures a happening names.
pub fn tenant_of(population: &Population, tenant: u32) -> &TenantFigures {
    &population.tenants[tenant as usize]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::default_profile_path;
    use chrono::TimeZone;

    fn world() -> (Profile, Population) {
        let profile = Profile::load(&default_profile_path()).expect("the default profile loads");
        let population = Population::generate(&profile, 30);
        (profile, population)
    }

    #[test]
    fn the_same_seed_gives_the_same_stretch_and_another_seed_another() {
        let (profile, population) = world();
        let at = Utc
            .with_ymd_and_hms(2026, 11, 11, 2, 5, 0)
            .single()
            .expect("valid");
        let draw = |seed| {
            let mut happenings = Happenings::new(&profile, &population, seed);
            (0..30)
                .flat_map(|s| happenings.second(at + chrono::Duration::seconds(s)))
                .collect::<Vec<_>>()
        };
        assert_eq!(draw(1), draw(1));
        assert_ne!(draw(1), draw(2));
    }

    #[test]
    fn scans_follow_the_day_curve_within_a_few_percent_over_ten_minutes_of_a_spike() {
        let (profile, population) = world();
        let curve = DayCurve::new(&profile, &population);
        let mut happenings = Happenings::new(&profile, &population, 7);
        // 10:00 to 10:10 in Shanghai: the morning spike's first half.
        let from = Utc
            .with_ymd_and_hms(2026, 11, 11, 2, 0, 0)
            .single()
            .expect("valid");
        let (mut expected, mut scans) = (0.0, 0usize);
        for s in 0..600 {
            let at = from + chrono::Duration::seconds(s);
            expected += curve.platform_rate(at);
            scans += happenings
                .second(at)
                .iter()
                .filter(|h| matches!(h.happening, Happening::Scan { .. }))
                .count();
        }
        let off = (scans as f64 - expected).abs() / expected;
        assert!(off < 0.03, "{scans} scans against {expected:.0} expected");
    }

    #[test]
    fn a_quiet_day_gives_every_tenant_outside_the_campaign_the_same_happenings_at_the_same_instants(
    ) {
        let (profile, population) = world();
        let quiet = profile
            .clone()
            .quiet_day()
            .expect("the quiet day validates");
        let quiet_population = Population::generate(&quiet, 30);
        let campaign_tenants: std::collections::HashSet<u32> = population
            .tenants
            .iter()
            .filter(|t| t.campaign_scan_share > 0.0)
            .map(|t| t.index)
            .collect();
        assert!(!campaign_tenants.is_empty());
        // 10:00 to 10:01 in Shanghai: the morning spike has begun.
        let from = Utc
            .with_ymd_and_hms(2026, 11, 11, 2, 0, 0)
            .single()
            .expect("valid");
        let mut day = Happenings::new(&profile, &population, 30);
        let mut quiet_day = Happenings::new(&quiet, &quiet_population, 30);
        let (mut campaign_scans, mut compared) = (0, 0);
        for s in 0..60 {
            let at = from + chrono::Duration::seconds(s);
            let (on_day, on_quiet): (Vec<_>, Vec<_>) = (day.second(at), quiet_day.second(at));
            campaign_scans += on_day.len() - on_quiet.len();
            let outside = |h: &&Timed| match &h.happening {
                Happening::Scan { tenant, code, .. } => {
                    let hot = (f64::from(population.tenants[*tenant as usize].codes)
                        * profile.campaign.hot_code_share)
                        .ceil() as u32;
                    !campaign_tenants.contains(tenant) || *code >= hot
                }
                _ => true,
            };
            let kept: Vec<&Timed> = on_day.iter().filter(outside).collect();
            assert_eq!(kept, on_quiet.iter().collect::<Vec<_>>(), "at {at}");
            compared += on_quiet.len();
        }
        assert!(campaign_scans > 1_000, "{campaign_scans} campaign scans");
        assert!(compared > 50, "{compared} happenings compared");
    }

    #[test]
    fn a_seconds_happenings_are_spread_over_it_in_order() {
        let (profile, population) = world();
        let mut happenings = Happenings::new(&profile, &population, 30);
        // 10:10 in Shanghai, near the spike's peak: hundreds of scans a second.
        let at = Utc
            .with_ymd_and_hms(2026, 11, 11, 2, 10, 0)
            .single()
            .expect("valid");
        let second = happenings.second(at);
        assert!(second.len() > 100, "{} happenings", second.len());
        assert!(second.windows(2).all(|w| w[0].after_ms <= w[1].after_ms));
        let first_half = second.iter().filter(|h| h.after_ms < 500).count();
        let share = first_half as f64 / second.len() as f64;
        assert!(
            (0.4..0.6).contains(&share),
            "{first_half} of {} in the first half",
            second.len()
        );
        assert!(second.iter().all(|h| h.after_ms < 1_000));
    }

    #[test]
    fn a_poisson_draw_averages_its_rate() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let total: u32 = (0..10_000).map(|_| poisson(&mut rng, 2.5)).sum();
        assert!((24_000..26_000).contains(&total), "{total}");
        assert_eq!(poisson(&mut rng, 0.0), 0);
    }
}
