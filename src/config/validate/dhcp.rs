//! `dhcp`: listener, lease time, the pool (clear of every reserved and
//! appliance address), lease file, PXE options, and the relayed segments
//! (`segments[]`: parsed before the nodes, whose addresses may lie in one;
//! no two overlap, none overlaps `network.cidr`; each pool is clear of node
//! addresses and the segment's gateway), and the relay agent addresses
//! (`relays[]`): IPv4 ones are the giaddrs answered besides the segments'
//! gateways, IPv6 ones the sources of the Relay-Forwards DHCPv6 answers.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::{Path, PathBuf};

mod proxy;
pub(super) use proxy::ipv6_rules as proxy_ipv6_rules;

use super::{Errs, NetParts, resolve, sock};
use crate::config::raw;
use crate::model::cluster::{DhcpCfg, Ipv4Net, NodeCfg, PxeCfg, SegmentCfg};

pub(crate) fn build(
    h: &raw::Dhcp,
    cluster_name: &str,
    net: &NetParts,
    nodes: Option<&[NodeCfg]>,
    segments: Vec<SegmentCfg>,
    base: &Path,
    e: &mut Errs,
) -> Option<DhcpCfg> {
    let listen = match &h.listen {
        Some(s) => sock(e, "dhcp.listen", s, Some(67)),
        None => Some(SocketAddr::from(([0, 0, 0, 0], 67))),
    };
    if h.lease_time.get().as_secs() < 60 {
        e.push("dhcp.leaseTime", "must be at least 60s");
    } else if h.lease_time.get().as_secs() > u64::from(u32::MAX) {
        e.push("dhcp.leaseTime", "is too long (max about 136 years)");
    }
    let pool = h.pool.as_ref().and_then(|p| {
        let s = e.parse::<Ipv4Addr>("dhcp.pool.start", &p.start, "IPv4 address");
        net.in_net(e, "dhcp.pool.start", s);
        let t = e.parse::<Ipv4Addr>("dhcp.pool.end", &p.end, "IPv4 address");
        net.in_net(e, "dhcp.pool.end", t);
        let (s, t) = (s?, t?);
        if u32::from(s) > u32::from(t) {
            e.push("dhcp.pool", format!("start {s} is after end {t}"));
            return None;
        }
        let inside = |ip: Ipv4Addr| (u32::from(s)..=u32::from(t)).contains(&u32::from(ip));
        pool_clear_of_nodes(e, "dhcp.pool", (s, t), nodes);
        for (what, ip) in net.taken() {
            if let Some(ip) = ip.filter(|ip| inside(*ip)) {
                e.push("dhcp.pool", format!("range {s}-{t} contains {what} {ip}"));
            }
        }
        Some((s, t))
    });
    for (i, seg) in segments.iter().enumerate() {
        if let Some(range) = seg.pool {
            pool_clear_of_nodes(e, &format!("dhcp.segments[{i}].pool"), range, nodes);
        }
    }
    let lease_file = match &h.lease_file {
        Some(f) if f.trim().is_empty() => {
            e.push("dhcp.leaseFile", "must not be empty");
            PathBuf::new()
        }
        Some(f) => resolve(base, f),
        None => PathBuf::from(format!("/var/lib/crc-appliance/{cluster_name}-leases.json")),
    };
    let pxe = h.pxe.as_ref().map(|x| PxeCfg {
        next_server: x
            .next_server
            .as_ref()
            .and_then(|s| e.parse::<Ipv4Addr>("dhcp.pxe.nextServer", s, "IPv4 address"))
            .or(net.appliance_ip)
            .unwrap_or(Ipv4Addr::UNSPECIFIED),
        boot_file: x.boot_file.clone(),
        ipxe_script_url: x.ipxe_script_url.clone(),
    });
    if let Some(x) = &h.pxe {
        for (path, v, max) in [
            ("dhcp.pxe.bootFile", &x.boot_file, 127),
            ("dhcp.pxe.ipxeScriptUrl", &x.ipxe_script_url, 255),
        ] {
            if let Some(v) = v
                && (v.is_empty() || v.len() > max || !v.is_ascii())
            {
                e.push(path, format!("must be 1-{max} ASCII characters"));
            }
        }
    }
    let (relays, relays6) = relays(h, net, &segments, e);
    let listen6 = match &h.listen6 {
        Some(s) => sock(e, "dhcp.listen6", s, Some(547)).filter(|a| {
            a.is_ipv6() || {
                e.push("dhcp.listen6", "must be an IPv6 address (e.g. [::]:547)");
                false
            }
        }),
        None => Some(SocketAddr::from((std::net::Ipv6Addr::UNSPECIFIED, 547))),
    };
    let binding_file6 = match &h.binding_file6 {
        Some(f) if f.trim().is_empty() => {
            e.push("dhcp.bindingFile6", "must not be empty");
            PathBuf::new()
        }
        Some(f) => resolve(base, f),
        None => v6_name(&lease_file),
    };
    if binding_file6 == lease_file {
        e.push("dhcp.bindingFile6", "must differ from dhcp.leaseFile");
    }
    let mode = proxy::mode(h, e);
    Some(DhcpCfg {
        enabled: h.enabled,
        listen: listen?,
        lease_time: h.lease_time.get(),
        pool,
        lease_file,
        pxe,
        segments,
        relays,
        relays6,
        listen6: listen6?,
        binding_file6,
        mode,
        allow_other_servers: h.allow_other_servers,
    })
}

