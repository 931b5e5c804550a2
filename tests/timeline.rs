//! The install timeline end to end: the appliance in a "lab" network
//! namespace, the nodes in a second one joined by a veth pair. Each node
//! takes its DHCP lease with udhcpc (its MAC set on the veth), downloads
//! the rootfs and its ignition with curl from its own address, opens a
//! connection to the machine-config frontend, and serves TLS health
//! endpoints with `openssl s_server`; the test drives the cluster through
//! every phase and asserts `/status`'s `timeline`, `status --cluster F`,
//! `wait-for` (timeout and success) and `/metrics`. Further tests use the
//! same fake endpoints for bootstrap-complete from evidence (the bootstrap's
//! API backend stopped while the master serves), the marker's freshness,
//! and the pending-CSR hint of a worker whose ingress never comes up.
//! The appliance runs in-process inside its namespace (`InProc::in_netns`);
//! what it reports is read through the admin API and the CLI run in the
//! namespace (the test checks those), into the typed documents
//! (`TimelineStatus`, `LbStatus`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::inproc::InProc;
use common::udhcpc::{kv, udhcpc_once};
use common::{BIN, Netns, unique_name};
use crc_appliance::model::cluster::{RemoveBootstrap, Role};
use crc_appliance::services::lb::status::{BackendStatus, BootstrapCompleteBy, LbStatus};
use crc_appliance::timeline::status::{ClusterPhase, HintKind, NodeTimeline, TimelineStatus};

const APPLIANCE: &str = "10.232.0.1";
const NODES: [(&str, &str, &str, &str); 3] = [
    ("bootstrap", "bootstrap", "52:54:00:e8:00:05", "10.232.0.5"),
    ("master-0", "master", "52:54:00:e8:00:0a", "10.232.0.10"),
    ("worker-0", "worker", "52:54:00:e8:00:14", "10.232.0.20"),
];
/// Backend ports on the nodes (api, machine-config, ingress http, https).
const BACKENDS: [u16; 4] = [16443, 18623, 10080, 10443];
const ROOTFS_LEN: usize = 3 * 1024 * 1024;

/// Child processes killed on drop (the TLS backends).
struct Procs(Vec<Child>);

impl Drop for Procs {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

struct Lab {
    nodes: Netns,
    srv: Netns,
    ifs: String,
    ifc: String,
}

impl Lab {
    fn new() -> Lab {
        let base = unique_name("tl");
        let ifs = format!("{base}s");
        let ifc = format!("{base}c");
        let lab = Lab {
            srv: Netns::new(format!("{base}srv")),
            nodes: Netns::new(format!("{base}nod")),
            ifs: ifs.clone(),
            ifc,
        };
        common::veth(&ifs, &lab.srv, &lab.ifc, &lab.nodes);
        lab.srv
            .ip(&["addr", "add", &format!("{APPLIANCE}/24"), "dev", &ifs]);
        lab.srv.ip(&["link", "set", &ifs, "up"]);
        lab.nodes.ip(&["link", "set", &lab.ifc, "up"]);
        lab
    }

    fn cluster(&self, dir: &Path) -> std::path::PathBuf {
        self.cluster_with(dir, "")
    }

