//! A client cannot flood the log (issue #22 item 6, audit D5): thousands
//! of bad datagrams or refused connections from loopback addresses give a
//! handful of WARN lines per reason, each naming a client address, and the
//! lines together account for every one of them (the first is logged, the
//! rest counted in a summary line: here the one written at shutdown).
//!
//! One test per service: DNS (odd opcodes, which hickory's catalog used to
//! warn about once per datagram without the address), DHCP and TFTP
//! (malformed datagrams, logged at debug only before) and the LB (client
//! connections closed for want of a backend). Loopback only, no root.
//!
//! Each runs its appliance in this process (`common::inproc`): the
//! limiters are its serve's (`runtime::context`), so appliances sharing
//! this test process count apart, and its shutdown writes its own
//! summaries into its own log.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::Read as _;
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

use common::inproc::InProc;
use common::only;
use crc_appliance::serve::status::StatusDoc;

/// Datagrams per flood, split over the senders.
const FLOOD: usize = 3000;
/// At most this many WARN lines per reason for a flood.
const HANDFUL: usize = 5;
/// Two loopback senders, outside the test cluster's 127.0.20.0/24.
const SENDERS: [&str; 2] = ["127.0.0.7", "127.0.0.8"];

/// Poll `counter` of the status document until it stops changing (the
/// flood is processed); its value.
fn settled(app: &InProc, counter: impl Fn(&StatusDoc) -> u64) -> u64 {
    let mut last = u64::MAX;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        std::thread::sleep(Duration::from_millis(300));
        let now = counter(&app.status());
        if now == last && now > 0 {
            return now;
        }
        assert!(Instant::now() < deadline, "counter never settled ({now})");
        last = now;
    }
}

/// Stop the appliance (as SIGTERM does: its shutdown writes the summaries
/// not written yet) and return its log.
fn stop(mut app: InProc) -> String {
    assert_eq!(app.stop(), Ok(()), "{}", app.log());
    let log = app.log();
    assert!(
        log.lines().any(|l| l.ends_with("stopped")),
        "no last line:\n{log}"
    );
    log
}

/// How many occurrences a line of reason `key` stands for: a summary line
/// (`…: <key>: N more in the last …`) N; a logged occurrence 1, plus the
/// N of its ` (N more in the last …)` tail.
fn represented(line: &str, key: &str) -> u64 {
    let more = line.find(" more in the last").map(|end| {
        let digits = line[..end]
            .rsplit(|c: char| !c.is_ascii_digit())
            .next()
            .unwrap_or("");
        digits
            .parse::<u64>()
            .unwrap_or_else(|_| panic!("no count in {line:?}"))
    });
    if line.contains(&format!(": {key}: ")) {
        more.unwrap_or_else(|| panic!("a summary without a count: {line:?}"))
    } else {
        1 + more.unwrap_or(0)
    }
}

/// The WARN lines of reason `key`: a handful, each naming a sender, at
/// least one with a count; together they account for `expected`
/// occurrences.
fn check_lines(log: &str, key: &str, senders: &[&str], expected: u64) {
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("WARN") && l.contains(key))
        .collect();
    for l in &lines {
        eprintln!("{key}: {l}");
    }
    assert!(
        !lines.is_empty() && lines.len() <= HANDFUL,
        "{} WARN lines for {key:?} (expected 1..={HANDFUL}):\n{}",
        lines.len(),
        lines
            .iter()
            .take(20)
            .copied()
            .collect::<Vec<_>>()
            .join("\n")
    );
    for l in &lines {
        assert!(
            senders.iter().any(|s| l.contains(&format!("{s}:"))),
            "a line without the client address: {l}"
        );
    }
    assert!(
        lines.iter().any(|l| l.contains(" more in the last ")),
        "no line with a count: {lines:#?}"
    );
    let total: u64 = lines.iter().map(|l| represented(l, key)).sum();
    assert_eq!(total, expected, "{lines:#?}");
}

/// UDP sockets on the two loopback senders.
fn senders() -> Vec<UdpSocket> {
    SENDERS
        .iter()
        .map(|ip| UdpSocket::bind((*ip, 0)).expect("bind a loopback sender"))
        .collect()
}

