//! Who may fetch a node's secrets (pure): the access rules of the HTTP
//! ignition routes, the per-node boot ISOs and the machine-config frontend.
//!
//! What is at stake: `bootstrap.ign` holds the cluster's root CA and etcd
//! private keys; the role pointer configs and `<node>.ign` lead a host into
//! the cluster; the machine-config server (22623) hands out rendered configs
//! with the kubelet bootstrap credentials. Each has a natural owner, so:
//!
//! | what | served to |
//! |---|---|
//! | a node's own file (`<node>.ign`, `/boot/<node>.iso`) | that node's address |
//! | a bootstrap role file (`bootstrap.ign` as a role) | the bootstrap node(s) |
//! | a master or worker role file (`master.ign`, `/boot/worker.iso`) | any node |
//! | the machine-config frontend | any node |
//!
//! and, whatever the file, to the appliance host itself ([`Client::Local`]:
//! loopback, and `network.applianceIP`, which only the host can use as a
//! source address towards itself) and to the operator's explicit extra
//! networks (`http.ignitionClientCidrs` for HTTP,
//! `loadBalancer.machineConfigClientCidrs` for 22623). A boot ISO also
//! answers to `http.bootIsoCidrs` (the BMCs' network) and a node's ISO to
//! that node's BMC when its Redfish URL names an IPv4 address. Everyone
//! else — a DHCP pool client, another node, a host outside the cluster —
//! is refused.
//!
//! Invariants: an address is a node's when it equals the node's `ip`
//! (IPv4-mapped IPv6 counts as its IPv4 address) or, in a dual-stack
//! cluster (`network.ipv6`), the node's `ipv6`; the IPv6 applianceIP is
//! local like the IPv4 one. Any other IPv6 address but `::1` (a DHCPv6
//! pool client, another host of the IPv6 prefix) is neither local nor a
//! node, so the per-node rules are the same for both families. The extra
//! networks (`http.ignitionClientCidrs`, `http.bootIsoCidrs`,
//! `loadBalancer.machineConfigClientCidrs`) are IPv4; a BMC named by an
//! IPv6 literal gets its node's ISO over IPv6. The rules look only at the
//! validated cluster, so a reload changes them for the next request or
//! connection.

use std::net::{IpAddr, Ipv4Addr};

use super::cluster::{Cluster, NodeCfg, Role};
use super::net::Ipv4Net;

/// A client address as the rules see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Client<'a> {
    /// Loopback or `network.applianceIP`: the appliance host, the operator.
    Local,
    /// The address of this node.
    Node(&'a NodeCfg),
    /// Anyone else.
    Other,
}

/// `ip` as IPv4 (IPv4-mapped IPv6 unwrapped), if it is one.
fn v4(ip: IpAddr) -> Option<Ipv4Addr> {
    match ip {
        IpAddr::V4(v4) => Some(v4),
        IpAddr::V6(v6) => v6.to_ipv4_mapped(),
    }
}

/// The node whose address `ip` is: its `ip` (IPv4, or IPv4-mapped IPv6)
/// or, with `network.ipv6`, its `ipv6`.
pub fn node_at(c: &Cluster, ip: IpAddr) -> Option<&NodeCfg> {
    match (v4(ip), ip) {
        (Some(a), _) => c.nodes.iter().find(|n| n.ip == a),
        (None, IpAddr::V6(a)) if c.network.ipv6.is_some() => {
            c.nodes.iter().find(|n| n.ipv6 == Some(a))
        }
        (None, _) => None,
    }
}

/// Who `ip` is in `c`.
pub fn classify(c: &Cluster, ip: IpAddr) -> Client<'_> {
    if ip.is_loopback() {
        return Client::Local;
    }
    let local = match (v4(ip), ip) {
        (Some(a), _) => a.is_loopback() || a == c.network.appliance_ip,
        (None, IpAddr::V6(a)) => c.network.ipv6.as_ref().is_some_and(|v| v.appliance_ip == a),
        (None, IpAddr::V4(_)) => false,
    };
    if local {
        return Client::Local;
    }
    node_at(c, ip).map_or(Client::Other, Client::Node)
}

