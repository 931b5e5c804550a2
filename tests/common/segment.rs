//! A shared segment for the proxyDHCP tests: the site's DHCP server (Kea or
//! dnsmasq) on a bridge in a namespace of its own, the appliance in
//! another (veth `a0` on the bridge), a client namespace (veth `c0`), and
//! a tap for qemu on the bridge.
//!
//! Addresses on `10.<octet>.0.0/24`: the site server `.2` (also the
//! router), the appliance `.1`, the site's pool `.100`–`.150`, the node
//! `master-0` (MAC `52:54:00:<octet>:00:0a`) `.10` in the inventory.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use super::{Netns, Proc, unique_name, veth};

/// Kea's DHCPv4 server: installed, or extracted by scripts/prereqs.sh.
pub fn kea_dhcp4() -> Option<PathBuf> {
    let extracted =
        PathBuf::from("/var/cache/crc-appliance-tests/extract/kea-dhcp4-server/usr/sbin/kea-dhcp4");
    if extracted.is_file() {
        return Some(extracted);
    }
    super::have("kea-dhcp4").then(|| PathBuf::from("kea-dhcp4"))
}

/// Which DHCP server the site runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Site {
    Kea,
    Dnsmasq,
}

impl Site {
    /// Err(why the test must skip) when the server is not installed.
    pub fn available(self) -> Result<(), String> {
        match self {
            Site::Kea => kea_dhcp4().map(drop).ok_or_else(|| {
                "kea-dhcp4 is not installed (scripts/prereqs.sh extracts it)".into()
            }),
            Site::Dnsmasq => super::have("dnsmasq")
                .then_some(())
                .ok_or_else(|| "dnsmasq is not installed".into()),
        }
    }
}

/// The three namespaces and the site server (stopped on drop, before the
/// namespaces go: fields drop in order).
pub struct Segment {
    pub server: Option<Proc>,
    pub site: Netns,
    pub app: Netns,
    pub client: Netns,
    pub octet: u8,
    pub dir: tempfile::TempDir,
}

impl Segment {
    /// `10.<octet>.0.<host>`.
    pub fn ip(&self, host: u8) -> String {
        format!("10.{}.0.{host}", self.octet)
    }

    /// The node's MAC, `52:54:00:<octet>:00:0a`.
    pub fn node_mac(&self) -> String {
        format!("52:54:00:{:02x}:00:0a", self.octet)
    }

    /// Build the segment and start `site`'s DHCP server on it.
    pub fn new(site: Site, octet: u8) -> Segment {
        let s = Netns::new(unique_name("crcps"));
        let a = Netns::new(unique_name("crcpa"));
        let c = Netns::new(unique_name("crcpc"));
        let net = format!("10.{octet}.0");
        s.ip(&["link", "add", "br0", "type", "bridge"]);
        s.ip(&["addr", "add", &format!("{net}.2/24"), "dev", "br0"]);
        s.ip(&["link", "set", "br0", "up"]);
        for (ns, ifname, peer) in [(&a, "a0", "pa0"), (&c, "c0", "pc0")] {
            veth(ifname, ns, peer, &s);
            s.ip(&["link", "set", peer, "master", "br0"]);
            s.ip(&["link", "set", peer, "up"]);
            ns.ip(&["link", "set", ifname, "up"]);
        }
        a.ip(&["addr", "add", &format!("{net}.1/24"), "dev", "a0"]);
        s.ip(&["tuntap", "add", "dev", "tap0", "mode", "tap"]);
        s.ip(&["link", "set", "tap0", "master", "br0"]);
        s.ip(&["link", "set", "tap0", "up"]);
        let dir = tempfile::tempdir().unwrap();
        let mut seg = Segment {
            server: None,
            site: s,
            app: a,
            client: c,
            octet,
            dir,
        };
        seg.server = Some(match site {
            Site::Kea => seg.start_kea(),
            Site::Dnsmasq => seg.start_dnsmasq(),
        });
        // The server opens its sockets.
        std::thread::sleep(Duration::from_millis(1500));
        seg
    }

