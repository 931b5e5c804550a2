//! The zero-touch day-2 join (issue #37 item 6) end to end, with the
//! stand-in API server (tests/kubesim) holding the cluster's Secret
//! `openshift-machine-api/worker-user-data-managed`:
//!
//! - a cluster running without `worker-2`; the file gains it and
//!   `crc-appliance reload` applies it; `crc-appliance node boot worker-2`
//!   boots it on the libvirt test driver (`test://` with a private node
//!   file, `startOnServe`) or through its BMC (bmcsim, the recorded Dell
//!   tree: virtual media, boot once, power on);
//! - then the test acts as the node, from its own loopback address
//!   (127.0.20.22): its ignition is the secret's `userData` with the
//!   hostname merge every worker gets (`/ignition/worker-2.ign`), and the
//!   `userData` byte for byte for `/ignition/worker.ign`; its kubelet's
//!   client CSR (`openssl req`) is approved, its Node created, its serving
//!   CSR approved; the timeline reaches `nodeReady` and `wait-for
//!   node-ready worker-2` exits 0;
//! - the fallback: without the secret `worker.ign` is served, with the
//!   reason in the log and in `csr.workerIgnition`, loudly when the file is
//!   older than 24 h; once the secret exists, the next fetch after the
//!   copy's 10 s re-reads it;
//! - the duplicate alert: two pending client CSRs for one node are both
//!   left alone and shown as a timeline hint, in `csr.alerts` and on the
//!   status page (headless Chromium), with the CSRs left pending listed by
//!   name, signer and reason; the hint goes once one of them is gone.
//!
//! Every appliance here runs in the test process (`common::inproc`; the
//! libvirt helper from the target dir, its log in the appliance's): the
//! CLI (`reload`, `node boot`, `wait-for`) reaches it through its admin
//! API on a known port, as it reaches a spawned one; status is asserted
//! through the typed document, `/metrics` and the page through HTTP.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "bmcsim/harness.rs"]
mod bmcsim;
mod common;
#[path = "kubesim/harness.rs"]
mod kubesim;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use base64::Engine as _;
use common::inproc::InProc;
use common::{BIN, free_port, run};
use crc_appliance::serve::status::StatusDoc;
use crc_appliance::timeline::status::{HintKind, NodeTimeline};
use kubesim::Sim;
use serde_json::{Value, json};

const CLIENT: &str = "kubernetes.io/kube-apiserver-client-kubelet";
const SERVING: &str = "kubernetes.io/kubelet-serving";
const NODE: &str = "worker-2";
const NODE_IP: &str = "127.0.20.22";

/// The pointer config the Machine API keeps in the secret (a CA bundle
/// that is not the one in the test's `worker.ign`).
const USER_DATA: &str = r#"{"ignition":{"config":{"merge":[{"source":"https://api-int.test.crc.testing:22623/config/worker"}]},"security":{"tls":{"certificateAuthorities":[{"source":"data:text/plain;charset=utf-8;base64,Y3VycmVudCBDQQo="}]}},"version":"3.2.0"}}"#;
/// What `openshift-install` wrote at install time.
const OLD_WORKER_IGN: &str = r#"{"ignition":{"version":"3.2.0","security":{"tls":{"certificateAuthorities":[{"source":"data:,old"}]}}}}"#;

fn tools() -> bool {
    kubesim::tools_present() && common::have("curl")
}

/// The Secret `worker-user-data-managed` with `user_data`, created as admin.
fn create_secret(sim: &Sim, user_data: &str) {
    let b64 = base64::engine::general_purpose::STANDARD.encode(user_data);
    sim.create(
        "admin",
        "secret.json",
        &json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "worker-user-data-managed", "namespace": "openshift-machine-api"},
            "type": "Opaque",
            "data": {"userData": b64, "disableTemplating": "dHJ1ZQ=="},
        })
        .to_string(),
    );
}

/// The role files (`worker.ign` the install-time one).
fn ignition_dir(dir: &Path) {
    let ign = dir.join("ign");
    std::fs::create_dir_all(&ign).unwrap();
    std::fs::create_dir_all(dir.join("images")).unwrap();
    for role in ["bootstrap", "master"] {
        std::fs::write(
            ign.join(format!("{role}.ign")),
            r#"{"ignition":{"version":"3.2.0"}}"#,
        )
        .unwrap();
    }
    std::fs::write(ign.join("worker.ign"), OLD_WORKER_IGN).unwrap();
}

