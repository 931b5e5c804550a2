//! Pure HTTP semantics for static files (no I/O): `Range` parsing
//! (RFC 9110 §14), conditional requests (RFC 9110 §13) and the layout of a
//! `multipart/byteranges` body (RFC 9110 §14.6, RFC 2046).
//!
//! Rules implemented:
//! - Only the `bytes` unit is understood; another unit or a syntactically
//!   invalid header is ignored (the full representation is sent, as RFC 9110
//!   §14.2 allows).
//! - `a-b`, `a-` and `-n` specs; `b` past the end is clamped; `-n` larger
//!   than the file means the whole file; a spec starting at or past the end
//!   (or `-0`) is unsatisfiable and dropped. No satisfiable spec → 416.
//! - Satisfiable ranges are sorted and coalesced when they overlap or touch
//!   (§14.2 allows coalescing regardless of request order). One range after
//!   that → a plain 206, several → `multipart/byteranges`.
//! - More than [`MAX_RANGES`] specs: the header is ignored (200) instead of
//!   building a huge multipart answer from a hostile request.
//! - Conditionals are evaluated in the §13.2.2 order: If-Match,
//!   If-Unmodified-Since, If-None-Match (weak comparison), If-Modified-Since
//!   (only without If-None-Match, only GET/HEAD), then If-Range (strong ETag
//!   comparison or exact Last-Modified date) decides whether Range applies.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Most range specs accepted in one `Range` header.
pub const MAX_RANGES: usize = 64;

/// An inclusive byte range `start..=end` of a representation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteRange {
    pub start: u64,
    pub end: u64,
}

impl ByteRange {
    pub fn len(&self) -> u64 {
        self.end - self.start + 1
    }
    pub fn is_empty(&self) -> bool {
        false
    }
    /// `Content-Range` value for this range of a `total`-byte representation.
    pub fn content_range(&self, total: u64) -> String {
        format!("bytes {}-{}/{}", self.start, self.end, total)
    }
}

/// Outcome of evaluating a `Range` header against a representation length.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RangeOutcome {
    /// No (usable) Range header: send the whole representation with 200.
    Full,
    /// 206 with these (sorted, coalesced, non-empty) ranges.
    Partial(Vec<ByteRange>),
    /// 416 with `Content-Range: bytes */len`.
    Unsatisfiable,
}

enum Spec {
    FromTo(u64, Option<u64>),
    Suffix(u64),
}

fn parse_specs(header: &str) -> Option<Vec<Spec>> {
    let (unit, set) = header.trim().split_once('=')?;
    if !unit.trim().eq_ignore_ascii_case("bytes") {
        return None;
    }
    let mut specs = Vec::new();
    for part in set.split(',') {
        let part = part.trim();
        if part.is_empty() {
            // RFC 9110 list syntax tolerates empty elements.
            continue;
        }
        if specs.len() == MAX_RANGES {
            return None;
        }
        let (a, b) = part.split_once('-')?;
        let (a, b) = (a.trim(), b.trim());
        let num = |s: &str| -> Option<u64> {
            if s.is_empty() || !s.bytes().all(|c| c.is_ascii_digit()) {
                return None;
            }
            s.parse().ok()
        };
        if a.is_empty() {
            specs.push(Spec::Suffix(num(b)?));
        } else {
            let first = num(a)?;
            let last = if b.is_empty() { None } else { Some(num(b)?) };
            if let Some(l) = last
                && l < first
            {
                return None;
            }
            specs.push(Spec::FromTo(first, last));
        }
    }
    if specs.is_empty() { None } else { Some(specs) }
}

/// Evaluate a `Range` header value for a representation of `len` bytes.
pub fn evaluate_range(header: &str, len: u64) -> RangeOutcome {
    let Some(specs) = parse_specs(header) else {
        return RangeOutcome::Full;
    };
    let mut ranges: Vec<ByteRange> = specs
        .into_iter()
        .filter_map(|s| match s {
            Spec::FromTo(first, last) => (first < len).then(|| ByteRange {
                start: first,
                end: last.map_or(len - 1, |l| l.min(len - 1)),
            }),
            Spec::Suffix(n) => (n > 0 && len > 0).then(|| ByteRange {
                start: len.saturating_sub(n),
                end: len - 1,
            }),
        })
        .collect();
    if ranges.is_empty() {
        return RangeOutcome::Unsatisfiable;
    }
    ranges.sort_by_key(|r| (r.start, r.end));
    let mut merged: Vec<ByteRange> = Vec::with_capacity(ranges.len());
    for r in ranges {
        match merged.last_mut() {
            Some(m) if r.start <= m.end.saturating_add(1) => m.end = m.end.max(r.end),
            _ => merged.push(r),
        }
    }
    RangeOutcome::Partial(merged)
}

