//! `firewall apply`: install this cluster's firewalld service with
//! `firewall-cmd`, for hosts where piping `firewall print` into a shell is
//! not wanted (configuration management, the unit's ExecStartPre).
//!
//! Role: the side-effecting twin of [`crate::host::firewall::render`]: the same
//! service document and the same calls ([`crate::host::firewall::command_args`],
//! passed as argument lists, never re-split from text), run one by one. Invariants: the service is replaced, never merged (an existing one
//! of that name is deleted first, as the printed script does); the first
//! failing command stops the run and its output is the error; the
//! temporary service file lives in a private directory removed afterwards.

use std::os::unix::fs::DirBuilderExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, bail};

use crate::host::firewall;
use crate::model::cluster::Cluster;

/// Run `firewall-cmd` with `args`; its stdout, or an error with its output.
fn firewall_cmd(args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new("firewall-cmd")
        .args(args)
        .output()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => {
                anyhow::anyhow!("firewall-cmd not found: is firewalld installed?")
            }
            _ => anyhow::anyhow!("running firewall-cmd: {e}"),
        })?;
    if !out.status.success() {
        bail!(
            "firewall-cmd {} failed ({}): {}{}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stdout).trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A private directory for the service file, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> anyhow::Result<TempDir> {
        let path = std::env::temp_dir().join(format!(
            "crc-appliance-firewall-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0)
        ));
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&path)
            .with_context(|| format!("creating {}", path.display()))?;
        Ok(TempDir(path))
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Install (or replace) the cluster's service and add it to its zone;
/// returns what was done, one line per step.
pub fn apply(c: &Cluster) -> anyhow::Result<String> {
    let name = firewall::service_name(c);
    let dir = TempDir::new()?;
    // firewalld takes the service name from the file name too.
    let file = dir.path().join(format!("{name}.xml"));
    std::fs::write(&file, firewall::render_xml(c))
        .with_context(|| format!("writing {}", file.display()))?;
    // --new-service-from-file refuses an existing service: replace it.
    let replaced = firewall_cmd(&["--permanent", &format!("--delete-service={name}")]).is_ok();
    let mut done = Vec::new();
    if replaced {
        done.push(format!("removed the previous service {name}"));
    }
    let file = file.display().to_string();
    for args in firewall::command_args(&name, firewall::zone(c), &file) {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        firewall_cmd(&args)?;
        done.push(format!("firewall-cmd {}", args.join(" ")));
    }
    let ports: Vec<String> = firewall::ports(c)
        .iter()
        .map(|p| format!("{}/{}", p.port, p.proto.as_str()))
        .collect();
    done.push(format!("{name} opens {}", ports.join(" ")));
    Ok(done.join("\n") + "\n")
}
