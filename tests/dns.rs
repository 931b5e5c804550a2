//! DNS end to end: in-process appliances queried with `dig` and `kdig` over
//! UDP and TCP, forwarding to a second appliance on loopback, a differential
//! test against knotd serving the `render zone` output (the binary renders
//! it), and a fuzz of the request path (in-process and over the sockets).
//! The network-namespace tests run their appliances in-process inside the
//! namespace (`InProc::in_netns`); one of them proves the namespace is
//! joined. Nothing here spawns `serve`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::path::Path;
use std::time::{Duration, Instant};

use common::dnstools::{Ans, dig, dig_at, kdig, knot_for, norm, parse_dig, start_knot};
use common::inproc::InProc;
use common::{BIN, Netns, run};

const Z: &str = "test.crc.testing";

/// The DNS section of the test cluster (listen on a loopback port 0).
fn dns_section(extra: &str) -> String {
    format!(
        "dns:\n  listen: [\"127.0.0.1:0\"]\n  ttl: 30s\n  negativeTtl: 20s\n  records:\n    - {{ name: registry, type: A, value: 127.0.20.50 }}\n    - {{ name: console, type: CNAME, value: api.{Z}. }}\n    - {{ name: info, type: TXT, value: \"hello world\" }}\n    - {{ name: special.apps, type: A, value: 127.0.20.77 }}\n    - {{ name: a.ent.apps, type: A, value: 127.0.20.78 }}\n{extra}"
    )
}

fn start(extra_dns: &str, more: &str) -> InProc {
    InProc::start_yaml(&common::only(&format!("{}{more}", dns_section(extra_dns))))
}

#[test]
fn authoritative_records_semantics_udp_and_tcp() {
    require_tools!("dig");
    let app = start("", "");
    let a = |name: &str, t: &str| dig(&app, &[name, t]);
    let one = |name: &str, t: &str, want: &[&str]| {
        for proto in ["+notcp", "+tcp"] {
            let r = dig(&app, &[proto, name, t]);
            assert_eq!(r.status, "NOERROR", "{name} {t} {proto}: {}", r.raw);
            assert!(r.aa(), "{name} {t} {proto}: no aa flag: {}", r.raw);
            assert_eq!(r.data(), want, "{name} {t} {proto}: {}", r.raw);
        }
    };
    one(&format!("api.{Z}"), "A", &["127.0.20.1"]);
    one(&format!("api-int.{Z}"), "A", &["127.0.20.1"]);
    one(
        &format!("console-openshift-console.apps.{Z}"),
        "A",
        &["127.0.20.1"],
    );
    one(&format!("a.b.apps.{Z}"), "A", &["127.0.20.1"]);
    one(&format!("bootstrap.{Z}"), "A", &["127.0.20.5"]);
    one(&format!("master-2.{Z}"), "A", &["127.0.20.12"]);
    one(&format!("worker-0.{Z}"), "A", &["127.0.20.20"]);
    one(&format!("etcd-1.{Z}"), "A", &["127.0.20.11"]);
    one(&format!("registry.{Z}"), "A", &["127.0.20.50"]);
    one(&format!("info.{Z}"), "TXT", &["\"hello world\""]);
    one(
        &format!("_etcd-server-ssl._tcp.{Z}"),
        "SRV",
        &[
            &format!("0 10 2380 etcd-0.{Z}."),
            &format!("0 10 2380 etcd-1.{Z}."),
            &format!("0 10 2380 etcd-2.{Z}."),
        ],
    );
    one(Z, "NS", &[&format!("ns1.{Z}.")]);
    one(&format!("ns1.{Z}"), "A", &["127.0.20.1"]);
    // PTR for every node, api and api-int.
    for (ip, names) in [
        ("127.0.20.5", vec![format!("bootstrap.{Z}.")]),
        ("127.0.20.10", vec![format!("master-0.{Z}.")]),
        ("127.0.20.12", vec![format!("master-2.{Z}.")]),
        ("127.0.20.20", vec![format!("worker-0.{Z}.")]),
        (
            "127.0.20.1",
            vec![format!("api-int.{Z}."), format!("api.{Z}.")],
        ),
    ] {
        let r = dig(&app, &["-x", ip]);
        assert_eq!(r.status, "NOERROR", "{}", r.raw);
        assert!(r.aa(), "{}", r.raw);
        assert_eq!(r.data(), names, "{}", r.raw);
    }
    // TTL is the configured 30 s.
    let r = a(&format!("api.{Z}"), "A");
    assert_eq!(
        r.answer[0].split_whitespace().nth(1),
        Some("30"),
        "{}",
        r.raw
    );
    // Case-insensitive names; the question keeps the client's case.
    let r = a("ApI-iNt.TEST.crc.Testing", "A");
    assert_eq!(r.data(), ["127.0.20.1"], "{}", r.raw);
    assert!(r.raw.contains("ApI-iNt.TEST.crc.Testing."), "{}", r.raw);
    let r = a(&format!("FOO.APPS.{}", Z.to_uppercase()), "A");
    assert_eq!(r.data(), ["127.0.20.1"], "{}", r.raw);
    // Unknown name: NXDOMAIN, aa, SOA in authority with the negative TTL.
    for proto in ["+notcp", "+tcp"] {
        let r = dig(&app, &[proto, &format!("nosuch.{Z}"), "A"]);
        assert_eq!(r.status, "NXDOMAIN", "{}", r.raw);
        assert!(r.aa(), "{}", r.raw);
        assert!(r.answer.is_empty(), "{}", r.raw);
        assert_eq!(r.authority.len(), 1, "{}", r.raw);
        let soa: Vec<&str> = r.authority[0].split_whitespace().collect();
        assert_eq!(soa[0], format!("{Z}."));
        assert_eq!(soa[3], "SOA");
        assert_eq!(
            soa.last(),
            Some(&"20"),
            "SOA minimum = negativeTtl: {}",
            r.raw
        );
        assert_eq!(
            soa[1], "20",
            "negative answers are cached for negativeTtl: {}",
            r.raw
        );
    }
    // Wildcard name, other type: NOERROR/NODATA with the SOA (hickory #2905 worked around).
    for t in ["AAAA", "MX", "TXT"] {
        let r = a(&format!("foo.apps.{Z}"), t);
        assert_eq!(r.status, "NOERROR", "foo.apps {t}: {}", r.raw);
        assert!(r.aa() && r.answer.is_empty(), "{}", r.raw);
        assert!(r.authority.iter().any(|l| l.contains(" SOA ")), "{}", r.raw);
    }
    // Existing name, missing type: NODATA; empty non-terminals: NODATA.
    for (n, t) in [
        (format!("api.{Z}"), "AAAA"),
        (format!("apps.{Z}"), "A"),
        (format!("_tcp.{Z}"), "SRV"),
    ] {
        let r = a(&n, t);
        assert_eq!(r.status, "NOERROR", "{n} {t}: {}", r.raw);
        assert!(r.answer.is_empty(), "{}", r.raw);
    }
    // Unknown reverse name: NXDOMAIN in the reverse zone.
    let r = dig(&app, &["-x", "127.0.20.99"]);
    assert_eq!(r.status, "NXDOMAIN", "{}", r.raw);
    assert!(r.aa(), "{}", r.raw);
    // No upstreamDNS: anything else is REFUSED.
    let r = a("www.example.org", "A");
    assert_eq!(r.status, "REFUSED", "{}", r.raw);
    assert!(!r.aa());
    // kdig agrees (UDP and TCP).
    if common::have("kdig") {
        let addr = app.addr("dns udp");
        for proto in ["+notcp", "+tcp"] {
            let r = kdig(addr, &[proto, &format!("x.apps.{Z}"), "A"]);
            assert_eq!(r.status, "NOERROR", "{}", r.raw);
            assert!(r.aa(), "{}", r.raw);
            assert_eq!(r.data(), ["127.0.20.1"], "{}", r.raw);
            let r = kdig(addr, &[proto, &format!("x.apps.{Z}"), "AAAA"]);
            assert_eq!(r.status, "NOERROR", "{}", r.raw);
        }
    }
    assert_eq!(app.addr("dns udp").port(), app.addr("dns tcp").port());
}

