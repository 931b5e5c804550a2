//! What the services share at run time: the plan being served, the running
//! services (for `/status` and `/metrics`), the LB control handle, and the
//! reload outcome and trigger for the admin API.
//!
//! It also owns the install timeline ([`Events`]) the services report to.
//!
//! One `Hub` lives as long as `serve`: a reload swaps the plan inside it
//! (atomically, [`ArcSwap`]) and records its outcome; the services and the
//! handles stay.

use std::sync::{Arc, Mutex, RwLock};
use std::time::SystemTime;

use arc_swap::ArcSwap;
use tokio::sync::{mpsc, oneshot};

use crate::plan::Plan;
use crate::runtime::service::Service;
pub use crate::runtime::status::{ReloadResult, ReloadStatus};
use crate::runtime::sync::{LockExt as _, RwLockExt as _};
use crate::timeline::{Events, Recorder};

/// Runtime control of the load balancer, used by the admin API.
pub trait LbControl: Send + Sync {
    /// Disable (drain) or re-enable the backends of node `node` in every
    /// pool. Returns a human-readable summary.
    fn set_disabled(&self, node: &str, disabled: bool) -> Result<String, LbControlError>;
}

/// Network-boot control (the HTTP service), used by the admin API.
pub trait BootControl: Send + Sync {
    /// Make `node` install again at its next network boot.
    fn reinstall(&self, node: &str) -> Result<String, NodeControlError>;
}

/// Why a node control request was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NodeControlError {
    #[error("node {0:?} is not in the cluster file")]
    UnknownNode(String),
}

/// Why an LB control request was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LbControlError {
    #[error("node {0:?} is not a backend of any pool")]
    UnknownNode(String),
}

impl LbControlError {
    /// The HTTP status the admin API answers with.
    pub fn http_status(&self) -> u16 {
        match self {
            LbControlError::UnknownNode(_) => 404,
        }
    }
}

impl Default for ReloadStatus {
    fn default() -> Self {
        ReloadStatus {
            generation: 1,
            attempts: 0,
            result: None,
            ok: true,
            at: None,
            unix_time: None,
            trigger: None,
            duration_ms: None,
            error: None,
            changes: Vec::new(),
        }
    }
}

impl ReloadStatus {
    /// Record an attempt at `now`.
    pub fn record(
        &mut self,
        now: SystemTime,
        took: std::time::Duration,
        trigger: &str,
        result: ReloadResult,
        error: Option<String>,
        changes: Vec<String>,
    ) {
        self.attempts += 1;
        if result == ReloadResult::Applied {
            self.generation += 1;
            self.changes = changes;
        }
        self.result = Some(result);
        self.ok = result == ReloadResult::Applied;
        self.at = Some(httpdate::fmt_http_date(now));
        self.unix_time = now
            .duration_since(SystemTime::UNIX_EPOCH)
            .ok()
            .map(|d| d.as_secs());
        self.trigger = Some(trigger.to_string());
        self.duration_ms = Some(u64::try_from(took.as_millis()).unwrap_or(u64::MAX));
        self.error = error;
    }
}

/// A reload asked for through the admin API; the supervisor answers.
pub struct ReloadRequest {
    pub reply: oneshot::Sender<ReloadStatus>,
}

pub struct Hub {
    plan: ArcSwap<Plan>,
    services: RwLock<Vec<Arc<dyn Service>>>,
    lb: RwLock<Option<Arc<dyn LbControl>>>,
    boot: RwLock<Option<Arc<dyn BootControl>>>,
    reload: Mutex<ReloadStatus>,
    reload_tx: mpsc::Sender<ReloadRequest>,
    events: Events,
}

impl Hub {
    /// A hub for `plan`, and the receiver of admin reload requests.
    pub fn new(plan: Arc<Plan>) -> (Arc<Hub>, mpsc::Receiver<ReloadRequest>) {
        let (reload_tx, rx) = mpsc::channel(4);
        let events = Recorder::new(&plan);
        let hub = Arc::new(Hub {
            plan: ArcSwap::new(plan),
            services: RwLock::new(Vec::new()),
            lb: RwLock::new(None),
            boot: RwLock::new(None),
            reload: Mutex::new(ReloadStatus::default()),
            reload_tx,
            events,
        });
        (hub, rx)
    }

    /// The plan being served.
    pub fn plan(&self) -> Arc<Plan> {
        self.plan.load_full()
    }

    pub fn set_plan(&self, plan: Arc<Plan>) {
        self.events.set_plan(&plan);
        self.plan.store(plan);
    }

    /// The install timeline the services report to.
    pub fn events(&self) -> Events {
        self.events.clone()
    }

    pub fn set_services(&self, services: Vec<Arc<dyn Service>>) {
        *self.services.write_locked() = services;
    }

    pub fn services(&self) -> Vec<Arc<dyn Service>> {
        self.services.read_locked().clone()
    }

    pub fn service(&self, name: &str) -> Option<Arc<dyn Service>> {
        self.services().into_iter().find(|s| s.name() == name)
    }

    pub fn set_lb_control(&self, c: Arc<dyn LbControl>) {
        *self.lb.write_locked() = Some(c);
    }

    pub fn lb_control(&self) -> Option<Arc<dyn LbControl>> {
        self.lb.read_locked().clone()
    }

    pub fn set_boot_control(&self, c: Arc<dyn BootControl>) {
        *self.boot.write_locked() = Some(c);
    }

    pub fn boot_control(&self) -> Option<Arc<dyn BootControl>> {
        self.boot.read_locked().clone()
    }

    pub fn reload_status(&self) -> ReloadStatus {
        self.reload.locked().clone()
    }

    /// Record a reload attempt; returns the new status.
    pub fn record_reload(
        &self,
        started: std::time::Instant,
        trigger: &str,
        result: ReloadResult,
        error: Option<String>,
        changes: Vec<String>,
    ) -> ReloadStatus {
        let mut r = self.reload.locked();
        r.record(
            SystemTime::now(),
            started.elapsed(),
            trigger,
            result,
            error,
            changes,
        );
        r.clone()
    }

    /// Ask the supervisor to reload the cluster file; its outcome, or
    /// `None` when `serve` is shutting down.
    pub async fn request_reload(&self) -> Option<ReloadStatus> {
        let (reply, rx) = oneshot::channel();
        self.reload_tx.send(ReloadRequest { reply }).await.ok()?;
        rx.await.ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generation_counts_applied_reloads_only() {
        let mut r = ReloadStatus::default();
        let now = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000);
        let ms = std::time::Duration::from_millis(3);
        r.record(
            now,
            ms,
            "SIGHUP",
            ReloadResult::Invalid,
            Some("bad".into()),
            vec![],
        );
        assert_eq!((r.generation, r.attempts, r.ok), (1, 1, false));
        r.record(
            now,
            ms,
            "SIGHUP",
            ReloadResult::Applied,
            None,
            vec!["x".into()],
        );
        assert_eq!((r.generation, r.attempts, r.ok), (2, 2, true));
        assert_eq!((r.unix_time, r.duration_ms), (Some(1_000), Some(3)));
        r.record(
            now,
            ms,
            "admin API",
            ReloadResult::Failed,
            Some("port".into()),
            vec![],
        );
        assert_eq!((r.generation, r.attempts, r.ok), (2, 3, false));
        assert_eq!(
            r.changes,
            vec!["x".to_string()],
            "changes of the last applied reload"
        );
    }
}
