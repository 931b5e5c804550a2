//! The load balancer end to end: the real services (in this process; the
//! binary where the process's descriptor limit matters) in front of real
//! nginx backends (HTTP and TLS) on 127.0.20.x, driven by curl, openssl
//! s_client, the `crc-appliance lb` CLI and plain TCP sockets.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

mod common;

use std::collections::BTreeSet;
use std::io::{Read as _, Write as _};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::inproc::InProc;
use common::{Appliance, BIN, Served, run};
use crc_appliance::services::lb::status::{BackendStatus, LbStatus, PoolStatus};

const NODES: [(&str, &str); 6] = [
    ("bootstrap", "127.0.20.5"),
    ("master-0", "127.0.20.10"),
    ("master-1", "127.0.20.11"),
    ("master-2", "127.0.20.12"),
    ("worker-0", "127.0.20.20"),
    ("worker-1", "127.0.20.21"),
];
const INTERVAL_MS: u64 = 200;
const FALL: u64 = 2;

/// A port free on every node address (and 127.0.0.1), found by binding.
fn free_port() -> u16 {
    for _ in 0..200 {
        let Ok(l) = TcpListener::bind("127.0.0.1:0") else {
            continue;
        };
        let port = l.local_addr().unwrap().port();
        let all_free = NODES
            .iter()
            .all(|(_, ip)| TcpListener::bind(format!("{ip}:{port}")).is_ok());
        if all_free {
            return port;
        }
    }
    panic!("no free port found");
}

struct Ports {
    api: u16,
    mc: u16,
    http: u16,
    https: u16,
}

impl Ports {
    fn new() -> Ports {
        let mut seen = BTreeSet::new();
        let mut next = || loop {
            let p = free_port();
            if seen.insert(p) {
                return p;
            }
        };
        Ports {
            api: next(),
            mc: next(),
            http: next(),
            https: next(),
        }
    }
}

/// Generate a TLS key and certificate in `dir`. With `ca`, a CA and a leaf
/// (SAN api-int.test.crc.testing) signed by it: returns (cert, key, ca).
fn make_certs(dir: &Path, ca: bool) -> (PathBuf, PathBuf, Option<PathBuf>) {
    let key = dir.join("key.pem");
    let cert = dir.join("cert.pem");
    if !ca {
        common::self_signed_cert(&cert, &key, "crc-lb-test");
        return (cert, key, None);
    }
    let ca_cert = dir.join("ca.pem");
    common::ca_signed_cert(
        (&ca_cert, &dir.join("ca-key.pem"), "crc-lb-test-ca"),
        (&cert, &key, "api-int"),
        "subjectAltName=DNS:api-int.test.crc.testing\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n",
    );
    (cert, key, Some(ca_cert))
}

/// One nginx per node: plain HTTP on `ports.http`, TLS on the api,
/// machine-config and ingress-https ports. `/` answers the node name,
/// `/healthz` 200, `/readyz` 200 only while `<dir>/<node>.ready` exists,
/// `/files/big.bin` is 1 MiB.
struct Backends {
    dir: tempfile::TempDir,
    procs: Vec<(String, Child)>,
}

impl Backends {
    fn start(ports: &Ports, not_ready: &[&str], ca: bool) -> Backends {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let (cert, key, _) = make_certs(d, ca);
        std::fs::create_dir_all(d.join("www")).unwrap();
        let big: Vec<u8> = (0..1024 * 1024).map(|i| (i % 251) as u8).collect();
        std::fs::write(d.join("www/big.bin"), big).unwrap();
        let mut b = Backends {
            dir,
            procs: Vec::new(),
        };
        for (name, ip) in NODES {
            if !not_ready.contains(&name) {
                b.set_ready(name, true);
            }
            b.spawn(name, ip, ports, &cert, &key);
        }
        b
    }

    fn set_ready(&self, node: &str, ready: bool) {
        let f = self.dir.path().join(format!("{node}.ready"));
        if ready {
            std::fs::write(f, "").unwrap();
        } else {
            let _ = std::fs::remove_file(f);
        }
    }

