//! Layer-4 TCP load balancer with health checks (OpenShift UPI frontends).
//!
//! Four frontends (`api` 6443, `machine-config` 22623, `ingress-http` 80,
//! `ingress-https` 443) from [`Plan::pools`]; each accepted connection is
//! proxied byte for byte (no TLS termination, no session persistence) to the
//! next healthy, enabled backend in round-robin order.
//!
//! Invariants:
//! - Backends start unhealthy; checks run at once, then every `interval`;
//!   `rise`/`fall` consecutive results flip the state ([`health`]). Flips are
//!   logged once.
//! - A failed connect (or connect timeout) moves on to the next eligible
//!   backend the client has not tried yet; the client only sees its
//!   connection closed when none is left (empty pool included — never a
//!   panic).
//! - Each frontend holds at most `maxConnections` client connections; over
//!   the cap new connections are closed at once and counted.
//! - Half-close is forwarded; a connection idle in both directions for
//!   `idleTimeout` is closed ([`proxy`]).
//! - Disabling a node (admin API / `crc-appliance lb disable NODE`) drains
//!   it: no new connections, existing ones continue. The bootstrap node is
//!   *removed* (no longer checked or selected) once every master is healthy
//!   in the api pool and the operator disabled it or
//!   `<ignitionDir>/bootstrap-complete` exists. Disabled/removed survive a
//!   SIGHUP reload (process memory), not a restart (the marker file does).
//! - Every loop selects on shutdown. On shutdown the listeners close and
//!   in-flight connections get [`DRAIN`] to finish before they are cut.

pub mod check;
pub mod health;
pub mod proxy;
pub mod select;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use anyhow::Context as _;
use serde_json::json;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{debug, info, warn};

use crate::config::{LbCfg, Role};
use crate::hub::{Hub, LbControl, StatusSource};
use crate::metrics::{Kind, family};
use crate::net;
use crate::plan::{Check, Plan};

use check::Prober;
use health::Health;
use select::{RoundRobin, Tried};

/// How long in-flight connections may continue after shutdown.
pub const DRAIN: Duration = Duration::from_secs(3);

/// Node flags that survive a SIGHUP reload (same process).
#[derive(Debug, Clone, Copy, Default)]
struct NodeFlags {
    disabled: bool,
    removed: bool,
}

fn flags_store() -> &'static Mutex<HashMap<String, NodeFlags>> {
    static S: OnceLock<Mutex<HashMap<String, NodeFlags>>> = OnceLock::new();
    S.get_or_init(|| Mutex::new(HashMap::new()))
}

fn remember(node: &str, f: impl FnOnce(&mut NodeFlags)) {
    let mut m = flags_store().lock().unwrap_or_else(|e| e.into_inner());
    f(m.entry(node.to_string()).or_default());
}

/// One backend of one pool.
pub struct BackendState {
    pub node: String,
    pub role: Role,
    pub addr: SocketAddr,
    healthy: AtomicBool,
    disabled: AtomicBool,
    removed: AtomicBool,
    health: Mutex<Health>,
    last_error: Mutex<Option<String>>,
    active: AtomicU64,
    total: AtomicU64,
    connect_failures: AtomicU64,
}

impl BackendState {
    fn eligible(&self) -> bool {
        self.healthy.load(Ordering::Relaxed)
            && !self.disabled.load(Ordering::Relaxed)
            && !self.removed.load(Ordering::Relaxed)
    }
}

/// One frontend and its backends.
pub struct PoolState {
    pub name: &'static str,
    pub frontend: SocketAddr,
    pub check: Check,
    pub backends: Vec<BackendState>,
    rr: RoundRobin,
    active: AtomicU64,
    total: AtomicU64,
    over_cap: AtomicU64,
    no_backend: AtomicU64,
    /// Set after warning that a client found no backend; cleared by the
    /// next proxied connection (one warning per outage, not per client).
    warned_empty: AtomicBool,
}

/// Shared LB state: status source, control handle, proxy and checker input.
pub struct Lb {
    pub pools: Vec<PoolState>,
    cfg: LbCfg,
    marker: PathBuf,
    has_bootstrap: bool,
}

