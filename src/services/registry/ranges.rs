//! Byte ranges of a blob and the headers of its answer (pure, no
//! sockets): the one range a `Range` header asks of a `size`-byte blob, the
//! 206 and 416 answers, and the headers every blob answer carries, as
//! `docker-registry` gives them. Stored blobs (`pull.rs`) and blobs still
//! being pulled through (`pullblob.rs`) answer alike through these; the HA
//! peer's resumed blob copies (`replica.rs`) read ranges with [`range`].
//!
//! Invariant: a range is inside the blob (`start <= end < size`) or
//! refused; a multi-range or non-`bytes` header means the whole blob.

use bytes::Bytes;
use hyper::{Response, StatusCode};

use super::names::Digest;
use super::reply::{self, Resp, set};

/// One byte range of a `size`-byte blob: `Ok(None)` the whole blob,
/// `Err(())` unsatisfiable.
pub(super) fn range(header: Option<&str>, size: u64) -> Result<Option<(u64, u64)>, ()> {
    let Some(spec) = header.and_then(|h| h.trim().strip_prefix("bytes=")) else {
        return Ok(None);
    };
    if spec.contains(',') {
        return Ok(None);
    }
    let (a, b) = spec.split_once('-').ok_or(())?;
    let (a, b) = (a.trim(), b.trim());
    let (start, end) = if a.is_empty() {
        let n: u64 = b.parse().map_err(|_| ())?;
        if n == 0 {
            return Err(());
        }
        (size.saturating_sub(n), size.saturating_sub(1))
    } else {
        let s: u64 = a.parse().map_err(|_| ())?;
        let e: u64 = if b.is_empty() {
            size.saturating_sub(1)
        } else {
            b.parse::<u64>()
                .map_err(|_| ())?
                .min(size.saturating_sub(1))
        };
        if !b.is_empty() && b.parse::<u64>().map_err(|_| ())? < s {
            return Err(());
        }
        (s, e)
    };
    if size == 0 || start >= size {
        return Err(());
    }
    Ok(Some((start, end)))
}

/// The answer to a byte range past the end of a `size`-byte blob, as
/// distribution gives it.
pub(super) fn unsatisfiable(d: &Digest, size: u64) -> Resp {
    let mut r = Response::new(reply::full(Bytes::from_static(
        b"invalid range: failed to overlap\n",
    )));
    *r.status_mut() = StatusCode::RANGE_NOT_SATISFIABLE;
    set(&mut r, "Content-Range", &format!("bytes */{size}"));
    set(&mut r, "Content-Type", "text/plain; charset=utf-8");
    set(&mut r, "Content-Length", "33");
    set(&mut r, "Docker-Content-Digest", &d.to_string());
    set(&mut r, "Etag", &format!("\"{d}\""));
    r
}

/// Make `r` the 206 answer for the bytes `start..=last` of a `size`-byte
/// blob.
pub(super) fn partial(r: &mut Resp, start: u64, last: u64, size: u64) {
    *r.status_mut() = StatusCode::PARTIAL_CONTENT;
    set(r, "Content-Range", &format!("bytes {start}-{last}/{size}"));
}

/// The headers of every answer with blob `d`'s bytes (whole or a range).
pub(super) fn blob_headers(r: &mut Resp, d: &Digest) {
    set(r, "Content-Type", "application/octet-stream");
    set(r, "Docker-Content-Digest", &d.to_string());
    set(r, "Etag", &format!("\"{d}\""));
    set(r, "Accept-Ranges", "bytes");
    set(r, "Cache-Control", "max-age=31536000");
}

#[cfg(test)]
mod tests {
    use super::range;

    #[test]
    fn ranges() {
        assert_eq!(range(None, 10), Ok(None));
        assert_eq!(range(Some("bytes=0-4"), 10), Ok(Some((0, 4))));
        assert_eq!(range(Some("bytes=5-"), 10), Ok(Some((5, 9))));
        assert_eq!(range(Some("bytes=-3"), 10), Ok(Some((7, 9))));
        assert_eq!(range(Some("bytes=8-100"), 10), Ok(Some((8, 9))));
        assert_eq!(range(Some("bytes=10-"), 10), Err(()));
        assert_eq!(range(Some("bytes=5-2"), 10), Err(()));
        assert_eq!(range(Some("bytes=x-"), 10), Err(()));
        assert_eq!(range(Some("bytes=0-1,3-4"), 10), Ok(None));
        assert_eq!(range(Some("items=0-1"), 10), Ok(None));
    }
}