#[test]
fn edns_and_truncation() {
    require_tools!("dig");
    // 24 TXT records of 200 bytes at one name: ~5 KB, far beyond 512 bytes.
    let mut extra = String::new();
    for i in 0..24 {
        extra.push_str(&format!(
            "    - {{ name: big, type: TXT, value: \"{i:02}{}\" }}\n",
            "x".repeat(198)
        ));
    }
    let app = start(&extra, "");
    let name = format!("big.{Z}");
    // Plain UDP without EDNS: TC set, partial or empty answer.
    let r = dig(&app, &["+noedns", "+ignore", &name, "TXT"]);
    assert!(r.tc(), "no tc over 512-byte UDP: {}", r.raw);
    assert!(r.answer.len() < 24, "{}", r.raw);
    assert!(!r.opt, "OPT without EDNS in the query: {}", r.raw);
    // TCP: everything.
    let r = dig(&app, &["+noedns", "+tcp", &name, "TXT"]);
    assert!(!r.tc(), "{}", r.raw);
    assert_eq!(r.answer.len(), 24, "{}", r.raw);
    // dig retries over TCP by itself after TC.
    let r = dig(&app, &["+noedns", &name, "TXT"]);
    assert_eq!(r.answer.len(), 24, "{}", r.raw);
    // EDNS with a big buffer: still at most 1232 bytes over UDP (DNS Flag
    // Day 2020), so TC with an empty answer and the OPT (RFC 6891 6.1.1).
    let r = dig(&app, &["+bufsize=8192", "+ignore", &name, "TXT"]);
    assert!(r.tc(), "{}", r.raw);
    assert!(r.opt, "no OPT record in the EDNS answer: {}", r.raw);
    assert!(r.answer.is_empty(), "{}", r.raw);
    // EDNS with a small buffer: truncated again, OPT still present.
    let r = dig(&app, &["+bufsize=1232", "+ignore", &name, "TXT"]);
    assert!(r.tc(), "{}", r.raw);
    assert!(r.opt, "{}", r.raw);
    // A small answer with EDNS carries OPT too.
    let r = dig(&app, &["+bufsize=1232", &format!("api.{Z}"), "A"]);
    assert!(r.opt && r.raw.contains("udp: "), "{}", r.raw);
}

/// A cluster file for an upstream appliance serving `up.testing`.
fn upstream() -> InProc {
    let yaml =
        common::only(&dns_section("")).replace("baseDomain: crc.testing", "baseDomain: up.testing");
    InProc::start_yaml(&yaml)
}

#[test]
fn forwards_other_names_to_loopback_upstream() {
    require_tools!("dig");
    let up = upstream();
    let up_addr = up.addr("dns udp");
    let yaml = common::only(&format!(
        "{}admin:\n  listen: 127.0.0.1:0\n",
        dns_section("")
    ))
    .replace(
        "  applianceIP: 127.0.20.1\n",
        &format!("  applianceIP: 127.0.20.1\n  upstreamDNS: [\"{up_addr}\"]\n"),
    );
    let app = InProc::start_yaml(&yaml);
    // Our own zone stays authoritative.
    let r = dig(&app, &[&format!("api.{Z}"), "A"]);
    assert!(r.aa(), "{}", r.raw);
    // The upstream's zone is forwarded: answered, but not authoritative.
    for proto in ["+notcp", "+tcp"] {
        let r = dig(&app, &["+recurse", proto, "api.test.up.testing", "A"]);
        assert_eq!(r.status, "NOERROR", "{}", r.raw);
        assert_eq!(r.data(), ["127.0.20.1"], "{}", r.raw);
        assert!(
            !r.aa(),
            "forwarded answer must not be authoritative: {}",
            r.raw
        );
    }
    // Upstream NXDOMAIN passes through.
    let r = dig(&app, &["+recurse", "nosuch.test.up.testing", "A"]);
    assert_eq!(r.status, "NXDOMAIN", "{}", r.raw);
    // Metrics count the forwarded queries and responses by rcode.
    let (code, body, _) = run(
        "curl",
        &["-sf", &format!("http://{}/metrics", app.addr("admin"))],
    );
    if code == 0 {
        let fwd: u64 = body
            .lines()
            .find_map(|l| l.strip_prefix("crc_appliance_dns_forwarded_total "))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        assert!(fwd >= 3, "{body}");
        assert!(
            body.contains("crc_appliance_dns_responses_total{rcode=\"NXDomain\"}")
                || body.contains("crc_appliance_dns_responses_total{rcode=\"NXDOMAIN\"}"),
            "{body}"
        );
        let dns = app.status().dns.expect("a dns section");
        assert!(dns.forwarded >= 3, "{dns:?}");
        assert_eq!(dns.upstream, [up_addr.to_string()], "{dns:?}");
    }
}

