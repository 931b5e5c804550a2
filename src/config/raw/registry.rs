//! `registry:` as written: the lab's mirror registry (issue #36,
//! docs/registry.md). Validated by `validate/registry.rs`, which holds the
//! rules and the defaults not given here.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::HttpTls;

/// `registry:` as written.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RawRegistry {
    /// HTTPS address of the registry (default `<applianceIP>:5000`).
    #[serde(default)]
    pub listen: Option<String>,
    /// Its DNS name (default `mirror.<name>.<baseDomain>`, added to the
    /// cluster zone).
    #[serde(default)]
    pub name: Option<String>,
    /// The distribution registry's filesystem root: the directory holding
    /// `docker/registry/v2` (what `docker-registry`, `registry:2` and
    /// oc-mirror v2's cache write). Created when missing.
    pub storage: String,
    /// `htpasswd -B` file of the users who may push.
    #[serde(default)]
    pub htpasswd_file: Option<String>,
    /// Allow `DELETE` of manifests and blobs.
    #[serde(default)]
    pub allow_delete: bool,
    /// PEM files of the registry's certificate (default: one signed by the
    /// appliance's own CA).
    #[serde(default)]
    pub tls: Option<HttpTls>,
    /// Upstream registries served under `<registry>/…` on a miss.
    #[serde(default)]
    pub pull_through: Vec<RawPullThrough>,
    /// The upstreams' credentials (OpenShift pull-secret JSON).
    #[serde(default)]
    pub pull_secret_file: Option<String>,
    /// The release pullspec the install uses (`preflight` resolves it).
    #[serde(default)]
    pub release_image: Option<String>,
}

/// One `registry.pullThrough` entry as written.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RawPullThrough {
    /// Path prefix under the mirror and key in the pull secret (`quay.io`).
    pub registry: String,
    /// `https://quay.io`, or `http://…` for a lab's own upstream.
    pub url: String,
    /// PEM CA bundle trusted for this upstream, besides the system's roots.
    #[serde(default)]
    pub ca_file: Option<String>,
}
