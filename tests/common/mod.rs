//! Shared test harness: start the real `crc-appliance` binary on a cluster
//! file, learn its bound addresses from the `listening for <what> on <addr>`
//! log lines, and stop it (SIGTERM, then SIGKILL) on drop, printing its log
//! when the test failed.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]
#![allow(dead_code)]

pub mod dnstools;
pub mod hapair;
pub mod initramfs;
pub mod inproc;
pub mod libvirtd;
pub mod qemu;
pub mod segment;
pub mod udhcpc;

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_crc-appliance");

/// Where each test started its appliances (`CRC_HARNESS_LOG`, set by
/// `scripts/test.sh`): one `<how>\t<test binary>\t<test>` line per start,
/// `how` being `inproc` or `spawned`, for the suite's count of the tests
/// the in-process harness runs.
pub fn note_harness(how: &str) {
    let Some(path) = std::env::var_os("CRC_HARNESS_LOG") else {
        return;
    };
    let binary = std::env::args()
        .next()
        .and_then(|a| {
            Path::new(&a)
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
        })
        .unwrap_or_default();
    // libtest names each test's thread after the test.
    let test = std::thread::current().name().unwrap_or("?").to_string();
    let line = format!(
        "{how}\t{}\t{test}\n",
        binary.rsplit_once('-').map_or(&*binary, |(b, _)| b)
    );
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        use std::io::Write as _;
        let _ = f.write_all(line.as_bytes());
    }
}

/// True when `tool` is on PATH.
pub fn have(tool: &str) -> bool {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
        .unwrap_or(false)
        || Path::new(tool).is_file()
}

pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

/// Environment variable naming the file where skipped tests are recorded
/// (`scripts/test.sh` sets it and fails on CI when the file is not empty).
pub const SKIP_LOG_ENV: &str = "CRC_SKIP_LOG";

/// Report a skipped test: the `SKIPPED <test>: <why>` line goes to stderr
/// and is appended to the file named by [`SKIP_LOG_ENV`], so that the
/// suite's gate sees it even though libtest captures the output of tests
/// that pass.
pub fn note_skip(line: &str) {
    eprintln!("{line}");
    if let Some(path) = std::env::var_os(SKIP_LOG_ENV) {
        record_skip(line, Path::new(&path));
    }
}

/// Append a `SKIPPED` line to the skip log at `path`.
pub fn record_skip(line: &str, path: &Path) {
    use std::io::Write as _;
    // One write with O_APPEND: lines from parallel test processes do not mix.
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut f| f.write_all(format!("{line}\n").as_bytes()));
    if let Err(e) = written {
        panic!("cannot record {line:?} in {path:?}: {e}");
    }
}

/// `eprintln!` for a `SKIPPED …` line, recorded by [`note_skip`].
#[macro_export]
macro_rules! skipped {
    ($($arg:tt)*) => {
        $crate::common::note_skip(&format!($($arg)*))
    };
}

/// Skip the current test with a clear message unless `cond` holds.
#[macro_export]
macro_rules! require {
    ($cond:expr, $why:expr) => {
        if !$cond {
            $crate::skipped!("SKIPPED {}: {}", module_path!(), $why);
            return;
        }
    };
}

/// Skip unless every tool is installed.
#[macro_export]
macro_rules! require_tools {
    ($($tool:expr),+) => {
        $( $crate::require!($crate::common::have($tool), format!("{} is not installed", $tool)); )+
    };
}

/// What a test talks to, spawned ([`Appliance`]) or in this process
/// ([`inproc::InProc`]): its bound addresses and its log.
pub trait Served {
    /// Address logged as `listening for <what> on ...`.
    fn addr(&self, what: &str) -> SocketAddr;
    fn log(&self) -> String;
    /// The cluster file it runs on.
    fn cluster_file(&self) -> &Path;
}

impl Served for Appliance {
    fn addr(&self, what: &str) -> SocketAddr {
        Appliance::addr(self, what)
    }
    fn log(&self) -> String {
        Appliance::log(self)
    }
    fn cluster_file(&self) -> &Path {
        &self.cluster_file
    }
}

impl Served for inproc::InProc {
    fn addr(&self, what: &str) -> SocketAddr {
        inproc::InProc::addr(self, what)
    }
    fn log(&self) -> String {
        inproc::InProc::log(self)
    }
    fn cluster_file(&self) -> &Path {
        &self.cluster_file
    }
}

