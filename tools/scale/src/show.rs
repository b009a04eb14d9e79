//! `qrsync-scale profile`: the population a profile and seed give, and the settings read from
//! the template, as text an operator reads before a run.

use crate::day::DayCurve;
use crate::population::Population;
use crate::profile::Profile;
use crate::settings::Settings;
use std::collections::BTreeMap;
use std::fmt::Write;

pub fn population(profile: &Profile, population: &Population) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "population (seed {}): {} tenants, {} codes ({:+.1}% from the profile's {}), {} staff",
        population.seed,
        thousands(population.tenants.len() as u64),
        thousands(population.total_codes()),
        (population.total_codes() as f64 / profile.platform.codes as f64 - 1.0) * 100.0,
        thousands(profile.platform.codes),
        thousands(population.total_staff()),
    );
    let _ = writeln!(
        out,
        "  {:<8} {:>7} {:>11} {:>17} {:>10} {:>9} {:>14} {:>8} {:>10}",
        "class",
        "tenants",
        "codes",
        "codes per tenant",
        "staff",
        "largest",
        "codes/staff",
        "campaign",
        "scan share"
    );
    for class in population.classes(profile) {
        let _ = writeln!(
            out,
            "  {:<8} {:>7} {:>11} {:>17} {:>10} {:>9} {:>14} {:>8} {:>9.1}%",
            class.name,
            thousands(u64::from(class.tenants)),
            thousands(class.codes),
            format!(
                "{}-{}",
                thousands(u64::from(class.smallest_codes)),
                thousands(u64::from(class.largest_codes))
            ),
            thousands(class.staff),
            thousands(u64::from(class.largest_staff)),
            format!(
                "{:.0} (max {:.0})",
                class.mean_codes_per_staff, class.largest_codes_per_staff
            ),
            class.campaign_tenants,
            class.scan_share * 100.0,
        );
    }
    let mut zones: BTreeMap<&str, u32> = BTreeMap::new();
    for tenant in &population.tenants {
        *zones.entry(tenant.timezone.name()).or_default() += 1;
    }
    let zones: Vec<String> = zones
        .iter()
        .map(|(z, n)| format!("{z} {}", thousands(u64::from(*n))))
        .collect();
    let _ = writeln!(out, "  timezones: {}", zones.join(", "));
    let _ = writeln!(
        out,
        "  day: {} scans, {:.0}% to {} campaign tenants, spikes to {} scans/s at {} ({})",
        thousands(profile.scans.day),
        profile.campaign.share_of_day_scans * 100.0,
        profile.campaign.tenants,
        profile.campaign.peak_scans_per_second,
        profile
            .campaign
            .spikes
            .iter()
            .map(|s| format!("{} ({} min)", s.start, s.minutes))
            .collect::<Vec<_>>()
            .join(", "),
        profile.campaign.timezone.name(),
    );
    for tenant in population.tenants.iter().filter(|t| t.campaign) {
        let _ = writeln!(
            out,
            "    campaign tenant #{}: {} ({}), {} codes, {} staff, {:.0} codes per staff member, {:.1}% of the day's scans",
            tenant.index,
            profile.size_class[tenant.class].name,
            tenant.timezone.name(),
            thousands(u64::from(tenant.codes)),
            thousands(u64::from(tenant.staff)),
            tenant.codes_per_staff,
            tenant.scan_share(profile) * 100.0,
        );
    }
    out
}

/// The platform's scans per second over the campaign day, hour by hour, and its peak.
pub fn day(profile: &Profile, curve: &DayCurve, date: chrono::NaiveDate) -> String {
    let start = curve.day_start(date);
    let rates: Vec<f64> = (0..86_400)
        .map(|s| curve.platform_rate(start + chrono::Duration::seconds(s)))
        .collect();
    let (peak_second, peak) =
        rates.iter().copied().enumerate().fold(
            (0, 0.0),
            |best, (s, r)| if r > best.1 { (s, r) } else { best },
        );
    let hourly: Vec<String> = rates
        .chunks(3_600)
        .map(|hour| thousands(hour.iter().sum::<f64>().round() as u64))
        .collect();
    format!(
        "  scans on {date} ({zone}): {total} in the day, peak {peak:.0}/s at {h:02}:{m:02}; by hour: {hourly}\n",
        zone = profile.campaign.timezone.name(),
        total = thousands(rates.iter().sum::<f64>().round() as u64),
        h = peak_second / 3_600,
        m = peak_second % 3_600 / 60,
        hourly = hourly.join(" "),
    )
}

