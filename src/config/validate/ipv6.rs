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
    pub fn in_net(&self, e: &mut Errs, path: &str, ip: Option<Ipv6Addr>) {
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
    pub fn taken(&self) -> [(&'static str, Option<Ipv6Addr>); 4] {
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
    pub fn node(&self, e: &mut Errs, path: &str, text: &str) -> Option<Ipv6Addr> {
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
    pub fn check_pool(&mut self, raw: &raw::Ipv6, nodes: Option<&[NodeCfg]>, e: &mut Errs) {
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
    pub fn finish(&self) -> Option<Ipv6Cfg> {
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
mod tests {
    use std::net::Ipv6Addr;
    use std::path::Path;

    use crate::config::{ConfigError, from_str};
    use crate::model::names::RData;
    use crate::plan::Plan;

    const V4: &str = r#"name: ocp4
baseDomain: example.com
network:
  cidr: 192.168.131.0/24
  gateway: 192.168.131.1
  applianceIP: 192.168.131.2
"#;

    const NODES: &str = r#"nodes:
  - { name: bootstrap, role: bootstrap, mac: "52:54:00:00:00:05", ip: 192.168.131.5, ipv6: "fd00:131::5" }
  - { name: master-0, role: master, mac: "52:54:00:00:00:0a", ip: 192.168.131.10, ipv6: "fd00:131::a" }
  - { name: worker-0, role: worker, mac: "52:54:00:00:00:14", ip: 192.168.131.20 }
"#;

    fn file(v6: &str, nodes: &str) -> String {
        format!("{V4}{v6}{nodes}")
    }

    fn load(text: &str) -> Result<Plan, ConfigError> {
        from_str(text, Path::new("/base"), Path::new("t.yaml"))
    }

    /// The `path: message` lines of a file that must be refused.
    fn errors(text: &str) -> Vec<String> {
        match load(text) {
            Ok(_) => panic!("accepted:\n{text}"),
            Err(ConfigError::Invalid { errors, .. }) => {
                errors.iter().map(|e| e.to_string()).collect()
            }
            Err(e) => panic!("{e}"),
        }
    }

    fn ip(s: &str) -> Ipv6Addr {
        s.parse().unwrap()
    }

    const GOOD: &str = "  ipv6:\n    cidr: fd00:131::/64\n    applianceIP: fd00:131::2\n";

    #[test]
    fn a_v4_only_file_has_no_ipv6_anywhere() {
        let plan = load(&file(
            "",
            &NODES
                .replace(", ipv6: \"fd00:131::5\"", "")
                .replace(", ipv6: \"fd00:131::a\"", ""),
        ))
        .unwrap();
        let c = &plan.cluster;
        assert!(c.network.ipv6.is_none());
        assert!(c.nodes.iter().all(|n| n.ipv6.is_none()));
        assert_eq!(c.api_address_v6(), None);
        assert!(c.apps_addresses_v6().is_empty());
        assert_eq!(c.dns.listen, ["192.168.131.2:53".parse().unwrap()]);
        let aaaa = plan
            .zones
            .iter()
            .flat_map(|z| &z.records)
            .filter(|r| matches!(r.data, RData::Aaaa(_)) || r.name.ends_with("ip6.arpa."))
            .count();
        assert_eq!(aaaa, 0);
        assert_eq!(plan.zones.len(), 2);
    }

    #[test]
    fn dual_stack_defaults_and_accessors() {
        let plan = load(&file(
            &format!("{GOOD}    pool: {{ start: \"fd00:131::1000\", end: \"fd00:131::1fff\" }}\n"),
            NODES,
        ))
        .unwrap();
        let c = &plan.cluster;
        let v6 = c.ipv6().unwrap();
        assert_eq!(v6.cidr.to_string(), "fd00:131::/64");
        assert_eq!(v6.vips(), (ip("fd00:131::2"), ip("fd00:131::2")));
        assert!(!v6.router_advertisements);
        assert_eq!(v6.gateway, None);
        assert_eq!(v6.pool, Some((ip("fd00:131::1000"), ip("fd00:131::1fff"))));
        assert!(v6.in_pool(ip("fd00:131::1234")));
        assert_eq!(c.node_ipv6("master-0"), Some(ip("fd00:131::a")));
        assert_eq!(c.node_ipv6("worker-0"), None);
        assert_eq!(c.api_address_v6(), Some(ip("fd00:131::2")));
        assert_eq!(c.apps_addresses_v6(), [ip("fd00:131::2")]);
        assert_eq!(
            c.dns.listen,
            [
                "192.168.131.2:53".parse().unwrap(),
                "[fd00:131::2]:53".parse().unwrap()
            ]
        );
        assert!(c.is_cluster_client("fd00:131::99".parse().unwrap()));
        assert!(!c.is_cluster_client("fd00:132::99".parse().unwrap()));
        assert_eq!(
            c.reverse_zones(),
            [
                "131.168.192.in-addr.arpa.",
                "0.0.0.0.0.0.0.0.1.3.1.0.0.0.d.f.ip6.arpa."
            ]
        );
    }

    #[test]
    fn vips_gateway_and_upstreams() {
        let v6 = "  upstreamDNS: [\"[fd00:99::53]:5353\", \"fd00:99::54\", \"10.0.0.53\"]\n  ipv6:\n    cidr: 2001:db8:131::/48\n    applianceIP: 2001:db8:131::2\n    gateway: fe80::1\n    routerAdvertisements: true\n    apiVIP: 2001:db8:131::3\n    ingressVIP: 2001:db8:131::4\n";
        let plan = load(&file(v6, &NODES.replace("fd00:131::", "2001:db8:131::"))).unwrap();
        let c = &plan.cluster;
        let v6 = c.ipv6().unwrap();
        assert!(v6.router_advertisements);
        assert_eq!(v6.gateway, Some(ip("fe80::1")));
        assert_eq!(v6.vips(), (ip("2001:db8:131::3"), ip("2001:db8:131::4")));
        let up: Vec<String> = c
            .network
            .upstream_dns
            .iter()
            .map(|a| a.to_string())
            .collect();
        assert_eq!(
            up,
            ["[fd00:99::53]:5353", "[fd00:99::54]:53", "10.0.0.53:53"]
        );
        // A gateway inside the prefix is fine too.
        let g = GOOD.to_string() + "    gateway: fd00:131::1\n";
        assert!(load(&file(&g, NODES)).is_ok());
    }

    #[test]
    fn every_ipv6_error_at_once_with_its_path() {
        let v6 = "  ipv6:\n    cidr: fd00:131::/64\n    applianceIP: fd00:132::2\n    gateway: \"fd00:131::\"\n    apiVIP: fd00:131::a\n    ingressVIP: nope\n    pool: { start: \"fd00:131::9\", end: \"fd00:131::20\" }\n";
        let nodes = NODES.replace(
            "ip: 192.168.131.20 }",
            "ip: 192.168.131.20, ipv6: \"fd00:131::5\" }",
        );
        let got = errors(&file(v6, &nodes));
        let want = [
            "network.ipv6.applianceIP: fd00:132::2 is outside network.ipv6.cidr fd00:131::/64",
            "network.ipv6.gateway: fd00:131:: is the subnet-router anycast address of fd00:131::/64 (all host bits zero)",
            "network.ipv6.ingressVIP: \"nope\" is not a valid IPv6 address (invalid IPv6 address syntax)",
            "nodes[1].ipv6: fd00:131::a is already used by network.ipv6.apiVIP (give the node its own address)",
            "nodes[2].ipv6: duplicate IPv6 address fd00:131::5 (also nodes[0].ipv6)",
            "network.ipv6.pool: range fd00:131::9-fd00:131::20 contains network.ipv6.apiVIP fd00:131::a",
            "network.ipv6.pool: range fd00:131::9-fd00:131::20 contains the reserved address of 1 node: fd00:131::a (master-0) (move the pool clear of the nodes' addresses)",
        ];
        assert_eq!(got, want, "{got:#?}");
    }

    #[test]
    fn prefix_lengths_off_the_nibble_boundary_are_refused() {
        let got = errors(&file(&GOOD.replace("/64", "/62"), NODES));
        assert_eq!(
            got,
            [
                "network.ipv6.cidr: prefix length /62 is not a multiple of 4: the reverse zone (ip6.arpa) is delegated per 4-bit nibble, so the prefix must end on one (use /60 or /64)"
            ],
        );
        // One message: no address is checked against that prefix.
        for (cidr, want) in [
            ("fd00::/8", "is not supported"),
            ("fd00:131::/128", "is not supported"),
            ("fe80::/64", "link-local"),
            ("ff00::/64", "multicast"),
            ("fd00:131::1/64", "host bits"),
            ("192.168.0.0/24", "not an IPv6 address"),
        ] {
            let got = errors(&file(&GOOD.replace("fd00:131::/64", cidr), NODES));
            assert!(
                got.len() == 1
                    && got[0].starts_with("network.ipv6.cidr: ")
                    && got[0].contains(want),
                "{cidr}: {got:?}"
            );
        }
    }

    #[test]
    fn node_ipv6_needs_network_ipv6_and_pool_order() {
        let got = errors(&file("", NODES));
        assert_eq!(
            got,
            [
                "nodes[0].ipv6: needs network.ipv6 (a dual-stack network: its cidr and applianceIP)",
                "nodes[1].ipv6: needs network.ipv6 (a dual-stack network: its cidr and applianceIP)",
            ]
        );
        let pool =
            format!("{GOOD}    pool: {{ start: \"fd00:131::2f\", end: \"fd00:131::20\" }}\n");
        assert_eq!(
            errors(&file(&pool, NODES)),
            ["network.ipv6.pool: start fd00:131::2f is after end fd00:131::20"]
        );
        let pool = format!("{GOOD}    pool: {{ start: \"fd00:131::1\", end: \"fd00:131::3\" }}\n");
        assert_eq!(
            errors(&file(&pool, NODES)),
            [
                "network.ipv6.pool: range fd00:131::1-fd00:131::3 contains network.ipv6.applianceIP fd00:131::2",
                "network.ipv6.pool: range fd00:131::1-fd00:131::3 contains network.ipv6.apiVIP fd00:131::2",
                "network.ipv6.pool: range fd00:131::1-fd00:131::3 contains network.ipv6.ingressVIP fd00:131::2",
            ]
        );
        // Unknown keys are refused like everywhere else.
        let typo = format!("{GOOD}    routerAdvertisement: true\n");
        assert!(matches!(
            load(&file(&typo, NODES)),
            Err(ConfigError::Parse { .. })
        ));
    }

    #[test]
    fn user_records_in_the_ip6_arpa_zone() {
        let rec = "dns:\n  records:\n    - { name: \"1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.1.3.1.0.0.0.d.f.ip6.arpa.\", type: PTR, value: gw }\n    - { name: registry, type: AAAA, value: \"fd00:131::50\" }\n";
        let plan = load(&file(GOOD, &format!("{NODES}{rec}"))).unwrap();
        let z6 = plan.zones.last().unwrap();
        assert_eq!(z6.origin, "0.0.0.0.0.0.0.0.1.3.1.0.0.0.d.f.ip6.arpa.");
        assert!(
            z6.records
                .iter()
                .any(|r| r.data == RData::Ptr("gw.ocp4.example.com.".into()))
        );
        // An AAAA at a name the appliance serves one at is a conflict.
        let rec = "dns:\n  records:\n    - { name: api, type: AAAA, value: \"fd00:131::50\" }\n";
        let got = errors(&file(GOOD, &format!("{NODES}{rec}")));
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(
            got[0].starts_with("dns.records[0]: api.ocp4.example.com. already has the AAAA"),
            "{got:?}"
        );
    }
}
