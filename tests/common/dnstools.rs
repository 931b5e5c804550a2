//! DNS test clients shared by the DNS test binaries: `dig`/`kdig` answers
//! parsed into [`Ans`], and knotd serving the `render zone` output (the
//! reference of the differential tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::{SocketAddr, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{BIN, Served, run};

/// A parsed dig/kdig answer.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Ans {
    pub status: String,
    pub flags: Vec<String>,
    pub answer: Vec<String>,
    pub authority: Vec<String>,
    pub opt: bool,
    pub raw: String,
}

impl Ans {
    pub fn aa(&self) -> bool {
        self.flags.iter().any(|f| f == "aa")
    }
    pub fn tc(&self) -> bool {
        self.flags.iter().any(|f| f == "tc")
    }
    pub fn ra(&self) -> bool {
        self.flags.iter().any(|f| f == "ra")
    }
    /// Answer data fields (after owner, ttl, class, type), sorted.
    pub fn data(&self) -> Vec<String> {
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
pub fn norm(line: &str) -> String {
    let mut f: Vec<String> = line.split_whitespace().map(str::to_string).collect();
    if let Some(o) = f.first_mut() {
        *o = o.to_ascii_lowercase();
    }
    f.join(" ")
}

pub fn parse_dig(out: &str) -> Ans {
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

pub fn dig_at(addr: SocketAddr, args: &[&str]) -> Ans {
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

pub fn dig(app: &impl Served, args: &[&str]) -> Ans {
    dig_at(app.addr("dns udp"), args)
}

pub fn kdig(addr: SocketAddr, args: &[&str]) -> Ans {
    let port = addr.port().to_string();
    let server = format!("@{}", addr.ip());
    let mut all = vec!["+norecurse", "+time=3", "+retry=1", "-p", &port, &server];
    all.extend_from_slice(args);
    let (code, out, err) = run("kdig", &all);
    assert_eq!(code, 0, "kdig {all:?} failed: {out}{err}");
    parse_dig(&out)
}

// ---------------------------------------------------------------- knot

pub struct Knot {
    child: Child,
    pub port: u16,
}

impl Drop for Knot {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A loopback port free for both UDP and TCP a moment ago.
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
pub fn start_knot(dir: &std::path::Path, zones: &[(String, String)]) -> Knot {
    for attempt in 0..5 {
        let port = free_port();
        let run_dir = dir.join(format!("knot-{attempt}"));
        std::fs::create_dir_all(&run_dir).unwrap();
        let mut conf = format!(
            "server:\n    listen: 127.0.0.1@{port}\n    identity: \"\"\n    version: \"\"\n    rundir: \"{d}\"\n    udp-workers: 1\n    tcp-workers: 1\n    background-workers: 1\nlog:\n  - target: stderr\n    any: warning\ndatabase:\n    storage: \"{d}\"\ntemplate:\n  - id: default\n    storage: \"{d}\"\n    zonefile-sync: -1\n    zonefile-load: whole\n    journal-content: none\nzone:\n",
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

/// Start knotd on the `render zone` output of `app`'s cluster file.
pub fn knot_for(app: &impl Served, dir: &std::path::Path) -> Knot {
    let (code, text, err) = run(
        BIN,
        &[
            "render",
            "--cluster",
            app.cluster_file().to_str().unwrap(),
            "zone",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let zones: Vec<(String, String)> = text
        .split("$ORIGIN ")
        .filter(|c| !c.trim().is_empty())
        .map(|c| {
            let origin = c.split_whitespace().next().unwrap().to_string();
            (origin, format!("$ORIGIN {c}"))
        })
        .collect();
    start_knot(dir, &zones)
}
