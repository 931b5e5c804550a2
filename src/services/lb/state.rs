//! Load balancer state: pools and backends as the request path and the
//! admin API see them, and how a new plan maps onto the running state.
//!
//! Invariants:
//! - A backend's health, enabled flag (operator drain) and removed flag
//!   (bootstrap retired) live in one [`BackendState`] behind one lock, so
//!   [`Backend::ready`] and `/status` read one consistent snapshot (after
//!   pingora's `HealthInner { healthy, enabled, consecutive_counter }`).
//! - A backend is identified across reloads by [`BackendKey`] (pool, node,
//!   address, check). [`Pools::rebuild`] reuses the `Arc<Backend>` of every
//!   unchanged key — health, counters and flags carry over; new keys start
//!   unhealthy; dropped ones leave the pools (their established connections
//!   hold their own `Arc` and run to their end).
//! - [`BackendState::changed`] is the time of the last change of what
//!   `lb status` shows (UP/DOWN, drain, removal): every write goes through
//!   [`Backend::state`], whose guard stamps it when the guard drops, so no
//!   writer can forget to.
//! - Operator drains and bootstrap removal are remembered per node in
//!   [`NodeMemory`], which the LB owns and prunes to the nodes of the plan
//!   on every reload (a node removed and re-added comes back enabled).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio_util::sync::CancellationToken;

use super::health::Health;
use super::select::RoundRobin;
use crate::model::cluster::{HealthCfg, Role};
use crate::plan::{Check, Plan};
use crate::runtime::sync::LockExt as _;
use crate::services::lb::status::BackendStatus;

pub use crate::model::catalogue::PoolKind;

/// What makes a backend "the same" across reloads.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BackendKey {
    pub pool: PoolKind,
    pub node: String,
    pub addr: SocketAddr,
    pub check: Check,
}

/// Health and flags of one backend, read and written as one.
#[derive(Debug, Clone)]
pub struct BackendState {
    pub health: Health,
    /// False while the operator drains the node.
    pub enabled: bool,
    /// True once the bootstrap node was retired.
    pub removed: bool,
    pub last_error: Option<String>,
    /// Unix seconds of the last change of [`BackendState::shown`], or of
    /// the backend's creation (HAProxy's `lastchg`).
    pub changed: u64,
}

impl BackendState {
    /// What `lb status` shows: (removed, enabled, healthy), with the
    /// health checks of a removed backend (reset every interval) and the
    /// drain flag under a removal left out.
    fn shown(&self) -> (bool, bool, bool) {
        let live = !self.removed;
        (
            self.removed,
            live && self.enabled,
            live && self.health.healthy(),
        )
    }
}

/// The locked state of one backend; stamps [`BackendState::changed`] on
/// drop when the shown state changed while it was held.
pub struct StateGuard<'a> {
    state: MutexGuard<'a, BackendState>,
    before: (bool, bool, bool),
}

impl std::ops::Deref for StateGuard<'_> {
    type Target = BackendState;
    fn deref(&self) -> &BackendState {
        &self.state
    }
}

impl std::ops::DerefMut for StateGuard<'_> {
    fn deref_mut(&mut self) -> &mut BackendState {
        &mut self.state
    }
}

impl Drop for StateGuard<'_> {
    fn drop(&mut self) {
        if self.state.shown() != self.before {
            self.state.changed = unix_now();
        }
    }
}

use crate::runtime::clock::unix_now;

/// One backend of one pool.
pub struct Backend {
    pub key: BackendKey,
    pub role: Role,
    state: Mutex<BackendState>,
    pub active: AtomicU64,
    pub total: AtomicU64,
    pub connect_failures: AtomicU64,
    /// Cancelled when a reload drops this backend: its check loop ends.
    pub retired: CancellationToken,
}

impl Backend {
    pub fn new(key: BackendKey, role: Role, health: &HealthCfg, flags: NodeFlags) -> Backend {
        Backend {
            key,
            role,
            state: Mutex::new(BackendState {
                health: Health::new(health.rise, health.fall),
                enabled: !flags.disabled,
                removed: flags.removed,
                last_error: None,
                changed: unix_now(),
            }),
            active: AtomicU64::new(0),
            total: AtomicU64::new(0),
            connect_failures: AtomicU64::new(0),
            retired: CancellationToken::new(),
        }
    }

    pub fn state(&self) -> StateGuard<'_> {
        // A std Mutex: held for a few field reads or writes, never across
        // an await (mini-redis `db.rs`).
        let state = self.state.locked();
        let before = state.shown();
        StateGuard { state, before }
    }

    /// May take new connections: healthy, enabled and not removed.
    pub fn ready(&self) -> bool {
        let s = self.state();
        s.health.healthy() && s.enabled && !s.removed
    }
}

