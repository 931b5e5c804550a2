//! libvirtd for the tests that need `qemu:///system` (libvirt_kvm, bmc):
//! use the running daemon, else start virtlogd and libvirtd and kill
//! exactly those (by PID) when the returned guard drops.

use std::process::Command;
use std::time::{Duration, Instant};

/// `virsh -c qemu:///system uri` succeeds.
pub fn virsh_ok() -> bool {
    Command::new("virsh")
        .args(["-c", "qemu:///system", "uri"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// Daemons this test started (killed by PID at the end).
pub struct Daemons(Vec<u32>);

impl Drop for Daemons {
    fn drop(&mut self) {
        for pid in &self.0 {
            let _ = Command::new("kill")
                .arg(pid.to_string())
                .stderr(std::process::Stdio::null())
                .status();
        }
    }
}

/// libvirtd answering on `qemu:///system`; the guard stops what was started.
pub fn start() -> Result<Daemons, String> {
    // libvirt writes `<bridge>.macs` there even for networks without dnsmasq;
    // the directory comes with dnsmasq-base, which a minimal install lacks.
    let _ = std::fs::create_dir_all("/var/lib/libvirt/dnsmasq");
    if virsh_ok() {
        return Ok(Daemons(Vec::new()));
    }
    let mut started = Vec::new();
    for (bin, pidfile) in [
        ("virtlogd", "/run/virtlogd.pid"),
        ("libvirtd", "/run/libvirtd.pid"),
    ] {
        let st = Command::new(bin)
            .arg("-d")
            .status()
            .map_err(|e| format!("cannot run {bin}: {e}"))?;
        if !st.success() {
            return Err(format!("{bin} -d failed: {st}"));
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Some(pid) = std::fs::read_to_string(pidfile)
                .ok()
                .and_then(|s| s.trim().parse::<u32>().ok())
            {
                started.push(pid);
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    let d = Daemons(started);
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if virsh_ok() {
            return Ok(d);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    Err("libvirtd did not answer on qemu:///system".into())
}
