//! The sushy-emulator side of tests/bmc.rs: the cached venv, the emulator
//! and HTTP server processes (killed on drop), the libvirt domain and pool
//! (destroyed and undefined on drop), and a test CA.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};

use crate::common::{run, run_ok};

pub const URI: &str = "qemu:///system";
pub const SUSHY: &str = "sushy-tools==2.2.0";

pub fn virsh(args: &[&str]) -> (i32, String, String) {
    let mut a = vec!["-c", URI];
    a.extend_from_slice(args);
    run("virsh", &a)
}

pub fn virsh_ok(args: &[&str]) -> String {
    let (code, out, err) = virsh(args);
    assert_eq!(code, 0, "virsh {args:?}: {out}{err}");
    out.trim().to_string()
}

/// The cached venv with sushy-emulator (Debian's python3 for its
/// python3-libvirt), or why there is none.
pub fn sushy_venv() -> Result<PathBuf, String> {
    let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join("sushy-venv");
    let py = venv.join("bin/python");
    let emu = venv.join("bin/sushy-emulator");
    if !emu.is_file() {
        let (code, out, err) = run(
            "/usr/bin/python3",
            &[
                "-m",
                "venv",
                "--system-site-packages",
                venv.to_str().unwrap(),
            ],
        );
        if code != 0 {
            return Err(format!("cannot create a venv (python3-venv): {out}{err}"));
        }
        let (code, out, err) = run(py.to_str().unwrap(), &["-m", "pip", "install", "-q", SUSHY]);
        if code != 0 {
            return Err(format!("pip install {SUSHY} failed: {out}{err}"));
        }
    }
    let (code, _, err) = run(py.to_str().unwrap(), &["-c", "import libvirt, bcrypt"]);
    if code != 0 {
        return Err(format!(
            "the venv cannot import libvirt/bcrypt (python3-libvirt): {err}"
        ));
    }
    Ok(venv)
}

/// A child process killed (by its PID) when dropped.
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The test's libvirt domain and pool, destroyed and undefined on drop.
pub struct Libvirt {
    pub domain: String,
    pub pool: String,
}

impl Drop for Libvirt {
    fn drop(&mut self) {
        let _ = virsh(&["destroy", &self.domain]);
        let _ = virsh(&["undefine", &self.domain]);
        let _ = virsh(&["pool-destroy", &self.pool]);
    }
}

/// A TCG domain (SeaBIOS, `pc`) with `disk`, an empty IDE CD-ROM and its
/// serial console logged to `serial` (for a guest that reports its kernel
/// command line once the appliance serves a bootable per-node ISO).
pub fn domain_xml(name: &str, disk: &Path, serial: &Path) -> String {
    format!(
        "<domain type='qemu'>
  <name>{name}</name>
  <memory unit='MiB'>256</memory>
  <vcpu>1</vcpu>
  <os><type arch='x86_64' machine='pc'>hvm</type><boot dev='hd'/></os>
  <on_poweroff>destroy</on_poweroff>
  <devices>
    <disk type='file' device='disk'><driver name='qemu' type='raw'/><source file='{}'/><target dev='hda' bus='ide'/></disk>
    <disk type='file' device='cdrom'><driver name='qemu' type='raw'/><target dev='hdc' bus='ide'/><readonly/></disk>
    <serial type='pty'><log file='{}' append='on'/><target port='0'/></serial>
  </devices>
</domain>
",
        disk.display(),
        serial.display()
    )
}

/// The `<disk device='cdrom'>` element of the domain's live XML.
pub fn cdrom(domain: &str) -> String {
    let xml = virsh_ok(&["dumpxml", domain]);
    let start = xml.find("device='cdrom'").expect("a cdrom in the domain");
    let end = start + xml[start..].find("</disk>").unwrap();
    xml[start..end].to_string()
}

/// GET a Redfish resource with curl (following sushy's name→UUID redirect).
pub fn redfish(base: &str, path: &str) -> serde_json::Value {
    let out = run_ok(
        "curl",
        &["-sfL", "-u", "admin:secret", &format!("{base}{path}")],
    );
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{path}: {e}: {out}"))
}

/// Start sushy-emulator on `conf` (its output to `log`); killed on drop.
pub fn start_emulator(venv: &Path, conf: &Path, log: &Path) -> Proc {
    let log = std::fs::File::create(log).unwrap();
    Proc(
        Command::new(venv.join("bin/sushy-emulator"))
            .args(["--config", conf.to_str().unwrap()])
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap(),
    )
}

/// A test CA (`ca.pem`, `ca.key`) and a leaf certificate for 127.0.0.1
/// (IP SAN; `tls.pem`, `tls.key`) signed by it.
pub fn make_certs(d: &Path) {
    crate::common::ca_signed_cert(
        (&d.join("ca.pem"), &d.join("ca.key"), "crc-bmc-test-ca"),
        (&d.join("tls.pem"), &d.join("tls.key"), "127.0.0.1"),
        "subjectAltName=IP:127.0.0.1\n",
    );
}
