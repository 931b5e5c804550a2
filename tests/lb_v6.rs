//! Dual-stack (`network.ipv6`, issue #25) end to end with real clients: the
//! appliance in a "lab" network namespace, the nodes' backends and every
//! client in a second one joined by a veth pair carrying both families
//! (addresses added with `nodad`, so they are usable at once):
//!
//! | IPv4 | IPv6 | who |
//! |---|---|---|
//! | 10.67.0.1 | fd00:67::1 | the appliance (applianceIP, both VIPs) |
//! | 10.67.0.5 | fd00:67::5 | bootstrap |
//! | 10.67.0.10 / .11 | fd00:67::10 / ::11 | master-0, master-1 |
//! | 10.67.0.20 | fd00:67::20 | worker-0 |
//! | | fd00:67::150 | a DHCPv6 pool client (pool ::100–::1ff) |
//! | | fd00:67::77 | an unknown host of the IPv6 prefix |
//!
//! Each master runs two nginx (TLS, `/readyz` 200, `/` answers
//! `<node> v4` or `<node> v6`), one per family, so a test can kill one
//! family's backend alone. `curl -6` goes through the IPv6 API VIP, `curl
//! -4` through the IPv4 one; `crc-appliance lb status` and `/metrics` are
//! read in the lab namespace (the admin API has a fixed port there: the CLI
//! reads it from the cluster file). The appliance runs in-process inside
//! the lab namespace (`InProc::in_netns`); `/status` is its typed document.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::inproc::InProc;
use common::{BIN, Netns, Proc, have, netns_available, unique_name};
use crc_appliance::serve::status::StatusDoc;
use crc_appliance::services::lb::status::{BackendStatus, PoolStatus};

const APP4: &str = "10.67.0.1";
const APP6: &str = "fd00:67::1";
const NODES: [(&str, &str, &str); 4] = [
    ("bootstrap", "10.67.0.5", "fd00:67::5"),
    ("master-0", "10.67.0.10", "fd00:67::10"),
    ("master-1", "10.67.0.11", "fd00:67::11"),
    ("worker-0", "10.67.0.20", "fd00:67::20"),
];
const POOL6: &str = "fd00:67::150";
const UNKNOWN6: &str = "fd00:67::77";
const API_PORT: u16 = 16443;
const MCS_PORT: u16 = 18623;
const CA_MARKER: &str = "V6-BOOTSTRAP-CA-KEY-SECRET";
/// Served by TFTP over both families.
const TFTP_FILE: &str = "not really iPXE, served over IPv6";

struct Lab {
    srv: Netns,
    cli: Netns,
    app: InProc,
    /// (node, family) → its nginx.
    backends: Vec<((String, u8), Proc)>,
}

fn tools_ok() -> Result<(), String> {
    netns_available("v6lb")?;
    for t in ["curl", "nginx", "openssl"] {
        if !have(t) {
            return Err(format!("{t} is not installed"));
        }
    }
    Ok(())
}

macro_rules! require_lab {
    () => {
        if let Err(why) = tools_ok() {
            skipped!("SKIPPED {}: {why}", module_path!());
            return;
        }
    };
}

