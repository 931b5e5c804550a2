//! Single-node OpenShift (bootstrap-in-place) and compact clusters through
//! the real binary: `check` names the install mode and refuses the
//! contradictions; `render lb` of a compact cluster puts ingress on the
//! masters; a single-node cluster's api, api-int and `*.apps` resolve to the
//! node (`dig`, `kdig`) and its LB ports stay closed unless the LB is
//! switched on; a reload adding a worker leaves the master's records alone.
//! The appliance runs in this process (`common::inproc`); in the
//! network-namespace lab of the reload test inside the server namespace
//! (`InProc::in_netns`), reloaded through the hub as SIGHUP would.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::inproc::InProc;
use common::{BIN, run, run_ok};

pub const BIP: &str = "bootstrap-in-place-for-live-iso.ign";
const Z: &str = "sno.crc.testing";
const NODE_IP: &str = "127.0.21.10";

/// A single-node cluster file on loopback: one master (`extra_nodes`
/// appended), `ignitionDir` = `<dir>/ign`, every service off unless
/// `sections` turns it on.
fn sno_yaml(dir: &Path, extra_nodes: &str, sections: &str) -> String {
    let mut s = sections.to_string();
    for name in ["dns", "dhcp", "admin"] {
        if !s.contains(&format!("{name}:")) {
            s.push_str(&format!("{name}:\n  enabled: false\n"));
        }
    }
    if !s.contains("http:") {
        s.push_str(&format!(
            "http:\n  enabled: false\n  ignitionDir: {}/ign\n",
            dir.display()
        ));
    }
    format!(
        r#"name: sno
baseDomain: crc.testing
network:
  cidr: 127.0.21.0/24
  gateway: 127.0.21.1
  applianceIP: 127.0.21.1
nodes:
  - {{ name: master-0, role: master, mac: "52:54:00:15:00:0a", ip: {NODE_IP} }}
{extra_nodes}{s}"#
    )
}

/// A temp dir with `ign/<BIP>` (when `bip`) and `cluster.yaml`.
fn setup(bip: bool, extra_nodes: &str, sections: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("ign")).unwrap();
    if bip {
        std::fs::write(
            dir.path().join("ign").join(BIP),
            br#"{"ignition":{"version":"3.2.0"},"storage":{"files":[]}}"#,
        )
        .unwrap();
    }
    let f = dir.path().join("cluster.yaml");
    std::fs::write(&f, sno_yaml(dir.path(), extra_nodes, sections)).unwrap();
    (dir, f)
}

fn check(f: &Path) -> (i32, String, String) {
    run(BIN, &["check", "--cluster", f.to_str().unwrap()])
}

#[test]
fn check_names_single_node_and_refuses_contradictions() {
    let (_d, f) = setup(true, "", "");
    let (code, out, err) = check(&f);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("mode single-node (bootstrap-in-place)"),
        "{out}"
    );
    assert!(
        out.contains(&format!("api {NODE_IP} ingress {NODE_IP}")),
        "{out}"
    );
    assert!(out.contains("lb off"), "{out}");

    // One master, no bootstrap, no file: refused with the command to run.
    let (_d, f) = setup(false, "", "");
    let (code, out, err) = check(&f);
    assert_eq!(code, 78, "{out}{err}");
    assert!(err.contains(BIP), "{err}");
    assert!(
        err.contains("openshift-install create single-node-ignition-config"),
        "{err}"
    );

    // The file with a bootstrap node: refused, both fixes named.
    let (_d, f) = setup(
        true,
        "  - { name: bootstrap, role: bootstrap, mac: \"52:54:00:15:00:05\", ip: 127.0.21.5 }\n",
        "",
    );
    let (code, out, err) = check(&f);
    assert_eq!(code, 78, "{out}{err}");
    assert!(
        err.contains("bootstrap node") && err.contains("remove the bootstrap node"),
        "{err}"
    );

    // The file with three masters: refused.
    let (_d, f) = setup(
        true,
        "  - { name: master-1, role: master, mac: \"52:54:00:15:00:0b\", ip: 127.0.21.11 }\n  - { name: master-2, role: master, mac: \"52:54:00:15:00:0c\", ip: 127.0.21.12 }\n",
        "",
    );
    let (code, out, err) = check(&f);
    assert_eq!(code, 78, "{out}{err}");
    assert!(err.contains("3 masters"), "{err}");

    // libvirt: the master's install domain boots the live system with the
    // bootstrap-in-place Ignition, no install kargs.
    let (_d, f) = setup(
        true,
        "",
        "rhcos: { iso: /nonexistent/rhcos.iso }\nlibvirt: { uri: \"qemu:///system\" }\n",
    );
    let (code, out, err) = check(&f);
    assert_eq!(code, 0, "{out}{err}");
    let xml = run_ok(
        BIN,
        &["render", "--cluster", f.to_str().unwrap(), "libvirt"],
    );
    let cmdline = xml
        .lines()
        .find(|l| l.contains("<cmdline>"))
        .unwrap_or_else(|| panic!("no cmdline in {xml}"));
    assert!(
        cmdline.contains("/ignition/master-0.ign")
            && cmdline.contains("ignition.config.url=")
            && cmdline.contains("coreos.live.rootfs_url=")
            && !cmdline.contains("coreos.inst."),
        "{cmdline}"
    );

    // Workers added later: still single-node, api stays on the master.
    let (_d, f) = setup(
        true,
        "  - { name: worker-0, role: worker, mac: \"52:54:00:15:00:14\", ip: 127.0.21.20 }\n",
        "",
    );
    let (code, out, err) = check(&f);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("with 1 worker(s) added"), "{out}");
    assert!(
        out.contains(&format!("api {NODE_IP} ingress {NODE_IP}")),
        "{out}"
    );
}

