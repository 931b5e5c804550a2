//! Ignition serving rules (pure): who may fetch, which file answers a
//! name, and what the per-node hostname merge does (done by `ignmerge`).
//!
//! - Access: ignition configs carry cluster secrets (`bootstrap.ign` the
//!   cluster CA keys), so each is served only to its owner ([`owner`]: the
//!   node of `<node>.ign`, the bootstrap node for `bootstrap.ign`, any node
//!   for `master.ign` / `worker.ign`), the appliance host and
//!   `http.ignitionClientCidrs`; everyone else gets 403 (the pure rules:
//!   [`crate::model::access`]).
//! - `/ignition/<name>.ign`:
//!   1. `<name>` is a node: its own `<node>.ign` if that file exists (served
//!      verbatim, but for a static node's keyfile below), else its role's
//!      `<role>.ign` with `/etc/hostname` set to the node's FQDN
//!      (`master-0.<name>.<baseDomain>`, matching the DNS A/PTR records)
//!      merged into `storage.files`. A node with `addressing: static` also
//!      gets its NetworkManager keyfile
//!      (`/etc/NetworkManager/system-connections/<interface>.nmconnection`,
//!      mode 0600, [`crate::model::staticnet`]) merged in, in either file:
//!      the installed system keeps its inventory address from its first
//!      boot on, whichever file the operator gave it — unless that file
//!      writes NetworkManager connections of its own (any file under
//!      `/etc/NetworkManager/system-connections/`): then the operator's
//!      setup is left alone (the fetch's detail says so);
//!   2. `<name>` is a role (`bootstrap`, `master`, `worker`): `<role>.ign`
//!      verbatim;
//!   3. anything else: 404.
//!
//!   The single-node master's `<node>.ign` is the bootstrap-in-place
//!   Ignition (`bootstrap-in-place-for-live-iso.ign`) verbatim, to that node
//!   only (the iPXE route's `ignition.config.url`).
//! - The merge keeps every other key; an existing entry at an added path
//!   (`/etc/hostname`, the keyfile) is replaced. A config the appliance
//!   adds files to with an `ignition.config.replace` pointer is refused
//!   (500, logged): Ignition would drop them. A node with `addressing: dhcp`
//!   gets exactly what it got before static addresses existed.
//! - One name rule: validation keeps every node FQDN ≤ 63 characters, so the
//!   `/etc/hostname` served here (the FQDN) and what DHCP gives (option 12
//!   the short name + option 15 the cluster domain) name the node alike. The entry is `{path, mode: 420, overwrite: true, contents:
//!   {source: "data:,<fqdn>%0A"}}` (RFC 2397 data URL, URL-encoded), valid
//!   for Ignition spec 3.x.

use std::net::IpAddr;

use super::ignmerge::FileEntry;
use crate::model::access::Owner;
use crate::model::cluster::{Cluster, NodeCfg, Role};
use crate::model::staticnet::StaticNet;

/// Where NetworkManager's connections live; a file below it in the served
/// config means the operator set the node's network up.
const KEYFILE_DIR_SLASH: &str = "/etc/NetworkManager/system-connections/";

/// The node a client address belongs to, if any.
pub fn node_by_ip(c: &Cluster, ip: IpAddr) -> Option<&NodeCfg> {
    crate::model::access::node_at(c, ip)
}

/// What `/ignition/<name>.ign` maps to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Target {
    /// A node: try `<node>.ign`, else merge `<role>.ign` with `hostname`;
    /// a static node's `keyfile` is merged into either.
    Node {
        node: String,
        role: Role,
        hostname: String,
        keyfile: Option<FileEntry>,
    },
    /// A role file, verbatim.
    Role(Role),
    /// The single-node master: the bootstrap-in-place Ignition, verbatim.
    SingleNode { node: String },
}

/// Whose config `t` is, for the access rules.
pub fn owner<'a>(c: &'a Cluster, t: &Target) -> Owner<'a> {
    match t {
        Target::Node { node, role, .. } => c.node(node).map_or(Owner::Role(*role), Owner::Node),
        Target::Role(r) => Owner::Role(*r),
        Target::SingleNode { node } => c.node(node).map_or(Owner::Role(Role::Master), Owner::Node),
    }
}

