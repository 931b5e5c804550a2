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

/// Why a text is not a duration (each text names the text given).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// No digits in front.
    #[error("invalid duration {0:?}: expected a number with an optional unit (ms, s, m, h, d)")]
    NoNumber(String),
    /// The number does not fit 64 bits.
    #[error("invalid duration {0:?}: number too large")]
    NumberTooLarge(String),
    /// A unit other than ms, s, m, h or d.
    #[error("invalid duration {text:?}: unknown unit {unit:?} (use ms, s, m, h or d)")]
    UnknownUnit { text: String, unit: String },
    /// The number in milliseconds does not fit 64 bits.
    #[error("invalid duration {0:?}: too large")]
    TooLarge(String),
}

/// Parse `500ms`, `10s`, `5m`, `12h`, `1d` or `30` (seconds).
pub fn parse(text: &str) -> Result<Duration, DurationError> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    if num.is_empty() {
        return Err(DurationError::NoNumber(text.into()));
    }
    let n: u64 = num
        .parse()
        .map_err(|_| DurationError::NumberTooLarge(text.into()))?;
    let ms_per = match unit.trim() {
        "ms" => 1,
        "" | "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        other => {
            return Err(DurationError::UnknownUnit {
                text: text.into(),
                unit: other.into(),
            });
        }
    };
    n.checked_mul(ms_per)
        .map(Duration::from_millis)
        .ok_or_else(|| DurationError::TooLarge(text.into()))
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

    /// The texts the cluster file's errors and `--timeout` show.
    #[test]
    fn each_error_names_the_text_and_the_mistake() {
        let cases = [
            (
                "ten",
                DurationError::NoNumber("ten".into()),
                "invalid duration \"ten\": expected a number with an optional unit (ms, s, m, h, d)",
            ),
            (
                "99999999999999999999s",
                DurationError::NumberTooLarge("99999999999999999999s".into()),
                "invalid duration \"99999999999999999999s\": number too large",
            ),
            (
                "10x",
                DurationError::UnknownUnit {
                    text: "10x".into(),
                    unit: "x".into(),
                },
                "invalid duration \"10x\": unknown unit \"x\" (use ms, s, m, h or d)",
            ),
            (
                "18446744073709551615d",
                DurationError::TooLarge("18446744073709551615d".into()),
                "invalid duration \"18446744073709551615d\": too large",
            ),
        ];
        for (text, err, want) in cases {
            assert_eq!(parse(text), Err(err.clone()));
            assert_eq!(err.to_string(), want);
        }
    }

    #[test]
    fn displays_round_trip() {
        for t in ["500ms", "10s", "5m", "12h", "1d", "0s", "90s"] {
            assert_eq!(Dur(parse(t).unwrap()).to_string(), t);
        }
    }
}
