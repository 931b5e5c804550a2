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
    /// Unix seconds of its first and latest request.
    pub first_request: u64,
    pub latest_request: u64,
    pub requests: u64,
    pub bytes_pulled: u64,
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
}

/// Most client rows kept (the oldest-seen beyond are dropped).
const MAX_CLIENTS: usize = 1024;

impl Stats {
    /// Count a request of `ip` (`node` when it is one) that sent `bytes`.
    pub fn request(&self, ip: IpAddr, node: Option<&str>, bytes: u64) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.bytes_sent.fetch_add(bytes, Ordering::Relaxed);
        let now = crate::runtime::clock::unix_now();
        let mut map = self.clients.locked();
        if !map.contains_key(&ip) && map.len() >= MAX_CLIENTS {
            return;
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
    }

    /// Add bytes sent to `ip` after the response head (a body streamed).
    pub fn sent(&self, ip: IpAddr, bytes: u64) {
        self.bytes_sent.fetch_add(bytes, Ordering::Relaxed);
        if let Some(row) = self.clients.locked().get_mut(&ip) {
            row.bytes_pulled += bytes;
        }
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
