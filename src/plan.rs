//! The plan: everything the services serve, derived purely from a validated
//! [`Cluster`]. No I/O here; `render` prints it and the services consume it.
//!
//! - DNS: the cluster zone `<name>.<baseDomain>` (SOA, NS, api, api-int,
//!   `*.apps`, nodes, etcd-N, `_etcd-server-ssl._tcp` SRV, extra records) and
//!   reverse zones with PTRs for every node, api and api-int.
//! - DHCP: one reservation per node.
//! - LB: four pools; 6443/22623 → bootstrap + masters, 80/443 → workers, or
//!   masters when there are no workers (compact) or the cluster is
//!   single-node. Single-node without the LB: api, api-int and `*.apps`
//!   resolve to the master ([`Cluster::api_address`]).

use std::collections::BTreeSet;
use std::fmt::{self, Write as _};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};

use serde::Serialize;

pub use crate::model::catalogue::PoolKind;
use crate::model::cluster::{BackendOverrideCfg, Cluster, MacAddr, NodeCfg, Role};
pub use crate::model::ipv6::ptr_name6;
use crate::model::names::{API, API_INT, APPS, ETCD_PREFIX, ETCD_SRV, NS};
pub use crate::model::names::{RData, Record, absolute, ptr_name, reverse_zones};

/// A zone: its origin (absolute, trailing dot) and records; SOA first, then NS.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Zone {
    pub origin: String,
    pub records: Vec<Record>,
}

impl Zone {
    /// Owner names with a wildcard record (`*.apps.x.` → `apps.x.`).
    pub fn wildcard_parents(&self) -> BTreeSet<String> {
        self.records
            .iter()
            .filter_map(|r| r.name.strip_prefix("*.").map(str::to_string))
            .collect()
    }

    /// The zone in BIND master-file format.
    pub fn to_bind(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "$ORIGIN {}", self.origin);
        let ttl = self.records.first().map(|r| r.ttl).unwrap_or(30);
        let _ = writeln!(out, "$TTL {ttl}");
        for r in &self.records {
            let _ = writeln!(
                out,
                "{:<40} {:>6} IN {:<5} {}",
                r.name,
                r.ttl,
                r.data.type_name(),
                r.data
            );
        }
        out
    }
}

/// A DHCP reservation derived from a node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Reservation {
    pub mac: MacAddr,
    pub ip: Ipv4Addr,
    /// Short host name (option 12).
    pub hostname: String,
    pub fqdn: String,
    pub role: Role,
}

