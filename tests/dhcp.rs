//! DHCP end to end with real clients.
//!
//! Network-namespace tests (root + `ip netns`): the appliance runs inside
//! a server namespace, bound (SO_BINDTODEVICE) to one end of a veth pair;
//! dhclient / udhcpc / dhcpcd run in a client namespace on the other end
//! with the client MAC set to a reserved one. Addresses (10.231.0.0/24)
//! exist only inside those namespaces. Each test makes its own pair,
//! named `dhcp<pid><n>{s,c}`, deleted on drop. The appliance runs in this
//! process (`InProc::in_netns`: the network is the point, not the
//! process; a restart is a clean stop and a new appliance on the same
//! lease file), except in the crash test, which spawns the binary and
//! kills it with SIGKILL (that nothing is lost without a clean shutdown is
//! what it checks).
//!
//! The loopback tests (no root) send garbage and then a relayed (giaddr)
//! DORA to the appliance on 127.0.20.1 and expect unicast answers (the
//! relay addresses are listed in `dhcp.relays`), a REQUEST with an ASCII
//! Client FQDN option, a DISCOVER storm on a small pool, and relayed
//! requests from a relay that is not configured. They run the appliance in
//! this process (`common::inproc`) and read its typed status; the garbage
//! test reloads through the hub (the hitless reload is the point, not the
//! signal: tests/reload.rs and tests/cli.rs send SIGHUP) and stops as
//! SIGTERM does.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::net::{Ipv4Addr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::inproc::InProc;
use common::udhcpc::{kv, udhcpc_once};
use common::{Appliance, Netns, Served, run_ok, unique_name, wait_until};
use crc_appliance::serve::status::StatusDoc;
use crc_appliance::services::dhcp::status::DhcpStatus;
use dhcproto::v4::{DhcpOption, Flags, Message, MessageType, Opcode, OptionCode};
use dhcproto::{Decodable, Decoder, Encodable};

const M0_MAC: &str = "52:54:00:e7:00:0a";
const W0_MAC: &str = "52:54:00:e7:00:14";
const UNKNOWN_MAC: &str = "52:54:00:e7:99:01";
const UNKNOWN2_MAC: &str = "52:54:00:e7:99:02";

/// A server and a client namespace joined by a veth pair (the namespaces,
/// and with them the pair, are deleted on drop: client first).
struct Net {
    cli: Netns,
    srv: Netns,
    ifs: String,
    ifc: String,
}

impl Net {
    fn new(client_mac: &str) -> Net {
        let base = unique_name("dhcp");
        let ifs = format!("dh{}s", &base["dhcp".len()..]);
        let ifc = format!("dh{}c", &base["dhcp".len()..]);
        let net = Net {
            srv: Netns::new(format!("{base}s")),
            cli: Netns::new(format!("{base}c")),
            ifs,
            ifc,
        };
        common::veth(&net.ifs, &net.srv, &net.ifc, &net.cli);
        net.srv
            .ip(&["addr", "add", "10.231.0.1/24", "dev", &net.ifs]);
        net.srv.ip(&["link", "set", &net.ifs, "up"]);
        net.set_mac(client_mac);
        net
    }

    fn set_mac(&self, mac: &str) {
        self.cli.ip(&["link", "set", &self.ifc, "down"]);
        self.cli
            .ip(&["link", "set", "dev", &self.ifc, "address", mac]);
        self.cli.ip(&["link", "set", &self.ifc, "up"]);
    }

    /// A command inside the client namespace.
    fn in_cli(&self, args: &[&str]) -> Command {
        self.cli.cmd(args)
    }

    /// Like [`Net::in_cli`], with stdin, stdout and stderr on /dev/null.
    fn in_cli_quiet(&self, args: &[&str]) -> Command {
        let mut c = self.in_cli(args);
        c.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        c
    }
}

/// The DHCP debug log filter of the namespace labs.
const DHCP_DEBUG: &str = "info,crc_appliance::services::dhcp=debug";

/// The appliance in this process inside the server namespace (DHCP debug
/// logs), on a cluster file the test keeps (its lease file survives
/// restarts).
fn start_server(net: &Net, cluster: &Path) -> InProc {
    InProc::in_netns(net.srv.name())
        .log_filter(DHCP_DEBUG)
        .start_path(cluster)
}

/// `crc-appliance serve` spawned inside the server namespace, for the test
/// that kills it.
fn spawn_server(net: &Net, cluster: &Path) -> Appliance {
    Appliance::launch()
        .netns(net.srv.name())
        .env("RUST_LOG", DHCP_DEBUG)
        .ready_timeout(Duration::from_secs(30))
        .start_path(cluster)
}

/// Stop the appliance as SIGTERM does and let go of it, before a restart
/// on the same port (until it is dropped, its hub holds the DHCP socket).
fn stop_server(mut srv: InProc) {
    assert_eq!(srv.stop(), Ok(()), "{}", srv.log());
}

/// A fresh state dir, a server/client namespace pair with the client MAC
/// `mac`, a cluster file without a pool, and the server running on it.
fn lab(mac: &str) -> (tempfile::TempDir, Net, PathBuf, InProc) {
    let dir = tempfile::tempdir().unwrap();
    let net = Net::new(mac);
    let cluster = cluster_yaml(&net, dir.path(), false);
    let srv = start_server(&net, &cluster);
    (dir, net, cluster, srv)
}

/// Write an executable shell script.
fn write_script(script: &Path, text: String) {
    std::fs::write(script, text).unwrap();
    run_ok("chmod", &["+x", script.to_str().unwrap()]);
}

/// Assert `KEY=VALUE` lines of `env` (see [`kv`]) for every pair.
fn assert_kv(env: &str, expected: &[(&str, &str)]) {
    for (key, value) in expected {
        assert_eq!(kv(env, key).as_deref(), Some(*value), "{key}: {env}");
    }
}

fn cluster_yaml(net: &Net, dir: &Path, pool: bool) -> PathBuf {
    cluster_yaml_with(net, dir, pool, "")
}

