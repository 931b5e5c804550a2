//! TCP connections that join the reactor only when they have to wait.
//!
//! Role: the listeners of protocols where the client speaks first (HTTP,
//! TLS). A one-shot request (an installer's `Connection: close` fetch of
//! its ignition) is answered without ever waiting: [`LazyListener`] asks
//! the kernel to hand over a connection once its first bytes have arrived
//! (`TCP_DEFER_ACCEPT`, as nginx's `deferred` and HAProxy's
//! `defer-accept`), and accepts it non-blocking without registering it;
//! [`LazyTcp`] tries each read and write on the plain socket. tokio
//! registers every accepted socket with epoll and deregisters it when it
//! is dropped: two `epoll_ctl`s, a registration and a trip through the
//! reactor before the first read (bench/RESULTS-http.md: with the
//! deferral, a new connection per ignition request went from 32.8 to
//! 24.0 µs of server CPU, nginx 30.6). The first operation
//! that would block (and the first read that hyper asks for, which waits
//! for the next request) turns the socket into a tokio [`TcpStream`],
//! which then serves every further operation.
//!
//! A client that connects and sends nothing stays in the kernel for
//! [`DEFER_ACCEPT`] and is then accepted like any other: it holds no
//! connection slot meanwhile, and the header timeout applies from then on.
//!
//! Invariants: no readiness is lost: a socket is registered only after an
//! operation returned `WouldBlock` (or before any was tried), and
//! `EPOLL_CTL_ADD` reports the socket's current state, so data that
//! arrived in between wakes the task. Once registered, a connection stays
//! registered; operations are never tried on the plain socket behind
//! tokio's back. A connection that fails to register reports the error to
//! the operation that needed it and stays unusable (it is closed when
//! dropped).

use std::io::{self, IoSlice, Read as _};
use std::net::{Shutdown, SocketAddr};
use std::os::fd::AsFd as _;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};
use tokio::net::{TcpListener, TcpStream};

/// How long the kernel keeps a connection that has sent nothing before
/// handing it to `accept` anyway (`TCP_DEFER_ACCEPT`, rounded to SYN-ACK
/// retransmissions: about 1 s). The header timeout starts then.
pub const DEFER_ACCEPT: std::time::Duration = std::time::Duration::from_secs(1);

/// A listening socket whose accepted connections are [`LazyTcp`]s.
///
/// Its readiness comes from tokio through a [`TcpStream`] that owns the
/// listening descriptor: tokio's `TcpListener` registers what it accepts
/// and has no readiness API, and `AsyncFd`'s safe constructors are
/// deprecated (tokio #8587). Only `readable`, `try_io` and `local_addr`
/// are used on it, all of which mean the same on a listening socket.
pub struct LazyListener {
    socket: TcpStream,
}

impl LazyListener {
    /// Take over `listener` (bound and registered by tokio), deferring
    /// each connection's accept until its first bytes ([`DEFER_ACCEPT`]).
    pub fn new(listener: TcpListener) -> io::Result<LazyListener> {
        let fd = std::os::fd::OwnedFd::from(listener.into_std()?);
        // Without it (not Linux), a request that was not there at accept
        // costs one `recv` more, and the connection is registered as before.
        if let Err(e) = deferaccept::set(fd.as_fd(), DEFER_ACCEPT.as_secs() as u32) {
            tracing::debug!("TCP_DEFER_ACCEPT: {e}");
        }
        Ok(LazyListener {
            socket: TcpStream::from_std(std::net::TcpStream::from(fd))?,
        })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.socket.local_addr()
    }

    /// The next connection, non-blocking and not registered.
    pub async fn accept(&self) -> io::Result<(LazyTcp, SocketAddr)> {
        loop {
            self.socket.readable().await?;
            let listener = socket2::SockRef::from(&self.socket);
            match self
                .socket
                .try_io(Interest::READABLE, || accept_nonblocking(&listener))
            {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                r => return r,
            }
        }
    }
}

