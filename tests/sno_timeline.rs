//! The single-node install timeline end to end, with fake node endpoints
//! as `tests/timeline.rs` uses them: the appliance in a "lab" namespace,
//! the node in a second one joined by a veth pair; the node fetches its
//! bootstrap-in-place Ignition with curl from its own address and serves
//! TLS health endpoints with `openssl s_server`. Once with the load
//! balancer on (`loadBalancer.enabled: true`): its health checks of the
//! master are the evidence; once with it off (the single-node default):
//! the timeline's own single-node prober checks the master. Either way:
//! API up (bootstrapping), down (disk written, reboot: the install end), up
//! again (bootstrap-complete), ingress up (ingress-ready; `wait-for
//! install-complete` returns 0, and times out before).
//! The appliance runs in-process inside its namespace (`InProc::in_netns`);
//! the timeline is read from the typed status document (`TimelineStatus`);
//! `wait-for install-complete` is the binary's command, run in the
//! namespace against the admin API.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::inproc::InProc;
use common::{BIN, Netns, unique_name};
use crc_appliance::timeline::status::{ClusterPhase, NodeTimeline, TimelineStatus};

const APPLIANCE: &str = "10.233.0.1";
const NODE: &str = "10.233.0.10";
/// Backend ports on the node (api, machine-config, ingress http, https).
const BACKENDS: [u16; 4] = [16443, 18623, 10080, 10443];

struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn cluster(dir: &Path, ifs: &str, admin: u16, lb: bool) -> std::path::PathBuf {
    let d = dir.display();
    let [api, mc, http, https] = BACKENDS;
    let frontends = if lb {
        format!(
            "  enabled: true\n  listen: {{ api: \"{APPLIANCE}:6443\", machineConfig: \"{APPLIANCE}:22623\", ingressHttp: \"{APPLIANCE}:80\", ingressHttps: \"{APPLIANCE}:443\" }}\n"
        )
    } else {
        String::new()
    };
    let text = format!(
        r#"name: sno
baseDomain: crc.testing
network:
  cidr: 10.233.0.0/24
  gateway: 10.233.0.254
  applianceIP: {APPLIANCE}
  interface: {ifs}
nodes:
  - {{ name: master-0, role: master, mac: "52:54:00:e9:00:0a", ip: {NODE} }}
dns:
  enabled: false
dhcp:
  enabled: false
  leaseFile: "{d}/leases.json"
loadBalancer:
{frontends}  backendPorts: {{ api: {api}, machineConfig: {mc}, ingressHttp: {http}, ingressHttps: {https} }}
  healthCheck: {{ interval: 300ms, timeout: 300ms, rise: 1, fall: 2 }}
http:
  listen: {APPLIANCE}:8080
  imagesDir: "{d}/images"
  ignitionDir: "{d}/ignition"
admin:
  listen: 127.0.0.1:{admin}
"#
    );
    let f = dir.join("cluster.yaml");
    std::fs::write(&f, text).unwrap();
    f
}

#[test]
fn a_single_node_install_goes_live_bootstrap_reboot_api_ingress() {
    require_netns!("sntl");
    require_tools!("curl", "openssl");
    drive(true);
}

/// The single-node default: no load balancer; the timeline's own prober
/// checks the node's 6443/readyz and ingress.
#[test]
fn without_the_load_balancer_the_prober_drives_the_single_node_phases() {
    require_netns!("sntl");
    require_tools!("curl", "openssl");
    drive(false);
}

