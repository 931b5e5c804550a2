//! The `/status` document as types: the one schema that the admin API
//! serializes, the status page renders, and the tests and the CLI
//! deserialize. Field names are camelCase and stable (docs/http.md).
//!
//! Each service returns its section as a [`ServiceStatus`]; the admin API
//! puts it under the service's name in [`StatusDoc`].

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

use crate::model::catalogue::PoolKind;
use crate::model::cluster::Role;
use crate::model::cluster::{MacAddr, RemoveBootstrap};

/// `GET /status`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusDoc {
    pub cluster: String,
    pub version: String,
    pub network: NetworkStatus,
    pub nodes: Vec<NodeRow>,
    pub reload: ReloadStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dns: Option<DnsStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dhcp: Option<DhcpStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dhcp6: Option<Dhcp6Status>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lb: Option<LbStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<HttpStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub libvirt: Option<LibvirtStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admin: Option<AdminStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tftp: Option<TftpStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ntp: Option<NtpStatus>,
    /// The mirror registry (`services::registry::status::RegistryStatus`
    /// as JSON: the type lives in the service's folder).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registry: Option<serde_json::Value>,
    /// This member of an HA pair (`ha:`; docs/ha.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ha: Option<crate::runtime::ha::HaStatus>,
    /// The install timeline (`serve` only; docs/operations.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeline: Option<TimelineStatus>,
}

/// One service's section of [`StatusDoc`].
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum ServiceStatus {
    Dns(DnsStatus),
    Dhcp(DhcpStatus),
    Dhcp6(Dhcp6Status),
    Lb(LbStatus),
    // Boxed: the HTTP section (netboot rows, https, twins) is the largest.
    Http(Box<HttpStatus>),
    Libvirt(LibvirtStatus),
    Admin(AdminStatus),
    Tftp(TftpStatus),
    Ntp(NtpStatus),
    Registry(serde_json::Value),
}

impl StatusDoc {
    /// A document with the cluster's summary and no service section yet.
    pub fn new(
        cluster: String,
        network: NetworkStatus,
        nodes: Vec<NodeRow>,
        reload: ReloadStatus,
    ) -> StatusDoc {
        StatusDoc {
            cluster,
            version: env!("CARGO_PKG_VERSION").to_string(),
            network,
            nodes,
            reload,
            dns: None,
            dhcp: None,
            dhcp6: None,
            lb: None,
            http: None,
            libvirt: None,
            admin: None,
            tftp: None,
            ntp: None,
            registry: None,
            ha: None,
            timeline: None,
        }
    }

