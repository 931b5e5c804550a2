//! The install timeline: one record per node of what the services observed
//! (VM, DHCP lease, rootfs, ignition, install end, first boot, backend
//! health) and the cluster phase that follows from it.
//!
//! Pure core: [`Timeline::apply`] takes an [`Event`] and the time it is
//! applied at (the caller's clock, so tests inject it); [`Timeline::view`]
//! renders the `/status` section for the plan's nodes, and
//! [`Timeline::view_at`] adds the hints that hold at a given time (a worker
//! stuck on its CSRs, an ignored marker, an old bootstrap-in-place file).
//! The socket side ([`recorder`]) takes the events the services record
//! when things happen;
//! [`prober`] checks a single-node master itself when the LB is off.
//!
//! Invariants:
//! - Every event is idempotent: applying the same observation again (a
//!   service recording a state it already told, the HA peer resending its
//!   log) changes nothing. First times are kept (`min`), renewals count
//!   only a later lease expiry.
//! - Ignition counts as install progress only when fetched from the node's
//!   own address, within the current install attempt (after the last
//!   rejected install) and not after the install end (a fetch carries its
//!   own time, so one from before the end recorded after it still counts).
//!   Other fetches are operator fetches.
//! - An install is finished only through [`Event::InstallFinished`], sent
//!   on evidence: by the libvirt driver (guest shutdown after the ignition
//!   fetch) and by the HTTP service for network boot (the node's complete
//!   image download after its ignition fetch, or its installed system's
//!   machine-config contact); a rejection starts a new attempt and clears
//!   the attempt's steps. Single-node (bootstrap-in-place, [`Event::SingleNode`])
//!   has its own phases: the node's API up on the live system
//!   (bootstrapping), down (disk written, reboot: its install end), up
//!   again (bootstrap-complete: the node's own API), then its ingress
//!   (ingress-ready, `wait-for install-complete`).

mod apply;
pub mod prober;
pub mod recorder;
pub mod render;
pub mod shared;
pub mod status;

use std::collections::{BTreeMap, BTreeSet};

use crate::model::cluster::Role;
use crate::timeline::status::{
    ClusterPhase, HintKind, NodeTimeline, OperatorFetch, TimelineHint, TimelineStatus,
};

pub use recorder::{Events, Recorder};

/// How many operator fetches are kept.
pub const OPERATOR_FETCHES: usize = 50;

/// An LB pool, for health events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Pool {
    Api,
    MachineConfig,
    Ingress,
}

/// One observation. Serialized (tagged by `kind`) in the log an HA pair
/// exchanges ([`shared`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Event {
    /// The node's install VM is running (libvirt).
    InstallRunning { node: String },
    /// The node's BMC inserted its boot ISO and powered it on (startOnServe).
    BmcPowerOn { node: String },
    /// The node's boot ISO was served (a whole fetch or a range).
    BootIso { node: String },
    /// The node's iPXE install script was served to its own address.
    NetbootScript { node: String },
    /// The install VM shut down on evidence: installed.
    InstallFinished { node: String },
    /// The install VM stopped without evidence; it installs again.
    InstallRejected { node: String, reason: String },
    /// A bound DHCP lease of the node, expiring at `expires`.
    Lease { node: String, expires: u64 },
    /// The node downloaded the live rootfs (bytes sent, duration).
    Rootfs { node: String, bytes: u64, ms: u64 },
    /// A successful ignition fetch at `at` of `file`; `node` is the node
    /// whose address `client` is, if any.
    Ignition {
        node: Option<String>,
        client: String,
        file: String,
        at: u64,
    },
    /// A connection to the machine-config frontend from the node's address.
    MachineConfigConnect { node: String },
    /// The node's backend is healthy in `pool`.
    Healthy { node: String, pool: Pool },
    /// The LB holds bootstrap complete: every master healthy and the
    /// bootstrap's API gone, or a marker file newer than the ignition files.
    BootstrapComplete,
    /// The LB ignores the marker at `path` (older than the ignition files);
    /// `None`: no stale marker (any more).
    StaleMarker { path: Option<String> },
    /// The bootstrap left the LB pools (or its VM was removed).
    BootstrapRemoved,
    /// The install mode: `Some(master)` for single-node (bootstrap-in-place).
    SingleNode { node: Option<String> },
    /// When (Unix seconds) the bootstrap-in-place Ignition was written
    /// (single-node; the HTTP service watches the file), `None` when not
    /// single-node or unreadable. Its age is taken when the view is made.
    BootstrapInPlaceWritten { at: Option<u64> },
    /// The node's API backend is not healthy (single-node: after its
    /// bootstrap API was up, the node writes its disk and reboots).
    ApiDown { node: String },
    /// The CSR approver (`services/csr`) approved the node's client
    /// (`serving: false`) or serving CSR.
    CsrApproved { node: String, serving: bool },
    /// The node's Node object is Ready (seen by the CSR approver).
    NodeReady { node: String },
    /// The CSR approver's alert about the node (two pending client CSRs
    /// for it, both left alone), or `None` once it no longer holds.
    CsrAlert {
        node: String,
        message: Option<String>,
    },
    /// The node's first request to the mirror registry, at `at`.
    RegistryPulling { node: String, at: u64 },
    /// The node pulled blobs from the mirror and then made no request for
    /// [`PULL_QUIET_SECS`]: `at` is its latest request before the quiet.
    RegistryPulled { node: String, at: u64 },
}