/// `accept4` with `SOCK_NONBLOCK` (std's accept would need a second
/// syscall to make the socket non-blocking).
fn accept_nonblocking(l: &socket2::SockRef<'_>) -> io::Result<(LazyTcp, SocketAddr)> {
    let flags = libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK;
    let (sock, addr) = l.accept4(flags)?;
    let peer = addr
        .as_socket()
        .ok_or_else(|| io::Error::other("accepted a connection without an IP address"))?;
    Ok((LazyTcp::plain(sock.into()), peer))
}

/// A connected TCP socket, registered with the reactor on first wait.
pub struct LazyTcp {
    state: State,
}

enum State {
    /// Not registered (non-blocking).
    Plain(std::net::TcpStream),
    /// Registered: tokio does everything from here on.
    Registered(TcpStream),
    /// Registration failed; the socket is closed.
    Failed,
}

impl LazyTcp {
    /// A non-blocking socket not yet registered.
    fn plain(s: std::net::TcpStream) -> LazyTcp {
        LazyTcp {
            state: State::Plain(s),
        }
    }

    /// Whether the socket is registered with the reactor (tests).
    pub fn is_registered(&self) -> bool {
        matches!(self.state, State::Registered(_))
    }

    /// The registered stream, registering it now if it is not yet.
    fn registered(&mut self) -> io::Result<&mut TcpStream> {
        // A failed registration leaves `Failed` behind (the socket closed).
        self.state = match std::mem::replace(&mut self.state, State::Failed) {
            State::Plain(s) => State::Registered(TcpStream::from_std(s)?),
            other => other,
        };
        match &mut self.state {
            State::Registered(s) => Ok(s),
            _ => Err(io::Error::other(
                "the connection could not join the reactor",
            )),
        }
    }

    /// Set `TCP_NODELAY`.
    pub fn set_nodelay(&self, on: bool) -> io::Result<()> {
        match &self.state {
            State::Plain(s) => s.set_nodelay(on),
            State::Registered(s) => s.set_nodelay(on),
            State::Failed => Err(io::ErrorKind::NotConnected.into()),
        }
    }

    /// The local address of the connection (the address the client reached).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        match &self.state {
            State::Plain(s) => s.local_addr(),
            State::Registered(s) => s.local_addr(),
            State::Failed => Err(io::ErrorKind::NotConnected.into()),
        }
    }

    /// Read what has arrived into `buf` without waiting: `WouldBlock` when
    /// nothing has (then [`LazyTcp::readable`]).
    pub fn try_read(&self, buf: &mut [u8]) -> io::Result<usize> {
        match &self.state {
            State::Plain(s) => (&*s).read(buf),
            State::Registered(s) => s.try_read(buf),
            State::Failed => Err(io::ErrorKind::NotConnected.into()),
        }
    }

    /// Wait until a read may find bytes (registers the socket).
    pub async fn readable(&mut self) -> io::Result<()> {
        self.registered()?.readable().await
    }

    /// Send `bufs` with the `send` `flags` (e.g. `MSG_MORE`; 0 for a plain
    /// write): on the plain socket first, and through the reactor once it
    /// would block (then waiting while the socket buffer is full).
    pub fn poll_send_with_flags(
        &mut self,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
        flags: libc::c_int,
    ) -> Poll<io::Result<usize>> {
        let flags = flags | libc::MSG_NOSIGNAL;
        if let State::Plain(s) = &self.state {
            match socket2::SockRef::from(s).send_vectored_with_flags(bufs, flags) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                r => return Poll::Ready(r),
            }
        }
        let s = self.registered()?;
        loop {
            ready!(s.poll_write_ready(cx))?;
            let sock = socket2::SockRef::from(&*s);
            match s.try_io(Interest::WRITABLE, || {
                sock.send_vectored_with_flags(bufs, flags)
            }) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                r => return Poll::Ready(r),
            }
        }
    }
}

