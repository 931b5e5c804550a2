//! `dhcp.mode: proxy` beside the site's DHCP server (Kea, then dnsmasq) on
//! one bridge (tests/common/segment.rs), and the other-server probe of
//! `preflight` and `serve`:
//!
//! - a plain `dhclient` gets its address from the site's server and no
//!   packet from the appliance (its send counters stay 0 while its receive
//!   counters count the client's DISCOVER);
//! - a PXE client of the inventory gets the site's OFFER with an address
//!   and the appliance's proxy OFFER (no address, `PXEClient`, option 43
//!   `06 01 08 ff`, the boot file); its boot server REQUEST to port 4011
//!   gets an ACK from port 4011 echoing its UUID;
//! - an unknown MAC's PXE DISCOVER gets nothing from the appliance (logged);
//! - `preflight` in server mode names the site server's address, and
//!   `serve` in server mode refuses to start with the fix
//!   (`dhcp.mode: proxy`), unless `dhcp.allowOtherServers: true`;
//! - dual-stack in proxy mode: the appliance runs no DHCPv6 (nothing bound
//!   on 547, no `dhcp6` in its log or `/status`), and `dhclient -6` with
//!   the MAC of a node that has an IPv6 address in the inventory gets its
//!   address from the site's DHCPv6 server (dnsmasq), never the node's
//!   inventory address the appliance would have lent.
//!
//! The appliance runs in-process inside the segment's appliance namespace
//! (`InProc::in_netns`); its status is read from the typed document.
//! `preflight` is the binary's command, and `serve`'s refusal beside Kea
//! (an exit status) spawns the binary.
//!
//! Firmware booting through the same segment: tests/netboot_proxy_qemu.rs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::Stdio;
use std::time::{Duration, Instant};

use common::inproc::InProc;
use common::segment::{Segment, Site};
use common::{BIN, netns_available};
use crc_appliance::services::dhcp::status::DhcpStatus;

fn tools(site: Site) -> Result<(), String> {
    netns_available("crcpx")?;
    site.available()?;
    for t in ["dhclient", "python3"] {
        if !common::have(t) {
            return Err(format!("{t} is not installed"));
        }
    }
    Ok(())
}

/// The appliance's DHCP section of the typed status document.
fn dhcp_status(app: &InProc) -> DhcpStatus {
    app.status().dhcp.expect("dhcp runs")
}

/// Replies of kind `kind` the appliance sent.
fn sent(st: &DhcpStatus, kind: &str) -> u64 {
    st.sent.get(kind).copied().unwrap_or(0)
}

/// dhclient in the client namespace, once: the address it was lent (the
/// daemon it leaves behind is stopped by its pid).
fn dhclient_lease(seg: &Segment) -> String {
    let d = seg.dir.path();
    let lf = d.join("dhclient.leases");
    let pf = d.join("dhclient.pid");
    let (code, out, err) = common::run(
        "ip",
        &[
            "netns",
            "exec",
            seg.client.name(),
            "timeout",
            "30",
            "dhclient",
            "-1",
            "-v",
            "-sf",
            "/bin/true",
            "-lf",
            lf.to_str().unwrap(),
            "-pf",
            pf.to_str().unwrap(),
            "c0",
        ],
    );
    if let Ok(pid) = std::fs::read_to_string(&pf) {
        let _ = common::run("kill", &[pid.trim()]);
    }
    assert_eq!(code, 0, "dhclient failed: {out}{err}\n{}", seg.server_log());
    let leases = std::fs::read_to_string(&lf).unwrap();
    leases
        .lines()
        .rev()
        .find_map(|l| l.trim().strip_prefix("fixed-address "))
        .map(|a| a.trim_end_matches(';').to_string())
        .unwrap_or_else(|| panic!("no lease in {leases}"))
}

fn in_pool(seg: &Segment, ip: &str) -> bool {
    let last: u8 = ip
        .strip_prefix(&format!("10.{}.0.", seg.octet))
        .and_then(|h| h.parse().ok())
        .unwrap_or(0);
    (100..=150).contains(&last)
}

