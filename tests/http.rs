//! The HTTP service end to end: the real services in this process (inside
//! a network namespace for the ignition ACL test: `InProc::in_netns`),
//! real curl and wget.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::inproc::InProc;
use common::{Netns, pattern, run};
use crc_appliance::serve::status::StatusDoc;

/// A response seen by curl.
struct Got {
    code: u16,
    headers: HashMap<String, String>,
    body: Vec<u8>,
}

impl Got {
    fn h(&self, name: &str) -> &str {
        self.headers.get(name).map(String::as_str).unwrap_or("")
    }
}

/// `curl -sS --max-time 30 ARGS URL`, headers and body captured.
fn curl(args: &[&str], url: &str) -> Got {
    curl_in(None, args, url)
}

fn curl_in(netns: Option<&str>, args: &[&str], url: &str) -> Got {
    let dir = tempfile::tempdir().unwrap();
    let hfile = dir.path().join("h");
    let bfile = dir.path().join("b");
    let mut cmd = match netns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns, "curl"]);
            c
        }
        None => Command::new("curl"),
    };
    let out = cmd
        .args(["-sS", "--max-time", "60", "-D"])
        .arg(&hfile)
        .arg("-o")
        .arg(&bfile)
        .args(["-w", "%{http_code}"])
        .args(args)
        .arg(url)
        .stdin(Stdio::null())
        .output()
        .expect("run curl");
    let code: u16 = String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or(0);
    let mut headers = HashMap::new();
    // The last header block (after redirects / 100-continue there could be several).
    let text = std::fs::read_to_string(&hfile).unwrap_or_default();
    for line in text.lines() {
        if line.starts_with("HTTP/") {
            headers.clear();
        } else if let Some((k, v)) = line.split_once(':') {
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
        }
    }
    Got {
        code,
        headers,
        body: std::fs::read(&bfile).unwrap_or_default(),
    }
}

fn sha256_file(p: &Path) -> String {
    let (code, out, err) = run("sha256sum", &[&p.display().to_string()]);
    assert_eq!(code, 0, "{err}");
    out.split_whitespace().next().unwrap().to_string()
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
    images: PathBuf,
    ignition: PathBuf,
    outside: PathBuf,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let images = dir.path().join("images");
    let ignition = dir.path().join("ignition");
    let outside = dir.path().join("outside");
    for d in [&images, &ignition, &outside] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::create_dir_all(images.join("rhcos/4.16")).unwrap();
    std::fs::write(images.join("rhcos-live.iso"), pattern(1 << 20, 1)).unwrap();
    std::fs::write(images.join("rhcos/4.16/rootfs.img"), pattern(200_000, 2)).unwrap();
    std::fs::write(images.join("empty.raw"), b"").unwrap();
    std::fs::write(outside.join("secret.txt"), b"root:x:0:0:SECRET\n").unwrap();
    std::os::unix::fs::symlink(outside.join("secret.txt"), images.join("escape.txt")).unwrap();
    std::os::unix::fs::symlink(&outside, images.join("outdir")).unwrap();
    std::os::unix::fs::symlink("rhcos/4.16/rootfs.img", images.join("rootfs.img")).unwrap();
    Fixture {
        _dir: dir,
        images,
        ignition,
        outside,
    }
}

/// Split a multipart/byteranges body into (Content-Range, bytes) parts.
fn multipart_parts(body: &[u8], boundary: &str) -> Vec<(String, Vec<u8>)> {
    let delim = format!("--{boundary}");
    let mut parts = Vec::new();
    let mut rest = body;
    let find = |hay: &[u8], needle: &[u8]| hay.windows(needle.len()).position(|w| w == needle);
    let start = find(rest, delim.as_bytes()).expect("first delimiter");
    rest = &rest[start + delim.len()..];
    loop {
        if rest.starts_with(b"--") {
            break;
        }
        assert!(rest.starts_with(b"\r\n"), "delimiter not followed by CRLF");
        rest = &rest[2..];
        let head_end = find(rest, b"\r\n\r\n").expect("part headers end");
        let head = String::from_utf8_lossy(&rest[..head_end]).into_owned();
        rest = &rest[head_end + 4..];
        let next = find(rest, format!("\r\n{delim}").as_bytes()).expect("next delimiter");
        let cr = head
            .lines()
            .find_map(|l| {
                l.split_once(':')
                    .filter(|(k, _)| k.eq_ignore_ascii_case("content-range"))
                    .map(|(_, v)| v.trim().to_string())
            })
            .expect("part Content-Range");
        parts.push((cr, rest[..next].to_vec()));
        rest = &rest[next + 2 + delim.len()..];
    }
    parts
}