/// `render lb` of a compact cluster (three masters, no workers): every
/// pool's backends are the masters (and the bootstrap for api and
/// machine-config); a single-node cluster with the LB switched on has its
/// master as the one backend of each pool.
#[test]
fn compact_ingress_is_the_masters_and_single_node_lb_is_its_master() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("compact.yaml");
    let compact = r#"name: compact
baseDomain: crc.testing
network: { cidr: 127.0.22.0/24, gateway: 127.0.22.1, applianceIP: 127.0.22.1 }
nodes:
  - { name: bootstrap, role: bootstrap, mac: "52:54:00:16:00:05", ip: 127.0.22.5 }
  - { name: master-0, role: master, mac: "52:54:00:16:00:0a", ip: 127.0.22.10 }
  - { name: master-1, role: master, mac: "52:54:00:16:00:0b", ip: 127.0.22.11 }
  - { name: master-2, role: master, mac: "52:54:00:16:00:0c", ip: 127.0.22.12 }
"#;
    std::fs::write(&f, compact).unwrap();
    let (code, out, err) = check(&f);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("mode compact"), "{out}");
    let lb = run_ok(BIN, &["render", "--cluster", f.to_str().unwrap(), "lb"]);
    let compact_pools = pools(&lb);
    for ingress in ["ingress-http", "ingress-https"] {
        assert_eq!(
            compact_pools[ingress],
            ["master-0", "master-1", "master-2"],
            "{ingress}: {lb}"
        );
    }
    assert_eq!(
        compact_pools["api"],
        ["bootstrap", "master-0", "master-1", "master-2"],
        "{lb}"
    );

    let (_d, f) = setup(
        true,
        "  - { name: worker-0, role: worker, mac: \"52:54:00:15:00:14\", ip: 127.0.21.20 }\n",
        "loadBalancer:\n  enabled: true\n",
    );
    let (code, out, err) = check(&f);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("lb on"), "{out}");
    let lb = run_ok(BIN, &["render", "--cluster", f.to_str().unwrap(), "lb"]);
    for (pool, backends) in pools(&lb) {
        assert_eq!(backends, ["master-0"], "{pool}: {lb}");
    }
}

/// Pool name → backend names, from `render lb`.
fn pools(lb: &str) -> std::collections::BTreeMap<String, Vec<String>> {
    let mut out = std::collections::BTreeMap::new();
    let mut cur = String::new();
    for l in lb.lines() {
        let w: Vec<&str> = l.split_whitespace().collect();
        match w.as_slice() {
            ["frontend", name, ..] => {
                cur = name.to_string();
                out.insert(cur.clone(), Vec::new());
            }
            ["backend", name, ..] => out.get_mut(&cur).unwrap().push(name.to_string()),
            _ => {}
        }
    }
    out
}

/// The A records `tool` (dig or kdig) gets for `name`.
fn a_records(tool: &str, dns: SocketAddr, name: &str, qtype: &str) -> Vec<String> {
    let port = dns.port().to_string();
    let server = format!("@{}", dns.ip());
    let args = [
        "+time=3",
        "+short",
        "+norecurse",
        "-p",
        &port,
        &server,
        name,
        qtype,
    ];
    let (code, out, err) = run(tool, &args);
    assert_eq!(code, 0, "{tool} {args:?}: {out}{err}");
    let mut v: Vec<String> = out.lines().map(str::trim).map(str::to_string).collect();
    v.retain(|l| !l.is_empty());
    v.sort();
    v
}

