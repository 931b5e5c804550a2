//! Slow readers cannot hold the HTTP server (issue #40 item 5, audit M5):
//! 300 downloads that are never read (a 2 KiB receive window, then
//! nothing), from 10 addresses of a hostile host on the cluster segment,
//! held every slot and gave a node 0 of 100 requests. Here the appliance,
//! the hostile host and the node are network namespaces on one bridge; the
//! appliance runs under a short open-files limit (about 300 HTTP slots, as
//! in the audit), so those downloads fill every HTTP slot; the hostile host keeps opening
//! one more a second per address. Every one of the node's 100 requests
//! (ignition, its iPXE script, an image) is served: a download whose
//! writes are stalled gives way to it. Then the write-progress timeout
//! (30 s) drops the stalled downloads. The same over HTTPS on the boot ISO
//! route, the hostile host in `http.bootIsoCidrs` (a BMC network).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{Appliance, Netns, unique_name};

/// The lab: the appliance on a bridge in its namespace, the hostile host
/// and the node each joined to it by a veth pair.
const APPLIANCE: &str = "10.71.0.1";
const WORKER0: &str = "10.71.0.20";
const WORKER0_MAC: &str = "52-54-00-47-00-14";
/// The hostile host's addresses: 10.71.0.200 to .209.
fn attackers() -> Vec<String> {
    (200..210).map(|i| format!("10.71.0.{i}")).collect()
}

struct Lab {
    srv: Netns,
    att: Netns,
    node: Netns,
}

fn lab() -> Lab {
    let base = unique_name("tsr");
    let srv = Netns::new(format!("{base}srv"));
    let att = Netns::new(format!("{base}att"));
    let node = Netns::new(format!("{base}nod"));
    let br = format!("{base}b");
    srv.ip(&["link", "add", &br, "type", "bridge"]);
    srv.ip(&["addr", "add", &format!("{APPLIANCE}/24"), "dev", &br]);
    srv.ip(&["link", "set", &br, "up"]);
    for (tag, ns, addrs) in [("a", &att, attackers()), ("n", &node, vec![WORKER0.into()])] {
        let (port, far) = (format!("{base}{tag}p"), format!("{base}{tag}"));
        common::veth(&port, &srv, &far, ns);
        srv.ip(&["link", "set", &port, "master", &br]);
        srv.ip(&["link", "set", &port, "up"]);
        for a in &addrs {
            ns.ip(&["addr", "add", &format!("{a}/24"), "dev", &far]);
        }
        ns.ip(&["link", "set", &far, "up"]);
    }
    Lab { srv, att, node }
}

/// The cluster file: worker-0 on the node's address, the big file and
/// the boot artifacts under `d`; `https` adds the ISO and its listener.
fn cluster(d: &Path, https: bool) -> std::path::PathBuf {
    for sub in ["images", "ign", "rhcos"] {
        std::fs::create_dir_all(d.join(sub)).unwrap();
    }
    for role in ["bootstrap", "master", "worker"] {
        std::fs::write(
            d.join(format!("ign/{role}.ign")),
            "{\"ignition\":{\"version\":\"3.2.0\"}}",
        )
        .unwrap();
    }
    std::fs::write(d.join("images/small.txt"), b"small file\n").unwrap();
    // Sparse: 256 MiB that no slow reader gets through.
    let big = std::fs::File::create(d.join("images/big.bin")).unwrap();
    big.set_len(256 << 20).unwrap();
    for (f, body) in [
        ("vmlinuz", "kernel"),
        ("initramfs.img", "initrd"),
        ("rootfs.img", "rootfs"),
    ] {
        std::fs::write(d.join("rhcos").join(f), body).unwrap();
    }
    let dd = d.display();
    let rhcos = if https {
        // A boot ISO big enough that a slow reader never gets through it.
        let initrd = common::pattern(8 << 20, 7);
        let iso = common::initramfs::rhcos_iso(d, "tsr", [b"kernel", &initrd], 1024).path;
        format!("rhcos: {{ iso: \"{}\" }}\n", iso.display())
    } else {
        format!(
            "rhcos: {{ kernel: \"{dd}/rhcos/vmlinuz\", initramfs: \"{dd}/rhcos/initramfs.img\", rootfs: \"{dd}/rhcos/rootfs.img\" }}\n"
        )
    };
    let tls = if https {
        format!("  tlsListen: {APPLIANCE}:8443\n  bootIsoCidrs: [10.71.0.192/27]\n")
    } else {
        String::new()
    };
    let yaml = format!(
        r#"name: tsr
baseDomain: crc.testing
network: {{ cidr: 10.71.0.0/24, gateway: 10.71.0.254, applianceIP: {APPLIANCE} }}
nodes:
  - {{ name: bootstrap, role: bootstrap, mac: "52:54:00:47:00:05", ip: 10.71.0.5 }}
  - {{ name: master-0, role: master, mac: "52:54:00:47:00:0a", ip: 10.71.0.10 }}
  - {{ name: worker-0, role: worker, mac: "52:54:00:47:00:14", ip: {WORKER0} }}
dns: {{ enabled: false }}
dhcp: {{ enabled: false, leaseFile: "{dd}/state/leases.json" }}
loadBalancer:
  maxConnections: 500
  listen: {{ api: "127.0.0.1:0", machineConfig: "127.0.0.1:0", ingressHttp: "127.0.0.1:0", ingressHttps: "127.0.0.1:0" }}
http:
  listen: {APPLIANCE}:8080
  imagesDir: "{dd}/images"
  ignitionDir: "{dd}/ign"
{tls}admin:
  listen: 127.0.0.1:9180
{rhcos}"#
    );
    let f = d.join("cluster.yaml");
    std::fs::write(&f, yaml).unwrap();
    f
}

