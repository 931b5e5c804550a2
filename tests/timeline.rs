//! The install timeline end to end: the appliance in a "lab" network
//! namespace, the nodes in a second one joined by a veth pair. Each node
//! takes its DHCP lease with udhcpc (its MAC set on the veth), downloads
//! the rootfs and its ignition with curl from its own address, opens a
//! connection to the machine-config frontend, and serves TLS health
//! endpoints with `openssl s_server`; the test drives the cluster through
//! every phase and asserts `/status`'s `timeline`, `status --cluster F`,
//! `wait-for` (timeout and success) and `/metrics`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::udhcpc::{kv, udhcpc_once};
use common::{Appliance, BIN, Netns, run_ok, unique_name};
use serde_json::Value;

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
        run_ok(
            "ip",
            &[
                "link",
                "add",
                &ifs,
                "netns",
                lab.srv.name(),
                "type",
                "veth",
                "peer",
                "name",
                &lab.ifc,
                "netns",
                lab.nodes.name(),
            ],
        );
        lab.srv
            .ip(&["addr", "add", &format!("{APPLIANCE}/24"), "dev", &ifs]);
        lab.srv.ip(&["link", "set", &ifs, "up"]);
        lab.nodes.ip(&["link", "set", &lab.ifc, "up"]);
        lab
    }

    fn cluster(&self, dir: &Path) -> std::path::PathBuf {
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
  healthCheck: {{ interval: 300ms, timeout: 300ms, rise: 1, fall: 2 }}
http:
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
        let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
        for port in BACKENDS {
            let c = self
                .nodes
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
                .unwrap();
            procs.0.push(c);
        }
    }
}

fn timeline(lab: &Lab, cluster: &Path) -> Value {
    let (code, out, err) = lab.cli(cluster, &["status", "--json"]);
    assert_eq!(code, 0, "status --json: {out}{err}");
    serde_json::from_str(&out).unwrap()
}

fn node<'a>(tl: &'a Value, name: &str) -> &'a Value {
    tl["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["node"] == name)
        .unwrap()
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
    let app = Appliance::launch()
        .netns(lab.srv.name())
        .ready_timeout(Duration::from_secs(30))
        .start_path(&cluster);
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
    assert_eq!(node(&tl, "master-0")["ignition"], Value::Null, "{tl}");
    assert_eq!(tl["operatorFetches"][0]["client"], APPLIANCE, "{tl}");
    assert_eq!(tl["operatorFetches"][0]["file"], "master-0.ign", "{tl}");

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
            .all(|(n, ..)| node(&tl, n)["mcsHealthy"].is_u64())
        {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "machine-config backends not healthy: {tl:#}\nLB: {}\nappliance:\n{}",
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

    let tl = timeline(&lab, &cluster);
    assert_eq!(tl["phase"], "ingress-ready", "{tl}");
    assert_eq!(node(&tl, "master-0")["leaseRenewals"], 1, "{tl}");
    assert!(node(&tl, "master-0")["leaseRenewed"].is_u64(), "{tl}");
    for p in [
        "bootstrapping",
        "bootstrap-complete",
        "bootstrap-removed",
        "ingress-ready",
    ] {
        assert!(tl["phaseTimes"][p].is_u64(), "{p}: {tl}");
    }
    let m0 = node(&tl, "master-0");
    for step in [
        "lease",
        "rootfs",
        "ignition",
        "firstBoot",
        "apiHealthy",
        "mcsHealthy",
    ] {
        assert!(m0[step].is_u64(), "master-0 {step}: {m0}");
    }
    assert_eq!(m0["rootfsBytes"], ROOTFS_LEN as u64, "{m0}");
    assert!(
        m0["ignition"].as_u64() >= tl["operatorFetches"][0]["unixTime"].as_u64(),
        "{tl}"
    );
    assert!(node(&tl, "worker-0")["ingressHealthy"].is_u64(), "{tl}");
    assert_eq!(node(&tl, "worker-0")["firstBoot"], Value::Null, "{tl}");

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
