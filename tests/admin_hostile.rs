//! The admin listener against a hostile host on the segment (issue #40
//! items 2 and 10; audit H2 and L6). Each test builds its own namespaces:
//! a switch (bridge), the appliance, and a client host on the same bridge
//! — nothing on the host's interfaces.
//!
//! - 200 slow connections (partial request heads, a byte trickled every
//!   3 s, re-opened when closed) from one host (20 addresses) at the
//!   admin port: the appliance's `crc-appliance health` answers every
//!   second and a real keepalived (the config `render keepalived` writes)
//!   holds the VIPs for the whole attack; the admin listener itself still
//!   answers loopback (the flood holds every slot it may; a newcomer takes
//!   the slot of a head-waiting connection of the heaviest address).
//!   Before the fix the 64 slots filled, `health` failed and keepalived
//!   dropped every VIP a few seconds into the attack.
//! - `admin.allowFrom`: `/status` and `/metrics` from outside the list are
//!   refused (connection closed), from inside answered; `/api/ha/state`
//!   from any address but `ha.peer`'s is refused (403) even with the
//!   pair's token.
//!
//! The appliance runs in this process, inside its namespace
//! (`InProc::in_netns`); keepalived, its check script (`crc-appliance
//! health`, the binary) and the clients are real programs in the
//! namespaces, reaching it over the admin port as they reach a process.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::inproc::InProc;
use common::{BIN, Netns, run, unique_name};

const KEEPALIVED: &str = "/var/cache/crc-appliance-tests/extract/keepalived/usr/sbin/keepalived";
const IFACE: &str = "adv0";
const OWN: &str = "10.79.0.11";
/// `ha.peer`: nobody answers there in the flood test (keepalived becomes
/// master alone); the client host holds it in the ACL test.
const PEER: &str = "10.79.0.12";
const VIPS: [&str; 3] = ["10.79.0.2", "10.79.0.3", "10.79.0.4"];
/// The attacking host's addresses: one host, 20 addresses (20 × the
/// per-client cap is more than the listener's slots, so the flood fills
/// them and a newcomer is served only by eviction).
fn attackers() -> Vec<String> {
    (200..220).map(|i| format!("10.79.0.{i}")).collect()
}
/// Inside `admin.allowFrom` (10.79.0.48/28) and outside it.
const INSIDE: &str = "10.79.0.50";
const OUTSIDE: &str = "10.79.0.100";
/// How long the flood lasts.
const ATTACK: Duration = Duration::from_secs(20);

/// A private file (mode 0600) in `dir` holding `text`.
fn secret(dir: &Path, name: &str, text: &str) -> String {
    use std::os::unix::fs::PermissionsExt as _;
    let f = dir.join(name);
    std::fs::write(&f, format!("{text}\n")).unwrap();
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
    f.display().to_string()
}

fn cluster(dir: &Path, allow_from: &str) -> String {
    let admin_token = secret(dir, "admin.token", "admin-token-0123456789abcdef");
    let ha_token = secret(dir, "ha.token", "pair-token-0123456789abcdef");
    let d = dir.display();
    format!(
        r#"name: adf
baseDomain: test
network:
  cidr: 10.79.0.0/24
  gateway: 10.79.0.1
  applianceIP: 10.79.0.2
  apiVIP: 10.79.0.3
  ingressVIP: 10.79.0.4
  interface: {IFACE}
nodes:
  - {{ name: bootstrap, role: bootstrap, mac: "52:54:00:4f:00:3d", ip: 10.79.0.61 }}
  - {{ name: master-0, role: master, mac: "52:54:00:4f:00:3c", ip: 10.79.0.60 }}
dns: {{ enabled: false }}
dhcp: {{ enabled: false, leaseFile: "{d}/leases.json" }}
loadBalancer: {{ enabled: false }}
http: {{ enabled: false }}
admin: {{ listen: "0.0.0.0:9180", tokenFile: "{admin_token}"{allow_from} }}
ha: {{ peer: {PEER}, ownIP: {OWN}, tokenFile: "{ha_token}" }}
"#
    )
}

/// The switch, the appliance and one client host (`addrs` on its eth0).
struct Lab {
    sw: Netns,
    app: Netns,
    host: Netns,
}

impl Lab {
    fn new(addrs: &[&str]) -> Lab {
        let lab = Lab {
            sw: Netns::new(unique_name("asw")),
            app: Netns::new(unique_name("aap")),
            host: Netns::new(unique_name("aho")),
        };
        lab.sw.ip(&["link", "add", "br0", "type", "bridge"]);
        lab.sw.ip(&["link", "set", "br0", "up"]);
        for (i, (ns, name, addrs)) in [(&lab.app, IFACE, &[OWN][..]), (&lab.host, "eth0", addrs)]
            .into_iter()
            .enumerate()
        {
            common::bridge_port(&lab.sw, "br0", &format!("p{i}"), ns, name);
            for a in addrs {
                ns.ip(&["addr", "add", &format!("{a}/24"), "dev", name]);
            }
            ns.ip(&["link", "set", name, "up"]);
        }
        lab
    }
}

