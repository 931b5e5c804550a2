//! The mirror registry (issue #36) with real clients, in network
//! namespaces on non-loopback addresses (`registry/lab.rs`):
//!
//! - `skopeo copy` pushes a multi-layer image from an OCI layout the test
//!   writes, with the htpasswd user, and fails with 401 without; a node
//!   pulls it by tag and by digest with TLS verified against only the CA
//!   `render mirror` printed, resolving `mirror.<name>.<baseDomain>`
//!   through the appliance's DNS; the same bytes come back;
//! - pulls are anonymous from the cluster network, 401 with
//!   `WWW-Authenticate` from outside it and with a wrong password;
//! - a tree the appliance wrote is served by `docker-registry` as is, and
//!   a tree `docker-registry` wrote is served by the appliance (same
//!   digests);
//! - bad input on every endpoint: 0 panics, nothing outside `storage`.
//!
//! The appliances run in-process (the lab's in the appliance's namespace:
//! `registry/lab.rs`), but for the preflight test's: preflight names the
//! process holding each port the cluster file wants and lets only a
//! running `crc-appliance` hold them, so that test spawns the binary
//! ([`Lab::spawned`]; in-process the holder is the test binary, a warning).
//! The `render mirror` and `preflight` commands are the real binary.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
#[path = "registry/lab.rs"]
mod lab;

use crc_appliance::serve::status::StatusDoc;
use lab::{Lab, MIRROR, NODE, OUTSIDE, PASS, USER, oci_layout};

fn tools() -> Result<(), String> {
    lab::tools_present(
        "rgp",
        &[
            "skopeo",
            "htpasswd",
            "curl",
            "tar",
            "gzip",
            "docker-registry",
        ],
    )
}

macro_rules! require_lab {
    () => {
        if let Err(why) = tools() {
            common::note_skip(&format!("SKIPPED {}: {why}", module_path!()));
            return;
        }
    };
}

fn creds() -> String {
    format!("{USER}:{PASS}")
}

