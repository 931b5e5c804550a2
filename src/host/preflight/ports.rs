//! Preflight: ports this cluster file listens on that are already taken,
//! and by whom (`/proc/net/{tcp,udp}{,6}` and the processes' fds).

use std::collections::HashMap;
use std::fs;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use super::{Finding, Severity};
use crate::model::catalogue::ServiceKind;
use crate::model::cluster::Cluster;

pub use crate::model::catalogue::Proto;

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
    /// Read `/proc/net/{tcp,tcp6,udp,udp6}` of the calling thread's network
    /// namespace (`/proc/thread-self/net`: `/proc/net` is the main
    /// thread's, and an appliance embedded in a test runs in a namespace its
    /// threads joined) and map socket inodes to owners.
    pub fn read() -> ProcNet {
        let mut bound = Vec::new();
        for (file, proto) in [
            ("/proc/thread-self/net/tcp", Proto::Tcp),
            ("/proc/thread-self/net/tcp6", Proto::Tcp),
            ("/proc/thread-self/net/udp", Proto::Udp),
            ("/proc/thread-self/net/udp6", Proto::Udp),
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

/// Ports of `c` already held by another socket in `net`.
pub fn ports(c: &Cluster, net: &ProcNet) -> Vec<Finding> {
    let mut out = Vec::new();
    for l in c.listeners() {
        let (proto, want, service) = (l.proto, l.addr, l.what);
        for b in net.bound.iter().filter(|b| b.proto == proto) {
            if !overlaps(want, b.addr) {
                continue;
            }
            let owner = net.owner(b.inode);
            let port = format!("{}/{}", want.port(), proto.as_str());
            // DHCP binds 0.0.0.0:67 to its own interface (SO_BINDTODEVICE);
            // another server doing the same on another bridge (libvirt's
            // dnsmasq on virbr0) coexists. /proc/net does not show devices.
            let shared_dhcp = matches!(l.service, ServiceKind::Dhcp | ServiceKind::Dhcp6)
                && c.network.interface.is_some();
            // `serve` itself: preflight checks a running appliance too
            // (registry.releaseImage); a second serve would fail to bind.
            let serving = owner.starts_with("crc-appliance (");
            let fix = if serving {
                "crc-appliance serve is running: fine when checking it; stop it before starting another serve"
                    .to_string()
            } else if owner.contains("dnsmasq") {
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
            } else if owner.contains("chronyd") || owner.contains("ntpd") {
                format!(
                    "this host's NTP daemon serves port 123: bind ntp.listen to the cluster address only \
                     (chronyd: `bindaddress`/`port 0` in chrony.conf so it stops serving), or remove the ntp: section \
                     and let {owner} serve the nodes"
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
                severity: if shared_dhcp || serving {
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
}