/// The recursion ACL, in-process with forged source addresses: in-zone
/// names are served to anyone; out-of-zone names are forwarded only for
/// loopback and network.cidr clients.
#[test]
fn recursion_acl_by_client_address() {
    require_tools!("dig");
    let up = upstream();
    let up_addr = up.addr("dns udp");
    let yaml = common::only(&dns_section("")).replace(
        "  applianceIP: 127.0.20.1\n",
        &format!("  applianceIP: 127.0.20.1\n  upstreamDNS: [\"{up_addr}\"]\n"),
    );
    let plan = plan_of(&yaml);
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let core = crc_appliance::services::dns::handler::build(&plan).unwrap();
        let ask = |name: &str, src: &str| {
            let q = query(0x1234, name, 1, true);
            let src: SocketAddr = src.parse().unwrap();
            let core = &core;
            async move {
                core.handle(&q, src, hickory_server::net::xfer::Protocol::Udp)
                    .await
                    .expect("an answer")
            }
        };
        let rcode = |b: &[u8]| b[3] & 0x0f;
        let ancount = |b: &[u8]| u16::from_be_bytes([b[6], b[7]]);
        // In-zone: answered to a foreign client.
        let r = ask(&format!("api.{Z}."), "192.0.2.7:5353").await;
        assert_eq!((rcode(&r), ancount(&r)), (0, 1));
        assert_eq!(&r[..2], &[0x12, 0x34]);
        assert!(r[2] & 0x04 != 0, "aa");
        // Out-of-zone from outside the network: REFUSED, nothing forwarded.
        let r = ask("api.test.up.testing.", "192.0.2.7:5353").await;
        assert_eq!(rcode(&r), 5, "REFUSED");
        // From the cluster network and from loopback: forwarded.
        for src in ["127.0.20.33:5353", "127.0.0.1:5353", "[::1]:5353"] {
            let r = ask("api.test.up.testing.", src).await;
            assert_eq!((rcode(&r), ancount(&r)), (0, 1), "from {src}");
        }
        assert_eq!(
            core.stats
                .forwarded
                .load(std::sync::atomic::Ordering::Relaxed),
            3
        );
        assert_eq!(
            core.stats
                .refused_recursion
                .load(std::sync::atomic::Ordering::Relaxed),
            1
        );
    });
}

fn plan_of(yaml: &str) -> crc_appliance::plan::Plan {
    crc_appliance::config::from_str(
        yaml,
        std::path::Path::new("/tmp"),
        std::path::Path::new("cluster.yaml"),
    )
    .unwrap()
}

/// A minimal DNS query message (no EDNS).
fn query(id: u16, name: &str, qtype: u16, rd: bool) -> Vec<u8> {
    let mut m = Vec::new();
    m.extend_from_slice(&id.to_be_bytes());
    m.push(if rd { 0x01 } else { 0x00 });
    m.push(0);
    m.extend_from_slice(&[0, 1, 0, 0, 0, 0, 0, 0]);
    for label in name.trim_end_matches('.').split('.') {
        m.push(label.len() as u8);
        m.extend_from_slice(label.as_bytes());
    }
    m.push(0);
    m.extend_from_slice(&qtype.to_be_bytes());
    m.extend_from_slice(&1u16.to_be_bytes());
    m
}

/// Deterministic xorshift64*.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Random and mutated messages: truncations, bit flips, bogus counts,
/// compression loops, huge labels, random bytes.
fn fuzz_cases(seed: u64, n: usize) -> Vec<Vec<u8>> {
    let mut rng = Rng(seed);
    let seeds = [
        query(1, &format!("api.{Z}"), 1, false),
        query(2, &format!("foo.apps.{Z}"), 28, false),
        query(3, &format!("_etcd-server-ssl._tcp.{Z}"), 33, true),
        query(4, "10.20.0.127.in-addr.arpa", 12, false),
        query(5, "www.example.org", 1, true),
        query(6, Z, 252, false), // AXFR
        query(7, Z, 255, false), // ANY
    ];
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let base = &seeds[i % seeds.len()];
        let mut m = base.clone();
        match rng.below(8) {
            0 => {
                let len = rng.below(600);
                m = (0..len).map(|_| rng.next() as u8).collect();
            }
            1 => m.truncate(rng.below(m.len() + 1)),
            2 => {
                for _ in 0..1 + rng.below(6) {
                    let p = rng.below(m.len());
                    m[p] ^= 1 << rng.below(8);
                }
            }
            3 => {
                // Bogus section counts.
                for b in &mut m[4..12] {
                    *b = rng.next() as u8;
                }
            }
            4 => {
                // Compression pointer loop in the question name.
                m.truncate(12);
                m.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1]);
            }
            5 => {
                // Append garbage additional records (fake OPT, etc.).
                m[11] = 1 + rng.below(3) as u8;
                for _ in 0..rng.below(40) {
                    m.push(rng.next() as u8);
                }
            }
            6 => {
                // Random opcode/flags, including UPDATE and responses.
                m[2] = rng.next() as u8;
                m[3] = rng.next() as u8;
            }
            _ => {
                // Over-long label and name.
                m.truncate(12);
                for _ in 0..rng.below(10) {
                    m.push(63);
                    m.extend((0..63).map(|_| b'a' + rng.below(26) as u8));
                }
                m.extend_from_slice(&[0, 0, 1, 0, 1]);
            }
        }
        out.push(m);
    }
    out
}

#[test]
fn fuzz_request_path_in_process() {
    let plan = plan_of(&common::only(&dns_section("")));
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let core = crc_appliance::services::dns::handler::build(&plan).unwrap();
        let src: SocketAddr = "127.0.20.9:4444".parse().unwrap();
        let mut answered = 0;
        for (i, m) in fuzz_cases(0x05ee_dd15, 20_000).iter().enumerate() {
            for proto in [
                hickory_server::net::xfer::Protocol::Udp,
                hickory_server::net::xfer::Protocol::Tcp,
            ] {
                if let Some(r) = core.handle(m, src, proto).await {
                    answered += 1;
                    assert!(r.len() >= 12, "case {i}: short answer");
                    assert_eq!(r[..2], m[..2], "case {i}: id not echoed");
                    assert!(r[2] & 0x80 != 0, "case {i}: QR not set");
                    if proto == hickory_server::net::xfer::Protocol::Udp {
                        assert!(r.len() <= 65_535);
                    }
                }
            }
        }
        assert!(answered > 1000, "only {answered} answers");
        assert!(
            core.stats
                .malformed
                .load(std::sync::atomic::Ordering::Relaxed)
                > 1000
        );
        // Still answers correctly afterwards.
        let r = core
            .handle(
                &query(9, &format!("api.{Z}"), 1, false),
                src,
                hickory_server::net::xfer::Protocol::Udp,
            )
            .await
            .unwrap();
        assert_eq!(r[3] & 0x0f, 0);
        assert_eq!(u16::from_be_bytes([r[6], r[7]]), 1);
    });
}

#[test]
fn malformed_packets_over_the_wire_do_not_stop_the_server() {
    require_tools!("dig");
    let app = start("", "");
    let udp_addr = app.addr("dns udp");
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    for m in fuzz_cases(42, 3000) {
        let _ = sock.send_to(&m, udp_addr);
    }
    // Drain whatever came back; nothing to assert on the junk itself.
    let mut buf = [0u8; 65_535];
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline && sock.recv_from(&mut buf).is_ok() {}
    // TCP: garbage frames, a length prefix with no body, a half frame.
    for junk in [
        &b"\x00\x05hello"[..],
        &b"\xff\xff"[..],
        &b"\x00"[..],
        &b"GET / HTTP/1.1\r\n\r\n"[..],
    ] {
        if let Ok(mut s) = TcpStream::connect(app.addr("dns tcp")) {
            use std::io::Write;
            let _ = s.write_all(junk);
        }
    }
    for m in fuzz_cases(7, 50) {
        if let Ok(mut s) = TcpStream::connect(app.addr("dns tcp")) {
            use std::io::Write;
            let mut f = (m.len() as u16).to_be_bytes().to_vec();
            f.extend_from_slice(&m);
            let _ = s.write_all(&f);
        }
    }
    for proto in ["+notcp", "+tcp"] {
        let r = dig(&app, &[proto, &format!("api.{Z}"), "A"]);
        assert_eq!(r.data(), ["127.0.20.1"], "{}", r.raw);
    }
    assert!(!app.log().contains("panicked"), "{}", app.log());
}

