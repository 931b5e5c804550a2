//! The `/status` wire format, pinned: a fresh appliance running every
//! service that needs no root (DNS, DHCP, LB, HTTP with its HTTPS listener,
//! TFTP, NTP, admin) is asked `GET /status` by curl, and the JSON, with
//! what changes from run to run normalised (times, ports, the temp dir, the
//! certificate), must equal `tests/golden/status.json` byte for byte: key
//! names, their order as served, nesting, types and the stable values. A change of the
//! format is a change of this file (`UPDATE_GOLDEN=1` rewrites it), never
//! a side effect of moving types around.
//!
//! The appliance runs in this process (`common::inproc`): the format is
//! what its admin listener serves over HTTP, the same code as the
//! process's. The NTP host clock is forced synchronised through its own
//! test hook (`runtime::faults::HOST_CLOCK_ENV`), so `ntp.serving` does not
//! depend on this host's clock.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::time::Duration;

use common::inproc::InProc;
use common::{free_port, loopback_cluster_with, run};
use crc_appliance::runtime::faults::HOST_CLOCK_ENV;
use crc_appliance::serve::status::StatusDoc;

/// Keys whose values differ between runs (times, durations, the
/// certificate and its files, the version).
const VOLATILE_KEYS: &[&str] = &[
    "at",
    "unixTime",
    "durationMs",
    "version",
    "since",
    "sinceUnix",
    "startedAt",
    "serial",
    "fingerprint",
    "sha256",
    "notAfter",
    "notBefore",
    "expires",
    "lastCheck",
    "lastChange",
    "uptimeSecs",
    "now",
    "nowUnix",
    "bootstrapInPlaceAge",
];

/// Replace `dir` by `{dir}` and the port of every `<IPv4>:<port>` by
/// `<port>` (MAC addresses and names keep their colons).
fn normalise_str(s: &str, dir: &str) -> String {
    let s = s.replace(dir, "{dir}");
    let mut out = String::new();
    let mut rest = s.as_str();
    while let Some(i) = rest.find(':') {
        let (head, tail) = (&rest[..i], &rest[i + 1..]);
        let ip_start = head
            .rfind(|c: char| !(c.is_ascii_digit() || c == '.'))
            .map_or(0, |j| j + 1);
        let digits = tail.chars().take_while(char::is_ascii_digit).count();
        out.push_str(head);
        out.push(':');
        if digits > 0 && head[ip_start..].parse::<std::net::Ipv4Addr>().is_ok() {
            out.push_str("<port>");
            rest = &tail[digits..];
        } else {
            rest = tail;
        }
    }
    out.push_str(rest);
    out
}

/// One JSON token of the document as served.
enum Tok {
    Str(String),
    Punct(char),
    Scalar(String),
}

/// The tokens of `text` (compact JSON as serde writes it), strings
/// unescaped.
fn tokens(text: &str) -> Vec<Tok> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                let mut raw = String::from('"');
                while let Some(c) = chars.next() {
                    raw.push(c);
                    if c == '\\' {
                        raw.push(chars.next().unwrap());
                    } else if c == '"' {
                        break;
                    }
                }
                out.push(Tok::Str(serde_json::from_str(&raw).unwrap()));
            }
            '{' | '}' | '[' | ']' | ':' | ',' => out.push(Tok::Punct(c)),
            c if c.is_whitespace() => {}
            c => {
                let mut s = String::from(c);
                while let Some(&n) = chars.peek() {
                    if "{}[]:,".contains(n) || n.is_whitespace() {
                        break;
                    }
                    s.push(n);
                    chars.next();
                }
                out.push(Tok::Scalar(s));
            }
        }
    }
    out
}