/// The whole proxy scenario beside `site`.
fn proxy_beside(site: Site, octet: u8) {
    let seg = Segment::new(site, octet);
    let app = InProc::in_netns(seg.app.name()).start_yaml(&seg.cluster_yaml("proxy", None));
    let appliance = seg.ip(1);
    let site_ip = seg.ip(2);
    // The proxy's boot server socket is up.
    assert_eq!(app.addr("dhcp-pxe").port(), 4011);

    // A plain DHCP client: the site's address, nothing from the appliance.
    let lent = dhclient_lease(&seg);
    assert!(in_pool(&seg, &lent), "{lent} is not from the site's pool");
    let st = dhcp_status(&app);
    assert!(
        st.received.get("discover").copied().unwrap_or(0) >= 1,
        "the appliance did not see the DISCOVER: {st:?}"
    );
    for kind in ["offer", "ack", "nak"] {
        assert_eq!(
            sent(&st, kind),
            0,
            "the appliance answered a plain client: {st:?}"
        );
    }

    // A PXE client of the inventory: the site's offer and the proxy's.
    let mac = seg.node_mac();
    let replies = seg.pxe_client(&[
        "discover",
        "c0",
        &mac,
        "PXEClient:Arch:00000:UNDI:002001",
        "0",
    ]);
    let site_offer = replies
        .iter()
        .find(|r| r["server_id"] == site_ip.as_str())
        .unwrap_or_else(|| panic!("no offer from the site: {replies:?}\n{}", seg.server_log()));
    assert!(in_pool(&seg, site_offer["yiaddr"].as_str().unwrap()));
    let proxy: Vec<_> = replies
        .iter()
        .filter(|r| r["server_id"] == appliance.as_str())
        .collect();
    assert_eq!(proxy.len(), 1, "{replies:?}");
    let p = proxy[0];
    assert_eq!(p["type"], 2, "OFFER");
    assert_eq!(p["yiaddr"], "0.0.0.0", "a proxy never lends an address");
    assert_eq!(p["vendor"], "PXEClient");
    assert_eq!(p["opt43"], "060108ff");
    assert_eq!(p["file"], "undionly.kpxe");
    assert_eq!(p["siaddr"], appliance.as_str());
    assert_eq!(p["opt97"], p["uuid_sent"]);
    assert_eq!(p["from"], format!("{appliance}:67"));

    // Its boot server REQUEST (EDK2's, from the address it was lent).
    seg.client
        .ip(&["addr", "add", &format!("{lent}/24"), "dev", "c0"]);
    let acks = seg.pxe_client(&[
        "bootserver",
        "c0",
        &mac,
        "PXEClient:Arch:00007:UNDI:003000",
        "7",
        &appliance,
        &lent,
    ]);
    assert_eq!(acks.len(), 1, "{acks:?}\n{}", app.log());
    let a = &acks[0];
    assert_eq!(a["type"], 5, "ACK");
    assert_eq!(a["from"], format!("{appliance}:4011"));
    assert_eq!(a["yiaddr"], "0.0.0.0");
    assert_eq!(a["ciaddr"], lent.as_str());
    assert_eq!(a["file"], "snponly.efi");
    assert_eq!(a["opt97"], a["uuid_sent"]);

    // An unknown MAC: the site answers, the appliance does not (logged).
    let unknown = format!("52:54:00:{octet:02x}:99:99");
    let replies = seg.pxe_client(&[
        "discover",
        "c0",
        &unknown,
        "PXEClient:Arch:00000:UNDI:002001",
        "0",
    ]);
    assert!(
        replies.iter().any(|r| r["server_id"] == site_ip.as_str()),
        "{replies:?}"
    );
    assert!(
        !replies.iter().any(|r| r["server_id"] == appliance.as_str()),
        "the proxy answered an unknown MAC: {replies:?}"
    );
    app.wait_log("unknown network boot client", Duration::from_secs(5));
    let st = dhcp_status(&app);
    assert_eq!(sent(&st, "nak"), 0, "{st:?}");
    assert_eq!(sent(&st, "offer"), 1, "{st:?}");
    assert_eq!(sent(&st, "ack"), 1, "{st:?}");
}

#[test]
fn proxy_beside_kea() {
    if let Err(why) = tools(Site::Kea) {
        skipped!("SKIPPED proxy_beside_kea: {why}");
        return;
    }
    proxy_beside(Site::Kea, 71);
}

#[test]
fn proxy_beside_dnsmasq() {
    if let Err(why) = tools(Site::Dnsmasq) {
        skipped!("SKIPPED proxy_beside_dnsmasq: {why}");
        return;
    }
    proxy_beside(Site::Dnsmasq, 72);
}

/// Write the server-mode cluster file (with `extra` under `dhcp:`) into the
/// segment's directory.
fn server_mode_file(seg: &Segment, extra: &str) -> std::path::PathBuf {
    let dir = seg.dir.path().join("app");
    std::fs::create_dir_all(&dir).unwrap();
    let yaml = seg
        .cluster_yaml("server", None)
        .replace("  mode: server\n", &format!("  mode: server\n{extra}"))
        .replace("{dir}", &dir.display().to_string());
    let f = dir.join("cluster.yaml");
    std::fs::write(&f, yaml).unwrap();
    f
}

