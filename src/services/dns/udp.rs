//! The DNS UDP hot path: worker threads that answer straight from the
//! socket, next to the async runtime rather than on it.
//!
//! Role: serve one bound UDP socket with [`UDP_WORKERS`] OS threads. Each
//! blocks in `recvfrom` on the shared socket and answers what needs no
//! waiting itself (packet-cache hits, the in-memory zones, errors,
//! REFUSED). What must wait (a forwarded query, or a local answer that
//! did not complete at its first poll) goes to the main runtime as a task.
//!
//! Why not a task on the runtime: under CPU contention a single
//! runtime thread that is preempted stalls every query behind it for
//! milliseconds (measured with `perf sched` at a fixed 20k q/s on a
//! contended core: the one crc thread waited 3-9 ms on average for the CPU
//! each time it was switched out, Knot's two UDP threads 0.03 ms; Knot
//! with one UDP worker was nearly as slow as crc). Two threads on one socket let
//! one answer while the other waits for the CPU, and a blocking `recvfrom`
//! costs two syscalls per query (receive, send) instead of the readiness
//! loop's four (receive, `EAGAIN`, `epoll_wait`, send).
//!
//! Invariants:
//! - One socket, bound in `stage` (no `SO_REUSEPORT`: another process
//!   can never share the port). A datagram wakes exactly one blocked
//!   `recvfrom` (the kernel's exclusive wait), so there is no thundering
//!   herd.
//! - A worker never waits on anything but the socket: a query whose
//!   answer is not ready at the first poll leaves the thread. Forwarded
//!   queries are bounded by [`super::MAX_FORWARDS_IN_FLIGHT`] (beyond:
//!   dropped, the client retries) and their answers are sent with
//!   `MSG_DONTWAIT`, so a full send buffer never blocks the runtime.
//! - Stopping (token cancelled, or the task dropped) sets the stop flag
//!   and wakes every blocked worker at once with an empty datagram to the
//!   socket's own address ([`RECV_TIMEOUT`] is only the backstop). The task
//!   returns after every worker has exited; the runtime's tasks still in
//!   flight get [`drain::DNS_QUERIES`], then are aborted. A worker that
//!   exits on its own (a panic) fails the task, hence the service.

use std::future::Future;
use std::net::{SocketAddr, UdpSocket};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use anyhow::Context as _;
use arc_swap::ArcSwap;
use hickory_server::net::xfer::Protocol;
use socket2::{SockAddr, SockRef};
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::debug;

use super::MAX_FORWARDS_IN_FLIGHT;
use super::handler::{Core, Prepared, Route};
use crate::runtime::drain;
use crate::runtime::sync::LockExt as _;
use std::sync::atomic::Ordering::Relaxed;

/// Threads serving one UDP socket (Knot's default on a 2-core host): one
/// answers while the other is preempted.
pub const UDP_WORKERS: usize = 2;
/// How long a blocked receive waits before re-checking the stop flag
/// (a backstop: stopping wakes the workers at once).
pub const RECV_TIMEOUT: Duration = Duration::from_millis(250);

/// What the workers of one socket share.
struct Shared {
    sock: Arc<UdpSocket>,
    cores: Arc<ArcSwap<Core>>,
    stop: AtomicBool,
    forwards: Arc<Semaphore>,
    /// Answers that wait, on the main runtime.
    inflight: Mutex<JoinSet<()>>,
    rt: tokio::runtime::Handle,
}

impl Shared {
    /// Run `fut` on the main runtime and send its answer, if any, to `to`.
    fn spawn_answer<F>(&self, fut: F, to: SocketAddr)
    where
        F: Future<Output = Option<Vec<u8>>> + Send + 'static,
    {
        let sock = self.sock.clone();
        let mut set = self.inflight.locked();
        while set.try_join_next().is_some() {}
        set.spawn_on(
            async move {
                if let Some(resp) = fut.await {
                    send_nowait(&sock, &resp, to);
                }
            },
            &self.rt,
        );
    }

