//! The HTTP side of the Redfish driver: one HTTP/1.1 connection per call
//! (session-less, Basic auth) over TCP or rustls (ring), every step
//! bounded: connect [`CONNECT_TIMEOUT`], the whole call [`CALL_TIMEOUT`],
//! bodies at most [`MAX_BODY`] bytes. GETs follow up to [`MAX_REDIRECTS`]
//! redirects, only to the same origin (credentials never go elsewhere).
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

use super::redfish::error_message;
use crate::model::bmc::{BmcCfg, BmcTls};

/// TCP connect plus TLS handshake.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// One whole call (InsertMedia may make the BMC download the image first).
pub const CALL_TIMEOUT: Duration = Duration::from_secs(300);
/// Largest response body read.
pub const MAX_BODY: usize = 4 << 20;
/// Redirects a GET follows.
pub const MAX_REDIRECTS: usize = 5;

/// Why a call failed.
#[derive(Debug)]
pub enum CallError {
    /// No HTTP answer: connect refused, timeout, TLS failure, broken reply.
    Unreachable(String),
    /// An HTTP error status, with the BMC's Redfish message if it sent one.
    Status {
        status: u16,
        message: Option<String>,
    },
    /// A 2xx whose body is not the JSON expected.
    Bad(String),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Unreachable(m) | CallError::Bad(m) => f.write_str(m),
            CallError::Status {
                status,
                message: Some(m),
            } => write!(f, "HTTP {status}: {m}"),
            CallError::Status {
                status,
                message: None,
            } => write!(f, "HTTP {status}"),
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
        })
    }

    /// `scheme://host:port` of the BMC.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// GET `path` as JSON, following same-origin redirects; returns the
    /// final path with the document.
    pub async fn get(&self, path: &str) -> Result<(String, Value), CallError> {
        let mut path = path.to_string();
        for _ in 0..=MAX_REDIRECTS {
            let (status, location, body) = self.call(Method::GET, &path, None, None).await?;
            if (300..400).contains(&status) {
                path = self.same_origin(location.as_deref()).ok_or_else(|| {
                    CallError::Bad(format!(
                        "GET {path}: HTTP {status} redirect to {location:?}, which is not on {}",
                        self.origin
                    ))
                })?;
                continue;
            }
            check(status, &body)?;
            let v = serde_json::from_slice(&body)
                .map_err(|e| CallError::Bad(format!("GET {path}: the answer is not JSON ({e})")))?;
            return Ok((path, v));
        }
        Err(CallError::Bad(format!(
            "GET {path}: more than {MAX_REDIRECTS} redirects"
        )))
    }

    /// POST (an action) or PATCH `body` to `path`, with `If-Match` when
    /// given; any 2xx is success.
    pub async fn send(
        &self,
        method: Method,
        path: &str,
        body: &Value,
        if_match: Option<&str>,
    ) -> Result<(), CallError> {
        let (status, _, reply) = self.call(method, path, Some(body), if_match).await?;
        check(status, &reply)
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

    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        if_match: Option<&str>,
    ) -> Result<(u16, Option<String>, Bytes), CallError> {
        let what = format!("{method} {}{path}", self.origin);
        tokio::time::timeout(CALL_TIMEOUT, self.call_inner(method, path, body, if_match))
            .await
            .map_err(|_| {
                CallError::Unreachable(format!(
                    "{what}: no answer within {}s",
                    CALL_TIMEOUT.as_secs()
                ))
            })?
            .map_err(|m| CallError::Unreachable(format!("{what}: {m}")))
    }

    async fn call_inner(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        if_match: Option<&str>,
    ) -> Result<(u16, Option<String>, Bytes), String> {
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

async fn exchange<T>(
    io: T,
    req: Request<Full<Bytes>>,
) -> Result<(u16, Option<String>, Bytes), String>
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
    let location = res
        .headers()
        .get(hyper::header::LOCATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let body = Limited::new(res.into_body(), MAX_BODY)
        .collect()
        .await
        .map_err(|e| format!("reading the answer: {e}"))?
        .to_bytes();
    driver.abort();
    Ok((status, location, body))
}

fn check(status: u16, body: &[u8]) -> Result<(), CallError> {
    if (200..300).contains(&status) {
        Ok(())
    } else {
        Err(CallError::Status {
            status,
            message: error_message(body),
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
