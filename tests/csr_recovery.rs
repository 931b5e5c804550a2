//! Restart recovery (issue #37 item 5) end to end: an existing Node that
//! is NotReady gets exactly one client CSR approved after the appliance
//! saw its MAC renew its reserved lease (busybox udhcpc in a network
//! namespace, the appliance's DHCP server in another), and none without
//! the renewal. The appliance runs in-process inside its namespace
//! (`InProc::in_netns`), where the stand-in API server runs too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
#[path = "kubesim/harness.rs"]
mod kubesim;

use std::path::Path;
use std::time::Duration;

use common::inproc::InProc;
use common::udhcpc::udhcpc_once;
use common::{Netns, unique_name};
use kubesim::Sim;

const APPLIANCE: &str = "10.233.0.254";
const MASTER_MAC: &str = "52:54:00:e9:00:0a";
const CLIENT: &str = "kubernetes.io/kube-apiserver-client-kubelet";

fn request(dir: &Path, name: &str) -> Vec<u8> {
    kubesim::node_request(dir, "master-0", name, None)
}

fn cluster(dir: &Path, ifs: &str, kubeconfig: &Path) -> std::path::PathBuf {
    let d = dir.display();
    let text = format!(
        r#"name: rc
baseDomain: crc.testing
network:
  cidr: 10.233.0.0/24
  gateway: {APPLIANCE}
  applianceIP: {APPLIANCE}
  interface: {ifs}
nodes:
  - {{ name: bootstrap, role: bootstrap, mac: "52:54:00:e9:00:05", ip: 10.233.0.5 }}
  - {{ name: master-0, role: master, mac: "{MASTER_MAC}", ip: 10.233.0.10 }}
dns:
  enabled: false
dhcp:
  listen: 0.0.0.0:67
  leaseTime: 10m
  leaseFile: "{d}/leases.json"
loadBalancer:
  enabled: false
http:
  enabled: false
admin:
  enabled: false
csr:
  kubeconfigFile: {k}
  recovery: true
"#,
        k = kubeconfig.display()
    );
    let f = dir.join("cluster.yaml");
    std::fs::write(&f, text).unwrap();
    f
}

#[test]
fn a_not_ready_node_gets_one_client_csr_after_its_lease_renewal() {
    require_netns!("rc");
    require!(
        kubesim::tools_present() && common::have("udhcpc"),
        "python3, openssl, kubectl or udhcpc is missing"
    );
    let base = unique_name("rc");
    let (ifs, ifc) = (format!("{base}s"), format!("{base}c"));
    let srv = Netns::new(format!("{base}srv"));
    let nodes = Netns::new(format!("{base}nod"));
    common::veth(&ifs, &srv, &ifc, &nodes);
    srv.ip(&["addr", "add", &format!("{APPLIANCE}/24"), "dev", &ifs]);
    srv.ip(&["link", "set", &ifs, "up"]);
    srv.ip(&["link", "set", "lo", "up"]);
    nodes.ip(&["link", "set", "dev", &ifc, "address", MASTER_MAC]);
    nodes.ip(&["link", "set", &ifc, "up"]);

    let sim = Sim::start_in(srv.name());
    let dir = tempfile::tempdir().unwrap();
    let app = InProc::in_netns(srv.name()).start_path(&cluster(dir.path(), &ifs, &sim.kubeconfig));
    // The lab was powered off: master-0's Node exists and is NotReady.
    sim.create(
        "admin",
        "node.json",
        r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"master-0"},"status":{"conditions":[{"type":"Ready","status":"Unknown","reason":"NodeStatusUnknown","message":"Kubelet stopped posting node status."}]}}"#,
    );
    // Its first lease after power-on (no renewal yet): nothing approved.
    assert!(
        udhcpc_once(&nodes, &ifc, dir.path(), "5").is_some(),
        "a lease"
    );
    let usages = ["digital signature", "client auth"];
    sim.create(
        "boot",
        "a.yaml",
        &Sim::csr_yaml("recover-a", CLIENT, &usages, &request(sim.dir.path(), "a")),
    );
    app.wait_log("recover-a left pending", Duration::from_secs(5));
    assert!(
        app.log().contains("no lease renewal or boot"),
        "{}",
        app.log()
    );
    assert!(!sim.approved("recover-a"));
    // The renewal: exactly one CSR approved.
    std::thread::sleep(Duration::from_millis(1100));
    assert!(
        udhcpc_once(&nodes, &ifc, dir.path(), "5").is_some(),
        "a renewal"
    );
    common::wait_until("recover-a approved", Duration::from_secs(8), || {
        sim.approved("recover-a")
    });
    sim.create(
        "boot",
        "b.yaml",
        &Sim::csr_yaml("recover-b", CLIENT, &usages, &request(sim.dir.path(), "b")),
    );
    app.wait_log("recover-b left pending", Duration::from_secs(5));
    assert!(
        app.log().contains("already approved in csr.window"),
        "{}",
        app.log()
    );
    assert!(!sim.approved("recover-b"));
}
