//! `/status` → `dns`: the type of the DNS service's section.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// `dns`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DnsStatus {
    pub listen: Vec<String>,
    pub zones: Vec<String>,
    pub records: usize,
    pub upstream: Vec<String>,
    /// Responses sent by RCODE name.
    pub responses: BTreeMap<String, u64>,
    pub forwarded: u64,
    pub refused_recursion: u64,
    pub dropped: u64,
    pub packet_cache: PacketCacheStatus,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PacketCacheStatus {
    pub hits: u64,
    pub entries: usize,
}
