//! The CSR approver end to end in network namespaces (issue #37, "Done
//! when" line 3): the appliance, the stand-in API server (tests/kubesim,
//! api-int on its own address) and each node in a namespace of its own,
//! on one bridge (a fifth namespace), nothing on loopback (the appliance
//! runs in-process inside its namespace, `InProc::in_netns`):
//!
//! - master-0 fetches its ignition from its own address (10.61.0.10); the
//!   client CSR its kubelet then makes (`openssl req`, created with the
//!   node-bootstrapper's token from master-0's namespace) is approved
//!   within 5 s of its creation; its serving CSR only once its Node exists;
//! - the same client CSR for master-1, which fetched nothing, stays
//!   pending; so does master-2's, made by a host outside the inventory
//!   that asked for a master's ignition (refused: 403) and then sent the
//!   request with the bootstrap token;
//! - the whole flow also runs with only the `render csr-rbac` identity,
//!   which is never refused.
//!
//! Needs root (namespaces), python3 with the stand-in's venv, openssl,
//! kubectl and curl; skipped through the common helper otherwise.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
#[path = "kubesim/harness.rs"]
mod kubesim;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::inproc::InProc;
use common::{Netns, bridge_port, unique_name};
use kubesim::Sim;

const NET: &str = "10.61.0";
const CLIENT: &str = "kubernetes.io/kube-apiserver-client-kubelet";
const SERVING: &str = "kubernetes.io/kubelet-serving";
const CLIENT_USAGES: [&str; 2] = ["digital signature", "client auth"];
/// The issue's bound from a client CSR's creation to its approval.
const APPROVED_WITHIN: Duration = Duration::from_secs(5);

/// The namespaces: a switch, the appliance, the API server, two nodes and
/// a stray host. Dropped (deleted) after everything that runs in them.
struct Lab {
    sw: Netns,
    app: Netns,
    api: Netns,
    master0: Netns,
    master1: Netns,
    stray: Netns,
}

impl Lab {
    fn new() -> Lab {
        let lab = Lab {
            sw: Netns::new(unique_name("crcqs")),
            app: Netns::new(unique_name("crcqa")),
            api: Netns::new(unique_name("crcqk")),
            master0: Netns::new(unique_name("crcqm")),
            master1: Netns::new(unique_name("crcqn")),
            stray: Netns::new(unique_name("crcqx")),
        };
        lab.sw.ip(&["link", "add", "br0", "type", "bridge"]);
        lab.sw.ip(&["link", "set", "br0", "up"]);
        for (ns, port, host) in [
            (&lab.app, "p1", 1),
            (&lab.api, "p2", 2),
            (&lab.master0, "p10", 10),
            (&lab.master1, "p11", 11),
            (&lab.stray, "p99", 99),
        ] {
            bridge_port(&lab.sw, "br0", port, ns, "e0");
            ns.ip(&["addr", "add", &format!("{NET}.{host}/24"), "dev", "e0"]);
            ns.ip(&["link", "set", "e0", "up"]);
        }
        lab
    }
}

/// A kubelet's request for `node` by `openssl req` (EC P-256), with `sans`.
fn request(dir: &Path, node: &str, sans: Option<&str>) -> Vec<u8> {
    kubesim::node_request(dir, node, &format!("{node}-{}", sans.is_some()), sans)
}

/// The appliance in its namespace: HTTP (ignition) on its own address,
/// the approver on `kubeconfig`; DNS, DHCP, the LB and admin off.
fn appliance(lab: &Lab, kubeconfig: &Path) -> (InProc, tempfile::TempDir) {
    let d = tempfile::tempdir().unwrap();
    let (images, ignition) = (d.path().join("images"), d.path().join("ignition"));
    std::fs::create_dir_all(&images).unwrap();
    std::fs::create_dir_all(&ignition).unwrap();
    for role in ["bootstrap", "master", "worker"] {
        std::fs::write(
            ignition.join(format!("{role}.ign")),
            r#"{"ignition":{"version":"3.2.0"}}"#,
        )
        .unwrap();
    }
    let yaml = format!(
        r#"name: test
baseDomain: crc.testing
network: {{ cidr: {NET}.0/24, gateway: {NET}.1, applianceIP: {NET}.1, interface: e0 }}
nodes:
  - {{ name: bootstrap, role: bootstrap, mac: "52:54:00:3d:00:05", ip: {NET}.5 }}
  - {{ name: master-0, role: master, mac: "52:54:00:3d:00:0a", ip: {NET}.10 }}
  - {{ name: master-1, role: master, mac: "52:54:00:3d:00:0b", ip: {NET}.11 }}
  - {{ name: master-2, role: master, mac: "52:54:00:3d:00:0c", ip: {NET}.12 }}
  - {{ name: worker-0, role: worker, mac: "52:54:00:3d:00:14", ip: {NET}.20 }}
dns: {{ enabled: false }}
dhcp: {{ enabled: false }}
loadBalancer: {{ enabled: false }}
admin: {{ enabled: false }}
http:
  listen: {NET}.1:0
  imagesDir: {}
  ignitionDir: {}
csr:
  kubeconfigFile: {}
"#,
        images.display(),
        ignition.display(),
        kubeconfig.display()
    );
    let app = InProc::in_netns(lab.app.name()).start_yaml(&yaml);
    (app, d)
}