/// Seconds without a registry request after which a node that pulled blobs
/// counts as having pulled its images ([`Event::RegistryPulled`]).
pub const PULL_QUIET_SECS: u64 = 60;

impl Event {
    /// The node the event is about, if any.
    pub fn node(&self) -> Option<&str> {
        match self {
            Event::InstallRunning { node }
            | Event::BmcPowerOn { node }
            | Event::BootIso { node }
            | Event::NetbootScript { node }
            | Event::InstallFinished { node }
            | Event::InstallRejected { node, .. }
            | Event::Lease { node, .. }
            | Event::Rootfs { node, .. }
            | Event::MachineConfigConnect { node }
            | Event::Healthy { node, .. }
            | Event::ApiDown { node }
            | Event::CsrApproved { node, .. }
            | Event::CsrAlert { node, .. }
            | Event::NodeReady { node }
            | Event::RegistryPulling { node, .. }
            | Event::RegistryPulled { node, .. } => Some(node),
            Event::Ignition { node, .. } => node.as_deref(),
            Event::BootstrapComplete
            | Event::StaleMarker { .. }
            | Event::BootstrapRemoved
            | Event::SingleNode { .. }
            | Event::BootstrapInPlaceWritten { .. } => None,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
struct NodeRec {
    t: NodeTimeline,
    lease_expires: Option<u64>,
    /// Start of the current install attempt (after the last rejection).
    attempt_since: u64,
    install_running: bool,
    /// The latest machine-config connection from the node's address (the
    /// network-boot install state's evidence of an installed system).
    last_machine_config: Option<u64>,
}

/// The timeline of one cluster.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Timeline {
    nodes: BTreeMap<String, NodeRec>,
    bootstrap_complete: Option<u64>,
    bootstrap_removed: Option<u64>,
    operator: BTreeSet<OperatorFetch>,
    stale_marker: Option<String>,
    /// Single-node: the master and its bootstrap-in-place progress.
    single: Option<Single>,
    /// When the bootstrap-in-place Ignition was written (Unix seconds),
    /// when known.
    bip_written: Option<u64>,
    /// The CSR approver's current alerts, by node.
    csr_alerts: BTreeMap<String, String>,
}

/// Age after which the bootstrap-in-place Ignition's certificates are
/// close to expiring (they last 24 h).
pub const BIP_STALE_AFTER: u64 = 20 * 3600;

/// A single-node install: the node's API (6443/readyz) comes up on the
/// live system (its bootstrap control plane), goes down when it has written
/// its disk and reboots, and comes up again from the disk.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Single {
    node: String,
    /// The bootstrap API was first healthy.
    bootstrap_api: Option<u64>,
    /// The API went down after that: disk written, rebooting.
    rebooted: Option<u64>,
    /// The API healthy again after the reboot: the node's own control plane.
    node_api: Option<u64>,
}

fn first(slot: &mut Option<u64>, at: u64) {
    *slot = Some(slot.map_or(at, |t| t.min(at)));
}

impl Timeline {
    fn node(&mut self, name: &str) -> &mut NodeRec {
        self.nodes
            .entry(name.to_string())
            .or_insert_with(|| NodeRec {
                t: NodeTimeline {
                    node: name.to_string(),
                    ..NodeTimeline::default()
                },
                ..NodeRec::default()
            })
    }