/// How a pool's backends are probed.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Check {
    /// HTTPS GET of `path`, healthy on 2xx.
    Https { path: String },
    /// TCP connect.
    Tcp,
    /// TLS handshake.
    Tls,
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Check::Https { path } => write!(f, "https GET {path}"),
            Check::Tcp => f.write_str("tcp connect"),
            Check::Tls => f.write_str("tls handshake"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Backend {
    /// Node name.
    pub name: String,
    pub role: Role,
    pub addr: SocketAddr,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LbPool {
    pub name: PoolKind,
    pub frontend: SocketAddr,
    /// The frontend's IPv6 twin on the IPv6 VIP (dual-stack only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub frontend_v6: Option<SocketAddr>,
    pub check: Check,
    pub backends: Vec<Backend>,
}

/// Everything the services serve.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Plan {
    pub cluster: Cluster,
    /// The cluster zone first, then the reverse zones.
    pub zones: Vec<Zone>,
    pub reservations: Vec<Reservation>,
    pub pools: Vec<LbPool>,
}

impl Plan {
    pub fn new(cluster: Cluster) -> Plan {
        Plan {
            zones: zones(&cluster),
            reservations: reservations(&cluster),
            pools: pools(&cluster),
            cluster,
        }
    }
    pub fn reservation_for(&self, mac: &MacAddr) -> Option<&Reservation> {
        self.reservations.iter().find(|r| &r.mac == mac)
    }
    pub fn pool(&self, kind: PoolKind) -> Option<&LbPool> {
        self.pools.iter().find(|p| p.name == kind)
    }
}

/// FNV-1a over the zone content, folded to a nonzero u32 serial, so that a
/// changed zone gets a new serial and the same zone keeps its serial.
fn serial_of(records: &[Record]) -> u32 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for r in records {
        for b in format!("{} {} {}\n", r.name, r.ttl, r.data).bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    ((h >> 32) as u32 ^ h as u32).max(1)
}

fn finish_zone(origin: String, c: &Cluster, mut body: Vec<Record>) -> Zone {
    let ns = format!("{NS}.{}.", c.domain);
    let mut head = vec![Record {
        name: origin.clone(),
        ttl: c.dns.ttl,
        data: RData::Ns(ns.clone()),
    }];
    head.append(&mut body);
    let serial = serial_of(&head);
    head.insert(
        0,
        Record {
            name: origin.clone(),
            ttl: c.dns.ttl,
            data: RData::Soa {
                mname: ns,
                rname: format!("hostmaster.{}.", c.domain),
                serial,
                refresh: c.dns.soa.refresh,
                retry: c.dns.soa.retry,
                expire: c.dns.soa.expire,
                minimum: c.dns.soa.minimum,
            },
        },
    );
    Zone {
        origin,
        records: head,
    }
}

fn zones(c: &Cluster) -> Vec<Zone> {
    let origin = format!("{}.", c.domain);
    let ttl = c.dns.ttl;
    let n = |label: &str| format!("{label}.{}.", c.domain);
    let mut fwd = address_records(c);
    let masters = c.nodes_with_role(Role::Master).count();
    for i in 0..masters {
        fwd.push(Record {
            name: n(ETCD_SRV),
            ttl,
            data: RData::Srv {
                priority: 0,
                weight: 10,
                port: 2380,
                target: n(&format!("{ETCD_PREFIX}{i}")),
            },
        });
    }
    let rev_origins = c.reverse_zones();
    let mut rev_body: Vec<Vec<Record>> = vec![Vec::new(); rev_origins.len()];
    for (name, target) in ptr_targets(c) {
        if let Some(i) = rev_origins
            .iter()
            .position(|z| name.ends_with(&format!(".{z}")))
        {
            rev_body[i].push(Record {
                name,
                ttl,
                data: RData::Ptr(target),
            });
        }
    }
    for r in &c.dns.records {
        match rev_origins
            .iter()
            .position(|z| r.name == *z || r.name.ends_with(&format!(".{z}")))
        {
            Some(i) => rev_body[i].push(r.clone()),
            None => fwd.push(r.clone()),
        }
    }
    let mut out = vec![finish_zone(origin, c, fwd)];
    for (z, body) in rev_origins.into_iter().zip(rev_body) {
        out.push(finish_zone(z, c, body));
    }
    out
}

/// The address records of the cluster zone: `ns1`, `api`, `api-int`,
/// `*.apps`, every node and `etcd-<i>`, each A followed by its AAAA on a
/// dual-stack network (a node without `ipv6` has none; an IPv4-only
/// cluster gets exactly the A records).
fn address_records(c: &Cluster) -> Vec<Record> {
    let ttl = c.dns.ttl;
    let n = |label: &str| format!("{label}.{}.", c.domain);
    let mut out = Vec::new();
    let v6 = c.ipv6().map(|v| v.appliance_ip);
    push_pair(&mut out, ttl, n(NS), c.network.appliance_ip, v6);
    push_pair(&mut out, ttl, n(API), c.api_address(), c.api_address_v6());
    push_pair(
        &mut out,
        ttl,
        n(API_INT),
        c.api_address(),
        c.api_address_v6(),
    );
    let wild = n(&format!("*.{APPS}"));
    for ip in c.apps_addresses() {
        push_pair(&mut out, ttl, wild.clone(), ip, None);
    }
    for ip in c.apps_addresses_v6() {
        out.push(Record {
            name: wild.clone(),
            ttl,
            data: RData::Aaaa(ip),
        });
    }
    for node in &c.nodes {
        push_pair(&mut out, ttl, n(&node.name), node.ip, node.ipv6);
    }
    for (i, m) in c.nodes_with_role(Role::Master).enumerate() {
        let name = n(&format!("{ETCD_PREFIX}{i}"));
        push_pair(&mut out, ttl, name, m.ip, m.ipv6);
    }
    if let Some((name, ip, ip6)) = mirror_address(c) {
        push_pair(&mut out, ttl, name, ip, ip6);
    }
    out
}

/// The mirror registry's name (`registry.name`, default
/// `mirror.<name>.<baseDomain>`) and addresses, when it runs and the name
/// lies in the cluster zone: its listener's IPv4 address (the appliance's
/// when it listens on every address), and the IPv6 appliance address on a
/// dual-stack network.
fn mirror_address(c: &Cluster) -> Option<(String, Ipv4Addr, Option<Ipv6Addr>)> {
    let r = c.registry.as_ref()?;
    if !r.name.ends_with(&format!(".{}", c.domain)) {
        return None;
    }
    let ip = match r.listen.ip() {
        std::net::IpAddr::V4(v4) if !v4.is_unspecified() && !v4.is_loopback() => v4,
        _ => c.network.appliance_ip,
    };
    Some((format!("{}.", r.name), ip, c.ipv6().map(|v| v.appliance_ip)))
}

/// `name`'s A record, then its AAAA when it has an IPv6 address.
fn push_pair(out: &mut Vec<Record>, ttl: u32, name: String, ip: Ipv4Addr, ip6: Option<Ipv6Addr>) {
    if let Some(ip6) = ip6 {
        out.push(Record {
            name: name.clone(),
            ttl,
            data: RData::A(ip),
        });
        out.push(Record {
            name,
            ttl,
            data: RData::Aaaa(ip6),
        });
    } else {
        out.push(Record {
            name,
            ttl,
            data: RData::A(ip),
        });
    }
}

/// (PTR owner, target) for api, api-int and every node, IPv4 then IPv6,
/// then the appliance's own addresses (`ns1`).
/// Single-node without the LB: api is the node's address, whose PTR names
/// the node only (in each family).
fn ptr_targets(c: &Cluster) -> Vec<(String, String)> {
    let n = |label: &str| format!("{label}.{}.", c.domain);
    let mut out = Vec::new();
    let api = c.api_address();
    if !c.nodes.iter().any(|x| x.ip == api) {
        out.push((ptr_name(api), n(API)));
        out.push((ptr_name(api), n(API_INT)));
    }
    out.extend(c.nodes.iter().map(|x| (ptr_name(x.ip), n(&x.name))));
    if let Some(api) = c.api_address_v6()
        && !c.nodes.iter().any(|x| x.ipv6 == Some(api))
    {
        out.push((ptr_name6(api), n(API)));
        out.push((ptr_name6(api), n(API_INT)));
    }
    out.extend(
        c.nodes
            .iter()
            .filter_map(|x| Some((ptr_name6(x.ipv6?), n(&x.name)))),
    );
    // The name server's own addresses (RFC 1912 2.1: every address has a
    // PTR), unless another name (api on the appliance, a user record)
    // already owns it.
    let own = std::iter::once(ptr_name(c.network.appliance_ip))
        .chain(c.ipv6().map(|v| ptr_name6(v.appliance_ip)));
    for owner in own.collect::<Vec<_>>() {
        let taken =
            out.iter().any(|(o, _)| *o == owner) || c.dns.records.iter().any(|r| r.name == owner);
        if !taken {
            out.push((owner, n(NS)));
        }
    }
    out
}

/// Does generated record `r` give way to a user record at its name? The
/// appliance's own PTR (`ns1`) does: [`ptr_targets`] leaves it out when
/// `dns.records` owns that name, so it is no conflict there.
pub fn yields_to_user(c: &Cluster, r: &Record) -> bool {
    matches!(&r.data, RData::Ptr(t) if *t == format!("{NS}.{}.", c.domain))
}

fn reservations(c: &Cluster) -> Vec<Reservation> {
    c.nodes
        .iter()
        .map(|n| Reservation {
            mac: n.mac,
            ip: n.ip,
            hostname: n.name.clone(),
            fqdn: c.fqdn(&n.name),
            role: n.role,
        })
        .collect()
}

fn pools(c: &Cluster) -> Vec<LbPool> {
    let lb = &c.lb;
    let control: Vec<_> = c
        .nodes
        .iter()
        .filter(|n| matches!(n.role, Role::Bootstrap | Role::Master))
        .collect();
    // `ingress`, or: compact clusters run ingress on the masters;
    // single-node keeps it on its master when workers are added.
    let ingress = c.ingress_nodes();
    // `loadBalancer.backendOverrides` replaces `<node ip>:<port>` per pool;
    // the nodes' IPv6 addresses follow as backends of their own (none for
    // a node whose backend is overridden in that pool).
    type Pick = fn(&BackendOverrideCfg) -> Option<SocketAddr>;
    let backends = |nodes: &[&NodeCfg], port: u16, pick: Pick| {
        let over = |n: &NodeCfg| lb.backend_overrides.get(&n.name).and_then(pick);
        let backend = |n: &NodeCfg, addr| Backend {
            name: n.name.clone(),
            role: n.role,
            addr,
        };
        let v4 = nodes.iter().map(|n| {
            backend(
                n,
                over(n).unwrap_or_else(|| SocketAddr::new(n.ip.into(), port)),
            )
        });
        let v6 = nodes.iter().filter(|n| over(n).is_none()).filter_map(|n| {
            let ip = n.ipv6.filter(|_| c.network.ipv6.is_some())?;
            Some(backend(n, SocketAddr::new(ip.into(), port)))
        });
        v4.chain(v6).collect::<Vec<_>>()
    };
    let p = lb.backend_ports;
    let v6 = c.network.ipv6.as_ref();
    let pool = |name: PoolKind, check, backends| LbPool {
        name,
        frontend: name.frontend(lb),
        frontend_v6: name.frontend_v6(lb, v6),
        check,
        backends,
    };
    vec![
        pool(
            PoolKind::Api,
            Check::Https {
                path: "/readyz".into(),
            },
            backends(&control, p.api, |o| o.api),
        ),
        pool(
            PoolKind::MachineConfig,
            Check::Https {
                path: "/healthz".into(),
            },
            backends(&control, p.machine_config, |o| o.machine_config),
        ),
        pool(
            PoolKind::IngressHttp,
            Check::Tcp,
            backends(&ingress, p.ingress_http, |o| o.ingress_http),
        ),
        pool(
            PoolKind::IngressHttps,
            Check::Tls,
            backends(&ingress, p.ingress_https, |o| o.ingress_https),
        ),
    ]
}

/// `render dhcp`: reservations as a table.
pub fn render_dhcp(plan: &Plan) -> String {
    let c = &plan.cluster;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# subnet {} mask {} router {} dns {} domain {} lease {}s",
        c.network.cidr,
        c.network.cidr.netmask(),
        c.network.gateway,
        c.network.appliance_ip,
        c.domain,
        c.dhcp.lease_time.as_secs()
    );
    match c.dhcp.pool {
        Some((s, e)) => {
            let _ = writeln!(out, "# pool {s}-{e} for unknown clients");
        }
        None => {
            let _ = writeln!(out, "# no pool: unknown MACs are ignored");
        }
    }
    for seg in &c.dhcp.segments {
        let dns: Vec<String> = seg.dns.iter().map(|d| d.to_string()).collect();
        let _ = writeln!(
            out,
            "# segment {} mask {} router {} dns {}{} (relayed)",
            seg.cidr,
            seg.cidr.netmask(),
            seg.gateway,
            dns.join(","),
            seg.pool
                .map(|(s, e)| format!(" pool {s}-{e}"))
                .unwrap_or_default()
        );
    }
    let _ = writeln!(out, "{:<19} {:<15} {:<10} hostname", "mac", "ip", "role");
    for r in &plan.reservations {
        let _ = writeln!(
            out,
            "{:<19} {:<15} {:<10} {}",
            r.mac.to_string(),
            r.ip.to_string(),
            r.role.as_str(),
            r.hostname
        );
    }
    out
}

