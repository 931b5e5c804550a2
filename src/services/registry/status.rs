//! The registry's `/status` section and metrics (issue #36 item 7): the
//! counters (requests, bytes, cache hits and misses, upstream errors),
//! per node its first and latest request and the bytes it pulled, and what
//! the store found wrong (blobs that no longer match their digest).
//!
//! The type lives here, in the service's folder; `serve` puts it in the
//! document (`serve/status.rs`).

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

use crate::runtime::metrics::{Kind, family};
use crate::runtime::sync::LockExt as _;

/// `registry` in `GET /status`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RegistryStatus {
    pub listen: Vec<String>,
    /// The DNS name clients use.
    pub name: String,
    pub storage: String,
    /// SHA-256 of the serving certificate and whether the appliance's CA
    /// signed it.
    pub cert_sha256: String,
    pub cert_from_ca: bool,
    pub requests: u64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub unauthorized: u64,
    pub cache_hits: u64,
    pub cache_misses: u64,
    pub upstream_errors: u64,
    /// Blobs whose content no longer matches their digest (never served).
    pub corrupt_blobs: Vec<String>,
    /// The last error worth an operator's eye (write failures, upstream).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Per node (or client address when not a node): who pulled what, when.
    pub clients: Vec<ClientRow>,
    /// `registry.pullThrough`: each upstream's reachability and counters.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pull_through: Vec<super::pullthrough::UpstreamStatus>,
    /// HA pair: what each member still lacks of the other's store.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica: Option<super::replica::ReplicaStatus>,
}

/// One client's registry use.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientRow {
    pub client: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// Unix seconds of its first and latest request (a blob still
    /// streaming to it counts as a request: its bytes move the latest).
    pub first_request: u64,
    pub latest_request: u64,
    pub requests: u64,
    /// Bytes of every answer (manifests, blobs, errors) sent to it.
    pub bytes_pulled: u64,
    /// Of those, blob bytes (what the timeline's `pulled` waits for).
    #[serde(default)]
    pub blob_bytes: u64,
}

/// Live counters.
#[derive(Default)]
pub struct Stats {
    pub requests: AtomicU64,
    pub bytes_sent: AtomicU64,
    pub bytes_received: AtomicU64,
    pub unauthorized: AtomicU64,
    pub cache_hits: AtomicU64,
    pub cache_misses: AtomicU64,
    pub upstream_errors: AtomicU64,
    clients: std::sync::Mutex<BTreeMap<IpAddr, ClientRow>>,
    last_error: std::sync::Mutex<Option<String>>,
    /// A node's row got its first blob byte (wakes the timeline's pull
    /// watch, `super::pulls`).
    pub first_blob: tokio::sync::Notify,
}

/// Most client rows kept (the oldest-seen beyond are dropped).
const MAX_CLIENTS: usize = 1024;

impl Stats {
    /// Count a request of `ip` (`node` when it is one) that sent `bytes`;
    /// its time when it is a node's first (the timeline's `pulling`).
    pub fn request(&self, ip: IpAddr, node: Option<&str>, bytes: u64) -> Option<u64> {
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.bytes_sent.fetch_add(bytes, Ordering::Relaxed);
        let now = crate::runtime::clock::unix_now();
        let mut map = self.clients.locked();
        let first = !map.contains_key(&ip);
        if first && map.len() >= MAX_CLIENTS {
            return None;
        }
        let row = map.entry(ip).or_insert_with(|| ClientRow {
            client: ip.to_string(),
            node: node.map(str::to_string),
            first_request: now,
            ..ClientRow::default()
        });
        row.latest_request = now;
        row.requests += 1;
        row.bytes_pulled += bytes;
        (first && row.node.is_some()).then_some(now)
    }

    /// Add blob bytes sent to `ip` after the response head (a body
    /// streamed).
    pub fn sent(&self, ip: IpAddr, bytes: u64) {
        self.bytes_sent.fetch_add(bytes, Ordering::Relaxed);
        if let Some(row) = self.clients.locked().get_mut(&ip) {
            if row.blob_bytes == 0 && bytes > 0 && row.node.is_some() {
                self.first_blob.notify_one();
            }
            row.bytes_pulled += bytes;
            row.blob_bytes += bytes;
            row.latest_request = crate::runtime::clock::unix_now();
        }
    }

    /// Pull-through (`registry/pullthrough.rs`): a request served from
    /// storage.
    pub fn cache_hit(&self) {
        self.cache_hits.fetch_add(1, Ordering::Relaxed);
    }

    /// Pull-through: a request fetched from the upstream.
    pub fn cache_miss(&self) {
        self.cache_misses.fetch_add(1, Ordering::Relaxed);
    }

