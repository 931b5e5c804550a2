//! The mirror registry's test lab: the appliance in one network namespace
//! (10.77.0.1, DNS and the registry), a node in another (10.77.0.10, also
//! 10.77.1.2: an address outside the cluster's networks), the node's
//! resolver pointed at the appliance (`/etc/netns/<ns>/resolv.conf`), an
//! htpasswd file made by `htpasswd -B`, and OCI layouts written here.
//!
//! The appliance runs in-process (`common::inproc::InProc::in_netns`: its
//! threads join the appliance's namespace before anything binds), its
//! registry's quiet time a test hook of its own; [`Lab::spawned`] runs the
//! binary under `ip netns exec` instead, for a test that kills it. The
//! clients (skopeo, curl, podman, the `render mirror` and `preflight`
//! commands) are real processes either way.

#![allow(dead_code)] // each test binary uses part of the lab

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::common::inproc::InProc;
use super::common::{Appliance, BIN, Netns, run, run_ok, unique_name};
use crc_appliance::runtime::faults::PULL_QUIET_ENV;
use crc_appliance::services::registry::pullthrough::UpstreamStatus;

/// Network namespaces (probed with `prefix`) and every program of `tools`:
/// the reason a registry test cannot run, if any.
pub fn tools_present(prefix: &str, tools: &[&str]) -> Result<(), String> {
    super::common::netns_available(prefix)?;
    for t in tools {
        if !super::common::have(t) {
            return Err(format!("{t} is not installed"));
        }
    }
    Ok(())
}

pub const APPLIANCE: &str = "10.77.0.1";
pub const NODE: &str = "10.77.0.10";
pub const OUTSIDE: &str = "10.77.1.2";
pub const MIRROR: &str = "mirror.test.crc.testing";
pub const USER: &str = "pusher";
pub const PASS: &str = "s3cret-pass";

/// The lab around an appliance `A`: [`InProc`] ([`Lab::start`]) or the
/// spawned binary ([`Lab::spawned`]).
pub struct Lab<A = InProc> {
    pub app: A,
    pub srv: Netns,
    pub node: Netns,
    pub dir: tempfile::TempDir,
    /// The CA `render mirror` printed, as a cert dir for skopeo (`ca.crt`).
    pub certs: PathBuf,
    pub storage: PathBuf,
    etc: PathBuf,
}

impl<A> Drop for Lab<A> {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.etc);
    }
}

pub fn cluster_yaml(dir: &Path, storage: &Path, extra: &str) -> String {
    format!(
        r#"name: test
baseDomain: crc.testing
network:
  cidr: 10.77.0.0/24
  gateway: 10.77.0.254
  applianceIP: {APPLIANCE}
nodes:
  - {{ name: bootstrap, role: bootstrap, mac: "52:54:00:14:00:05", ip: 10.77.0.5 }}
  - {{ name: master-0, role: master, mac: "52:54:00:14:00:0a", ip: {NODE} }}
  - {{ name: master-1, role: master, mac: "52:54:00:14:00:0b", ip: 10.77.0.11 }}
  - {{ name: master-2, role: master, mac: "52:54:00:14:00:0c", ip: 10.77.0.12 }}
dhcp:
  enabled: false
  leaseFile: {d}/leases.json
loadBalancer:
  enabled: false
http:
  enabled: false
admin:
  listen: 127.0.0.1:9180
registry:
  storage: {s}
  htpasswdFile: {d}/htpasswd
{extra}"#,
        d = dir.display(),
        s = storage.display()
    )
}

/// The registry's quiet time before the timeline's `pulled`: 2 seconds
/// here, not a minute.
const QUIET_SECS: &str = "2";

impl Lab {
    /// Start the lab; `extra` is appended to the `registry:` section.
    pub fn start(extra: &str) -> Lab {
        let dir = tempfile::tempdir().unwrap();
        let storage = dir.path().join("storage");
        Lab::start_on(dir, storage, extra)
    }

    pub fn start_on(dir: tempfile::TempDir, storage: PathBuf, extra: &str) -> Lab {
        Lab::start_hooked(dir, storage, extra, &[])
    }

    /// [`Lab::start_on`] with test hooks for the appliance
    /// (`runtime::faults`, by their environment variables' names).
    pub fn start_hooked(
        dir: tempfile::TempDir,
        storage: PathBuf,
        extra: &str,
        hooks: &[(&str, &str)],
    ) -> Lab {
        Lab::build(dir, storage, extra, |srv, file| {
            let mut options = InProc::in_netns(srv.name()).hook(PULL_QUIET_ENV, QUIET_SECS);
            for (name, value) in hooks {
                options = options.hook(name, value);
            }
            options.start_path(file)
        })
    }

    /// The pull-through rows of the appliance's status, by upstream.
    pub fn upstream_rows(&self) -> Vec<UpstreamStatus> {
        let registry = self.app.status().registry.expect("a registry section");
        registry.pull_through
    }
}