/// `render lb`: frontends, checks and backends.
pub fn render_lb(plan: &Plan) -> String {
    let h = &plan.cluster.lb.health;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# health: interval {:?} timeout {:?} rise {} fall {}; backends start unhealthy",
        h.interval, h.timeout, h.rise, h.fall
    );
    for p in &plan.pools {
        let v6 = p
            .frontend_v6
            .map(|a| format!(" and {a}"))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "frontend {} {}{v6} check {}",
            p.name, p.frontend, p.check
        );
        for b in &p.backends {
            let addr = b.addr.to_string();
            let _ = writeln!(out, "  backend {:<16} {addr:<21} {}", b.name, b.role);
        }
        if p.backends.is_empty() {
            let _ = writeln!(out, "  (no backends)");
        }
    }
    out
}

/// `render zone`: every zone in BIND format.
pub fn render_zones(plan: &Plan) -> String {
    plan.zones
        .iter()
        .map(Zone::to_bind)
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(nodes: &str, cidr: &str) -> Cluster {
        let text = format!(
            "name: c\nbaseDomain: example.com\nnetwork: {{ cidr: {cidr}, gateway: {gw}, applianceIP: {gw} }}\nnodes:\n{nodes}",
            gw = {
                let n: crate::model::cluster::Ipv4Net = cidr.parse().unwrap();
                Ipv4Addr::from(u32::from(n.network()) + 1)
            }
        );
        crate::config::from_str(&text, std::path::Path::new("/"), std::path::Path::new("t"))
            .unwrap()
            .cluster
    }

    #[test]
    fn reverse_zone_shapes() {
        let z = |c: &str| reverse_zones(c.parse().unwrap());
        assert_eq!(z("10.1.0.0/16"), vec!["1.10.in-addr.arpa."]);
        assert_eq!(z("10.1.2.0/24"), vec!["2.1.10.in-addr.arpa."]);
        assert_eq!(z("10.1.2.64/26"), vec!["2.1.10.in-addr.arpa."]);
        assert_eq!(
            z("10.1.4.0/22"),
            vec![
                "4.1.10.in-addr.arpa.",
                "5.1.10.in-addr.arpa.",
                "6.1.10.in-addr.arpa.",
                "7.1.10.in-addr.arpa."
            ]
        );
        assert_eq!(z("10.1.0.0/20").len(), 16);
    }

    #[test]
    fn compact_cluster_sends_ingress_to_masters() {
        let c = cluster(
            "  - { name: m0, role: master, mac: '52:54:00:00:00:01', ip: 10.0.0.10 }\n  - { name: m1, role: master, mac: '52:54:00:00:00:02', ip: 10.0.0.11 }\n",
            "10.0.0.0/24",
        );
        let p = Plan::new(c);
        let names = |pool: PoolKind| {
            p.pool(pool)
                .unwrap()
                .backends
                .iter()
                .map(|b| b.name.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(names(PoolKind::IngressHttps), ["m0", "m1"]);
        assert_eq!(names(PoolKind::Api), ["m0", "m1"]);
    }

    #[test]
    fn ptrs_land_in_their_reverse_zone_for_wide_networks() {
        let c = cluster(
            "  - { name: m0, role: master, mac: '52:54:00:00:00:01', ip: 10.0.5.10 }\n  - { name: w0, role: worker, mac: '52:54:00:00:00:02', ip: 10.0.6.11 }\n",
            "10.0.4.0/22",
        );
        let p = Plan::new(c);
        assert_eq!(p.zones.len(), 5);
        let zone = |o: &str| p.zones.iter().find(|z| z.origin == o).unwrap();
        assert!(
            zone("5.0.10.in-addr.arpa.")
                .records
                .iter()
                .any(|r| r.name == "10.5.0.10.in-addr.arpa."
                    && r.data == RData::Ptr("m0.c.example.com.".into()))
        );
        assert!(
            zone("6.0.10.in-addr.arpa.")
                .records
                .iter()
                .any(|r| r.name == "11.6.0.10.in-addr.arpa.")
        );
        // api/api-int PTRs point at the appliance (default apiVIP) in 10.0.4.0/24.
        assert_eq!(
            zone("4.0.10.in-addr.arpa.")
                .records
                .iter()
                .filter(|r| matches!(r.data, RData::Ptr(_)))
                .count(),
            2
        );
    }

    #[test]
    fn serial_is_stable_and_changes_with_content() {
        let n = "  - { name: m0, role: master, mac: '52:54:00:00:00:01', ip: 10.0.0.10 }\n";
        let a = Plan::new(cluster(n, "10.0.0.0/24"));
        let b = Plan::new(cluster(n, "10.0.0.0/24"));
        assert_eq!(a.zones, b.zones);
        let c = Plan::new(cluster(&n.replace("10.0.0.10", "10.0.0.11"), "10.0.0.0/24"));
        assert_ne!(a.zones[0].records[0], c.zones[0].records[0]);
    }

    #[test]
    fn etcd_records_follow_master_order() {
        let n = "  - { name: m0, role: master, mac: '52:54:00:00:00:01', ip: 10.0.0.10 }\n  - { name: m1, role: master, mac: '52:54:00:00:00:02', ip: 10.0.0.11 }\n";
        let p = Plan::new(cluster(n, "10.0.0.0/24"));
        let text = p.zones[0].to_bind();
        assert!(text.contains("etcd-1.c.example.com.") && text.contains("10.0.0.11"));
        assert_eq!(
            text.matches("IN SRV   0 10 2380 etcd-").count(),
            2,
            "{text}"
        );
    }

    #[test]
    fn dual_stack_pools_have_v6_frontends_and_backends_after_the_v4_ones() {
        let text = "name: c\nbaseDomain: example.com\n\
            network: { cidr: 10.0.0.0/24, gateway: 10.0.0.1, applianceIP: 10.0.0.1, \
            ipv6: { cidr: 'fd00::/64', applianceIP: 'fd00::1', ingressVIP: 'fd00::7' } }\n\
            nodes:\n\
            \x20 - { name: m0, role: master, mac: '52:54:00:00:00:01', ip: 10.0.0.10, ipv6: 'fd00::10' }\n\
            \x20 - { name: m1, role: master, mac: '52:54:00:00:00:02', ip: 10.0.0.11 }\n\
            \x20 - { name: w0, role: worker, mac: '52:54:00:00:00:03', ip: 10.0.0.20, ipv6: 'fd00::20' }\n\
            loadBalancer: { backendOverrides: { w0: { ingressHttp: '10.9.9.9:8080' } } }\n";
        let c = crate::config::from_str(text, std::path::Path::new("/"), std::path::Path::new("t"))
            .unwrap()
            .cluster;
        let p = Plan::new(c);
        let addrs = |k: PoolKind| {
            p.pool(k)
                .unwrap()
                .backends
                .iter()
                .map(|b| format!("{} {}", b.name, b.addr))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            addrs(PoolKind::Api),
            [
                "m0 10.0.0.10:6443",
                "m1 10.0.0.11:6443",
                "m0 [fd00::10]:6443"
            ]
        );
        // An overridden backend has no IPv6 twin in that pool only.
        assert_eq!(addrs(PoolKind::IngressHttp), ["w0 10.9.9.9:8080"]);
        assert_eq!(
            addrs(PoolKind::IngressHttps),
            ["w0 10.0.0.20:443", "w0 [fd00::20]:443"]
        );
        let f6 = |k: PoolKind| p.pool(k).unwrap().frontend_v6.map(|a| a.to_string());
        assert_eq!(f6(PoolKind::Api).as_deref(), Some("[fd00::1]:6443"));
        assert_eq!(
            f6(PoolKind::MachineConfig).as_deref(),
            Some("[fd00::1]:22623")
        );
        assert_eq!(f6(PoolKind::IngressHttps).as_deref(), Some("[fd00::7]:443"));
        let text = render_lb(&p);
        assert!(
            text.contains("frontend api 10.0.0.1:6443 and [fd00::1]:6443 check"),
            "{text}"
        );
        assert!(
            text.contains("backend m0               [fd00::10]:6443"),
            "{text}"
        );
    }

    #[test]
    fn ipv4_only_pools_and_their_json_are_unchanged() {
        let n = "  - { name: m0, role: master, mac: '52:54:00:00:00:01', ip: 10.0.0.10 }\n";
        let p = Plan::new(cluster(n, "10.0.0.0/24"));
        assert!(p.pools.iter().all(
            |pool| pool.frontend_v6.is_none() && pool.backends.iter().all(|b| b.addr.is_ipv4())
        ));
        let json = serde_json::to_string(&p.pools).unwrap();
        assert!(!json.contains("frontend_v6"), "{json}");
        assert!(render_lb(&p).contains("frontend api 10.0.0.1:6443 check https GET /readyz\n"));
    }
}
