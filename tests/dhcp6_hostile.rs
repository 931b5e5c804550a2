//! DHCPv6 against a hostile host on the node's link (issue #40 items 4
//! and 6).
//!
//! Three network namespaces: the appliance's (it runs in-process inside
//! it, `InProc::in_netns`), holding a bridge (the cluster link,
//! fd00:234::1/64, `network.interface`), master-0's (a real
//! `dhclient -6` with master-0's MAC) and a hostile host's (its own MAC),
//! each joined to the bridge by a veth pair. The hostile host is
//! `tests/dhcp6_hostile/attacker.py` (raw DHCPv6 over a UDP socket, to
//! ff02::1:2 on its link only). What is checked:
//! - the hostile host's claim of master-0's MAC (a DUID-LL carrying it)
//!   and its Relay-Forward with option 79 = master-0's MAC (it is no
//!   configured relay) get nothing;
//! - master-0 gets its reserved address, and keeps getting it after the
//!   hostile host replays master-0's DUID and IAID in a Decline;
//! - a churn of new DUIDs writes a bounded number of info lines;
//! - a Request with 400 IA_NAs gets a reply smaller than the request.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::inproc::InProc;
use common::{Netns, unique_name, veth};

const M0_MAC: &str = "52:54:00:e7:00:0a";
const M0_V6: &str = "fd00:234::10";
const ATTACKER_MAC: &str = "52:54:00:e7:66:01";
const SCRIPT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/dhcp6_hostile/attacker.py"
);

/// A child process killed (by its PID) on drop.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The appliance's namespace with the bridge, master-0's and the hostile
/// host's, each on a port of the bridge.
struct Link {
    srv: Netns,
    node: Netns,
    att: Netns,
    br: String,
    ifn: String,
    ifa: String,
    dir: tempfile::TempDir,
}

/// Bring `ifname` up in `ns` without duplicate address detection, with
/// an optional MAC and addresses.
fn up(ns: &Netns, ifname: &str, mac: Option<&str>, addrs: &[&str]) {
    ns.exec(&[
        "sysctl",
        "-q",
        "-w",
        &format!("net.ipv6.conf.{ifname}.accept_dad=0"),
    ]);
    if let Some(m) = mac {
        ns.ip(&["link", "set", "dev", ifname, "address", m]);
    }
    for a in addrs {
        ns.ip(&["addr", "add", a, "dev", ifname, "nodad"]);
    }
    ns.ip(&["link", "set", ifname, "up"]);
}

/// Wait for one settled, non-tentative link-local address on `ifname`.
fn wait_link_local(ns: &Netns, ifname: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut last = String::new();
    loop {
        let out = ns.exec(&["ip", "-6", "addr", "show", "dev", ifname, "scope", "link"]);
        let ready = out.contains("fe80::") && !out.contains("tentative");
        if ready && out == last {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "no link-local on {ifname}: {out}"
        );
        last = if ready { out } else { String::new() };
        std::thread::sleep(Duration::from_millis(200));
    }
}

