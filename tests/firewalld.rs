//! A real firewalld (Debian's, nftables backend) with its own D-Bus, in a
//! network namespace, in front of a real `serve`: the appliance's ports are
//! rejected until the script `crc-appliance firewall print` emits has run,
//! and reachable from a node after it (the admin API stays closed): first
//! with the bridge in the default zone (`public`, a cluster without a
//! `libvirt` section), then in libvirt's own zone (a cluster with one:
//! installed by `crc-appliance firewall apply`, which runs firewall-cmd
//! itself and adds the service with `--zone=libvirt`).
//!
//! Layout: namespace `fwa<pid><n>` is the appliance host, with a bridge
//! `br0` (10.78.0.1/24, the "cluster bridge"); namespace `fwn<pid><n>` is a
//! node, its veth `v1` (10.78.0.10, master-0's MAC) plugged into the bridge.
//! A private `dbus-daemon` (its own config and socket; the policy is the one
//! the firewalld package ships) is the system bus for firewalld and
//! firewall-cmd (`DBUS_SYSTEM_BUS_ADDRESS`). firewalld runs `--nofork
//! --nopid` in the appliance namespace with `--system-config` on a scratch
//! copy of its /etc/firewalld and its own `--default-config`, in a private
//! mount namespace with a tmpfs on /run: the host's /etc/firewalld, /run and
//! firewall (root namespace ruleset, checked) are never touched.
//!
//! firewalld comes from the installed package if there is one, else from
//! the package extracted (not installed: its maintainer scripts would start
//! and enable the daemon on the host) by scripts/prereqs.sh into
//! /var/cache/crc-appliance-tests/extract/firewalld
//! (`CRC_TEST_FIREWALLD_ROOT` overrides).
//!
//! `serve` runs in this process inside the appliance namespace
//! (`InProc::in_netns`: its threads join the namespace before anything
//! binds); what is checked is the network path through firewalld, not the
//! process. The CLI commands the test runs (`firewall print`, `firewall
//! apply`, `preflight`) are the real binary: they are what an operator
//! runs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::inproc::InProc;
use common::{BIN, Netns, have, run, run_ok};

const PY: &str = "/usr/bin/python3";
const EXTRACTED: &str = "/var/cache/crc-appliance-tests/extract/firewalld";

/// Where a firewalld installation's pieces are.
struct Firewalld {
    daemon: PathBuf,
    cmd: PathBuf,
    /// `/usr/lib/firewalld`: zones, services, … (`--default-config`).
    default_config: PathBuf,
    /// `/etc/firewalld` to copy (`firewalld.conf`, empty dirs).
    etc: PathBuf,
    /// The D-Bus policy that lets root own org.fedoraproject.FirewallD1.
    dbus_policy: PathBuf,
}

fn find_firewalld() -> Result<Firewalld, String> {
    let root = std::env::var("CRC_TEST_FIREWALLD_ROOT").unwrap_or_else(|_| EXTRACTED.into());
    let installed = Path::new("/usr/sbin/firewalld").is_file();
    let base = if installed {
        PathBuf::from("/")
    } else {
        PathBuf::from(&root)
    };
    let fw = Firewalld {
        daemon: base.join("usr/sbin/firewalld"),
        cmd: base.join("usr/bin/firewall-cmd"),
        default_config: base.join("usr/lib/firewalld"),
        etc: base.join("etc/firewalld"),
        dbus_policy: base.join("usr/share/dbus-1/system.d/FirewallD.conf"),
    };
    for p in [
        &fw.daemon,
        &fw.cmd,
        &fw.dbus_policy,
        &fw.etc.join("firewalld.conf"),
    ] {
        if !p.exists() {
            return Err(format!(
                "firewalld is neither installed nor extracted in {root} ({} missing; \
                 scripts/prereqs.sh extracts it)",
                p.display()
            ));
        }
    }
    if !fw.default_config.join("zones/public.xml").is_file() {
        return Err(format!("{} has no zones", fw.default_config.display()));
    }
    Ok(fw)
}

/// A process stopped by PID on drop (SIGTERM, then SIGKILL after 10 s).
struct Daemon {
    name: &'static str,
    child: Option<Child>,
    log: PathBuf,
}

