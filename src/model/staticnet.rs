//! A static node's network (`addressing: static`, docs/bare-metal.md): the
//! one derivation both its install kernel arguments and the
//! NetworkManager keyfile in its ignition are written from, so the live
//! installer and the installed system carry the same address.
//!
//! Pure: cluster + node → [`StaticNet`] → text.
//!
//! Invariants:
//! - The address is the node's `ip` on `network.cidr`, or on the
//!   `dhcp.segments[]` subnet it lies in (that subnet's gateway and mask);
//!   the IPv6 twin only for a node with an IPv6 address on a dual-stack
//!   network (gateway `network.ipv6.gateway`, else none); the interface is
//!   `nodes[].interface`.
//! - The name servers ([`nameservers`]): the appliance's IPv4 address while
//!   its DNS runs (`dns.enabled`); with the appliance's DNS off, the site's
//!   resolvers `network.upstreamDNS` that listen on port 53 (a kernel
//!   argument and a keyfile carry no port); none → no `nameserver=` and no
//!   `dns=`.
//! - The keyfile is what NetworkManager's `nm-initrd-generator` writes from
//!   the same `ip=`/`nameserver=` arguments for the `[ipv4]` and `[ipv6]`
//!   sections (`method=manual`, `address1=<ip>/<prefix>,<gateway>`,
//!   `dns=<a>;…`, `may-fail=false`; an IPv4-only node `[ipv6]
//!   method=disabled`), under the same connection id, the interface name,
//!   and the same file name `<interface>.nmconnection`: first boot finds the
//!   profile Ignition wrote in the real root and makes no second one
//!   (RHCOS's `coreos-teardown-initramfs` propagates the initramfs's
//!   profile only when the real root has none). Without the initramfs-only
//!   settings (`autoconnect-priority=-100`, `autoconnect-retries=1`,
//!   `dhcp-*`): this profile is the installed system's own.

use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::cluster::{Cluster, NodeCfg};

/// Where a static node's keyfile goes in the installed root.
pub const KEYFILE_DIR: &str = "/etc/NetworkManager/system-connections";

/// A static node's addresses, interface and name servers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaticNet {
    /// `nodes[].interface`.
    pub interface: String,
    /// The node's FQDN (`<node>.<name>.<baseDomain>`).
    pub hostname: String,
    pub ip: Ipv4Addr,
    pub prefix: u8,
    pub netmask: Ipv4Addr,
    pub gateway: Ipv4Addr,
    /// The IPv6 twin: address, prefix length, gateway.
    pub v6: Option<(Ipv6Addr, u8, Option<Ipv6Addr>)>,
    pub nameservers: Vec<IpAddr>,
}

/// The name servers a static node is given (see the module doc).
pub fn nameservers(c: &Cluster) -> Vec<IpAddr> {
    if c.dns.enabled {
        return vec![IpAddr::V4(c.network.appliance_ip)];
    }
    let mut out: Vec<IpAddr> = Vec::new();
    for u in c.network.upstream_dns.iter().filter(|u| u.port() == 53) {
        if !out.contains(&u.ip()) {
            out.push(u.ip());
        }
    }
    out
}

impl StaticNet {
    /// `node`'s static network; `None` for a node with `addressing: dhcp`.
    pub fn of(c: &Cluster, node: &NodeCfg) -> Option<StaticNet> {
        if !node.static_address {
            return None;
        }
        let net = c
            .dhcp
            .segments
            .iter()
            .find(|s| s.cidr.contains(node.ip))
            .map_or((c.network.cidr, c.network.gateway), |s| (s.cidr, s.gateway));
        let v6 = match (&c.network.ipv6, node.ipv6) {
            (Some(v6), Some(ip6)) => Some((ip6, v6.cidr.prefix(), v6.gateway)),
            _ => None,
        };
        Some(StaticNet {
            interface: node.interface.clone().unwrap_or_default(),
            hostname: format!("{}.{}", node.name, c.domain),
            ip: node.ip,
            prefix: net.0.prefix(),
            netmask: net.0.netmask(),
            gateway: net.1,
            v6,
            nameservers: nameservers(c),
        })
    }

