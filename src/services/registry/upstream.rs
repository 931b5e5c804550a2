//! The pull-through cache's upstream client (issue #36 item 4): one
//! `registry.pullThrough` entry, spoken to over HTTP/1.1 with hyper's
//! client connection and tokio-rustls (ring), as the CSR approver's and
//! the BMC client are built: the registry needs a few `GET`/`HEAD`s of one
//! upstream and of its token realm, not a general HTTP client stack.
//!
//! Authentication follows what the upstream asks in its 401: none; the
//! Docker token flow (`WWW-Authenticate: Bearer realm=…,service=…,scope=…`
//! → `GET realm?service=…&scope=…`, with basic credentials when the pull
//! secret has some, → a bearer token, kept per scope until it expires); or
//! plain basic (`WWW-Authenticate: Basic`). Credentials come from
//! `registry.pullSecretFile` (`{"auths":{"<host[:port]>":{"auth":
//! "base64(user:pass)"}}}`), found under the entry's `registry`, then the
//! url's `host:port`, then its host.
//!
//! Trust for `https://`: the system's roots (Debian's
//! `/etc/ssl/certs/ca-certificates.crt`) and the entry's `caFile`.
//!
//! Invariants: every request's head (DNS, connect, TLS, token round trip,
//! answer head) arrives within [`HEAD_DEADLINE`] or fails with the reason;
//! credentials and tokens are never logged nor shown (`Debug` redacts
//! them); a bad pull secret fails the start or the reload, not a request.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt as _, Empty};
use hyper::body::Incoming;
use hyper::header::{ACCEPT, AUTHORIZATION, HOST, LOCATION, USER_AGENT, WWW_AUTHENTICATE};
use hyper::{Method, Request, Response, StatusCode, Uri};
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use super::upstream_auth::{Challenge, Creds, PullSecret, parse_challenge, parse_token};
use crate::model::registry::PullThroughCfg;
use crate::runtime::sync::LockExt as _;

/// A request's head (with any auth round trips) arrives within this, so a
/// miss with the upstream down is answered within 10 s.
pub(super) const HEAD_DEADLINE: Duration = Duration::from_secs(8);
/// Redirects followed for one request (a CDN's signed URL is one).
const MAX_REDIRECTS: usize = 5;
/// Where Debian keeps the system's trusted roots.
const SYSTEM_ROOTS: &str = "/etc/ssl/certs/ca-certificates.crt";
/// After a request found the upstream unreachable, tags already stored
/// are served as last resolved without asking it again for this long.
const DOWN_HOLD: Duration = Duration::from_secs(10);
/// Largest token answer read.
const MAX_TOKEN_ANSWER: usize = 64 << 10;

/// Where a request goes: scheme, host, port.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Origin {
    tls: bool,
    host: String,
    port: u16,
}

impl Origin {
    fn of(uri: &Uri) -> Result<Origin, String> {
        let tls = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            _ => return Err(format!("{uri}: not http:// or https://")),
        };
        let host = uri
            .host()
            .ok_or_else(|| format!("{uri}: no host"))?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let port = uri.port_u16().unwrap_or(if tls { 443 } else { 80 });
        Ok(Origin { tls, host, port })
    }

    /// The `Host` header and pull-secret key: `host[:port]`.
    fn authority(&self) -> String {
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

/// One upstream of `registry.pullThrough`.
pub struct Upstream {
    /// The path prefix under the mirror (`quay.io`).
    pub registry: String,
    /// As configured (for status and messages).
    pub url: String,
    origin: Origin,
    tls: Arc<rustls::ClientConfig>,
    creds: Option<Creds>,
    /// Bearer tokens by scope, with their expiry.
    tokens: std::sync::Mutex<HashMap<String, (String, Instant)>>,
    /// The upstream asked for basic credentials once: send them at once.
    basic: std::sync::atomic::AtomicBool,
    /// When a request last found it unreachable (cleared by an answer).
    down_since: std::sync::Mutex<Option<Instant>>,
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream")
            .field("registry", &self.registry)
            .field("url", &self.url)
            .field("creds", &self.creds.as_ref().map(|_| "<redacted>"))
            .finish_non_exhaustive()
    }
}