/// `x/name-leases.json` → `x/name-leases-v6.json` (the DHCPv6 binding
/// file beside the DHCPv4 lease file).
fn v6_name(lease_file: &Path) -> PathBuf {
    let stem = lease_file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "leases".into());
    let name = match lease_file.extension() {
        Some(ext) => format!("{stem}-v6.{}", ext.to_string_lossy()),
        None => format!("{stem}-v6"),
    };
    lease_file.with_file_name(name)
}

/// `dhcp.relays[]`: addresses a relay agent can have (the same rules the
/// server applies to a giaddr before it looks at this list), no duplicates;
/// IPv4 ones (DHCPv4 giaddrs) and IPv6 ones (DHCPv6 relays) apart.
fn relays(
    h: &raw::Dhcp,
    net: &NetParts,
    segments: &[SegmentCfg],
    e: &mut Errs,
) -> (Vec<Ipv4Addr>, Vec<Ipv6Addr>) {
    let (mut out, mut out6): (Vec<Ipv4Addr>, Vec<Ipv6Addr>) = (Vec::new(), Vec::new());
    for (i, s) in h.relays.iter().enumerate() {
        let path = format!("dhcp.relays[{i}]");
        let Some(ip) = e.parse::<IpAddr>(&path, s, "IPv4 or IPv6 address") else {
            continue;
        };
        let ip = match ip {
            IpAddr::V4(ip) => ip,
            IpAddr::V6(ip) => {
                match relay6_problem(ip, net, &out6) {
                    Some(w) => e.push(path, format!("{ip} is {w}")),
                    None => out6.push(ip),
                }
                continue;
            }
        };
        let loopback_net = net.cidr.is_some_and(|c| c.network().is_loopback());
        let edge = |c: &Ipv4Net| c.contains(ip) && c.is_reserved(ip);
        let why = if ip.is_unspecified() || u32::from(ip) >> 24 == 0 {
            Some("an address of network 0/8".to_string())
        } else if ip.is_broadcast() || ip.is_multicast() || u32::from(ip) >> 28 == 0xf {
            Some("not a unicast address".into())
        } else if ip.is_loopback() && !loopback_net {
            Some("a loopback address".into())
        } else if net.appliance_ip == Some(ip) {
            Some("network.applianceIP, the server itself".into())
        } else if let Some(c) = net
            .cidr
            .iter()
            .chain(segments.iter().map(|s| &s.cidr))
            .find(|c| edge(c))
        {
            Some(format!("the network or broadcast address of {c}"))
        } else if out.contains(&ip) {
            Some("listed twice".into())
        } else {
            None
        };
        match why {
            Some(w) => e.push(path, format!("{ip} is {w}")),
            None => out.push(ip),
        }
    }
    (out, out6)
}

/// Why an IPv6 relay address cannot be one (`None`: it can).
fn relay6_problem(ip: Ipv6Addr, net: &NetParts, taken: &[Ipv6Addr]) -> Option<String> {
    let Some(v6) = &net.v6 else {
        return Some(
            "an IPv6 relay, and network.ipv6 is not set (DHCPv6 runs only with it)".into(),
        );
    };
    if ip.is_unspecified() || ip.is_multicast() {
        Some("not a unicast address".into())
    } else if ip.is_loopback() {
        Some("a loopback address".into())
    } else if v6.appliance_ip == Some(ip) {
        Some("network.ipv6.applianceIP, the server itself".into())
    } else if taken.contains(&ip) {
        Some("listed twice".into())
    } else {
        None
    }
}