/// [`cluster_yaml`] with `extra` sections appended (e.g. `ntp:`).
fn cluster_yaml_with(net: &Net, dir: &Path, pool: bool, extra: &str) -> PathBuf {
    let pool = if pool {
        "  pool: { start: 10.231.0.100, end: 10.231.0.120 }\n"
    } else {
        ""
    };
    let text = format!(
        r#"name: lab
baseDomain: dhcp.test
network:
  cidr: 10.231.0.0/24
  gateway: 10.231.0.254
  applianceIP: 10.231.0.1
  interface: {ifs}
nodes:
  - {{ name: bootstrap, role: bootstrap, mac: "52:54:00:e7:00:05", ip: 10.231.0.5 }}
  - {{ name: master-0, role: master, mac: "{M0_MAC}", ip: 10.231.0.10 }}
  - {{ name: worker-0, role: worker, mac: "{W0_MAC}", ip: 10.231.0.20 }}
dns:
  enabled: false
dhcp:
  listen: 0.0.0.0:67
  leaseTime: 10m
  leaseFile: "{dir}/leases.json"
{pool}loadBalancer:
  enabled: false
http:
  enabled: false
admin:
  listen: 127.0.0.1:0
{extra}"#,
        ifs = net.ifs,
        dir = dir.display()
    );
    let f = dir.join("cluster.yaml");
    std::fs::write(&f, text).unwrap();
    f
}

fn leases_json(dir: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(dir.join("leases.json")).expect("lease file exists");
    serde_json::from_str(&text).expect("lease file is JSON")
}

/// The lease file once it holds a bound lease for `mac` (a reserved node's
/// record is written lazily, within about a second of its ACK).
fn wait_bound_lease(dir: &Path, mac: &str) -> serde_json::Value {
    let mut v = serde_json::Value::Null;
    wait_until(
        &format!("a bound lease for {mac} on disk"),
        Duration::from_secs(10),
        || {
            v = std::fs::read_to_string(dir.join("leases.json"))
                .ok()
                .and_then(|t| serde_json::from_str(&t).ok())
                .unwrap_or(serde_json::Value::Null);
            lease_for(&v, mac).is_some_and(|l| l["state"] == "bound")
        },
    );
    v
}

fn lease_for<'a>(v: &'a serde_json::Value, mac: &str) -> Option<&'a serde_json::Value> {
    v["leases"]
        .as_array()?
        .iter()
        .find(|l| l["mac"].as_str() == Some(mac))
}

/// udhcpc once in the client namespace (see [`udhcpc_once`]).
fn udhcpc(net: &Net, dir: &Path, tries: &str) -> Option<String> {
    udhcpc_once(&net.cli, &net.ifc, dir, tries)
}

/// dhclient in the client namespace, backgrounded after the lease (so a
/// later `dhclient -r` can release it).
struct Dhclient<'a> {
    net: &'a Net,
    dir: PathBuf,
}

impl<'a> Dhclient<'a> {
    fn new(net: &'a Net, dir: &Path) -> Dhclient<'a> {
        let d = Dhclient {
            net,
            dir: dir.to_path_buf(),
        };
        std::fs::write(
            d.dir.join("dhclient.conf"),
            "timeout 20;\nretry 1;\ninitial-interval 1;\nbackoff-cutoff 2;\nrequest subnet-mask, broadcast-address, routers, domain-name, domain-name-servers, host-name, ntp-servers;\n",
        )
        .unwrap();
        let script = d.dir.join("dhclient.sh");
        write_script(
            &script,
            format!(
                "#!/bin/sh\n{{ echo reason=$reason; env | grep '^new_'; }} >> {}\ncase $reason in\n  BOUND|RENEW|REBIND|REBOOT) ip addr replace $new_ip_address/$new_subnet_mask dev $interface ;;\n  RELEASE|STOP|EXPIRE|FAIL) [ -n \"$old_ip_address\" ] && ip addr del $old_ip_address/$old_subnet_mask dev $interface ;;\nesac\nexit 0\n",
                d.dir.join("dhclient.env").display()
            ),
        );
        d
    }

    fn run(&self, extra: &[&str]) -> i32 {
        let p = |n: &str| self.dir.join(n).display().to_string();
        let log = std::fs::File::create(self.dir.join("dhclient.log")).unwrap();
        let mut args = vec![
            "timeout".to_string(),
            "40".into(),
            "dhclient".into(),
            "-4".into(),
            "-v".into(),
            "-cf".into(),
            p("dhclient.conf"),
            "-lf".into(),
            p("dhclient.leases"),
            "-pf".into(),
            p("dhclient.pid"),
            "-sf".into(),
            p("dhclient.sh"),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        args.push(self.net.ifc.clone());
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        self.net
            .in_cli(&refs)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .status()
            .expect("run dhclient")
            .code()
            .unwrap_or(-1)
    }

    fn env(&self) -> String {
        std::fs::read_to_string(self.dir.join("dhclient.env")).unwrap_or_default()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("dhclient.log")).unwrap_or_default()
    }
}

impl Drop for Dhclient<'_> {
    fn drop(&mut self) {
        if let Ok(pid) = std::fs::read_to_string(self.dir.join("dhclient.pid")) {
            let pid = pid.trim();
            if !pid.is_empty() {
                let _ = Command::new("kill").arg(pid).status();
            }
        }
    }
}