#[test]
fn skopeo_pushes_with_a_user_and_nodes_pull_by_tag_and_digest_over_verified_tls() {
    require_lab!();
    let lab = Lab::start("");
    let layout = lab.dir.path().join("layout");
    let digest = oci_layout(&layout, "v1", 3, 7);
    let src = format!("oci:{}:v1", layout.display());
    let dst = format!("docker://{MIRROR}:5000/lab/app:v1");
    let certs = lab.certs.to_str().unwrap().to_string();
    // Without credentials: refused.
    let (code, out) = lab.skopeo(&["copy", "--dest-cert-dir", &certs, &src, &dst]);
    assert_ne!(code, 0, "{out}");
    assert!(
        out.contains("401")
            || out.to_lowercase().contains("unauthorized")
            || out.contains("authentication required"),
        "{out}"
    );
    // A wrong password: refused the same way, at once.
    let wrong = format!("{USER}:nope");
    let (code, out) = lab.skopeo(&[
        "copy",
        "--dest-creds",
        &wrong,
        "--dest-cert-dir",
        &certs,
        &src,
        &dst,
    ]);
    assert_ne!(code, 0, "{out}");
    // With the user: pushed.
    let (code, out) = lab.skopeo(&[
        "copy",
        "--dest-creds",
        &creds(),
        "--dest-cert-dir",
        &certs,
        &src,
        &dst,
    ]);
    assert_eq!(code, 0, "{out}\n{}", lab.app.log());
    // The node pulls anonymously, by tag and by digest, TLS verified.
    let pulled = lab.dir.path().join("pulled");
    let (code, out) = lab.skopeo(&[
        "copy",
        "--src-tls-verify=true",
        "--src-cert-dir",
        &certs,
        &dst,
        &format!("oci:{}:v1", pulled.display()),
    ]);
    assert_eq!(code, 0, "{out}");
    let (code, raw) = lab.skopeo(&["inspect", "--raw", "--cert-dir", &certs, &dst]);
    assert_eq!(code, 0, "{raw}");
    assert_eq!(
        lab::sha256(raw.trim_end().as_bytes()),
        digest,
        "the manifest pushed is served byte for byte"
    );
    let by_digest = format!("docker://{MIRROR}:5000/lab/app@{digest}");
    let pulled2 = lab.dir.path().join("pulled2");
    let (code, out) = lab.skopeo(&[
        "copy",
        "--src-cert-dir",
        &certs,
        &by_digest,
        &format!("oci:{}:v1", pulled2.display()),
    ]);
    assert_eq!(code, 0, "{out}");
    for dir in [&pulled, &pulled2] {
        let got = std::fs::read(dir.join("blobs/sha256").join(&digest[7..])).unwrap();
        assert_eq!(lab::sha256(&got), digest);
    }
    // Another CA is not trusted: the TLS check is real.
    let other = lab.dir.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    common::self_signed_cert(&other.join("ca.crt"), &other.join("k.pem"), "other");
    std::fs::remove_file(other.join("k.pem")).unwrap();
    let (code, out) = lab.skopeo(&[
        "inspect",
        "--raw",
        "--cert-dir",
        other.to_str().unwrap(),
        &dst,
    ]);
    assert_ne!(code, 0, "{out}");
    assert!(out.contains("certificate"), "{out}");
    // Status counts the node's pulls; the timeline has master-0 pulling
    // from its first request, and pulled once it went quiet (2 s here).
    let status = || -> StatusDoc { lab.app.status() };
    let mut v = status();
    common::wait_until(
        "master-0 pulled on the timeline",
        std::time::Duration::from_secs(20),
        || {
            v = status();
            v.timeline
                .as_ref()
                .is_some_and(|t| t.nodes[1].pulled.is_some())
        },
    );
    let reg = v.registry.as_ref().expect("a registry section");
    let node = reg
        .clients
        .iter()
        .find(|r| r.client == NODE)
        .expect("the node's row");
    assert_eq!(node.node.as_deref(), Some("master-0"));
    let pulled = node.bytes_pulled;
    assert!(pulled > 100_000, "{node:?}");
    assert!(node.blob_bytes > 100_000, "{node:?}");
    assert!(reg.cert_from_ca);
    let tl = v.timeline.as_ref().expect("a timeline");
    let m0 = &tl.nodes[1];
    assert_eq!(m0.node, "master-0");
    assert_eq!(m0.pulling, Some(node.first_request), "{m0:?}");
    assert_eq!(m0.pulled, Some(node.latest_request), "{m0:?}");
    assert!(
        tl.nodes[0].pulling.is_none(),
        "the bootstrap pulled nothing: {:?}",
        tl.nodes[0]
    );
    let metrics = lab.admin("/metrics");
    let requests = reg.requests;
    for line in [
        format!("crc_appliance_registry_requests_total {requests}"),
        "crc_appliance_registry_cache_hits_total 0".into(),
        "crc_appliance_registry_cache_misses_total 0".into(),
        "crc_appliance_registry_upstream_errors_total 0".into(),
        format!(
            "crc_appliance_registry_client_pulled_bytes_total{{client=\"{NODE}\",node=\"master-0\"}} {pulled}"
        ),
        "crc_appliance_timeline_step_timestamp_seconds{node=\"master-0\",step=\"pulled\"}".into(),
    ] {
        assert!(metrics.contains(&line), "{line}:\n{metrics}");
    }
}

#[test]
fn pulls_are_anonymous_only_from_the_cluster_network() {
    require_lab!();
    let lab = Lab::start("");
    // /v2/ challenges (as distribution does: clients with credentials
    // then send them); pulls need none from the cluster network.
    let ping = lab.curl(&[], "/v2/");
    assert_eq!(ping.code, 401, "{ping:?}");
    assert_eq!(
        ping.header("Docker-Distribution-Api-Version").as_deref(),
        Some("registry/2.0")
    );
    let anon = lab.curl(&[], "/v2/lab/none/tags/list");
    assert_eq!(anon.code, 404, "{anon:?}");
    assert!(anon.text().contains("NAME_UNKNOWN"), "{}", anon.text());
    let outside = lab.curl(&["--interface", OUTSIDE], "/v2/lab/none/tags/list");
    assert_eq!(outside.code, 401, "{outside:?}");
    let outside = lab.curl(&["--interface", OUTSIDE], "/v2/");
    assert_eq!(outside.code, 401, "{outside:?}");
    assert_eq!(
        outside.header("WWW-Authenticate").as_deref(),
        Some(format!("Basic realm=\"{MIRROR}\"").as_str())
    );
    assert!(
        outside.text().contains("UNAUTHORIZED"),
        "{}",
        outside.text()
    );
    let wrong = lab.curl(
        &["--interface", OUTSIDE, "-u", &format!("{USER}:bad")],
        "/v2/",
    );
    assert_eq!(wrong.code, 401);
    let good = lab.curl(&["--interface", OUTSIDE, "-u", &creds()], "/v2/");
    assert_eq!(good.code, 200);
    // A push from the cluster network still needs the user.
    let push = lab.curl(&["-X", "POST"], "/v2/lab/x/blobs/uploads/");
    assert_eq!(push.code, 401);
    let push = lab.curl(&["-X", "POST", "-u", &creds()], "/v2/lab/x/blobs/uploads/");
    assert_eq!(push.code, 202, "{push:?}");
    assert!(
        push.header("Location")
            .unwrap()
            .starts_with("/v2/lab/x/blobs/uploads/")
    );
    assert_eq!(push.header("Range").as_deref(), Some("0-0"));
}

