//! Why `registry.releaseImage` does not resolve through the mirror as a
//! node resolves it ([`Problem`]): the `release` finding's problem is its
//! text, its fix is [`Problem::fix`]. One variant per step that failed,
//! each carrying the step's own typed reason ([`ResolveError`],
//! [`ConnectError`], [`RequestError`]).
//!
//! Invariant: no variant carries a secret (the check sends no
//! credentials; the texts name the mirror, the pullspec and what failed).

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

/// Why the release image is not pullable from the mirror by digest.
#[derive(Debug, thiserror::Error)]
pub(super) enum Problem {
    /// The pullspec names a tag; nodes pull by digest.
    #[error("registry.releaseImage {spec} is by tag: nodes pull the release by digest")]
    ByTag { spec: String },
    /// No `imageDigestSources` entry maps the release's repository.
    #[error("no imageDigestSources entry of the mirror covers {repo} (render mirror)")]
    NotMirrored { repo: String },
    /// The mirror's name does not resolve.
    #[error("the mirror's name {name} does not resolve: {why}")]
    Unresolved { name: String, why: ResolveError },
    /// The mirror does not answer TLS trusting only the node's anchor.
    #[error("the mirror {name}:{port} ({ip}): {why}")]
    Unreachable {
        name: String,
        port: u16,
        ip: IpAddr,
        why: ConnectError,
    },
    /// A request to the mirror failed (no answer, not a status).
    #[error("the mirror {authority}: {method} {path}: {why}")]
    Request {
        authority: String,
        method: &'static str,
        path: String,
        why: RequestError,
    },
    /// Manifests or blobs are missing (`named`: the first of them, and
    /// how many more).
    #[error("registry.releaseImage {spec}: the mirror {host} lacks {named}")]
    Missing {
        spec: String,
        host: String,
        named: String,
    },
}

impl Problem {
    /// The finding's fix.
    pub(super) fn fix(&self) -> &'static str {
        match self {
            Problem::ByTag { .. } => {
                "use its digest pullspec (oc adm release info <pullspec> -o jsonpath='{.digest}')"
            }
            Problem::NotMirrored { .. } => {
                "mirror the release into registry.storage (oc-mirror), or add its registry to registry.pullThrough"
            }
            Problem::Unresolved { .. } => {
                "check that serve is running and dns: answers for the cluster zone (registry.name)"
            }
            Problem::Unreachable { .. } => {
                "check that serve is running with this registry section, and its certificate (render mirror)"
            }
            Problem::Request { .. } => "check serve's log",
            Problem::Missing { .. } => {
                "mirror the release again (oc-mirror --v2 … docker://<mirror>) or push what is missing"
            }
        }
    }
}

/// Why the mirror's name has no address.
#[derive(Debug, thiserror::Error)]
pub(super) enum ResolveError {
    /// The host's resolver (no `dns:` service), or the appliance's DNS,
    /// took longer than a step.
    #[error("timed out")]
    Timeout,
    /// The host's resolver failed.
    #[error("{0}")]
    Lookup(std::io::Error),
    /// The host's resolver knows no address.
    #[error("no address")]
    NoAddress,
    /// The query could not be made (the name, or its encoding).
    #[error("{0}")]
    Query(hickory_proto::ProtoError),
    /// No socket to ask from.
    #[error("{0}")]
    Socket(std::io::Error),
    /// Sending to or receiving from the appliance's DNS failed.
    #[error("DNS at {server}: {err}")]
    Dns {
        server: SocketAddr,
        err: std::io::Error,
    },
    /// The appliance's DNS did not answer within a step.
    #[error("DNS at {server}: no answer from {server}")]
    NoAnswer { server: SocketAddr },
    /// The appliance's DNS answered without an A record.
    #[error("the appliance's DNS at {server} has no A record")]
    NoARecord { server: SocketAddr },
}

/// Why no HTTP/1.1 connection to the mirror, TLS trusting only the
/// node's anchor.
#[derive(Debug, thiserror::Error)]
pub(super) enum ConnectError {
    /// The trust anchor file is not PEM (or not readable).
    #[error("trust anchor {}: {err}", path.display())]
    Anchor {
        path: PathBuf,
        err: rustls::pki_types::pem::Error,
    },
    /// The trust anchor file holds no usable certificate.
    #[error("no certificate in {}", .0.display())]
    NoCertificate(PathBuf),
    /// The TLS client configuration could not be made.
    #[error("{0}")]
    Config(rustls::Error),
    /// `registry.name` is not a name TLS can verify.
    #[error("{0}")]
    ServerName(rustls::pki_types::InvalidDnsNameError),
    /// Connect and handshake took longer than a step.
    #[error("timed out")]
    Timeout,
    /// The connection or the TLS handshake failed.
    #[error("TLS (trusting only {}): {err}", anchor.display())]
    Tls {
        anchor: PathBuf,
        err: std::io::Error,
    },
    /// The HTTP/1.1 handshake failed.
    #[error("{0}")]
    Http(hyper::Error),
}

/// Why one request on the connection failed: hyper's reason.
#[derive(Debug, thiserror::Error)]
pub(super) enum RequestError {
    /// The request could not be built.
    #[error("{0}")]
    Build(hyper::http::Error),
    /// No complete answer within a step.
    #[error("timed out")]
    Timeout,
    /// The connection (not ready for a request, or the exchange failed).
    #[error("{0}")]
    Http(hyper::Error),
    /// The answer's body: unreadable, or over a manifest's size.
    #[error("{0}")]
    Body(Box<dyn std::error::Error + Send + Sync>),
}