#[test]
fn preflight_names_kea_and_serve_refuses_server_mode_beside_it() {
    if let Err(why) = tools(Site::Kea) {
        skipped!("SKIPPED preflight_names_kea_and_serve_refuses_server_mode_beside_it: {why}");
        return;
    }
    let seg = Segment::new(Site::Kea, 73);
    let kea = seg.ip(2);
    let f = server_mode_file(&seg, "");
    let file = f.to_str().unwrap();
    let (code, out, err) = common::run(
        "ip",
        &[
            "netns",
            "exec",
            seg.app.name(),
            BIN,
            "preflight",
            "--cluster",
            file,
        ],
    );
    assert_eq!(code, 1, "{out}{err}");
    let line = out
        .lines()
        .find(|l| l.contains("another DHCP server answers on a0"))
        .unwrap_or_else(|| panic!("no finding:\n{out}{err}\n{}", seg.server_log()));
    assert!(
        line.contains(&format!("a0: {kea} (offered 10.73.0.")),
        "{line}"
    );
    assert!(out.contains("dhcp.mode: proxy"), "{out}");

    // serve: refuses, with the fix.
    let started = Instant::now();
    let o = std::process::Command::new("ip")
        .args([
            "netns",
            "exec",
            seg.app.name(),
            "timeout",
            "60",
            BIN,
            "serve",
            "--cluster",
            file,
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(!o.status.success(), "serve started beside Kea:\n{text}");
    assert_ne!(
        o.status.code(),
        Some(124),
        "serve ran until timeout:\n{text}"
    );
    assert!(text.contains("refusing to start"), "{text}");
    assert!(
        text.contains(&format!("another DHCP server answers on a0: {kea}")),
        "{text}"
    );
    assert!(text.contains("dhcp.mode: proxy"), "{text}");
    assert!(started.elapsed() < Duration::from_secs(30));

    // allowOtherServers: serve starts anyway (and says so).
    let f = server_mode_file(&seg, "  allowOtherServers: true\n");
    let app = InProc::in_netns(seg.app.name()).start_path(&f);
    assert!(
        app.log().contains("dhcp.allowOtherServers is true"),
        "{}",
        app.log()
    );

    drop(app);

    // Proxy mode beside Kea: preflight names Kea as the site's server.
    let dir = seg.dir.path().join("app");
    let yaml = seg
        .cluster_yaml("proxy", None)
        .replace("{dir}", &dir.display().to_string());
    let f = dir.join("proxy.yaml");
    std::fs::write(&f, yaml).unwrap();
    let (_, out, err) = common::run(
        "ip",
        &[
            "netns",
            "exec",
            seg.app.name(),
            BIN,
            "preflight",
            "--cluster",
            f.to_str().unwrap(),
        ],
    );
    assert!(
        out.contains(&format!(
            "info dhcp: DHCP server(s) on a0: {kea} (offered 10.73.0."
        )),
        "{out}{err}"
    );
}

/// `dhclient -6 -1` on `c0` of the client namespace until it binds or
/// `secs` pass: its script's environment (`new_ip6_address`,
/// `new_dhcp6_server_id`, …) on success.
fn dhclient6(seg: &Segment, secs: u64) -> Option<String> {
    let d = seg.dir.path();
    let (leases, env, script, pid) = (
        d.join("d6.leases"),
        d.join("d6.env"),
        d.join("d6.sh"),
        d.join("d6.pid"),
    );
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\ncase \"$reason\" in BOUND6|REBOOT6) env > {0}.tmp && mv {0}.tmp {0};; esac\nexit 0\n",
            env.display()
        ),
    )
    .unwrap();
    common::run_ok("chmod", &["+x", script.to_str().unwrap()]);
    let child = common::Proc(
        seg.client
            .cmd(&["dhclient", "-6", "-d", "-1", "-D", "LL", "-lf"])
            .arg(&leases)
            .arg("-pf")
            .arg(&pid)
            .args(["-sf".as_ref(), script.as_os_str(), "c0".as_ref()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(d.join("dhclient6.log")).unwrap())
            .spawn()
            .expect("start dhclient -6"),
    );
    let deadline = Instant::now() + Duration::from_secs(secs);
    let got = loop {
        if let Ok(t) = std::fs::read_to_string(&env) {
            break Some(t);
        }
        if Instant::now() > deadline {
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    drop(child);
    got
}

/// `ifname` in `ns` without duplicate address detection, with `addr`, and
/// its link-local address settled (dhclient -6 needs it).
fn v6_up(ns: &common::Netns, ifname: &str, addr: Option<&str>) {
    ns.exec(&[
        "sysctl",
        "-q",
        "-w",
        &format!("net.ipv6.conf.{ifname}.accept_dad=0"),
    ]);
    ns.ip(&["link", "set", ifname, "down"]);
    ns.ip(&["link", "set", ifname, "up"]);
    if let Some(a) = addr {
        ns.ip(&["addr", "add", a, "dev", ifname, "nodad"]);
    }
    common::wait_until(
        "a settled link-local address",
        Duration::from_secs(10),
        || {
            let out = ns.exec(&["ip", "-6", "addr", "show", "dev", ifname, "scope", "link"]);
            out.contains("fe80::") && !out.contains("tentative")
        },
    );
}

#[test]
fn proxy_mode_runs_no_dhcpv6_beside_the_sites_server() {
    if let Err(why) = tools(Site::Dnsmasq) {
        skipped!("SKIPPED proxy_mode_runs_no_dhcpv6_beside_the_sites_server: {why}");
        return;
    }
    let octet = 74;
    let seg = Segment::new(Site::Dnsmasq, octet);
    let p6 = format!("fd00:{octet}::");
    // The client is the inventory's master-0 (MAC and IPv6 address).
    seg.client
        .ip(&["link", "set", "c0", "address", &seg.node_mac()]);
    v6_up(&seg.site, "br0", Some(&format!("{p6}2/64")));
    v6_up(&seg.app, "a0", Some(&format!("{p6}1/64")));
    v6_up(&seg.client, "c0", None);
    // The site's DHCPv6 server: dnsmasq, stateful, its own range.
    let d = seg.dir.path();
    let _site6 = common::Proc(
        seg.site
            .cmd(&[
                "dnsmasq",
                "--no-daemon",
                "--conf-file=/dev/null",
                "--port=0",
                "--interface=br0",
                "--bind-interfaces",
                "--log-dhcp",
                &format!("--dhcp-range={p6}100,{p6}1ff,64,10m"),
                &format!("--dhcp-leasefile={}", d.join("dnsmasq6.leases").display()),
                &format!("--pid-file={}", d.join("dnsmasq6.pid").display()),
                &format!("--log-facility={}", d.join("dnsmasq6.log").display()),
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(d.join("dnsmasq6.stderr")).unwrap())
            .spawn()
            .expect("run dnsmasq (DHCPv6)"),
    );
    let yaml = seg
        .cluster_yaml("proxy", None)
        .replace(
            "interface: a0 }",
            &format!("interface: a0, ipv6: {{ cidr: \"{p6}/64\", applianceIP: \"{p6}1\" }} }}"),
        )
        .replace(
            &format!("ip: {} }}", seg.ip(10)),
            &format!("ip: {}, ipv6: \"{p6}10\" }}", seg.ip(10)),
        );
    assert!(yaml.contains(&format!("ipv6: \"{p6}10\"")), "{yaml}");
    let app = InProc::in_netns(seg.app.name()).start_yaml(&yaml);
    app.wait_log("listening for dhcp on", Duration::from_secs(10));

    let env = dhclient6(&seg, 30).unwrap_or_else(|| {
        panic!(
            "dhclient -6 got no address from the site:\n{}\n{}",
            std::fs::read_to_string(d.join("dhclient6.log")).unwrap_or_default(),
            std::fs::read_to_string(d.join("dnsmasq6.log")).unwrap_or_default()
        )
    });
    let addr = env
        .lines()
        .find_map(|l| l.strip_prefix("new_ip6_address="))
        .unwrap_or_else(|| panic!("no address in {env}"));
    let last = addr.strip_prefix(&p6).unwrap_or_else(|| panic!("{addr}"));
    let last = u16::from_str_radix(last, 16).unwrap_or_else(|e| panic!("{addr}: {e}"));
    assert!(
        (0x100..=0x1ff).contains(&last),
        "{addr} is not from the site's range (the inventory's is {p6}10)"
    );
    // The appliance bound nothing on 547 and runs no DHCPv6 service.
    let sockets = seg.app.exec(&["ss", "-ulnH"]);
    assert!(!sockets.contains(":547"), "{sockets}");
    assert!(
        sockets.contains(":67"),
        "DHCPv4 (proxy) should run: {sockets}"
    );
    assert!(!app.log().contains("dhcp6"), "{}", app.log());
    let st = app.status();
    assert!(st.dhcp6.is_none(), "{:?}", st.dhcp6);
}