// ---------------------------------------------------------------- knot

#[test]
fn differential_against_knot_serving_render_zone() {
    require_tools!("dig", "knotd");
    let app = start("", "");
    // `render zone` on the same cluster file, one file per $ORIGIN.
    let (code, text, err) = run(
        BIN,
        &[
            "render",
            "--cluster",
            app.cluster_file.to_str().unwrap(),
            "zone",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let mut zones = Vec::new();
    for chunk in text.split("$ORIGIN ").filter(|c| !c.trim().is_empty()) {
        let origin = chunk.split_whitespace().next().unwrap().to_string();
        zones.push((origin, format!("$ORIGIN {chunk}")));
    }
    assert!(zones.len() >= 2, "{text}");
    let dir = tempfile::tempdir().unwrap();
    let knot = start_knot(dir.path(), &zones);
    let knot_addr: SocketAddr = ([127, 0, 0, 1], knot.port).into();
    let ours = app.addr("dns udp");
    let mut queries: Vec<(String, &str)> = vec![
        (Z.to_string(), "SOA"),
        (Z.to_string(), "NS"),
        (format!("ns1.{Z}"), "A"),
        (format!("api.{Z}"), "A"),
        (format!("API.{Z}"), "A"),
        (format!("api-int.{Z}"), "A"),
        (format!("api.{Z}"), "AAAA"),
        (format!("api.{Z}"), "TXT"),
        (format!("foo.apps.{Z}"), "A"),
        (format!("a.b.c.apps.{Z}"), "A"),
        (format!("foo.apps.{Z}"), "AAAA"),
        (format!("foo.apps.{Z}"), "MX"),
        (format!("apps.{Z}"), "A"),
        (format!("bootstrap.{Z}"), "A"),
        (format!("master-0.{Z}"), "A"),
        (format!("master-1.{Z}"), "A"),
        (format!("master-2.{Z}"), "A"),
        (format!("worker-0.{Z}"), "A"),
        (format!("etcd-0.{Z}"), "A"),
        (format!("etcd-2.{Z}"), "A"),
        (format!("etcd-3.{Z}"), "A"),
        (format!("_etcd-server-ssl._tcp.{Z}"), "SRV"),
        (format!("_tcp.{Z}"), "SRV"),
        (format!("registry.{Z}"), "A"),
        (format!("console.{Z}"), "CNAME"),
        (format!("console.{Z}"), "A"),
        (format!("info.{Z}"), "TXT"),
        (format!("nosuch.{Z}"), "A"),
        (format!("deep.nosuch.{Z}"), "AAAA"),
        // RFC 4592 corner cases: names next to explicit records under *.apps.
        (format!("special.apps.{Z}"), "A"),
        (format!("special.apps.{Z}"), "AAAA"),
        (format!("y.special.apps.{Z}"), "A"),
        (format!("y.special.apps.{Z}"), "AAAA"),
        (format!("ent.apps.{Z}"), "A"),
        (format!("ent.apps.{Z}"), "AAAA"),
        (format!("a.ent.apps.{Z}"), "A"),
        (format!("z.ent.apps.{Z}"), "A"),
        (format!("*.apps.{Z}"), "A"),
        ("20.0.127.in-addr.arpa".to_string(), "SOA"),
        ("20.0.127.in-addr.arpa".to_string(), "NS"),
        ("99.20.0.127.in-addr.arpa".to_string(), "PTR"),
    ];
    for last in [1, 5, 10, 11, 12, 20] {
        queries.push((format!("{last}.20.0.127.in-addr.arpa"), "PTR"));
    }
    let mut mismatches = Vec::new();
    for (q, t) in &queries {
        for proto in ["+notcp", "+tcp"] {
            let a = dig_at(ours, &[proto, q, t]);
            let b = dig_at(knot_addr, &[proto, q, t]);
            let mut aa = a.answer.clone();
            let mut bb = b.answer.clone();
            aa.sort();
            bb.sort();
            if a.status != b.status || aa != bb || a.aa() != b.aa() {
                mismatches.push(format!(
                    "{q} {t} {proto}: ours {} aa={} {aa:?} / knot {} aa={} {bb:?}",
                    a.status,
                    a.aa(),
                    b.status,
                    b.aa()
                ));
            }
            // Negative answers: both carry the zone's SOA.
            if a.answer.is_empty() && a.status != "REFUSED" {
                // Same SOA line, TTL included (RFC 2308: min(TTL, MINIMUM)).
                let soa = |x: &Ans| {
                    x.authority
                        .iter()
                        .filter(|l| l.contains(" SOA "))
                        .cloned()
                        .collect::<Vec<_>>()
                };
                if soa(&a) != soa(&b) {
                    mismatches.push(format!(
                        "{q} {t} {proto}: SOA in authority differs:\n{}\n{}",
                        a.raw, b.raw
                    ));
                }
            }
        }
    }
    assert!(
        mismatches.is_empty(),
        "differences from knot:\n{}",
        mismatches.join("\n")
    );
}

/// The packet cache answers exactly what the uncached path answered, with
/// the new query's ID, and keeps the client's spelling of the name apart.
#[test]
fn packet_cache_is_transparent() {
    use hickory_server::net::xfer::Protocol;
    use std::sync::atomic::Ordering::Relaxed;
    let plan = plan_of(&common::only(&dns_section("")));
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let core = crc_appliance::services::dns::handler::build(&plan).unwrap();
        let src: SocketAddr = "192.0.2.1:53000".parse().unwrap();
        for (name, qtype) in [
            (format!("api.{Z}"), 1),
            (format!("x.apps.{Z}"), 28),
            (format!("nosuch.{Z}"), 1),
        ] {
            for proto in [Protocol::Udp, Protocol::Tcp] {
                let a = core
                    .handle(&query(1, &name, qtype, false), src, proto)
                    .await
                    .unwrap();
                let hits = core.stats.cache_hits.load(Relaxed);
                let b = core
                    .handle(&query(2, &name, qtype, false), src, proto)
                    .await
                    .unwrap();
                assert_eq!(core.stats.cache_hits.load(Relaxed), hits + 1, "{name}");
                assert_eq!(&a[..2], &[0, 1]);
                assert_eq!(&b[..2], &[0, 2]);
                assert_eq!(a[2..], b[2..], "{name}");
            }
        }
        // Another spelling is its own entry and echoes its own case.
        let q = query(3, &format!("API.{Z}"), 1, false);
        let r = core.handle(&q, src, Protocol::Udp).await.unwrap();
        assert_eq!(&r[12..16], b"\x03API");
        assert!(core.cache_entries() >= 6);
    });
}