    /// Put a service's section in its place.
    pub fn insert(&mut self, s: ServiceStatus) {
        match s {
            ServiceStatus::Dns(x) => self.dns = Some(x),
            ServiceStatus::Dhcp(x) => self.dhcp = Some(x),
            ServiceStatus::Dhcp6(x) => self.dhcp6 = Some(x),
            ServiceStatus::Lb(x) => self.lb = Some(x),
            ServiceStatus::Http(x) => self.http = Some(*x),
            ServiceStatus::Libvirt(x) => self.libvirt = Some(x),
            ServiceStatus::Admin(x) => self.admin = Some(x),
            ServiceStatus::Tftp(x) => self.tftp = Some(x),
            ServiceStatus::Ntp(x) => self.ntp = Some(x),
            ServiceStatus::Registry(x) => self.registry = Some(x),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkStatus {
    pub cidr: String,
    pub gateway: Ipv4Addr,
    #[serde(rename = "applianceIP")]
    pub appliance_ip: Ipv4Addr,
    #[serde(rename = "apiVIP")]
    pub api_vip: Ipv4Addr,
    #[serde(rename = "ingressVIP")]
    pub ingress_vip: Ipv4Addr,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NodeRow {
    pub name: String,
    pub role: Role,
    pub mac: String,
    pub ip: Ipv4Addr,
    pub fqdn: String,
}

/// How a reload ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReloadResult {
    /// The new plan is being served.
    Applied,
    /// The file is invalid; the running configuration is kept.
    Invalid,
    /// The file is valid but could not be applied (a listen address is
    /// taken, a change that needs a restart); the running configuration is
    /// kept.
    Failed,
}

/// The outcome of the last reload (`reload`), also the answer of
/// `POST /api/reload`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReloadStatus {
    /// Configuration generation served: 1 at start, +1 per applied reload.
    pub generation: u64,
    /// Reload attempts so far (applied or not).
    pub attempts: u64,
    /// Result of the last attempt; `None` before the first one.
    pub result: Option<ReloadResult>,
    pub ok: bool,
    /// HTTP date and Unix time of the last attempt.
    pub at: Option<String>,
    pub unix_time: Option<u64>,
    /// `SIGHUP` or `admin API`.
    pub trigger: Option<String>,
    /// How long the last attempt took, from the signal to the swap.
    pub duration_ms: Option<u64>,
    pub error: Option<String>,
    /// What the last applied reload changed, one line each.
    pub changes: Vec<String>,
}

/// `dns`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DnsStatus {
    pub listen: Vec<String>,
    pub zones: Vec<String>,
    pub records: usize,
    pub upstream: Vec<String>,
    /// Responses sent by RCODE name.
    pub responses: BTreeMap<String, u64>,
    pub forwarded: u64,
    pub refused_recursion: u64,
    pub dropped: u64,
    pub packet_cache: PacketCacheStatus,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PacketCacheStatus {
    pub hits: u64,
    pub entries: usize,
}

/// `dhcp`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DhcpStatus {
    pub listen: Option<String>,
    pub interface: Option<String>,
    pub lease_file: String,
    pub leases: Vec<LeaseRow>,
    pub declined: Vec<DeclinedRow>,
    /// Messages received by type (`discover` … `inform`, `other`).
    pub received: BTreeMap<String, u64>,
    /// Replies sent by type (`offer`, `ack`, `nak`).
    pub sent: BTreeMap<String, u64>,
    pub malformed: u64,
    pub ignored: u64,
    /// Relayed requests with a giaddr no relay agent can have.
    #[serde(default)]
    pub bad_relay: u64,
    /// Relayed requests from a subnet that is neither `network.cidr` nor a
    /// `dhcp.segments[]` entry.
    #[serde(default)]
    pub unknown_segment: u64,
    /// Relayed requests for a served subnet from a giaddr that is no
    /// configured relay (a segment's gateway or `dhcp.relays`).
    #[serde(default)]
    pub unknown_relay: u64,
    /// DISCOVERs that got no offer because the pool had no free address.
    #[serde(default)]
    pub pool_exhausted: u64,
    pub send_errors: u64,
    pub lease_file_writes: u64,
    pub lease_file_errors: u64,
}

/// `dhcp6`: the DHCPv6 server and router advertisements.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Dhcp6Status {
    pub listen: Option<String>,
    pub interface: Option<String>,
    pub binding_file: String,
    pub bindings: Vec<Binding6Row>,
    /// Messages received by type (`solicit` … `information-request`,
    /// `other`).
    pub received: BTreeMap<String, u64>,
    /// Replies sent by type (`advertise`, `reply`).
    pub sent: BTreeMap<String, u64>,
    pub malformed: u64,
    /// Messages dropped for a protocol reason (another server's, no client
    /// identifier, a server identifier where none belongs).
    pub ignored: u64,
    /// Clients that got no address, by reason (`no_mac`, `not_reserved`,
    /// `reserved_declined`, `pool_exhausted`).
    pub refused: BTreeMap<String, u64>,
    pub relayed: u64,
    /// Relay-Forwards dropped: their source is not in `dhcp.relays`.
    #[serde(default)]
    pub unknown_relay: u64,
    /// Declines not applied (not held, not the node's, rate-limited).
    #[serde(default)]
    pub declines_refused: u64,
    pub send_errors: u64,
    pub binding_file_writes: u64,
    pub binding_file_errors: u64,
    /// Router advertisements (`None`: `routerAdvertisements` is off).
    pub router_advertisements: Option<RaStatus>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Binding6Row {
    pub address: std::net::Ipv6Addr,
    pub duid: String,
    pub iaid: u32,
    pub mac: Option<String>,
    pub state: LeaseState,
    /// Unix seconds.
    pub expires: u64,
    pub reserved: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RaStatus {
    pub sent: u64,
    pub solicitations: u64,
    pub send_errors: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaseRow {
    pub mac: MacAddr,
    pub ip: Ipv4Addr,
    pub hostname: Option<String>,
    pub client_id: Option<String>,
    pub state: LeaseState,
    /// Unix seconds.
    pub expires: u64,
    pub reserved: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DeclinedRow {
    pub ip: Ipv4Addr,
    /// Unix seconds.
    pub until: u64,
}

/// `lb` (also `GET /api/lb/backends`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LbStatus {
    pub health: HealthStatus,
    pub max_connections: usize,
    pub bootstrap_complete_marker: String,
    /// The marker existed at the LB's last look (every health interval).
    #[serde(default)]
    pub bootstrap_complete_marker_present: bool,
    /// The marker exists but is older than the newest ignition file (left
    /// from an earlier install): ignored.
    #[serde(default)]
    pub bootstrap_complete_marker_stale: bool,
    /// Why the LB holds the bootstrap complete; `None` while it does not.
    #[serde(default)]
    pub bootstrap_complete: Option<BootstrapCompleteBy>,
    /// `loadBalancer.removeBootstrap`.
    #[serde(default)]
    pub remove_bootstrap: RemoveBootstrap,
    pub pools: Vec<PoolStatus>,
}

/// What made the LB hold the bootstrap complete (`lb.bootstrapComplete`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BootstrapCompleteBy {
    /// Every master healthy in the api and machine-config pools, then the
    /// bootstrap's API backend turned unhealthy after having been healthy
    /// (bootkube tore the bootstrap control plane down).
    Evidence,
    /// `<ignitionDir>/bootstrap-complete`, not older than the ignition files.
    Marker,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HealthStatus {
    pub interval: String,
    pub timeout: String,
    pub rise: u32,
    pub fall: u32,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolStatus {
    pub name: PoolKind,
    pub frontend: String,
    /// The IPv6 frontend (dual-stack clusters only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frontend_v6: Option<String>,
    pub check: String,
    pub active_connections: u64,
    pub total_connections: u64,
    pub rejected_over_cap: u64,
    pub closed_no_backend: u64,
    /// Closed at accept because the client address may not use the
    /// frontend (machine-config: not a node); never forwarded.
    #[serde(default)]
    pub refused_clients: u64,
    pub backends: Vec<BackendStatus>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BackendStatus {
    pub node: String,
    pub role: Role,
    pub address: String,
    pub healthy: bool,
    pub disabled: bool,
    pub removed: bool,
    pub consecutive_successes: u32,
    pub consecutive_failures: u32,
    pub last_check_error: Option<String>,
    pub active_connections: u64,
    pub total_connections: u64,
    pub connect_failures: u64,
    /// Unix seconds of the last change of state (healthy, drained,
    /// removed), or of the backend's creation; absent from older `serve`s.
    #[serde(default)]
    pub last_change: Option<u64>,
}

/// `http`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpStatus {
    pub listen: Option<String>,
    /// The IPv6 twin's address (dual-stack clusters only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listen_v6: Option<String>,
    pub images_dir: String,
    pub ignition_dir: String,
    /// Single-node: seconds since `bootstrap-in-place-for-live-iso.ign` was
    /// written (its certificates expire after 24 h); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootstrap_in_place_age: Option<u64>,
    pub requests: u64,
    /// Responses by status code.
    pub responses_by_status: BTreeMap<String, u64>,
    pub bytes_sent: u64,
    pub connections_active: i64,
    pub connections_total: u64,
    pub ignition_by_node: Vec<IgnitionByNode>,
    /// Newest first, at most 200.
    pub ignition_fetches: Vec<FetchRow>,
    /// Network boot progress per node (with an `rhcos` section).
    #[serde(default)]
    pub netboot: Vec<NetbootRow>,
    /// The file that keeps [`HttpStatus::netboot`] (with an `rhcos` section).
    #[serde(default)]
    pub netboot_state: Option<NetbootStateStatus>,
    /// The boot ISOs' HTTPS listener, while it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub https: Option<HttpsStatus>,
}

/// The boot ISOs' HTTPS listener (`http.tlsListen`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpsStatus {
    /// The bound address.
    pub listen: Option<String>,
    /// The certificate served: its files, origin and SHA-256.
    pub cert: crate::runtime::certs::CertInfo,
    /// TLS handshakes completed.
    pub handshakes: u64,
    /// TLS handshakes that failed or timed out.
    pub handshake_failures: u64,
}

/// Whether the network-boot install state is on disk.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetbootStateStatus {
    /// `<dir of dhcp.leaseFile>/<cluster>-netboot.json`.
    pub file: String,
    /// Every change is on disk: a restart, even a kill, keeps it. While
    /// false, installed nodes still boot their disk (memory is the truth)
    /// and the writer retries every second.
    pub durable: bool,
    /// Changes in memory only.
    pub unwritten_changes: u64,
    /// The last write's error, while writes fail.
    pub write_error: Option<String>,
    /// Why the file could not be read at start; every node was then taken
    /// as installed (`assumed` in its row).
    pub load_error: Option<String>,
    pub writes: u64,
    pub write_failures: u64,
}

/// One node's network-boot install state.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetbootRow {
    pub node: String,
    /// `pending`, `installing`, `unconfirmed` (ignition fetched, install
    /// end not seen: disk if bootable, else install) or `installed` (boots
    /// its disk).
    pub state: String,
    pub install_script_at: Option<u64>,
    pub ignition_at: Option<u64>,
    pub installed_at: Option<u64>,
    /// Evidence: the install image fully downloaded after the ignition.
    #[serde(default)]
    pub install_finished_at: Option<u64>,
    /// Evidence: the installed system's first machine-config contact.
    #[serde(default)]
    pub booted_at: Option<u64>,
    /// Taken as installed because the state file was unreadable at start.
    #[serde(default)]
    pub assumed: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IgnitionByNode {
    pub node: String,
    pub ip: Ipv4Addr,
    pub role: Role,
    pub fetched: bool,
    pub last: Option<FetchRow>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FetchRow {
    /// HTTP date.
    pub time: String,
    pub unix_time: u64,
    pub client: String,
    pub node: Option<String>,
    pub file: String,
    pub status: u16,
    pub detail: String,
    pub bytes: u64,
}

/// `libvirt`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LibvirtStatus {
    pub network: String,
    pub nodes: Vec<VmRow>,
}

/// One row of `vm status` and of `libvirt.nodes`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VmRow {
    pub node: String,
    pub domain: String,
    pub role: Role,
    pub state: VmState,
    pub phase: VmPhase,
    pub mac: String,
    pub ip: String,
    /// The serial console log (`vm console NODE` prints it).
    #[serde(default)]
    pub serial_log: String,
}

/// `admin`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdminStatus {
    pub listen: Option<String>,
    /// The IPv6 twin's address (dual-stack clusters only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listen_v6: Option<String>,
}

