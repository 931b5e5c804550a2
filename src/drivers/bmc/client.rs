//! The HTTP side of the Redfish driver: one HTTP/1.1 connection per call
//! (Basic auth; a Redfish session when Basic is refused, [`super::session`])
//! over TCP or rustls (ring), every step
//! bounded: connect [`CONNECT_TIMEOUT`], the whole call [`CALL_TIMEOUT`],
//! bodies at most [`MAX_BODY`] bytes. GETs follow up to [`MAX_REDIRECTS`]
//! redirects, only to the same origin (credentials never go elsewhere).
//!
//! One [`Client`] serves one command (`bmc up` of one node) and carries its
//! budget: at most [`MAX_REQUESTS`] requests and [`MAX_TIME`] in all, even
//! against a BMC that keeps failing. A transient refusal
//! ([`plan::classify`]: 5xx, 409, a 400 "in POST") is sent again after a
//! back-off (base [`BACKOFF`], doubling, capped at 4×; a test build, cargo
//! feature `test-hooks`, reads the base in milliseconds from
//! [`BACKOFF_ENV`]: the shipped binary has no such hook), at most
//! [`ATTEMPTS`] times, never past the budget.
//!
//! A 202 Accepted is followed to its end ([`super::task`]). What the client
//! had to do beyond the plain call (a session, `If-Match: *`, a parameter
//! added) is kept as a note ([`Client::take_notes`]) for the operator.
//!
//! The `Authorization` value, the password and a session's token live in
//! [`Client`] only; its `Debug` prints the user name, never a secret.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt as _, Full, Limited};
use hyper::{Method, Request};
use hyper_util::rt::TokioIo;
use rustls::ClientConfig;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::Value;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

pub use super::error::{BmcError, Transport};
use super::plan::Refusal;
use super::redfish::{RedfishError, bounded};
use super::session::Session;
use crate::model::bmc::{BmcCfg, BmcTls};
use crate::runtime::sync::LockExt as _;

/// TCP connect plus TLS handshake.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// One whole call (InsertMedia may make the BMC download the image first).
pub const CALL_TIMEOUT: Duration = Duration::from_secs(300);
/// Largest response body read.
pub const MAX_BODY: usize = 4 << 20;
/// Redirects a GET follows.
pub const MAX_REDIRECTS: usize = 5;
/// Requests one command makes at most.
pub const MAX_REQUESTS: u32 = 40;
/// How long one command runs at most.
pub const MAX_TIME: Duration = Duration::from_secs(90);
/// Tries of one call refused transiently.
pub const ATTEMPTS: u32 = 5;
/// The first back-off after a transient refusal (then 2×, 4×, 4×).
pub const BACKOFF: Duration = Duration::from_secs(2);

/// Test builds only (cargo feature `test-hooks`): the back-off base in
/// milliseconds (the BMC tests keep their suites fast with it).
pub const BACKOFF_ENV: &str = "CRC_APPLIANCE_BMC_BACKOFF_MS";

/// The back-off base: [`BACKOFF`]; in a test build, [`BACKOFF_ENV`] when set.
fn backoff_base() -> Duration {
    #[cfg(test)]
    {
        let ms = TEST_BACKOFF_MS.load(std::sync::atomic::Ordering::Relaxed);
        if ms > 0 {
            return Duration::from_millis(ms);
        }
    }
    #[cfg(feature = "test-hooks")]
    if let Some(ms) = std::env::var(BACKOFF_ENV)
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        return Duration::from_millis(ms);
    }
    BACKOFF
}

/// The back-off base the unit tests use (0: the normal one).
#[cfg(test)]
pub(crate) static TEST_BACKOFF_MS: std::sync::atomic::AtomicU64 =
    std::sync::atomic::AtomicU64::new(0);

/// The pause before try `attempt + 1` (attempt counts from 1).
pub fn backoff(base: Duration, attempt: u32) -> Duration {
    base * (1u32 << attempt.saturating_sub(1).min(2))
}

