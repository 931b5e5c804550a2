//! DHCP through a real relay agent (ISC dhcrelay) to a remote segment.
//!
//! Three network namespaces joined by veth pairs, every address inside
//! them: a client namespace (10.232.0.0/24, the relayed segment) — a router
//! namespace running dhcrelay, with IP forwarding on — the server namespace
//! (10.231.0.0/24, `network.cidr`) where the appliance, in-process inside
//! that namespace (`InProc::in_netns`), listens on its veth end.
//! A second client namespace sits on 10.233.0.0/24, which the cluster file
//! does not list: its requests are dropped with a warning. Needs root,
//! iproute2, dhcrelay (isc-dhcp-relay) and udhcpc; prints `SKIPPED`
//! otherwise.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::{Child, Stdio};
use std::time::Duration;

use common::inproc::InProc;
use common::udhcpc::{kv, udhcpc_once};
use common::{Netns, unique_name, veth};

const W1_MAC: &str = "52:54:00:e8:00:15";
const OTHER_MAC: &str = "52:54:00:e8:00:16";

/// One interface: optional MAC, optional address, up.
fn up(ns: &Netns, ifname: &str, mac: Option<&str>, addr: Option<&str>) {
    if let Some(m) = mac {
        ns.ip(&["link", "set", "dev", ifname, "address", m]);
    }
    if let Some(a) = addr {
        ns.ip(&["addr", "add", a, "dev", ifname]);
    }
    ns.ip(&["link", "set", ifname, "up"]);
}

/// A child process killed (by its PID) on drop.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn relayed_node_gets_its_segment_settings_and_an_unknown_segment_is_dropped() {
    require_netns!("dhr");
    require_tools!("udhcpc", "dhcrelay");
    let base = unique_name("dhr");
    let tag = &base["dhr".len()..];
    // Namespaces: clients first, so they go first on drop.
    let cli = Netns::new(format!("{base}c"));
    let cli2 = Netns::new(format!("{base}d"));
    let rtr = Netns::new(format!("{base}r"));
    let srv = Netns::new(format!("{base}s"));
    let (ifs, ifrs) = (format!("dr{tag}s"), format!("dr{tag}rs"));
    let (ifc, ifrc) = (format!("dr{tag}c"), format!("dr{tag}rc"));
    let (ifd, ifrd) = (format!("dr{tag}d"), format!("dr{tag}rd"));
    veth(&ifs, &srv, &ifrs, &rtr);
    veth(&ifc, &cli, &ifrc, &rtr);
    veth(&ifd, &cli2, &ifrd, &rtr);
    up(&srv, &ifs, None, Some("10.231.0.1/24"));
    up(&rtr, &ifrs, None, Some("10.231.0.254/24"));
    up(&rtr, &ifrc, None, Some("10.232.0.1/24"));
    up(&rtr, &ifrd, None, Some("10.233.0.1/24"));
    up(&cli, &ifc, Some(W1_MAC), None);
    up(&cli2, &ifd, Some(OTHER_MAC), None);
    srv.ip(&["route", "add", "10.232.0.0/15", "via", "10.231.0.254"]);
    rtr.exec(&["sysctl", "-q", "-w", "net.ipv4.ip_forward=1"]);

    let dir = tempfile::tempdir().unwrap();
    let cluster = dir.path().join("cluster.yaml");
    std::fs::write(
        &cluster,
        format!(
            r#"name: lab
baseDomain: relay.test
network:
  cidr: 10.231.0.0/24
  gateway: 10.231.0.254
  applianceIP: 10.231.0.1
  interface: {ifs}
nodes:
  - {{ name: master-0, role: master, mac: "52:54:00:e8:00:0a", ip: 10.231.0.10 }}
  - {{ name: worker-1, role: worker, mac: "{W1_MAC}", ip: 10.232.0.21 }}
dns:
  enabled: false
dhcp:
  listen: 0.0.0.0:67
  leaseTime: 10m
  leaseFile: "{dir}/leases.json"
  segments:
    - {{ cidr: 10.232.0.0/24, gateway: 10.232.0.1 }}
loadBalancer:
  enabled: false
http:
  enabled: false
admin:
  listen: 127.0.0.1:0
"#,
            dir = dir.path().display()
        ),
    )
    .unwrap();
    let app = InProc::in_netns(srv.name()).start_path(&cluster);
    let relay = Killed(
        rtr.cmd(&[
            "dhcrelay",
            "-4",
            "-d",
            "--no-pid",
            "-id",
            &ifrc,
            "-id",
            &ifrd,
            "-iu",
            &ifrs,
            "10.231.0.1",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start dhcrelay"),
    );
    // dhcrelay needs a moment to open its sockets.
    std::thread::sleep(Duration::from_millis(500));

    let env = udhcpc_once(&cli, &ifc, dir.path(), "6").unwrap_or_else(|| {
        panic!(
            "udhcpc behind the relay got no lease; server:\n{}",
            app.log()
        )
    });
    for (k, v) in [
        ("ip", "10.232.0.21"),
        ("hostname", "worker-1"),
        ("router", "10.232.0.1"),
        ("subnet", "255.255.255.0"),
        ("broadcast", "10.232.0.255"),
        ("dns", "10.231.0.1"),
        ("serverid", "10.231.0.1"),
    ] {
        assert_eq!(kv(&env, k).as_deref(), Some(v), "{k}: {env}\n{}", app.log());
    }

    // The segment 10.233.0.0/24 is not in the cluster file: no lease, and a
    // warning at the default level.
    assert!(
        udhcpc_once(&cli2, &ifd, dir.path(), "2").is_none(),
        "a client on an unknown segment got a lease"
    );
    app.wait_log("no address range available", Duration::from_secs(5));
    assert!(
        app.log()
            .contains("relayed from 10.233.0.1, not in network.cidr 10.231.0.0/24"),
        "{}",
        app.log()
    );
    drop(relay);
}