/// `tftp`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TftpStatus {
    pub listen: Option<String>,
    /// The IPv6 twin's address (dual-stack clusters only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listen_v6: Option<String>,
    pub root: Option<String>,
    pub started: u64,
    pub active: i64,
    /// Requests by how they ended (`completed`, `failed`, `aborted`,
    /// `refused`, `busy`).
    pub transfers: BTreeMap<String, u64>,
    pub bytes: u64,
    pub retransmitted_blocks: u64,
    pub malformed: u64,
    /// Of `busy`: refused because the client address already held
    /// `pxe.maxTransfersPerClient` transfers.
    #[serde(default)]
    pub busy_client_limit: u64,
    /// Newest first.
    pub recent: Vec<TftpTransferRow>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TftpTransferRow {
    pub unix_time: u64,
    pub client: String,
    pub file: String,
    pub result: String,
    pub detail: String,
    pub bytes: u64,
}

/// `ntp`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NtpStatus {
    pub listen: Option<String>,
    /// How the host clock is served: `synchronised`, `unsynchronised`
    /// (leap indicator 3: clients will not select it) or `localStratum`;
    /// empty before the first request.
    pub serving: String,
    pub leap: u8,
    pub stratum: u8,
    pub requests: u64,
    pub replies: u64,
    /// KoD RATE replies sent.
    pub kod_rate: u64,
    /// Over the rate and the KoD budget: not answered.
    pub rate_dropped: u64,
    /// Too short, bad version, zero transmit timestamp.
    pub malformed: u64,
    /// Symmetric, broadcast, control, private or server mode.
    pub refused_mode: u64,
    /// From a source outside `ntp.allowFrom`: not answered.
    #[serde(default)]
    pub refused_acl: u64,
    /// Clients whose offset is above 1 s.
    pub skewed: usize,
    pub clients: Vec<NtpClientRow>,
}

