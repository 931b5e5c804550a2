//! Secrets only to the node they belong to (issue #22 items 1 and 2), end
//! to end with real `curl`: the appliance (in-process, `InProc::in_netns`)
//! in a "lab" network namespace, its
//! clients in a second one joined by a veth pair, each client speaking from
//! its own source address (`--interface`):
//!
//! | address | who |
//! |---|---|
//! | 10.66.0.1 | the appliance (`applianceIP`, in the lab namespace) |
//! | 10.66.0.5 / .10 / .20 | bootstrap, master-0, worker-0 |
//! | 10.66.0.150 | a DHCP pool client (pool .100–.199) |
//! | 10.66.0.77 | an unknown host inside `network.cidr` |
//! | 10.66.0.40 / .41 | a jump host (when listed in the extra cidrs) and its neighbour |
//! | 192.0.2.5 | a BMC (`http.bootIsoCidrs`) |
//! | 198.51.100.5 | a host outside the cluster network |
//!
//! The ignition configs (`bootstrap.ign` carries a CA-key marker), the
//! per-node boot ISOs (a live ISO with kargs embed areas, built with
//! xorriso) and the machine-config frontend (22623) in front of a TLS
//! backend (python3 `ssl`, on every node address of the clients' namespace)
//! that logs each request line it receives, so the test sees what reached
//! it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::initramfs::{ISOLINUX_BIN, LDLINUX_C32, rhcos_iso};
use common::inproc::InProc;
use common::{Netns, Proc, have, netns_available, unique_name};
use crc_appliance::serve::status::StatusDoc;
use crc_appliance::services::lb::status::PoolStatus;

const APPLIANCE: &str = "10.66.0.1";
const BOOTSTRAP: &str = "10.66.0.5";
const MASTER0: &str = "10.66.0.10";
const WORKER0: &str = "10.66.0.20";
const POOL: &str = "10.66.0.150";
const UNKNOWN: &str = "10.66.0.77";
const JUMP: &str = "10.66.0.40";
const NEIGHBOUR: &str = "10.66.0.41";
const BMC: &str = "192.0.2.5";
const OUTSIDE: &str = "198.51.100.5";
/// The machine-config backends' port on the node addresses.
const MCS_PORT: u16 = 18623;
/// In bootstrap.ign only.
const CA_MARKER: &str = "ACL-BOOTSTRAP-CA-KEY-SECRET";

/// Every secret path the matrix below is about.
const BOOTSTRAP_IGN: &str = "/ignition/bootstrap.ign";
const BOOTSTRAP_ALIAS: &str = "/bootstrap.ign";
const MASTER_IGN: &str = "/ignition/master.ign";
const WORKER_IGN: &str = "/ignition/worker.ign";
const MASTER0_IGN: &str = "/ignition/master-0.ign";
const WORKER0_IGN: &str = "/ignition/worker-0.ign";
const MASTER0_ISO: &str = "/boot/master-0.iso";
const WORKER0_ISO: &str = "/boot/worker-0.iso";
const ALL: [&str; 8] = [
    BOOTSTRAP_IGN,
    BOOTSTRAP_ALIAS,
    MASTER_IGN,
    WORKER_IGN,
    MASTER0_IGN,
    WORKER0_IGN,
    MASTER0_ISO,
    WORKER0_ISO,
];

/// A TLS server answering `200 mcs` to any request and appending each
/// request line to a file (argv: cert key port log).
const MCS_BACKEND: &str = r#"
import socket, ssl, sys, threading
cert, key, port, log = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("0.0.0.0", port))
srv.listen(64)
lock = threading.Lock()
def handle(c):
    try:
        c.settimeout(5)
        with ctx.wrap_socket(c, server_side=True) as s:
            data = b""
            while b"\r\n\r\n" not in data and len(data) < 8192:
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
            line = data.split(b"\r\n", 1)[0].decode("latin-1")
            with lock, open(log, "a") as f:
                f.write(line + "\n")
            s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nmcs")
    except Exception:
        pass
    finally:
        c.close()
