//! `network.addressing` and `nodes[].addressing` / `nodes[].interface`:
//! which nodes carry their inventory address as `ip=` kernel arguments
//! (`static`) instead of taking one from DHCP (`dhcp`, the default).
//!
//! Invariants: a static node has an `interface` (a name dracut's `ip=` can
//! carry: 1-15 characters, no `/`, `:` or whitespace), and no configured
//! kernel argument that reaches it (`rhcos.kargs`, its role's, its own) is
//! an `ip=` or `nameserver=` of its own: the appliance writes those
//! ([`crate::model::boot::static_kargs`]), and two would leave the node
//! with whichever the initramfs read last. Every mistake is one message at
//! its field, all reported at once.

use super::Errs;
use crate::config::raw;
use crate::model::cluster::Cluster;

/// `addressing` at `path`: `Some(true)` for `static`, `Some(false)` for
/// `dhcp`, `None` when absent or unknown (recorded).
pub(crate) fn parse(e: &mut Errs, path: &str, text: Option<&str>) -> Option<bool> {
    match text? {
        "dhcp" => Some(false),
        "static" => Some(true),
        other => {
            e.push(
                path,
                format!(
                    "unknown addressing {other:?}: use dhcp (the node takes its address from a DHCP server) or static (its install carries its ip as ip= kernel arguments)"
                ),
            );
            None
        }
    }
}

/// Whether node `i` is static (its own `addressing`, else the network's
/// `default_static`), checking its `interface`.
pub(crate) fn node(e: &mut Errs, i: usize, rn: &raw::Node, default_static: bool) -> bool {
    let path = |f: &str| format!("nodes[{i}].{f}");
    let is_static = parse(e, &path("addressing"), rn.addressing.as_deref()).unwrap_or(
        // An unknown value was reported; do not add "interface missing".
        default_static && rn.addressing.is_none(),
    );
    match &rn.interface {
        Some(name) if !valid_interface(name) => e.push(
            path("interface"),
            format!(
                "{name:?} is not a valid interface name (1-15 characters, no '/', ':' or spaces)"
            ),
        ),
        Some(_) => {}
        None if is_static => {
            let from = if rn.addressing.is_some() {
                "addressing: static"
            } else {
                "network.addressing: static"
            };
            e.push(
                path("interface"),
                format!(
                    "node {} has a static address ({from}) and needs the NIC it goes on: add interface: <name as RHCOS names it, e.g. ens3 or eno1>",
                    rn.name
                ),
            );
        }
        None => {}
    }
    is_static
}

fn valid_interface(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 15
        && !name.contains(['/', ':'])
        && !name.chars().any(char::is_whitespace)
}

/// Is `karg` a network argument the appliance writes for a static node?
fn own_network_karg(karg: &str) -> bool {
    karg.starts_with("ip=") || karg.starts_with("nameserver=")
}