/// A child process stopped by PID on drop.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = Command::new("kill").arg(self.0.id().to_string()).status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Whether `ns` holds every VIP.
fn holds_vips(ns: &Netns) -> bool {
    let out = ns.exec(&["ip", "-4", "-o", "addr", "show", "dev", IFACE]);
    VIPS.iter().all(|v| out.contains(&format!(" {v}/")))
}

/// The audit's `adminhold.py`: `n` connections to `dst`:9180 from `srcs`
/// (round robin), each sending a partial request head and a byte every
/// 3 s, re-opened when the server closes it, for `secs` seconds.
const HOLD: &str = r#"
import socket, sys, time, selectors
T, N, DST = float(sys.argv[1]), int(sys.argv[2]), (sys.argv[3], 9180)
srcs = sys.argv[4:]
sel = selectors.DefaultSelector()
conns = {}
opened = closed = 0
def open_one(i):
    global opened
    s = socket.socket(); s.setblocking(False)
    s.bind((srcs[i % len(srcs)], 0))
    try: s.connect(DST)
    except BlockingIOError: pass
    try: s.send(b"GET /status HTTP/1.1\r\nHost: 10.79.0.11\r\nX-a: ")
    except OSError: pass
    conns[i] = s; opened += 1
    sel.register(s, selectors.EVENT_READ, i)
for i in range(N): open_one(i)
end = time.time() + T; last = time.time()
while time.time() < end:
    for key, _ in sel.select(timeout=0.5):
        i = key.data; s = key.fileobj
        try: d = s.recv(4096)
        except OSError: d = b""
        if not d:
            sel.unregister(s); s.close(); closed += 1
            if time.time() < end: open_one(i)
    if time.time() - last > 3:
        for s in list(conns.values()):
            try: s.send(b"a")
            except OSError: pass
        last = time.time()
print(f"adminhold: {N} connections for {T:.0f}s; {opened} connects, {closed} closed by the server")
"#;

