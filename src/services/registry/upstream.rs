//! The pull-through cache's upstream client (issue #36 item 4): one
//! `registry.pullThrough` entry, spoken to over HTTP/1.1 with hyper's
//! client connection and tokio-rustls (ring), as the CSR approver's and
//! the BMC client are built: the registry needs a few `GET`/`HEAD`s of one
//! upstream and of its token realm, not a general HTTP client stack. Its
//! connections are kept and reused per origin (`upstream_pool.rs`; the
//! count opened is in status); a 401 or a redirect is read to its end so
//! its connection is free for the request that follows it.
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
//! them, no error carries them); `Authorization` goes to the upstream's
//! own origin and the token realm only (a redirect to a CDN gets none); a
//! bad pull secret fails the start or the reload, not a request.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt as _, Empty};
use hyper::header::{ACCEPT, AUTHORIZATION, HOST, LOCATION, USER_AGENT, WWW_AUTHENTICATE};
use hyper::{Method, Request, StatusCode, Uri};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject as _;

use super::upstream_auth::{Challenge, Creds, PullSecret, parse_challenge, parse_token};
use super::upstream_error::UpstreamError;
use super::upstream_pool::{Answer, Origin, Pool};
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
/// Largest body of a 401 or a redirect read to keep its connection.
const MAX_DRAINED: usize = 64 << 10;