    /// The cluster file with `lb_extra` (indented lines) added to
    /// `loadBalancer`. Its health checks find a backend healthy at its
    /// first answer and unhealthy after ten failures in a row (3 s): a
    /// stopped backend refuses at once, while a few checks timed out on a
    /// loaded machine must not count (two did: a master unhealthy, the
    /// bootstrap "gone" while it served).
    fn cluster_with(&self, dir: &Path, lb_extra: &str) -> std::path::PathBuf {
        let d = dir.display();
        let mut nodes = String::new();
        for (name, role, mac, ip) in NODES {
            nodes.push_str(&format!(
                "  - {{ name: {name}, role: {role}, mac: \"{mac}\", ip: {ip} }}\n"
            ));
        }
        let [api, mc, http, https] = BACKENDS;
        let text = format!(
            r#"name: tl
baseDomain: crc.testing
network:
  cidr: 10.232.0.0/24
  gateway: 10.232.0.254
  applianceIP: {APPLIANCE}
  interface: {ifs}
nodes:
{nodes}dns:
  enabled: false
dhcp:
  listen: 0.0.0.0:67
  leaseTime: 10m
  leaseFile: "{d}/leases.json"
loadBalancer:
  listen: {{ api: "{APPLIANCE}:6443", machineConfig: "{APPLIANCE}:22623", ingressHttp: "{APPLIANCE}:80", ingressHttps: "{APPLIANCE}:443" }}
  backendPorts: {{ api: {api}, machineConfig: {mc}, ingressHttp: {http}, ingressHttps: {https} }}
  healthCheck: {{ interval: 300ms, timeout: 300ms, rise: 1, fall: 10 }}
{lb_extra}http:
  listen: {APPLIANCE}:8080
  imagesDir: "{d}/images"
  ignitionDir: "{d}/ignition"
admin:
  listen: 127.0.0.1:19180
"#,
            ifs = self.ifs,
        );
        let f = dir.join("cluster.yaml");
        std::fs::write(&f, text).unwrap();
        f
    }

    /// udhcpc for `node` (its MAC on the nodes' veth end); then the node's
    /// address is added to that end, as the node would configure it.
    fn lease(&self, dir: &Path, mac: &str, ip: &str) {
        self.nodes.ip(&["link", "set", &self.ifc, "down"]);
        self.nodes
            .ip(&["link", "set", "dev", &self.ifc, "address", mac]);
        self.nodes.ip(&["link", "set", &self.ifc, "up"]);
        let env = udhcpc_once(&self.nodes, &self.ifc, dir, "5").expect("a DHCP lease");
        assert_eq!(kv(&env, "ip").as_deref(), Some(ip), "{env}");
        self.nodes
            .ip(&["addr", "replace", &format!("{ip}/24"), "dev", &self.ifc]);
    }

    /// curl from `from` in the nodes' namespace; (exit code, body bytes).
    fn curl(&self, from: &str, url: &str) -> (i32, usize) {
        let out = self
            .nodes
            .cmd(&[
                "curl",
                "-sk",
                "--max-time",
                "10",
                "--interface",
                from,
                "-o",
                "-",
                url,
            ])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        (out.status.code().unwrap_or(-1), out.stdout.len())
    }

