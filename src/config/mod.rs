//! The cluster file: one YAML document (camelCase keys, like install-config.yaml)
//! describing a cluster, its network and nodes, and how each service runs.
//!
//! Two layers:
//! - [`raw`]: serde structs that mirror the file exactly. Every struct denies
//!   unknown fields, and addresses are kept as strings so that one bad value
//!   does not hide the others.
//! - [`validate`]: turns a [`raw::ClusterFile`] into a typed [`Cluster`], checking
//!   every rule and reporting all violations at once, each with its field path.
//!
//! Nothing here touches a socket; `serve` binds only after [`load`] succeeded.

pub mod duration;
pub mod pxe;
pub mod raw;
pub mod types;
pub mod validate;

use std::fmt;
use std::path::{Path, PathBuf};

pub use duration::Dur;
pub use pxe::TftpCfg;
pub use types::*;

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
    #[error("cannot read cluster file {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cluster file {path} is not valid YAML for this schema:\n{message}")]
    Parse { path: PathBuf, message: String },
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
pub fn parse_str(text: &str) -> Result<raw::ClusterFile, String> {
    serde_saphyr::from_str::<raw::ClusterFile>(text).map_err(|e| e.to_string())
}

/// Parse and validate cluster file text. `base` resolves relative paths in it.
pub fn from_str(text: &str, base: &Path, path: &Path) -> Result<Cluster, ConfigError> {
    let raw = parse_str(text).map_err(|message| ConfigError::Parse {
        path: path.to_path_buf(),
        message,
    })?;
    validate::validate(raw, base).map_err(|errors| ConfigError::Invalid {
        path: path.to_path_buf(),
        errors,
    })
}

/// Read, parse and validate a cluster file. Relative paths inside it are
/// resolved against the file's directory.
pub fn load(path: &Path) -> Result<Cluster, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let base = path
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    from_str(&text, &base, path)
}
