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
//!
//! Dual-stack (`network.ipv6`): a listener of the LB, HTTP, admin or TFTP
//! configured on an IPv4 address that is not loopback (its default, the
//! VIP or applianceIP, or `0.0.0.0`) gets an IPv6 twin on the same port
//! ([`v6_twin`]): the LB's on the IPv6 API or ingress VIP, the others on
//! the IPv6 applianceIP. Each twin follows its IPv4 listener in the list.
//! A loopback listener (the admin default) gets none, nor does one
//! configured on an IPv6 address. Without `network.ipv6` the list is what
//! it always was.

use std::fmt;
use std::net::{Ipv6Addr, SocketAddr};

use serde::{Deserialize, Serialize};

use super::cluster::{
    AdminCfg, Cluster, DhcpCfg, DhcpMode, DnsCfg, HttpCfg, LbCfg, NtpCfg, TftpCfg,
};
use super::ipv6::Ipv6Cfg;

/// A service of the appliance (the key of its `/status` section).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ServiceKind {
    Libvirt,
    Dns,
    Dhcp,
    Dhcp6,
    Lb,
    Http,
    Admin,
    Tftp,
    Ntp,
    /// CSR approval (`csr:`): no listener, a client of the API server.
    Csr,
    Registry,
}

impl ServiceKind {
    /// Every service, in start order (libvirt first: with `startOnServe` it
    /// creates the bridge the others bind to).
    pub const ALL: [ServiceKind; 11] = [
        ServiceKind::Libvirt,
        ServiceKind::Dns,
        ServiceKind::Dhcp,
        ServiceKind::Dhcp6,
        ServiceKind::Lb,
        ServiceKind::Http,
        ServiceKind::Admin,
        ServiceKind::Tftp,
        ServiceKind::Ntp,
        ServiceKind::Csr,
        ServiceKind::Registry,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ServiceKind::Libvirt => "libvirt",
            ServiceKind::Dns => "dns",
            ServiceKind::Dhcp => "dhcp",
            ServiceKind::Dhcp6 => "dhcp6",
            ServiceKind::Lb => "lb",
            ServiceKind::Http => "http",
            ServiceKind::Admin => "admin",
            ServiceKind::Tftp => "tftp",
            ServiceKind::Ntp => "ntp",
            ServiceKind::Csr => "csr",
            ServiceKind::Registry => "registry",
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

    /// The IPv6 VIP of the frontend (api and machine-config: the API VIP;
    /// ingress: the ingress VIP) and its field.
    pub fn vip6(self, v6: &Ipv6Cfg) -> (Ipv6Addr, &'static str) {
        match self {
            PoolKind::Api | PoolKind::MachineConfig => (v6.api_vip, "network.ipv6.apiVIP"),
            PoolKind::IngressHttp | PoolKind::IngressHttps => {
                (v6.ingress_vip, "network.ipv6.ingressVIP")
            }
        }
    }

    /// The frontend's IPv6 twin ([`v6_twin`] on its IPv6 VIP), if any.
    pub fn frontend_v6(self, lb: &LbCfg, v6: Option<&Ipv6Cfg>) -> Option<SocketAddr> {
        v6_twin(self.frontend(lb), self.vip6(v6?).0)
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

/// The IPv6 twin of a listener on `addr`: `[ip]:port` when `addr` is an
/// IPv4 address other than loopback (a listener on the cluster network, or
/// on every IPv4 address); `None` for loopback and IPv6 listeners.
pub fn v6_twin(addr: SocketAddr, ip: Ipv6Addr) -> Option<SocketAddr> {
    match addr {
        SocketAddr::V4(a) if !a.ip().is_loopback() => Some(SocketAddr::new(ip.into(), a.port())),
        _ => None,
    }
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
    pub registry: Option<&'a super::registry::RegistryCfg>,
    /// `network.ipv6`: the IPv6 twins ([`v6_twin`]).
    pub ipv6: Option<&'a Ipv6Cfg>,
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
            registry: c.registry.as_ref(),
            ipv6: c.network.ipv6.as_ref(),
        }
    }
}

/// The load balancer's frontends (name, address, field): one per pool,
/// and on a dual-stack network its IPv6 twin.
fn lb_frontends(l: &LbCfg, ipv6: Option<&Ipv6Cfg>) -> Vec<(&'static str, SocketAddr, String)> {
    let mut out = Vec::new();
    for p in PoolKind::ALL {
        let field = format!("loadBalancer.listen.{}", p.listen_field());
        out.push((p.listener_name(), p.frontend(l), field));
        if let Some(v6) = ipv6
            && let Some(t) = p.frontend_v6(l, Some(v6))
        {
            out.push((p.listener_name(), t, p.vip6(v6).1.to_string()));
        }
    }
    out
}

/// Every socket the enabled sections of `s` bind, in start order.
pub fn listeners(s: &Sections<'_>) -> Vec<Listener> {
    let mut out = Vec::new();
    let app6 = s.ipv6.map(|v| v.appliance_ip);
    let mut add = |service, what, proto, addr, field: String| {
        out.push(Listener {
            service,
            what,
            proto,
            addr,
            field,
        });
    };
    // The IPv6 twin of an HTTP, admin or TFTP listener.
    let twin = |addr| app6.and_then(|ip| v6_twin(addr, ip));
    const APP6: &str = "network.ipv6.applianceIP";
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
                    if let Some(b) = d.boot_server_listen() {
                        add(kind, "pxe boot server", Proto::Udp, b, "dhcp.mode".into());
                    }
                }
            }
            ServiceKind::Dhcp6 => {
                if let Some(d) = s
                    .dhcp
                    .filter(|d| d.enabled && d.mode == DhcpMode::Server && s.ipv6.is_some())
                {
                    add(kind, "dhcp6", Proto::Udp, d.listen6, "dhcp.listen6".into());
                }
            }
            ServiceKind::Lb => {
                for (what, addr, field) in
                    s.lb.filter(|l| l.enabled)
                        .map_or_else(Vec::new, |l| lb_frontends(l, s.ipv6))
                {
                    add(kind, what, Proto::Tcp, addr, field);
                }
            }
            ServiceKind::Http => {
                if let Some(h) = s.http.filter(|h| h.enabled) {
                    add(kind, "http", Proto::Tcp, h.listen, "http.listen".into());
                    if let Some(t) = h.tls_listen {
                        add(kind, "https", Proto::Tcp, t, "http.tlsListen".into());
                    }
                    if let Some(l6) = twin(h.listen) {
                        add(kind, "http", Proto::Tcp, l6, APP6.into());
                    }
                }
            }
            ServiceKind::Admin => {
                if let Some(a) = s.admin.filter(|a| a.enabled) {
                    add(kind, "admin", Proto::Tcp, a.listen, "admin.listen".into());
                    if let Some(l6) = twin(a.listen) {
                        add(kind, "admin", Proto::Tcp, l6, APP6.into());
                    }
                }
            }
            ServiceKind::Tftp => {
                if let Some(t) = s.tftp.filter(|t| t.enabled) {
                    add(kind, "tftp", Proto::Udp, t.listen, "pxe.tftpListen".into());
                    if let Some(l6) = twin(t.listen) {
                        add(kind, "tftp", Proto::Udp, l6, APP6.into());
                    }
                }
            }
            ServiceKind::Ntp => {
                if let Some(n) = s.ntp.filter(|n| n.enabled) {
                    add(kind, "ntp", Proto::Udp, n.listen, "ntp.listen".into());
                }
            }
            ServiceKind::Csr => {}
            ServiceKind::Registry => {
                if let Some(r) = s.registry {
                    let field = String::from("registry.listen");
                    add(kind, "registry", Proto::Tcp, r.listen, field);
                    if let Some(l6) = twin(r.listen) {
                        add(kind, "registry", Proto::Tcp, l6, APP6.into());
                    }
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
            // DHCPv6 only for a dual-stack network: a v4-only file starts
            // no DHCPv6 service. Nor does `dhcp.mode: proxy`: the site's
            // server and router own the segment's addressing (no DHCPv6
            // answer, no router advertisement from the appliance).
            ServiceKind::Dhcp6 => {
                self.dhcp.enabled
                    && self.dhcp.mode == DhcpMode::Server
                    && self.network.ipv6.is_some()
            }
            ServiceKind::Lb => self.lb.enabled,
            ServiceKind::Http => self.http.enabled,
            ServiceKind::Admin => self.admin.enabled,
            ServiceKind::Tftp => self.tftp.as_ref().is_some_and(|t| t.enabled),
            ServiceKind::Ntp => self.ntp.as_ref().is_some_and(|n| n.enabled),
            ServiceKind::Csr => self.csr.is_some(),
            ServiceKind::Registry => self.registry.is_some(),
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

    /// The addresses `kind` binds (with their IPv6 twins), in order.
    pub fn listen_addrs(&self, kind: ServiceKind) -> Vec<SocketAddr> {
        self.listeners()
            .into_iter()
            .filter(|l| l.service == kind)
            .map(|l| l.addr)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NODES: &str = "nodes:\n  - { name: m0, role: master, mac: '52:54:00:00:00:0a', ip: 10.0.0.10, ipv6: 'fd00::10' }\n";

    fn parse(net6: &str, extra: &str) -> Result<Cluster, crate::config::ConfigError> {
        let nodes = if net6.is_empty() {
            NODES.replace(", ipv6: 'fd00::10'", "")
        } else {
            NODES.to_string()
        };
        let text = format!(
            "name: c\nbaseDomain: example.com\nnetwork:\n  cidr: 10.0.0.0/24\n  gateway: 10.0.0.254\n  applianceIP: 10.0.0.1\n{net6}{nodes}{extra}"
        );
        crate::config::from_str(&text, std::path::Path::new("/"), std::path::Path::new("t"))
            .map(|f| f.cluster)
    }

    const V6: &str = "  ipv6: { cidr: 'fd00::/64', applianceIP: 'fd00::1', apiVIP: 'fd00::5', ingressVIP: 'fd00::7' }\n";
    const PXE: &str = "pxe: { tftpRoot: / }\n";

    fn rows(c: &Cluster) -> Vec<String> {
        c.listeners()
            .iter()
            .map(|l| format!("{} {} {} {}", l.what, l.proto.as_str(), l.addr, l.field))
            .collect()
    }

    #[test]
    fn ipv4_only_listeners_are_unchanged() {
        let c = parse("", PXE).unwrap();
        assert_eq!(
            rows(&c),
            [
                "dns udp 10.0.0.1:53 dns.listen[0]",
                "dns tcp 10.0.0.1:53 dns.listen[0]",
                "dhcp udp 0.0.0.0:67 dhcp.listen",
                "lb api tcp 10.0.0.1:6443 loadBalancer.listen.api",
                "lb machine-config tcp 10.0.0.1:22623 loadBalancer.listen.machineConfig",
                "lb ingress-http tcp 10.0.0.1:80 loadBalancer.listen.ingressHttp",
                "lb ingress-https tcp 10.0.0.1:443 loadBalancer.listen.ingressHttps",
                "http tcp 10.0.0.1:8080 http.listen",
                "admin tcp 127.0.0.1:9180 admin.listen",
                "tftp udp 10.0.0.1:69 pxe.tftpListen",
            ]
        );
        assert_eq!(c.listen_addrs(ServiceKind::Http).len(), 1);
    }

    #[test]
    fn dual_stack_twins_follow_their_ipv4_listener() {
        let c = parse(V6, PXE).unwrap();
        let got = rows(&c);
        let after = |a: &str, b: &str| {
            let i = got
                .iter()
                .position(|r| r == a)
                .unwrap_or_else(|| panic!("{a}: {got:#?}"));
            assert_eq!(got[i + 1], b, "{got:#?}");
        };
        after(
            "lb api tcp 10.0.0.1:6443 loadBalancer.listen.api",
            "lb api tcp [fd00::5]:6443 network.ipv6.apiVIP",
        );
        after(
            "lb machine-config tcp 10.0.0.1:22623 loadBalancer.listen.machineConfig",
            "lb machine-config tcp [fd00::5]:22623 network.ipv6.apiVIP",
        );
        after(
            "lb ingress-https tcp 10.0.0.1:443 loadBalancer.listen.ingressHttps",
            "lb ingress-https tcp [fd00::7]:443 network.ipv6.ingressVIP",
        );
        after(
            "http tcp 10.0.0.1:8080 http.listen",
            "http tcp [fd00::1]:8080 network.ipv6.applianceIP",
        );
        after(
            "tftp udp 10.0.0.1:69 pxe.tftpListen",
            "tftp udp [fd00::1]:69 network.ipv6.applianceIP",
        );
        // The admin default is loopback: no twin.
        assert_eq!(c.listen_addrs(ServiceKind::Admin).len(), 1, "{got:#?}");
        assert_eq!(
            c.listen_addrs(ServiceKind::Http),
            [
                "10.0.0.1:8080".parse().unwrap(),
                "[fd00::1]:8080".parse().unwrap()
            ]
        );
    }

    #[test]
    fn twins_only_for_ipv4_addresses_off_loopback() {
        let ip6: Ipv6Addr = "fd00::1".parse().unwrap();
        let t = |a: &str| v6_twin(a.parse().unwrap(), ip6).map(|s| s.to_string());
        assert_eq!(t("10.0.0.1:80").as_deref(), Some("[fd00::1]:80"));
        assert_eq!(t("0.0.0.0:80").as_deref(), Some("[fd00::1]:80"));
        assert_eq!(t("127.0.0.1:80"), None);
        assert_eq!(t("[::]:80"), None);
        assert_eq!(t("[fd00::9]:80"), None);
        // An admin listener off loopback (token required) gets one.
        let dir = tempfile::tempdir().unwrap();
        let token = dir.path().join("token");
        std::fs::write(&token, "t0k3n-for-the-test-0123456789abcdef").unwrap();
        std::fs::set_permissions(&token, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .unwrap();
        let admin = format!(
            "admin: {{ listen: '0.0.0.0:9180', tokenFile: {} }}\n",
            token.display()
        );
        let c = parse(V6, &admin).unwrap();
        assert_eq!(
            c.listen_addrs(ServiceKind::Admin),
            [
                "0.0.0.0:9180".parse().unwrap(),
                "[fd00::1]:9180".parse().unwrap()
            ]
        );
    }

    #[test]
    fn collisions_are_per_family_except_for_the_ipv6_wildcard() {
        // `0.0.0.0` and the IPv6 twins share ports without colliding.
        parse(
            V6,
            "http: { listen: '0.0.0.0:8080' }\nloadBalancer: { listen: { api: '0.0.0.0:6443' } }\n",
        )
        .unwrap();
        // `[::]` takes IPv4 too.
        let e = parse(V6, "http: { listen: '[::]:6443' }\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("collides with"), "{e}");
        // A twin collides with what is configured on its address.
        let e = parse(V6, "dns: { listen: ['[fd00::1]:8080'] }\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("network.ipv6.applianceIP"), "{e}");
    }
}