/// The common sections: HTTP and admin on known loopback ports, the
/// approver with `kubeconfig`, DNS/DHCP/LB off.
fn sections(dir: &Path, kubeconfig: &Path) -> String {
    let d = dir.display();
    format!(
        "http:\n  listen: 127.0.0.1:{}\n  imagesDir: {d}/images\n  ignitionDir: {d}/ign\n\
         admin:\n  listen: 127.0.0.1:{}\ncsr:\n  kubeconfigFile: {}\n\
         dns: {{ enabled: false }}\ndhcp: {{ enabled: false, leaseFile: \"{d}/state/leases.json\" }}\n\
         loadBalancer: {{ enabled: false }}\n",
        free_port(),
        free_port(),
        kubeconfig.display()
    )
}

/// `node`'s row of the install timeline (a default row before it has one).
fn node_row(st: &StatusDoc, node: &str) -> NodeTimeline {
    st.timeline
        .as_ref()
        .and_then(|t| t.nodes.iter().find(|n| n.node == node))
        .cloned()
        .unwrap_or_default()
}

/// The approver's `csr.workerIgnition`.
fn worker_ignition(app: &InProc) -> crc_appliance::services::csr::status::WorkerIgnitionStatus {
    let csr = app.status().csr.expect("a csr section");
    csr.worker_ignition.expect("csr.workerIgnition")
}

/// `path` fetched from `from` (the node's own address): (HTTP code, body).
fn fetch(app: &InProc, from: &str, path: &str) -> (String, Vec<u8>) {
    let url = format!("http://{}{path}", app.addr("http"));
    let out = Command::new("curl")
        .args(["-s", "--max-time", "10", "-w", "\n%{http_code}"])
        .args(["--interface", from, &url])
        .output()
        .unwrap();
    let mut body = out.stdout;
    let at = body.iter().rposition(|b| *b == b'\n').unwrap_or(0);
    let code = String::from_utf8_lossy(&body[at + 1..]).into_owned();
    body.truncate(at);
    (code, body)
}

/// A kubelet's request for `node` by `openssl req` (EC P-256), with `sans`.
fn request(dir: &Path, node: &str, tag: &str, sans: Option<&str>) -> Vec<u8> {
    kubesim::node_request(dir, node, &format!("{node}-{tag}"), sans)
}

fn wait_approved(sim: &Sim, name: &str) {
    common::wait_until(&format!("{name} approved"), Duration::from_secs(5), || {
        sim.approved(name)
    });
}

/// Add worker-2 to the running appliance's file and `reload`.
fn add_worker_2(app: &InProc, node_line: &str) {
    let text = std::fs::read_to_string(&app.cluster_file).unwrap();
    let w0 = "  - { name: worker-0, role: worker, mac: \"52:54:00:14:00:14\", ip: 127.0.20.20 }\n";
    assert!(text.contains(w0), "{text}");
    std::fs::write(
        &app.cluster_file,
        text.replace(w0, &format!("{w0}{node_line}")),
    )
    .unwrap();
    let file = app.cluster_file.to_str().unwrap();
    let (code, out, err) = run(BIN, &["reload", "--cluster", file]);
    assert_eq!(code, 0, "reload: {out}{err}\n{}", app.log());
}

/// `node boot worker-2`: exit 0, its output.
fn node_boot(app: &InProc) -> String {
    let file = app.cluster_file.to_str().unwrap();
    let (code, out, err) = run(BIN, &["node", "boot", NODE, "--cluster", file]);
    assert_eq!(code, 0, "node boot: {out}{err}\n{}", app.log());
    out
}

