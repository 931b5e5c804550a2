//! A connection's first bytes: read (by [`sniff`], before hyper) until
//! they tell HTTP/1 from h2 ([`Proto`]), then handed to hyper again
//! ([`Replay`]) with the builder for that protocol ([`Builders`]), so
//! hyper-util does not sniff a second time.
//!
//! Invariants: nothing is read beyond what tells the protocol (one `recv`
//! for a request that came with its connection); the bytes read are
//! replayed whole, before anything else, to hyper.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf as _, Bytes};
use hyper_util::rt::TokioExecutor;
use hyper_util::server::conn::auto;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::super::lazytcp::LazyTcp;

/// The HTTP/2 connection preface (RFC 9113 §3.4).
pub(super) const H2_PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// The protocol a connection speaks, from its first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proto {
    /// Anything but the h2 preface (hyper answers what is not HTTP/1).
    Http1,
    /// The h2 connection preface (h2c with prior knowledge).
    H2,
}

/// One connection builder per [`Proto`], so hyper-util does not sniff the
/// version again (its sniffing reads the first 24 bytes into a buffer of
/// its own: one more `recv` and allocation per connection).
pub struct Builders {
    h1: auto::Builder<TokioExecutor>,
    h2: auto::Builder<TokioExecutor>,
}

impl Builders {
    /// The HTTP/1-only and h2-only copies of `b` (configured as wanted).
    pub fn new(b: auto::Builder<TokioExecutor>) -> Builders {
        Builders {
            h1: b.clone().http1_only(),
            h2: b.http2_only(),
        }
    }

    pub(super) fn get(&self, p: Proto) -> &auto::Builder<TokioExecutor> {
        match p {
            Proto::Http1 => &self.h1,
            Proto::H2 => &self.h2,
        }
    }
}

/// What the first bytes say, as hyper-util would judge them: h2 when
/// they are the whole preface, HTTP/1 as soon as they differ from it,
/// `None` while they are a prefix of it.
pub(super) fn proto_of(first: &[u8]) -> Option<Proto> {
    let n = first.len().min(H2_PREFACE.len());
    if first[..n] != H2_PREFACE[..n] {
        Some(Proto::Http1)
    } else if n == H2_PREFACE.len() {
        Some(Proto::H2)
    } else {
        None
    }
}

/// Bytes read before the protocol was known: what one `recv` brings of a
/// typical request head (more is left to hyper).
const FIRST_READ: usize = 4096;

thread_local! {
    /// Where [`sniff`]'s `recv`s land: one zeroed buffer per runtime
    /// thread, reused (never held across an `.await`).
    static FIRST: std::cell::RefCell<Box<[u8]>> =
        std::cell::RefCell::new(vec![0; FIRST_READ].into_boxed_slice());
}

/// One non-blocking `recv` of up to [`FIRST_READ`] bytes, appended to
/// `got`: `Ok(0)` at EOF, `WouldBlock` when nothing has arrived.
fn read_first(stream: &LazyTcp, got: &mut Vec<u8>) -> std::io::Result<usize> {
    FIRST.with(|b| {
        let mut buf = b.borrow_mut();
        let n = stream.try_read(&mut buf)?;
        got.extend_from_slice(&buf[..n]);
        Ok(n)
    })
}

/// Read until the bytes received tell the protocol (see [`proto_of`]):
/// the protocol and the bytes, `None` when the client closed first.
///
/// The first `recv` is tried at once: a request that arrived with its
/// connection is read without registering the socket ([`LazyTcp`]). Each
/// `recv` lands in a per-thread buffer and only the bytes received are
/// kept (a request head: a small allocation). A 4 KiB heap buffer per
/// connection cost ~700 instructions in glibc's large-chunk path, and a
/// zeroed stack buffer a 4 KiB `memset` per connection.
pub(super) async fn sniff(stream: &mut LazyTcp) -> Option<(Proto, Bytes)> {
    let mut got: Vec<u8> = Vec::new();
    loop {
        match read_first(stream, &mut got) {
            Ok(0) => return None,
            Ok(_) => {
                if let Some(p) = proto_of(&got) {
                    return Some((p, Bytes::from(got)));
                }
                // A prefix of the h2 preface: read on (or wait for more).
            }
            // A readiness without bytes (seen on fresh sockets) is
            // WouldBlock too: it clears the readiness and we wait again.
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                stream.readable().await.ok()?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
}

/// A stream whose first bytes, read by [`request_start`], are read again
/// before the rest. Writes pass through (vectored ones included).
pub struct Replay<S> {
    first: Bytes,
    inner: S,
}

impl<S> Replay<S> {
    pub fn new(inner: S, first: Bytes) -> Replay<S> {
        Replay { first, inner }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Replay<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        if this.first.is_empty() {
            return Pin::new(&mut this.inner).poll_read(cx, buf);
        }
        let n = this.first.len().min(buf.remaining());
        buf.put_slice(&this.first[..n]);
        this.first.advance(n);
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Replay<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}
