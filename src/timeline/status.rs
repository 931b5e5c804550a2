//! `/status` → `timeline`: the types of the install timeline's section.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::model::cluster::Role;

/// Cluster install phase, in order (`timeline.phase`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ClusterPhase {
    #[default]
    Provisioning,
    Bootstrapping,
    BootstrapComplete,
    BootstrapRemoved,
    IngressReady,
}

impl ClusterPhase {
    pub const ALL: [ClusterPhase; 5] = [
        ClusterPhase::Provisioning,
        ClusterPhase::Bootstrapping,
        ClusterPhase::BootstrapComplete,
        ClusterPhase::BootstrapRemoved,
        ClusterPhase::IngressReady,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ClusterPhase::Provisioning => "provisioning",
            ClusterPhase::Bootstrapping => "bootstrapping",
            ClusterPhase::BootstrapComplete => "bootstrap-complete",
            ClusterPhase::BootstrapRemoved => "bootstrap-removed",
            ClusterPhase::IngressReady => "ingress-ready",
        }
    }
}

/// `timeline`: what the services observed of the install, per node. Times
/// are Unix seconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TimelineStatus {
    pub phase: ClusterPhase,
    /// When each phase was first reached (`bootstrapping`, ...).
    pub phase_times: BTreeMap<String, u64>,
    pub nodes: Vec<NodeTimeline>,
    /// Ignition fetches from addresses that are not the node's own (newest
    /// first, at most 50): not install progress.
    pub operator_fetches: Vec<OperatorFetch>,
    /// What the operator may have to do, with the exact commands.
    #[serde(default)]
    pub hints: Vec<TimelineHint>,
}

/// Advice derived from the timeline (`timeline.hints[]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TimelineHint {
    pub kind: HintKind,
    /// The nodes it is about (empty for a cluster-wide hint).
    pub nodes: Vec<String>,
    /// One sentence: what was seen and the likely reason.
    pub message: String,
    /// Commands to run, exactly as printed.
    pub commands: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HintKind {
    /// Workers that booted their installed system (machine-config contact)
    /// but whose ingress never became healthy: usually pending CSRs.
    PendingCsr,
    /// `<ignitionDir>/bootstrap-complete` is older than the ignition files
    /// and is ignored.
    StaleBootstrapMarker,
    /// Single-node: the bootstrap-in-place Ignition is over 20 h old and
    /// the install is not complete (its certificates expire after 24 h).
    StaleBootstrapInPlace,
    /// The CSR approver left two pending client CSRs for one node alone:
    /// one of them is not the node's.
    CsrAlert,
}

/// One node's install steps (Unix seconds; `None` = not seen yet).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeTimeline {
    pub node: String,
    pub role: Option<Role>,
    /// The install VM was seen running (libvirt).
    pub vm_started: Option<u64>,
    /// Install attempts started (a rejected install runs again).
    pub install_attempts: u32,
    /// Bare metal: `serve` (`bmc.startOnServe`) had the node's BMC insert
    /// its boot ISO and power it on (Redfish).
    pub bmc_power_on: Option<u64>,
    /// Bare metal: the node's boot ISO (`/boot/<node>.iso`) was first
    /// fetched (by its BMC, after `bmc up` or startOnServe).
    pub boot_iso: Option<u64>,
    /// Bare metal: the node's iPXE install script was first served to its
    /// own address.
    #[serde(default)]
    pub netboot_script: Option<u64>,
    /// First DHCP lease, last renewal, renewals.
    pub lease: Option<u64>,
    pub lease_renewed: Option<u64>,
    pub lease_renewals: u32,
    /// The live rootfs fetched from the node's address.
    pub rootfs: Option<u64>,
    pub rootfs_bytes: Option<u64>,
    pub rootfs_ms: Option<u64>,
    /// The node fetched its ignition from its own address (current attempt).
    pub ignition: Option<u64>,
    /// The install VM shut down after fetching its ignition (libvirt).
    pub install_finished: Option<u64>,
    /// First connection to the machine-config frontend from the node's
    /// address after the install: the installed system's first boot.
    pub first_boot: Option<u64>,
    /// First time the node's backend was healthy, per pool.
    pub api_healthy: Option<u64>,
    pub mcs_healthy: Option<u64>,
    pub ingress_healthy: Option<u64>,
    /// Why an install was not accepted as finished, and other problems.
    pub errors: Vec<String>,
    /// The CSR approver (`csr:`) approved the node's client CSR, its
    /// serving CSR; its Node was first seen Ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub csr_client: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub csr_serving: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_ready: Option<u64>,
    /// The mirror registry (`registry:`): the node's first request, and
    /// the end of its first pull (blobs pulled, then no request for a
    /// minute: `timeline::PULL_QUIET_SECS`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pulling: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pulled: Option<u64>,
}

/// An ignition fetch by someone other than the node.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OperatorFetch {
    pub unix_time: u64,
    pub client: String,
    pub file: String,
}
