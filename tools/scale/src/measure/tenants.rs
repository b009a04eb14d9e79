//! Staleness per tenant, for the figures a platform judges one tenant by: its own p99 (the same
//! tenant on another day, `qrsync-scale compare`), and, for a tenant over its budget, its
//! latest fact against the time its list changes need at the budget.
//!
//! Each tenant keeps counts in buckets 5% wide rather than its samples: 30,000 tenants and
//! tens of millions of facts fit in a few megabytes, and a quantile is read as its bucket's
//! upper end (at most 5% high, never low).

use std::fmt::Write;

/// The ratio between a bucket's upper end and its lower one.
const WIDTH: f64 = 1.05;

/// The bucket of `ms`: 0 holds 0 ms, bucket b holds (WIDTH^(b-1), WIDTH^b].
fn bucket(ms: u32) -> usize {
    if ms == 0 {
        return 0;
    }
    1 + ((f64::from(ms)).ln() / WIDTH.ln()).ceil().max(0.0) as usize
}

fn upper_ms(bucket: usize) -> u32 {
    match bucket {
        0 => 0,
        b => WIDTH.powi(i32::try_from(b - 1).unwrap_or(i32::MAX)).ceil() as u32,
    }
}

/// One tenant's facts, resolved or still waiting at the end (with their age then).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TenantStaleness {
    counts: Vec<u32>,
    pub facts: u64,
    pub waiting: u64,
    pub max_ms: u32,
    /// Lists WeCom took for the tenant's codes: the list changes its budget had to carry.
    pub lists_landed: u64,
}

impl TenantStaleness {
    pub fn add(&mut self, staleness_ms: u32) {
        let b = bucket(staleness_ms);
        if self.counts.len() <= b {
            self.counts.resize(b + 1, 0);
        }
        self.counts[b] += 1;
        self.facts += 1;
        self.max_ms = self.max_ms.max(staleness_ms);
    }

    pub fn add_waiting(&mut self, age_ms: u32) {
        self.add(age_ms);
        self.waiting += 1;
    }

    /// The `q` quantile (0 to 1) as its bucket's upper end, at most the largest sample.
    pub fn quantile_ms(&self, q: f64) -> u32 {
        if self.facts == 0 {
            return 0;
        }
        let rank = ((q * self.facts as f64).ceil() as u64).clamp(1, self.facts);
        let mut seen = 0;
        for (b, count) in self.counts.iter().enumerate() {
            seen += u64::from(*count);
            if seen >= rank {
                return upper_ms(b).min(self.max_ms);
            }
        }
        self.max_ms
    }

    /// The bound for a tenant whose changes exceed its budget: 1.1 x (its list changes /
    /// `per_minute`) + 5 s, in ms.
    pub fn over_budget_bound_ms(&self, per_minute: u32) -> u64 {
        let minutes = self.lists_landed as f64 / f64::from(per_minute.max(1));
        (1.1 * minutes * 60_000.0) as u64 + 5_000
    }
}

/// What one tenant's line of `tenants.csv` says.
pub struct TenantLine<'a> {
    pub tenant: &'a str,
    pub class: &'a str,
    pub over_budget: bool,
    /// The campaign's scans go to this tenant.
    pub campaign: bool,
    pub staleness: &'a TenantStaleness,
}

const CSV_HEADER: &str =
    "tenant,class,over_budget,campaign,facts,waiting,p50_ms,p99_ms,max_ms,lists_landed";

/// One line per tenant: `tenant,class,over_budget,campaign,facts,waiting,p50_ms,p99_ms,max_ms,lists_landed`.
pub fn tenants_csv<'a>(rows: impl Iterator<Item = TenantLine<'a>>) -> String {
    let mut out = format!("{CSV_HEADER}\n");
    for line in rows {
        let t = line.staleness;
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{},{},{}",
            line.tenant,
            line.class,
            line.over_budget,
            line.campaign,
            t.facts,
            t.waiting,
            t.quantile_ms(0.50),
            t.quantile_ms(0.99),
            t.max_ms,
            t.lists_landed
        );
    }
    out
}

/// A tenant's row of a `csv` file, as `compare` reads it back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenantRow {
    pub tenant: String,
    pub class: String,
    pub over_budget: bool,
    pub campaign: bool,
    pub facts: u64,
    pub p99_ms: u64,
}

/// Reads a `csv` file back; a header other than `tenants_csv`'s (a file of an older run) or a
/// line that does not parse is an error naming it.
pub fn parse_csv(text: &str) -> Result<Vec<TenantRow>, String> {
    let header = text.lines().next().unwrap_or_default();
    if header != CSV_HEADER {
        return Err(format!(
            "line 1: `{header}` is not `{CSV_HEADER}` (a file of an older run: run it again)"
        ));
    }
    let mut rows = Vec::new();
    for (n, line) in text.lines().enumerate().skip(1) {
        let fields: Vec<&str> = line.split(',').collect();
        let parsed = (|| {
            if fields.len() != 10 {
                return None;
            }
            Some(TenantRow {
                tenant: fields[0].to_owned(),
                class: fields[1].to_owned(),
                over_budget: fields[2].parse().ok()?,
                campaign: fields[3].parse().ok()?,
                facts: fields[4].parse().ok()?,
                p99_ms: fields[7].parse().ok()?,
            })
        })();
        rows.push(parsed.ok_or_else(|| format!("line {}: `{line}` is not a tenant row", n + 1))?);
    }
    Ok(rows)
}

