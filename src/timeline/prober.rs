//! The single-node prober: with the load balancer off (the single-node
//! default) nothing else checks the node, so this task probes its backends
//! itself and records what the LB's checks would: [`Event::Healthy`] per
//! pool and [`Event::ApiDown`] for its API. That drives the single-node
//! phases (bootstrapping → disk written, reboot → node API → ingress) and
//! `wait-for install-complete` without a load balancer.
//!
//! It is checks only: no frontend, no listener, no traffic but the probes.
//! The probes and the rise/fall state machine are the LB's own
//! ([`crate::runtime::probe`], [`crate::runtime::health`]), with the LB's
//! settings (`loadBalancer.healthCheck`, `backendPorts`, `backendOverrides`,
//! the api CA bundle), so the phases mean the same with the LB on or off.
//!
//! Invariants:
//! - It probes only while the served plan is single-node and the LB does
//!   not run ([`targets`] is empty otherwise); the plan is re-read at every
//!   tick, so a reload that turns the LB on hands the checks over to it.
//! - A target's health survives ticks while its (pool, node, address) stays
//!   in the plan, and is dropped when it leaves.
//! - Every probe is bounded by `healthCheck.timeout`; a local failure (out
//!   of descriptors) counts for nothing, as in the LB.
//! - A health flip is recorded once, when it happens, as the LB records
//!   its own ([`health_event`]).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::{Event, Events, Pool};
use crate::model::catalogue::{PoolKind, ServiceKind};
use crate::plan::{Check, Plan};
use crate::runtime::health::Health;
use crate::runtime::probe::Prober;

/// How often the prober looks at the plan while it has nothing to probe.
const IDLE: Duration = Duration::from_secs(1);

/// One backend to probe.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Target {
    pub pool: PoolKind,
    pub node: String,
    pub addr: SocketAddr,
    pub check: Check,
}

/// The timeline pool of an LB pool.
pub fn pool_of(kind: PoolKind) -> Pool {
    match kind {
        PoolKind::Api => Pool::Api,
        PoolKind::MachineConfig => Pool::MachineConfig,
        PoolKind::IngressHttp | PoolKind::IngressHttps => Pool::Ingress,
    }
}

/// What to probe for `plan`: every backend of every pool when the plan is
/// single-node and the load balancer is off, nothing otherwise.
pub fn targets(plan: &Plan) -> Vec<Target> {
    let c = &plan.cluster;
    if !c.mode.is_single_node() || c.runs(ServiceKind::Lb) {
        return Vec::new();
    }
    plan.pools
        .iter()
        .flat_map(|p| {
            p.backends.iter().map(|b| Target {
                pool: p.name,
                node: b.name.clone(),
                addr: b.addr,
                check: p.check.clone(),
            })
        })
        .collect()
}

/// The event a target's health gives.
pub fn event_of(t: &Target, healthy: bool) -> Option<Event> {
    health_event(t.pool, &t.node, healthy)
}

/// What `node`'s backend in `pool` turning `healthy` (or not) tells the
/// timeline: healthy in its pool, or its API down; the LB's checks and
/// this prober record it at each flip.
pub fn health_event(pool: PoolKind, node: &str, healthy: bool) -> Option<Event> {
    let node = node.to_string();
    let pool = pool_of(pool);
    if healthy {
        Some(Event::Healthy { node, pool })
    } else {
        (pool == Pool::Api).then_some(Event::ApiDown { node })
    }
}

/// The probers of `plan`: the api and machine-config pools verify against
/// their CA bundles when configured (as in the LB).
fn probers(plan: &Plan) -> anyhow::Result<HashMap<PoolKind, Prober>> {
    let c = &plan.cluster;
    let mut out = HashMap::new();
    for kind in PoolKind::ALL {
        let ca = match kind {
            PoolKind::Api => c.lb.api_ca_file.as_deref(),
            PoolKind::MachineConfig => c.lb.machine_config_ca_file.as_deref(),
            _ => None,
        };
        out.insert(kind, Prober::new(ca, &c.domain)?);
    }
    Ok(out)
}

