//! Preflight of the ignition files `openshift-install create
//! ignition-configs` wrote: `<ignitionDir>/<role>.ign` for every role with
//! nodes is an ignition document; a pointer config (`master.ign`,
//! `worker.ign`) merges from this cluster's machine-config server
//! (`https://api-int.<name>.<baseDomain>:22623/config/<role>`) and carries a
//! CA that parses; and the files are younger than 20 h (their certificates
//! expire 24 h after they were made). A single-node cluster's master
//! boots with `bootstrap-in-place-for-live-iso.ign` instead of `master.ign`
//! (same checks but the pointer's; its age is the one that matters), and a
//! lone master with neither a bootstrap node nor that file is a warning.
//!
//! Only the `ignition` section of a file is parsed (role files are often
//! tens of MB): the rest is checked as JSON and skipped, so preflight at
//! `serve` start leaves no parsed document behind in the heap.

use std::fs;
use std::time::{Duration, SystemTime};

use base64::Engine as _;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject as _;
use serde_json::Value;

use super::{Finding, Severity};
use crate::model::cluster::{Cluster, Role};
use crate::model::mode::{BIP_IGNITION, missing_bip};

/// Age after which the files' certificates are close to expiring.
pub(super) const STALE_AFTER: Duration = Duration::from_secs(20 * 3600);

/// The part of an ignition file preflight looks at; every other key is
/// skipped by the parser (never built as a value).
#[derive(serde::Deserialize)]
struct IgnitionHead {
    #[serde(default)]
    ignition: Option<Value>,
}

/// Findings for every role's ignition file.
pub fn ignition(c: &Cluster) -> Vec<Finding> {
    let dir = &c.http.ignition_dir;
    let mut out = Vec::new();
    let bip = dir.join(BIP_IGNITION);
    if let Some(why) = missing_bip(c.shape(), bip.is_file(), &dir.display().to_string()) {
        out.push(Finding {
            severity: Severity::Warn,
            check: "ignition",
            problem: why.problem,
            fix: why.fix,
        });
    }
    for role in Role::ALL {
        if c.nodes_with_role(role).next().is_none() {
            continue;
        }
        // The single-node master boots with the bootstrap-in-place file.
        let single = role == Role::Master && c.mode.is_single_node();
        let file = if single {
            bip.clone()
        } else {
            dir.join(format!("{}.ign", role.as_str()))
        };
        let fix_regenerate = if single {
            format!(
                "openshift-install create single-node-ignition-config --dir <dir>, then copy <dir>/{BIP_IGNITION} to {}",
                dir.display()
            )
        } else {
            format!(
                "openshift-install create ignition-configs --dir <dir>, then copy <dir>/{}.ign to {}",
                role.as_str(),
                dir.display()
            )
        };
        let warn = |problem: String, fix: String| Finding {
            severity: Severity::Warn,
            check: "ignition",
            problem,
            fix,
        };
        let head = match fs::read(&file) {
            Err(e) => Err(format!("{}: {e}", file.display())),
            Ok(bytes) => match serde_json::from_slice::<IgnitionHead>(&bytes) {
                Err(e) if e.is_data() => Err(format!(
                    "{}: JSON but not an ignition config ({e})",
                    file.display()
                )),
                Err(e) => Err(format!("{}: not JSON: {e}", file.display())),
                Ok(h) => h
                    .ignition
                    .filter(|i| i.get("version").and_then(Value::as_str).is_some())
                    .ok_or_else(|| {
                        format!(
                            "{}: JSON but not an ignition config (no ignition.version)",
                            file.display()
                        )
                    }),
            },
        };
        let ign = match head {
            Ok(i) => i,
            Err(problem) => {
                out.push(warn(problem, fix_regenerate));
                continue;
            }
        };
        let pointer = if single {
            Vec::new()
        } else {
            pointer_problems(&ign, &c.domain, role)
        };
        for problem in pointer {
            out.push(warn(
                format!("{}: {problem}", file.display()),
                fix_regenerate.clone(),
            ));
        }
        if let Some(age) = fs::metadata(&file)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| SystemTime::now().duration_since(t).ok())
            .filter(|age| *age > STALE_AFTER)
        {
            out.push(warn(
                format!(
                    "{}: written {} h ago; the certificates in ignition configs expire 24 h after `create ignition-configs`",
                    file.display(),
                    age.as_secs() / 3600
                ),
                format!("{fix_regenerate} (and install within 24 h)"),
            ));
        }
    }
    out
}

/// What is wrong with a pointer config's merge sources and CAs (nothing
/// for a config that merges nothing, like `bootstrap.ign`).
pub(super) fn pointer_problems(ign: &Value, domain: &str, role: Role) -> Vec<String> {
    let mut out = Vec::new();
    let expected = format!("https://api-int.{domain}:22623/config/{}", role.as_str());
    let sources = ["merge", "replace"].into_iter().flat_map(|k| {
        let list = ign.pointer(&format!("/config/{k}"));
        let list = match list {
            Some(Value::Array(a)) => a.clone(),
            Some(Value::Object(o)) => vec![Value::Object(o.clone())],
            _ => Vec::new(),
        };
        list.into_iter()
            .filter_map(|m| m.get("source").and_then(Value::as_str).map(str::to_string))
    });
    for s in sources {
        if !s.eq_ignore_ascii_case(&expected) {
            out.push(format!(
                "merges {s}, not this cluster's machine-config server {expected}"
            ));
        }
    }
    let cas = ign
        .pointer("/security/tls/certificateAuthorities")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for (i, ca) in cas.iter().enumerate() {
        let src = ca.get("source").and_then(Value::as_str).unwrap_or("");
        if let Err(why) = ca_parses(src) {
            out.push(format!("security.tls.certificateAuthorities[{i}]: {why}"));
        }
    }
    out
}