    /// Set the stop flag and wake the blocked workers with one empty
    /// datagram each to the socket's own address. (A blocked `recvfrom`
    /// cannot be interrupted safely otherwise: after `shutdown(SHUT_RD)`
    /// it returns no source address, which std's `recv_from` asserts on,
    /// and signals need unsafe code.) A lost wake-up only means the
    /// worker notices at its [`RECV_TIMEOUT`].
    fn request_stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        let Ok(mut to) = self.sock.local_addr() else {
            return;
        };
        let from: SocketAddr = if to.is_ipv4() {
            (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
        } else {
            (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
        };
        if to.ip().is_unspecified() {
            to.set_ip(match to {
                SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
                SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
            });
        }
        if let Ok(waker) = UdpSocket::bind(from) {
            for _ in 0..UDP_WORKERS {
                let _ = waker.send_to(&[], to);
            }
        }
    }
}

/// Stops the workers when dropped (the task ended or was aborted).
struct StopOnDrop(Arc<Shared>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.request_stop();
    }
}

/// Tells the task that a worker exited (also on a panic).
struct Exited(mpsc::Sender<()>);

impl Drop for Exited {
    fn drop(&mut self) {
        let _ = self.0.try_send(());
    }
}

/// Serve `sock` with [`UDP_WORKERS`] threads until `shutdown`; see the
/// module invariants. Must be called on the runtime that forwarded
/// queries should run on.
pub async fn serve(
    sock: tokio::net::UdpSocket,
    cores: Arc<ArcSwap<Core>>,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let sock = sock.into_std().context("dns udp socket")?;
    sock.set_nonblocking(false).context("dns udp socket")?;
    sock.set_read_timeout(Some(RECV_TIMEOUT))
        .context("dns udp socket")?;
    // A worker's send never hangs on a full buffer for longer either.
    sock.set_write_timeout(Some(RECV_TIMEOUT))
        .context("dns udp socket")?;
    let shared = Arc::new(Shared {
        sock: Arc::new(sock),
        cores,
        stop: AtomicBool::new(false),
        forwards: Arc::new(Semaphore::new(MAX_FORWARDS_IN_FLIGHT)),
        inflight: Mutex::new(JoinSet::new()),
        rt: tokio::runtime::Handle::current(),
    });
    let stopper = StopOnDrop(shared.clone());
    let (tx, mut exited) = mpsc::channel::<()>(UDP_WORKERS);
    let mut started = 0;
    let mut spawn_err = None;
    for i in 0..UDP_WORKERS {
        let (s, done) = (shared.clone(), Exited(tx.clone()));
        // The worker logs where its starter logs (an embedded appliance's
        // own log, not only the process's).
        let log = tracing::dispatcher::get_default(Clone::clone);
        let r = std::thread::Builder::new()
            .name(format!("dns-udp-{i}"))
            .spawn(move || {
                // Dropped in reverse: the socket is released before the
                // exit is reported.
                let _done = done;
                let s = s;
                tracing::dispatcher::with_default(&log, || worker(&s));
            });
        match r {
            Ok(_) => started += 1,
            Err(e) => {
                spawn_err = Some(e);
                break;
            }
        }
    }
    drop(tx);
    let mut left = started;
    let unexpected = match spawn_err {
        Some(e) => Some(anyhow::Error::new(e).context("starting a dns udp worker thread")),
        None => tokio::select! {
            _ = shutdown.cancelled() => None,
            _ = exited.recv() => {
                left -= 1;
                Some(anyhow::anyhow!("a dns udp worker thread ended"))
            }
        },
    };
    drop(stopper);
    // Every worker sends once, when it exits (also on a panic).
    for _ in 0..left {
        if exited.recv().await.is_none() {
            break;
        }
    }
    let mut inflight = std::mem::take(&mut *shared.inflight.locked());
    let drain = async { while inflight.join_next().await.is_some() {} };
    if tokio::time::timeout(drain::DNS_QUERIES, drain)
        .await
        .is_err()
    {
        inflight.abort_all();
    }
    match unexpected {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// One worker: receive, answer, repeat until stopped.
fn worker(s: &Shared) {
    // Tasks and timers created here belong to the main runtime.
    let _rt = s.rt.enter();
    let mut buf = vec![0u8; 65_535];
    let mut out = Vec::with_capacity(1232);
    while !s.stop.load(Ordering::SeqCst) {
        let (n, src) = match s.sock.recv_from(&mut buf) {
            Ok(x) => x,
            Err(e) => {
                // Timeouts (the stop check), ICMP errors from earlier
                // sends (ECONNREFUSED) and the like: go on.
                if !matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) {
                    debug!("dns udp recv: {e}");
                }
                continue;
            }
        };
        if s.stop.load(Ordering::SeqCst) {
            break;
        }
        answer_one(s, &buf[..n], src, &mut out);
    }
}

/// Answer one datagram from `src` (`out` is a reusable buffer).
fn answer_one(s: &Shared, msg: &[u8], src: SocketAddr, out: &mut Vec<u8>) {
    // The catalog current when the query arrived answers it, even if a
    // reload swaps it meanwhile.
    let core = s.cores.load_full();
    if !answerable(src) {
        core.stats.malformed.fetch_add(1, Relaxed);
        debug!(%src, "DNS query from an address that cannot be answered; dropped");
        return;
    }
    if core.cached_into(msg, src.ip(), Protocol::Udp, out) {
        send(&s.sock, out, src);
        return;
    }
    let (req, route) = match core.prepare(msg, src, Protocol::Udp) {
        Prepared::Drop => return,
        Prepared::Reply(r) => {
            send(&s.sock, &r, src);
            return;
        }
        Prepared::Query(req, route) => (req, route),
    };
    if route == Route::Forward {
        let Ok(permit) = s.forwards.clone().try_acquire_owned() else {
            debug!(%src, "too many forwarded queries in flight; dropped");
            return;
        };
        s.spawn_answer(
            async move {
                let _permit = permit;
                core.answer(&req, Route::Forward).await
            },
            src,
        );
        return;
    }
    match poll_once(async move { core.answer(&req, route).await }) {
        Ok(Some(resp)) => send(&s.sock, &resp, src),
        Ok(None) => {}
        Err(waiting) => s.spawn_answer(waiting, src),
    }
}

/// Poll `fut` once: its output, or the future itself when it has to wait
/// (then it is polled again, with a real waker, wherever it is moved to).
fn poll_once<F: Future>(fut: F) -> Result<F::Output, Pin<Box<F>>> {
    let mut fut = Box::pin(fut);
    let mut cx = Context::from_waker(Waker::noop());
    match fut.as_mut().poll(&mut cx) {
        Poll::Ready(v) => Ok(v),
        Poll::Pending => Err(fut),
    }
}

/// A UDP source we may answer: not port 0, not unspecified, broadcast or
/// multicast (spoofed sources used for reflection).
pub fn answerable(src: SocketAddr) -> bool {
    let ip = src.ip();
    src.port() != 0
        && !ip.is_unspecified()
        && !ip.is_multicast()
        && !matches!(ip, std::net::IpAddr::V4(v4) if v4.is_broadcast())
}

/// Send from a worker (a blocking socket: waits for send-buffer room
/// like the readiness loop did).
fn send(sock: &UdpSocket, resp: &[u8], to: SocketAddr) {
    if let Err(e) = sock.send_to(resp, to) {
        debug!(%to, "dns udp send: {e}");
    }
}

/// Send from a runtime task: never blocks (a full send buffer drops the
/// answer; the client retries).
fn send_nowait(sock: &UdpSocket, resp: &[u8], to: SocketAddr) {
    let r = SockRef::from(sock).send_to_with_flags(resp, &SockAddr::from(to), libc::MSG_DONTWAIT);
    if let Err(e) = r {
        debug!(%to, "dns udp send: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn core() -> Core {
        let text = "name: c\nbaseDomain: example.com\nnetwork: { cidr: 10.0.0.0/24, gateway: 10.0.0.1, applianceIP: 10.0.0.1, ingressVIP: 10.0.0.7 }\nnodes:\n  - { name: m0, role: master, mac: '52:54:00:00:00:01', ip: 10.0.0.10 }\n";
        let plan =
            crate::config::from_str(text, std::path::Path::new("/"), std::path::Path::new("t"))
                .unwrap();
        super::super::handler::build(&plan).unwrap()
    }

    /// An A query for `name` with ID `id`.
    fn query(id: u16, name: &str) -> Vec<u8> {
        let mut q = id.to_be_bytes().to_vec();
        q.extend_from_slice(&[1, 0, 0, 1, 0, 0, 0, 0, 0, 0]);
        for l in name.split('.') {
            q.push(l.len() as u8);
            q.extend_from_slice(l.as_bytes());
        }
        q.extend_from_slice(&[0, 0, 1, 0, 1]);
        q
    }

    fn ask(client: &UdpSocket, to: SocketAddr, id: u16, name: &str) -> Vec<u8> {
        client.send_to(&query(id, name), to).unwrap();
        let mut buf = [0u8; 1500];
        let (n, from) = client.recv_from(&mut buf).unwrap();
        assert_eq!(from, to);
        buf[..n].to_vec()
    }

    /// The workers answer (uncached, then from the cache; several queries
    /// so both threads are likely to take some), and once the token is
    /// cancelled `serve` returns with every worker gone and the socket
    /// closed: the same address can be bound again.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn workers_answer_and_release_the_socket_when_stopped() {
        let sock = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let addr = sock.local_addr().unwrap();
        let cores = Arc::new(ArcSwap::from_pointee(core()));
        let token = CancellationToken::new();
        let task = tokio::spawn(serve(sock, cores.clone(), token.clone()));
        let answers = tokio::task::spawn_blocking(move || {
            let client = UdpSocket::bind("127.0.0.1:0").unwrap();
            client
                .set_read_timeout(Some(Duration::from_secs(5)))
                .unwrap();
            (0..20u16)
                .map(|id| ask(&client, addr, id, "m0.c.example.com"))
                .collect::<Vec<_>>()
        })
        .await
        .unwrap();
        for (id, a) in answers.iter().enumerate() {
            assert_eq!(a[..2], (id as u16).to_be_bytes(), "{a:?}");
            assert_eq!(a[3] & 0x0f, 0, "NOERROR: {a:?}");
            assert!(a.ends_with(&[10, 0, 0, 10]), "the A record: {a:?}");
        }
        assert!(cores.load().stats.cache_hits.load(Relaxed) >= 19);
        token.cancel();
        let r = tokio::time::timeout(Duration::from_secs(5), task).await;
        r.expect("serve returns once cancelled").unwrap().unwrap();
        UdpSocket::bind(addr).expect("the socket is closed after serve returned");
    }

    /// A query outside the zones (no upstream here: REFUSED) and
    /// malformed datagrams (dropped, counted) never stop a worker.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn odd_queries_never_stop_a_worker() {
        let sock = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let addr = sock.local_addr().unwrap();
        let cores = Arc::new(ArcSwap::from_pointee(core()));
        let token = CancellationToken::new();
        let task = tokio::spawn(serve(sock, cores.clone(), token.clone()));
        tokio::task::spawn_blocking(move || {
            let client = UdpSocket::bind("127.0.0.1:0").unwrap();
            client
                .set_read_timeout(Some(Duration::from_secs(5)))
                .unwrap();
            for _ in 0..4 {
                client.send_to(&[1, 2, 3], addr).unwrap();
            }
            let a = ask(&client, addr, 7, "example.org");
            assert_eq!(a[3] & 0x0f, 5, "REFUSED: {a:?}");
            let a = ask(&client, addr, 8, "m0.c.example.com");
            assert_eq!(a[3] & 0x0f, 0, "NOERROR: {a:?}");
        })
        .await
        .unwrap();
        assert_eq!(cores.load().stats.malformed.load(Relaxed), 4);
        assert!(!task.is_finished());
        token.cancel();
        task.await.unwrap().unwrap();
    }
}
