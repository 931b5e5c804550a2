//! `/status` → `http`: the types of the HTTP service's section (fetch log,
//! network boot, the boot ISOs' HTTPS listener).

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

use crate::model::cluster::Role;

/// `http`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpStatus {
    pub listen: Option<String>,
    /// The IPv6 twin's address (dual-stack clusters only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listen_v6: Option<String>,
    pub images_dir: String,
    pub ignition_dir: String,
    /// Single-node: seconds since `bootstrap-in-place-for-live-iso.ign` was
    /// written (its certificates expire after 24 h); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootstrap_in_place_age: Option<u64>,
    pub requests: u64,
    /// Responses by status code.
    pub responses_by_status: BTreeMap<String, u64>,
    pub bytes_sent: u64,
    pub connections_active: i64,
    pub connections_total: u64,
    pub ignition_by_node: Vec<IgnitionByNode>,
    /// Newest first, at most 200.
    pub ignition_fetches: Vec<FetchRow>,
    /// Network boot progress per node (with an `rhcos` section).
    #[serde(default)]
    pub netboot: Vec<NetbootRow>,
    /// The file that keeps [`HttpStatus::netboot`] (with an `rhcos` section).
    #[serde(default)]
    pub netboot_state: Option<NetbootStateStatus>,
    /// The boot ISOs' HTTPS listener, while it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub https: Option<HttpsStatus>,
}

/// The boot ISOs' HTTPS listener (`http.tlsListen`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpsStatus {
    /// The bound address.
    pub listen: Option<String>,
    /// The certificate served: its files, origin and SHA-256.
    pub cert: crate::runtime::certs::CertInfo,
    /// TLS handshakes completed.
    pub handshakes: u64,
    /// TLS handshakes that failed or timed out.
    pub handshake_failures: u64,
}

/// Whether the network-boot install state is on disk.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetbootStateStatus {
    /// `<dir of dhcp.leaseFile>/<cluster>-netboot.json`.
    pub file: String,
    /// Every change is on disk: a restart, even a kill, keeps it. While
    /// false, installed nodes still boot their disk (memory is the truth)
    /// and the writer retries every second.
    pub durable: bool,
    /// Changes in memory only.
    pub unwritten_changes: u64,
    /// The last write's error, while writes fail.
    pub write_error: Option<String>,
    /// Why the file could not be read at start; every node was then taken
    /// as installed (`assumed` in its row).
    pub load_error: Option<String>,
    pub writes: u64,
    pub write_failures: u64,
}

/// One node's network-boot install state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetbootRow {
    pub node: String,
    /// `pending`, `installing`, `unconfirmed` (ignition fetched, install
    /// end not seen: disk if bootable, else install) or `installed` (boots
    /// its disk).
    pub state: String,
    pub install_script_at: Option<u64>,
    pub ignition_at: Option<u64>,
    pub installed_at: Option<u64>,
    /// Evidence: the install image fully downloaded after the ignition.
    #[serde(default)]
    pub install_finished_at: Option<u64>,
    /// Evidence: the installed system's first machine-config contact.
    #[serde(default)]
    pub booted_at: Option<u64>,
    /// Taken as installed because the state file was unreadable at start.
    #[serde(default)]
    pub assumed: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IgnitionByNode {
    pub node: String,
    pub ip: Ipv4Addr,
    pub role: Role,
    pub fetched: bool,
    pub last: Option<FetchRow>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FetchRow {
    /// HTTP date.
    pub time: String,
    pub unix_time: u64,
    pub client: String,
    pub node: Option<String>,
    pub file: String,
    pub status: u16,
    pub detail: String,
    pub bytes: u64,
}
