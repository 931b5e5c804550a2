//! Start and query the test BMC (`tests/bmcsim/bmcsim.py`) from Rust tests.
//!
//! Use from a test crate that has `mod common;`:
//! `#[path = "bmcsim/harness.rs"] mod bmcsim;` then
//! `let bmc = bmcsim::Sim::start(bmcsim::Opts::new("dell"));`. The simulator
//! gets a CA-signed certificate for 127.0.0.1 (`bmc.ca` is the CA clients
//! trust), Basic auth `bmc.user`/`bmc.password`, a request log (`bmc.log()`)
//! and is killed (by its pid) on drop. `bmc.state()` is `GET /_sim/state`.
//! Needs python3, openssl and curl (`Sim::tools()` for `require_tools!`).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{OnceLock, mpsc};
use std::time::Duration;

use serde_json::Value;

/// What a simulator run looks like (`--vendor` and the optional flags).
#[derive(Clone, Debug)]
pub struct Opts {
    pub vendor: String,
    pub openbmc: bool,
    pub faults: Vec<String>,
    pub initial_power: Option<String>,
    pub foreign_image: Option<String>,
    /// Further raw arguments (e.g. `--require-insert-param TransferMethod`).
    pub extra: Vec<String>,
}

impl Opts {
    pub fn new(vendor: &str) -> Opts {
        Opts {
            vendor: vendor.into(),
            openbmc: false,
            faults: Vec::new(),
            initial_power: None,
            foreign_image: None,
            extra: Vec::new(),
        }
    }
    pub fn openbmc(mut self) -> Opts {
        self.openbmc = true;
        self
    }
    pub fn fault(mut self, spec: &str) -> Opts {
        self.faults.push(spec.into());
        self
    }
    pub fn power(mut self, state: &str) -> Opts {
        self.initial_power = Some(state.into());
        self
    }
    pub fn foreign(mut self, url: &str) -> Opts {
        self.foreign_image = Some(url.into());
        self
    }
    pub fn arg(mut self, a: &str) -> Opts {
        self.extra.push(a.into());
        self
    }
}

/// A CA and a certificate for 127.0.0.1 signed by it (valid 2 days), made
/// once a day into `target/tmp/bmcsim-certs-<day>` (openssl is the slow part
/// of a start): (ca, cert, key). A set is made aside and renamed into place,
/// so parallel test processes never see half of one.
fn certs() -> (PathBuf, PathBuf, PathBuf) {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    let d = DIR.get_or_init(|| {
        let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
        let day = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
            / 86_400;
        let dir = tmp.join(format!("bmcsim-certs-{day}"));
        if !dir.join("tls.key").exists() {
            let new = tempfile::tempdir_in(tmp).unwrap();
            let n = new.path();
            crate::common::ca_signed_cert(
                (&n.join("ca.pem"), &n.join("ca.key"), "bmcsim-test-ca"),
                (&n.join("tls.pem"), &n.join("tls.key"), "127.0.0.1"),
                "subjectAltName=IP:127.0.0.1\n",
            );
            // Fails when another process was first: theirs is complete too.
            let made = new.keep();
            if std::fs::rename(&made, &dir).is_err() {
                let _ = std::fs::remove_dir_all(&made);
            }
        }
        dir
    });
    (d.join("ca.pem"), d.join("tls.pem"), d.join("tls.key"))
}

/// The repository's `tests/` directory.
pub fn tests_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests")
}

/// The recorded tree of `vendor` (`tests/fixtures/redfish/<vendor>`).
pub fn tree(vendor: &str) -> PathBuf {
    tests_dir().join("fixtures/redfish").join(vendor)
}

pub struct Sim {
    child: Child,
    pub port: u16,
    pub dir: tempfile::TempDir,
    /// CA certificate that signed the simulator's certificate.
    pub ca: PathBuf,
    pub user: String,
    pub password: String,
    pub log_path: PathBuf,
}

