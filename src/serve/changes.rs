//! What a reload changed, one line per change, for the log, `/status` →
//! `reload.changes` and `crc-appliance reload`.
//!
//! Semantic lines first (nodes added, removed or changed; the DNS zones; LB
//! backends per pool; listeners, from the catalogue), then every other leaf
//! of the validated cluster that differs, by its path in the model
//! (`network.upstreamDns: ["10.0.0.1:53"] → ["10.0.0.2:53"]`). The generic
//! walk is what makes the summary complete: a field added to the model
//! tomorrow shows up without code here (tested by mutating every leaf).

use serde_json::Value;

use crate::model::catalogue::Listener;
use crate::model::cluster::Cluster;
use crate::plan::Plan;

/// What differs between two plans, one line per change (nodes, records,
/// LB backends, listeners, settings).
pub fn changes(old: &Plan, new: &Plan) -> Vec<String> {
    let mut out = Vec::new();
    let (o, n) = (&old.cluster, &new.cluster);
    if o.domain != n.domain {
        out.push(format!("cluster domain {} → {}", o.domain, n.domain));
    }
    for node in &n.nodes {
        match o.node(&node.name) {
            None => out.push(format!("node {} added ({})", node.name, describe(node))),
            Some(prev) if prev != node => out.push(format!(
                "node {} changed ({} → {})",
                node.name,
                describe(prev),
                describe(node)
            )),
            Some(_) => {}
        }
    }
    for node in &o.nodes {
        if n.node(&node.name).is_none() {
            out.push(format!("node {} removed", node.name));
        }
    }
    let records = |p: &Plan| p.zones.iter().map(|z| z.records.len()).sum::<usize>();
    if old.zones != new.zones {
        out.push(format!(
            "DNS zones changed ({} → {} records)",
            records(old),
            records(new)
        ));
    }
    for np in &new.pools {
        let op = old.pool(np.name);
        let before: Vec<String> = op
            .map(|p| {
                p.backends
                    .iter()
                    .map(|b| format!("{} {}", b.name, b.addr))
                    .collect()
            })
            .unwrap_or_default();
        let after: Vec<String> = np
            .backends
            .iter()
            .map(|b| format!("{} {}", b.name, b.addr))
            .collect();
        let added: Vec<&String> = after.iter().filter(|b| !before.contains(b)).collect();
        let removed: Vec<&String> = before.iter().filter(|b| !after.contains(b)).collect();
        if !added.is_empty() || !removed.is_empty() {
            let list = |v: &[&String]| v.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ");
            out.push(format!(
                "lb {}: +[{}] -[{}]",
                np.name,
                list(&added),
                list(&removed)
            ));
        }
        if let Some(op) = op
            && op.frontend != np.frontend
        {
            out.push(format!(
                "lb {} frontend {} → {}",
                np.name, op.frontend, np.frontend
            ));
        }
    }
    out.extend(listener_changes(o, n));
    if o.network.interface != n.network.interface {
        out.push(format!(
            "dhcp interface {:?} → {:?}",
            o.network.interface, n.network.interface
        ));
    }
    out.extend(field_changes(o, n));
    out
}

/// `role ip mac`, with the IPv6 address after the IPv4 one when the node
/// has one.
fn describe(n: &crate::model::cluster::NodeCfg) -> String {
    match n.ipv6 {
        Some(v6) => format!("{} {} {v6} {}", n.role, n.ip, n.mac),
        None => format!("{} {} {}", n.role, n.ip, n.mac),
    }
}

/// `<field> <old> → <new>` for every listener (the catalogue's list) whose
/// address changed, appeared or went away.
fn listener_changes(o: &Cluster, n: &Cluster) -> Vec<String> {
    let (before, after) = (o.listeners(), n.listeners());
    let addr_of = |list: &[Listener], l: &Listener| {
        list.iter()
            .find(|x| x.field == l.field && x.proto == l.proto)
            .map(|x| x.addr)
    };
    let mut out = Vec::new();
    for l in &after {
        match addr_of(&before, l) {
            Some(a) if a == l.addr => {}
            Some(a) => out.push(format!("{} listen {} {a} → {}", l.what, l.field, l.addr)),
            None => out.push(format!("{} listen {} {}", l.what, l.field, l.addr)),
        }
    }
    for l in &before {
        if addr_of(&after, l).is_none() {
            out.push(format!("{} listen {} {} removed", l.what, l.field, l.addr));
        }
    }
    out.dedup();
    out
}

/// Model paths that the semantic lines above already report: the nodes
/// (per node) and the listen addresses (per listener, with their file
/// field).
const COVERED: [&str; 11] = [
    "nodes",
    "dns.listen",
    "dhcp.listen",
    "lb.api",
    "lb.machineConfig",
    "lb.ingressHttp",
    "lb.ingressHttps",
    "http.listen",
    "admin.listen",
    "tftp.listen",
    "ntp.listen",
];

/// `path: old → new` for every leaf of the validated cluster that differs,
/// except the [`COVERED`] ones.
pub fn field_changes(o: &Cluster, n: &Cluster) -> Vec<String> {
    let (Ok(a), Ok(b)) = (serde_json::to_value(o), serde_json::to_value(n)) else {
        return vec!["configuration changed (could not compare it field by field)".into()];
    };
    value_changes(&a, &b)
}

/// [`field_changes`] over two serialized clusters.
fn value_changes(a: &Value, b: &Value) -> Vec<String> {
    let mut out = Vec::new();
    diff("", a, b, &mut out);
    out
}

/// `snake_case` model keys as the cluster file spells them (camelCase).
fn camel(key: &str) -> String {
    let mut out = String::new();
    let mut up = false;
    for c in key.chars() {
        if c == '_' {
            up = true;
        } else if up {
            out.extend(c.to_uppercase());
            up = false;
        } else {
            out.push(c);
        }
    }
    out
}

fn show(v: Option<&Value>) -> String {
    let s = v.map_or_else(|| "(none)".to_string(), Value::to_string);
    if s.chars().count() > 120 {
        format!("{}…", s.chars().take(120).collect::<String>())
    } else {
        s
    }
}

fn diff(path: &str, a: &Value, b: &Value, out: &mut Vec<String>) {
    if a == b || COVERED.contains(&path) {
        return;
    }
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                let p = if path.is_empty() {
                    camel(k)
                } else {
                    format!("{path}.{}", camel(k))
                };
                match (x.get(k), y.get(k)) {
                    (Some(v), Some(w)) => diff(&p, v, w, out),
                    (v, w) if !COVERED.contains(&p.as_str()) => {
                        out.push(format!("{p}: {} → {}", show(v), show(w)))
                    }
                    _ => {}
                }
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (v, w)) in x.iter().zip(y).enumerate() {
                diff(&format!("{path}[{i}]"), v, w, out);
            }
        }
        _ => out.push(format!("{path}: {} → {}", show(Some(a)), show(Some(b)))),
    }
}

#[cfg(test)]
mod tests;
