//! Layer-4 TCP load balancer with health checks (OpenShift UPI frontends).
//!
//! Four frontends (`api` 6443, `machine-config` 22623, `ingress-http` 80,
//! `ingress-https` 443) from [`Plan::pools`]; each accepted connection is
//! proxied byte for byte (no TLS termination, no session persistence) to the
//! next healthy, enabled backend in round-robin order.
//!
//! Dual-stack (`network.ipv6`): each frontend has an IPv6 twin on the IPv6
//! VIP, and a pool holds the nodes' IPv6 addresses as backends of their
//! own (own health checks, over IPv6) after the IPv4 ones. A connection
//! goes to a backend of its frontend's family while one is ready, else to
//! one of the other family (a pool whose IPv6 backends are all down still
//! serves IPv6 clients). A node's backends of both families are one node
//! for draining, bootstrap removal and completion (a master counts as
//! healthy in a pool when one of its backends is).
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
//! - The machine-config frontend accepts only nodes, the appliance host and
//!   `loadBalancer.machineConfigClientCidrs` ([`access::machine_config`]):
//!   any other client is closed right after accept, before the cap and
//!   before any backend is connected, and counted (`refusedClients`); the
//!   first refusal per address is logged.
//! - Half-close is forwarded; a connection idle in both directions for
//!   `idleTimeout` is closed ([`proxy`]). Bulk bytes are forwarded with
//!   `splice(2)` through at most `limits::cap::LB_SPLICE_PIPES` pipes
//!   ([`pipe`]); without a pipe they are copied.
//! - Disabling a node (admin API / `crc-appliance lb disable NODE`) drains
//!   it: no new connections, existing ones continue.
//! - Bootstrap is *complete* ([`checker::bootstrap_tick`], latched) on
//!   evidence — every master healthy in the api and machine-config pools,
//!   and the bootstrap's api backend unhealthy after having been healthy
//!   (bootkube tore the bootstrap control plane down) — or when
//!   `<ignitionDir>/bootstrap-complete` exists and is not older than the
//!   ignition files (an older one is ignored, logged once, and shown in
//!   `/status`). The bootstrap node is *removed* (no longer checked or
//!   selected) once every master is healthy in the api pool and the
//!   operator disabled it, or bootstrap is complete and
//!   `removeBootstrap` is `auto`; `lb enable bootstrap` brings it back
//!   (unhealthy until it rises again), and it is not removed again until
//!   disabled again. Disabled/removed survive a reload, not a restart (the
//!   marker file does; the evidence is seen again only while the
//!   bootstrap's API is up).
//! - A reload ([`state`]): unchanged backends keep health, counters and
//!   flags; new ones start unhealthy; dropped ones stop taking connections
//!   while their established connections run to their end. Frontends whose
//!   address did not change keep their listening socket. No reload cuts a
//!   client connection.
//! - Every loop selects on shutdown. On shutdown the listeners close and
//!   in-flight connections get [`DRAIN`] to finish before they are cut.

pub mod checker;
mod frontend;
pub mod health;
pub mod pipe;
pub mod proxy;
pub mod select;
pub mod state;
pub mod status;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use arc_swap::ArcSwap;
use async_trait::async_trait;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{debug, info};

use crate::model::cluster::{Cluster, LbCfg};
use crate::plan::Plan;
use crate::runtime::bind::BindOptions;
use crate::runtime::context::Context;
use crate::runtime::control::{LbControl, LbControlError};
use crate::runtime::limits::cap::Caps;
use crate::runtime::metrics::{Kind, family};
use crate::runtime::once::OncePerAddress;
use crate::runtime::probe::Prober;
use crate::runtime::service::{Commit, Listeners, Service, Tasks};
use crate::runtime::sync::LockExt as _;
use crate::services::lb::status::{HealthStatus, LbStatus, PoolStatus};
use crate::timeline::Events;
use checker::{BootstrapWatch, CheckSettings, Marker};
use state::{Backend, FrontendStats, NodeMemory, PoolKind, Pools};

/// How long in-flight connections may continue after shutdown.
pub const DRAIN: Duration = crate::runtime::drain::LB_CONNECTIONS;

/// One frontend's counters and connection cap, kept across reloads.
#[derive(Default)]
struct Frontend {
    stats: FrontendStats,
    /// `maxConnections` and its semaphore; replaced when a reload changes
    /// the number (connections already open keep their old permit).
    cap: Mutex<Option<(usize, Arc<Semaphore>)>>,
}

impl Frontend {
    fn cap(&self, max: usize) -> Arc<Semaphore> {
        let mut c = self.cap.locked();
        match &*c {
            Some((n, s)) if *n == max => s.clone(),
            _ => {
                let s = Arc::new(Semaphore::new(max));
                *c = Some((max, s.clone()));
                s
            }
        }
    }
}