/// Is `ip` inside one of `cidrs`?
pub fn in_cidrs(cidrs: &[Ipv4Net], ip: IpAddr) -> bool {
    v4(ip).is_some_and(|a| cidrs.iter().any(|n| n.contains(a)))
}

/// Whose file a request is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner<'a> {
    /// One node's own (`<node>.ign`, `/boot/<node>.iso`).
    Node(&'a NodeCfg),
    /// A role's (`<role>.ign`, `/boot/<role>.iso`).
    Role(Role),
}

impl Owner<'_> {
    /// Who the file is for, for messages ("the bootstrap node", ...).
    pub fn audience(&self) -> String {
        match self {
            Owner::Node(n) if n.role == Role::Bootstrap => {
                format!("the bootstrap node {} ({})", n.name, n.ip)
            }
            Owner::Node(n) => format!("node {} ({})", n.name, n.ip),
            Owner::Role(Role::Bootstrap) => "the bootstrap node".to_string(),
            Owner::Role(_) => "the cluster's nodes".to_string(),
        }
    }
}

/// The outcome of a rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Allow,
    Deny,
}

/// May `client` fetch the ignition config owned by `owner`?
pub fn ignition(c: &Cluster, client: IpAddr, owner: Owner<'_>) -> Decision {
    if in_cidrs(&c.http.ignition_client_cidrs, client) {
        return Decision::Allow;
    }
    owner_rule(classify(c, client), owner)
}

/// May `client` fetch the boot ISO owned by `owner`? As [`ignition`], plus
/// `http.bootIsoCidrs` and the owning node's own BMC.
pub fn boot_iso(c: &Cluster, client: IpAddr, owner: Owner<'_>) -> Decision {
    if in_cidrs(&c.http.boot_iso_cidrs, client) || is_own_bmc(owner, client) {
        return Decision::Allow;
    }
    ignition(c, client, owner)
}

/// May `client` connect to the machine-config frontend (22623)?
pub fn machine_config(c: &Cluster, client: IpAddr) -> Decision {
    if in_cidrs(&c.lb.machine_config_client_cidrs, client) {
        return Decision::Allow;
    }
    match classify(c, client) {
        Client::Local | Client::Node(_) => Decision::Allow,
        Client::Other => Decision::Deny,
    }
}

fn owner_rule(who: Client<'_>, owner: Owner<'_>) -> Decision {
    let ok = match (who, owner) {
        (Client::Local, _) => true,
        (Client::Other, _) => false,
        (Client::Node(n), Owner::Node(o)) => n.name == o.name,
        (Client::Node(n), Owner::Role(Role::Bootstrap)) => n.role == Role::Bootstrap,
        (Client::Node(_), Owner::Role(_)) => true,
    };
    if ok { Decision::Allow } else { Decision::Deny }
}

/// Is `client` the owning node's BMC (its Redfish URL's host, an IP
/// literal)? A BMC fetches the ISO it was told to insert from its own
/// address, which may well lie inside the cluster network.
fn is_own_bmc(owner: Owner<'_>, client: IpAddr) -> bool {
    let Owner::Node(n) = owner else {
        return false;
    };
    let Some(bmc) = n.bmc.as_ref().and_then(|b| b.host.parse::<IpAddr>().ok()) else {
        return false;
    };
    match (bmc, v4(client)) {
        (IpAddr::V4(b), c4) => c4 == Some(b),
        (IpAddr::V6(b), None) => client == IpAddr::V6(b),
        (IpAddr::V6(_), Some(_)) => false,
    }
}

