//! One HTTP connection's life, shared by the HTTP and admin listeners:
//! how long it may wait for a request, when it is closed for idling, and
//! how it ends at shutdown or when the listener evicts it.
//!
//! - [`request_start`]: before hyper, wait (bounded by the header timeout)
//!   until hyper-util can tell HTTP/1 from h2 without blocking; its own
//!   sniffing has no timeout.
//! - [`builder`]: hyper-util's auto builder with HTTP/1's header timeout.
//! - [`serve`]: run the connection; [`Activity`] counts its requests in
//!   flight (from the request head to the end of the response body) and
//!   when the last one ended. A connection with no request in flight for
//!   the idle timeout — an h2 connection with no open stream (which
//!   hyper's header timeout does not cover: it is HTTP/1 only), one that
//!   never completed a request head, an HTTP/1 keep-alive between requests
//!   — is shut down gracefully (h2 GOAWAY) and dropped [`CLOSE_GRACE`]
//!   later unless a request raced in. [`Activity::kick`] does the same at
//!   once: the listener's eviction of an idle connection under pressure.
//!
//! Invariants: a connection with nothing in flight lives at most the idle
//! timeout plus [`CLOSE_GRACE`] (plus one timer tick) — whatever the client
//! sends or leaves unanswered (SETTINGS, PING, a partial HEADERS frame);
//! the idle rule and a kick never cut a request in flight; at shutdown
//! in-flight requests get the drain budget, as before.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::Instant;

use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::service::Service;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::{self, HttpServerConnExec};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// After a graceful shutdown for idling or eviction, how long the
/// connection gets to end by itself (a GOAWAY's PING round trip, the last
/// bytes of a response) before it is dropped with nothing in flight.
pub const CLOSE_GRACE: Duration = Duration::from_secs(1);

/// The HTTP/2 connection preface (RFC 9113 §3.4).
const H2_PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Requests in flight on one connection, since when it has had none, and
/// the listener's request to close it.
#[derive(Debug)]
pub struct Activity {
    start: Instant,
    in_flight: AtomicUsize,
    /// Milliseconds after `start` when the last request ended (0: none yet).
    idle_since_ms: AtomicU64,
    kick: CancellationToken,
}

impl Activity {
    pub fn new() -> Arc<Activity> {
        Arc::new(Activity {
            start: Instant::now(),
            in_flight: AtomicUsize::new(0),
            idle_since_ms: AtomicU64::new(0),
            kick: CancellationToken::new(),
        })
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

/// One request in flight; ends when dropped (with the response body, or
/// with the request's future when the client went away first).
pub struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        let a = &self.0;
        let now = u64::try_from(a.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        // The time first, so a reader that sees 0 in flight sees it.
        a.idle_since_ms.store(now, Ordering::Release);
        a.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A response body that keeps its request counted until hyper drops it.
pub struct Tracked<B> {
    body: B,
    _req: InFlight,
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

type CountedFuture<B, E> = Pin<Box<dyn Future<Output = Result<Response<Tracked<B>>, E>> + Send>>;

impl<S, B> Service<Request<Incoming>> for Counted<S>
where
    S: Service<Request<Incoming>, Response = Response<B>>,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    B: Send + 'static,
{
    type Response = Response<Tracked<B>>;
    type Error = S::Error;
    type Future = CountedFuture<B, S::Error>;

    fn call(&self, req: Request<Incoming>) -> Self::Future {
        let req_in_flight = self.activity.begin();
        let fut = self.svc.call(req);
        Box::pin(async move {
            let r = fut.await?;
            Ok(r.map(|body| Tracked {
                body,
                _req: req_in_flight,
            }))
        })
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

/// Whether the bytes received let hyper-util tell HTTP/1 from h2 without
/// blocking: they differ from the h2 preface, or hold all of it. `false`
/// when the client closed first. `peek`, not `readable()`: the latter
/// reported fresh sockets ready with no byte in them.
async fn sniffable(stream: &TcpStream) -> bool {
    let mut buf = [0u8; H2_PREFACE.len()];
    loop {
        match stream.peek(&mut buf).await {
            Ok(0) | Err(_) => return false,
            Ok(n) if n == buf.len() || buf[..n] != H2_PREFACE[..n] => return true,
            // A prefix of the preface: wait for more (peek returns at once
            // while bytes are queued, so poll gently).
            Ok(_) => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
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
    /// Evicted by the listener ([`Activity::kick`]).
    Kicked,
    /// The service is shutting down.
    Shutdown,
}

/// Wait until the client's first bytes let the protocol be told (see
/// `sniffable`), at most `header_timeout`: `None` when it may be served,
/// else how it ended (silent, kicked, shutdown).
pub async fn request_start(
    stream: &TcpStream,
    header_timeout: Duration,
    activity: &Activity,
    shutdown: &CancellationToken,
) -> Option<Ended> {
    tokio::select! {
        r = tokio::time::timeout(header_timeout, sniffable(stream)) => match r {
            Ok(true) => None,
            _ => Some(Ended::Silent),
        },
        _ = activity.kick.cancelled() => Some(Ended::Kicked),
        _ = shutdown.cancelled() => Some(Ended::Shutdown),
    }
}

/// Resolves once `activity` has had no request in flight for `idle`.
async fn idled_out(activity: &Activity, idle: Duration) {
    loop {
        match activity.idle_for() {
            Some(d) if d >= idle => return,
            Some(d) => tokio::time::sleep(idle - d).await,
            None => tokio::time::sleep(idle).await,
        }
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

/// Serve one HTTP connection (HTTP/1 or 2, per `builder`) over `io` (a
/// `TcpStream` or a wrapper of one) until it ends: the client closes it,
/// it idles out, it is kicked, or `shutdown` (then hyper finishes the
/// requests in flight, no new ones, within `t.drain`).
pub async fn serve<S, B, I>(
    builder: &auto::Builder<TokioExecutor>,
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
    let conn = builder.serve_connection(TokioIo::new(io), svc);
    tokio::pin!(conn);
    let why = tokio::select! {
        r = conn.as_mut() => return match r {
            Ok(()) => Ended::Done,
            Err(e) => Ended::Failed(e),
        },
        _ = shutdown.cancelled() => Ended::Shutdown,
        _ = idled_out(activity, t.idle) => Ended::Idle,
        _ = activity.kick.cancelled() => Ended::Kicked,
    };
    conn.as_mut().graceful_shutdown();
    if matches!(why, Ended::Shutdown) {
        let _ = tokio::time::timeout(t.drain, conn).await;
        return why;
    }
    // Idle or kicked: give the GOAWAY (and its PING, which a silent h2
    // client never answers) a moment, then drop the connection unless a
    // request raced in before the shutdown; that one is let finish.
    loop {
        match tokio::time::timeout(CLOSE_GRACE, conn.as_mut()).await {
            Ok(_) => return why,
            Err(_) if activity.idle_for().is_some() => return why,
            Err(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn idle_time_counts_from_the_last_request() {
        let a = Activity::new();
        tokio::time::advance(Duration::from_secs(3)).await;
        assert!(a.idle_for().unwrap() >= Duration::from_secs(3));
        let r1 = a.begin();
        let r2 = a.begin();
        assert_eq!(a.idle_for(), None);
        drop(r1);
        assert_eq!(a.idle_for(), None, "one request still in flight");
        tokio::time::advance(Duration::from_secs(2)).await;
        drop(r2);
        assert!(a.idle_for().unwrap() < Duration::from_millis(10));
        let t = Instant::now();
        idled_out(&a, Duration::from_secs(10)).await;
        assert!(t.elapsed() >= Duration::from_secs(10));
    }
}
