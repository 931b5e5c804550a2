//! Start the stand-in API server (`tests/kubesim/kubesim.py`) and drive it
//! with the real `kubectl`.
//!
//! Use from a test crate that has `mod common;`:
//! `#[path = "kubesim/harness.rs"] mod kubesim;` then
//! `let k = kubesim::Sim::start();`. The server gets a certificate for
//! 127.0.0.1 from a test CA; `k.kubeconfig` has the contexts `admin`
//! (client certificate `CN=system:admin, O=system:masters`, like the
//! installer's `auth/kubeconfig`) and `boot` (the node-bootstrapper's
//! bearer token, as a new kubelet has). The process is killed by its pid
//! on drop. Needs python3, openssl and kubectl ([`tools_present`]).
//!
//! The server runs with `--openapi` on the venv of [`validator_python`]:
//! every object it sends is checked against the Kubernetes OpenAPI v3
//! schemas, and a test whose stand-in caught an invalid object fails when
//! the [`Sim`] is dropped (see kubesim.py).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// A certificate request by `openssl req` as a kubelet makes it (EC
/// P-256) for the subject `subj`, with `sans` (`DNS:…,IP:…`); its key goes
/// to `dir/<key>.key`. The PEM.
pub fn kubelet_request(dir: &Path, subj: &str, key: &str, sans: Option<&str>) -> Vec<u8> {
    let mut c = Command::new("openssl");
    c.args(["req", "-new", "-newkey", "ec"])
        .args(["-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"])
        .arg("-keyout")
        .arg(dir.join(format!("{key}.key")))
        .args(["-subj", subj]);
    if let Some(s) = sans {
        c.args(["-addext", &format!("subjectAltName={s}")]);
    }
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// [`kubelet_request`] for the node `node` (`O=system:nodes,
/// CN=system:node:<node>`).
pub fn node_request(dir: &Path, node: &str, key: &str, sans: Option<&str>) -> Vec<u8> {
    kubelet_request(
        dir,
        &format!("/O=system:nodes/CN=system:node:{node}"),
        key,
        sans,
    )
}

pub struct Sim {
    /// `ip netns exec NS` when the server runs in a namespace.
    prefix: Vec<String>,
    /// The address the server listens on and its certificate names.
    pub host: String,
    pub dir: tempfile::TempDir,
    pub port: u16,
    pub kubeconfig: PathBuf,
    child: Child,
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .output()
        .expect("openssl");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A P-256 key and a certificate for `subj` signed by the test CA.
fn issue(dir: &Path, name: &str, subj: &str, ext: &str) {
    let (key, csr, crt) = (
        format!("{name}.key"),
        format!("{name}.csr"),
        format!("{name}.crt"),
    );
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            &key,
            "-out",
            &csr,
            "-subj",
            subj,
        ],
    );
    std::fs::write(dir.join(format!("{name}.ext")), ext).unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-out",
            &crt,
            "-extfile",
            &format!("{name}.ext"),
        ],
    );
}

/// Debian's kubectl, unpacked by scripts/prereqs.sh (`kubernetes-client
/// extract`: installing it would conflict with a kubectl already on PATH).
const EXTRACTED_KUBECTL: &str =
    "/var/cache/crc-appliance-tests/extract/kubernetes-client/usr/bin/kubectl";

/// The kubectl the tests run: the one on PATH, else Debian's unpacked one.
pub fn kubectl_bin() -> Option<PathBuf> {
    if crate::common::have("kubectl") {
        return Some(PathBuf::from("kubectl"));
    }
    Path::new(EXTRACTED_KUBECTL)
        .is_file()
        .then(|| PathBuf::from(EXTRACTED_KUBECTL))
}

/// Whether every tool of the stand-in's tests is there: python3 with the
/// validator's venv ([`validator_python`]), openssl and kubectl.
pub fn tools_present() -> bool {
    crate::common::have("python3")
        && crate::common::have("openssl")
        && kubectl_bin().is_some()
        && validator_python().is_ok()
}

/// The PyPI packages of the stand-in's OpenAPI validation, pinned.
const VALIDATOR_PACKAGES: [&str; 5] = [
    "jsonschema==4.23.0",
    "jsonschema-specifications==2025.9.1",
    "referencing==0.37.0",
    "rpds-py==2026.9.1",
    "attrs==26.1.0",
];

