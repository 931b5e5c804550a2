//! The cluster file exactly as written. Every struct denies unknown fields;
//! addresses stay strings here and are checked in `validate`, so one bad value
//! is reported together with all the others.
//!
//! This file holds the document ([`ClusterFile`]), its network and nodes;
//! each other section is a child module named after it (`raw/dns.rs`,
//! `raw/pxe.rs`, …), re-exported here so `config::raw` is the one path to
//! every raw type. Nothing here validates or imports `validate`: the
//! builders there read these types, never the reverse.

mod bmc;
mod csr;
mod dhcp;
mod dns;
mod ha;
mod http;
mod lb;
mod libvirt;
mod ntp;
mod pxe;
mod registry;

pub use bmc::{RawBmc, RawMedia};
pub use csr::RawCsr;
pub use dhcp::{Dhcp, Pxe, Segment};
pub use dns::{Dns, ExtraRecord, Soa};
pub use ha::RawHa;
pub use http::{Admin, Http, HttpTls};
pub use lb::{BackendPorts, CaFiles, HealthCheck, LoadBalancer, PoolAddrs};
pub use libvirt::{Libvirt, LibvirtNetwork, LibvirtPool, Resource, Resources};
pub use ntp::RawNtp;
pub use pxe::RawPxe;
pub use registry::{RawPullThrough, RawRegistry};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterFile {
    /// Cluster name: the first label of `<name>.<baseDomain>`.
    pub name: String,
    pub base_domain: String,
    pub network: Network,
    pub nodes: Vec<Node>,
    /// Nodes that run the default ingress router, by name: `*.apps` (on
    /// single-node without the load balancer) and the load balancer's
    /// ingress pools follow it. Absent or empty: the masters when there are
    /// no workers (compact) or the cluster is single-node (also after
    /// workers were added), the workers otherwise. Set it when the router
    /// was moved (its IngressController's `nodePlacement`).
    #[serde(default)]
    pub ingress: Vec<String>,
    #[serde(default)]
    pub dns: Dns,
    #[serde(default)]
    pub dhcp: Dhcp,
    #[serde(default)]
    pub load_balancer: LoadBalancer,
    #[serde(default)]
    pub http: Http,
    #[serde(default)]
    pub admin: Admin,
    #[serde(default)]
    pub rhcos: Option<Rhcos>,
    #[serde(default)]
    pub libvirt: Option<Libvirt>,
    /// TFTP for network boot (`validate/pxe.rs`); absent = off.
    #[serde(default)]
    pub pxe: Option<RawPxe>,
    /// NTP server for the nodes (`validate/ntp.rs`); absent = off.
    #[serde(default)]
    pub ntp: Option<RawNtp>,
    /// The lab's mirror registry (`validate/registry.rs`, docs/registry.md);
    /// absent = off.
    #[serde(default)]
    pub registry: Option<RawRegistry>,
    /// One member of a keepalived HA pair (`validate/ha.rs`, docs/ha.md);
    /// absent = a single appliance.
    #[serde(default)]
    pub ha: Option<RawHa>,
    /// CSR approval for the nodes this appliance booted (`validate/csr.rs`,
    /// docs/operations.md); absent = off.
    #[serde(default)]
    pub csr: Option<RawCsr>,
}

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Network {
    /// Machine network, e.g. `192.168.131.0/24`.
    pub cidr: String,
    /// Default router handed out by DHCP.
    pub gateway: String,
    /// The appliance's own address: DNS server, LB and HTTP address by default.
    #[serde(rename = "applianceIP")]
    pub appliance_ip: String,
    /// Address `api`/`api-int` resolve to (default: applianceIP).
    #[serde(rename = "apiVIP", default)]
    pub api_vip: Option<String>,
    /// Address `*.apps` resolves to (default: applianceIP).
    #[serde(rename = "ingressVIP", default)]
    pub ingress_vip: Option<String>,
    /// Interface DHCP binds to (SO_BINDTODEVICE), e.g. `virbr-ocp`.
    #[serde(default)]
    pub interface: Option<String>,
    /// Resolvers for names outside the cluster zones: `ip` or `ip:port`.
    #[serde(rename = "upstreamDNS", default)]
    pub upstream_dns: Vec<String>,
    /// The IPv6 half of a dual-stack network (docs/ipv6.md); absent = IPv4
    /// only.
    #[serde(default)]
    pub ipv6: Option<Ipv6>,
    /// How the nodes get their address: `dhcp` (default) or `static` (each
    /// node's install carries its `ip` as `ip=` kernel arguments; needs
    /// `nodes[].interface`). `nodes[].addressing` overrides it per node.
    #[serde(default)]
    pub addressing: Option<String>,
}

