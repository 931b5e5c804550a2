//! Prometheus text exposition (format 0.0.4) shared by every service's
//! `StatusSource::metrics`: one [`family`] call writes `# HELP` and `# TYPE`,
//! then [`Family::sample`] writes one line per label set.
//!
//! Invariants: label values are escaped (backslash, double quote, newline)
//! and help text is escaped (backslash, newline), so a hostile node or pool
//! name cannot break the exposition. Labels are written in the order given.

use std::fmt::{Display, Write as _};

/// Metric type, as written in `# TYPE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
        }
    }
}

/// One metric family being written into `out`.
pub struct Family<'a> {
    out: &'a mut String,
    name: &'a str,
}

/// Start a family: writes its `# HELP` and `# TYPE` lines.
pub fn family<'a>(out: &'a mut String, name: &'a str, kind: Kind, help: &str) -> Family<'a> {
    let _ = writeln!(out, "# HELP {name} {}", escape(help, false));
    let _ = writeln!(out, "# TYPE {name} {}", kind.as_str());
    Family { out, name }
}

impl Family<'_> {
    /// One sample line: `name{k="v",...} value` (no braces without labels).
    pub fn sample(&mut self, labels: &[(&str, &dyn Display)], value: impl Display) -> &mut Self {
        self.out.push_str(self.name);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                let _ = write!(self.out, "{k}=\"{}\"", escape(&v.to_string(), true));
            }
            self.out.push('}');
        }
        let _ = writeln!(self.out, " {value}");
        self
    }
}

/// Escape per the exposition format: `\` and newline always, `"` in label values.
fn escape(s: &str, quote: bool) -> std::borrow::Cow<'_, str> {
    if !s.contains(['\\', '\n', '"']) {
        return s.into();
    }
    let mut o = String::with_capacity(s.len() + 2);
    for c in s.chars() {
        match c {
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            '"' if quote => o.push_str("\\\""),
            c => o.push(c),
        }
    }
    o.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn family_with_and_without_labels() {
        let mut out = String::new();
        family(&mut out, "x_total", Kind::Counter, "Things.")
            .sample(&[], 3)
            .sample(&[("a", &"b"), ("n", &7)], 1);
        assert_eq!(
            out,
            "# HELP x_total Things.\n# TYPE x_total counter\nx_total 3\nx_total{a=\"b\",n=\"7\"} 1\n"
        );
    }

    #[test]
    fn escapes_label_values_and_help() {
        let mut out = String::new();
        family(&mut out, "g", Kind::Gauge, "a\\b\nc \"q\"").sample(&[("v", &"x\"y\\z\nw")], 0);
        assert_eq!(
            out,
            "# HELP g a\\\\b\\nc \"q\"\n# TYPE g gauge\ng{v=\"x\\\"y\\\\z\\nw\"} 0\n"
        );
    }
}