/// One frontend's backends.
pub struct Pool {
    pub kind: PoolKind,
    pub frontend: SocketAddr,
    /// The IPv6 frontend (dual-stack).
    pub frontend_v6: Option<SocketAddr>,
    pub check: Check,
    pub backends: Vec<Arc<Backend>>,
    pub rr: RoundRobin,
}

/// The pools of one plan; swapped whole by a reload.
#[derive(Default)]
pub struct Pools {
    pub list: Vec<Pool>,
}

impl Pools {
    pub fn get(&self, kind: PoolKind) -> Option<&Pool> {
        self.list.iter().find(|p| p.kind == kind)
    }

    pub fn backends(&self) -> impl Iterator<Item = (&Pool, &Arc<Backend>)> {
        self.list
            .iter()
            .flat_map(|p| p.backends.iter().map(move |b| (p, b)))
    }

    /// The pools of `plan`, reusing this generation's backends whose key is
    /// unchanged. Returns the pools, the backends that are new (to start
    /// checking) and those that are gone (to retire).
    pub fn rebuild(
        &self,
        plan: &Plan,
        memory: &NodeMemory,
    ) -> (Pools, Vec<Arc<Backend>>, Vec<Arc<Backend>>) {
        let mut old: HashMap<BackendKey, Arc<Backend>> = self
            .backends()
            .map(|(_, b)| (b.key.clone(), b.clone()))
            .collect();
        let health = &plan.cluster.lb.health;
        let mut fresh = Vec::new();
        let mut list = Vec::new();
        for p in &plan.pools {
            let kind = p.name;
            let backends = p
                .backends
                .iter()
                .map(|b| {
                    let key = BackendKey {
                        pool: kind,
                        node: b.name.clone(),
                        addr: b.addr,
                        check: p.check.clone(),
                    };
                    old.remove(&key).unwrap_or_else(|| {
                        let nb = Arc::new(Backend::new(key, b.role, health, memory.get(&b.name)));
                        fresh.push(nb.clone());
                        nb
                    })
                })
                .collect();
            list.push(Pool {
                kind,
                frontend: p.frontend,
                frontend_v6: p.frontend_v6,
                check: p.check.clone(),
                backends,
                rr: RoundRobin::new(),
            });
        }
        (Pools { list }, fresh, old.into_values().collect())
    }
}

/// Per-node flags that outlive a reload's backends.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeFlags {
    pub disabled: bool,
    pub removed: bool,
    /// The operator enabled the bootstrap after its removal: it is not
    /// removed automatically again until disabled again.
    pub kept: bool,
}

/// The LB's memory of operator drains and bootstrap removal.
#[derive(Default)]
pub struct NodeMemory {
    nodes: Mutex<HashMap<String, NodeFlags>>,
}

impl NodeMemory {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, NodeFlags>> {
        self.nodes.locked()
    }

    pub fn get(&self, node: &str) -> NodeFlags {
        self.lock().get(node).copied().unwrap_or_default()
    }

    pub fn update(&self, node: &str, f: impl FnOnce(&mut NodeFlags)) {
        f(self.lock().entry(node.to_string()).or_default());
    }

    /// Forget nodes that are not in `plan`.
    pub fn prune(&self, plan: &Plan) {
        self.lock()
            .retain(|n, _| plan.cluster.nodes.iter().any(|p| &p.name == n));
    }
}

/// Counters of one frontend, kept across reloads.
#[derive(Default)]
pub struct FrontendStats {
    pub active: AtomicU64,
    pub total: AtomicU64,
    pub over_cap: AtomicU64,
    pub no_backend: AtomicU64,
    /// Connections closed at accept: the client may not use this frontend
    /// (machine-config: not a node, [`crate::model::access::machine_config`]).
    pub refused: AtomicU64,
}

impl FrontendStats {
    pub fn get(v: &AtomicU64) -> u64 {
        v.load(Ordering::Relaxed)
    }
}

/// A backend's row in `/status` → `lb`.
pub fn backend_status(b: &Backend) -> BackendStatus {
    let s = b.state().clone();
    BackendStatus {
        node: b.key.node.clone(),
        role: b.role,
        address: b.key.addr.to_string(),
        healthy: s.health.healthy(),
        disabled: !s.enabled,
        removed: s.removed,
        consecutive_successes: s.health.successes(),
        consecutive_failures: s.health.failures(),
        last_check_error: s.last_error,
        active_connections: FrontendStats::get(&b.active),
        total_connections: FrontendStats::get(&b.total),
        connect_failures: FrontendStats::get(&b.connect_failures),
        last_change: Some(s.changed),
    }
}
