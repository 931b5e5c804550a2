//! `nodes[]`: names, roles, MACs and addresses, unique and inside the
//! network (or a `dhcp.segments[]` subnet, not its gateway), never an
//! address the appliance or a VIP has; the same for `ipv6` against
//! `network.ipv6` (required for it). `ingress[]`: names of those nodes,
//! not the bootstrap, each once.

use std::collections::HashMap;
use std::net::{Ipv4Addr, Ipv6Addr};

use super::{Errs, NetParts};
use crate::config::raw;
use crate::model::cluster::{MacAddr, NodeCfg, Role};
use crate::model::names::{is_label, label_problem, reserved_node_name};

/// Longest FQDN a node may have: it becomes the node's `/etc/hostname`
/// (ignition) and hostname + domain (DHCP), and Linux takes at most 64.
pub const MAX_HOSTNAME: usize = 63;

/// The nodes that parsed (with their errors recorded for the others).
pub(crate) fn build(
    raw_nodes: &[raw::Node],
    net: &NetParts,
    domain: &str,
    base: &std::path::Path,
    e: &mut Errs,
) -> Option<Vec<NodeCfg>> {
    let mut nodes = Vec::new();
    let mut seen_name: HashMap<String, usize> = HashMap::new();
    let mut seen_mac: HashMap<MacAddr, usize> = HashMap::new();
    let mut seen_ip: HashMap<Ipv4Addr, usize> = HashMap::new();
    let mut seen_ip6: HashMap<Ipv6Addr, usize> = HashMap::new();
    if raw_nodes.is_empty() {
        e.push("nodes", "at least one node is required");
    }
    for (i, rn) in raw_nodes.iter().enumerate() {
        let p = |f: &str| format!("nodes[{i}].{f}");
        if !is_label(&rn.name) {
            e.push(p("name"), label_problem(&rn.name));
        } else if reserved_node_name(&rn.name) {
            e.push(
                p("name"),
                format!(
                    "{:?} is reserved for a record the appliance serves",
                    rn.name
                ),
            );
        }
        let fqdn = format!("{}.{domain}", rn.name);
        if fqdn.len() > MAX_HOSTNAME {
            e.push(
                p("name"),
                format!(
                    "the node's FQDN {fqdn} is {} characters; Linux refuses a hostname over {MAX_HOSTNAME} (shorten the node name, name or baseDomain)",
                    fqdn.len()
                ),
            );
        }
        if let Some(j) = seen_name.insert(rn.name.clone(), i) {
            e.push(
                p("name"),
                format!("duplicate node name {:?} (also nodes[{j}].name)", rn.name),
            );
        }
        let role = match rn.role.parse::<Role>() {
            Ok(r) => Some(r),
            Err(m) => {
                e.push(p("role"), m.to_string());
                None
            }
        };
        let mac = e.parse::<MacAddr>(&p("mac"), &rn.mac, "MAC address");
        if let Some(m) = mac {
            if m.is_multicast() {
                e.push(p("mac"), format!("{m} is a multicast address"));
            } else if m.0 == [0; 6] {
                e.push(p("mac"), "the all-zero MAC is not valid");
            }
            if let Some(j) = seen_mac.insert(m, i) {
                e.push(p("mac"), format!("duplicate MAC {m} (also nodes[{j}].mac)"));
            }
        }
        let ip = e.parse::<Ipv4Addr>(&p("ip"), &rn.ip, "IPv4 address");
        net.in_node_net(e, &p("ip"), ip);
        if let Some(ip) = ip {
            if let Some(j) = seen_ip.insert(ip, i) {
                e.push(p("ip"), format!("duplicate IP {ip} (also nodes[{j}].ip)"));
            }
            let users: Vec<&str> = net
                .taken()
                .into_iter()
                .filter(|(_, other)| *other == Some(ip))
                .map(|(what, _)| what)
                .collect();
            if !users.is_empty() {
                e.push(
                    p("ip"),
                    format!(
                        "{ip} is already used by {} (give the node its own address)",
                        users.join(", ")
                    ),
                );
            }
        }
        let ipv6 = rn.ipv6.as_deref().and_then(|text| match &net.v6 {
            None => {
                e.push(
                    p("ipv6"),
                    "needs network.ipv6 (a dual-stack network: its cidr and applianceIP)",
                );
                None
            }
            Some(v6) => v6.node(e, &p("ipv6"), text),
        });
        if let Some(ip) = ipv6
            && let Some(j) = seen_ip6.insert(ip, i)
        {
            e.push(
                p("ipv6"),
                format!("duplicate IPv6 address {ip} (also nodes[{j}].ipv6)"),
            );
        }
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
        if let (Some(role), Some(mac), Some(ip)) = (role, mac, ip) {
            nodes.push(NodeCfg {
                name: rn.name.clone(),
                role,
                mac,
                ip,
                ipv6,
                install_dev: rn.install_dev.clone(),
                kargs: rn.kargs.clone(),
                bmc,
                static_address,
                interface: rn.interface.clone(),
            });
        }
    }
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