/// What `ip` is, for a refusal's log line: `node worker-0`, `a DHCP pool
/// address`, `not a node (inside 10.0.0.0/24)`, `outside the cluster
/// network`.
pub fn describe(c: &Cluster, ip: IpAddr) -> String {
    match classify(c, ip) {
        Client::Local => return "the appliance host".to_string(),
        Client::Node(n) => return format!("node {}", n.name),
        Client::Other => {}
    }
    let Some(a) = v4(ip) else {
        return describe_v6(c, ip);
    };
    let in_pool = |p: &Option<(Ipv4Addr, Ipv4Addr)>| p.is_some_and(|(s, e)| s <= a && a <= e);
    if in_pool(&c.dhcp.pool) || c.dhcp.segments.iter().any(|s| in_pool(&s.pool)) {
        return "a DHCP pool address".to_string();
    }
    let net = std::iter::once(c.network.cidr)
        .chain(c.dhcp.segments.iter().map(|s| s.cidr))
        .find(|n| n.contains(a));
    match net {
        Some(n) => format!("not a node (inside {n})"),
        None => "outside the cluster network".to_string(),
    }
}

/// [`describe`] for an IPv6 address that is not the host's nor a node's.
fn describe_v6(c: &Cluster, ip: IpAddr) -> String {
    match (&c.network.ipv6, ip) {
        (Some(v6), IpAddr::V6(a)) if v6.in_pool(a) => "a DHCPv6 pool address".to_string(),
        (Some(v6), IpAddr::V6(a)) if v6.cidr.contains(a) => {
            format!("not a node (inside {})", v6.cidr)
        }
        _ => "outside the cluster network".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Decision::{Allow, Deny};

    fn cluster(extra: &str) -> Cluster {
        let text = format!(
            "name: c\nbaseDomain: example.com\n\
             network: {{ cidr: 10.0.0.0/24, gateway: 10.0.0.254, applianceIP: 10.0.0.1 }}\n\
             nodes:\n\
             \x20 - {{ name: bootstrap, role: bootstrap, mac: '52:54:00:00:00:05', ip: 10.0.0.5 }}\n\
             \x20 - {{ name: m0, role: master, mac: '52:54:00:00:00:0a', ip: 10.0.0.10 }}\n\
             \x20 - {{ name: m1, role: master, mac: '52:54:00:00:00:0b', ip: 10.0.0.11 }}\n\
             \x20 - {{ name: w0, role: worker, mac: '52:54:00:00:00:14', ip: 10.0.0.20 }}\n{extra}"
        );
        crate::config::from_str(&text, std::path::Path::new("/"), std::path::Path::new("t"))
            .unwrap_or_else(|e| panic!("{e}"))
            .cluster
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn node<'a>(c: &'a Cluster, name: &str) -> Owner<'a> {
        Owner::Node(c.node(name).unwrap())
    }

    #[test]
    fn bootstrap_secrets_only_to_the_bootstrap_node_and_the_host() {
        let c = cluster("");
        for owner in [Owner::Role(Role::Bootstrap), node(&c, "bootstrap")] {
            for (who, want) in [
                ("10.0.0.5", Allow),
                ("::ffff:10.0.0.5", Allow),
                ("127.0.0.1", Allow),
                ("127.3.4.5", Allow),
                ("::1", Allow),
                ("10.0.0.1", Allow),  // applianceIP: the host itself
                ("10.0.0.10", Deny),  // a master
                ("10.0.0.20", Deny),  // a worker
                ("10.0.0.150", Deny), // a pool client
                ("10.0.0.50", Deny),
                ("192.0.2.1", Deny),
                ("fd00::5", Deny),
            ] {
                assert_eq!(ignition(&c, ip(who), owner), want, "{who} {owner:?}");
            }
        }
    }

    #[test]
    fn role_pointer_configs_to_every_node_node_files_to_their_node() {
        let c = cluster("");
        for role in [Role::Master, Role::Worker] {
            for (who, want) in [
                ("10.0.0.5", Allow),
                ("10.0.0.10", Allow),
                ("10.0.0.20", Allow),
                ("10.0.0.150", Deny),
                ("10.0.0.77", Deny),
                ("198.51.100.7", Deny),
            ] {
                assert_eq!(ignition(&c, ip(who), Owner::Role(role)), want, "{who}");
            }
        }
        assert_eq!(ignition(&c, ip("10.0.0.10"), node(&c, "m0")), Allow);
        assert_eq!(ignition(&c, ip("10.0.0.11"), node(&c, "m0")), Deny);
        assert_eq!(ignition(&c, ip("10.0.0.20"), node(&c, "m0")), Deny);
        assert_eq!(ignition(&c, ip("10.0.0.5"), node(&c, "w0")), Deny);
        assert_eq!(ignition(&c, ip("127.0.0.1"), node(&c, "w0")), Allow);
    }

    #[test]
    fn extra_cidrs_grant_what_they_name_only() {
        let c = cluster(
            "http: { ignitionClientCidrs: [10.0.0.150/32, 172.16.0.0/16], bootIsoCidrs: [192.0.2.0/24] }\n\
             loadBalancer: { machineConfigClientCidrs: [10.0.0.160/32] }\n",
        );
        let boot = Owner::Role(Role::Bootstrap);
        // The jump hosts: every ignition config and every ISO.
        for who in ["10.0.0.150", "172.16.9.9", "::ffff:172.16.0.1"] {
            assert_eq!(ignition(&c, ip(who), boot), Allow, "{who}");
            assert_eq!(ignition(&c, ip(who), node(&c, "m0")), Allow, "{who}");
            assert_eq!(boot_iso(&c, ip(who), node(&c, "w0")), Allow, "{who}");
        }
        assert_eq!(ignition(&c, ip("10.0.0.151"), boot), Deny);
        // The BMC network: ISOs, never ignition.
        assert_eq!(boot_iso(&c, ip("192.0.2.9"), node(&c, "m0")), Allow);
        assert_eq!(
            boot_iso(&c, ip("192.0.2.9"), Owner::Role(Role::Worker)),
            Allow
        );
        assert_eq!(ignition(&c, ip("192.0.2.9"), node(&c, "m0")), Deny);
        assert_eq!(ignition(&c, ip("192.0.2.9"), boot), Deny);
        // machineConfigClientCidrs is the LB's alone, and the reverse.
        assert_eq!(machine_config(&c, ip("10.0.0.160")), Allow);
        assert_eq!(ignition(&c, ip("10.0.0.160"), boot), Deny);
        assert_eq!(machine_config(&c, ip("10.0.0.150")), Deny);
    }

    #[test]
    fn boot_isos_to_their_node_the_bmcs_and_the_host() {
        let c = cluster("");
        assert_eq!(boot_iso(&c, ip("10.0.0.10"), node(&c, "m0")), Allow);
        assert_eq!(boot_iso(&c, ip("10.0.0.11"), node(&c, "m0")), Deny);
        assert_eq!(boot_iso(&c, ip("10.0.0.150"), node(&c, "m0")), Deny);
        assert_eq!(boot_iso(&c, ip("10.0.0.1"), node(&c, "m0")), Allow);
        assert_eq!(boot_iso(&c, ip("127.0.0.1"), node(&c, "m0")), Allow);
        assert_eq!(
            boot_iso(&c, ip("10.0.0.20"), Owner::Role(Role::Master)),
            Allow
        );
        assert_eq!(
            boot_iso(&c, ip("10.0.0.20"), Owner::Role(Role::Bootstrap)),
            Deny
        );
        // A node's BMC (an IPv4 literal in its Redfish URL) gets that node's
        // ISO, not another's nor any ignition.
        let mut c = c;
        let bmc = crate::model::bmc::BmcCfg {
            url: "https://10.0.0.60/redfish/v1/Systems/1".into(),
            origin: "https://10.0.0.60".into(),
            host: "10.0.0.60".into(),
            port: 443,
            path: "/redfish/v1/Systems/1".into(),
            username_file: "/u".into(),
            password_file: "/p".into(),
            tls: crate::model::bmc::BmcTls::Insecure,
            start_on_serve: false,
            media: crate::model::bmc::BmcMedia::Auto,
        };
        c.nodes[1].bmc = Some(bmc);
        assert_eq!(boot_iso(&c, ip("10.0.0.60"), node(&c, "m0")), Allow);
        assert_eq!(boot_iso(&c, ip("10.0.0.60"), node(&c, "m1")), Deny);
        assert_eq!(
            boot_iso(&c, ip("10.0.0.60"), Owner::Role(Role::Master)),
            Deny
        );
        assert_eq!(ignition(&c, ip("10.0.0.60"), node(&c, "m0")), Deny);
    }

    #[test]
    fn machine_config_only_from_nodes_and_the_host() {
        let c = cluster("");
        for (who, want) in [
            ("10.0.0.5", Allow),
            ("10.0.0.10", Allow),
            ("10.0.0.20", Allow),
            ("::ffff:10.0.0.20", Allow),
            ("127.0.0.1", Allow),
            ("10.0.0.1", Allow),
            ("10.0.0.150", Deny),
            ("10.0.0.77", Deny),
            ("203.0.113.9", Deny),
            ("fd00::14", Deny),
        ] {
            assert_eq!(machine_config(&c, ip(who)), want, "{who}");
        }
    }

    #[test]
    fn audiences() {
        let c = cluster("");
        assert_eq!(
            node(&c, "bootstrap").audience(),
            "the bootstrap node bootstrap (10.0.0.5)"
        );
        assert_eq!(node(&c, "m0").audience(), "node m0 (10.0.0.10)");
        assert_eq!(
            Owner::Role(Role::Bootstrap).audience(),
            "the bootstrap node"
        );
        assert_eq!(Owner::Role(Role::Worker).audience(), "the cluster's nodes");
    }

    #[test]
    fn descriptions_name_what_the_address_is() {
        let c = cluster(
            "dhcp: { pool: { start: 10.0.0.100, end: 10.0.0.199 }, segments: [{ cidr: 10.9.0.0/24, gateway: 10.9.0.1, pool: { start: 10.9.0.100, end: 10.9.0.110 } }] }\n",
        );
        assert_eq!(describe(&c, ip("10.0.0.20")), "node w0");
        assert_eq!(describe(&c, ip("10.0.0.150")), "a DHCP pool address");
        assert_eq!(describe(&c, ip("10.9.0.105")), "a DHCP pool address");
        assert_eq!(
            describe(&c, ip("10.0.0.50")),
            "not a node (inside 10.0.0.0/24)"
        );
        assert_eq!(
            describe(&c, ip("10.9.0.50")),
            "not a node (inside 10.9.0.0/24)"
        );
        assert_eq!(describe(&c, ip("8.8.8.8")), "outside the cluster network");
        assert_eq!(describe(&c, ip("127.0.0.1")), "the appliance host");
    }

    /// The cluster of [`cluster`], dual-stack: every node with an IPv6
    /// address (`fd00::` and its last IPv4 octet's digits), a DHCPv6 pool.
    fn dual(extra: &str) -> Cluster {
        let mut c = cluster(extra);
        let text = "name: c\nbaseDomain: example.com\n\
             network: { cidr: 10.0.0.0/24, gateway: 10.0.0.254, applianceIP: 10.0.0.1, \
             ipv6: { cidr: 'fd00::/64', applianceIP: 'fd00::1', pool: { start: 'fd00::100', end: 'fd00::1ff' } } }\n\
             nodes:\n  - { name: x, role: master, mac: '52:54:00:00:00:01', ip: 10.0.0.2, ipv6: 'fd00::2' }\n";
        let v6 =
            crate::config::from_str(text, std::path::Path::new("/"), std::path::Path::new("t"))
                .unwrap_or_else(|e| panic!("{e}"))
                .cluster;
        c.network.ipv6 = v6.network.ipv6;
        for n in &mut c.nodes {
            n.ipv6 = Some(format!("fd00::{}", n.ip.octets()[3]).parse().unwrap());
        }
        c
    }

    #[test]
    fn ipv6_follows_the_same_per_node_rules() {
        let c = dual("");
        let boot = Owner::Role(Role::Bootstrap);
        // `dual` wrote each node's last IPv4 octet as the IPv6 tail:
        // fd00::5 bootstrap, fd00::10 m0, fd00::11 m1, fd00::20 w0.
        for (who, want) in [
            ("fd00::5", Allow),
            ("fd00::1", Allow), // the IPv6 applianceIP: the host
            ("::1", Allow),
            ("fd00::10", Deny),
            ("fd00::20", Deny),
            ("fd00::150", Deny), // pool
            ("fd00::77", Deny),
            ("2001:db8::5", Deny),
        ] {
            assert_eq!(ignition(&c, ip(who), boot), want, "{who}");
            assert_eq!(ignition(&c, ip(who), node(&c, "bootstrap")), want, "{who}");
        }
        for (who, want) in [
            ("fd00::10", Allow),
            ("fd00::20", Allow),
            ("fd00::150", Deny),
        ] {
            assert_eq!(
                ignition(&c, ip(who), Owner::Role(Role::Worker)),
                want,
                "{who}"
            );
            assert_eq!(machine_config(&c, ip(who)), want, "{who}");
        }
        assert_eq!(ignition(&c, ip("fd00::10"), node(&c, "m0")), Allow);
        assert_eq!(ignition(&c, ip("fd00::11"), node(&c, "m0")), Deny);
        assert_eq!(boot_iso(&c, ip("fd00::20"), node(&c, "w0")), Allow);
        assert_eq!(boot_iso(&c, ip("fd00::10"), node(&c, "w0")), Deny);
        assert_eq!(describe(&c, ip("fd00::150")), "a DHCPv6 pool address");
        assert_eq!(
            describe(&c, ip("fd00::77")),
            "not a node (inside fd00::/64)"
        );
        assert_eq!(
            describe(&c, ip("2001:db8::1")),
            "outside the cluster network"
        );
        assert_eq!(
            describe(&c, ip("fd00::14")),
            "not a node (inside fd00::/64)"
        );
        assert_eq!(describe(&c, ip("fd00::20")), "node w0");
        assert_eq!(
            node_at(&c, ip("fd00::11")).map(|n| n.name.as_str()),
            Some("m1")
        );
    }

    #[test]
    fn ipv6_addresses_are_nobody_without_network_ipv6() {
        let mut c = dual("");
        c.network.ipv6 = None;
        assert_eq!(
            ignition(&c, ip("fd00::5"), Owner::Role(Role::Bootstrap)),
            Deny
        );
        assert_eq!(
            ignition(&c, ip("fd00::1"), Owner::Role(Role::Bootstrap)),
            Deny
        );
        assert_eq!(machine_config(&c, ip("fd00::10")), Deny);
    }

    #[test]
    fn an_ipv6_bmc_gets_its_nodes_iso() {
        let mut c = dual("");
        let bmc = crate::model::bmc::BmcCfg {
            url: "https://[fd00::60]/redfish/v1/Systems/1".into(),
            origin: "https://[fd00::60]".into(),
            host: "fd00::60".into(),
            port: 443,
            path: "/redfish/v1/Systems/1".into(),
            username_file: "/u".into(),
            password_file: "/p".into(),
            tls: crate::model::bmc::BmcTls::Insecure,
            start_on_serve: false,
            media: Default::default(),
        };
        c.nodes[1].bmc = Some(bmc);
        assert_eq!(boot_iso(&c, ip("fd00::60"), node(&c, "m0")), Allow);
        assert_eq!(boot_iso(&c, ip("fd00::60"), node(&c, "m1")), Deny);
        assert_eq!(ignition(&c, ip("fd00::60"), node(&c, "m0")), Deny);
    }
}