/// The appliance's open-files limit: shared with the load balancer
/// (`maxConnections: 500`), it leaves HTTP about 300 slots (the audit's
/// appliance had 278), with a per-client limit above 30: 10 addresses
/// fill them with about 30 downloads each. (Each download also holds its
/// file open: the LB's unused share keeps those descriptors free.)
const NOFILE: &str = "2048";

/// The appliance in the lab's server namespace, under [`NOFILE`].
fn start(lab: &Lab, d: tempfile::TempDir, cluster: std::path::PathBuf) -> Appliance {
    let ns = lab.srv.name();
    Appliance::launch()
        .prefix(&[
            "ip",
            "netns",
            "exec",
            ns,
            "prlimit",
            &format!("--nofile={NOFILE}:{NOFILE}"),
            "--",
        ])
        .ready_timeout(Duration::from_secs(60))
        .start_file(d, cluster)
}

/// HTTP connections the appliance serves at once, and one client's
/// limit, from its start-up line (`open files 2048: http N connections
/// (P per client: …`).
fn caps(app: &Appliance) -> (usize, usize) {
    let log = app.log();
    let want = format!("open files {NOFILE}: http ");
    let line = log
        .lines()
        .find(|l| l.contains(&want))
        .unwrap_or_else(|| panic!("no start-up line on the caps:\n{log}"));
    let num_after = |what: &str| -> usize {
        let at = line
            .find(what)
            .unwrap_or_else(|| panic!("{what:?} in {line}"))
            + what.len();
        line[at..]
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("a number after {what:?} in {line}"))
    };
    (num_after("http "), num_after("connections ("))
}

/// A counter or gauge of the appliance's `/metrics` (admin on loopback in
/// the server namespace).
fn metric(lab: &Lab, name: &str) -> u64 {
    let out = lab
        .srv
        .cmd(&[
            "curl",
            "-sS",
            "--max-time",
            "10",
            "http://127.0.0.1:9180/metrics",
        ])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in /metrics"))
}

/// `slowread.py` in the hostile host's namespace, started and ready.
struct SlowReaders {
    child: Option<std::process::Child>,
    _dir: tempfile::TempDir,
}

