//! DNS end to end: the real binary queried with `dig` and `kdig` over UDP and
//! TCP, forwarding to a second appliance on loopback, a differential test
//! against knotd serving the `render zone` output, and a fuzz of the request
//! path (in-process and over the sockets).

mod common;

use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{Appliance, BIN, run};

const Z: &str = "test.crc.testing";

/// The DNS section of the test cluster (listen on a loopback port 0).
fn dns_section(extra: &str) -> String {
    format!(
        "dns:\n  listen: [\"127.0.0.1:0\"]\n  ttl: 30s\n  negativeTtl: 20s\n  records:\n    - {{ name: registry, type: A, value: 127.0.20.50 }}\n    - {{ name: console, type: CNAME, value: api.{Z}. }}\n    - {{ name: info, type: TXT, value: \"hello world\" }}\n    - {{ name: special.apps, type: A, value: 127.0.20.77 }}\n    - {{ name: a.ent.apps, type: A, value: 127.0.20.78 }}\n{extra}"
    )
}

fn start(extra_dns: &str, more: &str) -> Appliance {
    Appliance::start(&common::only(&format!("{}{more}", dns_section(extra_dns))))
}

/// A parsed dig/kdig answer.
#[derive(Debug, Default, Clone, PartialEq)]
struct Ans {
    status: String,
    flags: Vec<String>,
    answer: Vec<String>,
    authority: Vec<String>,
    opt: bool,
    raw: String,
}

impl Ans {
    fn aa(&self) -> bool {
        self.flags.iter().any(|f| f == "aa")
    }
    fn tc(&self) -> bool {
        self.flags.iter().any(|f| f == "tc")
    }
    /// Answer data fields (after owner, ttl, class, type), sorted.
    fn data(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .answer
            .iter()
            .map(|l| l.split_whitespace().skip(4).collect::<Vec<_>>().join(" "))
            .collect();
        v.sort();
        v
    }
}

/// Normalize a record line: lower-case owner, single spaces.
fn norm(line: &str) -> String {
    let mut f: Vec<String> = line.split_whitespace().map(str::to_string).collect();
    if let Some(o) = f.first_mut() {
        *o = o.to_ascii_lowercase();
    }
    f.join(" ")
}

fn parse_dig(out: &str) -> Ans {
    let mut a = Ans {
        raw: out.to_string(),
        ..Ans::default()
    };
    let mut section = "";
    for line in out.lines() {
        let l = line.trim();
        if let Some(rest) = l.split("status: ").nth(1) {
            a.status = rest
                .split([',', ';'])
                .next()
                .unwrap_or("")
                .trim()
                .to_string();
        }
        if let Some(rest) = l.strip_prefix(";; flags:").or(l.strip_prefix(";; Flags:")) {
            a.flags = rest
                .split(';')
                .next()
                .unwrap_or("")
                .split_whitespace()
                .map(str::to_string)
                .collect();
        }
        if l.contains("OPT PSEUDOSECTION")
            || l.starts_with("; EDNS")
            || l.contains(";; EDNS PSEUDOSECTION")
        {
            a.opt = true;
        }
        if l.starts_with(";; ANSWER SECTION") {
            section = "answer";
            continue;
        }
        if l.starts_with(";; AUTHORITY SECTION") {
            section = "authority";
            continue;
        }
        if l.is_empty() || l.starts_with(";;") {
            section = "";
            continue;
        }
        if l.starts_with(';') {
            continue;
        }
        match section {
            "answer" => a.answer.push(norm(l)),
            "authority" => a.authority.push(norm(l)),
            _ => {}
        }
    }
    a
}

fn dig_at(addr: SocketAddr, args: &[&str]) -> Ans {
    let port = addr.port().to_string();
    let server = format!("@{}", addr.ip());
    let mut all = vec![
        "+norecurse",
        "+time=3",
        "+tries=2",
        "+nocookie",
        "-p",
        &port,
        &server,
    ];
    all.extend_from_slice(args);
    let (code, out, err) = run("dig", &all);
    assert_eq!(code, 0, "dig {all:?} failed: {out}{err}");
    parse_dig(&out)
}

