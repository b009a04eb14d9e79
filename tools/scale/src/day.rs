//! The campaign day's scans over time: how many scans per second reach each tenant at any
//! instant, from the profile and the population. The simulation draws its scan arrivals from
//! these rates.
//!
//! Two parts. The background (the day's scans not the campaign's) arrives evenly over the
//! active hours in each tenant's own timezone, split among tenants by codes. The campaign's
//! scans arrive in its spikes (triangular, the peak at the middle, every campaign tenant at the
//! same instant, times in the campaign's zone) and the rest of them evenly over the active
//! hours in that zone, split among the campaign tenants by codes.

use crate::population::{campaign_share_of_day, Population, TenantFigures};
use crate::profile::Profile;
use chrono::{DateTime, NaiveDate, TimeZone, Timelike, Utc};
use chrono_tz::Tz;

#[derive(Debug, Clone)]
pub struct DayCurve {
    campaign_zone: Tz,
    /// Seconds of the local day when scans arrive outside the spikes: `[from, until)`.
    active: (u32, u32),
    /// Background scans per second, all tenants together, during active hours.
    background_rate: f64,
    /// Campaign scans per second outside the spikes, during active hours.
    campaign_base_rate: f64,
    /// `(start second, length in seconds)` in the campaign's zone.
    spikes: Vec<(u32, u32)>,
    peak_rate: f64,
    /// The background's share by timezone (the platform's rate without summing 30,000 tenants).
    background_by_zone: Vec<(Tz, f64)>,
}

impl DayCurve {
    pub fn new(profile: &Profile, population: &Population) -> Self {
        let active = (
            u32::from(profile.scans.active_from.minute_of_day) * 60,
            u32::from(profile.scans.active_until.minute_of_day) * 60,
        );
        let active_seconds = f64::from(active.1 - active.0);
        let to_campaign = campaign_share_of_day(profile);
        let day = profile.scans.day as f64;
        let peak_rate = f64::from(profile.campaign.peak_scans_per_second);
        let spikes: Vec<(u32, u32)> = profile
            .campaign
            .spikes
            .iter()
            .map(|s| (u32::from(s.start.minute_of_day) * 60, s.minutes * 60))
            .collect();
        let in_spikes: f64 = spikes
            .iter()
            .map(|(_, len)| peak_rate * f64::from(*len) / 2.0)
            .sum();
        let (campaign_base_rate, peak_rate) = if to_campaign > 0.0 {
            // The profile refuses spikes carrying more than the campaign's scans.
            (
                ((day * to_campaign - in_spikes) / active_seconds).max(0.0),
                peak_rate,
            )
        } else {
            (0.0, 0.0)
        };
        let mut background_by_zone: Vec<(Tz, f64)> = Vec::new();
        for tenant in &population.tenants {
            match background_by_zone
                .iter_mut()
                .find(|(z, _)| *z == tenant.timezone)
            {
                Some((_, share)) => *share += tenant.background_scan_share,
                None => background_by_zone.push((tenant.timezone, tenant.background_scan_share)),
            }
        }
        Self {
            campaign_zone: profile.campaign.timezone,
            active,
            background_rate: day * (1.0 - to_campaign) / active_seconds,
            campaign_base_rate,
            spikes,
            peak_rate,
            background_by_zone,
        }
    }

    /// When the campaign's day `date` starts (midnight in the campaign's zone).
    pub fn day_start(&self, date: NaiveDate) -> DateTime<Utc> {
        let midnight = date.and_hms_opt(0, 0, 0).unwrap_or_default();
        self.campaign_zone
            .from_local_datetime(&midnight)
            .earliest()
            .map_or_else(
                || Utc.from_utc_datetime(&midnight),
                |t| t.with_timezone(&Utc),
            )
    }

    /// All campaign tenants' scans per second at `local_second` of the campaign zone's day.
    pub fn campaign_rate(&self, local_second: u32) -> f64 {
        let base = if self.is_active(local_second) {
            self.campaign_base_rate
        } else {
            0.0
        };
        let spikes: f64 = self
            .spikes
            .iter()
            .map(|&(start, length)| {
                let half = f64::from(length) / 2.0;
                let from_middle = (f64::from(local_second) + 0.5 - f64::from(start) - half).abs();
                if local_second >= start && local_second < start + length {
                    self.peak_rate * (1.0 - from_middle / half).max(0.0)
                } else {
                    0.0
                }
            })
            .sum();
        base + spikes
    }

    /// All tenants' background scans per second if every tenant were at `local_second`.
    pub fn background_rate(&self, local_second: u32) -> f64 {
        if self.is_active(local_second) {
            self.background_rate
        } else {
            0.0
        }
    }