fn dns_section() -> &'static str {
    "dns:\n  listen: [\"127.0.0.1:0\"]\n"
}

#[test]
fn dig_and_kdig_resolve_api_api_int_and_apps_to_the_node() {
    require_tools!("dig", "kdig");
    let (dir, f) = setup(true, "", dns_section());
    let app = InProc::start_file(dir, f);
    let dns = app.addr("dns udp");
    let apps = format!("x{}.apps.{Z}.", std::process::id());
    for tool in ["dig", "kdig"] {
        for name in [format!("api.{Z}."), format!("api-int.{Z}."), apps.clone()] {
            assert_eq!(a_records(tool, dns, &name, "A"), [NODE_IP], "{tool} {name}");
        }
        // The node's PTR names the node only (no api PTR on its address).
        assert_eq!(
            a_records(tool, dns, "10.21.0.127.in-addr.arpa.", "PTR"),
            [format!("master-0.{Z}.")],
            "{tool} PTR"
        );
    }
}

/// `ingress`: with workers added, `*.apps` stays on the master (api and
/// api-int always do) until the cluster file says the router moved; then it
/// resolves to the named nodes, and the LB's ingress pools follow it.
#[test]
fn apps_follow_the_ingress_setting_and_stay_on_the_master_by_default() {
    require_tools!("dig", "kdig");
    let workers = "  - { name: worker-0, role: worker, mac: \"52:54:00:15:00:14\", ip: 127.0.21.20 }\n  - { name: worker-1, role: worker, mac: \"52:54:00:15:00:15\", ip: 127.0.21.21 }\n";
    let apps = format!("y{}.apps.{Z}.", std::process::id());
    let (dir, f) = setup(true, workers, dns_section());
    let app = InProc::start_file(dir, f);
    let dns = app.addr("dns udp");
    for tool in ["dig", "kdig"] {
        assert_eq!(a_records(tool, dns, &apps, "A"), [NODE_IP], "{tool}");
    }
    drop(app);
    let moved = format!("ingress: [worker-0, worker-1]\n{}", dns_section());
    let (dir, f) = setup(true, workers, &moved);
    let (code, out, err) = check(&f);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("ingress 127.0.21.20,127.0.21.21"), "{out}");
    let app = InProc::start_file(dir, f);
    let dns = app.addr("dns udp");
    for tool in ["dig", "kdig"] {
        assert_eq!(
            a_records(tool, dns, &apps, "A"),
            ["127.0.21.20", "127.0.21.21"],
            "{tool}"
        );
        for name in [format!("api.{Z}."), format!("api-int.{Z}.")] {
            assert_eq!(a_records(tool, dns, &name, "A"), [NODE_IP], "{tool} {name}");
        }
    }
    // With the LB on, the ingress pools are the named nodes (api stays on
    // the master).
    let (_d, f) = setup(
        true,
        workers,
        "ingress: [worker-1]\nloadBalancer:\n  enabled: true\n",
    );
    let lb = run_ok(BIN, &["render", "--cluster", f.to_str().unwrap(), "lb"]);
    let p = pools(&lb);
    assert_eq!(p["ingress-https"], ["worker-1"], "{lb}");
    assert_eq!(p["ingress-http"], ["worker-1"], "{lb}");
    assert_eq!(p["api"], ["master-0"], "{lb}");
    // Bad entries are refused with their field paths.
    let (_d, f) = setup(true, workers, "ingress: [worker-9, worker-0, worker-0]\n");
    let (code, out, err) = check(&f);
    assert_eq!(code, 78, "{out}{err}");
    let all = format!("{out}{err}");
    assert!(
        all.contains("ingress[0]") && all.contains("no node named \"worker-9\""),
        "{all}"
    );
    assert!(
        all.contains("ingress[2]") && all.contains("listed twice"),
        "{all}"
    );
}

fn closed(addr: SocketAddr) -> bool {
    TcpStream::connect_timeout(&addr, Duration::from_secs(2)).is_err()
}

