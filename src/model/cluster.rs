//! The validated cluster: typed, defaults filled in, every cross-field rule
//! checked (by `config::validate`, which is the only producer).
//!
//! This file holds the [`Cluster`], its network and nodes, and what is
//! derived from several sections at once (which addresses `api` and
//! `*.apps` resolve to, who is a cluster client, the NTP server the nodes
//! are told about); each service's own section is in [`sections`] and
//! re-exported here, so `model::cluster` is the one path to every part.
//! The network types (CIDR, MAC) are [`super::net`]'s.

mod sections;

pub use sections::{
    AdminCfg, BackendOverrideCfg, BackendPortsCfg, CsrCfg, DhcpCfg, DhcpMode, DnsCfg, HaCfg,
    HealthCfg, HttpCfg, HttpTlsCfg, LbCfg, LibvirtCfg, NetMode, NtpCfg, PxeCfg, RemoveBootstrap,
    ResourceCfg, SegmentCfg, SoaTimers, TftpCfg,
};

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::str::FromStr;

use serde::Serialize;

pub use super::net::{IpCidr, IpNet, Ipv4Net, MacAddr};

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Cluster {
    pub name: String,
    pub base_domain: String,
    /// `<name>.<baseDomain>`, lower case, no trailing dot.
    pub domain: String,
    pub network: NetworkCfg,
    pub nodes: Vec<NodeCfg>,
    pub dns: DnsCfg,
    pub dhcp: DhcpCfg,
    pub lb: LbCfg,
    pub http: HttpCfg,
    pub admin: AdminCfg,
    pub rhcos: Option<RhcosCfg>,
    pub libvirt: Option<LibvirtCfg>,
    /// The `pxe:` section (TFTP server), if present.
    pub tftp: Option<TftpCfg>,
    /// Bootstrap node or single-node bootstrap-in-place ([`super::mode`]).
    pub mode: super::mode::InstallMode,
    /// `ingress`: the nodes that run the ingress router, by name (validated:
    /// existing, not the bootstrap, no repeats); empty = the default
    /// ([`Cluster::ingress_nodes`]).
    pub ingress: Vec<String>,
    /// The `ntp:` section (NTP server), if present.
    pub ntp: Option<NtpCfg>,
    /// The `registry:` section (mirror registry), if present.
    pub registry: Option<super::registry::RegistryCfg>,
    /// The `ha:` section (one member of a keepalived pair), if present.
    pub ha: Option<HaCfg>,
    /// The `csr:` section (CSR approval, `services/csr`), if present.
    pub csr: Option<CsrCfg>,
}