impl Link {
    fn new() -> Link {
        let base = unique_name("h6");
        let tag = &base["h6".len()..];
        let l = Link {
            srv: Netns::new(format!("{base}s")),
            node: Netns::new(format!("{base}n")),
            att: Netns::new(format!("{base}a")),
            br: format!("h6{tag}b"),
            ifn: format!("h6{tag}n"),
            ifa: format!("h6{tag}a"),
            dir: tempfile::tempdir().unwrap(),
        };
        l.srv.ip(&[
            "link",
            "add",
            &l.br,
            "type",
            "bridge",
            "mcast_snooping",
            "0",
            "forward_delay",
            "0",
        ]);
        up(&l.srv, &l.br, None, &["fd00:234::1/64"]);
        for (ifc, ns, mac) in [(&l.ifn, &l.node, M0_MAC), (&l.ifa, &l.att, ATTACKER_MAC)] {
            let port = format!("{ifc}p");
            veth(ifc, ns, &port, &l.srv);
            l.srv.ip(&["link", "set", &port, "master", &l.br]);
            l.srv.ip(&["link", "set", &port, "up"]);
            up(ns, ifc, Some(mac), &[]);
        }
        wait_link_local(&l.node, &l.ifn);
        wait_link_local(&l.att, &l.ifa);
        wait_link_local(&l.srv, &l.br);
        l
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn start(&self) -> InProc {
        let text = format!(
            r#"name: lab6h
baseDomain: v6.test
network:
  cidr: 10.234.0.0/24
  gateway: 10.234.0.254
  applianceIP: 10.234.0.1
  interface: {br}
  ipv6:
    cidr: fd00:234::/64
    applianceIP: fd00:234::1
nodes:
  - {{ name: master-0, role: master, mac: "{M0_MAC}", ip: 10.234.0.10, ipv6: "{M0_V6}" }}
  - {{ name: worker-0, role: worker, mac: "52:54:00:e7:00:14", ip: 10.234.0.20, ipv6: "fd00:234::20" }}
dns:
  enabled: false
dhcp:
  leaseTime: 10m
  leaseFile: "{dir}/leases.json"
loadBalancer:
  enabled: false
http:
  enabled: false
admin:
  listen: 127.0.0.1:0
"#,
            br = self.br,
            dir = self.dir.path().display()
        );
        let p = self.path("cluster.yaml");
        std::fs::write(&p, text).unwrap();
        InProc::in_netns(self.srv.name()).start_path(&p)
    }

    /// Run the attacker script in `ns` on `ifname`: its one output line.
    fn script(&self, ns: &Netns, ifname: &str, args: &[&str]) -> String {
        let mut a = vec!["timeout", "60", "python3", SCRIPT, ifname];
        a.extend_from_slice(args);
        ns.exec(&a).trim().to_string()
    }

    fn attacker(&self, args: &[&str]) -> String {
        self.script(&self.att, &self.ifa, args)
    }

    /// master-0's dhclient -6 with DUID-LL of its MAC until it binds or
    /// `secs` pass: the address it got.
    fn master0_dhclient(&self, secs: u64) -> Option<String> {
        let n = unique_name("x");
        let (leases, env, script) = (
            self.path(&format!("{n}.leases")),
            self.path(&format!("{n}.env")),
            self.path(&format!("{n}.sh")),
        );
        let octal: String = duid_ll(M0_MAC)
            .iter()
            .map(|b| format!("\\{b:03o}"))
            .collect();
        std::fs::write(&leases, format!("default-duid \"{octal}\";\n")).unwrap();
        std::fs::write(
            &script,
            format!(
                "#!/bin/sh\ncase \"$reason\" in BOUND6|REBOOT6) env > {}.tmp && mv {0}.tmp {0};; esac\nexit 0\n",
                env.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let pid = self.path(&format!("{n}.pid"));
        let child = Killed(
            self.node
                .cmd(&[
                    "dhclient",
                    "-6",
                    "-d",
                    "-1",
                    "-lf",
                    leases.to_str().unwrap(),
                    "-pf",
                    pid.to_str().unwrap(),
                    "-sf",
                    script.to_str().unwrap(),
                    &self.ifn,
                ])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start dhclient"),
        );
        let got = wait_file(&env, Duration::from_secs(secs));
        drop(child);
        got?.lines()
            .find_map(|l| l.strip_prefix("new_ip6_address="))
            .map(str::to_string)
    }

    /// master-0's IAID in the binding file, once its DUID-LL is bound.
    fn master0_iaid(&self) -> u32 {
        let hex: String = duid_ll(M0_MAC).iter().map(|b| format!("{b:02x}")).collect();
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let text = std::fs::read_to_string(self.path("leases-v6.json")).unwrap_or_default();
            if let Ok(doc) = serde_json::from_str::<serde_json::Value>(&text)
                && let Some(b) = doc["bindings"]
                    .as_array()
                    .and_then(|v| v.iter().find(|b| b["duid"] == hex.as_str()))
            {
                return u32::try_from(b["iaid"].as_u64().unwrap()).unwrap();
            }
            assert!(Instant::now() < deadline, "no binding of {hex}: {text}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

fn duid_ll(mac: &str) -> Vec<u8> {
    let mut d = vec![0, 3, 0, 1];
    d.extend(mac.split(':').map(|h| u8::from_str_radix(h, 16).unwrap()));
    d
}

fn wait_file(p: &Path, timeout: Duration) -> Option<String> {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if let Ok(s) = std::fs::read_to_string(p) {
            return Some(s);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    None
}

#[test]
fn another_host_cannot_take_or_decline_master0s_reserved_address() {
    require_netns!("h6");
    require_tools!("dhclient", "python3");
    let link = Link::new();
    let app = link.start();
    // The hostile host claims master-0's MAC, directly and as a relay.
    assert_eq!(link.attacker(&["claim", M0_MAC]), "claim: none");
    assert_eq!(link.attacker(&["relay", M0_MAC]), "relay: none");
    app.wait_log("is not a configured relay", Duration::from_secs(5));
    // master-0 gets its address.
    let got = link.master0_dhclient(20);
    assert_eq!(got.as_deref(), Some(M0_V6), "server:\n{}", app.log());
    // Recognised by its frames' Ethernet source (the packet socket).
    app.wait_log(
        &format!("mac={M0_MAC} mac_from=frame source hostname=master-0"),
        Duration::from_secs(5),
    );
    // The hostile host replays master-0's DUID and IAID in a Decline.
    let iaid = link.master0_iaid().to_string();
    let out = link.attacker(&["decline", M0_MAC, &iaid, M0_V6]);
    assert_eq!(out, "decline: reply");
    app.wait_log("decline not applied", Duration::from_secs(5));
    // master-0 is not locked out.
    let got = link.master0_dhclient(20);
    assert_eq!(got.as_deref(), Some(M0_V6), "server:\n{}", app.log());
}

#[test]
fn a_churn_of_new_duids_writes_a_bounded_number_of_lines() {
    require_netns!("h6");
    require_tools!("python3");
    let link = Link::new();
    let app = link.start();
    // master-0 itself (its frames carry its MAC), a new DUID per Solicit.
    let out = link.script(&link.node, &link.ifn, &["churn", M0_MAC, "300"]);
    let replies: usize = out
        .split_whitespace()
        .nth(3)
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(replies >= 250, "{out}\nserver:\n{}", app.log());
    let lines = app
        .log()
        .lines()
        .filter(|l| l.contains("duid=0001"))
        .count();
    assert!(
        (1..=10).contains(&lines),
        "{lines} new-binding lines for {replies} new DUIDs:\n{}",
        app.log()
    );
}

#[test]
fn a_request_with_400_ias_gets_a_reply_smaller_than_the_request() {
    require_netns!("h6");
    require_tools!("python3");
    let link = Link::new();
    let _app = link.start();
    let out = link.attacker(&["amp", "400"]);
    let n: Vec<usize> = out
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    let [request, reply] = n[..] else {
        panic!("{out}")
    };
    assert!(reply > 0 && reply < request, "{out}");
}
