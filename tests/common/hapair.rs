//! The HA pair's scaffolding shared by the pair tests (tests/ha_pair.rs,
//! tests/registry_ha.rs): real keepalived (extracted, never installed: see
//! scripts/packages.txt) on the config `render keepalived` writes, with
//! private pid files, and child processes stopped by PID.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{BIN, Netns, run};

pub const KEEPALIVED: &str =
    "/var/cache/crc-appliance-tests/extract/keepalived/usr/sbin/keepalived";

/// A child process stopped by PID on drop (SIGTERM, then SIGKILL).
pub struct Proc(pub Option<Child>, pub &'static str);

impl Proc {
    pub fn stop(&mut self, sig: &str) {
        let Some(mut c) = self.0.take() else { return };
        let _ = Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(c.id().to_string())
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = c.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = c.kill();
        let _ = c.wait();
        panic!("{} did not stop on SIG{sig}", self.1);
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = Command::new("kill").arg(c.id().to_string()).status();
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = c.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// keepalived (VRRP only, foreground, private pid files) in `ns` on the
/// config `render keepalived` writes for `cluster`.
pub fn keepalived(ns: &Netns, cluster: &Path, dir: &Path, tag: &str) -> Proc {
    let (code, conf, err) = run(
        BIN,
        &[
            "render",
            "keepalived",
            "--cluster",
            cluster.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 0, "{err}");
    let f = dir.join(format!("keepalived-{tag}.conf"));
    std::fs::write(&f, conf).unwrap();
    let p = |what: &str| dir.join(format!("{tag}-{what}.pid")).display().to_string();
    let log = std::fs::File::create(dir.join(format!("keepalived-{tag}.log"))).unwrap();
    let child = ns
        .cmd(&[KEEPALIVED, "-n", "-l", "-D", "-P", "-G"])
        .arg("-f")
        .arg(&f)
        .args(["-p", &p("main"), "-r", &p("vrrp"), "-c", &p("checkers")])
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .expect("spawn keepalived");
    Proc(Some(child), "keepalived")
}