/// A client's clock offset estimate (its latest request).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NtpClientRow {
    pub client: String,
    /// The cluster node with that address, if any.
    pub node: Option<String>,
    /// Our receive time minus the client's transmit time (positive: the
    /// client is behind), milliseconds.
    pub offset_ms: f64,
    /// `|offset| > 1 s`: certificates will fail.
    pub skewed: bool,
    pub unix_time: u64,
    pub requests: u64,
}

/// Cluster install phase, in order (`timeline.phase`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ClusterPhase {
    #[default]
    Provisioning,
    Bootstrapping,
    BootstrapComplete,
    BootstrapRemoved,
    IngressReady,
}

impl ClusterPhase {
    pub const ALL: [ClusterPhase; 5] = [
        ClusterPhase::Provisioning,
        ClusterPhase::Bootstrapping,
        ClusterPhase::BootstrapComplete,
        ClusterPhase::BootstrapRemoved,
        ClusterPhase::IngressReady,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ClusterPhase::Provisioning => "provisioning",
            ClusterPhase::Bootstrapping => "bootstrapping",
            ClusterPhase::BootstrapComplete => "bootstrap-complete",
            ClusterPhase::BootstrapRemoved => "bootstrap-removed",
            ClusterPhase::IngressReady => "ingress-ready",
        }
    }
}