/// Act as worker-2 once booted: its ignition, its two CSRs, its Node;
/// then the timeline and `wait-for node-ready`.
fn join(app: &InProc, sim: &Sim) {
    // The ignition it is served: the secret's userData, with the hostname
    // merge of any worker; the role name serves the userData as it is.
    let (code, body) = fetch(app, NODE_IP, &format!("/ignition/{NODE}.ign"));
    assert_eq!(code, "200", "{}", String::from_utf8_lossy(&body));
    let got: Value = serde_json::from_slice(&body).unwrap();
    let mut want: Value = serde_json::from_str(USER_DATA).unwrap();
    want["storage"] = json!({"files": [{
        "path": "/etc/hostname", "mode": 420, "overwrite": true,
        "contents": {"source": "data:,worker-2.test.crc.testing%0A"},
    }]});
    assert_eq!(got, want);
    let (code, body) = fetch(app, NODE_IP, "/ignition/worker.ign");
    assert_eq!(code, "200");
    assert_eq!(String::from_utf8(body).unwrap(), USER_DATA);
    assert!(
        app.log()
            .contains("(secret worker-user-data-managed + hostname worker-2.test.crc.testing"),
        "{}",
        app.log()
    );
    // The kubelet's client CSR, with the bootstrap token.
    let dir = sim.dir.path();
    let req = request(dir, NODE, "client", None);
    let usages = ["digital signature", "client auth"];
    let yaml = Sim::csr_yaml("w2-client", CLIENT, &usages, &req);
    sim.create("boot", "w2.yaml", &yaml);
    wait_approved(sim, "w2-client");
    // With its client certificate: the Node, Ready, and the serving CSR.
    sim.add_cert_context(NODE, "/O=system:nodes/CN=system:node:worker-2");
    sim.create(
        NODE,
        "node.json",
        r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"worker-2"},"status":{"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady","message":"kubelet is posting ready status"}]}}"#,
    );
    let sans = "DNS:worker-2,DNS:worker-2.test.crc.testing,IP:127.0.20.22";
    let req = request(dir, NODE, "serving", Some(sans));
    let usages = ["digital signature", "server auth"];
    let yaml = Sim::csr_yaml("w2-serving", SERVING, &usages, &req);
    sim.create(NODE, "w2s.yaml", &yaml);
    wait_approved(sim, "w2-serving");
    // The timeline: ignition → client CSR → serving CSR → Ready.
    let mut row = NodeTimeline::default();
    common::wait_until("worker-2's nodeReady", Duration::from_secs(5), || {
        row = node_row(&app.status(), NODE);
        row.node_ready.is_some() && row.csr_serving.is_some()
    });
    let at = |k: &str, t: Option<u64>| t.unwrap_or_else(|| panic!("no {k}: {row:?}"));
    assert!(
        at("ignition", row.ignition) <= at("csrClient", row.csr_client),
        "{row:?}"
    );
    assert!(
        at("csrClient", row.csr_client) <= at("csrServing", row.csr_serving),
        "{row:?}"
    );
    let file = app.cluster_file.to_str().unwrap();
    let args = [
        "wait-for",
        "node-ready",
        NODE,
        "--timeout",
        "10s",
        "--cluster",
        file,
    ];
    let (code, out, err) = run(BIN, &args);
    assert_eq!(code, 0, "{out}{err}");
    for line in [
        "worker-2: client CSR approved",
        "worker-2: serving CSR approved",
        "worker-2: Node Ready",
        "node-ready: reached",
    ] {
        assert!(out.contains(line), "{line:?} not in {out}");
    }
    let csr = app.status().csr.expect("a csr section");
    let wi = csr.worker_ignition.as_ref().expect("csr.workerIgnition");
    assert_eq!(wi.source, "secret", "{csr:?}");
    assert_eq!(wi.error, None, "{csr:?}");
    let rows: Vec<(&str, Option<&str>)> = csr
        .approved
        .iter()
        .map(|r| (r.name.as_str(), r.signer.as_deref()))
        .collect();
    assert_eq!(
        rows,
        [("w2-client", Some(CLIENT)), ("w2-serving", Some(SERVING))],
        "{csr:?}"
    );
}

