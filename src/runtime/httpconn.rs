//! One HTTP connection's life, shared by the HTTP and admin listeners:
//! how long it may wait for a request, when it is closed for idling, and
//! how it ends at shutdown or when the listener evicts it.
//!
//! - [`request_start`]: before hyper, read (bounded by the header timeout)
//!   until the first bytes tell HTTP/1 from h2 ([`Proto`]); hyper-util's
//!   own sniffing has no timeout, and peeking then reading again cost a
//!   `recv` per connection. [`Replay`] hands the bytes read to hyper.
//! - [`builder`]: hyper-util's auto builder with HTTP/1's header timeout;
//!   [`Builders`] its HTTP/1-only and h2-only copies, one per [`Proto`].
//! - [`serve`]: run the connection; [`Activity`] counts its requests in
//!   flight (from the request head to the end of the response body) and
//!   when the last one ended. A connection with no request in flight for
//!   the idle timeout — an h2 connection with no open stream (which
//!   hyper's header timeout does not cover: it is HTTP/1 only), one that
//!   never completed a request head, an HTTP/1 keep-alive between requests
//!   — is shut down gracefully (h2 GOAWAY) and dropped [`CLOSE_GRACE`]
//!   later unless a request raced in. [`Activity::kick`] does the same at
//!   once: the listener's eviction of an idle connection under pressure.
//! - Write progress: [`WriteWatch`] (put under hyper by [`serve`]) notes
//!   when a write could not go on because the socket's send buffer was
//!   full, and clears the mark at the next byte that leaves. A response
//!   whose writes made no progress for [`WRITE_STALL_TIMEOUT`] (a client
//!   that stopped reading) is dropped, request in flight or not; one
//!   stalled for a moment is what the listener may evict under pressure
//!   ([`Activity::stalled_for`]).
//!
//! Cost per request (the ignition hot path): the count is two atomics and
//! no allocation ([`CountedFuture`], [`Tracked`]); a write that goes out
//! at once costs one relaxed atomic load more (no clock read, no
//! syscall: the time is read only when a write has to wait); the idle,
//! stall, kick and shutdown watch is polled only when one of its own timers or tokens
//! fires (`Quiet`), not on every wake-up of the connection.
//!
//! Invariants: a connection with nothing in flight lives at most the idle
//! timeout plus [`CLOSE_GRACE`] (plus one timer tick) — whatever the client
//! sends or leaves unanswered (SETTINGS, PING, a partial HEADERS frame);
//! the idle rule and a kick never cut a request in flight whose writes
//! progress; a connection whose writes made no progress for
//! [`WRITE_STALL_TIMEOUT`] lives no longer (plus one timer tick); at
//! shutdown in-flight requests get the drain budget, as before.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll, Wake, Waker, ready};
use std::time::Duration;

use futures_util::task::AtomicWaker;
use pin_project_lite::pin_project;

use bytes::Bytes;
use tokio::time::Instant;

use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::service::Service;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::{self, HttpServerConnExec};
use tokio_util::sync::CancellationToken;

use super::lazytcp::LazyTcp;
pub use super::writestall::WRITE_STALL_TIMEOUT;
use super::writestall::{WriteStall, WriteWatch};
use sniff::sniff;
pub use sniff::{Builders, Proto, Replay};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// After a graceful shutdown for idling or eviction, how long the
/// connection gets to end by itself (a GOAWAY's PING round trip, the last
/// bytes of a response) before it is dropped with nothing in flight.
pub const CLOSE_GRACE: Duration = Duration::from_secs(1);

/// Requests in flight on one connection, since when it has had none, and
/// the listener's request to close it.
#[derive(Debug)]
pub struct Activity {
    start: Instant,
    in_flight: AtomicUsize,
    /// Milliseconds after `start` when the last request ended (0: none yet).
    idle_since_ms: AtomicU64,
    /// Since when its writes wait on a client that does not read.
    stall: WriteStall,
    kick: CancellationToken,
    /// A request asked to close the connection after its response
    /// ([`Activity::set_closing`]).
    closing: AtomicBool,
}