/// `timeline`: what the services observed of the install, per node. Times
/// are Unix seconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TimelineStatus {
    pub phase: ClusterPhase,
    /// When each phase was first reached (`bootstrapping`, ...).
    pub phase_times: BTreeMap<String, u64>,
    pub nodes: Vec<NodeTimeline>,
    /// Ignition fetches from addresses that are not the node's own (newest
    /// first, at most 50): not install progress.
    pub operator_fetches: Vec<OperatorFetch>,
    /// What the operator may have to do, with the exact commands.
    #[serde(default)]
    pub hints: Vec<TimelineHint>,
}

/// Advice derived from the timeline (`timeline.hints[]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TimelineHint {
    pub kind: HintKind,
    /// The nodes it is about (empty for a cluster-wide hint).
    pub nodes: Vec<String>,
    /// One sentence: what was seen and the likely reason.
    pub message: String,
    /// Commands to run, exactly as printed.
    pub commands: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HintKind {
    /// Workers that booted their installed system (machine-config contact)
    /// but whose ingress never became healthy: usually pending CSRs.
    PendingCsr,
    /// `<ignitionDir>/bootstrap-complete` is older than the ignition files
    /// and is ignored.
    StaleBootstrapMarker,
    /// Single-node: the bootstrap-in-place Ignition is over 20 h old and
    /// the install is not complete (its certificates expire after 24 h).
    StaleBootstrapInPlace,
}