#[test]
fn dhclient_gets_the_reservation_survives_a_crash_and_release_frees_it() {
    require_netns!("dhcp");
    require_tools!("dhclient");
    // Spawned: SIGKILL of the appliance is the point.
    let dir = tempfile::tempdir().unwrap();
    let net = Net::new(M0_MAC);
    let cluster = cluster_yaml(&net, dir.path(), false);
    let mut srv = spawn_server(&net, &cluster);
    srv.wait_log(
        &format!("listening for dhcp on 0.0.0.0:67 (interface {})", net.ifs),
        Duration::from_secs(1),
    );

    let client_dir = tempfile::tempdir().unwrap();
    let dh = Dhclient::new(&net, client_dir.path());
    let code = dh.run(&["-1"]);
    assert_eq!(code, 0, "dhclient failed:\n{}", dh.log());
    let env = dh.env();
    assert_kv(
        &env,
        &[
            ("reason", "BOUND"),
            ("new_ip_address", "10.231.0.10"),
            ("new_host_name", "master-0"),
            ("new_routers", "10.231.0.254"),
            ("new_domain_name_servers", "10.231.0.1"),
            ("new_domain_name", "lab.dhcp.test"),
            ("new_subnet_mask", "255.255.255.0"),
            ("new_dhcp_lease_time", "600"),
            ("new_dhcp_server_identifier", "10.231.0.1"),
        ],
    );
    srv.wait_log("dhcp: ack 10.231.0.10", Duration::from_secs(5));

    // A node's record is written lazily (its reservation, not the file,
    // decides its address); once written, SIGKILL loses nothing.
    let _ = wait_bound_lease(dir.path(), M0_MAC);
    srv.stop_with("KILL");
    let v = leases_json(dir.path());
    let l = lease_for(&v, M0_MAC).unwrap_or_else(|| panic!("no lease for {M0_MAC}: {v}"));
    assert_eq!(l["ip"], "10.231.0.10");
    assert_eq!(l["state"], "bound");
    assert_eq!(l["reserved"], true);

    // Restart: the lease is loaded again; RELEASE (dhclient -r) frees it.
    let srv = spawn_server(&net, &cluster);
    srv.wait_log("loaded 1 lease(s)", Duration::from_secs(1));
    let code = dh.run(&["-r"]);
    assert_eq!(code, 0, "dhclient -r failed:\n{}", dh.log());
    wait_until("the lease to be released", Duration::from_secs(10), || {
        lease_for(&leases_json(dir.path()), M0_MAC).is_some_and(|l| l["state"] == "released")
    });
    srv.wait_log("release 10.231.0.10 (freed)", Duration::from_secs(5));
}

#[test]
fn udhcpc_gets_the_reservation() {
    require_netns!("dhcp");
    require_tools!("udhcpc");
    let (dir, net, _, srv) = lab(W0_MAC);
    let env = udhcpc(&net, dir.path(), "5")
        .unwrap_or_else(|| panic!("udhcpc got no lease; server:\n{}", srv.log()));
    assert_kv(
        &env,
        &[
            ("ip", "10.231.0.20"),
            ("hostname", "worker-0"),
            ("router", "10.231.0.254"),
            ("dns", "10.231.0.1"),
            ("domain", "lab.dhcp.test"),
            ("subnet", "255.255.255.0"),
            ("serverid", "10.231.0.1"),
            ("lease", "600"),
        ],
    );
    let v = wait_bound_lease(dir.path(), W0_MAC);
    assert_eq!(lease_for(&v, W0_MAC).unwrap()["ip"], "10.231.0.20", "{v}");
    // udhcpc sends a client identifier (01 + MAC); the reservation still
    // matches on the hardware address.
    srv.wait_log("dhcp: ack 10.231.0.20", Duration::from_secs(5));
}

/// RENEWING: udhcpc (SIGUSR1) unicasts a REQUEST from its address; the
/// ACK comes back by unicast to ciaddr:68.
#[test]
fn udhcpc_renews_by_unicast() {
    require_netns!("dhcp");
    require_tools!("udhcpc");
    let (dir, net, _, srv) = lab(W0_MAC);
    let out = dir.path().join("events");
    let script = dir.path().join("udhcpc-renew.sh");
    write_script(
        &script,
        format!(
            "#!/bin/sh\ncase \"$1\" in\n  bound|renew) ip addr replace $ip/$subnet dev $interface; echo \"$1 $ip\" >> {} ;;\nesac\nexit 0\n",
            out.display()
        ),
    );
    let mut child = net
        .in_cli_quiet(&[
            "udhcpc",
            "-i",
            &net.ifc,
            "-f",
            "-t",
            "5",
            "-T",
            "2",
            "-s",
            script.to_str().unwrap(),
        ])
        .spawn()
        .expect("spawn udhcpc");
    struct Kill(u32);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = Command::new("kill").arg(self.0.to_string()).status();
        }
    }
    let _guard = Kill(child.id());
    let events = || std::fs::read_to_string(&out).unwrap_or_default();
    wait_until("udhcpc to bind", Duration::from_secs(20), || {
        events().contains("bound 10.231.0.20")
    });
    let _ = Command::new("kill")
        .args(["-USR1", &child.id().to_string()])
        .status();
    wait_until("udhcpc to renew", Duration::from_secs(20), || {
        events().contains("renew 10.231.0.20")
    });
    srv.wait_log(
        "dhcp Request: ack 10.231.0.20 src=10.231.0.20:68",
        Duration::from_secs(5),
    );
    let _ = Command::new("kill").arg(child.id().to_string()).status();
    let _ = child.wait();
}

#[test]
fn unknown_mac_is_ignored_without_pool_and_pool_leases_survive_restart() {
    require_netns!("dhcp");
    require_tools!("udhcpc");
    let (dir, net, _, srv) = lab(UNKNOWN_MAC);
    assert_eq!(
        udhcpc(&net, dir.path(), "2"),
        None,
        "an unknown MAC must get no lease without a pool"
    );
    srv.wait_log("no reply: unknown MAC, no pool", Duration::from_secs(5));
    stop_server(srv);

    let cluster = cluster_yaml(&net, dir.path(), true);
    let srv = start_server(&net, &cluster);
    let env = udhcpc(&net, dir.path(), "5")
        .unwrap_or_else(|| panic!("no pool lease; server:\n{}", srv.log()));
    let a: Ipv4Addr = kv(&env, "ip").unwrap().parse().unwrap();
    assert!((100..=120).contains(&a.octets()[3]), "{env}");
    assert_eq!(
        kv(&env, "hostname").as_deref(),
        Some(""),
        "pool clients get no hostname: {env}"
    );
    assert_eq!(kv(&env, "router").as_deref(), Some("10.231.0.254"), "{env}");
    stop_server(srv);

    // After a restart the pool lease is still held: another client gets
    // another address, the first one gets its address back.
    let srv = start_server(&net, &cluster);
    srv.wait_log("loaded 1 lease(s)", Duration::from_secs(1));
    net.set_mac(UNKNOWN2_MAC);
    let env2 = udhcpc(&net, dir.path(), "5").expect("second pool client");
    let b: Ipv4Addr = kv(&env2, "ip").unwrap().parse().unwrap();
    assert_ne!(
        a, b,
        "a leased pool address was handed out again after restart"
    );
    net.set_mac(UNKNOWN_MAC);
    let env3 = udhcpc(&net, dir.path(), "5").expect("first pool client again");
    assert_eq!(kv(&env3, "ip"), Some(a.to_string()));
}

