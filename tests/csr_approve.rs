//! The CSR approver end to end (issue #37): the appliance serves a node its
//! ignition, the stand-in API server (tests/kubesim) holds the kubelet's
//! CSRs made by `openssl req`, and the approver approves exactly the ones
//! the evidence proves, through `/approval` as kubectl does. The node is a
//! loopback address of the cluster network (127.0.20.0/24): curl fetches
//! its ignition from that address (`--interface`), as the node would.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
#[path = "kubesim/harness.rs"]
mod kubesim;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::inproc::InProc;
use crc_appliance::serve::status::StatusDoc;
use kubesim::Sim;

const CLIENT: &str = "kubernetes.io/kube-apiserver-client-kubelet";
const SERVING: &str = "kubernetes.io/kubelet-serving";

/// A kubelet's request for `node` by `openssl req` (EC P-256), with `sans`.
fn request(dir: &Path, node: &str, sans: Option<&str>) -> Vec<u8> {
    kubesim::node_request(dir, node, &format!("{node}-{}", sans.is_some()), sans)
}

/// An appliance serving ignition over HTTP, approving with `kubeconfig`.
fn appliance(kubeconfig: &Path) -> (InProc, tempfile::TempDir) {
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
    let sections = format!(
        "http:\n  listen: 127.0.0.1:0\n  imagesDir: {}\n  ignitionDir: {}\nadmin:\n  listen: 127.0.0.1:{}\ncsr:\n  kubeconfigFile: {}\n",
        images.display(),
        ignition.display(),
        common::free_port(),
        kubeconfig.display()
    );
    (InProc::start_yaml(&common::only(&sections)), d)
}

/// `node_ip` fetches its role's ignition from its own address.
fn fetch_ignition(app: &InProc, node_ip: &str, role: &str) {
    let url = format!("http://{}/ignition/{role}.ign", app.addr("http"));
    let out = Command::new("curl")
        .args(["-sf", "-o", "/dev/null", "--interface", node_ip, &url])
        .status()
        .unwrap();
    assert!(out.success(), "ignition fetch from {node_ip}");
}

fn wait_approved(sim: &Sim, name: &str, bound: Duration) {
    common::wait_until(&format!("{name} approved"), bound, || sim.approved(name));
}

