//! What the services share at run time: the plan being served, the running
//! services (for `/status` and `/metrics`, and the LB and network-boot
//! control the admin API uses), and the reload outcome and trigger.
//!
//! It also owns the install timeline ([`Events`]) the services report to.
//!
//! One `Hub` lives as long as `serve`, built once the services exist (no
//! field is set later): a reload swaps the plan inside it (atomically,
//! [`ArcSwap`]) and records its outcome; the services stay.

use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use arc_swap::ArcSwap;
use tokio::sync::{mpsc, oneshot};

use crate::plan::Plan;
use crate::runtime::context::Context;
use crate::runtime::ha::HaView;
use crate::runtime::haauth::Nonces;
use crate::runtime::metrics::Kind;
use crate::runtime::sync::LockExt as _;
use crate::serve::registry::Services;
use crate::serve::status::{NetworkStatus, NodeRow, StatusDoc};
pub use crate::serve::status::{ReloadResult, ReloadStatus};
use crate::timeline::Events;

pub use crate::runtime::control::{BootControl, LbControl, LbControlError, NodeControlError};

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
    /// The running services (admin aside: it serves this hub).
    pub services: Services,
    reload: Mutex<ReloadStatus>,
    reload_tx: mpsc::Sender<ReloadRequest>,
    events: Events,
    /// What the services were given (caps, HA view, bind options).
    ctx: Context,
    /// HA: request nonces of the peer's exchanges seen lately (a replay
    /// is refused, `serve::hasync`).
    pub(crate) ha_nonces: Mutex<Nonces>,
    /// Why `serve` is no longer serving (a service failed, shutdown
    /// started): `GET /api/health` then answers 503.
    stopping: Mutex<Option<String>>,
}

impl Hub {
    /// A hub for `plan` and its services (created with `ctx`), and the
    /// receiver of admin reload requests.
    pub fn new(
        plan: Arc<Plan>,
        services: Services,
        events: Events,
        ctx: Context,
    ) -> (Arc<Hub>, mpsc::Receiver<ReloadRequest>) {
        let (reload_tx, rx) = mpsc::channel(4);
        let hub = Arc::new(Hub {
            plan: ArcSwap::new(plan),
            services,
            reload: Mutex::new(ReloadStatus::default()),
            reload_tx,
            events,
            ctx,
            ha_nonces: Mutex::new(Nonces::default()),
            stopping: Mutex::new(None),
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

    /// `serve` stops serving (a service failed or shutdown began): from
    /// now on [`Hub::health`] fails with `why`.
    pub fn set_stopping(&self, why: &str) {
        self.stopping
            .locked()
            .get_or_insert_with(|| why.to_string());
    }

    /// `GET /api/health`: the services serving, or why not. A task that
    /// dies stops `serve` ([`crate::runtime::service::Tasks`]), so up and
    /// not stopping, with every service the plan runs present, is serving.
    pub fn health(&self) -> Result<Vec<&'static str>, Unhealthy> {
        if let Some(why) = self.stopping.locked().clone() {
            return Err(Unhealthy::Stopping(why));
        }
        let running: Vec<&'static str> = self.services.all().iter().map(|s| s.name()).collect();
        let plan = self.plan();
        for kind in plan.cluster.services() {
            let name = kind.as_str();
            if name != "admin" && !running.contains(&name) {
                return Err(Unhealthy::NotRunning(name));
            }
        }
        Ok(running)
    }

    /// The run-time context the services were created with.
    pub fn ctx(&self) -> &Context {
        &self.ctx
    }

    /// This member's HA view (a single appliance's without `ha:`).
    pub fn ha(&self) -> &HaView {
        &self.ctx.ha
    }

    /// The install timeline the services report to.
    pub fn events(&self) -> Events {
        self.events.clone()
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

    /// The `/status` document: the plan's summary, every service's section
    /// (admin adds its own) and the install timeline as it stands (the
    /// services record its events when things happen; reading changes
    /// nothing).
    pub fn status_doc(&self) -> StatusDoc {
        let hub = self;
        let plan = hub.plan();
        let c = &plan.cluster;
        let network = NetworkStatus {
            cidr: c.network.cidr.to_string(),
            gateway: c.network.gateway,
            appliance_ip: c.network.appliance_ip,
            api_vip: c.network.api_vip,
            ingress_vip: c.network.ingress_vip,
        };
        let nodes = c
            .nodes
            .iter()
            .map(|n| NodeRow {
                name: n.name.clone(),
                role: n.role,
                mac: n.mac.to_string(),
                ip: n.ip,
                fqdn: c.fqdn(&n.name),
            })
            .collect();
        let mut doc = StatusDoc::new(c.domain.clone(), network, nodes, hub.reload_status());
        hub.services.status_into(&mut doc);
        doc.ha = hub.ha().status();
        doc.timeline = Some(hub.events().view());
        doc
    }

    /// The `/metrics` text.
    pub fn metrics(&self) -> String {
        let hub = self;
        let mut out = String::new();
        crate::runtime::metrics::family(
            &mut out,
            "crc_appliance_info",
            Kind::Gauge,
            "Build and cluster of this appliance.",
        )
        .sample(
            &[
                ("version", &env!("CARGO_PKG_VERSION")),
                ("cluster", &hub.plan().cluster.domain),
            ],
            1,
        );
        let r = hub.reload_status();
        crate::runtime::metrics::family(
            &mut out,
            "crc_appliance_config_generation",
            Kind::Gauge,
            "Configuration generation served (1 at start, +1 per applied reload).",
        )
        .sample(&[], r.generation);
        crate::runtime::metrics::family(
            &mut out,
            "crc_appliance_reload_attempts_total",
            Kind::Counter,
            "Reloads attempted (SIGHUP or admin API).",
        )
        .sample(&[], r.attempts);
        crate::runtime::metrics::family(
            &mut out,
            "crc_appliance_reload_last_ok",
            Kind::Gauge,
            "1 when the last reload attempt was applied (or none was made).",
        )
        .sample(&[], u8::from(r.ok));
        for s in hub.services.all() {
            s.metrics(&mut out);
        }
        hub.events().metrics(&mut out);
        out
    }
}

/// Why `serve` is not serving: `GET /api/health` answers 503 with this
/// text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unhealthy {
    /// `serve` stops: why (a service failed, or shutdown began).
    #[error("{0}")]
    Stopping(String),
    /// A service the plan runs is not running.
    #[error("{0} is enabled but not running")]
    NotRunning(&'static str),
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The texts of the 503 answer of `GET /api/health`.
    #[test]
    fn unhealthy_says_why() {
        let stopping = Unhealthy::Stopping("service dns failed: bind".into());
        assert_eq!(stopping.to_string(), "service dns failed: bind");
        assert_eq!(
            Unhealthy::NotRunning("tftp").to_string(),
            "tftp is enabled but not running"
        );
    }

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