/// The python of a venv under target/tmp with `jsonschema` (made once,
/// kept): the stand-in runs on it with `--openapi`. The venv is built
/// under a name of its own and renamed into place, so test binaries
/// racing to make it never see half of one.
pub fn validator_python() -> Result<PathBuf, String> {
    static PYTHON: std::sync::OnceLock<Result<PathBuf, String>> = std::sync::OnceLock::new();
    PYTHON
        .get_or_init(|| {
            let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
            let venv = tmp.join("kubesim-venv");
            let py = venv.join("bin/python");
            let ready = |py: &Path| {
                Command::new(py)
                    .args(["-c", "import jsonschema"])
                    .output()
                    .is_ok_and(|o| o.status.success())
            };
            if ready(&py) {
                return Ok(py);
            }
            let building = tmp.join(format!("kubesim-venv.{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&building);
            let run = |prog: &Path, args: &[&str]| -> Result<(), String> {
                let out = Command::new(prog)
                    .args(args)
                    .output()
                    .map_err(|e| format!("{}: {e}", prog.display()))?;
                if out.status.success() {
                    return Ok(());
                }
                Err(format!(
                    "{} {args:?}: {}",
                    prog.display(),
                    String::from_utf8_lossy(&out.stderr)
                ))
            };
            let b = building.to_str().ok_or("target dir is not UTF-8")?;
            run(Path::new("/usr/bin/python3"), &["-m", "venv", b])
                .map_err(|e| format!("cannot create a venv (python3-venv): {e}"))?;
            let mut args = vec!["-m", "pip", "install", "-q"];
            args.extend(VALIDATOR_PACKAGES);
            run(&building.join("bin/python"), &args)?;
            if !ready(&py) {
                // A broken venv from an interrupted run: replace it.
                let _ = std::fs::remove_dir_all(&venv);
            }
            if std::fs::rename(&building, &venv).is_err() {
                // Another test binary won the race: use its venv.
                let _ = std::fs::remove_dir_all(&building);
            }
            if ready(&py) {
                Ok(py)
            } else {
                Err(format!("{} cannot import jsonschema", py.display()))
            }
        })
        .clone()
}

/// The trimmed upstream OpenAPI v3 documents the stand-in validates with.
pub fn openapi_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/kubesim/openapi")
}

impl Sim {
    pub const BOOT_TOKEN: &'static str = "node-bootstrapper-token";

    pub fn start() -> Sim {
        Sim::start_with(Vec::new(), "127.0.0.1")
    }

    /// The server, and every kubectl run, in network namespace `ns` (on
    /// its loopback).
    pub fn start_in(ns: &str) -> Sim {
        Sim::start_in_at(ns, "127.0.0.1")
    }

    /// The server in network namespace `ns` on its address `host` (which
    /// its certificate names, as api-int's does); kubectl runs in `ns`
    /// unless [`Sim::kubectl_from`] names another namespace.
    pub fn start_in_at(ns: &str, host: &str) -> Sim {
        Sim::start_with(["ip", "netns", "exec", ns].map(String::from).to_vec(), host)
    }

    /// `program` run under the prefix.
    fn command(prefix: &[String], program: &std::ffi::OsStr) -> Command {
        match prefix.split_first() {
            None => Command::new(program),
            Some((first, rest)) => {
                let mut c = Command::new(first);
                c.args(rest).arg(program);
                c
            }
        }
    }

    fn start_with(prefix: Vec<String>, host: &str) -> Sim {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        openssl(
            d,
            &[
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-nodes",
                "-keyout",
                "ca.key",
                "-out",
                "ca.crt",
                "-subj",
                "/CN=kubesim-ca",
                "-days",
                "2",
            ],
        );
        issue(
            d,
            "server",
            "/CN=api-int",
            &format!("subjectAltName=IP:127.0.0.1,IP:{host}\nextendedKeyUsage=serverAuth\n"),
        );
        issue(
            d,
            "admin",
            "/O=system:masters/CN=system:admin",
            "extendedKeyUsage=clientAuth\n",
        );
        let tokens = serde_json::json!({
            Self::BOOT_TOKEN: {
                "user": "system:serviceaccount:openshift-machine-config-operator:node-bootstrapper",
                "groups": ["system:serviceaccounts", "system:serviceaccounts:openshift-machine-config-operator"],
            }
        });
        std::fs::write(d.join("tokens.json"), tokens.to_string()).unwrap();
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/kubesim/kubesim.py");
        let python = validator_python().expect("the stand-in's venv");
        let mut child = Sim::command(&prefix, python.as_os_str())
            .arg(&script)
            .arg("--openapi")
            .arg(openapi_dir())
            .args(["--invalid-log", "invalid.log"])
            .args([
                "--listen",
                &format!("{host}:0"),
                "--cert",
                "server.crt",
                "--key",
                "server.key",
                "--client-ca",
                "ca.crt",
                "--tokens",
                "tokens.json",
                "--log",
                "access.log",
            ])
            .current_dir(d)
            .stdout(Stdio::piped())
            .spawn()
            .expect("start kubesim");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port: u16 = line
            .strip_prefix("READY ")
            .and_then(|p| p.trim().parse().ok())
            .unwrap_or_else(|| panic!("kubesim did not start: {line:?}"));
        let kubeconfig = d.join("kubeconfig");
        let p = |f: &str| d.join(f).display().to_string();
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: sim\n  cluster:\n    server: https://{host}:{port}\n    certificate-authority: {ca}\nusers:\n- name: admin\n  user:\n    client-certificate: {crt}\n    client-key: {key}\n- name: boot\n  user:\n    token: {tok}\ncontexts:\n- name: admin\n  context: {{cluster: sim, user: admin}}\n- name: boot\n  context: {{cluster: sim, user: boot}}\ncurrent-context: admin\n",
                ca = p("ca.crt"),
                crt = p("admin.crt"),
                key = p("admin.key"),
                tok = Self::BOOT_TOKEN,
            ),
        )
        .unwrap();
        Sim {
            prefix,
            host: host.to_string(),
            dir,
            port,
            kubeconfig,
            child,
        }
    }

    /// `kubectl --context CONTEXT ARGS` → (exit code, stdout, stderr); the
    /// discovery cache lives in the sim's directory.
    pub fn kubectl(&self, context: &str, args: &[&str]) -> (i32, String, String) {
        self.kubectl_with(&self.prefix, context, args)
    }

    /// Like [`Sim::kubectl`], run in network namespace `ns` (a node's).
    pub fn kubectl_from(&self, ns: &str, context: &str, args: &[&str]) -> (i32, String, String) {
        let prefix = ["ip", "netns", "exec", ns].map(String::from);
        self.kubectl_with(&prefix, context, args)
    }

    fn kubectl_with(
        &self,
        prefix: &[String],
        context: &str,
        args: &[&str],
    ) -> (i32, String, String) {
        let out = Sim::command(prefix, kubectl_bin().expect("kubectl").as_os_str())
            .env("KUBECONFIG", &self.kubeconfig)
            .env("HOME", self.dir.path())
            .arg("--context")
            .arg(context)
            .arg("--request-timeout=10s")
            .args(args)
            .output()
            .expect("run kubectl");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// Like [`Sim::kubectl`], asserting success; stdout.
    pub fn kubectl_ok(&self, context: &str, args: &[&str]) -> String {
        let (code, out, err) = self.kubectl(context, args);
        assert_eq!(code, 0, "kubectl {args:?} failed: {out}{err}");
        out
    }

    /// Add a context `name` whose user is the bearer token `token`.
    pub fn add_token_context(&self, name: &str, token: &str) {
        let user = format!("{name}-user");
        self.kubectl_ok(
            "admin",
            &[
                "config",
                "set-credentials",
                &user,
                &format!("--token={token}"),
            ],
        );
        self.kubectl_ok(
            "admin",
            &[
                "config",
                "set-context",
                name,
                "--cluster=sim",
                &format!("--user={user}"),
            ],
        );
    }

    /// Add a context `name` whose user has a client certificate for
    /// `subj` signed by the cluster CA (a kubelet's `CN=system:node:<n>`).
    pub fn add_cert_context(&self, name: &str, subj: &str) {
        issue(self.dir.path(), name, subj, "extendedKeyUsage=clientAuth\n");
        let d = self.dir.path();
        let user = format!("{name}-user");
        self.kubectl_ok(
            "admin",
            &[
                "config",
                "set-credentials",
                &user,
                &format!(
                    "--client-certificate={}",
                    d.join(format!("{name}.crt")).display()
                ),
                &format!("--client-key={}", d.join(format!("{name}.key")).display()),
            ],
        );
        self.kubectl_ok(
            "admin",
            &[
                "config",
                "set-context",
                name,
                "--cluster=sim",
                &format!("--user={user}"),
            ],
        );
    }

    /// A kubeconfig file for the bearer token `token` alone (what an
    /// operator writes for the `render csr-rbac` identity).
    pub fn token_kubeconfig(&self, file: &str, token: &str) -> PathBuf {
        let ca = self.dir.path().join("ca.crt");
        self.file(
            file,
            &format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://{}:{}\n    certificate-authority: {}\nusers:\n- name: u\n  user:\n    token: {token}\ncontexts:\n- name: x\n  context: {{cluster: c, user: u}}\ncurrent-context: x\n",
                self.host,
                self.port,
                ca.display()
            ),
        )
    }

    /// Apply `crc-appliance render csr-rbac`'s output (for a loopback
    /// cluster file) as admin; the approver ServiceAccount's token.
    pub fn apply_render_csr_rbac(&self) -> String {
        let cluster = self.file("cluster.yaml", &crate::common::loopback_cluster_with(""));
        let rbac = crate::common::run_ok(
            env!("CARGO_BIN_EXE_crc-appliance"),
            &["render", "csr-rbac", "--cluster", cluster.to_str().unwrap()],
        );
        let file = self.file("rbac.yaml", &rbac);
        self.kubectl_ok("admin", &["apply", "-f", file.to_str().unwrap()]);
        let token = self.kubectl_ok(
            "admin",
            &[
                "-n",
                "openshift-machine-api",
                "get",
                "secret",
                "crc-appliance-csr-approver-token",
                "-o",
                "jsonpath={.data.token}",
            ],
        );
        use base64::Engine as _;
        let token = base64::engine::general_purpose::STANDARD
            .decode(token.trim())
            .unwrap();
        String::from_utf8(token).unwrap()
    }

    /// A CSR object as JSON (`kubectl get csr NAME -o json`).
    pub fn csr(&self, name: &str) -> serde_json::Value {
        serde_json::from_str(&self.kubectl_ok("admin", &["get", "csr", name, "-o", "json"]))
            .unwrap()
    }

    /// Whether CSR `name` has an Approved condition.
    pub fn approved(&self, name: &str) -> bool {
        self.csr(name)["status"]["conditions"]
            .as_array()
            .is_some_and(|c| c.iter().any(|c| c["type"] == "Approved"))
    }

    /// Create `obj` (YAML or JSON text) as `context`.
    pub fn create(&self, context: &str, file: &str, obj: &str) {
        let f = self.file(file, obj);
        self.kubectl_ok(context, &["create", "-f", f.to_str().unwrap()]);
    }

    /// Create `obj` as `context` with kubectl run in network namespace `ns`.
    pub fn create_from(&self, ns: &str, context: &str, file: &str, obj: &str) {
        let f = self.file(file, obj);
        let (code, out, err) =
            self.kubectl_from(ns, context, &["create", "-f", f.to_str().unwrap()]);
        assert_eq!(code, 0, "kubectl create from {ns} failed: {out}{err}");
    }

    /// Write `text` to a file in the sim's directory; its path.
    pub fn file(&self, name: &str, text: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    /// The access log: one JSON object per request.
    pub fn log(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(self.dir.path().join("access.log"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// A CSR object (YAML) for `request_pem`.
    pub fn csr_yaml(name: &str, signer: &str, usages: &[&str], request_pem: &[u8]) -> String {
        use base64::Engine as _;
        let b64 = base64::engine::general_purpose::STANDARD.encode(request_pem);
        let usages: Vec<String> = usages.iter().map(|u| format!("\"{u}\"")).collect();
        format!(
            "apiVersion: certificates.k8s.io/v1\nkind: CertificateSigningRequest\nmetadata:\n  name: {name}\nspec:\n  signerName: {signer}\n  usages: [{}]\n  request: {b64}\n",
            usages.join(", ")
        )
    }
}

impl Sim {
    /// The objects the stand-in refused to send because they failed the
    /// OpenAPI validation (one JSON line each), cleared: a test that
    /// provokes them on purpose takes them, so that drop does not fail.
    pub fn take_invalid(&self) -> Vec<serde_json::Value> {
        let path = self.dir.path().join("invalid.log");
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let _ = std::fs::remove_file(&path);
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|_| l.into()))
            .collect()
    }
}

impl Drop for Sim {
    /// Stops the server; fails the test when the server caught itself
    /// about to send an object that does not validate.
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if !std::thread::panicking() {
            let invalid = self.take_invalid();
            assert!(
                invalid.is_empty(),
                "the stand-in produced objects that fail the Kubernetes OpenAPI schemas: {invalid:?}"
            );
        }
    }
}

impl Sim {
    /// Store `obj` as it is (no defaulting, no checks) through the
    /// control endpoint `/_sim/raw/<group or core>/<plural>`.
    pub fn put_raw(&self, group: &str, plural: &str, obj: &serde_json::Value) {
        let url = format!("https://127.0.0.1:{}/_sim/raw/{group}/{plural}", self.port);
        let out = self.curl(&["-X", "POST", "--data-binary", &obj.to_string(), &url]);
        assert!(out.contains("stored"), "{out}");
    }

    /// `curl -s` as the admin (the client certificate of the `admin`
    /// context) with `args`; its stdout.
    pub fn curl(&self, args: &[&str]) -> String {
        let d = self.dir.path();
        let p = |f: &str| d.join(f).display().to_string();
        let out = Sim::command(&self.prefix, "curl".as_ref())
            .args(["-s", "--max-time", "10", "--cacert", &p("ca.crt")])
            .args(["--cert", &p("admin.crt"), "--key", &p("admin.key")])
            .args(args)
            .output()
            .expect("run curl");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}