/// A Redfish client for one BMC.
pub struct Client {
    origin: String,
    host: String,
    port: u16,
    tls: Option<(TlsConnector, ServerName<'static>)>,
    pub(super) user: String,
    pub(super) password: String,
    authorization: String,
    /// The Redfish session in use, if Basic auth was refused.
    pub(super) session: std::sync::Mutex<Option<Session>>,
    /// A session was tried (once per command).
    pub(super) session_tried: std::sync::atomic::AtomicBool,
    /// What the client did beyond the plain calls, for the operator.
    notes: std::sync::Mutex<Vec<String>>,
    /// Requests made so far (the budget is [`MAX_REQUESTS`]).
    requests: std::sync::atomic::AtomicU32,
    /// When the command's time ([`MAX_TIME`]) is up.
    deadline: tokio::time::Instant,
    pub(super) backoff: Duration,
}

/// A GET's answer.
#[derive(Debug, Clone)]
pub struct Doc {
    /// The path finally read (after redirects).
    pub path: String,
    pub doc: Value,
    /// The `ETag` header, else the document's `@odata.etag`.
    pub etag: Option<String>,
}

/// One HTTP answer.
pub(super) struct Answer {
    pub(super) status: u16,
    pub(super) location: Option<String>,
    pub(super) etag: Option<String>,
    /// `X-Auth-Token` (a session's creation).
    pub(super) token: Option<String>,
    /// `Retry-After` in seconds (a task monitor's pace).
    pub(super) retry_after: Option<u64>,
    pub(super) body: Bytes,
}

/// Whether a request carries the client's credentials.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Auth {
    /// Basic, or the session's token.
    Yes,
    /// None: the service root and the session's creation.
    No,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("origin", &self.origin)
            .field("user", &self.user)
            .field("password", &"<redacted>")
            .field("session", &self.session.locked().is_some())
            .finish()
    }
}

fn tls_config(tls: &BmcTls) -> anyhow::Result<Option<ClientConfig>> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .context("TLS protocol versions")?;
    Ok(match tls {
        BmcTls::Plain => None,
        BmcTls::Insecure => Some(
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(crate::runtime::tls::NoVerify(provider)))
                .with_no_client_auth(),
        ),
        BmcTls::CaFile(path) => {
            let mut roots = rustls::RootCertStore::empty();
            let certs = CertificateDer::pem_file_iter(path)
                .with_context(|| format!("BMC CA bundle {}", path.display()))?;
            for c in certs {
                roots
                    .add(c.with_context(|| format!("BMC CA bundle {}: bad PEM", path.display()))?)
                    .with_context(|| {
                        format!("BMC CA bundle {}: bad certificate", path.display())
                    })?;
            }
            if roots.is_empty() {
                anyhow::bail!("BMC CA bundle {}: no certificates found", path.display());
            }
            Some(builder.with_root_certificates(roots).with_no_client_auth())
        }
    })
}

impl Client {
    /// A client for `cfg` with these credentials.
    pub fn new(cfg: &BmcCfg, user: &str, password: &str) -> anyhow::Result<Client> {
        let tls = match tls_config(&cfg.tls)? {
            None => None,
            Some(c) => {
                let name = ServerName::try_from(cfg.host.clone())
                    .with_context(|| format!("BMC host {:?} as a TLS name", cfg.host))?;
                Some((TlsConnector::from(Arc::new(c)), name))
            }
        };
        let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        Ok(Client {
            origin: cfg.origin.clone(),
            host: cfg.host.clone(),
            port: cfg.port,
            tls,
            user: user.to_string(),
            password: password.to_string(),
            authorization: format!("Basic {token}"),
            session: Default::default(),
            session_tried: Default::default(),
            notes: Default::default(),
            requests: Default::default(),
            deadline: tokio::time::Instant::now() + MAX_TIME,
            backoff: backoff_base(),
        })
    }