#[cfg(feature = "libvirt")]
#[test]
fn a_worker_added_by_reload_boots_on_libvirt_and_joins() {
    require!(
        tools() && common::have("xorriso"),
        "python3, openssl, kubectl, curl or xorriso is missing"
    );
    let sim = Sim::start();
    create_secret(&sim, USER_DATA);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    ignition_dir(d);
    std::fs::write(d.join("node.xml"), "<node/>\n").unwrap();
    let iso = common::initramfs::live_iso(
        d,
        "rhcos-day2",
        [b"kernel\n", b"initrd\n", &[7u8; 70_000]],
        &[("coreos/kargs.json", b"{}")],
        true,
    );
    let pid = std::process::id() % 100_000;
    let libvirt = format!(
        "rhcos:\n  iso: {}\nlibvirt:\n  uri: \"test://{}/node.xml\"\n  startOnServe: true\n  \
         pool: {{ name: crc-day2-{pid}, path: {}/pool }}\n  network: {{ name: crc-day2-{pid}, bridge: crcd{pid} }}\n  \
         resources:\n    bootstrap: {{ cpus: 1, memoryMib: 1024, diskGib: 1 }}\n    \
         master: {{ cpus: 1, memoryMib: 1024, diskGib: 2 }}\n    worker: {{ cpus: 1, memoryMib: 1024, diskGib: 1 }}\n",
        iso.display(),
        d.display(),
        d.display()
    );
    let yaml = common::loopback_cluster_with(&format!("{}{libvirt}", sections(d, &sim.kubeconfig)));
    let file = d.join("cluster.yaml");
    std::fs::write(&file, yaml).unwrap();
    let app = InProc::start_path(&file);
    app.wait_log(
        "started test-worker-0 from the live ISO kernel",
        Duration::from_secs(30),
    );
    let node_line =
        "  - { name: worker-2, role: worker, mac: \"52:54:00:14:00:16\", ip: 127.0.20.22 }\n";
    add_worker_2(&app, node_line);
    let out = node_boot(&app);
    assert!(
        out.contains("worker-2: started test-worker-2 from the live ISO kernel")
            || out.contains("worker-2: test-worker-2 is already running (install)"),
        "{out}\n{}",
        app.log()
    );
    common::wait_until(
        "worker-2's VM in the timeline",
        Duration::from_secs(10),
        || node_row(&app.status(), NODE).vm_started.is_some(),
    );
    join(&app, &sim);
}