impl Daemon {
    fn spawn(name: &'static str, mut cmd: Command, log: PathBuf) -> Daemon {
        let f = std::fs::File::create(&log).unwrap();
        let child = cmd
            .stdin(Stdio::null())
            .stdout(f.try_clone().unwrap())
            .stderr(f)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {name}: {e}"));
        Daemon {
            name,
            child: Some(child),
            log,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn running(&mut self) -> bool {
        matches!(self.child.as_mut().map(|c| c.try_wait()), Some(Ok(None)))
    }

    /// SIGTERM by PID and wait; the exit code (None: killed or not ours).
    fn stop(&mut self) -> Option<i32> {
        let mut child = self.child.take()?;
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(st)) = child.try_wait() {
                return st.code();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        eprintln!("{} did not stop on SIGTERM: SIGKILL", self.name);
        let _ = child.kill();
        let _ = child.wait();
        None
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.stop();
        if std::thread::panicking() {
            for l in self.log().lines() {
                eprintln!("{}: {l}", self.name);
            }
        }
    }
}

/// The nftables ruleset of the namespace (`None`: the root namespace),
/// without counters, via libnftables (python3-nftables, a firewalld
/// dependency).
fn ruleset(ns: Option<&str>) -> String {
    let script = "import nftables, sys\n\
        n = nftables.Nftables()\n\
        n.set_stateless_output(True)\n\
        rc, out, err = n.cmd('list ruleset')\n\
        sys.stdout.write(out); sys.stderr.write(err); sys.exit(rc)";
    match ns {
        Some(ns) => run_ok("ip", &["netns", "exec", ns, PY, "-c", script]),
        None => run_ok(PY, &["-c", script]),
    }
}

/// How a TCP connection from the node to `port` went, by curl's exit code.
#[derive(Debug, PartialEq)]
enum Tcp {
    /// Connected (an HTTP answer, or the LB closing a connection it has no
    /// backend for).
    Connected,
    /// Refused or rejected (curl 7: ECONNREFUSED / EHOSTUNREACH).
    Rejected,
    /// No answer at all (curl 28).
    Timeout,
}

fn tcp(node: &Netns, port: u16) -> Tcp {
    let (code, _, _) = run(
        "ip",
        &[
            "netns",
            "exec",
            node.name(),
            "curl",
            "-s",
            "-o",
            "/dev/null",
            "--connect-timeout",
            "3",
            "-m",
            "5",
            &format!("http://10.78.0.1:{port}/"),
        ],
    );
    match code {
        7 => Tcp::Rejected,
        28 => Tcp::Timeout,
        _ => Tcp::Connected,
    }
}

/// `dig +short` from the node over udp or tcp: Ok(answer) or Err(output).
fn dig(node: &Netns, name: &str, tcp: bool) -> Result<String, String> {
    let mut args = vec![
        "netns",
        "exec",
        node.name(),
        "dig",
        "+time=2",
        "+tries=1",
        "+short",
        "@10.78.0.1",
        name,
    ];
    if tcp {
        args.push("+tcp");
    }
    let (code, out, err) = run("ip", &args);
    if code == 0 && !out.trim().is_empty() && !out.contains(";;") {
        Ok(out.trim().to_string())
    } else {
        Err(format!("exit {code}: {out}{err}"))
    }
}

fn curl_body(node: &Netns, path: &str) -> Result<String, String> {
    let (code, out, err) = run(
        "ip",
        &[
            "netns",
            "exec",
            node.name(),
            "curl",
            "-sS",
            "-f",
            "--connect-timeout",
            "3",
            "-m",
            "5",
            &format!("http://10.78.0.1:8080{path}"),
        ],
    );
    if code == 0 {
        Ok(out)
    } else {
        Err(format!("curl exit {code}: {err}"))
    }
}

const TCP_PORTS: [u16; 5] = [80, 443, 6443, 8080, 22623];
const ADMIN_PORT: u16 = 9180;
const IMAGE: &str = "an image served over http\n";
const IGNITION: &str = "{\"ignition\":{\"version\":\"3.2.0\"}}";

/// A cluster on the bridge with every guest-facing service on its real port
/// (DNS 53, DHCP 67 on br0, LB 80/443/6443/22623, HTTP 8080) and the admin
/// API on the bridge address too (with a token), which must stay closed.
fn cluster(dir: &Path) -> PathBuf {
    for sub in ["images", "ign", "state"] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
    }
    std::fs::write(dir.join("images/a.txt"), IMAGE).unwrap();
    std::fs::write(dir.join("ign/master.ign"), IGNITION).unwrap();
    let token = dir.join("token");
    std::fs::write(&token, "firewalld-test-token-0123456789abcdef\n").unwrap();
    run_ok("chmod", &["600", token.to_str().unwrap()]);
    let text = format!(
        r#"name: fw
baseDomain: fw.test
network:
  cidr: 10.78.0.0/24
  gateway: 10.78.0.254
  applianceIP: 10.78.0.1
  interface: br0
nodes:
  - {{ name: bootstrap, role: bootstrap, mac: "52:54:00:4e:00:05", ip: 10.78.0.5 }}
  - {{ name: master-0, role: master, mac: "52:54:00:4e:00:0a", ip: 10.78.0.10 }}
dns:
  listen: ["10.78.0.1:53"]
dhcp:
  listen: 0.0.0.0:67
  leaseFile: {d}/state/leases.json
http:
  listen: 10.78.0.1:8080
  imagesDir: {d}/images
  ignitionDir: {d}/ign
admin:
  listen: 10.78.0.1:{ADMIN_PORT}
  tokenFile: {d}/token
"#,
        d = dir.display()
    );
    let f = dir.join("cluster.yaml");
    std::fs::write(&f, text).unwrap();
    f
}

/// The private system bus: the package's FirewallD.conf included into a
/// deny-by-default policy like the system bus's.
fn dbus_config(dir: &Path, policy: &Path) -> (PathBuf, String) {
    let sock = dir.join("system_bus_socket");
    let conf = dir.join("system.conf");
    std::fs::write(
        &conf,
        format!(
            r#"<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-BUS Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path={sock}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <deny own="*"/>
    <deny send_type="method_call"/>
    <allow send_destination="org.freedesktop.DBus"/>
    <allow send_type="signal"/>
    <allow send_requested_reply="true"/>
    <allow receive_type="*"/>
  </policy>
  <include>{policy}</include>
</busconfig>
"#,
            sock = sock.display(),
            policy = policy.display()
        ),
    )
    .unwrap();
    (conf, format!("unix:path={}", sock.display()))
}

struct FirewallCmd {
    bin_dir: PathBuf,
    bus: String,
}

impl FirewallCmd {
    /// `firewall-cmd ARGS`: (exit code, stdout + stderr).
    fn run(&self, args: &[&str]) -> (i32, String) {
        let out = Command::new(self.bin_dir.join("firewall-cmd"))
            .args(args)
            .env("DBUS_SYSTEM_BUS_ADDRESS", &self.bus)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        )
    }