    /// `scheme://host:port` of the BMC.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// Requests made so far by this client.
    pub fn requests(&self) -> u32 {
        self.requests.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Keep a note of something done beyond the plain calls.
    pub fn note(&self, what: String) {
        let mut n = self.notes.locked();
        if !n.contains(&what) {
            n.push(what);
        }
    }

    /// The notes kept so far (emptied).
    pub fn take_notes(&self) -> Vec<String> {
        std::mem::take(&mut *self.notes.locked())
    }

    /// GET `path` as JSON, following same-origin redirects, with the
    /// retries of transient refusals.
    pub async fn get(&self, path: &str) -> Result<Doc, BmcError> {
        self.retrying(|| self.get_once(path)).await
    }

    /// GET `path` once (no retry): for looking around after a failure.
    pub async fn get_once(&self, path: &str) -> Result<Doc, BmcError> {
        let mut path = path.to_string();
        for _ in 0..=MAX_REDIRECTS {
            let a = self.call(Method::GET, &path, None, None).await?;
            if (300..400).contains(&a.status) {
                path = self.same_origin(a.location.as_deref()).ok_or_else(|| {
                    BmcError::Unexpected(format!(
                        "GET {path}: HTTP {} redirect to {}, which is not on {}",
                        a.status,
                        bounded(&format!("{:?}", a.location)),
                        self.origin
                    ))
                })?;
                continue;
            }
            check(a.status, &a.body)?;
            let doc: Value = serde_json::from_slice(&a.body).map_err(|e| {
                BmcError::Unexpected(format!("GET {path}: the answer is not JSON ({e})"))
            })?;
            let etag = a.etag.or_else(|| {
                doc.get("@odata.etag")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            });
            return Ok(Doc { path, doc, etag });
        }
        Err(BmcError::Unexpected(format!(
            "GET {path}: more than {MAX_REDIRECTS} redirects"
        )))
    }

    /// POST (an action) or PATCH `body` to `path`, with `If-Match` when
    /// given, with the retries of transient refusals; any 2xx is success,
    /// a 202 once the task it started has finished.
    /// The answer's `ETag`, if any (a PATCHed resource's new one).
    pub async fn send(
        &self,
        method: Method,
        path: &str,
        body: &Value,
        if_match: Option<&str>,
    ) -> Result<Option<String>, BmcError> {
        let a = self
            .retrying(|| async {
                let a = self
                    .call(method.clone(), path, Some(body), if_match)
                    .await?;
                check(a.status, &a.body).map(|()| a)
            })
            .await?;
        if a.status != 202 {
            return Ok(a.etag);
        }
        let done = self.follow_task(&format!("{method} {path}"), a).await?;
        check(done.status, &done.body).map(|()| done.etag)
    }

    /// Run `once` until it succeeds or fails for good: a transient refusal
    /// is tried again after a back-off, at most [`ATTEMPTS`] times and
    /// within the budget.
    async fn retrying<T, F, Fut>(&self, once: F) -> Result<T, BmcError>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = Result<T, BmcError>>,
    {
        let mut attempt = 1;
        loop {
            let err = match once().await {
                Ok(v) => return Ok(v),
                Err(e) => e,
            };
            let pause = backoff(self.backoff, attempt);
            let room = self
                .deadline
                .saturating_duration_since(tokio::time::Instant::now());
            let again = err.refusal() == Some(Refusal::Transient)
                && attempt < ATTEMPTS
                && self.requests() < MAX_REQUESTS
                && pause < room;
            if !again {
                return Err(match err {
                    BmcError::Status { status, error, .. } => BmcError::Status {
                        status,
                        error,
                        attempts: attempt,
                    },
                    e => e,
                });
            }
            tokio::time::sleep(pause).await;
            attempt += 1;
        }
    }

    /// A redirect target as a path on this origin.
    pub(super) fn same_origin(&self, location: Option<&str>) -> Option<String> {
        let l = location?;
        if l.starts_with('/') {
            return Some(l.to_string());
        }
        let rest = l.strip_prefix(self.origin.as_str())?;
        rest.starts_with('/').then(|| rest.to_string())
    }

    /// One request with the client's credentials; a 401 to Basic auth is
    /// answered by signing in with a Redfish session (once per command)
    /// and sending the request again with its token.
    pub(super) async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        if_match: Option<&str>,
    ) -> Result<Answer, BmcError> {
        let a = self
            .call_as(Auth::Yes, method.clone(), path, body, if_match)
            .await?;
        if a.status == 401 && self.login(&a).await {
            return self.call_as(Auth::Yes, method, path, body, if_match).await;
        }
        Ok(a)
    }