#[test]
fn dhcpcd_gets_the_reservation() {
    require_netns!("dhcp");
    require_tools!("dhcpcd");
    let (dir, net, _, srv) = lab(M0_MAC);
    let script = dir.path().join("dhcpcd.sh");
    let out = dir.path().join("dhcpcd.env");
    write_script(
        &script,
        format!(
            "#!/bin/sh\n[ \"$reason\" = BOUND ] && env | grep '^new_' > {}\nexit 0\n",
            out.display()
        ),
    );
    let _ = net
        .in_cli_quiet(&[
            "timeout",
            "40",
            "dhcpcd",
            "-4",
            "-1",
            "-B",
            "-A",
            "-t",
            "20",
            "-c",
            script.to_str().unwrap(),
            "-o",
            "host_name",
            "-o",
            "domain_name",
            &net.ifc,
        ])
        .status();
    let env = std::fs::read_to_string(&out)
        .unwrap_or_else(|_| panic!("dhcpcd got no lease; server:\n{}", srv.log()));
    // dhcpcd keeps its lease under /var/lib/dhcpcd (host-wide): remove ours.
    let _ = std::fs::remove_file(format!("/var/lib/dhcpcd/{}.lease", net.ifc));
    assert_kv(
        &env,
        &[
            ("new_ip_address", "10.231.0.10"),
            ("new_host_name", "master-0"),
            ("new_routers", "10.231.0.254"),
            ("new_domain_name_servers", "10.231.0.1"),
        ],
    );
}

/// Issue #24: with `ntp:` on, dhclient, udhcpc and dhcpcd each receive
/// option 42 naming the appliance (read from each client's hook output);
/// without it (the other tests' lab) dhclient sees no NTP server.
#[test]
fn ntp_on_hands_out_option_42_to_dhclient_udhcpc_and_dhcpcd() {
    require_netns!("dhcp");
    require_tools!("dhclient", "udhcpc", "dhcpcd");
    let dir = tempfile::tempdir().unwrap();
    let net = Net::new(M0_MAC);
    let cluster = cluster_yaml_with(&net, dir.path(), false, "ntp:\n  listen: 10.231.0.1:123\n");
    let srv = start_server(&net, &cluster);
    srv.wait_log(
        "listening for ntp on 10.231.0.1:123",
        Duration::from_secs(1),
    );

    let dh_dir = tempfile::tempdir().unwrap();
    let dh = Dhclient::new(&net, dh_dir.path());
    assert_eq!(dh.run(&["-1"]), 0, "dhclient failed:\n{}", dh.log());
    assert_kv(&dh.env(), &[("new_ntp_servers", "10.231.0.1")]);
    assert_eq!(dh.run(&["-r"]), 0, "dhclient -r failed:\n{}", dh.log());
    drop(dh);

    let env = udhcpc(&net, dir.path(), "5")
        .unwrap_or_else(|| panic!("udhcpc got no lease; server:\n{}", srv.log()));
    assert_kv(&env, &[("ip", "10.231.0.10"), ("ntpsrv", "10.231.0.1")]);

    let script = dir.path().join("dhcpcd.sh");
    let out = dir.path().join("dhcpcd.env");
    write_script(
        &script,
        format!(
            "#!/bin/sh\n[ \"$reason\" = BOUND ] && env | grep '^new_' > {}\nexit 0\n",
            out.display()
        ),
    );
    let _ = net
        .in_cli_quiet(&[
            "timeout",
            "40",
            "dhcpcd",
            "-4",
            "-1",
            "-B",
            "-A",
            "-t",
            "20",
            "-c",
            script.to_str().unwrap(),
            "-o",
            "ntp_servers",
            &net.ifc,
        ])
        .status();
    let env = std::fs::read_to_string(&out)
        .unwrap_or_else(|_| panic!("dhcpcd got no lease; server:\n{}", srv.log()));
    let _ = std::fs::remove_file(format!("/var/lib/dhcpcd/{}.lease", net.ifc));
    assert_kv(
        &env,
        &[
            ("new_ip_address", "10.231.0.10"),
            ("new_ntp_servers", "10.231.0.1"),
        ],
    );
}

#[test]
fn without_ntp_no_option_42_is_sent() {
    require_netns!("dhcp");
    require_tools!("udhcpc");
    let (dir, net, _, srv) = lab(W0_MAC);
    let env = udhcpc(&net, dir.path(), "5")
        .unwrap_or_else(|| panic!("udhcpc got no lease; server:\n{}", srv.log()));
    assert_kv(&env, &[("ip", "10.231.0.20"), ("ntpsrv", "")]);
}

// ---------------------------------------------------------------- loopback

fn request(kind: MessageType, mac: [u8; 6], giaddr: Ipv4Addr) -> Message {
    let u = Ipv4Addr::UNSPECIFIED;
    let mut m = Message::new_with_id(0xc0ffee, u, u, u, giaddr, &mac);
    m.set_flags(Flags::default());
    m.opts_mut().insert(DhcpOption::MessageType(kind));
    m
}

fn recv_reply(sock: &UdpSocket, xid: u32) -> Message {
    let mut buf = [0u8; 1500];
    loop {
        let (n, _) = sock
            .recv_from(&mut buf)
            .expect("a reply before the timeout");
        assert!(n >= 300, "reply of {n} bytes is under the BOOTP minimum");
        let m = Message::decode(&mut Decoder::new(&buf[..n])).expect("reply decodes");
        if m.xid() == xid {
            return m;
        }
    }
}