    /// One tenant's scans per second at `at`.
    pub fn tenant_rate(&self, tenant: &TenantFigures, at: DateTime<Utc>) -> f64 {
        let own =
            tenant.background_scan_share * self.background_rate(local_second(tenant.timezone, at));
        let campaign = if tenant.campaign_scan_share > 0.0 {
            tenant.campaign_scan_share * self.campaign_rate(local_second(self.campaign_zone, at))
        } else {
            0.0
        };
        own + campaign
    }

    /// The whole platform's scans per second at `at`.
    pub fn platform_rate(&self, at: DateTime<Utc>) -> f64 {
        let background: f64 = self
            .background_by_zone
            .iter()
            .map(|&(zone, share)| share * self.background_rate(local_second(zone, at)))
            .sum();
        background + self.campaign_rate(local_second(self.campaign_zone, at))
    }

    fn is_active(&self, local_second: u32) -> bool {
        (self.active.0..self.active.1).contains(&local_second)
    }
}

/// Seconds since local midnight in `zone` at `at`.
pub fn local_second(zone: Tz, at: DateTime<Utc>) -> u32 {
    at.with_timezone(&zone).num_seconds_from_midnight()
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Duration;

    fn world() -> (Profile, Population, DayCurve) {
        let profile = Profile::load_default().expect("profile.toml is valid");
        let population = Population::generate(&profile, 7);
        let curve = DayCurve::new(&profile, &population);
        (profile, population, curve)
    }

    /// Singles' Day 2026: no zone of the shipped profile changes its clock within a day of it.
    fn campaign_day(curve: &DayCurve) -> DateTime<Utc> {
        curve.day_start(NaiveDate::from_ymd_opt(2026, 11, 11).expect("a date"))
    }

    #[test]
    fn the_campaign_and_the_background_carry_the_days_scans_between_them() {
        let (profile, _, curve) = world();
        let campaign: f64 = (0..86_400).map(|s| curve.campaign_rate(s)).sum();
        let background: f64 = (0..86_400).map(|s| curve.background_rate(s)).sum();
        let day = profile.scans.day as f64;
        assert!((campaign / (day * 0.7) - 1.0).abs() < 0.001, "{campaign}");
        assert!(
            (background / (day * 0.3) - 1.0).abs() < 0.001,
            "{background}"
        );
    }

    #[test]
    fn the_campaign_peaks_at_its_spikes_middle_and_sleeps_at_night() {
        let (_, _, curve) = world();
        let base = curve.campaign_rate(9 * 3_600);
        let peak = curve.campaign_rate(10 * 3_600 + 10 * 60);
        assert!((peak - base - 400.0).abs() < 1.0, "{peak} over {base}");
        assert!(curve.campaign_rate(10 * 3_600 + 5 * 60) < peak);
        assert_eq!(curve.campaign_rate(3 * 3_600), 0.0);
    }

    #[test]
    fn the_platform_spikes_to_several_hundred_scans_a_second_at_once_and_sums_to_the_day() {
        let (profile, _, curve) = world();
        let start = campaign_day(&curve);
        let rates: Vec<f64> = (0..86_400)
            .step_by(10)
            .map(|s| curve.platform_rate(start + Duration::seconds(s)))
            .collect();
        let highest = rates.iter().copied().fold(0.0, f64::max);
        assert!((400.0..450.0).contains(&highest), "{highest}");
        let scans: f64 = rates.iter().sum::<f64>() * 10.0;
        assert!(
            (scans / profile.scans.day as f64 - 1.0).abs() < 0.01,
            "{scans}"
        );
    }

    #[test]
    fn a_tenants_rate_over_the_day_adds_up_to_its_share_of_the_scans() {
        let (profile, population, curve) = world();
        let start = campaign_day(&curve);
        let campaign = population
            .tenants
            .iter()
            .find(|t| t.campaign)
            .expect("a campaign tenant");
        let elsewhere = population
            .tenants
            .iter()
            .find(|t| t.timezone == chrono_tz::Europe::Berlin)
            .expect("a tenant on Berlin time");
        for tenant in [campaign, elsewhere] {
            let scans: f64 = (0..86_400)
                .step_by(10)
                .map(|s| curve.tenant_rate(tenant, start + Duration::seconds(s)) * 10.0)
                .sum();
            let expected = tenant.scan_share(&profile) * profile.scans.day as f64;
            assert!(
                (scans / expected - 1.0).abs() < 0.01,
                "tenant {}: {scans} vs {expected}",
                tenant.index
            );
        }
    }
}