/// From namespace `ns`, fetch `role`'s ignition from the appliance; the
/// HTTP status.
fn fetch_ignition(ns: &Netns, app: &InProc, role: &str) -> String {
    let url = format!("http://{}/ignition/{role}.ign", app.addr("http"));
    let out = ns
        .cmd(&["curl", "-s", "--max-time", "10", "-o", "/dev/null"])
        .args(["-w", "%{http_code}", &url])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Client CSR `name` for `node`, created by a kubelet in namespace `ns`
/// with the node-bootstrapper's token; the instant it was created.
fn client_csr(sim: &Sim, ns: &Netns, name: &str, node: &str) -> Instant {
    let req = request(sim.dir.path(), node, None);
    let yaml = Sim::csr_yaml(name, CLIENT, &CLIENT_USAGES, &req);
    sim.create_from(ns.name(), "boot", &format!("{name}.yaml"), &yaml);
    Instant::now()
}

fn approved_within(sim: &Sim, name: &str, since: Instant, bound: Duration) {
    let left = bound.saturating_sub(since.elapsed());
    common::wait_until(&format!("{name} approved"), left, || sim.approved(name));
}

/// The flow with the approver's kubeconfig from `identity`; `after` checks
/// the stand-in once the flow passed.
fn flow(identity: impl FnOnce(&Sim) -> PathBuf, after: impl FnOnce(&Sim)) {
    require_netns!("crcq");
    require!(
        kubesim::tools_present() && common::have("curl"),
        "python3 (with the stand-in's venv), openssl, kubectl or curl is missing"
    );
    let lab = Lab::new();
    let sim = Sim::start_in_at(lab.api.name(), &format!("{NET}.2"));
    let kubeconfig = identity(&sim);
    let (app, _d) = appliance(&lab, &kubeconfig);
    assert_eq!(fetch_ignition(&lab.master0, &app, "master"), "200");
    // A host outside the inventory asks for a master's ignition: refused,
    // and in any case no node's own address, so nothing for master-2.
    assert_eq!(fetch_ignition(&lab.stray, &app, "master"), "403");
    let m0 = client_csr(&sim, &lab.master0, "m0-client", "master-0");
    client_csr(&sim, &lab.master1, "m1-client", "master-1");
    client_csr(&sim, &lab.stray, "m2-client", "master-2");
    approved_within(&sim, "m0-client", m0, APPROVED_WITHIN);
    let cond = &sim.csr("m0-client")["status"]["conditions"][0];
    assert_eq!(cond["type"], "Approved", "{cond}");
    assert_eq!(cond["status"], "True", "{cond}");
    // master-0's kubelet, now with its client certificate, asks for a
    // serving one: approved only once its Node exists.
    sim.add_cert_context("master-0", "/O=system:nodes/CN=system:node:master-0");
    let sans = format!("DNS:master-0,DNS:master-0.test.crc.testing,IP:{NET}.10");
    let serving = request(sim.dir.path(), "master-0", Some(&sans));
    let yaml = Sim::csr_yaml(
        "m0-serving",
        SERVING,
        &["digital signature", "server auth"],
        &serving,
    );
    sim.create_from(lab.master0.name(), "master-0", "m0s.yaml", &yaml);
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        !sim.approved("m0-serving"),
        "serving approved before its Node exists"
    );
    let node = format!(
        r#"{{"apiVersion":"v1","kind":"Node","metadata":{{"name":"master-0"}},"status":{{"addresses":[{{"type":"InternalIP","address":"{NET}.10"}}],"conditions":[{{"type":"Ready","status":"True","reason":"KubeletReady","message":"ok"}}]}}}}"#
    );
    sim.create_from(lab.master0.name(), "master-0", "node.json", &node);
    approved_within(&sim, "m0-serving", Instant::now(), APPROVED_WITHIN);
    // Nothing was served to master-1's or master-2's own address.
    app.wait_log("m1-client left pending", Duration::from_secs(5));
    app.wait_log("m2-client left pending", Duration::from_secs(5));
    assert!(!sim.approved("m1-client"), "master-1 fetched no ignition");
    assert!(
        !sim.approved("m2-client"),
        "master-2's ignition went to a stray address"
    );
    after(&sim);
}

#[test]
fn a_node_in_its_own_namespace_gets_its_csrs_and_only_it() {
    flow(|sim| sim.kubeconfig.clone(), |_| ());
}

#[test]
fn the_render_csr_rbac_identity_runs_the_whole_flow() {
    flow(
        |sim| {
            let token = sim.apply_render_csr_rbac();
            sim.token_kubeconfig("approver.kubeconfig", &token)
        },
        |sim| {
            let sa = "system:serviceaccount:openshift-machine-api:crc-appliance-csr-approver";
            let log = sim.log();
            let calls: Vec<_> = log.iter().filter(|e| e["user"] == sa).collect();
            assert!(calls.iter().any(|e| e["method"] == "PUT"), "{calls:?}");
            // Every answer is a 200 but the day-2 secret's 404 (there is no
            // such secret in this cluster: an answer the identity may get).
            let secret =
                "/api/v1/namespaces/openshift-machine-api/secrets/worker-user-data-managed";
            let refused: Vec<_> = calls
                .iter()
                .filter(|e| e["status"] != 200 && !(e["status"] == 404 && e["path"] == secret))
                .collect();
            assert!(refused.is_empty(), "the approver was refused: {refused:?}");
        },
    );
}
