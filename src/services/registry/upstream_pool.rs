//! The pull-through upstream client's kept connections (issue #36 item
//! 4): mirroring a release is thousands of manifest, blob and token
//! requests to one upstream, and a new TCP and TLS handshake for each
//! would cost more than many of the answers. Connections are kept per
//! [`Origin`] (scheme, host, port: the upstream, its token realm and a
//! redirect's CDN are origins of their own), as every registry client
//! does.
//!
//! Why a pool of its own rather than hyper-util's legacy `Client`: the
//! client here sends a few `GET`/`HEAD`s with its own redirect and
//! authentication rules ([`super::upstream`]), needs the count of
//! connections it opened for status, and already speaks TLS through
//! tokio-rustls (ring); the legacy client would need a connector service
//! (hyper-rustls) wrapped to count, a timer for its idle sweep, and would
//! follow no rule of ours better. What it does is small:
//!
//! - A connection is hyper's HTTP/1.1 client connection; its
//!   `SendRequest` is kept after an answer's head arrived. While the
//!   answer's body is still being read (a blob streaming to storage) the
//!   handle is not ready, so it is simply not taken; once the body was
//!   read to the end it is ready for the next request.
//! - A request takes the most recently kept ready handle of its origin,
//!   else waits [`READY_GRACE`] for the most recent busy one (its body
//!   may have just ended), else opens a new connection.
//! - At most [`MAX_KEPT`] handles per origin; a handle kept longer than
//!   [`KEPT_FOR`] and a closed one are dropped when the pool is next
//!   touched, and every [`SWEEP_EVERY`] by a task that ends with the pool
//!   (dropping a handle closes its connection once no answer is in flight
//!   on it).
//! - A request on a kept connection that the server had just closed is
//!   sent again, once, on a new connection when nothing of it can have
//!   been answered: hyper handed it back unsent, or the connection closed
//!   before a byte of the answer (the usual race with a server's idle
//!   timeout). Only `GET` and `HEAD` are sent, which are idempotent, so a
//!   request the server read before closing is safe to repeat (as Go's
//!   net/http does).
//!
//! Invariant: the pool never sends a request to another origin than the
//! one it was asked for; what goes in the request (credentials
//! included) is the caller's.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Empty;
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper::{Method, Request, Response, Uri};
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use super::upstream_error::UpstreamError;
use crate::runtime::sync::LockExt as _;

/// Handles kept per origin.
pub(super) const MAX_KEPT: usize = 8;
/// A handle kept longer is dropped (quay.io's and distribution's own idle
/// timeouts close such connections anyway).
pub(super) const KEPT_FOR: Duration = Duration::from_secs(60);
/// How often the kept handles are looked over while nobody asks.
const SWEEP_EVERY: Duration = Duration::from_secs(15);
/// How long a request waits for a busy kept connection to become free
/// before it opens a new one.
const READY_GRACE: Duration = Duration::from_millis(50);

/// An answer whose head arrived (its body streams after).
pub(super) type Answer = Response<Incoming>;
type Sender = SendRequest<Empty<Bytes>>;

/// Where a request goes: scheme, host, port.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct Origin {
    pub(super) tls: bool,
    pub(super) host: String,
    pub(super) port: u16,
}

impl Origin {
    pub(super) fn of(uri: &Uri) -> Result<Origin, UpstreamError> {
        let tls = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            _ => {
                return Err(UpstreamError::NotHttp {
                    uri: uri.to_string(),
                });
            }
        };
        let host = uri
            .host()
            .ok_or_else(|| UpstreamError::NoHost {
                uri: uri.to_string(),
            })?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let port = uri.port_u16().unwrap_or(if tls { 443 } else { 80 });
        Ok(Origin { tls, host, port })
    }

    /// The `Host` header and pull-secret key: `host[:port]`.
    pub(super) fn authority(&self) -> String {
        let default = if self.tls { 443 } else { 80 };
        let h = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        if self.port == default {
            h
        } else {
            format!("{h}:{}", self.port)
        }
    }
}

/// A handle back in the pool, and since when.
struct Kept {
    sender: Sender,
    since: Instant,
}

type KeptByOrigin = std::sync::Mutex<HashMap<Origin, Vec<Kept>>>;

