//! The unit tests' small valid cluster (test builds only): cluster `t` in
//! `crc.testing` on 10.9.0.0/24 (the appliance at 10.9.0.1), with the
//! nodes and sections a test names, parsed and validated by the same
//! [`super::from_str`] `serve` uses. One fixture, so the tests of the LB,
//! the registry, HTTP and the timeline that need a plan or a
//! `timeline::Recorder` do not each carry the header and the parse.
//!
//! Invariant: a fixture that does not validate panics with the validator's
//! message (a test's own mistake, never a skipped check).

use std::path::Path;

use crate::plan::Plan;

/// `bootstrap` at 10.9.0.5.
pub(crate) const BOOTSTRAP: &str =
    r#"  - { name: bootstrap, role: bootstrap, mac: "52:54:00:00:00:05", ip: 10.9.0.5 }"#;
/// `master-0` at 10.9.0.10.
pub(crate) const MASTER_0: &str =
    r#"  - { name: master-0, role: master, mac: "52:54:00:00:00:0A", ip: 10.9.0.10 }"#;

/// A worker named `name` at 10.9.0.20.
pub(crate) fn worker(name: &str) -> String {
    format!(r#"  - {{ name: {name}, role: worker, mac: "52:54:00:00:00:14", ip: 10.9.0.20 }}"#)
}

/// The plan of cluster `t` with `nodes` (lines of the node list) and then
/// `sections` (more top-level YAML), relative paths resolved against `base`.
pub(crate) fn plan_in(base: &Path, nodes: &[&str], sections: &str) -> Plan {
    let yaml = format!(
        "name: t\nbaseDomain: crc.testing\n\
         network: {{ cidr: 10.9.0.0/24, gateway: 10.9.0.1, applianceIP: 10.9.0.1 }}\n\
         nodes:\n{}\n{sections}",
        nodes.join("\n")
    );
    super::from_str(&yaml, base, &base.join("t.yaml"))
        .unwrap_or_else(|e| panic!("test cluster: {e}\n{yaml}"))
}

/// [`plan_in`] with paths resolved against `/`.
pub(crate) fn plan(nodes: &[&str], sections: &str) -> Plan {
    plan_in(Path::new("/"), nodes, sections)
}
