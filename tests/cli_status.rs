//! What the command line tells people, through the real binary: the
//! `status` table's columns against `status --json`, `lb status` as a
//! table and the `lb`/`node` actions as one line, `wait-for`'s deadline,
//! "Still waiting" notices and elapsed time, the default cluster file, and
//! the one-line answers of `node reinstall`, `lb disable`, `preflight`, a
//! missing cluster file and `vm status`.
//!
//! The lab is on loopback (no root): the appliance, run in the test
//! process (`common::inproc`; the CLI is the real binary), on 127.0.20.1
//! and 127.0.0.1, master-0's backends are `openssl s_server` on 127.0.20.10,
//! and master-0 takes its DHCP lease through a relayed DORA (a socket on
//! 127.0.20.2 standing in for a relay agent, as in tests/dhcp.rs).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::net::{Ipv4Addr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::inproc::InProc;
use common::{BIN, free_port};
use dhcproto::v4::{DhcpOption, Flags, Message, MessageType};
use dhcproto::{Decodable, Decoder, Encodable};
use serde_json::Value;

const M0_MAC: [u8; 6] = [0x52, 0x54, 0x00, 0x14, 0x00, 0x0a];
const M0_IP: &str = "127.0.20.10";
const CLUSTER_ENV: &str = "CRC_APPLIANCE_CLUSTER";
const NOTICE_ENV: &str = "CRC_APPLIANCE_WAIT_NOTICE_INTERVAL";

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