/// The validators of a representation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Validators {
    /// Strong entity tag including the quotes, e.g. `"1a-2b-3c"`.
    pub etag: String,
    /// Last modification time (seconds precision is what HTTP carries).
    pub modified: Option<SystemTime>,
}

impl Validators {
    /// `Last-Modified` header value.
    pub fn last_modified(&self) -> Option<String> {
        self.modified.map(httpdate::fmt_http_date)
    }
}

/// The request headers that make a request conditional.
#[derive(Debug, Clone, Default)]
pub struct Conditions<'a> {
    pub if_match: Option<&'a str>,
    pub if_none_match: Option<&'a str>,
    pub if_modified_since: Option<&'a str>,
    pub if_unmodified_since: Option<&'a str>,
    pub if_range: Option<&'a str>,
}

/// What the conditionals decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precondition {
    /// Proceed; `use_range` says whether a Range header may be honoured.
    Proceed { use_range: bool },
    /// 304 Not Modified (GET/HEAD).
    NotModified,
    /// 412 Precondition Failed.
    Failed,
}

fn strip_weak(tag: &str) -> &str {
    tag.strip_prefix("W/").unwrap_or(tag)
}

/// Entity tags listed in an If-Match / If-None-Match value (`*` kept as is).
fn tags(list: &str) -> impl Iterator<Item = &str> {
    list.split(',').map(str::trim).filter(|t| !t.is_empty())
}

fn secs(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_secs()
}

/// Evaluate conditional headers (RFC 9110 §13.2.2) for a GET or HEAD.
pub fn evaluate_conditions(c: &Conditions<'_>, v: &Validators) -> Precondition {
    let modified = v.modified.map(secs);
    // 1. If-Match: strong comparison.
    if let Some(im) = c.if_match {
        let ok = tags(im).any(|t| t == "*" || (!t.starts_with("W/") && t == v.etag));
        if !ok {
            return Precondition::Failed;
        }
    } else if let Some(ius) = c.if_unmodified_since {
        // 2. If-Unmodified-Since (ignored when the date is invalid).
        if let (Ok(d), Some(m)) = (httpdate::parse_http_date(ius), modified)
            && m > secs(d)
        {
            return Precondition::Failed;
        }
    }
    // 3. If-None-Match: weak comparison.
    if let Some(inm) = c.if_none_match {
        let hit = tags(inm).any(|t| t == "*" || strip_weak(t) == strip_weak(&v.etag));
        if hit {
            return Precondition::NotModified;
        }
    } else if let Some(ims) = c.if_modified_since {
        // 4. If-Modified-Since.
        if let (Ok(d), Some(m)) = (httpdate::parse_http_date(ims), modified)
            && m <= secs(d)
        {
            return Precondition::NotModified;
        }
    }
    // 5. If-Range: only a strong validator match lets Range apply.
    let use_range = match c.if_range.map(str::trim) {
        None => true,
        Some(ir) if ir.starts_with('"') => ir == v.etag,
        Some(ir) if ir.starts_with("W/") => false,
        Some(ir) => match (httpdate::parse_http_date(ir), modified) {
            (Ok(d), Some(m)) => secs(d) == m,
            _ => false,
        },
    };
    Precondition::Proceed { use_range }
}