/// One curl run in the node's namespace over many paths: the status codes.
fn codes(lab: &Lab, method: &str, paths: &[String], extra: &[&str]) -> Vec<u16> {
    let ca = lab.certs.join("ca.crt");
    let auth = creds();
    let mut args: Vec<String> = vec![
        "netns".into(),
        "exec".into(),
        lab.node.name().into(),
        "curl".into(),
        "-sS".into(),
        "--max-time".into(),
        "10".into(),
        "--cacert".into(),
        ca.display().to_string(),
        "-u".into(),
        auth,
        "--path-as-is".into(),
    ];
    // HEAD with -I: with -X HEAD curl would wait for a body.
    if method == "HEAD" {
        args.push("-I".into());
    } else {
        args.extend(["-X".into(), method.into()]);
        args.extend(extra.iter().map(|s| s.to_string()));
    }
    for p in paths {
        args.extend([
            "-o".into(),
            "/dev/null".into(),
            "-w".into(),
            "%{http_code}\\n".into(),
            format!("{}{p}", lab.url()),
        ]);
    }
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let (_, out, _) = common::run("ip", &a);
    out.lines().map(|l| l.trim().parse().unwrap_or(0)).collect()
}

/// Every file under `dir` but `storage`.
fn files_outside(dir: &std::path::Path, storage: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.starts_with(storage) {
                continue;
            }
            if p.is_dir() {
                stack.push(p.clone());
            }
            out.push(p);
        }
    }
    out.sort();
    out
}

