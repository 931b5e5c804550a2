//! The validated cluster: typed, defaults filled in, every cross-field rule
//! checked (by `config::validate`, which is the only producer).

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

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
    /// The `ha:` section (one member of a keepalived pair), if present.
    pub ha: Option<HaCfg>,
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

/// Why a role, CIDR or MAC address in the cluster file does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("unknown role {0:?} ({hint}roles: bootstrap, master (alias control-plane), worker (alias compute))", hint = did_you_mean(.0))]
    Role(String),
    #[error("{0:?} is not in CIDR form (a.b.c.d/prefix)")]
    NotCidr(String),
    #[error("{0:?} is not an IPv4 address")]
    Address(String),
    #[error("prefix {0:?} is not 0..32")]
    Prefix(String),
    #[error("{given} has host bits set; the network is {network}")]
    HostBits { given: String, network: String },
    #[error(
        "{0:?} is not a MAC address (six hex octets separated by ':' or '-', e.g. 52:54:00:12:34:56)"
    )]
    Mac(String),
}

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
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, ParseError> {
        match s {
            "bootstrap" => Ok(Role::Bootstrap),
            "master" | "control-plane" => Ok(Role::Master),
            "worker" | "compute" => Ok(Role::Worker),
            other => Err(ParseError::Role(other.to_string())),
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

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DnsCfg {
    pub enabled: bool,
    pub listen: Vec<SocketAddr>,
    pub ttl: u32,
    pub negative_ttl: u32,
    pub forward_timeout: Duration,
    pub records: Vec<super::names::Record>,
    /// Who may copy the zones (AXFR/IXFR over TCP): `dns.transfer`.
    pub transfer: Vec<IpCidr>,
    /// Where a NOTIFY goes when a zone's serial moves: `dns.notify`.
    pub notify: Vec<SocketAddr>,
    /// The SOA timers of every zone.
    pub soa: SoaTimers,
}

/// The SOA timers, in seconds (`dns.soa`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct SoaTimers {
    pub refresh: u32,
    pub retry: u32,
    pub expire: u32,
    /// Negative-caching TTL (RFC 2308).
    pub minimum: u32,
}

/// An IPv4 or IPv6 network (an access list entry).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum IpCidr {
    V4(Ipv4Net),
    V6(super::ipv6::Ipv6Net),
}

