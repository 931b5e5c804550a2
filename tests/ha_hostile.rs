//! The HA exchange against a hostile host on the segment (issue #40 items
//! 1 and 3, docs/ha.md "Threat model"): member A runs in a network
//! namespace and holds the VIPs (added by hand, no keepalived needed);
//! the peer's address `ha.peer` is held by a Python fake peer (or a real
//! member B) in another namespace on the same bridge; a node namespace
//! installs worker-0 and runs DHCP clients.
//!
//! The Python peers and clients are in `tests/fixtures/ha`.
//!
//! The members run in this process, each inside its namespace
//! (`InProc::in_netns`); the CLIs (`status`, `wait-for`) are the real
//! binary. The forged-answers test spawns member A: it bounds A's RSS
//! (`/proc/<pid>/status`) while the forged answers arrive, and only a
//! process of its own has an RSS that is A's alone (the dripping answer,
//! which needs no RSS, is a test of its own, in-process).
//!
//! - A fake peer sees no secret (neither the pair key nor the admin token
//!   appears in what it receives) and none of its forged answers
//!   (reinstall at revision u64::MAX, 2,046 leases expiring at 2^63,
//!   bootstrap-complete events, 1,024 unknown node names, its own replayed
//!   MAC headers) changes anything, nor grows A's RSS; a dripping answer
//!   is cut within the exchange deadline.
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

use common::inproc::InProc;
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
            common::bridge_port(&lab.sw, "br0", &format!("p{i}"), ns, name);
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

/// A Python script of `tests/fixtures/ha` in `ns`, in the background
/// (killed on drop; a hard bound of 300 s, above every script's own).
struct Py(Child);

impl Py {
    fn start(ns: &Netns, name: &str, args: &[&str]) -> Py {
        let script = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/ha")
            .join(name);
        let mut a = vec!["timeout", "300", "python3", script.to_str().unwrap()];
        a.extend_from_slice(args);
        let child = ns
            .cmd(&a)
            .env("PYTHONDONTWRITEBYTECODE", "1")
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

/// Member A's directory (in `w`) and cluster file.
fn files_a(w: &Path) -> PathBuf {
    let dir = w.join("a");
    std::fs::create_dir_all(&dir).unwrap();
    member_files(&dir);
    let file = dir.join("cluster.yaml");
    std::fs::write(&file, cluster(&dir, OWN_A, PEER)).unwrap();
    file
}

/// Start A in its namespace, in this process; its cluster file and the
/// serve.
fn start_a(lab: &Lab, w: &Path) -> (PathBuf, InProc) {
    let file = files_a(w);
    let app = InProc::in_netns(lab.a.name()).start_path(&file);
    (file, app)
}

#[test]
fn a_fake_peer_gets_no_secret_and_its_forged_answers_change_nothing() {
    require_tools!("curl", "python3");
    require_netns!("hhf");
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let lab = Lab::new();
    // Spawned: its RSS is bounded below.
    let file = files_a(w);
    let app = Appliance::launch().netns(lab.a.name()).start_path(&file);
    install_worker0(&lab.node);
    let rss_before = common::vm_rss_kib(app.pid());
    let log = w.join("fakepeer.log");
    let logs = log.to_str().unwrap();

    // Forged answers for 12 s (A exchanges every second, backing off).
    let forge = Py::start(&lab.peer, "fakepeer.py", &["forge", logs, "12"]);
    // While it answers: A refuses each answer (after it, A's exchanges
    // find nobody).
    wait_for(
        "A refuses the forged answers",
        Duration::from_secs(11),
        || {
            status(&lab.a)["ha"]["sent"]["error"]
                .as_str()
                .is_some_and(|e| e.contains("unauthenticated answer"))
        },
    );
    let out = forge.output();
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
}

/// A fake peer that drips its answer: each of A's exchanges is cut at the
/// exchange deadline, and worker-0 stays installed.
#[test]
fn a_dripping_fake_peer_is_cut_at_the_exchange_deadline() {
    require_tools!("curl", "python3");
    require_netns!("hhd");
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let lab = Lab::new();
    let (_file, _app) = start_a(&lab, w);
    install_worker0(&lab.node);
    let log = w.join("fakepeer.log");
    let logs = log.to_str().unwrap();
    let failed_before = status(&lab.a)["ha"]["sent"]["failed"].as_u64().unwrap();
    let drip = Py::start(&lab.peer, "fakepeer.py", &["drip", logs, "18"]);
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

#[test]
fn an_authenticated_peer_cannot_send_the_future_nor_replay() {
    require_tools!("curl", "python3");
    require_netns!("hhz");
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let lab = Lab::new();
    let (file, app) = start_a(&lab, w);
    install_worker0(&lab.node);
    let out = Py::start(&lab.peer, "forger.py", &[PAIR_KEY]).output();
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
    let _b = InProc::in_netns(lab.peer.name()).start_path(&file_b);
    wait_for("the pair exchanges", Duration::from_secs(10), || {
        status(&lab.a)["ha"]["peerReachable"] == true
            && status(&lab.peer)["ha"]["peerReachable"] == true
    });
    // The audit's count: 1,600 leases with 255-byte ids made the old
    // document 1.23 MB, over its 1 MiB cap, and sync stopped silently.
    // One at a time, each on disk before its ACK: about 35 ms a DORA on a
    // debug build of a loaded 2-core machine; the bound leaves room.
    let out = Py::start(&lab.node, "dhcpbig.py", &["1600", "240"]).output();
    let bound: usize = out
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{out}"));
    assert_eq!(bound, 1600, "every client bound: {out}");
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