    /// One request, counted against the budget.
    pub(super) async fn call_as(
        &self,
        auth: Auth,
        method: Method,
        path: &str,
        body: Option<&Value>,
        if_match: Option<&str>,
    ) -> Result<Answer, BmcError> {
        let what = format!("{method} {}{path}", self.origin);
        let room = self
            .deadline
            .saturating_duration_since(tokio::time::Instant::now());
        let n = self
            .requests
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if n >= MAX_REQUESTS || room.is_zero() {
            return Err(BmcError::Budget {
                call: what,
                made: n,
                spent: MAX_TIME - room,
            });
        }
        let limit = CALL_TIMEOUT.min(room);
        tokio::time::timeout(limit, self.call_inner(auth, method, path, body, if_match))
            .await
            .map_err(|_| BmcError::Timeout {
                call: what.clone(),
                after: limit,
            })?
            .map_err(|cause| BmcError::Transport { call: what, cause })
    }

    /// DELETE `path` outside the budget (the session's end), once.
    pub(super) async fn delete_unbudgeted(&self, path: &str) -> Option<u16> {
        self.call_inner(Auth::Yes, Method::DELETE, path, None, None)
            .await
            .ok()
            .map(|a| a.status)
    }

    async fn call_inner(
        &self,
        auth: Auth,
        method: Method,
        path: &str,
        body: Option<&Value>,
        if_match: Option<&str>,
    ) -> Result<Answer, Transport> {
        let connect = async {
            let tcp = TcpStream::connect((self.host.as_str(), self.port))
                .await
                .map_err(Transport::Connect)?;
            let _ = tcp.set_nodelay(true);
            Ok::<_, Transport>(tcp)
        };
        let tcp = tokio::time::timeout(CONNECT_TIMEOUT, connect)
            .await
            .map_err(|_| Transport::ConnectTimeout)??;
        let payload = match body {
            Some(v) => Bytes::from(v.to_string()),
            None => Bytes::new(),
        };
        let mut req = Request::builder()
            .method(method)
            .uri(path)
            .header(hyper::header::HOST, host_header(&self.origin))
            .header(hyper::header::ACCEPT, "application/json")
            .header("OData-Version", "4.0")
            .header(hyper::header::CONNECTION, "close");
        if body.is_some() {
            req = req.header(hyper::header::CONTENT_TYPE, "application/json");
        }
        if let Some(tag) = if_match {
            req = req.header(hyper::header::IF_MATCH, tag);
        }
        if auth == Auth::Yes {
            let token = self.session.locked().as_ref().map(|s| s.token.clone());
            req = match token {
                Some(t) => req.header("X-Auth-Token", t),
                None => req.header(hyper::header::AUTHORIZATION, &self.authorization),
            };
        }
        let req = req.body(Full::new(payload)).map_err(Transport::Request)?;
        match &self.tls {
            None => exchange(TokioIo::new(tcp), req).await,
            Some((connector, name)) => {
                let tls =
                    tokio::time::timeout(CONNECT_TIMEOUT, connector.connect(name.clone(), tcp))
                        .await
                        .map_err(|_| Transport::TlsTimeout)?
                        .map_err(Transport::Tls)?;
                exchange(TokioIo::new(tls), req).await
            }
        }
    }
}

/// `host[:port]` of an origin.
fn host_header(origin: &str) -> &str {
    origin.split_once("://").map_or(origin, |(_, h)| h)
}

async fn exchange<T>(io: T, req: Request<Full<Bytes>>) -> Result<Answer, Transport>
where
    T: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(Transport::Handshake)?;
    let driver = tokio::spawn(async move {
        let _ = conn.await;
    });
    let res = sender
        .send_request(req)
        .await
        .map_err(Transport::NoAnswer)?;
    let status = res.status().as_u16();
    let header = |h| {
        res.headers()
            .get(h)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let location = header(hyper::header::LOCATION);
    let etag = header(hyper::header::ETAG);
    let token = header(hyper::header::HeaderName::from_static("x-auth-token"));
    let retry_after = header(hyper::header::RETRY_AFTER).and_then(|v| v.trim().parse().ok());
    let body = Limited::new(res.into_body(), MAX_BODY)
        .collect()
        .await
        .map_err(Transport::Body)?
        .to_bytes();
    driver.abort();
    Ok(Answer {
        status,
        location,
        etag,
        token,
        retry_after,
        body,
    })
}