/// One upstream's connections, by origin.
pub(super) struct Pool {
    tls: Arc<rustls::ClientConfig>,
    kept: Arc<KeptByOrigin>,
    opened: AtomicU64,
    /// Whether the sweeping task runs (started with the first connection).
    sweeping: AtomicBool,
}

impl Pool {
    pub(super) fn new(tls: Arc<rustls::ClientConfig>) -> Pool {
        Pool {
            tls,
            kept: Arc::default(),
            opened: AtomicU64::new(0),
            sweeping: AtomicBool::new(false),
        }
    }

    /// Connections opened so far (every origin).
    pub(super) fn opened(&self) -> u64 {
        self.opened.load(Ordering::Relaxed)
    }

    /// `req` at `origin`: on a kept connection when one is free, else on a
    /// new one; the answer's head.
    pub(super) async fn send(
        &self,
        origin: &Origin,
        req: Request<Empty<Bytes>>,
    ) -> Result<Answer, UpstreamError> {
        let who = origin.authority();
        let mut req = req;
        if let Some(mut sender) = self.take(origin).await {
            let again = copy(&req);
            match sender.try_send_request(req).await {
                Ok(answer) => {
                    self.keep(origin, sender);
                    return Ok(answer);
                }
                Err(mut e) => {
                    let unsent = e.take_message().is_some();
                    let source = e.into_error();
                    let unanswered = source.is_canceled() || source.is_incomplete_message();
                    let idempotent = matches!(*again.method(), Method::GET | Method::HEAD);
                    if !(unsent || (unanswered && idempotent)) {
                        return Err(UpstreamError::Http { who, source });
                    }
                    req = again;
                }
            }
        }
        let mut sender = self.open(origin).await?;
        let answer = sender
            .send_request(req)
            .await
            .map_err(|source| UpstreamError::Http { who, source })?;
        self.keep(origin, sender);
        Ok(answer)
    }

    /// A kept handle of `origin` ready for a request, if there is one.
    async fn take(&self, origin: &Origin) -> Option<Sender> {
        let busy = {
            let mut kept = self.kept.locked();
            sweep(&mut kept);
            let list = kept.get_mut(origin)?;
            if let Some(i) = list.iter().rposition(|k| k.sender.is_ready()) {
                return Some(list.swap_remove(i).sender);
            }
            list.pop()?
        };
        let mut sender = busy.sender;
        match tokio::time::timeout(READY_GRACE, sender.ready()).await {
            Ok(Ok(())) => Some(sender),
            Ok(Err(_)) => None,
            Err(_) => {
                self.put(origin, busy.since, sender);
                None
            }
        }
    }

    /// Back in the pool after an answer's head (busy until its body ends).
    fn keep(&self, origin: &Origin, sender: Sender) {
        self.put(origin, Instant::now(), sender);
    }

    fn put(&self, origin: &Origin, since: Instant, sender: Sender) {
        if sender.is_closed() {
            return;
        }
        let mut kept = self.kept.locked();
        let list = kept.entry(origin.clone()).or_default();
        list.push(Kept { sender, since });
        list.sort_by_key(|k| k.since);
        if list.len() > MAX_KEPT {
            list.remove(0);
        }
    }

    /// A new connection to `origin` (TCP, then TLS for `https`).
    async fn open(&self, origin: &Origin) -> Result<Sender, UpstreamError> {
        let who = origin.authority();
        let tcp = TcpStream::connect((origin.host.as_str(), origin.port))
            .await
            .map_err(|source| UpstreamError::Connect {
                who: who.clone(),
                source,
            })?;
        self.opened.fetch_add(1, Ordering::Relaxed);
        self.sweep_from_now_on();
        let _ = tcp.set_nodelay(true);
        if !origin.tls {
            return handshake(TokioIo::new(tcp), who).await;
        }
        let name =
            ServerName::try_from(origin.host.clone()).map_err(|_| UpstreamError::NotTlsName {
                host: origin.host.clone(),
            })?;
        let tls = TlsConnector::from(self.tls.clone())
            .connect(name, tcp)
            .await
            .map_err(|source| UpstreamError::Tls {
                who: who.clone(),
                source,
            })?;
        handshake(TokioIo::new(tls), who).await
    }
}