impl Activity {
    pub fn new() -> Arc<Activity> {
        let start = Instant::now();
        Arc::new(Activity {
            start,
            in_flight: AtomicUsize::new(0),
            idle_since_ms: AtomicU64::new(0),
            stall: WriteStall::new(start),
            kick: CancellationToken::new(),
            closing: AtomicBool::new(false),
        })
    }

    /// Note that the response being made is the connection's last (its
    /// request said `Connection: close`).
    pub fn set_closing(&self) {
        self.closing.store(true, Ordering::Relaxed);
    }

    /// Whether [`Activity::set_closing`] was called.
    pub fn closing(&self) -> bool {
        self.closing.load(Ordering::Relaxed)
    }

    /// How long the connection has had no request in flight; `None` while
    /// one is.
    pub fn idle_for(&self) -> Option<Duration> {
        if self.in_flight.load(Ordering::Acquire) > 0 {
            return None;
        }
        let since = Duration::from_millis(self.idle_since_ms.load(Ordering::Acquire));
        Some(self.start.elapsed().saturating_sub(since))
    }

    /// How long the connection's writes have been waiting for room in the
    /// socket's send buffer without a byte sent (a client that does not
    /// read); `None` while they progress or nothing waits.
    pub fn stalled_for(&self) -> Option<Duration> {
        self.stall.stalled_for()
    }

    /// A write found the send buffer full (tests elsewhere).
    #[cfg(test)]
    pub fn write_waits(&self) {
        self.stall.waits();
    }

    /// A write sent bytes (tests elsewhere).
    #[cfg(test)]
    pub fn write_progressed(&self) {
        self.stall.progressed();
    }

    /// Whether no request has begun on the connection yet (it is waiting
    /// for its first request head): nothing of a response can be on its
    /// way out.
    pub fn before_first_request(&self) -> bool {
        self.in_flight.load(Ordering::Acquire) == 0
            && self.idle_since_ms.load(Ordering::Acquire) == 0
    }

    /// Ask the connection to close as if it had idled out (eviction).
    pub fn kick(&self) {
        self.kick.cancel();
    }

    fn begin(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        InFlight(self.clone())
    }

    /// A request in flight until the guard is dropped (tests elsewhere).
    #[cfg(test)]
    pub fn begin_for_test(self: &Arc<Self>) -> InFlight {
        self.begin()
    }

    /// Whether [`Activity::kick`] was called.
    #[cfg(test)]
    pub fn is_kicked(&self) -> bool {
        self.kick.is_cancelled()
    }
}

impl AsRef<WriteStall> for Activity {
    fn as_ref(&self) -> &WriteStall {
        &self.stall
    }
}

/// One request in flight; ends when dropped (with the response body, or
/// with the request's future when the client went away first).
pub struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        let a = &self.0;
        // At least 1: 0 means no request has ended yet.
        let now = u64::try_from(a.start.elapsed().as_millis())
            .unwrap_or(u64::MAX)
            .max(1);
        // The time first, so a reader that sees 0 in flight sees it.
        a.idle_since_ms.store(now, Ordering::Release);
        a.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A response body that keeps its request counted until hyper drops it.
pub struct Tracked<B> {
    body: B,
    _req: Option<InFlight>,
}

impl<B: Body + Unpin> Body for Tracked<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// `svc` with each request counted in `activity`.
pub struct Counted<S> {
    svc: S,
    activity: Arc<Activity>,
}

pin_project! {
    /// The service's future, counted from the request head on; its response
    /// body carries the count on ([`Tracked`]). No allocation per request.
    pub struct CountedFuture<F> {
        #[pin]
        fut: F,
        req: Option<InFlight>,
    }
}

impl<F, B, E> Future for CountedFuture<F>
where
    F: Future<Output = Result<Response<B>, E>>,
{
    type Output = Result<Response<Tracked<B>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let r = ready!(this.fut.poll(cx));
        // An error drops the guard here: the request ended.
        let req = this.req.take();
        Poll::Ready(r.map(|resp| resp.map(|body| Tracked { body, _req: req })))
    }
}

impl<S, B> Service<Request<Incoming>> for Counted<S>
where
    S: Service<Request<Incoming>, Response = Response<B>>,
{
    type Response = Response<Tracked<B>>;
    type Error = S::Error;
    type Future = CountedFuture<S::Future>;

    fn call(&self, req: Request<Incoming>) -> Self::Future {
        let in_flight = self.activity.begin();
        CountedFuture {
            fut: self.svc.call(req),
            req: Some(in_flight),
        }
    }
}