fn dig(app: &Appliance, args: &[&str]) -> Ans {
    dig_at(app.addr("dns udp"), args)
}

fn kdig(addr: SocketAddr, args: &[&str]) -> Ans {
    let port = addr.port().to_string();
    let server = format!("@{}", addr.ip());
    let mut all = vec!["+norecurse", "+time=3", "+retry=1", "-p", &port, &server];
    all.extend_from_slice(args);
    let (code, out, err) = run("kdig", &all);
    assert_eq!(code, 0, "kdig {all:?} failed: {out}{err}");
    parse_dig(&out)
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
fn upstream() -> Appliance {
    let yaml =
        common::only(&dns_section("")).replace("baseDomain: crc.testing", "baseDomain: up.testing");
    Appliance::start(&yaml)
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
    let app = Appliance::start(&yaml);
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
        let (_, status, _) = run(
            "curl",
            &["-sf", &format!("http://{}/status", app.addr("admin"))],
        );
        let v: serde_json::Value = serde_json::from_str(&status).unwrap();
        assert!(v["dns"]["forwarded"].as_u64().unwrap() >= 3, "{status}");
        assert_eq!(v["dns"]["upstream"][0], up_addr.to_string(), "{status}");
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
        let core = crc_appliance::dns::handler::build(&plan).unwrap();
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
    let c = crc_appliance::config::from_str(
        yaml,
        std::path::Path::new("/tmp"),
        std::path::Path::new("cluster.yaml"),
    )
    .unwrap();
    crc_appliance::plan::Plan::new(c)
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
        let core = crc_appliance::dns::handler::build(&plan).unwrap();
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

struct Knot {
    child: Child,
    port: u16,
}

impl Drop for Knot {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    loop {
        let u = UdpSocket::bind("127.0.0.1:0").unwrap();
        let p = u.local_addr().unwrap().port();
        if std::net::TcpListener::bind(("127.0.0.1", p)).is_ok() {
            return p;
        }
    }
}

/// Start knotd serving `zones` ((origin, text)); retried on a port clash.
fn start_knot(dir: &std::path::Path, zones: &[(String, String)]) -> Knot {
    for attempt in 0..5 {
        let port = free_port();
        let run_dir = dir.join(format!("knot-{attempt}"));
        std::fs::create_dir_all(&run_dir).unwrap();
        let mut conf = format!(
            "server:\n    listen: 127.0.0.1@{port}\n    rundir: \"{d}\"\n    udp-workers: 1\n    tcp-workers: 1\n    background-workers: 1\nlog:\n  - target: stderr\n    any: warning\ndatabase:\n    storage: \"{d}\"\ntemplate:\n  - id: default\n    storage: \"{d}\"\n    zonefile-sync: -1\n    zonefile-load: whole\n    journal-content: none\nzone:\n",
            d = run_dir.display()
        );
        for (i, (origin, text)) in zones.iter().enumerate() {
            let f = run_dir.join(format!("z{i}.zone"));
            std::fs::write(&f, text).unwrap();
            conf.push_str(&format!(
                "  - domain: {origin}\n    file: \"{}\"\n",
                f.display()
            ));
        }
        let cf = run_dir.join("knot.conf");
        std::fs::write(&cf, conf).unwrap();
        let child = Command::new("knotd")
            .arg("-c")
            .arg(&cf)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn knotd");
        let mut k = Knot { child, port };
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = k.child.try_wait() {
                break;
            }
            let (_, out, _) = run(
                "dig",
                &[
                    "+norec",
                    "+time=1",
                    "+tries=1",
                    "-p",
                    &port.to_string(),
                    "@127.0.0.1",
                    &zones[0].0,
                    "SOA",
                ],
            );
            if parse_dig(&out).status == "NOERROR" {
                let _ = addr;
                return k;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = k.child.kill();
    }
    panic!("knotd did not start");
}

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
        let core = crc_appliance::dns::handler::build(&plan).unwrap();
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
        Appliance::launch().netns(ns.name()).start_file(dir, f)
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
    }
}