/// The recursion ACL end to end, through real sockets: both appliances run
/// in a private network namespace whose `lo` carries an address inside
/// `network.cidr` (10.77.0.1/24) and one outside it (10.88.0.2); `dig -b`
/// picks the client address.
#[test]
fn recursion_acl_end_to_end_in_a_netns() {
    require_tools!("dig");
    require_netns!("dnsacl");
    let ns = common::Netns::new(common::unique_name("dnsacl"));
    ns.ip(&["addr", "add", "10.77.0.1/24", "dev", "lo"]);
    ns.ip(&["addr", "add", "10.88.0.2/32", "dev", "lo"]);
    let in_netns = |yaml: String| {
        let yaml = yaml
            .replace("127.0.20.", "10.77.0.")
            .replace("127.0.0.1:0", "10.77.0.1:0");
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("cluster.yaml");
        std::fs::write(&f, yaml).unwrap();
        InProc::in_netns(ns.name()).start_file(dir, f)
    };
    let up = in_netns(
        common::only(&dns_section("")).replace("baseDomain: crc.testing", "baseDomain: up.testing"),
    );
    let up_addr = up.addr("dns udp");
    let app = in_netns(common::only(&dns_section("")).replace(
        "  applianceIP: 127.0.20.1\n",
        &format!("  applianceIP: 127.0.20.1\n  upstreamDNS: [\"{up_addr}\"]\n"),
    ));
    let addr = app.addr("dns udp");
    assert_eq!(addr.ip().to_string(), "10.77.0.1");
    let dig_from = |src: &str, args: &[&str]| {
        let port = addr.port().to_string();
        let mut all = vec![
            "dig",
            "+time=3",
            "+tries=2",
            "+nocookie",
            "-b",
            src,
            "-p",
            &port,
            "@10.77.0.1",
        ];
        all.extend_from_slice(args);
        parse_dig(&ns.exec(&all))
    };
    for proto in ["+notcp", "+tcp"] {
        // The cluster zone is answered to anyone.
        let r = dig_from("10.88.0.2", &[proto, &format!("api.{Z}"), "A"]);
        assert_eq!((r.status.as_str(), r.aa()), ("NOERROR", true), "{}", r.raw);
        assert_eq!(r.data(), ["10.77.0.1"], "{}", r.raw);
        // Other names: refused to a client outside the cidr ...
        let r = dig_from("10.88.0.2", &[proto, "api.test.up.testing", "A"]);
        assert_eq!(r.status, "REFUSED", "{}", r.raw);
        assert!(r.answer.is_empty(), "{}", r.raw);
        // ... forwarded for one inside it.
        let r = dig_from("10.77.0.1", &[proto, "api.test.up.testing", "A"]);
        assert_eq!(r.status, "NOERROR", "{}", r.raw);
        assert_eq!(r.data(), ["10.77.0.1"], "{}", r.raw);
        assert!(!r.aa(), "{}", r.raw);
        // RA: recursion is available to a client that may recurse (so dig
        // does not warn), not to one outside the cidr; twice each, so the
        // packet cache's shared answer is checked too.
        for _ in 0..2 {
            let r = dig_from("10.77.0.1", &[proto, &format!("api.{Z}"), "A"]);
            assert!(r.aa() && r.ra(), "{}", r.raw);
            assert!(
                !r.raw.contains("recursion requested but not available"),
                "{}",
                r.raw
            );
            let r = dig_from("10.88.0.2", &[proto, &format!("api.{Z}"), "A"]);
            assert!(r.aa() && !r.ra(), "{}", r.raw);
        }
    }
    // Without an upstream no client may recurse: no RA.
    let port = up_addr.port().to_string();
    let r = parse_dig(&ns.exec(&[
        "dig",
        "+time=3",
        "+tries=2",
        "+nocookie",
        "-b",
        "10.77.0.1",
        "-p",
        &port,
        "@10.77.0.1",
        "api.test.up.testing",
        "A",
    ]));
    assert!(r.aa() && !r.ra(), "{}", r.raw);
}

/// The in-process harness inside a network namespace (`InProc::in_netns`):
/// the appliance binds the namespace's segment address (which the root
/// namespace does not have) and a loopback port this test holds in the
/// root namespace (so it can only have bound the namespace's own `lo`); a
/// client in another namespace, across a veth pair, gets answers over UDP
/// and TCP, and the held port in the root namespace is still this test's.
#[test]
fn inproc_appliance_in_a_netns_binds_and_answers_there_only() {
    require_tools!("dig");
    require_netns!("dnsns");
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = held.local_addr().unwrap().port();
    let base = common::unique_name("dnsns");
    let tag = &base["dnsns".len()..];
    let (cli, srv) = (
        Netns::new(format!("{base}c")),
        Netns::new(format!("{base}s")),
    );
    let (ifs, ifc) = (format!("dn{tag}s"), format!("dn{tag}c"));
    common::veth(&ifs, &srv, &ifc, &cli);
    for (ns, ifname, addr) in [(&srv, &ifs, "10.78.0.1/24"), (&cli, &ifc, "10.78.0.2/24")] {
        ns.ip(&["addr", "add", addr, "dev", ifname]);
        ns.ip(&["link", "set", ifname, "up"]);
    }
    let yaml = common::only(&dns_section(""))
        .replace("127.0.20.", "10.78.0.")
        .replace(
            "listen: [\"127.0.0.1:0\"]",
            &format!("listen: [\"10.78.0.1:53\", \"127.0.0.1:{port}\"]"),
        );
    let app = InProc::in_netns(srv.name()).start_yaml(&yaml);
    for l in ["udp on 10.78.0.1:53", &format!("tcp on 127.0.0.1:{port}")] {
        assert!(
            app.log().contains(&format!("listening for dns {l}")),
            "{}",
            app.log()
        );
    }
    let dig_in = |ns: &Netns, server: &str, proto: &str| {
        let p = if server == "10.78.0.1" {
            "53".to_string()
        } else {
            port.to_string()
        };
        let at = format!("@{server}");
        let name = format!("api.{Z}");
        let args = [
            "dig",
            "+norecurse",
            "+time=3",
            "+tries=2",
            "+nocookie",
            proto,
            "-p",
            &p,
            &at,
            &name,
            "A",
        ];
        parse_dig(&ns.exec(&args))
    };
    for proto in ["+notcp", "+tcp"] {
        // From the client namespace, to the segment address.
        let r = dig_in(&cli, "10.78.0.1", proto);
        assert_eq!((r.status.as_str(), r.aa()), ("NOERROR", true), "{}", r.raw);
        assert_eq!(r.data(), ["10.78.0.1"], "{}", r.raw);
        // On the namespace's own loopback, the port the root one holds.
        let r = dig_in(&srv, "127.0.0.1", proto);
        assert_eq!(r.data(), ["10.78.0.1"], "{}", r.raw);
    }
    // The root namespace's 127.0.0.1:<port> is still the test's listener.
    let _client = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let (_, peer) = held.accept().unwrap();
    assert!(peer.ip().is_loopback());
    // The appliance's threads are in the namespace; this test's thread is
    // not. (Other tests' appliances run in this process too: this one's are
    // found by their namespace.)
    let ns_of = |p: &Path| std::fs::read_link(p).unwrap().display().to_string();
    let want = {
        use std::os::unix::fs::MetadataExt as _;
        let ino = std::fs::metadata(format!("/var/run/netns/{}", srv.name()))
            .unwrap()
            .ino();
        format!("net:[{ino}]")
    };
    assert_ne!(ns_of(Path::new("/proc/thread-self/ns/net")), want);
    let mut seen = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap() {
        let task = task.unwrap().path();
        if std::fs::read_link(task.join("ns/net")).is_ok_and(|l| l.display().to_string() == want) {
            let comm = std::fs::read_to_string(task.join("comm")).unwrap_or_default();
            seen.push(comm.trim().to_string());
        }
    }
    // serve's thread, the runtime's, and the DNS service's own UDP
    // workers, which inherit the namespace of the thread that started them.
    let named = |p: &str| seen.iter().filter(|c| c.starts_with(p)).count();
    assert!(
        named("appliance") >= 3 && named("dns-udp") >= 1,
        "threads in the namespace: {seen:?}"
    );
}

