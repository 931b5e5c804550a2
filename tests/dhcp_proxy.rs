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
//!   (`dhcp.mode: proxy`), unless `dhcp.allowOtherServers: true`.
//!
//! Firmware booting through the same segment: tests/netboot_proxy_qemu.rs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::Stdio;
use std::time::{Duration, Instant};

use common::segment::{Segment, Site};
use common::{Appliance, BIN, netns_available};

fn tools(site: Site) -> Result<(), String> {
    netns_available("crcpx")?;
    site.available()?;
    for t in ["dhclient", "python3", "curl"] {
        if !common::have(t) {
            return Err(format!("{t} is not installed"));
        }
    }
    Ok(())
}

/// The appliance's `/status` from inside its namespace.
fn status(seg: &Segment, app: &Appliance) -> serde_json::Value {
    let out = seg.app.exec(&[
        "curl",
        "-sS",
        "--max-time",
        "5",
        &format!("http://{}/status", app.addr("admin")),
    ]);
    serde_json::from_str(&out).unwrap()
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
    let app = Appliance::launch()
        .netns(seg.app.name())
        .ready_timeout(Duration::from_secs(60))
        .start(&seg.cluster_yaml("proxy", None));
    let appliance = seg.ip(1);
    let site_ip = seg.ip(2);
    // The proxy's boot server socket is up.
    assert_eq!(app.addr("dhcp-pxe").port(), 4011);

    // A plain DHCP client: the site's address, nothing from the appliance.
    let lent = dhclient_lease(&seg);
    assert!(in_pool(&seg, &lent), "{lent} is not from the site's pool");
    let st = status(&seg, &app);
    assert!(
        st["dhcp"]["received"]["discover"].as_u64().unwrap() >= 1,
        "the appliance did not see the DISCOVER: {}",
        st["dhcp"]
    );
    for kind in ["offer", "ack", "nak"] {
        assert_eq!(
            st["dhcp"]["sent"][kind], 0,
            "the appliance answered a plain client: {}",
            st["dhcp"]
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
    let st = status(&seg, &app);
    assert_eq!(st["dhcp"]["sent"]["nak"], 0);
    assert_eq!(st["dhcp"]["sent"]["offer"], 1, "{}", st["dhcp"]);
    assert_eq!(st["dhcp"]["sent"]["ack"], 1, "{}", st["dhcp"]);
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
    let app = Appliance::launch()
        .netns(seg.app.name())
        .ready_timeout(Duration::from_secs(60))
        .start_path(&f);
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
