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
//! - the libvirt pool dir (or its nearest existing parent) is writable;
//! - `<ignitionDir>/<role>.ign` exists and is an ignition JSON document for
//!   every role that has nodes.
//!
//! Invariants: read-only (the only write is a probe file in the pool dir,
//! removed at once); never panics on odd `/proc` content (unparsable lines
//! are skipped); a process whose fds we cannot read is reported as
//! "owner not visible" rather than guessed.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::fs;
use std::io::ErrorKind;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::{Path, PathBuf};

use crate::config::{BootSource, Cluster, Role};
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
    /// `ports`, `kvm`, `iso`, `pool`, `ignition`.
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

/// `serve`'s start: log every finding (never fails the start).
pub fn log(plan: &Plan) {
    for f in run(plan) {
        match f.severity {
            Severity::Warn => {
                tracing::warn!("preflight {}: {} (fix: {})", f.check, f.problem, f.fix)
            }
            Severity::Info => tracing::info!("preflight {}: {} ({})", f.check, f.problem, f.fix),
        }
    }
}

// ---- ports ----------------------------------------------------------------

/// Transport of a socket table row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proto {
    Tcp,
    Udp,
}

impl Proto {
    fn as_str(self) -> &'static str {
        match self {
            Proto::Tcp => "tcp",
            Proto::Udp => "udp",
        }
    }
}

/// A bound socket from `/proc/net/*`: TCP listeners and every UDP socket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bound {
    pub proto: Proto,
    pub addr: SocketAddr,
    pub inode: u64,
}

/// The socket tables of this network namespace plus inode → process names.
#[derive(Debug, Default)]
pub struct ProcNet {
    pub bound: Vec<Bound>,
    owners: HashMap<u64, Vec<String>>,
    /// Some `/proc/<pid>/fd` could not be read (other users' processes).
    partial: bool,
}

impl ProcNet {
    /// Read `/proc/net/{tcp,tcp6,udp,udp6}` and map socket inodes to owners.
    pub fn read() -> ProcNet {
        let mut bound = Vec::new();
        for (file, proto) in [
            ("/proc/net/tcp", Proto::Tcp),
            ("/proc/net/tcp6", Proto::Tcp),
            ("/proc/net/udp", Proto::Udp),
            ("/proc/net/udp6", Proto::Udp),
        ] {
            if let Ok(text) = fs::read_to_string(file) {
                bound.extend(parse_table(&text, proto));
            }
        }
        let (owners, partial) = socket_owners();
        ProcNet {
            bound,
            owners,
            partial,
        }
    }

    fn owner(&self, inode: u64) -> String {
        match self.owners.get(&inode) {
            Some(v) => v.join(", "),
            None if self.partial => {
                "a process whose fds are not visible to this user (run preflight as root to name it)"
                    .to_string()
            }
            None => "an unknown process".to_string(),
        }
    }
}

/// Parse one `/proc/net/{tcp,udp}[6]` table: TCP rows in LISTEN (0A), UDP
/// rows that are not connected (07); other rows and bad lines are skipped.
pub fn parse_table(text: &str, proto: Proto) -> Vec<Bound> {
    let mut out = Vec::new();
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 10 {
            continue;
        }
        let want = match proto {
            Proto::Tcp => "0A",
            Proto::Udp => "07",
        };
        if f[3] != want {
            continue;
        }
        let (Some(addr), Ok(inode)) = (parse_hex_addr(f[1]), f[9].parse::<u64>()) else {
            continue;
        };
        out.push(Bound { proto, addr, inode });
    }
    out
}

