//! Health check probes (the I/O side of [`super::health`]), shared by the
//! load balancer's check loops and the timeline's single-node prober (the
//! node's API and ingress when the load balancer is off).
//!
//! - `Tcp`: a TCP connect.
//! - `Tls`: a TCP connect plus a completed TLS handshake; the certificate is
//!   never verified (ingress certificates come from the cluster's own CA).
//! - `Https { path }`: a TLS handshake, then a minimal HTTP/1.1
//!   `GET path` with `Connection: close`; healthy on a 2xx status line. The
//!   certificate is not verified unless `loadBalancer.caFile` is set; then it
//!   must chain to that CA and name `api-int.<cluster domain>` (the name the
//!   OpenShift API and machine-config server certificates carry).
//!
//! rustls runs on the ring provider only. Every probe is bounded by the
//! caller's timeout; errors come back as short strings for status/logs.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use anyhow::Context as _;
use rustls::ClientConfig;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use crate::plan::Check;
use crate::runtime::tls::NoVerify;

/// TLS client settings shared by every probe of one LB generation.
#[derive(Clone)]
pub struct Prober {
    /// Never verifies (TLS handshake checks, and HTTPS checks without a CA).
    insecure: TlsConnector,
    /// Verifies against `caFile` with this server name (HTTPS checks).
    verified: Option<(TlsConnector, ServerName<'static>)>,
}

impl Prober {
    /// Build the TLS configs; reads `ca_file` (errors surface at bind time).
    pub fn new(ca_file: Option<&Path>, domain: &str) -> anyhow::Result<Prober> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let insecure = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .context("TLS protocol versions")?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NoVerify(provider.clone())))
            .with_no_client_auth();
        let verified = match ca_file {
            None => None,
            Some(path) => {
                let mut roots = rustls::RootCertStore::empty();
                let certs = CertificateDer::pem_file_iter(path)
                    .with_context(|| format!("LB CA bundle {}", path.display()))?;
                for c in certs {
                    let c =
                        c.with_context(|| format!("LB CA bundle {}: bad PEM", path.display()))?;
                    roots.add(c).with_context(|| {
                        format!("LB CA bundle {}: bad certificate", path.display())
                    })?;
                }
                if roots.is_empty() {
                    anyhow::bail!("LB CA bundle {}: no certificates found", path.display());
                }
                let cfg = ClientConfig::builder_with_provider(provider)
                    .with_safe_default_protocol_versions()
                    .context("TLS protocol versions")?
                    .with_root_certificates(roots)
                    .with_no_client_auth();
                let name = ServerName::try_from(format!("api-int.{domain}"))
                    .context("api-int server name")?;
                Some((TlsConnector::from(Arc::new(cfg)), name))
            }
        };
        Ok(Prober {
            insecure: TlsConnector::from(Arc::new(insecure)),
            verified,
        })
    }

    /// Run one probe (unbounded; the caller applies the timeout).
    pub async fn probe(&self, check: &Check, addr: SocketAddr) -> Result<(), ProbeError> {
        let tcp = TcpStream::connect(addr)
            .await
            .map_err(ProbeError::Connect)?;
        let _ = tcp.set_nodelay(true);
        match check {
            Check::Tcp => Ok(()),
            Check::Tls => {
                let name = ServerName::IpAddress(addr.ip().into());
                let mut tls = self
                    .insecure
                    .connect(name, tcp)
                    .await
                    .map_err(ProbeError::Tls)?;
                let _ = tls.shutdown().await;
                Ok(())
            }
            Check::Https { path } => {
                let (conn, name) = match &self.verified {
                    Some((c, n)) => (c, n.clone()),
                    None => (&self.insecure, ServerName::IpAddress(addr.ip().into())),
                };
                let mut tls = conn.connect(name, tcp).await.map_err(ProbeError::Tls)?;
                let req = format!(
                    "GET {path} HTTP/1.1\r\nHost: {addr}\r\nUser-Agent: crc-appliance-lb-check\r\nAccept: */*\r\nConnection: close\r\n\r\n"
                );
                tls.write_all(req.as_bytes())
                    .await
                    .map_err(ProbeError::Write)?;
                let mut buf = [0u8; 512];
                let mut len = 0;
                loop {
                    let n = tls.read(&mut buf[len..]).await.map_err(ProbeError::Read)?;
                    len += n;
                    if n == 0 || buf[..len].contains(&b'\n') || len == buf.len() {
                        break;
                    }
                }
                let status = status_code(&buf[..len])?;
                if (200..300).contains(&status) {
                    Ok(())
                } else {
                    Err(ProbeError::Status {
                        path: path.clone(),
                        status,
                    })
                }
            }
        }
    }
}