/// The row of upstream `registry` among `rows`.
pub fn row<'a>(rows: &'a [UpstreamStatus], registry: &str) -> &'a UpstreamStatus {
    rows.iter()
        .find(|r| r.registry == registry)
        .expect("the upstream's row")
}

impl Lab<Appliance> {
    /// The lab with the appliance the spawned binary under `ip netns exec`
    /// (a test that kills it with a signal).
    pub fn spawned(extra: &str) -> Lab<Appliance> {
        let dir = tempfile::tempdir().unwrap();
        let storage = dir.path().join("storage");
        Lab::build(dir, storage, extra, |srv, file| {
            let app = Appliance::launch()
                .netns(srv.name())
                .env(PULL_QUIET_ENV, QUIET_SECS)
                .start_path(file);
            app.wait_log("listening for registry", std::time::Duration::from_secs(20));
            app
        })
    }
}

impl<A> Lab<A> {
    /// The namespaces, the htpasswd file, the cluster file and the CA
    /// `render mirror` prints; then the appliance, `start(srv, file)`.
    fn build(
        dir: tempfile::TempDir,
        storage: PathBuf,
        extra: &str,
        start: impl FnOnce(&Netns, &Path) -> A,
    ) -> Lab<A> {
        let base = unique_name("rg");
        let srv = Netns::new(format!("{base}s"));
        let node = Netns::new(format!("{base}n"));
        let (a, b) = (format!("{base}a"), format!("{base}b"));
        super::common::veth(&a, &srv, &b, &node);
        srv.ip(&["addr", "add", "10.77.0.1/24", "dev", &a]);
        srv.ip(&["addr", "add", "10.77.1.1/24", "dev", &a]);
        srv.ip(&["link", "set", &a, "up"]);
        node.ip(&["addr", "add", &format!("{NODE}/24"), "dev", &b]);
        node.ip(&["addr", "add", &format!("{OUTSIDE}/24"), "dev", &b]);
        node.ip(&["link", "set", &b, "up"]);
        let etc = PathBuf::from("/etc/netns").join(node.name());
        std::fs::create_dir_all(&etc).unwrap();
        std::fs::write(etc.join("resolv.conf"), format!("nameserver {APPLIANCE}\n")).unwrap();
        let ht = run_ok("htpasswd", &["-Bbn", USER, PASS]);
        std::fs::write(dir.path().join("htpasswd"), ht.trim()).unwrap();
        let yaml = cluster_yaml(dir.path(), &storage, extra);
        let file = dir.path().join("cluster.yaml");
        std::fs::write(&file, yaml).unwrap();
        let certs = dir.path().join("certs");
        std::fs::create_dir_all(&certs).unwrap();
        let render = run_ok(
            BIN,
            &["render", "mirror", "--cluster", file.to_str().unwrap()],
        );
        std::fs::write(certs.join("ca.crt"), ca_of(&render)).unwrap();
        let app = start(&srv, &file);
        Lab {
            app,
            srv,
            node,
            dir,
            certs,
            storage,
            etc,
        }
    }

    /// `https://mirror.test.crc.testing:5000`
    pub fn url(&self) -> String {
        format!("https://{MIRROR}:5000")
    }

    /// `GET <path>` on the admin API (in the appliance's namespace).
    pub fn admin(&self, path: &str) -> String {
        run_ok(
            "ip",
            &[
                "netns",
                "exec",
                self.srv.name(),
                "curl",
                "-sS",
                "--max-time",
                "10",
                &format!("http://127.0.0.1:9180{path}"),
            ],
        )
    }

    /// skopeo in the node's namespace: (exit code, stdout+stderr).
    pub fn skopeo(&self, args: &[&str]) -> (i32, String) {
        let mut a = vec!["netns", "exec", self.node.name(), "skopeo"];
        a.extend_from_slice(args);
        let (code, out, err) = run("ip", &a);
        (code, format!("{out}{err}"))
    }

    /// `skopeo copy` of the OCI layout `layout`'s `v1` to
    /// `<MIRROR>:5000/<dest>`, from the node, as the pushing user.
    pub fn push(&self, layout: &Path, dest: &str) -> (i32, String) {
        self.skopeo(&[
            "copy",
            "--dest-creds",
            &format!("{USER}:{PASS}"),
            "--dest-cert-dir",
            self.certs.to_str().unwrap(),
            &format!("oci:{}:v1", layout.display()),
            &format!("docker://{MIRROR}:5000/{dest}"),
        ])
    }

    /// curl in the node's namespace against the registry, trusting the CA.
    pub fn curl(&self, args: &[&str], path: &str) -> Got {
        let url = format!("{}{path}", self.url());
        let ca = self.certs.join("ca.crt");
        let mut all = vec!["--cacert", ca.to_str().unwrap()];
        all.extend_from_slice(args);
        curl_in(Some(self.node.name()), &all, &url)
    }
}