impl Lb {
    fn backends(&self) -> impl Iterator<Item = (&PoolState, &BackendState)> {
        self.pools
            .iter()
            .flat_map(|p| p.backends.iter().map(move |b| (p, b)))
    }

    /// Apply the bootstrap removal rule; true once removed.
    fn maybe_remove_bootstrap(&self) -> bool {
        if !self.has_bootstrap {
            return true;
        }
        let boot: Vec<_> = self
            .backends()
            .filter(|(_, b)| b.role == Role::Bootstrap)
            .map(|(_, b)| b)
            .collect();
        if boot.iter().all(|b| b.removed.load(Ordering::Relaxed)) {
            return true;
        }
        let disabled = boot.iter().any(|b| b.disabled.load(Ordering::Relaxed));
        let complete = self.marker.exists();
        let masters: Vec<bool> = self
            .pools
            .iter()
            .filter(|p| p.name == "api")
            .flat_map(|p| p.backends.iter())
            .filter(|b| b.role == Role::Master)
            .map(|b| b.healthy.load(Ordering::Relaxed))
            .collect();
        if health::bootstrap_removable(disabled, complete, &masters) {
            for b in &boot {
                b.removed.store(true, Ordering::Relaxed);
                remember(&b.node, |f| f.removed = true);
            }
            let why = if disabled {
                "disabled by the operator"
            } else {
                "install complete marker present"
            };
            info!(
                "lb: bootstrap removed from every pool ({why}, all masters healthy in the api pool)"
            );
            return true;
        }
        false
    }
}

impl LbControl for Lb {
    fn set_disabled(&self, node: &str, disabled: bool) -> Result<String, String> {
        let mut pools = Vec::new();
        for p in &self.pools {
            for b in p.backends.iter().filter(|b| b.node == node) {
                b.disabled.store(disabled, Ordering::Relaxed);
                pools.push(p.name);
            }
        }
        if pools.is_empty() {
            return Err(format!("node {node:?} is not a backend of any pool"));
        }
        remember(node, |f| f.disabled = disabled);
        let verb = if disabled { "disabled" } else { "enabled" };
        info!("lb: {node} {verb} in {}", pools.join(", "));
        Ok(format!("{node} {verb} in {}", pools.join(", ")))
    }
}