while True:
    c, _ = srv.accept()
    threading.Thread(target=handle, args=(c,), daemon=True).start()
"#;

struct Lab {
    /// The appliance's namespace.
    srv: Netns,
    /// Every client and the machine-config backends.
    cli: Netns,
    app: InProc,
    _backend: Proc,
    /// The backend's request log.
    mcs_log: PathBuf,
}

/// Root, network namespaces and the tools this file needs; the reason to
/// skip otherwise.
fn tools_ok() -> Result<(), String> {
    netns_available("acl")?;
    for t in ["curl", "xorriso", "openssl", "python3"] {
        if !have(t) {
            return Err(format!("{t} is not installed"));
        }
    }
    for f in [ISOLINUX_BIN, LDLINUX_C32] {
        if !Path::new(f).is_file() {
            return Err(format!(
                "{f} missing (install isolinux and syslinux-common)"
            ));
        }
    }
    Ok(())
}

macro_rules! require_lab {
    () => {
        if let Err(why) = tools_ok() {
            common::note_skip(&format!("SKIPPED {}: {why}", module_path!()));
            return;
        }
    };
}

impl Lab {
    /// The lab with `http_extra` / `lb_extra` appended to the `http` and
    /// `loadBalancer` sections (indented lines, or empty).
    fn new(http_extra: &str, lb_extra: &str) -> Lab {
        let base = unique_name("acl");
        let (ifs, ifc) = (format!("{base}s"), format!("{base}c"));
        let srv = Netns::new(format!("{base}srv"));
        let cli = Netns::new(format!("{base}cli"));
        common::veth(&ifs, &srv, &ifc, &cli);
        srv.ip(&["addr", "add", &format!("{APPLIANCE}/24"), "dev", &ifs]);
        srv.ip(&["link", "set", &ifs, "up"]);
        for net in ["192.0.2.0/24", "198.51.100.0/24"] {
            srv.ip(&["route", "add", net, "dev", &ifs]);
        }
        for a in [BOOTSTRAP, MASTER0, WORKER0, POOL, UNKNOWN, JUMP, NEIGHBOUR] {
            cli.ip(&["addr", "add", &format!("{a}/24"), "dev", &ifc]);
        }
        for a in [BMC, OUTSIDE] {
            cli.ip(&["addr", "add", &format!("{a}/24"), "dev", &ifc]);
        }
        cli.ip(&["link", "set", &ifc, "up"]);

        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir_all(d.join("images")).unwrap();
        std::fs::create_dir_all(d.join("ign")).unwrap();
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
        let iso = rhcos_iso(d, "acl", [b"kernel", b"initrd"], 1024);
        let (cert, key) = (d.join("cert.pem"), d.join("key.pem"));
        common::self_signed_cert(&cert, &key, "api-int.acl.crc.testing");
        let script = d.join("mcs.py");
        std::fs::write(&script, MCS_BACKEND).unwrap();
        let mcs_log = d.join("mcs.log");
        std::fs::write(&mcs_log, "").unwrap();
        let port = MCS_PORT.to_string();
        let backend = cli
            .cmd(&[
                "python3",
                script.to_str().unwrap(),
                cert.to_str().unwrap(),
                key.to_str().unwrap(),
                &port,
                mcs_log.to_str().unwrap(),
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let backend = Proc(backend);

        let yaml = format!(
            r#"name: acl
baseDomain: crc.testing
network: {{ cidr: 10.66.0.0/24, gateway: 10.66.0.254, applianceIP: {APPLIANCE} }}
nodes:
  - {{ name: bootstrap, role: bootstrap, mac: "52:54:00:42:00:05", ip: {BOOTSTRAP} }}
  - {{ name: master-0, role: master, mac: "52:54:00:42:00:0a", ip: {MASTER0} }}
  - {{ name: worker-0, role: worker, mac: "52:54:00:42:00:14", ip: {WORKER0} }}
dns: {{ enabled: false }}
dhcp:
  enabled: false
  leaseFile: "{d}/leases.json"
  pool: {{ start: 10.66.0.100, end: 10.66.0.199 }}
loadBalancer:
  listen: {{ api: "{APPLIANCE}:6443", machineConfig: "{APPLIANCE}:22623", ingressHttp: "{APPLIANCE}:80", ingressHttps: "{APPLIANCE}:443" }}
  backendPorts: {{ api: 16443, machineConfig: {MCS_PORT}, ingressHttp: 10080, ingressHttps: 10443 }}
  healthCheck: {{ interval: 300ms, timeout: 300ms, rise: 1, fall: 2 }}
{lb_extra}http:
  listen: {APPLIANCE}:8080
  imagesDir: "{d}/images"
  ignitionDir: "{d}/ign"
  bootIsoCidrs: [192.0.2.0/24]
{http_extra}admin:
  listen: 127.0.0.1:0
rhcos:
  iso: {}
"#,
            iso.path.display(),
            d = d.display(),
        );
        let cluster = d.join("cluster.yaml");
        std::fs::write(&cluster, yaml).unwrap();
        let app = InProc::in_netns(srv.name()).start_file(dir, cluster);
        Lab {
            srv,
            cli,
            app,
            _backend: backend,
            mcs_log,
        }
    }

    /// GET `path` from `from` (a client address, or `None` for the
    /// appliance host's own address); (status, body).
    fn get(&self, from: Option<&str>, path: &str) -> (String, Vec<u8>) {
        let url = format!("http://{APPLIANCE}:8080{path}");
        let mut args = vec!["curl", "-sS", "--max-time", "20", "-w", "\n%{http_code}"];
        let ns = match from {
            Some(a) if a.starts_with("127.") => {
                args.extend(["--interface", a]);
                &self.srv
            }
            Some(a) => {
                args.extend(["--interface", a]);
                &self.cli
            }
            None => &self.srv,
        };
        args.push(&url);
        let out = ns.cmd(&args).stdin(Stdio::null()).output().unwrap();
        assert!(out.status.success(), "curl {from:?} {path}: {out:?}");
        let mut body = out.stdout;
        let split = body.iter().rposition(|b| *b == b'\n').unwrap();
        let code = String::from_utf8_lossy(&body[split + 1..]).into_owned();
        body.truncate(split);
        (code, body)
    }

    /// Assert the status of each path for `from`; a refused body never
    /// carries the CA marker.
    fn expect(&self, from: Option<&str>, want: &[(&str, &str)]) {
        for (path, code) in want {
            let (got, body) = self.get(from, path);
            assert_eq!(&got, code, "{from:?} {path}\nlog:\n{}", self.app.log());
            if got == "403" {
                assert!(
                    !String::from_utf8_lossy(&body).contains(CA_MARKER),
                    "{from:?} {path}"
                );
            }
            if got == "200" && path.contains("bootstrap") {
                assert!(
                    String::from_utf8_lossy(&body).contains(CA_MARKER),
                    "{from:?} {path}"
                );
            }
        }
    }

    /// Every path answered `code` to `from`.
    fn expect_all(&self, from: Option<&str>, code: &str) {
        let want: Vec<(&str, &str)> = ALL.iter().map(|p| (*p, code)).collect();
        self.expect(from, &want);
    }

    /// `curl -k https://<applianceIP>:22623/config/<tag>` from `from`:
    /// (curl's exit code, body).
    fn mcs(&self, from: &str, tag: &str) -> (i32, String) {
        let url = format!("https://{APPLIANCE}:22623/config/{tag}");
        let ns = if from.starts_with("127.") {
            &self.srv
        } else {
            &self.cli
        };
        let out = ns
            .cmd(&["curl", "-sk", "--max-time", "10", "--interface", from, &url])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    }

    /// The request lines the machine-config backends received.
    fn mcs_seen(&self) -> String {
        std::fs::read_to_string(&self.mcs_log).unwrap()
    }

    fn admin(&self, path: &str) -> String {
        let url = format!("http://{}{path}", self.app.addr("admin"));
        self.srv.exec(&["curl", "-sS", "--max-time", "10", &url])
    }

    /// The typed status document.
    fn status(&self) -> StatusDoc {
        self.app.status()
    }

    fn mc_pool(&self) -> PoolStatus {
        let st = self.status();
        st.lb
            .expect("an lb section")
            .pools
            .into_iter()
            .find(|p| p.name.as_str() == "machine-config")
            .expect("a machine-config pool")
    }

    /// Wait until both machine-config backends are healthy.
    fn wait_mcs_healthy(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let pool = self.mc_pool();
            let healthy = pool.backends.iter().all(|b| b.healthy);
            if healthy {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "machine-config backends never healthy: {pool:#?}\n{}",
                self.app.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Proxied connections the machine-config backends got, per the LB.
    fn mcs_forwarded(&self) -> u64 {
        self.mc_pool()
            .backends
            .iter()
            .map(|b| b.total_connections)
            .sum()
    }

    /// WARN lines of the appliance's log that mention `needle`.
    fn warnings(&self, needle: &str) -> Vec<String> {
        self.app
            .log()
            .lines()
            .filter(|l| l.contains("WARN") && l.contains(needle))
            .map(str::to_string)
            .collect()
    }

    /// Make sure every log line of the requests so far is in: one more
    /// refusal from a fresh address (`marker`) and wait for its line.
    fn flush_log(&self, marker: &str) {
        self.cli
            .ip(&["addr", "add", &format!("{marker}/24"), "dev", &self.ifc()]);
        let (code, _) = self.get(Some(marker), BOOTSTRAP_IGN);
        assert_eq!(code, "403");
        self.app.wait_log(
            &format!("bootstrap.ign refused to {marker} "),
            Duration::from_secs(10),
        );
    }

    /// The clients' veth end.
    fn ifc(&self) -> String {
        let out = self.cli.exec(&["ip", "-o", "link", "show", "type", "veth"]);
        let name = out.split(':').nth(1).unwrap().trim();
        name.split('@').next().unwrap().to_string()
    }
}

/// A DHCP pool client, an unknown host in the cidr, a host outside it and a
/// BMC ask for every ignition config and ISO: 403 (the BMC gets the ISOs
/// only), no body with the CA key, and one warning per address naming the
/// address, what it is and the first file it asked for.
#[test]
fn strangers_get_403_for_every_secret_logged_once_per_address() {
    require_lab!();
    let lab = Lab::new("", "");
    for from in [POOL, UNKNOWN, OUTSIDE] {
        lab.expect_all(Some(from), "403");
        // Asked again: still refused, not logged again.
        lab.expect(Some(from), &[(BOOTSTRAP_IGN, "403")]);
    }
    lab.expect(
        Some(BMC),
        &[
            (BOOTSTRAP_IGN, "403"),
            (BOOTSTRAP_ALIAS, "403"),
            (MASTER_IGN, "403"),
            (WORKER_IGN, "403"),
            (MASTER0_IGN, "403"),
            (WORKER0_IGN, "403"),
            (MASTER0_ISO, "200"),
            (WORKER0_ISO, "200"),
        ],
    );
    lab.flush_log("10.66.0.78");
    for (addr, what) in [
        (POOL, "(a DHCP pool address)"),
        (UNKNOWN, "(not a node (inside 10.66.0.0/24))"),
        (OUTSIDE, "(outside the cluster network)"),
        (BMC, "(outside the cluster network)"),
    ] {
        let w = lab.warnings(&format!("refused to {addr} "));
        assert_eq!(w.len(), 1, "{addr}: one warning per address: {w:#?}");
        assert!(
            w[0].contains(&format!("ignition bootstrap.ign refused to {addr} {what}")),
            "{w:?}"
        );
        assert!(w[0].contains("served only to the bootstrap node"), "{w:?}");
    }
    // The fetch log records each refusal with what the client is.
    let fetches = lab.status().http.expect("an http section").ignition_fetches;
    assert!(
        fetches.iter().any(|f| f.client == POOL
            && f.file == "bootstrap.ign"
            && f.status == 403
            && f.detail == "refused: a DHCP pool address"),
        "{fetches:#?}"
    );
    assert!(
        !fetches
            .iter()
            .any(|f| f.status == 200 && f.client != "10.66.0.1"),
        "{fetches:#?}"
    );
}

/// Each node gets its role's pointer configs and its own files, never
/// bootstrap.ign (unless it is the bootstrap node) nor another node's; the
/// appliance host (loopback and applianceIP) gets everything.
#[test]
fn each_node_gets_its_own_files_and_the_host_gets_everything() {
    require_lab!();
    let lab = Lab::new("", "");
    lab.expect(
        Some(WORKER0),
        &[
            (BOOTSTRAP_IGN, "403"),
            (BOOTSTRAP_ALIAS, "403"),
            (WORKER_IGN, "200"),
            (MASTER_IGN, "200"),
            (WORKER0_IGN, "200"),
            (MASTER0_IGN, "403"),
            (WORKER0_ISO, "200"),
            (MASTER0_ISO, "403"),
        ],
    );
    lab.expect(
        Some(MASTER0),
        &[
            (BOOTSTRAP_IGN, "403"),
            (MASTER_IGN, "200"),
            (MASTER0_IGN, "200"),
            (WORKER0_IGN, "403"),
            (MASTER0_ISO, "200"),
            (WORKER0_ISO, "403"),
        ],
    );
    lab.expect(
        Some(BOOTSTRAP),
        &[
            (BOOTSTRAP_IGN, "200"),
            (BOOTSTRAP_ALIAS, "200"),
            (MASTER_IGN, "200"),
            (MASTER0_IGN, "403"),
            (MASTER0_ISO, "403"),
        ],
    );
    lab.expect_all(Some("127.0.0.1"), "200");
    lab.expect_all(None, "200");
    lab.flush_log("10.66.0.79");
    let w = lab.warnings(&format!("refused to {WORKER0} "));
    assert_eq!(w.len(), 1, "{w:#?}");
    assert!(
        w[0].contains("ignition bootstrap.ign refused to 10.66.0.20 (node worker-0)"),
        "{w:?}"
    );
    // The fetch log attributes the node's own fetches to it.
    let fetches = lab.status().http.expect("an http section").ignition_fetches;
    assert!(
        fetches.iter().any(|f| f.client == WORKER0
            && f.node.as_deref() == Some("worker-0")
            && f.file == "worker.ign"
            && f.status == 200),
        "{fetches:#?}"
    );
}

/// The machine-config frontend closes a connection from anyone but a node
/// (or the appliance host) right after accept: the backend never sees the
/// request, the LB never connects a backend for it, `/metrics` and
/// `/status` count it, and the log has one warning per address. A node
/// and the appliance host reach the backend.
#[test]
fn machine_config_frontend_closes_non_nodes_at_accept() {
    require_lab!();
    let lab = Lab::new("", "");
    lab.wait_mcs_healthy();
    let before = lab.mcs_forwarded();
    for (from, tag) in [
        (POOL, "pool-1"),
        (POOL, "pool-2"),
        (UNKNOWN, "unknown"),
        (OUTSIDE, "outside"),
    ] {
        let (code, body) = lab.mcs(from, tag);
        assert_ne!(code, 0, "{from}: the connection must be closed ({body})");
        assert!(body.is_empty(), "{from}: {body}");
    }
    assert_eq!(lab.mcs_forwarded(), before, "no backend connected");
    let (code, body) = lab.mcs(WORKER0, "worker-0");
    assert_eq!((code, body.as_str()), (0, "mcs"), "{}", lab.app.log());
    let (code, body) = lab.mcs("127.0.0.1", "loopback");
    assert_eq!((code, body.as_str()), (0, "mcs"));
    assert_eq!(lab.mcs_forwarded(), before + 2);
    let seen = lab.mcs_seen();
    for tag in ["pool-1", "pool-2", "unknown", "outside"] {
        assert!(!seen.contains(&format!("/config/{tag} ")), "{tag}: {seen}");
    }
    for tag in ["worker-0", "loopback"] {
        assert!(
            seen.contains(&format!("GET /config/{tag} ")),
            "{tag}: {seen}"
        );
    }
    let metrics = lab.admin("/metrics");
    assert!(
        metrics.contains("crc_appliance_lb_frontend_refused_total{pool=\"machine-config\"} 4\n"),
        "{metrics}"
    );
    assert!(
        metrics.contains("crc_appliance_lb_frontend_refused_total{pool=\"api\"} 0\n"),
        "{metrics}"
    );
    assert_eq!(lab.mc_pool().refused_clients, 4);
    let w = lab.warnings(&format!("connection from {POOL} "));
    assert_eq!(w.len(), 1, "{w:#?}");
    assert!(
        w[0].contains(&format!(
            "lb machine-config: connection from {POOL} (a DHCP pool address) refused"
        )),
        "{w:?}"
    );
    assert_eq!(
        lab.warnings(&format!("connection from {UNKNOWN} ")).len(),
        1
    );
}

/// A jump host listed in `http.ignitionClientCidrs` and
/// `loadBalancer.machineConfigClientCidrs` gets every ignition config and
/// ISO and reaches the machine-config server; its neighbour, one address
/// off, gets neither until a reload lists it too.
#[test]
fn extra_cidrs_admit_a_jump_host_and_nobody_else() {
    require_lab!();
    let lab = Lab::new(
        &format!("  ignitionClientCidrs: [{JUMP}/32]\n"),
        &format!("  machineConfigClientCidrs: [{JUMP}/32]\n"),
    );
    lab.expect_all(Some(JUMP), "200");
    lab.expect_all(Some(NEIGHBOUR), "403");
    lab.wait_mcs_healthy();
    let (code, body) = lab.mcs(JUMP, "jump");
    assert_eq!((code, body.as_str()), (0, "mcs"), "{}", lab.app.log());
    let (code, _) = lab.mcs(NEIGHBOUR, "neighbour");
    assert_ne!(code, 0);
    let seen = lab.mcs_seen();
    assert!(seen.contains("GET /config/jump "), "{seen}");
    assert!(!seen.contains("/config/neighbour "), "{seen}");
    assert_eq!(lab.mc_pool().refused_clients, 1);

    // The operator lists the neighbour too; a reload (what SIGHUP does)
    // applies it.
    let file = &lab.app.cluster_file;
    let text = std::fs::read_to_string(file).unwrap();
    let both = format!("[{JUMP}/32, {NEIGHBOUR}/32]");
    std::fs::write(file, text.replace(&format!("[{JUMP}/32]"), &both)).unwrap();
    let reload = lab.app.reload();
    assert!(reload.ok, "{reload:?}\n{}", lab.app.log());
    lab.app
        .wait_log("configuration reloaded", Duration::from_secs(20));
    lab.expect_all(Some(NEIGHBOUR), "200");
    let (code, body) = lab.mcs(NEIGHBOUR, "neighbour-2");
    assert_eq!((code, body.as_str()), (0, "mcs"), "{}", lab.app.log());
    assert_eq!(lab.mc_pool().refused_clients, 1);
}
