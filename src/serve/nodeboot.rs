//! `POST /api/nodes/<node>/boot` (`crc-appliance node boot <node>`, the
//! day-2 join of issue #37 item 6): boot one node by the route the cluster
//! file gives it, in this order:
//!
//! 1. its BMC (`nodes[].bmc`): `bmc up` (the node's ISO as virtual media,
//!    boot once from CD, power on or restart), recorded as the node's
//!    `bmcPowerOn` step when it powered the node on;
//! 2. libvirt (`libvirt:`): `vm up` (idempotent: it creates and starts the
//!    node's VM if it has none), through `serve`'s helper with
//!    `libvirt.startOnServe`, else a helper run once;
//! 3. network boot (`pxe:` or `tftp:` with `rhcos:`): nothing to drive, so
//!    the answer says the node installs from the network once powered on.
//!
//! With none of them it is refused, naming what is missing. Only the HA
//! member holding the VIPs drives a BMC or libvirt (as `startOnServe`).

use tracing::info;

use crate::model::cluster::Cluster;
use crate::serve::hub::Hub;

/// Why a boot was refused or failed (the admin API's status and text).
#[derive(Debug, thiserror::Error)]
pub enum BootError {
    #[error("node {0:?} is not in the cluster file")]
    UnknownNode(String),
    #[error("{0}")]
    NoRoute(String),
    #[error("{0}")]
    Failed(String),
}

impl BootError {
    pub fn http_status(&self) -> u16 {
        match self {
            BootError::UnknownNode(_) => 404,
            BootError::NoRoute(_) => 409,
            BootError::Failed(_) => 502,
        }
    }
}

fn vip_holder(hub: &Hub, node: &str) -> Result<(), BootError> {
    if hub.ha().holds_vips() {
        return Ok(());
    }
    Err(BootError::NoRoute(format!(
        "this HA member does not hold the VIPs; boot {node} through the one that does"
    )))
}

/// Boot `node`; the lines saying what was done.
pub async fn boot(hub: &Hub, node: &str) -> Result<Vec<String>, BootError> {
    let plan = hub.plan();
    let c = &plan.cluster;
    let n = c
        .node(node)
        .ok_or_else(|| BootError::UnknownNode(node.to_string()))?;
    let lines = if n.bmc.is_some() {
        vip_holder(hub, node)?;
        let o = crate::drivers::bmc::act(c, n, crate::drivers::bmc::BmcAction::Up)
            .await
            .map_err(|e| BootError::Failed(format!("{e:#}")))?;
        if o.reset {
            hub.events().record(crate::timeline::Event::BmcPowerOn {
                node: node.to_string(),
            });
        }
        let mut lines: Vec<String> = o.notes.iter().map(|l| format!("note: {l}")).collect();
        lines.extend(o.lines);
        if lines.is_empty() {
            lines.push(format!(
                "already booted from {}",
                crate::drivers::bmc::iso_url(c, n)
            ));
        }
        lines
    } else if c.libvirt.is_some() {
        vip_holder(hub, node)?;
        libvirt_boot(hub, node).await?
    } else {
        vec![network_boot(c, node)?]
    };
    for l in &lines {
        info!("node boot {node}: {l}");
    }
    Ok(lines)
}

/// Network boot: what the node does once powered on, or why it cannot.
fn network_boot(c: &Cluster, node: &str) -> Result<String, BootError> {
    let served = c.http.enabled && c.rhcos.is_some();
    if served && (c.dhcp.pxe.is_some() || c.tftp.is_some()) {
        return Ok(format!(
            "{node} has no BMC and is not a libvirt VM: power it on; it boots from the network and installs ({}/boot/boot.ipxe)",
            crate::model::boot::http_base(c)
        ));
    }
    let by_hand = if served {
        format!(
            "; boot it by hand from {}/boot/{node}.iso",
            crate::model::boot::http_base(c)
        )
    } else {
        String::new()
    };
    Err(BootError::NoRoute(format!(
        "no way to boot {node}: it has no `bmc`, the cluster file has no `libvirt` section, and the appliance serves no network boot (`pxe:` or `tftp:` with `rhcos:` and HTTP){by_hand}"
    )))
}

#[cfg(feature = "libvirt")]
async fn libvirt_boot(hub: &Hub, node: &str) -> Result<Vec<String>, BootError> {
    if let Some(lv) = &hub.services.libvirt {
        return lv
            .boot(node)
            .await
            .map_err(|e| BootError::Failed(format!("{e:#}")));
    }
    // Without startOnServe: `vm up` in a helper of its own, with the
    // ignition fetches this serve saw as its install evidence.
    let plan = hub.plan();
    let spec = crate::drivers::libvirt::Spec::new(&plan)
        .map_err(|e| BootError::Failed(format!("{e:#}")))?;
    let fetched = hub
        .events()
        .view()
        .nodes
        .into_iter()
        .filter(|n| n.ignition.is_some())
        .map(|n| n.node)
        .collect();
    let text = crate::drivers::libvirt::vm_text(
        &hub.ctx().helpers,
        spec,
        crate::drivers::libvirt::VmAction::Up,
        Some(fetched),
    )
    .await
    .map_err(|e| BootError::Failed(format!("{e:#}")))?;
    Ok(text.lines().map(str::to_string).collect())
}

#[cfg(not(feature = "libvirt"))]
async fn libvirt_boot(_: &Hub, node: &str) -> Result<Vec<String>, BootError> {
    Err(BootError::NoRoute(format!(
        "{node} is a libvirt VM, and this crc-appliance was built without libvirt support"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(extra: &str) -> Cluster {
        let text = format!(
            "name: c\nbaseDomain: example.com\nnetwork: {{ cidr: 10.0.0.0/24, gateway: 10.0.0.254, applianceIP: 10.0.0.1 }}\nnodes:\n  - {{ name: m0, role: master, mac: '52:54:00:00:00:10', ip: 10.0.0.10 }}\n  - {{ name: w0, role: worker, mac: '52:54:00:00:00:20', ip: 10.0.0.20 }}\n{extra}"
        );
        crate::config::from_str(&text, std::path::Path::new("/"), std::path::Path::new("t"))
            .unwrap()
            .cluster
    }

    #[test]
    fn network_boot_says_what_happens_or_why_there_is_no_route() {
        let served = cluster("rhcos: { iso: /rhcos.iso }\npxe: { tftpRoot: / }\n");
        let ok = network_boot(&served, "w0").unwrap();
        assert!(
            ok.starts_with("w0 has no BMC and is not a libvirt VM: power it on")
                && ok.contains("/boot/boot.ipxe"),
            "{ok}"
        );
        let iso_only = cluster("rhcos: { iso: /rhcos.iso }\n");
        let e = network_boot(&iso_only, "w0").unwrap_err();
        assert_eq!(e.http_status(), 409);
        let e = e.to_string();
        assert!(e.starts_with("no way to boot w0: it has no `bmc`"), "{e}");
        assert!(
            e.ends_with("boot it by hand from http://10.0.0.1:8080/boot/w0.iso"),
            "{e}"
        );
        let nothing = network_boot(&cluster(""), "w0").unwrap_err().to_string();
        assert!(!nothing.contains("by hand"), "{nothing}");
    }
}
