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

use crate::config;
use crate::plan::Plan;
use crate::runtime::hub::{Hub, ReloadResult, ReloadStatus};
use crate::runtime::service::Service;

/// How long staging may take (binding, opening libvirt) before the reload
/// is abandoned.
pub const STAGE_TIMEOUT: Duration = Duration::from_secs(60);

/// The services a plan runs, in start order.
pub fn service_names(plan: &Plan) -> Vec<&'static str> {
    let c = &plan.cluster;
    let mut v = Vec::new();
    if cfg!(feature = "libvirt") && c.libvirt.as_ref().is_some_and(|l| l.start_on_serve) {
        v.push("libvirt");
    }
    for (on, name) in [
        (c.dns.enabled, "dns"),
        (c.dhcp.enabled, "dhcp"),
        (c.lb.enabled, "lb"),
        (c.http.enabled, "http"),
        (c.admin.enabled, "admin"),
        (c.tftp.as_ref().is_some_and(|t| t.enabled), "tftp"),
    ] {
        if on {
            v.push(name);
        }
    }
    v
}

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
    let (was, now) = (service_names(&old), service_names(&new));
    if was != now {
        let msg = format!(
            "the services change ({} → {}): enabling or disabling a service takes a restart",
            was.join(" "),
            now.join(" ")
        );
        error!("reload not applied, keeping the running configuration: {msg}");
        return hub.record_reload(started, trigger, ReloadResult::Failed, Some(msg), vec![]);
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
    for (what, a, b) in [
        (
            "dns listen",
            format!("{:?}", o.dns.listen),
            format!("{:?}", n.dns.listen),
        ),
        (
            "dhcp listen",
            format!("{} {:?}", o.dhcp.listen, o.network.interface),
            format!("{} {:?}", n.dhcp.listen, n.network.interface),
        ),
        (
            "http listen",
            o.http.listen.to_string(),
            n.http.listen.to_string(),
        ),
        (
            "admin listen",
            o.admin.listen.to_string(),
            n.admin.listen.to_string(),
        ),
    ] {
        if a != b {
            out.push(format!("{what} {a} → {b}"));
        }
    }
    if o.http != n.http && o.http.listen == n.http.listen {
        out.push("http directories changed".into());
    }
    out
}