/// Each tenant's p99 on `day` against its own p99 on `quiet` (the same population and seed
/// without the campaign): how many tenants with facts on both days stay within 10%, for all
/// of them and for those within their budget, and the five furthest past it.
pub fn compare(day: &[TenantRow], quiet: &[TenantRow]) -> String {
    let quiet: std::collections::HashMap<&str, &TenantRow> =
        quiet.iter().map(|row| (row.tenant.as_str(), row)).collect();
    let mut both = Vec::new();
    for row in day {
        if let Some(q) = quiet.get(row.tenant.as_str()) {
            if row.facts > 0 && q.facts > 0 {
                both.push((row, *q));
            }
        }
    }
    let within = |rows: &[(&TenantRow, &TenantRow)]| {
        rows.iter()
            .filter(|(d, q)| d.p99_ms * 10 <= q.p99_ms * 11)
            .count()
    };
    let (campaign, others): (Vec<_>, Vec<_>) = both.iter().copied().partition(|(d, _)| d.campaign);
    let in_budget: Vec<_> = others
        .iter()
        .copied()
        .filter(|(d, _)| !d.over_budget)
        .collect();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "tenants outside the campaign with facts on both days: {}; p99 within 10% of the quiet day's: {} ({} of the {} within their budget)",
        others.len(),
        within(&others),
        within(&in_budget),
        in_budget.len()
    );
    let _ = writeln!(
        out,
        "the campaign's own tenants (slowed by their own campaign, not judged): {}, {} within 10%",
        campaign.len(),
        within(&campaign)
    );
    let mut furthest = others;
    furthest.sort_by(|a, b| {
        let ratio = |(d, q): &(&TenantRow, &TenantRow)| d.p99_ms as f64 / q.p99_ms.max(1) as f64;
        ratio(b).total_cmp(&ratio(a))
    });
    for (d, q) in furthest.iter().take(5) {
        let _ = writeln!(
            out,
            "  {} ({}{}): p99 {:.1} s, quiet day {:.1} s",
            d.tenant,
            d.class,
            if d.over_budget { ", over budget" } else { "" },
            d.p99_ms as f64 / 1000.0,
            q.p99_ms as f64 / 1000.0
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quantile_is_read_within_five_percent_above_and_never_below() {
        let mut t = TenantStaleness::default();
        for ms in 1..=1_000u32 {
            t.add(ms * 100);
        }
        let p99 = t.quantile_ms(0.99);
        assert!((99_000..=99_000 * 105 / 100).contains(&p99), "{p99}");
        assert_eq!(t.quantile_ms(1.0), 100_000);
        assert_eq!(t.max_ms, 100_000);
        assert_eq!(TenantStaleness::default().quantile_ms(0.99), 0);
    }

    #[test]
    fn the_over_budget_bound_is_a_tenth_more_than_its_changes_take_at_the_budget_plus_five_seconds()
    {
        let t = TenantStaleness {
            lists_landed: 18_000,
            ..Default::default()
        };
        // 18,000 changes at 9,000 a minute: 2 minutes, x 1.1 = 132 s, + 5 s.
        assert_eq!(t.over_budget_bound_ms(9_000), 137_000);
    }

    #[test]
    fn the_csv_reads_back_and_a_bad_line_is_named() {
        let mut t = TenantStaleness::default();
        t.add(2_000);
        t.add_waiting(60_000);
        let line = TenantLine {
            tenant: "acme",
            class: "small",
            over_budget: false,
            campaign: true,
            staleness: &t,
        };
        let text = tenants_csv([line].into_iter());
        let rows = parse_csv(&text).expect("parses");
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].tenant, "acme");
        assert!(rows[0].campaign);
        assert_eq!(rows[0].facts, 2);
        assert_eq!(rows[0].p99_ms, 60_000);
        let error = parse_csv(&format!("{CSV_HEADER}\nacme,small,maybe,false,1,0,1,1,1,0"))
            .expect_err("refused");
        assert!(error.contains("line 2"), "{error}");
        let error = parse_csv("tenant,class,over_budget,facts,waiting,p50_ms,p99_ms,max_ms,lists_landed\nacme,small,false,1,0,1,1,1,0")
            .expect_err("an older file is refused");
        assert!(error.contains("line 1"), "{error}");
    }

    fn row(tenant: &str, p99_ms: u64) -> TenantRow {
        TenantRow {
            tenant: tenant.into(),
            class: "small".into(),
            over_budget: false,
            campaign: false,
            facts: 10,
            p99_ms,
        }
    }

    #[test]
    fn a_tenant_outside_the_campaign_is_within_ten_percent_of_its_quiet_day_or_named_among_the_furthest(
    ) {
        let running = TenantRow {
            campaign: true,
            ..row("d", 9_000)
        };
        let day = [row("a", 1_100), row("b", 3_000), row("c", 500), running];
        let quiet = [row("a", 1_000), row("b", 1_000), row("d", 1_000)];
        let text = compare(&day, &quiet);
        assert!(
            text.starts_with("tenants outside the campaign with facts on both days: 2; p99 within 10% of the quiet day's: 1 (1 of the 2 within their budget)\nthe campaign's own tenants (slowed by their own campaign, not judged): 1, 0 within 10%"),
            "{text}"
        );
        let furthest = text.lines().nth(2).expect("a furthest line");
        assert!(
            furthest.contains("b (small): p99 3.0 s, quiet day 1.0 s"),
            "{text}"
        );
    }
}