#[cfg(test)]
mod tests {
    use super::*;

    const DNS: &str = "10.0.0.2:53";
    const RESOLVE_FIX: &str =
        "check that serve is running and dns: answers for the cluster zone (registry.name)";
    const CONNECT_FIX: &str = "check that serve is running with this registry section, and its certificate (render mirror)";

    fn io() -> std::io::Error {
        std::io::Error::from(std::io::ErrorKind::ConnectionRefused)
    }

    fn unresolved(why: ResolveError) -> Problem {
        Problem::Unresolved {
            name: "mirror.c.example.com".into(),
            why,
        }
    }

    fn unreachable(why: ConnectError) -> Problem {
        Problem::Unreachable {
            name: "mirror.c.example.com".into(),
            port: 5000,
            ip: "10.0.0.2".parse().unwrap(),
            why,
        }
    }

    fn check(cases: Vec<(Problem, &str, &str)>) {
        for (problem, text, fix) in cases {
            assert_eq!(problem.to_string(), text);
            assert_eq!(problem.fix(), fix);
        }
    }

    /// Every finding's problem and fix as `preflight` prints them.
    #[test]
    fn each_problem_says_what_failed_and_the_fix() {
        check(vec![
            (
                Problem::ByTag {
                    spec: "quay.io/r:4.17".into(),
                },
                "registry.releaseImage quay.io/r:4.17 is by tag: nodes pull the release by digest",
                "use its digest pullspec (oc adm release info <pullspec> -o jsonpath='{.digest}')",
            ),
            (
                Problem::NotMirrored {
                    repo: "quay.io/r".into(),
                },
                "no imageDigestSources entry of the mirror covers quay.io/r (render mirror)",
                "mirror the release into registry.storage (oc-mirror), or add its registry to registry.pullThrough",
            ),
            (
                Problem::Request {
                    authority: "mirror.c.example.com:5000".into(),
                    method: "HEAD",
                    path: "/v2/r/blobs/sha256:a".into(),
                    why: RequestError::Timeout,
                },
                "the mirror mirror.c.example.com:5000: HEAD /v2/r/blobs/sha256:a: timed out",
                "check serve's log",
            ),
            (
                Problem::Missing {
                    spec: "quay.io/r@sha256:d".into(),
                    host: "quay.io".into(),
                    named: "r@sha256:a (blob of sha256:d)".into(),
                },
                "registry.releaseImage quay.io/r@sha256:d: the mirror quay.io lacks r@sha256:a (blob of sha256:d)",
                "mirror the release again (oc-mirror --v2 … docker://<mirror>) or push what is missing",
            ),
            (
                unreachable(ConnectError::NoCertificate("/etc/ca.pem".into())),
                "the mirror mirror.c.example.com:5000 (10.0.0.2): no certificate in /etc/ca.pem",
                CONNECT_FIX,
            ),
            (
                unreachable(ConnectError::Timeout),
                "the mirror mirror.c.example.com:5000 (10.0.0.2): timed out",
                CONNECT_FIX,
            ),
            (
                unreachable(ConnectError::Tls {
                    anchor: "/etc/ca.pem".into(),
                    err: io(),
                }),
                "the mirror mirror.c.example.com:5000 (10.0.0.2): TLS (trusting only /etc/ca.pem): connection refused",
                CONNECT_FIX,
            ),
        ]);
    }

    /// Every way the mirror's name does not resolve.
    #[test]
    fn each_resolve_failure_is_named() {
        let server: SocketAddr = DNS.parse().unwrap();
        let said = "the mirror's name mirror.c.example.com does not resolve: ";
        let cases = vec![
            (ResolveError::Timeout, "timed out".to_string()),
            (ResolveError::Lookup(io()), "connection refused".into()),
            (ResolveError::NoAddress, "no address".into()),
            (ResolveError::Socket(io()), "connection refused".into()),
            (
                ResolveError::Dns { server, err: io() },
                format!("DNS at {DNS}: connection refused"),
            ),
            (
                ResolveError::NoAnswer { server },
                format!("DNS at {DNS}: no answer from {DNS}"),
            ),
            (
                ResolveError::NoARecord { server },
                format!("the appliance's DNS at {DNS} has no A record"),
            ),
        ];
        for (why, text) in cases {
            let problem = unresolved(why);
            assert_eq!(problem.to_string(), format!("{said}{text}"));
            assert_eq!(problem.fix(), RESOLVE_FIX);
        }
    }

    /// The variants that carry another library's error print its reason
    /// as it is (hyper's and rustls' configuration errors need a live
    /// exchange to make).
    #[test]
    fn a_librarys_reason_is_shown_as_it_is() {
        let anchor = ConnectError::Anchor {
            path: "/etc/ca.pem".into(),
            err: rustls::pki_types::pem::Error::NoItemsFound,
        };
        assert!(
            anchor.to_string().starts_with("trust anchor /etc/ca.pem: "),
            "{anchor}"
        );
        let name = rustls::pki_types::ServerName::try_from("not a name!").unwrap_err();
        assert_eq!(
            ConnectError::ServerName(name).to_string(),
            "invalid dns name"
        );
        let query = hickory_proto::rr::Name::from_ascii("a..b").unwrap_err();
        let said = query.to_string();
        assert_eq!(ResolveError::Query(query).to_string(), said);
    }
}
