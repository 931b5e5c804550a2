//! `network.ipv6` (dual-stack): the prefix, the appliance's, gateway's and
//! VIPs' IPv6 addresses, and the DHCPv6 pool; `nodes[].ipv6` is checked by
//! `nodes` against what parsed here ([`V6Parts::node`]).
//!
//! Rules, as for IPv4: every address a host of `cidr` (not its
//! subnet-router anycast address, all host bits zero), the VIPs defaulting
//! to `applianceIP`, the pool ordered and clear of every reserved address
//! (appliance, gateway, VIPs, nodes). The prefix length must be a multiple
//! of 4: the reverse zone is one `ip6.arpa` zone, and `ip6.arpa` is
//! delegated per nibble (RFC 3596 2.5). The gateway may also be link-local
//! (routers often announce `fe80::1`).

use std::net::Ipv6Addr;

use super::Errs;
use crate::config::raw;
use crate::model::cluster::NodeCfg;
use crate::model::ipv6::{Ipv6Cfg, Ipv6Net};

/// Shortest and longest prefix accepted: a /124 still has 15 hosts.
const PREFIX_MIN: u8 = 16;
const PREFIX_MAX: u8 = 124;

/// What parsed of `network.ipv6` (a field is `None` when it had an error).
pub(crate) struct V6Parts {
    pub cidr: Option<Ipv6Net>,
    pub appliance_ip: Option<Ipv6Addr>,
    pub gateway: Option<Ipv6Addr>,
    pub api_vip: Option<Ipv6Addr>,
    pub ingress_vip: Option<Ipv6Addr>,
    router_advertisements: bool,
    pool: Option<(Ipv6Addr, Ipv6Addr)>,
    /// An error was recorded for the section.
    failed: bool,
}

const P: &str = "network.ipv6";

impl V6Parts {
    /// Record an error at `path` unless `ip` is a host address of the cidr.
    pub(crate) fn in_net(&self, e: &mut Errs, path: &str, ip: Option<Ipv6Addr>) {
        if let (Some(c), Some(ip)) = (self.cidr, ip) {
            if !c.contains(ip) {
                e.push(path, format!("{ip} is outside {P}.cidr {c}"));
            } else if c.is_reserved(ip) {
                e.push(
                    path,
                    format!(
                        "{ip} is the subnet-router anycast address of {c} (all host bits zero)"
                    ),
                );
            }
        }
    }

