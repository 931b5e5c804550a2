//! The pull-through cache against an upstream behind the Docker token flow
//! (issue #36 item 4: quay.io's and Docker Hub's way), in the appliance's
//! namespace: Debian's `docker-registry` with `auth: token:` is the
//! upstream, and it checks every token itself (signature against its
//! `rootcertbundle`, issuer, audience, the repository and actions granted);
//! `tests/fixtures/registry/token_server.py` is the token endpoint in front
//! of it (the stand-in for quay.io's `/v2/auth`: it issues RS256 JWTs for
//! the credentials it knows). skopeo pushes to the upstream through the
//! same flow; the node pulls through the appliance with TLS verified:
//!
//! - with the pull secret's credentials (`tok.good`): by tag and by digest,
//!   the manifest byte for byte and every layer's bytes; the appliance asked
//!   the token endpoint once for `repository:lib/app:pull` with those
//!   credentials, and used that token for the manifest and every blob;
//!   the upstream redirects blob requests to a "CDN" (its `redirect`
//!   storage middleware; nginx serving its tree), as quay.io and Docker
//!   Hub do, and the CDN served every layer without seeing an
//!   `Authorization`;
//! - with a wrong password in the pull secret (`tok.bad`, same upstream):
//!   the pull fails within 10 s with `UNAVAILABLE`, the token endpoint's
//!   refusal is the reason in status and in the log, and the password is
//!   in neither.
//!
//! The appliance runs in this process inside its namespace (the lab's
//! `InProc::in_netns`); every client and server around it is a real
//! process. Root, netns and the tools, or SKIPPED through the common helper.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
#[path = "registry/lab.rs"]
mod lab;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use common::Proc;
use lab::{Lab, MIRROR, curl_in, oci_layout_sized, row, sha256};

const UPSTREAM_ADDR: &str = "10.77.1.1:5004";
const TOKEN_ADDR: &str = "10.77.1.1:5005";
/// The "CDN" the upstream redirects blob requests to (nginx on its tree).
const CDN_ADDR: &str = "10.77.1.1:5006";
const SERVICE: &str = "upstream.token";
const UP_USER: &str = "puller";
const UP_PASS: &str = "up-s3cret";
const BAD_PASS: &str = "not-the-pass-7q";

fn tools() -> Result<(), String> {
    lab::tools_present(
        "rgt",
        &[
            "skopeo",
            "htpasswd",
            "curl",
            "tar",
            "gzip",
            "openssl",
            "python3",
            "docker-registry",
            "nginx",
        ],
    )
}

/// `program` in namespace `ns`, its stdout and stderr into `log`.
fn daemon(ns: &str, log: &Path, program: &str, args: &[&str]) -> Proc {
    let child = Command::new("ip")
        .args(["netns", "exec", ns, program])
        .args(args)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(log).unwrap())
        .stderr(Stdio::from(
            std::fs::OpenOptions::new().append(true).open(log).unwrap(),
        ))
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {program}: {e}"));
    Proc(child)
}

/// The upstream: TLS material (one CA for both endpoints, given to the
/// appliance as `caFile`), the token signer, the token endpoint and
/// `docker-registry` checking its tokens.
struct TokenUpstream {
    dir: PathBuf,
    _token: Proc,
    _cdn: Proc,
    registry: Option<Proc>,
}

