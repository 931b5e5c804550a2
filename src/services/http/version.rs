//! `HTTP/1.x` request lines with a minor version above 1 read as `HTTP/1.1`.
//!
//! Role: RFC 9112 §2.6 — a server receiving a higher minor version of
//! HTTP/1 than it implements answers as if it were the highest it
//! implements (nginx serves `HTTP/1.2` as 1.1); hyper's parser (httparse)
//! only accepts `1.0` and `1.1` and answers 400. [`MinorVersion`] wraps the
//! connection and rewrites the minor digit of each request line's
//! `HTTP/1.<2-9>` to `1` as the bytes are read, before hyper sees them.
//!
//! Invariants: only the one digit of a version token is ever changed (same
//! length, no buffering, writes pass through untouched, vectored writes
//! included); the token is the one after the request line's second space,
//! so a target containing `HTTP/1.2` is left alone; a request line is one
//! at the start of the stream or after a head's blank line (bytes of a
//! request body we never read could in theory be matched; they are
//! discarded anyway); an `HTTP/2` preface (h2c) turns the rewrite off for
//! the rest of the connection.

use std::io::IoSlice;
use std::pin::Pin;
use std::sync::LazyLock;
use std::task::{Context, Poll};

use memchr::memmem;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

const TOKEN: &[u8; 7] = b"HTTP/1.";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Before a request line (empty lines allowed).
    LineStart,
    /// In the method or target; `spaces` seen so far.
    Line { spaces: u8 },
    /// In the version token; `at` bytes of it seen and matching `TOKEN`.
    Version { at: usize },
    /// After the request line: headers until a blank line; `crlf` counts the
    /// `\r\n\r\n` bytes seen in a row.
    Head { crlf: u8 },
    /// h2c or anything not HTTP/1: no more rewriting.
    Off,
}

/// The version rewriter over an I/O stream.
pub(super) struct MinorVersion<S> {
    inner: S,
    state: State,
}

impl<S> MinorVersion<S> {
    pub(super) fn new(inner: S) -> Self {
        MinorVersion {
            inner,
            state: State::LineStart,
        }
    }
}

/// The end of a request head.
const HEAD_END: &[u8; 4] = b"\r\n\r\n";

static HEAD_END_FINDER: LazyLock<memmem::Finder<'static>> =
    LazyLock::new(|| memmem::Finder::new(HEAD_END));

/// How many bytes of [`HEAD_END`] `buf` ends with (the longest suffix of
/// `buf` that is a prefix of it): the `crlf` count stepping would reach.
fn head_end_prefix(buf: &[u8]) -> u8 {
    (1..=3u8)
        .rev()
        .find(|&n| buf.ends_with(&HEAD_END[..usize::from(n)]))
        .unwrap_or(0)
}

/// Advance `state` over `buf`, rewriting version digits in place. Runs
/// of bytes that cannot change the state (the header lines up to the
/// head's blank line, the method and target) are skipped with SIMD
/// searches (`memchr`), not stepped through.
fn rewrite(state: &mut State, buf: &mut [u8]) {
    let mut i = 0;
    while i < buf.len() {
        let skip = match *state {
            State::Off => return,
            State::Head { crlf: 0 } => {
                let rest = &buf[i..];
                let Some(k) = HEAD_END_FINDER.find(rest) else {
                    *state = State::Head {
                        crlf: head_end_prefix(rest),
                    };
                    return;
                };
                i += k + HEAD_END.len();
                *state = State::LineStart;
                continue;
            }
            State::Line { .. } => memchr::memchr2(b' ', b'\n', &buf[i..]),
            _ => Some(0),
        };
        let Some(k) = skip else { return };
        i += k;
        *state = step(*state, &mut buf[i]);
        i += 1;
    }
}