/// `FLOOD` datagrams (`make(i)`) to `to`, alternating between the senders,
/// pausing now and then so the receive buffer keeps up.
fn flood(to: SocketAddr, make: impl Fn(usize) -> Vec<u8>) {
    let socks = senders();
    for i in 0..FLOOD {
        let _ = socks[i % socks.len()].send_to(&make(i), to);
        if i % 200 == 199 {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// A DNS query for `example.com A` with `opcode` (2 = STATUS, which no
/// server implements).
fn dns_query(id: u16, opcode: u8) -> Vec<u8> {
    let mut m = id.to_be_bytes().to_vec();
    m.extend_from_slice(&[opcode << 3, 0, 0, 1, 0, 0, 0, 0, 0, 0]);
    m.extend_from_slice(b"\x07example\x03com\x00\x00\x01\x00\x01");
    m
}

#[test]
fn a_dns_flood_of_odd_opcodes_gives_a_few_lines_with_addresses_and_counts() {
    let app = InProc::start_yaml(&only("dns:\n  listen: [\"127.0.0.1:0\"]\n"));
    let to = app.addr("dns udp");
    flood(to, |i| dns_query(i as u16, 2));
    let notimp = settled(&app, |s| {
        s.dns
            .as_ref()
            .and_then(|d| d.responses.get("NOTIMP").copied())
            .unwrap_or(0)
    });
    let log = stop(app);
    assert!(
        !log.lines()
            .any(|l| l.contains("WARN") && l.contains("hickory_server")),
        "hickory's per-query warnings are back"
    );
    check_lines(&log, "unimplemented opcode", &SENDERS, notimp);
}

#[test]
fn a_dhcp_flood_of_malformed_datagrams_gives_a_few_lines_with_addresses_and_counts() {
    let app = InProc::start_yaml(&only(
        "dhcp:\n  listen: 127.0.20.1:0\n  leaseFile: \"{dir}/leases.json\"\n",
    ));
    let to = app.addr("dhcp");
    // A BOOTREQUEST-sized datagram without the magic cookie.
    flood(to, |i| {
        let mut d = vec![1u8, 1, 6, 0];
        d.extend_from_slice(&(i as u32).to_be_bytes());
        d.resize(300, 0);
        d
    });
    let malformed = settled(&app, |s| s.dhcp.as_ref().map_or(0, |d| d.malformed));
    let log = stop(app);
    check_lines(&log, "malformed datagram", &SENDERS, malformed);
}

#[test]
fn a_tftp_flood_of_bad_packets_gives_a_few_lines_with_addresses_and_counts() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir(&root).unwrap();
    let file = dir.path().join("cluster.yaml");
    std::fs::write(
        &file,
        only(&format!(
            "pxe:\n  tftpListen: 127.0.0.1:0\n  tftpRoot: {}\n",
            root.display()
        )),
    )
    .unwrap();
    let app = InProc::start_path(&file);
    let to = app.addr("tftp");
    // Opcode 9 does not exist: "malformed request", answered ERROR 4.
    flood(to, |i| {
        let mut d = vec![0u8, 9];
        d.extend_from_slice(&(i as u32).to_be_bytes());
        d
    });
    let malformed = settled(&app, |s| s.tftp.as_ref().map_or(0, |t| t.malformed));
    let log = stop(app);
    check_lines(&log, "malformed request", &SENDERS, malformed);
}

#[test]
fn lb_connections_closed_for_want_of_a_backend_give_a_few_lines() {
    // Backend ports nobody listens on: every backend stays unhealthy.
    let port = common::free_port();
    let yaml = common::loopback_cluster_with(&format!(
        r#"dns: {{ enabled: false }}
dhcp: {{ enabled: false }}
http: {{ enabled: false }}
loadBalancer:
  listen: {{ api: "127.0.0.1:0", machineConfig: "127.0.0.1:0", ingressHttp: "127.0.0.1:0", ingressHttps: "127.0.0.1:0" }}
  backendPorts: {{ api: {port}, machineConfig: {port}, ingressHttp: {port}, ingressHttps: {port} }}
  healthCheck: {{ interval: 1s, timeout: 1s, rise: 1, fall: 1 }}
"#
    ));
    let app = InProc::start_yaml(&yaml);
    let to = app.addr("lb ingress-http");
    let n = 300;
    for _ in 0..n {
        let mut s = TcpStream::connect_timeout(&to, Duration::from_secs(5)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut buf = [0u8; 16];
        // Closed by the LB without a byte.
        assert!(matches!(s.read(&mut buf), Ok(0) | Err(_)));
    }
    let closed = settled(&app, |s| {
        s.lb.as_ref()
            .and_then(|lb| lb.pools.iter().find(|p| p.name.as_str() == "ingress-http"))
            .map_or(0, |p| p.closed_no_backend)
    });
    assert_eq!(closed, n);
    let log = stop(app);
    check_lines(
        &log,
        "ingress-http: no healthy enabled backend",
        &["127.0.0.1"],
        n,
    );
}