    /// Apply `ev` at `now` like [`Timeline::apply`]; whether it changed
    /// the timeline (compared on what the event can touch: its node's
    /// record and the cluster-wide steps).
    pub fn apply_changed(&mut self, now: u64, ev: Event) -> bool {
        let node = ev.node().map(str::to_string);
        let look = |t: &Timeline| {
            (
                node.as_deref().and_then(|n| t.nodes.get(n)).cloned(),
                t.bootstrap_complete,
                t.bootstrap_removed,
                t.operator.len(),
                t.single.clone(),
            )
        };
        let before = look(self);
        self.apply(now, ev);
        look(self) != before
    }

    /// Whether `node` fetched its ignition from its own address in the
    /// current install attempt (the libvirt driver's evidence).
    pub fn fetched_ignition(&self, node: &str) -> bool {
        self.nodes.get(node).is_some_and(|n| n.t.ignition.is_some())
    }

    /// The latest machine-config connection from `node`'s address.
    pub fn last_machine_config(&self, node: &str) -> Option<u64> {
        self.nodes.get(node).and_then(|n| n.last_machine_config)
    }

    /// The `/status` section for `nodes` (name, role), in their order.
    pub fn view(&self, nodes: &[(String, Role)]) -> TimelineStatus {
        let rows: Vec<NodeTimeline> = nodes
            .iter()
            .map(|(name, role)| {
                let mut t = self
                    .nodes
                    .get(name)
                    .map(|n| n.t.clone())
                    .unwrap_or_else(|| NodeTimeline {
                        node: name.clone(),
                        ..NodeTimeline::default()
                    });
                t.role = Some(*role);
                t
            })
            .collect();
        if let Some(sn) = &self.single {
            return self.single_node_view(sn, rows);
        }
        let boot_api = rows
            .iter()
            .find(|r| r.role == Some(Role::Bootstrap))
            .and_then(|r| r.api_healthy);
        // A later phase implies the earlier ones (a bootstrap removed
        // before anyone saw it healthy was still bootstrapping).
        let complete = self.bootstrap_complete.or(self.bootstrap_removed);
        let bootstrapping = boot_api.or(complete);
        let ingress = ingress_ready(&rows).and_then(|t| Some(t.max(self.bootstrap_removed?)));
        self.status_at_phases(
            [
                (ClusterPhase::Bootstrapping, bootstrapping),
                (ClusterPhase::BootstrapComplete, complete),
                (ClusterPhase::BootstrapRemoved, self.bootstrap_removed),
                (ClusterPhase::IngressReady, ingress),
            ],
            rows,
        )
    }

    /// Single-node phases: bootstrapping from the bootstrap API on the
    /// live system, bootstrap-complete once the API is back after the
    /// reboot from disk (the node's own control plane), ingress-ready once
    /// the node's ingress is healthy after that (install complete). There
    /// is no bootstrap to remove.
    fn single_node_view(&self, sn: &Single, mut rows: Vec<NodeTimeline>) -> TimelineStatus {
        let ingress = rows
            .iter()
            .find(|r| r.node == sn.node)
            .and_then(|r| r.ingress_healthy)
            .and_then(|t| Some(t.max(sn.node_api?)));
        if let Some(r) = rows.iter_mut().find(|r| r.node == sn.node)
            && r.first_boot.is_none()
        {
            r.first_boot = sn.node_api;
        }
        self.status_at_phases(
            [
                (ClusterPhase::Bootstrapping, sn.bootstrap_api),
                (ClusterPhase::BootstrapComplete, sn.node_api),
                (ClusterPhase::IngressReady, ingress),
            ],
            rows,
        )
    }

    /// The document for `rows` with the phases reached so far (Unix
    /// seconds); the cluster's phase is the latest of them in
    /// [`ClusterPhase::ALL`] order.
    fn status_at_phases<const N: usize>(
        &self,
        reached: [(ClusterPhase, Option<u64>); N],
        rows: Vec<NodeTimeline>,
    ) -> TimelineStatus {
        let phase_times: BTreeMap<String, u64> = reached
            .into_iter()
            .filter_map(|(phase, at)| Some((phase.as_str().to_string(), at?)))
            .collect();
        let phase = ClusterPhase::ALL
            .into_iter()
            .rev()
            .find(|p| phase_times.contains_key(p.as_str()))
            .unwrap_or_default();
        TimelineStatus {
            phase,
            phase_times,
            nodes: rows,
            operator_fetches: self.operator.iter().rev().cloned().collect(),
            hints: Vec::new(),
        }
    }