/// Why a health probe failed.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error("connect: {0}")]
    Connect(std::io::Error),
    #[error("TLS handshake: {0}")]
    Tls(std::io::Error),
    #[error("write request: {0}")]
    Write(std::io::Error),
    #[error("read response: {0}")]
    Read(std::io::Error),
    #[error("GET {path}: HTTP {status}")]
    Status { path: String, status: u16 },
    #[error(transparent)]
    BadResponse(#[from] StatusLineError),
    #[error("timed out after {0:?}")]
    Timeout(std::time::Duration),
}

impl ProbeError {
    /// A failure of this host, not of the backend: out of file descriptors,
    /// buffers or memory, no local address. It must not count against the
    /// backend (a full descriptor table would otherwise mark every backend
    /// of every pool down).
    pub fn is_local(&self) -> bool {
        let ProbeError::Connect(e) = self else {
            return false;
        };
        matches!(
            e.raw_os_error(),
            Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM | libc::EADDRNOTAVAIL)
        )
    }
}

/// Why an HTTPS check's answer has no status code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StatusLineError {
    /// The backend closed without answering.
    #[error("connection closed without a response")]
    Closed,
    /// The first line is not `HTTP/1.x <100..599> …` (the line, lossily
    /// decoded, its line end trimmed).
    #[error("bad status line {0:?}")]
    BadLine(String),
}

/// The status code of an HTTP/1.x status line.
pub fn status_code(head: &[u8]) -> Result<u16, StatusLineError> {
    let line = head.split(|b| *b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut parts = line.split_whitespace();
    let bad = || StatusLineError::BadLine(line.trim_end().to_string());
    match (parts.next(), parts.next()) {
        (Some(v), Some(code)) if v.starts_with("HTTP/1.") => code
            .parse::<u16>()
            .ok()
            .filter(|c| (100..600).contains(c))
            .ok_or_else(bad),
        _ if head.is_empty() => Err(StatusLineError::Closed),
        _ => Err(bad()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_status_lines() {
        assert_eq!(status_code(b"HTTP/1.1 200 OK\r\n"), Ok(200));
        assert_eq!(
            status_code(b"HTTP/1.0 503 Service Unavailable\r\nX: y"),
            Ok(503)
        );
        assert_eq!(status_code(b""), Err(StatusLineError::Closed));
        assert!(status_code(b"SSH-2.0-OpenSSH\r\n").is_err());
        assert!(status_code(b"HTTP/1.1 abc\r\n").is_err());
        assert!(status_code(b"HTTP/1.1 999 x\r\n").is_err());
    }

    /// The texts a backend's `lastError` in `/status` and the log show.
    #[test]
    fn a_bad_answer_says_what_came_back() {
        let cases = [
            (b"".as_slice(), "connection closed without a response"),
            (
                b"SSH-2.0-OpenSSH\r\n".as_slice(),
                "bad status line \"SSH-2.0-OpenSSH\"",
            ),
            (
                b"HTTP/1.1 999 x\r\n".as_slice(),
                "bad status line \"HTTP/1.1 999 x\"",
            ),
        ];
        for (head, text) in cases {
            let err = ProbeError::from(status_code(head).unwrap_err());
            assert_eq!(err.to_string(), text);
        }
    }
}
