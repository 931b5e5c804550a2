//! `/status` → `tftp`: the types of the TFTP service's section.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// `tftp`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TftpStatus {
    pub listen: Option<String>,
    /// The IPv6 twin's address (dual-stack clusters only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listen_v6: Option<String>,
    pub root: Option<String>,
    pub started: u64,
    pub active: i64,
    /// Requests by how they ended (`completed`, `failed`, `aborted`,
    /// `refused`, `busy`).
    pub transfers: BTreeMap<String, u64>,
    pub bytes: u64,
    pub retransmitted_blocks: u64,
    pub malformed: u64,
    /// Of `busy`: refused because the client address already held
    /// `pxe.maxTransfersPerClient` transfers.
    #[serde(default)]
    pub busy_client_limit: u64,
    /// Newest first.
    pub recent: Vec<TftpTransferRow>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TftpTransferRow {
    pub unix_time: u64,
    pub client: String,
    pub file: String,
    pub result: String,
    pub detail: String,
    pub bytes: u64,
}