    /// [`Timeline::view`] with the hints that hold at `now` (Unix seconds):
    /// workers stuck after their first boot for `csr_hint_after` seconds
    /// ([`pending_csr`]) and an ignored marker while bootstrap is not
    /// complete.
    pub fn view_at(
        &self,
        nodes: &[(String, Role)],
        now: u64,
        csr_hint_after: u64,
    ) -> TimelineStatus {
        let mut v = self.view(nodes);
        if let Some(h) = pending_csr(&v.nodes, now, csr_hint_after) {
            v.hints.push(h);
        }
        for (node, message) in &self.csr_alerts {
            v.hints.push(TimelineHint {
                kind: HintKind::CsrAlert,
                nodes: vec![node.clone()],
                message: message.clone(),
                commands: vec!["oc get csr".into()],
            });
        }
        if let Some(age) = self
            .bip_written
            .map(|at| now.saturating_sub(at))
            .filter(|a| *a > BIP_STALE_AFTER)
            && self.single.is_some()
            && v.phase < ClusterPhase::IngressReady
        {
            v.hints.push(TimelineHint {
                kind: HintKind::StaleBootstrapInPlace,
                nodes: Vec::new(),
                message: format!(
                    "bootstrap-in-place-for-live-iso.ign was written {} h ago; its certificates expire 24 h after `openshift-install create single-node-ignition-config`: create it again (and boot the node again) unless the install completes soon",
                    age / 3600
                ),
                commands: vec![
                    "openshift-install create single-node-ignition-config --dir <dir>".into(),
                ],
            });
        }
        if let Some(path) = &self.stale_marker
            && v.phase < ClusterPhase::BootstrapComplete
        {
            v.hints.push(TimelineHint {
                kind: HintKind::StaleBootstrapMarker,
                nodes: Vec::new(),
                message: format!(
                    "ignoring {path}: it is older than the ignition files (left from an earlier install?); bootstrap-complete is detected from the load balancer's health checks, or touch the file to declare it by hand"
                ),
                commands: Vec::new(),
            });
        }
        v
    }
}

/// The commands that list and approve pending certificate signing requests.
pub const CSR_COMMANDS: [&str; 2] = [
    "oc get csr",
    r#"oc get csr -o go-template='{{range .items}}{{if not .status}}{{.metadata.name}}{{"\n"}}{{end}}{{end}}' | xargs oc adm certificate approve"#,
];

/// Workers that fetched their ignition and booted their installed system
/// (its first machine-config contact) at least `after` seconds before
/// `now` but whose ingress backend never became healthy: a UPI worker
/// joins only once an administrator approves its CSRs (its client CSR,
/// then its serving CSR), so say so with the commands.
pub fn pending_csr(rows: &[NodeTimeline], now: u64, after: u64) -> Option<TimelineHint> {
    let stuck: Vec<(&str, u64)> = rows
        .iter()
        .filter(|r| r.role == Some(Role::Worker) && r.ingress_healthy.is_none())
        .filter_map(|r| {
            let since = r.ignition?.max(r.first_boot?);
            (now.saturating_sub(since) >= after).then_some((r.node.as_str(), since))
        })
        .collect();
    let oldest = stuck.iter().map(|(_, t)| *t).min()?;
    let names: Vec<String> = stuck.iter().map(|(n, _)| n.to_string()).collect();
    let mins = now.saturating_sub(oldest) / 60;
    Some(TimelineHint {
        kind: HintKind::PendingCsr,
        message: format!(
            "{} fetched its machine config {mins} min ago but its ingress is not healthy: pending CSRs? A worker joins only once its certificate signing requests are approved (its client CSR, then a minute later its serving CSR); list them and approve the pending ones (run the approval again for the serving CSRs)",
            names.join(", ")
        ),
        nodes: names,
        commands: CSR_COMMANDS.iter().map(|c| c.to_string()).collect(),
    })
}

/// When every ingress backend (the workers, or the masters when there are
/// none) was healthy, if all were.
fn ingress_ready(rows: &[NodeTimeline]) -> Option<u64> {
    let workers: Vec<&NodeTimeline> = rows
        .iter()
        .filter(|r| r.role == Some(Role::Worker))
        .collect();
    let set = if workers.is_empty() {
        rows.iter()
            .filter(|r| r.role == Some(Role::Master))
            .collect()
    } else {
        workers
    };
    if set.is_empty() {
        return None;
    }
    set.iter()
        .map(|r| r.ingress_healthy)
        .try_fold(0, |acc, t| t.map(|t| acc.max(t)))
}

#[cfg(test)]
mod tests;