/// The document as served, in its own key order, pretty-printed with the
/// run-to-run differences normalised.
fn normalise(text: &str, dir: &str) -> String {
    let toks = tokens(text);
    let (mut out, mut depth) = (String::new(), 0usize);
    let newline = |out: &mut String, depth: usize| {
        out.push('\n');
        out.push_str(&"  ".repeat(depth));
    };
    let mut volatile = false;
    for (i, t) in toks.iter().enumerate() {
        let is_key = matches!(toks.get(i + 1), Some(Tok::Punct(':')));
        match t {
            Tok::Punct(c @ ('{' | '[')) => {
                let empty = matches!(toks.get(i + 1), Some(Tok::Punct('}' | ']')));
                out.push(*c);
                depth += 1;
                if !empty {
                    newline(&mut out, depth);
                }
            }
            Tok::Punct(c @ ('}' | ']')) => {
                depth -= 1;
                if !matches!(toks.get(i - 1), Some(Tok::Punct('{' | '['))) {
                    newline(&mut out, depth);
                }
                out.push(*c);
            }
            Tok::Punct(',') => {
                out.push(',');
                newline(&mut out, depth);
            }
            Tok::Punct(c) => {
                out.push(*c);
                out.push(' ');
                continue;
            }
            Tok::Str(s) if is_key => {
                volatile = VOLATILE_KEYS.contains(&s.as_str());
                out.push_str(&serde_json::to_string(s).unwrap());
                continue;
            }
            Tok::Scalar(s) if s == "null" => out.push_str(s),
            Tok::Str(_) | Tok::Scalar(_) if volatile => out.push_str("\"<volatile>\""),
            Tok::Str(s) => out.push_str(&serde_json::to_string(&normalise_str(s, dir)).unwrap()),
            Tok::Scalar(s) => out.push_str(s),
        }
        volatile = false;
    }
    out.push('\n');
    out
}

#[test]
fn the_status_document_keeps_its_wire_format() {
    require_tools!("curl");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display().to_string();
    for sub in ["images", "ign", "tftp"] {
        std::fs::create_dir_all(dir.path().join(sub)).unwrap();
    }
    let admin = free_port();
    let [api, mc, ih, is] = [free_port(), free_port(), free_port(), free_port()];
    let yaml = loopback_cluster_with(&format!(
        r#"dns:
  listen: ["127.0.0.1:0"]
dhcp:
  listen: 127.0.20.1:0
  leaseFile: "{d}/leases.json"
  relays: [127.0.20.2]
loadBalancer:
  listen: {{ api: 127.0.0.1:0, machineConfig: 127.0.0.1:0, ingressHttp: 127.0.0.1:0, ingressHttps: 127.0.0.1:0 }}
  backendPorts: {{ api: {api}, machineConfig: {mc}, ingressHttp: {ih}, ingressHttps: {is} }}
  healthCheck: {{ interval: 1h, timeout: 1s, rise: 1, fall: 3 }}
http:
  listen: 127.0.0.1:0
  tlsListen: 127.0.0.1:0
  imagesDir: "{d}/images"
  ignitionDir: "{d}/ign"
admin:
  listen: 127.0.0.1:{admin}
pxe:
  tftpListen: 127.0.0.1:0
  tftpRoot: "{d}/tftp"
ntp:
  listen: 127.0.0.1:0
"#
    ));
    let file = dir.path().join("cluster.yaml");
    std::fs::write(&file, yaml).unwrap();
    let app = InProc::with_hook(HOST_CLOCK_ENV, "synchronised").start_file(dir, file);
    let url = format!("http://127.0.0.1:{admin}/status");
    let get = || {
        let (code, out, err) = run("curl", &["-sf", &url]);
        assert_eq!(code, 0, "curl /status: {err}\n{}", app.log());
        let doc: StatusDoc = serde_json::from_str(&out).expect("/status is the document");
        (out, doc)
    };
    // Every backend's first check done (refused: nothing listens there) and
    // the lease file written once: then nothing changes until a client comes.
    let settled = |doc: &StatusDoc| {
        let pools = doc.lb.iter().flat_map(|lb| &lb.pools);
        let mut backends = pools.flat_map(|p| &p.backends);
        backends.all(|b| b.last_check_error.is_some())
            && doc.dhcp.as_ref().is_some_and(|d| d.lease_file_writes == 1)
    };
    let mut out = String::new();
    common::wait_until("the first health checks", Duration::from_secs(20), || {
        let (text, doc) = get();
        out = text;
        settled(&doc)
    });
    let got = normalise(&out, &d);
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/status.json");
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&golden, &got).unwrap();
    }
    let want = std::fs::read_to_string(&golden).expect("golden file (UPDATE_GOLDEN=1 to create)");
    assert!(
        got == want,
        "/status changed its wire format; diff against {}:\n{got}",
        golden.display()
    );
}