pub fn settings(settings: &Settings) -> String {
    let mut out = String::new();
    let overridden: Vec<String> = settings
        .parameters
        .values()
        .filter(|p| p.overridden)
        .map(|p| format!("{}={}", p.name, p.value.as_deref().unwrap_or("")))
        .collect();
    let _ = writeln!(
        out,
        "settings read from template.yaml ({})",
        if overridden.is_empty() {
            "defaults".to_owned()
        } else {
            format!("overridden: {}", overridden.join(", "))
        }
    );
    let _ = writeln!(out, "  queues:");
    for queue in settings.queues.values() {
        let kind = match (queue.fifo, queue.high_throughput) {
            (true, true) => "FIFO, high throughput",
            (true, false) => "FIFO",
            (false, _) => "standard",
        };
        let dead_letters = queue.redrive.as_ref().map_or_else(
            || "no dead-letter queue".to_owned(),
            |r| {
                format!(
                    "to {} after {} receives",
                    r.dead_letter_queue, r.max_receive_count
                )
            },
        );
        let reader = settings.source_of(&queue.id).map_or_else(
            || "read by no function".to_owned(),
            |(f, s)| {
                format!(
                    "read by {}.{}: batch {}, max concurrency {}, window {} s",
                    f.id,
                    s.event,
                    s.batch_size,
                    s.maximum_concurrency
                        .map_or_else(|| "-".to_owned(), |n| n.to_string()),
                    s.batching_window.as_secs()
                )
            },
        );
        let _ = writeln!(
            out,
            "    {} ({kind}): visibility {} s, delay {} s, {dead_letters}; {reader}",
            queue.id,
            queue.visibility_timeout.as_secs(),
            queue.delay.as_secs(),
        );
    }
    let _ = writeln!(out, "  functions:");
    for f in settings.functions.values() {
        let schedules: Vec<String> = f
            .schedules
            .iter()
            .map(|s| format!("every {} s", s.rate.as_secs()))
            .collect();
        let _ = writeln!(
            out,
            "    {} ({}): timeout {} s, {} MB {}, reserved concurrency {}{}{}",
            f.id,
            f.package,
            f.timeout.as_secs(),
            f.memory_mb,
            f.architecture,
            f.reserved_concurrency
                .map_or_else(|| "-".to_owned(), |n| n.to_string()),
            if f.routes.is_empty() {
                String::new()
            } else {
                format!(", {} routes", f.routes.len())
            },
            if schedules.is_empty() {
                String::new()
            } else {
                format!(", scheduled {}", schedules.join(", "))
            },
        );
    }
    let r = &settings.refresh;
    let _ = writeln!(
        out,
        "  refresh: WeCom budget {}/min and {}/h per tenant; lanes {:?}, quiet after {} s, slow interval {} s, {} fast-lane tenants; lease {} ms (a call {} ms); {} receives",
        r.budget.per_minute,
        r.budget.per_hour,
        r.lanes.switch,
        r.lanes.quiet_after_ms / 1000,
        r.lanes.slow_interval_ms / 1000,
        r.lanes.fast_tenants.len(),
        r.lease_times.duration_ms,
        r.lease_times.call_ms,
        r.max_receives,
    );
    let s = &settings.sweep.settings;
    let _ = writeln!(
        out,
        "  sweep: every {} s, {} drift reads per tenant-hour, guard at {}%, stale settle {} min; tick every {} s; fan-out gives up after {} receives",
        settings.sweep.rate.as_secs(),
        s.reads_per_tenant_hour,
        s.guard_share_percent,
        s.stale_settle_ms / 60_000,
        settings.tick.rate.as_secs(),
        settings.fan_out.max_receives,
    );
    let throttles: Vec<String> = settings
        .api_throttles
        .iter()
        .map(|t| {
            format!(
                "{} {} {}/s (burst {})",
                t.http_method, t.resource_path, t.rate_per_second, t.burst
            )
        })
        .collect();
    let _ = writeln!(
        out,
        "  callback: tenant settings cached {} s; API stage throttles: {}",
        settings.callback.tenant_cache.as_secs(),
        throttles.join(", "),
    );
    let a = &settings.account;
    let _ = writeln!(
        out,
        "  billed besides usage: alarms {}, dashboards {}, log groups with a retention {} (Lambda's own groups keep logs forever), NAT gateways {}, interface endpoint zones {}, table {}, point-in-time recovery {}",
        a.alarms,
        a.dashboards,
        a.log_groups_with_retention,
        a.nat_gateways,
        a.interface_endpoint_zones,
        if a.table_on_demand { "on demand" } else { "provisioned" },
        if a.point_in_time_recovery { "on" } else { "off" },
    );
    out
}

/// `6096934` as `6,096,934`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_are_separated_by_commas() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(6_096_934), "6,096,934");
    }

    #[test]
    fn the_printed_settings_follow_an_override() {
        let read = Settings::read_project(&[("WeComBudgetPerMinute".into(), "540".into())])
            .expect("template reads");
        let text = settings(&read);
        assert!(
            text.contains("overridden: WeComBudgetPerMinute=540"),
            "{text}"
        );
        assert!(text.contains("WeCom budget 540/min"), "{text}");
    }
}
