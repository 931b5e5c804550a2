//! The last response of a connection leaves with its FIN in one segment.
//!
//! Role: a request with `Connection: close` (wrk, curl, the installers'
//! one-shot fetches) is answered and the connection closed. hyper writes
//! the response (one `writev`: the socket has `TCP_NODELAY`, so it leaves
//! at once) and then shuts the write side down: a second segment carrying
//! only the FIN, and one more ACK from the client. nginx corks such a
//! socket and sends data and FIN together at close. [`LastSend`] does the
//! same without a `setsockopt` per connection: once a request says
//! `Connection: close` ([`asks_close`], the rule hyper applies: it then
//! answers it last), the handler marks the connection closing
//! ([`Activity::set_closing`]) before hyper writes the response, and the
//! response's bytes are sent with `MSG_MORE`: the kernel holds the last
//! partial segment until the shutdown appends the FIN and pushes both.
//!
//! Invariants: writes before the mark pass through untouched (vectored
//! too); nothing is held longer than until the next write, the shutdown or
//! the close (a connection hyper drops without a shutdown sends its held
//! bytes and FIN at close), and in any case the kernel's probe timer
//! (~200 ms) sends held bytes: a delay at worst, never a loss. HTTP/1.0
//! requests (closed without the header) and h2 are sent as before.

use std::io::IoSlice;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use hyper::header::{CONNECTION, HeaderMap};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::runtime::httpconn::Activity;
use crate::runtime::lazytcp::LazyTcp;

/// Whether request headers `h` carry the `close` connection option
/// (RFC 9112 §9.6; case-insensitive, in a comma-separated list).
pub(super) fn asks_close(h: &HeaderMap) -> bool {
    h.get_all(CONNECTION).iter().any(|v| {
        v.as_bytes()
            .split(|b| *b == b',')
            .any(|t| t.trim_ascii().eq_ignore_ascii_case(b"close"))
    })
}

/// A TCP stream that sends the bytes of a closing response with
/// `MSG_MORE` (see the module doc).
pub(super) struct LastSend {
    inner: LazyTcp,
    activity: Arc<Activity>,
}

impl LastSend {
    /// `inner`, its closing response told by `activity`.
    pub(super) fn new(inner: LazyTcp, activity: Arc<Activity>) -> LastSend {
        LastSend { inner, activity }
    }

    fn poll_send_more(
        &mut self,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        self.inner.poll_send_with_flags(cx, bufs, libc::MSG_MORE)
    }
}

impl AsyncRead for LastSend {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for LastSend {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.poll_write_vectored(cx, &[IoSlice::new(buf)])
    }
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        if this.activity.closing() {
            this.poll_send_more(cx, bufs)
        } else {
            Pin::new(&mut this.inner).poll_write_vectored(cx, bufs)
        }
    }
    fn is_write_vectored(&self) -> bool {
        true
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
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    #[test]
    fn close_is_a_connection_option() {
        let h = |vals: &[&str]| {
            let mut m = HeaderMap::new();
            for v in vals {
                m.append(CONNECTION, v.parse().unwrap());
            }
            asks_close(&m)
        };
        assert!(h(&["close"]));
        assert!(h(&["Close"]));
        assert!(h(&["keep-alive, close"]));
        assert!(h(&["te", " CLOSE "]));
        assert!(!h(&[]));
        assert!(!h(&["keep-alive"]));
        assert!(!h(&["closed"]));
    }

    /// A closing response and its FIN reach the client whole, in pieces
    /// or not; a keep-alive response before it is not held.
    #[tokio::test]
    async fn a_closing_response_arrives_whole_and_ends_the_stream() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let l = crate::runtime::lazytcp::LazyListener::new(l).unwrap();
        let mut client = tokio::net::TcpStream::connect(l.local_addr().unwrap())
            .await
            .unwrap();
        let (s, _) = l.accept().await.unwrap();
        s.set_nodelay(true).unwrap();
        let activity = Activity::new();
        let mut s = LastSend::new(s, activity.clone());
        let ka = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
        s.write_all(ka).await.unwrap();
        let mut got = vec![0; ka.len()];
        // Not held: it arrives while the server does nothing else.
        tokio::time::timeout(
            std::time::Duration::from_secs(5),
            client.read_exact(&mut got),
        )
        .await
        .unwrap()
        .unwrap();
        assert_eq!(&got, ka);
        activity.set_closing();
        let head = b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 70000\r\n\r\n";
        let body = vec![b'x'; 70_000];
        s.write_all(head).await.unwrap();
        s.write_all(&body).await.unwrap();
        s.shutdown().await.unwrap();
        let mut rest = Vec::new();
        client.read_to_end(&mut rest).await.unwrap();
        assert_eq!(rest.len(), head.len() + body.len());
        assert!(rest.starts_with(head));
    }
}