impl StatusSource for Lb {
    fn name(&self) -> &'static str {
        "lb"
    }

    fn status(&self) -> serde_json::Value {
        let h = &self.cfg.health;
        let pools: Vec<_> = self
            .pools
            .iter()
            .map(|p| {
                let backends: Vec<_> = p
                    .backends
                    .iter()
                    .map(|b| {
                        let hs = *b.health.lock().unwrap_or_else(|e| e.into_inner());
                        let err = b
                            .last_error
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .clone();
                        json!({
                            "node": b.node,
                            "role": b.role,
                            "address": b.addr.to_string(),
                            "healthy": b.healthy.load(Ordering::Relaxed),
                            "disabled": b.disabled.load(Ordering::Relaxed),
                            "removed": b.removed.load(Ordering::Relaxed),
                            "consecutiveSuccesses": hs.successes(),
                            "consecutiveFailures": hs.failures(),
                            "lastCheckError": err,
                            "activeConnections": b.active.load(Ordering::Relaxed),
                            "totalConnections": b.total.load(Ordering::Relaxed),
                            "connectFailures": b.connect_failures.load(Ordering::Relaxed),
                        })
                    })
                    .collect();
                json!({
                    "name": p.name,
                    "frontend": p.frontend.to_string(),
                    "check": p.check.to_string(),
                    "activeConnections": p.active.load(Ordering::Relaxed),
                    "totalConnections": p.total.load(Ordering::Relaxed),
                    "rejectedOverCap": p.over_cap.load(Ordering::Relaxed),
                    "closedNoBackend": p.no_backend.load(Ordering::Relaxed),
                    "backends": backends,
                })
            })
            .collect();
        json!({
            "health": {
                "interval": format!("{:?}", h.interval),
                "timeout": format!("{:?}", h.timeout),
                "rise": h.rise,
                "fall": h.fall,
            },
            "maxConnections": self.cfg.max_connections,
            "bootstrapCompleteMarker": self.marker.display().to_string(),
            "pools": pools,
        })
    }

    fn metrics(&self, out: &mut String) {
        type Get<'a, T> = &'a dyn Fn(&T) -> u64;
        let backend_families: [(&str, Kind, &str, Get<'_, BackendState>); 4] = [
            (
                "crc_appliance_lb_backend_up",
                Kind::Gauge,
                "1 when the backend is healthy, enabled and not removed.",
                &|b| u64::from(b.eligible()),
            ),
            (
                "crc_appliance_lb_backend_active_connections",
                Kind::Gauge,
                "Proxied connections open to the backend.",
                &|b| b.active.load(Ordering::Relaxed),
            ),
            (
                "crc_appliance_lb_backend_connections_total",
                Kind::Counter,
                "Connections proxied to the backend.",
                &|b| b.total.load(Ordering::Relaxed),
            ),
            (
                "crc_appliance_lb_backend_connect_failures_total",
                Kind::Counter,
                "Failed connect attempts to the backend (the client was retried elsewhere).",
                &|b| b.connect_failures.load(Ordering::Relaxed),
            ),
        ];
        for (name, kind, help, get) in backend_families {
            let mut f = family(out, name, kind, help);
            for (p, b) in self.backends() {
                f.sample(&[("pool", &p.name), ("backend", &b.node)], get(b));
            }
        }
        let pool_families: [(&str, Kind, &str, Get<'_, PoolState>); 4] = [
            (
                "crc_appliance_lb_frontend_active_connections",
                Kind::Gauge,
                "Client connections open on the frontend.",
                &|p| p.active.load(Ordering::Relaxed),
            ),
            (
                "crc_appliance_lb_frontend_connections_total",
                Kind::Counter,
                "Client connections accepted on the frontend.",
                &|p| p.total.load(Ordering::Relaxed),
            ),
            (
                "crc_appliance_lb_frontend_rejected_total",
                Kind::Counter,
                "Client connections closed at once because maxConnections was reached.",
                &|p| p.over_cap.load(Ordering::Relaxed),
            ),
            (
                "crc_appliance_lb_frontend_no_backend_total",
                Kind::Counter,
                "Client connections closed because no backend was available.",
                &|p| p.no_backend.load(Ordering::Relaxed),
            ),
        ];
        for (name, kind, help, get) in pool_families {
            let mut f = family(out, name, kind, help);
            for p in &self.pools {
                f.sample(&[("pool", &p.name)], get(p));
            }
        }
    }
}

/// Sockets acquired by [`bind`].
pub struct Bound {
    lb: Arc<Lb>,
    listeners: Vec<TcpListener>,
    prober: Prober,
}

/// Bind this service's sockets and log `listening for lb <pool> on <addr>`.
pub async fn bind(plan: &Arc<Plan>) -> anyhow::Result<Bound> {
    let cfg = plan.cluster.lb.clone();
    let prober = Prober::new(cfg.ca_file.as_deref(), &plan.cluster.domain)?;
    let remembered = flags_store()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    let mut listeners = Vec::new();
    let mut pools = Vec::new();
    for p in &plan.pools {
        let listener = TcpListener::bind(p.frontend)
            .await
            .with_context(|| format!("bind TCP {} for the {} frontend", p.frontend, p.name))?;
        let local = listener.local_addr()?;
        info!("listening for lb {} on {local}", p.name);
        listeners.push(listener);
        pools.push(PoolState {
            name: p.name,
            frontend: local,
            check: p.check.clone(),
            backends: p
                .backends
                .iter()
                .map(|b| {
                    let f = remembered.get(&b.name).copied().unwrap_or_default();
                    BackendState {
                        node: b.name.clone(),
                        role: b.role,
                        addr: b.addr,
                        healthy: AtomicBool::new(false),
                        disabled: AtomicBool::new(f.disabled),
                        removed: AtomicBool::new(f.removed),
                        health: Mutex::new(Health::new(cfg.health.rise, cfg.health.fall)),
                        last_error: Mutex::new(None),
                        active: AtomicU64::new(0),
                        total: AtomicU64::new(0),
                        connect_failures: AtomicU64::new(0),
                    }
                })
                .collect(),
            rr: RoundRobin::new(),
            active: AtomicU64::new(0),
            total: AtomicU64::new(0),
            over_cap: AtomicU64::new(0),
            no_backend: AtomicU64::new(0),
            warned_empty: AtomicBool::new(false),
        });
    }
    let lb = Arc::new(Lb {
        pools,
        marker: plan.cluster.http.ignition_dir.join("bootstrap-complete"),
        has_bootstrap: plan.cluster.nodes.iter().any(|n| n.role == Role::Bootstrap),
        cfg,
    });
    Ok(Bound {
        lb,
        listeners,
        prober,
    })
}

impl Bound {
    /// Serve until `shutdown` is cancelled, then finish in-flight work and return.
    pub async fn run(self, hub: Arc<Hub>, shutdown: CancellationToken) -> anyhow::Result<()> {
        let lb = self.lb;
        hub.register(lb.clone());
        hub.set_lb_control(lb.clone());
        let tasks = TaskTracker::new();
        // Connections get their own token, cancelled DRAIN after shutdown.
        let conns_stop = CancellationToken::new();
        let conns = TaskTracker::new();
        for (pi, p) in lb.pools.iter().enumerate() {
            for bi in 0..p.backends.len() {
                tasks.spawn(check_loop(
                    lb.clone(),
                    pi,
                    bi,
                    self.prober.clone(),
                    shutdown.clone(),
                ));
            }
        }
        tasks.spawn(bootstrap_watch(lb.clone(), shutdown.clone()));
        for (pi, listener) in self.listeners.into_iter().enumerate() {
            tasks.spawn(accept_loop(
                lb.clone(),
                pi,
                listener,
                shutdown.clone(),
                conns.clone(),
                conns_stop.clone(),
            ));
        }
        tasks.close();
        shutdown.cancelled().await;
        tasks.wait().await;
        conns.close();
        if tokio::time::timeout(DRAIN, conns.wait()).await.is_err() {
            debug!("lb: cutting {} connections after {DRAIN:?}", conns.len());
            conns_stop.cancel();
            conns.wait().await;
        }
        Ok(())
    }
}

async fn check_loop(
    lb: Arc<Lb>,
    pi: usize,
    bi: usize,
    prober: Prober,
    shutdown: CancellationToken,
) {
    let pool = &lb.pools[pi];
    let b = &pool.backends[bi];
    let h = lb.cfg.health;
    let mut next = tokio::time::Instant::now();
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep_until(next) => {}
        }
        next += h.interval;
        if b.removed.load(Ordering::Relaxed) {
            b.healthy.store(false, Ordering::Relaxed);
            debug!("lb {}: {} removed; no more checks", pool.name, b.node);
            return;
        }
        let result = tokio::select! {
            _ = shutdown.cancelled() => return,
            r = tokio::time::timeout(h.timeout, prober.probe(&pool.check, b.addr)) => match r {
                Ok(r) => r,
                Err(_) => Err(format!("timed out after {:?}", h.timeout)),
            },
        };
        let flip = {
            let mut hs = b.health.lock().unwrap_or_else(|e| e.into_inner());
            let flip = hs.observe(result.is_ok());
            b.healthy.store(hs.healthy(), Ordering::Relaxed);
            flip
        };
        if let Err(e) = &result {
            *b.last_error.lock().unwrap_or_else(|e| e.into_inner()) = Some(e.clone());
        }
        match flip {
            Some(true) => info!(
                "lb {}: backend {} {} is healthy ({})",
                pool.name, b.node, b.addr, pool.check
            ),
            Some(false) => warn!(
                "lb {}: backend {} {} is unhealthy: {}",
                pool.name,
                b.node,
                b.addr,
                result.as_ref().err().map(String::as_str).unwrap_or("?")
            ),
            None => {}
        }
        // Skip missed ticks instead of bursting after a stall.
        let now = tokio::time::Instant::now();
        if next < now {
            next = now;
        }
    }
}

