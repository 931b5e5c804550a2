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
//! - A reload installs the next [`generation`] (plan, pools, check
//!   settings) in one store; a connection loads the generation once at
//!   accept and uses it to its end, so it never sees two plans at once.
//!   Unchanged backends keep health, counters and flags ([`state`]); new
//!   ones start unhealthy; dropped ones stop taking connections while their
//!   established connections run to their end. Frontends whose
//!   address did not change keep their listening socket. No reload cuts a
//!   client connection.
//! - Every loop selects on shutdown. On shutdown the listeners close and
//!   in-flight connections get [`DRAIN`] to finish before they are cut.

pub mod checker;
mod frontend;
pub mod generation;
pub mod health;
pub mod pipe;
pub mod proxy;
pub mod select;
pub mod state;
pub mod status;

use std::net::SocketAddr;
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

use crate::plan::Plan;
use crate::runtime::bind::BindOptions;
use crate::runtime::context::Context;
use crate::runtime::control::{LbControl, LbControlError};
use crate::runtime::limits::cap::Caps;
use crate::runtime::metrics::{Kind, family};
use crate::runtime::once::OncePerAddress;
use crate::runtime::service::{Commit, Listeners, Service, Tasks};
use crate::runtime::sync::LockExt as _;
use crate::services::lb::status::{HealthStatus, LbStatus, PoolStatus};
use crate::timeline::Events;
use checker::{BootstrapWatch, Marker};
use generation::{CheckSettings, Generation};
use state::{Backend, FrontendStats, NodeMemory, PoolKind};

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
    /// The current generation: plan, pools and check settings, replaced
    /// whole by a reload's commit (one store); every reader loads it once.
    current: Arc<ArcSwap<Generation>>,
    frontends: [Frontend; 4],
    memory: Arc<NodeMemory>,
    /// The bootstrap watch's findings.
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
    /// Refused machine-config clients: one warning per address.
    refusals: OncePerAddress,
    /// Pipes for zero-copy forwarding, shared by every frontend; their
    /// descriptors are kept out of the client caps by `limits::reserve`.
    pipes: pipe::Pool,
    /// The connection caps and how frontends bind (the run-time context).
    caps: Caps,
    bind: BindOptions,
    /// The frontends' rate-limited lines (the run-time context's).
    logs: frontend::Logs,
}

impl Lb {
    /// The service for `plan` (health checks start with the first commit).
    pub fn new(plan: &Arc<Plan>, events: Events, ctx: &Context) -> anyhow::Result<Arc<Lb>> {
        let first = Generation::empty(plan.clone(), CheckSettings::of(plan)?);
        let lb = Arc::new(Lb {
            current: Arc::new(ArcSwap::from_pointee(first)),
            frontends: Default::default(),
            memory: Arc::new(NodeMemory::default()),
            bootstrap: Arc::new(BootstrapWatch::default()),
            listeners: Listeners::default(),
            local: Mutex::new(Vec::new()),
            tasks: ctx.tasks("lb"),
            conns: TaskTracker::new(),
            conns_stop: CancellationToken::new(),
            events,
            refusals: OncePerAddress::default(),
            pipes: pipe::Pool::new(crate::runtime::limits::cap::LB_SPLICE_PIPES),
            caps: ctx.caps,
            bind: ctx.bind,
            logs: frontend::Logs::new(ctx),
        });
        let stop = lb.tasks.shutdown_token();
        lb.tasks.spawn(
            "lb bootstrap watch",
            stop.clone(),
            checker::bootstrap_watch(
                lb.current.clone(),
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
                self.current.clone(),
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
        let g = self.current.load();
        let (cfg, pools) = (g.cfg(), &g.pools);
        let h = cfg.health;
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
            bootstrap_complete_marker: g.marker().display().to_string(),
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
        let checks = CheckSettings::of(&plan)?;
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
            // The whole generation in one store: a connection accepted now
            // sees the last plan's pools and settings or this one's.
            let next = self.current.load().next(plan, checks, &self.memory);
            self.current.store(Arc::new(next.generation));
            for b in &next.gone {
                info!(
                    "lb {}: backend {} {} left the pool (open connections continue)",
                    b.key.pool, b.key.node, b.key.addr
                );
                b.retired.cancel();
            }
            for b in &next.fresh {
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
        let g = self.current.load();
        let pools = &g.pools;
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
        let g = self.current.load();
        let pools = &g.pools;
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
