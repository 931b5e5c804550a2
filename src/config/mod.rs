//! The cluster file: one YAML document (camelCase keys, like install-config.yaml)
//! describing a cluster, its network and nodes, and how each service runs.
//!
//! Two layers:
//! - [`raw`]: serde structs that mirror the file exactly. Every struct denies
//!   unknown fields, and addresses are kept as strings so that one bad value
//!   does not hide the others.
//! - [`validate`]: turns a [`raw::ClusterFile`] into a typed [`Cluster`], checking
//!   every rule and reporting all violations at once, each with its field path.
//! - [`load`] / [`from_str`] then build the [`Plan`] and check the user DNS
//!   records against the generated ones ([`plan_of`]): what `check` accepts
//!   is exactly what `render` prints and `serve` serves.
//!
//! Nothing here touches a socket; `serve` binds only after [`load`] succeeded.

pub mod duration;
#[cfg(test)]
pub(crate) mod fixture;
pub mod raw;
pub mod schema;
pub mod secret;
pub mod validate;

use std::fmt;
use std::path::{Path, PathBuf};

use crate::model::cluster::Cluster;
use crate::plan::Plan;
pub use duration::Dur;

/// One violated rule, with the path of the offending field (`nodes[2].mac`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    pub path: String,
    pub message: String,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// Why a cluster file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read cluster file {path}: {reason}")]
    Io {
        path: PathBuf,
        /// Not a `source`: the message says it already, and a source would
        /// be printed a second time by `{:#}` (the CLI's error line).
        reason: std::io::Error,
    },
    #[error("cluster file {path} is not valid YAML for this schema:\n{reason}")]
    Parse {
        path: PathBuf,
        /// Not a `source`, as for `Io`; boxed: the YAML error is large.
        reason: Box<serde_saphyr::Error>,
    },
    #[error("cluster file {path} has {} error(s):\n{}", errors.len(), list(errors))]
    Invalid {
        path: PathBuf,
        errors: Vec<FieldError>,
    },
}

fn list(errors: &[FieldError]) -> String {
    errors
        .iter()
        .map(|e| format!("  - {e}"))
        .collect::<Vec<_>>()
        .join("\n")
}

impl ConfigError {
    /// The field errors, if this is a validation failure.
    pub fn field_errors(&self) -> &[FieldError] {
        match self {
            ConfigError::Invalid { errors, .. } => errors,
            _ => &[],
        }
    }
}

/// Parse a cluster file's text (no validation).
pub fn parse_str(text: &str) -> Result<raw::ClusterFile, serde_saphyr::Error> {
    serde_saphyr::from_str::<raw::ClusterFile>(text)
}

/// Parse and validate cluster file text and build what it serves. `base`
/// resolves relative paths in it.
pub fn from_str(text: &str, base: &Path, path: &Path) -> Result<Plan, ConfigError> {
    let raw = parse_str(text).map_err(|reason| ConfigError::Parse {
        path: path.to_path_buf(),
        reason: Box::new(reason),
    })?;
    let invalid = |errors| ConfigError::Invalid {
        path: path.to_path_buf(),
        errors,
    };
    let cluster = validate::validate(raw, base).map_err(invalid)?;
    plan_of(cluster).map_err(invalid)
}

/// The plan of a validated cluster, refusing user records (`dns.records`)
/// that contradict the records the appliance generates or each other
/// ([`crate::model::conflicts`]), each reported at its field path.
pub fn plan_of(cluster: Cluster) -> Result<Plan, Vec<FieldError>> {
    let mut bare = cluster.clone();
    bare.dns.records.clear();
    let generated = Plan::new(bare).zones;
    let generated: Vec<&crate::model::names::Record> = generated
        .iter()
        .flat_map(|z| z.records.iter())
        .filter(|r| !crate::plan::yields_to_user(&cluster, r))
        .collect();
    let errors: Vec<FieldError> = crate::model::conflicts::find(&generated, &cluster.dns.records)
        .into_iter()
        .map(|(i, message)| FieldError {
            path: format!("dns.records[{i}]"),
            message,
        })
        .collect();
    if errors.is_empty() {
        Ok(Plan::new(cluster))
    } else {
        Err(errors)
    }
}

/// The name of the admin service's private health socket (for
/// `crc-appliance health`, keepalived's track script): an abstract Unix
/// socket (Linux; reachable only from this host's network namespace, no
/// file), `crc-appliance-health-<32 hex digits>` from the SHA-256 of the
/// cluster file's canonical path, so that `health --cluster F` reaches the
/// `serve` of exactly that file however it is spelled.
pub fn health_socket_name(cluster_file: &Path) -> std::io::Result<String> {
    let canonical = std::fs::canonicalize(cluster_file)?;
    let digest = ring::digest::digest(
        &ring::digest::SHA256,
        canonical.as_os_str().as_encoded_bytes(),
    );
    let hex: String = digest.as_ref()[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    Ok(format!("crc-appliance-health-{hex}"))
}

/// Read, parse and validate a cluster file and build its plan. Relative
/// paths inside it are resolved against the file's directory.
pub fn load(path: &Path) -> Result<Plan, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|reason| ConfigError::Io {
        path: path.to_path_buf(),
        reason,
    })?;
    let base = path
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    from_str(&text, &base, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file serde-saphyr refuses: the path, then its reason (with the
    /// line and column) on the next line, as before the reason was typed.
    #[test]
    fn a_parse_error_names_the_file_then_serdes_reason() {
        let text = "name: c\nbogus: 1\n";
        let reason = parse_str(text).unwrap_err();
        let said = reason.to_string();
        assert!(said.contains("bogus"), "{said}");
        let err = from_str(text, Path::new("/"), Path::new("/etc/c.yaml")).unwrap_err();
        assert!(matches!(err, ConfigError::Parse { .. }), "{err}");
        assert_eq!(
            err.to_string(),
            format!("cluster file /etc/c.yaml is not valid YAML for this schema:\n{said}")
        );
    }
}