/// `GET /status` on the admin listener, as the typed document.
fn status_over_http(app: &impl Served) -> StatusDoc {
    let body = http_get(app.addr("admin"), "/status");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("status JSON ({e}): {body}"))
}

fn http_get(addr: std::net::SocketAddr, path: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out.split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default()
}

#[test]
fn garbage_is_dropped_and_a_relayed_dora_still_works() {
    let mut app = InProc::start_yaml(&common::only(
        "dhcp:\n  listen: 127.0.20.1:0\n  leaseFile: \"{dir}/leases.json\"\n  relays: [127.0.20.2]\nadmin:\n  listen: 127.0.0.1:0\n",
    ));
    let srv = app.addr("dhcp");
    // The relay agent's address: replies to relayed requests go to giaddr at
    // the server port.
    let relay_ip = Ipv4Addr::new(127, 0, 20, 2);
    let sock = UdpSocket::bind((relay_ip, srv.port())).expect("bind the relay socket");
    sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();

    // Garbage: empty, short, random, a BOOTREPLY, hlen 200, truncated options.
    let mac = [0x52, 0x54, 0x00, 0x14, 0x00, 0x0a]; // master-0
    // Another xid: a mutation may still be a valid DISCOVER.
    let mut valid = request(MessageType::Discover, mac, relay_ip)
        .to_vec()
        .unwrap();
    valid[4] ^= 0xff;
    let mut garbage: Vec<Vec<u8>> = vec![vec![], vec![1], vec![0xff; 240], vec![0; 1400]];
    let mut x: u32 = 12345;
    for _ in 0..50 {
        let len = (x % 600) as usize;
        garbage.push(
            (0..len)
                .map(|_| {
                    x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                    (x >> 16) as u8
                })
                .collect(),
        );
    }
    let mut b = valid.clone();
    b[0] = 2;
    garbage.push(b);
    let mut b = valid.clone();
    b[2] = 200;
    garbage.push(b);
    let mut b = valid.clone();
    b.truncate(243);
    garbage.push(b);
    for g in &garbage {
        sock.send_to(g, srv).unwrap();
    }

    // A relayed DORA for master-0.
    let mut d = request(MessageType::Discover, mac, relay_ip);
    d.set_hops(1);
    sock.send_to(&d.to_vec().unwrap(), srv).unwrap();
    let offer = recv_reply(&sock, 0xc0ffee);
    assert_eq!(offer.opcode(), Opcode::BootReply);
    assert_eq!(offer.opts().msg_type(), Some(MessageType::Offer));
    assert_eq!(offer.yiaddr(), Ipv4Addr::new(127, 0, 20, 10));
    assert_eq!(offer.giaddr(), relay_ip);
    assert_eq!(
        offer.opts().get(OptionCode::Hostname),
        Some(&DhcpOption::Hostname("master-0".into()))
    );
    let mut r = request(MessageType::Request, mac, relay_ip);
    r.opts_mut()
        .insert(DhcpOption::RequestedIpAddress(offer.yiaddr()));
    r.opts_mut()
        .insert(DhcpOption::ServerIdentifier(Ipv4Addr::new(127, 0, 20, 1)));
    sock.send_to(&r.to_vec().unwrap(), srv).unwrap();
    let ack = recv_reply(&sock, 0xc0ffee);
    assert_eq!(ack.opts().msg_type(), Some(MessageType::Ack));
    assert_eq!(ack.yiaddr(), Ipv4Addr::new(127, 0, 20, 10));
    let v = wait_bound_lease(app.dir.path(), "52:54:00:14:00:0a");
    assert_eq!(
        lease_for(&v, "52:54:00:14:00:0a").unwrap()["state"],
        "bound",
        "{v}"
    );

    // A node asking for another node's address is NAKed.
    let mut r = request(MessageType::Request, mac, relay_ip);
    r.opts_mut()
        .insert(DhcpOption::RequestedIpAddress(Ipv4Addr::new(
            127, 0, 20, 11,
        )));
    sock.send_to(&r.to_vec().unwrap(), srv).unwrap();
    let nak = recv_reply(&sock, 0xc0ffee);
    assert_eq!(nak.opts().msg_type(), Some(MessageType::Nak));

    // Status and metrics on the admin listener.
    // Counters are bumped just after each send returns: poll briefly.
    let mut metrics = String::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        metrics = http_get(app.addr("admin"), "/metrics");
        if metrics.contains("crc_appliance_dhcp_sent_total{type=\"ack\"} 1")
            && metrics.contains("crc_appliance_dhcp_sent_total{type=\"nak\"} 1")
        {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let d = status_over_http(&app).dhcp.expect("a dhcp section");
    assert_eq!(d.leases[0].mac.to_string(), "52:54:00:14:00:0a", "{d:?}");
    assert!(d.leases[0].state == "bound", "{d:?}");
    assert_eq!(d.leases[0].hostname.as_deref(), Some("master-0"), "{d:?}");
    assert_eq!(d.received.get("discover"), Some(&2), "{d:?}");
    assert_eq!(d.received.get("request"), Some(&2), "{d:?}");
    assert_eq!(d.sent.get("nak"), Some(&1), "{d:?}");
    assert!(d.malformed >= 50, "{d:?}");
    assert!(
        metrics.contains("crc_appliance_dhcp_sent_total{type=\"ack\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("crc_appliance_dhcp_leases{state=\"bound\"} 1"),
        "{metrics}"
    );

    // A reload (as SIGHUP's): the socket and the lease table stay
    // (hitless reload); the lease is still bound afterwards and no
    // listener was closed.
    let outcome = app.reload();
    assert!(outcome.ok, "{outcome:?}");
    app.wait_log("configuration reloaded", Duration::from_secs(10));
    let status = status_over_http(&app);
    let d = status.dhcp.as_ref().expect("a dhcp section");
    assert_eq!(d.leases[0].mac.to_string(), "52:54:00:14:00:0a", "{d:?}");
    assert!(d.leases[0].state == "bound", "{d:?}");
    assert_eq!(status.reload.generation, 2, "{:?}", status.reload);
    assert!(
        !app.log().contains("closed listener"),
        "an unchanged listener was closed:\n{}",
        app.log()
    );
    assert_eq!(app.stop(), Ok(()), "{}", app.log());
}

/// Make every write of `dir/leases.json` fail from now on: its temp file
/// path becomes a directory. The appliance's own writes use that name for a
/// moment (its first write at start, a lazy write), so a taken name means
/// "the writer is busy": wait and try again. Once the directory is in place
/// no write can succeed until the test removes it.
fn block_lease_writes(dir: &std::path::Path) -> std::path::PathBuf {
    let blocker = dir.join(".leases.json.tmp");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        match std::fs::create_dir(&blocker) {
            Ok(()) => return blocker,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                assert!(
                    std::time::Instant::now() < deadline,
                    "the lease writer held {} for 10 s",
                    blocker.display()
                );
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => panic!("create {}: {e}", blocker.display()),
        }
    }
}

/// A node's reservation decides its address: while the lease file cannot
/// be written, a reserved node still gets its ACK at once, and its record
/// reaches the file once writing works again.
#[test]
fn reserved_node_is_acked_while_the_lease_file_cannot_be_written() {
    let app = InProc::start_yaml(&common::only(
        "dhcp:\n  listen: 127.0.20.1:0\n  leaseFile: \"{dir}/leases.json\"\n  relays: [127.0.20.3]\n",
    ));
    let srv = app.addr("dhcp");
    let relay_ip = Ipv4Addr::new(127, 0, 20, 3);
    let sock = UdpSocket::bind((relay_ip, srv.port())).expect("bind the relay socket");
    sock.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    // The writer's temp file path is taken by a directory: writes fail.
    let blocker = block_lease_writes(app.dir.path());
    let mac = [0x52, 0x54, 0x00, 0x14, 0x00, 0x14]; // worker-0
    let mut r = request(MessageType::Request, mac, relay_ip);
    r.opts_mut()
        .insert(DhcpOption::RequestedIpAddress(Ipv4Addr::new(
            127, 0, 20, 20,
        )));
    sock.send_to(&r.to_vec().unwrap(), srv).unwrap();
    let ack = recv_reply(&sock, 0xc0ffee);
    assert_eq!(ack.opts().msg_type(), Some(MessageType::Ack));
    assert_eq!(ack.yiaddr(), Ipv4Addr::new(127, 0, 20, 20));
    app.wait_log("cannot write the DHCP lease file", Duration::from_secs(5));
    std::fs::remove_dir(&blocker).unwrap();
    wait_until(
        "the reserved lease on disk",
        Duration::from_secs(10),
        || {
            std::fs::read_to_string(app.dir.path().join("leases.json"))
                .ok()
                .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
                .is_some_and(|v| {
                    lease_for(&v, "52:54:00:14:00:14").is_some_and(|l| l["ip"] == "127.0.20.20")
                })
        },
    );
}

/// A pool lease is on disk before its ACK: while the lease file cannot be
/// written the ACK is withheld (the client retries), and it is served once
/// the write works again.
#[test]
fn pool_ack_is_withheld_while_the_lease_file_cannot_be_written() {
    let app = InProc::start_yaml(&common::only(
        "dhcp:\n  listen: 127.0.20.1:0\n  leaseFile: \"{dir}/leases.json\"\n  pool: { start: 127.0.20.100, end: 127.0.20.120 }\n  relays: [127.0.20.4]\n",
    ));
    let srv = app.addr("dhcp");
    let relay_ip = Ipv4Addr::new(127, 0, 20, 4);
    let sock = UdpSocket::bind((relay_ip, srv.port())).expect("bind the relay socket");
    sock.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let blocker = block_lease_writes(app.dir.path());
    let mac = [0x52, 0x54, 0x00, 0x14, 0x99, 0x01]; // not a node
    let mut r = request(MessageType::Request, mac, relay_ip);
    r.opts_mut()
        .insert(DhcpOption::RequestedIpAddress(Ipv4Addr::new(
            127, 0, 20, 100,
        )));
    sock.send_to(&r.to_vec().unwrap(), srv).unwrap();
    let mut buf = [0u8; 1500];
    assert!(
        sock.recv_from(&mut buf).is_err(),
        "a pool ACK was sent although its lease could not be written"
    );
    app.wait_log("cannot write the DHCP lease file", Duration::from_secs(5));
    std::fs::remove_dir(&blocker).unwrap();
    sock.send_to(&r.to_vec().unwrap(), srv).unwrap();
    let ack = recv_reply(&sock, 0xc0ffee);
    assert_eq!(ack.opts().msg_type(), Some(MessageType::Ack));
    let v = leases_json(app.dir.path());
    assert_eq!(
        lease_for(&v, "52:54:00:14:99:01").unwrap()["ip"],
        "127.0.20.100",
        "{v}"
    );
}

/// A relay address (giaddr) no relay agent can have — the subnet's
/// broadcast, the appliance's own address — is dropped and counted, never
/// answered; a request relayed from a subnet that is not served is dropped
/// with a warning at the default log level.
#[test]
fn spoofed_and_unknown_relay_addresses_are_dropped() {
    let app = InProc::start_yaml(&common::only(
        "dhcp:\n  listen: 127.0.20.1:0\n  leaseFile: \"{dir}/leases.json\"\nadmin:\n  listen: 127.0.0.1:0\n",
    ));
    let srv = app.addr("dhcp");
    // Where a reply to the spoofed giaddr would go.
    let bcast = Ipv4Addr::new(127, 0, 20, 255);
    let victim = UdpSocket::bind((bcast, srv.port())).expect("bind the broadcast address");
    victim
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    let sender = UdpSocket::bind((Ipv4Addr::new(127, 0, 20, 6), 0)).unwrap();
    let mac = [0x52, 0x54, 0x00, 0x14, 0x00, 0x0a]; // master-0
    for giaddr in [bcast, Ipv4Addr::new(127, 0, 20, 1)] {
        let d = request(MessageType::Discover, mac, giaddr);
        sender.send_to(&d.to_vec().unwrap(), srv).unwrap();
    }
    let mut buf = [0u8; 1500];
    assert!(
        victim.recv_from(&mut buf).is_err(),
        "a reply went to the subnet broadcast address named by a spoofed giaddr"
    );
    // Unknown segment: warned at the default level.
    let d = request(MessageType::Discover, mac, Ipv4Addr::new(127, 0, 21, 1));
    sender.send_to(&d.to_vec().unwrap(), srv).unwrap();
    app.wait_log("no address range available", Duration::from_secs(5));
    let d = dhcp_status_when(
        || app.status(),
        |d| d.bad_relay == 2 && d.unknown_segment == 1,
    );
    assert_eq!(d.sent.get("offer"), Some(&0), "{d:?}");
    let metrics = http_get(app.addr("admin"), "/metrics");
    assert!(
        metrics.contains("crc_appliance_dhcp_dropped_total{reason=\"bad_relay\"} 2"),
        "{metrics}"
    );
}

// ------------------------------------------------- interop (issue #22, 9)

/// The relay of the loopback tests below (listed in `dhcp.relays`).
const RELAY: Ipv4Addr = Ipv4Addr::new(127, 0, 20, 7);

/// The loopback cluster with a pool, `RELAY` configured and the admin API.
fn relayed(pool: &str) -> String {
    common::only(&format!(
        "dhcp:\n  listen: 127.0.20.1:0\n  leaseFile: \"{{dir}}/leases.json\"\n  pool: {{ start: 127.0.20.100, end: {pool} }}\n  relays: [{RELAY}]\nadmin:\n  listen: 127.0.0.1:0\n"
    ))
}

/// [`relayed`], run in this process.
fn start_relayed(pool: &str) -> InProc {
    InProc::start_yaml(&relayed(pool))
}

/// The relay socket: replies to relayed requests come to giaddr at the
/// server port.
fn relay_socket(app: &impl Served, ip: Ipv4Addr, wait: Duration) -> UdpSocket {
    let sock = UdpSocket::bind((ip, app.addr("dhcp").port())).expect("bind the relay socket");
    sock.set_read_timeout(Some(wait)).unwrap();
    sock
}

/// The next datagram with `xid`, raw (dhcproto cannot read an ASCII
/// option 81); `None` on timeout.
fn recv_raw(sock: &UdpSocket, xid: u32) -> Option<Vec<u8>> {
    let mut buf = [0u8; 1500];
    loop {
        let (n, _) = sock.recv_from(&mut buf).ok()?;
        if buf.get(4..8) == Some(&xid.to_be_bytes()[..]) {
            return Some(buf[..n].to_vec());
        }
    }
}

/// The data of option `code` of an encoded message, read by hand.
fn raw_option(b: &[u8], code: u8) -> Option<Vec<u8>> {
    let mut i = 240;
    while let Some(&c) = b.get(i) {
        match c {
            0 => i += 1,
            255 => return None,
            _ => {
                let len = usize::from(*b.get(i + 1)?);
                if c == code {
                    return b.get(i + 2..i + 2 + len).map(<[u8]>::to_vec);
                }
                i += 2 + len;
            }
        }
    }
    None
}

/// `m` encoded with option 81 (`data`) right after the message type (53)
/// and before every other option — the requested address (50) and server
/// id (54) among them, as in the audit's client.
fn with_fqdn_after_type(m: &Message, data: &[u8]) -> Vec<u8> {
    let b = m.to_vec().unwrap();
    let (mut out, mut rest) = (b[..240].to_vec(), Vec::new());
    let mut i = 240;
    while let Some(&c) = b.get(i) {
        if c == 255 {
            break;
        }
        let end = i + 2 + usize::from(b[i + 1]);
        if c == 53 {
            out.extend_from_slice(&b[i..end]);
            out.extend_from_slice(&[81, u8::try_from(data.len()).unwrap()]);
            out.extend_from_slice(data);
        } else {
            rest.extend_from_slice(&b[i..end]);
        }
        i = end;
    }
    out.extend_from_slice(&rest);
    out.push(255);
    out.resize(out.len().max(300), 0);
    out
}

/// The `dhcp` section of the status document `read` returns, once `pred`
/// holds (5 s).
fn dhcp_status_when(
    read: impl Fn() -> StatusDoc,
    pred: impl Fn(&DhcpStatus) -> bool,
) -> DhcpStatus {
    let mut d = None;
    wait_until("the DHCP counters", Duration::from_secs(5), || {
        let now = read().dhcp.expect("a dhcp section");
        let done = pred(&now);
        d = Some(now);
        done
    });
    d.expect("polled at least once")
}

/// Audit D6: a client that sends option 81 in the older ASCII form (E bit
/// 0, RFC 4702 §2.3.1) before the requested address and server id got an
/// OFFER but its REQUEST was silently ignored (dhcproto lost the options
/// after 81). It gets its ACK now, with
/// option 81 answered in ASCII.
#[test]
fn a_request_with_an_ascii_client_fqdn_is_acked_in_ascii() {
    let app = start_relayed("127.0.20.110");
    let relay = relay_socket(&app, RELAY, Duration::from_secs(3));
    let srv = app.addr("dhcp");
    let mac = [0x52, 0x54, 0x00, 0x14, 0x99, 0x81]; // a pool client
    // Flags S=1 (asks the server to update A records), E=0: ASCII.
    let fqdn = b"\x01\x00\x00winbox.example.org";
    let mut d = request(MessageType::Discover, mac, RELAY);
    d.set_xid(0x8181);
    relay.send_to(&with_fqdn_after_type(&d, fqdn), srv).unwrap();
    let offer = recv_raw(&relay, 0x8181).expect("an OFFER");
    let yiaddr = Ipv4Addr::from(<[u8; 4]>::try_from(&offer[16..20]).unwrap());
    assert!(yiaddr.octets()[3] >= 100, "{yiaddr}");
    let mut r = request(MessageType::Request, mac, RELAY);
    r.set_xid(0x8182);
    r.opts_mut().insert(DhcpOption::RequestedIpAddress(yiaddr));
    r.opts_mut()
        .insert(DhcpOption::ServerIdentifier(Ipv4Addr::new(127, 0, 20, 1)));
    relay.send_to(&with_fqdn_after_type(&r, fqdn), srv).unwrap();
    let ack = recv_raw(&relay, 0x8182)
        .unwrap_or_else(|| panic!("no answer to the REQUEST; log:\n{}", app.log()));
    assert_eq!(
        raw_option(&ack, 53).as_deref(),
        Some(&[5u8][..]),
        "not an ACK"
    );
    assert_eq!(&ack[16..20], &yiaddr.octets());
    // Option 81 in the client's encoding: E=0, N=1 (no DNS updates by the
    // server), O=1 (S overridden), RCODEs 255, the client's name in ASCII.
    assert_eq!(
        raw_option(&ack, 81).as_deref(),
        Some(&b"\x0a\xff\xffwinbox.example.org"[..])
    );
    let d = dhcp_status_when(|| app.status(), |d| d.sent.get("ack") == Some(&1));
    assert_eq!(d.ignored, 0, "{d:?}");
    assert_eq!(d.malformed, 0, "{d:?}");
}

/// Audit D8: a DISCOVER storm took the pool and nothing was logged. Now
/// every DISCOVER the pool cannot serve is counted, and logged at warn at
/// most once every 10 s with the client and (at shutdown here) the count:
/// the summary comes from this appliance's own limiter (its serve's), so
/// the other appliances of this test binary neither add to it nor write
/// it.
#[test]
fn an_exhausted_pool_is_logged_and_counted() {
    let mut app = start_relayed("127.0.20.101");
    let relay = relay_socket(&app, RELAY, Duration::from_secs(2));
    let srv = app.addr("dhcp");
    let discover = |i: u8| {
        let mut d = request(
            MessageType::Discover,
            [0x52, 0x54, 0x00, 0x14, 0x98, i],
            RELAY,
        );
        d.set_xid(0x9800 + u32::from(i));
        relay.send_to(&d.to_vec().unwrap(), srv).unwrap();
    };
    // Two addresses: two offers (held 30 s) take the pool.
    for i in 0..2 {
        discover(i);
        assert!(
            recv_raw(&relay, 0x9800 + u32::from(i)).is_some(),
            "offer {i}"
        );
    }
    let storm = 20u8;
    for i in 2..2 + storm {
        discover(i);
    }
    let d = dhcp_status_when(|| app.status(), |d| d.pool_exhausted == u64::from(storm));
    assert_eq!(d.sent.get("offer"), Some(&2), "{d:?}");
    let metrics = http_get(app.addr("admin"), "/metrics");
    assert!(
        metrics.contains(&format!("crc_appliance_dhcp_pool_exhausted_total {storm}")),
        "{metrics}"
    );
    app.wait_log("pool exhausted", Duration::from_secs(5));
    // Stopped as SIGTERM does: its shutdown writes the summary.
    assert_eq!(app.stop(), Ok(()));
    let log = app.log();
    assert!(log.lines().any(|l| l.ends_with("stopped")), "{log}");
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("WARN") && l.contains("pool exhausted"))
        .collect();
    assert_eq!(lines.len(), 2, "one line, one summary: {lines:#?}");
    assert!(
        lines[0].contains(&format!("from {RELAY}:"))
            && lines[0].contains("the pool of 127.0.20.0/24 is exhausted"),
        "{}",
        lines[0]
    );
    assert!(
        lines[1].contains(&format!("pool exhausted: {} more in the last", storm - 1))
            && lines[1].contains(&format!("all from {RELAY}:")),
        "{}",
        lines[1]
    );
}

