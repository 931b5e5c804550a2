//! Why a pull-through upstream could not be built or asked
//! (`upstream.rs`, `upstream_pool.rs`): one variant per failure, each
//! message naming the upstream, the host or the file involved.
//!
//! Invariant: no variant carries a credential, a token or a redirect's
//! URL (a signed CDN URL holds a credential in its query); the token
//! realm and the configured URL are named, as they are configuration.

use std::path::PathBuf;
use std::time::Duration;

/// An upstream client's failure; `Display` is the message status and the
/// log show.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    #[error("{uri}: not http:// or https://")]
    NotHttp { uri: String },
    #[error("{uri}: no host")]
    NoHost { uri: String },
    #[error("url {url:?}: {reason}")]
    BadUrl { url: String, reason: String },
    #[error("{}: {reason}", path.display())]
    CaRead { path: PathBuf, reason: String },
    #[error("{}: bad PEM: {reason}", path.display())]
    CaPem { path: PathBuf, reason: String },
    #[error("{}: no certificates found", path.display())]
    CaEmpty { path: PathBuf },
    #[error("{}: bad certificate: {reason}", path.display())]
    CaCert { path: PathBuf, reason: String },
    #[error("{0}")]
    TlsConfig(String),
    #[error("no answer from {url} within {deadline:?}")]
    Timeout { url: String, deadline: Duration },
    #[error("{url}: more than {max} redirects")]
    TooManyRedirects { url: String, max: usize },
    #[error("{url}: a redirect to something not a URL")]
    RedirectNotUrl { url: String },
    #[error("{url}: a redirect not to http(s)")]
    RedirectNotHttp { url: String },
    #[error("token realm {realm:?} is not a URL")]
    RealmNotUrl { realm: String },
    #[error("token realm {realm}: {reason}")]
    RealmBody { realm: String, reason: String },
    /// `who` says how it asked: with the pull secret's credentials or
    /// anonymously.
    #[error("token realm {realm} refused {who}: {status}")]
    RealmRefused {
        realm: String,
        who: &'static str,
        status: hyper::StatusCode,
    },
    #[error("token realm {realm}: no token in answer")]
    NoToken { realm: String },
    #[error("request: {0}")]
    Request(String),
    #[error("connect to {who}: {source}")]
    Connect { who: String, source: std::io::Error },
    #[error("{host:?} is not a TLS name")]
    NotTlsName { host: String },
    #[error("TLS with {who}: {source}")]
    Tls { who: String, source: std::io::Error },
    #[error("HTTP with {who}: {source}")]
    Http { who: String, source: hyper::Error },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn io(text: &str) -> std::io::Error {
        std::io::Error::other(text.to_string())
    }

    fn reads(cases: Vec<(UpstreamError, &str)>) {
        for (e, text) in cases {
            assert_eq!(e.to_string(), text);
        }
    }

    #[test]
    fn each_configuration_message_reads_as_before() {
        let p = || PathBuf::from("/etc/ca.pem");
        reads(vec![
            (
                UpstreamError::NotHttp {
                    uri: "ftp://x/".into(),
                },
                "ftp://x/: not http:// or https://",
            ),
            (
                UpstreamError::NoHost { uri: "/v2/".into() },
                "/v2/: no host",
            ),
            (
                UpstreamError::BadUrl {
                    url: "ht tp://".into(),
                    reason: "invalid uri character".into(),
                },
                "url \"ht tp://\": invalid uri character",
            ),
            (
                UpstreamError::CaRead {
                    path: p(),
                    reason: "I/O error: gone".into(),
                },
                "/etc/ca.pem: I/O error: gone",
            ),
            (
                UpstreamError::CaPem {
                    path: p(),
                    reason: "bad base64".into(),
                },
                "/etc/ca.pem: bad PEM: bad base64",
            ),
            (
                UpstreamError::CaEmpty { path: p() },
                "/etc/ca.pem: no certificates found",
            ),
            (
                UpstreamError::CaCert {
                    path: p(),
                    reason: "bad der".into(),
                },
                "/etc/ca.pem: bad certificate: bad der",
            ),
            (
                UpstreamError::TlsConfig("no versions".into()),
                "no versions",
            ),
        ]);
    }

    #[test]
    fn each_request_message_reads_as_before() {
        let url = || "https://quay.io".to_string();
        let realm = || "https://auth.example/token".to_string();
        reads(vec![
            (
                UpstreamError::Timeout {
                    url: url(),
                    deadline: Duration::from_secs(8),
                },
                "no answer from https://quay.io within 8s",
            ),
            (
                UpstreamError::TooManyRedirects { url: url(), max: 5 },
                "https://quay.io: more than 5 redirects",
            ),
            (
                UpstreamError::RedirectNotUrl { url: url() },
                "https://quay.io: a redirect to something not a URL",
            ),
            (
                UpstreamError::RedirectNotHttp { url: url() },
                "https://quay.io: a redirect not to http(s)",
            ),
            (
                UpstreamError::RealmNotUrl {
                    realm: "x y".into(),
                },
                "token realm \"x y\" is not a URL",
            ),
            (
                UpstreamError::RealmBody {
                    realm: realm(),
                    reason: "length limit exceeded".into(),
                },
                "token realm https://auth.example/token: length limit exceeded",
            ),
            (
                UpstreamError::RealmRefused {
                    realm: realm(),
                    who: "anonymously (no pull-secret entry)",
                    status: hyper::StatusCode::UNAUTHORIZED,
                },
                "token realm https://auth.example/token refused anonymously (no pull-secret entry): 401 Unauthorized",
            ),
            (
                UpstreamError::NoToken { realm: realm() },
                "token realm https://auth.example/token: no token in answer",
            ),
            (
                UpstreamError::Request("bad header".into()),
                "request: bad header",
            ),
            (
                UpstreamError::Connect {
                    who: "quay.io".into(),
                    source: io("refused"),
                },
                "connect to quay.io: refused",
            ),
            (
                UpstreamError::NotTlsName { host: "a b".into() },
                "\"a b\" is not a TLS name",
            ),
            (
                UpstreamError::Tls {
                    who: "quay.io".into(),
                    source: io("unknown issuer"),
                },
                "TLS with quay.io: unknown issuer",
            ),
        ]);
    }
}
