//! Response bodies of the HTTP server: the small constructors (`empty`,
//! `full`, `plain`), the zero-copy body of shared ignition pieces, and the
//! streamed file body with its multipart (multi-range) form.
//!
//! Invariants: a file is read in [`CHUNK`]-sized `pread`s on the blocking
//! pool, one chunk in flight per response, `patches` applied to each chunk
//! in file offsets; every byte handed to hyper is counted once in
//! [`Stats::sent`]; a read error ends the stream after being yielded once.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use bytes::Bytes;
use futures_util::stream::{self, Stream, StreamExt};
use http_body_util::{BodyExt, Empty, Full, StreamBody};
use hyper::body::Frame;
use hyper::header::{self, HeaderValue};
use hyper::{Response, StatusCode};

use super::range::{self, ByteRange};
use super::stats::Stats;
use super::{Body, CHUNK, Resp};
use crate::boot::liveiso::Patches;

pub(super) fn empty() -> Body {
    Empty::new().map_err(|never| match never {}).boxed_unsync()
}

pub(super) fn full(b: impl Into<Bytes>) -> Body {
    Full::new(b.into())
        .map_err(|never| match never {})
        .boxed_unsync()
}

/// A body of shared pieces (an ignition body: slices of one cached file),
/// sent as they are, no copy: one frame per piece, its exact length known
/// (no per-response list of frames, no stream machinery).
struct Parts {
    parts: Arc<[Bytes]>,
    next: usize,
    left: u64,
}

impl hyper::body::Body for Parts {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<std::io::Result<Frame<Bytes>>>> {
        let Some(p) = self.parts.get(self.next).cloned() else {
            return std::task::Poll::Ready(None);
        };
        self.next += 1;
        self.left = self.left.saturating_sub(p.len() as u64);
        std::task::Poll::Ready(Some(Ok(Frame::data(p))))
    }

    fn is_end_stream(&self) -> bool {
        self.next >= self.parts.len()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        hyper::body::SizeHint::with_exact(self.left)
    }
}

pub(super) fn shared_body(parts: Arc<[Bytes]>) -> Body {
    let left = parts.iter().map(|p| p.len() as u64).sum();
    Parts {
        parts,
        next: 0,
        left,
    }
    .boxed_unsync()
}

pub(super) fn hv(s: &str) -> HeaderValue {
    HeaderValue::from_str(s).unwrap_or_else(|_| HeaderValue::from_static("invalid"))
}

pub(super) fn plain(status: StatusCode, msg: &str) -> Resp {
    let mut r = Response::new(full(format!("{msg}\n")));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

/// Strip the body of a HEAD answer, keeping `Content-Length`.
pub(super) fn head_only(mut r: Resp, len: u64) -> Resp {
    r.headers_mut().insert(header::CONTENT_LENGTH, len.into());
    *r.body_mut() = empty();
    r
}

/// `len` bytes of `file` from `offset`, in [`CHUNK`]s read on the blocking
/// pool, with `patches` (in file offsets) applied to each chunk.
pub(super) fn file_stream(
    file: Arc<File>,
    offset: u64,
    len: u64,
    stats: Arc<Stats>,
    patches: Arc<Patches>,
) -> impl Stream<Item = std::io::Result<Frame<Bytes>>> + Send + 'static {
    stream::unfold((file, offset, len), move |(file, off, left)| {
        let stats = stats.clone();
        let patches = patches.clone();
        async move {
            if left == 0 {
                return None;
            }
            let n = left.min(CHUNK as u64) as usize;
            let f = file.clone();
            let read = tokio::task::spawn_blocking(move || {
                let mut buf = vec![0u8; n];
                let mut got = 0;
                while got < n {
                    match f.read_at(&mut buf[got..], off + got as u64) {
                        Ok(0) => {
                            return Err(std::io::Error::new(
                                std::io::ErrorKind::UnexpectedEof,
                                "file shrank while being sent",
                            ));
                        }
                        Ok(k) => got += k,
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(e) => return Err(e),
                    }
                }
                patches.apply(off, &mut buf);
                Ok(Bytes::from(buf))
            })
            .await
            .unwrap_or_else(|e| Err(std::io::Error::other(e)));
            match read {
                Ok(b) => {
                    stats.sent(b.len() as u64);
                    Some((Ok(Frame::data(b)), (file, off + n as u64, left - n as u64)))
                }
                // Yield the error once, then end (state with nothing left).
                Err(e) => Some((Err(e), (file, off, 0))),
            }
        }
    })
}

pub(super) fn stream_body<S>(s: S) -> Body
where
    S: Stream<Item = std::io::Result<Frame<Bytes>>> + Send + 'static,
{
    BodyExt::boxed_unsync(StreamBody::new(s))
}

pub(super) fn multipart_stream(
    m: range::Multipart,
    file: Arc<File>,
    base: u64,
    stats: Arc<Stats>,
    patches: Arc<Patches>,
) -> impl Stream<Item = std::io::Result<Frame<Bytes>>> + Send + 'static {
    let trailer = Bytes::from(m.trailer);
    let parts: Vec<(Bytes, ByteRange)> = m
        .parts
        .into_iter()
        .map(|(h, r)| (Bytes::from(h), r))
        .collect();
    let stats2 = stats.clone();
    stream::iter(parts)
        .flat_map(move |(h, r)| {
            stats.sent(h.len() as u64);
            stream::once(async move { Ok(Frame::data(h)) }).chain(file_stream(
                file.clone(),
                base + r.start,
                r.len(),
                stats.clone(),
                patches.clone(),
            ))
        })
        .chain(stream::once(async move {
            stats2.sent(trailer.len() as u64);
            Ok(Frame::data(trailer))
        }))
}
