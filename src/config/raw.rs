//! The cluster file exactly as written. Every struct denies unknown fields;
//! addresses stay strings here and are checked in `validate`, so one bad value
//! is reported together with all the others.

use super::Dur;
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
    /// TFTP for network boot (`super::pxe`); absent = off.
    #[serde(default)]
    pub pxe: Option<super::pxe::RawPxe>,
    /// NTP server for the nodes (`super::ntp`); absent = off.
    #[serde(default)]
    pub ntp: Option<super::ntp::RawNtp>,
    /// One member of a keepalived HA pair (`super::ha`, docs/ha.md);
    /// absent = a single appliance.
    #[serde(default)]
    pub ha: Option<super::ha::RawHa>,
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
    pub bmc: Option<super::bmc::RawBmc>,
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
pub struct Dns {
    #[serde(default = "yes")]
    pub enabled: bool,
    /// UDP+TCP listen addresses (default `<applianceIP>:53`).
    #[serde(default)]
    pub listen: Option<Vec<String>>,
    #[serde(default = "dns_ttl")]
    pub ttl: Dur,
    /// SOA minimum: how long resolvers may cache NXDOMAIN/NODATA.
    #[serde(default = "dns_ttl")]
    pub negative_ttl: Dur,
    /// Timeout for one forwarded query.
    #[serde(default = "forward_timeout")]
    pub forward_timeout: Dur,
    /// Extra records inside the cluster zone (or its reverse zones).
    #[serde(default)]
    pub records: Vec<ExtraRecord>,
    /// Networks (CIDRs, or single addresses) whose secondaries may copy the
    /// zones by AXFR or IXFR over TCP; REFUSED to everyone else.
    #[serde(default)]
    pub transfer: Vec<String>,
    /// Secondaries sent a NOTIFY when a zone's serial moves: `ip` (port 53)
    /// or `ip:port`.
    #[serde(default)]
    pub notify: Vec<String>,
    /// SOA timers (default: RFC 1912's recommendations when `transfer` is
    /// set, short lab values otherwise; `minimum` defaults to `negativeTtl`).
    #[serde(default)]
    pub soa: Option<Soa>,
}

/// `dns.soa`: the SOA timers secondaries follow.
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Soa {
    /// How often a secondary checks the serial.
    #[serde(default)]
    pub refresh: Option<Dur>,
    /// How long a secondary waits after a failed refresh.
    #[serde(default)]
    pub retry: Option<Dur>,
    /// How long a secondary serves the zone without reaching the appliance.
    #[serde(default)]
    pub expire: Option<Dur>,
    /// The negative-caching TTL (RFC 2308); replaces `negativeTtl`.
    #[serde(default)]
    pub minimum: Option<Dur>,
}

