//! Repeated measurements, their median, min and max, and the Markdown table they end in.

use std::fmt::Write as _;

/// The unit of a figure, which also decides how it is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    RecordsPerSec,
    MegabytesPerSec,
    Millis,
    Micros,
    Megabytes,
    Ratio,
    PerSec,
}

impl Unit {
    fn name(self) -> &'static str {
        match self {
            Unit::RecordsPerSec => "records/s",
            Unit::MegabytesPerSec => "MB/s",
            Unit::Millis => "ms",
            Unit::Micros => "µs",
            Unit::Megabytes => "MB",
            Unit::Ratio => "×",
            Unit::PerSec => "/s",
        }
    }

    pub fn format(self, v: f64) -> String {
        match self {
            Unit::RecordsPerSec => thousands(v.round()),
            Unit::MegabytesPerSec if v >= 100.0 => thousands(v.round()),
            Unit::MegabytesPerSec => format!("{v:.1}"),
            Unit::Millis if v < 10.0 => format!("{v:.3}"),
            Unit::Millis => format!("{v:.1}"),
            Unit::Micros => format!("{v:.1}"),
            Unit::Megabytes => format!("{v:.1}"),
            Unit::Ratio => format!("{v:.2}"),
            Unit::PerSec => thousands(v.round()),
        }
    }
}

fn thousands(v: f64) -> String {
    let digits = format!("{:.0}", v.abs());
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if v < 0.0 { format!("-{out}") } else { out }
}

/// Median, min and max of samples (the median of an even count is the mean of the two
/// middle ones).
pub fn summary(samples: &[f64]) -> Option<(f64, f64, f64)> {
    let mut s: Vec<f64> = samples.iter().copied().filter(|v| v.is_finite()).collect();
    if s.is_empty() {
        return None;
    }
    s.sort_by(f64::total_cmp);
    let n = s.len();
    let median = if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    };
    Some((median, s[0], s[n - 1]))
}

/// A goal a figure is held to.
#[derive(Debug, Clone, Copy)]
pub enum Target {
    AtLeast(f64),
    Below(f64),
}

impl Target {
    fn verdict(self, unit: Unit, median: f64) -> String {
        match self {
            Target::AtLeast(t) if median >= t => format!("≥ {}: met", unit.format(t)),
            Target::AtLeast(t) => format!(
                "≥ {}: **missed** ({:.0}% short)",
                unit.format(t),
                (1.0 - median / t) * 100.0
            ),
            Target::Below(t) if median < t => format!("< {}: met", unit.format(t)),
            Target::Below(t) => {
                format!("< {}: **missed** ({:.1}× over)", unit.format(t), median / t)
            }
        }
    }
}

/// One line of the results table.
#[derive(Debug, Clone)]
pub struct Row {
    pub name: String,
    pub unit: Unit,
    pub samples: Vec<f64>,
    pub target: Option<Target>,
    pub note: String,
}

impl Row {
    pub fn new(name: impl Into<String>, unit: Unit) -> Row {
        Row {
            name: name.into(),
            unit,
            samples: Vec::new(),
            target: None,
            note: String::new(),
        }
    }

    pub fn target(mut self, target: Target) -> Row {
        self.target = Some(target);
        self
    }

    pub fn note(mut self, note: impl Into<String>) -> Row {
        self.note = note.into();
        self
    }

    pub fn push(&mut self, v: f64) {
        self.samples.push(v);
    }

    pub fn median(&self) -> Option<f64> {
        summary(&self.samples).map(|s| s.0)
    }
}

/// A titled group of rows.
#[derive(Debug, Clone)]
pub struct Section {
    pub title: String,
    pub rows: Vec<Row>,
}

/// Renders sections as one Markdown table.
pub fn table(sections: &[Section]) -> String {
    let mut out = String::new();
    out.push_str("| figure | median | min | max | unit | n | target | notes |\n");
    out.push_str("|---|--:|--:|--:|---|--:|---|---|\n");
    for section in sections {
        let _ = writeln!(out, "| **{}** | | | | | | | |", section.title);
        for row in &section.rows {
            let (median, min, max) = match summary(&row.samples) {
                Some((m, lo, hi)) => (row.unit.format(m), row.unit.format(lo), row.unit.format(hi)),
                None => ("n/a".into(), "–".into(), "–".into()),
            };
            let verdict = match (row.target, row.median()) {
                (Some(t), Some(m)) => t.verdict(row.unit, m),
                (Some(_), None) => "not measured".into(),
                (None, _) => String::new(),
            };
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} | {} |",
                row.name,
                median,
                min,
                max,
                row.unit.name(),
                row.samples.len(),
                verdict,
                row.note
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_min_max_of_odd_and_even_counts() {
        assert_eq!(summary(&[3.0, 1.0, 2.0]), Some((2.0, 1.0, 3.0)));
        assert_eq!(summary(&[4.0, 1.0, 2.0, 3.0]), Some((2.5, 1.0, 4.0)));
        assert_eq!(summary(&[]), None);
    }

    #[test]
    fn numbers_print_with_their_unit_precision() {
        assert_eq!(Unit::RecordsPerSec.format(1_234_567.4), "1,234,567");
        assert_eq!(Unit::RecordsPerSec.format(999.0), "999");
        assert_eq!(Unit::MegabytesPerSec.format(42.26), "42.3");
        assert_eq!(Unit::Millis.format(1.23456), "1.235");
        assert_eq!(Unit::Ratio.format(2.0), "2.00");
    }

    #[test]
    fn a_missed_target_says_by_how_much() {
        assert_eq!(
            Target::AtLeast(1000.0).verdict(Unit::MegabytesPerSec, 750.0),
            "≥ 1,000: **missed** (25% short)"
        );
        assert_eq!(
            Target::Below(20.0).verdict(Unit::Millis, 50.0),
            "< 20.0: **missed** (2.5× over)"
        );
        assert_eq!(
            Target::Below(64.0).verdict(Unit::Megabytes, 10.0),
            "< 64.0: met"
        );
    }
}
