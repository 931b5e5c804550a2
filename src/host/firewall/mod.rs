//! `firewall print`: the host firewall openings one cluster file needs, as a
//! firewalld service definition plus the `firewall-cmd` lines that install it.
//!
//! Role: pure derivation, plan → [`Port`] list → text. Nothing here touches
//! the firewall; `firewall apply` (module `apply`) runs the same
//! [`commands`] with firewall-cmd.
//!
//! Invariants:
//! - Only ports the plan actually listens on are listed: a disabled service
//!   adds nothing, a listener bound only to loopback adds nothing (guests
//!   cannot reach it anyway), and the admin API is never opened (it is an
//!   operator interface; reach it over SSH or loopback).
//! - DNS is opened on both udp and tcp (TCP fallback after truncation).
//! - Ports are de-duplicated and sorted (protocol, then number), so the output
//!   is stable and diffable.
//! - `firewall print --xml` is one well-formed firewalld service document;
//!   `firewall print` wraps the same document in a shell script (heredoc plus
//!   `firewall-cmd --permanent` lines) that installs it.

pub mod apply;

use std::collections::BTreeSet;
use std::fmt::Write as _;

use crate::model::catalogue::ServiceKind;
use crate::model::cluster::Cluster;

pub use crate::model::catalogue::Proto;

/// One port guests must reach, and which service listens there.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Port {
    pub proto: Proto,
    pub port: u16,
    pub service: &'static str,
}

/// The firewalld zone libvirt puts its bridges in (libvirt ≥ 5.1 with the
/// firewalld backend).
pub const LIBVIRT_ZONE: &str = "libvirt";

/// The ports of `c` that guests must reach: the catalogue's listeners
/// without the admin API and without loopback-only ones, one per
/// (protocol, port), sorted. TFTP needs only its request port: transfers
/// run from ephemeral server ports, and the client's ACKs are replies to
/// the server's packets (conntrack ESTABLISHED).
pub fn ports(c: &Cluster) -> Vec<Port> {
    let mut set: BTreeSet<(Proto, u16)> = BTreeSet::new();
    let mut out: Vec<Port> = c
        .listeners()
        .into_iter()
        .filter(|l| l.service != ServiceKind::Admin && !l.addr.ip().is_loopback())
        .filter(|l| set.insert((l.proto, l.addr.port())))
        .map(|l| Port {
            proto: l.proto,
            port: l.addr.port(),
            service: l.what,
        })
        .collect();
    out.sort();
    out
}

/// The firewalld service name for a cluster (`crc-appliance-<name>`), so two
/// clusters on one host get two services.
pub fn service_name(c: &Cluster) -> String {
    format!("crc-appliance-{}", c.name)
}