impl Lab {
    fn new() -> Lab {
        let base = unique_name("v6");
        let (ifs, ifc) = (format!("{base}s"), format!("{base}c"));
        let srv = Netns::new(format!("{base}srv"));
        let cli = Netns::new(format!("{base}cli"));
        common::veth(&ifs, &srv, &ifc, &cli);
        srv.ip(&["addr", "add", &format!("{APP4}/24"), "dev", &ifs]);
        srv.ip(&["addr", "add", &format!("{APP6}/64"), "dev", &ifs, "nodad"]);
        srv.ip(&["link", "set", &ifs, "up"]);
        for (_, v4, v6) in NODES {
            cli.ip(&["addr", "add", &format!("{v4}/24"), "dev", &ifc]);
            cli.ip(&["addr", "add", &format!("{v6}/64"), "dev", &ifc, "nodad"]);
        }
        for a in [POOL6, UNKNOWN6] {
            cli.ip(&["addr", "add", &format!("{a}/64"), "dev", &ifc, "nodad"]);
        }
        cli.ip(&["link", "set", &ifc, "up"]);

        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir_all(d.join("images")).unwrap();
        std::fs::create_dir_all(d.join("ign")).unwrap();
        std::fs::create_dir_all(d.join("tftp")).unwrap();
        std::fs::write(d.join("tftp/undionly.kpxe"), TFTP_FILE).unwrap();
        for (role, extra) in [
            ("bootstrap", format!(",\"marker\":\"{CA_MARKER}\"")),
            ("master", String::new()),
            ("worker", String::new()),
        ] {
            std::fs::write(
                d.join(format!("ign/{role}.ign")),
                format!("{{\"ignition\":{{\"version\":\"3.2.0\"}}{extra}}}"),
            )
            .unwrap();
        }
        common::self_signed_cert(&d.join("cert.pem"), &d.join("key.pem"), "api-int");
        let mut lab_backends = Vec::new();
        for (name, v4, v6) in &NODES[1..3] {
            for (fam, ip) in [(4u8, v4.to_string()), (6u8, format!("[{v6}]"))] {
                let p = spawn_nginx(&cli, d, name, fam, &ip);
                lab_backends.push(((name.to_string(), fam), p));
            }
        }

        let nodes: String = NODES
            .iter()
            .enumerate()
            .map(|(i, (name, v4, v6))| {
                let role = match *name {
                    "bootstrap" => "bootstrap",
                    n if n.starts_with("master") => "master",
                    _ => "worker",
                };
                format!(
                    "  - {{ name: {name}, role: {role}, mac: \"52:54:00:67:00:{i:02x}\", ip: {v4}, ipv6: \"{v6}\" }}\n"
                )
            })
            .collect();
        let yaml = format!(
            r#"name: v6
baseDomain: crc.testing
network:
  cidr: 10.67.0.0/24
  gateway: 10.67.0.254
  applianceIP: {APP4}
  ipv6:
    cidr: "fd00:67::/64"
    applianceIP: "{APP6}"
    pool: {{ start: "fd00:67::100", end: "fd00:67::1ff" }}
nodes:
{nodes}dns: {{ enabled: false }}
dhcp:
  enabled: false
  leaseFile: "{d}/leases.json"
loadBalancer:
  backendPorts: {{ api: {API_PORT}, machineConfig: {MCS_PORT}, ingressHttp: 10080, ingressHttps: 10443 }}
  healthCheck: {{ interval: 300ms, timeout: 300ms, rise: 1, fall: 2 }}
  connectTimeout: 1s
http:
  imagesDir: "{d}/images"
  ignitionDir: "{d}/ign"
admin:
  listen: 127.0.0.1:19180
pxe:
  tftpRoot: "{d}/tftp"
"#,
            d = d.display(),
        );
        let cluster = d.join("cluster.yaml");
        std::fs::write(&cluster, yaml).unwrap();
        let app = InProc::in_netns(srv.name()).start_file(dir, cluster);
        Lab {
            srv,
            cli,
            app,
            backends: lab_backends,
        }
    }

    /// SIGKILL one family's nginx of `node`.
    fn kill(&mut self, node: &str, fam: u8) {
        let i = self
            .backends
            .iter()
            .position(|((n, f), _)| n == node && *f == fam)
            .unwrap();
        drop(self.backends.remove(i));
    }

