//! The validated section of each service (`dns`, `dhcp`, `loadBalancer`,
//! `http`, `admin`, `libvirt`, `pxe`, `ha`, `ntp`, `csr`): typed, defaults
//! filled in, checked by `config::validate` like the rest of the
//! [`Cluster`](super::Cluster). Re-exported by `model::cluster`, their one
//! path; a section's own rules (who may connect, which port) are methods
//! here, rules across sections are the cluster's.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::Role;
use crate::model::net::{IpCidr, IpNet, Ipv4Net};

/// `csr:`: approve the kubelet CSRs of the nodes this appliance booted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CsrCfg {
    /// The approver's kubeconfig (resolved against the cluster file's directory).
    pub kubeconfig_file: PathBuf,
    /// How long after a node's evidence its client CSR is approved.
    pub window: Duration,
    /// Restart recovery: a NotReady Node's client CSR after its lease renewal or boot.
    pub recovery: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DnsCfg {
    pub enabled: bool,
    pub listen: Vec<SocketAddr>,
    pub ttl: u32,
    pub negative_ttl: u32,
    pub forward_timeout: Duration,
    pub records: Vec<crate::model::names::Record>,
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
    /// the machine-config frontend accepts; see [`crate::model::access`].
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
    /// [`crate::model::access`].
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
    pub allow_from: Option<Vec<crate::model::sourcenet::SourceNet>>,
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

/// The validated `ha:` section (`config/validate/ha.rs`).
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