pub struct Appliance {
    child: Option<Child>,
    /// `what` → address, from `listening for <what> on <addr>`.
    pub addrs: HashMap<String, SocketAddr>,
    log: Arc<Mutex<Vec<String>>>,
    pub dir: tempfile::TempDir,
    pub cluster_file: PathBuf,
}

impl Appliance {
    /// Write `yaml` to a temp dir as `cluster.yaml` and run `serve` on it.
    /// `{dir}` in the YAML is replaced with the temp dir's path.
    pub fn start(yaml: &str) -> Appliance {
        Launch::default().start(yaml)
    }

    pub fn start_file(dir: tempfile::TempDir, cluster_file: PathBuf) -> Appliance {
        Launch::default().start_file(dir, cluster_file)
    }

    /// Start with options (command prefix such as `ip netns exec <ns>`,
    /// extra environment, ready timeout): `Appliance::launch().netns(..).start_path(..)`.
    pub fn launch() -> Launch {
        Launch::default()
    }

    /// Address logged as `listening for <what> on ...`.
    pub fn addr(&self, what: &str) -> SocketAddr {
        *self.addrs.get(what).unwrap_or_else(|| {
            panic!(
                "no `listening for {what}` line; have {:?}; log:\n{}",
                self.addrs.keys().collect::<Vec<_>>(),
                self.log()
            )
        })
    }

    pub fn log(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }

    /// Wait until the log contains `needle` (or panic after `timeout`).
    pub fn wait_log(&self, needle: &str, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if self.log().contains(needle) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("log never contained {needle:?}; log:\n{}", self.log());
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().map(|c| c.id()).unwrap_or(0)
    }

    pub fn signal(&self, sig: &str) {
        let _ = Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(self.pid().to_string())
            .status();
    }

    /// Wait for the process to exit on its own: `Some(code)` (`None` for a
    /// signal) if it did within `timeout`, `None` if it is still running.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<Option<i32>> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            let child = self.child.as_mut()?;
            if let Ok(Some(st)) = child.try_wait() {
                self.child = None;
                // Let the log readers catch the last lines.
                std::thread::sleep(Duration::from_millis(100));
                return Some(st.code());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }

    /// SIGTERM and wait (≤15 s); returns the exit status code.
    pub fn stop(&mut self) -> Option<i32> {
        self.stop_with("TERM")
    }

    /// Send `sig` (e.g. `KILL`) and wait (≤15 s, then SIGKILL); returns the
    /// exit status code (None when killed by a signal).
    pub fn stop_with(&mut self, sig: &str) -> Option<i32> {
        let mut child = self.child.take()?;
        let _ = Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(child.id().to_string())
            .status();
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            if let Ok(Some(st)) = child.try_wait() {
                return st.code();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
        None
    }
}

/// Options for starting `serve`; see [`Appliance::launch`].
pub struct Launch {
    prefix: Vec<String>,
    env: Vec<(String, String)>,
    ready_timeout: Duration,
}

impl Default for Launch {
    fn default() -> Self {
        Launch {
            prefix: Vec::new(),
            env: Vec::new(),
            ready_timeout: Duration::from_secs(60),
        }
    }
}

impl Launch {
    /// Run the binary through `prefix` (e.g. `["ip", "netns", "exec", ns]`).
    pub fn prefix(mut self, prefix: &[&str]) -> Self {
        self.prefix = prefix.iter().map(|s| s.to_string()).collect();
        self
    }

    /// Run the binary inside network namespace `ns` (`ip netns exec` execs
    /// it, so the PID is still crc-appliance's).
    pub fn netns(self, ns: &str) -> Self {
        self.prefix(&["ip", "netns", "exec", ns])
    }

