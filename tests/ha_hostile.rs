//! The HA exchange against a hostile host on the segment (issue #40 items
//! 1 and 3, docs/ha.md "Threat model"): member A runs in a network
//! namespace and holds the VIPs (added by hand, no keepalived needed);
//! the peer's address `ha.peer` is held by a Python fake peer (or a real
//! member B) in another namespace on the same bridge; a node namespace
//! installs worker-0 and runs DHCP clients.
//!
//! - A fake peer sees no secret (neither the pair key nor the admin token
//!   appears in what it receives) and none of its forged answers
//!   (reinstall at revision u64::MAX, 2,046 leases expiring at 2^63,
//!   bootstrap-complete events, 1,024 unknown node names, its own replayed
//!   MAC headers) changes anything; a dripping answer is cut within the
//!   exchange deadline.
//! - A peer that knows the key (a Python client signing like the member)
//!   gets its future revision, lease and events refused and logged, its
//!   replay and stale requests refused; A's answer verifies with the key.
//! - DHCP clients with 255-byte client ids leave the sync between two
//!   real members working, and the document small.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::{Appliance, BIN, Netns, run, unique_name};

const IFACE: &str = "hh0";
const VIPS: [&str; 3] = ["10.78.0.2", "10.78.0.3", "10.78.0.4"];
const OWN_A: &str = "10.78.0.11";
const PEER: &str = "10.78.0.12";
const W0_IP: &str = "10.78.0.50";
const W0_MAC: &str = "52:54:00:4e:00:32";
const PAIR_KEY: &str = "pair-key-5f0c1d2e3a4b59687766";
const ADMIN_TOKEN: &str = "admin-token-9a8b7c6d5e4f3210";

fn cluster(dir: &Path, own_ip: &str, peer: &str) -> String {
    let d = dir.display();
    format!(
        r#"name: hh
baseDomain: test
network:
  cidr: 10.78.0.0/20
  gateway: 10.78.0.1
  applianceIP: 10.78.0.2
  apiVIP: 10.78.0.3
  ingressVIP: 10.78.0.4
  interface: {IFACE}
nodes:
  - {{ name: bootstrap, role: bootstrap, mac: "52:54:00:4e:00:3d", ip: 10.78.0.61 }}
  - {{ name: master-0, role: master, mac: "52:54:00:4e:00:3c", ip: 10.78.0.60 }}
  - {{ name: worker-0, role: worker, mac: "{W0_MAC}", ip: {W0_IP} }}
dhcp:
  leaseFile: "{d}/leases.json"
  pool: {{ start: 10.78.4.1, end: 10.78.11.254 }}
http:
  imagesDir: "{d}/images"
  ignitionDir: "{d}/ign"
admin: {{ listen: "0.0.0.0:9180", tokenFile: "{d}/admin.token" }}
rhcos:
  kernel: "{d}/vmlinuz"
  initramfs: "{d}/initrd.img"
  rootfs: "{d}/rootfs.img"
  kargs: ["coreos.inst.image_url=http://10.78.0.2:8080/images/metal.raw.xz"]
ha: {{ peer: {peer}, ownIP: {own_ip}, tokenFile: "{d}/ha.key" }}
"#
    )
}