async fn bootstrap_watch(lb: Arc<Lb>, shutdown: CancellationToken) {
    let interval = lb.cfg.health.interval;
    loop {
        if lb.maybe_remove_bootstrap() {
            return;
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(interval) => {}
        }
    }
}

async fn accept_loop(
    lb: Arc<Lb>,
    pi: usize,
    listener: TcpListener,
    shutdown: CancellationToken,
    conns: TaskTracker,
    conns_stop: CancellationToken,
) {
    let pool = &lb.pools[pi];
    let cap = Arc::new(Semaphore::new(lb.cfg.max_connections));
    loop {
        // EMFILE and friends: back off a little, keep serving.
        let on_error = |e: &std::io::Error| warn!("lb {}: accept: {e}", pool.name);
        let Some((stream, peer)) =
            net::accept(&listener, &shutdown, Duration::from_millis(50), on_error).await
        else {
            return;
        };
        pool.total.fetch_add(1, Ordering::Relaxed);
        let Ok(permit) = cap.clone().try_acquire_owned() else {
            pool.over_cap.fetch_add(1, Ordering::Relaxed);
            debug!(%peer, "lb {}: over maxConnections; closing", pool.name);
            drop(stream);
            continue;
        };
        let lb = lb.clone();
        let stop = conns_stop.clone();
        conns.spawn(async move {
            let pool = &lb.pools[pi];
            pool.active.fetch_add(1, Ordering::Relaxed);
            tokio::select! {
                _ = stop.cancelled() => {}
                _ = serve_conn(&lb, pi, stream, peer) => {}
            }
            pool.active.fetch_sub(1, Ordering::Relaxed);
            drop(permit);
        });
    }
}