    /// Pull-through: a fetch from the upstream failed (`what`: the
    /// upstream and the reason; also `lastError`).
    pub fn upstream_error(&self, what: String) {
        self.upstream_errors.fetch_add(1, Ordering::Relaxed);
        self.error(what);
    }

    /// The rows of clients that are nodes (the timeline's pull watch reads
    /// them, `super::pulls`).
    pub fn node_rows(&self) -> Vec<ClientRow> {
        self.clients
            .locked()
            .values()
            .filter(|r| r.node.is_some())
            .cloned()
            .collect()
    }

    pub fn error(&self, what: String) {
        *self.last_error.locked() = Some(what);
    }

    pub fn status(&self, mut base: RegistryStatus, corrupt: Vec<String>) -> RegistryStatus {
        let l = |c: &AtomicU64| c.load(Ordering::Relaxed);
        base.requests = l(&self.requests);
        base.bytes_sent = l(&self.bytes_sent);
        base.bytes_received = l(&self.bytes_received);
        base.unauthorized = l(&self.unauthorized);
        base.cache_hits = l(&self.cache_hits);
        base.cache_misses = l(&self.cache_misses);
        base.upstream_errors = l(&self.upstream_errors);
        base.corrupt_blobs = corrupt;
        base.last_error = self.last_error.locked().clone();
        base.clients = self.clients.locked().values().cloned().collect();
        base
    }

    pub fn metrics(&self, out: &mut String, corrupt: usize) {
        let l = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let counters: [(&str, &str, u64); 7] = [
            (
                "requests",
                "Registry API requests answered.",
                l(&self.requests),
            ),
            (
                "sent_bytes",
                "Bytes of manifests and blobs sent.",
                l(&self.bytes_sent),
            ),
            (
                "received_bytes",
                "Bytes of uploads and manifests received.",
                l(&self.bytes_received),
            ),
            (
                "unauthorized",
                "Requests refused with 401.",
                l(&self.unauthorized),
            ),
            (
                "cache_hits",
                "Pull-through requests served from storage.",
                l(&self.cache_hits),
            ),
            (
                "cache_misses",
                "Pull-through requests fetched from the upstream.",
                l(&self.cache_misses),
            ),
            (
                "upstream_errors",
                "Pull-through fetches that failed.",
                l(&self.upstream_errors),
            ),
        ];
        for (name, help, v) in counters {
            let full = format!("crc_appliance_registry_{name}_total");
            family(out, &full, Kind::Counter, help).sample(&[], v);
        }
        family(
            out,
            "crc_appliance_registry_corrupt_blobs",
            Kind::Gauge,
            "Blobs whose content no longer matches their digest (never served).",
        )
        .sample(&[], corrupt);
        let rows = self.clients.locked().clone();
        let mut f = family(
            out,
            "crc_appliance_registry_client_pulled_bytes_total",
            Kind::Counter,
            "Bytes each client pulled from the registry.",
        );
        for row in rows.values() {
            let node = row.node.clone().unwrap_or_default();
            f.sample(
                &[("client", &row.client), ("node", &node)],
                row.bytes_pulled,
            );
        }
    }
}

impl Stats {
    /// Count bytes received (uploads, manifests).
    pub fn received(&self, bytes: u64) {
        self.bytes_received.fetch_add(bytes, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nodes_row_counts_blob_bytes_apart_and_the_hooks_count() {
        let s = Stats::default();
        let node: IpAddr = "10.9.0.10".parse().unwrap();
        let other: IpAddr = "10.9.1.2".parse().unwrap();
        s.request(node, Some("master-0"), 700);
        s.request(node, Some("master-0"), 0);
        s.sent(node, 5000);
        s.request(other, None, 2);
        let rows = s.node_rows();
        assert_eq!(rows.len(), 1, "only nodes");
        let r = &rows[0];
        assert_eq!((r.requests, r.bytes_pulled, r.blob_bytes), (2, 5700, 5000));
        assert!(r.latest_request >= r.first_request);
        s.cache_hit();
        s.cache_miss();
        s.cache_miss();
        s.upstream_error("quay.io: timed out".into());
        let st = s.status(RegistryStatus::default(), Vec::new());
        assert_eq!(
            (st.cache_hits, st.cache_misses, st.upstream_errors),
            (1, 2, 1)
        );
        assert_eq!(st.last_error.as_deref(), Some("quay.io: timed out"));
        assert_eq!(st.clients.len(), 2);
        let mut m = String::new();
        s.metrics(&mut m, 0);
        assert!(
            m.contains("crc_appliance_registry_cache_misses_total 2"),
            "{m}"
        );
    }
}