#[test]
fn http_serves_images_with_ranges_and_conditionals() {
    require_tools!("curl");
    let fx = fixture();
    let app = InProc::start_yaml(&common::only(&http_section(&fx.images, &fx.ignition)));
    let base = format!("http://{}", app.addr("http"));
    let iso = std::fs::read(fx.images.join("rhcos-live.iso")).unwrap();
    let url = format!("{base}/images/rhcos-live.iso");

    // GET and HEAD
    let g = curl(&[], &url);
    assert_eq!(g.code, 200);
    assert!(g.body == iso, "full body differs");
    assert_eq!(g.h("content-type"), "application/x-iso9660-image");
    assert_eq!(g.h("accept-ranges"), "bytes");
    assert!(!g.h("last-modified").is_empty());
    let etag = g.h("etag").to_string();
    assert!(etag.starts_with('"') && etag.ends_with('"'), "{etag}");
    let h = curl(&["-I"], &url);
    assert_eq!(h.code, 200);
    assert_eq!(h.h("content-length"), iso.len().to_string());
    assert_eq!(h.h("etag"), etag, "ETag is stable");

    // single ranges
    for (r, a, b) in [
        ("0-99", 0usize, 99usize),
        ("1000-1999", 1000, 1999),
        ("-500", iso.len() - 500, iso.len() - 1),
        ("1048000-", 1_048_000, iso.len() - 1),
        ("1048000-99999999", 1_048_000, iso.len() - 1),
    ] {
        let g = curl(&["-r", r], &url);
        assert_eq!(g.code, 206, "{r}");
        assert_eq!(
            g.h("content-range"),
            format!("bytes {a}-{b}/{}", iso.len()),
            "{r}"
        );
        assert_eq!(g.h("content-length"), (b - a + 1).to_string(), "{r}");
        assert!(g.body == iso[a..=b], "{r}: wrong bytes");
    }

    // multi-range: multipart/byteranges with exact parts and Content-Length
    let g = curl(&["-r", "100-109,0-9,5000-5099"], &url);
    assert_eq!(g.code, 206);
    let ct = g.h("content-type");
    let boundary = ct
        .strip_prefix("multipart/byteranges; boundary=")
        .unwrap_or_else(|| panic!("content type {ct}"));
    assert_eq!(g.h("content-length"), g.body.len().to_string());
    let parts = multipart_parts(&g.body, boundary);
    let want = [(0usize, 9usize), (100, 109), (5000, 5099)];
    assert_eq!(parts.len(), 3);
    for ((cr, bytes), (a, b)) in parts.iter().zip(want) {
        assert_eq!(cr, &format!("bytes {a}-{b}/{}", iso.len()));
        assert!(bytes[..] == iso[a..=b], "part {a}-{b}");
    }
    // overlapping ranges are coalesced into one plain 206
    let g = curl(&["-r", "0-99,50-149"], &url);
    assert_eq!(g.code, 206);
    assert_eq!(g.h("content-range"), format!("bytes 0-149/{}", iso.len()));

    // unsatisfiable
    for r in [format!("{}-", iso.len()), "9999999-".to_string()] {
        let g = curl(&["-r", &r], &url);
        assert_eq!(g.code, 416, "{r}");
        assert_eq!(g.h("content-range"), format!("bytes */{}", iso.len()));
    }
    let g = curl(&["-r", "0-1"], &format!("{base}/images/empty.raw"));
    assert_eq!(g.code, 416);
    assert_eq!(g.h("content-range"), "bytes */0");
    let g = curl(&[], &format!("{base}/images/empty.raw"));
    assert_eq!((g.code, g.body.len()), (200, 0));

    // conditionals
    let inm = format!("If-None-Match: {etag}");
    let g = curl(&["-H", &inm], &url);
    assert_eq!(g.code, 304);
    assert!(g.body.is_empty());
    assert_eq!(g.h("etag"), etag);
    let g = curl(&["-H", "If-None-Match: \"other\""], &url);
    assert_eq!(g.code, 200);
    let lm = format!("If-Modified-Since: {}", h.h("last-modified"));
    assert_eq!(curl(&["-H", &lm], &url).code, 304);
    let g = curl(&["-r", "0-9", "-H", &format!("If-Range: {etag}")], &url);
    assert_eq!((g.code, g.body.len()), (206, 10));
    let g = curl(&["-r", "0-9", "-H", "If-Range: \"stale\""], &url);
    assert_eq!((g.code, g.body.len()), (200, iso.len()));
    assert_eq!(curl(&["-H", "If-Match: \"stale\""], &url).code, 412);

    // content types, nested paths, symlink inside the root
    let g = curl(&[], &format!("{base}/images/rhcos/4.16/rootfs.img"));
    assert_eq!(g.code, 200);
    assert_eq!(g.h("content-type"), "application/octet-stream");
    assert_eq!(g.body.len(), 200_000);
    assert_eq!(curl(&[], &format!("{base}/images/rootfs.img")).code, 200);
    assert_eq!(curl(&[], &format!("{base}/images/rhcos%2F4.16")).code, 400);

    // hostile paths: never a byte from outside the root
    for (args, path) in [
        (vec!["--path-as-is"], "/images/../../etc/passwd"),
        (vec!["--path-as-is"], "/images/../outside/secret.txt"),
        (vec!["--path-as-is"], "/../../../../etc/passwd"),
        (vec![], "/images/%2e%2e/%2e%2e/etc/passwd"),
        (vec![], "/images/%2e%2e/outside/secret.txt"),
        (vec![], "/images/..%2f..%2fetc%2fpasswd"),
        (vec![], "/images/..%5c..%5cetc%5cpasswd"),
        (vec![], "/images/rhcos-live.iso%00.txt"),
        (vec![], "/images/%00"),
        (vec![], "/images//etc/passwd"),
        (vec![], "/images/escape.txt"),
        (vec![], "/images/outdir/secret.txt"),
        (vec![], "/images/rhcos"),
        (vec![], "/images/"),
        (vec![], "/images/nope.iso"),
        (vec![], "/etc/passwd"),
    ] {
        let g = curl(&args, &format!("{base}{path}"));
        assert!(
            g.code == 400 || g.code == 404,
            "{path}: status {} body {:?}",
            g.code,
            String::from_utf8_lossy(&g.body)
        );
        let body = String::from_utf8_lossy(&g.body);
        assert!(
            !body.contains("root:") && !body.contains("SECRET"),
            "{path}: leaked {body}"
        );
    }
    assert!(fx.outside.join("secret.txt").exists());

    // methods
    let g = curl(&["-X", "POST", "--data", "x"], &url);
    assert_eq!(g.code, 405);
    assert_eq!(g.h("allow"), "GET, HEAD, OPTIONS");

    // the flat alias used by nginx-style layouts
    let g = curl(&["-r", "0-9"], &format!("{base}/rhcos-live.iso"));
    assert_eq!((g.code, &g.body[..]), (206, &iso[..10]));

    // metrics count responses and bytes
    let metrics = curl(&[], &format!("{base}/metrics"));
    assert_eq!(metrics.code, 404, "no admin routes on the HTTP listener");
}

