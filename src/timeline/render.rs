//! Pure renderings of a [`TimelineStatus`]: the step list of a node, the
//! `status --cluster F` table, the progress lines and the goal test of
//! `wait-for`, and what is still missing for a goal, with the timeline's
//! hints (what to do, with the exact commands).
//!
//! Invariant: [`STEPS`] is the one list of install steps. The progress
//! lines, the metrics' `step` label and the table's columns (header and
//! cells alike) are all derived from it, so a step added or moved cannot
//! shift a column under the wrong header.

use std::fmt::Write as _;

use crate::model::cluster::Role;
use crate::timeline::status::{ClusterPhase, HintKind, NodeTimeline, TimelineHint, TimelineStatus};

/// One install step of a node.
pub struct Step {
    /// Stable key (`/status` field, metrics `step` label).
    pub key: &'static str,
    /// Words for progress lines.
    pub label: &'static str,
    /// Column header of `status`: at most [`TIME_WIDTH`] characters, so a
    /// column is as wide as the times under it.
    pub column: &'static str,
    /// Where the node's time of this step is.
    pub at: fn(&NodeTimeline) -> Option<u64>,
}

/// Width of a time of day (`HH:MM:SS`).
pub const TIME_WIDTH: usize = 8;

/// Every install step, in install order.
#[rustfmt::skip]
pub const STEPS: [Step; 18] = [
    step("vmStarted",       "VM started",             "VM",       |n| n.vm_started),
    step("bmcPowerOn",      "BMC power on",           "BMC",      |n| n.bmc_power_on),
    step("bootIso",         "boot ISO fetched",       "ISO",      |n| n.boot_iso),
    step("lease",           "DHCP lease",             "LEASE",    |n| n.lease),
    step("netbootScript",   "install script served",  "SCRIPT",   |n| n.netboot_script),
    step("rootfs",          "rootfs fetched",         "ROOTFS",   |n| n.rootfs),
    step("ignition",        "ignition fetched",       "IGNITION", |n| n.ignition),
    step("installFinished", "install finished",       "INSTALL",  |n| n.install_finished),
    step("firstBoot",       "first boot from disk",   "BOOTED",   |n| n.first_boot),
    step("pulling",         "pulling from the mirror", "PULLING", |n| n.pulling),
    step("pulled",          "pulled from the mirror", "PULLED",   |n| n.pulled),
    step("csrClient",       "client CSR approved",    "CSR",      |n| n.csr_client),
    step("csrServing",      "serving CSR approved",   "SERVING",  |n| n.csr_serving),
    step("nodeReady",       "Node Ready",             "READY",    |n| n.node_ready),
    step("mcsHealthy",      "machine-config healthy", "MCS",      |n| n.mcs_healthy),
    step("apiHealthy",      "API healthy",            "API",      |n| n.api_healthy),
    step("ingressHealthy",  "ingress healthy",        "INGRESS",  |n| n.ingress_healthy),
    step("leaseRenewed",    "lease renewed",          "RENEWED",  |n| n.lease_renewed),
];

const fn step(
    key: &'static str,
    label: &'static str,
    column: &'static str,
    at: fn(&NodeTimeline) -> Option<u64>,
) -> Step {
    Step {
        key,
        label,
        column,
        at,
    }
}

/// A node's steps in install order: (stable key, label, time).
pub fn steps(n: &NodeTimeline) -> [(&'static str, &'static str, Option<u64>); STEPS.len()] {
    std::array::from_fn(|i| {
        let s = &STEPS[i];
        (s.key, s.label, (s.at)(n))
    })
}

/// What `wait-for` waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Goal {
    BootstrapComplete,
    InstallComplete,
    /// One node (named on the command line) Ready: the day-2 join
    /// (`csr:`), through [`node_ready`] and [`node_missing`].
    NodeReady,
}

impl Goal {
    /// The goal as typed on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Goal::BootstrapComplete => "bootstrap-complete",
            Goal::InstallComplete => "install-complete",
            Goal::NodeReady => "node-ready",
        }
    }

    /// The phase that reaches the goal (a node's readiness is no phase:
    /// the cluster's end).
    pub fn phase(self) -> ClusterPhase {
        match self {
            Goal::BootstrapComplete => ClusterPhase::BootstrapComplete,
            Goal::InstallComplete | Goal::NodeReady => ClusterPhase::IngressReady,
        }
    }

    pub fn reached(self, t: &TimelineStatus) -> bool {
        t.phase >= self.phase()
    }
}

/// `wait-for node-ready <node>`: the node's Node was seen Ready.
pub fn node_ready(t: &TimelineStatus, node: &str) -> bool {
    t.nodes
        .iter()
        .any(|n| n.node == node && n.node_ready.is_some())
}

/// What `node` still lacks on its way to Ready, in join order.
pub fn node_missing(t: &TimelineStatus, node: &str) -> Vec<String> {
    let Some(n) = t.nodes.iter().find(|n| n.node == node) else {
        return vec![format!(
            "{node}: not a node of the cluster file (add it and reload)"
        )];
    };
    let why = if n.lease.is_none() {
        "no DHCP lease yet"
    } else if n.ignition.is_none() {
        "has not fetched its ignition from its own address yet"
    } else if n.csr_client.is_none() {
        "client CSR not approved yet (csr: in the cluster file?)"
    } else if n.csr_serving.is_none() {
        "serving CSR not approved yet"
    } else if n.node_ready.is_none() {
        "Node not Ready yet"
    } else {
        return Vec::new();
    };
    vec![format!("{node}: {why}")]
}

