//! What services share at run time: the plan they serve, their status and
//! metrics for the admin listener, and the LB control handle.
//!
//! One `Hub` exists per configuration generation (a SIGHUP reload builds a new
//! one). Services register a [`StatusSource`] when they start; the admin
//! listener renders `/status` and `/metrics` from all registered sources.

use std::sync::{Arc, RwLock};

use crate::plan::Plan;

/// A service's view for `/status` (JSON) and `/metrics` (Prometheus text).
pub trait StatusSource: Send + Sync {
    /// Key in the `/status` object: `dns`, `dhcp`, `lb`, `http`, `libvirt`.
    fn name(&self) -> &'static str;
    fn status(&self) -> serde_json::Value;
    /// Append Prometheus text exposition lines (with `# HELP`/`# TYPE`).
    fn metrics(&self, out: &mut String);
}

/// Runtime control of the load balancer, used by the admin API.
pub trait LbControl: Send + Sync {
    /// Disable (drain) or re-enable the backends of node `node` in every
    /// pool. Returns a human-readable summary, or an error if unknown.
    fn set_disabled(&self, node: &str, disabled: bool) -> Result<String, String>;
}

pub struct Hub {
    pub plan: Arc<Plan>,
    sources: RwLock<Vec<Arc<dyn StatusSource>>>,
    lb: RwLock<Option<Arc<dyn LbControl>>>,
}

impl Hub {
    pub fn new(plan: Arc<Plan>) -> Arc<Hub> {
        Arc::new(Hub {
            plan,
            sources: RwLock::new(Vec::new()),
            lb: RwLock::new(None),
        })
    }

    pub fn register(&self, source: Arc<dyn StatusSource>) {
        let mut s = self.sources.write().unwrap_or_else(|e| e.into_inner());
        s.retain(|x| x.name() != source.name());
        s.push(source);
    }

    pub fn sources(&self) -> Vec<Arc<dyn StatusSource>> {
        self.sources
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn set_lb_control(&self, c: Arc<dyn LbControl>) {
        *self.lb.write().unwrap_or_else(|e| e.into_inner()) = Some(c);
    }

    pub fn lb_control(&self) -> Option<Arc<dyn LbControl>> {
        self.lb.read().unwrap_or_else(|e| e.into_inner()).clone()
    }
}