    /// Extra environment (set after the default `RUST_LOG`, so it can
    /// override it).
    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.to_string(), value.to_string()));
        self
    }

    /// How long to wait for `crc-appliance ready` (default 60 s).
    pub fn ready_timeout(mut self, timeout: Duration) -> Self {
        self.ready_timeout = timeout;
        self
    }

    /// Write `yaml` (with `{dir}` replaced) to a temp dir and start on it.
    pub fn start(self, yaml: &str) -> Appliance {
        let dir = tempfile::tempdir().expect("tempdir");
        let text = yaml.replace("{dir}", &dir.path().display().to_string());
        let cluster_file = dir.path().join("cluster.yaml");
        std::fs::write(&cluster_file, text).expect("write cluster file");
        self.start_file(dir, cluster_file)
    }

    /// Start on an existing cluster file the caller keeps (e.g. to restart
    /// on the same lease file); `Appliance::dir` is a fresh empty temp dir.
    pub fn start_path(self, cluster_file: &Path) -> Appliance {
        let dir = tempfile::tempdir().expect("tempdir");
        self.start_file(dir, cluster_file.to_path_buf())
    }

    pub fn start_file(self, dir: tempfile::TempDir, cluster_file: PathBuf) -> Appliance {
        note_harness("spawned");
        let mut cmd = match self.prefix.split_first() {
            Some((first, rest)) => {
                let mut c = Command::new(first);
                c.args(rest).arg(BIN);
                c
            }
            None => Command::new(BIN),
        };
        let mut child = cmd
            .arg("serve")
            .arg("--cluster")
            .arg(&cluster_file)
            .env(
                "RUST_LOG",
                std::env::var("RUST_LOG").unwrap_or_else(|_| "info".into()),
            )
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn crc-appliance");
        let log = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = mpsc::channel::<String>();
        for stream in [
            Box::new(child.stderr.take().expect("stderr")) as Box<dyn std::io::Read + Send>,
            Box::new(child.stdout.take().expect("stdout")),
        ] {
            let log = log.clone();
            let tx = tx.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    log.lock().unwrap().push(line.clone());
                    let _ = tx.send(line);
                }
            });
        }
        drop(tx);
        let mut app = Appliance {
            child: Some(child),
            addrs: HashMap::new(),
            log,
            dir,
            cluster_file,
        };
        let deadline = Instant::now() + self.ready_timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(line) => {
                    if let Some((what, addr)) = parse_listening(&line) {
                        app.addrs.insert(what, addr);
                    }
                    if line.contains("crc-appliance ready") {
                        break;
                    }
                }
                Err(_) => {
                    let status = app.child.as_mut().and_then(|c| c.try_wait().ok().flatten());
                    panic!(
                        "crc-appliance did not become ready (exit status {status:?}); log:\n{}",
                        app.log()
                    );
                }
            }
        }
        app
    }
}

impl Drop for Appliance {
    fn drop(&mut self) {
        let _ = self.stop();
        if std::thread::panicking() {
            for l in self.log().lines() {
                eprintln!("SRV: {l}");
            }
        }
    }
}

fn parse_listening(line: &str) -> Option<(String, SocketAddr)> {
    let rest = &line[line.find("listening for ")? + "listening for ".len()..];
    let (what, rest) = rest.split_once(" on ")?;
    let addr = rest.split_whitespace().next()?.trim_end_matches(',');
    Some((what.to_string(), addr.parse().ok()?))
}

/// A loopback TCP port that was free a moment ago (for listeners whose
/// address the test must know before starting, e.g. the admin API the CLI
/// reads from the cluster file).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Run a command, return (exit code, stdout, stderr).
pub fn run(cmd: &str, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(cmd)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd}: {e}"));
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A minimal valid cluster file on loopback with every listener on port 0
/// and every service disabled; tests enable what they need by appending
/// YAML via [`loopback_cluster_with`].
pub fn loopback_cluster_with(sections: &str) -> String {
    loopback_cluster_with_nodes("", sections)
}

/// Like [`loopback_cluster_with`], with `extra_nodes` (YAML list items,
/// e.g. `"  - { name: worker-1, ... }\n"`) appended to the node list.
pub fn loopback_cluster_with_nodes(extra_nodes: &str, sections: &str) -> String {
    format!(
        r#"name: test
baseDomain: crc.testing
network:
  cidr: 127.0.20.0/24
  gateway: 127.0.20.1
  applianceIP: 127.0.20.1
nodes:
  - {{ name: bootstrap, role: bootstrap, mac: "52:54:00:14:00:05", ip: 127.0.20.5 }}
  - {{ name: master-0, role: master, mac: "52:54:00:14:00:0a", ip: 127.0.20.10 }}
  - {{ name: master-1, role: master, mac: "52:54:00:14:00:0b", ip: 127.0.20.11 }}
  - {{ name: master-2, role: master, mac: "52:54:00:14:00:0c", ip: 127.0.20.12 }}
  - {{ name: worker-0, role: worker, mac: "52:54:00:14:00:14", ip: 127.0.20.20 }}
{extra_nodes}{sections}"#
    )
}