#[test]
fn bad_input_on_every_endpoint_is_refused_and_nothing_is_written_outside_storage() {
    require_lab!();
    let lab = Lab::start("  allowDelete: true\n");
    let layout = lab.dir.path().join("layout");
    oci_layout(&layout, "v1", 2, 5);
    let (code, out) = lab.push(&layout, "ok/app:v1");
    assert_eq!(code, 0, "{out}");
    let before = files_outside(lab.dir.path(), &lab.storage);
    let hex = "a".repeat(64);
    let names = [
        "UPPER",
        "a//b",
        "../../etc",
        "..",
        "a/../../b",
        "%2e%2e/%2e%2e",
        "a%2fb",
        "-a",
        "a-",
        "a___b",
        &"x".repeat(300),
        "a/./b",
        "a b",
        "a\u{7f}",
    ];
    let digests = [
        "sha256:abc".to_string(),
        format!("sha256:{}", hex.to_uppercase()),
        format!("sha256:{hex}0"),
        format!("sha512:{}", "b".repeat(128)),
        hex.clone(),
        "md5:d41d8cd98f00b204e9800998ecf8427e".into(),
        format!("sha256:../{hex}"),
        "sha256:".into(),
    ];
    let mut paths = Vec::new();
    for n in names {
        let n = n.replace(' ', "%20").replace('\u{7f}', "%7f");
        for tail in [
            "tags/list",
            "manifests/v1",
            &format!("blobs/sha256:{hex}"),
            "blobs/uploads/",
            "blobs/uploads/0123456789abcdef",
        ] {
            paths.push(format!("/v2/{n}/{tail}"));
        }
    }
    for d in &digests {
        paths.push(format!("/v2/ok/app/blobs/{d}"));
        paths.push(format!("/v2/ok/app/manifests/{d}"));
        paths.push(format!("/v2/ok/app/blobs/uploads/?digest={d}"));
    }
    for tail in [
        "blobs/uploads/../../../../x",
        "blobs/uploads/zz",
        "blobs/uploads/0123456789abcdef",
        "manifests/",
        "manifests/-bad",
        "tags/list?n=x",
        "tags/list?n=-1&last=%00",
    ] {
        paths.push(format!("/v2/ok/app/{tail}"));
    }
    paths.push("/v2/_catalog?n=abc".into());
    paths.push("/v3/".into());
    paths.push("/".into());
    for method in ["GET", "HEAD", "PUT", "PATCH", "POST", "DELETE"] {
        let got = codes(
            &lab,
            method,
            &paths,
            &["--data-binary", "junk", "-H", "Content-Range: 5-3"],
        );
        assert_eq!(got.len(), paths.len(), "{method}: {got:?}");
        for (p, c) in paths.iter().zip(&got) {
            assert!((200..500).contains(c) && *c != 0, "{method} {p}: {c}");
        }
    }
    // Ranges: garbage is the whole blob or 416, never an error.
    let blob = {
        let g = lab.curl(&["-u", &creds()], "/v2/ok/app/tags/list");
        assert_eq!(g.code, 200);
        let m = lab.curl(
            &["-H", "Accept: application/vnd.oci.image.manifest.v1+json"],
            "/v2/ok/app/manifests/v1",
        );
        let v: serde_json::Value = serde_json::from_slice(&m.body).unwrap();
        v["layers"][0]["digest"].as_str().unwrap().to_string()
    };
    for r in [
        "bytes=",
        "bytes=-",
        "bytes=--1",
        "bytes=99999999999999999999-",
        "bytes=5-1",
        "bytes=0-0,2-1",
        "lines=1-2",
        "bytes=-0",
        "bytes=a-b",
    ] {
        let g = lab.curl(
            &["-H", &format!("Range: {r}")],
            &format!("/v2/ok/app/blobs/{blob}"),
        );
        assert!([200, 206, 416].contains(&g.code), "{r}: {}", g.code);
    }
    // Chunk order: a PATCH not at the upload's end is 416 and changes nothing.
    let data = common::pattern(4096, 9);
    let start = lab.curl(
        &["-u", &creds(), "-X", "POST"],
        "/v2/ok/chunks/blobs/uploads/",
    );
    let loc = start.header("Location").unwrap();
    let patch = |range: &str, body: &[u8]| {
        let f = lab.dir.path().join("chunk");
        std::fs::write(&f, body).unwrap();
        lab.curl(
            &[
                "-u",
                &creds(),
                "-X",
                "PATCH",
                "-H",
                &format!("Content-Range: {range}"),
                "-H",
                "Content-Type: application/octet-stream",
                "--data-binary",
                &format!("@{}", f.display()),
            ],
            &loc,
        )
    };
    assert_eq!(patch("0-1023", &data[..1024]).code, 202);
    let wrong = patch("2048-4095", &data[2048..]);
    assert_eq!(wrong.code, 416);
    assert_eq!(wrong.header("Range").as_deref(), Some("0-1023"));
    assert_eq!(patch("1024-4095", &data[1024..]).code, 202);
    let put = lab.curl(
        &["-u", &creds(), "-X", "PUT"],
        &format!("{loc}?digest={}", lab::sha256(&data)),
    );
    assert_eq!(put.code, 201, "{}", put.text());
    // A digest mismatch is 400 DIGEST_INVALID and leaves nothing.
    let start = lab.curl(
        &["-u", &creds(), "-X", "POST"],
        "/v2/ok/chunks/blobs/uploads/",
    );
    let loc = start.header("Location").unwrap();
    let bad = lab.curl(
        &[
            "-u",
            &creds(),
            "-X",
            "PUT",
            "--data-binary",
            "abc",
            "-H",
            "Content-Type: application/octet-stream",
        ],
        &format!("{loc}?digest={}", lab::sha256(b"xyz")),
    );
    assert_eq!(bad.code, 400);
    assert!(bad.text().contains("DIGEST_INVALID"));
    assert!(
        !lab.storage
            .join("docker/registry/v2/blobs/sha256")
            .join(&lab::sha256(b"abc")[7..9])
            .join(&lab::sha256(b"abc")[7..])
            .exists()
    );
    // Over 4 MiB: refused.
    let big = lab.dir.path().join("big.json");
    let mut m = br#"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","annotations":{"x":""#.to_vec();
    m.extend(std::iter::repeat_n(b'a', 4 << 20));
    m.extend(br#""}}"#);
    std::fs::write(&big, &m).unwrap();
    let g = lab.curl(
        &[
            "-u",
            &creds(),
            "-X",
            "PUT",
            "-H",
            "Content-Type: application/vnd.oci.image.manifest.v1+json",
            "--data-binary",
            &format!("@{}", big.display()),
        ],
        "/v2/ok/app/manifests/big",
    );
    assert_eq!(g.code, 413, "{}", g.text());
    // 10,000 tags, paged by 1,000 through the Link headers.
    let tags_dir = lab
        .storage
        .join("docker/registry/v2/repositories/ok/app/_manifests/tags");
    let current = std::fs::read_to_string(tags_dir.join("v1/current/link")).unwrap();
    for i in 0..10_000 {
        let d = tags_dir.join(format!("t{i:05}/current"));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("link"), &current).unwrap();
    }
    let mut seen = Vec::new();
    let mut next = Some("/v2/ok/app/tags/list?n=1000".to_string());
    while let Some(p) = next.take() {
        let g = lab.curl(&[], &p);
        assert_eq!(g.code, 200, "{p}");
        let v: serde_json::Value = serde_json::from_slice(&g.body).unwrap();
        seen.extend(
            v["tags"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t.as_str().unwrap().to_string()),
        );
        next = g.header("Link").map(|l| {
            l.trim_start_matches('<')
                .split('>')
                .next()
                .unwrap()
                .to_string()
        });
        assert!(seen.len() <= 10_001);
    }
    assert_eq!(seen.len(), 10_001);
    assert!(seen.windows(2).all(|w| w[0] < w[1]));
    // Nothing panicked, nothing was written outside storage.
    let after = files_outside(lab.dir.path(), &lab.storage);
    let new: Vec<_> = after
        .iter()
        .filter(|p| !before.contains(p) && !p.ends_with("chunk") && !p.ends_with("big.json"))
        .collect();
    assert!(new.is_empty(), "written outside storage: {new:?}");
    let log = lab.app.log();
    assert!(!log.contains("panicked"), "{log}");
    assert_eq!(lab.curl(&["-u", &creds()], "/v2/").code, 200);
}

