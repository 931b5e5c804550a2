//! The mirror registry on an HA pair (issue #36 item 8, docs/ha.md): two
//! appliances with real keepalived (tests/common/hapair.rs), a node, each
//! in its own network namespace on one bridge in a fourth.
//!
//! - `skopeo copy` pushes an image through the VIP (to A): B serves its
//!   manifest and every blob, by digest, within 5 s; pushed to B's own
//!   address, A serves it within 5 s (both ways);
//! - the replication paths answer only the peer (403 from a node) and
//!   only with the pair key (401 without it, or with a forged MAC);
//! - a large blob pulled through the VIP at a bounded rate, `kill -9` of
//!   A's serve in the middle: the client's retries through the VIP finish
//!   from B, and what it got hashes to the digest.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
#[path = "registry/lab.rs"]
mod lab;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::hapair::{KEEPALIVED, keepalived};
use common::{Appliance, Netns, unique_name};

const IFACE: &str = "rhv0";
const VIP: &str = "10.77.0.2";
const OWN_A: &str = "10.77.0.11";
const OWN_B: &str = "10.77.0.12";
const NODE: &str = "10.77.0.50";
const USER: &str = "pusher";
const PASS: &str = "s3cret-pass";
/// How long replication may take (the issue's bound).
const REPLICATED: Duration = Duration::from_secs(5);

fn cluster(shared: &Path, own: &Path, own_ip: &str, peer: &str, priority: u8) -> String {
    let s = shared.display();
    let o = own.display();
    format!(
        r#"name: rha
baseDomain: test
network:
  cidr: 10.77.0.0/24
  gateway: 10.77.0.1
  applianceIP: {VIP}
  apiVIP: 10.77.0.3
  ingressVIP: 10.77.0.4
  interface: {IFACE}
nodes:
  - {{ name: bootstrap, role: bootstrap, mac: "52:54:00:4e:00:3d", ip: 10.77.0.61 }}
  - {{ name: master-0, role: master, mac: "52:54:00:4e:00:3c", ip: {NODE} }}
dhcp:
  enabled: false
  leaseFile: "{o}/leases.json"
http:
  enabled: false
loadBalancer:
  enabled: false
admin: {{ listen: "0.0.0.0:9180", tokenFile: "{s}/admin.token" }}
registry:
  storage: "{o}/storage"
  htpasswdFile: "{s}/htpasswd"
  tls: {{ certFile: "{s}/mirror.crt", keyFile: "{s}/mirror.key" }}
ha: {{ peer: {peer}, ownIP: {own_ip}, priority: {priority}, tokenFile: "{s}/ha.token" }}
"#
    )
}

fn tools() -> Result<(), String> {
    if !Path::new(KEEPALIVED).is_file() {
        return Err("keepalived is not extracted (scripts/prereqs.sh)".into());
    }
    lab::tools_present(
        "rha",
        &["skopeo", "curl", "htpasswd", "openssl", "tar", "gzip"],
    )
}

/// The switch, A, B and the node.
struct Lab {
    sw: Netns,
    a: Netns,
    b: Netns,
    node: Netns,
}

impl Lab {
    fn new() -> Lab {
        let lab = Lab {
            sw: Netns::new(unique_name("rsw")),
            a: Netns::new(unique_name("ra")),
            b: Netns::new(unique_name("rb")),
            node: Netns::new(unique_name("rn")),
        };
        lab.sw.ip(&["link", "add", "br0", "type", "bridge"]);
        lab.sw.ip(&["link", "set", "br0", "up"]);
        for (i, (ns, name, addr)) in [
            (&lab.a, IFACE, OWN_A),
            (&lab.b, IFACE, OWN_B),
            (&lab.node, "eth0", NODE),
        ]
        .into_iter()
        .enumerate()
        {
            common::bridge_port(&lab.sw, "br0", &format!("p{i}"), ns, name);
            ns.ip(&["addr", "add", &format!("{addr}/24"), "dev", name]);
            ns.ip(&["link", "set", name, "up"]);
        }
        lab
    }
}

fn holds_vip(ns: &Netns) -> bool {
    ns.exec(&["ip", "-4", "-o", "addr", "show", "dev", IFACE])
        .contains(&format!(" {VIP}/"))
}