impl AsyncRead for LazyTcp {
    /// Reads through the registered stream: a read asked for after the
    /// first bytes ([`LazyTcp::try_read`]) is one that waits (the next
    /// request of a keep-alive connection), and tokio's reads need no
    /// zeroed buffer.
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(self.get_mut().registered()?).poll_read(cx, buf)
    }
}

impl AsyncWrite for LazyTcp {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_vectored(cx, &[IoSlice::new(buf)])
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.get_mut().poll_send_with_flags(cx, bufs, 0)
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().state {
            State::Registered(s) => Pin::new(s).poll_flush(cx),
            _ => Poll::Ready(Ok(())),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().state {
            State::Plain(s) => Poll::Ready(s.shutdown(Shutdown::Write)),
            State::Registered(s) => Pin::new(s).poll_shutdown(cx),
            State::Failed => Poll::Ready(Err(io::ErrorKind::NotConnected.into())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    /// What `client` reads until the server closes.
    async fn rest_of(mut client: TcpStream) -> Vec<u8> {
        let mut got = Vec::new();
        client.read_to_end(&mut got).await.unwrap();
        got
    }

    async fn listener() -> LazyListener {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        LazyListener::new(l).unwrap()
    }

    /// The one-shot request: read, answered and closed on the plain
    /// socket, never registered with the reactor.
    #[tokio::test]
    async fn a_request_that_came_with_its_connection_never_joins_the_reactor() {
        let l = listener().await;
        let mut client = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
        client.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
        let (mut conn, peer) = l.accept().await.unwrap();
        assert_eq!(peer, client.local_addr().unwrap());
        let mut buf = [0u8; 64];
        let n = conn.try_read(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"GET / HTTP/1.1\r\n\r\n");
        conn.write_all(b"HTTP/1.1 200 OK\r\n\r\n").await.unwrap();
        conn.shutdown().await.unwrap();
        assert!(!conn.is_registered(), "nothing had to wait");
        drop(conn);
        assert_eq!(rest_of(client).await, b"HTTP/1.1 200 OK\r\n\r\n");
    }

    /// A read that finds nothing registers the socket; what arrives later
    /// wakes it, and it is served as before.
    #[tokio::test]
    async fn a_connection_that_has_to_wait_joins_the_reactor_and_is_woken() {
        let l = listener().await;
        let mut client = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
        client.write_all(b"a").await.unwrap();
        let (mut conn, _) = l.accept().await.unwrap();
        let mut buf = [0u8; 8];
        assert_eq!(conn.try_read(&mut buf).unwrap(), 1);
        let e = conn.try_read(&mut buf).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
        let later = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            client.write_all(b"bc").await.unwrap();
            client
        });
        tokio::time::timeout(Duration::from_secs(5), conn.readable())
            .await
            .expect("woken by the late bytes")
            .unwrap();
        assert!(conn.is_registered());
        let mut rest = [0u8; 2];
        conn.read_exact(&mut rest).await.unwrap();
        assert_eq!(&rest, b"bc");
        let client = later.await.unwrap();
        conn.write_all(b"ok").await.unwrap();
        drop(conn);
        assert_eq!(rest_of(client).await, b"ok");
    }

    /// A client that connects and says nothing is handed over only after
    /// the kernel's deferral; one that spoke after it comes first.
    #[tokio::test]
    async fn a_silent_connection_is_accepted_after_the_deferral() {
        let l = listener().await;
        let addr = l.local_addr().unwrap();
        let silent = TcpStream::connect(addr).await.unwrap();
        let mut talker = TcpStream::connect(addr).await.unwrap();
        talker.write_all(b"GET").await.unwrap();
        let (_, first) = l.accept().await.unwrap();
        assert_eq!(first, talker.local_addr().unwrap());
        let early = tokio::time::timeout(Duration::from_millis(300), l.accept()).await;
        assert!(early.is_err(), "the silent connection was accepted at once");
        let (_, second) = tokio::time::timeout(Duration::from_secs(10), l.accept())
            .await
            .expect("accepted once the deferral ran out")
            .unwrap();
        assert_eq!(second, silent.local_addr().unwrap());
    }
}
