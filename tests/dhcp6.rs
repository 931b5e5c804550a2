//! DHCPv6 and router advertisements end to end with real clients.
//!
//! Network-namespace tests (root + `ip netns`): the appliance runs
//! in-process inside a server namespace (`InProc::in_netns`: the network
//! is the point, not the process), bound to one end of a veth pair
//! (fd00:231::1/64 and 10.231.0.1/24, addresses that exist only in the
//! namespaces); clients run
//! in a client namespace on the other end with the MAC of a node:
//! - dhclient -6 and dhcpcd -6 each get the node's reserved address, and
//!   again when restarted with another DUID for the same MAC (DUID-LLT with
//!   another time, then DUID-LL); an unknown MAC gets nothing and the log
//!   says why;
//! - a Solicit relayed by ISC `dhcrelay -6` (listed in `dhcp.relays`) from
//!   a router namespace is answered from the reservation;
//! - `rdisc6` and `radvdump` read the appliance's router advertisement:
//!   M=1, O=1, the prefix with A=0;
//! - a v4-only cluster file starts no DHCPv6 service.
//!
//! NetworkManager (1.42, its internal DHCPv6 client, as RHCOS uses) runs
//! in the client namespace from the package extracted by
//! scripts/prereqs.sh (installing it would take over the host's network),
//! on a private dbus-daemon, in a private mount namespace (tmpfs over its
//! state directories; /sys read-only so that it does not wait for udev),
//! managing only the test interface, with a keyfile profile
//! `ipv6.method=dhcp`, `ipv6.dhcp-duid=<DUID>`, `ipv6.dhcp-iaid=mac`.
//! dhcpcd keeps its DUID and leases under /var/lib/dhcpcd,
//! so it runs in a private mount namespace with a tmpfs there holding the
//! DUID the test chooses.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::inproc::InProc;
use common::{Netns, run_ok, unique_name, veth};

const M0_MAC: &str = "52:54:00:e6:00:0a";
const M0_V6: &str = "fd00:231::10";
const W0_MAC: &str = "52:54:00:e6:00:14";
const W0_V6: &str = "fd00:231::20";
const UNKNOWN_MAC: &str = "52:54:00:e6:99:01";
const W1_MAC: &str = "52:54:00:e6:00:15";
const W1_V6: &str = "fd00:231::21";
/// NetworkManager as scripts/prereqs.sh extracts it.
const NM: &str = "/var/cache/crc-appliance-tests/extract/network-manager/usr/sbin/NetworkManager";

/// A child process killed (by its PID) on drop.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Bring `ifname` up in `ns` without duplicate address detection (the
/// addresses are usable at once), with an optional MAC and address.
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
        let mut args = vec!["addr", "add", a, "dev", ifname];
        if a.contains(':') {
            args.push("nodad");
        }
        ns.ip(&args);
    }
    ns.ip(&["link", "set", ifname, "up"]);
}

/// The link-local address comes with the link (clients and dhcrelay need
/// it): wait for it.
fn wait_link_local(ns: &Netns, ifname: &str) {
    // The same single non-tentative link-local address twice, 200 ms apart
    // (a mode change can replace it right after the link comes up).
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
            "no settled link-local address on {ifname}: {out}"
        );
        last = if ready { out } else { String::new() };
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Server and client namespaces joined by a veth pair.
struct Lab {
    cli: Netns,
    srv: Netns,
    ifs: String,
    ifc: String,
    dir: tempfile::TempDir,
}

impl Lab {
    fn new(client_mac: &str) -> Lab {
        let base = unique_name("d6");
        let tag = &base["d6".len()..];
        let lab = Lab {
            cli: Netns::new(format!("{base}c")),
            srv: Netns::new(format!("{base}s")),
            ifs: format!("d6{tag}s"),
            ifc: format!("d6{tag}c"),
            dir: tempfile::tempdir().unwrap(),
        };
        veth(&lab.ifs, &lab.srv, &lab.ifc, &lab.cli);
        up(
            &lab.srv,
            &lab.ifs,
            None,
            &["10.231.0.1/24", "fd00:231::1/64"],
        );
        lab.set_mac(client_mac);
        lab
    }

