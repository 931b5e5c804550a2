//! The appliance's own certificate authority (issue #36): made once, kept
//! next to the lease file (`<cluster>-ca.pem`, `<cluster>-ca-key.pem`, the
//! key 0600), and used to sign server certificates the appliance makes for
//! itself (the mirror registry's, and the boot ISOs' HTTPS one unless
//! `http.tls` is given). Clients trust that one CA
//! (`render mirror` prints it as install-config's `additionalTrustBundle`).
//!
//! Invariants: the CA is never made again while its files exist (a key
//! readable by group or others is refused, as `certs.rs` does); a leaf is
//! made at each start from the CA (ECDSA P-256, rcgen + ring) and names
//! the DNS names and addresses it is asked for; the chain served is the
//! leaf then the CA. The issuer of a leaf is rebuilt from the CA's
//! parameters (its subject is derived from the cluster name), so no X.509
//! parser is needed.

use std::net::IpAddr;
use std::path::PathBuf;

use crate::model::cluster::Cluster;

use super::{CertError, this_year, write_new};

/// The CA's certificate and key files of `c`.
pub fn paths(c: &Cluster) -> (PathBuf, PathBuf) {
    super::state_pair(c, "ca", "ca-key")
}

/// A loaded CA.
pub struct Ca {
    pub cert_pem: String,
    pub cert_file: PathBuf,
    key: rcgen::KeyPair,
    params: rcgen::CertificateParams,
}

fn ca_params(cluster: &str) -> rcgen::CertificateParams {
    let mut p = rcgen::CertificateParams::default();
    p.distinguished_name = rcgen::DistinguishedName::new();
    p.distinguished_name.push(
        rcgen::DnType::CommonName,
        format!("crc-appliance {cluster} CA").as_str(),
    );
    p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    p.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::CrlSign,
        rcgen::KeyUsagePurpose::DigitalSignature,
    ];
    let year = this_year();
    p.not_before = rcgen::date_time_ymd(year, 1, 1);
    p.not_after = rcgen::date_time_ymd(year + 20, 1, 1);
    p
}

/// The CA of `c`: loaded, or made now when its files do not exist.
/// Blocking file I/O.
pub fn load_or_create(c: &Cluster) -> Result<Ca, CertError> {
    let (cert, key) = paths(c);
    if std::fs::symlink_metadata(&key).is_ok() || cert.exists() {
        super::check_key_file(&key).map_err(|reason| CertError::ExposedKey {
            what: "the appliance CA key",
            reason,
        })?;
        let key_pem = std::fs::read_to_string(&key).map_err(CertError::io(&key))?;
        let cert_pem = std::fs::read_to_string(&cert).map_err(CertError::io(&cert))?;
        let kp = rcgen::KeyPair::from_pem(&key_pem).map_err(|e| CertError::NotAKey {
            path: key.clone(),
            detail: e.to_string(),
        })?;
        return Ok(Ca {
            cert_pem,
            cert_file: cert,
            key: kp,
            params: ca_params(&c.name),
        });
    }
    let params = ca_params(&c.name);
    let kp = rcgen::KeyPair::generate().map_err(|err| CertError::Make {
        what: "generating the CA key",
        err,
    })?;
    let made = params.self_signed(&kp).map_err(|err| CertError::Make {
        what: "generating the CA",
        err,
    })?;
    if let Some(dir) = cert.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(CertError::io(dir))?;
    }
    write_new(&key, kp.serialize_pem().as_bytes(), 0o600)?;
    write_new(&cert, made.pem().as_bytes(), 0o644)?;
    tracing::info!("made the appliance CA {}", cert.display());
    Ok(Ca {
        cert_pem: made.pem(),
        cert_file: cert,
        key: kp,
        params,
    })
}

impl Ca {
    /// A server certificate chain (leaf, CA) and its key, PEM, naming
    /// `dns` and `ips`.
    pub fn issue(&self, dns: &[String], ips: &[IpAddr]) -> Result<(String, String), CertError> {
        let mut p = rcgen::CertificateParams::new(dns.to_vec()).map_err(|err| CertError::Make {
            what: "the leaf's names",
            err,
        })?;
        p.subject_alt_names
            .extend(ips.iter().map(|ip| rcgen::SanType::IpAddress(*ip)));
        p.distinguished_name = rcgen::DistinguishedName::new();
        let cn = dns
            .first()
            .cloned()
            .unwrap_or_else(|| "crc-appliance".into());
        p.distinguished_name
            .push(rcgen::DnType::CommonName, cn.as_str());
        p.key_usages = vec![rcgen::KeyUsagePurpose::DigitalSignature];
        p.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
        let year = this_year();
        p.not_before = rcgen::date_time_ymd(year, 1, 1);
        p.not_after = rcgen::date_time_ymd(year + super::VALID_YEARS, 1, 1);
        let leaf_key = rcgen::KeyPair::generate().map_err(|err| CertError::Make {
            what: "generating the leaf key",
            err,
        })?;
        let issuer = rcgen::Issuer::from_params(&self.params, &self.key);
        let leaf = p
            .signed_by(&leaf_key, &issuer)
            .map_err(|err| CertError::Make {
                what: "signing",
                err,
            })?;
        Ok((
            format!("{}{}", leaf.pem(), self.cert_pem),
            leaf_key.serialize_pem(),
        ))
    }
}