impl TokenUpstream {
    fn start(lab: &Lab) -> TokenUpstream {
        let dir = upstream_dir(lab.dir.path());
        let d = |f: &str| dir.join(f).display().to_string();
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/registry/token_server.py");
        let token = daemon(
            lab.srv.name(),
            &dir.join("token-server.out"),
            "python3",
            &[
                script.to_str().unwrap(),
                "--listen",
                TOKEN_ADDR,
                "--key",
                &d("signer.key"),
                "--chain",
                &d("signer.crt"),
                "--tls-cert",
                &d("tls.crt"),
                "--tls-key",
                &d("tls.key"),
                "--issuer",
                "test-issuer",
                "--service",
                SERVICE,
                "--user",
                UP_USER,
                "--password",
                UP_PASS,
                "--log",
                &d("token.log"),
            ],
        );
        let cfg = format!(
            "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {store}\nhttp:\n  addr: {UPSTREAM_ADDR}\n  tls:\n    certificate: {crt}\n    key: {key}\nauth:\n  token:\n    realm: https://{TOKEN_ADDR}/token\n    service: {SERVICE}\n    issuer: test-issuer\n    rootcertbundle: {bundle}\nmiddleware:\n  storage:\n    - name: redirect\n      options:\n        baseurl: http://{CDN_ADDR}\n",
            store = d("store"),
            crt = d("tls.crt"),
            key = d("tls.key"),
            bundle = d("token-ca.crt"),
        );
        std::fs::write(dir.join("config.yml"), cfg).unwrap();
        let cdn = daemon(
            lab.srv.name(),
            &dir.join("nginx.out"),
            "nginx",
            &["-c", &cdn_config(&dir), "-g", "daemon off;"],
        );
        let registry = daemon(
            lab.srv.name(),
            &dir.join("registry.out"),
            "docker-registry",
            &["serve", &d("config.yml")],
        );
        let up = TokenUpstream {
            dir,
            _token: token,
            _cdn: cdn,
            registry: Some(registry),
        };
        let ca = up.ca();
        for (what, url) in [
            (
                "docker-registry listening",
                format!("https://{UPSTREAM_ADDR}/v2/"),
            ),
            (
                "token endpoint listening",
                format!("https://{TOKEN_ADDR}/token"),
            ),
        ] {
            common::wait_until(what, Duration::from_secs(20), || {
                curl_in(Some(lab.node.name()), &["--cacert", &ca], &url).code == 401
            });
        }
        up
    }

