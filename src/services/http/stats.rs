//! Counters and the ignition fetch log of the HTTP service, exposed to the
//! admin listener as the `http` section of `/status`.

use std::collections::{BTreeMap, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwap;

use crate::plan::Plan;
use crate::runtime::metrics::{Kind, family};
use crate::runtime::sync::LockExt as _;
use crate::services::http::status::{FetchRow, HttpStatus, IgnitionByNode};

/// How many ignition fetches `/status` keeps (newest first).
pub const FETCH_LOG: usize = 200;

/// One ignition request.
#[derive(Debug, Clone)]
pub struct Fetch {
    pub time: SystemTime,
    pub client: IpAddr,
    /// The node whose IP the client has, if any.
    pub node: Option<String>,
    /// Requested file, e.g. `master-0.ign`.
    pub file: Arc<str>,
    pub status: u16,
    /// `node file`, `role file`, `role file + hostname`, or why not served.
    pub detail: Arc<str>,
    pub bytes: u64,
}

impl Fetch {
    fn row(&self) -> FetchRow {
        FetchRow {
            time: httpdate::fmt_http_date(self.time),
            unix_time: self
                .time
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
            client: self.client.to_string(),
            node: self.node.clone(),
            file: self.file.to_string(),
            status: self.status,
            detail: self.detail.to_string(),
            bytes: self.bytes,
        }
    }
}

pub struct Stats {
    plan: std::sync::Arc<ArcSwap<Plan>>,
    listen: Mutex<Option<SocketAddr>>,
    /// The IPv6 twin's bound address (dual-stack).
    listen_v6: Mutex<Option<SocketAddr>>,
    by_status: Mutex<BTreeMap<u16, u64>>,
    bytes: AtomicU64,
    active: AtomicI64,
    connections: AtomicU64,
    refused_per_client: AtomicU64,
    refused_full: AtomicU64,
    evicted: AtomicU64,
    closed_idle: AtomicU64,
    closed_stalled: AtomicU64,
    fetches: Mutex<VecDeque<Fetch>>,
    ign_by_status: Mutex<BTreeMap<u16, u64>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.locked()
}

impl Stats {
    pub fn new(plan: std::sync::Arc<ArcSwap<Plan>>) -> Stats {
        Stats {
            plan,
            listen: Mutex::new(None),
            listen_v6: Mutex::new(None),
            by_status: Mutex::default(),
            bytes: AtomicU64::new(0),
            active: AtomicI64::new(0),
            connections: AtomicU64::new(0),
            refused_per_client: AtomicU64::new(0),
            refused_full: AtomicU64::new(0),
            evicted: AtomicU64::new(0),
            closed_idle: AtomicU64::new(0),
            closed_stalled: AtomicU64::new(0),
            fetches: Mutex::default(),
            ign_by_status: Mutex::default(),
        }
    }
    /// The bound address of `http.listen` or (`twin`) of its IPv6 twin.
    pub fn set_listen(&self, addr: SocketAddr, twin: bool) {
        *lock(if twin { &self.listen_v6 } else { &self.listen }) = Some(addr);
    }
    /// The IPv6 twin was closed (a reload dropped `network.ipv6`).
    pub fn clear_twin(&self) {
        *lock(&self.listen_v6) = None;
    }
    pub fn response(&self, status: u16) {
        *lock(&self.by_status).entry(status).or_default() += 1;
    }
    pub fn sent(&self, n: u64) {
        self.bytes.fetch_add(n, Ordering::Relaxed);
    }
    pub fn conn_open(&self) {
        self.connections.fetch_add(1, Ordering::Relaxed);
        self.active.fetch_add(1, Ordering::Relaxed);
    }
    /// A connection closed at accept: its client held its limit already.
    pub fn refused_per_client(&self) {
        self.refused_per_client.fetch_add(1, Ordering::Relaxed);
    }
    /// A connection closed at accept: every slot taken, none to give way.
    pub fn refused_full(&self) {
        self.refused_full.fetch_add(1, Ordering::Relaxed);
    }
    /// An idle or stalled connection closed to make room for a lighter client.
    pub fn evicted(&self) {
        self.evicted.fetch_add(1, Ordering::Relaxed);
    }
    /// A connection closed after the idle timeout with nothing in flight.
    pub fn closed_idle(&self) {
        self.closed_idle.fetch_add(1, Ordering::Relaxed);
    }
    /// A connection dropped: its writes made no progress for the write
    /// timeout (a client that does not read).
    pub fn closed_stalled(&self) {
        self.closed_stalled.fetch_add(1, Ordering::Relaxed);
    }
    pub fn conn_close(&self) {
        self.active.fetch_sub(1, Ordering::Relaxed);
    }
    pub fn ignition(&self, f: Fetch) {
        *lock(&self.ign_by_status).entry(f.status).or_default() += 1;
        let mut q = lock(&self.fetches);
        if q.len() == FETCH_LOG {
            q.pop_back();
        }
        q.push_front(f);
    }
    pub fn fetches(&self) -> Vec<Fetch> {
        lock(&self.fetches).iter().cloned().collect()
    }
}

impl Stats {
    pub fn status(&self) -> HttpStatus {
        let plan = self.plan.load_full();
        let c = &plan.cluster;
        let fetches = self.fetches();
        // Latest fetch per node: by the requesting IP, else by the file name.
        let by_node = c
            .nodes
            .iter()
            .map(|n| {
                let own = format!("{}.ign", n.name);
                let last = fetches
                    .iter()
                    .find(|f| f.node.as_deref() == Some(n.name.as_str()))
                    .or_else(|| fetches.iter().find(|f| *f.file == *own));
                IgnitionByNode {
                    node: n.name.clone(),
                    ip: n.ip,
                    role: n.role,
                    fetched: last.is_some_and(|f| f.status == 200),
                    last: last.map(Fetch::row),
                }
            })
            .collect();
        let statuses: BTreeMap<String, u64> = lock(&self.by_status)
            .iter()
            .map(|(k, v)| (k.to_string(), *v))
            .collect();
        HttpStatus {
            listen: lock(&self.listen).map(|a| a.to_string()),
            listen_v6: lock(&self.listen_v6).map(|a| a.to_string()),
            images_dir: c.http.images_dir.display().to_string(),
            ignition_dir: c.http.ignition_dir.display().to_string(),
            bootstrap_in_place_age: c.mode.is_single_node().then(|| bip_age(c)).flatten(),
            requests: statuses.values().sum::<u64>(),
            responses_by_status: statuses,
            bytes_sent: self.bytes.load(Ordering::Relaxed),
            connections_active: self.active.load(Ordering::Relaxed),
            connections_total: self.connections.load(Ordering::Relaxed),
            ignition_by_node: by_node,
            ignition_fetches: fetches.iter().map(Fetch::row).collect(),
            netboot: Vec::new(),
            netboot_state: None,
            https: None,
        }
    }

    pub fn metrics(&self, out: &mut String) {
        let mut f = family(
            out,
            "crc_appliance_http_responses_total",
            Kind::Counter,
            "HTTP responses by status code.",
        );
        for (code, n) in lock(&self.by_status).iter() {
            f.sample(&[("code", code)], n);
        }
        family(
            out,
            "crc_appliance_http_sent_bytes_total",
            Kind::Counter,
            "Response body bytes sent.",
        )
        .sample(&[], self.bytes.load(Ordering::Relaxed));
        family(
            out,
            "crc_appliance_http_connections_active",
            Kind::Gauge,
            "Open HTTP connections.",
        )
        .sample(&[], self.active.load(Ordering::Relaxed));
        family(
            out,
            "crc_appliance_http_connections_total",
            Kind::Counter,
            "Accepted HTTP connections.",
        )
        .sample(&[], self.connections.load(Ordering::Relaxed));
        family(
            out,
            "crc_appliance_http_connections_refused_total",
            Kind::Counter,
            "Connections closed at accept: the client held http.maxConnectionsPerClient.",
        )
        .sample(&[], self.refused_per_client.load(Ordering::Relaxed));
        family(
            out,
            "crc_appliance_http_connections_refused_full_total",
            Kind::Counter,
            "Connections closed at accept: every slot taken and no heavier client had an idle or stalled one.",
        )
        .sample(&[], self.refused_full.load(Ordering::Relaxed));
        family(
            out,
            "crc_appliance_http_connections_evicted_total",
            Kind::Counter,
            "Idle or stalled connections closed to serve a client holding fewer (every slot taken).",
        )
        .sample(&[], self.evicted.load(Ordering::Relaxed));
        family(
            out,
            "crc_appliance_http_connections_idle_closed_total",
            Kind::Counter,
            "Connections closed after the idle timeout with no request in flight (h2 included).",
        )
        .sample(&[], self.closed_idle.load(Ordering::Relaxed));
        family(
            out,
            "crc_appliance_http_connections_stalled_closed_total",
            Kind::Counter,
            "Connections dropped when their writes made no progress for 30 s (a client that does not read).",
        )
        .sample(&[], self.closed_stalled.load(Ordering::Relaxed));
        let mut f = family(
            out,
            "crc_appliance_http_ignition_requests_total",
            Kind::Counter,
            "Ignition requests by status code.",
        );
        for (code, n) in lock(&self.ign_by_status).iter() {
            f.sample(&[("code", code)], n);
        }
    }
}

/// Seconds since the bootstrap-in-place Ignition was written, if readable.
fn bip_age(c: &crate::model::cluster::Cluster) -> Option<u64> {
    let f = c.http.ignition_dir.join(crate::model::mode::BIP_IGNITION);
    let m = std::fs::metadata(f).and_then(|m| m.modified()).ok()?;
    std::time::SystemTime::now()
        .duration_since(m)
        .ok()
        .map(|d| d.as_secs())
}
