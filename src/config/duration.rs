//! Durations written as `500ms`, `10s`, `5m`, `12h`, `1d` or a bare number of seconds.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::time::Duration;

/// A config duration; keeps the text's unit when printed back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Dur(pub Duration);

impl Dur {
    pub const fn secs(s: u64) -> Self {
        Dur(Duration::from_secs(s))
    }
    pub const fn millis(ms: u64) -> Self {
        Dur(Duration::from_millis(ms))
    }
    pub fn get(self) -> Duration {
        self.0
    }
    pub fn as_secs(self) -> u64 {
        self.0.as_secs()
    }
}

impl From<Dur> for Duration {
    fn from(d: Dur) -> Duration {
        d.0
    }
}

/// Parse `500ms`, `10s`, `5m`, `12h`, `1d` or `30` (seconds).
pub fn parse(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    if num.is_empty() {
        return Err(format!(
            "invalid duration {text:?}: expected a number with an optional unit (ms, s, m, h, d)"
        ));
    }
    let n: u64 = num
        .parse()
        .map_err(|_| format!("invalid duration {text:?}: number too large"))?;
    let ms_per = match unit.trim() {
        "ms" => 1,
        "" | "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        other => {
            return Err(format!(
                "invalid duration {text:?}: unknown unit {other:?} (use ms, s, m, h or d)"
            ));
        }
    };
    n.checked_mul(ms_per)
        .map(Duration::from_millis)
        .ok_or_else(|| format!("invalid duration {text:?}: too large"))
}

impl fmt::Display for Dur {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.0.as_millis();
        if ms.is_multiple_of(86_400_000) && ms > 0 {
            write!(f, "{}d", ms / 86_400_000)
        } else if ms.is_multiple_of(3_600_000) && ms > 0 {
            write!(f, "{}h", ms / 3_600_000)
        } else if ms.is_multiple_of(60_000) && ms > 0 {
            write!(f, "{}m", ms / 60_000)
        } else if ms.is_multiple_of(1_000) {
            write!(f, "{}s", ms / 1_000)
        } else {
            write!(f, "{ms}ms")
        }
    }
}

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Repr {
            Secs(u64),
            Text(String),
        }
        match Repr::deserialize(d)? {
            Repr::Secs(s) => Ok(Dur(Duration::from_secs(s))),
            Repr::Text(t) => parse(&t).map(Dur).map_err(serde::de::Error::custom),
        }
    }
}

/// The schema of what [`parse`] accepts: seconds as a number, or a number
/// with a unit.
impl schemars::JsonSchema for Dur {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Duration".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "A duration: seconds as a number (30), or a number with a unit: 500ms, 10s, 5m, 12h, 1d.",
            "oneOf": [
                { "type": "integer", "minimum": 0 },
                { "type": "string", "pattern": "^\\s*[0-9]+\\s*(ms|s|m|h|d)?\\s*$" }
            ]
        })
    }
}

impl Serialize for Dur {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units() {
        assert_eq!(parse("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(parse("10").unwrap(), Duration::from_secs(10));
        assert_eq!(parse("5m").unwrap(), Duration::from_secs(300));
        assert_eq!(parse("12h").unwrap(), Duration::from_secs(43200));
        assert_eq!(parse("1d").unwrap(), Duration::from_secs(86400));
        assert!(parse("ten").is_err());
        assert!(parse("10x").is_err());
        assert!(parse("").is_err());
        assert!(parse("99999999999999999999s").is_err());
    }

    #[test]
    fn displays_round_trip() {
        for t in ["500ms", "10s", "5m", "12h", "1d", "0s", "90s"] {
            assert_eq!(Dur(parse(t).unwrap()).to_string(), t);
        }
    }
}