    fn ok(&self, args: &[&str]) -> String {
        let (code, out) = self.run(args);
        assert_eq!(code, 0, "firewall-cmd {args:?}: {out}");
        out.trim().to_string()
    }
}

/// The `ports:` line of `firewall-cmd --info-service`.
fn service_ports(info: &str) -> String {
    info.lines()
        .find_map(|l| l.trim().strip_prefix("ports:"))
        .unwrap_or_default()
        .trim()
        .to_string()
}

fn python_modules_missing() -> Option<String> {
    let (code, _, err) = run(PY, &["-c", "import dbus, gi, nftables, firewall.config"]);
    (code != 0).then(|| {
        format!(
            "firewalld's python modules are missing ({}): python3-dbus python3-gi python3-nftables python3-firewall",
            err.lines().last().unwrap_or("").trim()
        )
    })
}

#[test]
fn firewalld_opens_exactly_the_printed_ports() {
    let test = "firewalld_opens_exactly_the_printed_ports";
    if let Err(why) = common::netns_available("fwp") {
        skipped!("SKIPPED {test}: {why}");
        return;
    }
    for tool in ["dbus-daemon", "unshare", "curl", "dig", "udhcpc", "timeout"] {
        if !have(tool) {
            skipped!("SKIPPED {test}: {tool} is not installed");
            return;
        }
    }
    if let Some(why) = python_modules_missing() {
        skipped!("SKIPPED {test}: {why}");
        return;
    }
    let fw = match find_firewalld() {
        Ok(fw) => fw,
        Err(why) => {
            skipped!("SKIPPED {test}: {why}");
            return;
        }
    };
    let t0 = Instant::now();
    let host_rules = ruleset(None);
    assert!(
        !host_rules.contains("table inet firewalld"),
        "a firewalld already runs in the root namespace: not touching it"
    );

    // The appliance host with its bridge, and a node plugged into it.
    let app = Netns::new(common::unique_name("fwa"));
    let node = Netns::new(common::unique_name("fwn"));
    app.ip(&["link", "add", "br0", "type", "bridge"]);
    app.ip(&[
        "link", "add", "v0", "type", "veth", "peer", "name", "v1", "netns", &node.0,
    ]);
    app.ip(&["link", "set", "v0", "master", "br0"]);
    app.ip(&["addr", "add", "10.78.0.1/24", "dev", "br0"]);
    app.ip(&["link", "set", "br0", "up"]);
    app.ip(&["link", "set", "v0", "up"]);
    node.ip(&["link", "set", "v1", "address", "52:54:00:4e:00:0a"]);
    node.ip(&["addr", "add", "10.78.0.10/24", "dev", "v1"]);
    node.ip(&["link", "set", "v1", "up"]);

    let dir = tempfile::tempdir().unwrap();
    let file = cluster(dir.path());
    let app_srv = InProc::in_netns(app.name()).start_path(&file);

    // Baseline, no firewall yet: the appliance answers the node (so the
    // rejections below are firewalld's).
    common::wait_until("DNS from the node", Duration::from_secs(20), || {
        dig(&node, "api.fw.fw.test", false).is_ok()
    });
    assert_eq!(dig(&node, "api.fw.fw.test", false).unwrap(), "10.78.0.1");
    assert_eq!(curl_body(&node, "/images/a.txt").unwrap(), IMAGE);
    for p in TCP_PORTS.iter().chain([&ADMIN_PORT]) {
        assert_eq!(
            tcp(&node, *p),
            Tcp::Connected,
            "port {p} without a firewall"
        );
    }

    // The private system bus and firewalld.
    let (bus_conf, bus) = dbus_config(dir.path(), &fw.dbus_policy);
    let mut c = Command::new("dbus-daemon");
    c.arg(format!("--config-file={}", bus_conf.display()))
        .arg("--nofork")
        .arg("--nopidfile");
    let mut dbus = Daemon::spawn("dbus-daemon", c, dir.path().join("dbus.log"));
    let etc = dir.path().join("etc-firewalld");
    run_ok(
        "cp",
        &["-a", fw.etc.to_str().unwrap(), etc.to_str().unwrap()],
    );
    // libvirt's zone (libvirt-daemon-driver-network ships it into the
    // host's /usr/lib/firewalld): a zone of the scratch system config.
    let libvirt_zone = Path::new("/usr/lib/firewalld/zones/libvirt.xml");
    let have_libvirt_zone = libvirt_zone.is_file();
    if have_libvirt_zone {
        std::fs::create_dir_all(etc.join("zones")).unwrap();
        std::fs::copy(libvirt_zone, etc.join("zones/libvirt.xml")).unwrap();
    }
    // The service file the packages ship (/usr/lib/firewalld/services).
    std::fs::create_dir_all(etc.join("services")).unwrap();
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("packaging/firewalld/crc-appliance.xml"),
        etc.join("services/crc-appliance.xml"),
    )
    .unwrap();
    let bin_dir = dir.path().join("bin");
    std::fs::create_dir_all(&bin_dir).unwrap();
    let wrapper = bin_dir.join("firewall-cmd");
    std::fs::write(
        &wrapper,
        format!("#!/bin/sh\nexec {PY} {} \"$@\"\n", fw.cmd.display()),
    )
    .unwrap();
    run_ok("chmod", &["+x", wrapper.to_str().unwrap()]);
    let fc = FirewallCmd {
        bin_dir: bin_dir.clone(),
        bus: bus.clone(),
    };
    common::wait_until("the private bus socket", Duration::from_secs(10), || {
        dir.path().join("system_bus_socket").exists()
    });
    // `ip netns exec` and `unshare` exec: the child's PID is firewalld's.
    let daemon_cmd = format!(
        "mount -t tmpfs tmpfs /run && exec {PY} {daemon} --nofork --nopid --log-target console \
         --system-config {etc} --default-config {def}",
        daemon = fw.daemon.display(),
        etc = etc.display(),
        def = fw.default_config.display()
    );
    let mut c = app.cmd(&[
        "unshare",
        "-m",
        "--propagation",
        "private",
        "sh",
        "-c",
        &daemon_cmd,
    ]);
    c.env("DBUS_SYSTEM_BUS_ADDRESS", &bus);
    let mut firewalld = Daemon::spawn("firewalld", c, dir.path().join("firewalld.log"));
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if fc.run(&["--state"]).1.trim() == "running" {
            break;
        }
        assert!(
            firewalld.running(),
            "firewalld exited:\n{}",
            firewalld.log()
        );
        assert!(
            Instant::now() < deadline,
            "firewalld not running after 60 s:\n{}",
            firewalld.log()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    eprintln!("firewalld up after {:?}", t0.elapsed());
    assert!(
        ruleset(Some(app.name())).contains("table inet firewalld"),
        "firewalld runs, but not with nftables in the appliance namespace"
    );
    // firewalld loaded the shipped service with its documented ports.
    let shipped = fc.ok(&["--info-service=crc-appliance"]);
    assert_eq!(
        service_ports(&shipped),
        "53/udp 53/tcp 67/udp 69/udp 80/tcp 443/tcp 6443/tcp 8080/tcp 22623/tcp",
        "{shipped}"
    );
    // The bridge in the default zone, which rejects what it does not list
    // (like libvirt's zone); permanent, as the printed script reloads.
    let zone = fc.ok(&["--get-default-zone"]);
    assert_eq!(zone, "public");
    assert_eq!(
        fc.ok(&["--permanent", "--zone=public", "--get-target"]),
        "default"
    );
    fc.ok(&["--permanent", "--zone=public", "--add-interface=br0"]);
    fc.ok(&["--reload"]);
    assert_eq!(fc.ok(&["--get-zone-of-interface=br0"]), "public");

    // Before: everything the appliance serves is rejected.
    let before = dig(&node, "api.fw.fw.test", false);
    assert!(
        before.as_ref().is_err_and(|e| e.contains("unreachable")),
        "DNS/udp before: {before:?}"
    );
    assert!(
        dig(&node, "api.fw.fw.test", true).is_err(),
        "DNS/tcp before"
    );
    for p in TCP_PORTS.iter().chain([&ADMIN_PORT]) {
        assert_eq!(tcp(&node, *p), Tcp::Rejected, "port {p} before");
    }
    let lease_dir = tempfile::tempdir().unwrap();
    assert_eq!(
        common::udhcpc::udhcpc_once(&node, "v1", lease_dir.path(), "2"),
        None,
        "a DHCP lease before the service was added"
    );

    // The exact script `firewall print` emits, run with firewall-cmd on PATH.
    let (code, script, err) = run(
        BIN,
        &["firewall", "print", "--cluster", file.to_str().unwrap()],
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        script.contains("firewall-cmd --permanent --add-service=crc-appliance-fw\n"),
        "{script}"
    );
    // firewall-cmd (the extracted one first on PATH) on the private bus.
    let with_firewalld = |mut cmd: Command| {
        cmd.env(
            "PATH",
            format!(
                "{}:{}",
                bin_dir.display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        )
        .env("DBUS_SYSTEM_BUS_ADDRESS", &bus);
        cmd
    };
    let run_script = |script: &str| {
        let mut sh = Command::new("sh");
        sh.arg("-c").arg(script);
        let out = with_firewalld(sh).output().unwrap();
        assert!(
            out.status.success(),
            "the printed script failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
    };
    // preflight sees the running firewalld (over the private bus) and names
    // the ports the zone of the cluster bridge does not open.
    let preflight = || {
        let mut p = Command::new(BIN);
        p.args(["preflight", "--cluster", file.to_str().unwrap()]);
        String::from_utf8_lossy(&with_firewalld(p).output().unwrap().stdout).into_owned()
    };
    let before = preflight();
    assert!(
        before.contains("firewalld zone public (interface br0) does not open")
            && before.contains("6443/tcp (")
            && before.contains("22623/tcp (")
            && before.contains("firewall apply"),
        "{before}"
    );
    run_script(&script);
    let after = preflight();
    assert!(!after.contains("firewalld zone"), "{after}");
    assert!(
        fc.ok(&["--zone=public", "--list-services"])
            .split_whitespace()
            .any(|s| s == "crc-appliance-fw"),
        "service not in the zone after the script"
    );
    let info = fc.ok(&["--info-service=crc-appliance-fw"]);
    assert_eq!(
        service_ports(&info),
        "53/tcp 80/tcp 443/tcp 6443/tcp 8080/tcp 22623/tcp 53/udp 67/udp",
        "{info}"
    );

    // After: DNS (udp and tcp), DHCP, HTTP and every LB frontend answer the
    // node; the admin API is still rejected.
    assert_eq!(dig(&node, "api.fw.fw.test", false).unwrap(), "10.78.0.1");
    assert_eq!(dig(&node, "api-int.fw.fw.test", true).unwrap(), "10.78.0.1");
    assert_eq!(curl_body(&node, "/images/a.txt").unwrap(), IMAGE);
    // Per node: the role's file plus the node's hostname.
    let ign = curl_body(&node, "/ignition/master-0.ign").unwrap();
    assert!(
        ign.starts_with(&IGNITION[..IGNITION.len() - 1]) && ign.contains("master-0.fw.fw.test"),
        "{ign}"
    );
    for p in TCP_PORTS {
        assert_eq!(tcp(&node, p), Tcp::Connected, "port {p} after");
    }
    assert_eq!(tcp(&node, ADMIN_PORT), Tcp::Rejected, "admin API opened");
    let lease = common::udhcpc::udhcpc_once(&node, "v1", lease_dir.path(), "3")
        .expect("no DHCP lease after the service was added");
    assert_eq!(
        common::udhcpc::kv(&lease, "ip").as_deref(),
        Some("10.78.0.10"),
        "{lease}"
    );

    // Replacing the service (the script run again) keeps it working.
    run_script(&script);
    assert_eq!(tcp(&node, 6443), Tcp::Connected, "6443 after a second run");

    // The libvirt case: a cluster with a `libvirt` section gets its service
    // in libvirt's zone (which already allows dns, dhcp and tftp, and
    // rejects the rest with a low-priority rule).
    if have_libvirt_zone {
        fc.ok(&[
            "--permanent",
            "--zone=public",
            "--remove-service=crc-appliance-fw",
        ]);
        fc.ok(&["--permanent", "--zone=libvirt", "--change-interface=br0"]);
        fc.ok(&["--reload"]);
        assert_eq!(fc.ok(&["--get-zone-of-interface=br0"]), "libvirt");
        for p in [6443, 22623, 8080, ADMIN_PORT] {
            assert_eq!(
                tcp(&node, p),
                Tcp::Rejected,
                "port {p}, libvirt zone, before"
            );
        }
        let lv = dir.path().join("cluster-libvirt.yaml");
        std::fs::write(
            &lv,
            format!(
                "{}rhcos:\n  iso: {d}/rhcos-live.iso\nlibvirt:\n  uri: test:///default\n  pool: {{ name: fw, path: {d}/pool }}\n  \
                 network: {{ name: fw, bridge: br0, mode: appliance }}\n",
                std::fs::read_to_string(&file).unwrap(),
                d = dir.path().display()
            ),
        )
        .unwrap();
        let (code, lv_script, err) = run(
            BIN,
            &["firewall", "print", "--cluster", lv.to_str().unwrap()],
        );
        assert_eq!(code, 0, "{err}");
        assert!(
            lv_script.contains(
                "firewall-cmd --permanent --zone=libvirt --add-service=crc-appliance-fw\n"
            ),
            "{lv_script}"
        );
        // This time through `firewall apply` (firewall-cmd run by the
        // appliance itself), which must install the same service.
        let mut apply = Command::new(BIN);
        apply.args(["firewall", "apply", "--cluster", lv.to_str().unwrap()]);
        let out = with_firewalld(apply).output().unwrap();
        let said = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(
            out.status.success(),
            "firewall apply failed: {said}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            said.contains("firewall-cmd --permanent --zone=libvirt --add-service=crc-appliance-fw")
                && said.contains("removed the previous service crc-appliance-fw"),
            "{said}"
        );
        for p in TCP_PORTS {
            assert_eq!(
                tcp(&node, p),
                Tcp::Connected,
                "port {p}, libvirt zone, after"
            );
        }
        assert_eq!(
            tcp(&node, ADMIN_PORT),
            Tcp::Rejected,
            "admin API opened (libvirt zone)"
        );
        assert_eq!(dig(&node, "api.fw.fw.test", false).unwrap(), "10.78.0.1");
    } else {
        skipped!("SKIPPED {test} (libvirt zone part): no /usr/lib/firewalld/zones/libvirt.xml");
    }

    // firewalld and the bus stop cleanly; firewalld removes its table on
    // exit, and the root namespace's ruleset never changed.
    assert_eq!(firewalld.stop(), Some(0), "{}", firewalld.log());
    assert!(
        !ruleset(Some(app.name())).contains("table inet firewalld"),
        "firewalld left its table behind"
    );
    assert!(dbus.stop().is_some(), "{}", dbus.log());
    drop(app_srv);
    assert_eq!(
        ruleset(None),
        host_rules,
        "the root namespace's ruleset changed"
    );
    eprintln!("{test}: {:?}", t0.elapsed());
}