    fn ca(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    fn spawn(&mut self, name: &str, ip: &str, p: &Ports, cert: &Path, key: &Path) {
        let d = self.dir.path().display().to_string();
        let conf = format!(
            r#"daemon off;
master_process off;
worker_processes 1;
pid {d}/{name}.pid;
error_log stderr error;
events {{ worker_connections 512; }}
http {{
  access_log off;
  client_body_temp_path {d}/tmp-{name}; proxy_temp_path {d}/tmp-{name};
  fastcgi_temp_path {d}/tmp-{name}; uwsgi_temp_path {d}/tmp-{name}; scgi_temp_path {d}/tmp-{name};
  default_type text/plain;
  server {{
    listen {ip}:{http};
    location /files/ {{ alias {d}/www/; }}
    location / {{ return 200 "{name}\n"; }}
  }}
  server {{
    listen {ip}:{api} ssl; listen {ip}:{mc} ssl; listen {ip}:{https} ssl;
    ssl_certificate {cert}; ssl_certificate_key {key};
    location = /readyz {{ if (-f {d}/{name}.ready) {{ return 200 "ok\n"; }} return 500 "not ready\n"; }}
    location = /healthz {{ return 200 "ok\n"; }}
    location / {{ return 200 "{name}\n"; }}
  }}
}}
"#,
            http = p.http,
            api = p.api,
            mc = p.mc,
            https = p.https,
            cert = cert.display(),
            key = key.display(),
        );
        let conf_path = self.dir.path().join(format!("{name}.conf"));
        std::fs::write(&conf_path, conf).unwrap();
        let child = Command::new("nginx")
            .args(["-e", "stderr", "-p"])
            .arg(self.dir.path())
            .arg("-c")
            .arg(&conf_path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn nginx");
        self.procs.push((name.to_string(), child));
        let addr: SocketAddr = format!("{ip}:{}", p.http).parse().unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
            assert!(Instant::now() < deadline, "nginx for {name} did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGKILL one backend's nginx (by PID).
    fn kill(&mut self, node: &str) {
        let i = self.procs.iter().position(|(n, _)| n == node).unwrap();
        let (_, mut child) = self.procs.remove(i);
        let _ = child.kill();
        let _ = child.wait();
    }
}

impl Drop for Backends {
    fn drop(&mut self) {
        for (_, c) in &mut self.procs {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Cluster file: the loopback test cluster plus worker-1, every frontend on
/// 127.0.0.1:0, short health checks.
fn cluster(ports: &Ports, admin_port: u16, extra_lb: &str) -> String {
    common::loopback_cluster_with_nodes(
        "  - { name: worker-1, role: worker, mac: \"52:54:00:14:00:15\", ip: 127.0.20.21 }\n",
        &format!(
            r#"dns: {{ enabled: false }}
dhcp: {{ enabled: false }}
http: {{ enabled: false }}
admin:
  listen: 127.0.0.1:{admin_port}
loadBalancer:
  listen: {{ api: "127.0.0.1:0", machineConfig: "127.0.0.1:0", ingressHttp: "127.0.0.1:0", ingressHttps: "127.0.0.1:0" }}
  backendPorts: {{ api: {}, machineConfig: {}, ingressHttp: {}, ingressHttps: {} }}
  healthCheck: {{ interval: {INTERVAL_MS}ms, timeout: {INTERVAL_MS}ms, rise: 1, fall: {FALL} }}
  connectTimeout: 1s
{extra_lb}"#,
            ports.api, ports.mc, ports.http, ports.https
        ),
    )
}

/// The appliance on [`cluster`] with a fresh admin port (the `lb` CLI
/// reads it from the cluster file).
fn start_lb(ports: &Ports, extra_lb: &str) -> InProc {
    InProc::start_yaml(&cluster(ports, admin_port(), extra_lb))
}

/// All backends ready, the appliance started with `extra_lb`, both workers
/// healthy; returns the ingress-http frontend address too.
fn start_with_healthy_workers(extra_lb: &str) -> (Backends, InProc, SocketAddr) {
    let ports = Ports::new();
    let b = Backends::start(&ports, &[], false);
    let app = start_lb(&ports, extra_lb);
    let lb = app.addr("lb ingress-http");
    wait_workers_healthy(&app);
    (b, app, lb)
}

fn admin_port() -> u16 {
    common::free_port()
}

/// The LB's status section, in this process or from a spawned binary.
trait LbStatusOf: Served {
    fn lb_status(&self) -> LbStatus;
}

impl LbStatusOf for InProc {
    fn lb_status(&self) -> LbStatus {
        self.status().lb.expect("an lb section")
    }
}

impl LbStatusOf for Appliance {
    /// `GET /api/lb/backends` (the same type).
    fn lb_status(&self) -> LbStatus {
        let url = format!("http://{}/api/lb/backends", self.addr("admin"));
        let (code, out, err) = run("curl", &["-sS", "--max-time", "5", &url]);
        assert_eq!(code, 0, "admin API at {url}: {err}");
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("bad JSON {e}: {out}"))
    }
}

fn backend<'a>(st: &'a LbStatus, pool_name: &str, node: &str) -> &'a BackendStatus {
    pool(st, pool_name)
        .backends
        .iter()
        .find(|b| b.node == node)
        .unwrap_or_else(|| panic!("no backend {pool_name}/{node} in {st:#?}"))
}

fn pool<'a>(st: &'a LbStatus, pool: &str) -> &'a PoolStatus {
    st.pools
        .iter()
        .find(|p| p.name.as_str() == pool)
        .unwrap_or_else(|| panic!("no pool {pool} in {st:#?}"))
}

/// Poll the status until `pred` holds (panics after 20 s).
fn wait_status(app: &impl LbStatusOf, what: &str, pred: impl Fn(&LbStatus) -> bool) -> LbStatus {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let st = app.lb_status();
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

/// Wait until both workers are healthy in the ingress-http pool.
fn wait_workers_healthy(app: &impl LbStatusOf) {
    wait_status(app, "workers healthy", |st| {
        healthy(st, "ingress-http", "worker-0") && healthy(st, "ingress-http", "worker-1")
    });
}

fn healthy(st: &LbStatus, pool: &str, node: &str) -> bool {
    backend(st, pool, node).healthy
}

/// A backend's last check error ("" when none).
fn check_error(b: &BackendStatus) -> &str {
    b.last_check_error.as_deref().unwrap_or("")
}

/// GET `/` through a frontend with curl; (exit code, body).
fn curl(url: &str) -> (i32, String) {
    let (code, out, _) = run("curl", &["-sSk", "--max-time", "5", url]);
    (code, out.trim().to_string())
}

fn names_seen(url: &str, n: usize) -> BTreeSet<String> {
    (0..n)
        .map(|_| {
            let (code, body) = curl(url);
            assert_eq!(code, 0, "curl {url} failed");
            body
        })
        .collect()
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

fn lb_cli(app: &impl Served, args: &[&str]) -> (i32, String, String) {
    let f = app.cluster_file().display().to_string();
    let mut v = vec!["lb", "--cluster", &f];
    v.extend_from_slice(args);
    run(BIN, &v)
}

#[test]
fn closed_until_healthy_then_round_robin_with_https_checks() {
    require_tools!("nginx", "curl", "openssl");
    let ports = Ports::new();
    let app = start_lb(&ports, "");
    let http = format!("http://{}/", app.addr("lb ingress-http"));
    let api = format!("https://{}/", app.addr("lb api"));
    // No backend is healthy yet: the connection is closed, no answer.
    let (code, body) = curl(&http);
    assert_ne!(code, 0, "expected a closed connection, got {body:?}");
    assert!(body.is_empty(), "{body:?}");
    let st = app.lb_status();
    assert!(pool(&st, "ingress-http").closed_no_backend >= 1, "{st:#?}");

    // master-2 answers /readyz with 500: out of the api pool only.
    let _b = Backends::start(&ports, &["master-2"], false);
    let st = wait_status(&app, "backends healthy", |st| {
        ["worker-0", "worker-1"]
            .iter()
            .all(|n| healthy(st, "ingress-http", n) && healthy(st, "ingress-https", n))
            && ["bootstrap", "master-0", "master-1", "master-2"]
                .iter()
                .all(|n| healthy(st, "machine-config", n))
            && ["bootstrap", "master-0", "master-1"]
                .iter()
                .all(|n| healthy(st, "api", n))
    });
    let m2 = backend(&st, "api", "master-2");
    assert!(!m2.healthy, "{m2:?}");
    assert!(check_error(m2).contains("HTTP 500"), "{m2:?}");

    assert_eq!(names_seen(&http, 6), set(&["worker-0", "worker-1"]));
    let https = format!("https://{}/", app.addr("lb ingress-https"));
    assert_eq!(names_seen(&https, 6), set(&["worker-0", "worker-1"]));
    assert_eq!(
        names_seen(&api, 12),
        set(&["bootstrap", "master-0", "master-1"])
    );
    let mc = format!("https://{}/", app.addr("lb machine-config"));
    assert_eq!(
        names_seen(&mc, 12),
        set(&["bootstrap", "master-0", "master-1", "master-2"])
    );

    // openssl s_client through the api frontend sees the backend's certificate.
    let (code, out, err) = run(
        "openssl",
        &["s_client", "-connect", &app.addr("lb api").to_string()],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("BEGIN CERTIFICATE"), "{out}");
    assert!(out.contains("crc-lb-test"), "{out}");

    // `lb status --json` prints the same JSON (plain `lb status` is a
    // table for people: tests/cli_status.rs).
    let (code, out, err) = lb_cli(&app, &["status", "--json"]);
    assert_eq!(code, 0, "{out}{err}");
    let v: LbStatus = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(v.pools.len(), 4, "{v:#?}");
    assert!(backend(&v, "ingress-http", "worker-0").total_connections >= 3);

    // /metrics carries the LB series.
    let (_, metrics, _) = run(
        "curl",
        &["-sS", &format!("http://{}/metrics", app.addr("admin"))],
    );
    assert!(
        metrics.contains("crc_appliance_lb_backend_up{pool=\"api\",backend=\"master-2\"} 0"),
        "{metrics}"
    );
    assert!(
        metrics.contains("crc_appliance_lb_backend_up{pool=\"api\",backend=\"master-0\"} 1"),
        "{metrics}"
    );
}

#[test]
fn backends_start_unhealthy_until_rise() {
    require_tools!("nginx", "curl", "openssl");
    let ports = Ports::new();
    let _b = Backends::start(&ports, &[], false);
    // Reachable backends, but rise 2 with a 60 s interval: after the first
    // (immediate) successful check they are still unhealthy.
    let yaml = cluster(&ports, admin_port(), "").replace(
        &format!("interval: {INTERVAL_MS}ms, timeout: {INTERVAL_MS}ms, rise: 1"),
        "interval: 60s, timeout: 2s, rise: 2",
    );
    // The line waited for below is rate-limited per appliance (its serve's
    // `lb` limiter): another test here closing ingress-http connections
    // does not count against it.
    let app = InProc::start_yaml(&yaml);
    let st = wait_status(&app, "the first check", |st| {
        backend(st, "ingress-http", "worker-0").consecutive_successes == 1
            && backend(st, "ingress-http", "worker-1").consecutive_successes == 1
    });
    assert!(!healthy(&st, "ingress-http", "worker-0"), "{st:#?}");
    let http = format!("http://{}/", app.addr("lb ingress-http"));
    let (code, body) = curl(&http);
    assert_ne!(code, 0, "expected a closed connection, got {body:?}");
    let st = app.lb_status();
    assert!(pool(&st, "ingress-http").closed_no_backend >= 1, "{st:#?}");
    app.wait_log("no healthy enabled backend", Duration::from_secs(5));
}

#[test]
fn killed_backend_causes_no_failed_new_connections() {
    require_tools!("nginx", "curl", "openssl");
    let ports = Ports::new();
    let mut b = Backends::start(&ports, &[], false);
    let app = start_lb(&ports, "");
    let http = format!("http://{}/", app.addr("lb ingress-http"));
    wait_workers_healthy(&app);
    assert_eq!(names_seen(&http, 4), set(&["worker-0", "worker-1"]));
    b.kill("worker-1");
    // fall × interval plus a margin for the check timeout.
    std::thread::sleep(Duration::from_millis(FALL * INTERVAL_MS + 1000));
    for i in 0..30 {
        let (code, body) = curl(&http);
        assert_eq!(code, 0, "request {i} after the kill failed");
        assert_eq!(body, "worker-0", "request {i}");
    }
    let st = wait_status(&app, "worker-1 unhealthy", |st| {
        !healthy(st, "ingress-http", "worker-1")
    });
    assert!(
        check_error(backend(&st, "ingress-http", "worker-1")).contains("connect"),
        "{st:#?}"
    );
}

#[test]
fn connect_failure_is_retried_on_the_next_backend() {
    require_tools!("nginx", "curl", "openssl");
    let ports = Ports::new();
    let mut b = Backends::start(&ports, &[], false);
    // Long interval: the LB cannot notice the kill through checks in time.
    let yaml = cluster(&ports, admin_port(), "").replace(
        &format!("interval: {INTERVAL_MS}ms, timeout: {INTERVAL_MS}ms"),
        "interval: 60s, timeout: 2s",
    );
    let app = InProc::start_yaml(&yaml);
    let http = format!("http://{}/", app.addr("lb ingress-http"));
    wait_workers_healthy(&app);
    b.kill("worker-0");
    for i in 0..10 {
        let (code, body) = curl(&http);
        assert_eq!(code, 0, "request {i} failed");
        assert_eq!(body, "worker-1", "request {i}");
    }
    let st = app.lb_status();
    let w0 = backend(&st, "ingress-http", "worker-0");
    assert!(w0.healthy, "checks should not have run yet: {w0:?}");
    assert!(w0.connect_failures >= 1, "{w0:?}");
}

#[test]
fn cli_disable_enable_and_bootstrap_removal() {
    require_tools!("nginx", "curl", "openssl");
    let ports = Ports::new();
    let b = Backends::start(&ports, &["master-2"], false);
    let app = start_lb(&ports, "");
    let api = format!("https://{}/", app.addr("lb api"));
    wait_status(&app, "api backends healthy", |st| {
        ["bootstrap", "master-0", "master-1"]
            .iter()
            .all(|n| healthy(st, "api", n))
    });
    let (code, out, err) = lb_cli(&app, &["disable", "master-0"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("master-0 disabled"), "{out}");
    assert_eq!(names_seen(&api, 12), set(&["bootstrap", "master-1"]));
    let st = app.lb_status();
    assert!(backend(&st, "machine-config", "master-0").disabled);
    let (code, out, err) = lb_cli(&app, &["enable", "master-0"]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(
        names_seen(&api, 12),
        set(&["bootstrap", "master-0", "master-1"])
    );
    let (code, out, _) = lb_cli(&app, &["disable", "no-such-node"]);
    assert_ne!(code, 0, "{out}");

    // Bootstrap disabled while master-2 is not ready: not removed yet.
    let (code, out, err) = lb_cli(&app, &["disable", "bootstrap"]);
    assert_eq!(code, 0, "{out}{err}");
    std::thread::sleep(Duration::from_millis(4 * INTERVAL_MS));
    let st = app.lb_status();
    assert!(!backend(&st, "api", "bootstrap").removed, "{st:#?}");
    assert_eq!(names_seen(&api, 8), set(&["master-0", "master-1"]));
    // All masters healthy → bootstrap removed from every pool.
    b.set_ready("master-2", true);
    let st = wait_status(&app, "bootstrap removed", |st| {
        backend(st, "api", "bootstrap").removed
    });
    assert!(backend(&st, "machine-config", "bootstrap").removed);
    app.wait_log("bootstrap removed from every pool", Duration::from_secs(5));
    assert_eq!(
        names_seen(&api, 12),
        set(&["master-0", "master-1", "master-2"])
    );
    // `lb enable bootstrap` brings a removed bootstrap back (it must pass
    // its checks again), and it stays until disabled again.
    let (code, out, err) = lb_cli(&app, &["enable", "bootstrap"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("back after its removal"), "{out}");
    wait_status(&app, "bootstrap back and healthy", |st| {
        !backend(st, "api", "bootstrap").removed && healthy(st, "api", "bootstrap")
    });
    assert_eq!(
        names_seen(&api, 16),
        set(&["bootstrap", "master-0", "master-1", "master-2"])
    );
    let (code, out, err) = lb_cli(&app, &["disable", "bootstrap"]);
    assert_eq!(code, 0, "{out}{err}");
    wait_status(&app, "bootstrap removed again", |st| {
        backend(st, "api", "bootstrap").removed
    });

    // A reload (what SIGHUP asks for: tests/reload.rs) keeps disabled and
    // removed nodes.
    let (code, out, err) = lb_cli(&app, &["disable", "master-1"]);
    assert_eq!(code, 0, "{out}{err}");
    let outcome = app.reload();
    assert!(outcome.ok, "{outcome:?}");
    app.wait_log("configuration reloaded", Duration::from_secs(20));
    let st = wait_status(&app, "the reloaded LB with masters healthy", |st| {
        ["master-0", "master-2"]
            .iter()
            .all(|n| healthy(st, "api", n))
    });
    assert!(backend(&st, "api", "master-1").disabled, "{st:#?}");
    assert!(backend(&st, "api", "bootstrap").removed, "{st:#?}");
}

#[test]
fn half_close_and_connection_cap() {
    require_tools!("nginx", "curl", "openssl");
    let (_b, app, lb) = start_with_healthy_workers("  maxConnections: 2\n");

    // Half-close: send the request, shut down our write side, still get 1 MiB.
    let mut s = TcpStream::connect(lb).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"GET /files/big.bin HTTP/1.0\r\nHost: x\r\n\r\n")
        .unwrap();
    s.shutdown(Shutdown::Write).unwrap();
    let mut resp = Vec::new();
    s.read_to_end(&mut resp).unwrap();
    let split = resp
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("header end")
        + 4;
    assert!(
        resp.starts_with(b"HTTP/1.1 200"),
        "{:?}",
        &resp[..40.min(resp.len())]
    );
    let body = &resp[split..];
    assert_eq!(body.len(), 1024 * 1024);
    assert!(body.iter().enumerate().all(|(i, b)| *b == (i % 251) as u8));

    // Cap: two held connections (proven proxied), the third is closed at once.
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut c = TcpStream::connect(lb).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        c.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut buf = [0u8; 512];
        let n = c.read(&mut buf).unwrap();
        assert!(buf[..n].starts_with(b"HTTP/1.1 200"));
        held.push(c);
    }
    let mut third = TcpStream::connect(lb).unwrap();
    third
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let _ = third.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    let mut buf = [0u8; 64];
    match third.read(&mut buf) {
        Ok(0) => {}
        Err(e)
            if e.kind() != std::io::ErrorKind::WouldBlock
                && e.kind() != std::io::ErrorKind::TimedOut => {}
        other => panic!("third connection was not closed: {other:?}"),
    }
    let st = app.lb_status();
    assert!(pool(&st, "ingress-http").rejected_over_cap >= 1, "{st:#?}");
    // Releasing one makes room again.
    drop(held.pop());
    wait_status(&app, "a free slot", |st| {
        pool(st, "ingress-http").active_connections < 2
    });
    let (code, body) = curl(&format!("http://{lb}/"));
    assert_eq!(code, 0);
    assert!(body.starts_with("worker-"), "{body}");
}

#[test]
fn ca_file_verification_and_install_complete_marker() {
    require_tools!("nginx", "curl", "openssl");
    let ports = Ports::new();
    let b = Backends::start(&ports, &[], true);
    // A CA the backends' certificates do not chain to.
    let other = tempfile::tempdir().unwrap();
    let (_, _, wrong_ca) = make_certs(other.path(), true);
    let wrong = cluster(
        &ports,
        admin_port(),
        &format!("  caFile: {}\n", wrong_ca.unwrap().display()),
    );
    let app = InProc::start_yaml(&wrong);
    let st = wait_status(&app, "a failed verified check", |st| {
        backend(st, "api", "master-0").consecutive_failures >= 2
    });
    let m0 = backend(&st, "api", "master-0");
    assert!(!m0.healthy, "{m0:?}");
    assert!(check_error(m0).contains("certificate"), "{m0:?}");
    drop(app);

    // A CA per pool: the right one for the API, a wrong one for the
    // machine-config server (they differ in OpenShift).
    let per_pool = cluster(
        &ports,
        admin_port(),
        &format!(
            "  caFiles: {{ api: {}, machineConfig: {} }}\n",
            b.ca().display(),
            other.path().join("ca.pem").display()
        ),
    );
    let app = InProc::start_yaml(&per_pool);
    let st = wait_status(&app, "api verified, machine-config refused", |st| {
        healthy(st, "api", "master-0")
            && backend(st, "machine-config", "master-0").consecutive_failures >= 2
    });
    let mc = backend(&st, "machine-config", "master-0");
    assert!(!mc.healthy, "{mc:?}");
    assert!(check_error(mc).contains("certificate"), "{mc:?}");
    drop(app);

    let right = cluster(
        &ports,
        admin_port(),
        &format!("  caFile: {}\n", b.ca().display()),
    );
    let app = InProc::start_yaml(&right);
    wait_status(&app, "api healthy with the right CA", |st| {
        ["bootstrap", "master-0", "master-1", "master-2"]
            .iter()
            .all(|n| healthy(st, "api", n) && healthy(st, "machine-config", n))
    });
    // Install complete marker: bootstrap removed without an operator action.
    let st = app.lb_status();
    let marker = st.bootstrap_complete_marker.clone();
    assert!(!backend(&st, "api", "bootstrap").removed);
    std::fs::create_dir_all(Path::new(&marker).parent().unwrap()).unwrap();
    std::fs::write(&marker, "").unwrap();
    wait_status(&app, "bootstrap removed by the marker", |st| {
        backend(st, "api", "bootstrap").removed
    });
    let api = format!("https://{}/", app.addr("lb api"));
    assert_eq!(
        names_seen(&api, 9),
        set(&["master-0", "master-1", "master-2"])
    );
}

#[test]
fn idle_timeout_closes_quiet_connections_only() {
    require_tools!("nginx", "curl", "openssl");
    let (_b, _app, lb) = start_with_healthy_workers("  idleTimeout: 700ms\n");
    // A busy keep-alive connection outlives the idle timeout.
    let mut busy = TcpStream::connect(lb).unwrap();
    busy.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    for i in 0..8 {
        busy.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let mut buf = [0u8; 512];
        let n = busy.read(&mut buf).unwrap();
        assert!(buf[..n].starts_with(b"HTTP/1.1 200"), "request {i}");
        std::thread::sleep(Duration::from_millis(250));
    }
    // A quiet one is closed by the LB (nginx's own keep-alive timeout is 75 s).
    let mut quiet = TcpStream::connect(lb).unwrap();
    quiet
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut buf = [0u8; 16];
    match quiet.read(&mut buf) {
        Ok(0) => {}
        other => panic!("quiet connection not closed: {other:?}"),
    }
}

/// Three reloads (unchanged file, a worker added, a new health-check
/// interval) while a keep-alive TLS connection through the API frontend
/// (`openssl s_client`, like a kubelet watch on api-int:6443) makes a
/// request every 0.5 s and new connections to every frontend and to HTTP
/// are made every 100 ms: no request fails, the kept connection survives,
/// and no healthy backend turns unhealthy.
#[test]
fn reloads_keep_connections_sockets_and_health() {
    require_tools!("nginx", "curl", "openssl");
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let ports = Ports::new();
    let _b = Backends::start(&ports, &[], false);
    let yaml = cluster(&ports, admin_port(), "").replace(
        "http: { enabled: false }\n",
        "http:\n  listen: 127.0.0.1:0\n  imagesDir: \"{dir}/images\"\n  ignitionDir: \"{dir}/ign\"\n",
    );
    let app = InProc::start_yaml(&yaml);
    std::fs::create_dir_all(app.dir.path().join("images")).unwrap();
    std::fs::write(app.dir.path().join("images/hello.txt"), "hello\n").unwrap();
    wait_status(&app, "every backend healthy", |st| {
        st.pools
            .iter()
            .all(|p| p.backends.iter().all(|b| b.healthy))
    });
    let url = |what: &str, scheme: &str| format!("{scheme}://{}/", app.addr(what));
    let targets = [
        url("lb api", "https"),
        url("lb machine-config", "https"),
        url("lb ingress-http", "http"),
        url("lb ingress-https", "https"),
        format!("http://{}/images/hello.txt", app.addr("http")),
    ];

    // The kept connection.
    let mut s_client = Command::new("openssl")
        .args([
            "s_client",
            "-connect",
            &app.addr("lb api").to_string(),
            "-quiet",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("openssl s_client");
    let responses = Arc::new(AtomicU64::new(0));
    let out = s_client.stdout.take().unwrap();
    let r2 = responses.clone();
    std::thread::spawn(move || {
        use std::io::BufRead as _;
        for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            if line.starts_with("HTTP/1.1 200") {
                r2.fetch_add(1, Ordering::Relaxed);
            }
        }
    });
    let mut stdin = s_client.stdin.take().unwrap();
    let running = Arc::new(AtomicBool::new(true));
    let sent = Arc::new(AtomicU64::new(0));
    let keepalive = {
        let (running, sent) = (running.clone(), sent.clone());
        std::thread::spawn(move || {
            while running.load(Ordering::Relaxed) {
                if stdin
                    .write_all(b"GET / HTTP/1.1\r\nHost: api-int\r\n\r\n")
                    .is_err()
                {
                    return;
                }
                sent.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(500));
            }
        })
    };
    // New connections every 100 ms.
    let failures = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let made = Arc::new(AtomicU64::new(0));
    let fresh = {
        let (running, failures, made) = (running.clone(), failures.clone(), made.clone());
        std::thread::spawn(move || {
            while running.load(Ordering::Relaxed) {
                let round = Instant::now();
                for t in &targets {
                    let (code, body) = curl(t);
                    made.fetch_add(1, Ordering::Relaxed);
                    if code != 0 || body.is_empty() {
                        failures
                            .lock()
                            .unwrap()
                            .push(format!("{t}: curl {code} {body:?}"));
                    }
                }
                if let Some(w) = Duration::from_millis(100).checked_sub(round.elapsed()) {
                    std::thread::sleep(w);
                }
            }
        })
    };

    let good = std::fs::read_to_string(&app.cluster_file).unwrap();
    let added = good.replace(
        "nodes:\n",
        "nodes:\n  - { name: worker-2, role: worker, mac: \"52:54:00:14:00:16\", ip: 127.0.20.22 }\n",
    );
    let slower = added.replace(
        &format!("interval: {INTERVAL_MS}ms"),
        &format!("interval: {}ms", INTERVAL_MS + 100),
    );
    assert_ne!(added, slower);
    // Around each reload: at least 1.5 s and 25 new requests (however
    // slow the machine), so the four stretches make at least 100.
    let stretch = || {
        let from = made.load(Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(1500));
        common::wait_until("25 more new requests", Duration::from_secs(30), || {
            made.load(Ordering::Relaxed) >= from + 25
        });
    };
    for (i, text) in [&good, &added, &slower].into_iter().enumerate() {
        stretch();
        std::fs::write(&app.cluster_file, text).unwrap();
        let f = app.cluster_file.display().to_string();
        let (code, out, err) = run(BIN, &["reload", "--cluster", &f]);
        assert_eq!(code, 0, "reload {i}: {out}{err}");
        assert!(out.contains(&format!("generation {}", i + 2)), "{out}");
    }
    stretch();
    running.store(false, Ordering::Relaxed);
    keepalive.join().unwrap();
    fresh.join().unwrap();
    std::thread::sleep(Duration::from_millis(500));

    let failures = failures.lock().unwrap();
    assert!(
        failures.is_empty(),
        "{} of {} new requests failed: {failures:?}",
        failures.len(),
        made.load(Ordering::Relaxed)
    );
    let made = made.load(Ordering::Relaxed);
    assert!(made >= 100, "too few requests made: {made}");
    assert!(
        s_client.try_wait().unwrap().is_none(),
        "the kept TLS connection was cut"
    );
    let (s, r) = (
        sent.load(Ordering::Relaxed),
        responses.load(Ordering::Relaxed),
    );
    assert!(
        s >= 10 && r == s,
        "kept connection: {s} requests, {r} answers"
    );
    let _ = s_client.kill();
    let _ = s_client.wait();
    assert!(!app.log().contains("is unhealthy"), "{}", app.log());
    assert!(
        !app.log().contains("closed"),
        "a listener was closed:\n{}",
        app.log()
    );
    let st = app.lb_status();
    assert_eq!(
        st.health.interval,
        format!("{}ms", INTERVAL_MS + 100),
        "{st:#?}"
    );
    assert!(!healthy(&st, "ingress-http", "worker-2"), "{st:#?}");
    assert!(healthy(&st, "ingress-http", "worker-0"), "{st:#?}");
}

/// Descriptor exhaustion on one frontend must not take the others or the
/// health checks down (the audit: `ulimit -n 1024`, a flood of the API
/// frontend, "Too many open files" in every pool's checks). Under a hard
/// limit of 400 the connection caps are scaled down so that they fit with
/// the descriptors kept for checks and listeners: a flood of 300 idle
/// connections on ingress-http hits that frontend's scaled cap (the rest
/// are refused there), the checks keep running, and the API frontend still
/// serves. Before the caps were scaled, the flood took every descriptor.
#[test]
fn a_flooded_frontend_leaves_descriptors_for_checks_and_other_frontends() {
    require_tools!("nginx", "curl", "openssl", "prlimit");
    let ports = Ports::new();
    let _b = Backends::start(&ports, &[], false);
    // Spawned: the descriptor limit is the process's.
    let app = common::Launch::default()
        .prefix(&["prlimit", "--nofile=400:400", "--"])
        .start(&cluster(&ports, admin_port(), ""));
    app.wait_log("connection caps scaled to", Duration::from_secs(10));
    let st = wait_status(&app, "masters and workers healthy", |st| {
        healthy(st, "api", "master-0") && healthy(st, "ingress-http", "worker-0")
    });
    let checks_before = backend(&st, "api", "master-0").consecutive_successes;

    let lb = app.addr("lb ingress-http");
    let mut flood = Vec::new();
    for _ in 0..300 {
        match TcpStream::connect_timeout(&lb, Duration::from_secs(2)) {
            Ok(s) => flood.push(s),
            Err(e) => panic!("connect to the flooded frontend: {e}"),
        }
    }
    // The flooded frontend is at its cap and refuses the rest...
    wait_status(&app, "ingress-http over its cap", |st| {
        pool(st, "ingress-http").rejected_over_cap >= 1
    });
    // ...while the health checks go on succeeding in every pool...
    wait_status(&app, "more successful API checks", |st| {
        backend(st, "api", "master-0").consecutive_successes >= checks_before + 3
            && healthy(st, "machine-config", "master-1")
            && healthy(st, "ingress-https", "worker-1")
    });
    // ...and the other frontends serve new connections.
    let api = format!("https://{}/", app.addr("lb api"));
    for _ in 0..5 {
        let (code, body) = curl(&api);
        assert_eq!(code, 0, "API frontend during the flood: {}", app.log());
        assert!(
            body.starts_with("bootstrap") || body.starts_with("master-"),
            "{body}"
        );
    }
    let log = app.log();
    assert!(
        !log.contains("Too many open files"),
        "descriptors ran out:\n{log}"
    );
    drop(flood);
    wait_status(&app, "the flood closed", |st| {
        pool(st, "ingress-http").active_connections == 0
    });
    let (code, body) = curl(&format!("http://{lb}/"));
    assert_eq!(code, 0);
    assert!(body.starts_with("worker-"), "{body}");
}

/// A compact cluster (bootstrap and three masters, no workers) end to end:
/// the ingress frontends forward to the masters, and only to them; the
/// workers' nginx on 127.0.20.20-21 keeps running to catch a wrong pool.
#[test]
fn compact_cluster_ingress_goes_to_the_masters() {
    require_tools!("nginx", "curl", "openssl");
    let ports = Ports::new();
    let _b = Backends::start(&ports, &[], false);
    let file = cluster(&ports, admin_port(), "")
        .replace(
            "  - { name: worker-0, role: worker, mac: \"52:54:00:14:00:14\", ip: 127.0.20.20 }\n",
            "",
        )
        .replace(
            "  - { name: worker-1, role: worker, mac: \"52:54:00:14:00:15\", ip: 127.0.20.21 }\n",
            "",
        );
    assert!(!file.contains("role: worker"), "{file}");
    let app = InProc::start_yaml(&file);
    let masters = ["master-0", "master-1", "master-2"];
    let st = wait_status(&app, "masters healthy in both ingress pools", |st| {
        ["ingress-http", "ingress-https"]
            .iter()
            .all(|p| masters.iter().all(|m| healthy(st, p, m)))
    });
    for p in ["ingress-http", "ingress-https"] {
        let nodes: BTreeSet<String> = pool(&st, p)
            .backends
            .iter()
            .map(|b| b.node.clone())
            .collect();
        assert_eq!(nodes, set(&masters), "{p}: {st:#?}");
    }
    let http = format!("http://{}/", app.addr("lb ingress-http"));
    let https = format!("https://{}/", app.addr("lb ingress-https"));
    assert_eq!(names_seen(&http, 9), set(&masters));
    assert_eq!(names_seen(&https, 9), set(&masters));
}
