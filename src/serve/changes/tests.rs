use std::path::Path;

use super::*;

/// A cluster with every optional section, so the walk meets every field.
const FULL: &str = r#"name: t
baseDomain: crc.testing
network: { cidr: 10.9.0.0/24, gateway: 10.9.0.1, applianceIP: 10.9.0.2, apiVIP: 10.9.0.2, ingressVIP: 10.9.0.2, upstreamDNS: ["10.9.0.1"] }
nodes:
  - { name: bootstrap, role: bootstrap, mac: "52:54:00:00:00:05", ip: 10.9.0.5 }
  - { name: master-0, role: master, mac: "52:54:00:00:00:0a", ip: 10.9.0.10 }
  - { name: worker-0, role: worker, mac: "52:54:00:00:00:14", ip: 10.9.0.20 }
dns: { listen: ["10.9.0.2:53"] }
dhcp: { listen: "0.0.0.0:67", leaseFile: "/tmp/l.json", pool: { start: 10.9.0.100, end: 10.9.0.120 } }
http: { listen: "10.9.0.2:8080", imagesDir: "/tmp/i", ignitionDir: "/tmp/g" }
admin: { listen: "127.0.0.1:9180" }
pxe: { tftpListen: "10.9.0.2:69", tftpRoot: "/tmp/t" }
"#;

fn plan(yaml: &str) -> Plan {
    crate::config::from_str(yaml, Path::new("/"), Path::new("/t.yaml")).unwrap()
}

/// Every leaf path of `v` with the value changed.
fn leaves(path: &str, v: &Value, out: &mut Vec<(String, Value)>) {
    match v {
        Value::Object(m) => {
            for (k, w) in m {
                let p = if path.is_empty() {
                    camel(k)
                } else {
                    format!("{path}.{}", camel(k))
                };
                leaves(&p, w, out);
            }
        }
        Value::Array(a) if !a.is_empty() => {
            for (i, w) in a.iter().enumerate() {
                leaves(&format!("{path}[{i}]"), w, out);
            }
        }
        _ => out.push((path.to_string(), mutated(v))),
    }
}

fn mutated(v: &Value) -> Value {
    match v {
        Value::Bool(b) => Value::Bool(!b),
        Value::Number(n) => Value::from(n.as_u64().unwrap_or(0) + 1),
        Value::String(s) => Value::String(format!("{s}x")),
        Value::Null => Value::from(1),
        Value::Array(_) => Value::from(vec![1]),
        Value::Object(_) => Value::from(2),
    }
}

fn set(v: &mut Value, path: &str, to: Value) {
    let mut cur = v;
    for part in path.split('.') {
        let (key, idx) = match part.split_once('[') {
            Some((k, i)) => (k, i.trim_end_matches(']').parse::<usize>().ok()),
            None => (part, None),
        };
        let obj = cur.as_object_mut().unwrap();
        let real = obj.keys().find(|k| camel(k) == key).cloned().unwrap();
        cur = obj.get_mut(&real).unwrap();
        if let Some(i) = idx {
            cur = &mut cur.as_array_mut().unwrap()[i];
        }
    }
    *cur = to;
}

#[test]
fn every_changed_field_of_the_cluster_is_listed() {
    let p = plan(FULL);
    let base = serde_json::to_value(&p.cluster).unwrap();
    let mut all = Vec::new();
    leaves("", &base, &mut all);
    assert!(all.len() > 60, "the walk found only {} leaves", all.len());
    let mut checked = 0;
    for (path, to) in all {
        if COVERED.iter().any(|c| {
            path == *c || path.starts_with(&format!("{c}.")) || path.starts_with(&format!("{c}["))
        }) {
            continue;
        }
        let mut changed = base.clone();
        set(&mut changed, &path, to);
        let lines = value_changes(&base, &changed);
        assert!(
            lines.iter().any(|l| l.starts_with(&format!("{path}: "))),
            "{path} changed but the summary says {lines:?}"
        );
        checked += 1;
    }
    assert!(checked > 40, "only {checked} leaves checked");
}

#[test]
fn the_reported_case_upstream_dns_and_listeners_and_nodes() {
    let old = plan(FULL);
    let new = plan(&FULL.replace("upstreamDNS: [\"10.9.0.1\"]", "upstreamDNS: [\"10.9.0.9\"]"));
    let c = changes(&old, &new);
    assert!(
        c.iter()
            .any(|l| l.starts_with("network.upstreamDns") && l.contains("10.9.0.9")),
        "{c:?}"
    );
    let new = plan(&FULL.replace("10.9.0.2:8080", "10.9.0.2:8081"));
    let c = changes(&old, &new);
    assert_eq!(
        c,
        ["http listen http.listen 10.9.0.2:8080 → 10.9.0.2:8081"],
        "one line, from the catalogue"
    );
    let new = plan(&FULL.replace("ip: 10.9.0.20", "ip: 10.9.0.21"));
    let c = changes(&old, &new);
    assert!(
        c.iter().any(|l| l.starts_with("node worker-0 changed")),
        "{c:?}"
    );
    assert!(changes(&old, &plan(FULL)).is_empty());
}
