//! One generation of the load balancer: everything a reload changes, as
//! one immutable value.
//!
//! Invariants:
//! - A [`Generation`] is the plan it was built from (the frontends'
//!   limits and timeouts, the machine-config ACL, the bootstrap marker and
//!   removal mode), the [`Pools`] built from that plan and the health check
//!   settings of that plan. Nothing in it is replaced after it is built;
//!   a reload builds the next one and installs it with one store of the
//!   LB's `ArcSwap<Generation>`.
//! - Every reader loads it once and uses that one value: an accepted
//!   connection for its ACL check, cap, backend pick, connect and idle
//!   timeouts; a check loop for one tick; the bootstrap watch for one
//!   tick; `/status` and `/metrics` for one document. So a reader sees the
//!   old generation or the new one, never a mix of both.
//! - What must outlive a generation is shared, not copied: a backend whose
//!   [`BackendKey`](super::state::BackendKey) is unchanged is the same
//!   `Arc<Backend>` in the next generation (health, counters and flags
//!   carry over, [`Pools::rebuild`]); frontend counters and caps and the
//!   per-node memory live in the LB itself.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;

use super::state::{Backend, NodeMemory, PoolKind, Pools};
use crate::model::cluster::{Cluster, HealthCfg, LbCfg};
use crate::plan::{Check, Plan};
use crate::runtime::probe::{ProbeError, Prober};

/// One health probe of a backend.
#[async_trait]
pub trait Probe: Send + Sync {
    async fn probe(&self, check: &Check, addr: SocketAddr) -> Result<(), ProbeError>;
}

#[async_trait]
impl Probe for Prober {
    async fn probe(&self, check: &Check, addr: SocketAddr) -> Result<(), ProbeError> {
        Prober::probe(self, check, addr).await
    }
}

/// What the check loops read at every tick.
pub struct CheckSettings {
    pub health: HealthCfg,
    /// The prober of each pool (its own CA for HTTPS checks).
    pub probers: HashMap<PoolKind, Arc<dyn Probe>>,
    /// For pools without their own.
    pub prober: Arc<dyn Probe>,
}

impl CheckSettings {
    /// The health settings and probers of `plan`: the api and
    /// machine-config pools verify against their own CA bundle when one is
    /// configured.
    pub fn of(plan: &Plan) -> anyhow::Result<CheckSettings> {
        let c = &plan.cluster;
        let mut probers: HashMap<PoolKind, Arc<dyn Probe>> = HashMap::new();
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

    pub fn prober_for(&self, pool: PoolKind) -> &Arc<dyn Probe> {
        self.probers.get(&pool).unwrap_or(&self.prober)
    }
}

/// The LB's state of one plan; see the module doc.
pub struct Generation {
    /// The plan this generation serves.
    pub plan: Arc<Plan>,
    pub pools: Pools,
    pub checks: Arc<CheckSettings>,
}

/// The next generation and what changed in its backends.
pub struct Next {
    pub generation: Generation,
    /// Backends new in this generation (to start checking).
    pub fresh: Vec<Arc<Backend>>,
    /// Backends of the last generation that are gone (to retire).
    pub gone: Vec<Arc<Backend>>,
}

impl Generation {
    /// The generation before the first commit: `plan`'s settings, no pools.
    pub fn empty(plan: Arc<Plan>, checks: CheckSettings) -> Generation {
        Generation {
            plan,
            pools: Pools::default(),
            checks: Arc::new(checks),
        }
    }

    /// The generation of `plan`, reusing this one's backends whose key is
    /// unchanged.
    pub fn next(&self, plan: Arc<Plan>, checks: CheckSettings, memory: &NodeMemory) -> Next {
        let (pools, fresh, gone) = self.pools.rebuild(&plan, memory);
        Next {
            generation: Generation {
                plan,
                pools,
                checks: Arc::new(checks),
            },
            fresh,
            gone,
        }
    }

    /// `loadBalancer`.
    pub fn cfg(&self) -> &LbCfg {
        &self.plan.cluster.lb
    }

    /// Who may use the machine-config frontend
    /// ([`crate::model::access::machine_config`]).
    pub fn cluster(&self) -> &Cluster {
        &self.plan.cluster
    }

    /// `<ignitionDir>/bootstrap-complete`.
    pub fn marker(&self) -> PathBuf {
        self.plan
            .cluster
            .http
            .ignition_dir
            .join("bootstrap-complete")
    }
}

/// A small valid plan for unit tests; `base` resolves its directories.
#[cfg(test)]
pub fn test_plan(base: &std::path::Path, lb: &str) -> Arc<Plan> {
    use crate::config::fixture::{BOOTSTRAP, MASTER_0, plan_in, worker};
    Arc::new(plan_in(
        base,
        &[BOOTSTRAP, MASTER_0, &worker("worker-0")],
        &format!("loadBalancer: {{ {lb} }}\n"),
    ))
}

#[cfg(test)]
#[path = "generation_tests.rs"]
mod tests;