/// Audit D8: a giaddr naming any host of the network made the appliance
/// send its replies there (an OFFER for a node included). Only configured
/// relays (`dhcp.relays`, a segment's gateway) are answered now; a
/// request relayed by any other address is dropped, counted and logged.
#[test]
fn only_configured_relays_are_answered() {
    let app = start_relayed("127.0.20.110");
    // A plain host of the network, named as relay by someone else.
    let host = Ipv4Addr::new(127, 0, 20, 150);
    let victim = relay_socket(&app, host, Duration::from_secs(2));
    let sender = UdpSocket::bind((Ipv4Addr::new(127, 0, 20, 6), 0)).unwrap();
    let srv = app.addr("dhcp");
    let m0 = [0x52, 0x54, 0x00, 0x14, 0x00, 0x0a]; // master-0
    let pool_client = [0x52, 0x54, 0x00, 0x14, 0x97, 0x01];
    for (i, mac) in [m0, pool_client].into_iter().enumerate() {
        let mut d = request(MessageType::Discover, mac, host);
        d.set_xid(0x9700 + i as u32);
        sender.send_to(&d.to_vec().unwrap(), srv).unwrap();
    }
    assert!(
        recv_raw(&victim, 0x9700).is_none() && recv_raw(&victim, 0x9701).is_none(),
        "a reply was reflected to {host}, which is no configured relay"
    );
    let d = dhcp_status_when(|| app.status(), |d| d.unknown_relay == 2);
    assert_eq!(d.sent.get("offer"), Some(&0), "{d:?}");
    let metrics = http_get(app.addr("admin"), "/metrics");
    assert!(
        metrics.contains("crc_appliance_dhcp_dropped_total{reason=\"unknown_relay\"} 2"),
        "{metrics}"
    );
    app.wait_log("relay not configured", Duration::from_secs(5));
    assert!(
        app.log()
            .contains(&format!("relay address {host} is not a configured relay")),
        "{}",
        app.log()
    );
    // The configured relay is answered.
    let relay = relay_socket(&app, RELAY, Duration::from_secs(3));
    let mut d = request(MessageType::Discover, m0, RELAY);
    d.set_xid(0x9702);
    relay.send_to(&d.to_vec().unwrap(), srv).unwrap();
    let offer = recv_raw(&relay, 0x9702).expect("an OFFER through the configured relay");
    assert_eq!(&offer[16..20], &[127, 0, 20, 10]);
}
