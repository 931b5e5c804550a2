//! HTTP request rules end to end (issue #16): RFC 9112 Host and version
//! rules, `OPTIONS`, nginx-like path normalisation. Raw sockets and curl
//! against the real services run in this process (`common::inproc`),
//! loopback only.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::HashMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::inproc::InProc;

struct Got {
    code: u16,
    body: Vec<u8>,
}

/// `curl -sS ARGS URL`: status and body.
fn curl(args: &[&str], url: &str) -> Got {
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "30", "-o", "-", "-w", "\n%{http_code}"])
        .args(args)
        .arg(url)
        .stdin(Stdio::null())
        .output()
        .expect("run curl");
    let mut body = out.stdout;
    let nl = body.iter().rposition(|b| *b == b'\n').unwrap_or(0);
    let code = String::from_utf8_lossy(&body[nl + 1..])
        .trim()
        .parse()
        .unwrap_or(0);
    body.truncate(nl);
    Got { code, body }
}

fn http_section(images: &Path, ignition: &Path) -> String {
    format!(
        "http:\n  listen: 127.0.0.1:0\n  imagesDir: {}\n  ignitionDir: {}\n",
        images.display(),
        ignition.display()
    )
}

struct Fixture {
    _dir: tempfile::TempDir,
    images: std::path::PathBuf,
    ignition: std::path::PathBuf,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let images = dir.path().join("images");
    let ignition = dir.path().join("ignition");
    std::fs::create_dir_all(&images).unwrap();
    std::fs::create_dir_all(&ignition).unwrap();
    let iso: Vec<u8> = (0..(1u32 << 20))
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    std::fs::write(images.join("rhcos-live.iso"), iso).unwrap();
    Fixture {
        _dir: dir,
        images,
        ignition,
    }
}

/// One raw request on a fresh connection; the response head's status line
/// and headers (lowercased names).
fn raw_head(addr: std::net::SocketAddr, req: &str) -> (String, HashMap<String, String>) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(req.as_bytes()).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    let text = String::from_utf8_lossy(&got).into_owned();
    let head = text.split("\r\n\r\n").next().unwrap_or("").to_string();
    let mut lines = head.lines();
    let status = lines.next().unwrap_or("").to_string();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    (status, headers)
}

/// RFC 9112 request rules and nginx-like path normalisation (issue #16):
/// no `Host` on HTTP/1.1 or two `Host`s → 400 (was 200); HTTP/1.0 needs
/// none; `OPTIONS *` → 200 with `Allow` (was 405); `//`, `/./` and a
/// leading `//` are merged as nginx does (were 400), `..` stays 400.
#[test]
fn http_rfc9112_host_options_and_path_normalisation() {
    require_tools!("curl");
    let fx = fixture();
    std::fs::create_dir_all(fx.images.join("images")).unwrap();
    std::fs::write(fx.images.join("images/nested.img"), b"nested").unwrap();
    let app = InProc::start_yaml(&common::only(&http_section(&fx.images, &fx.ignition)));
    let addr = app.addr("http");
    let get = |target: &str, version: &str, headers: &str| {
        raw_head(
            addr,
            &format!("GET {target} HTTP/{version}\r\n{headers}Connection: close\r\n\r\n"),
        )
        .0
    };
    assert!(get("/rhcos-live.iso", "1.1", "").starts_with("HTTP/1.1 400"));
    assert!(get("/rhcos-live.iso", "1.1", "Host: a\r\nHost: b\r\n").starts_with("HTTP/1.1 400"));
    assert!(get("/rhcos-live.iso", "1.0", "Host: a\r\nHost: a\r\n").contains(" 400"));
    assert!(get("/rhcos-live.iso", "1.1", "Host: a\r\n").starts_with("HTTP/1.1 200"));
    assert!(get("/rhcos-live.iso", "1.0", "").starts_with("HTTP/1.0 200"));
    // RFC 9112 §2.6: a higher HTTP/1 minor version is served as 1.1 (was
    // 400), also on a keep-alive follow-up; HTTP/2.2 is no HTTP/1.
    assert!(get("/rhcos-live.iso", "1.2", "Host: a\r\n").starts_with("HTTP/1.1 200"));
    assert!(
        get("/rhcos-live.iso", "1.9", "").starts_with("HTTP/1.1 400"),
        "no Host"
    );
    assert!(!get("/rhcos-live.iso", "2.2", "Host: a\r\n").contains(" 200"));
    {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(
            b"GET /images/images/nested.img HTTP/1.2\r\nHost: a\r\n\r\nGET /images/images/nested.img HTTP/1.3\r\nHost: a\r\nConnection: close\r\n\r\n",
        )
        .unwrap();
        let mut got = Vec::new();
        s.read_to_end(&mut got).unwrap();
        let text = String::from_utf8_lossy(&got);
        assert_eq!(text.matches("HTTP/1.1 200").count(), 2, "{text}");
        assert_eq!(text.matches("nested").count(), 2, "{text}");
    }

    let (status, h) = raw_head(
        addr,
        "OPTIONS * HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
    );
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    let allow = h.get("allow").cloned().unwrap_or_default();
    for m in ["GET", "HEAD", "OPTIONS"] {
        assert!(allow.contains(m), "Allow: {allow}");
    }
    let (status, h) = raw_head(
        addr,
        "DELETE /x HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
    );
    assert!(status.starts_with("HTTP/1.1 405"), "{status}");
    assert!(h.get("allow").is_some_and(|a| a.contains("OPTIONS")));

    let want = std::fs::read(fx.images.join("rhcos-live.iso")).unwrap();
    let base = format!("http://{addr}");
    for p in [
        "/images//rhcos-live.iso",
        "//images/rhcos-live.iso",
        "/images/./rhcos-live.iso",
        "/images/rhcos//4.16/../../rhcos-live.iso",
        "//rhcos-live.iso",
        "/./rhcos-live.iso",
        "/images/%2e/rhcos-live.iso",
    ] {
        let r = curl(&["--path-as-is"], &format!("{base}{p}"));
        if p.contains("..") {
            assert_eq!(r.code, 400, "{p}: `..` must stay refused");
            continue;
        }
        assert_eq!(r.code, 200, "{p}");
        assert!(r.body == want, "{p}: body differs");
    }
    // h2c (prior knowledge) is untouched by the HTTP/1 version rewrite.
    let r = curl(
        &["--http2-prior-knowledge"],
        &format!("{base}/rhcos-live.iso"),
    );
    assert!(r.code == 200 && r.body == want, "h2c: {}", r.code);
    // `//images/x` is `/images/x` (imagesDir/x), not imagesDir/images/x.
    let r = curl(&["--path-as-is"], &format!("{base}//images/nested.img"));
    assert_eq!(r.code, 404);
    let r = curl(
        &["--path-as-is"],
        &format!("{base}/images/images//nested.img"),
    );
    assert_eq!((r.code, r.body.as_slice()), (200, &b"nested"[..]));
    // Ignition routes are normalised too.
    std::fs::write(
        fx.ignition.join("master.ign"),
        br#"{"ignition":{"version":"3.2.0"}}"#,
    )
    .unwrap();
    let r = curl(&["--path-as-is"], &format!("{base}/ignition//master.ign"));
    assert_eq!(r.code, 200);
}
