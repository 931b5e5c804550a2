//! `csr:` as written: inventory-bound CSR approval (issue #37). Validated
//! by `validate/csr.rs`, which holds the rules and the defaults not given
//! here.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::config::Dur;

/// `csr:` as written.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RawCsr {
    /// The kubeconfig the approver uses: the installer's `auth/kubeconfig`
    /// or the identity of `crc-appliance render csr-rbac`.
    pub kubeconfig_file: String,
    /// How long after a node's evidence (its ignition fetch; recovery: its
    /// lease renewal or boot) its client CSR is approved. Default `60m`.
    #[serde(default = "window")]
    pub window: Dur,
    /// Approve one client CSR of an existing NotReady Node after the
    /// appliance saw it renew its lease or boot (a lab powered off past its
    /// certificates' expiry). Default false.
    #[serde(default)]
    pub recovery: bool,
}

fn window() -> Dur {
    Dur(Duration::from_secs(3600))
}