/// The load balancer service.
pub struct Lb {
    pools: Arc<ArcSwap<Pools>>,
    frontends: [Frontend; 4],
    cfg: ArcSwap<LbCfg>,
    settings: Arc<ArcSwap<CheckSettings>>,
    memory: Arc<NodeMemory>,
    /// The bootstrap watch's marker path, removal mode and findings.
    bootstrap: Arc<BootstrapWatch>,
    listeners: Listeners<(PoolKind, SocketAddr)>,
    /// Bound frontend addresses, for `/status`.
    local: Mutex<Vec<(PoolKind, SocketAddr)>>,
    tasks: Tasks,
    conns: TaskTracker,
    conns_stop: CancellationToken,
    /// The install timeline: machine-config connections from node
    /// addresses, health flips, the bootstrap's completion and removal.
    events: Events,
    /// The cluster of the last commit: who may use the machine-config
    /// frontend ([`access::machine_config`]).
    cluster: ArcSwap<Cluster>,
    /// Refused machine-config clients: one warning per address.
    refusals: OncePerAddress,
    /// Pipes for zero-copy forwarding, shared by every frontend; their
    /// descriptors are kept out of the client caps by `limits::reserve`.
    pipes: pipe::Pool,
    /// The connection caps and how frontends bind (the run-time context).
    caps: Caps,
    bind: BindOptions,
}

/// The health settings and probers of `plan`: the api and machine-config
/// pools verify against their own CA bundle when one is configured.
fn check_settings(plan: &Plan) -> anyhow::Result<CheckSettings> {
    let c = &plan.cluster;
    let mut probers: std::collections::HashMap<PoolKind, Arc<dyn checker::Probe>> =
        Default::default();
    for (kind, ca) in [
        (PoolKind::Api, &c.lb.api_ca_file),
        (PoolKind::MachineConfig, &c.lb.machine_config_ca_file),
    ] {
        probers.insert(kind, Arc::new(Prober::new(ca.as_deref(), &c.domain)?));
    }
    Ok(CheckSettings {
        health: c.lb.health,
        probers,
        prober: Arc::new(Prober::new(None, &c.domain)?),
    })
}

fn marker_of(plan: &Plan) -> PathBuf {
    plan.cluster.http.ignition_dir.join("bootstrap-complete")
}

impl Lb {
    /// The service for `plan` (health checks start with the first commit).
    pub fn new(plan: &Plan, events: Events, ctx: &Context) -> anyhow::Result<Arc<Lb>> {
        let c = &plan.cluster;
        let settings = check_settings(plan)?;
        let lb = Arc::new(Lb {
            pools: Arc::new(ArcSwap::from_pointee(Pools::default())),
            frontends: Default::default(),
            cfg: ArcSwap::from_pointee(c.lb.clone()),
            settings: Arc::new(ArcSwap::from_pointee(settings)),
            memory: Arc::new(NodeMemory::default()),
            bootstrap: Arc::new(BootstrapWatch::new(marker_of(plan), c.lb.remove_bootstrap)),
            listeners: Listeners::default(),
            local: Mutex::new(Vec::new()),
            tasks: ctx.tasks("lb"),
            conns: TaskTracker::new(),
            conns_stop: CancellationToken::new(),
            events,
            cluster: ArcSwap::from_pointee(c.clone()),
            refusals: OncePerAddress::default(),
            pipes: pipe::Pool::new(crate::runtime::limits::cap::LB_SPLICE_PIPES),
            caps: ctx.caps,
            bind: ctx.bind,
        });
        let stop = lb.tasks.shutdown_token();
        lb.tasks.spawn(
            "lb bootstrap watch",
            stop.clone(),
            checker::bootstrap_watch(
                lb.pools.clone(),
                lb.settings.clone(),
                lb.memory.clone(),
                lb.bootstrap.clone(),
                lb.events.clone(),
                stop,
            ),
        );
        Ok(lb)
    }

    fn frontend(&self, kind: PoolKind) -> &Frontend {
        &self.frontends[kind as usize]
    }

    fn start_checks(&self, backend: &Arc<Backend>) {
        // Retiring the backend or shutting down stops its checks
        // (`checker::check_loop` watches both).
        let stop = self.tasks.token();
        self.tasks.spawn(
            format!("lb check {} {}", backend.key.pool, backend.key.node),
            stop.clone(),
            checker::check_loop(
                backend.clone(),
                self.settings.clone(),
                self.events.clone(),
                stop,
            ),
        );
    }

