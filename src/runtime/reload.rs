//! Applying a new cluster file to the running services (SIGHUP, or
//! `crc-appliance reload` through the admin API).
//!
//! Steps: load and validate the file (invalid → nothing changes); check that
//! the set of services is the same (enabling or disabling one takes a
//! restart); stage every service — new listen addresses are bound here, so
//! a port in use fails before anything changed; then commit every service
//! and swap the hub's plan. The outcome is logged with what changed and
//! recorded in the hub (`/status` → `reload`, metrics, the admin answer).
//! A reload never stops the process.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tracing::{error, info};

use crate::config::{self, Cluster};
use crate::model::catalogue::{Listener, ServiceKind};
use crate::plan::Plan;
use crate::runtime::hub::{Hub, ReloadResult, ReloadStatus};
use crate::runtime::service::Service;

/// How long staging may take (binding, opening libvirt) before the reload
/// is abandoned.
pub const STAGE_TIMEOUT: Duration = Duration::from_secs(60);

/// Stage every service for `plan`, then commit them all; on the first
/// staging error nothing is committed (what was staged is dropped).
pub async fn apply(services: &[Arc<dyn Service>], plan: &Arc<Plan>) -> anyhow::Result<()> {
    let mut commits = Vec::with_capacity(services.len());
    for s in services {
        let staged = tokio::time::timeout(STAGE_TIMEOUT, s.clone().stage(plan.clone()))
            .await
            .map_err(|_| anyhow::anyhow!("{}: not ready within {STAGE_TIMEOUT:?}", s.name()))?
            .map_err(|e| e.context(s.name()))?;
        commits.push(staged);
    }
    for commit in commits {
        commit();
    }
    Ok(())
}

/// Reload `path` into the running services; never fails, the outcome is
/// returned and recorded in `hub`.
pub async fn reload(
    path: &Path,
    hub: &Hub,
    services: &[Arc<dyn Service>],
    trigger: &str,
) -> ReloadStatus {
    let started = std::time::Instant::now();
    info!("{trigger}: reloading {}", path.display());
    let new = match config::load(path) {
        Ok(p) => Arc::new(p),
        Err(e) => {
            error!("reload rejected, keeping the running configuration: {e}");
            return hub.record_reload(
                started,
                trigger,
                ReloadResult::Invalid,
                Some(e.to_string()),
                vec![],
            );
        }
    };
    let old = hub.plan();
    let (was, now) = (old.cluster.services(), new.cluster.services());
    if was != now {
        let names = |v: &[ServiceKind]| v.iter().map(|k| k.as_str()).collect::<Vec<_>>().join(" ");
        let msg = format!(
            "the services change ({} → {}): enabling or disabling a service takes a restart",
            names(&was),
            names(&now)
        );
        error!("reload not applied, keeping the running configuration: {msg}");
        return hub.record_reload(started, trigger, ReloadResult::Failed, Some(msg), vec![]);
    }
    if let Some(stall) = crate::runtime::service::injected_stall("reload stage") {
        tokio::time::sleep(stall).await;
    }
    if let Err(e) = apply(services, &new).await {
        let msg = format!("{e:#}");
        error!("reload not applied, keeping the running configuration: {msg}");
        return hub.record_reload(started, trigger, ReloadResult::Failed, Some(msg), vec![]);
    }
    hub.set_plan(new.clone());
    let changes = changes(&old, &new);
    let st = hub.record_reload(
        started,
        trigger,
        ReloadResult::Applied,
        None,
        changes.clone(),
    );
    info!(
        generation = st.generation,
        cluster = %new.cluster.domain,
        "configuration reloaded: {}",
        if changes.is_empty() {
            "no changes".to_string()
        } else {
            changes.join("; ")
        }
    );
    st
}

/// What differs between two plans, one line per change (nodes, records,
/// LB backends, listeners, settings).
pub fn changes(old: &Plan, new: &Plan) -> Vec<String> {
    let mut out = Vec::new();
    let (o, n) = (&old.cluster, &new.cluster);
    if o.domain != n.domain {
        out.push(format!("cluster domain {} → {}", o.domain, n.domain));
    }
    for node in &n.nodes {
        match o.node(&node.name) {
            None => out.push(format!(
                "node {} added ({} {} {})",
                node.name, node.role, node.ip, node.mac
            )),
            Some(prev) if prev != node => out.push(format!(
                "node {} changed ({} {} {} → {} {} {})",
                node.name, prev.role, prev.ip, prev.mac, node.role, node.ip, node.mac
            )),
            Some(_) => {}
        }
    }
    for node in &o.nodes {
        if n.node(&node.name).is_none() {
            out.push(format!("node {} removed", node.name));
        }
    }
    let records = |p: &Plan| p.zones.iter().map(|z| z.records.len()).sum::<usize>();
    if old.zones != new.zones {
        out.push(format!(
            "DNS zones changed ({} → {} records)",
            records(old),
            records(new)
        ));
    }
    for np in &new.pools {
        let op = old.pool(np.name);
        let before: Vec<String> = op
            .map(|p| {
                p.backends
                    .iter()
                    .map(|b| format!("{} {}", b.name, b.addr))
                    .collect()
            })
            .unwrap_or_default();
        let after: Vec<String> = np
            .backends
            .iter()
            .map(|b| format!("{} {}", b.name, b.addr))
            .collect();
        let added: Vec<&String> = after.iter().filter(|b| !before.contains(b)).collect();
        let removed: Vec<&String> = before.iter().filter(|b| !after.contains(b)).collect();
        if !added.is_empty() || !removed.is_empty() {
            let list = |v: &[&String]| v.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ");
            out.push(format!(
                "lb {}: +[{}] -[{}]",
                np.name,
                list(&added),
                list(&removed)
            ));
        }
        if let Some(op) = op
            && op.frontend != np.frontend
        {
            out.push(format!(
                "lb {} frontend {} → {}",
                np.name, op.frontend, np.frontend
            ));
        }
    }
    if o.lb.health != n.lb.health {
        out.push(format!(
            "lb health checks: interval {:?} timeout {:?} rise {} fall {}",
            n.lb.health.interval, n.lb.health.timeout, n.lb.health.rise, n.lb.health.fall
        ));
    }
    out.extend(listener_changes(o, n));
    if o.network.interface != n.network.interface {
        out.push(format!(
            "dhcp interface {:?} → {:?}",
            o.network.interface, n.network.interface
        ));
    }
    if o.http != n.http && o.http.listen == n.http.listen {
        out.push("http directories changed".into());
    }
    out
}

/// `<field> <old> → <new>` for every listener (the catalogue's list) whose
/// address changed, appeared or went away.
fn listener_changes(o: &Cluster, n: &Cluster) -> Vec<String> {
    let (before, after) = (o.listeners(), n.listeners());
    let addr_of = |list: &[Listener], l: &Listener| {
        list.iter()
            .find(|x| x.field == l.field && x.proto == l.proto)
            .map(|x| x.addr)
    };
    let mut out = Vec::new();
    for l in &after {
        match addr_of(&before, l) {
            Some(a) if a == l.addr => {}
            Some(a) => out.push(format!("{} listen {} {a} → {}", l.what, l.field, l.addr)),
            None => out.push(format!("{} listen {} {}", l.what, l.field, l.addr)),
        }
    }
    for l in &before {
        if addr_of(&after, l).is_none() {
            out.push(format!("{} listen {} {} removed", l.what, l.field, l.addr));
        }
    }
    out.dedup();
    out
}