/// One byte of [`rewrite`].
fn step(state: State, b: &mut u8) -> State {
    match state {
        State::Off => State::Off,
        State::LineStart if *b == b'\r' || *b == b'\n' => State::LineStart,
        State::LineStart => State::Line { spaces: 0 },
        State::Line { spaces } if *b == b' ' => {
            if spaces == 1 {
                State::Version { at: 0 }
            } else {
                State::Line { spaces: spaces + 1 }
            }
        }
        State::Line { .. } if *b == b'\n' => State::LineStart,
        s @ State::Line { .. } => s,
        State::Version { at } if at < TOKEN.len() => {
            if *b == TOKEN[at] {
                State::Version { at: at + 1 }
            } else if at == 5 && *b == b'2' {
                // `HTTP/2`: the h2c preface.
                State::Off
            } else {
                State::Head { crlf: 0 }
            }
        }
        State::Version { .. } => {
            if (b'2'..=b'9').contains(b) {
                *b = b'1';
            }
            State::Head { crlf: 0 }
        }
        State::Head { crlf } => {
            let want = if crlf % 2 == 0 { b'\r' } else { b'\n' };
            match (*b == want, crlf) {
                (true, 3) => State::LineStart,
                (true, n) => State::Head { crlf: n + 1 },
                (false, _) if *b == b'\r' => State::Head { crlf: 1 },
                (false, _) => State::Head { crlf: 0 },
            }
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for MinorVersion<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let r = Pin::new(&mut this.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = r {
            rewrite(&mut this.state, &mut buf.filled_mut()[before..]);
        }
        r
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for MinorVersion<S> {
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
        bufs: &[IoSlice<'_>],
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Feed `input` in chunks of `step` bytes.
    fn run(input: &[u8], step: usize) -> Vec<u8> {
        let mut state = State::LineStart;
        let mut out = input.to_vec();
        for chunk in out.chunks_mut(step) {
            rewrite(&mut state, chunk);
        }
        out
    }

    /// The skipping loop agrees with stepping every byte, chunked or not.
    #[test]
    fn skipping_agrees_with_stepping_each_byte() {
        let inputs: [&[u8]; 6] = [
            b"GET / HTTP/1.2\r\nA\r\r\n\n\r\n\r\r\n\r\nGET / HTTP/1.2\r\n\r\r\n\r\n\r\nX",
            b"GET /a HTTP/1.2\r\nHost: a\r\nX: y\r\n\r\nHEAD /b HTTP/1.7\r\n\r\n",
            b"\r\n\nGET / HTTP/1.2\r\nA: \r\r\n\r\n\rGET / HTTP/1.3\n\r\n\r\n",
            b"GET  HTTP/1.2 x\nGET / HTTP/1.4\r\n\r\nGET\n / HTTP/1.5\r\n\r\n",
            b"GET / HTTP/1.9\r\nA: b\r\n\r\r\n\r\nPUT / HTTP/1.2\r\n\r\n",
            b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\nGET / HTTP/1.2\r\n",
        ];
        for input in inputs {
            let mut state = State::LineStart;
            let mut want = input.to_vec();
            for b in want.iter_mut() {
                state = step(state, b);
            }
            for chunk in [1, 2, 5, 13, 1000] {
                assert_eq!(
                    run(input, chunk),
                    want,
                    "{:?}",
                    String::from_utf8_lossy(input)
                );
            }
        }
    }

    #[test]
    fn rewrites_minor_versions_of_request_lines_only() {
        let cases: [(&[u8], &[u8]); 7] = [
            (
                b"GET / HTTP/1.2\r\nHost: a\r\n\r\n",
                b"GET / HTTP/1.1\r\nHost: a\r\n\r\n",
            ),
            (b"GET / HTTP/1.1\r\n\r\n", b"GET / HTTP/1.1\r\n\r\n"),
            (b"GET / HTTP/1.0\r\n\r\n", b"GET / HTTP/1.0\r\n\r\n"),
            (
                b"GET /HTTP/1.2 HTTP/1.9\r\nX: HTTP/1.2\r\n\r\nGET / HTTP/1.5\r\n\r\n",
                b"GET /HTTP/1.2 HTTP/1.1\r\nX: HTTP/1.2\r\n\r\nGET / HTTP/1.1\r\n\r\n",
            ),
            (b"\r\nGET / HTTP/1.3\r\n\r\n", b"\r\nGET / HTTP/1.1\r\n\r\n"),
            (
                b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\nGET / HTTP/1.2\r\n",
                b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\nGET / HTTP/1.2\r\n",
            ),
            (b"GET / HTTP/2.2\r\n\r\n", b"GET / HTTP/2.2\r\n\r\n"),
        ];
        for (input, want) in cases {
            for step in [1, 2, 3, 7, 64] {
                assert_eq!(
                    run(input, step),
                    want,
                    "{} (step {step})",
                    String::from_utf8_lossy(input)
                );
            }
        }
    }
}