impl Pool {
    /// Start the task that sweeps the kept handles every [`SWEEP_EVERY`]
    /// (once; it ends when the pool is dropped, with a reload's old client).
    fn sweep_from_now_on(&self) {
        if self.sweeping.swap(true, Ordering::Relaxed) {
            return;
        }
        let kept = Arc::downgrade(&self.kept);
        tokio::spawn(async move {
            let mut every = tokio::time::interval(SWEEP_EVERY);
            loop {
                every.tick().await;
                let Some(kept) = kept.upgrade() else {
                    return;
                };
                sweep(&mut kept.locked());
            }
        });
    }
}

/// Drop the closed handles and those kept too long, of every origin.
fn sweep(kept: &mut HashMap<Origin, Vec<Kept>>) {
    for list in kept.values_mut() {
        list.retain(|k| !k.sender.is_closed() && k.since.elapsed() < KEPT_FOR);
    }
    kept.retain(|_, list| !list.is_empty());
}

/// HTTP/1.1 on `io`; the connection runs in a task of its own until it
/// closes (the server closed it, or its last handle was dropped).
async fn handshake<T>(io: T, who: String) -> Result<Sender, UpstreamError>
where
    T: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (sender, conn) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(|source| UpstreamError::Http { who, source })?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(sender)
}