impl SlowReaders {
    fn start(lab: &Lab, url: &str, per_src: usize, hold: Duration) -> SlowReaders {
        let dir = tempfile::tempdir().unwrap();
        let ready = dir.path().join("ready");
        let script = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/http_slowread/slowread.py"
        );
        let mut args = vec![
            "python3".to_string(),
            script.to_string(),
            url.to_string(),
            per_src.to_string(),
            hold.as_secs().to_string(),
            ready.display().to_string(),
        ];
        args.extend(attackers());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let child = lab
            .att
            .cmd(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut s = SlowReaders {
            child: Some(child),
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        while !ready.exists() {
            let done = s.child.as_mut().unwrap().try_wait().unwrap();
            assert!(
                done.is_none() && Instant::now() < deadline,
                "slowread.py not ready: {done:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        s
    }
}

impl Drop for SlowReaders {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// One request from the node: its status code ("000" when curl failed).
fn node_get(lab: &Lab, extra: &[&str], url: &str) -> String {
    let mut args = vec![
        "curl",
        "-sS",
        "--max-time",
        "10",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
    ];
    args.extend_from_slice(extra);
    args.push(url);
    let out = lab.node.cmd(&args).stdin(Stdio::null()).output().unwrap();
    let code = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if code.is_empty() { "000".into() } else { code }
}

/// What the node asks for: each URL in turn, with curl `extra` arguments,
/// and the status that means served.
struct NodeAsks<'a> {
    urls: &'a [String],
    extra: &'a [&'a str],
    want: &'a str,
}

/// Fill every slot with never-read downloads of `attack_url`, check that
/// they did, then the node's 100 requests: all must be served. Then the
/// stalled downloads are dropped by the write-progress timeout.
fn node_is_served_while_slow_readers_hold(
    lab: &Lab,
    app: &Appliance,
    attack_url: &str,
    node: NodeAsks<'_>,
) {
    let (served, per_client) = caps(app);
    let per_src = served.div_ceil(10) + 2;
    assert!(
        per_src <= per_client,
        "10 addresses cannot fill {served} slots with {per_client} each"
    );
    let hold = Duration::from_secs(80);
    let readers = SlowReaders::start(lab, attack_url, per_src, hold);
    // Stalled for a moment (clients::MIN_STALL, 2 s) before any gives way.
    std::thread::sleep(Duration::from_secs(3));
    let active = metric(lab, "crc_appliance_http_connections_active");
    let m = |n: &str| metric(lab, &format!("crc_appliance_http_connections_{n}"));
    assert!(
        active as usize + 8 >= served,
        "the slow readers hold {active} of {served} slots: not full (total {}, refused {}, full {}, evicted {})",
        m("total"),
        m("refused_total"),
        m("refused_full_total"),
        m("evicted_total")
    );
    let mut failed = Vec::new();
    for i in 0..100 {
        let url = &node.urls[i % node.urls.len()];
        let code = node_get(lab, node.extra, url);
        if code != node.want {
            failed.push(format!("#{i} {url}: {code}"));
        }
    }
    assert!(
        failed.is_empty(),
        "{} of 100 node requests not served while slow readers held every slot, the first: {:?}",
        failed.len(),
        &failed[..failed.len().min(5)]
    );
    assert!(metric(lab, "crc_appliance_http_connections_evicted_total") >= 1);
    // The write-progress timeout (30 s) drops the downloads that stalled.
    common::wait_until("stalled downloads dropped", Duration::from_secs(60), || {
        metric(lab, "crc_appliance_http_connections_stalled_closed_total") >= served as u64 / 2
    });
    drop(readers);
}

#[test]
fn slow_readers_from_many_addresses_leave_a_node_served() {
    require_tools!("curl", "python3", "prlimit");
    require_netns!("tsr");
    let lab = lab();
    let dir = tempfile::tempdir().unwrap();
    let cluster = cluster(dir.path(), false);
    let app = start(&lab, dir, cluster);
    let base = format!("http://{APPLIANCE}:8080");
    let node_urls = [
        format!("{base}/ignition/worker-0.ign"),
        format!("{base}/boot/{WORKER0_MAC}.ipxe"),
        format!("{base}/images/small.txt"),
    ];
    let node = NodeAsks {
        urls: &node_urls,
        extra: &[],
        want: "200",
    };
    node_is_served_while_slow_readers_hold(&lab, &app, &format!("{base}/images/big.bin"), node);
}

#[test]
fn slow_readers_of_the_https_boot_iso_leave_a_node_served() {
    require_tools!("curl", "python3", "prlimit", "xorriso");
    for f in [
        common::initramfs::ISOLINUX_BIN,
        common::initramfs::LDLINUX_C32,
    ] {
        require!(
            Path::new(f).is_file(),
            format!("{f} missing (isolinux, syslinux-common)")
        );
    }
    require_netns!("tsr");
    let lab = lab();
    let dir = tempfile::tempdir().unwrap();
    let cluster = cluster(dir.path(), true);
    let cert = dir.path().join("state/tsr-https-cert.pem");
    let app = start(&lab, dir, cluster);
    let url = format!("https://{APPLIANCE}:8443/boot/worker-0.iso");
    let ca = cert.display().to_string();
    // The node asks for the first 64 KiB (the whole ISO is 8 MiB).
    let node = NodeAsks {
        urls: std::slice::from_ref(&url),
        extra: &["--cacert", &ca, "-r", "0-65535"],
        want: "206",
    };
    node_is_served_while_slow_readers_hold(&lab, &app, &url, node);
}