#[test]
fn the_appliance_ca_signs_the_registry_and_the_boot_iso_certificates() {
    require_tools!("openssl", "curl");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display().to_string();
    for sub in ["images", "ign"] {
        std::fs::create_dir_all(dir.path().join(sub)).unwrap();
    }
    let yaml = common::only(&format!(
        "dhcp: {{ enabled: false, leaseFile: \"{d}/leases.json\" }}\nhttp:\n  listen: 127.0.0.1:0\n  tlsListen: 127.0.0.1:0\n  imagesDir: \"{d}/images\"\n  ignitionDir: \"{d}/ign\"\nregistry:\n  storage: \"{d}/storage\"\n  listen: 127.0.0.1:0\n"
    ));
    let app = common::inproc::InProc::start_yaml(&yaml);
    let ca = dir.path().join("test-ca.pem");
    let iso_cert = dir.path().join("test-https-cert.pem");
    let out = common::run_ok(
        "openssl",
        &[
            "verify",
            "-CAfile",
            ca.to_str().unwrap(),
            iso_cert.to_str().unwrap(),
        ],
    );
    assert!(out.contains(": OK"), "{out}");
    let key_mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(dir.path().join("test-ca-key.pem"))
            .unwrap()
            .permissions(),
    );
    assert_eq!(key_mode & 0o777, 0o600);
    let url = format!("https://{}/v2/_catalog", app.addr("registry"));
    let got = lab::curl_in(None, &["--cacert", ca.to_str().unwrap()], &url);
    assert_eq!(got.code, 200, "{got:?}");
    assert_eq!(got.text(), "{\"repositories\":[]}\n");
    // render mirror prints that same CA.
    let render = common::run_ok(
        common::BIN,
        &[
            "render",
            "mirror",
            "--cluster",
            app.cluster_file.to_str().unwrap(),
        ],
    );
    assert_eq!(lab::ca_of(&render), std::fs::read_to_string(&ca).unwrap());
}