// ------------------------------------------------- issue #17 conformance

/// `query` with an OPT record advertising `payload` bytes (EDNS 0).
fn edns_query(id: u16, name: &str, qtype: u16, payload: u16) -> Vec<u8> {
    let mut m = query(id, name, qtype, false);
    m[11] = 1;
    m.extend_from_slice(&[0, 0, 41]);
    m.extend_from_slice(&payload.to_be_bytes());
    m.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
    m
}

/// One UDP exchange with raw bytes; the answer (panics after 3 s).
fn raw_udp(addr: SocketAddr, msg: &[u8]) -> Vec<u8> {
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    sock.send_to(msg, addr).unwrap();
    let mut buf = [0u8; 65_535];
    let (n, _) = sock.recv_from(&mut buf).expect("an answer");
    buf[..n].to_vec()
}

/// Offset just past the (single, uncompressed) question of `m`.
fn question_end(m: &[u8]) -> usize {
    let mut p = 12;
    while m[p] != 0 {
        p += 1 + m[p] as usize;
    }
    p + 5
}

fn counts(m: &[u8]) -> [u16; 4] {
    [4, 6, 8, 10].map(|i| u16::from_be_bytes([m[i], m[i + 1]]))
}

/// A fake upstream resolver on 127.0.0.1: answers A with 127.0.20.99 and
/// PTR with `outside.example.`, anything else with NOERROR/no data. It
/// stops when dropped.
struct FakeUpstream {
    addr: SocketAddr,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl FakeUpstream {
    fn start() -> FakeUpstream {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        let addr = sock.local_addr().unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let st = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while !st.load(std::sync::atomic::Ordering::Relaxed) {
                let Ok((n, src)) = sock.recv_from(&mut buf) else {
                    continue;
                };
                let q = &buf[..n];
                if n < 17 {
                    continue;
                }
                let qe = question_end(q);
                let qtype = u16::from_be_bytes([q[qe - 4], q[qe - 3]]);
                let rdata: Option<Vec<u8>> = match qtype {
                    1 => Some(vec![127, 0, 20, 99]),
                    12 => Some(b"\x07outside\x07example\x00".to_vec()),
                    _ => None,
                };
                let mut r = q[..2].to_vec();
                r.extend_from_slice(&[0x81, 0x80, 0, 1, 0, u8::from(rdata.is_some()), 0, 0, 0, 0]);
                r.extend_from_slice(&q[12..qe]);
                if let Some(d) = rdata {
                    r.extend_from_slice(&[0xc0, 12]);
                    r.extend_from_slice(&qtype.to_be_bytes());
                    r.extend_from_slice(&[0, 1, 0, 0, 0, 60]);
                    r.extend_from_slice(&(d.len() as u16).to_be_bytes());
                    r.extend_from_slice(&d);
                }
                let _ = sock.send_to(&r, src);
            }
        });
        FakeUpstream {
            addr,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for FakeUpstream {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// An appliance forwarding to `upstreams` with `dns.forwardTimeout`.
fn start_forwarding(upstreams: &[SocketAddr], timeout: &str, extra_dns: &str) -> InProc {
    let list: Vec<String> = upstreams.iter().map(|a| format!("\"{a}\"")).collect();
    let yaml = common::only(&format!(
        "{}  forwardTimeout: {timeout}\n",
        dns_section(extra_dns)
    ))
    .replace(
        "  applianceIP: 127.0.20.1\n",
        &format!(
            "  applianceIP: 127.0.20.1\n  upstreamDNS: [{}]\n",
            list.join(", ")
        ),
    );
    InProc::start_yaml(&yaml)
}

/// RFC 6891 6.1.1 and DNS Flag Day 2020: a UDP answer is at most 1232
/// bytes whatever the client's buffer; a truncated one is header, question
/// and OPT with TC set and nothing after the OPT, byte for byte the length
/// Knot sends.
#[test]
fn udp_truncation_is_header_question_opt_capped_at_1232_like_knot() {
    require_tools!("dig", "knotd");
    let mut extra = String::new();
    for (name, n) in [("mid", 8), ("big", 24)] {
        for i in 0..n {
            extra.push_str(&format!(
                "    - {{ name: {name}, type: TXT, value: \"{i:02}{}\" }}\n",
                "x".repeat(198)
            ));
        }
    }
    let app = start(&extra, "");
    let dir = tempfile::tempdir().unwrap();
    let knot = knot_for(&app, dir.path());
    let knot_addr: SocketAddr = ([127, 0, 0, 1], knot.port).into();
    let ours = app.addr("dns udp");
    for (name, payload) in [("mid", 4096), ("big", 4096), ("big", 1232), ("mid", 1500)] {
        let q = edns_query(0x4242, &format!("{name}.{Z}"), 16, payload);
        let a = raw_udp(ours, &q);
        let k = raw_udp(knot_addr, &q);
        let what = format!("{name} TXT bufsize {payload}");
        assert!(a[2] & 0x02 != 0, "{what}: no TC ({} bytes)", a.len());
        assert!(a.len() <= 1232, "{what}: {} bytes", a.len());
        assert_eq!(counts(&a), [1, 0, 0, 1], "{what}: counts");
        assert_eq!(
            a.len(),
            question_end(&a) + 11,
            "{what}: bytes after the OPT record"
        );
        assert_eq!(a.len(), k.len(), "{what}: knot's TC answer differs in size");
        assert_eq!(counts(&a), counts(&k), "{what}: knot's counts differ");
    }
    // dig sees the same: TC, empty answer, OPT present, no parse warning.
    for bufsize in ["+bufsize=4096", "+bufsize=1232"] {
        let r = dig(&app, &[bufsize, "+ignore", &format!("mid.{Z}"), "TXT"]);
        assert!(r.tc() && r.opt && r.answer.is_empty(), "{}", r.raw);
        assert!(!r.raw.contains("Warning"), "{}", r.raw);
        assert!(r.raw.contains("udp: 1232"), "{}", r.raw);
    }
    // Without EDNS: 512 bytes, TC, no OPT.
    let a = raw_udp(ours, &query(7, &format!("mid.{Z}"), 16, false));
    assert!(a[2] & 0x02 != 0 && a.len() == question_end(&a));
    // Over TCP the whole answer.
    let r = dig(&app, &["+tcp", &format!("mid.{Z}"), "TXT"]);
    assert_eq!(r.answer.len(), 8, "{}", r.raw);
}

/// A dead upstream costs at most `forwardTimeout` in total (here 1 s), not
/// 3 × forwardTimeout, so SERVFAIL reaches the client before its 5 s stub
/// timeout; with two dead upstreams too.
#[test]
fn forwarding_servfails_within_forward_timeout() {
    require_tools!("dig");
    let dead1 = UdpSocket::bind("127.0.0.1:0").unwrap(); // never reads
    let dead2 = UdpSocket::bind("127.0.0.1:0").unwrap();
    for ups in [
        vec![dead1.local_addr().unwrap()],
        vec![dead1.local_addr().unwrap(), dead2.local_addr().unwrap()],
    ] {
        let app = start_forwarding(&ups, "1s", "");
        for proto in ["+notcp", "+tcp"] {
            let t = Instant::now();
            let r = dig(
                &app,
                &[
                    "+recurse",
                    "+time=5",
                    "+tries=1",
                    proto,
                    "www.example.org",
                    "A",
                ],
            );
            let took = t.elapsed();
            assert_eq!(r.status, "SERVFAIL", "{ups:?} {proto}: {}", r.raw);
            assert!(
                took < Duration::from_millis(2500),
                "{ups:?} {proto}: SERVFAIL after {took:?}"
            );
            assert!(took >= Duration::from_millis(900), "{took:?}");
        }
    }
}

/// An upstream whose port is closed (ICMP port unreachable) fails at once
/// and the next upstream answers, well within forwardTimeout.
#[test]
fn forwarding_skips_an_icmp_refusing_upstream_at_once() {
    require_tools!("dig");
    let closed = {
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        s.local_addr().unwrap()
    };
    let closed2 = {
        let s = UdpSocket::bind("127.0.0.2:0").unwrap();
        s.local_addr().unwrap()
    };
    let good = FakeUpstream::start();
    let dead = UdpSocket::bind("127.0.0.1:0").unwrap();
    // Two closed ports, then good: the refusals cost nothing.
    let app = start_forwarding(&[closed, closed2, good.addr], "4s", "");
    for _ in 0..3 {
        let t = Instant::now();
        let r = dig(
            &app,
            &["+recurse", "+time=5", "+tries=1", "www.example.org", "A"],
        );
        assert_eq!(r.data(), ["127.0.20.99"], "{}", r.raw);
        assert!(!r.aa(), "{}", r.raw);
        assert!(
            t.elapsed() < Duration::from_millis(1000),
            "{:?}",
            t.elapsed()
        );
    }
    drop(app);
    // dead, then good: the dead one gets only its share (half of 2 s).
    let app = start_forwarding(&[dead.local_addr().unwrap(), good.addr], "2s", "");
    let t = Instant::now();
    let r = dig(
        &app,
        &["+recurse", "+time=5", "+tries=1", "www.example.org", "A"],
    );
    assert_eq!(r.data(), ["127.0.20.99"], "{}", r.raw);
    assert!(
        t.elapsed() < Duration::from_millis(1800),
        "{:?}",
        t.elapsed()
    );
}

/// RFC 7766 6.2.1.1: on one TCP connection a slow forwarded query does not
/// hold up the authoritative answer pipelined behind it; each answer
/// carries its own query ID.
#[test]
fn tcp_pipelined_queries_are_answered_concurrently() {
    use std::io::{Read, Write};
    require_tools!("dig");
    let dead = UdpSocket::bind("127.0.0.1:0").unwrap();
    let app = start_forwarding(&[dead.local_addr().unwrap()], "2s", "");
    let mut s = TcpStream::connect(app.addr("dns tcp")).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut frames = Vec::new();
    for (id, name) in [
        (1u16, "www.example.org".to_string()),
        (2, format!("api.{Z}")),
    ] {
        let q = query(id, &name, 1, true);
        frames.extend_from_slice(&(q.len() as u16).to_be_bytes());
        frames.extend_from_slice(&q);
    }
    let t = Instant::now();
    s.write_all(&frames).unwrap();
    let read = |s: &mut TcpStream| {
        let mut l = [0u8; 2];
        s.read_exact(&mut l).unwrap();
        let mut m = vec![0u8; u16::from_be_bytes(l) as usize];
        s.read_exact(&mut m).unwrap();
        (m, t.elapsed())
    };
    let (first, t1) = read(&mut s);
    assert_eq!(&first[..2], &[0, 2], "the authoritative answer comes first");
    assert_eq!(first[3] & 0x0f, 0);
    assert!(t1 < Duration::from_millis(1000), "{t1:?}");
    let (second, t2) = read(&mut s);
    assert_eq!(&second[..2], &[0, 1]);
    assert_eq!(second[3] & 0x0f, 2, "SERVFAIL from the dead upstream");
    assert!(t2 < Duration::from_millis(3500), "{t2:?}");
}

/// 256 idle (or half-sent) TCP connections must not keep a new TCP client
/// waiting (before: 9.7 s; Knot: 0 s): under pressure they close after
/// the 0.5 s io-timeout.
#[test]
fn idle_tcp_connections_do_not_block_new_clients() {
    use std::io::Write;
    require_tools!("dig");
    let app = start("", "");
    let addr = app.addr("dns tcp");
    let mut held = Vec::new();
    for i in 0..256 {
        let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_secs(2)) else {
            break;
        };
        if i % 2 == 1 {
            let _ = s.write_all(&[0]); // half a length prefix
        }
        held.push(s);
    }
    assert!(held.len() >= 200, "only {} connections", held.len());
    std::thread::sleep(Duration::from_millis(200));
    let t = Instant::now();
    let r = dig(
        &app,
        &["+tcp", "+time=5", "+tries=1", &format!("api.{Z}"), "A"],
    );
    let took = t.elapsed();
    assert_eq!(r.data(), ["127.0.20.1"], "{}", r.raw);
    assert!(
        took < Duration::from_millis(2500),
        "TCP query waited {took:?}"
    );
    drop(held);
}

/// A /26 network's reverse zone is its /24, but only the /26's addresses
/// are ours: other PTRs go to the upstream, so they still resolve.
#[test]
fn classless_reverse_zone_forwards_ptrs_outside_the_network() {
    require_tools!("dig");
    let up = FakeUpstream::start();
    let yaml = common::only(&dns_section(""))
        .replace("cidr: 127.0.20.0/24", "cidr: 127.0.20.0/26")
        .replace(
            "  applianceIP: 127.0.20.1\n",
            &format!(
                "  applianceIP: 127.0.20.1\n  upstreamDNS: [\"{}\"]\n",
                up.addr
            ),
        );
    let app = InProc::start_yaml(&yaml);
    for proto in ["+notcp", "+tcp"] {
        // Outside the /26: the upstream's PTR, not authoritative.
        let r = dig(&app, &["+recurse", proto, "-x", "127.0.20.100"]);
        assert_eq!(r.status, "NOERROR", "{}", r.raw);
        assert_eq!(r.data(), ["outside.example."], "{}", r.raw);
        assert!(!r.aa(), "{}", r.raw);
        // Inside: ours, authoritative, NXDOMAIN for unused addresses.
        let r = dig(&app, &[proto, "-x", "127.0.20.10"]);
        assert_eq!(r.data(), [format!("master-0.{Z}.")], "{}", r.raw);
        assert!(r.aa(), "{}", r.raw);
        let r = dig(&app, &[proto, "-x", "127.0.20.50"]);
        assert_eq!((r.status.as_str(), r.aa()), ("NXDOMAIN", true), "{}", r.raw);
    }
    // The zone apex stays ours.
    let r = dig(&app, &["20.0.127.in-addr.arpa", "SOA"]);
    assert!(r.aa() && r.status == "NOERROR", "{}", r.raw);
}

/// The additional section of a dig answer, normalized and sorted.
fn additional(raw: &str) -> Vec<String> {
    let mut v: Vec<String> = raw
        .lines()
        .skip_while(|l| !l.starts_with(";; ADDITIONAL SECTION"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter(|l| !l.starts_with(';'))
        .map(norm)
        .collect();
    v.sort();
    v
}

/// RFC 2308: NODATA after an in-zone CNAME carries the SOA; the etcd SRV
/// answer carries every target's address; both as Knot answers.
#[test]
fn cname_nodata_soa_and_srv_additionals_match_knot() {
    require_tools!("dig", "knotd");
    let app = start("", "");
    let dir = tempfile::tempdir().unwrap();
    let knot = knot_for(&app, dir.path());
    let knot_addr: SocketAddr = ([127, 0, 0, 1], knot.port).into();
    let ours = app.addr("dns udp");
    for proto in ["+notcp", "+tcp"] {
        for t in ["AAAA", "TXT", "A"] {
            let a = dig_at(ours, &[proto, &format!("console.{Z}"), t]);
            let k = dig_at(knot_addr, &[proto, &format!("console.{Z}"), t]);
            assert_eq!(a.status, k.status, "console {t}: {}\n{}", a.raw, k.raw);
            assert_eq!(a.answer, k.answer, "console {t}: {}\n{}", a.raw, k.raw);
            assert_eq!(
                a.authority, k.authority,
                "console {t}: {}\n{}",
                a.raw, k.raw
            );
        }
        let srv = format!("_etcd-server-ssl._tcp.{Z}");
        let a = dig_at(ours, &[proto, &srv, "SRV"]);
        let k = dig_at(knot_addr, &[proto, &srv, "SRV"]);
        assert_eq!(additional(&a.raw).len(), 3, "{}", a.raw);
        assert_eq!(
            additional(&a.raw),
            additional(&k.raw),
            "{}\n{}",
            a.raw,
            k.raw
        );
    }
}

/// Classes other than IN (CHAOS `version.bind` included) are REFUSED, as
/// Knot does without version/identity disclosure; qtype 0 is NOTIMP; two
/// OPT records are a FORMERR (RFC 6891 6.1.1). Compared with Knot.
#[test]
fn odd_classes_qtype0_and_two_opts_match_knot() {
    require_tools!("dig", "knotd");
    let app = start("", "");
    let dir = tempfile::tempdir().unwrap();
    let knot = knot_for(&app, dir.path());
    let knot_addr: SocketAddr = ([127, 0, 0, 1], knot.port).into();
    let ours = app.addr("dns udp");
    let api = format!("api.{Z}");
    let cases: Vec<Vec<&str>> = vec![
        vec!["-c", "CH", "version.bind", "TXT"],
        vec!["-c", "CH", "version.server", "TXT"],
        vec!["-c", "CH", "id.server", "TXT"],
        vec!["-c", "CH", "hostname.bind", "TXT"],
        vec!["-c", "CH", &api, "A"],
        vec!["-c", "HS", &api, "A"],
        vec!["-c", "NONE", &api, "A"],
        vec![&api, "TYPE0"],
    ];
    for proto in ["+notcp", "+tcp"] {
        for c in &cases {
            let mut args = vec![proto];
            args.extend_from_slice(c);
            let a = dig_at(ours, &args);
            let k = dig_at(knot_addr, &args);
            assert_eq!(
                (&a.status, &a.answer, a.aa()),
                (&k.status, &k.answer, k.aa()),
                "{args:?}:\n{}\n{}",
                a.raw,
                k.raw
            );
            assert!(a.status == "REFUSED" || a.status == "NOTIMP", "{}", a.raw);
        }
    }
    // Two OPT records: the same FORMERR bytes as Knot (question, no OPT).
    let mut q = edns_query(0x5151, &api, 1, 1232);
    q[11] = 2;
    q.extend_from_slice(&[0, 0, 41, 4, 0xd0, 0, 0, 0, 0, 0, 0]);
    let a = raw_udp(ours, &q);
    let k = raw_udp(knot_addr, &q);
    assert_eq!(a[3] & 0x0f, 1, "FORMERR");
    assert_eq!(a, k, "ours vs knot");
}

/// IXFR is refused like AXFR, over UDP and TCP.
#[test]
fn ixfr_is_refused_like_axfr() {
    use std::io::{Read, Write};
    let app = start("", "");
    for qtype in [251u16, 252] {
        let q = query(3, Z, qtype, false);
        let a = raw_udp(app.addr("dns udp"), &q);
        assert_eq!(a[3] & 0x0f, 5, "qtype {qtype} over UDP: {a:?}");
        let mut s = TcpStream::connect(app.addr("dns tcp")).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        let mut f = (q.len() as u16).to_be_bytes().to_vec();
        f.extend_from_slice(&q);
        s.write_all(&f).unwrap();
        let mut l = [0u8; 2];
        s.read_exact(&mut l).unwrap();
        let mut m = vec![0u8; u16::from_be_bytes(l) as usize];
        s.read_exact(&mut m).unwrap();
        assert_eq!(m[3] & 0x0f, 5, "qtype {qtype} over TCP: {m:?}");
    }
}
