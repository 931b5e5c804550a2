//! What can go wrong loading, making or checking a certificate ([`CertError`]):
//! one variant per mistake, each naming the file and, where there is one,
//! the fix. The messages are the ones `check`, `serve` and the status show.
//!
//! Invariant: no variant carries key material, only paths and the parser's
//! or the file system's own error text.

use std::net::IpAddr;
use std::path::PathBuf;

/// Why a certificate or key could not be used or made.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    /// Reading, creating or renaming `path` failed.
    #[error("{}: {err}", path.display())]
    Io { path: PathBuf, err: std::io::Error },
    /// A private key file anyone but its owner may read, or not a regular
    /// file (`config::secret`'s rule): `what` names it ("the appliance CA
    /// key", "http.tls.keyFile: …").
    #[error("{what} {reason}")]
    ExposedKey {
        what: &'static str,
        reason: crate::config::secret::SecretFileError,
    },
    /// The kept generated HTTPS key is exposed: chmod it or make new ones.
    #[error(
        "the generated HTTPS key {reason}; chmod 600 it, or delete it and {} to make new ones",
        cert.display()
    )]
    ExposedKeptKey {
        reason: crate::config::secret::SecretFileError,
        cert: PathBuf,
    },
    /// The certificate file does not parse as PEM.
    #[error("{}: not a PEM certificate chain ({detail})", path.display())]
    NotPem { path: PathBuf, detail: String },
    /// The certificate file holds no certificate.
    #[error("{}: no PEM certificate in it", path.display())]
    NoCertificate { path: PathBuf },
    /// The key file holds no private key rustls reads.
    #[error("{}: no PEM private key (PKCS#8, PKCS#1 or SEC1) in it ({detail})", path.display())]
    NoKey { path: PathBuf, detail: String },
    /// The CA key file holds no key rcgen reads.
    #[error("{}: not a private key ({detail})", path.display())]
    NotAKey { path: PathBuf, detail: String },
    /// The first certificate is not a valid end-entity certificate.
    #[error("{}: {detail}", path.display())]
    BadCertificate { path: PathBuf, detail: String },
    /// The kept certificate does not name an address it must.
    #[error("{} does not name {ip}", cert.display())]
    DoesNotName { cert: PathBuf, ip: IpAddr },
    /// The key does not match the certificate, or rustls refused the pair.
    #[error("{} and {}: {err}", cert.display(), key.display())]
    Unusable {
        cert: PathBuf,
        key: PathBuf,
        err: rustls::Error,
    },
    /// rcgen could not make a key or certificate (`what`: which).
    #[error("{what}: {err}")]
    Make {
        what: &'static str,
        err: rcgen::Error,
    },
    /// Making a certificate failed (what `make` said).
    #[error("generating: {0}")]
    Generating(Box<CertError>),
    /// Signing the HTTPS certificate with the appliance CA failed.
    #[error("signing with the appliance CA: {0}")]
    Signing(Box<CertError>),
    /// Writing the generated certificate next to `dhcp.leaseFile` failed.
    #[error(
        "{0} (the generated certificate is kept next to dhcp.leaseFile: make that directory writable, or set http.tls)"
    )]
    StateDir(Box<CertError>),
}

impl CertError {
    /// An I/O error at `path`.
    pub fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> CertError {
        let path = path.into();
        move |err| CertError::Io { path, err }
    }
}
