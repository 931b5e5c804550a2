//! The certificate of the boot ISOs' HTTPS listener (`http.tlsListen`,
//! issue #30): the operator's `http.tls` files, or one the appliance
//! generates for its address at first start, signed by its own CA
//! ([`ca`], issue #36; the file holds the leaf then the CA), and keeps in
//! its state directory (next to the lease file), reused on later starts
//! (a self-signed one kept from an earlier version included).
//!
//! Invariants:
//! - A certificate is used only once its chain and key parse and the key
//!   matches the first certificate (rustls compares the public keys):
//!   [`load`] fails otherwise, before anything binds or changes.
//! - A generated certificate names `network.applianceIP` and the listener's
//!   own address (when it is not the unspecified one) as IP SANs; one kept
//!   from an earlier start is reused while it parses, matches its key and
//!   still names every such address, else it is made again (and logged).
//!   Its key file is created with mode 0600 and never widened.
//! - A private key readable by group or others is refused, the operator's
//!   (`http.tls.keyFile`) and a kept generated one alike, as token and
//!   password files are ([`check_key_file`]): [`load`] fails, `check`
//!   says so, and nothing is made again in its place (who could read it
//!   is for the operator to judge).
//! - The fingerprint is the SHA-256 of the first certificate's DER, as
//!   `openssl x509 -fingerprint -sha256` prints it (`AA:BB:…`).
//!
//! The generated key is ECDSA P-256 (what rcgen makes with ring, the
//! crypto backend of the rest of the appliance); a BMC whose TLS client
//! takes RSA only needs `http.tls` with an RSA certificate.

use std::io::Write as _;
use std::net::IpAddr;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use serde::{Deserialize, Serialize};
use tracing::info;

use crate::model::cluster::Cluster;

pub mod ca;
mod error;

pub use error::CertError;

/// Years a generated certificate is valid from January 1st of the year it
/// is made.
const VALID_YEARS: i32 = 10;

/// What the listener serves with, and what the status shows of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CertInfo {
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
    /// Made by the appliance (no `http.tls`).
    pub generated: bool,
    /// SHA-256 of the certificate's DER, `AA:BB:…`.
    pub sha256: String,
}

/// A ready server configuration and where it came from.
pub struct ServerCert {
    pub config: Arc<ServerConfig>,
    pub info: CertInfo,
}

/// Where a generated certificate and key of `c` are kept: next to the
/// lease file, `<cluster>-https-cert.pem` and `<cluster>-https-key.pem`.
pub fn generated_paths(c: &Cluster) -> (PathBuf, PathBuf) {
    state_pair(c, "https-cert", "https-key")
}

/// `<cluster>-<cert>.pem` and `<cluster>-<key>.pem` in the state directory
/// (the lease file's): where the appliance keeps what it generated.
pub(crate) fn state_pair(c: &Cluster, cert: &str, key: &str) -> (PathBuf, PathBuf) {
    let dir = c
        .dhcp
        .lease_file
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    (
        dir.join(format!("{}-{cert}.pem", c.name)),
        dir.join(format!("{}-{key}.pem", c.name)),
    )
}

/// The addresses a generated certificate must name: `applianceIP` and the
/// HTTPS listener's address unless unspecified.
pub fn wanted_ips(c: &Cluster) -> Vec<IpAddr> {
    let mut ips = vec![IpAddr::V4(c.network.appliance_ip)];
    if let Some(l) = c.http.tls_listen
        && !l.ip().is_unspecified()
        && !ips.contains(&l.ip())
    {
        ips.push(l.ip());
    }
    ips
}

