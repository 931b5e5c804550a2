//! What `vm up` creates, derived purely from the plan: names, paths, UUIDs,
//! URLs and kernel command lines. No I/O except the optional check for a
//! per-node ignition file (see [`Spec::new`]).

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::model::cluster::{Cluster, LibvirtCfg, NetMode, NetworkCfg, NodeCfg, Role};
use crate::model::net::MacAddr;
use crate::plan::Plan;

/// Namespace of our `<metadata>` element in network and domain XML; it marks
/// what `vm up` created so `vm down` removes only that.
pub const META_NS: &str = "urn:crc-appliance:libvirt:1";

/// Install progress recorded in the persistent domain's metadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Defined while the transient install domain runs from the ISO kernel.
    Installing,
    /// Booted from its disk at least once after the installer powered off.
    Installed,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Installing => "installing",
            Phase::Installed => "installed",
        }
    }
}

/// Whether a shut-off install domain finished its install: only a guest
/// shutdown (libvirt's shut-off reason `shutdown`; the installer's reboot
/// with `on_reboot=destroy` is one) after the node fetched its ignition.
/// `reason` is libvirt's shut-off reason in lower case; `fetched_ignition`
/// is `None` when nobody could know (no `serve` running).
pub fn install_verdict(
    reason: &str,
    fetched_ignition: Option<bool>,
) -> Result<(), InstallRejected> {
    if reason != "shutdown" {
        return Err(InstallRejected::Stopped(reason.into()));
    }
    if fetched_ignition == Some(false) {
        return Err(InstallRejected::BeforeIgnition);
    }
    Ok(())
}

/// Why a shut-off install domain did not finish its install (it installs
/// again): the text `vm up`, the log and the timeline show.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InstallRejected {
    /// Stopped otherwise than by a guest shutdown (libvirt's shut-off
    /// reason, lower case: `destroyed`, `crashed`, ...).
    #[error("install VM stopped ({0}), not shut down by the installer; installing again")]
    Stopped(String),
    /// Shut down before the node fetched its ignition.
    #[error("install VM shut down before the node fetched its ignition; installing again")]
    BeforeIgnition,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeSpec {
    /// Node name from the cluster file (`master-0`).
    pub node: String,
    /// libvirt domain name: `<cluster>-<node>`.
    pub domain: String,
    pub role: Role,
    pub uuid: String,
    pub mac: MacAddr,
    pub ip: Ipv4Addr,
    pub cpus: u32,
    pub memory_mib: u64,
    pub disk_gib: u64,
    /// Volume name in the pool: `<cluster>-<node>.qcow2`.
    pub volume: String,
    /// `<pool path>/<volume>`.
    pub disk_path: PathBuf,
    /// `<pool path>/<cluster>-<node>-serial.log`.
    pub serial_log: PathBuf,
    pub ignition_url: String,
    /// Kernel command line of the install phase.
    pub cmdline: String,
}

/// A DHCP host entry for libvirt's dnsmasq (forwarder mode without the
/// appliance's DHCP).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DhcpHost {
    pub mac: MacAddr,
    pub name: String,
    pub ip: Ipv4Addr,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Spec {
    /// Cluster name (prefix of everything we create).
    pub cluster: String,
    /// `<name>.<baseDomain>`.
    pub domain: String,
    pub uri: String,
    pub iso: PathBuf,
    pub pool_name: String,
    pub pool_path: PathBuf,
    pub network_name: String,
    pub network_uuid: String,
    pub bridge: String,
    pub mode: NetMode,
    pub nat: bool,
    /// Host address of the bridge: applianceIP (appliance mode) or the
    /// gateway (forwarder mode, where libvirt's dnsmasq binds it).
    pub bridge_ip: Ipv4Addr,
    pub netmask: Ipv4Addr,
    /// Dual-stack (appliance mode only): the bridge's IPv6 address (the
    /// IPv6 applianceIP) and prefix length.
    pub bridge_ip6: Option<(std::net::Ipv6Addr, u8)>,
    /// Forwarder mode: `(domain, applianceIP)` for the cluster and reverse zones.
    pub forwarders: Vec<(String, Ipv4Addr)>,
    /// Forwarder mode with the appliance's DHCP disabled: libvirt hands out
    /// the reservations.
    pub dhcp_hosts: Vec<DhcpHost>,
    /// `<pool>/<cluster>-live-vmlinuz`, extracted from the ISO.
    pub kernel: PathBuf,
    /// `<pool>/<cluster>-live-initrd.img`, extracted from the ISO.
    pub initrd: PathBuf,
    /// `<imagesDir>/<cluster>-live-rootfs.img`, extracted from the ISO and
    /// served by the appliance's HTTP server.
    pub rootfs: PathBuf,
    pub rootfs_url: String,
    /// `http://<addr>` the guests use for ignition and the rootfs.
    pub http_base: String,
    /// `kvm` (default) or `qemu` (no KVM on the host); the driver decides.
    pub domain_type: String,
    /// `<pool>/.crc-appliance-<cluster>.json`: what `vm up` created.
    pub state_file: PathBuf,
    pub nodes: Vec<NodeSpec>,
    /// Problems worth a warning (not errors), e.g. HTTP disabled.
    pub warnings: Vec<String>,
}