impl IpCidr {
    /// Is `ip` inside (IPv4-mapped IPv6 addresses count as IPv4)?
    pub fn contains(&self, ip: std::net::IpAddr) -> bool {
        let ip = match ip {
            std::net::IpAddr::V6(v6) => v6.to_ipv4_mapped().map(Into::into).unwrap_or(ip),
            v4 => v4,
        };
        match (self, ip) {
            (IpCidr::V4(n), std::net::IpAddr::V4(a)) => n.contains(a),
            (IpCidr::V6(n), std::net::IpAddr::V6(a)) => n.contains(a),
            _ => false,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DhcpCfg {
    pub enabled: bool,
    pub listen: SocketAddr,
    pub lease_time: Duration,
    /// Inclusive range for unknown MACs.
    pub pool: Option<(Ipv4Addr, Ipv4Addr)>,
    pub lease_file: PathBuf,
    pub pxe: Option<PxeCfg>,
    /// Remote subnets behind DHCP relays (`dhcp.segments`), none
    /// overlapping `network.cidr` or each other.
    pub segments: Vec<SegmentCfg>,
    /// Relay agent addresses (giaddr) answered besides every segment's
    /// gateway (`dhcp.relays`): unicast, not the appliance's address, no
    /// subnet's network or broadcast address, no duplicates.
    pub relays: Vec<Ipv4Addr>,
    /// DHCPv6 relay agents (the IPv6 entries of `dhcp.relays`): a
    /// Relay-Forward is answered only from one of these source addresses.
    pub relays6: Vec<std::net::Ipv6Addr>,
    /// The DHCPv6 socket (`dhcp.listen6`, `[::]:547`); bound only with
    /// `network.ipv6`.
    pub listen6: SocketAddr,
    /// The DHCPv6 binding file (`dhcp.bindingFile6`).
    pub binding_file6: PathBuf,
    /// `dhcp.mode`: own the segment, or proxyDHCP beside the site's server.
    pub mode: DhcpMode,
    /// `dhcp.allowOtherServers`: start in server mode even when another
    /// DHCP server answers on the segment.
    pub allow_other_servers: bool,
}

/// `dhcp.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DhcpMode {
    /// The appliance is the segment's DHCP server (addresses and boot).
    #[default]
    Server,
    /// proxyDHCP: the site's server lends the addresses; the appliance
    /// answers only the inventory's PXE clients, with boot options.
    Proxy,
}

impl DhcpCfg {
    /// The PXE boot server socket of `dhcp.mode: proxy` (None in server
    /// mode): port 4011 beside port 67, else the listen port + 2 (test
    /// clusters, whose client port is the listen port + 1).
    pub fn boot_server_listen(&self) -> Option<SocketAddr> {
        (self.mode == DhcpMode::Proxy).then(|| {
            let port = match self.listen.port() {
                67 => 4011,
                p => p.wrapping_add(2),
            };
            SocketAddr::new(self.listen.ip(), port)
        })
    }

    /// Every relay address (giaddr) a relayed request may carry: each
    /// segment's gateway and `dhcp.relays`.
    pub fn relay_addresses(&self) -> Vec<Ipv4Addr> {
        let mut v: Vec<Ipv4Addr> = self.segments.iter().map(|s| s.gateway).collect();
        v.extend(self.relays.iter().copied());
        v.sort();
        v.dedup();
        v
    }
}

/// A relayed subnet (`dhcp.segments[]`): requests whose relay address
/// (giaddr, or the relay's link-selection sub-option) lies in `cidr` are
/// answered with this subnet's mask, router and DNS servers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SegmentCfg {
    pub cidr: Ipv4Net,
    pub gateway: Ipv4Addr,
    /// Inclusive range for unknown MACs on this segment.
    pub pool: Option<(Ipv4Addr, Ipv4Addr)>,
    /// DNS servers handed out (default: `network.applianceIP`).
    pub dns: Vec<Ipv4Addr>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PxeCfg {
    pub next_server: Ipv4Addr,
    pub boot_file: Option<String>,
    pub ipxe_script_url: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LbCfg {
    pub enabled: bool,
    pub api: SocketAddr,
    pub machine_config: SocketAddr,
    pub ingress_http: SocketAddr,
    pub ingress_https: SocketAddr,
    pub backend_ports: BackendPortsCfg,
    pub health: HealthCfg,
    /// CA bundle verifying the api pool's checks (`caFiles.api`, else `caFile`).
    pub api_ca_file: Option<PathBuf>,
    /// CA bundle verifying the machine-config pool's checks
    /// (`caFiles.machineConfig`, else `caFile`).
    pub machine_config_ca_file: Option<PathBuf>,
    pub max_connections: usize,
    pub idle_timeout: Duration,
    pub connect_timeout: Duration,
    /// Node name → per-pool backend address replacing `<node ip>:<port>`.
    pub backend_overrides: std::collections::BTreeMap<String, BackendOverrideCfg>,
    /// Networks besides the nodes and the appliance host whose connections
    /// the machine-config frontend accepts; see [`super::access`].
    pub machine_config_client_cidrs: Vec<Ipv4Net>,
    /// Whether the LB drains the bootstrap by itself once it is complete.
    pub remove_bootstrap: RemoveBootstrap,
    /// A worker that contacted the machine-config server this long ago
    /// without a healthy ingress backend gets the pending-CSR hint.
    pub csr_hint_after: Duration,
}

/// `loadBalancer.removeBootstrap`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RemoveBootstrap {
    /// Once the bootstrap is complete (evidence or marker) and every master
    /// is healthy in the api pool.
    #[default]
    Auto,
    /// Only when the operator disables it (`lb disable bootstrap`).
    Manual,
}

/// Backend addresses of one node per pool (`None`: derived as usual).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct BackendOverrideCfg {
    pub api: Option<SocketAddr>,
    pub machine_config: Option<SocketAddr>,
    pub ingress_http: Option<SocketAddr>,
    pub ingress_https: Option<SocketAddr>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct BackendPortsCfg {
    pub api: u16,
    pub machine_config: u16,
    pub ingress_http: u16,
    pub ingress_https: u16,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct HealthCfg {
    pub interval: Duration,
    pub timeout: Duration,
    pub rise: u32,
    pub fall: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HttpCfg {
    pub enabled: bool,
    pub listen: SocketAddr,
    pub images_dir: PathBuf,
    pub ignition_dir: PathBuf,
    /// Connections one client IP may hold at once (loopback included);
    /// more are closed at accept.
    pub max_connections_per_client: usize,
    /// Networks allowed to fetch `/boot/<node>.iso` besides the node itself
    /// (the BMCs' management network).
    pub boot_iso_cidrs: Vec<Ipv4Net>,
    /// Networks allowed every ignition config and boot ISO besides the
    /// owning nodes and the appliance host (a jump host); see
    /// [`super::access`].
    pub ignition_client_cidrs: Vec<Ipv4Net>,
    /// The HTTPS listener of the boot ISOs, when it runs (`http.tlsListen`
    /// or `http.tls` set, or a node's BMC may be given the `https://` URL).
    pub tls_listen: Option<SocketAddr>,
    /// `http.tls`: the operator's certificate; `None`: the appliance's own
    /// (generated in the state directory).
    pub tls: Option<HttpTlsCfg>,
}

/// `http.tls`, validated: both files exist and are readable (that they
/// parse and match is checked before the listener binds).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpTlsCfg {
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AdminCfg {
    pub enabled: bool,
    pub listen: SocketAddr,
    /// The API token's file (checked: exists, mode 0600 or stricter); the
    /// token itself is read by the admin service and the CLI, never kept
    /// in the configuration.
    pub token_file: Option<PathBuf>,
    /// `admin.allowFrom`: with it, only these sources (plus loopback, this
    /// host and `ha.peer`) reach the listener; `None`: every source.
    pub allow_from: Option<Vec<super::sourcenet::SourceNet>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NetMode {
    /// libvirt runs no DHCP/DNS on the network; the appliance serves both.
    Appliance,
    /// libvirt's dnsmasq keeps DNS and forwards the cluster domain to the appliance.
    Forwarder,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LibvirtCfg {
    pub uri: String,
    /// The live ISO the VMs boot from (`rhcos.iso`).
    pub iso: PathBuf,
    pub pool_name: String,
    pub pool_path: PathBuf,
    pub network_name: String,
    pub bridge: String,
    pub mode: NetMode,
    pub nat: bool,
    pub bootstrap: ResourceCfg,
    pub master: ResourceCfg,
    pub worker: ResourceCfg,
    pub install_dev: String,
    pub start_on_serve: bool,
}

impl LibvirtCfg {
    pub fn resources(&self, role: Role) -> &ResourceCfg {
        match role {
            Role::Bootstrap => &self.bootstrap,
            Role::Master => &self.master,
            Role::Worker => &self.worker,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ResourceCfg {
    pub cpus: u32,
    pub memory_mib: u64,
    pub disk_gib: u64,
}

/// The validated `pxe:` section.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TftpCfg {
    pub enabled: bool,
    pub listen: SocketAddr,
    pub root: PathBuf,
    pub max_transfers: usize,
    /// Transfers one client address may hold at once.
    pub max_transfers_per_client: usize,
    pub timeout: Duration,
    pub retries: u32,
    pub allow_symlinks_to: Vec<PathBuf>,
    /// Boot options for pool clients too (default: nodes only).
    pub pool: bool,
}

/// The validated `ha:` section (`config::ha`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HaCfg {
    /// The other member's own address.
    pub peer: Ipv4Addr,
    /// This member's own address (`None`: the interface's primary one).
    pub own_ip: Option<Ipv4Addr>,
    /// `network.interface`: where the VIPs live.
    pub interface: String,
    pub priority: u8,
    pub virtual_router_id: u8,
    /// The pair's shared token (read when used, never stored here).
    pub token_file: PathBuf,
}

/// The validated `ntp:` section.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NtpCfg {
    pub enabled: bool,
    pub listen: SocketAddr,
    /// Serve the host clock at this stratum even when it is not
    /// synchronised (`None`: follow the kernel's state).
    pub local_stratum: Option<u8>,
    /// Requests per second per client address (burst: twice as many).
    pub client_rate: u32,
    /// Client networks answered (`ntp.allowFrom`); `None`: every client.
    pub allow_from: Option<Vec<IpNet>>,
}

/// An IPv4 or IPv6 network (`ntp.allowFrom`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IpNet {
    V4(Ipv4Net),
    V6(super::ipv6::Ipv6Net),
}

impl IpNet {
    /// Is `ip` inside (an IPv4-mapped IPv6 address counts as its IPv4
    /// address)?
    pub fn contains(&self, ip: std::net::IpAddr) -> bool {
        use std::net::IpAddr;
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        match (self, ip) {
            (IpNet::V4(n), IpAddr::V4(a)) => n.contains(a),
            (IpNet::V6(n), IpAddr::V6(a)) => n.contains(a),
            _ => false,
        }
    }
}

impl fmt::Display for IpNet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IpNet::V4(n) => n.fmt(f),
            IpNet::V6(n) => write!(f, "{}/{}", n.network(), n.prefix()),
        }
    }
}

impl Serialize for IpNet {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl FromStr for IpNet {
    type Err = String;
    /// `a.b.c.d/n`, `x::/n`, or a bare address (one host).
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        let cidr = if s.contains('/') {
            s.to_string()
        } else if s.contains(':') {
            format!("{s}/128")
        } else {
            format!("{s}/32")
        };
        if cidr.contains(':') {
            cidr.parse::<super::ipv6::Ipv6Net>()
                .map(IpNet::V6)
                .map_err(|e| e.to_string())
        } else {
            cidr.parse::<Ipv4Net>()
                .map(IpNet::V4)
                .map_err(|e| e.to_string())
        }
    }
}

/// An IPv4 network in CIDR form; the address is stored masked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv4Net {
    addr: Ipv4Addr,
    prefix: u8,
}

impl Ipv4Net {
    pub fn new(addr: Ipv4Addr, prefix: u8) -> Option<Self> {
        (prefix <= 32).then(|| {
            let mask = Self::mask_bits(prefix);
            Ipv4Net {
                addr: Ipv4Addr::from(u32::from(addr) & mask),
                prefix,
            }
        })
    }
    fn mask_bits(prefix: u8) -> u32 {
        if prefix == 0 {
            0
        } else {
            u32::MAX << (32 - u32::from(prefix))
        }
    }
    pub fn network(&self) -> Ipv4Addr {
        self.addr
    }
    pub fn prefix(&self) -> u8 {
        self.prefix
    }
    pub fn netmask(&self) -> Ipv4Addr {
        Ipv4Addr::from(Self::mask_bits(self.prefix))
    }
    pub fn broadcast(&self) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.addr) | !Self::mask_bits(self.prefix))
    }
    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        u32::from(ip) & Self::mask_bits(self.prefix) == u32::from(self.addr)
    }
    /// Is `ip` a client of the cluster network: inside this network or on
    /// loopback (IPv4-mapped IPv6 addresses count as their IPv4 address)?
    /// Who may have other names resolved (DNS recursion).
    pub fn contains_or_loopback(&self, ip: std::net::IpAddr) -> bool {
        let v4 = match ip {
            std::net::IpAddr::V4(v4) => v4,
            std::net::IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => v4,
                None => return v6.is_loopback(),
            },
        };
        v4.is_loopback() || self.contains(v4)
    }
    /// True for the network and broadcast addresses of a /0../30.
    pub fn is_reserved(&self, ip: Ipv4Addr) -> bool {
        self.prefix <= 30 && (ip == self.network() || ip == self.broadcast())
    }
}

