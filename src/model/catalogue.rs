//! The service catalogue: which services exist ([`ServiceKind`]), which of
//! them a cluster runs and in what order ([`Cluster::services`]), and every
//! socket they bind ([`listeners`], [`Cluster::listeners`]).
//!
//! This is the one list of listeners: validation (collisions, with the
//! field paths of the cluster file), `firewall print|apply` (what guests
//! must reach), preflight (busy ports and their owners), limits and reload
//! (what changed) all read it. Adding a service means one variant here; the
//! exhaustive matches on [`ServiceKind`] elsewhere then fail to compile
//! until the new service is wired in.
//!
//! Invariants: a disabled section binds nothing; listeners come in service
//! start order, DNS with UDP before TCP per address; [`PoolKind`] names the
//! four LB frontends everywhere (plan, LB, status, timeline).

use std::fmt;
use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

use super::cluster::{AdminCfg, Cluster, DhcpCfg, DnsCfg, HttpCfg, LbCfg, NtpCfg, TftpCfg};

/// A service of the appliance (the key of its `/status` section).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ServiceKind {
    Libvirt,
    Dns,
    Dhcp,
    Lb,
    Http,
    Admin,
    Tftp,
    Ntp,
}

impl ServiceKind {
    /// Every service, in start order (libvirt first: with `startOnServe` it
    /// creates the bridge the others bind to).
    pub const ALL: [ServiceKind; 8] = [
        ServiceKind::Libvirt,
        ServiceKind::Dns,
        ServiceKind::Dhcp,
        ServiceKind::Lb,
        ServiceKind::Http,
        ServiceKind::Admin,
        ServiceKind::Tftp,
        ServiceKind::Ntp,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ServiceKind::Libvirt => "libvirt",
            ServiceKind::Dns => "dns",
            ServiceKind::Dhcp => "dhcp",
            ServiceKind::Lb => "lb",
            ServiceKind::Http => "http",
            ServiceKind::Admin => "admin",
            ServiceKind::Tftp => "tftp",
            ServiceKind::Ntp => "ntp",
        }
    }
}

impl fmt::Display for ServiceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The four OpenShift load-balancer frontends (and their pools).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum PoolKind {
    #[serde(rename = "api")]
    Api,
    #[serde(rename = "machine-config")]
    MachineConfig,
    #[serde(rename = "ingress-http")]
    IngressHttp,
    #[serde(rename = "ingress-https")]
    IngressHttps,
}

impl PoolKind {
    pub const ALL: [PoolKind; 4] = [
        PoolKind::Api,
        PoolKind::MachineConfig,
        PoolKind::IngressHttp,
        PoolKind::IngressHttps,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            PoolKind::Api => "api",
            PoolKind::MachineConfig => "machine-config",
            PoolKind::IngressHttp => "ingress-http",
            PoolKind::IngressHttps => "ingress-https",
        }
    }

    /// The listener's name in logs (`listening for lb api on …`).
    pub fn listener_name(self) -> &'static str {
        match self {
            PoolKind::Api => "lb api",
            PoolKind::MachineConfig => "lb machine-config",
            PoolKind::IngressHttp => "lb ingress-http",
            PoolKind::IngressHttps => "lb ingress-https",
        }
    }

    /// The frontend's field under `loadBalancer.listen`.
    pub fn listen_field(self) -> &'static str {
        match self {
            PoolKind::Api => "api",
            PoolKind::MachineConfig => "machineConfig",
            PoolKind::IngressHttp => "ingressHttp",
            PoolKind::IngressHttps => "ingressHttps",
        }
    }

    /// The frontend's configured address.
    pub fn frontend(self, lb: &LbCfg) -> SocketAddr {
        match self {
            PoolKind::Api => lb.api,
            PoolKind::MachineConfig => lb.machine_config,
            PoolKind::IngressHttp => lb.ingress_http,
            PoolKind::IngressHttps => lb.ingress_https,
        }
    }
}

impl fmt::Display for PoolKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Transport protocol of a listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Proto {
    Tcp,
    Udp,
}

impl Proto {
    pub fn as_str(self) -> &'static str {
        match self {
            Proto::Tcp => "tcp",
            Proto::Udp => "udp",
        }
    }
}

/// One socket a service binds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listener {
    pub service: ServiceKind,
    /// Its name in logs and reports (`dns`, `lb api`, `tftp`, …).
    pub what: &'static str,
    pub proto: Proto,
    pub addr: SocketAddr,
    /// The cluster-file field it comes from (`dns.listen[0]`,
    /// `loadBalancer.listen.api`, `pxe.tftpListen`).
    pub field: String,
}

