//! The production profile (`tools/scale/profile.toml`): the platform the simulation runs a day
//! of, in a file an operator edits. Loaded into typed structs and checked whole: every number
//! within bounds, shares that must add up adding up, and the size classes' expected total
//! within the stated tolerance of the platform's codes; a refusal names the field.

use crate::services::dynamodb::{Quota, WarmThroughput};
use chrono_tz::Tz;
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// A profile the simulation refuses, naming the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("profile, {field}: {problem}")]
pub struct ProfileError {
    pub field: String,
    pub problem: String,
}

fn refuse(field: impl Into<String>, problem: impl Into<String>) -> ProfileError {
    ProfileError {
        field: field.into(),
        problem: problem.into(),
    }
}

/// The profile shipped with the crate.
pub fn default_profile_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("profile.toml")
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    pub platform: Platform,
    pub size_class: Vec<SizeClass>,
    pub code: CodeShape,
    pub staff: StaffShape,
    #[serde(default)]
    pub shift: Vec<Shift>,
    pub timezone: Vec<TimezoneShare>,
    pub scans: Scans,
    pub campaign: Campaign,
    pub dynamodb: DynamoShape,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Platform {
    pub tenants: u32,
    pub codes: u64,
    pub codes_tolerance_percent: f64,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SizeClass {
    pub name: String,
    pub tenants: u32,
    pub codes: Range,
    pub codes_per_staff: Range,
    pub departments: Range,
    pub campaign: bool,
}

/// `[low, high]`, both ends included.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(from = "[u32; 2]")]
pub struct Range {
    pub low: u32,
    pub high: u32,
}

impl From<[u32; 2]> for Range {
    fn from([low, high]: [u32; 2]) -> Self {
        Self { low, high }
    }
}

impl Range {
    /// The mean of a log-uniform draw between the ends (how a class's code counts are drawn).
    pub fn log_uniform_mean(self) -> f64 {
        let (low, high) = (f64::from(self.low), f64::from(self.high));
        if self.low == self.high {
            low
        } else {
            (high - low) / (high / low).ln()
        }
    }

    pub fn uniform_mean(self) -> f64 {
        (f64::from(self.low) + f64::from(self.high)) / 2.0
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CodeShape {
    pub members: Range,
    pub native_share: f64,
    pub sequenced_share: f64,
    pub quota_share: f64,
    pub offline_check_share: f64,
    pub daily_limit_share: f64,
    pub daily_limit: Range,
    pub add_limit_share: f64,
    pub add_limit: Range,
    pub round_limit: Range,
    pub fallback_share: f64,
    pub edited_within_quiet_period_share: f64,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StaffShape {
    pub company_cap_share: f64,
    pub company_cap: Range,
    pub offline_flips_per_day: f64,
    pub resignations_per_thousand_per_day: f64,
    pub department_changes_per_thousand_per_day: f64,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Shift {
    pub start: LocalTime,
    pub end: LocalTime,
    pub share: f64,
}

/// `HH:MM`, local to the tenant: minutes after midnight.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(try_from = "String")]
pub struct LocalTime {
    pub minute_of_day: u16,
}

impl TryFrom<String> for LocalTime {
    type Error = String;
    fn try_from(raw: String) -> Result<Self, String> {
        let bad = || format!("`{raw}` is not HH:MM (00:00 to 23:59)");
        let (h, m) = raw.split_once(':').ok_or_else(bad)?;
        let (h, m): (u16, u16) = (h.parse().map_err(|_| bad())?, m.parse().map_err(|_| bad())?);
        if h < 24 && m < 60 && raw.len() == 5 {
            Ok(Self {
                minute_of_day: h * 60 + m,
            })
        } else {
            Err(bad())
        }
    }
}

impl std::fmt::Display for LocalTime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:02}:{:02}",
            self.minute_of_day / 60,
            self.minute_of_day % 60
        )
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimezoneShare {
    #[serde(deserialize_with = "timezone")]
    pub name: Tz,
    pub share: f64,
}

fn timezone<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Tz, D::Error> {
    let raw = String::deserialize(d)?;
    raw.parse()
        .map_err(|_| serde::de::Error::custom(format!("`{raw}` is not an IANA timezone")))
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scans {
    pub day: u64,
    pub adds_per_scan: f64,
    pub active_from: LocalTime,
    pub active_until: LocalTime,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Campaign {
    pub tenants: u32,
    pub share_of_day_scans: f64,
    pub peak_scans_per_second: u32,
    pub hot_code_share: f64,
    /// The zone the spikes' times are in: every campaign tenant peaks at the same instant.
    #[serde(deserialize_with = "timezone")]
    pub timezone: Tz,
    pub spikes: Vec<Spike>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Spike {
    pub start: LocalTime,
    pub minutes: u32,
}

/// The table's and each of its global secondary indexes' warm throughput (DynamoDB Developer
/// Guide, "Understanding DynamoDB warm throughput"): the reads and writes a second each serves
/// at once, which gives its partitions (`services::dynamodb::WarmThroughput::partitions`); and
/// the account's throughput quota on each ("Quotas in Amazon DynamoDB"), the most it serves in
/// a second whatever its partitions (`services::dynamodb::Quota`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DynamoShape {
    pub table_read_units_per_second: u64,
    pub table_write_units_per_second: u64,
    /// Each index alike (`gsi1`, `gsi2`).
    pub index_read_units_per_second: u64,
    pub index_write_units_per_second: u64,
    pub table_quota_read_units_per_second: u64,
    pub table_quota_write_units_per_second: u64,
    /// Each index on its own, alike (`gsi1`, `gsi2`).
    pub index_quota_read_units_per_second: u64,
    pub index_quota_write_units_per_second: u64,
}

impl DynamoShape {
    pub fn table(&self) -> WarmThroughput {
        WarmThroughput {
            read_units_per_second: self.table_read_units_per_second,
            write_units_per_second: self.table_write_units_per_second,
        }
    }

    pub fn index(&self) -> WarmThroughput {
        WarmThroughput {
            read_units_per_second: self.index_read_units_per_second,
            write_units_per_second: self.index_write_units_per_second,
        }
    }

    pub fn table_quota(&self) -> Quota {
        Quota {
            read_units_per_second: self.table_quota_read_units_per_second,
            write_units_per_second: self.table_quota_write_units_per_second,
        }
    }

    pub fn index_quota(&self) -> Quota {
        Quota {
            read_units_per_second: self.index_quota_read_units_per_second,
            write_units_per_second: self.index_quota_write_units_per_second,
        }
    }
}

/// Shares that must add up to one may be this far off (three decimals in the file).
const SHARE_SLACK: f64 = 0.001;
/// The largest platform the simulation is built to hold (twice the production shape's codes
/// several times over; past it a run would not fit the machine).
const MAX_CODES: u64 = 50_000_000;
const MAX_TENANTS: u32 = 1_000_000;
/// The most warm throughput a profile may give the table or an index, in units a second: 25
/// times DynamoDB's default table-level quota of 40,000 (raised on request), and a thousand
/// partitions, which the simulation holds easily.
const MAX_WARM_UNITS: u64 = 1_000_000;
/// The most quota a profile may give, in units a second: as much as the most warm throughput,
/// since a quota past every warm throughput the profile can give changes nothing a run does.
const MAX_QUOTA_UNITS: u64 = MAX_WARM_UNITS;

impl Profile {
    pub fn load(path: &Path) -> Result<Self, ProfileError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| refuse(path.display().to_string(), format!("cannot be read: {e}")))?;
        Self::parse(&text)
    }

    pub fn load_default() -> Result<Self, ProfileError> {
        Self::load(&default_profile_path())
    }

    pub fn parse(text: &str) -> Result<Self, ProfileError> {
        let profile: Profile = toml::from_str(text).map_err(|e| {
            let field = e
                .span()
                .map_or_else(String::new, |span| field_at(text, span.start));
            refuse(field, e.message().to_owned())
        })?;
        profile.validate()?;
        Ok(profile)
    }

    /// The same platform on a day without the campaign: the campaign's share of the day's
    /// scans and its spikes taken out, every other tenant's scans at the rate they had (the
    /// day's scans cut to the share that was not the campaign's). The quiet day a tenant's
    /// staleness is compared with (`qrsync-scale compare`).
    pub fn quiet_day(mut self) -> Result<Self, ProfileError> {
        let kept = 1.0 - self.campaign.share_of_day_scans;
        self.scans.day = (self.scans.day as f64 * kept).round() as u64;
        self.campaign.share_of_day_scans = 0.0;
        self.campaign.spikes.clear();
        self.validate()?;
        Ok(self)
    }

    /// The codes the size classes give on average.
    pub fn expected_codes(&self) -> f64 {
        self.size_class
            .iter()
            .map(|c| f64::from(c.tenants) * c.codes.log_uniform_mean())
            .sum()
    }

    pub fn validate(&self) -> Result<(), ProfileError> {
        let p = &self.platform;
        whole(
            "platform.tenants",
            u64::from(p.tenants),
            1,
            u64::from(MAX_TENANTS),
        )?;
        whole("platform.codes", p.codes, 1, MAX_CODES)?;
        real(
            "platform.codes_tolerance_percent",
            p.codes_tolerance_percent,
            0.1,
            50.0,
        )?;

        if self.size_class.is_empty() {
            return Err(refuse("size_class", "at least one size class"));
        }
        for (i, class) in self.size_class.iter().enumerate() {
            let at = |field: &str| format!("size_class[{i}] ({}).{field}", class.name);
            if class.name.trim().is_empty() {
                return Err(refuse(
                    format!("size_class[{i}].name"),
                    "a class has a name",
                ));
            }
            whole(
                &at("tenants"),
                u64::from(class.tenants),
                1,
                u64::from(MAX_TENANTS),
            )?;
            range(&at("codes"), class.codes, 1, 1_000_000)?;
            range(&at("codes_per_staff"), class.codes_per_staff, 1, 100_000)?;
            range(&at("departments"), class.departments, 1, 10_000)?;
        }
        let tenants: u64 = self.size_class.iter().map(|c| u64::from(c.tenants)).sum();
        if tenants != u64::from(p.tenants) {
            return Err(refuse(
                "size_class[*].tenants",
                format!(
                    "the classes hold {tenants} tenants; platform.tenants says {}",
                    p.tenants
                ),
            ));
        }
        let expected = self.expected_codes();
        let off = (expected / p.codes as f64 - 1.0) * 100.0;
        if off.abs() > p.codes_tolerance_percent {
            return Err(refuse(
                "size_class[*].codes",
                format!(
                    "the classes give {expected:.0} codes on average, {off:+.1}% from platform.codes ({}); \
                     the tolerance is {}%",
                    p.codes, p.codes_tolerance_percent
                ),
            ));
        }

        let c = &self.code;
        range("code.members", c.members, 1, 100)?; // WeCom: a contact way lists at most 100 users
        shares_sum(
            "code.native_share + sequenced_share + quota_share",
            &[c.native_share, c.sequenced_share, c.quota_share],
        )?;
        for (field, value) in [
            ("code.native_share", c.native_share),
            ("code.sequenced_share", c.sequenced_share),
            ("code.quota_share", c.quota_share),
            ("code.offline_check_share", c.offline_check_share),
            ("code.daily_limit_share", c.daily_limit_share),
            ("code.add_limit_share", c.add_limit_share),
            ("code.fallback_share", c.fallback_share),
            (
                "code.edited_within_quiet_period_share",
                c.edited_within_quiet_period_share,
            ),
        ] {
            share(field, value)?;
        }
        range("code.daily_limit", c.daily_limit, 1, 100_000)?;
        range("code.add_limit", c.add_limit, 1, 10_000_000)?;
        range("code.round_limit", c.round_limit, 1, 1_000)?;

        let s = &self.staff;
        share("staff.company_cap_share", s.company_cap_share)?;
        range("staff.company_cap", s.company_cap, 1, 100_000)?;
        real(
            "staff.offline_flips_per_day",
            s.offline_flips_per_day,
            0.0,
            100.0,
        )?;
        real(
            "staff.resignations_per_thousand_per_day",
            s.resignations_per_thousand_per_day,
            0.0,
            1_000.0,
        )?;
        real(
            "staff.department_changes_per_thousand_per_day",
            s.department_changes_per_thousand_per_day,
            0.0,
            1_000.0,
        )?;

        for (i, shift) in self.shift.iter().enumerate() {
            share(&format!("shift[{i}].share"), shift.share)?;
            if shift.start == shift.end {
                return Err(refuse(
                    format!("shift[{i}]"),
                    "a shift starts and ends at different times",
                ));
            }
        }
        let on_shifts: f64 = self.shift.iter().map(|s| s.share).sum();
        if on_shifts > 1.0 + SHARE_SLACK {
            return Err(refuse(
                "shift[*].share",
                format!("the shifts' shares add up to {on_shifts:.3}, more than 1"),
            ));
        }

        if self.timezone.is_empty() {
            return Err(refuse("timezone", "at least one timezone"));
        }
        for (i, zone) in self.timezone.iter().enumerate() {
            share(&format!("timezone[{i}].share"), zone.share)?;
        }
        let zones: Vec<f64> = self.timezone.iter().map(|z| z.share).collect();
        shares_sum("timezone[*].share", &zones)?;

        whole("scans.day", self.scans.day, 0, 1_000_000_000)?;
        real("scans.adds_per_scan", self.scans.adds_per_scan, 0.0, 1.0)?;
        if self.scans.active_from >= self.scans.active_until {
            return Err(refuse(
                "scans.active_from",
                format!(
                    "{} is not before active_until {} (the active hours stay within one day)",
                    self.scans.active_from, self.scans.active_until
                ),
            ));
        }

        let k = &self.campaign;
        let eligible: u64 = self
            .size_class
            .iter()
            .filter(|c| c.campaign)
            .map(|c| u64::from(c.tenants))
            .sum();
        whole("campaign.tenants", u64::from(k.tenants), 0, eligible).map_err(|e| {
            refuse(
                e.field,
                format!(
                    "{} (tenants in classes with campaign = true: {eligible})",
                    e.problem
                ),
            )
        })?;
        share("campaign.share_of_day_scans", k.share_of_day_scans)?;
        whole(
            "campaign.peak_scans_per_second",
            u64::from(k.peak_scans_per_second),
            0,
            1_000_000,
        )?;
        share("campaign.hot_code_share", k.hot_code_share)?;
        for (i, spike) in k.spikes.iter().enumerate() {
            let until_midnight = 1_440 - u64::from(spike.start.minute_of_day);
            whole(
                &format!("campaign.spikes[{i}].minutes"),
                u64::from(spike.minutes),
                1,
                until_midnight,
            )
            .map_err(|e| refuse(e.field, format!("{} (a spike ends by midnight)", e.problem)))?;
        }
        let d = &self.dynamodb;
        let new = WarmThroughput::NEW_TABLE;
        // A table's warm throughput starts at a new table's and never comes down.
        for (field, value, least) in [
            (
                "dynamodb.table_read_units_per_second",
                d.table_read_units_per_second,
                new.read_units_per_second,
            ),
            (
                "dynamodb.table_write_units_per_second",
                d.table_write_units_per_second,
                new.write_units_per_second,
            ),
            (
                "dynamodb.index_read_units_per_second",
                d.index_read_units_per_second,
                new.read_units_per_second,
            ),
            (
                "dynamodb.index_write_units_per_second",
                d.index_write_units_per_second,
                new.write_units_per_second,
            ),
        ] {
            whole(field, value, least, MAX_WARM_UNITS).map_err(|e| {
                refuse(
                    e.field,
                    format!("{} (a new table's warm throughput is the least)", e.problem),
                )
            })?;
        }
        // A quota of nothing would throttle every request; and a warm throughput the quota
        // does not cover is never served (the quota throttles first), so it needs the quota
        // raised.
        for (warm_field, warm, quota_field, quota) in [
            (
                "dynamodb.table_read_units_per_second",
                d.table_read_units_per_second,
                "dynamodb.table_quota_read_units_per_second",
                d.table_quota_read_units_per_second,
            ),
            (
                "dynamodb.table_write_units_per_second",
                d.table_write_units_per_second,
                "dynamodb.table_quota_write_units_per_second",
                d.table_quota_write_units_per_second,
            ),
            (
                "dynamodb.index_read_units_per_second",
                d.index_read_units_per_second,
                "dynamodb.index_quota_read_units_per_second",
                d.index_quota_read_units_per_second,
            ),
            (
                "dynamodb.index_write_units_per_second",
                d.index_write_units_per_second,
                "dynamodb.index_quota_write_units_per_second",
                d.index_quota_write_units_per_second,
            ),
        ] {
            whole(quota_field, quota, 1, MAX_QUOTA_UNITS)?;
            if warm > quota {
                return Err(refuse(
                    warm_field,
                    format!(
                        "{warm} is above {quota_field} ({quota}): a warm throughput above the \
                         quota is never served; raise the quota (on request to AWS) with it"
                    ),
                ));
            }
        }
        // Triangular spikes: each carries half its length at the peak rate.
        let in_spikes: f64 = k
            .spikes
            .iter()
            .map(|s| f64::from(s.minutes) * 60.0 * f64::from(k.peak_scans_per_second) / 2.0)
            .sum();
        let campaign_scans = self.scans.day as f64 * k.share_of_day_scans;
        if in_spikes > campaign_scans {
            return Err(refuse(
                "campaign.spikes",
                format!(
                    "spikes at {} scans/s carry {in_spikes:.0} scans, more than the campaign's \
                     {campaign_scans:.0} (scans.day x campaign.share_of_day_scans)",
                    k.peak_scans_per_second
                ),
            ));
        }
        Ok(())
    }
}

fn whole(field: &str, value: u64, low: u64, high: u64) -> Result<(), ProfileError> {
    if (low..=high).contains(&value) {
        Ok(())
    } else {
        Err(refuse(field, format!("{value} is outside {low} to {high}")))
    }
}

fn real(field: &str, value: f64, low: f64, high: f64) -> Result<(), ProfileError> {
    if value.is_finite() && (low..=high).contains(&value) {
        Ok(())
    } else {
        Err(refuse(field, format!("{value} is outside {low} to {high}")))
    }
}

fn share(field: &str, value: f64) -> Result<(), ProfileError> {
    real(field, value, 0.0, 1.0)
}

fn shares_sum(field: &str, shares: &[f64]) -> Result<(), ProfileError> {
    let sum: f64 = shares.iter().sum();
    if (sum - 1.0).abs() <= SHARE_SLACK {
        Ok(())
    } else {
        Err(refuse(field, format!("add up to {sum:.3}, not 1")))
    }
}

fn range(field: &str, r: Range, low: u32, high: u32) -> Result<(), ProfileError> {
    if r.low > r.high {
        return Err(refuse(
            field,
            format!("[{}, {}]: the low end is above the high end", r.low, r.high),
        ));
    }
    whole(field, u64::from(r.low), u64::from(low), u64::from(high))?;
    whole(field, u64::from(r.high), u64::from(low), u64::from(high))
}

/// Where a TOML parse error is, as `line N` (toml's own message says what is wrong).
fn field_at(text: &str, offset: usize) -> String {
    let line = text[..offset.min(text.len())].matches('\n').count() + 1;
    let content = text.lines().nth(line - 1).unwrap_or_default().trim();
    format!("line {line} (`{content}`)")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shipped_text() -> String {
        std::fs::read_to_string(default_profile_path()).expect("profile.toml is readable")
    }

    fn with(from: &str, to: &str) -> Result<Profile, ProfileError> {
        let text = shipped_text();
        assert!(text.contains(from), "{from} not in profile.toml");
        Profile::parse(&text.replacen(from, to, 1))
    }

    #[test]
    fn the_shipped_profile_is_the_production_shape() {
        let profile = Profile::load_default().expect("profile.toml is valid");
        assert_eq!(profile.platform.tenants, 30_000);
        assert_eq!(profile.platform.codes, 6_000_000);
        let giant = &profile.size_class[0];
        assert_eq!((giant.codes.low, giant.codes.high), (100_000, 200_000));
        assert_eq!(
            (profile.code.members.low, profile.code.members.high),
            (10, 20)
        );
        assert_eq!(profile.timezone[0].name, chrono_tz::Asia::Shanghai);
        assert!(profile.timezone[0].share > 0.5);
        assert!(profile.scans.day < 1_000_000);
        let waves: Vec<String> = profile.shift.iter().map(|s| s.start.to_string()).collect();
        assert!(waves.contains(&"09:00".to_owned()) && waves.contains(&"18:00".to_owned()));
        let off = (profile.expected_codes() / 6e6 - 1.0).abs();
        assert!(off < 0.05, "{}", profile.expected_codes());
    }

    #[test]
    fn the_quiet_day_keeps_every_other_tenants_scans_and_drops_the_campaign() {
        let day = Profile::load_default().expect("profile.toml is valid");
        let quiet = day.clone().quiet_day().expect("a valid profile");
        let share = day.campaign.share_of_day_scans;
        let background = (day.scans.day as f64 * (1.0 - share)).round() as u64;
        assert_eq!(quiet.scans.day, background);
        assert_eq!(quiet.campaign.share_of_day_scans, 0.0);
        assert!(quiet.campaign.spikes.is_empty() && !day.campaign.spikes.is_empty());
        assert_eq!(quiet.size_class, day.size_class, "the same platform");
    }

    #[test]
    fn a_number_out_of_bounds_is_refused_naming_its_field() {
        let error = with("members = [10, 20]", "members = [10, 200]").unwrap_err();
        assert_eq!(error.field, "code.members");
        let error = with("share = 0.92", "share = 1.92").unwrap_err();
        assert_eq!(error.field, "timezone[0].share");
        let error = with("codes = [5, 100]", "codes = [100, 5]").unwrap_err();
        assert!(
            error.field.contains("size_class[3] (small).codes"),
            "{error}"
        );
    }

    #[test]
    fn classes_that_do_not_add_up_to_the_platform_are_refused() {
        let error = with("tenants = 29_210", "tenants = 29_000").unwrap_err();
        assert_eq!(error.field, "size_class[*].tenants");
        let error = with("codes = [100_000, 200_000]", "codes = [300_000, 600_000]").unwrap_err();
        assert_eq!(error.field, "size_class[*].codes");
        assert!(error.problem.contains("tolerance"), "{error}");
    }

    #[test]
    fn unknown_fields_bad_times_and_bad_timezones_are_refused_with_their_line() {
        let error = with(
            "adds_per_scan = 1.0",
            "adds_per_scan = 1.0\nadds_per_sacn = 2",
        )
        .unwrap_err();
        assert!(error.field.starts_with("line "), "{error}");
        assert!(error.problem.contains("adds_per_sacn"), "{error}");
        let error = with("start = \"09:00\"", "start = \"9am\"").unwrap_err();
        assert!(error.problem.contains("HH:MM"), "{error}");
        let error = with("name = \"Asia/Tokyo\"", "name = \"Asia/Atlantis\"").unwrap_err();
        assert!(error.problem.contains("IANA"), "{error}");
    }

    #[test]
    fn active_hours_out_of_order_and_a_spike_past_midnight_are_refused() {
        let error = with("active_from = \"08:00\"", "active_from = \"23:00\"").unwrap_err();
        assert_eq!(error.field, "scans.active_from");
        let error = with(
            "{ start = \"20:00\", minutes = 20 }",
            "{ start = \"23:50\", minutes = 20 }",
        )
        .unwrap_err();
        assert_eq!(error.field, "campaign.spikes[2].minutes");
        assert!(error.problem.contains("midnight"), "{error}");
    }

    /// The shipped profile with the line that sets `field` setting it to `value` instead.
    fn with_value(field: &str, value: &str) -> Result<Profile, ProfileError> {
        with_values(&[(field, value)])
    }

    /// The shipped profile with each `(field, value)` set as `with_value` sets one.
    fn with_values(changes: &[(&str, &str)]) -> Result<Profile, ProfileError> {
        let mut text = shipped_text();
        for (field, value) in changes {
            let line = text
                .lines()
                .find(|line| line.starts_with(&format!("{field} =")))
                .unwrap_or_else(|| panic!("{field} not in profile.toml"))
                .to_owned();
            text = text.replacen(&line, &format!("{field} = {value}"), 1);
        }
        Profile::parse(&text)
    }

    #[test]
    fn a_warm_throughput_below_a_new_tables_or_past_the_bound_is_refused_naming_its_field() {
        let error = with_value("table_write_units_per_second", "3_999").unwrap_err();
        assert_eq!(error.field, "dynamodb.table_write_units_per_second");
        assert!(error.problem.contains("new table"), "{error}");
        let error = with_value("index_read_units_per_second", "2_000_000").unwrap_err();
        assert_eq!(error.field, "dynamodb.index_read_units_per_second");
        assert!(with_value("index_read_units_per_second", "12_000").is_ok());
    }

    #[test]
    fn a_zero_quota_is_refused_naming_its_field() {
        let error = with_value("table_quota_write_units_per_second", "0").unwrap_err();
        assert_eq!(error.field, "dynamodb.table_quota_write_units_per_second");
        let error = with_value("index_quota_read_units_per_second", "0").unwrap_err();
        assert_eq!(error.field, "dynamodb.index_quota_read_units_per_second");
    }

    #[test]
    fn a_warm_throughput_above_the_quota_is_refused_naming_both_fields_unless_the_quota_is_raised()
    {
        let error = with_value("table_write_units_per_second", "50_000").unwrap_err();
        assert_eq!(error.field, "dynamodb.table_write_units_per_second");
        assert!(
            error
                .problem
                .contains("dynamodb.table_quota_write_units_per_second"),
            "{error}"
        );
        let error = with_value("index_quota_read_units_per_second", "11_999").unwrap_err();
        assert_eq!(error.field, "dynamodb.index_read_units_per_second");
        assert!(
            error
                .problem
                .contains("dynamodb.index_quota_read_units_per_second"),
            "{error}"
        );
        let profile = with_values(&[
            ("table_write_units_per_second", "50_000"),
            ("table_quota_write_units_per_second", "50_000"),
        ])
        .expect("a raised quota covers the warm throughput");
        assert_eq!(
            profile.dynamodb.table_quota().write_units_per_second,
            50_000
        );
    }

    #[test]
    fn the_shipped_quota_is_the_on_demand_default_but_the_tables_reads_raised_for_the_wave() {
        let profile = Profile::load_default().expect("profile.toml is valid");
        let table = profile.dynamodb.table_quota();
        assert_eq!(table.read_units_per_second, 200_000);
        assert_eq!(
            table.write_units_per_second,
            Quota::ON_DEMAND_DEFAULT.write_units_per_second
        );
        assert_eq!(profile.dynamodb.index_quota(), Quota::ON_DEMAND_DEFAULT);
    }

    #[test]
    fn spikes_carrying_more_than_the_campaigns_scans_are_refused() {
        let error = with(
            "peak_scans_per_second = 400",
            "peak_scans_per_second = 4000",
        )
        .unwrap_err();
        assert_eq!(error.field, "campaign.spikes");
    }
}
