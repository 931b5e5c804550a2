//! Ignition serving rules (pure): who may fetch, which file answers a
//! name, and the per-node hostname merge.
//!
//! - Access: ignition configs carry cluster secrets (`bootstrap.ign` the
//!   cluster CA keys), so each is served only to its owner ([`owner`]: the
//!   node of `<node>.ign`, the bootstrap node for `bootstrap.ign`, any node
//!   for `master.ign` / `worker.ign`), the appliance host and
//!   `http.ignitionClientCidrs`; everyone else gets 403 (the pure rules:
//!   [`crate::model::access`]).
//! - `/ignition/<name>.ign`:
//!   1. `<name>` is a node: its own `<node>.ign` if that file exists (served
//!      verbatim), else its role's `<role>.ign` with `/etc/hostname` set to
//!      the node's FQDN (`master-0.<name>.<baseDomain>`, matching the DNS
//!      A/PTR records) merged into `storage.files`;
//!   2. `<name>` is a role (`bootstrap`, `master`, `worker`): `<role>.ign`
//!      verbatim;
//!   3. anything else: 404.
//! - The merge keeps every other key; an existing `/etc/hostname` entry is
//!   replaced. A role config with an `ignition.config.replace` pointer is
//!   refused (500, logged): Ignition would drop the hostname.
//! - One name rule: validation keeps every node FQDN ≤ 63 characters, so the
//!   `/etc/hostname` served here (the FQDN) and what DHCP gives (option 12
//!   the short name + option 15 the cluster domain) name the node alike. The entry is `{path, mode: 420, overwrite: true, contents:
//!   {source: "data:,<fqdn>%0A"}}` (RFC 2397 data URL, URL-encoded), valid
//!   for Ignition spec 3.x.

use std::net::IpAddr;

use serde_json::{Value, json};

use crate::config::{Cluster, NodeCfg, Role};
use crate::model::access::Owner;

/// The node a client address belongs to, if any.
pub fn node_by_ip(c: &Cluster, ip: IpAddr) -> Option<&NodeCfg> {
    let v4 = match ip {
        IpAddr::V4(v4) => v4,
        IpAddr::V6(v6) => v6.to_ipv4_mapped()?,
    };
    c.nodes.iter().find(|n| n.ip == v4)
}

/// What `/ignition/<name>.ign` maps to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Target {
    /// A node: try `<node>.ign`, else merge `<role>.ign` with `hostname`.
    Node {
        node: String,
        role: Role,
        hostname: String,
    },
    /// A role file, verbatim.
    Role(Role),
}

/// Whose config `t` is, for the access rules.
pub fn owner<'a>(c: &'a Cluster, t: &Target) -> Owner<'a> {
    match t {
        Target::Node { node, role, .. } => c.node(node).map_or(Owner::Role(*role), Owner::Node),
        Target::Role(r) => Owner::Role(*r),
    }
}

/// Map the file name (`master-0.ign`) to a target; `None` → 404.
pub fn target(c: &Cluster, file: &str) -> Option<Target> {
    let name = file.strip_suffix(".ign")?;
    if let Some(n) = c.node(name) {
        return Some(Target::Node {
            node: n.name.clone(),
            role: n.role,
            hostname: c.fqdn(&n.name),
        });
    }
    Role::ALL
        .into_iter()
        .find(|r| r.as_str() == name)
        .map(Target::Role)
}

/// Why a role config could not be merged.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    #[error("not valid JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("{0}")]
    Shape(&'static str),
}