/// The LB of a single-node cluster binds nothing unless `enabled: true`:
/// the same listen addresses are refused, then answered once switched on.
#[test]
fn single_node_lb_ports_are_closed_by_default() {
    let ports: Vec<u16> = (0..4).map(|_| common::free_port()).collect();
    let listen = format!(
        "  listen: {{ api: \"127.0.0.1:{}\", machineConfig: \"127.0.0.1:{}\", ingressHttp: \"127.0.0.1:{}\", ingressHttps: \"127.0.0.1:{}\" }}\n",
        ports[0], ports[1], ports[2], ports[3]
    );
    let addrs: Vec<SocketAddr> = ports
        .iter()
        .map(|p| SocketAddr::from(([127, 0, 0, 1], *p)))
        .collect();
    let (dir, f) = setup(
        true,
        "",
        &format!("{}loadBalancer:\n{listen}", dns_section()),
    );
    let app = InProc::start_file(dir, f);
    let _ = app.addr("dns udp");
    for a in &addrs {
        assert!(closed(*a), "{a} accepts connections; log:\n{}", app.log());
    }
    drop(app);

    let (dir, f) = setup(
        true,
        "",
        &format!("{}loadBalancer:\n  enabled: true\n{listen}", dns_section()),
    );
    let app = InProc::start_file(dir, f);
    let _ = app.addr("dns udp");
    common::wait_until("the LB listens", Duration::from_secs(10), || {
        addrs.iter().all(|a| !closed(*a))
    });
}

/// The cluster of the reload test, in a server namespace on `ifs`
/// (10.90.0.1): the single-node master, plus `extra_nodes`.
fn reload_yaml(dir: &Path, ifs: &str, extra_nodes: &str) -> String {
    format!(
        r#"name: sno
baseDomain: crc.testing
network: {{ cidr: 10.90.0.0/24, gateway: 10.90.0.1, applianceIP: 10.90.0.1, interface: {ifs} }}
nodes:
  - {{ name: master-0, role: master, mac: "52:54:00:5a:00:0a", ip: 10.90.0.10 }}
{extra_nodes}dns:
  listen: ["10.90.0.1:53"]
dhcp:
  listen: 0.0.0.0:67
  leaseFile: "{d}/leases.json"
http:
  listen: 10.90.0.1:8080
  imagesDir: "{d}/images"
  ignitionDir: "{d}/ign"
admin:
  listen: 127.0.0.1:0
rhcos:
  kernel: "{d}/vmlinuz"
  initramfs: "{d}/initrd.img"
  rootfs: "{d}/rootfs.img"
"#,
        d = dir.display()
    )
}