impl Cluster {
    pub fn nodes_with_role(&self, role: Role) -> impl Iterator<Item = &NodeCfg> {
        self.nodes.iter().filter(move |n| n.role == role)
    }
    pub fn node(&self, name: &str) -> Option<&NodeCfg> {
        self.nodes.iter().find(|n| n.name == name)
    }
    /// How many nodes of each role.
    pub fn shape(&self) -> super::mode::Shape {
        let n = |r| self.nodes_with_role(r).count();
        super::mode::Shape {
            bootstrap: n(Role::Bootstrap),
            masters: n(Role::Master),
            workers: n(Role::Worker),
        }
    }
    /// The single-node cluster's master (`None` unless [`Cluster::mode`]
    /// is single-node).
    pub fn single_node(&self) -> Option<&NodeCfg> {
        if !self.mode.is_single_node() {
            return None;
        }
        self.nodes_with_role(Role::Master).next()
    }
    /// Is `node` the single-node master (booted with bootstrap-in-place)?
    pub fn is_single_node_master(&self, node: &NodeCfg) -> bool {
        self.single_node().is_some_and(|m| m.name == node.name)
    }
    /// What `api` and `api-int` resolve to: the API VIP, or the
    /// single-node master when the load balancer is off.
    pub fn api_address(&self) -> Ipv4Addr {
        match self.single_node() {
            Some(m) if !self.lb.enabled => m.ip,
            _ => self.network.api_vip,
        }
    }
    /// The nodes that run the ingress router (the LB's ingress pools): the
    /// `ingress` list when set; else the masters of a compact or
    /// single-node cluster (single-node: also after workers were added, the
    /// router stays on the master), else the workers.
    pub fn ingress_nodes(&self) -> Vec<&NodeCfg> {
        if !self.ingress.is_empty() {
            return self
                .ingress
                .iter()
                .filter_map(|name| self.node(name))
                .collect();
        }
        let workers: Vec<_> = self.nodes_with_role(Role::Worker).collect();
        if workers.is_empty() || self.mode.is_single_node() {
            self.nodes_with_role(Role::Master).collect()
        } else {
            workers
        }
    }
    /// What `*.apps` resolves to: the ingress VIP, or, single-node with the
    /// load balancer off, the ingress nodes' addresses (the master unless
    /// `ingress` says the router moved).
    pub fn apps_addresses(&self) -> Vec<Ipv4Addr> {
        if self.single_node().is_some() && !self.lb.enabled {
            let ips: Vec<_> = self.ingress_nodes().iter().map(|n| n.ip).collect();
            if !ips.is_empty() {
                return ips;
            }
        }
        vec![self.network.ingress_vip]
    }
    /// The IPv6 half of the network, when the cluster is dual-stack.
    pub fn ipv6(&self) -> Option<&super::ipv6::Ipv6Cfg> {
        self.network.ipv6.as_ref()
    }
    /// The IPv6 address of the node named `name`, if it has one.
    pub fn node_ipv6(&self, name: &str) -> Option<Ipv6Addr> {
        self.node(name).and_then(|n| n.ipv6)
    }
    /// What `api` and `api-int` resolve to over IPv6 (AAAA): the IPv6 API
    /// VIP, or the single-node master's IPv6 address when the load
    /// balancer is off (none when that master has no IPv6 address);
    /// `None` without `network.ipv6`.
    pub fn api_address_v6(&self) -> Option<Ipv6Addr> {
        let v6 = self.ipv6()?;
        match self.single_node() {
            Some(m) if !self.lb.enabled => m.ipv6,
            _ => Some(v6.api_vip),
        }
    }
    /// What `*.apps` resolves to over IPv6 (AAAA), as
    /// [`Cluster::apps_addresses`]: the IPv6 ingress VIP, or single-node
    /// without the load balancer the ingress nodes' IPv6 addresses. Empty
    /// without `network.ipv6`.
    pub fn apps_addresses_v6(&self) -> Vec<Ipv6Addr> {
        let Some(v6) = self.ipv6() else {
            return Vec::new();
        };
        if self.single_node().is_some() && !self.lb.enabled {
            return self.ingress_nodes().iter().filter_map(|n| n.ipv6).collect();
        }
        vec![v6.ingress_vip]
    }
    /// The reverse zones served (absolute): those of `network.cidr`
    /// ([`super::names::reverse_zones`]), then the `ip6.arpa` zone of
    /// `network.ipv6.cidr` on a dual-stack network.
    pub fn reverse_zones(&self) -> Vec<String> {
        let mut z = super::names::reverse_zones(self.network.cidr);
        z.extend(self.ipv6().map(|v6| v6.cidr.reverse_zone()));
        z
    }
    /// Fully qualified node name, no trailing dot.
    pub fn fqdn(&self, label: &str) -> String {
        format!("{label}.{}", self.domain)
    }
    /// Is `ip` a client of the cluster: inside `network.cidr`, a relayed
    /// `dhcp.segments[]` subnet, `network.ipv6.cidr`, or loopback? Who may have other names
    /// resolved. (Ignition and the boot ISOs go to their owners only:
    /// [`super::access`].)
    pub fn is_cluster_client(&self, ip: std::net::IpAddr) -> bool {
        self.network.cidr.contains_or_loopback(ip)
            || self
                .dhcp
                .segments
                .iter()
                .any(|s| s.cidr.contains_or_loopback(ip))
            || self.ipv6().is_some_and(|v6| v6.cidr.contains_ip(ip))
    }
    /// The NTP server the nodes are told about (DHCP option 42, `render
    /// chrony`): `ntp.listen`'s IPv4 address, or the appliance's when it
    /// listens on every address (or IPv6), and its port; `None` while NTP
    /// is off.
    pub fn ntp_server(&self) -> Option<(Ipv4Addr, u16)> {
        let n = self.ntp.as_ref().filter(|n| n.enabled)?;
        let ip = match n.listen.ip() {
            std::net::IpAddr::V4(ip) if !ip.is_unspecified() => ip,
            _ => self.network.appliance_ip,
        };
        Some((ip, n.listen.port()))
    }
    /// `network.cidr` and the relayed segments, for messages.
    pub fn cluster_networks(&self) -> String {
        std::iter::once(self.network.cidr)
            .chain(self.dhcp.segments.iter().map(|s| s.cidr))
            .map(|c| c.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NetworkCfg {
    pub cidr: Ipv4Net,
    pub gateway: Ipv4Addr,
    pub appliance_ip: Ipv4Addr,
    pub api_vip: Ipv4Addr,
    pub ingress_vip: Ipv4Addr,
    pub interface: Option<String>,
    pub upstream_dns: Vec<SocketAddr>,
    /// `network.ipv6`: the IPv6 half of a dual-stack network (`None`:
    /// IPv4 only, everything served exactly as without it).
    pub ipv6: Option<super::ipv6::Ipv6Cfg>,
}

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Bootstrap,
    Master,
    Worker,
}

impl Role {
    pub const ALL: [Role; 3] = [Role::Bootstrap, Role::Master, Role::Worker];
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Bootstrap => "bootstrap",
            Role::Master => "master",
            Role::Worker => "worker",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A role name that is none of the roles (nor their aliases).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown role {0:?} ({hint}roles: bootstrap, master (alias control-plane), worker (alias compute))", hint = did_you_mean(.0))]
pub struct UnknownRole(pub String);

/// `did you mean "master"? ` when `given` is a small typo of a role name.
fn did_you_mean(given: &str) -> String {
    let g = given.to_ascii_lowercase();
    ["bootstrap", "master", "worker", "control-plane", "compute"]
        .into_iter()
        .map(|r| (edit_distance(&g, r), r))
        .filter(|(d, r)| *d <= 2 && *d < r.len() / 2)
        .min()
        .map(|(_, r)| format!("did you mean {r:?}? "))
        .unwrap_or_default()
}

/// Levenshtein distance (small inputs only).
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

impl FromStr for Role {
    type Err = UnknownRole;
    fn from_str(s: &str) -> Result<Self, UnknownRole> {
        match s {
            "bootstrap" => Ok(Role::Bootstrap),
            "master" | "control-plane" => Ok(Role::Master),
            "worker" | "compute" => Ok(Role::Worker),
            other => Err(UnknownRole(other.to_string())),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodeCfg {
    pub name: String,
    pub role: Role,
    pub mac: MacAddr,
    pub ip: Ipv4Addr,
    /// The node's IPv6 address (`nodes[].ipv6`; only with `network.ipv6`).
    pub ipv6: Option<Ipv6Addr>,
    /// Install disk (overrides `rhcos.installDev` / `libvirt.installDev`).
    pub install_dev: Option<String>,
    /// Extra kernel arguments of this node's install.
    pub kargs: Vec<String>,
    /// The node's BMC (bare metal booted through Redfish virtual media).
    pub bmc: Option<super::bmc::BmcCfg>,
    /// Its install carries its address as `ip=` and the appliance as
    /// `nameserver=` (`addressing: static`, the node's or the network's;
    /// [`crate::model::boot::static_kargs`]). Then `interface` is set.
    pub static_address: bool,
    /// `nodes[].interface`: the NIC the static address goes on.
    pub interface: Option<String>,
}

/// Where the RHCOS kernel, initramfs and rootfs come from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum BootSource {
    /// The live ISO: `images/pxeboot/{vmlinuz,initrd.img,rootfs.img}`.
    Iso(PathBuf),
    /// The PXE artifacts as files.
    Files {
        kernel: PathBuf,
        initramfs: PathBuf,
        rootfs: PathBuf,
    },
}

/// `rhcos`: the boot source and install kernel arguments.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RhcosCfg {
    pub source: BootSource,
    pub install_dev: String,
    pub kargs: Vec<String>,
    /// Extra kernel arguments by role.
    pub role_kargs: std::collections::BTreeMap<Role, Vec<String>>,
}