    /// dracut's network arguments: `ip=<ip>::<gw>:<mask>:<fqdn>:<if>:none`,
    /// the IPv6 twin `ip=[<ip6>]::[<gw6>]:<prefix>:<fqdn>:<if>:none`, then
    /// `nameserver=` per name server (IPv6 ones in brackets).
    pub fn kargs(&self) -> Vec<String> {
        let (host, iface) = (&self.hostname, &self.interface);
        let mut k = vec![format!(
            "ip={}::{}:{}:{host}:{iface}:none",
            self.ip, self.gateway, self.netmask
        )];
        if let Some((ip6, prefix, gw6)) = self.v6 {
            let gw6 = gw6.map(|g| format!("[{g}]")).unwrap_or_default();
            k.push(format!("ip=[{ip6}]::{gw6}:{prefix}:{host}:{iface}:none"));
        }
        for ns in &self.nameservers {
            k.push(match ns {
                IpAddr::V4(a) => format!("nameserver={a}"),
                IpAddr::V6(a) => format!("nameserver=[{a}]"),
            });
        }
        k
    }

    /// `/etc/NetworkManager/system-connections/<interface>.nmconnection`.
    pub fn keyfile_path(&self) -> String {
        format!("{KEYFILE_DIR}/{}.nmconnection", self.interface)
    }

    /// The keyfile's text (see the module doc).
    pub fn keyfile(&self) -> String {
        let dns = |v6: bool| -> String {
            self.nameservers
                .iter()
                .filter(|a| a.is_ipv6() == v6)
                .map(|a| format!("{a};"))
                .collect()
        };
        let mut t = String::new();
        let iface = &self.interface;
        let _ = writeln!(
            t,
            "# {} (addressing: static), by crc-appliance",
            self.hostname
        );
        let _ = writeln!(t, "\n[connection]\nid={iface}\ntype=ethernet");
        let _ = writeln!(t, "interface-name={iface}\nautoconnect=true");
        let _ = writeln!(t, "\n[ethernet]\n\n[ipv4]");
        let _ = writeln!(t, "address1={}/{},{}", self.ip, self.prefix, self.gateway);
        section_tail(&mut t, &dns(false));
        let _ = writeln!(t, "\n[ipv6]");
        match self.v6 {
            Some((ip6, prefix, gw6)) => {
                let gw = gw6.map(|g| format!(",{g}")).unwrap_or_default();
                let _ = writeln!(t, "address1={ip6}/{prefix}{gw}");
                section_tail(&mut t, &dns(true));
            }
            None => t.push_str("method=disabled\n"),
        }
        t
    }
}

