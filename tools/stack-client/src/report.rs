//! The printed reports of `make demo` and `make bench`: aligned lines, and must-be lines that
//! say PASS or FAIL and are remembered, so a tool can exit non-zero when one failed.

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
}