/// hyper-util's auto builder (HTTP/1 and h2) with a request head timeout
/// for HTTP/1 (every head, the first and each keep-alive one, however it
/// trickles in: not reset by partial data).
pub fn builder(header_timeout: Duration) -> auto::Builder<TokioExecutor> {
    let mut b = auto::Builder::new(TokioExecutor::new());
    b.http1()
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout);
    b
}

/// How a connection ended.
#[derive(Debug)]
pub enum Ended {
    /// The client closed it, or hyper ended it (an HTTP/1 head timeout).
    Done,
    /// A protocol or I/O error.
    Failed(BoxError),
    /// Nothing (or only part of the h2 preface) within the header timeout,
    /// or the client closed before sending anything.
    Silent,
    /// No request in flight for the idle timeout.
    Idle,
    /// Its writes made no progress for [`WRITE_STALL_TIMEOUT`].
    Stalled,
    /// Evicted by the listener ([`Activity::kick`]).
    Kicked,
    /// The service is shutting down.
    Shutdown,
}

/// Read until the client's first bytes tell the protocol (see `sniff`),
/// at most `header_timeout`: the protocol and the bytes read (for
/// [`Replay`]) when it may be served, else how it ended (silent, kicked,
/// shutdown).
pub async fn request_start(
    stream: &mut LazyTcp,
    header_timeout: Duration,
    activity: &Activity,
    shutdown: &CancellationToken,
) -> Result<(Proto, Bytes), Ended> {
    tokio::select! {
        r = tokio::time::timeout(header_timeout, sniff(stream)) => match r {
            Ok(Some(p)) => Ok(p),
            _ => Err(Ended::Silent),
        },
        _ = activity.kick.cancelled() => Err(Ended::Kicked),
        _ = shutdown.cancelled() => Err(Ended::Shutdown),
    }
}

/// [`request_start`] of a TLS listener: the handshake with `acceptor`,
/// at most `header_timeout` (a silent or trickling client holds no slot
/// for long), then the protocol from ALPN (`h2`, else HTTP/1).
pub async fn tls_start(
    acceptor: tokio_rustls::TlsAcceptor,
    stream: LazyTcp,
    header_timeout: Duration,
    activity: &Activity,
    shutdown: &CancellationToken,
) -> Result<(Proto, tokio_rustls::server::TlsStream<LazyTcp>), Ended> {
    tokio::select! {
        r = tokio::time::timeout(header_timeout, acceptor.accept(stream)) => match r {
            Ok(Ok(s)) => {
                let h2 = s.get_ref().1.alpn_protocol() == Some(b"h2".as_slice());
                Ok((if h2 { Proto::H2 } else { Proto::Http1 }, s))
            }
            Ok(Err(e)) => Err(Ended::Failed(e.into())),
            Err(_) => Err(Ended::Silent),
        },
        _ = activity.kick.cancelled() => Err(Ended::Kicked),
        _ = shutdown.cancelled() => Err(Ended::Shutdown),
    }
}

/// Sets `woken` and wakes the task that polls the [`Quiet`] future.
#[derive(Default)]
struct WakeFlag {
    woken: AtomicBool,
    task: AtomicWaker,
}

impl Wake for WakeFlag {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::Release);
        self.task.wake();
    }
}

pin_project! {
    /// `fut`, polled only when a waker it registered fired (or the first
    /// time): in a `select!` with the connection, the watch's timers and
    /// tokens are not re-polled (a lock each) on every wake-up of the
    /// connection, i.e. on every request.
    struct Quiet<F> {
        #[pin]
        fut: F,
        flag: Arc<WakeFlag>,
        waker: Waker,
    }
}

impl<F: Future> Quiet<F> {
    fn new(fut: F) -> Quiet<F> {
        let flag = Arc::new(WakeFlag {
            woken: AtomicBool::new(true),
            task: AtomicWaker::new(),
        });
        let waker = Waker::from(flag.clone());
        Quiet { fut, flag, waker }
    }
}

