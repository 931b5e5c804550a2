//! Write progress of one HTTP connection: whether its writes are waiting
//! on a client that does not read.
//!
//! Role: a download from a client that never reads (a tiny receive
//! window, then nothing) keeps its request in flight for as long as the
//! client likes, and with it a connection slot and a descriptor: 300 such
//! downloads from 10 addresses gave a node none of its requests (audit
//! M5). [`WriteWatch`] sits between hyper and the stream (plain or TLS)
//! and marks the connection's [`WriteStall`] (kept in its
//! `httpconn::Activity`) when a write must wait for room in the send
//! buffer, and clears the mark as soon as a byte leaves.
//! `httpconn::serve` drops a connection stalled for
//! [`WRITE_STALL_TIMEOUT`], and the listener's admission may evict one
//! stalled for a moment when every slot is taken.
//!
//! Invariants: a write (or flush, or shutdown) that returns `Pending`
//! starts the stall unless one runs; any that makes progress (`Ready`
//! with bytes written, a completed flush) ends it; reads never touch it.
//! A write that completes at once reads one atomic and writes nothing: no
//! clock read and no syscall on the fast path.

use std::io::IoSlice;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Instant;

/// A connection whose writes (response bytes, TLS records) made no
/// progress this long, its send buffer full, is dropped: a client that
/// stopped reading holds no slot, descriptor or request for longer.
pub const WRITE_STALL_TIMEOUT: Duration = Duration::from_secs(30);

/// Since when a connection's writes have been waiting for room in its
/// send buffer with no byte sent, if they are.
#[derive(Debug)]
pub struct WriteStall {
    origin: Instant,
    /// One more than the milliseconds after `origin` when the stall
    /// began; 0: no write waits.
    since_ms: AtomicU64,
}

impl WriteStall {
    /// No stall; times counted from `origin` (the connection's start).
    pub fn new(origin: Instant) -> WriteStall {
        WriteStall {
            origin,
            since_ms: AtomicU64::new(0),
        }
    }

    /// How long the writes have waited without a byte sent; `None` while
    /// they progress or nothing waits.
    pub fn stalled_for(&self) -> Option<Duration> {
        match self.since_ms.load(Ordering::Acquire) {
            0 => None,
            since => Some(
                self.origin
                    .elapsed()
                    .saturating_sub(Duration::from_millis(since - 1)),
            ),
        }
    }

    /// A write found the send buffer full: the stall starts now unless it
    /// already had.
    pub fn waits(&self) {
        if self.since_ms.load(Ordering::Relaxed) == 0 {
            let now = u64::try_from(self.origin.elapsed().as_millis()).unwrap_or(u64::MAX - 1);
            self.since_ms.store(now + 1, Ordering::Release);
        }
    }

    /// Bytes left: no stall (one load when there was none).
    pub fn progressed(&self) {
        if self.since_ms.load(Ordering::Relaxed) != 0 {
            self.since_ms.store(0, Ordering::Release);
        }
    }
}

/// `inner`, its write progress noted in the [`WriteStall`] of `owner`
/// (the connection's `httpconn::Activity`).
pub struct WriteWatch<S, A> {
    inner: S,
    owner: Arc<A>,
}

impl<S, A: AsRef<WriteStall>> WriteWatch<S, A> {
    pub fn new(inner: S, owner: Arc<A>) -> WriteWatch<S, A> {
        WriteWatch { inner, owner }
    }

    /// Note what a write-side poll said: `Pending` waits, a result with
    /// `progressed` true is progress.
    fn note<T>(&self, r: &Poll<std::io::Result<T>>, progressed: impl FnOnce(&T) -> bool) {
        let stall = (*self.owner).as_ref();
        match r {
            Poll::Pending => stall.waits(),
            Poll::Ready(Ok(v)) if progressed(v) => stall.progressed(),
            Poll::Ready(_) => {}
        }
    }
}

impl<S: AsyncRead + Unpin, A> AsyncRead for WriteWatch<S, A> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin, A: AsRef<WriteStall>> AsyncWrite for WriteWatch<S, A> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.note(&r, |n| *n > 0);
        r
    }
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.note(&r, |n| *n > 0);
        r
    }
    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_flush(cx);
        this.note(&r, |_| true);
        r
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_shutdown(cx);
        this.note(&r, |_| true);
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    struct Owner(WriteStall);

    impl AsRef<WriteStall> for Owner {
        fn as_ref(&self) -> &WriteStall {
            &self.0
        }
    }

    /// A client that does not read stalls the writes once the buffers
    /// are full; reading ends the stall.
    #[tokio::test]
    async fn a_client_that_does_not_read_stalls_the_writes() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut client = tokio::net::TcpStream::connect(l.local_addr().unwrap())
            .await
            .unwrap();
        let (srv, _) = l.accept().await.unwrap();
        let activity = Arc::new(Owner(WriteStall::new(Instant::now())));
        let mut w = WriteWatch::new(srv, activity.clone());
        let chunk = vec![7u8; 64 * 1024];
        w.write_all(&chunk).await.unwrap();
        assert_eq!(activity.0.stalled_for(), None, "written at once");
        // Until the buffers are full: a write that has to wait.
        let mut sent = chunk.len();
        loop {
            let r = tokio::time::timeout(Duration::from_millis(200), w.write_all(&chunk)).await;
            if r.is_err() {
                break;
            }
            sent += chunk.len();
            assert!(sent < 256 << 20, "the buffers never filled");
        }
        assert!(activity.0.stalled_for().is_some(), "the write waits");
        // The client reads: the next write progresses.
        let reader = tokio::spawn(async move {
            let mut buf = vec![0u8; 1 << 20];
            let mut got = 0;
            while let Ok(n) = client.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                got += n;
            }
            got
        });
        w.write_all(b"x").await.unwrap();
        assert_eq!(activity.0.stalled_for(), None, "progress ends the stall");
        w.shutdown().await.unwrap();
        drop(w);
        assert!(reader.await.unwrap() > chunk.len());
    }
}