/// The certificate of `c`'s HTTPS listener: `http.tls`, else the generated
/// one (made now when missing, stale or broken). Blocking file I/O.
pub fn load(c: &Cluster) -> Result<ServerCert, CertError> {
    if let Some(t) = &c.http.tls {
        check_key_file(&t.key_file).map_err(|reason| CertError::ExposedKey {
            what: "http.tls.keyFile:",
            reason,
        })?;
        return from_files(&t.cert_file, &t.key_file, false);
    }
    check_kept_key(c)?;
    let (cert, key) = generated_paths(c);
    let ips = wanted_ips(c);
    match reusable(&cert, &key, &ips) {
        Ok(found) => return Ok(found),
        Err(why) if cert.exists() || key.exists() => {
            info!("https: making a new certificate: {why}");
        }
        Err(_) => {}
    }
    let signed = || {
        ca::load_or_create(c)?
            .issue(&[], &ips)
            .map_err(|e| CertError::Signing(Box::new(e)))
    };
    generate(&cert, &key, &ips, signed)?;
    from_files(&cert, &key, true)
}

/// Why the private key in `key` may not be used: it must be a regular
/// file that neither group nor others can read (the rule of token and
/// password files); the reason is `config::secret`'s message.
pub fn check_key_file(key: &Path) -> Result<(), crate::config::secret::SecretFileError> {
    crate::config::secret::check_secret_file(key, true)
}

/// Why the kept generated key of `c` (when there is one) may not be used:
/// [`check_key_file`], with how to mend it. `Ok` when none is kept.
pub fn check_kept_key(c: &Cluster) -> Result<(), CertError> {
    let (cert, key) = generated_paths(c);
    if std::fs::symlink_metadata(&key).is_err() {
        return Ok(());
    }
    check_key_file(&key).map_err(|reason| CertError::ExposedKeptKey { reason, cert })
}

/// What `check` can say without making anything: the generated
/// certificate's info when one is kept and still fits.
pub fn peek(c: &Cluster) -> Option<CertInfo> {
    if let Some(t) = &c.http.tls {
        return from_files(&t.cert_file, &t.key_file, false)
            .ok()
            .map(|s| s.info);
    }
    let (cert, key) = generated_paths(c);
    reusable(&cert, &key, &wanted_ips(c)).ok().map(|s| s.info)
}

/// The kept certificate when it loads and names every address of `ips`.
fn reusable(cert: &Path, key: &Path, ips: &[IpAddr]) -> Result<ServerCert, CertError> {
    let s = from_files(cert, key, true)?;
    let der = read_chain(cert)?.remove(0);
    let ee = webpki::EndEntityCert::try_from(&der).map_err(|e| CertError::BadCertificate {
        path: cert.to_path_buf(),
        detail: e.to_string(),
    })?;
    for ip in ips {
        let name = ServerName::IpAddress((*ip).into());
        if ee.verify_is_valid_for_subject_name(&name).is_err() {
            return Err(CertError::DoesNotName {
                cert: cert.to_path_buf(),
                ip: *ip,
            });
        }
    }
    Ok(s)
}

/// Parse `cert` and `key` into a server configuration (the key must match).
pub fn from_files(cert: &Path, key: &Path, generated: bool) -> Result<ServerCert, CertError> {
    let chain = read_chain(cert)?;
    let key_der = read_key(key)?;
    let sha256 = fingerprint(&chain[0]);
    let config = server_config(chain, key_der).map_err(|err| CertError::Unusable {
        cert: cert.to_path_buf(),
        key: key.to_path_buf(),
        err,
    })?;
    Ok(ServerCert {
        config: Arc::new(config),
        info: CertInfo {
            cert_file: cert.to_path_buf(),
            key_file: key.to_path_buf(),
            generated,
            sha256,
        },
    })
}

fn read_chain(path: &Path) -> Result<Vec<CertificateDer<'static>>, CertError> {
    let bytes = std::fs::read(path).map_err(CertError::io(path))?;
    let chain = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| CertError::NotPem {
            path: path.to_path_buf(),
            detail: e.to_string(),
        })?;
    if chain.is_empty() {
        return Err(CertError::NoCertificate {
            path: path.to_path_buf(),
        });
    }
    Ok(chain)
}

fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, CertError> {
    let bytes = std::fs::read(path).map_err(CertError::io(path))?;
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| CertError::NoKey {
        path: path.to_path_buf(),
        detail: e.to_string(),
    })
}

/// TLS 1.3 and 1.2 with ring, ALPN h2 then http/1.1; fails when the key
/// does not match the certificate.
///
/// The server picks the cipher suite, AES-128-GCM first (then AES-256-GCM,
/// then ChaCha20-Poly1305), as Go's crypto/tls and BoringSSL servers do on
/// AES hardware: curl's OpenSSL lists AES-256-GCM first, which costs both
/// ends four more AES rounds per block for no security a lab needs (128-bit
/// keys are TLS 1.3's mandatory suite). A client without AES-GCM still gets
/// ChaCha20.
pub(crate) fn server_config(
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
) -> Result<ServerConfig, rustls::Error> {
    let mut provider = rustls::crypto::ring::default_provider();
    provider.cipher_suites.sort_by_key(suite_rank);
    let mut cfg = ServerConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?
        .with_no_client_auth()
        .with_single_cert(chain, key)?;
    cfg.ignore_client_order = true;
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(cfg)
}

/// A suite's place in the server's order: AES-128-GCM, AES-256-GCM, the
/// rest as ring lists them (the sort is stable; TLS 1.3 and 1.2 suites may
/// mix in one list, the version is settled before the suite).
fn suite_rank(s: &rustls::SupportedCipherSuite) -> u8 {
    use rustls::CipherSuite as C;
    match s.suite() {
        C::TLS13_AES_128_GCM_SHA256
        | C::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
        | C::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 => 0,
        C::TLS13_AES_256_GCM_SHA384
        | C::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384
        | C::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384 => 1,
        _ => 2,
    }
}

/// SHA-256 of `der` as `AA:BB:…`.
pub fn fingerprint(der: &[u8]) -> String {
    let d = ring::digest::digest(&ring::digest::SHA256, der);
    let hex: Vec<String> = d.as_ref().iter().map(|b| format!("{b:02X}")).collect();
    hex.join(":")
}

/// Make a certificate for `ips` with `make` (the chain and key, PEM: the
/// appliance CA's leaf and the CA) and write it and its key (0600), each
/// through a temporary file renamed into place.
fn generate(
    cert: &Path,
    key: &Path,
    ips: &[IpAddr],
    make: impl FnOnce() -> Result<(String, String), CertError>,
) -> Result<(), CertError> {
    let (cert_pem, key_pem) = make().map_err(|e| CertError::Generating(Box::new(e)))?;
    let hint = |e: CertError| CertError::StateDir(Box::new(e));
    if let Some(dir) = cert.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| hint(CertError::io(dir)(e)))?;
    }
    write_new(key, key_pem.as_bytes(), 0o600).map_err(hint)?;
    write_new(cert, cert_pem.as_bytes(), 0o644).map_err(hint)?;
    info!(
        "https: generated a certificate signed by the appliance CA for {} in {}",
        ips.iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", "),
        cert.display()
    );
    Ok(())
}