/// One upstream of `registry.pullThrough`.
pub struct Upstream {
    /// The path prefix under the mirror (`quay.io`).
    pub registry: String,
    /// As configured (for status and messages).
    pub url: String,
    origin: Origin,
    /// Its connections (and its token realm's and redirect targets').
    pool: Pool,
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

fn client_tls(ca_file: Option<&Path>) -> Result<Arc<rustls::ClientConfig>, UpstreamError> {
    let mut roots = rustls::RootCertStore::empty();
    if let Ok(iter) = CertificateDer::pem_file_iter(SYSTEM_ROOTS) {
        roots.add_parsable_certificates(iter.filter_map(Result::ok));
    }
    if let Some(p) = ca_file {
        let path = || p.to_path_buf();
        let certs = CertificateDer::pem_file_iter(p)
            .map_err(|e| UpstreamError::CaRead {
                path: path(),
                reason: e.to_string(),
            })?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| UpstreamError::CaPem {
                path: path(),
                reason: e.to_string(),
            })?;
        if certs.is_empty() {
            return Err(UpstreamError::CaEmpty { path: path() });
        }
        for c in certs {
            roots.add(c).map_err(|e| UpstreamError::CaCert {
                path: path(),
                reason: e.to_string(),
            })?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| UpstreamError::TlsConfig(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

impl Upstream {
    /// The client for `cfg`, with its credentials from `secret`.
    pub fn new(
        cfg: &PullThroughCfg,
        secret: Option<&PullSecret>,
    ) -> Result<Upstream, UpstreamError> {
        let uri: Uri = cfg.url.parse().map_err(|e| UpstreamError::BadUrl {
            url: cfg.url.clone(),
            reason: format!("{e}"),
        })?;
        let origin = Origin::of(&uri)?;
        let keys = [
            cfg.registry.clone(),
            origin.authority(),
            origin.host.clone(),
        ];
        Ok(Upstream {
            registry: cfg.registry.clone(),
            url: cfg.url.clone(),
            pool: Pool::new(client_tls(cfg.ca_file.as_deref())?),
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
    ) -> Result<Answer, UpstreamError> {
        let path = format!("/v2/{repo}/{rest}");
        let scope = format!("repository:{repo}:pull");
        let exchange = async {
            let (first, auth) = self.authenticated(&method, &path, scope, accept).await?;
            self.follow(&method, first, accept, auth.as_deref()).await
        };
        let result = tokio::time::timeout(HEAD_DEADLINE, exchange)
            .await
            .map_err(|_| UpstreamError::Timeout {
                url: self.url.clone(),
                deadline: HEAD_DEADLINE,
            })
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
    ) -> Result<(Answer, Option<String>), UpstreamError> {
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
        drain(first).await;
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
    ) -> Result<Answer, UpstreamError> {
        for _ in 0..MAX_REDIRECTS {
            if !matches!(answer.status().as_u16(), 301 | 302 | 303 | 307 | 308) {
                return Ok(answer);
            }
            let Some(location) = answer.headers().get(LOCATION).and_then(|v| v.to_str().ok())
            else {
                return Ok(answer);
            };
            let (origin, path) = self.redirect_target(location)?;
            drain(answer).await;
            let auth = auth.filter(|_| origin == self.origin);
            answer = self.request(&origin, method, &path, accept, auth).await?;
        }
        Err(UpstreamError::TooManyRedirects {
            url: self.url.clone(),
            max: MAX_REDIRECTS,
        })
    }

    /// Where a `Location` points: a path on the upstream, or an absolute
    /// `http(s)://` URL. (The URL is not put in messages: a signed one
    /// carries a credential in its query.)
    fn redirect_target(&self, location: &str) -> Result<(Origin, String), UpstreamError> {
        if location.starts_with('/') && !location.starts_with("//") {
            return Ok((self.origin.clone(), location.to_string()));
        }
        let url = || self.url.clone();
        let uri: Uri = location
            .parse()
            .map_err(|_| UpstreamError::RedirectNotUrl { url: url() })?;
        let origin = Origin::of(&uri).map_err(|_| UpstreamError::RedirectNotHttp { url: url() })?;
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
    ) -> Result<String, UpstreamError> {
        let mut url = format!("{realm}?scope={}", query_escape(scope));
        if let Some(s) = service {
            url.push_str(&format!("&service={}", query_escape(s)));
        }
        let uri: Uri = url.parse().map_err(|_| UpstreamError::RealmNotUrl {
            realm: realm.to_string(),
        })?;
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
            .map_err(|e| UpstreamError::RealmBody {
                realm: realm.to_string(),
                reason: e.to_string(),
            })?
            .to_bytes();
        if status != StatusCode::OK {
            let who = if self.creds.is_some() {
                "with the pull secret's credentials"
            } else {
                "anonymously (no pull-secret entry)"
            };
            return Err(UpstreamError::RealmRefused {
                realm: realm.to_string(),
                who,
                status,
            });
        }
        let (token, ttl) = parse_token(&body).ok_or_else(|| UpstreamError::NoToken {
            realm: realm.to_string(),
        })?;
        // Renew a little before the upstream would refuse it.
        let until = Instant::now() + Duration::from_secs(ttl.saturating_sub(5).max(1));
        self.tokens
            .locked()
            .insert(scope.to_string(), (token.clone(), until));
        Ok(token)
    }

    /// One exchange at `origin`, on a kept connection when one is free.
    async fn request(
        &self,
        origin: &Origin,
        method: &Method,
        path: &str,
        accept: &[String],
        auth: Option<&str>,
    ) -> Result<Answer, UpstreamError> {
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
            .map_err(|e| UpstreamError::Request(e.to_string()))?;
        self.pool.send(origin, req).await
    }

    /// Connections opened to it so far (its token realm and redirect
    /// targets included): with requests, what shows their reuse.
    pub fn connections_opened(&self) -> u64 {
        self.pool.opened()
    }
}

/// Read a small answer that is not passed on (a 401, a redirect) to its
/// end, so that its connection is free for the next request; a body over
/// [`MAX_DRAINED`] is left, and its connection closes.
async fn drain(answer: Answer) {
    let _ = http_body_util::Limited::new(answer.into_body(), MAX_DRAINED)
        .collect()
        .await;
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
    fn query_values_are_escaped() {
        assert_eq!(
            query_escape("repository:a/b:pull"),
            "repository%3Aa%2Fb%3Apull"
        );
    }
}
