//! The HTTP side of the Redfish driver: one HTTP/1.1 connection per call
//! (session-less, Basic auth) over TCP or rustls (ring), every step
//! bounded: connect [`CONNECT_TIMEOUT`], the whole call [`CALL_TIMEOUT`],
//! bodies at most [`MAX_BODY`] bytes. GETs follow up to [`MAX_REDIRECTS`]
//! redirects, only to the same origin (credentials never go elsewhere).
//!
//! One [`Client`] serves one command (`bmc up` of one node) and carries its
//! budget: at most [`MAX_REQUESTS`] requests and [`MAX_TIME`] in all, even
//! against a BMC that keeps failing. A transient refusal
//! ([`plan::classify`]: 5xx, 409, a 400 "in POST") is sent again after a
//! back-off (base [`BACKOFF`], doubling, capped at 4×; the base can be set
//! in milliseconds with `CRC_APPLIANCE_BMC_BACKOFF_MS` for tests), at most
//! [`ATTEMPTS`] times, never past the budget.
//!
//! The `Authorization` value lives in [`Client`] only; its `Debug` prints
//! the user name, never the password.

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

use super::plan::{self, Refusal};
use super::redfish::RedfishError;
use crate::model::bmc::{BmcCfg, BmcTls};

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

/// The back-off base: [`BACKOFF`], or `CRC_APPLIANCE_BMC_BACKOFF_MS`
/// (tests keep their suites fast with it).
fn backoff_base() -> Duration {
    #[cfg(test)]
    {
        let ms = TEST_BACKOFF_MS.load(std::sync::atomic::Ordering::Relaxed);
        if ms > 0 {
            return Duration::from_millis(ms);
        }
    }
    std::env::var("CRC_APPLIANCE_BMC_BACKOFF_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .map_or(BACKOFF, Duration::from_millis)
}

/// The back-off base the unit tests use (0: the normal one).
#[cfg(test)]
pub(crate) static TEST_BACKOFF_MS: std::sync::atomic::AtomicU64 =
    std::sync::atomic::AtomicU64::new(0);

/// The pause before try `attempt + 1` (attempt counts from 1).
pub fn backoff(base: Duration, attempt: u32) -> Duration {
    base * (1u32 << attempt.saturating_sub(1).min(2))
}

/// Why a call failed.
#[derive(Debug)]
pub enum CallError {
    /// No HTTP answer: connect refused, timeout, TLS failure, broken reply.
    Unreachable(String),
    /// An HTTP error status, with the BMC's Redfish error if it sent one,
    /// after `attempts` tries.
    Status {
        status: u16,
        error: Option<RedfishError>,
        attempts: u32,
    },
    /// A 2xx whose body is not the JSON expected.
    Bad(String),
    /// The command's budget ([`MAX_REQUESTS`], [`MAX_TIME`]) is spent.
    Budget(String),
}

impl CallError {
    /// The HTTP status of a refusal.
    pub fn status(&self) -> Option<u16> {
        match self {
            CallError::Status { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// How the BMC refused (see [`plan::classify`]); `None` for no answer.
    pub fn refusal(&self) -> Option<Refusal> {
        match self {
            CallError::Status { status, error, .. } => {
                Some(plan::classify(*status, error.as_ref()))
            }
            _ => None,
        }
    }

    /// The BMC's message, if it sent one.
    pub fn message(&self) -> Option<&str> {
        match self {
            CallError::Status { error, .. } => error.as_ref().and_then(|e| e.message.as_deref()),
            _ => None,
        }
    }
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Unreachable(m) | CallError::Bad(m) | CallError::Budget(m) => f.write_str(m),
            CallError::Status {
                status, attempts, ..
            } => {
                write!(f, "HTTP {status}")?;
                if let Some(m) = self.message() {
                    write!(f, ": {m}")?;
                }
                if *attempts > 1 {
                    write!(f, " ({attempts} attempts)")?;
                }
                Ok(())
            }
        }
    }
}

/// A Redfish client for one BMC.
pub struct Client {
    origin: String,
    host: String,
    port: u16,
    tls: Option<(TlsConnector, ServerName<'static>)>,
    user: String,
    authorization: String,
    /// Requests made so far (the budget is [`MAX_REQUESTS`]).
    requests: std::sync::atomic::AtomicU32,
    /// When the command's time ([`MAX_TIME`]) is up.
    deadline: tokio::time::Instant,
    backoff: Duration,
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
struct Answer {
    status: u16,
    location: Option<String>,
    etag: Option<String>,
    body: Bytes,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("origin", &self.origin)
            .field("user", &self.user)
            .field("password", &"<redacted>")
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
            authorization: format!("Basic {token}"),
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

    /// GET `path` as JSON, following same-origin redirects, with the
    /// retries of transient refusals.
    pub async fn get(&self, path: &str) -> Result<Doc, CallError> {
        self.retrying(|| self.get_once(path)).await
    }

    /// GET `path` once (no retry): for looking around after a failure.
    pub async fn get_once(&self, path: &str) -> Result<Doc, CallError> {
        let mut path = path.to_string();
        for _ in 0..=MAX_REDIRECTS {
            let a = self.call(Method::GET, &path, None, None).await?;
            if (300..400).contains(&a.status) {
                path = self.same_origin(a.location.as_deref()).ok_or_else(|| {
                    CallError::Bad(format!(
                        "GET {path}: HTTP {} redirect to {:?}, which is not on {}",
                        a.status, a.location, self.origin
                    ))
                })?;
                continue;
            }
            check(a.status, &a.body)?;
            let doc: Value = serde_json::from_slice(&a.body)
                .map_err(|e| CallError::Bad(format!("GET {path}: the answer is not JSON ({e})")))?;
            let etag = a.etag.or_else(|| {
                doc.get("@odata.etag")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            });
            return Ok(Doc { path, doc, etag });
        }
        Err(CallError::Bad(format!(
            "GET {path}: more than {MAX_REDIRECTS} redirects"
        )))
    }

    /// POST (an action) or PATCH `body` to `path`, with `If-Match` when
    /// given, with the retries of transient refusals; any 2xx is success.
    /// The answer's `ETag`, if any (a PATCHed resource's new one).
    pub async fn send(
        &self,
        method: Method,
        path: &str,
        body: &Value,
        if_match: Option<&str>,
    ) -> Result<Option<String>, CallError> {
        self.retrying(|| async {
            let a = self
                .call(method.clone(), path, Some(body), if_match)
                .await?;
            check(a.status, &a.body).map(|()| a.etag)
        })
        .await
    }

    /// Run `once` until it succeeds or fails for good: a transient refusal
    /// is tried again after a back-off, at most [`ATTEMPTS`] times and
    /// within the budget.
    async fn retrying<T, F, Fut>(&self, once: F) -> Result<T, CallError>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = Result<T, CallError>>,
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
                    CallError::Status { status, error, .. } => CallError::Status {
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
    fn same_origin(&self, location: Option<&str>) -> Option<String> {
        let l = location?;
        if l.starts_with('/') {
            return Some(l.to_string());
        }
        let rest = l.strip_prefix(self.origin.as_str())?;
        rest.starts_with('/').then(|| rest.to_string())
    }

    /// One request, counted against the budget.
    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        if_match: Option<&str>,
    ) -> Result<Answer, CallError> {
        let what = format!("{method} {}{path}", self.origin);
        let room = self
            .deadline
            .saturating_duration_since(tokio::time::Instant::now());
        let n = self
            .requests
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if n >= MAX_REQUESTS || room.is_zero() {
            return Err(CallError::Budget(format!(
                "{what}: not sent, this command has made {n} requests in {}s (at most {MAX_REQUESTS} in {}s)",
                (MAX_TIME - room).as_secs(),
                MAX_TIME.as_secs()
            )));
        }
        let limit = CALL_TIMEOUT.min(room);
        tokio::time::timeout(limit, self.call_inner(method, path, body, if_match))
            .await
            .map_err(|_| {
                CallError::Unreachable(format!("{what}: no answer within {}s", limit.as_secs()))
            })?
            .map_err(|m| CallError::Unreachable(format!("{what}: {m}")))
    }

    async fn call_inner(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        if_match: Option<&str>,
    ) -> Result<Answer, String> {
        let connect = async {
            let tcp = TcpStream::connect((self.host.as_str(), self.port))
                .await
                .map_err(|e| format!("cannot connect: {e}"))?;
            let _ = tcp.set_nodelay(true);
            Ok::<_, String>(tcp)
        };
        let tcp = tokio::time::timeout(CONNECT_TIMEOUT, connect)
            .await
            .map_err(|_| format!("cannot connect within {}s", CONNECT_TIMEOUT.as_secs()))??;
        let payload = match body {
            Some(v) => Bytes::from(v.to_string()),
            None => Bytes::new(),
        };
        let mut req = Request::builder()
            .method(method)
            .uri(path)
            .header(hyper::header::HOST, host_header(&self.origin))
            .header(hyper::header::AUTHORIZATION, &self.authorization)
            .header(hyper::header::ACCEPT, "application/json")
            .header("OData-Version", "4.0")
            .header(hyper::header::CONNECTION, "close");
        if body.is_some() {
            req = req.header(hyper::header::CONTENT_TYPE, "application/json");
        }
        if let Some(tag) = if_match {
            req = req.header(hyper::header::IF_MATCH, tag);
        }
        let req = req
            .body(Full::new(payload))
            .map_err(|e| format!("bad request: {e}"))?;
        match &self.tls {
            None => exchange(TokioIo::new(tcp), req).await,
            Some((connector, name)) => {
                let tls =
                    tokio::time::timeout(CONNECT_TIMEOUT, connector.connect(name.clone(), tcp))
                        .await
                        .map_err(|_| "TLS handshake timed out".to_string())?
                        .map_err(|e| format!("TLS handshake failed: {e}"))?;
                exchange(TokioIo::new(tls), req).await
            }
        }
    }
}

/// `host[:port]` of an origin.
fn host_header(origin: &str) -> &str {
    origin.split_once("://").map_or(origin, |(_, h)| h)
}

async fn exchange<T>(io: T, req: Request<Full<Bytes>>) -> Result<Answer, String>
where
    T: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(|e| format!("HTTP handshake failed: {e}"))?;
    let driver = tokio::spawn(async move {
        let _ = conn.await;
    });
    let res = sender
        .send_request(req)
        .await
        .map_err(|e| format!("no HTTP answer: {e}"))?;
    let status = res.status().as_u16();
    let header = |h| {
        res.headers()
            .get(h)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let location = header(hyper::header::LOCATION);
    let etag = header(hyper::header::ETAG);
    let body = Limited::new(res.into_body(), MAX_BODY)
        .collect()
        .await
        .map_err(|e| format!("reading the answer: {e}"))?
        .to_bytes();
    driver.abort();
    Ok(Answer {
        status,
        location,
        etag,
        body,
    })
}

fn check(status: u16, body: &[u8]) -> Result<(), CallError> {
    if (200..300).contains(&status) {
        Ok(())
    } else {
        Err(CallError::Status {
            status,
            error: RedfishError::parse(body),
            attempts: 1,
        })
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
        assert!(
            matches!(&e, CallError::Budget(m) if m.contains("not sent") && m.contains("made 40 requests")),
            "{e}"
        );
    }

    #[tokio::test]
    async fn refused_connection_is_unreachable() {
        let c = Client::new(&cfg(), "a", "b").unwrap();
        let e = c.get("/redfish/v1/Systems/x").await.unwrap_err();
        assert!(
            matches!(&e, CallError::Unreachable(m) if m.contains("cannot connect")),
            "{e}"
        );
    }
}