/// A self-signed PEM certificate and key (the unit tests'): IP SANs
/// `ips`, server authentication, valid from January 1st of this year for
/// [`VALID_YEARS`].
#[cfg(test)]
fn self_signed(ips: &[IpAddr], cluster: &str) -> Result<(String, String), rcgen::Error> {
    let mut p = rcgen::CertificateParams::default();
    p.subject_alt_names = ips
        .iter()
        .map(|ip| rcgen::SanType::IpAddress(*ip))
        .collect();
    let cn = match ips.first() {
        Some(ip) => format!("crc-appliance {cluster} {ip}"),
        None => format!("crc-appliance {cluster}"),
    };
    p.distinguished_name = rcgen::DistinguishedName::new();
    p.distinguished_name
        .push(rcgen::DnType::CommonName, cn.as_str());
    p.key_usages = vec![rcgen::KeyUsagePurpose::DigitalSignature];
    p.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    let year = this_year();
    p.not_before = rcgen::date_time_ymd(year, 1, 1);
    p.not_after = rcgen::date_time_ymd(year + VALID_YEARS, 1, 1);
    let key = rcgen::KeyPair::generate()?;
    let cert = p.self_signed(&key)?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// The current year (UTC), from the system clock.
pub(crate) fn this_year() -> i32 {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    // Days to civil year (Howard Hinnant's algorithm, year part only).
    let z = (secs / 86_400) as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let year = yoe + era * 400 + i64::from(mp >= 10);
    i32::try_from(year).unwrap_or(1970)
}

/// Write `bytes` to `path` through `<path>.tmp` (created with `mode`),
/// synced, then renamed over `path`.
pub(crate) fn write_new(path: &Path, bytes: &[u8], mode: u32) -> Result<(), CertError> {
    let tmp = path.with_extension("pem.tmp");
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&tmp)
        .map_err(CertError::io(&tmp))?;
    f.write_all(bytes).map_err(CertError::io(&tmp))?;
    f.sync_all().map_err(CertError::io(&tmp))?;
    std::fs::rename(&tmp, path).map_err(CertError::io(path))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    fn pems(ips: &[IpAddr]) -> (String, String) {
        self_signed(ips, "c").unwrap()
    }

    fn ips(v: &[&str]) -> Vec<IpAddr> {
        v.iter().map(|s| s.parse().unwrap()).collect()
    }

    #[test]
    fn generated_once_then_reused_key_private() {
        let d = tempfile::tempdir().unwrap();
        let (cert, key) = (d.path().join("c.pem"), d.path().join("k.pem"));
        let want = ips(&["10.0.0.1", "127.0.0.1"]);
        assert!(reusable(&cert, &key, &want).is_err());
        generate(&cert, &key, &want, || Ok(pems(&want))).unwrap();
        let first = reusable(&cert, &key, &want).unwrap().info;
        assert!(first.generated);
        assert_eq!(first.sha256.len(), 32 * 3 - 1);
        let mode = std::fs::metadata(&key).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        // Another wanted address: not reusable.
        let err = reusable(&cert, &key, &ips(&["10.0.0.2"]))
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("does not name 10.0.0.2"), "{err}");
    }

    #[test]
    fn a_key_of_another_certificate_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let p = |n: &str| d.path().join(n);
        generate(&p("a.pem"), &p("a.key"), &ips(&["10.0.0.1"]), || {
            Ok(pems(&ips(&["10.0.0.1"])))
        })
        .unwrap();
        generate(&p("b.pem"), &p("b.key"), &ips(&["10.0.0.1"]), || {
            Ok(pems(&ips(&["10.0.0.1"])))
        })
        .unwrap();
        let err = from_files(&p("a.pem"), &p("b.key"), false)
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.contains("a.pem and") && err.to_lowercase().contains("key"),
            "{err}"
        );
        std::fs::write(p("junk.pem"), "not pem").unwrap();
        let err = from_files(&p("junk.pem"), &p("a.key"), false)
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("no PEM certificate"), "{err}");
        let err = from_files(&p("a.pem"), &p("junk.pem"), false)
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("no PEM private key"), "{err}");
    }

    #[test]
    fn fingerprint_is_sha256_in_openssl_form() {
        assert_eq!(
            fingerprint(b"abc"),
            "BA:78:16:BF:8F:01:CF:EA:41:41:40:DE:5D:AE:22:23:B0:03:61:A3:96:17:7A:9C:B4:10:FF:61:F2:00:15:AD"
        );
    }

    #[test]
    fn the_year_is_plausible() {
        let y = this_year();
        assert!((2024..2200).contains(&y), "{y}");
    }
}