impl Sim {
    /// Tools the simulator and [`Sim::curl`] need.
    pub const TOOLS: [&'static str; 3] = ["python3", "openssl", "curl"];

    pub fn start(opts: Opts) -> Sim {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let (ca, cert, key) = certs();
        let log_path = d.join("requests.jsonl");
        let (user, password) = ("admin".to_string(), "s3cret-pw".to_string());
        let mut args: Vec<String> = vec![
            tests_dir().join("bmcsim/bmcsim.py").display().to_string(),
            "--tree".into(),
            tree(&opts.vendor).display().to_string(),
            "--vendor".into(),
            opts.vendor.clone(),
            "--listen".into(),
            "127.0.0.1:0".into(),
            "--cert".into(),
            cert.display().to_string(),
            "--key".into(),
            key.display().to_string(),
            "--user".into(),
            user.clone(),
            "--password".into(),
            password.clone(),
            "--log".into(),
            log_path.display().to_string(),
        ];
        if opts.openbmc {
            args.push("--openbmc-rules".into());
        }
        for f in &opts.faults {
            args.extend(["--fault".into(), f.clone()]);
        }
        if let Some(p) = &opts.initial_power {
            args.extend(["--initial-power".into(), p.clone()]);
        }
        if let Some(u) = &opts.foreign_image {
            args.extend(["--foreign-image".into(), u.clone()]);
        }
        args.extend(opts.extra.iter().cloned());
        let mut child = Command::new("python3")
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start python3 bmcsim.py");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = match rx.recv_timeout(Duration::from_secs(20)) {
            Ok(l) => l,
            Err(_) => {
                let _ = child.kill();
                panic!("bmcsim did not print READY within 20 s");
            }
        };
        let port = line
            .strip_prefix("READY ")
            .and_then(|p| p.trim().parse().ok())
            .unwrap_or_else(|| {
                let _ = child.kill();
                panic!("bmcsim: unexpected first line {line:?}")
            });
        Sim {
            child,
            port,
            dir,
            ca,
            user,
            password,
            log_path,
        }
    }

    /// `https://127.0.0.1:<port>`.
    pub fn base(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    /// `GET /_sim/state`.
    pub fn state(&self) -> Value {
        let r = self.curl("GET", "/_sim/state", None, &[], None);
        assert_eq!(r.status, 200, "state: {r:?}");
        r.body
    }

    /// The request log, one JSON object per request.
    pub fn log(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log_path)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// One request with curl (trusting [`Sim::ca`]); `auth` None sends no
    /// credentials, `Some((u, p))` those.
    pub fn curl(
        &self,
        method: &str,
        path: &str,
        body: Option<&str>,
        headers: &[&str],
        auth: Option<(&str, &str)>,
    ) -> Resp {
        let url = format!("{}{}", self.base(), path);
        let ca = self.ca.display().to_string();
        let mut a: Vec<String> = vec![
            "-sS".into(),
            "-i".into(),
            "--max-time".into(),
            "20".into(),
            "--cacert".into(),
            ca,
            "-X".into(),
            method.into(),
        ];
        if let Some((u, p)) = auth {
            a.extend(["-u".into(), format!("{u}:{p}")]);
        }
        for h in headers {
            a.extend(["-H".into(), (*h).into()]);
        }
        if let Some(b) = body {
            a.extend([
                "-H".into(),
                "Content-Type: application/json".into(),
                "--data-binary".into(),
                b.into(),
            ]);
        }
        a.push(url);
        let out = Command::new("curl").args(&a).output().expect("run curl");
        assert!(
            out.status.success(),
            "curl {a:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Resp::parse(&String::from_utf8_lossy(&out.stdout))
    }

    /// [`Sim::curl`] with the right credentials.
    pub fn req(&self, method: &str, path: &str, body: Option<&str>, headers: &[&str]) -> Resp {
        let (u, p) = (self.user.clone(), self.password.clone());
        self.curl(method, path, body, headers, Some((&u, &p)))
    }
}

impl Drop for Sim {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    /// Header lines, lower-cased names: `("etag", "\"…\"")`.
    pub headers: Vec<(String, String)>,
    /// Parsed JSON body, `Value::Null` when empty or not JSON.
    pub body: Value,
}

impl Resp {
    fn parse(raw: &str) -> Resp {
        let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((raw, ""));
        let mut lines = head.lines();
        let status = lines
            .next()
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let headers = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        Resp {
            status,
            headers,
            body: serde_json::from_str(body).unwrap_or(Value::Null),
        }
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The first `@Message.ExtendedInfo` MessageId (array or single object).
    pub fn message_id(&self) -> String {
        let ext = &self.body["error"]["@Message.ExtendedInfo"];
        let m = if ext.is_array() { &ext[0] } else { ext };
        m["MessageId"].as_str().unwrap_or_default().to_string()
    }
}
