//! `nodes[]`: names, roles, MACs and addresses, unique and inside the
//! network (or a `dhcp.segments[]` subnet, not its gateway), never an
//! address the appliance or a VIP has; the same for `ipv6` against
//! `network.ipv6` (required for it). `ingress[]`: names of those nodes,
//! not the bootstrap, each once.

use std::collections::HashMap;
use std::net::{Ipv4Addr, Ipv6Addr};

use super::{Errs, NetParts};
use crate::config::raw;
use crate::model::cluster::{NodeCfg, Role};
use crate::model::names::{is_label, label_problem, reserved_node_name};
use crate::model::net::MacAddr;

/// Longest FQDN a node may have: it becomes the node's `/etc/hostname`
/// (ignition) and hostname + domain (DHCP), and Linux takes at most 64.
pub(super) const MAX_HOSTNAME: usize = 63;

/// The nodes that parsed (with their errors recorded for the others).
pub(crate) fn build(
    raw_nodes: &[raw::Node],
    net: &NetParts,
    domain: &str,
    base: &std::path::Path,
    e: &mut Errs,
) -> Option<Vec<NodeCfg>> {
    let mut seen = Seen::default();
    if raw_nodes.is_empty() {
        e.push("nodes", "at least one node is required");
    }
    let nodes = raw_nodes
        .iter()
        .enumerate()
        .filter_map(|(i, rn)| node(e, i, rn, net, domain, base, &mut seen))
        .collect();
    let count = |r: Role| raw_nodes.iter().filter(|n| n.role.parse() == Ok(r)).count();
    let roles_parse = raw_nodes.iter().all(|n| n.role.parse::<Role>().is_ok());
    // A mistyped role was reported at its node; "no master" would repeat it.
    if !raw_nodes.is_empty() && roles_parse && count(Role::Master) == 0 {
        e.push("nodes", "at least one node with role master is required");
    }
    if count(Role::Bootstrap) > 1 {
        e.push("nodes", "at most one node may have role bootstrap");
    }
    Some(nodes)
}

/// What the nodes before this one took: names, MACs and addresses, each
/// with its node's index (for "also nodes[j]").
#[derive(Default)]
struct Seen {
    name: HashMap<String, usize>,
    mac: HashMap<MacAddr, usize>,
    ip: HashMap<Ipv4Addr, usize>,
    ip6: HashMap<Ipv6Addr, usize>,
}

/// `nodes[i]`, when its role, MAC and address parse (every error of it
/// recorded either way).
fn node(
    e: &mut Errs,
    i: usize,
    rn: &raw::Node,
    net: &NetParts,
    domain: &str,
    base: &std::path::Path,
    seen: &mut Seen,
) -> Option<NodeCfg> {
    let p = |f: &str| format!("nodes[{i}].{f}");
    check_name(e, i, rn, domain, seen);
    let role = match rn.role.parse::<Role>() {
        Ok(r) => Some(r),
        Err(m) => {
            e.push(p("role"), m.to_string());
            None
        }
    };
    let mac = mac(e, i, rn, seen);
    let ip = ipv4(e, i, rn, net, seen);
    let ipv6 = ipv6(e, i, rn, net, seen);
    if let Some(dev) = &rn.install_dev {
        super::rhcos::check_install_dev(e, &p("installDev"), dev);
    }
    for (j, k) in rn.kargs.iter().enumerate() {
        if let Some(why) = super::rhcos::karg_problem(k) {
            e.push(format!("nodes[{i}].kargs[{j}]"), format!("{k:?} {why}"));
        }
    }
    let static_address = super::addressing::node(e, i, rn, net.static_default);
    let bmc = rn
        .bmc
        .as_ref()
        .and_then(|b| super::bmc::build(b, base, &p("bmc"), &mut e.0));
    Some(NodeCfg {
        name: rn.name.clone(),
        role: role?,
        mac: mac?,
        ip: ip?,
        ipv6,
        install_dev: rn.install_dev.clone(),
        kargs: rn.kargs.clone(),
        bmc,
        static_address,
        interface: rn.interface.clone(),
    })
}