/// The PEM block of `additionalTrustBundle` in `render mirror`'s output.
pub fn ca_of(render: &str) -> String {
    let mut out = String::new();
    let mut inside = false;
    for line in render.lines() {
        if line.starts_with("additionalTrustBundle:") {
            inside = true;
            continue;
        }
        if inside {
            match line.strip_prefix("  ") {
                Some(l) => {
                    out.push_str(l);
                    out.push('\n');
                }
                None => break,
            }
        }
    }
    assert!(out.contains("BEGIN CERTIFICATE"), "no CA in:\n{render}");
    out
}

/// One HTTP answer.
#[derive(Debug)]
pub struct Got {
    pub code: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Got {
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .iter()
            .rev()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
    }
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// curl (in namespace `ns`) with `args` on `url`.
pub fn curl_in(ns: Option<&str>, args: &[&str], url: &str) -> Got {
    let d = tempfile::tempdir().unwrap();
    let (h, b) = (d.path().join("h"), d.path().join("b"));
    let mut cmd = match ns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns, "curl"]);
            c
        }
        None => Command::new("curl"),
    };
    cmd.args([
        "-sS",
        "--max-time",
        "20",
        "-D",
        h.to_str().unwrap(),
        "-o",
        b.to_str().unwrap(),
    ])
    .args(["-w", "%{http_code}"])
    .args(args)
    .arg(url)
    .stdin(Stdio::null());
    let out = cmd.output().unwrap();
    let code: u16 = String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or(0);
    let head = std::fs::read_to_string(&h).unwrap_or_default();
    // The last response's head (after a 100 Continue).
    let block = head
        .split("\r\n\r\n")
        .filter(|s| !s.trim().is_empty())
        .last()
        .unwrap_or_default()
        .to_string();
    let headers = block
        .lines()
        .skip(1)
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    Got {
        code,
        headers,
        body: std::fs::read(&b).unwrap_or_default(),
    }
}

pub fn sha256(b: &[u8]) -> String {
    let d = ring::digest::digest(&ring::digest::SHA256, b);
    let hex: String = d.as_ref().iter().map(|x| format!("{x:02x}")).collect();
    format!("sha256:{hex}")
}

/// Write `bytes` as a blob of the OCI layout `dir`: its digest.
fn put_blob(dir: &Path, bytes: &[u8]) -> String {
    let d = sha256(bytes);
    let p = dir.join("blobs/sha256").join(&d[7..]);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, bytes).unwrap();
    d
}

/// A gzip'd tar holding one file `name` with `content` (through files,
/// not pipes: a large layer would fill them).
pub fn layer(name: &str, content: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join(name), content).unwrap();
    let tar = d.path().join("layer.tar");
    let dir = d.path().to_str().unwrap();
    super::common::run_ok(
        "tar",
        &[
            "--mtime=@0",
            "--owner=0",
            "--group=0",
            "--numeric-owner",
            "-C",
            dir,
            "-cf",
            tar.to_str().unwrap(),
            name,
        ],
    );
    super::common::run_ok("gzip", &["-n", "-k", tar.to_str().unwrap()]);
    let gz = std::fs::read(d.path().join("layer.tar.gz")).unwrap();
    (std::fs::read(&tar).unwrap(), gz)
}

/// An OCI image layout at `dir` with `layers` layers, tagged `tag`: the
/// manifest's digest.
pub fn oci_layout(dir: &Path, tag: &str, layers: usize, seed: u32) -> String {
    let sizes: Vec<usize> = (0..layers).map(|i| 50_000 + i * 7_000).collect();
    oci_layout_sized(dir, tag, &sizes, seed).0
}

/// An OCI image layout at `dir` tagged `tag` with one layer per size: the
/// manifest's digest and the layers' digests.
pub fn oci_layout_sized(
    dir: &Path,
    tag: &str,
    sizes: &[usize],
    seed: u32,
) -> (String, Vec<String>) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("oci-layout"), r#"{"imageLayoutVersion":"1.0.0"}"#).unwrap();
    let (mut descs, mut diff_ids, mut layers) = (Vec::new(), Vec::new(), Vec::new());
    for (i, size) in sizes.iter().enumerate() {
        let content = super::common::pattern(*size, seed + i as u32);
        let (tar, gz) = layer(&format!("file{i}"), &content);
        diff_ids.push(sha256(&tar));
        let d = put_blob(dir, &gz);
        descs.push(serde_json::json!({
            "mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
            "digest": d, "size": gz.len()
        }));
        layers.push(d);
    }
    let config = serde_json::json!({
        "architecture": "amd64", "os": "linux",
        "config": {}, "rootfs": {"type": "layers", "diff_ids": diff_ids}
    })
    .to_string();
    let cd = put_blob(dir, config.as_bytes());
    let manifest = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": cd, "size": config.len()},
        "layers": descs
    })
    .to_string();
    let md = put_blob(dir, manifest.as_bytes());
    let index = serde_json::json!({
        "schemaVersion": 2,
        "manifests": [{
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": md, "size": manifest.len(),
            "annotations": {"org.opencontainers.image.ref.name": tag}
        }]
    });
    std::fs::write(dir.join("index.json"), index.to_string()).unwrap();
    (md, layers)
}