/// `dns=` (when any), `may-fail=false`, `method=manual`: the rest of a
/// static `[ipv4]` or `[ipv6]` section, keys in nm-initrd-generator's order.
fn section_tail(t: &mut String, dns: &str) {
    if !dns.is_empty() {
        let _ = writeln!(t, "dns={dns}");
    }
    t.push_str("may-fail=false\nmethod=manual\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(extra: &str) -> Cluster {
        let text = format!(
            "name: c\nbaseDomain: example.com\n\
             network: {{ cidr: 10.0.0.0/24, gateway: 10.0.0.254, applianceIP: 10.0.0.1, addressing: static, \
             ipv6: {{ cidr: 'fd00::/64', applianceIP: 'fd00::1', gateway: 'fd00::fe' }} }}\n\
             nodes:\n\
             \x20 - {{ name: m0, role: master, mac: '52:54:00:00:00:01', ip: 10.0.0.10, ipv6: 'fd00::10', interface: eno1 }}\n\
             \x20 - {{ name: w0, role: worker, mac: '52:54:00:00:00:02', ip: 10.0.0.20, interface: eth0 }}\n\
             \x20 - {{ name: w1, role: worker, mac: '52:54:00:00:00:03', ip: 10.0.0.21, addressing: dhcp }}\n{extra}"
        );
        crate::config::from_str(&text, std::path::Path::new("/"), std::path::Path::new("t"))
            .unwrap_or_else(|e| panic!("{e}"))
            .cluster
    }

    fn of(c: &Cluster, n: &str) -> Option<StaticNet> {
        StaticNet::of(c, c.node(n).unwrap())
    }

    #[test]
    fn a_dual_stack_keyfile() {
        let c = cluster("");
        let s = of(&c, "m0").unwrap();
        assert_eq!(
            s.keyfile_path(),
            "/etc/NetworkManager/system-connections/eno1.nmconnection"
        );
        assert_eq!(
            s.keyfile(),
            "# m0.c.example.com (addressing: static), by crc-appliance\n\
             \n[connection]\nid=eno1\ntype=ethernet\ninterface-name=eno1\nautoconnect=true\n\
             \n[ethernet]\n\
             \n[ipv4]\naddress1=10.0.0.10/24,10.0.0.254\ndns=10.0.0.1;\nmay-fail=false\nmethod=manual\n\
             \n[ipv6]\naddress1=fd00::10/64,fd00::fe\nmay-fail=false\nmethod=manual\n"
        );
        assert_eq!(
            s.kargs(),
            [
                "ip=10.0.0.10::10.0.0.254:255.255.255.0:m0.c.example.com:eno1:none",
                "ip=[fd00::10]::[fd00::fe]:64:m0.c.example.com:eno1:none",
                "nameserver=10.0.0.1",
            ]
        );
    }

    #[test]
    fn an_ipv4_only_node_disables_ipv6() {
        let c = cluster("");
        let k = of(&c, "w0").unwrap().keyfile();
        assert!(k.ends_with("\n[ipv6]\nmethod=disabled\n"), "{k}");
        assert!(k.contains("\naddress1=10.0.0.20/24,10.0.0.254\n"), "{k}");
        assert!(of(&c, "w1").is_none(), "a DHCP node has no static network");
    }

    #[test]
    fn a_segment_node_takes_its_subnets_gateway_and_mask() {
        let c = cluster(
            "dhcp:\n  segments:\n    - { cidr: 10.7.0.0/16, gateway: 10.7.0.1, pool: { start: 10.7.0.100, end: 10.7.0.101 } }\n  relays: [10.0.0.2]\n",
        );
        let mut node = c.node("w0").unwrap().clone();
        node.ip = "10.7.3.4".parse().unwrap();
        let s = StaticNet::of(&c, &node).unwrap();
        assert_eq!(
            s.kargs()[0],
            "ip=10.7.3.4::10.7.0.1:255.255.0.0:w0.c.example.com:eth0:none"
        );
        assert!(s.keyfile().contains("\naddress1=10.7.3.4/16,10.7.0.1\n"));
    }

    /// With the appliance's DNS off, the site's resolvers on port 53 are
    /// named; none → no name server at all.
    #[test]
    fn name_servers_follow_the_appliances_dns() {
        let mut c = cluster("dns: { enabled: false }\n");
        let s = of(&c, "m0").unwrap();
        assert!(s.nameservers.is_empty());
        assert!(!s.kargs().iter().any(|k| k.starts_with("nameserver=")));
        assert!(!s.keyfile().contains("dns="), "{}", s.keyfile());
        // A resolver on another port cannot be named; duplicates once.
        c.network.upstream_dns = [
            "10.9.0.53:53",
            "10.9.0.54:5353",
            "[fd00:9::53]:53",
            "10.9.0.53:53",
        ]
        .iter()
        .map(|a| a.parse().unwrap())
        .collect();
        let s = of(&c, "m0").unwrap();
        assert_eq!(
            s.kargs()[2..],
            ["nameserver=10.9.0.53", "nameserver=[fd00:9::53]"]
        );
        let k = s.keyfile();
        assert!(k.contains("\ndns=10.9.0.53;\n"), "{k}");
        assert!(
            k.contains(
                "\nmethod=manual\n\n[ipv6]\naddress1=fd00::10/64,fd00::fe\ndns=fd00:9::53;\n"
            ),
            "{k}"
        );
    }
}