/// `0100007F:0035` (IPv4, host-order words) or 32 hex digits (IPv6, four
/// host-order words) and a port.
fn parse_hex_addr(s: &str) -> Option<SocketAddr> {
    let (ip, port) = s.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let ip = match ip.len() {
        8 => IpAddr::V4(Ipv4Addr::from(
            u32::from_str_radix(ip, 16).ok()?.to_le_bytes(),
        )),
        32 => {
            let mut b = [0u8; 16];
            for i in 0..4 {
                let w = u32::from_str_radix(ip.get(i * 8..i * 8 + 8)?, 16).ok()?;
                b[i * 4..i * 4 + 4].copy_from_slice(&w.to_le_bytes());
            }
            let v6 = Ipv6Addr::from(b);
            match v6.to_ipv4_mapped() {
                Some(v4) => IpAddr::V4(v4),
                None => IpAddr::V6(v6),
            }
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

/// Socket inode → process names (`comm (pid N)`), and whether some process
/// could not be inspected.
fn socket_owners() -> (HashMap<u64, Vec<String>>, bool) {
    let mut map: HashMap<u64, Vec<String>> = HashMap::new();
    let mut partial = false;
    let Ok(procs) = fs::read_dir("/proc") else {
        return (map, true);
    };
    for p in procs.flatten() {
        let name = p.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        let Ok(fds) = fs::read_dir(p.path().join("fd")) else {
            partial = true;
            continue;
        };
        let comm = fs::read_to_string(p.path().join("comm"))
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "?".to_string());
        for fd in fds.flatten() {
            let Ok(target) = fs::read_link(fd.path()) else {
                continue;
            };
            let Some(inode) = target
                .to_str()
                .and_then(|t| t.strip_prefix("socket:["))
                .and_then(|t| t.strip_suffix(']'))
                .and_then(|t| t.parse::<u64>().ok())
            else {
                continue;
            };
            let who = format!("{comm} (pid {pid})");
            let v = map.entry(inode).or_default();
            if !v.contains(&who) {
                v.push(who);
            }
        }
    }
    (map, partial)
}

/// Whether binding `want` would collide with the existing `have`.
fn overlaps(want: SocketAddr, have: SocketAddr) -> bool {
    if want.port() != have.port() {
        return false;
    }
    let (w, h) = (want.ip(), have.ip());
    // `::` without IPV6_V6ONLY also holds every IPv4 address.
    w == h || w.is_unspecified() || h.is_unspecified()
}

/// The sockets the plan binds, with the service that binds each.
fn listeners(c: &Cluster) -> Vec<(Proto, SocketAddr, &'static str)> {
    let mut v = Vec::new();
    if c.dns.enabled {
        for a in &c.dns.listen {
            v.push((Proto::Udp, *a, "dns"));
            v.push((Proto::Tcp, *a, "dns"));
        }
    }
    if c.dhcp.enabled {
        v.push((Proto::Udp, c.dhcp.listen, "dhcp"));
    }
    if c.lb.enabled {
        v.push((Proto::Tcp, c.lb.api, "loadBalancer api"));
        v.push((
            Proto::Tcp,
            c.lb.machine_config,
            "loadBalancer machineConfig",
        ));
        v.push((Proto::Tcp, c.lb.ingress_http, "loadBalancer ingressHttp"));
        v.push((Proto::Tcp, c.lb.ingress_https, "loadBalancer ingressHttps"));
    }
    if c.http.enabled {
        v.push((Proto::Tcp, c.http.listen, "http"));
    }
    if c.admin.enabled {
        v.push((Proto::Tcp, c.admin.listen, "admin"));
    }
    if let Some(t) = c.tftp.as_ref().filter(|t| t.enabled) {
        v.push((Proto::Udp, t.listen, "tftp"));
    }
    v
}

/// Ports of `c` already held by another socket in `net`.
pub fn ports(c: &Cluster, net: &ProcNet) -> Vec<Finding> {
    let mut out = Vec::new();
    for (proto, want, service) in listeners(c) {
        for b in net.bound.iter().filter(|b| b.proto == proto) {
            if !overlaps(want, b.addr) {
                continue;
            }
            let owner = net.owner(b.inode);
            let port = format!("{}/{}", want.port(), proto.as_str());
            // DHCP binds 0.0.0.0:67 to its own interface (SO_BINDTODEVICE);
            // another server doing the same on another bridge (libvirt's
            // dnsmasq on virbr0) coexists. /proc/net does not show devices.
            let shared_dhcp = service == "dhcp" && c.network.interface.is_some();
            let fix = if owner.contains("dnsmasq") {
                if shared_dhcp {
                    "fine if this dnsmasq serves another libvirt network (each binds its own bridge); \
                     if it serves the cluster bridge, use libvirt.network.mode: appliance (no DHCP in the libvirt network)"
                        .to_string()
                } else {
                    format!(
                        "libvirt's dnsmasq: bind {service} to the cluster bridge address instead of {} \
                         (dnsmasq binds its own bridges only), or use libvirt.network.mode: appliance",
                        want.ip()
                    )
                }
            } else if owner.contains("systemd-resolve") {
                format!(
                    "systemd-resolved's stub listener: bind {service} to the cluster bridge address instead of {}, \
                     or set DNSStubListener=no in /etc/systemd/resolved.conf",
                    want.ip()
                )
            } else if owner.contains("tftpd") {
                "another TFTP server: `systemctl disable --now tftpd-hpa` (Debian) or `tftp.socket` (Fedora), \
                 or set pxe.tftpListen to another address"
                    .to_string()
            } else {
                format!(
                    "stop that process, or move {service} to another address/port in the cluster file"
                )
            };
            out.push(Finding {
                severity: if shared_dhcp {
                    Severity::Info
                } else {
                    Severity::Warn
                },
                check: "ports",
                problem: format!(
                    "{service} wants {port} on {} but {} holds {}",
                    want.ip(),
                    owner,
                    b.addr
                ),
                fix,
            });
        }
    }
    out
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
    let mut img = match crate::libvirt::iso9660::IsoImage::open(std::io::BufReader::new(file)) {
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
    use crate::liveiso::EmbedError;
    let finding = |severity, problem: String, fix: &str| Finding {
        severity,
        check: "bootiso",
        problem,
        fix: fix.to_string(),
    };
    match crate::liveiso::unfit(c, path) {
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
                    "shorten rhcos.kargs, rhcos.roleKargs or the node's kargs (network boot has no such limit)",
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
    match fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
    {
        Ok(_) => {
            let _ = fs::remove_file(&probe);
            Vec::new()
        }
        Err(e) => vec![Finding {
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
        }],
    }
}

// ---- ignition -------------------------------------------------------------

/// The part of an ignition file preflight looks at; every other key is
/// skipped by the parser (never built as a value).
#[derive(serde::Deserialize)]
struct IgnitionHead {
    #[serde(default)]
    ignition: Option<serde_json::Value>,
}

/// `<ignitionDir>/<role>.ign` for every role with nodes: present and an
/// ignition document (`{"ignition": {"version": …}}`).
pub fn ignition(c: &Cluster) -> Vec<Finding> {
    let dir = &c.http.ignition_dir;
    let mut out = Vec::new();
    for role in Role::ALL {
        if c.nodes_with_role(role).next().is_none() {
            continue;
        }
        let file = dir.join(format!("{}.ign", role.as_str()));
        let problem = match fs::read(&file) {
            Err(e) => format!("{}: {e}", file.display()),
            // Only the `ignition` section is kept: the rest (often tens of
            // MB of files) is checked as JSON and skipped, so preflight at
            // `serve` start leaves no parsed document behind in the heap.
            Ok(bytes) => match serde_json::from_slice::<IgnitionHead>(&bytes) {
                Err(e) if e.is_data() => {
                    format!("{}: JSON but not an ignition config ({e})", file.display())
                }
                Err(e) => format!("{}: not JSON: {e}", file.display()),
                Ok(v)
                    if v.ignition
                        .as_ref()
                        .and_then(|i| i.get("version"))
                        .and_then(|v| v.as_str())
                        .is_none() =>
                {
                    format!(
                        "{}: JSON but not an ignition config (no ignition.version)",
                        file.display()
                    )
                }
                Ok(_) => continue,
            },
        };
        out.push(Finding {
            severity: Severity::Warn,
            check: "ignition",
            problem,
            fix: format!(
                "openshift-install create ignition-configs --dir <dir>, then copy <dir>/{}.ign to {}",
                role.as_str(),
                dir.display()
            ),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_net_rows() {
        let tcp = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
   0: 3500007F:0035 00000000:0000 0A 00000000:00000000 00:00000000 00000000   991        0 1234 1 0 100 0 0 10 0\n\
   1: 0100007F:1F90 0100007F:C350 01 00000000:00000000 00:00000000 00000000     0        0 99 1\n\
   garbage\n";
        let b = parse_table(tcp, Proto::Tcp);
        assert_eq!(
            b,
            vec![Bound {
                proto: Proto::Tcp,
                addr: "127.0.0.53:53".parse().unwrap(),
                inode: 1234
            }]
        );
        let udp6 = "header\n 1: 00000000000000000000000000000000:0043 00000000000000000000000000000000:0000 07 0 0 0 0 0 0 77 2\n\
 2: 0000000000000000FFFF00000100007F:0050 00000000000000000000000000000000:0000 07 0 0 0 0 0 0 78 2\n";
        let b = parse_table(udp6, Proto::Udp);
        assert_eq!(b[0].addr, "[::]:67".parse().unwrap());
        assert_eq!(b[1].addr, "127.0.0.1:80".parse().unwrap());
    }

    #[test]
    fn overlap_rules() {
        let a = |s: &str| s.parse::<SocketAddr>().unwrap();
        assert!(overlaps(a("0.0.0.0:53"), a("127.0.0.53:53")));
        assert!(overlaps(a("192.168.131.1:53"), a("[::]:53")));
        assert!(overlaps(a("192.168.131.1:53"), a("192.168.131.1:53")));
        assert!(!overlaps(a("192.168.131.1:53"), a("127.0.0.53:53")));
        assert!(!overlaps(a("0.0.0.0:53"), a("0.0.0.0:54")));
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