    fn start_kea(&self) -> Proc {
        let d = self.dir.path();
        let net = format!("10.{}.0", self.octet);
        let conf = format!(
            r#"{{ "Dhcp4": {{
  "interfaces-config": {{ "interfaces": ["br0"], "dhcp-socket-type": "raw" }},
  "lease-database": {{ "type": "memfile", "persist": false }},
  "valid-lifetime": 600,
  "subnet4": [ {{ "id": 1, "subnet": "{net}.0/24",
     "pools": [ {{ "pool": "{net}.100 - {net}.150" }} ],
     "option-data": [ {{ "name": "routers", "data": "{net}.2" }} ] }} ],
  "loggers": [ {{ "name": "kea-dhcp4", "severity": "INFO",
     "output_options": [ {{ "output": "{log}" }} ] }} ]
}} }}"#,
            log = d.join("kea.log").display()
        );
        let path = d.join("kea-dhcp4.conf");
        std::fs::write(&path, conf).unwrap();
        let kea = kea_dhcp4().expect("kea-dhcp4");
        let child = self
            .site
            .cmd(&[kea.to_str().unwrap(), "-c", path.to_str().unwrap()])
            .env("KEA_PIDFILE_DIR", d)
            .env("KEA_LOCKFILE_DIR", d)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(d.join("kea.stderr")).unwrap())
            .spawn()
            .expect("run kea-dhcp4");
        Proc(child)
    }

    fn start_dnsmasq(&self) -> Proc {
        let d = self.dir.path();
        let net = format!("10.{}.0", self.octet);
        let child = self
            .site
            .cmd(&[
                "dnsmasq",
                "--no-daemon",
                "--conf-file=/dev/null",
                "--port=0",
                "--interface=br0",
                "--bind-interfaces",
                "--no-ping",
                "--log-dhcp",
                &format!("--dhcp-range={net}.100,{net}.150,10m"),
                &format!("--dhcp-option=option:router,{net}.2"),
                &format!("--dhcp-leasefile={}", d.join("dnsmasq.leases").display()),
                &format!("--pid-file={}", d.join("dnsmasq.pid").display()),
                &format!("--log-facility={}", d.join("dnsmasq.log").display()),
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(d.join("dnsmasq.stderr")).unwrap())
            .spawn()
            .expect("run dnsmasq");
        Proc(child)
    }

    /// The site server's log (for failure messages).
    pub fn server_log(&self) -> String {
        let mut out = String::new();
        for f in ["kea.log", "kea.stderr", "dnsmasq.log", "dnsmasq.stderr"] {
            if let Ok(t) = std::fs::read_to_string(self.dir.path().join(f)) {
                out.push_str(&format!("--- {f}\n{t}"));
            }
        }
        out
    }

    /// The appliance's cluster file on this segment in `mode`, booting
    /// from `iso` (when given) with kargs `crc.test=1`.
    pub fn cluster_yaml(&self, mode: &str, iso: Option<&Path>) -> String {
        let net = format!("10.{}.0", self.octet);
        let rhcos = iso
            .map(|p| format!("rhcos:\n  iso: {}\n  kargs: [crc.test=1]\n", p.display()))
            .unwrap_or_default();
        format!(
            r#"name: px
baseDomain: crc.testing
network: {{ cidr: {net}.0/24, gateway: {net}.2, applianceIP: {net}.1, interface: a0 }}
nodes:
  - {{ name: master-0, role: master, mac: "{mac}", ip: {net}.10 }}
dns: {{ enabled: false }}
loadBalancer: {{ enabled: false }}
dhcp:
  mode: {mode}
  listen: 0.0.0.0:67
  leaseFile: "{{dir}}/leases.json"
http:
  listen: {net}.1:8080
  imagesDir: "{{dir}}/images"
  ignitionDir: "{{dir}}/ign"
admin:
  listen: 127.0.0.1:0
pxe:
  tftpListen: {net}.1:69
{rhcos}"#,
            mac = self.node_mac()
        )
    }

    /// Run the PXE client fixture in the client namespace; one JSON value
    /// per reply.
    pub fn pxe_client(&self, args: &[&str]) -> Vec<serde_json::Value> {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/pxe_client.py");
        let mut a = vec!["python3", script.to_str().unwrap()];
        a.extend_from_slice(args);
        let out = self.client.exec(&a);
        out.lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }
}
