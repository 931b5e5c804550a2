//! The approver's `/status` section (`csr`) and its metrics: the server,
//! whether it is reachable with the rights it needs, what was approved
//! and why, what is left pending and why, the alerts, and what day-2
//! workers are served (`workerIgnition`).

use serde::{Deserialize, Serialize};

use crate::runtime::metrics::{Kind, family};

/// How many approvals are kept (newest last).
pub const APPROVALS_KEPT: usize = 100;

/// One CSR the approver decided on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CsrRow {
    pub name: String,
    /// The inventory node (approvals).
    #[serde(default)]
    pub node: Option<String>,
    /// The CSR's `spec.signerName` (never its request).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signer: Option<String>,
    /// `client`, `recovery`, `serving` (approvals) or the refusal's reason.
    pub what: String,
    pub at: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CsrStatus {
    /// `host:port` of the API server (from the kubeconfig).
    pub server: String,
    /// The last pass listed CSRs and Nodes.
    pub connected: bool,
    /// Why not: the connection, or the right the identity lacks.
    #[serde(default)]
    pub error: Option<String>,
    pub approved: Vec<CsrRow>,
    /// Pending CSRs left alone, with the reason (the current list).
    pub refused: Vec<CsrRow>,
    /// Two pending client CSRs for one node, and other alerts.
    pub alerts: Vec<String>,
    /// What day-2 workers are served (the secret or `worker.ign`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker_ignition: Option<WorkerIgnitionStatus>,
}

/// `csr.workerIgnition` in `/status`: what day-2 workers are served.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkerIgnitionStatus {
    /// `secret` (worker-user-data-managed) or `worker.ign` (the fallback).
    pub source: String,
    /// The last read (Unix seconds).
    #[serde(default)]
    pub read_at: Option<u64>,
    /// Why the secret is not used.
    #[serde(default)]
    pub error: Option<String>,
    /// The fallback is `worker.ign` older than 24 h: the node will not be
    /// accepted.
    #[serde(default)]
    pub warning: Option<String>,
}

impl CsrStatus {
    pub fn metrics(&self, out: &mut String) {
        family(
            out,
            "crc_csr_approved",
            Kind::Gauge,
            "CSRs approved (the last 100 kept in /status)",
        )
        .sample(&[], self.approved.len());
        family(
            out,
            "crc_csr_refused",
            Kind::Gauge,
            "Pending CSRs the approver leaves alone",
        )
        .sample(&[], self.refused.len());
        family(
            out,
            "crc_csr_connected",
            Kind::Gauge,
            "1 when the last pass read CSRs and Nodes",
        )
        .sample(&[], u8::from(self.connected));
        if let Some(w) = &self.worker_ignition {
            family(
                out,
                "crc_csr_worker_ignition_from_secret",
                Kind::Gauge,
                "1 when day-2 workers are served secret worker-user-data-managed, 0 when worker.ign",
            )
            .sample(&[], u8::from(w.source == "secret"));
        }
    }
}