#[test]
fn a_node_that_fetched_its_ignition_gets_its_client_then_serving_csr() {
    require!(
        kubesim::tools_present() && common::have("curl"),
        "python3, openssl, kubectl or curl is missing"
    );
    let sim = Sim::start();
    let (app, _d) = appliance(&sim.kubeconfig);
    fetch_ignition(&app, "127.0.20.10", "master");
    let dir = sim.dir.path();
    let usages = ["digital signature", "client auth"];
    sim.create(
        "boot",
        "m0.yaml",
        &Sim::csr_yaml(
            "m0-client",
            CLIENT,
            &usages,
            &request(dir, "master-0", None),
        ),
    );
    // master-1 fetched nothing: the same request stays pending.
    sim.create(
        "boot",
        "m1.yaml",
        &Sim::csr_yaml(
            "m1-client",
            CLIENT,
            &usages,
            &request(dir, "master-1", None),
        ),
    );
    wait_approved(&sim, "m0-client", Duration::from_secs(5));
    let cond = &sim.csr("m0-client")["status"]["conditions"][0];
    assert_eq!(cond["status"], "True");
    assert_eq!(cond["reason"], "CrcApplianceApprove");
    assert!(
        cond["message"].as_str().unwrap().contains("ignition"),
        "{cond}"
    );
    // The kubelet, now with its client certificate, asks for serving.
    sim.add_cert_context("master-0", "/O=system:nodes/CN=system:node:master-0");
    let sans = "DNS:master-0,DNS:master-0.test.crc.testing,IP:127.0.20.10";
    let serving = request(dir, "master-0", Some(sans));
    sim.create(
        "master-0",
        "m0s.yaml",
        &Sim::csr_yaml(
            "m0-serving",
            SERVING,
            &["digital signature", "server auth"],
            &serving,
        ),
    );
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        !sim.approved("m0-serving"),
        "serving approved before its Node exists"
    );
    sim.create(
        "master-0",
        "node.json",
        r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"master-0"},"status":{"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady","message":"ok"}]}}"#,
    );
    wait_approved(&sim, "m0-serving", Duration::from_secs(5));
    assert!(!sim.approved("m1-client"), "master-1 fetched no ignition");
    app.wait_log("m1-client left pending", Duration::from_secs(5));
    // The timeline: ignition → client CSR → serving CSR → Node Ready, in
    // that order; the approver's status lists both approvals and the refusal.
    let mut status = app.status();
    let m0_of = |doc: &StatusDoc| {
        let tl = doc.timeline.as_ref().expect("a timeline");
        tl.nodes.iter().find(|n| n.node == "master-0").cloned()
    };
    common::wait_until("the timeline's Node Ready", Duration::from_secs(5), || {
        status = app.status();
        m0_of(&status).is_some_and(|n| n.node_ready.is_some())
    });
    let m0 = m0_of(&status).expect("master-0's row");
    let at = |step: Option<u64>, k: &str| step.unwrap_or_else(|| panic!("no {k}: {m0:?}"));
    let (ignition, client, serving, ready) = (
        at(m0.ignition, "ignition"),
        at(m0.csr_client, "csrClient"),
        at(m0.csr_serving, "csrServing"),
        at(m0.node_ready, "nodeReady"),
    );
    assert!(ignition <= client && client <= serving, "{m0:?}");
    assert!(serving <= ready + 1, "{m0:?}");
    let csr = status.csr.expect("a csr section");
    assert!(csr.connected, "{csr:?}");
    let approved: Vec<_> = csr.approved.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(approved, ["m0-client", "m0-serving"], "{csr:?}");
    // `wait-for node-ready` reports the join and returns; for a node that
    // never joined it names what is missing.
    let file = app.cluster_file.to_str().unwrap();
    let (code, out, err) = common::run(
        common::BIN,
        &[
            "wait-for",
            "node-ready",
            "master-0",
            "--timeout",
            "10s",
            "--cluster",
            file,
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    for line in [
        "master-0: client CSR approved",
        "master-0: serving CSR approved",
        "master-0: Node Ready",
        "node-ready: reached",
    ] {
        assert!(out.contains(line), "{line:?} not in {out}");
    }
    let (code, out, err) = common::run(
        common::BIN,
        &[
            "wait-for",
            "node-ready",
            "master-1",
            "--timeout",
            "2s",
            "--cluster",
            file,
        ],
    );
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("master-1: no DHCP lease yet"), "{out}{err}");
    // Seconds of passes later, the refusal was still logged only once.
    assert_eq!(
        app.log().matches("m1-client left pending").count(),
        1,
        "{}",
        app.log()
    );
    assert!(
        csr.refused
            .iter()
            .any(|r| r.name == "m1-client" && r.what.contains("has not fetched its ignition")),
        "{csr:?}"
    );
}

#[test]
fn the_render_csr_rbac_identity_is_enough_and_never_refused() {
    require!(
        kubesim::tools_present() && common::have("curl"),
        "python3, openssl, kubectl or curl is missing"
    );
    let sim = Sim::start();
    let token = sim.apply_render_csr_rbac();
    let kubeconfig = sim.token_kubeconfig("approver.kubeconfig", &token);
    let (app, _d) = appliance(&kubeconfig);
    fetch_ignition(&app, "127.0.20.20", "worker");
    let req = request(sim.dir.path(), "worker-0", None);
    sim.create(
        "boot",
        "w0.yaml",
        &Sim::csr_yaml(
            "w0-client",
            CLIENT,
            &["digital signature", "client auth"],
            &req,
        ),
    );
    wait_approved(&sim, "w0-client", Duration::from_secs(5));
    let sa = "system:serviceaccount:openshift-machine-api:crc-appliance-csr-approver";
    let log = sim.log();
    let calls: Vec<_> = log.iter().filter(|e| e["user"] == sa).collect();
    assert!(!calls.is_empty());
    // (The day-2 secret does not exist here: its read is a 404, not a refusal.)
    let refused: Vec<_> = calls
        .iter()
        .filter(|e| e["status"] == 401 || e["status"] == 403)
        .collect();
    assert!(refused.is_empty(), "the approver was refused: {refused:?}");
}