impl<F: Future> Future for Quiet<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        // Register first: a wake-up from here on polls the task again.
        this.flag.task.register(cx.waker());
        if !this.flag.woken.swap(false, Ordering::AcqRel) {
            return Poll::Pending;
        }
        this.fut.poll(&mut Context::from_waker(this.waker))
    }
}

/// Resolves once `activity` has had no request in flight for `idle`
/// ([`Ended::Idle`]) or its writes made no progress for
/// [`WRITE_STALL_TIMEOUT`] ([`Ended::Stalled`]). One timer at a time.
async fn quiet_out(activity: &Activity, idle: Duration) -> Ended {
    loop {
        let idle_left = match activity.idle_for() {
            Some(d) if d >= idle => return Ended::Idle,
            Some(d) => idle - d,
            None => idle,
        };
        let stall_left = match activity.stalled_for() {
            Some(d) if d >= WRITE_STALL_TIMEOUT => return Ended::Stalled,
            Some(d) => WRITE_STALL_TIMEOUT - d,
            None => WRITE_STALL_TIMEOUT,
        };
        tokio::time::sleep(idle_left.min(stall_left)).await;
    }
}

/// How long [`serve`] waits.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    /// No request in flight this long: closed.
    pub idle: Duration,
    /// At shutdown, what requests in flight get.
    pub drain: Duration,
}

/// Serve one HTTP connection (`proto`, from [`request_start`]) over `io`
/// (a `TcpStream` or a wrapper of one) until it ends: the client closes
/// it, it idles out, it is kicked, or `shutdown` (then hyper finishes the
/// requests in flight, no new ones, within `t.drain`).
pub async fn serve<S, B, I>(
    builders: &Builders,
    proto: Proto,
    io: I,
    svc: S,
    activity: &Arc<Activity>,
    t: Timeouts,
    shutdown: &CancellationToken,
) -> Ended
where
    Counted<S>: Service<Request<Incoming>, Response = Response<Tracked<B>>>,
    <Counted<S> as Service<Request<Incoming>>>::Future: 'static,
    <Counted<S> as Service<Request<Incoming>>>::Error: Into<BoxError>,
    Tracked<B>: Body + 'static,
    <Tracked<B> as Body>::Error: Into<BoxError>,
    TokioExecutor:
        HttpServerConnExec<<Counted<S> as Service<Request<Incoming>>>::Future, Tracked<B>>,
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + 'static,
{
    let svc = Counted {
        svc,
        activity: activity.clone(),
    };
    let io = WriteWatch::new(io, activity.clone());
    let conn = builders.get(proto).serve_connection(TokioIo::new(io), svc);
    tokio::pin!(conn);
    let watch = Quiet::new(async {
        tokio::select! {
            biased;
            _ = shutdown.cancelled() => Ended::Shutdown,
            _ = activity.kick.cancelled() => Ended::Kicked,
            why = quiet_out(activity, t.idle) => why,
        }
    });
    tokio::pin!(watch);
    let why = tokio::select! {
        biased;
        r = conn.as_mut() => return match r {
            Ok(()) => Ended::Done,
            Err(e) => Ended::Failed(e),
        },
        why = watch => why,
    };
    // Nothing would leave a stalled connection (a graceful end would wait
    // as long again), nor one evicted while still waiting for its first
    // request head: its descriptor is freed at once (an eviction storm must
    // not hold the listener's spare descriptors).
    if matches!(why, Ended::Stalled)
        || (matches!(why, Ended::Kicked) && activity.before_first_request())
    {
        return why;
    }
    conn.as_mut().graceful_shutdown();
    if matches!(why, Ended::Shutdown) {
        let _ = tokio::time::timeout(t.drain, conn).await;
        return why;
    }
    // Idle or kicked: give the GOAWAY (and its PING, which a silent h2
    // client never answers) a moment, then drop the connection unless a
    // request raced in before the shutdown; that one is let finish while
    // its writes progress (a kicked download that stalls is dropped).
    loop {
        match tokio::time::timeout(CLOSE_GRACE, conn.as_mut()).await {
            Ok(_) => return why,
            Err(_) if activity.idle_for().is_some() => return why,
            Err(_) if activity.stalled_for().is_some_and(|d| d >= CLOSE_GRACE) => return why,
            Err(_) => {}
        }
    }
}

mod sniff;

#[cfg(test)]
mod tests;
