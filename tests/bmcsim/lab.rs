//! The lab of `tests/bmc_vendors.rs`: the five recorded BMCs ([`Vendor`])
//! and, per test, a running test BMC with a cluster file whose node
//! `metal-0` has it as its BMC ([`Lab`]), driven through the real CLI.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::bmcsim::{Opts, Sim};
use crate::common::{self, BIN, free_port};

pub const NODE: &str = "metal-0";

/// One vendor's tree, system and rules.
#[derive(Clone, Copy)]
pub struct Vendor {
    pub name: &'static str,
    pub system: &'static str,
    pub openbmc: bool,
    /// The override target of the virtual CD.
    pub cd: &'static str,
    pub manufacturer: &'static str,
}

pub const DELL: Vendor = Vendor {
    name: "dell",
    system: "System.Embedded.1",
    openbmc: false,
    cd: "Cd",
    manufacturer: "Dell Inc.",
};
pub const HPE: Vendor = Vendor {
    name: "hpe",
    system: "1",
    openbmc: false,
    cd: "Cd",
    manufacturer: "HPE",
};
pub const LENOVO: Vendor = Vendor {
    name: "lenovo",
    system: "1",
    openbmc: false,
    cd: "Cd",
    manufacturer: "Lenovo",
};
pub const SUPERMICRO: Vendor = Vendor {
    name: "supermicro",
    system: "1",
    openbmc: false,
    cd: "UsbCd",
    manufacturer: "Supermicro",
};
pub const OPENBMC: Vendor = Vendor {
    name: "dell",
    system: "System.Embedded.1",
    openbmc: true,
    cd: "Cd",
    manufacturer: "Dell Inc.",
};

/// A running bmcsim and the lab around it (credentials, cluster file,
/// state directory).
pub struct Lab {
    pub sim: Sim,
    /// The appliance side: credentials, cluster file, state directory.
    pub dir: tempfile::TempDir,
    pub cluster: PathBuf,
    pub http: String,
    pub https: String,
}

impl Lab {
    /// The simulator for `v` (host on) with `opts` applied, and a cluster
    /// whose node `metal-0` has it as BMC.
    pub fn start(v: Vendor, opts: impl FnOnce(Opts) -> Opts) -> Lab {
        let mut o = Opts::new(v.name).power("On");
        if v.openbmc {
            o = o.openbmc();
        }
        let sim = Sim::start(opts(o));
        let (hp, sp) = (free_port(), free_port());
        Lab::around(sim, v, hp, sp)
    }

    /// The lab around `sim`, the appliance's HTTP on `hp`, HTTPS on `sp`.
    pub fn around(sim: Sim, v: Vendor, hp: u16, sp: u16) -> Lab {
        Lab::around_with(sim, v, hp, sp, "")
    }

    /// [`Lab::around`] with `bmc_extra` in the node's `bmc` mapping.
    pub fn around_with(sim: Sim, v: Vendor, hp: u16, sp: u16, bmc_extra: &str) -> Lab {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("user"), format!("{}\n", sim.user)).unwrap();
        std::fs::write(d.join("pass"), format!("{}\n", sim.password)).unwrap();
        std::fs::set_permissions(
            d.join("pass"),
            std::os::unix::fs::PermissionsExt::from_mode(0o600),
        )
        .unwrap();
        std::fs::copy(&sim.ca, d.join("ca.pem")).unwrap();
        if !d.join("rhcos.iso").exists() {
            std::fs::write(d.join("rhcos.iso"), b"not an iso").unwrap();
        }
        for sub in ["images", "ign"] {
            std::fs::create_dir_all(d.join(sub)).unwrap();
        }
        let node = format!(
            "  - name: {NODE}\n    role: worker\n    mac: \"52:54:00:14:00:1e\"\n    ip: 127.0.20.30\n    \
             bmc: {{ redfish: \"{}/redfish/v1/Systems/{}\", usernameFile: user, \
             passwordFile: pass, caFile: ca.pem{bmc_extra} }}\n",
            sim.base(),
            v.system
        );
        let dd = d.display();
        let sections = format!(
            "http:\n  listen: 127.0.0.1:{hp}\n  tlsListen: 127.0.0.1:{sp}\n  imagesDir: \"{dd}/images\"\n  ignitionDir: \"{dd}/ign\"\n\
             rhcos: {{ iso: \"{dd}/rhcos.iso\" }}\n\
             dns: {{ enabled: false }}\ndhcp: {{ enabled: false, leaseFile: \"{dd}/state/leases.json\" }}\n\
             loadBalancer: {{ enabled: false }}\nadmin: {{ listen: \"127.0.0.1:0\" }}\n"
        );
        let cluster = d.join("cluster.yaml");
        std::fs::write(
            &cluster,
            common::loopback_cluster_with_nodes(&node, &sections),
        )
        .unwrap();
        Lab {
            sim,
            cluster,
            http: format!("http://127.0.0.1:{hp}/boot/{NODE}.iso"),
            https: format!("https://127.0.0.1:{sp}/boot/{NODE}.iso"),
            dir,
        }
    }

    /// The URL this BMC is given (OpenBMC takes only https://).
    pub fn ours(&self, v: Vendor) -> &str {
        if v.openbmc { &self.https } else { &self.http }
    }

    /// `crc-appliance bmc ARGS` with a short back-off: (code, out, err, time).
    pub fn bmc(&self, args: &[&str]) -> (i32, String, String, Duration) {
        self.bmc_env(args, Some("50"))
    }

    pub fn bmc_env(&self, args: &[&str], backoff: Option<&str>) -> (i32, String, String, Duration) {
        let mut cmd = Command::new(BIN);
        cmd.args(["--cluster", self.cluster.to_str().unwrap(), "bmc"])
            .args(args)
            .stdin(Stdio::null());
        match backoff {
            Some(ms) => cmd.env("CRC_APPLIANCE_BMC_BACKOFF_MS", ms),
            None => cmd.env_remove("CRC_APPLIANCE_BMC_BACKOFF_MS"),
        };
        let t = Instant::now();
        let out = cmd.output().unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
            t.elapsed(),
        )
    }

    pub fn up_ok(&self) -> String {
        let (code, out, err, _) = self.bmc(&["up", NODE]);
        assert_eq!(code, 0, "bmc up: {out}{err}\n{}", self.log_tail());
        out
    }

    pub fn state(&self) -> Value {
        self.sim.state()
    }

    pub fn log(&self) -> Vec<Value> {
        self.sim.log()
    }

    pub fn log_tail(&self) -> String {
        let log = self.log();
        let n = log.len().saturating_sub(30);
        log[n..]
            .iter()
            .map(|l| l.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Requests that change something (not GET, not a Redfish session's
    /// own), from entry `from` on.
    pub fn changes_since(&self, from: usize) -> Vec<Value> {
        self.log()
            .into_iter()
            .skip(from)
            .filter(|l| l["method"] != "GET")
            .filter(|l| {
                !l["path"]
                    .as_str()
                    .unwrap_or("")
                    .contains("/SessionService/")
            })
            .collect()
    }
}

/// The slot holding `url`, its id.
pub fn slot_with(st: &Value, url: &str) -> Option<String> {
    st["slots"]
        .as_object()?
        .iter()
        .find(|(_, s)| s["inserted"] == true && s["image"] == url)
        .map(|(k, _)| k.clone())
}