/// Connect to the next eligible backend, retrying the others on failure.
async fn connect_backend(lb: &Lb, pool: &PoolState) -> Option<(usize, TcpStream)> {
    let mut tried = Tried::default();
    loop {
        let i = pool.rr.pick(pool.backends.len(), |i| {
            !tried.contains(i) && pool.backends[i].eligible()
        })?;
        tried.insert(i);
        let b = &pool.backends[i];
        match tokio::time::timeout(lb.cfg.connect_timeout, TcpStream::connect(b.addr)).await {
            Ok(Ok(s)) => return Some((i, s)),
            Ok(Err(e)) => {
                b.connect_failures.fetch_add(1, Ordering::Relaxed);
                debug!(
                    "lb {}: connect {} {}: {e}; trying the next",
                    pool.name, b.node, b.addr
                );
            }
            Err(_) => {
                b.connect_failures.fetch_add(1, Ordering::Relaxed);
                debug!(
                    "lb {}: connect {} {} timed out; trying the next",
                    pool.name, b.node, b.addr
                );
            }
        }
    }
}

async fn serve_conn(lb: &Lb, pi: usize, mut client: TcpStream, peer: SocketAddr) {
    let pool = &lb.pools[pi];
    let _ = client.set_nodelay(true);
    let Some((bi, mut backend)) = connect_backend(lb, pool).await else {
        pool.no_backend.fetch_add(1, Ordering::Relaxed);
        if pool.warned_empty.swap(true, Ordering::Relaxed) {
            debug!(%peer, "lb {}: no backend available; closing", pool.name);
        } else {
            warn!(%peer, "lb {}: no healthy enabled backend; closing client connections until one is", pool.name);
        }
        return;
    };
    if pool.warned_empty.load(Ordering::Relaxed) {
        pool.warned_empty.store(false, Ordering::Relaxed);
    }
    let _ = backend.set_nodelay(true);
    let b = &pool.backends[bi];
    b.active.fetch_add(1, Ordering::Relaxed);
    b.total.fetch_add(1, Ordering::Relaxed);
    let end = proxy::splice(&mut client, &mut backend, lb.cfg.idle_timeout).await;
    b.active.fetch_sub(1, Ordering::Relaxed);
    match end {
        proxy::End::Done(up, down) => {
            debug!(%peer, "lb {} → {}: done, {up} B up, {down} B down", pool.name, b.node)
        }
        proxy::End::Idle => debug!(%peer, "lb {} → {}: idle timeout", pool.name, b.node),
        proxy::End::Error(e) => debug!(%peer, "lb {} → {}: {e}", pool.name, b.node),
    }
}