fn drive(lb: bool) {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir_all(d.join("images")).unwrap();
    std::fs::create_dir_all(d.join("ignition")).unwrap();
    std::fs::write(
        d.join("ignition/bootstrap-in-place-for-live-iso.ign"),
        r#"{"ignition":{"version":"3.2.0"}}"#,
    )
    .unwrap();
    common::self_signed_cert(&d.join("cert.pem"), &d.join("key.pem"), "sno");
    let base = unique_name("sntl");
    let (ifs, ifc) = (format!("{base}s"), format!("{base}c"));
    let srv = Netns::new(format!("{base}srv"));
    let nodes = Netns::new(format!("{base}nod"));
    common::veth(&ifs, &srv, &ifc, &nodes);
    srv.ip(&["link", "set", "lo", "up"]);
    srv.ip(&["addr", "add", &format!("{APPLIANCE}/24"), "dev", &ifs]);
    srv.ip(&["link", "set", &ifs, "up"]);
    nodes.ip(&["link", "set", "lo", "up"]);
    nodes.ip(&["addr", "add", &format!("{NODE}/24"), "dev", &ifc]);
    nodes.ip(&["link", "set", &ifc, "up"]);
    let admin = common::free_port();
    let f = cluster(d, &ifs, admin, lb);
    let app = InProc::in_netns(srv.name()).start_path(&f);

    let status = || -> TimelineStatus { app.status().timeline.unwrap_or_default() };
    let wait = |what: &str, pred: &dyn Fn(&TimelineStatus) -> bool| -> TimelineStatus {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let v = status();
            if pred(&v) {
                return v;
            }
            assert!(
                Instant::now() < deadline,
                "{what}: {v:#?}\nappliance:\n{}",
                app.log()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    };
    let phase = |v: &TimelineStatus| v.phase;
    let master =
        |v: &TimelineStatus| -> NodeTimeline { v.nodes.first().cloned().unwrap_or_default() };
    let backend = |port: u16| {
        Proc(
            nodes
                .cmd(&[
                    "openssl",
                    "s_server",
                    "-quiet",
                    "-www",
                    "-accept",
                    &format!("{NODE}:{port}"),
                    "-cert",
                    d.join("cert.pem").to_str().unwrap(),
                    "-key",
                    d.join("key.pem").to_str().unwrap(),
                ])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        )
    };

    // Live boot: the node fetches its bootstrap-in-place Ignition.
    let code = nodes.exec(&[
        "curl",
        "-s",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        "--interface",
        NODE,
        &format!("http://{APPLIANCE}:8080/ignition/master-0.ign"),
    ]);
    assert_eq!(code, "200");
    let v = wait("the ignition step", &|v| master(v).ignition.is_some());
    assert_eq!(phase(&v), ClusterPhase::Provisioning);

    // The bootstrap control plane on the live system.
    let api = backend(BACKENDS[0]);
    let v = wait("bootstrapping", &|v| {
        phase(v) == ClusterPhase::Bootstrapping
    });
    assert!(master(&v).install_finished.is_none(), "{v:#?}");
    // Disk written, reboot: the API goes away.
    drop(api);
    let v = wait("the reboot", &|v| master(v).install_finished.is_some());
    assert_eq!(phase(&v), ClusterPhase::Bootstrapping);
    // wait-for install-complete times out meanwhile.
    let out = srv
        .cmd(&[
            BIN,
            "wait-for",
            "install-complete",
            "--timeout",
            "1s",
            "--cluster",
            f.to_str().unwrap(),
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0), "{out:?}");
    // The node's own API from its disk, then its ingress.
    let _api = backend(BACKENDS[0]);
    let v = wait("bootstrap-complete", &|v| {
        phase(v) == ClusterPhase::BootstrapComplete
    });
    assert!(master(&v).first_boot.is_some(), "{v:#?}");
    let _http = backend(BACKENDS[2]);
    let _https = backend(BACKENDS[3]);
    let v = wait("ingress-ready", &|v| phase(v) == ClusterPhase::IngressReady);
    assert!(!v.phase_times.contains_key("bootstrap-removed"), "{v:#?}");
    let out = srv
        .cmd(&[
            BIN,
            "wait-for",
            "install-complete",
            "--timeout",
            "20s",
            "--cluster",
            f.to_str().unwrap(),
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
}
