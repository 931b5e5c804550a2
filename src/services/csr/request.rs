//! The PKCS#10 request inside a CSR's `spec.request`: what the approval
//! rules read from it (subject, SANs, key kind), after checking that it
//! is signed by its own key (proof of possession).
//!
//! Parsing is x509-parser's (rusticata, maintained; already in Cargo.lock
//! through rcgen's optional feature, and its `verify` feature checks the
//! signature with `ring`, the crypto the rest of the appliance uses). The
//! `der` crate alone would leave the PKCS#10 and extension structures to
//! write by hand; rcgen only writes requests.
//!
//! Invariants: a request that does not parse, carries trailing bytes, is
//! not signed by its own key, or asks for anything the rules do not know
//! (attributes other than an extension request, extensions other than
//! subjectAltName, SAN kinds other than DNS and IP) is a [`RequestError`]:
//! never approved, never a panic.

use std::net::IpAddr;

use x509_parser::certification_request::X509CertificationRequest;
use x509_parser::cri_attributes::ParsedCriAttribute;
use x509_parser::extensions::{GeneralName, ParsedExtension};
use x509_parser::oid_registry::{OID_X509_COMMON_NAME, OID_X509_ORGANIZATION_NAME};
use x509_parser::prelude::FromDer as _;
use x509_parser::public_key::PublicKey;

/// The kind of key the request certifies (usages depend on it: RSA keys
/// may also ask for `key encipherment`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    Ec,
    Rsa,
    Other,
}

/// What the rules read from a well-formed, self-signed request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// Every subject attribute in order, as (short name, value); a type
    /// other than O and CN is named by its OID.
    pub subject: Vec<(String, String)>,
    pub dns_sans: Vec<String>,
    pub ip_sans: Vec<IpAddr>,
    pub key: KeyKind,
}

impl Request {
    /// `<n>` when the subject is exactly `O=system:nodes, CN=system:node:<n>`
    /// (in either order, one of each, nothing else).
    pub fn node_subject(&self) -> Option<&str> {
        let [a, b] = self.subject.as_slice() else {
            return None;
        };
        let (org, cn) = if a.0 == "O" { (a, b) } else { (b, a) };
        if org.0 != "O" || org.1 != "system:nodes" || cn.0 != "CN" {
            return None;
        }
        cn.1.strip_prefix("system:node:").filter(|n| !n.is_empty())
    }

    /// The subject as `CN=…, O=…` (for refusal messages).
    pub fn subject_text(&self) -> String {
        let parts: Vec<String> = self
            .subject
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        parts.join(", ")
    }

    pub fn has_sans(&self) -> bool {
        !self.dns_sans.is_empty() || !self.ip_sans.is_empty()
    }
}

/// Why a request is not one the rules can judge.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    #[error("spec.request is not a PEM CERTIFICATE REQUEST")]
    NotPem,
    #[error("spec.request is not a valid PKCS#10 request")]
    NotPkcs10,
    #[error("the request is not signed by its own key")]
    BadSignature,
    #[error("the request has a subject attribute that is not text")]
    SubjectNotText,
    #[error("the request carries an attribute other than an extension request ({0})")]
    ExtraAttribute(String),
    #[error("the request asks for an extension other than subjectAltName ({0})")]
    ExtraExtension(String),
    #[error("the request asks for a subjectAltName that is neither DNS nor IP")]
    ExtraSanKind,
}

/// Parse the PEM text of `spec.request` (already base64-decoded from the
/// API object).
pub fn parse_pem(pem: &[u8]) -> Result<Request, RequestError> {
    let (rest, block) = x509_parser::pem::parse_x509_pem(pem).map_err(|_| RequestError::NotPem)?;
    if block.label != "CERTIFICATE REQUEST" && block.label != "NEW CERTIFICATE REQUEST" {
        return Err(RequestError::NotPem);
    }
    if rest.iter().any(|b| !b.is_ascii_whitespace()) {
        return Err(RequestError::NotPem);
    }
    parse_der(&block.contents)
}

/// Parse a DER PKCS#10 request.
pub fn parse_der(der: &[u8]) -> Result<Request, RequestError> {
    let (rest, csr) =
        X509CertificationRequest::from_der(der).map_err(|_| RequestError::NotPkcs10)?;
    if !rest.is_empty() {
        return Err(RequestError::NotPkcs10);
    }
    csr.verify_signature()
        .map_err(|_| RequestError::BadSignature)?;
    let info = &csr.certification_request_info;
    let mut subject = Vec::new();
    for attr in info.subject.iter_attributes() {
        let value = attr.as_str().map_err(|_| RequestError::SubjectNotText)?;
        let kind = if *attr.attr_type() == OID_X509_COMMON_NAME {
            "CN".to_string()
        } else if *attr.attr_type() == OID_X509_ORGANIZATION_NAME {
            "O".to_string()
        } else {
            attr.attr_type().to_id_string()
        };
        subject.push((kind, value.to_string()));
    }
    let mut req = Request {
        subject,
        dns_sans: Vec::new(),
        ip_sans: Vec::new(),
        key: match info.subject_pki.parsed() {
            Ok(PublicKey::EC(_)) => KeyKind::Ec,
            Ok(PublicKey::RSA(_)) => KeyKind::Rsa,
            _ => KeyKind::Other,
        },
    };
    for attr in info.iter_attributes() {
        let ParsedCriAttribute::ExtensionRequest(ext) = attr.parsed_attribute() else {
            return Err(RequestError::ExtraAttribute(attr.oid.to_id_string()));
        };
        for e in &ext.extensions {
            let ParsedExtension::SubjectAlternativeName(san) = e.parsed_extension() else {
                return Err(RequestError::ExtraExtension(e.oid.to_id_string()));
            };
            for name in &san.general_names {
                add_san(&mut req, name)?;
            }
        }
    }
    Ok(req)
}

fn add_san(req: &mut Request, name: &GeneralName<'_>) -> Result<(), RequestError> {
    match name {
        GeneralName::DNSName(d) => req.dns_sans.push((*d).to_string()),
        GeneralName::IPAddress(b) => {
            let ip = match b.len() {
                4 => <[u8; 4]>::try_from(*b).map(IpAddr::from).ok(),
                16 => <[u8; 16]>::try_from(*b).map(IpAddr::from).ok(),
                _ => None,
            };
            req.ip_sans.push(ip.ok_or(RequestError::ExtraSanKind)?);
        }
        _ => return Err(RequestError::ExtraSanKind),
    }
    Ok(())
}
