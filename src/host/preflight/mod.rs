//! `preflight`: host checks before `serve` and `vm up`, each finding with the
//! fix. `serve` runs the same checks at start and only logs them.
//!
//! Checks:
//! - every socket the plan binds: is the port already held (from
//!   `/proc/net/{tcp,udp,tcp6,udp6}` of this network namespace), and by
//!   which process (`/proc/<pid>/fd/*` → `socket:[inode]`, then `comm`);
//! - `/dev/kvm` can be opened read-write, and the CPU model guests get;
//! - `rhcos.iso` exists and has the RHCOS live layout
//!   (`images/pxeboot/{vmlinuz,initrd.img,rootfs.img}`), or the
//!   `rhcos` kernel/initramfs/rootfs files exist; every node's boot ISO
//!   kargs fit the ISO's kernel-argument embed areas;
//! - the libvirt pool dir (or its nearest existing parent) is writable and,
//!   on a host with SELinux labels, of type `virt_image_t`;
//! - `<ignitionDir>/<role>.ign` exists and is an ignition JSON document for
//!   every role that has nodes.
//!
//! - other DHCP servers on `network.interface`: one DISCOVER from a random
//!   MAC, every server that offers named (`dhcp_servers.rs`; `serve`
//!   refuses to start beside one in `dhcp.mode: server`);
//! - a running firewalld opens every port `firewall print` lists in the zone
//!   of `network.interface` (else the default zone) (`firewalld.rs`);
//! - the `preflight` command only, against a running appliance:
//!   `registry.releaseImage` resolved by digest through the mirror as a
//!   node would (`release.rs`).
//!
//! Layout: the port checks are in `ports.rs`, the firewalld check in
//! `firewalld.rs`, the DHCP server probe in `dhcp_servers.rs`; the rest is
//! here.
//!
//! Invariants: read-only (the only write is a probe file in the pool dir,
//! removed at once; the only packets, the DHCP probe's DISCOVER on the
//! cluster interface); never panics on odd `/proc` content (unparsable lines
//! are skipped); a process whose fds we cannot read is reported as
//! "owner not visible" rather than guessed.

use std::fmt::Write as _;
use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

mod dhcp_servers;
mod firewalld;
mod ignition;
mod ports;
mod release;

pub use ignition::ignition;
pub use release::release_image;

pub use ports::{Bound, ProcNet, Proto, parse_table, ports};

use crate::model::cluster::{BootSource, Cluster};
use crate::plan::Plan;

/// How serious a finding is: `Warn` fails `preflight` (exit 1), `Info` is
/// reported only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    Info,
    Warn,
}

/// One check result that needs attention, and what to do about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub severity: Severity,
    /// `ports`, `firewall`, `kvm`, `iso`, `pool`, `ignition`.
    pub check: &'static str,
    pub problem: String,
    pub fix: String,
}

/// `preflight` found problems (exit code 1).
#[derive(Debug, thiserror::Error)]
#[error("preflight: {0} problem(s) found")]
pub struct Failed(pub usize);

/// Run every check for `plan`.
pub fn run(plan: &Plan) -> Vec<Finding> {
    let c = &plan.cluster;
    let mut out = ports(c, &ProcNet::read());
    out.extend(firewalld::firewalld(c));
    match c.rhcos.as_ref().map(|r| &r.source) {
        Some(BootSource::Iso(p)) => {
            out.extend(iso(p));
            out.extend(boot_isos(c, p));
        }
        Some(BootSource::Files {
            kernel,
            initramfs,
            rootfs,
        }) => out.extend(boot_files(&[kernel, initramfs, rootfs])),
        None => {}
    }
    if let Some(v) = &c.libvirt {
        out.extend(kvm(Path::new("/dev/kvm")));
        out.extend(pool(&v.pool_path));
    }
    if c.http.enabled {
        out.extend(ignition(c));
    }
    out.extend(dhcp_servers::check(c));
    out
}

/// Number of findings that fail `preflight`.
pub fn problems(findings: &[Finding]) -> usize {
    findings
        .iter()
        .filter(|f| f.severity == Severity::Warn)
        .count()
}

/// Human-readable report, one finding per block.
pub fn report(findings: &[Finding]) -> String {
    let mut out = String::new();
    for f in findings {
        let tag = match f.severity {
            Severity::Warn => "WARN",
            Severity::Info => "info",
        };
        let label = match f.severity {
            Severity::Warn => "fix",
            Severity::Info => "note",
        };
        let _ = writeln!(
            out,
            "{tag} {}: {}\n     {label}: {}",
            f.check, f.problem, f.fix
        );
    }
    match problems(findings) {
        0 => out.push_str("preflight: ok\n"),
        n => {
            let _ = writeln!(out, "preflight: {n} problem(s)");
        }
    }
    out
}