/// `nodes[i].name`: a label, not a name the appliance serves, its FQDN a
/// valid hostname, unique.
fn check_name(e: &mut Errs, i: usize, rn: &raw::Node, domain: &str, seen: &mut Seen) {
    let p = format!("nodes[{i}].name");
    if !is_label(&rn.name) {
        e.push(&p, label_problem(&rn.name));
    } else if reserved_node_name(&rn.name) {
        e.push(
            &p,
            format!(
                "{:?} is reserved for a record the appliance serves",
                rn.name
            ),
        );
    }
    let fqdn = format!("{}.{domain}", rn.name);
    if fqdn.len() > MAX_HOSTNAME {
        e.push(
            &p,
            format!(
                "the node's FQDN {fqdn} is {} characters; Linux refuses a hostname over {MAX_HOSTNAME} (shorten the node name, name or baseDomain)",
                fqdn.len()
            ),
        );
    }
    if let Some(j) = seen.name.insert(rn.name.clone(), i) {
        e.push(
            &p,
            format!("duplicate node name {:?} (also nodes[{j}].name)", rn.name),
        );
    }
}

/// `nodes[i].mac`: a unicast, non-zero MAC, unique.
fn mac(e: &mut Errs, i: usize, rn: &raw::Node, seen: &mut Seen) -> Option<MacAddr> {
    let p = format!("nodes[{i}].mac");
    let mac = e.parse::<MacAddr>(&p, &rn.mac, "MAC address");
    if let Some(m) = mac {
        if m.is_multicast() {
            e.push(&p, format!("{m} is a multicast address"));
        } else if m.0 == [0; 6] {
            e.push(&p, "the all-zero MAC is not valid");
        }
        if let Some(j) = seen.mac.insert(m, i) {
            e.push(&p, format!("duplicate MAC {m} (also nodes[{j}].mac)"));
        }
    }
    mac
}

/// `nodes[i].ip`: inside the node networks, unique, no address the
/// appliance or a VIP has.
fn ipv4(
    e: &mut Errs,
    i: usize,
    rn: &raw::Node,
    net: &NetParts,
    seen: &mut Seen,
) -> Option<Ipv4Addr> {
    let p = format!("nodes[{i}].ip");
    let ip = e.parse::<Ipv4Addr>(&p, &rn.ip, "IPv4 address");
    net.in_node_net(e, &p, ip);
    if let Some(ip) = ip {
        if let Some(j) = seen.ip.insert(ip, i) {
            e.push(&p, format!("duplicate IP {ip} (also nodes[{j}].ip)"));
        }
        let users: Vec<&str> = net
            .taken()
            .into_iter()
            .filter(|(_, other)| *other == Some(ip))
            .map(|(what, _)| what)
            .collect();
        if !users.is_empty() {
            e.push(
                &p,
                format!(
                    "{ip} is already used by {} (give the node its own address)",
                    users.join(", ")
                ),
            );
        }
    }
    ip
}

/// `nodes[i].ipv6`: only with `network.ipv6`, inside it, unique.
fn ipv6(
    e: &mut Errs,
    i: usize,
    rn: &raw::Node,
    net: &NetParts,
    seen: &mut Seen,
) -> Option<Ipv6Addr> {
    let p = format!("nodes[{i}].ipv6");
    let ipv6 = rn.ipv6.as_deref().and_then(|text| match &net.v6 {
        None => {
            e.push(
                &p,
                "needs network.ipv6 (a dual-stack network: its cidr and applianceIP)",
            );
            None
        }
        Some(v6) => v6.node(e, &p, text),
    });
    if let Some(ip) = ipv6
        && let Some(j) = seen.ip6.insert(ip, i)
    {
        e.push(
            &p,
            format!("duplicate IPv6 address {ip} (also nodes[{j}].ipv6)"),
        );
    }
    ipv6
}

/// `ingress`: every entry names a node of `nodes` that is not the
/// bootstrap (it leaves the cluster), once. Returns the valid names.
pub(crate) fn ingress(list: &[String], nodes: &[NodeCfg], e: &mut Errs) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (i, name) in list.iter().enumerate() {
        let p = format!("ingress[{i}]");
        match nodes.iter().find(|n| &n.name == name) {
            None => {
                let known: Vec<_> = nodes.iter().map(|n| n.name.as_str()).collect();
                e.push(
                    p,
                    format!("no node named {name:?} (nodes: {})", known.join(", ")),
                );
            }
            Some(n) if n.role == Role::Bootstrap => e.push(
                p,
                format!("{name:?} is the bootstrap node, which leaves the cluster; name the masters or workers that run the router"),
            ),
            Some(_) if out.contains(name) => e.push(p, format!("{name:?} is listed twice")),
            Some(_) => out.push(name.clone()),
        }
    }
    out
}