/// Like [`loopback_cluster_with`], but every service section not present in
/// `sections` (`dns`, `dhcp`, `loadBalancer`, `http`, `admin`) is disabled.
pub fn only(sections: &str) -> String {
    let mut s = sections.to_string();
    if !s.is_empty() && !s.ends_with('\n') {
        s.push('\n');
    }
    for name in ["dns", "dhcp", "loadBalancer", "http", "admin"] {
        let present = s.starts_with(&format!("{name}:")) || s.contains(&format!("\n{name}:"));
        if !present {
            s.push_str(&format!("{name}:\n  enabled: false\n"));
        }
    }
    loopback_cluster_with(&s)
}

/// Run a command and assert it succeeded; returns its stdout.
pub fn run_ok(cmd: &str, args: &[&str]) -> String {
    let (code, out, err) = run(cmd, args);
    assert_eq!(code, 0, "{cmd} {args:?} failed: {out}{err}");
    out
}

/// Poll `f` every 100 ms until it holds; panic after `timeout`.
pub fn wait_until(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if f() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("timed out waiting for {what}");
}

static NETNS_SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// `<prefix><pid><n>`: a name unique to this test process (for netns and
/// interfaces; keep `prefix` short, interface names are ≤15 bytes).
pub fn unique_name(prefix: &str) -> String {
    let n = NETNS_SEQ.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    format!("{prefix}{}{n}", std::process::id())
}

/// Root and a working `ip netns` (probed by adding and deleting a
/// namespace `<prefix><pid><n>probe`); Err(reason to skip) otherwise.
pub fn netns_available(prefix: &str) -> Result<(), String> {
    if !is_root() {
        return Err("needs root (network namespaces)".into());
    }
    if !have("ip") {
        return Err("ip (iproute2) is not installed".into());
    }
    let probe = format!("{}probe", unique_name(prefix));
    let (code, out, err) = run("ip", &["netns", "add", &probe]);
    if code != 0 {
        return Err(format!(
            "ip netns add failed: {}",
            format!("{out}{err}").trim()
        ));
    }
    let _ = run("ip", &["netns", "del", &probe]);
    Ok(())
}

/// Skip unless [`netns_available`] (root, iproute2, `ip netns add` works).
#[macro_export]
macro_rules! require_netns {
    ($prefix:expr) => {
        if let Err(why) = $crate::common::netns_available($prefix) {
            $crate::skipped!("SKIPPED {}: {why}", module_path!());
            return;
        }
    };
}

/// A veth pair: `a_if` in namespace `a`, its peer `b_if` in `b` (both
/// down, without addresses).
pub fn veth(a_if: &str, a: &Netns, b_if: &str, b: &Netns) {
    run_ok(
        "ip",
        &[
            "link",
            "add",
            a_if,
            "netns",
            a.name(),
            "type",
            "veth",
            "peer",
            "name",
            b_if,
            "netns",
            b.name(),
        ],
    );
}

/// A port `port` of bridge `bridge` in `sw`, up, whose veth peer is
/// `ifname` in `ns` (down, without addresses): one host on a switched
/// segment.
pub fn bridge_port(sw: &Netns, bridge: &str, port: &str, ns: &Netns, ifname: &str) {
    sw.ip(&[
        "link",
        "add",
        port,
        "type",
        "veth",
        "peer",
        "name",
        ifname,
        "netns",
        ns.name(),
    ]);
    sw.ip(&["link", "set", port, "master", bridge]);
    sw.ip(&["link", "set", port, "up"]);
}

/// A child process killed and reaped on drop.
pub struct Proc(pub std::process::Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A network namespace with `lo` up, deleted on drop (which also deletes
/// the interfaces inside it).
pub struct Netns(pub String);

impl Netns {
    /// Create namespace `name` (deleting a stale one of that name first).
    pub fn new(name: String) -> Netns {
        let _ = run("ip", &["netns", "del", &name]);
        let (code, _, err) = run("ip", &["netns", "add", &name]);
        assert_eq!(code, 0, "ip netns add {name}: {err}");
        let ns = Netns(name);
        ns.ip(&["link", "set", "lo", "up"]);
        ns
    }

    pub fn name(&self) -> &str {
        &self.0
    }

    /// `ip -n <ns> <args>`, asserting success.
    pub fn ip(&self, args: &[&str]) {
        let mut a = vec!["-n", &self.0];
        a.extend_from_slice(args);
        run_ok("ip", &a);
    }

    /// Run a command inside the namespace, asserting success; its stdout.
    pub fn exec(&self, args: &[&str]) -> String {
        let mut a = vec!["netns", "exec", &self.0];
        a.extend_from_slice(args);
        let (code, out, err) = run("ip", &a);
        assert_eq!(code, 0, "{args:?}: {err}");
        out
    }

    /// A command inside the namespace, to be configured and run by the caller.
    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.0]).args(args);
        c
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = run("ip", &["netns", "del", &self.0]);
    }
}