impl fmt::Display for Ipv4Net {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

impl Serialize for Ipv4Net {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl FromStr for Ipv4Net {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, ParseError> {
        let (a, p) = s
            .split_once('/')
            .ok_or_else(|| ParseError::NotCidr(s.to_string()))?;
        let addr: Ipv4Addr = a.parse().map_err(|_| ParseError::Address(a.to_string()))?;
        let net = p
            .parse()
            .ok()
            .and_then(|prefix| Ipv4Net::new(addr, prefix))
            .ok_or_else(|| ParseError::Prefix(p.to_string()))?;
        if net.addr != addr {
            return Err(ParseError::HostBits {
                given: s.to_string(),
                network: net.to_string(),
            });
        }
        Ok(net)
    }
}

/// A 48-bit Ethernet address; displayed lower case with colons.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MacAddr(pub [u8; 6]);

impl MacAddr {
    pub fn octets(&self) -> [u8; 6] {
        self.0
    }
    pub fn is_multicast(&self) -> bool {
        self.0[0] & 1 == 1
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let o = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            o[0], o[1], o[2], o[3], o[4], o[5]
        )
    }
}

impl Serialize for MacAddr {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for MacAddr {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl FromStr for MacAddr {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, ParseError> {
        let parts: Vec<&str> = s.split([':', '-']).collect();
        let bad = || ParseError::Mac(s.to_string());
        if parts.len() != 6 {
            return Err(bad());
        }
        let mut out = [0u8; 6];
        for (o, p) in out.iter_mut().zip(&parts) {
            if p.len() != 2 {
                return Err(bad());
            }
            *o = u8::from_str_radix(p, 16).map_err(|_| bad())?;
        }
        Ok(MacAddr(out))
    }
}

#[cfg(test)]
mod tests;