#[test]
fn a_worker_added_by_reload_boots_through_its_bmc_and_joins() {
    require!(tools(), "python3, openssl, kubectl or curl is missing");
    require!(
        common::have("xorriso")
            && Path::new(common::initramfs::ISOLINUX_BIN).is_file()
            && Path::new(common::initramfs::LDLINUX_C32).is_file(),
        "xorriso or isolinux/syslinux-common is missing"
    );
    let sim = Sim::start();
    create_secret(&sim, USER_DATA);
    let bmc = bmcsim::Sim::start(bmcsim::Opts::new("dell").power("Off"));
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    ignition_dir(d);
    std::fs::write(d.join("user"), format!("{}\n", bmc.user)).unwrap();
    std::fs::write(d.join("pass"), format!("{}\n", bmc.password)).unwrap();
    std::fs::set_permissions(
        d.join("pass"),
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();
    std::fs::copy(&bmc.ca, d.join("ca.pem")).unwrap();
    let built = common::initramfs::rhcos_iso(d, "day2", [b"kernel", b"initrd"], 1024);
    let rhcos = format!("rhcos: {{ iso: \"{}\" }}\n", built.path.display());
    // A node with a BMC makes HTTP serve HTTPS for virtual media: on a
    // free port here (the default 8443 may be taken).
    let tls = format!("  tlsListen: 127.0.0.1:{}\nadmin:", free_port());
    let sections = sections(d, &sim.kubeconfig).replacen("admin:", &tls, 1);
    let yaml = common::loopback_cluster_with(&format!("{sections}{rhcos}"));
    let file = d.join("cluster.yaml");
    std::fs::write(&file, yaml).unwrap();
    let app = InProc::start_path(&file);
    let line = format!(
        "  - name: worker-2\n    role: worker\n    mac: \"52:54:00:14:00:16\"\n    ip: 127.0.20.22\n    \
         bmc: {{ redfish: \"{}/redfish/v1/Systems/System.Embedded.1\", usernameFile: user, passwordFile: pass, caFile: ca.pem }}\n",
        bmc.base()
    );
    add_worker_2(&app, &line);
    let out = node_boot(&app);
    let iso = format!("http://{}/boot/worker-2.iso", app.addr("http"));
    assert!(out.contains(&format!("worker-2: inserted {iso}")), "{out}");
    assert!(out.contains("worker-2: powered on"), "{out}");
    let st = bmc.state();
    assert_eq!(st["booted_from"], json!([iso]), "{st}");
    assert!(node_row(&app.status(), NODE).bmc_power_on.is_some());
    // Booted already: a second `node boot` changes nothing.
    let again = node_boot(&app);
    assert!(again.contains("worker-2: already booted from"), "{again}");
    join(&app, &sim);
}

#[test]
fn without_the_secret_workers_get_worker_ign_with_a_warning_until_it_exists() {
    require!(tools(), "python3, openssl, kubectl or curl is missing");
    let sim = Sim::start();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    ignition_dir(d);
    let worker_ign = d.join("ign/worker.ign");
    // Written by openshift-install two days ago.
    run("touch", &["-d", "2 days ago", worker_ign.to_str().unwrap()]);
    let yaml = common::loopback_cluster_with(&sections(d, &sim.kubeconfig));
    let file = d.join("cluster.yaml");
    std::fs::write(&file, yaml).unwrap();
    let app = InProc::start_path(&file);
    let (code, body) = fetch(&app, "127.0.20.20", "/ignition/worker-0.ign");
    assert_eq!(code, "200");
    let got: Value = serde_json::from_slice(&body).unwrap();
    let old: Value = serde_json::from_str(OLD_WORKER_IGN).unwrap();
    assert_eq!(got["ignition"], old["ignition"], "worker.ign, merged");
    let (_, body) = fetch(&app, "127.0.20.20", "/ignition/worker.ign");
    assert_eq!(String::from_utf8(body).unwrap(), OLD_WORKER_IGN);
    app.wait_log(
        "ignition worker-0.ign: serving worker.ign, not the cluster's current worker pointer config: secret openshift-machine-api/worker-user-data-managed does not exist",
        Duration::from_secs(5),
    );
    app.wait_log(
        "csr: ALERT: workers are served worker.ign",
        Duration::from_secs(5),
    );
    let wi = worker_ignition(&app);
    assert_eq!(wi.source, "worker.ign", "{wi:?}");
    assert!(
        wi.error
            .as_deref()
            .unwrap_or_default()
            .contains("does not exist"),
        "{wi:?}"
    );
    assert!(
        wi.warning
            .as_deref()
            .unwrap_or_default()
            .contains("NOT be accepted"),
        "{wi:?}"
    );
    // `node boot` without a route, and for a node not in the file.
    let f = file.to_str().unwrap();
    let (code, out, err) = run(BIN, &["node", "boot", "worker-0", "--cluster", f]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains(
            "no way to boot worker-0: it has no `bmc`, the cluster file has no `libvirt` section"
        ),
        "{err}"
    );
    let (code, _, err) = run(BIN, &["node", "boot", "worker-9", "--cluster", f]);
    assert_eq!(code, 1);
    assert!(
        err.contains("node \"worker-9\" is not in the cluster file"),
        "{err}"
    );
    // A master is never served the workers' config.
    let (_, body) = fetch(&app, "127.0.20.10", "/ignition/master-0.ign");
    assert!(!String::from_utf8_lossy(&body).contains("api-int"));
    // The secret appears: a fetch once the copy is older than 10 s reads
    // it again and serves it.
    create_secret(&sim, USER_DATA);
    std::thread::sleep(Duration::from_secs(11));
    let (_, body) = fetch(&app, "127.0.20.20", "/ignition/worker.ign");
    assert_eq!(String::from_utf8(body).unwrap(), USER_DATA);
    let wi = worker_ignition(&app);
    assert_eq!(wi.source, "secret", "{wi:?}");
    assert_eq!(wi.warning, None, "{wi:?}");
    let metrics = common::run_ok(
        "curl",
        &["-sf", &format!("http://{}/metrics", app.addr("admin"))],
    );
    assert!(
        metrics.contains("\ncrc_csr_worker_ignition_from_secret 1\n"),
        "{metrics}"
    );
}

#[test]
fn two_pending_client_csrs_for_one_node_are_an_alert_on_the_timeline_and_page() {
    require!(tools(), "python3, openssl, kubectl or curl is missing");
    let sim = Sim::start();
    create_secret(&sim, USER_DATA);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    ignition_dir(d);
    // The `render csr-rbac` identity: its Role lets it get the secret.
    let token = sim.apply_render_csr_rbac();
    let kubeconfig = sim.token_kubeconfig("approver.kubeconfig", &token);
    let yaml = common::loopback_cluster_with(&sections(d, &kubeconfig));
    let file = d.join("cluster.yaml");
    std::fs::write(&file, yaml).unwrap();
    let app = InProc::start_path(&file);
    // Both made before the node's ignition fetch (the approver would
    // approve a lone one at once after it); the fetch comes below.
    let usages = ["digital signature", "client auth"];
    for name in ["w0-a", "w0-b"] {
        let req = request(sim.dir.path(), "worker-0", name, None);
        let yaml = Sim::csr_yaml(name, CLIENT, &usages, &req);
        sim.create("boot", &format!("{name}.yaml"), &yaml);
    }
    // CVE-2026-19706's shape: an admin certificate asked of
    // node-bootstrapper, refused for its subject.
    let req = kubesim::kubelet_request(
        sim.dir.path(),
        "/O=system:masters/CN=system:admin",
        "cve",
        None,
    );
    let yaml = Sim::csr_yaml("cve", CLIENT, &usages, &req);
    sim.create("boot", "cve.yaml", &yaml);
    let csr_alert = |st: &StatusDoc| {
        st.timeline
            .as_ref()
            .and_then(|t| t.hints.iter().find(|h| h.kind == HintKind::CsrAlert))
            .cloned()
    };
    let mut st = app.status();
    common::wait_until("the csr-alert hint", Duration::from_secs(5), || {
        st = app.status();
        csr_alert(&st).is_some()
    });
    let hint = csr_alert(&st).unwrap();
    assert_eq!(hint.nodes, ["worker-0"], "{hint:?}");
    let msg = &hint.message;
    assert!(
        msg.contains("w0-a, w0-b") && msg.contains("2 pending client CSRs for worker-0"),
        "{msg}"
    );
    let csr = st.csr.as_ref().expect("a csr section");
    assert_eq!(
        csr.alerts,
        ["2 pending client CSRs for worker-0: none is approved"],
        "{csr:?}"
    );
    assert!(!sim.approved("w0-a") && !sim.approved("w0-b"));
    app.wait_log("csr: ALERT: w0-a left pending", Duration::from_secs(5));
    app.wait_log("csr: ALERT: w0-b left pending", Duration::from_secs(5));
    app.wait_log("csr: cve left pending: subject", Duration::from_secs(5));
    // The page: the hint, the alert, each CSR left pending with its
    // signer and reason, and what day-2 workers are served.
    if common::have("chromium") {
        let dom = common::chromium(&format!("http://{}/", app.addr("admin")), &["--dump-dom"]);
        for want in [
            "data-hint=\"csr-alert\"",
            "data-csr-alert=\"\"",
            "ALERT: 2 pending client CSRs for worker-0",
            "<tr data-csr=\"w0-a\">",
            "<tr data-csr=\"cve\">",
            "is not O=system:nodes, CN=system:node:&lt;name&gt;",
            "day-2 workers are served the secret worker-user-data-managed",
            "client CSR</th>",
        ] {
            assert!(dom.contains(want), "{want:?} not on the page:\n{dom}");
        }
        assert!(dom.contains(CLIENT), "the signer column");
        assert!(!dom.contains("BEGIN CERTIFICATE REQUEST"), "no CSR bodies");
    } else {
        skipped!(
            "SKIPPED the page part of {}: chromium is not installed",
            module_path!()
        );
    }
    // The node's ignition fetch: both are still left alone.
    let (code, _) = fetch(&app, "127.0.20.20", "/ignition/worker-0.ign");
    assert_eq!(code, "200");
    std::thread::sleep(Duration::from_secs(2));
    assert!(!sim.approved("w0-a") && !sim.approved("w0-b"));
    // A person removes the one that is not the node's: the alert clears,
    // and the other, now the node's only pending client CSR within the
    // window of its ignition fetch, is approved (item 2's rule).
    sim.kubectl_ok("admin", &["delete", "csr", "w0-a"]);
    common::wait_until("the alert cleared", Duration::from_secs(5), || {
        let st = app.status();
        st.timeline.is_some()
            && csr_alert(&st).is_none()
            && st.csr.is_some_and(|c| c.alerts.is_empty())
    });
    wait_approved(&sim, "w0-b");
    assert!(!sim.approved("cve"));
    let sa = "system:serviceaccount:openshift-machine-api:crc-appliance-csr-approver";
    let calls: Vec<Value> = sim.log().into_iter().filter(|e| e["user"] == sa).collect();
    assert!(
        calls.iter().any(|e| e["path"]
            .as_str()
            .is_some_and(|p| p.ends_with("/secrets/worker-user-data-managed"))
            && e["status"] == 200),
        "{calls:?}"
    );
    assert!(calls.iter().all(|e| e["status"] == 200), "{calls:?}");
}
