//! The `/status` document (`GET /status`): the one schema the admin API
//! serializes, the status page renders, and the tests and the CLI
//! deserialize. Field names are camelCase and stable (docs/http.md);
//! `tests/status_golden.rs` pins the wire format.
//!
//! Each service owns the type of its section (`services/<name>/status.rs`,
//! `drivers/libvirt/status.rs`, `timeline/status.rs`); `serve` assembles
//! the document from the typed registry ([`crate::serve::hub`]).

use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

use crate::drivers::libvirt::status::LibvirtStatus;
use crate::model::cluster::Role;
use crate::services::dhcp::status::DhcpStatus;
use crate::services::dhcp6::status::Dhcp6Status;
use crate::services::dns::status::DnsStatus;
use crate::services::http::status::HttpStatus;
use crate::services::lb::status::LbStatus;
use crate::services::ntp::status::NtpStatus;
use crate::services::tftp::status::TftpStatus;
use crate::timeline::status::TimelineStatus;

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
    /// This member of an HA pair (`ha:`; docs/ha.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ha: Option<crate::runtime::ha::HaStatus>,
    /// The install timeline (`serve` only; docs/operations.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeline: Option<TimelineStatus>,
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
            ha: None,
            timeline: None,
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

/// `admin`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdminStatus {
    pub listen: Option<String>,
    /// The IPv6 twin's address (dual-stack clusters only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listen_v6: Option<String>,
}
