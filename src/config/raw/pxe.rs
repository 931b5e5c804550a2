//! `pxe:` as written: the read-only TFTP server (issue #12). Validated by
//! `validate/pxe.rs`, which holds the rules and the defaults not given
//! here.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::config::Dur;

/// `pxe:` as written.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RawPxe {
    #[serde(default = "super::yes")]
    pub enabled: bool,
    /// UDP address of the TFTP listener (default `<applianceIP>:69`).
    #[serde(default)]
    pub tftp_listen: Option<String>,
    /// Directory served (default: the distro's iPXE directory).
    #[serde(default)]
    pub tftp_root: Option<String>,
    /// Transfers served at once; more get ERROR "server busy".
    #[serde(default = "max_transfers")]
    pub max_transfers: usize,
    /// Transfers one client address may hold at once, so that one host
    /// cannot take every slot; more get ERROR "server busy".
    #[serde(default = "max_transfers_per_client")]
    pub max_transfers_per_client: usize,
    /// Retransmit timeout (the client's RFC 2349 `timeout` option wins).
    #[serde(default = "timeout")]
    pub timeout: Dur,
    /// Retransmissions without progress before a transfer is abandoned.
    #[serde(default = "retries")]
    pub retries: u32,
    /// Directories symlinks under the root may point into.
    #[serde(default)]
    pub allow_symlinks_to: Option<Vec<String>>,
    /// Also give boot options to pool clients (unknown MACs), not only to
    /// the cluster's nodes.
    #[serde(default)]
    pub pool: bool,
}

fn max_transfers() -> usize {
    64
}
/// A PXE client downloads one file at a time; 4 leaves room for a
/// firmware's retried request (and EDK2's `tsize` probe) while the old
/// transfer still times out.
fn max_transfers_per_client() -> usize {
    4
}
fn timeout() -> Dur {
    Dur::secs(1)
}
fn retries() -> u32 {
    5
}