/// `serve`'s start: log every finding; fail only when another DHCP
/// server answers on the segment of a `dhcp.mode: server` cluster
/// (unless `dhcp.allowOtherServers`).
pub fn log(plan: &Plan) -> anyhow::Result<()> {
    let findings = run(plan);
    for f in &findings {
        match f.severity {
            Severity::Warn => {
                tracing::warn!("preflight {}: {} (fix: {})", f.check, f.problem, f.fix)
            }
            Severity::Info => tracing::info!("preflight {}: {} ({})", f.check, f.problem, f.fix),
        }
    }
    match dhcp_servers::blocks_start(&plan.cluster, &findings) {
        Some(f) => anyhow::bail!("refusing to start: {}; {}", f.problem, f.fix),
        None => Ok(()),
    }
}

// ---- KVM, ISO, pool --------------------------------------------------------

/// `/dev/kvm` (path injectable for tests) and the CPU model guests get.
pub fn kvm(dev: &Path) -> Vec<Finding> {
    let forced = std::env::var("CRC_APPLIANCE_DOMAIN_TYPE").ok();
    let info = |problem: String, fix: &str| Finding {
        severity: Severity::Info,
        check: "kvm",
        problem,
        fix: fix.to_string(),
    };
    if forced.as_deref() == Some("qemu") {
        return vec![info(
            "CRC_APPLIANCE_DOMAIN_TYPE=qemu: guests run under TCG with CPU model Nehalem (slow)"
                .into(),
            "unset it to use KVM when /dev/kvm works",
        )];
    }
    match fs::OpenOptions::new().read(true).write(true).open(dev) {
        Ok(_) => vec![info(
            format!("{} usable: domain type kvm, CPU host-passthrough", dev.display()),
            "guests run with hardware virtualization",
        )],
        Err(e) if e.kind() == ErrorKind::NotFound => vec![Finding {
            severity: Severity::Warn,
            check: "kvm",
            problem: format!(
                "{} does not exist: guests will run under TCG (domain type qemu, CPU model Nehalem), 10-50x slower",
                dev.display()
            ),
            fix: "enable VT-x/AMD-V in firmware (or nested virtualization on a VM host) and load kvm_intel/kvm_amd; \
                  under the systemd unit /dev is private: run `crc-appliance preflight` as root instead"
                .to_string(),
        }],
        Err(e) => vec![Finding {
            severity: Severity::Warn,
            check: "kvm",
            problem: format!("cannot open {} read-write: {e}", dev.display()),
            fix: "add this user to the kvm group (libvirt's qemu opens it as its own user; this matters for qemu:///session), \
                  or set CRC_APPLIANCE_DOMAIN_TYPE=qemu to use TCG (CPU model Nehalem)"
                .to_string(),
        }],
    }
}

/// Files of the RHCOS live ISO layout the libvirt driver boots from.
pub const ISO_FILES: [&str; 3] = [
    "images/pxeboot/vmlinuz",
    "images/pxeboot/initrd.img",
    "images/pxeboot/rootfs.img",
];

const ISO_FIX: &str = "download the RHCOS live ISO matching your installer: \
    `openshift-install coreos print-stream-json | jq -r .architectures.x86_64.artifacts.metal.formats.iso.disk.location` \
    and set rhcos.iso to it";

/// `rhcos.kernel`/`initramfs`/`rootfs` (the PXE artifacts as files) exist.
pub fn boot_files(files: &[&PathBuf]) -> Vec<Finding> {
    files
        .iter()
        .filter_map(|f| fs::metadata(f).err().map(|e| (f, e)))
        .map(|(f, e)| Finding {
            severity: Severity::Warn,
            check: "rhcos",
            problem: format!("{}: {e}", f.display()),
            fix: "download the RHCOS PXE artifacts (kernel, initramfs, rootfs) matching your installer \
                  (`openshift-install coreos print-stream-json`), or use rhcos.iso"
                .to_string(),
        })
        .collect()
}

/// The ISO exists and has the RHCOS live layout.
pub fn iso(path: &Path) -> Vec<Finding> {
    let warn = |problem: String| Finding {
        severity: Severity::Warn,
        check: "iso",
        problem,
        fix: ISO_FIX.to_string(),
    };
    let file = match fs::File::open(path) {
        Ok(f) => f,
        Err(e) => return vec![warn(format!("rhcos.iso {}: {e}", path.display()))],
    };
    let mut img = match crate::boot::iso9660::IsoImage::open(std::io::BufReader::new(file)) {
        Ok(i) => i,
        Err(e) => return vec![warn(format!("rhcos.iso {}: {e}", path.display()))],
    };
    let missing: Vec<&str> = ISO_FILES
        .iter()
        .copied()
        .filter(|f| img.lookup(f).map(|e| e.is_dir).unwrap_or(true))
        .collect();
    if missing.is_empty() {
        return Vec::new();
    }
    vec![warn(format!(
        "rhcos.iso {} is not an RHCOS live ISO: missing {}",
        path.display(),
        missing.join(", ")
    ))]
}