#[test]
fn an_identity_without_the_rights_approves_nothing_and_names_the_missing_one() {
    require!(
        kubesim::tools_present() && common::have("curl"),
        "python3, openssl, kubectl or curl is missing"
    );
    let sim = Sim::start();
    // The node-bootstrapper's token: it may list CSRs, not Nodes.
    let kubeconfig = sim.token_kubeconfig("boot.kubeconfig", Sim::BOOT_TOKEN);
    let (app, _d) = appliance(&kubeconfig);
    fetch_ignition(&app, "127.0.20.10", "master");
    let req = request(sim.dir.path(), "master-0", None);
    sim.create(
        "boot",
        "m0.yaml",
        &Sim::csr_yaml(
            "m0-client",
            CLIENT,
            &["digital signature", "client auth"],
            &req,
        ),
    );
    app.wait_log("may not list nodes", Duration::from_secs(5));
    std::thread::sleep(Duration::from_secs(2));
    assert!(!sim.approved("m0-client"));
}

#[test]
fn the_approver_relists_after_its_watch_is_dropped() {
    require!(
        kubesim::tools_present() && common::have("curl"),
        "python3, openssl, kubectl or curl is missing"
    );
    let sim = Sim::start();
    let (app, _d) = appliance(&sim.kubeconfig);
    fetch_ignition(&app, "127.0.20.10", "master");
    fetch_ignition(&app, "127.0.20.20", "worker");
    let usages = ["digital signature", "client auth"];
    let dir = sim.dir.path();
    sim.create(
        "boot",
        "m0.yaml",
        &Sim::csr_yaml(
            "m0-client",
            CLIENT,
            &usages,
            &request(dir, "master-0", None),
        ),
    );
    wait_approved(&sim, "m0-client", Duration::from_secs(5));
    // The server ends every watch (an API server restart or a load
    // balancer cutting long requests); the next CSR is still approved.
    let drop = format!("https://127.0.0.1:{}/_sim/drop-watches", sim.port);
    let ca = dir.join("ca.crt");
    let ok = Command::new("curl")
        .args(["-sf", "-X", "POST", "--cacert", ca.to_str().unwrap(), &drop])
        .status()
        .unwrap();
    assert!(ok.success());
    sim.create(
        "boot",
        "w0.yaml",
        &Sim::csr_yaml(
            "w0-client",
            CLIENT,
            &usages,
            &request(dir, "worker-0", None),
        ),
    );
    wait_approved(&sim, "w0-client", Duration::from_secs(5));
    let watches = sim
        .log()
        .iter()
        .filter(|e| {
            e["user"] == "system:admin"
                && e["path"].as_str().is_some_and(|p| p.contains("watch=true"))
        })
        .count();
    assert!(
        watches >= 2,
        "the approver did not watch again ({watches} watches)"
    );
    // Each CSR approved exactly once, and what `/approval` answered was
    // checked against the CertificateSigningRequest schema.
    let log = sim.log();
    let puts: Vec<_> = log.iter().filter(|e| e["method"] == "PUT").collect();
    assert_eq!(puts.len(), 2, "{log:?}");
    assert!(
        puts.iter()
            .all(|e| e["validated"] == true && e["status"] == 200),
        "{puts:?}"
    );
}