    fn start_frontend(self: &Arc<Self>, kind: PoolKind, addr: SocketAddr, l: TcpListener) {
        if let Ok(local) = l.local_addr() {
            info!("listening for lb {kind} on {local}");
            let mut v = self.local.locked();
            v.retain(|(k, a)| *k != kind || a.is_ipv6() != local.is_ipv6());
            v.push((kind, local));
        }
        let me = self.clone();
        self.listeners.start(
            &self.tasks,
            (kind, addr),
            format!("lb frontend {kind} {addr}"),
            |t| frontend::accept_loop(me, kind, l, t),
        );
    }

    /// `/status` → `lb` (also `GET /api/lb/backends`): this service's
    /// section.
    pub fn status(&self) -> LbStatus {
        let cfg = self.cfg.load();
        let h = cfg.health;
        let pools = self.pools.load();
        let local = self.local.locked().clone();
        let boot = self.bootstrap.report();
        LbStatus {
            health: HealthStatus {
                interval: format!("{:?}", h.interval),
                timeout: format!("{:?}", h.timeout),
                rise: h.rise,
                fall: h.fall,
            },
            max_connections: cfg.max_connections,
            bootstrap_complete_marker: self.bootstrap.marker.load().display().to_string(),
            bootstrap_complete_marker_present: boot.marker != Marker::Absent,
            bootstrap_complete_marker_stale: boot.marker == Marker::Stale,
            bootstrap_complete: boot.complete,
            remove_bootstrap: cfg.remove_bootstrap,
            pools: pools
                .list
                .iter()
                .map(|p| {
                    let f = &self.frontend(p.kind).stats;
                    let bound = |v6: bool| {
                        local
                            .iter()
                            .find(|(k, a)| *k == p.kind && a.is_ipv6() == v6)
                            .map(|(_, a)| *a)
                    };
                    let frontend = bound(p.frontend.is_ipv6()).unwrap_or(p.frontend);
                    let frontend_v6 = p.frontend_v6.map(|a| bound(true).unwrap_or(a));
                    PoolStatus {
                        name: p.kind,
                        frontend: frontend.to_string(),
                        frontend_v6: frontend_v6.map(|a| a.to_string()),
                        check: p.check.to_string(),
                        active_connections: FrontendStats::get(&f.active),
                        total_connections: FrontendStats::get(&f.total),
                        rejected_over_cap: FrontendStats::get(&f.over_cap),
                        closed_no_backend: FrontendStats::get(&f.no_backend),
                        refused_clients: FrontendStats::get(&f.refused),
                        backends: p
                            .backends
                            .iter()
                            .map(|b| state::backend_status(b))
                            .collect(),
                    }
                })
                .collect(),
        }
    }
}

