//! Preflight: does a running firewalld let the nodes reach this cluster's
//! ports? The zone of `network.interface` (else the default zone) is read
//! with `firewall-cmd --info-zone`, the ports of its services with
//! `--info-service`, and every port `firewall print` would open that the
//! zone does not is reported, with `firewall apply` as the fix.
//!
//! Invariants: read-only queries; no firewalld (no `firewall-cmd`, or not
//! running) is no finding; every `firewall-cmd` call is bounded
//! ([`CALL_TIMEOUT`]) and killed past it, so a stuck D-Bus cannot hold up
//! `serve`'s start. The decision ([`closed_ports`]) is pure.

use std::io::Read as _;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{Finding, Severity};
use crate::host::firewall::{self, Port};
use crate::model::cluster::Cluster;

/// Longest a `firewall-cmd` query may take.
pub(super) const CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// `firewall-cmd ARGS`' stdout when it ran and succeeded in time.
fn query(args: &[&str]) -> Option<String> {
    let mut child = Command::new("firewall-cmd")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let deadline = Instant::now() + CALL_TIMEOUT;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                let mut out = String::new();
                child.stdout.take()?.read_to_string(&mut out).ok()?;
                return status.success().then_some(out);
            }
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
}

/// The value of `key:` in `firewall-cmd --info-*` output, split on blanks.
fn field<'a>(info: &'a str, key: &str) -> Vec<&'a str> {
    info.lines()
        .find_map(|l| l.trim_start().strip_prefix(&format!("{key}:")))
        .map(|v| v.split_whitespace().collect())
        .unwrap_or_default()
}

/// Whether a firewalld port item (`53/udp`, `1000-2000/tcp`) covers `p`.
fn covers(item: &str, p: &Port) -> bool {
    let Some((range, proto)) = item.split_once('/') else {
        return false;
    };
    if proto != p.proto.as_str() {
        return false;
    }
    let (lo, hi) = range.split_once('-').unwrap_or((range, range));
    matches!((lo.parse::<u16>(), hi.parse::<u16>()), (Ok(lo), Ok(hi)) if (lo..=hi).contains(&p.port))
}

/// The ports of `required` a zone with `target` does not open, given the
/// port items it opens (its own and its services').
pub(super) fn closed_ports<'a>(required: &'a [Port], target: &str, open: &[&str]) -> Vec<&'a Port> {
    if target == "ACCEPT" {
        return Vec::new();
    }
    required
        .iter()
        .filter(|p| !open.iter().any(|item| covers(item, p)))
        .collect()
}

/// The finding for `c` when firewalld runs and its zone blocks ports.
pub(super) fn firewalld(c: &Cluster) -> Vec<Finding> {
    let required = firewall::ports(c);
    if required.is_empty() || query(&["--state"]).is_none() {
        return Vec::new();
    }
    let iface = c.network.interface.as_deref();
    let zone = iface
        .and_then(|i| query(&[&format!("--get-zone-of-interface={i}")]))
        .or_else(|| query(&["--get-default-zone"]))
        .map(|z| z.trim().to_string())
        .filter(|z| !z.is_empty());
    let Some(zone) = zone else {
        return Vec::new();
    };
    let Some(info) = query(&[&format!("--info-zone={zone}")]) else {
        return Vec::new();
    };
    let target = field(&info, "target").first().copied().unwrap_or("default");
    let mut open: Vec<String> = field(&info, "ports")
        .iter()
        .map(|s| s.to_string())
        .collect();
    for service in field(&info, "services") {
        if let Some(s) = query(&[&format!("--info-service={service}")]) {
            open.extend(field(&s, "ports").iter().map(|p| p.to_string()));
        }
    }
    let open: Vec<&str> = open.iter().map(String::as_str).collect();
    let closed = closed_ports(&required, target, &open);
    if closed.is_empty() {
        return Vec::new();
    }
    let list: Vec<String> = closed
        .iter()
        .map(|p| format!("{}/{} ({})", p.port, p.proto.as_str(), p.service))
        .collect();
    vec![Finding {
        severity: Severity::Warn,
        check: "firewall",
        problem: format!(
            "firewalld zone {zone}{} does not open {}",
            iface
                .map(|i| format!(" (interface {i})"))
                .unwrap_or_default(),
            list.join(", ")
        ),
        fix: "crc-appliance firewall apply --cluster <file> (or: firewall print | sudo sh)".into(),
    }]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::firewall::Proto;

    fn port(proto: Proto, port: u16) -> Port {
        Port {
            proto,
            port,
            service: "x",
        }
    }

    #[test]
    fn ports_services_ranges_and_accept() {
        let req = [
            port(Proto::Udp, 53),
            port(Proto::Tcp, 6443),
            port(Proto::Tcp, 8080),
            port(Proto::Udp, 67),
        ];
        let open = ["53/udp", "6000-7000/tcp", "8080/udp", "bogus", "x-y/tcp"];
        let closed: Vec<u16> = closed_ports(&req, "default", &open)
            .iter()
            .map(|p| p.port)
            .collect();
        assert_eq!(closed, [8080, 67]);
        assert!(closed_ports(&req, "ACCEPT", &[]).is_empty());
        assert_eq!(closed_ports(&req, "%%REJECT%%", &[]).len(), 4);
    }

    #[test]
    fn fields_of_info_output() {
        let info = "public (active)\n  target: default\n  services: dhcp dns ssh\n  ports: 8080/tcp\n  protocols: \n";
        assert_eq!(field(info, "target"), ["default"]);
        assert_eq!(field(info, "services"), ["dhcp", "dns", "ssh"]);
        assert_eq!(field(info, "ports"), ["8080/tcp"]);
        assert!(field(info, "protocols").is_empty());
        assert!(field(info, "missing").is_empty());
    }
}