/// The zone to add the service to: libvirt's when the cluster has a libvirt
/// section, else the default zone (`None`).
pub fn zone(c: &Cluster) -> Option<&'static str> {
    c.libvirt.as_ref().map(|_| LIBVIRT_ZONE)
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The `firewall-cmd` calls that install `name` permanently (file
/// `file`), as argument lists: `firewall apply` runs them as they are.
pub fn command_args(name: &str, zone: Option<&str>, file: &str) -> Vec<Vec<String>> {
    let mut add = vec!["--permanent".to_string()];
    add.extend(zone.map(|z| format!("--zone={z}")));
    add.push(format!("--add-service={name}"));
    vec![
        vec![
            "--permanent".to_string(),
            format!("--new-service-from-file={file}"),
            format!("--name={name}"),
        ],
        add,
        vec!["--reload".to_string()],
    ]
}

/// The same calls as `firewall-cmd` lines (for the printed script; `file`
/// is written into them as given, quotes included).
pub fn commands(name: &str, zone: Option<&str>, file: &str) -> Vec<String> {
    command_args(name, zone, file)
        .into_iter()
        .map(|args| format!("firewall-cmd {}", args.join(" ")))
        .collect()
}

/// A firewalld service document (`<service>` with `<short>`,
/// `<description>` and one `<port>` per opening).
pub fn service_xml(short: &str, description: &str, ports: &[Port]) -> String {
    let mut x = String::from("<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<service>\n");
    let _ = writeln!(x, "  <short>{}</short>", escape(short));
    let _ = writeln!(x, "  <description>{}</description>", escape(description));
    for p in ports {
        let _ = writeln!(
            x,
            "  <port protocol=\"{}\" port=\"{}\"/>",
            p.proto.as_str(),
            p.port
        );
    }
    x.push_str("</service>\n");
    x
}

/// `firewall print --xml`: the cluster's service definition alone.
pub fn render_xml(c: &Cluster) -> String {
    let desc = format!(
        "DNS, DHCP, load balancer and HTTP that crc-appliance serves to the nodes of {}.",
        c.domain
    );
    service_xml(&service_name(c), &desc, &ports(c))
}

/// `firewall print`: a shell script that writes the service file and runs
/// the `firewall-cmd` lines (`crc-appliance firewall print -c F | sudo sh`).
pub fn render(c: &Cluster) -> String {
    let name = service_name(c);
    let mut out = format!(
        "# firewalld openings for cluster {} (crc-appliance firewall print)\n",
        c.domain
    );
    for p in ports(c) {
        let _ = writeln!(out, "#   {}/{}  {}", p.port, p.proto.as_str(), p.service);
    }
    let _ = writeln!(
        out,
        "set -e\n# firewalld takes the service name from the file name too: no dots.\ndir=$(mktemp -d)\ncat > \"$dir/{name}.xml\" <<'EOF'"
    );
    out.push_str(&render_xml(c));
    out.push_str("EOF\n");
    // --new-service-from-file refuses an existing service: replace it.
    let _ = writeln!(
        out,
        "firewall-cmd --permanent --delete-service={name} >/dev/null 2>&1 || true"
    );
    for l in commands(&name, zone(c), &format!("\"$dir/{name}.xml\"")) {
        out.push_str(&l);
        out.push('\n');
    }
    out.push_str("rm -rf \"$dir\"\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster() -> Cluster {
        // Parsed in memory: the unit tests run in parallel, and a shared
        // temporary file was removed under another test's feet.
        let text = include_str!("../../../configs/example.yaml");
        let path = std::path::Path::new("configs/example.yaml");
        crate::config::from_str(text, std::path::Path::new("configs"), path)
            .unwrap()
            .cluster
    }

    fn pairs(ps: &[Port]) -> Vec<(&'static str, u16)> {
        ps.iter().map(|p| (p.proto.as_str(), p.port)).collect()
    }

    #[test]
    fn example_ports() {
        let c = cluster();
        assert_eq!(
            pairs(&ports(&c)),
            vec![
                ("tcp", 53),
                ("tcp", 80),
                ("tcp", 443),
                ("tcp", 6443),
                ("tcp", 8080),
                ("tcp", 22623),
                ("udp", 53),
                ("udp", 67),
            ]
        );
    }

    #[test]
    fn disabled_and_loopback_are_not_opened() {
        let mut c = cluster();
        c.dhcp.enabled = false;
        c.lb.enabled = false;
        c.http.listen = "127.0.0.1:8081".parse().unwrap();
        c.admin.listen = "0.0.0.0:9180".parse().unwrap();
        assert_eq!(
            pairs(&ports(&c)),
            vec![("tcp", 53), ("udp", 53)],
            "admin is never opened, loopback-only http neither"
        );
    }

    #[test]
    fn xml_and_commands() {
        let c = cluster();
        let x = render_xml(&c);
        assert!(x.starts_with("<?xml"));
        assert!(x.contains("<short>crc-appliance-ocp4</short>"), "{x}");
        assert!(x.contains("<port protocol=\"udp\" port=\"67\"/>"), "{x}");
        let cmds = render(&c);
        assert!(cmds.contains(&x), "{cmds}");
        assert!(
            cmds.contains(
                "firewall-cmd --permanent --zone=libvirt --add-service=crc-appliance-ocp4"
            ),
            "{cmds}"
        );
        assert!(cmds.contains(
            "--new-service-from-file=\"$dir/crc-appliance-ocp4.xml\" --name=crc-appliance-ocp4"
        ));
    }

    #[test]
    fn tftp_port_is_opened_when_enabled() {
        let mut c = cluster();
        c.tftp = Some(crate::model::cluster::TftpCfg {
            enabled: true,
            listen: "192.168.131.1:69".parse().unwrap(),
            root: "/usr/lib/ipxe".into(),
            max_transfers: 8,
            max_transfers_per_client: 4,
            timeout: std::time::Duration::from_secs(1),
            retries: 3,
            allow_symlinks_to: Vec::new(),
            pool: false,
        });
        assert!(pairs(&ports(&c)).contains(&("udp", 69)));
        c.tftp.as_mut().unwrap().enabled = false;
        assert!(!pairs(&ports(&c)).contains(&("udp", 69)));
    }

    #[test]
    fn ntp_port_is_opened_when_enabled() {
        let mut c = cluster();
        assert!(!pairs(&ports(&c)).contains(&("udp", 123)));
        c.ntp = Some(crate::model::cluster::NtpCfg {
            enabled: true,
            listen: "192.168.131.1:123".parse().unwrap(),
            local_stratum: None,
            client_rate: 8,
            allow_from: None,
        });
        assert!(pairs(&ports(&c)).contains(&("udp", 123)));
        c.ntp.as_mut().unwrap().enabled = false;
        assert!(!pairs(&ports(&c)).contains(&("udp", 123)));
    }

    #[test]
    fn escaping() {
        let x = service_xml("a<b", "x & \"y\"", &[]);
        assert!(x.contains("<short>a&lt;b</short>"));
        assert!(x.contains("x &amp; &quot;y&quot;"));
    }
}