/// The files one member needs (each member its own directory).
fn member_files(dir: &Path) {
    use std::os::unix::fs::PermissionsExt as _;
    for (name, text) in [("ha.key", PAIR_KEY), ("admin.token", ADMIN_TOKEN)] {
        let f = dir.join(name);
        std::fs::write(&f, format!("{text}\n")).unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    for (f, n) in [
        ("vmlinuz", 7_001),
        ("initrd.img", 9_001),
        ("rootfs.img", 11_001),
    ] {
        std::fs::write(dir.join(f), common::pattern(n, 1)).unwrap();
    }
    std::fs::create_dir_all(dir.join("images")).unwrap();
    std::fs::write(dir.join("images/metal.raw.xz"), common::pattern(50_000, 2)).unwrap();
    std::fs::create_dir_all(dir.join("ign")).unwrap();
    for role in ["bootstrap", "master", "worker"] {
        std::fs::write(
            dir.join(format!("ign/{role}.ign")),
            r#"{"ignition":{"version":"3.2.0"}}"#,
        )
        .unwrap();
    }
}

/// The bridge, member A (holding the VIPs), the peer's address, a node.
struct Lab {
    sw: Netns,
    a: Netns,
    peer: Netns,
    node: Netns,
}

impl Lab {
    fn new() -> Lab {
        let lab = Lab {
            sw: Netns::new(unique_name("hhs")),
            a: Netns::new(unique_name("hha")),
            peer: Netns::new(unique_name("hhp")),
            node: Netns::new(unique_name("hhn")),
        };
        lab.sw.ip(&["link", "add", "br0", "type", "bridge"]);
        lab.sw.ip(&["link", "set", "br0", "up"]);
        let mut a_addrs = vec![OWN_A];
        a_addrs.extend(VIPS);
        for (i, (ns, name, addrs, mac)) in [
            (&lab.a, IFACE, a_addrs, None),
            (&lab.peer, IFACE, vec![PEER], None),
            (&lab.node, "eth0", vec![W0_IP], Some(W0_MAC)),
        ]
        .into_iter()
        .enumerate()
        {
            let port = format!("p{i}");
            lab.sw.ip(&[
                "link",
                "add",
                &port,
                "type",
                "veth",
                "peer",
                "name",
                name,
                "netns",
                ns.name(),
            ]);
            lab.sw.ip(&["link", "set", &port, "master", "br0"]);
            lab.sw.ip(&["link", "set", &port, "up"]);
            if let Some(mac) = mac {
                ns.ip(&["link", "set", name, "address", mac]);
            }
            for a in addrs {
                ns.ip(&["addr", "add", &format!("{a}/20"), "dev", name]);
            }
            ns.ip(&["link", "set", name, "up"]);
            ns.ip(&["link", "set", "lo", "up"]);
        }
        lab
    }
}

/// `/status` of the member in `ns`.
fn status(ns: &Netns) -> serde_json::Value {
    let out = ns.exec(&[
        "curl",
        "-s",
        "--max-time",
        "2",
        "http://127.0.0.1:9180/status",
    ]);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

fn netboot_state(st: &serde_json::Value, node: &str) -> String {
    st["http"]["netboot"]
        .as_array()
        .and_then(|rows| rows.iter().find(|r| r["node"] == node))
        .and_then(|r| r["state"].as_str())
        .unwrap_or("?")
        .to_string()
}

fn pool_leases(st: &serde_json::Value) -> usize {
    st["dhcp"]["leases"]
        .as_array()
        .map_or(0, |ls| ls.iter().filter(|l| l["state"] == "bound").count())
}

fn curl(node: &Netns, url: &str) -> (i32, String) {
    let (code, out, _) = run(
        "ip",
        &[
            "netns",
            "exec",
            node.name(),
            "curl",
            "-s",
            "--max-time",
            "5",
            url,
        ],
    );
    (code, out)
}

/// worker-0 installs through A: script, ignition, image; then `exit`.
fn install_worker0(node: &Netns) {
    let script = "http://10.78.0.2:8080/boot/52-54-00-4e-00-32.ipxe";
    let (c, s) = curl(node, script);
    assert!(c == 0 && s.contains("kernel "), "install script: {s}");
    let (c, ign) = curl(node, "http://10.78.0.2:8080/ignition/worker-0.ign");
    assert!(c == 0 && ign.contains("ignition"), "ignition: {ign}");
    let (c, _) = curl(node, "http://10.78.0.2:8080/images/metal.raw.xz");
    assert_eq!(c, 0);
    let (_, s) = curl(node, script);
    assert!(s.contains("exit"), "installed: {s}");
}

/// `wait-for bootstrap-complete` on A with a short timeout: its exit code.
fn wait_for_bootstrap(ns: &Netns, cluster: &Path) -> i32 {
    let (code, _, _) = run(
        "ip",
        &[
            "netns",
            "exec",
            ns.name(),
            BIN,
            "wait-for",
            "bootstrap-complete",
            "--timeout",
            "2s",
            "--cluster",
            cluster.to_str().unwrap(),
        ],
    );
    code
}

fn wait_for(what: &str, within: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A Python script in `ns`, in the background (killed on drop).
struct Py(Child);

impl Py {
    fn start(ns: &Netns, dir: &Path, name: &str, code: &str, args: &[&str]) -> Py {
        let script = dir.join(name);
        std::fs::write(&script, code).unwrap();
        let mut a = vec!["timeout", "120", "python3", script.to_str().unwrap()];
        a.extend_from_slice(args);
        let child = ns
            .cmd(&a)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        Py(child)
    }

    /// Wait for it to end; its stdout and stderr.
    fn output(mut self) -> String {
        let child = std::mem::replace(
            &mut self.0,
            std::process::Command::new("true").spawn().unwrap(),
        );
        let out = child.wait_with_output().unwrap();
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    }
}

impl Drop for Py {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The HMAC framing of `runtime::haauth`, for the Python peers.
const HA_PY: &str = r#"
import hashlib, hmac, json, os, socket, struct, time

def field(b): return struct.pack(">Q", len(b)) + b

def message(role, member, t, nonce, body):
    m = field(b"crc-appliance ha sync v2")
    if role[0] == "request":
        m += field(b"request") + field(b"POST") + field(b"/api/ha/state")
    else:
        m += field(b"answer") + field(struct.pack(">H", role[1])) + field(role[2])
    return m + field(socket.inet_aton(member)) + field(struct.pack(">Q", t)) + field(nonce) + field(body)

def sign(key, role, member, t, nonce, body):
    return hmac.new(key, message(role, member, t, nonce, body), hashlib.sha256).hexdigest()

def post(key, member, host, body, t=None, nonce=None):
    t = int(time.time()) if t is None else t
    nonce = os.urandom(16) if nonce is None else nonce
    mac = sign(key, ("request",), member, t, nonce, body)
    head = ("POST /api/ha/state HTTP/1.1\r\nHost: %s:9180\r\nContent-Type: application/json\r\n"
            "Content-Length: %d\r\nConnection: close\r\nX-Crc-Ha-Member: %s\r\nX-Crc-Ha-Time: %d\r\n"
            "X-Crc-Ha-Nonce: %s\r\nX-Crc-Ha-Mac: %s\r\n\r\n") % (host, len(body), member, t, nonce.hex(), mac)
    s = socket.create_connection((host, 9180), timeout=5)
    s.sendall(head.encode() + body)
    data = b""
    while True:
        b = s.recv(65536)
        if not b: break
        data += b
    s.close()
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    status = int(lines[0].split()[1])
    hdrs = {l.split(":", 1)[0].strip().lower(): l.split(":", 1)[1].strip() for l in lines[1:] if ":" in l}
    return status, hdrs, rest, nonce
"#;

/// The fake peer: binds the peer's address, records every request whole
/// (to `argv[2]`), and answers forged documents (`forge`), then drips
/// (`drip`), for `argv[3]` seconds each.
const FAKEPEER: &str = r#"
import json, socket, sys, threading, time
mode, log, secs = sys.argv[1], sys.argv[2], float(sys.argv[3])
U64 = 2**64 - 1
n = {"req": 0, "ev": 0}
lock = threading.Lock()

def forged(req_headers):
    now = int(time.time())
    blank = {"installScriptAt": None, "ignitionAt": None, "installedAt": None, "rev": U64}
    leases = []
    for i in range(2046):
        a = 0x0A4E0401 + i
        leases.append({"ip": socket.inet_ntoa(a.to_bytes(4, "big")), "mac": "02:00:%02x:%02x:%02x:%02x" % tuple(a.to_bytes(4, "big")),
                       "state": "bound", "expires": 2**63 - 1, "hostname": "ghost", "reserved": False})
    events = [{"at": now, "event": {"kind": "bootstrapComplete"}},
              {"at": now, "event": {"kind": "installFinished", "node": "master-0"}},
              {"at": now, "event": {"kind": "machineConfigConnect", "node": "worker-0"}}]
    # 600-character names: the whole answer stays under 1 MiB, the cap of
    # the version before authentication, which merged it.
    for _ in range(1024):
        n["ev"] += 1
        events.append({"at": now, "event": {"kind": "netbootScript", "node": "ghost-%09d-" % n["ev"] + "x" * 600}})
    parts = {"netboot": {"worker-0": blank, "master-0": dict(blank)}, "leases": leases, "timeline": events}
    # Every other answer as a version-1 document, the others as version 2
    # carrying the request's own MAC headers (a reflection).
    if n["req"] % 2:
        return json.dumps(parts).encode(), b""
    extra = b"".join(b"%s: %s\r\n" % (k, v) for k, v in req_headers.items() if k.lower().startswith(b"x-crc-ha-"))
    return json.dumps({"version": 2, "parts": parts}).encode(), extra

def handle(c):
    c.settimeout(5)
    data = b""
    try:
        while b"\r\n\r\n" not in data:
            b = c.recv(65536)
            if not b: return
            data += b
        head, rest = data.split(b"\r\n\r\n", 1)
        hdrs = dict(l.split(b": ", 1) for l in head.split(b"\r\n")[1:] if b": " in l)
        want = int(hdrs.get(b"Content-Length", b"0"))
        while len(rest) < want:
            b = c.recv(65536)
            if not b: break
            rest += b
        with lock:
            n["req"] += 1
            with open(log, "ab") as f:
                f.write(head + b"\r\n\r\n" + rest + b"\n")
        if mode == "drip":
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")
            for _ in range(int(secs)):
                c.sendall(b" ")
                time.sleep(0.9)
            return
        body, extra = forged(hdrs)
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%sConnection: close\r\n\r\n" % (len(body), extra) + body)
    except Exception as e:
        print("error", e, flush=True)
    finally:
        c.close()

s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("10.78.0.12", 9180))
s.listen(64)
s.settimeout(0.3)
end = time.time() + secs
while time.time() < end:
    try:
        c, _ = s.accept()
    except socket.timeout:
        continue
    threading.Thread(target=handle, args=(c,), daemon=True).start()
print("REQUESTS", n["req"], flush=True)
"#;

/// Start A in its namespace; its directory and the serve.
fn start_a(lab: &Lab, w: &Path) -> (PathBuf, Appliance) {
    let dir = w.join("a");
    std::fs::create_dir_all(&dir).unwrap();
    member_files(&dir);
    let file = dir.join("cluster.yaml");
    std::fs::write(&file, cluster(&dir, OWN_A, PEER)).unwrap();
    let app = Appliance::launch().netns(lab.a.name()).start_path(&file);
    (file, app)
}

#[test]
fn a_fake_peer_gets_no_secret_and_its_forged_answers_change_nothing() {
    require_tools!("curl", "python3");
    require_netns!("hhf");
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let lab = Lab::new();
    let (file, app) = start_a(&lab, w);
    install_worker0(&lab.node);
    let rss_before = common::vm_rss_kib(app.pid());
    let log = w.join("fakepeer.log");
    let logs = log.to_str().unwrap();

    // Forged answers for 8 s (A exchanges every second, backing off).
    let out = Py::start(
        &lab.peer,
        w,
        "fakepeer.py",
        FAKEPEER,
        &["forge", logs, "12"],
    )
    .output();
    let requests: usize = out
        .lines()
        .find_map(|l| l.strip_prefix("REQUESTS "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("fake peer: {out}"));
    assert!(requests >= 2, "A should keep trying: {out}");
    let seen = std::fs::read(&log).unwrap();
    let seen = String::from_utf8_lossy(&seen);
    assert!(
        seen.contains("x-crc-ha-mac"),
        "A's requests are signed: {seen:.400}"
    );
    assert!(
        !seen.contains(PAIR_KEY) && !seen.contains(ADMIN_TOKEN),
        "a secret reached the fake peer"
    );
    assert!(
        !seen.to_ascii_lowercase().contains("authorization"),
        "{seen:.400}"
    );

    let st = status(&lab.a);
    assert_eq!(netboot_state(&st, "worker-0"), "installed", "{st}");
    let (_, s) = curl(
        &lab.node,
        "http://10.78.0.2:8080/boot/52-54-00-4e-00-32.ipxe",
    );
    assert!(s.contains("exit"), "worker-0 must still boot its disk: {s}");
    assert_eq!(pool_leases(&st), 0, "no forged lease taken: {}", st["dhcp"]);
    assert_eq!(st["ha"]["peerReachable"], false, "{}", st["ha"]);
    let err = st["ha"]["sent"]["error"].as_str().unwrap_or_default();
    assert!(err.contains("unauthenticated answer"), "{}", st["ha"]);
    assert!(
        st["timeline"]["nodes"].as_array().is_some_and(|n| n
            .iter()
            .all(|r| !r["node"].as_str().unwrap_or("").starts_with("ghost"))),
        "no ghost node in the timeline"
    );
    assert_ne!(
        wait_for_bootstrap(&lab.a, &file),
        0,
        "wait-for bootstrap-complete must still wait"
    );
    let rss_after = common::vm_rss_kib(app.pid());
    assert!(
        rss_after < rss_before + 100 * 1024,
        "RSS grew from {rss_before} to {rss_after} KiB"
    );

    // A dripping answer: each exchange is cut at the deadline.
    let failed_before = status(&lab.a)["ha"]["sent"]["failed"].as_u64().unwrap();
    let drip = Py::start(&lab.peer, w, "drip.py", FAKEPEER, &["drip", logs, "18"]);
    wait_for(
        "an exchange cut by the deadline",
        Duration::from_secs(16),
        || {
            let st = status(&lab.a);
            st["ha"]["sent"]["error"]
                .as_str()
                .is_some_and(|e| e.contains("exchange deadline"))
                && st["ha"]["sent"]["failed"].as_u64().unwrap() > failed_before
        },
    );
    drop(drip);
    assert_eq!(netboot_state(&status(&lab.a), "worker-0"), "installed");
}

/// A peer that knows the pair key sends the future; then replays.
const FORGER: &str = r#"
import json, sys, time
sys.path.insert(0, sys.argv[1])
from ha import post, sign
key = sys.argv[2].encode()
now = int(time.time())
day = 86400
doc = {"version": 2, "parts": {
    "netboot": {"worker-0": {"installedAt": None, "rev": now * 1000 + 3 * day * 1000}},
    "leases": [{"ip": "10.78.4.7", "mac": "02:00:00:00:00:07", "state": "bound", "expires": now + 10 * day, "reserved": False}],
    "timeline": [{"at": now + 2 * day, "event": {"kind": "bootstrapComplete"}},
                 {"at": now, "event": {"kind": "installFinished", "node": "ghost"}},
                 {"at": now, "event": {"kind": "aKindFromTheFuture", "node": "master-0"}}],
}}
body = json.dumps(doc).encode()
status, hdrs, answer, nonce = post(key, "10.78.0.12", "10.78.0.11", body)
print("STATUS", status, answer[:200])
mac = sign(key, ("answer", 200, nonce), hdrs.get("x-crc-ha-member", ""), int(hdrs.get("x-crc-ha-time", "0")),
           bytes.fromhex(hdrs.get("x-crc-ha-nonce", "")), answer)
print("ANSWER-MAC", "OK" if mac == hdrs.get("x-crc-ha-mac") else "BAD", hdrs.get("x-crc-ha-member"))
print("VERSION", json.loads(answer).get("version"))
status, _, answer, _ = post(key, "10.78.0.12", "10.78.0.11", body, nonce=nonce)
print("REPLAY", status, answer[:200])
status, _, answer, _ = post(key, "10.78.0.12", "10.78.0.11", body, t=now - 600)
print("STALE", status, answer[:200])
status, _, answer, _ = post(key, "10.78.0.11", "10.78.0.11", body)
print("MEMBER", status, answer[:200])
status, _, answer, _ = post(b"not-the-pair-key-0123456789", "10.78.0.12", "10.78.0.11", body)
print("WRONGKEY", status, answer[:200])
"#;

#[test]
fn an_authenticated_peer_cannot_send_the_future_nor_replay() {
    require_tools!("curl", "python3");
    require_netns!("hhz");
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let lab = Lab::new();
    let (file, app) = start_a(&lab, w);
    install_worker0(&lab.node);
    std::fs::write(w.join("ha.py"), HA_PY).unwrap();
    let out = Py::start(
        &lab.peer,
        w,
        "forger.py",
        FORGER,
        &[w.to_str().unwrap(), PAIR_KEY],
    )
    .output();
    assert!(out.contains("STATUS 200"), "{out}");
    assert!(out.contains("ANSWER-MAC OK 10.78.0.11"), "{out}");
    assert!(out.contains("VERSION 2"), "{out}");
    assert!(
        out.contains("REPLAY 401") && out.contains("repeated nonce"),
        "{out}"
    );
    assert!(
        out.contains("STALE 401") && out.contains("timestamp"),
        "{out}"
    );
    assert!(
        out.contains("MEMBER 401") && out.contains("not this member"),
        "{out}"
    );
    assert!(
        out.contains("WRONGKEY 401") && out.contains("bad MAC"),
        "{out}"
    );

    let st = status(&lab.a);
    assert_eq!(netboot_state(&st, "worker-0"), "installed", "{st}");
    assert_eq!(pool_leases(&st), 0, "{}", st["dhcp"]);
    assert!(st["ha"]["skipped"].as_u64().unwrap() >= 5, "{}", st["ha"]);
    assert_ne!(wait_for_bootstrap(&lab.a, &file), 0);
    let log = app.log();
    assert!(
        log.contains("left out") && log.contains("a day ahead"),
        "the refusal is logged:\n{log}"
    );
    // `status` says what was left out, per direction.
    let (code, text, _) = run(
        "ip",
        &[
            "netns",
            "exec",
            lab.a.name(),
            BIN,
            "status",
            "--cluster",
            file.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 0);
    assert!(
        text.contains("ha received (the peer's exchanges): "),
        "{text}"
    );
    assert!(
        text.contains("entries of the peer's documents left out"),
        "{text}"
    );
}

/// N DORAs from random MACs with 255-byte client ids and 63-character
/// hostnames (the audit's dhcpbig.py).
const DHCPBIG: &str = r#"
import os, random, socket, struct, sys, time
n = int(sys.argv[1])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
s.setsockopt(socket.SOL_SOCKET, 25, b"eth0")
s.bind(("", 68))
def build(t, mac, xid, opts):
    h = struct.pack("!BBBBIHH4s4s4s4s16s64s128s", 1, 1, 6, 0, xid, 0, 0x8000, bytes(4), bytes(4), bytes(4), bytes(4),
                    mac.ljust(16, b"\0"), bytes(64), bytes(128))
    o = bytes([53, 1, t]) + b"".join(bytes([c, len(v)]) + v for c, v in opts) + b"\xff"
    return (h + b"\x63\x82\x53\x63" + o).ljust(300, b"\0")
def xchg(pkt, xid, want):
    s.sendto(pkt, ("255.255.255.255", 67))
    end = time.time() + 1.0
    while time.time() < end:
        s.settimeout(max(0.01, end - time.time()))
        try: d, _ = s.recvfrom(2048)
        except socket.timeout: return None
        if len(d) < 240 or struct.unpack("!I", d[4:8])[0] != xid: continue
        opts, i = {}, 240
        while i < len(d) and d[i] != 255:
            if d[i] == 0: i += 1; continue
            opts[d[i]] = d[i+2:i+2+d[i+1]]; i += 2 + d[i+1]
        if opts.get(53, b"\0")[0] == want: return d[16:20], opts
    return None
ok, t0 = 0, time.time()
for i in range(n):
    if time.time() - t0 > 60: break
    mac = bytes([2]) + os.urandom(5)
    xid = random.getrandbits(32)
    extra = [(61, os.urandom(255)), (12, ("h%06d-" % i + "x" * 63)[:63].encode())]
    r = xchg(build(1, mac, xid, extra), xid, 2)
    if not r: continue
    r = xchg(build(3, mac, xid, extra + [(50, r[0]), (54, r[1][54])]), xid, 5)
    if r: ok += 1
print("BOUND", ok, "in", int(time.time() - t0), "s", flush=True)
"#;

/// The end-to-end half of "1,600 long client ids leave the sync working"
/// (the unit half: `leases::tests::sixteen_hundred_leases_with_255_byte_client_ids_stay_small`):
/// 400 real clients, at most 60 s (a debug build on a loaded machine binds
/// a few a second) and the document's bytes per lease, which do not depend on the
/// client id's length.
#[test]
fn long_client_ids_leave_the_sync_working_and_the_document_small() {
    require_tools!("curl", "python3");
    require_netns!("hhb");
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let lab = Lab::new();
    let (_file, _a) = start_a(&lab, w);
    // B: a real member at the peer's address (it does not hold the VIPs,
    // so it stays silent on DHCP).
    let dir_b = w.join("b");
    std::fs::create_dir_all(&dir_b).unwrap();
    member_files(&dir_b);
    let file_b = dir_b.join("cluster.yaml");
    std::fs::write(&file_b, cluster(&dir_b, PEER, OWN_A)).unwrap();
    let _b = Appliance::launch()
        .netns(lab.peer.name())
        .start_path(&file_b);
    wait_for("the pair exchanges", Duration::from_secs(10), || {
        status(&lab.a)["ha"]["peerReachable"] == true
            && status(&lab.peer)["ha"]["peerReachable"] == true
    });
    let out = Py::start(&lab.node, w, "dhcpbig.py", DHCPBIG, &["400"]).output();
    let bound: usize = out
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{out}"));
    assert!(bound >= 100, "{out}");
    eprintln!("{}", out.trim());
    wait_for("B learned every lease", Duration::from_secs(20), || {
        pool_leases(&status(&lab.peer)) >= bound
    });
    for ns in [&lab.a, &lab.peer] {
        let st = status(ns);
        let ha = &st["ha"];
        assert_eq!(ha["peerReachable"], true, "{ha}");
        assert!(
            ha["sent"]["error"].is_null() && ha["received"]["error"].is_null(),
            "{ha}"
        );
        assert!(ha["docBytes"].as_u64() < ha["docLimit"].as_u64(), "{ha}");
    }
    // The document does not grow with the clients' strings: at most 320
    // bytes a lease (a 255-byte id is kept as a 33-byte digest).
    let bytes = status(&lab.a)["ha"]["docBytes"].as_u64().unwrap();
    assert!(
        bytes < 320 * bound as u64 + 64 * 1024,
        "{bytes} bytes for {bound} leases"
    );
}