/// Adding a worker to a single-node cluster and reloading gives
/// the worker DNS, a DHCP lease (udhcpc in a client namespace with its
/// MAC), an install script (role worker, its ignition from `worker.ign`);
/// the master's records, `api`, `api-int` and `*.apps` are unchanged and
/// its script is still the bootstrap-in-place one.
#[test]
fn reload_adding_a_worker_leaves_the_master_alone() {
    require_tools!("dig", "udhcpc", "curl");
    if let Err(why) = common::netns_available("crcsnorl") {
        skipped!("SKIPPED reload_adding_a_worker_leaves_the_master_alone: {why}");
        return;
    }
    let base = common::unique_name("snorl");
    let srv = common::Netns::new(format!("{base}s"));
    let cli = common::Netns::new(format!("{base}c"));
    let (ifs, ifc) = (
        format!("sr{}s", &base["snorl".len()..]),
        format!("sr{}c", &base["snorl".len()..]),
    );
    common::veth(&ifs, &srv, &ifc, &cli);
    srv.ip(&["link", "set", "lo", "up"]);
    srv.ip(&["addr", "add", "10.90.0.1/24", "dev", &ifs]);
    srv.ip(&["link", "set", &ifs, "up"]);
    cli.ip(&["link", "set", "dev", &ifc, "address", "52:54:00:5a:00:14"]);
    cli.ip(&["link", "set", &ifc, "up"]);

    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir_all(d.join("ign")).unwrap();
    std::fs::write(
        d.join("ign").join(BIP),
        br#"{"ignition":{"version":"3.2.0"}}"#,
    )
    .unwrap();
    std::fs::write(
        d.join("ign/worker.ign"),
        r#"{"ignition":{"version":"3.2.0","config":{"merge":[{"source":"https://api-int.sno.crc.testing:22623/config/worker"}]}}}"#,
    )
    .unwrap();
    for f in ["vmlinuz", "initrd.img", "rootfs.img"] {
        std::fs::write(d.join(f), f).unwrap();
    }
    let f = d.join("cluster.yaml");
    std::fs::write(&f, reload_yaml(d, &ifs, "")).unwrap();
    let app = InProc::in_netns(srv.name()).start_path(&f);
    let dig = |name: &str, t: &str| {
        let out = srv.exec(&[
            "dig",
            "@10.90.0.1",
            "+short",
            "+time=2",
            "+tries=2",
            name,
            t,
        ]);
        let mut v: Vec<String> = out.lines().map(str::to_string).collect();
        v.sort();
        v
    };
    let master_view = || {
        [
            ("master-0.sno.crc.testing.", "A"),
            ("api.sno.crc.testing.", "A"),
            ("api-int.sno.crc.testing.", "A"),
            ("anything.apps.sno.crc.testing.", "A"),
            ("10.0.90.10.in-addr.arpa.", "PTR"),
            ("etcd-0.sno.crc.testing.", "A"),
        ]
        .map(|(n, t)| (n, dig(n, t)))
    };
    let before = master_view();
    assert_eq!(before[1].1, ["10.90.0.10"], "{before:?}");
    assert_eq!(before[3].1, ["10.90.0.10"], "{before:?}");
    assert!(dig("worker-0.sno.crc.testing.", "A").is_empty());
    let script = |mac: &str| {
        srv.exec(&[
            "curl",
            "-sS",
            &format!("http://10.90.0.1:8080/boot/{mac}.ipxe"),
        ])
    };
    let master_script = script("52-54-00-5a-00-0a");
    assert!(
        master_script.contains("ignition.config.url=") && !master_script.contains("coreos.inst."),
        "{master_script}"
    );

    std::fs::write(
        &f,
        reload_yaml(
            d,
            &ifs,
            "  - { name: worker-0, role: worker, mac: \"52:54:00:5a:00:14\", ip: 10.90.0.20 }\n",
        ),
    )
    .unwrap();
    let outcome = app.reload();
    assert!(outcome.ok, "{outcome:?}");
    common::wait_until("worker-0 in DNS", Duration::from_secs(10), || {
        dig("worker-0.sno.crc.testing.", "A") == ["10.90.0.20"]
    });
    assert_eq!(master_view(), before, "the master's records changed");
    assert_eq!(
        dig("20.0.90.10.in-addr.arpa.", "PTR"),
        ["worker-0.sno.crc.testing."]
    );
    // DHCP: the worker's reservation.
    let lease = common::udhcpc::udhcpc_once(&cli, &ifc, d, "5").expect("no lease for worker-0");
    assert_eq!(
        common::udhcpc::kv(&lease, "ip").as_deref(),
        Some("10.90.0.20"),
        "{lease}"
    );
    assert_eq!(
        common::udhcpc::kv(&lease, "hostname").as_deref(),
        Some("worker-0"),
        "{lease}"
    );
    // Boot: the worker installs with worker.ign (its hostname merged in).
    let w = script("52-54-00-5a-00-14");
    assert!(
        w.contains("coreos.inst.ignition_url=http://10.90.0.1:8080/ignition/worker-0.ign")
            && w.contains("(worker)"),
        "{w}"
    );
    let ign = srv.exec(&["curl", "-sS", "http://10.90.0.1:8080/ignition/worker-0.ign"]);
    assert!(
        ign.contains("config/worker") && ign.contains("worker-0.sno.crc.testing"),
        "{ign}"
    );
    assert_eq!(script("52-54-00-5a-00-0a"), master_script);
}

/// A bootstrap-in-place file written 21 h ago: `preflight` warns with the
/// command, `/status` shows its age and the timeline's hint (what the page,
/// `status` and `wait-for` show).
#[test]
fn an_old_bootstrap_in_place_file_is_reported() {
    require_tools!("touch");
    let (dir, f) = setup(
        true,
        "",
        "http:\n  listen: 127.0.0.1:0\n  ignitionDir: {dir}/ign\n",
    );
    let text = std::fs::read_to_string(&f)
        .unwrap()
        .replace("{dir}", &dir.path().display().to_string());
    std::fs::write(&f, text).unwrap();
    let bip = dir.path().join("ign").join(BIP);
    run_ok("touch", &["-d", "21 hours ago", bip.to_str().unwrap()]);
    let (code, out, err) = run(BIN, &["preflight", "--cluster", f.to_str().unwrap()]);
    assert_ne!(code, 0, "{out}{err}");
    assert!(
        out.contains("written 21 h ago")
            && out.contains("openshift-install create single-node-ignition-config"),
        "{out}{err}"
    );
    let app = InProc::start_file(dir, f);
    let mut st = app.status();
    common::wait_until("the hint in /status", Duration::from_secs(15), || {
        st = app.status();
        let hints = st.timeline.as_ref().map(|t| t.hints.as_slice());
        hints
            .unwrap_or_default()
            .iter()
            .any(|h| h.message.contains("written 21 h ago"))
    });
    let http = st.http.as_ref().expect("an http section");
    let age = http.bootstrap_in_place_age.unwrap_or(0);
    assert!((21 * 3600..22 * 3600).contains(&age), "{age}: {st:#?}");
    drop(app);
}