/// One node's install steps (Unix seconds; `None` = not seen yet).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeTimeline {
    pub node: String,
    pub role: Option<Role>,
    /// The install VM was seen running (libvirt).
    pub vm_started: Option<u64>,
    /// Install attempts started (a rejected install runs again).
    pub install_attempts: u32,
    /// Bare metal: `serve` (`bmc.startOnServe`) had the node's BMC insert
    /// its boot ISO and power it on (Redfish).
    pub bmc_power_on: Option<u64>,
    /// Bare metal: the node's boot ISO (`/boot/<node>.iso`) was first
    /// fetched (by its BMC, after `bmc up` or startOnServe).
    pub boot_iso: Option<u64>,
    /// Bare metal: the node's iPXE install script was first served to its
    /// own address.
    #[serde(default)]
    pub netboot_script: Option<u64>,
    /// First DHCP lease, last renewal, renewals.
    pub lease: Option<u64>,
    pub lease_renewed: Option<u64>,
    pub lease_renewals: u32,
    /// The live rootfs fetched from the node's address.
    pub rootfs: Option<u64>,
    pub rootfs_bytes: Option<u64>,
    pub rootfs_ms: Option<u64>,
    /// The node fetched its ignition from its own address (current attempt).
    pub ignition: Option<u64>,
    /// The install VM shut down after fetching its ignition (libvirt).
    pub install_finished: Option<u64>,
    /// First connection to the machine-config frontend from the node's
    /// address after the install: the installed system's first boot.
    pub first_boot: Option<u64>,
    /// First time the node's backend was healthy, per pool.
    pub api_healthy: Option<u64>,
    pub mcs_healthy: Option<u64>,
    pub ingress_healthy: Option<u64>,
    /// Why an install was not accepted as finished, and other problems.
    pub errors: Vec<String>,
}

/// An ignition fetch by someone other than the node.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OperatorFetch {
    pub unix_time: u64,
    pub client: String,
    pub file: String,
}

/// A lease's state in `dhcp.leases[]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LeaseState {
    Offered,
    Bound,
    Released,
    Expired,
}

/// A domain's libvirt state in `libvirt.nodes[]` (`absent`: not defined).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum VmState {
    #[serde(rename = "absent")]
    Absent,
    #[serde(rename = "no state")]
    NoState,
    #[serde(rename = "running")]
    Running,
    #[serde(rename = "blocked")]
    Blocked,
    #[serde(rename = "paused")]
    Paused,
    #[serde(rename = "shutting down")]
    ShuttingDown,
    #[serde(rename = "shut off")]
    ShutOff,
    #[serde(rename = "crashed")]
    Crashed,
    #[serde(rename = "suspended")]
    Suspended,
    #[serde(rename = "unknown")]
    Unknown,
}

/// Where a node's domain is in its install (`libvirt.nodes[]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum VmPhase {
    /// The live ISO is running the installer.
    #[serde(rename = "install")]
    Install,
    /// Defined for the install, not finished.
    #[serde(rename = "installing")]
    Installing,
    /// Boots from its disk.
    #[serde(rename = "installed")]
    Installed,
    /// A domain of that name not made by this appliance.
    #[serde(rename = "foreign")]
    Foreign,
    /// No domain.
    #[serde(rename = "-")]
    None,
}

/// `as_str` (the serde name), `Display` with it, and `== "name"`.
macro_rules! named {
    ($t:ty { $($v:ident => $s:literal),* $(,)? }) => {
        impl $t {
            pub fn as_str(self) -> &'static str {
                match self { $(Self::$v => $s),* }
            }
        }
        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.pad(self.as_str())
            }
        }
        impl PartialEq<&str> for $t {
            fn eq(&self, other: &&str) -> bool {
                self.as_str() == *other
            }
        }
    };
}
named!(LeaseState { Offered => "offered", Bound => "bound", Released => "released", Expired => "expired" });
named!(VmState {
    Absent => "absent", NoState => "no state", Running => "running", Blocked => "blocked",
    Paused => "paused", ShuttingDown => "shutting down", ShutOff => "shut off",
    Crashed => "crashed", Suspended => "suspended", Unknown => "unknown",
});
named!(VmPhase {
    Install => "install", Installing => "installing", Installed => "installed",
    Foreign => "foreign", None => "-",
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_states_serialize_as_their_names() {
        for s in [VmState::ShutOff, VmState::Running, VmState::Absent] {
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
        }
        for p in [VmPhase::Install, VmPhase::None, VmPhase::Foreign] {
            assert_eq!(serde_json::to_value(p).unwrap(), p.as_str());
        }
        for l in [LeaseState::Bound, LeaseState::Expired] {
            assert_eq!(serde_json::to_value(l).unwrap(), l.as_str());
        }
        assert_eq!(format!("{:<9}|", VmState::ShutOff), "shut off |");
    }
}