/// Why a pointer config's CA (`security.tls.certificateAuthorities[i]`)
/// is not one: the finding's text after its path.
#[derive(Debug, thiserror::Error)]
enum CaError {
    /// Not a `data:` URL (its first 40 characters).
    #[error("source {0:?} is not a data: URL")]
    NotDataUrl(String),
    #[error("data: URL without a comma")]
    NoComma,
    #[error("base64: {0}")]
    Base64(base64::DecodeError),
    #[error("PEM: {0:?}")]
    Pem(rustls::pki_types::pem::Error),
    /// The PEM block is not an X.509 certificate usable as a trust anchor.
    #[error("certificate: {0}")]
    Certificate(webpki::Error),
    #[error("no PEM certificate in it")]
    NoCertificate,
}

/// A `data:` URL holding at least one PEM certificate that parses as
/// X.509 (as a trust anchor).
fn ca_parses(source: &str) -> Result<(), CaError> {
    let Some(rest) = source.strip_prefix("data:") else {
        return Err(CaError::NotDataUrl(source.chars().take(40).collect()));
    };
    let Some((meta, data)) = rest.split_once(',') else {
        return Err(CaError::NoComma);
    };
    let bytes = if meta.ends_with(";base64") {
        base64::engine::general_purpose::STANDARD
            .decode(data.trim())
            .map_err(CaError::Base64)?
    } else {
        percent_decode(data)
    };
    let mut n = 0;
    for cert in CertificateDer::pem_slice_iter(&bytes) {
        let cert = cert.map_err(CaError::Pem)?;
        webpki::anchor_from_trusted_cert(&cert).map_err(CaError::Certificate)?;
        n += 1;
    }
    if n == 0 {
        return Err(CaError::NoCertificate);
    }
    Ok(())
}

fn percent_decode(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%'
            && let (Some(h), Some(l)) = (
                b.get(i + 1).and_then(|c| hex(*c)),
                b.get(i + 2).and_then(|c| hex(*c)),
            )
        {
            out.push((h * 16 + l) as u8);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_source_must_be_this_clusters_mcs() {
        let ok = json!({"version": "3.2.0", "config": {"merge": [{"source": "https://api-int.ocp4.example.com:22623/config/master"}]}});
        assert!(pointer_problems(&ok, "ocp4.example.com", Role::Master).is_empty());
        let other = json!({"version": "3.2.0", "config": {"merge": [{"source": "https://api-int.othercluster.example.com:22623/config/master"}]}});
        let p = pointer_problems(&other, "ocp4.example.com", Role::Master);
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(
            p[0].contains("othercluster")
                && p[0].contains("api-int.ocp4.example.com:22623/config/master")
        );
        assert_eq!(
            pointer_problems(&ok, "ocp4.example.com", Role::Worker).len(),
            1,
            "the wrong role"
        );
        let full = json!({"version": "3.2.0"});
        assert!(pointer_problems(&full, "ocp4.example.com", Role::Bootstrap).is_empty());
    }

    #[test]
    fn ca_must_be_a_data_url_with_a_certificate() {
        assert!(ca_parses("https://x/ca.crt").is_err());
        assert!(ca_parses("data:text/plain;charset=utf-8;base64,!!!").is_err());
        let not_cert = base64::engine::general_purpose::STANDARD.encode("hello");
        assert!(ca_parses(&format!("data:text/plain;base64,{not_cert}")).is_err());
    }

    /// The text of each CA finding after `security.tls.certificateAuthorities[i]: `.
    #[test]
    fn each_ca_mistake_says_what_is_wrong() {
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        let bad_pem = b64("-----BEGIN CERTIFICATE-----\n!!\n-----END CERTIFICATE-----\n");
        let not_x509 = b64("-----BEGIN CERTIFICATE-----\naGVsbG8=\n-----END CERTIFICATE-----\n");
        let cases = [
            (
                "https://x/ca.crt".to_string(),
                "source \"https://x/ca.crt\" is not a data: URL",
            ),
            ("data:text/plain".to_string(), "data: URL without a comma"),
            (
                "data:text/plain;base64,!!!".to_string(),
                "base64: Invalid symbol 33, offset 0.",
            ),
            (
                format!("data:;base64,{bad_pem}"),
                "PEM: Base64Decode(\"InvalidCharacter(33)\")",
            ),
            (
                format!("data:;base64,{not_x509}"),
                "certificate: TrailingData(SignedData)",
            ),
            (
                format!("data:;base64,{}", b64("hello")),
                "no PEM certificate in it",
            ),
            (
                "data:,hello%20world".to_string(),
                "no PEM certificate in it",
            ),
        ];
        for (source, text) in cases {
            assert_eq!(
                ca_parses(&source).unwrap_err().to_string(),
                text,
                "{source}"
            );
        }
        let long = format!("https://{}", "x".repeat(60));
        assert_eq!(
            ca_parses(&long).unwrap_err().to_string(),
            format!("source {:?} is not a data: URL", &long[..40])
        );
    }
}