/// curl from the node: (exit code, HTTP status, headers and body).
fn curl(node: &Netns, args: &[&str], url: &str) -> (i32, String) {
    let out = node
        .cmd(&["curl", "-sk", "--http1.1", "--max-time", "5", "-i"])
        .args(args)
        .arg(url)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

const ACCEPT: &str = "Accept: application/vnd.oci.image.manifest.v1+json";

/// Whether `host` serves manifest `digest` under `repo:tag` and every blob
/// it names.
fn serves(node: &Netns, host: &str, repo: &str, tag: &str, digest: &str) -> bool {
    let base = format!("https://{host}:5000/v2/{repo}");
    let (code, out) = curl(node, &["-H", ACCEPT], &format!("{base}/manifests/{tag}"));
    if code != 0 || !out.starts_with("HTTP/1.1 200") {
        return false;
    }
    if !out
        .to_lowercase()
        .contains(&format!("docker-content-digest: {digest}"))
    {
        return false;
    }
    let body = out.split("\r\n\r\n").nth(1).unwrap_or_default();
    let Ok(m) = serde_json::from_str::<serde_json::Value>(body) else {
        return false;
    };
    let mut blobs = vec![
        m["config"]["digest"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
    ];
    for l in m["layers"].as_array().into_iter().flatten() {
        blobs.push(l["digest"].as_str().unwrap_or_default().to_string());
    }
    blobs.iter().all(|d| {
        let (code, out) = curl(node, &["-I"], &format!("{base}/blobs/{d}"));
        code == 0 && out.starts_with("HTTP/1.1 200")
    })
}

/// Poll until `f` holds; how long it took (panics after `within`).
fn within(what: &str, within: Duration, mut f: impl FnMut() -> bool) -> Duration {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < within, "{what}: not within {within:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    t0.elapsed()
}

fn push_image(lab: &Lab, w: &Path, host: &str, repo: &str, seed: u32) -> String {
    let layout = w.join(format!("layout-{seed}"));
    let digest = lab::oci_layout(&layout, "v1", 3, seed);
    let out = lab
        .node
        .cmd(&["skopeo", "copy", "--dest-tls-verify=false", "--dest-creds"])
        .arg(format!("{USER}:{PASS}"))
        .arg(format!("oci:{}:v1", layout.display()))
        .arg(format!("docker://{host}:5000/{repo}:v1"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "skopeo copy to {host}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    digest
}

/// Push `bytes` as a blob of `repo` through `host` (POST, then PUT with
/// the digest): its digest.
fn push_blob(node: &Netns, host: &str, repo: &str, file: &Path, bytes: &[u8]) -> String {
    let d = lab::sha256(bytes);
    std::fs::write(file, bytes).unwrap();
    let auth = format!("{USER}:{PASS}");
    let url = format!("https://{host}:5000/v2/{repo}/blobs/uploads/");
    let (_, out) = curl(node, &["-u", &auth, "-X", "POST"], &url);
    let loc = out
        .lines()
        .find_map(|l| {
            l.strip_prefix("Location: ")
                .or(l.strip_prefix("location: "))
        })
        .expect("a Location")
        .trim()
        .to_string();
    let sep = if loc.contains('?') { '&' } else { '?' };
    let put = if loc.starts_with('/') {
        format!("https://{host}:5000{loc}{sep}digest={d}")
    } else {
        format!("{loc}{sep}digest={d}")
    };
    let data = format!("@{}", file.display());
    let (code, out) = curl(
        node,
        &[
            "-u",
            &auth,
            "-X",
            "PUT",
            "-H",
            "Content-Type: application/octet-stream",
            "--data-binary",
            &data,
        ],
        &put,
    );
    assert!(code == 0 && out.contains("HTTP/1.1 201 "), "{out}");
    d
}

fn shared_files(w: &Path) {
    std::fs::write(w.join("ha.token"), "pair-token-0123456789abcdef\n").unwrap();
    std::fs::write(w.join("admin.token"), "admin-token-0123456789abcdef\n").unwrap();
    let ht = common::run_ok("htpasswd", &["-Bbn", USER, PASS]);
    std::fs::write(w.join("htpasswd"), ht.trim()).unwrap();
    common::self_signed_cert(&w.join("mirror.crt"), &w.join("mirror.key"), "mirror");
    use std::os::unix::fs::PermissionsExt as _;
    for f in ["ha.token", "admin.token", "mirror.key"] {
        std::fs::set_permissions(w.join(f), std::fs::Permissions::from_mode(0o600)).unwrap();
    }
}

#[test]
fn a_push_reaches_the_peer_within_5_s_and_a_pull_survives_kill_9_of_the_holder() {
    if let Err(why) = tools() {
        common::note_skip(&format!("SKIPPED {}: {why}", module_path!()));
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    shared_files(w);
    let (dir_a, dir_b): (PathBuf, PathBuf) = (w.join("a"), w.join("b"));
    std::fs::create_dir_all(&dir_a).unwrap();
    std::fs::create_dir_all(&dir_b).unwrap();
    let (file_a, file_b) = (dir_a.join("cluster.yaml"), dir_b.join("cluster.yaml"));
    std::fs::write(&file_a, cluster(w, &dir_a, OWN_A, OWN_B, 150)).unwrap();
    std::fs::write(&file_b, cluster(w, &dir_b, OWN_B, OWN_A, 100)).unwrap();
    let lab = Lab::new();
    let mut serve_a = Appliance::launch().netns(lab.a.name()).start_path(&file_a);
    let serve_b = Appliance::launch().netns(lab.b.name()).start_path(&file_b);
    let _ka_a = keepalived(&lab.a, &file_a, w, "a");
    within("A holds the VIP", Duration::from_secs(15), || {
        holds_vip(&lab.a)
    });
    let _ka_b = keepalived(&lab.b, &file_b, w, "b");
    for s in [&serve_a, &serve_b] {
        s.wait_log("serving the HA peer on", Duration::from_secs(20));
    }
    // HTTP/1.1 only with `registry.tls` too, as with the appliance's own
    // certificate: a client that offers h2 is answered in HTTP/1.1.
    let alpn = lab
        .node
        .cmd(&[
            "curl",
            "-skv",
            "--http2",
            "--max-time",
            "5",
            "-o",
            "/dev/null",
        ])
        .arg(format!("https://{OWN_A}:5000/v2/"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let told = String::from_utf8_lossy(&alpn.stderr);
    assert!(
        told.lines()
            .any(|l| l.contains("ALPN") && l.contains("accepted") && l.contains("http/1.1")),
        "the registry did not settle on HTTP/1.1 with a client offering h2:\n{told}"
    );

    // Pushed through the VIP (A): B serves it.
    let d1 = push_image(&lab, w, VIP, "lab/app", 11);
    let took = within("B serves what was pushed to A", REPLICATED, || {
        serves(&lab.node, OWN_B, "lab/app", "v1", &d1)
    });
    eprintln!("pushed to A, served by B after {took:?}");
    // Status: once in step, neither lacks anything of the other's.
    let replica = |ns: &Netns| {
        let out = ns.exec(&[
            "curl",
            "-s",
            "--max-time",
            "2",
            "http://127.0.0.1:9180/status",
        ]);
        let st: serde_json::Value = serde_json::from_str(&out).unwrap_or_default();
        st["registry"]["replica"].clone()
    };
    within(
        "B's status shows the pair in step",
        Duration::from_secs(10),
        || {
            let r = replica(&lab.b);
            r["weLack"]["blobs"] == 0 && r["peerLacks"]["blobs"] == 0 && r["lastSync"].is_u64()
        },
    );
    // The replication paths: only the peer, only with the pair key.
    let inv = format!("https://{OWN_A}:5000/_ha/registry/inventory");
    let (_, out) = curl(&lab.node, &[], &inv);
    assert!(out.starts_with("HTTP/1.1 403"), "from a node: {out}");
    let out = lab
        .b
        .exec(&["curl", "-sk", "--http1.1", "--max-time", "5", "-i", &inv]);
    assert!(
        out.starts_with("HTTP/1.1 401"),
        "from B without the key: {out}"
    );
    let forged = lab.b.exec(&[
        "curl",
        "-sk",
        "--http1.1",
        "--max-time",
        "5",
        "-i",
        "-H",
        &format!("x-crc-ha-member: {OWN_B}"),
        "-H",
        &format!(
            "x-crc-ha-time: {}",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs()
        ),
        "-H",
        "x-crc-ha-nonce: 00112233445566778899aabbccddeeff",
        "-H",
        &format!("x-crc-ha-mac: {}", "ab".repeat(32)),
        &inv,
    ]);
    assert!(forged.starts_with("HTTP/1.1 401"), "a forged MAC: {forged}");
    // Pushed to B's own address: A serves it.
    let d2 = push_image(&lab, w, OWN_B, "lab/other", 23);
    let took = within("A serves what was pushed to B", REPLICATED, || {
        serves(&lab.node, OWN_A, "lab/other", "v1", &d2)
    });
    eprintln!("pushed to B, served by A after {took:?}");

    // A large blob through the VIP, on B too before the cut.
    let big = common::pattern(24 << 20, 5);
    let d = push_blob(&lab.node, VIP, "lab/big", &w.join("big.src"), &big);
    let head = format!("https://{OWN_B}:5000/v2/lab/big/blobs/{d}");
    within("B has the large blob", Duration::from_secs(30), || {
        curl(&lab.node, &["-I"], &head)
            .1
            .starts_with("HTTP/1.1 200")
    });
    let got = w.join("big.got");
    let url = format!("https://{VIP}:5000/v2/lab/big/blobs/{d}");
    let mut pull = lab
        .node
        .cmd(&[
            "curl",
            "-sSk",
            "--limit-rate",
            "3M",
            "--retry",
            "20",
            "--retry-all-errors",
            "--retry-delay",
            "1",
            "--max-time",
            "90",
            "-C",
            "-",
            "-o",
        ])
        .arg(&got)
        .arg(&url)
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(2));
    let part = std::fs::metadata(&got).map_or(0, |m| m.len());
    assert!(
        part > 0 && part < big.len() as u64,
        "the pull is not under way: {part} bytes"
    );
    serve_a.stop_with("KILL");
    let status = pull.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut pull.stderr.take().unwrap(), &mut err).unwrap();
    assert!(status.success(), "the pull did not complete from B: {err}");
    assert!(holds_vip(&lab.b), "B does not hold the VIP");
    let bytes = std::fs::read(&got).unwrap();
    assert_eq!(
        lab::sha256(&bytes),
        d,
        "the pulled blob does not hash to its digest"
    );
}