fn hms(unix: u64) -> String {
    let s = unix % 86_400;
    format!("{:02}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60)
}

/// `status --cluster F`: the phase, then one row per node and one column
/// per step of [`STEPS`] (UTC time of day, `-` when not seen). A step no
/// node has reached yet has no column (the header grows as the install
/// goes on: a libvirt cluster never shows BMC or ISO, a bare-metal one
/// never VM), and so has the last-error column while no node has one.
pub fn table(t: &TimelineStatus) -> String {
    let mut o = format!("cluster phase: {}\n", t.phase.as_str());
    let shown: Vec<&Step> = STEPS
        .iter()
        .filter(|s| t.nodes.iter().any(|n| (s.at)(n).is_some()))
        .collect();
    let errors = t.nodes.iter().any(|n| !n.errors.is_empty());
    let name_width = t.nodes.iter().map(|n| n.node.len()).fold(4, usize::max);
    let mut header = format!("{:<name_width$}", "NODE");
    for s in &shown {
        let _ = write!(header, "  {:<TIME_WIDTH$}", s.column);
    }
    if errors {
        header.push_str("  LAST ERROR");
    }
    o.push_str(header.trim_end());
    o.push('\n');
    for n in &t.nodes {
        let mut row = format!("{:<name_width$}", n.node);
        for s in &shown {
            let at = (s.at)(n).map_or("-".to_string(), hms);
            let _ = write!(row, "  {at:<TIME_WIDTH$}");
        }
        if let Some(e) = n.errors.last() {
            let _ = write!(row, "  {e}");
        }
        o.push_str(row.trim_end());
        o.push('\n');
    }
    if shown.is_empty() {
        o.push_str("no node has reached an install step yet\n");
    }
    if !t.operator_fetches.is_empty() {
        let _ = writeln!(o, "operator fetches (not install progress):");
        for f in &t.operator_fetches {
            let _ = writeln!(o, "  {} {} {}", hms(f.unix_time), f.client, f.file);
        }
    }
    for line in t.hints.iter().flat_map(hint_lines) {
        let _ = writeln!(o, "{line}");
    }
    o
}

/// A hint as lines: `hint: <message>`, then each command indented.
pub fn hint_lines(h: &TimelineHint) -> Vec<String> {
    let mut out = vec![format!("hint: {}", h.message)];
    out.extend(h.commands.iter().map(|c| format!("  {c}")));
    out
}

/// Progress lines for what `new` has that `old` had not.
pub fn progress(old: Option<&TimelineStatus>, new: &TimelineStatus) -> Vec<String> {
    let mut out = Vec::new();
    if old.map(|o| o.phase) != Some(new.phase) {
        out.push(format!("cluster: phase {}", new.phase.as_str()));
    }
    for n in &new.nodes {
        let before = old.and_then(|o| o.nodes.iter().find(|m| m.node == n.node));
        let prev = before.map(steps);
        for (i, (_, label, at)) in steps(n).iter().enumerate() {
            let had = prev.as_ref().and_then(|p| p[i].2);
            if let (Some(at), None) = (at, had) {
                out.push(format!("{} {}: {label}", hms(*at), n.node));
            }
        }
        let old_errors = before.map_or(0, |b| b.errors.len());
        for e in n.errors.iter().skip(old_errors) {
            out.push(format!("{}: {e}", n.node));
        }
    }
    // A hint once when it appears (or when its nodes change).
    for h in &new.hints {
        let seen = old.is_some_and(|o| {
            o.hints
                .iter()
                .any(|x| x.kind == h.kind && x.nodes == h.nodes)
        });
        if !seen {
            out.extend(hint_lines(h));
        }
    }
    out
}

/// What is missing for `goal`: the first missing step of each node that
/// the goal needs, then the cluster-level condition.
pub fn missing(t: &TimelineStatus, goal: Goal) -> Vec<String> {
    let mut out = Vec::new();
    for n in &t.nodes {
        let role = n.role.unwrap_or(Role::Worker);
        let needed = match goal {
            Goal::BootstrapComplete => role != Role::Worker,
            Goal::InstallComplete => role != Role::Bootstrap,
            Goal::NodeReady => false,
        };
        if !needed {
            continue;
        }
        let want_ingress = goal == Goal::InstallComplete && role == Role::Worker;
        let why = if n.lease.is_none() {
            Some("no DHCP lease yet")
        } else if n.ignition.is_none() && n.install_finished.is_none() {
            Some("has not fetched its ignition from its own address yet")
        } else if role != Role::Worker && n.api_healthy.is_none() {
            Some("API backend not healthy yet")
        } else if want_ingress && n.ingress_healthy.is_none() {
            Some("ingress backend not healthy yet")
        } else {
            None
        };
        if let Some(why) = why {
            out.push(format!("{}: {why}", n.node));
        }
    }
    if !goal.reached(t) {
        out.push(format!(
            "cluster: phase is {}, waiting for {}",
            t.phase.as_str(),
            goal.phase().as_str()
        ));
    }
    for h in &t.hints {
        let relevant = match h.kind {
            HintKind::PendingCsr => goal != Goal::BootstrapComplete,
            HintKind::StaleBootstrapMarker
            | HintKind::StaleBootstrapInPlace
            | HintKind::CsrAlert => true,
        };
        if relevant {
            out.extend(hint_lines(h));
        }
    }
    out
}