    fn set_mac(&self, mac: &str) {
        self.cli.ip(&["link", "set", &self.ifc, "down"]);
        up(&self.cli, &self.ifc, Some(mac), &[]);
        wait_link_local(&self.cli, &self.ifc);
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The cluster file (`ra`: router advertisements on; `v6`: with
    /// `network.ipv6` at all).
    fn cluster(&self, ra: bool, v6: bool) -> PathBuf {
        let ipv6 = if v6 {
            format!(
                "  ipv6:\n    cidr: fd00:231::/64\n    applianceIP: fd00:231::1\n    routerAdvertisements: {ra}\n"
            )
        } else {
            String::new()
        };
        let node_v6 = |a: &str| {
            if v6 {
                format!(", ipv6: \"{a}\"")
            } else {
                String::new()
            }
        };
        let text = format!(
            r#"name: lab6
baseDomain: v6.test
network:
  cidr: 10.231.0.0/24
  gateway: 10.231.0.254
  applianceIP: 10.231.0.1
  interface: {ifs}
{ipv6}nodes:
  - {{ name: master-0, role: master, mac: "{M0_MAC}", ip: 10.231.0.10{m0} }}
  - {{ name: worker-0, role: worker, mac: "{W0_MAC}", ip: 10.231.0.20{w0} }}
  - {{ name: worker-1, role: worker, mac: "{W1_MAC}", ip: 10.231.0.21{w1} }}
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
            ifs = self.ifs,
            m0 = node_v6(M0_V6),
            w0 = node_v6(W0_V6),
            w1 = node_v6(W1_V6),
            dir = self.dir.path().display()
        );
        let p = self.path("cluster.yaml");
        std::fs::write(&p, text).unwrap();
        p
    }

    fn start(&self, cluster: &Path) -> InProc {
        InProc::in_netns(self.srv.name())
            .log_filter("info,crc_appliance::services::dhcp6=debug")
            .start_path(cluster)
    }

    /// dhclient -6 with `duid` (None: DUID-LL made by dhclient) until it
    /// binds or `secs` pass: its script's environment on success.
    fn dhclient(&self, duid: Option<&[u8]>, secs: u64) -> Option<String> {
        let n = unique_name("x");
        let (leases, env, script) = (
            self.path(&format!("{n}.leases")),
            self.path(&format!("{n}.env")),
            self.path(&format!("{n}.sh")),
        );
        if let Some(d) = duid {
            let octal: String = d.iter().map(|b| format!("\\{b:03o}")).collect();
            std::fs::write(&leases, format!("default-duid \"{octal}\";\n")).unwrap();
        }
        write_script(
            &script,
            format!(
                "#!/bin/sh\ncase \"$reason\" in BOUND6|REBOOT6) env > {}.tmp && mv {0}.tmp {0};; esac\nexit 0\n",
                env.display()
            ),
        );
        let mut args = vec![
            "dhclient",
            "-6",
            "-d",
            "-1",
            "-lf",
            leases.to_str().unwrap(),
            "-pf",
        ];
        let pid = self.path(&format!("{n}.pid"));
        args.extend([pid.to_str().unwrap(), "-sf", script.to_str().unwrap()]);
        if duid.is_none() {
            args.extend(["-D", "LL"]);
        }
        args.push(&self.ifc);
        let child = Killed(
            self.cli
                .cmd(&args)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(self.path("dhclient.log")).unwrap())
                .spawn()
                .expect("start dhclient"),
        );
        let got = wait_file(&env, Duration::from_secs(secs));
        drop(child);
        got
    }

    /// dhcpcd -6 (one shot) with the DUID `duid` in a private
    /// /var/lib/dhcpcd: its script's environment on BOUND6.
    fn dhcpcd(&self, duid: &[u8], secs: u64) -> Option<String> {
        let n = unique_name("y");
        let (conf, env, script, duid_file) = (
            self.path(&format!("{n}.conf")),
            self.path(&format!("{n}.env")),
            self.path(&format!("{n}.sh")),
            self.path(&format!("{n}.duid")),
        );
        std::fs::write(
            &conf,
            "noipv6rs\nipv6only\nia_na 1\noption domain_name_servers, domain_search\n",
        )
        .unwrap();
        let hex: Vec<String> = duid.iter().map(|b| format!("{b:02x}")).collect();
        std::fs::write(&duid_file, hex.join(":") + "\n").unwrap();
        write_script(
            &script,
            format!(
                "#!/bin/sh\n[ \"$reason\" = BOUND6 ] && env > {}.tmp && mv {0}.tmp {0}\nexit 0\n",
                env.display()
            ),
        );
        let inner = format!(
            "mount -t tmpfs crc-test /var/lib/dhcpcd && cp {duid} /var/lib/dhcpcd/duid && exec timeout {secs} dhcpcd -6 -1 -B -t {t} -f {conf} -c {script} {ifc}",
            duid = duid_file.display(),
            t = secs.saturating_sub(2).max(1),
            conf = conf.display(),
            script = script.display(),
            ifc = self.ifc
        );
        let _ = quiet(self.cli.cmd(&["unshare", "-m", "sh", "-c", &inner])).status();
        std::fs::read_to_string(&env).ok()
    }
}

/// A process stopped with SIGTERM (then SIGKILL) on drop, by its PID.
struct Termed(Child);

impl Drop for Termed {
    fn drop(&mut self) {
        let _ = Command::new("kill").arg(self.0.id().to_string()).status();
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Lab {
    /// NetworkManager with `ipv6.dhcp-duid=<duid>` on the client interface
    /// until the interface has a global IPv6 address (or `secs` pass): that
    /// address.
    fn network_manager(&self, duid: &[u8], secs: u64) -> Option<String> {
        let n = unique_name("nm");
        let d = self.path(&n);
        std::fs::create_dir_all(d.join("connections")).unwrap();
        std::fs::write(
            d.join("bus.conf"),
            format!(
                r#"<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN" "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path={}/bus</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_destination="*"/>
    <allow receive_sender="*"/>
  </policy>
</busconfig>
"#,
                d.display()
            ),
        )
        .unwrap();
        std::fs::write(
            d.join("nm.conf"),
            format!(
                "[main]\nplugins=keyfile\ndhcp=internal\nauth-polkit=false\ndns=none\nrc-manager=unmanaged\nno-auto-default=*\n[keyfile]\npath={}/connections\nunmanaged-devices=except:interface-name:{}\n[logging]\nlevel=INFO\n",
                d.display(),
                self.ifc
            ),
        )
        .unwrap();
        let hex: Vec<String> = duid.iter().map(|b| format!("{b:02x}")).collect();
        let profile = d.join("connections/c6.nmconnection");
        std::fs::write(
            &profile,
            format!(
                "[connection]\nid=c6\ntype=ethernet\ninterface-name={}\n[ipv4]\nmethod=disabled\n[ipv6]\nmethod=dhcp\ndhcp-duid={}\ndhcp-iaid=mac\naddr-gen-mode=stable-privacy\n",
                self.ifc,
                hex.join(":")
            ),
        )
        .unwrap();
        run_ok("chmod", &["600", profile.to_str().unwrap()]);
        let bus = Termed(
            quiet({
                let mut c = Command::new("dbus-daemon");
                c.arg(format!("--config-file={}/bus.conf", d.display()))
                    .args(["--nofork", "--nopidfile"]);
                c
            })
            .spawn()
            .expect("start dbus-daemon"),
        );
        let deadline = Instant::now() + Duration::from_secs(5);
        while !d.join("bus").exists() {
            assert!(Instant::now() < deadline, "dbus-daemon made no socket");
            std::thread::sleep(Duration::from_millis(20));
        }
        let inner = format!(
            "mkdir -p /run/NetworkManager /var/lib/NetworkManager && mount -t tmpfs crc-test /run/NetworkManager && mount -t tmpfs crc-test /var/lib/NetworkManager && mount -o remount,ro /sys && DBUS_SYSTEM_BUS_ADDRESS=unix:path={d}/bus exec {NM} --no-daemon --config {d}/nm.conf --config-dir {d}/none --state-file {d}/nm.state",
            d = d.display()
        );
        let log = std::fs::File::create(d.join("nm.log")).unwrap();
        let nm = Termed(
            self.cli
                .cmd(&["unshare", "-m", "sh", "-c", &inner])
                .stdin(Stdio::null())
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .spawn()
                .expect("start NetworkManager"),
        );
        let deadline = Instant::now() + Duration::from_secs(secs);
        let mut got = None;
        while Instant::now() < deadline && got.is_none() {
            let out = self.cli.exec(&[
                "ip", "-6", "addr", "show", "dev", &self.ifc, "scope", "global",
            ]);
            got = out
                .split_whitespace()
                .skip_while(|w| *w != "inet6")
                .nth(1)
                .map(|a| a.split('/').next().unwrap_or("").to_string());
            std::thread::sleep(Duration::from_millis(100));
        }
        drop(nm);
        drop(bus);
        // The next client starts without this one's address.
        self.cli
            .ip(&["-6", "addr", "flush", "dev", &self.ifc, "scope", "global"]);
        got
    }
}

fn quiet(mut c: Command) -> Command {
    c.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    c
}

fn write_script(script: &Path, text: String) {
    std::fs::write(script, text).unwrap();
    run_ok("chmod", &["+x", script.to_str().unwrap()]);
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

/// `KEY=value` of an environment dump.
fn kv(env: &str, key: &str) -> Option<String> {
    env.lines()
        .find_map(|l| l.strip_prefix(&format!("{key}=")))
        .map(|v| v.trim_matches('\'').to_string())
}

fn mac_bytes(mac: &str) -> Vec<u8> {
    mac.split(':')
        .map(|h| u8::from_str_radix(h, 16).unwrap())
        .collect()
}

fn duid_llt(time: u32, mac: &str) -> Vec<u8> {
    let mut d = vec![0, 1, 0, 1];
    d.extend_from_slice(&time.to_be_bytes());
    d.extend(mac_bytes(mac));
    d
}

fn duid_ll(mac: &str) -> Vec<u8> {
    let mut d = vec![0, 3, 0, 1];
    d.extend(mac_bytes(mac));
    d
}

#[test]
fn dhclient_gets_the_reservation_under_every_duid_of_its_mac() {
    require_netns!("d6");
    require_tools!("dhclient");
    let lab = Lab::new(M0_MAC);
    let app = lab.start(&lab.cluster(false, true));
    for (what, duid) in [
        ("DUID-LLT", Some(duid_llt(0x1111_1111, M0_MAC))),
        (
            "DUID-LLT, another time",
            Some(duid_llt(0x2222_2222, M0_MAC)),
        ),
        ("DUID-LL", None),
    ] {
        let env = lab
            .dhclient(duid.as_deref(), 20)
            .unwrap_or_else(|| panic!("dhclient ({what}) got no address; server:\n{}", app.log()));
        assert_eq!(
            kv(&env, "new_ip6_address").as_deref(),
            Some(M0_V6),
            "{what}: {env}"
        );
        assert_eq!(
            kv(&env, "new_dhcp6_name_servers").as_deref(),
            Some("fd00:231::1"),
            "{env}"
        );
        assert!(
            kv(&env, "new_dhcp6_domain_search").is_some_and(|s| s.contains("lab6.v6.test")),
            "{env}"
        );
    }
    // One binding: each new DUID took the reserved address over.
    let text = std::fs::read_to_string(lab.path("leases-v6.json")).unwrap_or_default();
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut text = text;
    while !text.contains("000300015254") && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
        text = std::fs::read_to_string(lab.path("leases-v6.json")).unwrap_or_default();
    }
    assert_eq!(text.matches("\"addr\"").count(), 1, "{text}");
    assert!(
        text.contains("000300015254"),
        "the DUID-LL binding was persisted: {text}"
    );
}

#[test]
fn dhcpcd_gets_the_reservation_under_every_duid_of_its_mac() {
    require_netns!("d6");
    require_tools!("dhcpcd", "unshare");
    let lab = Lab::new(W0_MAC);
    let app = lab.start(&lab.cluster(false, true));
    for (what, duid) in [
        ("DUID-LLT", duid_llt(0x3333_3333, W0_MAC)),
        ("DUID-LLT, another time", duid_llt(0x4444_4444, W0_MAC)),
        ("DUID-LL", duid_ll(W0_MAC)),
    ] {
        let env = lab
            .dhcpcd(&duid, 20)
            .unwrap_or_else(|| panic!("dhcpcd ({what}) got no address; server:\n{}", app.log()));
        assert_eq!(
            kv(&env, "new_dhcp6_ia_na1_ia_addr1").as_deref(),
            Some(W0_V6),
            "{what}: {env}"
        );
        assert_eq!(
            kv(&env, "new_dhcp6_name_servers").as_deref(),
            Some("fd00:231::1"),
            "{env}"
        );
    }
}

#[test]
fn network_manager_gets_the_reservation_under_every_duid_of_its_mac() {
    require_netns!("d6");
    require_tools!("dbus-daemon", "unshare");
    if !Path::new(NM).exists() {
        skipped!(
            "SKIPPED {}: {NM} missing (scripts/prereqs.sh extracts network-manager)",
            module_path!()
        );
        return;
    }
    let lab = Lab::new(W1_MAC);
    let app = lab.start(&lab.cluster(false, true));
    for (what, duid) in [
        ("DUID-LLT", duid_llt(0x5555_5555, W1_MAC)),
        ("DUID-LLT, another time", duid_llt(0x6666_6666, W1_MAC)),
        ("DUID-LL", duid_ll(W1_MAC)),
    ] {
        let got = lab.network_manager(&duid, 20);
        assert_eq!(
            got.as_deref(),
            Some(W1_V6),
            "NetworkManager ({what}); server:\n{}",
            app.log()
        );
        // It sent the DUID of its profile, and the server bound it.
        let hex: String = duid.iter().map(|b| format!("{b:02x}")).collect();
        app.wait_log(&format!("duid={hex}"), Duration::from_secs(5));
    }
}

#[test]
fn an_unknown_mac_gets_nothing_and_the_log_says_why() {
    require_netns!("d6");
    require_tools!("dhclient");
    let lab = Lab::new(UNKNOWN_MAC);
    let app = lab.start(&lab.cluster(false, true));
    assert!(
        lab.dhclient(None, 5).is_none(),
        "an unknown MAC got an address"
    );
    app.wait_log("its MAC has no IPv6 reservation", Duration::from_secs(5));
    // An opaque DUID (DUID-EN) from a stable-privacy link-local address:
    // the frame's Ethernet source still names the (unknown) MAC.
    // (Changed with the link down: a change while it is up replaces the
    // link-local address under a starting client.)
    lab.cli.ip(&["link", "set", &lab.ifc, "down"]);
    lab.cli.exec(&[
        "sysctl",
        "-q",
        "-w",
        &format!("net.ipv6.conf.{}.addr_gen_mode=3", lab.ifc),
    ]);
    lab.set_mac(UNKNOWN_MAC);
    let en = [0u8, 2, 0, 0, 0x9, 0x99, 1, 2, 3, 4];
    assert!(lab.dhclient(Some(&en), 8).is_none());
    let log = app.log();
    if !log
        .lines()
        .any(|l| l.contains("DUID 00020000099901020304") && l.contains("no IPv6 reservation"))
    {
        panic!(
            "no refusal logged for the DUID-EN client; dhclient:\n{}\nlink:\n{}\nserver:\n{}",
            std::fs::read_to_string(lab.path("dhclient.log")).unwrap_or_default(),
            lab.cli.exec(&["ip", "-6", "addr", "show", "dev", &lab.ifc]),
            log
        );
    }
}

#[test]
fn a_relayed_solicit_is_answered_from_the_reservation() {
    require_netns!("d6");
    require_tools!("dhclient", "dhcrelay");
    let base = unique_name("d6r");
    let tag = &base["d6r".len()..];
    let cli = Netns::new(format!("{base}c"));
    let rtr = Netns::new(format!("{base}r"));
    let lab = Lab::new(UNKNOWN_MAC);
    let (ifc, ifrc) = (format!("r6{tag}c"), format!("r6{tag}rc"));
    let (ifru, ifs2) = (format!("r6{tag}ru"), format!("r6{tag}s"));
    veth(&ifc, &cli, &ifrc, &rtr);
    veth(&ifru, &rtr, &ifs2, &lab.srv);
    // Router ↔ appliance on a link of their own (fd00:233::/64).
    up(&rtr, &ifru, None, &["fd00:233::fe/64"]);
    up(&rtr, &ifrc, None, &["fd00:232::1/64"]);
    up(&cli, &ifc, Some(M0_MAC), &[]);
    // The appliance's second link to the router; the cluster interface stays.
    up(&lab.srv, &ifs2, None, &["fd00:233::1/64"]);
    rtr.exec(&["sysctl", "-q", "-w", "net.ipv6.conf.all.forwarding=1"]);
    wait_link_local(&cli, &ifc);
    wait_link_local(&rtr, &ifrc);
    let mut cluster = std::fs::read_to_string(lab.cluster(false, true)).unwrap();
    // Listen on every interface of the server namespace (the relay reaches
    // it over its second link, by unicast).
    cluster = cluster.replace(&format!("  interface: {}\n", lab.ifs), "");
    // dhcrelay sends from its address on the appliance's side.
    cluster = cluster.replace("dhcp:\n", "dhcp:\n  relays: [\"fd00:233::fe\"]\n");
    let p = lab.path("cluster-relay.yaml");
    std::fs::write(&p, cluster).unwrap();
    let app = lab.start(&p);
    let relay_log = lab.path("dhcrelay.log");
    let relay = Killed(
        rtr.cmd(&[
            "dhcrelay",
            "-6",
            "-d",
            "--no-pid",
            "-l",
            &ifrc,
            "-u",
            &format!("fd00:233::1%{ifru}"),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&relay_log).unwrap())
        .spawn()
        .expect("start dhcrelay"),
    );
    std::thread::sleep(Duration::from_millis(500));
    let n = unique_name("z");
    let (leases, env, script) = (
        lab.path(&format!("{n}.leases")),
        lab.path(&format!("{n}.env")),
        lab.path(&format!("{n}.sh")),
    );
    write_script(
        &script,
        format!(
            "#!/bin/sh\n[ \"$reason\" = BOUND6 ] && env > {}.tmp && mv {0}.tmp {0}\nexit 0\n",
            env.display()
        ),
    );
    let client = Killed(
        quiet(cli.cmd(&[
            "dhclient",
            "-6",
            "-d",
            "-1",
            "-D",
            "LL",
            "-lf",
            leases.to_str().unwrap(),
            "-pf",
            lab.path(&format!("{n}.pid")).to_str().unwrap(),
            "-sf",
            script.to_str().unwrap(),
            &ifc,
        ]))
        .spawn()
        .expect("start dhclient"),
    );
    let got = wait_file(&env, Duration::from_secs(20)).unwrap_or_else(|| {
        panic!(
            "relayed dhclient got no address; dhcrelay:\n{}\nserver:\n{}",
            std::fs::read_to_string(&relay_log).unwrap_or_default(),
            app.log()
        )
    });
    drop(client);
    drop(relay);
    assert_eq!(kv(&got, "new_ip6_address").as_deref(), Some(M0_V6), "{got}");
    // Found by the MAC inside the DUID, through the relay.
    app.wait_log(
        &format!("mac={M0_MAC} mac_from=duid hostname=master-0"),
        Duration::from_secs(5),
    );
}

#[test]
fn rdisc6_and_radvdump_read_the_router_advertisement() {
    require_netns!("d6");
    require_tools!("rdisc6", "radvdump");
    let lab = Lab::new(M0_MAC);
    let app = lab.start(&lab.cluster(true, true));
    app.wait_log("sending router advertisements", Duration::from_secs(10));
    // radvdump prints what it receives in radvd.conf form (line-buffered
    // into a file; `timeout` ends it).
    let dump_file = lab.path("radvdump.txt");
    let mut dump = Killed(
        quiet(lab.cli.cmd(&[
            "sh",
            "-c",
            &format!(
                "exec timeout -s INT 6 stdbuf -oL radvdump > {}",
                dump_file.display()
            ),
        ]))
        .spawn()
        .expect("start radvdump"),
    );
    std::thread::sleep(Duration::from_millis(500));
    // rdisc6 solicits; the appliance answers with a multicast RA that
    // radvdump sees too.
    let out = lab
        .cli
        .exec(&["rdisc6", "-1", "-w", "3000", "-r", "3", &lab.ifc]);
    for line in [
        "Stateful address conf. : Yes",
        "Stateful other conf. : Yes",
        "Prefix : fd00:231::/64",
        "On-link : Yes",
        "Autonomous address conf.: No",
    ] {
        assert!(squash(&out).contains(line), "rdisc6 lacks {line:?}:\n{out}");
    }
    let _ = dump.0.wait();
    let text = std::fs::read_to_string(&dump_file).unwrap_or_default();
    for line in [
        "AdvManagedFlag on;",
        "AdvOtherConfigFlag on;",
        "prefix fd00:231::/64",
        "AdvOnLink on;",
        "AdvAutonomous off;",
    ] {
        assert!(
            text.contains(line),
            "radvdump lacks {line:?}:\n{text}\nserver:\n{}",
            app.log()
        );
    }
}

/// Whitespace runs as one space (rdisc6 aligns its columns).
fn squash(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[test]
fn a_v4_only_cluster_starts_no_dhcp6() {
    require_netns!("d6");
    let lab = Lab::new(M0_MAC);
    let app = lab.start(&lab.cluster(false, false));
    app.wait_log("listening for dhcp on", Duration::from_secs(5));
    assert!(!app.log().contains("dhcp6"), "{}", app.log());
    let out = lab.srv.exec(&["ss", "-uln"]);
    assert!(!out.contains(":547"), "{out}");
}
