//! The HA pair end to end (issue #26, docs/ha.md): two appliances with two
//! real keepalived instances (the configs `render keepalived` writes,
//! private pid files), a node and a TLS backend, each in its own network
//! namespace, on one bridge in a fifth namespace — nothing on the host's
//! interfaces.
//!
//! While bounded probe loops in the node's namespace run `dig` at the
//! service VIP, fetch an ignition file over HTTP and make HTTPS requests
//! through the LB at apiVIP:6443 (to nginx in the backend namespace):
//! - `kill -9` of the holder's `serve`: the peer holds every VIP within 4 s,
//!   probes fail only inside that window (printed);
//! - a node installed through A gets `exit` from B; a reserved node's DHCP
//!   renewal is answered by B;
//! - A's serve comes back: it learns the install state from B (a node that
//!   installed through B while A was down) and does not take the VIPs back;
//! - stopping the holder's keepalived (B's): A holds every VIP within 4 s,
//!   same window rule;
//! - with both up, one OFFER per DISCOVER (a scripted client).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::hapair::{KEEPALIVED, Proc, keepalived};
use common::{Appliance, BIN, Netns, run, unique_name};

const IFACE: &str = "hav0";
const VIPS: [&str; 3] = ["10.77.0.2", "10.77.0.3", "10.77.0.4"];
const OWN_A: &str = "10.77.0.11";
const OWN_B: &str = "10.77.0.12";
const W0_MAC: &str = "52:54:00:4d:00:32";
const W0_IP: &str = "10.77.0.50";
const W1_IP: &str = "10.77.0.51";
/// The operator's jump host (http.ignitionClientCidrs): probe fetches from
/// it change no install state.
const JUMP: &str = "10.77.0.100";
const MASTER_IP: &str = "10.77.0.60";
/// A client that is not in the inventory (pool lease).
const POOL_MAC: &str = "52:54:00:4d:00:99";
/// How long a takeover may take (1 s adverts).
const TAKEOVER: Duration = Duration::from_secs(4);

fn cluster(shared: &Path, own: &Path, own_ip: &str, peer: &str, priority: u8) -> String {
    let s = shared.display();
    let o = own.display();
    format!(
        r#"name: hac
baseDomain: test
network:
  cidr: 10.77.0.0/24
  gateway: 10.77.0.1
  applianceIP: 10.77.0.2
  apiVIP: 10.77.0.3
  ingressVIP: 10.77.0.4
  interface: {IFACE}
nodes:
  - {{ name: bootstrap, role: bootstrap, mac: "52:54:00:4d:00:3d", ip: 10.77.0.61 }}
  - {{ name: master-0, role: master, mac: "52:54:00:4d:00:3c", ip: {MASTER_IP} }}
  - {{ name: worker-0, role: worker, mac: "{W0_MAC}", ip: {W0_IP} }}
  - {{ name: worker-1, role: worker, mac: "52:54:00:4d:00:33", ip: {W1_IP} }}
dhcp:
  leaseFile: "{o}/leases.json"
  pool: {{ start: 10.77.0.150, end: 10.77.0.152 }}
http:
  imagesDir: "{s}/images"
  ignitionDir: "{s}/ign"
  ignitionClientCidrs: [{JUMP}/32]
loadBalancer:
  healthCheck: {{ interval: 1s, timeout: 1s, rise: 1, fall: 2 }}
admin: {{ listen: "0.0.0.0:9180", tokenFile: "{s}/admin.token" }}
rhcos:
  kernel: "{s}/vmlinuz"
  initramfs: "{s}/initrd.img"
  rootfs: "{s}/rootfs.img"
  kargs: ["coreos.inst.image_url=http://10.77.0.2:8080/images/metal.raw.xz"]
ha: {{ peer: {peer}, ownIP: {own_ip}, priority: {priority}, tokenFile: "{s}/ha.token" }}
"#
    )
}

/// The five namespaces: the switch (bridge), A, B, the node, the backend.
struct Lab {
    sw: Netns,
    a: Netns,
    b: Netns,
    node: Netns,
    be: Netns,
}