/// The per-node boot ISOs (`/boot/<node>.iso`): the ISO has kernel-argument
/// embed areas and every node's (and role's) install kargs fit them.
pub fn boot_isos(c: &Cluster, path: &Path) -> Vec<Finding> {
    use crate::boot::liveiso::EmbedError;
    let finding = |severity, problem: String, fix: &str| Finding {
        severity,
        check: "bootiso",
        problem,
        fix: fix.to_string(),
    };
    match crate::boot::liveiso::unfit(c, path) {
        // Unreadable: the `iso` check reports it.
        Err(EmbedError::Iso(_)) => Vec::new(),
        Err(e @ EmbedError::NoKargsJson) => vec![finding(
            Severity::Info,
            format!("rhcos.iso {}: {e}; /boot/<node>.iso answers 500", path.display()),
            "network boot works; for boot ISOs use an RHCOS 4.8+ live ISO",
        )],
        Err(e) => vec![finding(
            Severity::Warn,
            format!("rhcos.iso {}: {e}", path.display()),
            "use an unmodified RHCOS live ISO",
        )],
        Ok(unfit) => unfit
            .into_iter()
            .map(|(name, e)| {
                finding(
                    Severity::Warn,
                    format!("/boot/{name}.iso: {e}"),
                    "shorten rhcos.kargs, rhcos.roleKargs or the node's kargs (network boot has its own limit, the kernel's 2047-byte command line, which `check` enforces)",
                )
            })
            .collect(),
    }
}

/// The pool dir (or, when absent, its nearest existing parent, where `vm up`
/// creates it) accepts a new file.
pub fn pool(path: &Path) -> Vec<Finding> {
    let mut dir: PathBuf = path.to_path_buf();
    while !dir.exists() {
        match dir.parent() {
            Some(p) => dir = p.to_path_buf(),
            None => break,
        }
    }
    let probe = dir.join(format!(".crc-appliance-preflight-{}", std::process::id()));
    let mut out: Vec<Finding> = selinux_context(&dir)
        .and_then(|ctx| pool_label_problem(&ctx))
        .map(|problem| Finding {
            severity: Severity::Warn,
            check: "pool",
            problem: format!("libvirt.pool.path {}: {problem}", dir.display()),
            fix: format!(
                "semanage fcontext -a -t {POOL_SELINUX_TYPE} '{}(/.*)?' && restorecon -Rv {}",
                dir.display(),
                dir.display()
            ),
        })
        .into_iter()
        .collect();
    match fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
    {
        Ok(_) => {
            let _ = fs::remove_file(&probe);
        }
        Err(e) => out.push(Finding {
            severity: Severity::Warn,
            check: "pool",
            problem: format!(
                "libvirt.pool.path {}: cannot write in {}: {e}",
                path.display(),
                dir.display()
            ),
            fix: "run as root, or give the crc-appliance user the directory \
                  (the systemd unit allows writes only under /var/lib/crc-appliance and /var/lib/libvirt/images)"
                .to_string(),
        }),
    }
    out
}

/// The SELinux type libvirt's default pool (/var/lib/libvirt/images) has,
/// which qemu under sVirt may use.
pub const POOL_SELINUX_TYPE: &str = "virt_image_t";

/// The `security.selinux` label of `path`, when the filesystem has one
/// (None on hosts without SELinux labels).
fn selinux_context(path: &Path) -> Option<String> {
    let mut buf = [0u8; 256];
    let n = rustix::fs::getxattr(path, "security.selinux", &mut buf[..]).ok()?;
    let raw = buf.get(..n)?;
    let text = String::from_utf8_lossy(raw);
    Some(text.trim_end_matches('\0').to_string())
}

/// Why a pool directory labelled `context` is a problem, if it is: its
/// type (`user:role:type:level`) is not [`POOL_SELINUX_TYPE`].
pub fn pool_label_problem(context: &str) -> Option<String> {
    let ty = context.split(':').nth(2).unwrap_or("");
    (ty != POOL_SELINUX_TYPE).then(|| {
        format!(
            "SELinux type {} (context {context}), not {POOL_SELINUX_TYPE}: qemu under sVirt may be denied the disks",
            if ty.is_empty() { "unknown" } else { ty }
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_label_types() {
        assert_eq!(
            pool_label_problem("system_u:object_r:virt_image_t:s0"),
            None
        );
        let p = pool_label_problem("unconfined_u:object_r:var_t:s0").unwrap();
        assert!(p.contains("SELinux type var_t"), "{p}");
        assert!(
            pool_label_problem("garbage")
                .unwrap()
                .contains("type unknown")
        );
    }

    #[test]
    fn missing_kvm_names_the_cpu_model() {
        let f = kvm(Path::new("/nonexistent/kvm"));
        if std::env::var("CRC_APPLIANCE_DOMAIN_TYPE").is_err() {
            assert_eq!(f[0].severity, Severity::Warn);
            assert!(f[0].problem.contains("Nehalem"), "{f:?}");
        }
    }
}
