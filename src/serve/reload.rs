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
use crate::model::catalogue::ServiceKind;
use crate::plan::Plan;
use crate::runtime::service::Service;
use crate::serve::hub::{Hub, ReloadResult, ReloadStatus};

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
    if let Some(stall) = hub.ctx().faults.stall("reload stage") {
        tokio::time::sleep(stall).await;
    }
    if let Err(e) = apply(services, &new).await {
        let msg = format!("{e:#}");
        error!("reload not applied, keeping the running configuration: {msg}");
        return hub.record_reload(started, trigger, ReloadResult::Failed, Some(msg), vec![]);
    }
    hub.set_plan(new.clone());
    let changes = super::changes::changes(&old, &new);
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
