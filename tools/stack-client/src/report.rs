//! The printed reports of `make demo` and `make bench`: aligned lines, and must-be lines that
//! say PASS or FAIL and are remembered, so a tool can exit non-zero when one failed; and the
//! percentiles both tools report latencies with.

use std::fmt::Write as _;

pub struct Lines {
    pub text: String,
    /// The labels of the must-be lines that failed.
    pub failed: Vec<String>,
    label_width: usize,
    value_width: usize,
}

impl Lines {
    /// Labels padded to `label_width`, must-be values to `value_width`.
    pub fn new(label_width: usize, value_width: usize) -> Self {
        Self {
            text: String::new(),
            failed: Vec::new(),
            label_width,
            value_width,
        }
    }

    pub fn head(&mut self, title: &str) {
        let _ = writeln!(self.text, "\n{title}");
    }

    pub fn line(&mut self, label: &str, value: impl std::fmt::Display) {
        let width = self.label_width;
        let _ = writeln!(self.text, "  {label:<width$} {value}");
    }

    pub fn note(&mut self, text: &str) {
        let _ = writeln!(self.text, "      {text}");
    }

    /// An empty `Lines` aligned like this one, for a section to fill and `append` later.
    pub fn section(&self) -> Self {
        Self::new(self.label_width, self.value_width)
    }

    /// Adds a section's lines after these, and its failed must-be lines after these' ones.
    pub fn append(&mut self, section: Lines) {
        self.text.push_str(&section.text);
        self.failed.extend(section.failed);
    }

    /// Whether every must-be line passed.
    pub fn passed(&self) -> bool {
        self.failed.is_empty()
    }

    pub fn must(&mut self, label: &str, value: impl std::fmt::Display, pass: bool) {
        let verdict = if pass { "PASS" } else { "FAIL" };
        let value = value.to_string();
        let (width, value_width) = (self.label_width, self.value_width);
        let _ = writeln!(
            self.text,
            "  {label:<width$} {value:<value_width$} {verdict}"
        );
        if !pass {
            self.failed.push(label.to_owned());
        }
    }
}

/// A count with thousands separators (1,234).
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The nearest-rank percentile `p` (0 to 100) of `sorted`; 0 when there is no value.
pub fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// "p50 / p95 / max (n samples)" of `values`, each written with `unit`.
pub fn quantiles(mut values: Vec<u64>, unit: impl Fn(u64) -> String) -> String {
    values.sort_unstable();
    match values.last() {
        None => "no samples".into(),
        Some(max) => format!(
            "{} / {} / {} ({} samples)",
            unit(percentile(&values, 50.0)),
            unit(percentile(&values, 95.0)),
            unit(*max),
            values.len()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_must_be_line_is_remembered_and_a_passed_one_is_not() {
        let mut out = Lines::new(10, 4);
        out.line("pushes", 3);
        out.must("lost", 0, true);
        out.must("differ", 2, false);
        assert_eq!(out.failed, ["differ"]);
        assert_eq!(
            out.text,
            "  pushes     3\n  lost       0    PASS\n  differ     2    FAIL\n"
        );
    }

    #[test]
    fn an_appended_section_keeps_its_lines_and_its_failed_must_be_lines_in_order() {
        let mut out = Lines::new(10, 4);
        out.must("lost", 1, false);
        let mut section = out.section();
        section.line("pushes", 3);
        section.must("differ", 2, false);
        assert!(!section.passed());
        out.append(section);
        assert_eq!(out.failed, ["lost", "differ"]);
        assert_eq!(
            out.text,
            "  lost       1    FAIL\n  pushes     3\n  differ     2    FAIL\n"
        );
        assert!(out.section().passed());
    }

    #[test]
    fn nearest_rank_percentiles_of_sorted_values() {
        let values: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&values, 50.0), 50);
        assert_eq!(percentile(&values, 95.0), 95);
        assert_eq!(percentile(&[7], 95.0), 7);
        assert_eq!(percentile(&[], 95.0), 0);
    }

    #[test]
    fn quantiles_sort_their_values_and_count_them() {
        let unit = |value: u64| format!("{value} ms");
        assert_eq!(
            quantiles(vec![30, 10, 20], unit),
            "20 ms / 30 ms / 30 ms (3 samples)"
        );
        assert_eq!(quantiles(Vec::new(), unit), "no samples");
    }
}