/// `crc-appliance ARGS` with `env` set and the caller's
/// `CRC_APPLIANCE_CLUSTER` removed: (exit code, stdout, stderr).
fn cli_env(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut c = Command::new(BIN);
    c.args(args).env_remove(CLUSTER_ENV).stdin(Stdio::null());
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `crc-appliance ARGS --cluster F`.
fn cli(cluster: &Path, args: &[&str]) -> (i32, String, String) {
    let mut a = args.to_vec();
    a.extend_from_slice(&["--cluster", cluster.to_str().unwrap()]);
    cli_env(&a, &[])
}

/// The cluster file of the lab: bootstrap, master-0 and worker-0 on
/// loopback; the admin API on `admin` (the CLI reads it from the file);
/// `extra` is appended (e.g. an `rhcos` section).
fn lab_yaml(dir: &Path, admin: u16, ports: [u16; 2], extra: &str) -> String {
    let d = dir.display();
    let [api, mc] = ports;
    format!(
        r#"name: test
baseDomain: crc.testing
network:
  cidr: 127.0.20.0/24
  gateway: 127.0.20.1
  applianceIP: 127.0.20.1
nodes:
  - {{ name: bootstrap, role: bootstrap, mac: "52:54:00:14:00:05", ip: 127.0.20.5 }}
  - {{ name: master-0, role: master, mac: "52:54:00:14:00:0a", ip: {M0_IP} }}
  - {{ name: worker-0, role: worker, mac: "52:54:00:14:00:14", ip: 127.0.20.20 }}
dns:
  enabled: false
dhcp:
  listen: 127.0.20.1:0
  leaseFile: "{d}/leases.json"
  relays: [127.0.20.2]
loadBalancer:
  listen: {{ api: 127.0.0.1:0, machineConfig: 127.0.0.1:0, ingressHttp: 127.0.0.1:0, ingressHttps: 127.0.0.1:0 }}
  backendPorts: {{ api: {api}, machineConfig: {mc}, ingressHttp: {http}, ingressHttps: {https} }}
  healthCheck: {{ interval: 1s, timeout: 1s, rise: 1, fall: 3 }}
http:
  listen: 127.0.0.1:0
  imagesDir: "{d}/images"
  ignitionDir: "{d}/ign"
admin:
  listen: 127.0.0.1:{admin}
{extra}"#,
        http = free_port(),
        https = free_port(),
    )
}

/// A running appliance on the lab file, master-0's backends (TLS, api and
/// machine-config) once [`Lab::backends`] is called.
struct Lab {
    app: InProc,
    cluster: PathBuf,
    ports: [u16; 2],
    procs: Procs,
}

impl Lab {
    fn start(extra: &str) -> Lab {
        let dir = tempfile::tempdir().unwrap();
        let ports = [free_port(), free_port()];
        let yaml = lab_yaml(dir.path(), free_port(), ports, extra);
        let cluster = dir.path().join("cluster.yaml");
        std::fs::write(&cluster, yaml).unwrap();
        let app = InProc::start_file(dir, cluster.clone());
        Lab {
            app,
            cluster,
            ports,
            procs: Procs(Vec::new()),
        }
    }

    fn dir(&self) -> &Path {
        self.cluster.parent().unwrap()
    }

    fn cli(&self, args: &[&str]) -> (i32, String, String) {
        cli(&self.cluster, args)
    }

    /// `openssl s_server -www` on master-0's api and machine-config ports.
    fn backends(&mut self) {
        let d = self.dir().to_path_buf();
        let (cert, key) = (d.join("cert.pem"), d.join("key.pem"));
        common::self_signed_cert(&cert, &key, "master-0");
        for port in self.ports {
            let c = Command::new("openssl")
                .args(["s_server", "-quiet", "-www", "-accept"])
                .arg(format!("{M0_IP}:{port}"))
                .arg("-cert")
                .arg(&cert)
                .arg("-key")
                .arg(&key)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            self.procs.0.push(c);
        }
    }

    /// master-0's lease: a relayed DISCOVER/REQUEST from 127.0.20.2.
    fn lease_master_0(&self) {
        let srv = self.app.addr("dhcp");
        let relay = Ipv4Addr::new(127, 0, 20, 2);
        let sock = UdpSocket::bind((relay, srv.port())).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let msg = |kind| {
            let u = Ipv4Addr::UNSPECIFIED;
            let mut m = Message::new_with_id(0x5ca1ab1e, u, u, u, relay, &M0_MAC);
            m.set_flags(Flags::default());
            m.set_hops(1);
            m.opts_mut().insert(DhcpOption::MessageType(kind));
            m
        };
        let reply = || {
            let mut buf = [0u8; 1500];
            let (n, _) = sock.recv_from(&mut buf).expect("a DHCP reply");
            Message::decode(&mut Decoder::new(&buf[..n])).unwrap()
        };
        sock.send_to(&msg(MessageType::Discover).to_vec().unwrap(), srv)
            .unwrap();
        let offer = reply();
        assert_eq!(offer.opts().msg_type(), Some(MessageType::Offer));
        let mut r = msg(MessageType::Request);
        r.opts_mut()
            .insert(DhcpOption::RequestedIpAddress(offer.yiaddr()));
        r.opts_mut()
            .insert(DhcpOption::ServerIdentifier(Ipv4Addr::new(127, 0, 20, 1)));
        sock.send_to(&r.to_vec().unwrap(), srv).unwrap();
        assert_eq!(reply().opts().msg_type(), Some(MessageType::Ack));
    }

    /// `status --json` until `ok` holds for it (≤ 30 s).
    fn timeline_until(&self, what: &str, ok: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let (code, out, err) = self.cli(&["status", "--json"]);
            assert_eq!(code, 0, "{out}{err}");
            let v: Value = serde_json::from_str(&out).unwrap();
            if ok(&v) {
                return v;
            }
            assert!(Instant::now() < deadline, "never {what}: {v:#}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// `lb status` until a row of `pool` and `backend` has a state
    /// starting with `state` (≤ 30 s); the whole table.
    fn lb_until(&self, pool: &str, backend: &str, state: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let (code, out, err) = self.cli(&["lb", "status"]);
            assert_eq!(code, 0, "{out}{err}");
            if cell(&out, pool, backend, "STATE").starts_with(state) {
                return out;
            }
            assert!(
                Instant::now() < deadline,
                "{pool} {backend} never {state}:\n{out}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

fn node<'a>(tl: &'a Value, name: &str) -> &'a Value {
    tl["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["node"] == name)
        .unwrap()
}

/// UTC time of day of a Unix time, as the table prints it.
fn hms(unix: u64) -> String {
    let s = unix % 86_400;
    format!("{:02}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60)
}

/// The column headers of a table's header line with their start offsets
/// (headers are separated by two or more spaces; one space is inside a
/// header such as `LAST CHANGE`).
fn header_columns(header: &str) -> Vec<(usize, String)> {
    let mut cols = Vec::new();
    let mut start = None;
    let b = header.as_bytes();
    for i in 0..=b.len() {
        let gap = i == b.len() || (b[i] == b' ' && (i + 1 == b.len() || b[i + 1] == b' '));
        match (start, gap) {
            (None, false) if b[i] != b' ' => start = Some(i),
            (Some(s), true) => {
                cols.push((s, header[s..i].trim().to_string()));
                start = None;
            }
            _ => {}
        }
    }
    cols
}

/// The cell of `row` under the column starting at `at` and ending where
/// the next one starts (`None`: the end of the line).
fn cell_at(row: &str, at: usize, next: Option<usize>) -> String {
    let end = next.unwrap_or(row.len()).min(row.len());
    row.get(at.min(end)..end).unwrap_or("").trim().to_string()
}

/// `lb status`: the cell in column `col` of the row for `pool`, `backend`.
fn cell(table: &str, pool: &str, backend: &str, col: &str) -> String {
    let mut lines = table.lines();
    let cols = header_columns(lines.next().unwrap_or(""));
    let Some(i) = cols.iter().position(|(_, c)| c == col) else {
        return String::new();
    };
    let row = lines.find(|l| {
        let mut w = l.split_whitespace();
        w.next() == Some(pool) && w.next() == Some(backend)
    });
    row.map(|r| cell_at(r, cols[i].0, cols.get(i + 1).map(|c| c.0)))
        .unwrap_or_default()
}

/// Item 1 of issue 27: every column of the `status` table holds the step
/// its header names (checked against `status --json`) for a node with a
/// DHCP lease and healthy API and machine-config backends.
#[test]
fn status_table_columns_hold_the_steps_their_headers_name() {
    require_tools!("openssl");
    let mut lab = Lab::start("");
    lab.lease_master_0();
    lab.backends();
    let healthy = |v: &Value| {
        let m = node(v, "master-0");
        ["lease", "apiHealthy", "mcsHealthy"]
            .iter()
            .all(|k| m[k].is_u64())
    };
    lab.timeline_until("master-0 leased and healthy", healthy);
    // The table between two equal JSON documents: no step was reached
    // while it was taken.
    let (tl, out) = loop {
        let before = lab.timeline_until("readable", |_| true);
        let (code, out, err) = lab.cli(&["status"]);
        assert_eq!(code, 0, "{err}");
        let after = lab.timeline_until("readable", |_| true);
        if before["nodes"] == after["nodes"] {
            break (after, out);
        }
    };
    let mut lines = out.lines();
    assert!(
        lines.next().unwrap().starts_with("cluster phase: "),
        "{out}"
    );
    let header = lines.next().unwrap();
    let cols = header_columns(header);
    let key = |col: &str| match col {
        "VM" => "vmStarted",
        "BMC" => "bmcPowerOn",
        "ISO" => "bootIso",
        "LEASE" => "lease",
        "ROOTFS" => "rootfs",
        "IGNITION" => "ignition",
        "INSTALL" => "installFinished",
        "BOOTED" => "firstBoot",
        "MCS" => "mcsHealthy",
        "API" => "apiHealthy",
        "INGRESS" => "ingressHealthy",
        "RENEWED" => "leaseRenewed",
        other => panic!("unknown column {other:?} in {header:?}"),
    };
    let names: Vec<&str> = cols.iter().map(|(_, c)| c.as_str()).collect();
    for want in ["NODE", "LEASE", "MCS", "API"] {
        assert!(names.contains(&want), "no {want} column:\n{out}");
    }
    let m0 = node(&tl, "master-0");
    let row = out
        .lines()
        .find(|l| l.starts_with("master-0 "))
        .unwrap_or_else(|| panic!("no master-0 row:\n{out}"));
    for (i, (at, col)) in cols.iter().enumerate().skip(1) {
        let got = cell_at(row, *at, cols.get(i + 1).map(|c| c.0));
        let want = m0[key(col)].as_u64().map_or("-".to_string(), hms);
        assert_eq!(got, want, "column {col} of master-0:\n{out}\njson: {m0:#}");
    }
    // No column for a step no node has reached (the lab has no VMs).
    assert!(!names.contains(&"VM") && !names.contains(&"BMC"), "{out}");
    let bootstrap = out.lines().find(|l| l.starts_with("bootstrap ")).unwrap();
    for (i, (at, _)) in cols.iter().enumerate().skip(1) {
        assert_eq!(cell_at(bootstrap, *at, cols.get(i + 1).map(|c| c.0)), "-");
    }
    drop(lab);
}

/// Item 9: `lb status` is a table with HAProxy's states (UP, DOWN, DRAIN,
/// MAINT), `--json` is the API's JSON, and `lb enable|disable` answer in
/// one line.
#[test]
fn lb_status_is_a_table_and_lb_actions_answer_in_one_line() {
    require_tools!("openssl");
    let mut lab = Lab::start("");
    lab.backends();
    let table = lab.lb_until("api", "master-0", "UP");
    let header = table.lines().next().unwrap();
    let names: Vec<String> = header_columns(header).into_iter().map(|c| c.1).collect();
    assert_eq!(
        names,
        [
            "POOL",
            "BACKEND",
            "ADDRESS",
            "STATE",
            "ACTIVE",
            "TOTAL",
            "LAST CHANGE",
            "LAST CHECK"
        ],
        "{table}"
    );
    assert_eq!(cell(&table, "api", "FRONTEND", "STATE"), "OPEN", "{table}");
    assert_eq!(
        cell(&table, "api", "master-0", "ADDRESS"),
        format!("{M0_IP}:{}", lab.ports[0]),
        "{table}"
    );
    assert!(
        cell(&table, "api", "master-0", "LAST CHECK").starts_with("ok ("),
        "{table}"
    );
    assert!(
        cell(&table, "api", "master-0", "LAST CHANGE").ends_with("s ago"),
        "{table}"
    );
    assert_eq!(cell(&table, "api", "bootstrap", "STATE"), "DOWN", "{table}");
    assert!(
        cell(&table, "api", "bootstrap", "LAST CHECK").contains("refused"),
        "{table}"
    );
    assert_eq!(cell(&table, "api", "master-0", "ACTIVE"), "0", "{table}");

    let (code, out, err) = lab.cli(&["lb", "disable", "worker-0"]);
    assert_eq!(
        (code, out.as_str(), err.as_str()),
        (0, "worker-0 disabled in ingress-http, ingress-https\n", "")
    );
    let table = lab.lb_until("ingress-https", "worker-0", "DRAIN");
    assert_eq!(
        cell(&table, "ingress-http", "worker-0", "STATE"),
        "DRAIN",
        "{table}"
    );
    // The bootstrap drained while every master is healthy: removed (MAINT).
    let (code, out, err) = lab.cli(&["lb", "disable", "bootstrap"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.lines().count(), 1, "{out}");
    assert!(out.starts_with("bootstrap disabled in api, machine-config"));
    lab.lb_until("machine-config", "bootstrap", "MAINT");
    let (code, out, err) = lab.cli(&["lb", "enable", "worker-0"]);
    assert_eq!(
        (code, out.as_str(), err.as_str()),
        (0, "worker-0 enabled in ingress-http, ingress-https\n", "")
    );

    let (code, out, err) = lab.cli(&["lb", "status", "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).expect("lb status --json is JSON");
    let api = &v["pools"][0];
    assert_eq!(api["name"], "api", "{v}");
    let m0 = api["backends"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["node"] == "master-0")
        .unwrap();
    assert_eq!(m0["healthy"], true, "{v}");
    assert!(m0["lastChange"].is_u64(), "{v}");
}

/// Item 7: `lb disable NOSUCH` is one error line, not a JSON body and an
/// error.
#[test]
fn lb_disable_of_an_unknown_node_is_one_error_line() {
    let lab = Lab::start("");
    let (code, out, err) = lab.cli(&["lb", "disable", "nosuch"]);
    assert_eq!(code, 1, "{out}{err}");
    assert_eq!(out, "", "{err}");
    assert_eq!(
        err,
        "error: lb disable nosuch: node \"nosuch\" is not a backend of any pool (HTTP 404)\n"
    );
}

/// Item 7 and 9: `node reinstall` answers in one line and says what will
/// happen when the file has no `pxe:` section; without `rhcos` (no install
/// script at all) it says it cannot.
#[test]
fn node_reinstall_says_what_happens_without_network_boot() {
    let lab = Lab::start("rhcos:\n  iso: /nonexistent/rhcos-live.iso\n");
    let (code, out, err) = lab.cli(&["node", "reinstall", "master-0"]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(
        out,
        "master-0 will install again at its next network boot\n"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("note: this cluster file has no `pxe:` section")
            && err.contains("/boot/boot.ipxe"),
        "{err}"
    );
    // The same appliance, asked with a file that has no rhcos section.
    let text = std::fs::read_to_string(&lab.cluster).unwrap();
    let (head, _) = text.split_once("rhcos:").unwrap();
    let plain = lab.dir().join("no-rhcos.yaml");
    std::fs::write(&plain, head).unwrap();
    let (code, out, err) = cli(&plain, &["node", "reinstall", "master-0"]);
    assert_eq!(code, 1, "{out}{err}");
    assert_eq!(out, "");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("error: node reinstall master-0: the cluster file has no `rhcos` section"),
        "{err}"
    );
}

/// Item 3: with `serve` down, `wait-for` says how long it waits, says
/// "Still waiting" with the admin API's error, and times out with it.
#[test]
fn wait_for_says_what_it_waits_for_while_serve_is_down() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("cluster.yaml");
    std::fs::write(&f, lab_yaml(dir.path(), free_port(), [1, 2], "")).unwrap();
    let f = f.to_str().unwrap();
    let args = [
        "wait-for",
        "bootstrap-complete",
        "--timeout",
        "3s",
        "--cluster",
        f,
    ];
    let (code, out, err) = cli_env(&args, &[(NOTICE_ENV, "1s")]);
    assert_eq!(code, 1, "{out}{err}");
    let first = out.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("Waiting up to 3s (until ")
            && first.ends_with(" UTC) for bootstrap-complete..."),
        "{out}"
    );
    let notices: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("Still waiting for bootstrap-complete: "))
        .collect();
    assert!(!notices.is_empty(), "{out}");
    assert!(
        notices
            .iter()
            .all(|l| l.contains("cannot reach the admin API") && l.contains("refused")),
        "{out}"
    );
    assert!(
        err.contains("bootstrap-complete not reached after 3s"),
        "{err}"
    );
}

/// Item 3 with `serve` up: the reason is what is missing; once the goal is
/// reached, the time elapsed.
#[test]
fn wait_for_says_what_is_missing_and_the_time_elapsed() {
    require_tools!("openssl");
    let mut lab = Lab::start("");
    let notice = [(NOTICE_ENV, "1s")];
    let f = lab.cluster.to_str().unwrap().to_string();
    let wait = |timeout: &str| {
        let args = [
            "wait-for",
            "bootstrap-complete",
            "--timeout",
            timeout,
            "--cluster",
            &f,
        ];
        cli_env(&args, &notice)
    };
    let (code, out, err) = wait("3s");
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.starts_with("Waiting up to 3s (until "), "{out}");
    assert!(
        out.lines()
            .any(|l| l
                .starts_with("Still waiting for bootstrap-complete: bootstrap: no DHCP lease yet")),
        "{out}"
    );
    // The bootstrap leaves the LB once drained with every master healthy:
    // the cluster is past bootstrap-complete.
    lab.backends();
    lab.lb_until("api", "master-0", "UP");
    let (code, _, err) = lab.cli(&["lb", "disable", "bootstrap"]);
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = wait("30s");
    assert_eq!(code, 0, "{out}{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].starts_with("Waiting up to 30s (until "), "{out}");
    assert!(out.contains("bootstrap-complete: reached\n"), "{out}");
    let last = lines.last().unwrap();
    assert!(
        last.starts_with("Time elapsed: ") && last.ends_with('s'),
        "{out}"
    );
}

/// Item 7: `preflight` states its count once (its report), not again as
/// an error line.
#[test]
fn preflight_prints_its_count_once() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("cluster.yaml");
    // The ignition directory does not exist: at least one problem.
    std::fs::write(&f, lab_yaml(dir.path(), free_port(), [1, 2], "")).unwrap();
    let (code, out, err) = cli(&f, &["preflight"]);
    assert_eq!(code, 1, "{out}{err}");
    let all = format!("{out}{err}");
    assert_eq!(all.matches("problem(s)").count(), 1, "{all}");
    assert!(
        out.lines().last().unwrap().starts_with("preflight: "),
        "{out}"
    );
    assert_eq!(err, "", "{out}");
}

/// Item 7: a missing cluster file names the OS error once.
#[test]
fn a_missing_cluster_file_names_the_os_error_once() {
    for cmd in [&["check"][..], &["render", "zone"], &["status"]] {
        let (code, _, err) = cli(Path::new("/nonexistent/x.yaml"), cmd);
        assert_eq!(code, 78, "{cmd:?}: {err}");
        assert_eq!(
            err,
            "error: cannot read cluster file /nonexistent/x.yaml: No such file or directory (os error 2)\n",
            "{cmd:?}"
        );
    }
}

/// Item 7: `vm status` keeps its columns aligned when domain and node
/// names are longer than usual (the domain carries the cluster name).
#[cfg(feature = "libvirt")]
#[test]
fn vm_status_columns_line_up_with_long_names() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display();
    std::fs::write(dir.path().join("node.xml"), "<node/>\n").unwrap();
    let yaml = format!(
        r#"name: openshift-lab-long-name
baseDomain: crc.testing
network: {{ cidr: 127.0.20.0/24, gateway: 127.0.20.1, applianceIP: 127.0.20.1 }}
nodes:
  - {{ name: bootstrap, role: bootstrap, mac: "52:54:00:14:00:05", ip: 127.0.20.5 }}
  - {{ name: master-0, role: master, mac: "52:54:00:14:00:0a", ip: 127.0.20.10 }}
  - {{ name: worker-infra-0, role: worker, mac: "52:54:00:14:00:14", ip: 127.0.20.20 }}
dns: {{ enabled: false }}
dhcp: {{ enabled: false }}
loadBalancer: {{ enabled: false }}
admin: {{ enabled: false }}
http: {{ listen: "127.0.20.1:18080", imagesDir: "{d}/images", ignitionDir: "{d}/ign" }}
rhcos: {{ iso: "{d}/rhcos.iso" }}
libvirt:
  uri: "test://{d}/node.xml"
  pool: {{ name: crc-cli-status, path: "{d}/pool" }}
  network: {{ name: crc-cli-status, bridge: crccli0 }}
"#
    );
    let f = dir.path().join("cluster.yaml");
    std::fs::write(&f, yaml).unwrap();
    let (code, out, err) = cli(&f, &["vm", "status"]);
    assert_eq!(code, 0, "{out}{err}");
    let mut lines = out.lines().skip_while(|l| !l.starts_with("NODE"));
    let header = lines.next().unwrap_or_else(|| panic!("no header:\n{out}"));
    let cols = header_columns(header);
    let names: Vec<&str> = cols.iter().map(|c| c.1.as_str()).collect();
    assert_eq!(
        names,
        ["NODE", "DOMAIN", "ROLE", "STATE", "PHASE", "MAC", "IP"],
        "{out}"
    );
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len(), 3, "{out}");
    for row in rows {
        let b = row.as_bytes();
        for (at, col) in cols.iter().skip(1) {
            assert!(
                b.get(at - 1) == Some(&b' ') && b.get(*at).is_some_and(|c| *c != b' '),
                "{col} does not start under its header in {row:?}:\n{out}"
            );
        }
    }
    let worker = out
        .lines()
        .find(|l| l.starts_with("worker-infra-0"))
        .unwrap();
    let domain = cell_at(worker, cols[1].0, Some(cols[2].0));
    assert_eq!(domain, "openshift-lab-long-name-worker-infra-0");
}

/// Item 14: without `--cluster`, `CRC_APPLIANCE_CLUSTER`, else
/// /etc/crc-appliance/cluster.yaml; with neither, one error naming both.
#[test]
fn the_cluster_file_defaults_to_the_environment_then_the_unit_path() {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("configs/example.yaml");
    let example = example.to_str().unwrap();
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("configs/demo.yaml");
    let (code, out, err) = cli_env(&["check"], &[(CLUSTER_ENV, example)]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with("cluster ocp4."), "{out}");
    // --cluster wins over the environment.
    let demo = demo.to_str().unwrap();
    let (code, out, err) = cli_env(&["check", "--cluster", demo], &[(CLUSTER_ENV, example)]);
    assert_eq!(code, 0, "{err}");
    assert!(!out.starts_with("cluster ocp4."), "{out}");
    // A variable naming no file says so.
    let (code, out, err) = cli_env(&["check"], &[(CLUSTER_ENV, "/nonexistent/c.yaml")]);
    assert_eq!(code, 2, "{out}{err}");
    assert_eq!(
        err,
        "error: CRC_APPLIANCE_CLUSTER names /nonexistent/c.yaml, which does not exist (pass --cluster <FILE> to use another)\n"
    );
    require!(
        !Path::new("/etc/crc-appliance/cluster.yaml").exists(),
        "/etc/crc-appliance/cluster.yaml exists on this host (the default is taken)"
    );
    let (code, out, err) = cli_env(&["status"], &[]);
    assert_eq!(code, 2, "{out}{err}");
    assert_eq!(
        err,
        "error: no cluster file: pass --cluster <FILE> or set CRC_APPLIANCE_CLUSTER (/etc/crc-appliance/cluster.yaml, the default, does not exist)\n"
    );
}