/// The same request again (they have no body).
fn copy(req: &Request<Empty<Bytes>>) -> Request<Empty<Bytes>> {
    let mut again = Request::new(Empty::new());
    *again.method_mut() = req.method().clone();
    *again.uri_mut() = req.uri().clone();
    *again.headers_mut() = req.headers().clone();
    again
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins() {
        let o = Origin::of(&"https://quay.io".parse().expect("uri")).expect("ok");
        assert_eq!((o.authority().as_str(), o.port), ("quay.io", 443));
        let o = Origin::of(&"http://10.0.0.1:5001".parse().expect("uri")).expect("ok");
        assert_eq!(o.authority(), "10.0.0.1:5001");
        let o = Origin::of(&"https://[fd00::1]:8443".parse().expect("uri")).expect("ok");
        assert_eq!(
            (o.host.as_str(), o.authority().as_str()),
            ("fd00::1", "[fd00::1]:8443")
        );
        assert!(Origin::of(&"ftp://x".parse().expect("uri")).is_err());
    }

    /// A loopback HTTP/1.1 server counting the connections it accepted:
    /// it answers `size` bytes to the first `answers` requests of each
    /// connection, then closes it on the next one unanswered (a server's
    /// idle timeout racing a request).
    async fn server(answers: usize, size: usize) -> (Origin, Arc<AtomicU64>) {
        use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let accepted = Arc::new(AtomicU64::new(0));
        let count = accepted.clone();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::Relaxed);
                tokio::spawn(async move {
                    let mut conn = BufReader::new(tcp);
                    for served in 0.. {
                        let mut line = String::new();
                        loop {
                            line.clear();
                            match conn.read_line(&mut line).await {
                                Ok(0) | Err(_) => return,
                                Ok(_) if line == "\r\n" => break,
                                Ok(_) => {}
                            }
                        }
                        if served >= answers {
                            return;
                        }
                        let mut answer =
                            format!("HTTP/1.1 200 OK\r\ncontent-length: {size}\r\n\r\n")
                                .into_bytes();
                        answer.resize(answer.len() + size, b'x');
                        if conn.get_mut().write_all(&answer).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        let origin = Origin {
            tls: false,
            host: "127.0.0.1".into(),
            port,
        };
        (origin, accepted)
    }

    fn pool() -> Pool {
        let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth();
        Pool::new(Arc::new(tls))
    }

    fn get(origin: &Origin) -> Request<Empty<Bytes>> {
        Request::get("/v2/")
            .header(hyper::header::HOST, origin.authority())
            .body(Empty::new())
            .expect("request")
    }

    async fn body(answer: Answer) -> usize {
        use http_body_util::BodyExt as _;
        answer
            .into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes()
            .len()
    }

    #[tokio::test]
    async fn requests_one_after_another_share_one_connection() {
        let (origin, accepted) = server(usize::MAX, 300_000).await;
        let pool = pool();
        for _ in 0..6 {
            let answer = pool.send(&origin, get(&origin)).await.expect("answer");
            assert_eq!(body(answer).await, 300_000);
        }
        assert_eq!((pool.opened(), accepted.load(Ordering::Relaxed)), (1, 1));
    }

    #[tokio::test]
    async fn a_connection_still_reading_an_answer_is_not_taken() {
        // Larger than what hyper reads ahead of its reader.
        let size = 4 << 20;
        let (origin, accepted) = server(usize::MAX, size).await;
        let pool = pool();
        let first = pool.send(&origin, get(&origin)).await.expect("first");
        let second = pool.send(&origin, get(&origin)).await.expect("second");
        assert_eq!(body(second).await, size);
        assert_eq!(body(first).await, size);
        assert_eq!((pool.opened(), accepted.load(Ordering::Relaxed)), (2, 2));
        let third = pool.send(&origin, get(&origin)).await.expect("third");
        assert_eq!(body(third).await, size);
        assert_eq!(pool.opened(), 2, "the third reuses one of the two");
    }

    #[tokio::test]
    async fn a_handle_kept_too_long_is_dropped_and_its_connection_closed() {
        let (origin, accepted) = server(usize::MAX, 5).await;
        let pool = pool();
        let answer = pool.send(&origin, get(&origin)).await.expect("first");
        assert_eq!(body(answer).await, 5);
        let long_ago = Instant::now()
            .checked_sub(KEPT_FOR + Duration::from_secs(1))
            .expect("an instant that long ago");
        for kept in pool.kept.locked().values_mut().flatten() {
            kept.since = long_ago;
        }
        sweep(&mut pool.kept.locked());
        assert!(pool.kept.locked().is_empty(), "dropped");
        let answer = pool.send(&origin, get(&origin)).await.expect("second");
        assert_eq!(body(answer).await, 5);
        assert_eq!((pool.opened(), accepted.load(Ordering::Relaxed)), (2, 2));
    }

    #[tokio::test]
    async fn a_handle_dropped_from_a_full_pool_still_finishes_its_answer() {
        let size = 4 << 20;
        let (origin, _) = server(usize::MAX, size).await;
        let pool = pool();
        let mut busy = Vec::new();
        for _ in 0..=MAX_KEPT {
            busy.push(pool.send(&origin, get(&origin)).await.expect("answer"));
        }
        assert_eq!(pool.opened(), MAX_KEPT as u64 + 1);
        for answer in busy {
            assert_eq!(body(answer).await, size, "every answer whole");
        }
        let again = pool.send(&origin, get(&origin)).await.expect("again");
        assert_eq!(body(again).await, size);
        assert_eq!(pool.opened(), MAX_KEPT as u64 + 1, "a kept one reused");
    }

    #[tokio::test]
    async fn a_request_the_server_closed_on_is_sent_again_once() {
        let (origin, accepted) = server(1, 5).await;
        let pool = pool();
        for n in 1..=3 {
            let answer = pool.send(&origin, get(&origin)).await.expect("answer");
            assert_eq!(body(answer).await, 5);
            assert_eq!(pool.opened(), n);
        }
        assert_eq!(accepted.load(Ordering::Relaxed), 3);
    }

    #[tokio::test]
    async fn a_new_connection_closed_unanswered_is_an_http_error() {
        let (origin, accepted) = server(0, 5).await;
        let e = pool()
            .send(&origin, get(&origin))
            .await
            .expect_err("closed");
        assert_eq!(
            e.to_string(),
            format!(
                "HTTP with {}: connection closed before message completed",
                origin.authority()
            )
        );
        assert_eq!(accepted.load(Ordering::Relaxed), 1, "not sent again");
    }

    #[tokio::test]
    async fn no_server_is_a_connect_error_naming_it() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        drop(listener);
        let origin = Origin {
            tls: false,
            host: "127.0.0.1".into(),
            port,
        };
        let e = pool()
            .send(&origin, get(&origin))
            .await
            .expect_err("refused");
        assert!(
            e.to_string()
                .starts_with(&format!("connect to 127.0.0.1:{port}: ")),
            "{e}"
        );
        assert_eq!(pool().opened(), 0);
    }
}