impl Lab {
    fn new() -> Lab {
        let lab = Lab {
            sw: Netns::new(unique_name("hsw")),
            a: Netns::new(unique_name("ha")),
            b: Netns::new(unique_name("hb")),
            node: Netns::new(unique_name("hn")),
            be: Netns::new(unique_name("hbe")),
        };
        lab.sw.ip(&["link", "add", "br0", "type", "bridge"]);
        lab.sw.ip(&["link", "set", "br0", "up"]);
        for (i, (ns, name, addrs, mac)) in [
            (&lab.a, IFACE, vec![OWN_A], None),
            (&lab.b, IFACE, vec![OWN_B], None),
            (&lab.node, "eth0", vec![W0_IP, W1_IP, JUMP], Some(W0_MAC)),
            (&lab.be, "eth0", vec![MASTER_IP], None),
        ]
        .into_iter()
        .enumerate()
        {
            common::bridge_port(&lab.sw, "br0", &format!("p{i}"), ns, name);
            if let Some(mac) = mac {
                ns.ip(&["link", "set", name, "address", mac]);
            }
            for a in addrs {
                ns.ip(&["addr", "add", &format!("{a}/24"), "dev", name]);
            }
            ns.ip(&["link", "set", name, "up"]);
        }
        lab
    }
}

/// Whether `ns` holds each VIP.
fn held(ns: &Netns) -> [bool; 3] {
    let out = ns.exec(&["ip", "-4", "-o", "addr", "show", "dev", IFACE]);
    VIPS.map(|v| out.contains(&format!(" {v}/")))
}