/// Deterministic, non-repeating-looking test content.
pub fn pattern(len: usize, seed: u32) -> Vec<u8> {
    let mut x = seed.wrapping_mul(2_654_435_761).max(1);
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            (x >> 24) as u8
        })
        .collect()
}

/// `VmRSS` of process `pid` in KiB (0 when unreadable).
pub fn vm_rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// Headless Chromium at 1280×800 on `url` with `extra` flags; its stdout.
pub fn chromium(url: &str, extra: &[&str]) -> String {
    chromium_sized(url, "1280,800", extra)
}

/// Headless Chromium with a window of `size` (`"390,844"`).
pub fn chromium_sized(url: &str, size: &str, extra: &[&str]) -> String {
    let window = format!("--window-size={size}");
    let profile = tempfile::tempdir().unwrap();
    let dir = format!("--user-data-dir={}", profile.path().display());
    let mut args = vec![
        "90",
        "chromium",
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        &window,
        &dir,
        "--virtual-time-budget=5000",
    ];
    args.extend_from_slice(extra);
    args.push(url);
    let (code, out, err) = run("timeout", &args);
    assert_eq!(code, 0, "chromium failed: {err}");
    out
}

/// A self-signed EC (P-256) certificate for `cn`, valid 2 days, written to
/// `cert` and `key` with openssl.
pub fn self_signed_cert(cert: &Path, key: &Path, cn: &str) {
    run_ok(
        "openssl",
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            key.to_str().unwrap(),
            "-out",
            cert.to_str().unwrap(),
            "-days",
            "2",
            "-subj",
            &format!("/CN={cn}"),
        ],
    );
}

/// A CA (`ca_cert`, `ca_key`, common name `ca_cn`, self-signed) and a leaf
/// (`cert`, `key`, common name `cn`) signed by it with the x509 extensions
/// in `ext` (e.g. `subjectAltName=IP:127.0.0.1`), all EC P-256, valid 2
/// days. The CSR and the extension file go beside the leaf (`.csr`, `.ext`).
pub fn ca_signed_cert(
    (ca_cert, ca_key, ca_cn): (&Path, &Path, &str),
    (cert, key, cn): (&Path, &Path, &str),
    ext: &str,
) {
    self_signed_cert(ca_cert, ca_key, ca_cn);
    let (csr, ext_file) = (cert.with_extension("csr"), cert.with_extension("ext"));
    std::fs::write(&ext_file, ext).unwrap();
    let s = |p: &Path| p.to_str().unwrap().to_string();
    run_ok(
        "openssl",
        &[
            "req",
            "-new",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            &s(key),
            "-out",
            &s(&csr),
            "-subj",
            &format!("/CN={cn}"),
        ],
    );
    run_ok(
        "openssl",
        &[
            "x509",
            "-req",
            "-in",
            &s(&csr),
            "-CA",
            &s(ca_cert),
            "-CAkey",
            &s(ca_key),
            "-CAcreateserial",
            "-out",
            &s(cert),
            "-days",
            "2",
            "-extfile",
            &s(&ext_file),
        ],
    );
}

/// The real `coreos-installer` the test setup builds once into the test
/// tools cache (`$CRC_TEST_TOOLS`, default
/// `/var/cache/crc-appliance-tests/cargo`, by `cargo install --locked`), or
/// why it is missing (the caller skips; on CI a skip fails the suite).
pub fn coreos_installer() -> Result<PathBuf, String> {
    let root = std::env::var_os("CRC_TEST_TOOLS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/crc-appliance-tests/cargo"));
    let bin = root.join("bin/coreos-installer");
    if bin.is_file() {
        Ok(bin)
    } else {
        Err(format!(
            "{} is missing (cargo install coreos-installer --locked --root {})",
            bin.display(),
            root.display()
        ))
    }
}
