//! The validated `registry:` section (issue #36, docs/registry.md): the
//! appliance as the lab's mirror registry. Pure data; the raw schema and
//! its checks are `config/validate/registry.rs`, the server `services/registry/`.

use std::net::SocketAddr;
use std::path::PathBuf;

use serde::Serialize;

/// The label of the registry's default DNS name (`mirror.<name>.<baseDomain>`).
pub const MIRROR_LABEL: &str = "mirror";

/// `registry:`, validated.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RegistryCfg {
    /// HTTPS address (default `<applianceIP>:5000`).
    pub listen: SocketAddr,
    /// The registry's DNS name, without the trailing dot (default
    /// `mirror.<name>.<baseDomain>`).
    pub name: String,
    /// The distribution registry's filesystem root (the directory that
    /// holds `docker/registry/v2`).
    pub storage: PathBuf,
    /// Users who may push (and pull from outside the cluster's networks):
    /// `htpasswd -B` lines. `None`: nobody may push.
    pub htpasswd_file: Option<PathBuf>,
    /// `DELETE` of manifests and blobs is allowed.
    pub allow_delete: bool,
    /// The operator's certificate; `None`: one signed by the appliance's CA.
    pub tls: Option<RegistryTlsCfg>,
    /// Upstreams served under `<registry>/…` on a miss.
    pub pull_through: Vec<PullThroughCfg>,
    /// Credentials for the upstreams (OpenShift pull-secret format).
    pub pull_secret_file: Option<PathBuf>,
    /// The release pullspec the install uses (checked by `preflight`).
    pub release_image: Option<String>,
}

/// `registry.tls`: the operator's certificate chain and key (PEM).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RegistryTlsCfg {
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
}

/// One `registry.pullThrough` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PullThroughCfg {
    /// The path prefix and the pull secret's key (`quay.io`).
    pub registry: String,
    /// `https://…` or `http://…`, without a trailing slash.
    pub url: String,
    /// A CA bundle trusted for this upstream besides the system's roots.
    pub ca_file: Option<PathBuf>,
}