#[async_trait]
impl Service for Lb {
    fn name(&self) -> &'static str {
        "lb"
    }

    async fn stage(self: Arc<Self>, plan: Arc<Plan>) -> anyhow::Result<Commit> {
        let settings = check_settings(&plan)?;
        let wanted: Vec<(PoolKind, SocketAddr)> = plan
            .pools
            .iter()
            .flat_map(|p| {
                std::iter::once(p.frontend)
                    .chain(p.frontend_v6)
                    .map(|a| (p.name, a))
            })
            .collect();
        let mut new = Vec::new();
        for (kind, addr) in self.listeners.missing(&wanted) {
            let l = self
                .bind
                .tcp(addr)
                .with_context(|| format!("bind TCP {addr} for the {kind} frontend"))?;
            new.push((kind, addr, l));
        }
        Ok(Box::new(move || {
            self.memory.prune(&plan);
            let (pools, fresh, gone) = self.pools.load().rebuild(&plan, &self.memory);
            self.settings.store(Arc::new(settings));
            self.cfg.store(Arc::new(plan.cluster.lb.clone()));
            self.cluster.store(Arc::new(plan.cluster.clone()));
            self.bootstrap.marker.store(Arc::new(marker_of(&plan)));
            self.bootstrap
                .mode
                .store(Arc::new(plan.cluster.lb.remove_bootstrap));
            self.pools.store(Arc::new(pools));
            for b in &gone {
                info!(
                    "lb {}: backend {} {} left the pool (open connections continue)",
                    b.key.pool, b.key.node, b.key.addr
                );
                b.retired.cancel();
            }
            for b in &fresh {
                self.start_checks(b);
            }
            for (kind, addr) in self.listeners.retain(&wanted) {
                info!("lb: closed the {kind} frontend {addr}");
            }
            for (kind, addr, l) in new {
                self.start_frontend(kind, addr, l);
            }
        }))
    }

    async fn run(self: Arc<Self>, shutdown: CancellationToken) -> anyhow::Result<()> {
        let outcome = self
            .tasks
            .supervise(&shutdown, crate::runtime::drain::LB_TASKS)
            .await;
        self.conns.close();
        if tokio::time::timeout(DRAIN, self.conns.wait())
            .await
            .is_err()
        {
            debug!(
                "lb: cutting {} connections after {DRAIN:?}",
                self.conns.len()
            );
            self.conns_stop.cancel();
            self.conns.wait().await;
        }
        outcome
    }

    fn metrics(&self, out: &mut String) {
        let pools = self.pools.load();
        type Get<'a, T> = &'a dyn Fn(&T) -> u64;
        let backend_families: [(&str, Kind, &str, Get<'_, Backend>); 4] = [
            (
                "crc_appliance_lb_backend_up",
                Kind::Gauge,
                "1 when the backend is healthy, enabled and not removed.",
                &|b| u64::from(b.ready()),
            ),
            (
                "crc_appliance_lb_backend_active_connections",
                Kind::Gauge,
                "Proxied connections open to the backend.",
                &|b| FrontendStats::get(&b.active),
            ),
            (
                "crc_appliance_lb_backend_connections_total",
                Kind::Counter,
                "Connections proxied to the backend.",
                &|b| FrontendStats::get(&b.total),
            ),
            (
                "crc_appliance_lb_backend_connect_failures_total",
                Kind::Counter,
                "Failed connect attempts to the backend (the client was retried elsewhere).",
                &|b| FrontendStats::get(&b.connect_failures),
            ),
        ];
        for (name, kind, help, get) in backend_families {
            let mut f = family(out, name, kind, help);
            for (p, b) in pools.backends() {
                // A node's IPv6 backend: the same labels and `family`.
                let pool = p.kind.as_str();
                let labels: [(&str, &dyn std::fmt::Display); 3] = [
                    ("pool", &pool),
                    ("backend", &b.key.node),
                    ("family", &"ipv6"),
                ];
                let n = if b.key.addr.is_ipv6() { 3 } else { 2 };
                f.sample(&labels[..n], get(b));
            }
        }
        let pool_families: [(&str, Kind, &str, Get<'_, FrontendStats>); 5] = [
            (
                "crc_appliance_lb_frontend_active_connections",
                Kind::Gauge,
                "Client connections open on the frontend.",
                &|f| FrontendStats::get(&f.active),
            ),
            (
                "crc_appliance_lb_frontend_connections_total",
                Kind::Counter,
                "Client connections accepted on the frontend.",
                &|f| FrontendStats::get(&f.total),
            ),
            (
                "crc_appliance_lb_frontend_rejected_total",
                Kind::Counter,
                "Client connections closed at once because maxConnections was reached.",
                &|f| FrontendStats::get(&f.over_cap),
            ),
            (
                "crc_appliance_lb_frontend_no_backend_total",
                Kind::Counter,
                "Client connections closed because no backend was available.",
                &|f| FrontendStats::get(&f.no_backend),
            ),
            (
                "crc_appliance_lb_frontend_refused_total",
                Kind::Counter,
                "Client connections closed at accept, never forwarded: the client address may not use the frontend (machine-config: nodes, the appliance host and loadBalancer.machineConfigClientCidrs only).",
                &|f| FrontendStats::get(&f.refused),
            ),
        ];
        for (name, kind, help, get) in pool_families {
            let mut f = family(out, name, kind, help);
            for p in &pools.list {
                f.sample(
                    &[("pool", &p.kind.as_str())],
                    get(&self.frontend(p.kind).stats),
                );
            }
        }
    }
}

impl LbControl for Lb {
    fn set_disabled(&self, node: &str, disabled: bool) -> Result<String, LbControlError> {
        let pools = self.pools.load();
        let mut names = Vec::new();
        let mut revived = false;
        for (p, b) in pools.backends().filter(|(_, b)| b.key.node == node) {
            let mut s = b.state();
            s.enabled = !disabled;
            if !disabled && s.removed {
                s.removed = false;
                revived = true;
            }
            if !names.contains(&p.kind.as_str()) {
                names.push(p.kind.as_str());
            }
        }
        if names.is_empty() {
            return Err(LbControlError::UnknownNode(node.to_string()));
        }
        self.memory.update(node, |f| {
            f.disabled = disabled;
            if revived {
                f.removed = false;
                f.kept = true;
            } else if disabled {
                f.kept = false;
            }
        });
        let verb = if disabled { "disabled" } else { "enabled" };
        let back = if revived {
            " (back after its removal; it must pass its checks again)"
        } else {
            ""
        };
        info!("lb: {node} {verb} in {}{back}", names.join(", "));
        Ok(format!("{node} {verb} in {}{back}", names.join(", ")))
    }
}