    /// The lines of `file` in the upstream's directory (none yet: empty).
    fn lines(&self, file: &str) -> Vec<String> {
        std::fs::read_to_string(self.dir.join(file))
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// The CDN's request lines: `<request> <status> auth=<Authorization>`.
    fn cdn_log(&self) -> Vec<String> {
        self.lines("cdn.log")
    }

    /// Kill `docker-registry` (the token endpoint stays).
    fn stop_registry(&mut self) {
        self.registry = None;
    }

    /// The upstream's storage tree.
    fn store(&self) -> PathBuf {
        self.dir.join("store")
    }

    /// `docker-registry`'s access log lines.
    fn access_log(&self) -> String {
        std::fs::read_to_string(self.dir.join("registry.out")).unwrap_or_default()
    }

    fn ca(&self) -> String {
        self.dir.join("certs/ca.crt").display().to_string()
    }

    /// The token endpoint's request lines.
    fn token_log(&self) -> Vec<String> {
        self.lines("token.log")
    }
}

/// nginx serving the upstream's storage tree on [`CDN_ADDR`], as a CDN
/// serves quay.io's blobs: the path `docker-registry`'s `redirect`
/// middleware sends clients to is the blob's path in the tree.
fn cdn_config(dir: &Path) -> String {
    let d = |f: &str| dir.join(f).display().to_string();
    std::fs::create_dir_all(dir.join("nginx-tmp")).unwrap();
    let temp: String = ["client_body", "proxy", "fastcgi", "uwsgi", "scgi"]
        .iter()
        .map(|t| format!("  {t}_temp_path {};\n", d("nginx-tmp")))
        .collect();
    let conf = format!(
        "worker_processes 1;\npid {pid};\nerror_log {err};\nevents {{ worker_connections 64; }}\nhttp {{\n  log_format cdn '$request $status auth=$http_authorization';\n  access_log {log} cdn;\n{temp}  server {{\n    listen {CDN_ADDR};\n    root {root};\n  }}\n}}\n",
        pid = d("nginx.pid"),
        err = d("nginx-error.log"),
        log = d("cdn.log"),
        root = d("store"),
    );
    std::fs::write(dir.join("nginx.conf"), conf).unwrap();
    d("nginx.conf")
}

fn upstream_dir(base: &Path) -> PathBuf {
    base.join("token-upstream")
}

/// TLS material under `base` (one CA for the upstream and its token
/// endpoint, given to the appliance as `caFile`) and the token signer's
/// certificate, signed by the CA `docker-registry` trusts for tokens.
fn material(base: &Path) -> PathBuf {
    let dir = upstream_dir(base);
    let certs = dir.join("certs");
    std::fs::create_dir_all(&certs).unwrap();
    let ip = UPSTREAM_ADDR.split(':').next().unwrap();
    common::ca_signed_cert(
        (
            &certs.join("ca.crt"),
            &dir.join("ca.key"),
            "upstream test CA",
        ),
        (&dir.join("tls.crt"), &dir.join("tls.key"), ip),
        &format!("subjectAltName=IP:{ip}\n"),
    );
    token_signer(&dir);
    certs.join("ca.crt")
}

/// The token signer: an RSA key (RS256, as quay.io signs) and its
/// certificate, signed by `token-ca.crt`, the bundle `docker-registry`
/// trusts for tokens.
fn token_signer(dir: &Path) {
    let p = |f: &str| dir.join(f).display().to_string();
    let rsa = ["-newkey", "rsa:2048", "-nodes", "-keyout"];
    let (ca_key, ca, key, csr) = (
        p("token-ca.key"),
        p("token-ca.crt"),
        p("signer.key"),
        p("signer.csr"),
    );
    common::run_ok(
        "openssl",
        &[
            &["req", "-x509"][..],
            &rsa,
            &[&ca_key, "-out", &ca, "-days", "2", "-subj", "/CN=token CA"],
        ]
        .concat(),
    );
    common::run_ok(
        "openssl",
        &[
            &["req"][..],
            &rsa,
            &[&key, "-out", &csr, "-subj", "/CN=token signer"],
        ]
        .concat(),
    );
    common::run_ok(
        "openssl",
        &[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            &ca,
            "-CAkey",
            &ca_key,
            "-CAcreateserial",
            "-out",
            &p("signer.crt"),
            "-days",
            "2",
        ],
    );
}

/// The lab with two pull-through entries for the one upstream: `tok.good`
/// with the right password in the pull secret, `tok.bad` with a wrong one.
fn start_lab() -> Lab {
    let dir = tempfile::tempdir().unwrap();
    let storage = dir.path().join("storage");
    let b64 = |p: &str| base64::engine::general_purpose::STANDARD.encode(format!("{UP_USER}:{p}"));
    let secret = dir.path().join("pull-secret.json");
    std::fs::write(
        &secret,
        format!(
            r#"{{"auths":{{"tok.good":{{"auth":"{}","email":"t@example.com"}},"tok.bad":{{"auth":"{}"}}}}}}"#,
            b64(UP_PASS),
            b64(BAD_PASS)
        ),
    )
    .unwrap();
    let ca = material(dir.path());
    let extra = format!(
        "  pullSecretFile: {}\n  pullThrough:\n    - {{ registry: tok.good, url: \"https://{UPSTREAM_ADDR}\", caFile: {ca} }}\n    - {{ registry: tok.bad, url: \"https://{UPSTREAM_ADDR}\", caFile: {ca} }}\n",
        secret.display(),
        ca = ca.display()
    );
    Lab::start_on(dir, storage, &extra)
}

/// skopeo pushes a 3-layer image to the upstream as `lib/app:v1` through
/// the token flow itself: (the manifest digest, the layers' digests).
fn push_upstream(lab: &Lab, up: &TokenUpstream) -> (String, Vec<String>) {
    let layout = lab.dir.path().join("src-layout");
    let (md, layers) = oci_layout_sized(&layout, "v1", &[50_000, 57_000, 64_000], 17);
    let creds = format!("{UP_USER}:{UP_PASS}");
    let certs = up.dir.join("certs").display().to_string();
    let src = format!("oci:{}:v1", layout.display());
    let dst = format!("docker://{UPSTREAM_ADDR}/lib/app:v1");
    let (code, out) = lab.skopeo(&[
        "copy",
        "--dest-cert-dir",
        &certs,
        "--dest-creds",
        &creds,
        &src,
        &dst,
    ]);
    assert_eq!(code, 0, "push to the token-authenticated upstream: {out}");
    (md, layers)
}

#[test]
fn pulls_through_a_token_authenticated_upstream_with_the_pull_secret() {
    if let Err(why) = tools() {
        common::note_skip(&format!("SKIPPED {}: {why}", module_path!()));
        return;
    }
    let lab = start_lab();
    let up = TokenUpstream::start(&lab);

    // skopeo pushes to the upstream through the token flow itself.
    let (md, layers) = push_upstream(&lab, &up);
    let before: Vec<String> = up.token_log();
    assert!(
        before
            .iter()
            .any(|l| l.contains("scope=repository:lib/app:pull,push answer=200")),
        "skopeo's push went through the token endpoint: {before:?}"
    );
    // The upstream really wants a token: anonymous is 401 with a Bearer challenge.
    let anon = curl_in(
        Some(lab.node.name()),
        &["--cacert", &up.ca()],
        &format!("https://{UPSTREAM_ADDR}/v2/lib/app/manifests/v1"),
    );
    assert_eq!(anon.code, 401);
    let challenge = anon.header("www-authenticate").unwrap_or_default();
    assert!(challenge.starts_with("Bearer realm="), "{challenge}");

    // The node pulls through the appliance, by tag and by digest.
    let mirror_certs = lab.certs.display().to_string();
    let by_tag = format!("docker://{MIRROR}:5000/tok.good/lib/app:v1");
    let (code, raw) = lab.skopeo(&["inspect", "--raw", "--cert-dir", &mirror_certs, &by_tag]);
    assert_eq!(code, 0, "{raw}\n{}", lab.app.log());
    assert_eq!(
        sha256(raw.trim_end().as_bytes()),
        md,
        "the manifest byte for byte"
    );
    let by_digest = format!("docker://{MIRROR}:5000/tok.good/lib/app@{md}");
    let out_layout = lab.dir.path().join("pulled");
    let dest = format!("oci:{}:x", out_layout.display());
    let (code, out) = lab.skopeo(&["copy", "--src-cert-dir", &mirror_certs, &by_digest, &dest]);
    assert_eq!(code, 0, "{out}\n{}", lab.app.log());
    assert_eq!(layers.len(), 3);
    for l in &layers {
        let got = std::fs::read(out_layout.join("blobs/sha256").join(&l[7..])).unwrap();
        assert_eq!(&sha256(&got), l, "layer {l} came through whole");
    }

    // Each layer came from the CDN the upstream redirected to (as quay.io's
    // blobs do), and the CDN never saw the upstream's credentials.
    let cdn = up.cdn_log();
    for l in &layers {
        assert!(
            cdn.iter()
                .any(|r| r.starts_with("GET /docker/registry/v2/blobs/sha256/")
                    && r.contains(&l[7..])
                    && r.contains(" 200 ")),
            "layer {l} fetched from the CDN: {cdn:?}"
        );
    }
    assert!(
        cdn.iter().all(|r| r.ends_with("auth=-")),
        "no Authorization sent to the CDN: {cdn:?}"
    );

    // One token, asked with the pull secret's credentials, for every request.
    let asked: Vec<String> = up
        .token_log()
        .into_iter()
        .skip(before.len())
        .filter(|l| l.contains(&format!("service={SERVICE} scope=repository:lib/app:pull ")))
        .collect();
    assert_eq!(
        asked,
        vec![format!(
            "token user={UP_USER} service={SERVICE} scope=repository:lib/app:pull answer=200"
        )],
        "the appliance asks once and reuses the token"
    );
    let rows = lab.upstream_rows();
    let good = row(&rows, "tok.good");
    assert_eq!(good.last_error, None, "{good:?}");
    assert_eq!(good.reachable, Some(true));
    assert!(good.bytes > 0, "{good:?}");

    // A wrong password in the pull secret: refused by the token endpoint,
    // a clear error within 10 s, the reason in status and the log, no password.
    let t0 = Instant::now();
    let bad = lab.curl(&[], "/v2/tok.bad/lib/app/manifests/v1");
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    assert_eq!(bad.code, 503, "{}", bad.text());
    assert!(bad.text().contains("UNAVAILABLE"), "{}", bad.text());
    assert!(
        up.token_log()
            .iter()
            .any(|l| l.starts_with(&format!("token user={UP_USER} ")) && l.ends_with("answer=401")),
        "the token endpoint refused the wrong password: {:?}",
        up.token_log()
    );
    let rows = lab.upstream_rows();
    let bad_row = row(&rows, "tok.bad");
    let why = bad_row.last_error.clone().unwrap_or_default();
    assert!(
        why.contains("token realm") && why.contains("401"),
        "{bad_row:?}"
    );
    let log = lab.app.log();
    assert!(log.contains("token realm"), "the reason in the log:\n{log}");
    let raw_status = lab.admin("/status");
    for secret in [UP_PASS, BAD_PASS] {
        assert!(!log.contains(secret), "a password in the log");
        assert!(!raw_status.contains(secret), "a password in status");
    }
    let b64_bad = base64::engine::general_purpose::STANDARD.encode(format!("{UP_USER}:{BAD_PASS}"));
    assert!(!log.contains(&b64_bad) && !raw_status.contains(&b64_bad));
}

/// `skopeo list-tags` through the mirror from the node: the tags.
fn list_tags(lab: &Lab, repo: &str) -> Vec<String> {
    let certs = lab.certs.display().to_string();
    let r = format!("docker://{MIRROR}:5000/{repo}");
    let (code, out) = lab.skopeo(&["list-tags", "--cert-dir", &certs, &r]);
    assert_eq!(code, 0, "{out}\n{}", lab.app.log());
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let mut tags: Vec<String> = v["Tags"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap().to_string())
        .collect();
    tags.sort();
    tags
}

#[test]
fn tags_list_through_the_mirror_asks_the_upstream_and_falls_back_to_storage() {
    if let Err(why) = tools() {
        common::note_skip(&format!("SKIPPED {}: {why}", module_path!()));
        return;
    }
    let lab = start_lab();
    let mut up = TokenUpstream::start(&lab);
    let (md, _) = push_upstream(&lab, &up);
    // 1,500 more tags upstream, written into its tree.
    let tags_dir = up
        .store()
        .join("docker/registry/v2/repositories/lib/app/_manifests/tags");
    let extra: Vec<String> = (0..1500).map(|i| format!("t{i:04}")).collect();
    for t in &extra {
        let d = tags_dir.join(t).join("current");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("link"), &md).unwrap();
    }
    let mut want: Vec<String> = extra.clone();
    want.push("v1".into());
    want.sort();
    assert_eq!(
        list_tags(&lab, "tok.good/lib/app"),
        want,
        "every upstream page"
    );
    // docker-registry 2.8 answers every tag on one page (it ignores `n`);
    // following `Link` is a unit test of `pulltags.rs`.
    assert!(
        up.access_log()
            .contains("\"GET /v2/lib/app/tags/list?n=1000 HTTP/1.1\" 200 "),
        "the appliance asked the upstream"
    );
    // A repository the upstream does not know, nothing stored: NAME_UNKNOWN.
    let none = lab.curl(&[], "/v2/tok.good/lib/none/tags/list");
    assert_eq!(none.code, 404, "{}", none.text());
    assert!(none.text().contains("NAME_UNKNOWN"), "{}", none.text());

    // v1 pulled through (stored), then the upstream is gone.
    let certs = lab.certs.display().to_string();
    let by_tag = format!("docker://{MIRROR}:5000/tok.good/lib/app:v1");
    let (code, raw) = lab.skopeo(&["inspect", "--raw", "--cert-dir", &certs, &by_tag]);
    assert_eq!(code, 0, "{raw}");
    up.stop_registry();
    let t0 = Instant::now();
    assert_eq!(
        list_tags(&lab, "tok.good/lib/app"),
        ["v1"],
        "the stored tags"
    );
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    let rows = lab.upstream_rows();
    let good = row(&rows, "tok.good");
    assert_eq!(good.reachable, Some(false), "{good:?}");
    assert!(good.last_error.is_some(), "{good:?}");
    // Nothing stored and the upstream gone: a clear 503 within 10 s.
    let t0 = Instant::now();
    let gone = lab.curl(&[], "/v2/tok.good/lib/other/tags/list");
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    assert_eq!(gone.code, 503, "{}", gone.text());
    assert!(gone.text().contains("UNAVAILABLE"), "{}", gone.text());
}