/// The sections that bind sockets, as far as they exist (validation builds
/// this from what it could assemble; [`Cluster::listeners`] from a valid
/// cluster). A section that is present but disabled binds nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct Sections<'a> {
    pub dns: Option<&'a DnsCfg>,
    pub dhcp: Option<&'a DhcpCfg>,
    pub lb: Option<&'a LbCfg>,
    pub http: Option<&'a HttpCfg>,
    pub admin: Option<&'a AdminCfg>,
    pub tftp: Option<&'a TftpCfg>,
    pub ntp: Option<&'a NtpCfg>,
}

impl<'a> Sections<'a> {
    pub fn of(c: &'a Cluster) -> Sections<'a> {
        Sections {
            dns: Some(&c.dns),
            dhcp: Some(&c.dhcp),
            lb: Some(&c.lb),
            http: Some(&c.http),
            admin: Some(&c.admin),
            tftp: c.tftp.as_ref(),
            ntp: c.ntp.as_ref(),
        }
    }
}

/// Every socket the enabled sections of `s` bind, in start order.
pub fn listeners(s: &Sections<'_>) -> Vec<Listener> {
    let mut out = Vec::new();
    let mut add = |service, what, proto, addr, field: String| {
        out.push(Listener {
            service,
            what,
            proto,
            addr,
            field,
        });
    };
    for kind in ServiceKind::ALL {
        match kind {
            // The libvirt service binds nothing of its own.
            ServiceKind::Libvirt => {}
            ServiceKind::Dns => {
                for (i, a) in s
                    .dns
                    .filter(|d| d.enabled)
                    .iter()
                    .flat_map(|d| d.listen.iter().enumerate())
                {
                    add(kind, "dns", Proto::Udp, *a, format!("dns.listen[{i}]"));
                    add(kind, "dns", Proto::Tcp, *a, format!("dns.listen[{i}]"));
                }
            }
            ServiceKind::Dhcp => {
                if let Some(d) = s.dhcp.filter(|d| d.enabled) {
                    add(kind, "dhcp", Proto::Udp, d.listen, "dhcp.listen".into());
                }
            }
            ServiceKind::Lb => {
                if let Some(l) = s.lb.filter(|l| l.enabled) {
                    for p in PoolKind::ALL {
                        let field = format!("loadBalancer.listen.{}", p.listen_field());
                        add(kind, p.listener_name(), Proto::Tcp, p.frontend(l), field);
                    }
                }
            }
            ServiceKind::Http => {
                if let Some(h) = s.http.filter(|h| h.enabled) {
                    add(kind, "http", Proto::Tcp, h.listen, "http.listen".into());
                    if let Some(t) = h.tls_listen {
                        add(kind, "https", Proto::Tcp, t, "http.tlsListen".into());
                    }
                }
            }
            ServiceKind::Admin => {
                if let Some(a) = s.admin.filter(|a| a.enabled) {
                    add(kind, "admin", Proto::Tcp, a.listen, "admin.listen".into());
                }
            }
            ServiceKind::Tftp => {
                if let Some(t) = s.tftp.filter(|t| t.enabled) {
                    add(kind, "tftp", Proto::Udp, t.listen, "pxe.tftpListen".into());
                }
            }
            ServiceKind::Ntp => {
                if let Some(n) = s.ntp.filter(|n| n.enabled) {
                    add(kind, "ntp", Proto::Udp, n.listen, "ntp.listen".into());
                }
            }
        }
    }
    out
}

impl Cluster {
    /// Whether `kind` runs for this cluster.
    pub fn runs(&self, kind: ServiceKind) -> bool {
        match kind {
            ServiceKind::Libvirt => {
                cfg!(feature = "libvirt") && self.libvirt.as_ref().is_some_and(|l| l.start_on_serve)
            }
            ServiceKind::Dns => self.dns.enabled,
            ServiceKind::Dhcp => self.dhcp.enabled,
            ServiceKind::Lb => self.lb.enabled,
            ServiceKind::Http => self.http.enabled,
            ServiceKind::Admin => self.admin.enabled,
            ServiceKind::Tftp => self.tftp.as_ref().is_some_and(|t| t.enabled),
            ServiceKind::Ntp => self.ntp.as_ref().is_some_and(|n| n.enabled),
        }
    }

    /// The services this cluster runs, in start order.
    pub fn services(&self) -> Vec<ServiceKind> {
        ServiceKind::ALL
            .into_iter()
            .filter(|k| self.runs(*k))
            .collect()
    }

    /// Every socket the enabled services bind.
    pub fn listeners(&self) -> Vec<Listener> {
        listeners(&Sections::of(self))
    }
}