#[test]
fn http_large_sparse_file_sha256_and_wget_resume() {
    require_tools!("curl", "wget", "sha256sum");
    let fx = fixture();
    // 256 MiB sparse file with data islands (so a wrong offset changes the hash).
    let big = fx.images.join("disk.raw");
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::File::create(&big).unwrap();
        f.set_len(256 << 20).unwrap();
        for (i, off) in [0u64, 1 << 20, 100 << 20, (256 << 20) - 4096]
            .into_iter()
            .enumerate()
        {
            f.write_all_at(&pattern(4096, i as u32 + 10), off).unwrap();
        }
    }
    let want = sha256_file(&big);
    let app = InProc::start_yaml(&common::only(&http_section(&fx.images, &fx.ignition)));
    let url = format!("http://{}/images/disk.raw", app.addr("http"));
    let out = tempfile::tempdir().unwrap();

    let dl = out.path().join("curl.raw");
    let (code, _, err) = run(
        "curl",
        &[
            "-sS",
            "--max-time",
            "120",
            "-o",
            &dl.display().to_string(),
            &url,
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(sha256_file(&dl), want, "curl download differs");

    // wget: plain download, then a resume (-c) of a partial file.
    let wdl = out.path().join("wget.raw");
    let wdl_s = wdl.display().to_string();
    let (code, _, err) = run("wget", &["-q", "-T", "60", "-O", &wdl_s, &url]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(sha256_file(&wdl), want, "wget download differs");
    let part = std::fs::read(&wdl).unwrap();
    std::fs::write(&wdl, &part[..(100 << 20) + 123]).unwrap();
    drop(part);
    let (code, _, err) = run("wget", &["-c", "-S", "-T", "60", "-O", &wdl_s, &url]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("206 Partial Content"),
        "wget did not resume: {err}"
    );
    assert_eq!(sha256_file(&wdl), want, "resumed download differs");
    // wget HEAD (--spider) sees the length
    let (code, _, err) = run("wget", &["--spider", "-S", "-T", "30", &url]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.to_ascii_lowercase()
            .contains(&format!("content-length: {}", 256u64 << 20)),
        "{err}"
    );
}

fn write_ignition(dir: &Path) {
    for role in ["bootstrap", "master", "worker"] {
        std::fs::write(
            dir.join(format!("{role}.ign")),
            format!(
                r#"{{"ignition":{{"config":{{"merge":[{{"source":"https://api-int.test.crc.testing:22623/config/{role}"}}]}},"version":"3.2.0"}},"storage":{{"files":[{{"path":"/etc/hostname","contents":{{"source":"data:,placeholder"}}}},{{"path":"/etc/motd","contents":{{"source":"data:,{role}"}}}}]}}}}"#
            ),
        )
        .unwrap();
    }
}

fn hostname_of(doc: &serde_json::Value) -> Vec<String> {
    doc["storage"]["files"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|f| f["path"] == "/etc/hostname")
                .map(|f| f["contents"]["source"].as_str().unwrap_or("").to_string())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn http_ignition_roles_nodes_and_fetch_log() {
    require_tools!("curl", "wget");
    let fx = fixture();
    write_ignition(&fx.ignition);
    // master-1 has its own file; worker.ign is replaced by broken JSON below.
    std::fs::write(fx.ignition.join("master-1.ign"), br#"{"own":"master-1"}"#).unwrap();
    let sections = format!(
        "{}admin:\n  listen: 127.0.0.1:0\n",
        http_section(&fx.images, &fx.ignition)
    );
    let app = InProc::start_yaml(&common::only(&sections));
    let base = format!("http://{}", app.addr("http"));
    let admin = format!("http://{}", app.addr("admin"));

    // role file verbatim
    let g = curl(&[], &format!("{base}/ignition/master.ign"));
    assert_eq!(g.code, 200);
    assert_eq!(
        g.body,
        std::fs::read(fx.ignition.join("master.ign")).unwrap()
    );
    assert_eq!(g.h("content-type"), "application/vnd.coreos.ignition+json");
    assert_eq!(g.h("cache-control"), "no-store");

    // per node: role config + /etc/hostname (FQDN), fetched from the node's IP
    let g = curl(
        &["--interface", "127.0.20.10"],
        &format!("{base}/ignition/master-0.ign"),
    );
    assert_eq!(g.code, 200, "{}", String::from_utf8_lossy(&g.body));
    let doc: serde_json::Value = serde_json::from_slice(&g.body).expect("merged JSON");
    assert_eq!(
        hostname_of(&doc),
        ["data:,master-0.test.crc.testing%0A"],
        "{doc}"
    );
    let files = doc["storage"]["files"].as_array().unwrap();
    assert!(files.iter().any(|f| f["path"] == "/etc/motd"), "{doc}");
    let entry = files.iter().find(|f| f["path"] == "/etc/hostname").unwrap();
    assert_eq!(
        (entry["mode"].as_u64(), entry["overwrite"].as_bool()),
        (Some(420), Some(true))
    );
    assert_eq!(
        doc["ignition"]["config"]["merge"][0]["source"],
        "https://api-int.test.crc.testing:22623/config/master"
    );
    assert_eq!(g.h("content-length"), g.body.len().to_string());
    // If-None-Match on the merged document
    let etag = g.h("etag").to_string();
    let g2 = curl(
        &["-H", &format!("If-None-Match: {etag}")],
        &format!("{base}/ignition/master-0.ign"),
    );
    assert_eq!(g2.code, 304);
    // HEAD
    let h = curl(&["-I"], &format!("{base}/ignition/master-0.ign"));
    assert_eq!(
        (h.code, h.h("content-length")),
        (200, g.body.len().to_string().as_str())
    );

    // wget and the flat alias
    let (code, out, err) = run(
        "wget",
        &["-q", "-T", "30", "-O", "-", &format!("{base}/master-2.ign")],
    );
    assert_eq!(code, 0, "{err}");
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(hostname_of(&doc), ["data:,master-2.test.crc.testing%0A"]);

    // a node's own file wins, verbatim
    let g = curl(&[], &format!("{base}/ignition/master-1.ign"));
    assert_eq!((g.code, &g.body[..]), (200, &br#"{"own":"master-1"}"#[..]));

    // broken role JSON → 500 with a clear log line; the server keeps running
    std::fs::write(fx.ignition.join("worker.ign"), b"{ this is not json").unwrap();
    let g = curl(
        &["--interface", "127.0.20.20"],
        &format!("{base}/ignition/worker-0.ign"),
    );
    assert_eq!(g.code, 500);
    app.wait_log("cannot merge the hostname into", Duration::from_secs(10));
    assert!(app.log().contains("worker.ign"), "{}", app.log());
    // the role file itself is still served verbatim
    assert_eq!(curl(&[], &format!("{base}/ignition/worker.ign")).code, 200);

    // unknown names, hostile names, missing files
    for p in [
        "/ignition/master-9.ign",
        "/ignition/nope.ign",
        "/ignition/master",
    ] {
        assert_eq!(curl(&[], &format!("{base}{p}")).code, 404, "{p}");
    }
    for (args, p) in [
        (vec!["--path-as-is"], "/ignition/../images/rhcos-live.iso"),
        (vec![], "/ignition/%2e%2e%2fmaster.ign"),
        (vec![], "/ignition/sub/master.ign"),
        (vec![], "/ignition/"),
    ] {
        let g = curl(&args, &format!("{base}{p}"));
        assert!(g.code == 400 || g.code == 404, "{p}: {}", g.code);
    }
    std::fs::remove_file(fx.ignition.join("bootstrap.ign")).unwrap();
    assert_eq!(
        curl(&[], &format!("{base}/ignition/bootstrap.ign")).code,
        404
    );

    // the status document shows who fetched what
    let http = app.status().http.expect("an http section");
    let by_node = &http.ignition_by_node;
    let m0 = by_node.iter().find(|n| n.node == "master-0").unwrap();
    assert!(m0.fetched, "{m0:?}");
    let last = m0.last.as_ref().expect("master-0's last fetch");
    assert_eq!(last.client, "127.0.20.10");
    assert_eq!(last.file, "master-0.ign");
    let w0 = by_node.iter().find(|n| n.node == "worker-0").unwrap();
    assert_eq!(
        (w0.fetched, w0.last.as_ref().map(|l| l.status)),
        (false, Some(500))
    );
    assert!(
        http.ignition_fetches
            .iter()
            .any(|f| f.file == "master-0.ign"
                && f.node.as_deref() == Some("master-0")
                && f.status == 200),
        "{http:?}"
    );
    let metrics = String::from_utf8(curl(&[], &format!("{admin}/metrics")).body).unwrap();
    assert!(
        metrics.contains("crc_appliance_http_ignition_requests_total{code=\"500\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("crc_appliance_http_responses_total{code=\"304\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("crc_appliance_http_sent_bytes_total "),
        "{metrics}"
    );
}

/// Ignition is refused (403) to a client outside network.cidr that is not
/// loopback, end to end: the appliance and its clients share a private
/// network namespace whose loopback interface carries one address inside
/// the cluster network (a node) and one outside it.
#[test]
fn http_ignition_forbidden_outside_cidr() {
    require!(common::is_root(), "needs root for ip netns");
    require_tools!("ip", "curl");
    let ns = Netns::new(format!("http{}", std::process::id()));
    for a in ["10.77.0.1/24", "10.77.0.20/24", "10.88.0.2/24"] {
        ns.exec(&["ip", "addr", "add", a, "dev", "lo"]);
    }
    let fx = fixture();
    write_ignition(&fx.ignition);
    let dir = tempfile::tempdir().unwrap();
    let cluster = dir.path().join("cluster.yaml");
    std::fs::write(
        &cluster,
        format!(
            r#"name: ns
baseDomain: crc.testing
network: {{ cidr: 10.77.0.0/24, gateway: 10.77.0.254, applianceIP: 10.77.0.1 }}
nodes:
  - {{ name: master-0, role: master, mac: "52:54:00:4d:00:0a", ip: 10.77.0.10 }}
  - {{ name: worker-0, role: worker, mac: "52:54:00:4d:00:14", ip: 10.77.0.20 }}
dns: {{ enabled: false }}
dhcp: {{ enabled: false }}
loadBalancer: {{ enabled: false }}
http: {{ listen: "10.77.0.1:0", imagesDir: "{}", ignitionDir: "{}" }}
admin: {{ listen: "127.0.0.1:0" }}
"#,
            fx.images.display(),
            fx.ignition.display()
        ),
    )
    .unwrap();
    let srv = InProc::in_netns(ns.name()).start_path(&cluster);
    let http = srv.addr("http");
    let nsn = Some(ns.0.as_str());

    // outside the cidr, not loopback → 403, for roles, nodes and the alias
    for p in [
        "/ignition/worker.ign",
        "/ignition/worker-0.ign",
        "/master.ign",
    ] {
        let g = curl_in(
            nsn,
            &["--interface", "10.88.0.2"],
            &format!("http://{http}{p}"),
        );
        assert_eq!(g.code, 403, "{p}");
        assert!(!String::from_utf8_lossy(&g.body).contains("api-int"), "{p}");
    }
    // images stay public
    let g = curl_in(
        nsn,
        &["--interface", "10.88.0.2", "-r", "0-9"],
        &format!("http://{http}/images/rhcos-live.iso"),
    );
    assert_eq!(g.code, 206);
    // inside the cidr (the worker's own address) → served and attributed
    let g = curl_in(
        nsn,
        &["--interface", "10.77.0.20"],
        &format!("http://{http}/ignition/worker-0.ign"),
    );
    assert_eq!(g.code, 200);
    let doc: serde_json::Value = serde_json::from_slice(&g.body).unwrap();
    assert_eq!(hostname_of(&doc), ["data:,worker-0.ns.crc.testing%0A"]);
    // loopback → allowed
    let g = curl_in(
        nsn,
        &["--interface", "127.0.0.1"],
        &format!("http://{http}/ignition/master.ign"),
    );
    assert_eq!(g.code, 200);

    let st = curl_in(nsn, &[], &format!("http://{}/status", srv.addr("admin")));
    let st: StatusDoc = serde_json::from_slice(&st.body).unwrap();
    let fetches = st.http.expect("an http section").ignition_fetches;
    assert!(
        fetches
            .iter()
            .any(|f| f.client == "10.88.0.2" && f.status == 403 && f.node.is_none()),
        "{fetches:?}"
    );
    assert!(
        fetches.iter().any(|f| f.client == "10.77.0.20"
            && f.status == 200
            && f.node.as_deref() == Some("worker-0")),
        "{fetches:?}"
    );
    assert!(
        srv.log().contains("refused to 10.88.0.2"),
        "no warning logged"
    );
}

/// A client that shuts down its write side right after the request (busybox
/// `nc`, as in the live-ISO initramfs) still receives the whole streamed file.
#[test]
fn http_half_closed_client_gets_the_whole_image() {
    use std::io::{Read, Write};
    let fx = fixture();
    let app = InProc::start_yaml(&common::only(&http_section(&fx.images, &fx.ignition)));
    let want = std::fs::read(fx.images.join("rhcos-live.iso")).unwrap();
    for version in ["1.0", "1.1"] {
        let mut s = std::net::TcpStream::connect(app.addr("http")).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        write!(
            s,
            "GET /images/rhcos-live.iso HTTP/{version}\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        s.shutdown(std::net::Shutdown::Write).unwrap();
        let mut got = Vec::new();
        s.read_to_end(&mut got).unwrap();
        let split = got
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .expect("a response head");
        let head = String::from_utf8_lossy(&got[..split]);
        assert!(head.starts_with(&format!("HTTP/{version} 200")), "{head}");
        assert!(got[split + 4..] == want[..], "HTTP/{version}: body differs");
    }
}

/// Ignition configs and the install's secrets placed under imagesDir are
/// never served by /images (nor its flat alias), whatever the layout and
/// whoever asks; ordinary images still are (issue: an ignitionDir inside
/// imagesDir, or the openshift-install dir, leaked master.ign and
/// auth/kubeconfig to anyone).
#[test]
fn install_secrets_under_images_are_never_served() {
    require_tools!("curl");
    let fx = fixture();
    let i = &fx.images;
    std::fs::create_dir_all(i.join("ocp4/auth")).unwrap();
    for (f, body) in [
        ("master.ign", "{}"),
        ("ocp4/bootstrap.ign", "{}"),
        ("ocp4/auth/kubeconfig", "apiVersion: v1"),
        ("ocp4/auth/kubeadmin-password", "hunter2"),
        ("ocp4/.openshift_install_state.json", "{}"),
        ("ocp4/metadata.json", "{}"),
        ("install-config.yaml", "pullSecret: x"),
        (".secret", "x"),
    ] {
        std::fs::write(i.join(f), body).unwrap();
    }
    std::os::unix::fs::symlink("master.ign", i.join("innocent.iso")).unwrap();
    let app = InProc::start_yaml(&common::only(&http_section(&fx.images, &fx.ignition)));
    let base = format!("http://{}", app.addr("http"));
    for p in [
        "/images/master.ign",
        "/images/ocp4/bootstrap.ign",
        "/images/ocp4/auth/kubeconfig",
        "/ocp4/auth/kubeconfig",
        "/images/ocp4/auth/kubeadmin-password",
        "/images/ocp4/.openshift_install_state.json",
        "/images/ocp4/metadata.json",
        "/images/install-config.yaml",
        "/images/.secret",
        "/images/innocent.iso",
    ] {
        let r = curl(&[], &format!("{base}{p}"));
        assert_eq!(r.code, 404, "{p} was served");
        assert!(!String::from_utf8_lossy(&r.body).contains("hunter2"));
    }
    assert_eq!(
        curl(&[], &format!("{base}/images/rhcos-live.iso")).code,
        200
    );
}

/// A role config whose pointer is `ignition.config.replace` cannot carry a
/// node's hostname (Ignition would replace the whole config): the per-node
/// URL answers 500 with the reason instead of silently dropping it; the
/// role URL still serves the file verbatim.
#[test]
fn ignition_replace_pointer_is_refused_for_node_urls() {
    require_tools!("curl");
    let fx = fixture();
    std::fs::write(
        fx.ignition.join("worker.ign"),
        r#"{"ignition":{"version":"3.2.0","config":{"replace":{"source":"https://api-int.test.crc.testing:22623/config/worker"}}}}"#,
    )
    .unwrap();
    let app = InProc::start_yaml(&common::only(&http_section(&fx.images, &fx.ignition)));
    let base = format!("http://{}", app.addr("http"));
    let r = curl(&[], &format!("{base}/ignition/worker-0.ign"));
    assert_eq!(r.code, 500);
    app.wait_log("ignition.config.replace", std::time::Duration::from_secs(5));
    assert_eq!(curl(&[], &format!("{base}/ignition/worker.ign")).code, 200);
}