/// `data:` URL for a small text file (percent-encoding what is not unreserved).
pub fn data_url(text: &str) -> String {
    let mut out = String::from("data:,");
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Merge an `/etc/hostname` file into the ignition config `role_config`.
/// A config with an `ignition.config.replace` pointer is refused: Ignition
/// would fetch the pointed-to config *instead of* this one and drop the
/// hostname silently (a `merge` pointer, as openshift-install writes, keeps
/// it).
pub fn merge_hostname(role_config: &[u8], hostname: &str) -> Result<Vec<u8>, MergeError> {
    let mut doc: Value = serde_json::from_slice(role_config)?;
    if doc
        .pointer("/ignition/config/replace")
        .is_some_and(|r| !r.is_null())
    {
        return Err(MergeError::Shape(
            "it has an ignition.config.replace pointer, which would discard the node's /etc/hostname; \
             use ignition.config.merge, or give the node its own <node>.ign",
        ));
    }
    let root = doc
        .as_object_mut()
        .ok_or(MergeError::Shape("top level is not a JSON object"))?;
    let storage = root
        .entry("storage")
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .ok_or(MergeError::Shape("storage is not an object"))?;
    let files = storage
        .entry("files")
        .or_insert_with(|| json!([]))
        .as_array_mut()
        .ok_or(MergeError::Shape("storage.files is not an array"))?;
    files.retain(|f| f.get("path").and_then(Value::as_str) != Some("/etc/hostname"));
    files.push(json!({
        "path": "/etc/hostname",
        "mode": 420,
        "overwrite": true,
        "contents": { "source": data_url(&format!("{hostname}\n")) },
    }));
    Ok(serde_json::to_vec(&doc)?)
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
                hostname: "m0.c.example.com".into()
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

    #[test]
    fn data_urls() {
        assert_eq!(data_url("m0.c.example.com\n"), "data:,m0.c.example.com%0A");
        assert_eq!(data_url("a b/c"), "data:,a%20b%2Fc");
    }

    fn hostname_entries(v: &Value) -> Vec<&Value> {
        v["storage"]["files"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["path"] == "/etc/hostname")
            .collect()
    }

    #[test]
    fn merge_into_pointer_config() {
        let role = br#"{"ignition":{"config":{"merge":[{"source":"https://api-int.c.example.com:22623/config/master"}]},"version":"3.2.0"}}"#;
        let out = merge_hostname(role, "m0.c.example.com").unwrap();
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(
            v["ignition"]["config"]["merge"][0]["source"],
            "https://api-int.c.example.com:22623/config/master"
        );
        assert_eq!(v["ignition"]["version"], "3.2.0");
        let h = hostname_entries(&v);
        assert_eq!(h.len(), 1);
        assert_eq!(h[0]["mode"], 420);
        assert_eq!(h[0]["overwrite"], true);
        assert_eq!(h[0]["contents"]["source"], "data:,m0.c.example.com%0A");
    }

    #[test]
    fn merge_replaces_existing_hostname_and_keeps_other_files() {
        let role = br#"{"ignition":{"version":"3.4.0"},"storage":{"disks":[],"files":[
            {"path":"/etc/hostname","contents":{"source":"data:,old"}},
            {"path":"/etc/motd","contents":{"source":"data:,hi"}}]},"systemd":{"units":[{"name":"a.service"}]}}"#;
        let v: Value =
            serde_json::from_slice(&merge_hostname(role, "w0.c.example.com").unwrap()).unwrap();
        let h = hostname_entries(&v);
        assert_eq!(h.len(), 1);
        assert_eq!(h[0]["contents"]["source"], "data:,w0.c.example.com%0A");
        assert_eq!(v["storage"]["files"].as_array().unwrap().len(), 2);
        assert_eq!(v["storage"]["files"][0]["path"], "/etc/motd");
        assert_eq!(v["storage"]["disks"], json!([]));
        assert_eq!(v["systemd"]["units"][0]["name"], "a.service");
    }

    #[test]
    fn merge_errors() {
        assert!(matches!(
            merge_hostname(b"{not json", "h"),
            Err(MergeError::Json(_))
        ));
        assert!(matches!(
            merge_hostname(b"[]", "h"),
            Err(MergeError::Shape(_))
        ));
        assert!(matches!(
            merge_hostname(br#"{"storage":[]}"#, "h"),
            Err(MergeError::Shape(_))
        ));
        assert!(matches!(
            merge_hostname(br#"{"storage":{"files":{}}}"#, "h"),
            Err(MergeError::Shape(_))
        ));
        // A replace pointer would discard the hostname: refused, clearly.
        let replace =
            br#"{"ignition":{"version":"3.2.0","config":{"replace":{"source":"https://x/c"}}}}"#;
        match merge_hostname(replace, "h") {
            Err(MergeError::Shape(m)) => assert!(m.contains("ignition.config.replace"), "{m}"),
            other => panic!("{other:?}"),
        }
        // A merge pointer (what openshift-install writes) is fine.
        let merge =
            br#"{"ignition":{"version":"3.2.0","config":{"merge":[{"source":"https://x/c"}]}}}"#;
        assert!(merge_hostname(merge, "h").is_ok());
    }
}
