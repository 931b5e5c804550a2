//! Pure renderings of a [`TimelineStatus`]: the step list of a node, the
//! `status --cluster F` table, the progress lines and the goal test of
//! `wait-for`, and what is still missing for a goal.

use std::fmt::Write as _;

use crate::config::Role;
use crate::runtime::status::{ClusterPhase, NodeTimeline, TimelineStatus};

/// A node's steps in install order: (stable key, label, time).
pub fn steps(n: &NodeTimeline) -> [(&'static str, &'static str, Option<u64>); 13] {
    [
        ("vmStarted", "VM started", n.vm_started),
        ("bmcPowerOn", "BMC power on", n.bmc_power_on),
        ("bootIso", "boot ISO fetched", n.boot_iso),
        ("lease", "DHCP lease", n.lease),
        ("rootfs", "rootfs fetched", n.rootfs),
        ("ignition", "ignition fetched", n.ignition),
        ("installFinished", "install finished", n.install_finished),
        ("firstBoot", "first boot from disk", n.first_boot),
        ("mcsHealthy", "machine-config healthy", n.mcs_healthy),
        ("apiHealthy", "API healthy", n.api_healthy),
        ("ingressHealthy", "ingress healthy", n.ingress_healthy),
        ("leaseRenewed", "lease renewed", n.lease_renewed),
        // Last, so that the step indices above stay as they were.
        ("netbootScript", "install script served", n.netboot_script),
    ]
}

/// What `wait-for` waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Goal {
    BootstrapComplete,
    InstallComplete,
}

impl Goal {
    /// The phase that reaches the goal.
    pub fn phase(self) -> ClusterPhase {
        match self {
            Goal::BootstrapComplete => ClusterPhase::BootstrapComplete,
            Goal::InstallComplete => ClusterPhase::IngressReady,
        }
    }

    pub fn reached(self, t: &TimelineStatus) -> bool {
        t.phase >= self.phase()
    }
}

fn hms(unix: u64) -> String {
    let s = unix % 86_400;
    format!("{:02}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60)
}

/// `status --cluster F`: the phase, then one row per node, one column per
/// step (UTC time of day, `-` when not seen).
pub fn table(t: &TimelineStatus) -> String {
    let mut o = format!("cluster phase: {}\n", t.phase.as_str());
    let cols = [
        "NODE",
        "VM",
        "LEASE",
        "ROOTFS",
        "IGNITION",
        "INSTALLED",
        "BOOTED",
        "MCS",
        "API",
        "INGRESS",
    ];
    for c in cols {
        let _ = write!(o, "{c:<10}");
    }
    o.push_str("ERRORS\n");
    for n in &t.nodes {
        let _ = write!(o, "{:<10}", n.node);
        for (_, _, at) in steps(n).iter().take(9) {
            let _ = write!(o, "{:<10}", at.map_or("-".to_string(), hms));
        }
        o.push_str(&n.errors.last().cloned().unwrap_or_default());
        o.push('\n');
    }
    if !t.operator_fetches.is_empty() {
        let _ = writeln!(o, "operator fetches (not install progress):");
        for f in &t.operator_fetches {
            let _ = writeln!(o, "  {} {} {}", hms(f.unix_time), f.client, f.file);
        }
    }
    o
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
    out
}