/// `render mirror --user --password-file` prints the pull secret's
/// `auths` entry after checking the password against the htpasswd file
/// (bcrypt); that printed document, used as skopeo's auth file as is,
/// pushes. A wrong password or user is a clear error and prints no entry;
/// without them the output says nodes pull anonymously.
#[test]
fn render_mirror_prints_a_checked_auths_entry_that_pushes() {
    require_lab!();
    let lab = Lab::start("");
    let cluster = lab.dir.path().join("cluster.yaml");
    let pass_file = lab.dir.path().join("pass");
    std::fs::write(&pass_file, format!("{PASS}\n")).unwrap();
    let render = |user: &str| {
        common::run(
            common::BIN,
            &[
                "render",
                "mirror",
                "--cluster",
                cluster.to_str().unwrap(),
                "--user",
                user,
                "--password-file",
                pass_file.to_str().unwrap(),
            ],
        )
    };
    let (code, out, err) = render(USER);
    assert_eq!(code, 0, "{err}");
    let line = out
        .lines()
        .find(|l| l.starts_with("{\"auths\""))
        .unwrap_or_else(|| panic!("no auths entry:\n{out}"));
    let v: serde_json::Value = serde_json::from_str(line).unwrap();
    let host = format!("{MIRROR}:5000");
    let auth = v["auths"][&host]["auth"].as_str().unwrap();
    let raw = common::run_ok("sh", &["-c", &format!("printf %s {auth} | base64 -d")]);
    assert_eq!(raw, creds());
    assert!(lab::ca_of(&out).contains("BEGIN CERTIFICATE"));
    let authfile = lab.dir.path().join("auth.json");
    std::fs::write(&authfile, line).unwrap();
    let layout = lab.dir.path().join("layout");
    oci_layout(&layout, "v1", 2, 11);
    let certs = lab.certs.to_str().unwrap().to_string();
    let (code, out) = lab.skopeo(&[
        "copy",
        "--dest-authfile",
        authfile.to_str().unwrap(),
        "--dest-cert-dir",
        &certs,
        &format!("oci:{}:v1", layout.display()),
        &format!("docker://{MIRROR}:5000/lab/authed:v1"),
    ]);
    assert_eq!(code, 0, "{out}");
    // A wrong password: refused, no entry.
    std::fs::write(&pass_file, "not-it\n").unwrap();
    let (code, out, err) = render(USER);
    assert_ne!(code, 0, "{out}");
    assert!(!out.contains("{\"auths\""), "{out}");
    assert!(err.contains("bcrypt check failed"), "{err}");
    let (code, _, err) = render("nobody");
    assert_ne!(code, 0);
    assert!(err.contains("has no user \"nobody\""), "{err}");
    // Without credentials: anonymous pulls said, the entry's shape shown.
    let out = common::run_ok(
        common::BIN,
        &["render", "mirror", "--cluster", cluster.to_str().unwrap()],
    );
    assert!(
        out.contains("cluster pulls are anonymous from the cluster's networks"),
        "{out}"
    );
    assert!(
        out.contains(&format!("# {{\"auths\": {{\"{host}\"")),
        "{out}"
    );
}

/// `preflight` resolves `registry.releaseImage` by digest through the
/// mirror as a node would (the name through the appliance's DNS, TLS
/// trusting only the appliance's CA, the manifest, every blob): with the
/// release pushed under its source's name it prints the OK line and
/// passes; with one layer removed from storage it names that blob and
/// fails.
#[test]
fn preflight_resolves_the_release_image_by_digest_through_the_mirror() {
    require_lab!();
    // Spawned: preflight lets only a process named crc-appliance hold the
    // ports (module doc).
    let lab = Lab::spawned("");
    let layout = lab.dir.path().join("release");
    let digest = oci_layout(&layout, "v1", 2, 21);
    let repo = "quay.io/openshift-release-dev/ocp-release";
    let (code, out) = lab.push(&layout, &format!("{repo}:4.99.0-x86_64"));
    assert_eq!(code, 0, "{out}");
    let cluster = lab.dir.path().join("cluster.yaml");
    let with_release = lab.dir.path().join("release.yaml");
    let yaml = std::fs::read_to_string(&cluster).unwrap();
    std::fs::write(
        &with_release,
        format!("{yaml}  releaseImage: {repo}@{digest}\n"),
    )
    .unwrap();
    let preflight = || {
        let (code, out, err) = common::run(
            "ip",
            &[
                "netns",
                "exec",
                lab.srv.name(),
                common::BIN,
                "preflight",
                "--cluster",
                with_release.to_str().unwrap(),
            ],
        );
        (code, format!("{out}{err}"))
    };
    let (code, out) = preflight();
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(&format!(
            "info release: registry.releaseImage {repo}@{digest} resolves through {MIRROR} (10.77.0.1) by digest: manifest and 3 blobs present"
        )),
        "{out}"
    );
    assert!(out.contains("preflight: ok"), "{out}");
    // One layer gone from storage: named, and preflight fails.
    let manifest: serde_json::Value = serde_json::from_slice(
        &std::fs::read(layout.join("blobs/sha256").join(&digest[7..])).unwrap(),
    )
    .unwrap();
    let layer = manifest["layers"][1]["digest"]
        .as_str()
        .unwrap()
        .to_string();
    let hex = &layer[7..];
    let data = lab
        .storage
        .join("docker/registry/v2/blobs/sha256")
        .join(&hex[..2])
        .join(hex)
        .join("data");
    std::fs::remove_file(&data).unwrap();
    let (code, out) = preflight();
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(&format!("WARN release: registry.releaseImage {repo}@{digest}: the mirror {MIRROR}:5000 lacks {repo}@{layer} (blob of {digest})")),
        "{out}"
    );
    assert!(out.contains("preflight: 1 problem(s)"), "{out}");
}