pub(super) fn check(status: u16, body: &[u8]) -> Result<(), BmcError> {
    if (200..300).contains(&status) {
        Ok(())
    } else {
        Err(BmcError::refusal_of(status, RedfishError::parse(body)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> BmcCfg {
        BmcCfg {
            url: "http://127.0.0.1:1/redfish/v1/Systems/x".into(),
            origin: "http://127.0.0.1:1".into(),
            host: "127.0.0.1".into(),
            port: 1,
            path: "/redfish/v1/Systems/x".into(),
            username_file: "u".into(),
            password_file: "p".into(),
            tls: BmcTls::Plain,
            start_on_serve: false,
            media: crate::model::bmc::BmcMedia::Auto,
        }
    }

    #[test]
    fn debug_redacts_the_password() {
        let c = Client::new(&cfg(), "admin", "hunter2").unwrap();
        let d = format!("{c:?}");
        assert!(d.contains("admin") && d.contains("<redacted>"), "{d}");
        assert!(
            !d.contains("hunter2") && !d.contains(&c.authorization),
            "{d}"
        );
    }

    #[test]
    fn redirects_stay_on_the_origin() {
        let c = Client::new(&cfg(), "a", "b").unwrap();
        assert_eq!(
            c.same_origin(Some("/redfish/v1/Systems/u")).as_deref(),
            Some("/redfish/v1/Systems/u")
        );
        assert_eq!(
            c.same_origin(Some("http://127.0.0.1:1/redfish/v1/Systems/u"))
                .as_deref(),
            Some("/redfish/v1/Systems/u")
        );
        assert_eq!(c.same_origin(Some("http://127.0.0.1:10/x")), None);
        assert_eq!(c.same_origin(Some("http://evil/x")), None);
        assert_eq!(c.same_origin(None), None);
    }

    #[test]
    fn backoff_doubles_then_holds() {
        let b = Duration::from_secs(2);
        let got: Vec<u64> = (1..=5).map(|a| backoff(b, a).as_secs()).collect();
        assert_eq!(got, vec![2, 4, 8, 8, 8]);
        // ATTEMPTS tries wait 22 s in all: well inside MAX_TIME.
        let total: Duration = (1..ATTEMPTS).map(|a| backoff(BACKOFF, a)).sum();
        assert!(total < MAX_TIME / 2, "{total:?}");
    }

    #[tokio::test]
    async fn a_spent_budget_sends_nothing() {
        let c = Client::new(&cfg(), "a", "b").unwrap();
        c.requests
            .store(MAX_REQUESTS, std::sync::atomic::Ordering::Relaxed);
        let e = c.get("/redfish/v1/Systems/x").await.unwrap_err();
        assert!(matches!(&e, BmcError::Budget { made: 40, .. }), "{e:?}");
        let m = e.to_string();
        assert!(
            m.starts_with("GET http://127.0.0.1:1/redfish/v1/Systems/x: not sent")
                && m.contains("made 40 requests in 0s (at most 40 in 90s)"),
            "{m}"
        );
    }

    #[tokio::test]
    async fn refused_connection_is_unreachable() {
        let c = Client::new(&cfg(), "a", "b").unwrap();
        let e = c.get("/redfish/v1/Systems/x").await.unwrap_err();
        assert!(
            matches!(
                &e,
                BmcError::Transport {
                    cause: Transport::Connect(_),
                    ..
                }
            ),
            "{e:?}"
        );
        assert!(e.unreachable());
        let m = e.to_string();
        assert!(
            m.starts_with("GET http://127.0.0.1:1/redfish/v1/Systems/x: cannot connect: "),
            "{m}"
        );
    }
}