/// `network.ipv6`: the cluster network's IPv6 prefix and addresses.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Ipv6 {
    /// IPv6 prefix of the machine network, e.g. `fd00:131::/64`; its length
    /// must be a multiple of 4 (one `ip6.arpa` zone).
    pub cidr: String,
    /// The appliance's own IPv6 address inside `cidr`.
    #[serde(rename = "applianceIP")]
    pub appliance_ip: String,
    /// Default router, when not the one router advertisements announce
    /// (inside `cidr`, or link-local `fe80::/10`).
    #[serde(default)]
    pub gateway: Option<String>,
    /// Send router advertisements on the cluster interface (M=1, O=1,
    /// the prefix with A=0). Off by default: leave them to the network's
    /// router when it sends them.
    #[serde(default)]
    pub router_advertisements: bool,
    /// Address `api`/`api-int` resolve to over IPv6 (default: applianceIP).
    #[serde(rename = "apiVIP", default)]
    pub api_vip: Option<String>,
    /// Address `*.apps` resolves to over IPv6 (default: applianceIP).
    #[serde(rename = "ingressVIP", default)]
    pub ingress_vip: Option<String>,
    /// DHCPv6 range for clients without a reservation; without it they get
    /// no address.
    #[serde(default)]
    pub pool: Option<Pool>,
}

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Node {
    pub name: String,
    /// `bootstrap`, `master` or `worker`.
    pub role: String,
    pub mac: String,
    pub ip: String,
    /// The node's IPv6 address inside `network.ipv6.cidr` (dual-stack).
    #[serde(default)]
    pub ipv6: Option<String>,
    /// Install disk of this node (overrides `rhcos.installDev`).
    #[serde(default)]
    pub install_dev: Option<String>,
    /// Extra kernel arguments of this node's install.
    #[serde(default)]
    pub kargs: Vec<String>,
    /// The node's BMC (Redfish virtual media boot, `crc-appliance bmc`).
    #[serde(default)]
    pub bmc: Option<RawBmc>,
    /// `dhcp` or `static` for this node (default: `network.addressing`).
    #[serde(default)]
    pub addressing: Option<String>,
    /// The NIC a static address goes on, as RHCOS names it (e.g. `ens3`);
    /// required with `addressing: static`.
    #[serde(default)]
    pub interface: Option<String>,
}

/// `rhcos`: the one RHCOS boot source for VMs and bare metal.
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Rhcos {
    /// The live ISO (kernel, initramfs and rootfs are read out of it).
    #[serde(default)]
    pub iso: Option<String>,
    /// Or the three PXE artifacts.
    #[serde(default)]
    pub kernel: Option<String>,
    #[serde(default)]
    pub initramfs: Option<String>,
    #[serde(default)]
    pub rootfs: Option<String>,
    /// Install disk of bare-metal nodes (default `/dev/sda`; libvirt VMs use
    /// `libvirt.installDev`).
    #[serde(default)]
    pub install_dev: Option<String>,
    /// Extra kernel arguments of every install.
    #[serde(default)]
    pub kargs: Vec<String>,
    /// Extra kernel arguments per role.
    #[serde(default)]
    pub role_kargs: RoleKargs,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RoleKargs {
    #[serde(default)]
    pub bootstrap: Vec<String>,
    #[serde(default)]
    pub master: Vec<String>,
    #[serde(default)]
    pub worker: Vec<String>,
}

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Pool {
    pub start: String,
    pub end: String,
}

fn yes() -> bool {
    true
}