/// Done-when: `podman pull` from a node's namespace, trusting only the CA
/// `render mirror` printed (`--cert-dir` holding it; another CA fails),
/// resolving `mirror.<name>.<baseDomain>` through the appliance's DNS
/// (`/etc/netns/<ns>/resolv.conf`), pulls by tag and by digest: the image
/// podman stores has the pushed config's digest as its id.
#[test]
fn podman_pulls_by_tag_and_digest_from_a_node_namespace() {
    require_lab!();
    if !common::have("podman") {
        common::note_skip(&format!(
            "SKIPPED {}: podman is not installed",
            module_path!()
        ));
        return;
    }
    let lab = Lab::start("");
    let layout = lab.dir.path().join("layout");
    let digest = oci_layout(&layout, "v1", 2, 31);
    let certs = lab.certs.to_str().unwrap().to_string();
    let (code, out) = lab.push(&layout, "lab/podman:v1");
    assert_eq!(code, 0, "{out}");
    let manifest: serde_json::Value = serde_json::from_slice(
        &std::fs::read(layout.join("blobs/sha256").join(&digest[7..])).unwrap(),
    )
    .unwrap();
    let config = manifest["config"]["digest"].as_str().unwrap()[7..].to_string();
    // podman's own storage, run state and events under the test's dir.
    let root = lab.dir.path().join("podman");
    let (store, run) = (root.join("root"), root.join("run"));
    let podman = |args: &[&str]| {
        let mut a = vec![
            "netns",
            "exec",
            lab.node.name(),
            "podman",
            "--root",
            store.to_str().unwrap(),
            "--runroot",
            run.to_str().unwrap(),
            "--storage-driver",
            "vfs",
            "--events-backend",
            "file",
            "--cgroup-manager",
            "cgroupfs",
        ];
        a.extend_from_slice(args);
        let (code, out, err) = common::run("ip", &a);
        (code, format!("{out}{err}"))
    };
    // Another CA only: refused (the TLS check is real).
    let other = lab.dir.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    common::self_signed_cert(&other.join("ca.crt"), &other.join("k.pem"), "other");
    std::fs::remove_file(other.join("k.pem")).unwrap();
    let by_tag = format!("{MIRROR}:5000/lab/podman:v1");
    let (code, out) = podman(&[
        "pull",
        "--tls-verify=true",
        "--cert-dir",
        other.to_str().unwrap(),
        &by_tag,
    ]);
    assert_ne!(code, 0, "{out}");
    assert!(out.contains("certificate"), "{out}");
    for image in [by_tag.clone(), format!("{MIRROR}:5000/lab/podman@{digest}")] {
        let (code, out) = podman(&["pull", "--tls-verify=true", "--cert-dir", &certs, &image]);
        assert_eq!(code, 0, "{image}: {out}");
        let (code, id) = podman(&["image", "inspect", "--format", "{{.Id}}", &image]);
        assert_eq!((code, id.trim()), (0, config.as_str()), "{image}");
    }
    let (code, out) = podman(&["rmi", "--all", "--force"]);
    assert_eq!(code, 0, "{out}");
}