    /// `crc-appliance ARGS --cluster F` in the lab namespace.
    fn cli(&self, cluster: &Path, args: &[&str]) -> (i32, String, String) {
        let mut a = vec![BIN];
        a.extend_from_slice(args);
        a.extend_from_slice(&["--cluster", cluster.to_str().unwrap()]);
        let out = self.srv.cmd(&a).stdin(Stdio::null()).output().unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// TLS backends of `ip` (every backend port) with openssl s_server.
    fn backends(&self, dir: &Path, ip: &str, procs: &mut Procs) {
        for port in BACKENDS {
            procs.0.push(self.backend(dir, ip, port));
        }
    }

    /// One TLS backend (`openssl s_server -www` answers every GET with 200).
    fn backend(&self, dir: &Path, ip: &str, port: u16) -> Child {
        let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
        self.nodes
            .cmd(&[
                "openssl",
                "s_server",
                "-quiet",
                "-www",
                "-accept",
                &format!("{ip}:{port}"),
                "-cert",
                cert.to_str().unwrap(),
                "-key",
                key.to_str().unwrap(),
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    }

    /// Every node's address on the nodes' end of the veth (one MAC for
    /// all: no neighbour entries go stale), without DHCP.
    fn addresses(&self) {
        for (.., ip) in NODES {
            self.nodes
                .ip(&["addr", "add", &format!("{ip}/24"), "dev", &self.ifc]);
        }
    }

    /// `/api/lb/backends`.
    fn lb(&self) -> LbStatus {
        let body = self
            .srv
            .exec(&["curl", "-sf", "http://127.0.0.1:19180/api/lb/backends"]);
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"))
    }
}

/// `status --json`: the timeline.
fn timeline(lab: &Lab, cluster: &Path) -> TimelineStatus {
    let (code, out, err) = lab.cli(cluster, &["status", "--json"]);
    assert_eq!(code, 0, "status --json: {out}{err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

fn node<'a>(tl: &'a TimelineStatus, name: &str) -> &'a NodeTimeline {
    let found = tl.nodes.iter().find(|n| n.node == name);
    found.unwrap_or_else(|| panic!("no {name} in {tl:#?}"))
}

#[test]
fn an_install_is_followed_node_by_node_through_every_phase() {
    require_netns!("tl");
    require_tools!("udhcpc", "curl", "openssl");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir_all(d.join("images")).unwrap();
    std::fs::create_dir_all(d.join("ignition")).unwrap();
    std::fs::write(
        d.join("images/tl-live-rootfs.img"),
        common::pattern(ROOTFS_LEN, 7),
    )
    .unwrap();
    for role in ["bootstrap", "master", "worker"] {
        std::fs::write(
            d.join(format!("ignition/{role}.ign")),
            r#"{"ignition":{"version":"3.2.0"}}"#,
        )
        .unwrap();
    }
    common::self_signed_cert(&d.join("cert.pem"), &d.join("key.pem"), "tl");
    let lab = Lab::new();
    let cluster = lab.cluster(d);
    let app = InProc::in_netns(lab.srv.name()).start_path(&cluster);
    let mut procs = Procs(Vec::new());

    // Nothing yet: wait-for times out and says what is missing.
    let (code, out, err) = lab.cli(
        &cluster,
        &["wait-for", "bootstrap-complete", "--timeout", "2s"],
    );
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("cluster: phase provisioning"), "{out}");
    for needle in [
        "bootstrap-complete not reached",
        "master-0: no DHCP lease yet",
        "bootstrap: no DHCP lease yet",
    ] {
        assert!(err.contains(needle), "missing {needle:?} in {err}");
    }
    assert!(!err.contains("worker-0"), "workers are not needed: {err}");

    // The operator fetches master-0's ignition from the appliance host:
    // listed, not progress.
    let url = format!("http://{APPLIANCE}:8080/ignition/master-0.ign");
    assert!(lab.srv.exec(&["curl", "-sf", &url]).len() > 10);
    let tl = timeline(&lab, &cluster);
    assert_eq!(node(&tl, "master-0").ignition, None, "{tl:#?}");
    let fetch = tl.operator_fetches.first().expect("an operator fetch");
    assert_eq!(fetch.client, APPLIANCE, "{tl:#?}");
    assert_eq!(fetch.file, "master-0.ign", "{tl:#?}");

    // Each node: lease, rootfs, its ignition from its own address, backends.
    let rootfs = format!("http://{APPLIANCE}:8080/images/tl-live-rootfs.img");
    for (name, role, mac, ip) in NODES {
        lab.lease(d, mac, ip);
        assert_eq!(lab.curl(ip, &rootfs), (0, ROOTFS_LEN));
        let (code, n) = lab.curl(ip, &format!("http://{APPLIANCE}:8080/ignition/{role}.ign"));
        assert!(code == 0 && n > 10, "{name}: ignition fetch {code}");
        lab.backends(d, ip, &mut procs);
    }
    // The nodes share one interface whose MAC changed for each lease: the
    // appliance's neighbour entries for the earlier nodes' addresses still
    // name the old MACs (frames to them are dropped until the entries go
    // stale, ~30 s). Real nodes keep their MAC; forget the stale entries.
    lab.srv.ip(&["neigh", "flush", "dev", &lab.ifs]);
    // master-0's installed system boots: its first machine-config connection.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let tl = timeline(&lab, &cluster);
        if NODES[..2]
            .iter()
            .all(|(n, ..)| node(&tl, n).mcs_healthy.is_some())
        {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "machine-config backends not healthy: {tl:#?}\nLB: {}\nappliance:\n{}",
            lab.srv
                .exec(&["curl", "-s", "http://127.0.0.1:19180/api/lb/backends"]),
            app.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let (code, _) = lab.curl("10.232.0.10", &format!("https://{APPLIANCE}:22623/"));
    assert_eq!(
        code,
        0,
        "machine-config through the LB: {}",
        lab.srv
            .exec(&["curl", "-s", "http://127.0.0.1:19180/api/lb/backends"])
    );

    let (code, out, err) = lab.cli(
        &cluster,
        &["wait-for", "bootstrap-complete", "--timeout", "1s"],
    );
    assert_eq!(code, 1, "no marker yet: {out}{err}");
    std::fs::write(d.join("ignition/bootstrap-complete"), "").unwrap();
    let (code, out, err) = lab.cli(
        &cluster,
        &["wait-for", "bootstrap-complete", "--timeout", "20s"],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("bootstrap-complete: reached"), "{out}");
    assert!(out.contains("master-0: DHCP lease"), "{out}");
    assert!(out.contains("master-0: ignition fetched"), "{out}");
    let (code, out, err) = lab.cli(
        &cluster,
        &["wait-for", "install-complete", "--timeout", "30s"],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("install-complete: reached"), "{out}");

    // master-0 asks again, seconds after its first lease (the failed
    // wait-for above took its 1 s): a renewal.
    let (_, _, m0_mac, m0_ip) = NODES[1];
    lab.lease(d, m0_mac, m0_ip);

    // Leases reach the timeline through serve's once-a-second sample
    // (reading /status records nothing): wait a few ticks for it.
    let mut tl = timeline(&lab, &cluster);
    common::wait_until(
        "the renewal on the timeline",
        Duration::from_secs(5),
        || {
            tl = timeline(&lab, &cluster);
            node(&tl, "master-0").lease_renewals == 1
        },
    );
    assert_eq!(tl.phase, ClusterPhase::IngressReady, "{tl:#?}");
    assert_eq!(node(&tl, "master-0").lease_renewals, 1, "{tl:#?}");
    assert!(node(&tl, "master-0").lease_renewed.is_some(), "{tl:#?}");
    for p in [
        "bootstrapping",
        "bootstrap-complete",
        "bootstrap-removed",
        "ingress-ready",
    ] {
        assert!(tl.phase_times.contains_key(p), "{p}: {tl:#?}");
    }
    let m0 = node(&tl, "master-0");
    for (step, at) in [
        ("lease", m0.lease),
        ("rootfs", m0.rootfs),
        ("ignition", m0.ignition),
        ("firstBoot", m0.first_boot),
        ("apiHealthy", m0.api_healthy),
        ("mcsHealthy", m0.mcs_healthy),
    ] {
        assert!(at.is_some(), "master-0 {step}: {m0:#?}");
    }
    assert_eq!(m0.rootfs_bytes, Some(ROOTFS_LEN as u64), "{m0:#?}");
    let operator_fetch = tl.operator_fetches.first().map(|f| f.unix_time);
    assert!(m0.ignition >= operator_fetch, "{tl:#?}");
    assert!(node(&tl, "worker-0").ingress_healthy.is_some(), "{tl:#?}");
    assert_eq!(node(&tl, "worker-0").first_boot, None, "{tl:#?}");

    // The terminal table: the phase and a row per node.
    let (code, out, err) = lab.cli(&cluster, &["status"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("cluster phase: ingress-ready\n"), "{out}");
    for (name, ..) in NODES {
        assert!(out.lines().any(|l| l.starts_with(name)), "{name}: {out}");
    }
    assert!(out.contains("operator fetches"), "{out}");

    // Metrics: the phase as one series per phase, bounded labels.
    let metrics = lab
        .srv
        .exec(&["curl", "-sf", "http://127.0.0.1:19180/metrics"]);
    assert!(
        metrics.contains("crc_appliance_timeline_phase{phase=\"ingress-ready\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("crc_appliance_timeline_phase{phase=\"provisioning\"} 0"),
        "{metrics}"
    );
    assert!(
        metrics.contains(
            "crc_appliance_timeline_step_timestamp_seconds{node=\"master-0\",step=\"firstBoot\"}"
        ),
        "{metrics}"
    );
    if common::have("promtool") {
        let mut c = Command::new("promtool")
            .args(["check", "metrics"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write as _;
        c.stdin
            .take()
            .unwrap()
            .write_all(metrics.as_bytes())
            .unwrap();
        let out = c.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "promtool: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    } else {
        skipped!("SKIPPED promtool check: promtool is not installed");
    }
    drop(procs);
    drop(app);
}

/// An appliance in a lab with ignition files, a rootfs and TLS keys; the
/// node addresses set without DHCP. `lb_extra` goes into `loadBalancer`.
fn start_lab(lb_extra: &str) -> (tempfile::TempDir, Lab, std::path::PathBuf, InProc) {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir_all(d.join("images")).unwrap();
    std::fs::create_dir_all(d.join("ignition")).unwrap();
    for role in ["bootstrap", "master", "worker"] {
        std::fs::write(
            d.join(format!("ignition/{role}.ign")),
            r#"{"ignition":{"version":"3.2.0"}}"#,
        )
        .unwrap();
    }
    common::self_signed_cert(&d.join("cert.pem"), &d.join("key.pem"), "tl");
    let lab = Lab::new();
    let cluster = lab.cluster_with(d, lb_extra);
    let app = InProc::in_netns(lab.srv.name()).start_path(&cluster);
    lab.addresses();
    (dir, lab, cluster, app)
}

/// Poll `f` on the LB's status for up to 30 s.
fn wait_lb(lab: &Lab, app: &InProc, what: &str, f: impl Fn(&LbStatus) -> bool) -> LbStatus {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let lb = lab.lb();
        if f(&lb) {
            return lb;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{what}: {lb:#?}\nappliance:\n{}",
            app.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The backend row of `node` in `pool`.
fn lb_backend<'a>(lb: &'a LbStatus, pool: &str, node: &str) -> &'a BackendStatus {
    lb.pools
        .iter()
        .find(|p| p.name.as_str() == pool)
        .and_then(|p| p.backends.iter().find(|b| b.node == node))
        .unwrap_or_else(|| panic!("no {node} in {pool}: {lb:#?}"))
}

fn lb_healthy(lb: &LbStatus, pool: &str, node: &str) -> bool {
    lb_backend(lb, pool, node).healthy
}

const BOOTSTRAP_IP: &str = NODES[0].3;
const MASTER_IP: &str = NODES[1].3;
const WORKER_IP: &str = NODES[2].3;

/// Bootstrap complete from evidence, with no marker: the master serves the
/// API and the machine config, then the bootstrap's API goes away (bootkube
/// tears the bootstrap control plane down): the phase is reached, and the
/// LB drains the bootstrap by itself.
#[test]
fn bootstrap_completes_when_its_api_goes_away_and_is_drained() {
    require_netns!("tl");
    require_tools!("curl", "openssl");
    let (dir, lab, cluster, app) = start_lab("");
    let d = dir.path();
    let mut procs = Procs(Vec::new());
    let mut boot_api = lab.backend(d, BOOTSTRAP_IP, BACKENDS[0]);
    for port in &BACKENDS[1..] {
        procs.0.push(lab.backend(d, BOOTSTRAP_IP, *port));
    }
    lab.backends(d, MASTER_IP, &mut procs);
    wait_lb(&lab, &app, "bootstrap and master-0 healthy", |lb| {
        ["api", "machine-config"]
            .iter()
            .all(|p| lb_healthy(lb, p, "bootstrap") && lb_healthy(lb, p, "master-0"))
    });

    // While the bootstrap serves its API, bootstrap is not complete.
    let (code, out, err) = lab.cli(
        &cluster,
        &["wait-for", "bootstrap-complete", "--timeout", "2s"],
    );
    assert_eq!(code, 1, "the bootstrap still serves: {out}{err}");
    assert_eq!(timeline(&lab, &cluster).phase, ClusterPhase::Bootstrapping);
    assert_eq!(lab.lb().bootstrap_complete, None);

    // bootkube is done: the bootstrap's API stops answering.
    boot_api.kill().unwrap();
    boot_api.wait().unwrap();
    let (code, out, err) = lab.cli(
        &cluster,
        &["wait-for", "bootstrap-complete", "--timeout", "20s"],
    );
    assert_eq!(code, 0, "{out}{err}\nappliance:\n{}", app.log());
    assert!(out.contains("bootstrap-complete: reached"), "{out}");
    assert!(!d.join("ignition/bootstrap-complete").exists(), "no marker");

    // Drained by itself: removed from every pool, logged, and new
    // machine-config connections (its MCS still answers) go to master-0.
    let lb = wait_lb(&lab, &app, "bootstrap removed", |lb| {
        lb.pools.iter().all(|p| {
            p.backends
                .iter()
                .filter(|b| b.role == Role::Bootstrap)
                .all(|b| b.removed)
        })
    });
    let by = lb.bootstrap_complete;
    assert_eq!(by, Some(BootstrapCompleteBy::Evidence), "{lb:#?}");
    assert_eq!(lb.remove_bootstrap, RemoveBootstrap::Auto, "{lb:#?}");
    app.wait_log("bootstrap's API went away", Duration::from_secs(5));
    app.wait_log("bootstrap removed from every pool", Duration::from_secs(5));
    let total = |lb: &LbStatus, node| lb_backend(lb, "machine-config", node).total_connections;
    let (boot_before, master_before) = (total(&lb, "bootstrap"), total(&lb, "master-0"));
    for _ in 0..4 {
        let (code, _) = lab.curl(MASTER_IP, &format!("https://{APPLIANCE}:22623/"));
        assert_eq!(code, 0);
    }
    let lb = lab.lb();
    assert_eq!(total(&lb, "bootstrap"), boot_before, "{lb:#?}");
    assert_eq!(total(&lb, "master-0"), master_before + 4, "{lb:#?}");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while timeline(&lab, &cluster).phase != ClusterPhase::BootstrapRemoved {
        assert!(
            std::time::Instant::now() < deadline,
            "{:#?}",
            timeline(&lab, &cluster)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    drop(procs);
}

/// A `bootstrap-complete` marker older than the ignition files (left from
/// an earlier install) completes nothing and says so; touched again it is
/// the operator's override and completes bootstrap (the bootstrap still
/// serves: no evidence).
#[test]
fn a_stale_marker_is_ignored_and_a_fresh_one_still_completes_bootstrap() {
    require_netns!("tl");
    require_tools!("curl", "openssl");
    let (dir, lab, cluster, app) = start_lab("");
    let d = dir.path();
    let mut procs = Procs(Vec::new());
    lab.backends(d, BOOTSTRAP_IP, &mut procs);
    lab.backends(d, MASTER_IP, &mut procs);
    let marker = d.join("ignition/bootstrap-complete");
    std::fs::write(&marker, "").unwrap();
    let hour_before = std::fs::metadata(d.join("ignition/master.ign"))
        .unwrap()
        .modified()
        .unwrap()
        - Duration::from_secs(3600);
    std::fs::File::options()
        .write(true)
        .open(&marker)
        .unwrap()
        .set_modified(hour_before)
        .unwrap();
    let lb = wait_lb(&lab, &app, "stale marker seen, masters healthy", |lb| {
        lb.bootstrap_complete_marker_stale
            && lb_healthy(lb, "api", "master-0")
            && lb_healthy(lb, "machine-config", "master-0")
    });
    assert!(lb.bootstrap_complete_marker_present, "{lb:#?}");
    let (code, out, err) = lab.cli(
        &cluster,
        &["wait-for", "bootstrap-complete", "--timeout", "3s"],
    );
    assert_eq!(code, 1, "a stale marker completed bootstrap: {out}{err}");
    assert!(
        err.contains(&format!("ignoring {}", marker.display())),
        "the hint: {err}"
    );
    let lb = lab.lb();
    assert_eq!(lb.bootstrap_complete, None, "{lb:#?}");
    assert!(!lb_backend(&lb, "api", "bootstrap").removed, "{lb:#?}");
    app.wait_log("older than the ignition files", Duration::from_secs(5));

    // The operator touches it again: bootstrap complete by hand.
    std::fs::File::options()
        .write(true)
        .open(&marker)
        .unwrap()
        .set_modified(std::time::SystemTime::now())
        .unwrap();
    let (code, out, err) = lab.cli(
        &cluster,
        &["wait-for", "bootstrap-complete", "--timeout", "20s"],
    );
    assert_eq!(code, 0, "{out}{err}");
    let lb = wait_lb(&lab, &app, "bootstrap removed by the marker", |lb| {
        lb_backend(lb, "api", "bootstrap").removed
    });
    let by = lb.bootstrap_complete;
    assert_eq!(by, Some(BootstrapCompleteBy::Marker), "{lb:#?}");
    assert!(!lb.bootstrap_complete_marker_stale, "{lb:#?}");
    drop(procs);
}

/// A worker that fetched its ignition and its machine config but whose
/// ingress never becomes healthy (its CSRs wait for approval): after
/// `csrHintAfter`, `status`, `wait-for install-complete` and the page say
/// so with the exact `oc` commands.
#[test]
fn a_worker_that_never_joins_gets_the_csr_hint() {
    require_netns!("tl");
    require_tools!("curl", "openssl");
    const APPROVE: &str = r#"oc get csr -o go-template='{{range .items}}{{if not .status}}{{.metadata.name}}{{"\n"}}{{end}}{{end}}' | xargs oc adm certificate approve"#;
    let (_dir, lab, cluster, app) = start_lab("  csrHintAfter: 2s\n");
    let (code, n) = lab.curl(
        WORKER_IP,
        &format!("http://{APPLIANCE}:8080/ignition/worker.ign"),
    );
    assert!(code == 0 && n > 10, "ignition fetch {code}");
    // Its installed system asks the machine-config server (no backend
    // answers here; the connection is what the timeline records).
    lab.curl(
        WORKER_IP,
        &format!("https://{APPLIANCE}:22623/config/worker"),
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let tl = loop {
        let tl = timeline(&lab, &cluster);
        if !tl.hints.is_empty() {
            break tl;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no hint: {tl:#?}\nappliance:\n{}",
            app.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let w = node(&tl, "worker-0");
    assert!(w.ignition.is_some() && w.first_boot.is_some(), "{w:#?}");
    assert_eq!(w.ingress_healthy, None, "{w:#?}");
    let h = &tl.hints[0];
    assert_eq!(h.kind, HintKind::PendingCsr, "{tl:#?}");
    assert_eq!(h.nodes, ["worker-0"], "{tl:#?}");
    assert_eq!(h.commands, ["oc get csr", APPROVE], "{tl:#?}");

    // `status`: the hint and each command on a line of its own.
    let (code, out, err) = lab.cli(&cluster, &["status"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("hint: worker-0 fetched its machine config"),
        "{out}"
    );
    assert!(out.contains("pending CSRs"), "{out}");
    for cmd in ["oc get csr", APPROVE] {
        assert!(out.lines().any(|l| l.trim() == cmd), "{cmd:?} in {out}");
    }

    // `wait-for install-complete`: printed as progress and in what is missing.
    let (code, out, err) = lab.cli(
        &cluster,
        &["wait-for", "install-complete", "--timeout", "2s"],
    );
    assert_eq!(code, 1, "{out}{err}");
    for text in [&out, &err] {
        assert!(text.contains("pending CSRs"), "{out}{err}");
        assert!(text.lines().any(|l| l.trim() == APPROVE), "{out}{err}");
    }

    // The page shows it (rendered by headless Chromium, when installed).
    if common::have("chromium") {
        let profile = tempfile::tempdir().unwrap();
        let user_dir = format!("--user-data-dir={}", profile.path().display());
        let out = lab.srv.exec(&[
            "timeout",
            "90",
            "chromium",
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            &user_dir,
            "--virtual-time-budget=5000",
            "--dump-dom",
            "http://127.0.0.1:19180/",
        ]);
        assert!(out.contains(r#"data-hint="pending-csr""#), "{out}");
        assert!(out.contains("pending CSRs"), "{out}");
        assert!(out.contains("xargs oc adm certificate approve"), "{out}");
    } else {
        skipped!("SKIPPED page check: chromium is not installed");
    }
}
