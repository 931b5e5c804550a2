//! The pull-through cache (issue #36 item 4) with Debian's `docker-registry`
//! as the upstreams, in the appliance's namespace: `upstream.plain` on
//! plain HTTP without auth, `upstream.auth` over TLS (its own CA, given as
//! `caFile`) with htpasswd users and the credentials in a pull secret.
//! skopeo pushes to the upstreams directly; the node pulls through the
//! appliance (`mirror…/<registry>/<repository>`, its TLS verified):
//!
//! - by tag and by digest, the manifest byte for byte;
//! - 8 concurrent curl GETs of one large blob: one upstream GET (counted in
//!   docker-registry's own access log), every client gets the right bytes;
//! - a blob corrupted in the upstream's storage is never served whole nor
//!   stored (the clients' transfers fail);
//! - byte ranges of a blob still being fetched (a resumed pull) join the
//!   one fetch and get 206 with their bytes, or 416 past the end;
//! - upstreams gone (one killed, one stopped: it accepts and never answers):
//!   the cached image still pulls by tag (as last resolved, in status) and
//!   by digest; an uncached one fails within 10 s with `UNAVAILABLE` and
//!   the reason;
//! - `docker-registry` then serves the appliance's storage tree as is, with
//!   the same digests;
//! - the appliance keeps and reuses its connections to an upstream: the
//!   SYNs the upstream's namespace accepted (an nftables counter, an oracle
//!   outside the appliance) are fewer than the requests docker-registry
//!   logged from it, at most 2 for a pull one request after another, and
//!   equal to the appliance's own `connections`; with the upstream
//!   restarted (its kept connections closed), the next pull works and
//!   status shows no error.
//!
//! The appliance runs in-process in the lab's namespace (`registry/lab.rs`),
//! its tag TTL a test hook of its own; the upstreams and clients are
//! processes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
#[path = "registry/lab.rs"]
mod lab;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use crc_appliance::runtime::faults::TAG_TTL_ENV;
use lab::{Lab, MIRROR, curl_in, oci_layout_sized as layout, row, sha256};

const PLAIN: &str = "upstream.plain";
const PLAIN_ADDR: &str = "10.77.0.1:5001";
const AUTH: &str = "upstream.auth";
const AUTH_ADDR: &str = "10.77.1.1:5002";
const UP_USER: &str = "puller";
const UP_PASS: &str = "up-s3cret";
/// The large layer the concurrent pulls fetch.
const BIG: usize = 24 << 20;

