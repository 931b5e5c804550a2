//! `/status` → `lb` (also `GET /api/lb/backends`): the types of the load
//! balancer's section.

use serde::{Deserialize, Serialize};

use crate::model::catalogue::PoolKind;
use crate::model::cluster::{RemoveBootstrap, Role};

/// `lb` (also `GET /api/lb/backends`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LbStatus {
    pub health: HealthStatus,
    pub max_connections: usize,
    pub bootstrap_complete_marker: String,
    /// The marker existed at the LB's last look (every health interval).
    #[serde(default)]
    pub bootstrap_complete_marker_present: bool,
    /// The marker exists but is older than the newest ignition file (left
    /// from an earlier install): ignored.
    #[serde(default)]
    pub bootstrap_complete_marker_stale: bool,
    /// Why the LB holds the bootstrap complete; `None` while it does not.
    #[serde(default)]
    pub bootstrap_complete: Option<BootstrapCompleteBy>,
    /// `loadBalancer.removeBootstrap`.
    #[serde(default)]
    pub remove_bootstrap: RemoveBootstrap,
    pub pools: Vec<PoolStatus>,
}

/// What made the LB hold the bootstrap complete (`lb.bootstrapComplete`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BootstrapCompleteBy {
    /// Every master healthy in the api and machine-config pools, then the
    /// bootstrap's API backend turned unhealthy after having been healthy
    /// (bootkube tore the bootstrap control plane down).
    Evidence,
    /// `<ignitionDir>/bootstrap-complete`, not older than the ignition files.
    Marker,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HealthStatus {
    pub interval: String,
    pub timeout: String,
    pub rise: u32,
    pub fall: u32,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolStatus {
    pub name: PoolKind,
    pub frontend: String,
    /// The IPv6 frontend (dual-stack clusters only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frontend_v6: Option<String>,
    pub check: String,
    pub active_connections: u64,
    pub total_connections: u64,
    pub rejected_over_cap: u64,
    pub closed_no_backend: u64,
    /// Closed at accept because the client address may not use the
    /// frontend (machine-config: not a node); never forwarded.
    #[serde(default)]
    pub refused_clients: u64,
    pub backends: Vec<BackendStatus>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BackendStatus {
    pub node: String,
    pub role: Role,
    pub address: String,
    pub healthy: bool,
    pub disabled: bool,
    pub removed: bool,
    pub consecutive_successes: u32,
    pub consecutive_failures: u32,
    pub last_check_error: Option<String>,
    pub active_connections: u64,
    pub total_connections: u64,
    pub connect_failures: u64,
    /// Unix seconds of the last change of state (healthy, drained,
    /// removed), or of the backend's creation; absent from older `serve`s.
    #[serde(default)]
    pub last_change: Option<u64>,
}
