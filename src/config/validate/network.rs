//! `network`: the machine network, the appliance's and the VIPs' addresses
//! (the IPv6 half, `network.ipv6`, in [`super::ipv6`]).
//!
//! [`parts`] parses every field it can; later sections check their
//! addresses against the parts that parsed ([`NetParts::in_net`]), and
//! [`NetParts::finish`] gives the section only when all of it is valid.

use std::net::{Ipv4Addr, SocketAddr};

use super::{Errs, sock};
use crate::config::raw;
use crate::model::cluster::{Ipv4Net, NetworkCfg};

/// What parsed of `network` (a field is `None` when it had an error).
pub(crate) struct NetParts {
    pub cidr: Option<Ipv4Net>,
    pub gateway: Option<Ipv4Addr>,
    pub appliance_ip: Option<Ipv4Addr>,
    pub api_vip: Option<Ipv4Addr>,
    pub ingress_vip: Option<Ipv4Addr>,
    pub upstream_dns: Vec<SocketAddr>,
    /// `dhcp.segments[]` that parsed: (cidr, gateway). Node addresses may
    /// lie in one of them instead of `network.cidr`.
    pub segments: Vec<(Ipv4Net, Ipv4Addr)>,
    /// What parsed of `network.ipv6` (`None`: the file has none).
    pub v6: Option<super::ipv6::V6Parts>,
    /// `network.addressing: static`: nodes without their own `addressing`
    /// are static.
    pub static_default: bool,
    /// An error was recorded for the section.
    failed: bool,
}

impl NetParts {
    /// Record an error at `path` unless `ip` is a host address of the cidr.
    pub(crate) fn in_net(&self, e: &mut Errs, path: &str, ip: Option<Ipv4Addr>) {
        if let (Some(c), Some(ip)) = (self.cidr, ip) {
            if !c.contains(ip) {
                e.push(path, format!("{ip} is outside network.cidr {c}"));
            } else if c.is_reserved(ip) {
                e.push(
                    path,
                    format!("{ip} is the network or broadcast address of {c}"),
                );
            }
        }
    }

    /// Like [`NetParts::in_net`] for a node's address, which may also be a
    /// host address of a `dhcp.segments[]` subnet (not its gateway).
    pub(crate) fn in_node_net(&self, e: &mut Errs, path: &str, ip: Option<Ipv4Addr>) {
        let Some(ip) = ip else { return };
        let Some((j, (c, gw))) = self
            .segments
            .iter()
            .enumerate()
            .find(|(_, (c, _))| c.contains(ip))
        else {
            if let Some(c) = self.cidr.filter(|c| !c.contains(ip))
                && !self.segments.is_empty()
            {
                e.push(
                    path,
                    format!("{ip} is outside network.cidr {c} and every dhcp.segments[].cidr"),
                );
                return;
            }
            return self.in_net(e, path, Some(ip));
        };
        if c.is_reserved(ip) {
            e.push(
                path,
                format!("{ip} is the network or broadcast address of dhcp.segments[{j}] {c}"),
            );
        } else if ip == *gw {
            e.push(path, format!("{ip} is the gateway of dhcp.segments[{j}]"));
        }
    }

    /// The addresses nodes and pools must not take, by field name.
    pub(crate) fn taken(&self) -> [(&'static str, Option<Ipv4Addr>); 4] {
        [
            ("network.applianceIP", self.appliance_ip),
            ("network.gateway", self.gateway),
            ("network.apiVIP", self.api_vip),
            ("network.ingressVIP", self.ingress_vip),
        ]
    }

    /// The section, when every part of it is valid.
    pub(crate) fn finish(&self, raw: &raw::Network) -> Option<NetworkCfg> {
        if self.failed {
            return None;
        }
        let ipv6 = match &self.v6 {
            None => None,
            Some(v6) => Some(v6.finish()?),
        };
        Some(NetworkCfg {
            cidr: self.cidr?,
            gateway: self.gateway?,
            appliance_ip: self.appliance_ip?,
            api_vip: self.api_vip?,
            ingress_vip: self.ingress_vip?,
            interface: raw.interface.clone(),
            upstream_dns: self.upstream_dns.clone(),
            ipv6,
        })
    }
}

pub(crate) fn parts(n: &raw::Network, e: &mut Errs) -> NetParts {
    let before = e.len();
    let mut cidr = e.parse::<Ipv4Net>("network.cidr", &n.cidr, "IPv4 CIDR (a.b.c.d/prefix)");
    if let Some(c) = cidr
        && (c.prefix() < 16 || c.prefix() > 30)
    {
        e.push(
            "network.cidr",
            format!("prefix /{} is not supported (use /16 to /30)", c.prefix()),
        );
        // One mistake, one message: no address is checked against a
        // network the file cannot have.
        cidr = None;
    }
    let mut p = NetParts {
        cidr,
        gateway: None,
        appliance_ip: None,
        api_vip: None,
        ingress_vip: None,
        upstream_dns: Vec::new(),
        segments: Vec::new(),
        v6: None,
        static_default: false,
        failed: false,
    };
    p.gateway = e.parse::<Ipv4Addr>("network.gateway", &n.gateway, "IPv4 address");
    p.in_net(e, "network.gateway", p.gateway);
    p.appliance_ip = e.parse::<Ipv4Addr>("network.applianceIP", &n.appliance_ip, "IPv4 address");
    p.in_net(e, "network.applianceIP", p.appliance_ip);
    p.api_vip = match &n.api_vip {
        Some(v) => {
            let ip = e.parse::<Ipv4Addr>("network.apiVIP", v, "IPv4 address");
            p.in_net(e, "network.apiVIP", ip);
            ip
        }
        None => p.appliance_ip,
    };
    p.ingress_vip = match &n.ingress_vip {
        Some(v) => {
            let ip = e.parse::<Ipv4Addr>("network.ingressVIP", v, "IPv4 address");
            p.in_net(e, "network.ingressVIP", ip);
            ip
        }
        None => p.appliance_ip,
    };
    if let Some(ifname) = &n.interface
        && (ifname.is_empty() || ifname.len() > 15 || ifname.contains(['/', ' ']))
    {
        e.push(
            "network.interface",
            format!("{ifname:?} is not a valid interface name (1-15 characters, no '/' or spaces)"),
        );
    }
    for (i, u) in n.upstream_dns.iter().enumerate() {
        if let Some(sa) = sock(e, &format!("network.upstreamDNS[{i}]"), u, Some(53)) {
            p.upstream_dns.push(sa);
        }
    }
    p.static_default =
        super::addressing::parse(e, "network.addressing", n.addressing.as_deref()) == Some(true);
    p.failed = e.len() > before;
    // After `failed`: the IPv6 half keeps its own flag (its pool is
    // checked later, against the nodes).
    p.v6 = super::ipv6::parts(n.ipv6.as_ref(), e);
    // Router advertisements go out on one link: the cluster interface.
    if n.ipv6.as_ref().is_some_and(|v6| v6.router_advertisements) && n.interface.is_none() {
        e.push(
            "network.ipv6.routerAdvertisements",
            "needs network.interface (the link to advertise on)",
        );
    }
    p
}