/// A strong ETag from file identity, size and modification time.
pub fn file_etag(inode: u64, len: u64, modified: Option<SystemTime>) -> String {
    let nanos = modified
        .and_then(|m| m.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    format!("\"{inode:x}-{len:x}-{nanos:x}\"")
}

/// A strong ETag for an in-memory body (FNV-1a 64 of the bytes and length).
pub fn content_etag(body: &[u8]) -> String {
    content_etag_of(&[body])
}

/// [`content_etag`] of the concatenation of `parts`.
pub fn content_etag_of(parts: &[&[u8]]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut len = 0;
    for part in parts {
        for b in *part {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        len += part.len();
    }
    format!("\"{h:016x}-{len:x}\"")
}

/// The framing of a `multipart/byteranges` body: the header before each
/// part and the closing delimiter. The part bodies are the file bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Multipart {
    pub boundary: String,
    /// `(header bytes, range)` for each part, in order.
    pub parts: Vec<(String, ByteRange)>,
    pub trailer: String,
}

impl Multipart {
    pub fn new(boundary: &str, content_type: &str, ranges: &[ByteRange], total: u64) -> Self {
        let parts = ranges
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let lead = if i == 0 { "" } else { "\r\n" };
                (
                    format!(
                        "{lead}--{boundary}\r\nContent-Type: {content_type}\r\nContent-Range: {}\r\n\r\n",
                        r.content_range(total)
                    ),
                    *r,
                )
            })
            .collect();
        Multipart {
            boundary: boundary.to_string(),
            parts,
            trailer: format!("\r\n--{boundary}--\r\n"),
        }
    }
    /// Exact `Content-Length` of the whole multipart body.
    pub fn content_length(&self) -> u64 {
        self.parts
            .iter()
            .map(|(h, r)| h.len() as u64 + r.len())
            .sum::<u64>()
            + self.trailer.len() as u64
    }
    /// `Content-Type` header of the response.
    pub fn content_type(&self) -> String {
        format!("multipart/byteranges; boundary={}", self.boundary)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(start: u64, end: u64) -> ByteRange {
        ByteRange { start, end }
    }
    fn partial(v: &[(u64, u64)]) -> RangeOutcome {
        RangeOutcome::Partial(v.iter().map(|&(a, b)| r(a, b)).collect())
    }

    #[test]
    fn single_ranges() {
        assert_eq!(evaluate_range("bytes=0-99", 1000), partial(&[(0, 99)]));
        assert_eq!(evaluate_range("bytes=500-", 1000), partial(&[(500, 999)]));
        assert_eq!(evaluate_range("bytes=-100", 1000), partial(&[(900, 999)]));
        assert_eq!(evaluate_range("bytes=-5000", 1000), partial(&[(0, 999)]));
        assert_eq!(
            evaluate_range("bytes=990-5000", 1000),
            partial(&[(990, 999)])
        );
        assert_eq!(evaluate_range("BYTES = 1-1", 10), partial(&[(1, 1)]));
        assert_eq!(evaluate_range("bytes=9-9", 10), partial(&[(9, 9)]));
    }

    #[test]
    fn unsatisfiable() {
        assert_eq!(
            evaluate_range("bytes=1000-", 1000),
            RangeOutcome::Unsatisfiable
        );
        assert_eq!(
            evaluate_range("bytes=2000-3000", 1000),
            RangeOutcome::Unsatisfiable
        );
        assert_eq!(
            evaluate_range("bytes=-0", 1000),
            RangeOutcome::Unsatisfiable
        );
        assert_eq!(evaluate_range("bytes=0-", 0), RangeOutcome::Unsatisfiable);
        assert_eq!(evaluate_range("bytes=-5", 0), RangeOutcome::Unsatisfiable);
        // One satisfiable spec is enough.
        assert_eq!(evaluate_range("bytes=5000-,0-0", 1000), partial(&[(0, 0)]));
    }

    #[test]
    fn invalid_headers_are_ignored() {
        for h in [
            "bytes=",
            "bytes=abc",
            "bytes=5-1",
            "bytes=1-2-3",
            "items=0-1",
            "0-1",
            "bytes=--1",
            "bytes=+1-2",
            "bytes=1-+2",
            "bytes=99999999999999999999999-",
            "bytes= - ",
        ] {
            assert_eq!(evaluate_range(h, 1000), RangeOutcome::Full, "{h}");
        }
        let many = format!("bytes={}", vec!["0-0"; MAX_RANGES + 1].join(","));
        assert_eq!(evaluate_range(&many, 1000), RangeOutcome::Full);
        let ok = format!("bytes={}", vec!["0-0"; MAX_RANGES].join(","));
        assert_eq!(evaluate_range(&ok, 1000), partial(&[(0, 0)]));
    }

    #[test]
    fn multi_ranges_are_sorted_and_coalesced() {
        assert_eq!(
            evaluate_range("bytes=0-9,100-109", 1000),
            partial(&[(0, 9), (100, 109)])
        );
        assert_eq!(
            evaluate_range("bytes=100-109, 0-9", 1000),
            partial(&[(0, 9), (100, 109)])
        );
        // overlapping and adjacent ranges merge
        assert_eq!(
            evaluate_range("bytes=0-9,5-19,20-29,-10", 1000),
            partial(&[(0, 29), (990, 999)])
        );
        assert_eq!(evaluate_range("bytes=0-0,0-0,,", 10), partial(&[(0, 0)]));
        assert_eq!(evaluate_range("bytes=0-,-1", 10), partial(&[(0, 9)]));
    }

    fn v() -> Validators {
        Validators {
            etag: "\"abc\"".into(),
            modified: Some(UNIX_EPOCH + Duration::from_secs(1_700_000_000)),
        }
    }
    const LM: &str = "Tue, 14 Nov 2023 22:13:20 GMT"; // 1_700_000_000
    const LATER: &str = "Wed, 15 Nov 2023 22:13:20 GMT";
    const EARLIER: &str = "Mon, 13 Nov 2023 22:13:20 GMT";

    #[test]
    fn last_modified_format() {
        assert_eq!(v().last_modified().as_deref(), Some(LM));
    }

    #[test]
    fn if_none_match_and_if_modified_since() {
        let go = Precondition::Proceed { use_range: true };
        let c = |inm, ims| Conditions {
            if_none_match: inm,
            if_modified_since: ims,
            ..Default::default()
        };
        assert_eq!(evaluate_conditions(&c(None, None), &v()), go);
        for hit in ["\"abc\"", "W/\"abc\"", "\"x\", \"abc\"", "*"] {
            assert_eq!(
                evaluate_conditions(&c(Some(hit), None), &v()),
                Precondition::NotModified,
                "{hit}"
            );
        }
        assert_eq!(evaluate_conditions(&c(Some("\"abd\""), None), &v()), go);
        assert_eq!(
            evaluate_conditions(&c(None, Some(LM)), &v()),
            Precondition::NotModified
        );
        assert_eq!(
            evaluate_conditions(&c(None, Some(LATER)), &v()),
            Precondition::NotModified
        );
        assert_eq!(evaluate_conditions(&c(None, Some(EARLIER)), &v()), go);
        assert_eq!(evaluate_conditions(&c(None, Some("garbage")), &v()), go);
        // If-None-Match wins over If-Modified-Since.
        assert_eq!(evaluate_conditions(&c(Some("\"zz\""), Some(LM)), &v()), go);
    }

    #[test]
    fn if_match_and_if_unmodified_since() {
        let c = |im, ius| Conditions {
            if_match: im,
            if_unmodified_since: ius,
            ..Default::default()
        };
        let go = Precondition::Proceed { use_range: true };
        assert_eq!(evaluate_conditions(&c(Some("\"abc\""), None), &v()), go);
        assert_eq!(evaluate_conditions(&c(Some("*"), None), &v()), go);
        assert_eq!(
            evaluate_conditions(&c(Some("W/\"abc\""), None), &v()),
            Precondition::Failed
        );
        assert_eq!(
            evaluate_conditions(&c(Some("\"nope\""), None), &v()),
            Precondition::Failed
        );
        assert_eq!(evaluate_conditions(&c(None, Some(LM)), &v()), go);
        assert_eq!(
            evaluate_conditions(&c(None, Some(EARLIER)), &v()),
            Precondition::Failed
        );
    }

    #[test]
    fn if_range() {
        let c = |ir| Conditions {
            if_range: Some(ir),
            ..Default::default()
        };
        let ev = |ir| evaluate_conditions(&c(ir), &v());
        assert_eq!(ev("\"abc\""), Precondition::Proceed { use_range: true });
        assert_eq!(ev("\"old\""), Precondition::Proceed { use_range: false });
        assert_eq!(ev("W/\"abc\""), Precondition::Proceed { use_range: false });
        assert_eq!(ev(LM), Precondition::Proceed { use_range: true });
        assert_eq!(ev(EARLIER), Precondition::Proceed { use_range: false });
        assert_eq!(ev("junk"), Precondition::Proceed { use_range: false });
    }

    #[test]
    fn etags() {
        let t = UNIX_EPOCH + Duration::from_nanos(1_700_000_000_123_456_789);
        let a = file_etag(42, 1000, Some(t));
        assert!(a.starts_with('"') && a.ends_with('"'));
        assert_eq!(a, file_etag(42, 1000, Some(t)));
        assert_ne!(a, file_etag(42, 1001, Some(t)));
        assert_ne!(a, file_etag(43, 1000, Some(t)));
        assert_ne!(content_etag(b"a"), content_etag(b"b"));
        assert_eq!(content_etag(b"abc"), content_etag(b"abc"));
    }

    #[test]
    fn multipart_length_matches_rendering() {
        let ranges = [r(0, 9), r(100, 109)];
        let m = Multipart::new("B0UND", "application/octet-stream", &ranges, 1000);
        let data = vec![b'x'; 1000];
        let mut body = Vec::new();
        for (h, r) in &m.parts {
            body.extend_from_slice(h.as_bytes());
            body.extend_from_slice(&data[r.start as usize..=r.end as usize]);
        }
        body.extend_from_slice(m.trailer.as_bytes());
        assert_eq!(m.content_length(), body.len() as u64);
        let text = String::from_utf8(body).unwrap();
        assert!(text.starts_with("--B0UND\r\nContent-Type: application/octet-stream\r\nContent-Range: bytes 0-9/1000\r\n\r\nxxxxxxxxxx\r\n--B0UND\r\n"));
        assert!(text.ends_with("xxxxxxxxxx\r\n--B0UND--\r\n"));
        assert_eq!(m.content_type(), "multipart/byteranges; boundary=B0UND");
    }
}