/// Poll until `ns` holds every VIP and `other` none; when that was seen.
fn wait_holder(ns: &Netns, other: &Netns, within: Duration) -> Option<Instant> {
    let deadline = Instant::now() + within;
    loop {
        let now = Instant::now();
        if held(ns) == [true; 3] && held(other) == [false; 3] {
            return Some(now);
        }
        if now > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// nginx in `be`: HTTPS on master-0's 6443, `/readyz` 200.
fn backend(be: &Netns, dir: &Path) -> Proc {
    let (cert, key) = (dir.join("be.crt"), dir.join("be.key"));
    common::self_signed_cert(&cert, &key, "api");
    let d = dir.display();
    let conf = format!(
        "daemon off;\nmaster_process off;\nworker_processes 1;\npid {d}/be.pid;\nerror_log stderr error;\nevents {{ worker_connections 256; }}\nhttp {{\n  access_log off;\n  client_body_temp_path {d}/tmp; proxy_temp_path {d}/tmp; fastcgi_temp_path {d}/tmp; uwsgi_temp_path {d}/tmp; scgi_temp_path {d}/tmp;\n  default_type text/plain;\n  server {{\n    listen {MASTER_IP}:6443 ssl;\n    ssl_certificate {}; ssl_certificate_key {};\n    location / {{ return 200 \"ok\\n\"; }}\n  }}\n}}\n",
        cert.display(),
        key.display()
    );
    let f = dir.join("be.conf");
    std::fs::write(&f, conf).unwrap();
    let child = be
        .cmd(&["nginx", "-e", "stderr", "-p"])
        .arg(dir)
        .arg("-c")
        .arg(&f)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn nginx");
    Proc(Some(child), "nginx")
}

/// curl in the node's namespace from `from`; (exit code, body).
fn curl(node: &Netns, from: &str, url: &str) -> (i32, String) {
    let out = node
        .cmd(&["curl", "-sk", "--max-time", "1", "--interface", from, url])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// One probe: when it started, whether it worked, what it said when not,
/// when it ended.
type Record = (Instant, bool, String, Instant);

/// The probe loops: DNS at the service VIP, ignition over HTTP, HTTPS
/// through the LB's apiVIP:6443. Each is bounded (1 s per try, stopped by
/// the flag, at most `MAX_TRIES`).
struct Probes {
    stop: Arc<AtomicBool>,
    /// Probes finished so far, per kind.
    done: Vec<Arc<AtomicUsize>>,
    threads: Vec<(&'static str, std::thread::JoinHandle<Vec<Record>>)>,
}

const MAX_TRIES: usize = 2000;

impl Probes {
    fn start(node: &Netns) -> Probes {
        let stop = Arc::new(AtomicBool::new(false));
        let ns = node.name().to_string();
        let kinds: [(&'static str, Vec<String>, &'static str); 3] = [
            (
                "dns",
                [
                    "dig",
                    "@10.77.0.2",
                    "+time=1",
                    "+tries=1",
                    "+short",
                    "api.hac.test",
                ]
                .map(String::from)
                .to_vec(),
                "10.77.0.3",
            ),
            (
                "http",
                [
                    "curl",
                    "-s",
                    "--max-time",
                    "1",
                    "--interface",
                    JUMP,
                    "http://10.77.0.2:8080/ignition/worker-0.ign",
                ]
                .map(String::from)
                .to_vec(),
                "\"ignition\"",
            ),
            (
                "lb",
                [
                    "curl",
                    "-sk",
                    "--max-time",
                    "1",
                    "--interface",
                    JUMP,
                    "https://10.77.0.3:6443/readyz",
                ]
                .map(String::from)
                .to_vec(),
                "ok",
            ),
        ];
        let done: Vec<Arc<AtomicUsize>> = (0..kinds.len()).map(|_| Arc::default()).collect();
        let threads = kinds
            .into_iter()
            .zip(done.clone())
            .map(|((name, args, want), count)| {
                let (stop, ns) = (stop.clone(), ns.clone());
                let h = std::thread::spawn(move || {
                    let mut out = Vec::new();
                    while !stop.load(Ordering::Relaxed) && out.len() < MAX_TRIES {
                        let t = Instant::now();
                        let o = Command::new("ip")
                            .args(["netns", "exec", &ns])
                            .args(&args)
                            .stdin(Stdio::null())
                            .output();
                        let (ok, why) = match o {
                            Ok(o) => {
                                let text = format!(
                                    "exit {:?} after {} ms: {}{}",
                                    o.status.code(),
                                    t.elapsed().as_millis(),
                                    String::from_utf8_lossy(&o.stdout).trim(),
                                    String::from_utf8_lossy(&o.stderr).trim()
                                );
                                let ok = o.status.success()
                                    && String::from_utf8_lossy(&o.stdout).contains(want);
                                (ok, text)
                            }
                            Err(e) => (false, e.to_string()),
                        };
                        out.push((t, ok, if ok { String::new() } else { why }, Instant::now()));
                        count.fetch_add(1, Ordering::Relaxed);
                        std::thread::sleep(Duration::from_millis(50));
                    }
                    out
                });
                (name, h)
            })
            .collect();
        Probes {
            stop,
            done,
            threads,
        }
    }

    /// Wait (bounded) until every kind finished `n` more probes than now:
    /// on a loaded host a fixed pause may see too few.
    fn wait_more(&self, n: usize, within: Duration) {
        let base: Vec<usize> = self
            .done
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect();
        wait_for("more probes", within, || {
            self.done
                .iter()
                .zip(&base)
                .all(|(c, b)| c.load(Ordering::Relaxed) >= b + n)
        });
    }

    fn finish(self) -> Vec<(&'static str, Vec<Record>)> {
        self.stop.store(true, Ordering::Relaxed);
        self.threads
            .into_iter()
            .map(|(n, h)| (n, h.join().unwrap()))
            .collect()
    }
}

/// One failover while the node's probes run: `cut` the holder (`to.1`),
/// wait until `to.0` holds every VIP (within [`TAKEOVER`] + 6 s; else the
/// keepalived logs are shown and the test fails), then check the probes'
/// failure window.
fn fail_over(
    node: &Netns,
    to: (&Netns, &Netns),
    what: &str,
    cut: impl FnOnce(),
    show: &dyn Fn(&str),
) {
    let probes = Probes::start(node);
    probes.wait_more(3, Duration::from_secs(30));
    let at_cut = Instant::now();
    cut();
    let Some(at) = wait_holder(to.0, to.1, TAKEOVER + Duration::from_secs(6)) else {
        show(what);
        panic!("{what}: the peer never held every VIP");
    };
    probes.wait_more(5, Duration::from_secs(30));
    check_window(what, &probes.finish(), at_cut, at);
}

/// Check a failover's probes: none that ended before `cut` failed, none
/// that started after `held` (+ 300 ms for the node's neighbour entry to
/// follow the gratuitous ARP) failed, and every kind worked after. Prints
/// the window.
fn check_window(what: &str, probes: &[(&'static str, Vec<Record>)], cut: Instant, held: Instant) {
    let took = held - cut;
    let ms = |t: Instant| {
        i128::try_from(t.duration_since(cut).as_millis()).unwrap_or(0)
            - i128::try_from(cut.duration_since(t).as_millis()).unwrap_or(0)
    };
    let mut report = Vec::new();
    for (name, recs) in probes {
        let fails: Vec<i128> = recs.iter().filter(|r| !r.1).map(|r| ms(r.0)).collect();
        let after = recs.iter().filter(|r| r.0 > held).count();
        report.push(format!(
            "{name}: {} probes, {} failed{}",
            recs.len(),
            fails.len(),
            match (fails.first(), fails.last()) {
                (Some(f), Some(l)) => format!(" (started {f} ms .. {l} ms after the cut)"),
                _ => String::new(),
            }
        ));
        let early: Vec<String> = recs
            .iter()
            .filter(|r| !r.1 && r.3 < cut)
            .map(|r| format!("{} ms: {}", ms(r.0), r.2))
            .collect();
        assert!(
            early.is_empty(),
            "{what}: {name} failed before the cut: {early:?}"
        );
        let grace = held + Duration::from_millis(300);
        let late: Vec<String> = recs
            .iter()
            .filter(|r| !r.1 && r.0 > grace)
            .map(|r| format!("{} ms: {}", ms(r.0), r.2))
            .collect();
        assert!(
            late.is_empty(),
            "{what}: {name} failed after the peer held every VIP ({} ms): {late:?}",
            took.as_millis()
        );
        assert!(
            after >= 3,
            "{what}: {name}: only {after} probes after the takeover"
        );
    }
    println!(
        "HA window ({what}): every VIP on the peer {} ms after the cut; {}",
        took.as_millis(),
        report.join("; ")
    );
    assert!(took <= TAKEOVER, "{what}: takeover took {took:?}");
}

/// The scripted DHCP client (python3, raw BOOTP over a UDP socket bound to
/// the node's interface): `discover N` prints one `OFFERS <count> ...`
/// line per DISCOVER (broadcast flag set; 1.5 s of replies each);
/// `renew IP SERVER` sends a RENEWING REQUEST by unicast and prints the
/// replies' `REPLY <type> <server id> <yiaddr>`; `dora` takes the first
/// OFFER and REQUESTs it (SELECTING), printing the replies the same way.
const DHCP_CLIENT: &str = r#"
import random, socket, struct, sys, time
mode, iface, mac = sys.argv[1], sys.argv[2], bytes.fromhex(sys.argv[3].replace(':', ''))
def pkt(xid, kind, ciaddr='0.0.0.0', flags=0x8000, extra=b''):
    p = struct.pack('!BBBBIHH4s4s4s4s16s64s128s', 1, 1, 6, 0, xid, 0, flags,
        socket.inet_aton(ciaddr), bytes(4), bytes(4), bytes(4), mac + bytes(10), b'', b'')
    return p + b'\x63\x82\x53\x63' + bytes([53, 1, kind]) + extra + bytes([255])
def opts(b):
    o, i = {}, 0
    while i < len(b) and b[i] != 255:
        if b[i] == 0:
            i += 1; continue
        o[b[i]] = b[i + 2:i + 2 + b[i + 1]]; i += 2 + b[i + 1]
    return o
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
s.setsockopt(socket.SOL_SOCKET, 25, iface.encode())
s.bind(('0.0.0.0', 68))
s.settimeout(0.1)
def collect(xid, secs):
    out, end = [], time.time() + secs
    while time.time() < end:
        try:
            d, a = s.recvfrom(2048)
        except socket.timeout:
            continue
        if len(d) < 244 or struct.unpack('!I', d[4:8])[0] != xid:
            continue
        o = opts(d[240:])
        sid = socket.inet_ntoa(o[54]) if 54 in o else '-'
        out.append((o.get(53, b'\0')[0], sid, socket.inet_ntoa(d[16:20])))
    return out
if mode == 'discover':
    for _ in range(int(sys.argv[4])):
        xid = random.getrandbits(32)
        s.sendto(pkt(xid, 1), ('255.255.255.255', 67))
        offers = [r for r in collect(xid, 1.5) if r[0] == 2]
        print('OFFERS', len(offers), ' '.join('%s/%s' % (r[1], r[2]) for r in offers), flush=True)
elif mode == 'dora':
    xid = random.getrandbits(32)
    s.sendto(pkt(xid, 1), ('255.255.255.255', 67))
    offers = [r for r in collect(xid, 1.5) if r[0] == 2]
    if not offers:
        print('NO OFFER', flush=True); sys.exit(0)
    _, sid, yi = offers[0]
    ask = bytes([50, 4]) + socket.inet_aton(yi) + bytes([54, 4]) + socket.inet_aton(sid)
    s.sendto(pkt(xid, 3, extra=ask), ('255.255.255.255', 67))
    for r in collect(xid, 1.5):
        print('REPLY', r[0], r[1], r[2], flush=True)
else:
    xid = random.getrandbits(32)
    s.sendto(pkt(xid, 3, sys.argv[4], 0), (sys.argv[5], 67))
    for r in collect(xid, 2):
        print('REPLY', r[0], r[1], r[2], flush=True)
"#;

fn dhcp_client(node: &Netns, dir: &Path, args: &[&str]) -> String {
    let script = dir.join("dhcp_client.py");
    std::fs::write(&script, DHCP_CLIENT).unwrap();
    let mut a = vec!["timeout", "30", "python3", script.to_str().unwrap()];
    a.extend_from_slice(args);
    node.exec(&a)
}

/// `/status` of the member in `ns` (its admin API on loopback there).
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

/// `node`'s step `step` (`ignition`, `installFinished`) in `st`'s timeline.
fn step(st: &serde_json::Value, node: &str, step: &str) -> Option<u64> {
    st["timeline"]["nodes"]
        .as_array()?
        .iter()
        .find(|r| r["node"] == node)?[step]
        .as_u64()
}

fn wait_for(what: &str, within: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The node `ip` installs through whoever holds 10.77.0.2: its script,
/// its ignition, the whole image; then its script is `exit`.
fn install(node: &Netns, ip: &str, name: &str, mac_hyph: &str) {
    let script = format!("http://10.77.0.2:8080/boot/{mac_hyph}.ipxe");
    let (c, s) = curl(node, ip, &script);
    assert!(
        c == 0 && s.contains("kernel "),
        "{name}: install script expected: {s}"
    );
    let (c, ign) = curl(
        node,
        ip,
        &format!("http://10.77.0.2:8080/ignition/{name}.ign"),
    );
    assert!(
        c == 0 && ign.contains("ignition"),
        "{name}: ignition: {ign}"
    );
    let (c, _) = curl(node, ip, "http://10.77.0.2:8080/images/metal.raw.xz");
    assert_eq!(c, 0, "{name}: image download");
    let (_, s) = curl(node, ip, &script);
    assert!(
        s.contains("exit"),
        "{name}: installed, its script should be exit: {s}"
    );
}

fn shared_files(dir: &Path) {
    use std::os::unix::fs::PermissionsExt as _;
    for (name, text) in [
        ("ha.token", "pair-token-0123456789abcdef\n"),
        ("admin.token", "admin-token-0123456789abcdef\n"),
    ] {
        let tok = dir.join(name);
        std::fs::write(&tok, text).unwrap();
        std::fs::set_permissions(&tok, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    for (f, n) in [
        ("vmlinuz", 7_001),
        ("initrd.img", 9_001),
        ("rootfs.img", 11_001),
    ] {
        std::fs::write(dir.join(f), common::pattern(n, 1)).unwrap();
    }
    std::fs::create_dir_all(dir.join("images")).unwrap();
    std::fs::write(dir.join("images/metal.raw.xz"), common::pattern(200_000, 2)).unwrap();
    std::fs::create_dir_all(dir.join("ign")).unwrap();
    for role in ["bootstrap", "master", "worker"] {
        std::fs::write(
            dir.join(format!("ign/{role}.ign")),
            r#"{"ignition":{"version":"3.2.0"}}"#,
        )
        .unwrap();
    }
}

/// Prints both keepalived logs when the test fails (declared after the
/// work directory, so it runs before the directory goes).
struct LogsOnPanic(PathBuf);

impl Drop for LogsOnPanic {
    fn drop(&mut self) {
        if std::thread::panicking() {
            for tag in ["a", "b"] {
                let f = self.0.join(format!("keepalived-{tag}.log"));
                let l = std::fs::read_to_string(f).unwrap_or_default();
                eprintln!("--- keepalived {tag}:\n{l}");
            }
        }
    }
}

fn start_serve(ns: &Netns, cluster: &Path) -> Appliance {
    Appliance::launch().netns(ns.name()).start_path(cluster)
}

#[test]
fn pair_fails_over_keeps_install_state_and_answers_dhcp_once() {
    require!(
        Path::new(KEEPALIVED).is_file(),
        "keepalived is not extracted (scripts/prereqs.sh)"
    );
    require_tools!("dig", "curl", "nginx", "openssl", "python3");
    require_netns!("hap");
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let _logs = LogsOnPanic(w.to_path_buf());
    shared_files(w);
    let (dir_a, dir_b): (PathBuf, PathBuf) = (w.join("a"), w.join("b"));
    std::fs::create_dir_all(&dir_a).unwrap();
    std::fs::create_dir_all(&dir_b).unwrap();
    let (file_a, file_b) = (dir_a.join("cluster.yaml"), dir_b.join("cluster.yaml"));
    std::fs::write(&file_a, cluster(w, &dir_a, OWN_A, OWN_B, 150)).unwrap();
    std::fs::write(&file_b, cluster(w, &dir_b, OWN_B, OWN_A, 100)).unwrap();
    let lab = Lab::new();
    let _backend = backend(&lab.be, w);
    let mut serve_a = start_serve(&lab.a, &file_a);
    let mut serve_b = start_serve(&lab.b, &file_b);
    // A's keepalived first: it takes the VIPs (after its master-down timer),
    // then B's joins as backup. Started together, the first election goes
    // to whichever is healthy first (both are `state BACKUP`, nopreempt).
    let mut ka_a = keepalived(&lab.a, &file_a, w, "a");
    let show = |what: &str| {
        for tag in ["a", "b"] {
            let l = std::fs::read_to_string(w.join(format!("keepalived-{tag}.log")))
                .unwrap_or_default();
            eprintln!("--- keepalived {tag} ({what}):\n{l}");
        }
    };
    if wait_holder(&lab.a, &lab.b, Duration::from_secs(15)).is_none() {
        show("first election");
        panic!(
            "A never held every VIP: a {:?} b {:?}",
            held(&lab.a),
            held(&lab.b)
        );
    }
    let mut ka_b = keepalived(&lab.b, &file_b, w, "b");
    wait_for(
        "A's /status: holds the VIPs, peer reachable",
        Duration::from_secs(10),
        || {
            let st = status(&lab.a);
            st["ha"]["holdsVIPs"] == true && st["ha"]["peerReachable"] == true
        },
    );
    let st_b = status(&lab.b);
    assert_eq!(st_b["ha"]["holdsVIPs"], false, "{st_b}");

    // Both up: one OFFER per DISCOVER, from the service address.
    let out = dhcp_client(&lab.node, w, &["discover", "eth0", W0_MAC, "3"]);
    let lines: Vec<&str> = out.lines().filter(|l| l.starts_with("OFFERS")).collect();
    assert_eq!(lines.len(), 3, "{out}");
    for l in &lines {
        assert_eq!(*l, format!("OFFERS 1 10.77.0.2/{W0_IP}"), "{out}");
    }

    // A pool client binds through A; B learns its lease.
    let out = dhcp_client(&lab.node, w, &["dora", "eth0", POOL_MAC]);
    let pool_ip = out
        .lines()
        .find_map(|l| l.strip_prefix("REPLY 5 10.77.0.2 "))
        .unwrap_or_else(|| panic!("no ACK for the pool client: {out}"))
        .trim()
        .to_string();
    wait_for("B learned the pool lease", Duration::from_secs(10), || {
        status(&lab.b)["dhcp"]["leases"]
            .as_array()
            .is_some_and(|ls| {
                ls.iter().any(|l| {
                    l["mac"] == POOL_MAC && l["ip"] == pool_ip.as_str() && l["state"] == "bound"
                })
            })
    });

    // worker-0 installs through A; B learns it.
    install(&lab.node, W0_IP, "worker-0", "52-54-00-4d-00-32");
    wait_for(
        "B learned worker-0 installed",
        Duration::from_secs(10),
        || netboot_state(&status(&lab.b), "worker-0") == "installed",
    );
    // ... and A's timeline events for it, at A's times (B saw none of it).
    let mut a_steps = [None, None];
    wait_for(
        "A's timeline shows worker-0 installed",
        Duration::from_secs(5),
        || {
            let st = status(&lab.a);
            a_steps = ["ignition", "installFinished"].map(|s| step(&st, "worker-0", s));
            a_steps.iter().all(Option::is_some)
        },
    );
    wait_for(
        "B's timeline shows worker-0's steps seen by A",
        Duration::from_secs(10),
        || {
            let st = status(&lab.b);
            ["ignition", "installFinished"].map(|s| step(&st, "worker-0", s)) == a_steps
        },
    );
    // The LB of both is warm: master-0 healthy on B as well.
    wait_for(
        "master-0 healthy in B's api pool",
        Duration::from_secs(15),
        || {
            let st = status(&lab.b);
            st["lb"]["pools"].as_array().is_some_and(|pools| {
                pools.iter().any(|p| {
                    p["name"] == "api"
                        && p["backends"].as_array().is_some_and(|b| {
                            b.iter()
                                .any(|b| b["node"] == "master-0" && b["healthy"] == true)
                        })
                })
            })
        },
    );

    // 1. kill -9 of the holder's serve.
    fail_over(
        &lab.node,
        (&lab.b, &lab.a),
        "kill -9 of A's serve",
        || {
            serve_a.stop_with("KILL");
        },
        &show,
    );

    // B answers for A: worker-0 boots its disk; its renewal is acked.
    let (_, s) = curl(
        &lab.node,
        W0_IP,
        "http://10.77.0.2:8080/boot/52-54-00-4d-00-32.ipxe",
    );
    assert!(
        s.contains("exit") && !s.contains("kernel "),
        "B must send worker-0 to its disk: {s}"
    );
    let out = dhcp_client(&lab.node, w, &["renew", "eth0", W0_MAC, W0_IP, "10.77.0.2"]);
    assert!(
        out.contains(&format!("REPLY 5 10.77.0.2 {W0_IP}")),
        "renewal not acked by B: {out}"
    );
    // B does not hand the pool client's address to another client.
    let out = dhcp_client(
        &lab.node,
        w,
        &["discover", "eth0", "52:54:00:4d:00:98", "1"],
    );
    assert!(
        out.starts_with("OFFERS 1 10.77.0.2/") && !out.contains(&format!("/{pool_ip}")),
        "B offered the leased {pool_ip} again: {out}"
    );
    // A down is shown, not fatal.
    wait_for(
        "B shows the peer unreachable",
        Duration::from_secs(10),
        || status(&lab.b)["ha"]["peerReachable"] == false,
    );
    // The exchange is refused from any address but ha.peer's (A's), with
    // or without a token.
    let (_, refused) = curl(&lab.node, JUMP, "http://10.77.0.12:9180/api/ha/state");
    assert!(refused.contains("only ha.peer"), "{refused}");
    let out = lab.node.exec(&[
        "curl",
        "-s",
        "--max-time",
        "2",
        "-X",
        "POST",
        "-d",
        "{}",
        "-w",
        " %{http_code}",
        "http://10.77.0.12:9180/api/ha/state",
    ]);
    // 403: the source is not ha.peer, before any HMAC check.
    assert!(
        out.ends_with(" 403") && out.contains("only ha.peer"),
        "{out}"
    );
    let out = lab.node.exec(&[
        "curl",
        "-s",
        "--max-time",
        "2",
        "-X",
        "POST",
        "-d",
        "{}",
        "-w",
        " %{http_code}",
        "-H",
        "Authorization: Bearer wrong-token-0123456789",
        "http://10.77.0.12:9180/api/ha/state",
    ]);
    assert!(out.ends_with(" 403"), "{out}");

    // worker-1 installs through B while A is down.
    install(&lab.node, W1_IP, "worker-1", "52-54-00-4d-00-33");

    // A comes back: it learns worker-1 from B and leaves the VIPs to B.
    let serve_a2 = start_serve(&lab.a, &file_a);
    wait_for("A learned worker-1 from B", Duration::from_secs(10), || {
        let st = status(&lab.a);
        netboot_state(&st, "worker-1") == "installed" && st["ha"]["peerReachable"] == true
    });
    // A's timeline is back: worker-1's steps seen by B, and its own
    // earlier ones for worker-0 relayed by B.
    wait_for("A's timeline from B", Duration::from_secs(10), || {
        let st = status(&lab.a);
        step(&st, "worker-1", "installFinished").is_some()
            && ["ignition", "installFinished"].map(|s| step(&st, "worker-0", s)) == a_steps
    });
    let st_a = status(&lab.a);
    assert_eq!(netboot_state(&st_a, "worker-0"), "installed", "{st_a}");
    let (code, text, err) = run(
        "ip",
        &[
            "netns",
            "exec",
            lab.a.name(),
            BIN,
            "status",
            "--cluster",
            file_a.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        text.contains("ha: the peer 10.77.0.12 holds the VIPs; peer reachable; last sync "),
        "{text}"
    );
    // Its track script succeeds again (rise 2 at 1 s): nopreempt keeps B.
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(5) {
        let (a, b) = (held(&lab.a), held(&lab.b));
        if a != [false; 3] || b != [true; 3] {
            show("A back");
            panic!("after A came back: A holds {a:?}, B holds {b:?} (nopreempt: B keeps them)");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(status(&lab.a)["ha"]["holdsVIPs"], false);

    // 2. The holder's keepalived stops (a box that dies).
    fail_over(
        &lab.node,
        (&lab.a, &lab.b),
        "B's keepalived stopped",
        || ka_b.stop("TERM"),
        &show,
    );
    // A serves worker-1's disk (learned) and is the one DHCP server.
    let (_, s) = curl(
        &lab.node,
        W1_IP,
        "http://10.77.0.2:8080/boot/52-54-00-4d-00-33.ipxe",
    );
    assert!(s.contains("exit"), "A must send worker-1 to its disk: {s}");
    let out = dhcp_client(&lab.node, w, &["discover", "eth0", W0_MAC, "2"]);
    assert_eq!(
        out.lines()
            .filter(|l| *l == format!("OFFERS 1 10.77.0.2/{W0_IP}"))
            .count(),
        2,
        "{out}"
    );
    drop(serve_a2);
    ka_a.stop("TERM");
    serve_b.stop();
}