fn client_tls(ca_file: Option<&Path>) -> Result<Arc<rustls::ClientConfig>, String> {
    let mut roots = rustls::RootCertStore::empty();
    if let Ok(iter) = CertificateDer::pem_file_iter(SYSTEM_ROOTS) {
        roots.add_parsable_certificates(iter.filter_map(Result::ok));
    }
    if let Some(p) = ca_file {
        let certs = CertificateDer::pem_file_iter(p)
            .map_err(|e| format!("{}: {e}", p.display()))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("{}: bad PEM: {e}", p.display()))?;
        if certs.is_empty() {
            return Err(format!("{}: no certificates found", p.display()));
        }
        for c in certs {
            roots
                .add(c)
                .map_err(|e| format!("{}: bad certificate: {e}", p.display()))?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

type Answer = Response<Incoming>;

impl Upstream {
    /// The client for `cfg`, with its credentials from `secret`.
    pub fn new(cfg: &PullThroughCfg, secret: Option<&PullSecret>) -> Result<Upstream, String> {
        let uri: Uri = cfg
            .url
            .parse()
            .map_err(|e| format!("url {:?}: {e}", cfg.url))?;
        let origin = Origin::of(&uri)?;
        let keys = [
            cfg.registry.clone(),
            origin.authority(),
            origin.host.clone(),
        ];
        Ok(Upstream {
            registry: cfg.registry.clone(),
            url: cfg.url.clone(),
            tls: client_tls(cfg.ca_file.as_deref())?,
            creds: secret.and_then(|s| s.find(&keys)),
            origin,
            tokens: std::sync::Mutex::default(),
            basic: std::sync::atomic::AtomicBool::new(false),
            down_since: std::sync::Mutex::default(),
        })
    }

    /// `method` on `/v2/<repo>/<rest>` with `accept`; the answer's head
    /// (its body streams after), authenticated as the upstream asks.
    pub async fn send(
        &self,
        method: Method,
        repo: &str,
        rest: &str,
        accept: &[String],
    ) -> Result<Answer, String> {
        let path = format!("/v2/{repo}/{rest}");
        let scope = format!("repository:{repo}:pull");
        let exchange = async {
            let (first, auth) = self.authenticated(&method, &path, scope, accept).await?;
            self.follow(&method, first, accept, auth.as_deref()).await
        };
        let result = tokio::time::timeout(HEAD_DEADLINE, exchange)
            .await
            .map_err(|_| format!("no answer from {} within {HEAD_DEADLINE:?}", self.url))
            .and_then(|r| r);
        *self.down_since.locked() = match &result {
            Ok(_) => None,
            Err(_) => Some(Instant::now()),
        };
        result
    }

    /// `method` on `path` at the upstream, authenticated as its 401 asks:
    /// the answer and the `Authorization` it was sent with.
    async fn authenticated(
        &self,
        method: &Method,
        path: &str,
        scope: String,
        accept: &[String],
    ) -> Result<(Answer, Option<String>), String> {
        let auth = self.known_auth(&scope);
        let first = self
            .request(&self.origin, method, path, accept, auth.as_deref())
            .await?;
        if first.status() != StatusCode::UNAUTHORIZED {
            return Ok((first, auth));
        }
        let challenge = first
            .headers()
            .get(WWW_AUTHENTICATE)
            .and_then(|v| v.to_str().ok())
            .and_then(parse_challenge);
        let auth = match challenge {
            Some(Challenge::Basic) => match &self.creds {
                Some(c) => {
                    self.basic.store(true, std::sync::atomic::Ordering::Relaxed);
                    c.basic()
                }
                None => return Ok((first, auth)),
            },
            Some(Challenge::Bearer {
                realm,
                service,
                scope: asked,
            }) => {
                let scope = asked.unwrap_or(scope);
                let token = self.token(&realm, service.as_deref(), &scope).await?;
                format!("Bearer {token}")
            }
            None => return Ok((first, auth)),
        };
        let answer = self
            .request(&self.origin, method, path, accept, Some(&auth))
            .await?;
        Ok((answer, Some(auth)))
    }

    /// Follow an answer's redirects (at most [`MAX_REDIRECTS`]): quay.io's
    /// and Docker Hub's blobs answer 302/307 with a signed URL on their
    /// CDN. `auth` goes to the upstream's own origin only: a signed URL
    /// carries its own, and a CDN must not see the upstream's credentials.
    async fn follow(
        &self,
        method: &Method,
        mut answer: Answer,
        accept: &[String],
        auth: Option<&str>,
    ) -> Result<Answer, String> {
        for _ in 0..MAX_REDIRECTS {
            if !matches!(answer.status().as_u16(), 301 | 302 | 303 | 307 | 308) {
                return Ok(answer);
            }
            let Some(location) = answer.headers().get(LOCATION).and_then(|v| v.to_str().ok())
            else {
                return Ok(answer);
            };
            let (origin, path) = self.redirect_target(location)?;
            let auth = auth.filter(|_| origin == self.origin);
            answer = self.request(&origin, method, &path, accept, auth).await?;
        }
        Err(format!("{}: more than {MAX_REDIRECTS} redirects", self.url))
    }

    /// Where a `Location` points: a path on the upstream, or an absolute
    /// `http(s)://` URL. (The URL is not put in messages: a signed one
    /// carries a credential in its query.)
    fn redirect_target(&self, location: &str) -> Result<(Origin, String), String> {
        if location.starts_with('/') && !location.starts_with("//") {
            return Ok((self.origin.clone(), location.to_string()));
        }
        let uri: Uri = location
            .parse()
            .map_err(|_| format!("{}: a redirect to something not a URL", self.url))?;
        let origin =
            Origin::of(&uri).map_err(|_| format!("{}: a redirect not to http(s)", self.url))?;
        let path = uri.path_and_query().map_or("/", |p| p.as_str()).to_string();
        Ok((origin, path))
    }

    /// Whether a request found it unreachable within [`DOWN_HOLD`].
    pub fn down(&self) -> bool {
        self.down_since
            .locked()
            .is_some_and(|t| t.elapsed() < DOWN_HOLD)
    }

    /// The credentials to send before being asked: a live token for
    /// `scope`, or basic when the upstream asked for it before.
    fn known_auth(&self, scope: &str) -> Option<String> {
        if let Some((t, until)) = self.tokens.locked().get(scope)
            && *until > Instant::now()
        {
            return Some(format!("Bearer {t}"));
        }
        if self.basic.load(std::sync::atomic::Ordering::Relaxed) {
            return self.creds.as_ref().map(Creds::basic);
        }
        None
    }

    /// A bearer token for `scope` from `realm` (kept until it expires).
    async fn token(
        &self,
        realm: &str,
        service: Option<&str>,
        scope: &str,
    ) -> Result<String, String> {
        let mut url = format!("{realm}?scope={}", query_escape(scope));
        if let Some(s) = service {
            url.push_str(&format!("&service={}", query_escape(s)));
        }
        let uri: Uri = url
            .parse()
            .map_err(|_| format!("token realm {realm:?} is not a URL"))?;
        let origin = Origin::of(&uri)?;
        let path = uri.path_and_query().map_or("/", |p| p.as_str()).to_string();
        let basic = self.creds.as_ref().map(Creds::basic);
        let answer = self
            .request(&origin, &Method::GET, &path, &[], basic.as_deref())
            .await?;
        let status = answer.status();
        let body = http_body_util::Limited::new(answer.into_body(), MAX_TOKEN_ANSWER)
            .collect()
            .await
            .map_err(|e| format!("token realm {realm}: {e}"))?
            .to_bytes();
        if status != StatusCode::OK {
            let who = if self.creds.is_some() {
                "with the pull secret's credentials"
            } else {
                "anonymously (no pull-secret entry)"
            };
            return Err(format!("token realm {realm} refused {who}: {status}"));
        }
        let (token, ttl) =
            parse_token(&body).ok_or_else(|| format!("token realm {realm}: no token in answer"))?;
        // Renew a little before the upstream would refuse it.
        let until = Instant::now() + Duration::from_secs(ttl.saturating_sub(5).max(1));
        self.tokens
            .locked()
            .insert(scope.to_string(), (token.clone(), until));
        Ok(token)
    }

    /// One exchange on a new connection.
    async fn request(
        &self,
        origin: &Origin,
        method: &Method,
        path: &str,
        accept: &[String],
        auth: Option<&str>,
    ) -> Result<Answer, String> {
        let mut req = Request::builder()
            .method(method.clone())
            .uri(path)
            .header(HOST, origin.authority())
            .header(USER_AGENT, "crc-appliance-registry");
        if !accept.is_empty() {
            req = req.header(ACCEPT, accept.join(", "));
        }
        if let Some(a) = auth {
            req = req.header(AUTHORIZATION, a);
        }
        let req = req
            .body(Empty::<Bytes>::new())
            .map_err(|e| format!("request: {e}"))?;
        let who = origin.authority();
        let tcp = TcpStream::connect((origin.host.as_str(), origin.port))
            .await
            .map_err(|e| format!("connect to {who}: {e}"))?;
        let _ = tcp.set_nodelay(true);
        if origin.tls {
            let name = ServerName::try_from(origin.host.clone())
                .map_err(|_| format!("{:?} is not a TLS name", origin.host))?;
            let tls = TlsConnector::from(self.tls.clone())
                .connect(name, tcp)
                .await
                .map_err(|e| format!("TLS with {who}: {e}"))?;
            exchange(TokioIo::new(tls), req, &who).await
        } else {
            exchange(TokioIo::new(tcp), req, &who).await
        }
    }
}

async fn exchange<T>(io: T, req: Request<Empty<Bytes>>, who: &str) -> Result<Answer, String>
where
    T: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(|e| format!("HTTP with {who}: {e}"))?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    sender
        .send_request(req)
        .await
        .map_err(|e| format!("HTTP with {who}: {e}"))
}

/// Percent-encoding of a query value (scopes hold `:` and `/`).
fn query_escape(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
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
        assert_eq!(
            query_escape("repository:a/b:pull"),
            "repository%3Aa%2Fb%3Apull"
        );
    }
}