impl Default for Dns {
    fn default() -> Self {
        Dns {
            enabled: true,
            listen: None,
            ttl: dns_ttl(),
            negative_ttl: dns_ttl(),
            forward_timeout: forward_timeout(),
            records: Vec::new(),
            transfer: Vec::new(),
            notify: Vec::new(),
            soa: None,
        }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExtraRecord {
    /// Relative to the cluster zone (`registry`) or absolute with a trailing dot.
    pub name: String,
    /// A, AAAA, CNAME, TXT, SRV or PTR.
    #[serde(rename = "type")]
    pub rtype: String,
    /// Record data in zone-file syntax (`10.0.0.5`, `0 10 443 host.`, ...).
    pub value: String,
    #[serde(default)]
    pub ttl: Option<Dur>,
}

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Dhcp {
    #[serde(default = "yes")]
    pub enabled: bool,
    /// UDP listen address (default `0.0.0.0:67`).
    #[serde(default)]
    pub listen: Option<String>,
    #[serde(default = "lease_time")]
    pub lease_time: Dur,
    /// Dynamic range for unknown MACs; without it unknown MACs are ignored.
    #[serde(default)]
    pub pool: Option<Pool>,
    /// Where leases are persisted (default `/var/lib/crc-appliance/<name>-leases.json`).
    #[serde(default)]
    pub lease_file: Option<String>,
    /// Optional network boot options.
    #[serde(default)]
    pub pxe: Option<Pxe>,
    /// Remote subnets behind DHCP relays.
    #[serde(default)]
    pub segments: Vec<Segment>,
    /// Relay agent addresses answered: IPv4 ones are giaddrs (besides
    /// every segment's gateway); IPv6 ones are the sources of the DHCPv6
    /// Relay-Forwards answered (no other is).
    #[serde(default)]
    pub relays: Vec<String>,
    /// DHCPv6 UDP listen address (default `[::]:547`; only with
    /// `network.ipv6`).
    #[serde(default)]
    pub listen6: Option<String>,
    /// Where DHCPv6 bindings are persisted (default: the lease file's name
    /// with `-v6` before its extension).
    #[serde(default)]
    pub binding_file6: Option<String>,
    /// `server` (default: the appliance owns the segment's DHCP) or `proxy`
    /// (proxyDHCP beside the site's server: boot answers to the
    /// inventory's PXE clients only, never an address).
    #[serde(default)]
    pub mode: Option<String>,
    /// Start in `server` mode even when another DHCP server answers on
    /// the segment (default false: `serve` refuses to start).
    #[serde(default)]
    pub allow_other_servers: bool,
}

impl Default for Dhcp {
    fn default() -> Self {
        Dhcp {
            enabled: true,
            listen: None,
            lease_time: lease_time(),
            pool: None,
            lease_file: None,
            pxe: None,
            segments: Vec::new(),
            relays: Vec::new(),
            listen6: None,
            binding_file6: None,
            mode: None,
            allow_other_servers: false,
        }
    }
}

/// `dhcp.segments[]`: a subnet behind a DHCP relay.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Segment {
    pub cidr: String,
    pub gateway: String,
    #[serde(default)]
    pub pool: Option<Pool>,
    #[serde(default)]
    pub dns: Option<Vec<String>>,
}

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Pool {
    pub start: String,
    pub end: String,
}

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Pxe {
    /// siaddr / TFTP server (default: applianceIP).
    #[serde(default)]
    pub next_server: Option<String>,
    /// Boot file for BIOS/UEFI PXE firmware (option 67), e.g. `undionly.kpxe`.
    #[serde(default)]
    pub boot_file: Option<String>,
    /// Script URL handed to clients that identify as iPXE (user class `iPXE`).
    #[serde(default)]
    pub ipxe_script_url: Option<String>,
}

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LoadBalancer {
    /// Default on; off for single-node OpenShift (api and `*.apps` resolve
    /// to the node) unless set to `true` here.
    #[serde(default)]
    pub enabled: Option<bool>,
    #[serde(default)]
    pub listen: PoolAddrs,
    #[serde(default)]
    pub health_check: HealthCheck,
    /// PEM CA bundle to verify API/MCS certificates; unverified when absent.
    #[serde(default)]
    pub ca_file: Option<String>,
    /// Per-pool CA bundles (the API and the machine-config server are
    /// signed by different CAs in OpenShift); each overrides `caFile`.
    #[serde(default)]
    pub ca_files: CaFiles,
    /// Concurrent client connections per frontend.
    #[serde(default = "max_connections")]
    pub max_connections: usize,
    /// Close a proxied connection idle this long in both directions.
    #[serde(default = "idle_timeout")]
    pub idle_timeout: Dur,
    #[serde(default = "connect_timeout")]
    pub connect_timeout: Dur,
    /// Ports the backends listen on (defaults 6443, 22623, 80, 443); lets a lab
    /// or a test run backends on unprivileged ports.
    #[serde(default)]
    pub backend_ports: BackendPorts,
    /// Per node, `ip:port` the LB connects to instead of `<node ip>:<backend
    /// port>` in a pool (backends behind NAT, or several on one host, as in
    /// the benchmark). Keys are node names.
    #[serde(default)]
    pub backend_overrides: std::collections::BTreeMap<String, PoolAddrs>,
    /// Networks (IPv4 CIDRs) besides the nodes and the appliance host whose
    /// connections the machine-config frontend (22623) accepts.
    #[serde(default)]
    pub machine_config_client_cidrs: Vec<String>,
    /// `auto` (default): the LB drains the bootstrap by itself once the
    /// bootstrap is complete; `manual`: only `lb disable bootstrap` does.
    #[serde(default)]
    pub remove_bootstrap: Option<String>,
    /// How long a worker may go from its first machine-config contact
    /// without a healthy ingress backend before `status`, `wait-for` and
    /// the page suggest approving its pending CSRs (default 10m).
    #[serde(default = "csr_hint_after")]
    pub csr_hint_after: Dur,
}

/// `loadBalancer.caFiles`: a CA bundle per HTTPS-checked pool.
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CaFiles {
    #[serde(default)]
    pub api: Option<String>,
    #[serde(default)]
    pub machine_config: Option<String>,
}

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BackendPorts {
    #[serde(default = "p6443")]
    pub api: u16,
    #[serde(default = "p22623")]
    pub machine_config: u16,
    #[serde(default = "p80")]
    pub ingress_http: u16,
    #[serde(default = "p443")]
    pub ingress_https: u16,
}

impl Default for BackendPorts {
    fn default() -> Self {
        BackendPorts {
            api: 6443,
            machine_config: 22623,
            ingress_http: 80,
            ingress_https: 443,
        }
    }
}

fn p6443() -> u16 {
    6443
}
fn p22623() -> u16 {
    22623
}
fn p80() -> u16 {
    80
}
fn p443() -> u16 {
    443
}

impl Default for LoadBalancer {
    fn default() -> Self {
        LoadBalancer {
            enabled: None,
            listen: PoolAddrs::default(),
            health_check: HealthCheck::default(),
            ca_file: None,
            ca_files: CaFiles::default(),
            max_connections: max_connections(),
            idle_timeout: idle_timeout(),
            connect_timeout: connect_timeout(),
            backend_ports: BackendPorts::default(),
            backend_overrides: Default::default(),
            machine_config_client_cidrs: Vec::new(),
            remove_bootstrap: None,
            csr_hint_after: csr_hint_after(),
        }
    }
}

/// One optional address per LB pool: the frontend listen addresses
/// (`loadBalancer.listen`, each defaulting to `<apiVIP or ingressVIP>:<port>`)
/// and one node's backend addresses (`loadBalancer.backendOverrides.<node>`,
/// `ip:port`, defaulting to `<node ip>:<backendPorts>`).
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PoolAddrs {
    /// Kubernetes API, 6443.
    #[serde(default)]
    pub api: Option<String>,
    /// Machine Config Server, 22623.
    #[serde(default)]
    pub machine_config: Option<String>,
    /// Ingress HTTP, 80.
    #[serde(default)]
    pub ingress_http: Option<String>,
    /// Ingress HTTPS, 443.
    #[serde(default)]
    pub ingress_https: Option<String>,
}

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HealthCheck {
    #[serde(default = "hc_interval")]
    pub interval: Dur,
    #[serde(default = "hc_timeout")]
    pub timeout: Dur,
    /// Consecutive successes before a backend becomes healthy.
    #[serde(default = "hc_rise")]
    pub rise: u32,
    /// Consecutive failures before a backend becomes unhealthy.
    #[serde(default = "hc_fall")]
    pub fall: u32,
}

impl Default for HealthCheck {
    fn default() -> Self {
        HealthCheck {
            interval: hc_interval(),
            timeout: hc_timeout(),
            rise: hc_rise(),
            fall: hc_fall(),
        }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Http {
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Default `<applianceIP>:8080`.
    #[serde(default)]
    pub listen: Option<String>,
    /// RHCOS images (ISO, kernel, initramfs, rootfs), served under /images/.
    #[serde(default = "images_dir")]
    pub images_dir: String,
    /// `<role>.ign` and optional `<node>.ign` files, served under /ignition/.
    #[serde(default = "ignition_dir")]
    pub ignition_dir: String,
    /// Connections one client address may hold at once (default 64).
    #[serde(default = "max_connections_per_client")]
    pub max_connections_per_client: u32,
    /// Networks (IPv4 CIDRs) besides the cluster's that may fetch the
    /// per-node boot ISOs `/boot/<node>.iso`: the BMCs' management network.
    #[serde(default)]
    pub boot_iso_cidrs: Vec<String>,
    /// Networks (IPv4 CIDRs) that may fetch every ignition config and boot
    /// ISO besides the nodes they belong to and the appliance host: an
    /// operator's jump host (`a.b.c.d/32`).
    #[serde(default)]
    pub ignition_client_cidrs: Vec<String>,
    /// The HTTPS listener of the boot ISOs (`/boot/<node>.iso` only);
    /// default `<applianceIP>:8443`. It runs when this or `tls` is set, or
    /// when a node has a `bmc` whose `media` is not `http`.
    #[serde(default)]
    pub tls_listen: Option<String>,
    /// The certificate and key of the HTTPS listener; without it the
    /// appliance generates a self-signed one for its address and keeps it
    /// in its state directory.
    #[serde(default)]
    pub tls: Option<HttpTls>,
}

/// `http.tls`: PEM files of the HTTPS listener.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpTls {
    /// Certificate chain (PEM), the server's certificate first.
    pub cert_file: String,
    /// Its private key (PEM: PKCS#8, PKCS#1 or SEC1).
    pub key_file: String,
}

fn max_connections_per_client() -> u32 {
    64
}

impl Default for Http {
    fn default() -> Self {
        Http {
            enabled: true,
            listen: None,
            images_dir: images_dir(),
            ignition_dir: ignition_dir(),
            max_connections_per_client: max_connections_per_client(),
            boot_iso_cidrs: Vec::new(),
            ignition_client_cidrs: Vec::new(),
            tls_listen: None,
            tls: None,
        }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Admin {
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Status, metrics and control API (default `127.0.0.1:9180`).
    #[serde(default = "admin_listen")]
    pub listen: String,
    /// File (mode 0600) holding the token that control requests must carry;
    /// required when `listen` is not a loopback address.
    #[serde(default)]
    pub token_file: Option<String>,
    /// Source networks (IPv4 or IPv6 CIDR) whose connections the admin
    /// listener answers, besides loopback, this host and `ha.peer`; others
    /// are closed at once. Absent: every source may read `/status`,
    /// `/metrics` and the page.
    #[serde(default)]
    pub allow_from: Option<Vec<String>>,
}

impl Default for Admin {
    fn default() -> Self {
        Admin {
            enabled: true,
            listen: admin_listen(),
            token_file: None,
            allow_from: None,
        }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Libvirt {
    /// Connection URI (default `qemu:///system`).
    #[serde(default = "libvirt_uri")]
    pub uri: String,
    /// Moved to `rhcos.iso` (kept only to say so).
    #[serde(default)]
    pub iso: Option<String>,
    #[serde(default)]
    pub pool: LibvirtPool,
    #[serde(default)]
    pub network: LibvirtNetwork,
    #[serde(default)]
    pub resources: Resources,
    /// Install disk inside the guest (default `/dev/vda`).
    #[serde(default = "install_dev")]
    pub install_dev: String,
    /// Start the VMs when `serve` starts.
    #[serde(default)]
    pub start_on_serve: bool,
}

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LibvirtPool {
    #[serde(default = "pool_name")]
    pub name: String,
    /// Directory of the pool (default `/var/lib/libvirt/images/crc-appliance`).
    #[serde(default = "pool_path")]
    pub path: String,
}

impl Default for LibvirtPool {
    fn default() -> Self {
        LibvirtPool {
            name: pool_name(),
            path: pool_path(),
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LibvirtNetwork {
    /// Network name (default: the cluster name).
    #[serde(default)]
    pub name: Option<String>,
    /// Bridge device (default `crc-<name>`, at most 15 characters).
    #[serde(default)]
    pub bridge: Option<String>,
    /// `appliance` (no libvirt DHCP/DNS; the appliance serves both) or
    /// `forwarder` (libvirt's dnsmasq forwards the cluster domain to the appliance).
    #[serde(default)]
    pub mode: Option<String>,
    /// Add `<forward mode='nat'/>` (default false: an isolated network).
    #[serde(default)]
    pub nat: bool,
}

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Resources {
    #[serde(default = "res_bootstrap")]
    pub bootstrap: Resource,
    #[serde(default = "res_master")]
    pub master: Resource,
    #[serde(default = "res_worker")]
    pub worker: Resource,
}

impl Default for Resources {
    fn default() -> Self {
        Resources {
            bootstrap: res_bootstrap(),
            master: res_master(),
            worker: res_worker(),
        }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Resource {
    pub cpus: u32,
    /// MiB.
    pub memory_mib: u64,
    /// GiB.
    pub disk_gib: u64,
}

fn yes() -> bool {
    true
}
fn dns_ttl() -> Dur {
    Dur::secs(30)
}
fn forward_timeout() -> Dur {
    Dur::secs(2)
}
fn lease_time() -> Dur {
    Dur::secs(3600)
}
fn max_connections() -> usize {
    10_000
}
fn idle_timeout() -> Dur {
    Dur::secs(3600)
}
fn connect_timeout() -> Dur {
    Dur::secs(3)
}
fn csr_hint_after() -> Dur {
    Dur::secs(600)
}
fn hc_interval() -> Dur {
    Dur::secs(5)
}
fn hc_timeout() -> Dur {
    Dur::secs(3)
}
fn hc_rise() -> u32 {
    2
}
fn hc_fall() -> u32 {
    3
}
fn images_dir() -> String {
    "images".into()
}
fn ignition_dir() -> String {
    "ignition".into()
}
fn admin_listen() -> String {
    "127.0.0.1:9180".into()
}
fn libvirt_uri() -> String {
    "qemu:///system".into()
}
fn install_dev() -> String {
    "/dev/vda".into()
}
fn pool_name() -> String {
    "crc-appliance".into()
}
fn pool_path() -> String {
    "/var/lib/libvirt/images/crc-appliance".into()
}
fn res_bootstrap() -> Resource {
    Resource {
        cpus: 4,
        memory_mib: 16384,
        disk_gib: 100,
    }
}
fn res_master() -> Resource {
    res_bootstrap()
}
fn res_worker() -> Resource {
    Resource {
        cpus: 2,
        memory_mib: 8192,
        disk_gib: 100,
    }
}