    /// `curl` in the clients' namespace with `args`; (exit code, stdout).
    fn curl(&self, args: &[&str]) -> (i32, String) {
        let mut a = vec!["curl", "-sSk", "--max-time", "5"];
        a.extend_from_slice(args);
        let out = self.cli.cmd(&a).stdin(Stdio::null()).output().unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).trim().to_string(),
        )
    }

    /// The bodies of `n` GETs of `url` (each must succeed).
    fn seen(&self, url: &str, n: usize) -> BTreeSet<String> {
        (0..n)
            .map(|i| {
                let (code, body) = self.curl(&[url]);
                assert_eq!(code, 0, "request {i} to {url} failed\n{}", self.app.log());
                body
            })
            .collect()
    }

    /// The typed status document.
    fn status(&self) -> StatusDoc {
        self.app.status()
    }

    fn wait_status(&self, what: &str, pred: impl Fn(&StatusDoc) -> bool) -> StatusDoc {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let st = self.status();
            if pred(&st) {
                return st;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}: {st:#?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// One TLS nginx for `name` on `ip` (a v4 address or a bracketed v6 one),
/// on the api and machine-config backend ports: `/readyz` 200, `/` answers
/// `<name> v<fam>`.
fn spawn_nginx(ns: &Netns, d: &Path, name: &str, fam: u8, ip: &str) -> Proc {
    let tag = format!("{name}-{fam}");
    let dd = d.display();
    let conf = format!(
        r#"daemon off;
master_process off;
worker_processes 1;
pid {dd}/{tag}.pid;
error_log stderr error;
events {{ worker_connections 128; }}
http {{
  access_log off;
  client_body_temp_path {dd}/tmp-{tag}; proxy_temp_path {dd}/tmp-{tag};
  fastcgi_temp_path {dd}/tmp-{tag}; uwsgi_temp_path {dd}/tmp-{tag}; scgi_temp_path {dd}/tmp-{tag};
  default_type text/plain;
  server {{
    listen {ip}:{API_PORT} ssl; listen {ip}:{MCS_PORT} ssl;
    ssl_certificate {dd}/cert.pem; ssl_certificate_key {dd}/key.pem;
    location = /readyz {{ return 200 "ok\n"; }}
    location = /healthz {{ return 200 "ok\n"; }}
    location / {{ return 200 "{name} v{fam}\n"; }}
  }}
}}
"#
    );
    let path = d.join(format!("{tag}.conf"));
    std::fs::write(&path, conf).unwrap();
    let child = ns
        .cmd(&[
            "nginx",
            "-e",
            "stderr",
            "-p",
            &dd.to_string(),
            "-c",
            path.to_str().unwrap(),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn nginx");
    let url = format!("https://{ip}:{API_PORT}/readyz");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let out = ns
            .cmd(&["curl", "-sSk", "--max-time", "1", &url])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        if out.status.success() {
            break;
        }
        assert!(Instant::now() < deadline, "nginx {tag} did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    Proc(child)
}

fn pool<'a>(st: &'a StatusDoc, name: &str) -> &'a PoolStatus {
    st.lb
        .as_ref()
        .and_then(|lb| lb.pools.iter().find(|p| p.name.as_str() == name))
        .unwrap_or_else(|| panic!("no pool {name} in {:#?}", st.lb))
}

/// The backend of `node` at `address` in `pool`.
fn backend<'a>(st: &'a StatusDoc, p: &str, node: &str, address: &str) -> &'a BackendStatus {
    pool(st, p)
        .backends
        .iter()
        .find(|b| b.node == node && b.address == address)
        .unwrap_or_else(|| panic!("no backend {p}/{node}/{address} in {:#?}", st.lb))
}

fn healthy(st: &StatusDoc, p: &str, node: &str, address: &str) -> bool {
    backend(st, p, node, address).healthy
}

fn set(v: &[&str]) -> BTreeSet<String> {
    v.iter().map(|s| s.to_string()).collect()
}

const M0_4: &str = "10.67.0.10:16443";
const M1_4: &str = "10.67.0.11:16443";
const M0_6: &str = "[fd00:67::10]:16443";
const M1_6: &str = "[fd00:67::11]:16443";

fn masters_up(st: &StatusDoc) -> bool {
    [
        ("master-0", M0_4),
        ("master-0", M0_6),
        ("master-1", M1_4),
        ("master-1", M1_6),
    ]
    .iter()
    .all(|(n, a)| healthy(st, "api", n, a))
}

#[test]
fn api_over_the_v6_vip_reaches_v6_backends_and_a_killed_one_is_drained() {
    require_lab!();
    let mut lab = Lab::new();
    let st = lab.wait_status("masters healthy in both families", masters_up);
    let api = pool(&st, "api");
    assert_eq!(api.frontend, format!("{APP4}:6443"), "{api:#?}");
    assert_eq!(
        api.frontend_v6.as_deref(),
        Some(format!("[{APP6}]:6443").as_str()),
        "{api:#?}"
    );
    assert_eq!(
        pool(&st, "ingress-https").frontend_v6.as_deref(),
        Some(format!("[{APP6}]:443").as_str())
    );
    // The bootstrap has no backend running: down in both families.
    assert!(!healthy(&st, "api", "bootstrap", "[fd00:67::5]:16443"));

    let v6 = format!("https://[{APP6}]:6443/");
    let v4 = format!("https://{APP4}:6443/");
    assert_eq!(lab.seen(&v6, 6), set(&["master-0 v6", "master-1 v6"]));
    assert_eq!(lab.seen(&v4, 6), set(&["master-0 v4", "master-1 v4"]));

    // `lb status` shows both frontends and both families' backends.
    let f = lab.app.cluster_file.display().to_string();
    let table = lab.srv.exec(&[BIN, "lb", "--cluster", &f, "status"]);
    for want in [
        format!("{APP4}:6443"),
        format!("[{APP6}]:6443"),
        M0_6.to_string(),
        M1_4.to_string(),
    ] {
        assert!(table.contains(&want), "{want} missing:\n{table}");
    }

    // Metrics: the IPv6 backend's samples carry `family`.
    let metrics = lab.srv.exec(&[
        "curl",
        "-sS",
        "--max-time",
        "5",
        "http://127.0.0.1:19180/metrics",
    ]);
    for want in [
        "crc_appliance_lb_backend_up{pool=\"api\",backend=\"master-1\",family=\"ipv6\"} 1",
        "crc_appliance_lb_backend_up{pool=\"api\",backend=\"master-1\"} 1",
    ] {
        assert!(metrics.contains(want), "{want} missing:\n{metrics}");
    }

    lab.kill("master-1", 6);
    // The check notices within fall × interval; until then a failed connect
    // is retried on the next backend, so no request fails meanwhile.
    for i in 0..20 {
        let (code, body) = lab.curl(&[&v6]);
        assert_eq!(code, 0, "request {i} after the kill failed");
        assert_eq!(body, "master-0 v6", "request {i}");
    }
    let st = lab.wait_status("master-1's IPv6 backend down", |st| {
        !healthy(st, "api", "master-1", M1_6)
    });
    assert!(healthy(&st, "api", "master-1", M1_4), "{:#?}", st.lb);
    assert!(
        backend(&st, "api", "master-1", M1_6)
            .last_check_error
            .as_deref()
            .is_some_and(|e| !e.is_empty()),
        "{:#?}",
        st.lb
    );
    assert_eq!(lab.seen(&v6, 6), set(&["master-0 v6"]));
    assert_eq!(lab.seen(&v4, 6), set(&["master-0 v4", "master-1 v4"]));

    // Draining master-0 by name drains both its families: IPv6 clients
    // then fall back to the IPv4 backend left (master-1).
    lab.srv
        .exec(&[BIN, "lb", "--cluster", &f, "disable", "master-0"]);
    assert_eq!(lab.seen(&v6, 4), set(&["master-1 v4"]));
    let st = lab.status();
    assert!(backend(&st, "api", "master-0", M0_6).disabled);
    assert!(backend(&st, "api", "master-0", M0_4).disabled);
}

#[test]
fn machine_config_over_v6_only_to_node_addresses() {
    require_lab!();
    let lab = Lab::new();
    lab.wait_status("masters healthy", masters_up);
    let url = format!("https://[{APP6}]:22623/config/worker");
    for (who, from) in [("worker-0", "fd00:67::20"), ("bootstrap", "fd00:67::5")] {
        let (code, body) = lab.curl(&["--interface", from, &url]);
        assert_eq!(code, 0, "{who} ({from}) was refused\n{}", lab.app.log());
        assert!(body.starts_with("master-"), "{who}: {body}");
    }
    for from in [POOL6, UNKNOWN6] {
        let (code, body) = lab.curl(&["--interface", from, &url]);
        assert_ne!(code, 0, "{from} got through: {body}");
    }
    let st = lab.status();
    assert!(
        pool(&st, "machine-config").refused_clients >= 2,
        "{:#?}",
        st.lb
    );
    lab.app.wait_log(
        "connection from fd00:67::150 (a DHCPv6 pool address) refused",
        Duration::from_secs(5),
    );
}

#[test]
fn ignition_over_v6_follows_the_per_node_rules() {
    require_lab!();
    let lab = Lab::new();
    let get = |from: &str, path: &str| {
        let url = format!("http://[{APP6}]:8080{path}");
        let (code, out) = lab.curl(&["--interface", from, "-w", "\n%{http_code}", &url]);
        assert_eq!(code, 0, "curl from {from} {path}");
        let (body, status) = out.rsplit_once('\n').unwrap_or(("", &out));
        (status.to_string(), body.to_string())
    };
    let boot = "/ignition/bootstrap.ign";
    let (code, body) = get("fd00:67::5", boot);
    assert_eq!(code, "200", "bootstrap over v6\n{}", lab.app.log());
    assert!(body.contains(CA_MARKER), "{body}");
    for from in ["fd00:67::10", "fd00:67::20", POOL6, UNKNOWN6] {
        let (code, body) = get(from, boot);
        assert_eq!(code, "403", "{from} got bootstrap.ign");
        assert!(!body.contains(CA_MARKER));
    }
    for (from, want) in [
        ("fd00:67::10", "200"),
        ("fd00:67::20", "200"),
        (POOL6, "403"),
        (UNKNOWN6, "403"),
    ] {
        assert_eq!(
            get(from, "/ignition/master.ign").0,
            want,
            "{from} master.ign"
        );
    }
    // A node's own config: to that node only.
    assert_eq!(get("fd00:67::20", "/ignition/worker-0.ign").0, "200");
    assert_eq!(get("fd00:67::10", "/ignition/worker-0.ign").0, "403");
    // The IPv4 rules are unchanged.
    let (code, _) = lab.curl(&[
        "--interface",
        "10.67.0.5",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        &format!("http://{APP4}:8080{boot}"),
    ]);
    assert_eq!(code, 0);
    let http = lab.status().http.expect("an http section");
    assert_eq!(
        http.listen.as_deref(),
        Some(format!("{APP4}:8080").as_str()),
        "{http:#?}"
    );
    assert_eq!(
        http.listen_v6.as_deref(),
        Some(format!("[{APP6}]:8080").as_str())
    );
}

#[test]
fn tftp_answers_on_the_v6_appliance_address() {
    require_lab!();
    let lab = Lab::new();
    for (url, from) in [
        (format!("tftp://[{APP6}]/undionly.kpxe"), "fd00:67::20"),
        (format!("tftp://{APP4}/undionly.kpxe"), "10.67.0.20"),
    ] {
        let (code, body) = lab.curl(&["--interface", from, &url]);
        assert_eq!(code, 0, "{url}\n{}", lab.app.log());
        assert_eq!(body, TFTP_FILE, "{url}");
    }
    let tftp = lab.status().tftp.expect("a tftp section");
    assert_eq!(
        tftp.listen.as_deref(),
        Some(format!("{APP4}:69").as_str()),
        "{tftp:#?}"
    );
    assert_eq!(
        tftp.listen_v6.as_deref(),
        Some(format!("[{APP6}]:69").as_str())
    );
}