/// Probe the single-node master's backends every `healthCheck.interval`
/// while [`targets`] is not empty, until `stop`.
pub async fn run(
    plan: impl Fn() -> Arc<Plan> + Send + Sync + 'static,
    events: Events,
    stop: CancellationToken,
) -> anyhow::Result<()> {
    let mut health: HashMap<Target, Health> = HashMap::new();
    let mut built: Option<(Arc<Plan>, HashMap<PoolKind, Prober>)> = None;
    loop {
        let p = plan();
        let ts = targets(&p);
        health.retain(|t, _| ts.contains(t));
        let h = p.cluster.lb.health;
        let wait = if ts.is_empty() { IDLE } else { h.interval };
        if !ts.is_empty() {
            if built.as_ref().is_none_or(|(b, _)| !Arc::ptr_eq(b, &p)) {
                match probers(&p) {
                    Ok(pr) => built = Some((p.clone(), pr)),
                    Err(e) => warn!("single-node prober: {e:#}"),
                }
            }
            if let Some((_, pr)) = &built {
                tick(&ts, pr, h.timeout, h.rise, h.fall, &mut health, &events).await;
            }
        }
        tokio::select! {
            _ = stop.cancelled() => return Ok(()),
            _ = tokio::time::sleep(wait) => {}
        }
    }
}

/// One round: probe every target at once, update its health, record.
async fn tick(
    ts: &[Target],
    probers: &HashMap<PoolKind, Prober>,
    timeout: Duration,
    rise: u32,
    fall: u32,
    health: &mut HashMap<Target, Health>,
    events: &Events,
) {
    let probes = ts.iter().map(|t| async move {
        let pr = probers.get(&t.pool)?;
        match tokio::time::timeout(timeout, pr.probe(&t.check, t.addr)).await {
            Ok(Ok(())) => Some(true),
            Ok(Err(e)) if e.is_local() => None,
            Ok(Err(_)) | Err(_) => Some(false),
        }
    });
    let results = futures_util::future::join_all(probes).await;
    for (t, ok) in ts.iter().zip(results) {
        let st = health
            .entry(t.clone())
            .or_insert_with(|| Health::new(rise, fall));
        if let Some(ok) = ok
            && let Some(up) = st.observe(ok)
        {
            info!(
                node = %t.node, pool = ?t.pool, backend = %t.addr,
                "single-node prober: backend {}", if up { "up" } else { "down" }
            );
            if let Some(ev) = event_of(t, up) {
                events.record(ev);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(extra: &str) -> Plan {
        use crate::config::fixture::{MASTER_0, plan};
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("bootstrap-in-place-for-live-iso.ign"), "{}").unwrap();
        plan(
            &[MASTER_0],
            &format!(
                "http:\n  ignitionDir: \"{}\"\n{extra}",
                dir.path().display()
            ),
        )
    }

    #[test]
    fn probes_the_master_only_for_single_node_with_the_lb_off() {
        let ts = targets(&plan(""));
        let api: Vec<_> = ts.iter().filter(|t| t.pool == PoolKind::Api).collect();
        assert_eq!(api.len(), 1);
        assert_eq!(api[0].node, "master-0");
        assert_eq!(api[0].addr, "10.9.0.10:6443".parse().unwrap());
        assert_eq!(
            api[0].check,
            Check::Https {
                path: "/readyz".into()
            }
        );
        assert!(ts.iter().any(|t| t.pool == PoolKind::IngressHttps));
        assert!(targets(&plan("loadBalancer: { enabled: true }\n")).is_empty());
    }

    #[test]
    fn api_down_is_recorded_only_for_the_api_pool() {
        let t = |pool| Target {
            pool,
            node: "m".into(),
            addr: "10.0.0.1:1".parse().unwrap(),
            check: Check::Tcp,
        };
        assert_eq!(
            event_of(&t(PoolKind::Api), false),
            Some(Event::ApiDown { node: "m".into() })
        );
        assert_eq!(event_of(&t(PoolKind::IngressHttps), false), None);
        assert_eq!(
            event_of(&t(PoolKind::IngressHttp), true),
            Some(Event::Healthy {
                node: "m".into(),
                pool: Pool::Ingress
            })
        );
    }
}