/// keepalived in `ns` on the config `render keepalived` writes.
fn keepalived(ns: &Netns, cluster: &Path, dir: &Path) -> Proc {
    let (code, conf, err) = run(
        BIN,
        &[
            "render",
            "keepalived",
            "--cluster",
            cluster.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 0, "{err}");
    let f = dir.join("keepalived.conf");
    std::fs::write(&f, conf).unwrap();
    let p = |what: &str| dir.join(format!("{what}.pid")).display().to_string();
    let log = std::fs::File::create(dir.join("keepalived.log")).unwrap();
    let child = ns
        .cmd(&[KEEPALIVED, "-n", "-l", "-D", "-P", "-G"])
        .arg("-f")
        .arg(&f)
        .args(["-p", &p("main"), "-r", &p("vrrp"), "-c", &p("checkers")])
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .expect("spawn keepalived");
    Proc(child)
}

/// `crc-appliance health` in `ns` (bounded like keepalived's 2 s timeout).
fn health(ns: &Netns, cluster: &Path) -> Result<(), String> {
    let out = ns
        .cmd(&["timeout", "2", BIN, "health", "--cluster"])
        .arg(cluster)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    match out.status.success() {
        true => Ok(()),
        false => Err(String::from_utf8_lossy(&out.stderr).trim().to_string()),
    }
}

/// curl in `ns` (from `from` unless empty): (HTTP code, curl's exit code).
fn curl(ns: &Netns, from: &str, args: &[&str]) -> (String, i32) {
    let mut c = ns.cmd(&["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}"]);
    c.args(["--max-time", "2"]);
    if !from.is_empty() {
        c.args(["--interface", from]);
    }
    let out = c.args(args).stdin(Stdio::null()).output().unwrap();
    (
        String::from_utf8_lossy(&out.stdout).trim().to_string(),
        out.status.code().unwrap_or(-1),
    )
}

#[test]
fn health_and_the_vips_hold_while_one_host_floods_the_admin_port() {
    require!(
        Path::new(KEEPALIVED).is_file(),
        "keepalived is not extracted (scripts/prereqs.sh)"
    );
    require_tools!("python3", "curl", "timeout");
    require_netns!("adf");
    let attackers = attackers();
    let lab = Lab::new(&attackers.iter().map(String::as_str).collect::<Vec<_>>());
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cluster.yaml");
    std::fs::write(&file, cluster(dir.path(), "")).unwrap();
    let _app = InProc::in_netns(lab.app.name()).start_path(&file);
    let _ka = keepalived(&lab.app, &file, dir.path());
    // Alone (nobody at ha.peer): master after the master-down timer.
    let deadline = Instant::now() + Duration::from_secs(15);
    while !holds_vips(&lab.app) {
        assert!(Instant::now() < deadline, "keepalived never took the VIPs");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(health(&lab.app, &file), Ok(()));

    let script = dir.path().join("adminhold.py");
    std::fs::write(&script, HOLD).unwrap();
    let secs = ATTACK.as_secs().to_string();
    let mut args = vec!["python3", script.to_str().unwrap(), &secs, "200", OWN];
    args.extend(attackers.iter().map(String::as_str));
    let attack = lab
        .host
        .cmd(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let (mut checks, mut failed, mut lost, mut samples) = (0, Vec::new(), Vec::new(), 0);
    let mut loopback = Vec::new();
    let mut next_check = started + Duration::from_secs(1);
    while started.elapsed() < ATTACK - Duration::from_secs(1) {
        samples += 1;
        if !holds_vips(&lab.app) {
            lost.push(started.elapsed());
        }
        if Instant::now() >= next_check {
            next_check += Duration::from_secs(1);
            checks += 1;
            if let Err(e) = health(&lab.app, &file) {
                failed.push(format!("{:?}: {e}", started.elapsed()));
            }
            // The admin listener itself: a loopback client is admitted (one
            // address may hold only a few connections; idle ones give way).
            let (code, _) = curl(&lab.app, "", &["http://127.0.0.1:9180/api/health"]);
            loopback.push(code);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let out = attack.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout).to_string();
    eprintln!("{said}{}", String::from_utf8_lossy(&out.stderr));
    eprintln!("health: {checks} checks, failed: {failed:?}; loopback /api/health: {loopback:?}");
    assert!(
        said.contains("adminhold: 200 connections"),
        "the attack did not run: {said}"
    );
    assert!(
        lost.is_empty(),
        "keepalived dropped the VIPs during the flood ({} of {samples} samples, first at {:?}); health failed: {failed:?}",
        lost.len(),
        lost.first()
    );
    assert!(
        failed.is_empty(),
        "health failed during the flood: {failed:?}"
    );
    assert!(checks >= 15, "only {checks} health checks ran");
    assert!(
        loopback.iter().all(|c| c == "200"),
        "the admin listener refused loopback during the flood: {loopback:?}"
    );
    assert!(holds_vips(&lab.app));
    assert_eq!(health(&lab.app, &file), Ok(()));
}

#[test]
fn allow_from_limits_every_route_and_ha_state_comes_only_from_the_peer() {
    require_tools!("curl");
    require_netns!("aac");
    let lab = Lab::new(&[INSIDE, OUTSIDE, PEER]);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cluster.yaml");
    let allow = r#", allowFrom: ["10.79.0.48/28"]"#;
    std::fs::write(&file, cluster(dir.path(), allow)).unwrap();
    let _app = InProc::in_netns(lab.app.name()).start_path(&file);
    let url = |p: &str| format!("http://{OWN}:9180{p}");
    for p in ["/status", "/metrics", "/"] {
        let (code, exit) = curl(&lab.host, OUTSIDE, &[&url(p)]);
        assert_eq!(
            code, "000",
            "{p} from outside allowFrom answered (curl exit {exit})"
        );
        assert_ne!(exit, 0, "{p} from outside allowFrom");
        assert_eq!(
            curl(&lab.host, INSIDE, &[&url(p)]).0,
            "200",
            "{p} from inside"
        );
        assert_eq!(
            curl(&lab.host, PEER, &[&url(p)]).0,
            "200",
            "{p} from ha.peer"
        );
        assert_eq!(
            curl(&lab.app, "", &[&format!("http://127.0.0.1:9180{p}")]).0,
            "200",
            "{p} from loopback"
        );
    }
    // The pair's state: only from ha.peer, whatever allowFrom and the
    // credentials say.
    let token = "Authorization: Bearer pair-token-0123456789abcdef";
    let post = |from: &str, auth: &str| {
        let mut a = vec!["-X", "POST", "-d", "{}"];
        if !auth.is_empty() {
            a.extend(["-H", auth]);
        }
        let u = url("/api/ha/state");
        a.push(&u);
        curl(&lab.host, from, &a).0
    };
    assert_eq!(
        post(INSIDE, token),
        "403",
        "HA state from a non-peer address"
    );
    assert_eq!(
        post(OUTSIDE, token),
        "000",
        "HA state from outside allowFrom"
    );
    // From ha.peer the request reaches the authentication.
    assert_eq!(
        post(PEER, ""),
        "401",
        "HA state from ha.peer without credentials"
    );
    assert_eq!(
        curl(
            &lab.app,
            "",
            &[
                "-X",
                "POST",
                "-H",
                token,
                "-d",
                "{}",
                "http://127.0.0.1:9180/api/ha/state"
            ]
        )
        .0,
        "403",
        "HA state from loopback"
    );
}