    /// The IPv6 addresses nodes and the pool must not take, by field name.
    pub(crate) fn taken(&self) -> [(&'static str, Option<Ipv6Addr>); 4] {
        [
            ("network.ipv6.applianceIP", self.appliance_ip),
            ("network.ipv6.gateway", self.gateway),
            ("network.ipv6.apiVIP", self.api_vip),
            ("network.ipv6.ingressVIP", self.ingress_vip),
        ]
    }

    /// Check one node's `ipv6` text at `path`: inside the cidr, not an
    /// address of the appliance, gateway or a VIP. Uniqueness among the
    /// nodes is the caller's.
    pub(crate) fn node(&self, e: &mut Errs, path: &str, text: &str) -> Option<Ipv6Addr> {
        let ip = parse(e, path, text)?;
        self.in_net(e, path, Some(ip));
        let users: Vec<&str> = self
            .taken()
            .into_iter()
            .filter(|(_, other)| *other == Some(ip))
            .map(|(what, _)| what)
            .collect();
        if !users.is_empty() {
            e.push(
                path,
                format!(
                    "{ip} is already used by {} (give the node its own address)",
                    users.join(", ")
                ),
            );
        }
        Some(ip)
    }

    /// Check `network.ipv6.pool` against the section and the nodes' IPv6
    /// addresses (run after the nodes are built).
    pub(crate) fn check_pool(&mut self, raw: &raw::Ipv6, nodes: Option<&[NodeCfg]>, e: &mut Errs) {
        let before = e.len();
        self.pool = raw.pool.as_ref().and_then(|p| {
            let s = parse(e, &format!("{P}.pool.start"), &p.start);
            self.in_net(e, &format!("{P}.pool.start"), s);
            let t = parse(e, &format!("{P}.pool.end"), &p.end);
            self.in_net(e, &format!("{P}.pool.end"), t);
            let (s, t) = (s?, t?);
            if s > t {
                e.push(format!("{P}.pool"), format!("start {s} is after end {t}"));
                return None;
            }
            let inside = |ip: &Ipv6Addr| (s..=t).contains(ip);
            for (what, ip) in self.taken() {
                if let Some(ip) = ip.filter(inside) {
                    e.push(
                        format!("{P}.pool"),
                        format!("range {s}-{t} contains {what} {ip}"),
                    );
                }
            }
            let hit: Vec<String> = nodes
                .unwrap_or_default()
                .iter()
                .filter_map(|n| n.ipv6.filter(inside).map(|ip| format!("{ip} ({})", n.name)))
                .collect();
            if !hit.is_empty() {
                let many = hit.len() > 1;
                e.push(
                    format!("{P}.pool"),
                    format!(
                        "range {s}-{t} contains the reserved address{} of {} node{}: {} (move the pool clear of the nodes' addresses)",
                        if many { "es" } else { "" },
                        hit.len(),
                        if many { "s" } else { "" },
                        hit.join(", ")
                    ),
                );
            }
            Some((s, t))
        });
        self.failed |= e.len() > before;
    }

    /// The section, when every part of it is valid.
    pub(crate) fn finish(&self) -> Option<Ipv6Cfg> {
        if self.failed {
            return None;
        }
        Some(Ipv6Cfg {
            cidr: self.cidr?,
            appliance_ip: self.appliance_ip?,
            gateway: self.gateway,
            router_advertisements: self.router_advertisements,
            api_vip: self.api_vip?,
            ingress_vip: self.ingress_vip?,
            pool: self.pool,
        })
    }
}

fn parse(e: &mut Errs, path: &str, text: &str) -> Option<Ipv6Addr> {
    e.parse::<Ipv6Addr>(path, text, "IPv6 address")
}

/// The prefix, or `None` (with the error recorded) when it is malformed or
/// not one this appliance can serve.
fn cidr(e: &mut Errs, text: &str) -> Option<Ipv6Net> {
    let path = format!("{P}.cidr");
    let c = e.parse::<Ipv6Net>(&path, text, "IPv6 CIDR (prefix/length)")?;
    let n = c.network();
    let problem = if !c.nibble_aligned() {
        let (lo, hi) = (c.prefix() / 4 * 4, c.prefix() / 4 * 4 + 4);
        Some(format!(
            "prefix length /{} is not a multiple of 4: the reverse zone (ip6.arpa) is delegated per 4-bit nibble, so the prefix must end on one (use /{lo} or /{hi})",
            c.prefix()
        ))
    } else if !(PREFIX_MIN..=PREFIX_MAX).contains(&c.prefix()) {
        Some(format!(
            "prefix /{} is not supported (use /{PREFIX_MIN} to /{PREFIX_MAX}; /64 is usual)",
            c.prefix()
        ))
    } else if n.is_multicast() {
        Some(format!("{c} is a multicast prefix"))
    } else if n.is_unicast_link_local() {
        Some(format!(
            "{c} is link-local; use a global or unique local (fd00::/8) prefix"
        ))
    } else if n.to_ipv4_mapped().is_some() {
        Some(format!(
            "{c} is IPv4-mapped; put the IPv4 network in network.cidr"
        ))
    } else {
        None
    };
    match problem {
        Some(m) => {
            e.push(path, m);
            // One mistake, one message: no address is checked against a
            // prefix the file cannot have.
            None
        }
        None => Some(c),
    }
}

/// Parse `network.ipv6`; `None` when the file has none.
pub(crate) fn parts(raw: Option<&raw::Ipv6>, e: &mut Errs) -> Option<V6Parts> {
    let r = raw?;
    let before = e.len();
    let mut p = V6Parts {
        cidr: cidr(e, &r.cidr),
        appliance_ip: None,
        gateway: None,
        api_vip: None,
        ingress_vip: None,
        router_advertisements: r.router_advertisements,
        pool: None,
        failed: false,
    };
    let path = format!("{P}.applianceIP");
    p.appliance_ip = parse(e, &path, &r.appliance_ip);
    p.in_net(e, &path, p.appliance_ip);
    if let Some(g) = &r.gateway {
        let path = format!("{P}.gateway");
        p.gateway = parse(e, &path, g);
        if !p.gateway.is_some_and(|g| g.is_unicast_link_local()) {
            p.in_net(e, &path, p.gateway);
        }
    }
    let vip = |e: &mut Errs, p: &V6Parts, name: &str, v: &Option<String>| match v {
        Some(v) => {
            let path = format!("{P}.{name}");
            let ip = parse(e, &path, v);
            p.in_net(e, &path, ip);
            ip
        }
        None => p.appliance_ip,
    };
    p.api_vip = vip(e, &p, "apiVIP", &r.api_vip);
    p.ingress_vip = vip(e, &p, "ingressVIP", &r.ingress_vip);
    p.failed = e.len() > before;
    Some(p)
}

#[cfg(test)]
#[path = "ipv6_tests.rs"]
mod tests;