/// One error listing the node addresses inside the pool `(s, t)`.
fn pool_clear_of_nodes(
    e: &mut Errs,
    path: &str,
    (s, t): (Ipv4Addr, Ipv4Addr),
    nodes: Option<&[NodeCfg]>,
) {
    let inside = |ip: Ipv4Addr| (u32::from(s)..=u32::from(t)).contains(&u32::from(ip));
    let hit: Vec<String> = nodes
        .unwrap_or_default()
        .iter()
        .filter(|n| inside(n.ip))
        .map(|n| format!("{} ({})", n.ip, n.name))
        .collect();
    if !hit.is_empty() {
        e.push(
            path,
            format!(
                "range {s}-{t} contains the reserved address{} of {} node{}: {} (move the pool clear of the nodes' addresses)",
                if hit.len() == 1 { "" } else { "es" },
                hit.len(),
                if hit.len() == 1 { "" } else { "s" },
                hit.join(", ")
            ),
        );
    }
}

/// `dhcp.segments[]`: the segments that parsed (errors recorded for the
/// others). Their pools are checked against the nodes in [`build`].
pub(crate) fn segments(h: &raw::Dhcp, net: &NetParts, e: &mut Errs) -> Vec<SegmentCfg> {
    let mut out: Vec<SegmentCfg> = Vec::new();
    for (i, r) in h.segments.iter().enumerate() {
        let p = |f: &str| format!("dhcp.segments[{i}].{f}");
        let before = e.len();
        let cidr = e.parse::<Ipv4Net>(&p("cidr"), &r.cidr, "IPv4 CIDR (a.b.c.d/prefix)");
        if let Some(c) = cidr {
            if c.prefix() < 8 || c.prefix() > 30 {
                e.push(
                    p("cidr"),
                    format!("prefix /{} is not supported (use /8 to /30)", c.prefix()),
                );
            }
            let overlaps = |o: &Ipv4Net| o.contains(c.network()) || c.contains(o.network());
            if let Some(n) = net.cidr.filter(overlaps) {
                e.push(p("cidr"), format!("{c} overlaps network.cidr {n}"));
            }
            for (j, o) in h.segments[..i].iter().enumerate() {
                if let Ok(o) = o.cidr.parse::<Ipv4Net>()
                    && overlaps(&o)
                {
                    e.push(
                        p("cidr"),
                        format!("{c} overlaps dhcp.segments[{j}].cidr {o}"),
                    );
                }
            }
        }
        let host = |e: &mut Errs, path: &str, ip: Option<Ipv4Addr>| {
            if let (Some(c), Some(ip)) = (cidr, ip) {
                if !c.contains(ip) {
                    e.push(path, format!("{ip} is outside the segment {c}"));
                } else if c.is_reserved(ip) {
                    e.push(
                        path,
                        format!("{ip} is the network or broadcast address of {c}"),
                    );
                }
            }
        };
        let gateway = e.parse::<Ipv4Addr>(&p("gateway"), &r.gateway, "IPv4 address");
        host(e, &p("gateway"), gateway);
        let pool = r.pool.as_ref().and_then(|x| {
            let s = e.parse::<Ipv4Addr>(&p("pool.start"), &x.start, "IPv4 address");
            host(e, &p("pool.start"), s);
            let t = e.parse::<Ipv4Addr>(&p("pool.end"), &x.end, "IPv4 address");
            host(e, &p("pool.end"), t);
            let (s, t) = (s?, t?);
            if u32::from(s) > u32::from(t) {
                e.push(p("pool"), format!("start {s} is after end {t}"));
                return None;
            }
            if let Some(g) = gateway
                && (u32::from(s)..=u32::from(t)).contains(&u32::from(g))
            {
                e.push(p("pool"), format!("range {s}-{t} contains the gateway {g}"));
            }
            Some((s, t))
        });
        let dns = match &r.dns {
            None => net.appliance_ip.into_iter().collect(),
            Some(v) if v.is_empty() => {
                e.push(p("dns"), "must list at least one address (or be left out)");
                Vec::new()
            }
            Some(v) => v
                .iter()
                .enumerate()
                .filter_map(|(j, s)| {
                    e.parse::<Ipv4Addr>(&format!("dhcp.segments[{i}].dns[{j}]"), s, "IPv4 address")
                })
                .collect(),
        };
        if e.len() > before {
            // Keep a segment whose cidr and gateway parsed for the node
            // checks (its errors already fail the file).
            if let (Some(cidr), Some(gateway)) = (cidr, gateway) {
                out.push(SegmentCfg {
                    cidr,
                    gateway,
                    pool: None,
                    dns,
                });
            }
            continue;
        }
        if let (Some(cidr), Some(gateway)) = (cidr, gateway) {
            out.push(SegmentCfg {
                cidr,
                gateway,
                pool,
                dns,
            });
        }
    }
    out
}