/// Map the file name (`master-0.ign`) to a target; `None` → 404.
pub fn target(c: &Cluster, file: &str) -> Option<Target> {
    let name = file.strip_suffix(".ign")?;
    if let Some(n) = c.node(name) {
        if c.is_single_node_master(n) {
            return Some(Target::SingleNode {
                node: n.name.clone(),
            });
        }
        return Some(Target::Node {
            node: n.name.clone(),
            role: n.role,
            hostname: c.fqdn(&n.name),
            keyfile: keyfile(c, n),
        });
    }
    Role::ALL
        .into_iter()
        .find(|r| r.as_str() == name)
        .map(Target::Role)
}

/// A static node's keyfile entry (`None` for a DHCP node).
fn keyfile(c: &Cluster, n: &NodeCfg) -> Option<FileEntry> {
    let s = StaticNet::of(c, n)?;
    Some(FileEntry {
        path: s.keyfile_path(),
        mode: 0o600,
        contents: s.keyfile(),
        what: "the static address keyfile",
        // A config that writes NetworkManager connections of its own (a
        // bond, a VLAN) keeps them alone.
        yields_to: Some(KEYFILE_DIR_SLASH),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster() -> Cluster {
        let text = "name: c\nbaseDomain: example.com\nnetwork: { cidr: 10.0.0.0/24, gateway: 10.0.0.1, applianceIP: 10.0.0.1 }\nnodes:\n  - { name: bootstrap, role: bootstrap, mac: '52:54:00:00:00:01', ip: 10.0.0.5 }\n  - { name: m0, role: master, mac: '52:54:00:00:00:02', ip: 10.0.0.10 }\n  - { name: w0, role: worker, mac: '52:54:00:00:00:03', ip: 10.0.0.20 }\n";
        crate::config::from_str(text, std::path::Path::new("/"), std::path::Path::new("t"))
            .unwrap()
            .cluster
    }

    #[test]
    fn targets() {
        let c = cluster();
        assert_eq!(
            target(&c, "m0.ign"),
            Some(Target::Node {
                node: "m0".into(),
                role: Role::Master,
                hostname: "m0.c.example.com".into(),
                keyfile: None,
            })
        );
        assert_eq!(target(&c, "master.ign"), Some(Target::Role(Role::Master)));
        assert_eq!(target(&c, "worker.ign"), Some(Target::Role(Role::Worker)));
        assert!(matches!(
            target(&c, "bootstrap.ign"),
            Some(Target::Node {
                role: Role::Bootstrap,
                ..
            })
        ));
        assert_eq!(target(&c, "m1.ign"), None);
        assert_eq!(target(&c, "m0"), None);
        assert_eq!(target(&c, "m0.json"), None);
        assert_eq!(
            node_by_ip(&c, "10.0.0.20".parse().unwrap()).map(|n| n.name.as_str()),
            Some("w0")
        );
        assert_eq!(
            node_by_ip(&c, "::ffff:10.0.0.10".parse().unwrap()).map(|n| n.name.as_str()),
            Some("m0")
        );
        assert!(node_by_ip(&c, "10.0.0.99".parse().unwrap()).is_none());
    }

    /// A static node's target carries its keyfile (0600, named after its
    /// interface); a DHCP node's none.
    #[test]
    fn a_static_node_has_a_keyfile() {
        let mut c = cluster();
        let m0 = c.nodes.iter_mut().find(|n| n.name == "m0").unwrap();
        m0.static_address = true;
        m0.interface = Some("eno1".into());
        let Some(Target::Node { keyfile, .. }) = target(&c, "m0.ign") else {
            panic!("m0 is a node");
        };
        let k = keyfile.expect("a keyfile");
        assert_eq!(
            (k.path.as_str(), k.mode),
            (
                "/etc/NetworkManager/system-connections/eno1.nmconnection",
                0o600
            )
        );
        assert!(
            k.contents.contains("\naddress1=10.0.0.10/24,10.0.0.1\n"),
            "{}",
            k.contents
        );
        assert!(matches!(
            target(&c, "w0.ign"),
            Some(Target::Node { keyfile: None, .. })
        ));
    }

    #[test]
    fn owners() {
        let c = cluster();
        let own = |f: &str| owner(&c, &target(&c, f).unwrap());
        assert_eq!(own("m0.ign"), Owner::Node(c.node("m0").unwrap()));
        // The node named bootstrap is the owner of bootstrap.ign.
        assert_eq!(
            own("bootstrap.ign"),
            Owner::Node(c.node("bootstrap").unwrap())
        );
        assert_eq!(own("master.ign"), Owner::Role(Role::Master));
        assert_eq!(own("worker.ign"), Owner::Role(Role::Worker));
    }
}