/// No configured `ip=` / `nameserver=` reaches a static node (one message
/// per argument, naming the static nodes it reaches).
pub(crate) fn check_kargs(c: &Cluster, e: &mut Errs) {
    let statics: Vec<_> = c.nodes.iter().filter(|n| n.static_address).collect();
    if statics.is_empty() {
        return;
    }
    let fix = "the appliance writes ip= and nameserver= for a node with addressing: static; remove it, or use addressing: dhcp for those nodes";
    let names = |it: &mut dyn Iterator<Item = &str>| it.collect::<Vec<_>>().join(", ");
    if let Some(r) = &c.rhcos {
        for (j, k) in r.kargs.iter().enumerate() {
            if own_network_karg(k) {
                let who = names(&mut statics.iter().map(|n| n.name.as_str()));
                e.push(
                    format!("rhcos.kargs[{j}]"),
                    format!("{k:?} reaches the static nodes {who}: {fix}"),
                );
            }
        }
        for (role, list) in &r.role_kargs {
            let mut of_role = statics
                .iter()
                .filter(|n| n.role == *role)
                .map(|n| n.name.as_str())
                .peekable();
            if of_role.peek().is_none() {
                continue;
            }
            let who = names(&mut of_role);
            for (j, k) in list.iter().enumerate().filter(|(_, k)| own_network_karg(k)) {
                e.push(
                    format!("rhcos.roleKargs.{role}[{j}]"),
                    format!("{k:?} reaches the static nodes {who}: {fix}"),
                );
            }
        }
    }
    for (i, n) in c.nodes.iter().enumerate().filter(|(_, n)| n.static_address) {
        for (j, k) in n
            .kargs
            .iter()
            .enumerate()
            .filter(|(_, k)| own_network_karg(k))
        {
            e.push(
                format!("nodes[{i}].kargs[{j}]"),
                format!("{k:?}: node {} is static: {fix}", n.name),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::config::parse_str;
    use crate::config::validate::validate;

    fn file(network: &str, nodes: &str, rhcos: &str) -> String {
        format!(
            "name: ocp4\nbaseDomain: example.com\n\
             network: {{ cidr: 192.168.131.0/24, gateway: 192.168.131.1, applianceIP: 192.168.131.2{network} }}\n\
             nodes:\n{nodes}rhcos: {{ iso: /x.iso{rhcos} }}\n"
        )
    }

    fn errors(text: &str) -> Vec<String> {
        match validate(parse_str(text).unwrap(), Path::new("/base")) {
            Ok(_) => Vec::new(),
            Err(e) => e
                .iter()
                .map(|f| format!("{}: {}", f.path, f.message))
                .collect(),
        }
    }

    const M0: &str =
        "  - { name: master-0, role: master, mac: '52:54:00:00:00:0a', ip: 192.168.131.10";

    #[test]
    fn static_per_network_or_per_node_with_its_interface() {
        let text = file(
            ", addressing: static",
            &format!(
                "{M0}, interface: ens3 }}\n  - {{ name: worker-0, role: worker, mac: '52:54:00:00:00:14', ip: 192.168.131.20, addressing: dhcp }}\n"
            ),
            "",
        );
        let c = validate(parse_str(&text).unwrap(), Path::new("/b")).unwrap();
        let m0 = c.node("master-0").unwrap();
        assert!(m0.static_address);
        assert_eq!(m0.interface.as_deref(), Some("ens3"));
        assert!(!c.node("worker-0").unwrap().static_address);
        let text = file(
            "",
            &format!("{M0}, addressing: static, interface: eno1 }}\n"),
            "",
        );
        let c = validate(parse_str(&text).unwrap(), Path::new("/b")).unwrap();
        assert!(c.node("master-0").unwrap().static_address);
        // The default is dhcp; an interface alone changes nothing.
        let text = file("", &format!("{M0}, interface: eno1 }}\n"), "");
        let c = validate(parse_str(&text).unwrap(), Path::new("/b")).unwrap();
        assert!(!c.node("master-0").unwrap().static_address);
    }

    #[test]
    fn every_mistake_at_its_field_all_at_once() {
        let nodes = format!(
            "{M0}, kargs: [nameserver=8.8.8.8] }}\n\
             \x20 - {{ name: worker-0, role: worker, mac: '52:54:00:00:00:14', ip: 192.168.131.20, addressing: fixed }}\n\
             \x20 - {{ name: worker-1, role: worker, mac: '52:54:00:00:00:15', ip: 192.168.131.21, interface: 'en:1' }}\n"
        );
        let e = errors(&file(", addressing: static", &nodes, ""));
        let want = [
            "nodes[0].interface: node master-0 has a static address (network.addressing: static) and needs the NIC it goes on",
            "nodes[1].addressing: unknown addressing \"fixed\": use dhcp",
            "nodes[2].interface: \"en:1\" is not a valid interface name",
        ];
        for w in want {
            assert!(e.iter().any(|m| m.starts_with(w)), "{w}\n{e:#?}");
        }
        assert_eq!(e.len(), want.len(), "one message per mistake: {e:#?}");
        let e = errors(&file(", addressing: fixed", &format!("{M0} }}\n"), ""));
        assert_eq!(e.len(), 1, "{e:#?}");
        assert!(
            e[0].starts_with("network.addressing: unknown addressing \"fixed\""),
            "{e:?}"
        );
    }

    #[test]
    fn a_configured_ip_or_nameserver_reaching_a_static_node_is_refused() {
        let nodes = format!(
            "{M0}, interface: ens3, kargs: [nameserver=8.8.8.8] }}\n\
             \x20 - {{ name: worker-0, role: worker, mac: '52:54:00:00:00:14', ip: 192.168.131.20, addressing: dhcp, kargs: [ip=dhcp] }}\n"
        );
        let rhcos =
            ", kargs: [ip=dhcp], roleKargs: { master: ['ip=ens3:dhcp'], worker: ['ip=dhcp'] }";
        let e = errors(&file(", addressing: static", &nodes, rhcos));
        let want = [
            "rhcos.kargs[0]: \"ip=dhcp\" reaches the static nodes master-0: ",
            "rhcos.roleKargs.master[0]: \"ip=ens3:dhcp\" reaches the static nodes master-0: ",
            "nodes[0].kargs[0]: \"nameserver=8.8.8.8\": node master-0 is static: ",
        ];
        for w in want {
            assert!(e.iter().any(|m| m.starts_with(w)), "{w}\n{e:#?}");
        }
        // The worker is DHCP: its and its role's ip= are its own business.
        assert_eq!(e.len(), want.len(), "{e:#?}");
    }
}