/// Paths inside the ISO (Rock Ridge names; the 8.3 names match too).
pub const ISO_KERNEL: &str = "images/pxeboot/vmlinuz";
pub const ISO_INITRD: &str = "images/pxeboot/initrd.img";
pub const ISO_ROOTFS: &str = "images/pxeboot/rootfs.img";

/// A stable RFC 4122 variant UUID (version 8, "custom") from a name:
/// FNV-1a 128 of `crc-appliance/<name>`. Stable across releases, so a
/// re-run of `vm up` redefines the same domain.
pub fn stable_uuid(name: &str) -> String {
    const OFFSET: u128 = 0x6c62272e07bb014262b821756295c58d;
    const PRIME: u128 = 0x0000000001000000000000000000013B;
    let mut h = OFFSET;
    for b in b"crc-appliance/".iter().chain(name.as_bytes()) {
        h ^= u128::from(*b);
        h = h.wrapping_mul(PRIME);
    }
    let mut b = h.to_be_bytes();
    b[6] = (b[6] & 0x0f) | 0x80; // version 8
    b[8] = (b[8] & 0x3f) | 0x80; // RFC 4122 variant
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

impl Spec {
    /// Derive everything from the plan. Errors when the cluster file has no
    /// `libvirt` section or the network mode cannot work with the addresses.
    /// The ignition URL is `/ignition/<node>.ign` when that file exists in
    /// `http.ignitionDir`, else `/ignition/<role>.ign`.
    pub fn new(plan: &Plan) -> anyhow::Result<Spec> {
        let dir = plan.cluster.http.ignition_dir.clone();
        Self::with_ignition_check(plan, &|node: &str| {
            dir.join(format!("{node}.ign")).is_file()
        })
    }

    pub fn with_ignition_check(
        plan: &Plan,
        has_node_ignition: &dyn Fn(&str) -> bool,
    ) -> anyhow::Result<Spec> {
        let c = &plan.cluster;
        let v: &LibvirtCfg = c
            .libvirt
            .as_ref()
            .ok_or_else(|| anyhow::anyhow!("the cluster file has no `libvirt` section"))?;
        let net = &c.network;
        let mut warnings = Vec::new();
        let bridge_ip = bridge_address(v.mode, net)?;
        let bridge_ip6 = net
            .ipv6
            .as_ref()
            .map(|v6| (v6.appliance_ip, v6.cidr.prefix()));
        if v.mode == NetMode::Appliance && net.gateway != net.appliance_ip {
            warnings.push(format!(
                "network.gateway {} is not applianceIP {}: the bridge gets applianceIP, so the \
                 guests' default route must be provided by another router on the network",
                net.gateway, net.appliance_ip
            ));
        }
        let mut forwarders = Vec::new();
        let mut dhcp_hosts = Vec::new();
        if v.mode == NetMode::Forwarder {
            for z in &plan.zones {
                let d = z.origin.trim_end_matches('.').to_string();
                forwarders.push((d, net.appliance_ip));
            }
            if !c.dhcp.enabled {
                dhcp_hosts = c
                    .nodes
                    .iter()
                    .map(|n| DhcpHost {
                        mac: n.mac,
                        name: n.name.clone(),
                        ip: n.ip,
                    })
                    .collect();
            }
        }
        let http_base = crate::model::boot::http_base(c);
        if !c.http.enabled {
            warnings.push(format!(
                "http is disabled: the guests need {http_base}/ignition/ and /images/ from some \
                 other server"
            ));
        }
        let cluster = c.name.clone();
        let pool = v.pool_path.clone();
        let rootfs_name = format!("{cluster}-live-rootfs.img");
        let rootfs_url = format!("{http_base}/images/{rootfs_name}");
        let nodes = c
            .nodes
            .iter()
            .map(|n| node_spec(c, v, n, &http_base, &rootfs_url, has_node_ignition))
            .collect();
        Ok(Spec {
            domain: c.domain.clone(),
            uri: v.uri.clone(),
            iso: v.iso.clone(),
            pool_name: v.pool_name.clone(),
            pool_path: pool.clone(),
            network_name: v.network_name.clone(),
            network_uuid: stable_uuid(&format!("{}/network/{}", c.domain, v.network_name)),
            bridge: v.bridge.clone(),
            mode: v.mode,
            nat: v.nat,
            bridge_ip,
            netmask: net.cidr.netmask(),
            bridge_ip6,
            forwarders,
            dhcp_hosts,
            kernel: pool.join(format!("{cluster}-live-vmlinuz")),
            initrd: pool.join(format!("{cluster}-live-initrd.img")),
            rootfs: c.http.images_dir.join(&rootfs_name),
            rootfs_url,
            http_base,
            domain_type: "kvm".into(),
            state_file: pool.join(format!(".crc-appliance-{cluster}.json")),
            cluster,
            nodes,
            warnings,
        })
    }

    pub fn node(&self, name: &str) -> Option<&NodeSpec> {
        self.nodes.iter().find(|n| n.node == name)
    }

    /// Files `vm up` extracts from the ISO: (path inside the ISO, destination).
    pub fn extracted_files(&self) -> [(&'static str, &Path); 3] {
        [
            (ISO_KERNEL, self.kernel.as_path()),
            (ISO_INITRD, self.initrd.as_path()),
            (ISO_ROOTFS, self.rootfs.as_path()),
        ]
    }
}

/// The bridge's IPv4 address: the appliance's in mode appliance; in mode
/// forwarder the gateway (libvirt's dnsmasq owns it), which must then
/// differ from `applianceIP`, and never with `network.ipv6` (that dnsmasq
/// would send its own router advertisements).
fn bridge_address(mode: NetMode, net: &NetworkCfg) -> anyhow::Result<Ipv4Addr> {
    let bridge_ip = match mode {
        NetMode::Appliance => net.appliance_ip,
        NetMode::Forwarder => {
            if net.gateway == net.appliance_ip {
                anyhow::bail!(
                    "libvirt.network.mode forwarder: libvirt's dnsmasq owns the bridge address \
                     (network.gateway {}), so network.applianceIP must be a different address \
                     where the appliance's DNS listens",
                    net.gateway
                );
            }
            net.gateway
        }
    };
    if let (NetMode::Forwarder, Some(v6)) = (mode, &net.ipv6) {
        anyhow::bail!(
            "libvirt.network.mode forwarder with network.ipv6: libvirt runs its dnsmasq for \
             the forwarding DNS, and that dnsmasq sends its own router advertisements \
             (SLAAC, `ra-only`) for every IPv6 address of the network ({}), so the nodes \
             would take addresses outside their reservations; use mode appliance \
             (docs/ipv6.md)",
            v6.cidr
        );
    }
    Ok(bridge_ip)
}

/// One VM of the cluster: its resources, volume, serial log, and the
/// kernel command line of its install (single-node: the live system with
/// the bootstrap-in-place Ignition).
fn node_spec(
    c: &Cluster,
    v: &LibvirtCfg,
    n: &NodeCfg,
    http_base: &str,
    rootfs_url: &str,
    has_node_ignition: &dyn Fn(&str) -> bool,
) -> NodeSpec {
    let r = v.resources(n.role);
    let domain = format!("{}-{}", c.name, n.name);
    let volume = format!("{domain}.qcow2");
    let ign = if has_node_ignition(&n.name) {
        format!("{}.ign", n.name)
    } else {
        format!("{}.ign", n.role)
    };
    let ignition_url = format!("{http_base}/ignition/{ign}");
    // Single-node: the live system with the bootstrap-in-place
    // Ignition (`/ignition/<node>.ign` serves it) and no
    // coreos.inst.*; it writes its disk at the end of bootstrap
    // and reboots once, which `on_reboot=destroy` turns into
    // the guest shutdown that ends the install phase.
    let (ignition_url, cmdline) = if c.is_single_node_master(n) {
        let url = format!("{http_base}/ignition/{}.ign", n.name);
        let k = crate::model::boot::single_node_kargs(c, n, Some(&url));
        (url, format!("coreos.live.rootfs_url={rootfs_url} {k}"))
    } else {
        let k = crate::model::boot::install_kargs(c, n, &v.install_dev, rootfs_url, &ignition_url);
        (ignition_url, k)
    };
    NodeSpec {
        node: n.name.clone(),
        uuid: stable_uuid(&format!("{}/{}", c.domain, n.name)),
        role: n.role,
        mac: n.mac,
        ip: n.ip,
        cpus: r.cpus,
        memory_mib: r.memory_mib,
        disk_gib: r.disk_gib,
        disk_path: v.pool_path.join(&volume),
        serial_log: v.pool_path.join(format!("{domain}-serial.log")),
        volume,
        domain,
        ignition_url,
        cmdline,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_guest_shutdown_after_the_ignition_fetch_finishes_an_install() {
        assert!(install_verdict("shutdown", Some(true)).is_ok());
        assert!(
            install_verdict("shutdown", None).is_ok(),
            "no serve: reason only"
        );
        let e = install_verdict("shutdown", Some(false)).unwrap_err();
        assert_eq!(e, InstallRejected::BeforeIgnition);
        for r in ["destroyed", "crashed", "failed", "unknown"] {
            let e = install_verdict(r, Some(true)).unwrap_err();
            assert_eq!(e, InstallRejected::Stopped(r.into()));
        }
    }

    /// The texts `vm up`, the log and the timeline show.
    #[test]
    fn a_rejected_install_says_why_it_runs_again() {
        assert_eq!(
            InstallRejected::Stopped("destroyed".into()).to_string(),
            "install VM stopped (destroyed), not shut down by the installer; installing again"
        );
        assert_eq!(
            InstallRejected::BeforeIgnition.to_string(),
            "install VM shut down before the node fetched its ignition; installing again"
        );
    }
}