fn tools() -> Result<(), String> {
    lab::tools_present(
        "rgp",
        &[
            "skopeo",
            "htpasswd",
            "curl",
            "tar",
            "gzip",
            "openssl",
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

/// A `docker-registry` in the appliance's namespace, its access log kept.
struct Upstream {
    child: Child,
    log: PathBuf,
    addr: &'static str,
    /// `--cert-dir` for skopeo (TLS upstream).
    certs: Option<PathBuf>,
    auth: bool,
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.kill();
    }
}

impl Upstream {
    /// Serve `root` on `addr`; `tls`: with the certificate [`tls_material`]
    /// made and htpasswd users.
    fn start(lab: &Lab, root: &Path, addr: &'static str, tls: bool) -> Upstream {
        let dir = up_dir(lab.dir.path(), addr);
        std::fs::create_dir_all(&dir).unwrap();
        let mut cfg = format!(
            "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: {addr}\n",
            root.display()
        );
        let mut certs = None;
        if tls {
            let ht = common::run_ok("htpasswd", &["-Bbn", UP_USER, UP_PASS]);
            std::fs::write(dir.join("htpasswd"), ht.trim()).unwrap();
            cfg.push_str(&format!(
                "  tls:\n    certificate: {d}/tls.crt\n    key: {d}/tls.key\nauth:\n  htpasswd:\n    realm: upstream\n    path: {d}/htpasswd\n",
                d = dir.display()
            ));
            certs = Some(dir.join("certs"));
        }
        let file = dir.join("config.yml");
        std::fs::write(&file, cfg).unwrap();
        let log = dir.join("access.log");
        let child = Command::new("ip")
            .args(["netns", "exec", lab.srv.name(), "docker-registry", "serve"])
            .arg(&file)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let up = Upstream {
            child,
            log,
            addr,
            certs,
            auth: tls,
        };
        let url = up.url("/v2/");
        common::wait_until("docker-registry listening", Duration::from_secs(20), || {
            let ca = up.ca();
            let mut args = vec![];
            if let Some(ca) = &ca {
                args.extend(["--cacert", ca.as_str()]);
            }
            let code = curl_in(Some(lab.node.name()), &args, &url).code;
            code == 200 || code == 401
        });
        up
    }

    fn url(&self, path: &str) -> String {
        let scheme = if self.certs.is_some() {
            "https"
        } else {
            "http"
        };
        format!("{scheme}://{}{path}", self.addr)
    }

    fn ca(&self) -> Option<String> {
        self.certs
            .as_ref()
            .map(|c| c.join("ca.crt").display().to_string())
    }

    /// skopeo copy of the OCI layout `layout:tag` to `repo:tag` here.
    fn push(&self, lab: &Lab, layout: &Path, tag: &str, repo: &str) {
        let src = format!("oci:{}:{tag}", layout.display());
        let dst = format!("docker://{}/{repo}:{tag}", self.addr);
        let creds = format!("{UP_USER}:{UP_PASS}");
        let mut args = vec!["copy"];
        let cert_dir = self.certs.as_ref().map(|c| c.display().to_string());
        match &cert_dir {
            Some(c) => args.extend(["--dest-cert-dir", c.as_str()]),
            None => args.push("--dest-tls-verify=false"),
        }
        if self.auth {
            args.extend(["--dest-creds", creds.as_str()]);
        }
        args.extend([src.as_str(), dst.as_str()]);
        let (code, out) = lab.skopeo(&args);
        assert_eq!(code, 0, "push to the upstream: {out}");
    }

    /// Requests the appliance made, in the access log (by its user agent).
    fn requests_from_appliance(&self) -> usize {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("\"crc-appliance-registry\""))
            .count()
    }

    /// Successful `GET`s of `path` in the access log.
    fn gets(&self, path: &str) -> usize {
        let needle = format!("\"GET {path} HTTP/1.1\" 200 ");
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains(&needle))
            .count()
    }

    fn signal(&self, sig: &str) {
        common::run_ok("kill", &[sig, &self.child.id().to_string()]);
    }

    fn kill(&mut self) {
        let _ = Command::new("kill")
            .args(["-CONT", &self.child.id().to_string()])
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn up_dir(base: &Path, addr: &str) -> PathBuf {
    base.join(format!("up-{}", addr.replace([':', '.'], "-")))
}

/// A CA (`certs/ca.crt`) and a certificate for `addr`'s IP signed by it,
/// in the upstream's directory under `base`: the CA's path.
fn tls_material(base: &Path, addr: &str) -> PathBuf {
    let dir = up_dir(base, addr);
    let ip = addr.split(':').next().unwrap();
    let c = dir.join("certs");
    std::fs::create_dir_all(&c).unwrap();
    common::ca_signed_cert(
        (&c.join("ca.crt"), &dir.join("ca.key"), "upstream test CA"),
        (&dir.join("tls.crt"), &dir.join("tls.key"), ip),
        &format!("subjectAltName=IP:{ip}\n"),
    );
    c.join("ca.crt")
}

/// The lab with both upstreams configured (they start later); tags are
/// re-resolved after `ttl_ms`.
fn start_lab(ttl_ms: &str) -> Lab {
    let dir = tempfile::tempdir().unwrap();
    let storage = dir.path().join("storage");
    let ca = tls_material(dir.path(), AUTH_ADDR);
    let secret = dir.path().join("pull-secret.json");
    let auth = base64::engine::general_purpose::STANDARD.encode(format!("{UP_USER}:{UP_PASS}"));
    std::fs::write(
        &secret,
        format!(r#"{{"auths":{{"{AUTH_ADDR}":{{"auth":"{auth}","email":"t@example.com"}}}}}}"#),
    )
    .unwrap();
    let extra = format!(
        "  pullSecretFile: {}\n  pullThrough:\n    - {{ registry: {PLAIN}, url: \"http://{PLAIN_ADDR}\" }}\n    - {{ registry: {AUTH}, url: \"https://{AUTH_ADDR}\", caFile: {} }}\n",
        secret.display(),
        ca.display()
    );
    Lab::start_hooked(dir, storage, &extra, &[(TAG_TTL_ENV, ttl_ms)])
}

fn blob_path(root: &Path, digest: &str) -> PathBuf {
    root.join("docker/registry/v2/blobs/sha256")
        .join(&digest[7..9])
        .join(&digest[7..])
        .join("data")
}

/// Pull `reference` (a `docker://` one) into a fresh OCI layout.
fn copy_out(lab: &Lab, reference: &str, to: &str) -> (i32, String) {
    let certs = lab.certs.display().to_string();
    let dest = format!("oci:{}:x", lab.dir.path().join(to).display());
    lab.skopeo(&["copy", "--src-cert-dir", &certs, reference, &dest])
}

/// What the node sees through the appliance while the upstreams are
/// there: by tag, by digest, 8 concurrent pulls of one blob.
fn pull_while_up(lab: &Lab, up: &Upstream, name: &str, md: &str, layers: &[String]) {
    let certs = lab.certs.display().to_string();
    let by_tag = format!("docker://{MIRROR}:5000/{name}/lib/app:v1");
    let (code, raw) = lab.skopeo(&["inspect", "--raw", "--cert-dir", &certs, &by_tag]);
    assert_eq!(code, 0, "{raw}\n{}", lab.app.log());
    assert_eq!(
        sha256(raw.trim_end().as_bytes()),
        md,
        "the manifest byte for byte"
    );
    let path = format!("/v2/{name}/lib/app/blobs/{}", layers[0]);
    let got: Vec<lab::Got> = std::thread::scope(|s| {
        let pulls: Vec<_> = (0..8).map(|_| s.spawn(|| lab.curl(&[], &path))).collect();
        pulls.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for g in &got {
        assert_eq!(g.code, 200, "{}", g.text());
        assert_eq!(
            g.body.len(),
            std::fs::metadata(blob_path(&lab.storage, &layers[0]))
                .unwrap()
                .len() as usize
        );
        assert_eq!(
            sha256(&g.body),
            layers[0],
            "every client gets the blob's bytes"
        );
    }
    let upstream_path = format!("/v2/lib/app/blobs/{}", layers[0]);
    assert_eq!(
        up.gets(&upstream_path),
        1,
        "8 clients, one upstream fetch:\n{}\n{:?}",
        std::fs::read_to_string(&up.log).unwrap_or_default(),
        lab.upstream_rows()
    );
    let by_digest = format!("docker://{MIRROR}:5000/{name}/lib/app@{md}");
    let (code, out) = copy_out(lab, &by_digest, &format!("pulled-{name}"));
    assert_eq!(code, 0, "{out}\n{}", lab.app.log());
    assert_eq!(up.gets(&upstream_path), 1, "then served from storage");
}

/// A blob whose bytes upstream do not match its digest: the clients'
/// transfers fail short of the whole blob, nothing is stored.
fn corrupt_blob_is_never_served(lab: &Lab, up: &Upstream, root: &Path) {
    let dir = lab.dir.path().join("bad-img");
    let (_, layers) = layout(&dir, "v1", &[2 << 20], 5);
    up.push(lab, &dir, "v1", "lib/bad");
    let data = blob_path(root, &layers[0]);
    let mut bytes = std::fs::read(&data).unwrap();
    bytes[1000] ^= 0xff;
    std::fs::write(&data, &bytes).unwrap();
    let path = format!("/v2/{PLAIN}/lib/bad/blobs/{}", layers[0]);
    for _ in 0..2 {
        let got = lab.curl(&[], &path);
        assert!(
            got.body.len() < bytes.len(),
            "a wrong blob was served whole ({} bytes, code {})",
            got.body.len(),
            got.code
        );
    }
    assert!(!blob_path(&lab.storage, &layers[0]).exists(), "stored");
    let uploads = lab.storage.join(format!(
        "docker/registry/v2/repositories/{PLAIN}/lib/bad/_uploads"
    ));
    let left = std::fs::read_dir(&uploads).map(|d| d.count()).unwrap_or(0);
    assert_eq!(left, 0, "an upload file was left in {}", uploads.display());
    let s = lab.upstream_rows();
    let err = row(&s, PLAIN).last_error.clone().unwrap_or_default();
    assert!(err.contains("hash to"), "{s:?}");
}

/// With the upstream gone: the cached image by tag and digest, an
/// uncached one a clear 503 within 10 s (`why` in its message).
fn pull_while_down(lab: &Lab, name: &str, md: &str, other: &str, why: &str) {
    let (code, out) = copy_out(
        lab,
        &format!("docker://{MIRROR}:5000/{name}/lib/app:v1"),
        &format!("down-tag-{name}"),
    );
    assert_eq!(code, 0, "cached by tag: {out}\n{}", lab.app.log());
    let (code, out) = copy_out(
        lab,
        &format!("docker://{MIRROR}:5000/{name}/lib/app@{md}"),
        &format!("down-digest-{name}"),
    );
    assert_eq!(code, 0, "cached by digest: {out}");
    for path in [
        format!("/v2/{name}/lib/other/manifests/v2"),
        format!("/v2/{name}/lib/other/manifests/{other}"),
        format!("/v2/{name}/lib/app/blobs/sha256:{}", "e".repeat(64)),
    ] {
        let t0 = Instant::now();
        let got = lab.curl(
            &["-H", "Accept: application/vnd.oci.image.manifest.v1+json"],
            &path,
        );
        let took = t0.elapsed();
        assert!(took < Duration::from_secs(10), "{path}: {took:?}");
        assert_eq!(got.code, 503, "{path}: {}", got.text());
        let v: serde_json::Value = serde_json::from_slice(&got.body).unwrap();
        assert_eq!(v["errors"][0]["code"], "UNAVAILABLE", "{v}");
        let msg = v["errors"][0]["message"].as_str().unwrap();
        assert!(msg.contains(why), "{path}: {msg:?} lacks {why:?}");
    }
}

#[test]
fn pulls_through_upstreams_once_and_serves_the_cache_when_they_are_gone() {
    require_lab!();
    let lab = start_lab("0");
    let (plain_root, auth_root) = (
        lab.dir.path().join("plain-root"),
        lab.dir.path().join("auth-root"),
    );
    let mut plain = Upstream::start(&lab, &plain_root, PLAIN_ADDR, false);
    let auth = Upstream::start(&lab, &auth_root, AUTH_ADDR, true);
    let other_img = lab.dir.path().join("other-img");
    let (other_md, _) = layout(&other_img, "v2", &[30_000], 99);
    // One image per upstream: a blob already stored for one is only
    // confirmed (HEAD) at the other, not fetched.
    let mut images = Vec::new();
    for (i, (up, name)) in [(&plain, PLAIN), (&auth, AUTH)].into_iter().enumerate() {
        let img = lab.dir.path().join(format!("img-{name}"));
        let (md, layers) = layout(&img, "v1", &[BIG, 40_000], 11 + 10 * i as u32);
        up.push(&lab, &img, "v1", "lib/app");
        up.push(&lab, &other_img, "v2", "lib/other");
        pull_while_up(&lab, up, name, &md, &layers);
        images.push((name, md, layers));
    }
    corrupt_blob_is_never_served(&lab, &plain, &plain_root);
    let s = lab.upstream_rows();
    for name in [PLAIN, AUTH] {
        let r = row(&s, name);
        assert_eq!(r.reachable, Some(true), "{r:?}");
        assert!(r.bytes >= BIG as u64, "{r:?}");
        assert!(r.misses >= 1 && r.hits >= 1, "{r:?}");
    }
    // Gone: one killed (refused), one stopped (accepts, never answers).
    plain.kill();
    auth.signal("-STOP");
    for ((name, md, _), why) in images.iter().zip(["refused", "no answer"]) {
        pull_while_down(&lab, name, md, &other_md, why);
    }
    let s = lab.upstream_rows();
    for name in [PLAIN, AUTH] {
        let r = row(&s, name);
        assert_eq!(r.reachable, Some(false), "{r:?}");
        assert!(r.stale_tags >= 1, "{r:?}");
        assert!(r.last_error.is_some() && r.last_error_at.is_some(), "{r:?}");
    }
    assert!(
        lab.app.log().contains("registry: upstream"),
        "{}",
        lab.app.log()
    );
    drop(auth);
    // docker-registry serves the tree the appliance wrote, same digests.
    let dist = Upstream::start(&lab, &lab.storage, "10.77.0.1:5003", false);
    for (name, md, layers) in &images {
        let r = format!("docker://{}/{name}/lib/app:v1", dist.addr);
        let (code, raw) = lab.skopeo(&["inspect", "--raw", "--tls-verify=false", &r]);
        assert_eq!(code, 0, "{raw}");
        assert_eq!(&sha256(raw.trim_end().as_bytes()), md);
        let got = curl_in(
            Some(lab.node.name()),
            &[],
            &dist.url(&format!("/v2/{name}/lib/app/blobs/{}", layers[0])),
        );
        assert_eq!(&sha256(&got.body), &layers[0]);
    }
}

/// A resumed pull (c/image asks `Range: bytes=N-` after a cut) of a blob
/// still being fetched: the requests join the one upstream fetch (the
/// upstream is stopped while they arrive, so the fetch is in flight) and
/// get what storage would give them: 206 with the asked bytes and
/// `Content-Range`, 416 past the end; the plain GET gets the whole blob.
#[test]
fn a_range_of_a_blob_still_being_fetched_is_answered_with_its_bytes() {
    require_lab!();
    let lab = start_lab("0");
    let root = lab.dir.path().join("plain-root");
    let up = Upstream::start(&lab, &root, PLAIN_ADDR, false);
    let img = lab.dir.path().join("img-range");
    let (_, layers) = layout(&img, "v1", &[4 << 20], 41);
    up.push(&lab, &img, "v1", "lib/app");
    let blob = std::fs::read(blob_path(&root, &layers[0])).unwrap();
    let len = blob.len();
    let path = format!("/v2/{PLAIN}/lib/app/blobs/{}", layers[0]);
    let misses = || row(&lab.upstream_rows(), PLAIN).misses;
    let joined = |n: u64| {
        common::wait_until("requests joined the fetch", Duration::from_secs(5), || {
            misses() >= n
        })
    };
    let from = 1_000_000;
    let tail = format!("Range: bytes={from}-");
    let past = format!("Range: bytes={len}-");
    // Stopped: it accepts the fetch's connection and answers nothing yet
    // (within the fetch's 8 s head deadline).
    up.signal("-STOP");
    let (whole, rest, head, beyond) = std::thread::scope(|s| {
        let whole = s.spawn(|| lab.curl(&[], &path));
        joined(1);
        let rest = s.spawn(|| lab.curl(&["-H", &tail], &path));
        let head = s.spawn(|| lab.curl(&["-H", "Range: bytes=0-99"], &path));
        let beyond = s.spawn(|| lab.curl(&["-H", &past], &path));
        joined(4);
        assert!(
            !blob_path(&lab.storage, &layers[0]).exists(),
            "stored before the upstream answered"
        );
        up.signal("-CONT");
        let j = |h: std::thread::ScopedJoinHandle<'_, lab::Got>| h.join().unwrap();
        (j(whole), j(rest), j(head), j(beyond))
    });
    assert_eq!(whole.code, 200, "{}", whole.text());
    assert_eq!(sha256(&whole.body), layers[0]);
    assert_eq!(rest.code, 206, "{:?} {}", rest.headers, lab.app.log());
    let want = format!("bytes {from}-{}/{len}", len - 1);
    assert_eq!(rest.header("Content-Range").as_deref(), Some(want.as_str()));
    assert_eq!(rest.body, blob[from..], "the bytes from {from} on");
    assert_eq!(head.code, 206, "{:?}", head.headers);
    let want = format!("bytes 0-99/{len}");
    assert_eq!(head.header("Content-Range").as_deref(), Some(want.as_str()));
    assert_eq!(head.body, blob[..100]);
    assert_eq!(beyond.code, 416, "{:?}", beyond.headers);
    let want = format!("bytes */{len}");
    assert_eq!(
        beyond.header("Content-Range").as_deref(),
        Some(want.as_str())
    );
    let upstream_path = format!("/v2/lib/app/blobs/{}", layers[0]);
    assert_eq!(
        up.gets(&upstream_path),
        1,
        "one upstream fetch for all four"
    );
    // Stored now: the same range from storage, as the flight gave it.
    let again = lab.curl(&["-H", &tail], &path);
    assert_eq!((again.code, again.body == blob[from..]), (206, true));
}

/// From now on, count the TCP connections the appliance's namespace (where
/// the upstreams run) accepts on `port`: an nftables counter of the SYNs
/// to it; the returned closure reads it.
fn count_syns<'a>(lab: &'a Lab, port: &str) -> impl Fn() -> u64 + 'a {
    let ns = &lab.srv;
    ns.exec(&["nft", "add", "table", "inet", "conns"]);
    ns.exec(&[
        "nft",
        "add",
        "chain",
        "inet",
        "conns",
        "in",
        "{ type filter hook input priority 0; }",
    ]);
    ns.exec(&[
        "nft",
        "add",
        "rule",
        "inet",
        "conns",
        "in",
        "tcp",
        "dport",
        port,
        "tcp",
        "flags",
        "&",
        "(syn|ack)",
        "==",
        "syn",
        "counter",
    ]);
    move || {
        let json = ns.exec(&["nft", "-j", "list", "table", "inet", "conns"]);
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        let counted: Vec<u64> = v["nftables"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|o| o["rule"]["expr"].as_array())
            .flatten()
            .filter_map(|e| e["counter"]["packets"].as_u64())
            .collect();
        assert_eq!(counted.len(), 1, "{json}");
        counted[0]
    }
}

/// The connections the appliance says it opened to `name`.
fn connections(lab: &Lab, name: &str) -> u64 {
    row(&lab.upstream_rows(), name).connections
}

/// Pull `repo:v1` under `name` one request after another with curl (the
/// manifest, then each blob in turn), checking every digest.
fn pull_one_by_one(lab: &Lab, name: &str, repo: &str, md: &str) {
    let accept = ["-H", "Accept: application/vnd.oci.image.manifest.v1+json"];
    let got = lab.curl(&accept, &format!("/v2/{name}/{repo}/manifests/v1"));
    assert_eq!(got.code, 200, "{}", got.text());
    assert_eq!(sha256(&got.body), md);
    let m: serde_json::Value = serde_json::from_slice(&got.body).unwrap();
    let layers = m["layers"].as_array().unwrap().iter();
    for d in std::iter::once(&m["config"]).chain(layers) {
        let d = d["digest"].as_str().unwrap();
        let got = lab.curl(&[], &format!("/v2/{name}/{repo}/blobs/{d}"));
        assert_eq!((got.code, sha256(&got.body)), (200, d.to_string()));
    }
}

#[test]
fn upstream_connections_are_kept_and_reused() {
    require_lab!();
    let lab = start_lab("0");
    let root = lab.dir.path().join("auth-root");
    let mut auth = Upstream::start(&lab, &root, AUTH_ADDR, true);
    let mut images = Vec::new();
    for (i, repo) in ["lib/many", "lib/seq", "lib/after"].into_iter().enumerate() {
        let img = lab.dir.path().join(format!("img-{i}"));
        let sizes: Vec<usize> = (0..5).map(|l| 40_000 + 9_000 * l).collect();
        let (md, _) = layout(&img, "v1", &sizes, 300 + 10 * i as u32);
        auth.push(&lab, &img, "v1", repo);
        images.push(md);
    }
    let syns = count_syns(&lab, AUTH_ADDR.split(':').nth(1).unwrap());
    let opened = connections(&lab, AUTH);
    // skopeo fetches the layers in parallel: a few connections at once,
    // each carrying several requests.
    let (code, out) = copy_out(
        &lab,
        &format!("docker://{MIRROR}:5000/{AUTH}/lib/many:v1"),
        "many",
    );
    assert_eq!(code, 0, "{out}\n{}", lab.app.log());
    let (parallel, asked) = (syns(), auth.requests_from_appliance());
    assert!(
        asked >= 8 && parallel >= 1 && (parallel as usize) < asked,
        "{parallel} connections for {asked} requests"
    );
    // One request after another: at most 2 new connections (none if the
    // kept ones serve them all) for 7 requests.
    pull_one_by_one(&lab, AUTH, "lib/seq", &images[1]);
    let (sequential, asked_seq) = (syns() - parallel, auth.requests_from_appliance() - asked);
    assert!(
        asked_seq >= 7 && sequential <= 2,
        "{sequential} connections for {asked_seq} requests one after another"
    );
    assert_eq!(
        connections(&lab, AUTH) - opened,
        syns(),
        "the appliance's count matches the upstream's"
    );
    // Restarted: the kept connections are closed under the pool.
    auth.kill();
    let before = syns();
    let auth = Upstream::start(&lab, &root, AUTH_ADDR, true);
    let restart_probes = syns() - before;
    let (code, out) = copy_out(
        &lab,
        &format!("docker://{MIRROR}:5000/{AUTH}/lib/after:v1"),
        "after",
    );
    assert_eq!(code, 0, "{out}\n{}", lab.app.log());
    assert!(auth.requests_from_appliance() >= 8);
    assert!(
        syns() - before > restart_probes,
        "new connections after the restart"
    );
    let r = row(&lab.upstream_rows(), AUTH).clone();
    assert_eq!(
        (r.reachable, r.last_error.as_deref()),
        (Some(true), None),
        "{r:?}"
    );
    let registry = lab.app.status().registry.unwrap();
    assert_eq!(registry.upstream_errors, 0, "{:?}", registry.last_error);
    let metrics = lab.admin("/metrics");
    let line = format!(
        "crc_appliance_registry_upstream_connections_total{{upstream=\"{AUTH}\"}} {}",
        r.connections
    );
    assert!(metrics.contains(&line), "{line} not in:\n{metrics}");
}
