//! libvirt XML for the pool, network, volumes and the two domain phases.
//! Pure string building; every interpolated value goes through [`esc`].
//!
//! - Network, appliance mode: the bridge gets applianceIP (the host owns it,
//!   so the appliance's DNS/DHCP/HTTP bind there), `<dns enable='no'/>` and
//!   no `<dhcp>`, so libvirt starts no dnsmasq.
//! - Network, forwarder mode: the bridge gets the gateway; libvirt's dnsmasq
//!   forwards the cluster and reverse zones to applianceIP (`<forwarder
//!   domain= addr=/>`), and serves the reservations when the appliance's DHCP
//!   is disabled.
//! - Dual-stack (`network.ipv6`, appliance mode): the bridge also gets the
//!   IPv6 applianceIP (`<ip family='ipv6' address= prefix=/>`), with no
//!   `<dhcp>`: with DNS off and no DHCP range or host on any `<ip>`,
//!   libvirt starts no dnsmasq, so it sends no router advertisements and
//!   answers no DHCPv6 (the appliance does both, docs/ipv6.md). Forwarder
//!   mode is refused with IPv6 ([`super::spec::Spec::new`]): its dnsmasq
//!   would advertise the prefix for SLAAC (`ra-only`).
//! - `<forward mode='nat'/>` only with `nat: true`; otherwise isolated.
//! - Install domain: direct kernel boot of the ISO's kernel/initrd with the
//!   `coreos.inst.*` cmdline, `on_reboot=destroy` (the installer's reboot
//!   powers it off). Final domain: same name and UUID, boots the disk,
//!   `on_reboot=restart`.

use std::fmt::Write as _;

use super::spec::{META_NS, NodeSpec, Phase, Spec};
use crate::model::cluster::NetMode;

/// Escape text and attribute values (`&<>'"`).
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '\'' => o.push_str("&apos;"),
            '"' => o.push_str("&quot;"),
            c => o.push(c),
        }
    }
    o
}

fn p(path: &std::path::Path) -> String {
    esc(&path.display().to_string())
}

pub fn pool_xml(s: &Spec) -> String {
    format!(
        "<pool type='dir'>\n  <name>{}</name>\n  <target>\n    <path>{}</path>\n  </target>\n</pool>\n",
        esc(&s.pool_name),
        p(&s.pool_path)
    )
}

pub fn network_xml(s: &Spec) -> String {
    let mut x = String::new();
    let _ = writeln!(x, "<network>");
    let _ = writeln!(x, "  <name>{}</name>", esc(&s.network_name));
    let _ = writeln!(x, "  <uuid>{}</uuid>", esc(&s.network_uuid));
    let _ = writeln!(
        x,
        "  <metadata>\n    <crc:owner xmlns:crc='{META_NS}' cluster='{}'/>\n  </metadata>",
        esc(&s.domain)
    );
    if s.nat {
        let _ = writeln!(x, "  <forward mode='nat'/>");
    }
    let _ = writeln!(
        x,
        "  <bridge name='{}' stp='on' delay='0'/>",
        esc(&s.bridge)
    );
    match s.mode {
        NetMode::Appliance => {
            let _ = writeln!(x, "  <dns enable='no'/>");
        }
        NetMode::Forwarder => {
            let _ = writeln!(x, "  <dns>");
            for (d, ip) in &s.forwarders {
                let _ = writeln!(x, "    <forwarder domain='{}' addr='{ip}'/>", esc(d));
            }
            let _ = writeln!(x, "  </dns>");
        }
    }
    if s.dhcp_hosts.is_empty() {
        let _ = writeln!(
            x,
            "  <ip address='{}' netmask='{}'/>",
            s.bridge_ip, s.netmask
        );
    } else {
        let _ = writeln!(
            x,
            "  <ip address='{}' netmask='{}'>\n    <dhcp>",
            s.bridge_ip, s.netmask
        );
        for h in &s.dhcp_hosts {
            let _ = writeln!(
                x,
                "      <host mac='{}' name='{}' ip='{}'/>",
                h.mac,
                esc(&h.name),
                h.ip
            );
        }
        let _ = writeln!(x, "    </dhcp>\n  </ip>");
    }
    if let Some((ip, prefix)) = s.bridge_ip6 {
        let _ = writeln!(x, "  <ip family='ipv6' address='{ip}' prefix='{prefix}'/>");
    }
    let _ = writeln!(x, "</network>");
    x
}

pub fn volume_xml(n: &NodeSpec) -> String {
    format!(
        "<volume type='file'>\n  <name>{}</name>\n  <capacity unit='GiB'>{}</capacity>\n  <target>\n    <format type='qcow2'/>\n  </target>\n</volume>\n",
        esc(&n.volume),
        n.disk_gib
    )
}

/// The transient install-phase domain: boots the ISO's kernel.
pub fn install_domain_xml(s: &Spec, n: &NodeSpec) -> String {
    domain_xml(s, n, None)
}

/// The persistent definition: boots the disk.
pub fn final_domain_xml(s: &Spec, n: &NodeSpec, phase: Phase) -> String {
    domain_xml(s, n, Some(phase))
}

fn domain_xml(s: &Spec, n: &NodeSpec, fin: Option<Phase>) -> String {
    let mut x = String::new();
    let _ = writeln!(x, "<domain type='{}'>", esc(&s.domain_type));
    let _ = writeln!(x, "  <name>{}</name>", esc(&n.domain));
    let _ = writeln!(x, "  <uuid>{}</uuid>", esc(&n.uuid));
    let phase = fin.map(Phase::as_str).unwrap_or("install");
    let _ = writeln!(
        x,
        "  <metadata>\n    <crc:owner xmlns:crc='{META_NS}' cluster='{}' node='{}' role='{}' phase='{phase}'/>\n  </metadata>",
        esc(&s.domain),
        esc(&n.node),
        n.role
    );
    let _ = writeln!(x, "  <memory unit='MiB'>{}</memory>", n.memory_mib);
    let _ = writeln!(x, "  <vcpu placement='static'>{}</vcpu>", n.cpus);
    let _ = writeln!(
        x,
        "  <os>\n    <type arch='x86_64' machine='q35'>hvm</type>"
    );
    if fin.is_none() {
        let _ = writeln!(x, "    <kernel>{}</kernel>", p(&s.kernel));
        let _ = writeln!(x, "    <initrd>{}</initrd>", p(&s.initrd));
        let _ = writeln!(x, "    <cmdline>{}</cmdline>", esc(&n.cmdline));
    }
    let _ = writeln!(x, "  </os>");
    let _ = writeln!(x, "  <features>\n    <acpi/>\n    <apic/>\n  </features>");
    // RHEL 9 based RHCOS needs x86-64-v2 (SSE4.2, POPCNT, …): with KVM the
    // host CPU is passed through; under software emulation (TCG) qemu's
    // default `qemu64` lacks them, so the Nehalem model is named, the oldest
    // that meets the baseline.
    if s.domain_type == "kvm" {
        let _ = writeln!(x, "  <cpu mode='host-passthrough' check='none'/>");
    } else {
        let _ = writeln!(
            x,
            "  <cpu mode='custom' match='exact' check='none'>\n    <model fallback='allow'>Nehalem</model>\n  </cpu>"
        );
    }
    let _ = writeln!(x, "  <clock offset='utc'/>");
    let on_reboot = if fin.is_some() { "restart" } else { "destroy" };
    let _ = writeln!(
        x,
        "  <on_poweroff>destroy</on_poweroff>\n  <on_reboot>{on_reboot}</on_reboot>\n  <on_crash>destroy</on_crash>"
    );
    let _ = writeln!(x, "  <devices>");
    let _ = writeln!(
        x,
        "    <disk type='file' device='disk'>\n      <driver name='qemu' type='qcow2' discard='unmap'/>\n      <source file='{}'/>\n      <target dev='vda' bus='virtio'/>",
        p(&n.disk_path)
    );
    if fin.is_some() {
        let _ = writeln!(x, "      <boot order='1'/>");
    }
    let _ = writeln!(x, "    </disk>");
    let _ = writeln!(
        x,
        "    <interface type='network'>\n      <mac address='{}'/>\n      <source network='{}'/>\n      <model type='virtio'/>\n    </interface>",
        n.mac,
        esc(&s.network_name)
    );
    let _ = writeln!(
        x,
        "    <serial type='pty'>\n      <log file='{}' append='on'/>\n      <target type='isa-serial' port='0'>\n        <model name='isa-serial'/>\n      </target>\n    </serial>",
        p(&n.serial_log)
    );
    let _ = writeln!(
        x,
        "    <console type='pty'>\n      <target type='serial' port='0'/>\n    </console>"
    );
    // A screen on loopback VNC (`virsh vncdisplay`), so a boot stuck
    // before the serial console (firmware, "No bootable device") is visible.
    let _ = writeln!(
        x,
        "    <graphics type='vnc' port='-1' autoport='yes' listen='127.0.0.1'>\n      <listen type='address' address='127.0.0.1'/>\n    </graphics>\n    <video>\n      <model type='vga'/>\n    </video>"
    );
    let _ = writeln!(
        x,
        "    <rng model='virtio'>\n      <backend model='random'>/dev/urandom</backend>\n    </rng>"
    );
    let _ = writeln!(x, "  </devices>\n</domain>");
    x
}

/// The `phase` attribute of our metadata in a domain XML, if it is ours.
pub fn owner_phase(xml: &str, cluster_domain: &str) -> Option<String> {
    let at = xml.find(META_NS)?;
    let start = xml[..at].rfind('<')?;
    let end = at + xml[at..].find('>')?;
    let tag = &xml[start..end];
    if attr(tag, "cluster")? != esc(cluster_domain) {
        return None;
    }
    Some(attr(tag, "phase").unwrap_or_default())
}

/// Value of `name='..'` or `name=".."` in a tag (escaped form).
fn attr(tag: &str, name: &str) -> Option<String> {
    let mut rest = tag;
    while let Some(i) = rest.find(name) {
        let before_ok = i == 0 || rest.as_bytes()[i - 1].is_ascii_whitespace();
        let after = &rest[i + name.len()..];
        if before_ok && let Some(v) = after.strip_prefix('=') {
            let q = v.chars().next()?;
            if q == '\'' || q == '"' {
                let v = &v[1..];
                return v.find(q).map(|e| v[..e].to_string());
            }
        }
        rest = &rest[i + name.len()..];
    }
    None
}

/// Everything `vm up` would define, as one document for `render libvirt`.
pub fn render(s: &Spec) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "<!-- crc-appliance: libvirt objects of cluster {} on {} -->",
        esc(&s.domain),
        esc(&s.uri)
    );
    for w in &s.warnings {
        let _ = writeln!(o, "<!-- warning: {} -->", esc(w).replace("--", "- -"));
    }
    let _ = writeln!(o, "<!-- storage pool {} -->", esc(&s.pool_name));
    o.push_str(&pool_xml(s));
    let _ = writeln!(o, "<!-- network {} -->", esc(&s.network_name));
    o.push_str(&network_xml(s));
    let _ = writeln!(
        o,
        "<!-- boot files extracted from {}: {}, {}, {} (served as {}) -->",
        p(&s.iso),
        p(&s.kernel),
        p(&s.initrd),
        p(&s.rootfs),
        esc(&s.rootfs_url)
    );
    for n in &s.nodes {
        let _ = writeln!(o, "<!-- {}: volume -->", esc(&n.node));
        o.push_str(&volume_xml(n));
        let _ = writeln!(o, "<!-- {}: install phase (transient) -->", esc(&n.node));
        o.push_str(&install_domain_xml(s, n));
        let _ = writeln!(
            o,
            "<!-- {}: final definition (persistent) -->",
            esc(&n.node)
        );
        o.push_str(&final_domain_xml(s, n, Phase::Installing));
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Plan;

    pub(crate) fn plan(extra: &str) -> Plan {
        let yaml = format!(
            r#"name: ocp4
baseDomain: example.com
network:
  cidr: 192.168.131.0/24
  gateway: 192.168.131.1
  applianceIP: {appl}
nodes:
  - {{ name: bootstrap, role: bootstrap, mac: "52:54:00:a1:31:05", ip: 192.168.131.5 }}
  - {{ name: master-0, role: master, mac: "52:54:00:a1:31:0a", ip: 192.168.131.10 }}
  - {{ name: worker-0, role: worker, mac: "52:54:00:a1:31:14", ip: 192.168.131.20 }}
http:
  listen: 0.0.0.0:8080
  imagesDir: /srv/images
  ignitionDir: /srv/ign
{extra}"#,
            appl = if extra.contains("forwarder") {
                "192.168.131.2"
            } else {
                "192.168.131.1"
            }
        );
        // Parsed in memory: parallel tests writing the same file raced
        // (one read it while another rewrote it).
        let path = std::path::Path::new("test.yaml");
        crate::config::from_str(&yaml, std::path::Path::new("/"), path).unwrap()
    }

    const LV: &str = "rhcos:\n  iso: /isos/rhcos.iso\nlibvirt:\n  pool: { name: ocp4, path: /var/lib/libvirt/images/ocp4 }\n";

    #[test]
    fn appliance_network_has_no_dnsmasq_and_owns_appliance_ip() {
        let s = Spec::with_ignition_check(&plan(LV), &|_| false).unwrap();
        let x = network_xml(&s);
        assert!(x.contains("<dns enable='no'/>"), "{x}");
        assert!(!x.contains("<dhcp>"), "{x}");
        assert!(!x.contains("<forward"), "isolated by default: {x}");
        assert!(
            x.contains("<ip address='192.168.131.1' netmask='255.255.255.0'/>"),
            "{x}"
        );
        assert!(x.contains("<bridge name='crc-ocp4'"), "{x}");
        let nat =
            Spec::with_ignition_check(&plan(&format!("{LV}  network: {{ nat: true }}\n")), &|_| {
                false
            })
            .unwrap();
        assert!(network_xml(&nat).contains("<forward mode='nat'/>"));
    }

    #[test]
    fn forwarder_network_forwards_cluster_and_reverse_zones() {
        let s = Spec::with_ignition_check(
            &plan(&format!("{LV}  network: {{ mode: forwarder }}\n")),
            &|_| false,
        )
        .unwrap();
        let x = network_xml(&s);
        assert!(
            x.contains("<forwarder domain='ocp4.example.com' addr='192.168.131.2'/>"),
            "{x}"
        );
        assert!(
            x.contains("<forwarder domain='131.168.192.in-addr.arpa' addr='192.168.131.2'/>"),
            "{x}"
        );
        assert!(
            x.contains("<ip address='192.168.131.1'"),
            "bridge = gateway: {x}"
        );
        assert!(!x.contains("enable='no'"), "{x}");
        assert!(!x.contains("<dhcp>"), "appliance DHCP is on: {x}");
        // With the appliance's DHCP off, libvirt hands out the reservations.
        let s = Spec::with_ignition_check(
            &plan(&format!(
                "dhcp: {{ enabled: false }}\n{LV}  network: {{ mode: forwarder }}\n"
            )),
            &|_| false,
        )
        .unwrap();
        let x = network_xml(&s);
        assert!(
            x.contains("<host mac='52:54:00:a1:31:0a' name='master-0' ip='192.168.131.10'/>"),
            "{x}"
        );
    }

    #[test]
    fn dual_stack_network_gets_the_v6_address_without_dhcp() {
        let v6 = "  ipv6: { cidr: 'fd00:131::/64', applianceIP: 'fd00:131::1' }\n";
        let s = Spec::with_ignition_check(&plan_v6(v6), &|_| false).unwrap();
        let x = network_xml(&s);
        let want = "\
  <dns enable='no'/>
  <ip address='192.168.131.1' netmask='255.255.255.0'/>
  <ip family='ipv6' address='fd00:131::1' prefix='64'/>
</network>
";
        assert!(x.ends_with(want), "{x}");
        assert!(!x.contains("<dhcp"), "{x}");
        // The install command line asks for both families.
        let m0 = s.node("master-0").unwrap();
        assert!(m0.cmdline.contains(" ip=dhcp,dhcp6"), "{}", m0.cmdline);
        // Without network.ipv6 nothing changes.
        let x4 = network_xml(&Spec::with_ignition_check(&plan(LV), &|_| false).unwrap());
        assert!(!x4.contains("ipv6"), "{x4}");
        assert!(!x4.contains("ip=dhcp"), "{x4}");
    }

    #[test]
    fn forwarder_mode_is_refused_with_ipv6() {
        let mut c = plan_v6("  ipv6: { cidr: 'fd00:131::/64', applianceIP: 'fd00:131::1' }\n")
            .cluster
            .clone();
        c.libvirt.as_mut().unwrap().mode = NetMode::Forwarder;
        c.network.appliance_ip = "192.168.131.2".parse().unwrap();
        let e = Spec::new(&Plan::new(c)).unwrap_err().to_string();
        assert!(e.contains("router advertisements"), "{e}");
    }

    /// [`plan`] with `network.ipv6` and every node dual-stack.
    fn plan_v6(net6: &str) -> Plan {
        let mut p = plan(LV);
        let v6 = crate::config::from_str(
            &format!(
                "name: x\nbaseDomain: y\nnetwork:\n  cidr: 10.0.0.0/24\n  gateway: 10.0.0.1\n  applianceIP: 10.0.0.1\n{net6}nodes:\n  - {{ name: n, role: master, mac: '52:54:00:00:00:01', ip: 10.0.0.2 }}\n"
            ),
            std::path::Path::new("/"),
            std::path::Path::new("t"),
        )
        .unwrap()
        .cluster
        .network
        .ipv6;
        p.cluster.network.ipv6 = v6;
        for (i, n) in p.cluster.nodes.iter_mut().enumerate() {
            n.ipv6 = Some(format!("fd00:131::{}", 10 + i).parse().unwrap());
        }
        Plan::new(p.cluster)
    }

    #[test]
    fn forwarder_mode_needs_a_separate_appliance_ip() {
        let yaml_plan = plan(LV);
        let mut c = yaml_plan.cluster.clone();
        c.libvirt.as_mut().unwrap().mode = NetMode::Forwarder;
        let e = Spec::new(&Plan::new(c)).unwrap_err().to_string();
        assert!(e.contains("applianceIP must be a different address"), "{e}");
    }

    #[test]
    fn install_and_final_domains() {
        let s = Spec::with_ignition_check(&plan(LV), &|n| n == "master-0").unwrap();
        let m = s.node("master-0").unwrap();
        assert_eq!(m.domain, "ocp4-master-0");
        let i = install_domain_xml(&s, m);
        for needle in [
            "<name>ocp4-master-0</name>",
            &format!("<uuid>{}</uuid>", m.uuid),
            "<kernel>/var/lib/libvirt/images/ocp4/ocp4-live-vmlinuz</kernel>",
            "<initrd>/var/lib/libvirt/images/ocp4/ocp4-live-initrd.img</initrd>",
            "coreos.inst.install_dev=/dev/vda",
            "coreos.inst.ignition_url=http://192.168.131.1:8080/ignition/master-0.ign",
            "coreos.live.rootfs_url=http://192.168.131.1:8080/images/ocp4-live-rootfs.img",
            "ignition.firstboot ignition.platform.id=metal",
            "console=tty0 console=ttyS0,115200n8",
            "<on_reboot>destroy</on_reboot>",
            "<mac address='52:54:00:a1:31:0a'/>",
            "<source network='ocp4'/>",
            "<log file='/var/lib/libvirt/images/ocp4/ocp4-master-0-serial.log' append='on'/>",
            "<memory unit='MiB'>16384</memory>",
            "machine='q35'",
            "bus='virtio'",
            // A screen for boots stuck before the serial console, on loopback.
            "<graphics type='vnc' port='-1' autoport='yes' listen='127.0.0.1'>",
            "<model type='vga'/>",
        ] {
            assert!(i.contains(needle), "install XML lacks {needle}:\n{i}");
        }
        assert!(!i.contains("<boot order"), "{i}");
        assert!(i.contains("host-passthrough"), "{i}");
        let mut tcg = s.clone();
        tcg.domain_type = "qemu".into();
        let t = install_domain_xml(&tcg, tcg.node("master-0").unwrap());
        assert!(
            t.contains("<domain type='qemu'>")
                && t.contains("<model fallback='allow'>Nehalem</model>"),
            "software emulation needs an x86-64-v2 CPU model: {t}"
        );
        let f = final_domain_xml(&s, m, Phase::Installing);
        assert!(f.contains(&format!("<uuid>{}</uuid>", m.uuid)));
        assert!(f.contains("<on_reboot>restart</on_reboot>"));
        assert!(f.contains("<boot order='1'/>"));
        assert!(!f.contains("<kernel>") && !f.contains("<cmdline>"), "{f}");
        assert_eq!(
            owner_phase(&f, "ocp4.example.com").as_deref(),
            Some("installing")
        );
        assert_eq!(owner_phase(&f, "other.example.com"), None);
        // Workers use the role file when there is no per-node one.
        let w = s.node("worker-0").unwrap();
        assert!(w.cmdline.contains("/ignition/worker.ign"), "{}", w.cmdline);
        let v = volume_xml(w);
        assert!(v.contains("<capacity unit='GiB'>100</capacity>"));
        assert!(v.contains("<name>ocp4-worker-0.qcow2</name>"));
    }

    #[test]
    fn uuids_are_stable_and_distinct() {
        let a = super::super::spec::stable_uuid("ocp4.example.com/master-0");
        assert_eq!(
            a,
            super::super::spec::stable_uuid("ocp4.example.com/master-0")
        );
        assert_ne!(
            a,
            super::super::spec::stable_uuid("ocp4.example.com/master-1")
        );
        assert_eq!(a.len(), 36);
        assert_eq!(&a[14..15], "8");
        assert!(matches!(&a[19..20], "8" | "9" | "a" | "b"));
    }

    #[test]
    fn values_are_escaped() {
        assert_eq!(esc("a<b>&'\""), "a&lt;b&gt;&amp;&apos;&quot;");
        let mut s = Spec::with_ignition_check(&plan(LV), &|_| false).unwrap();
        s.pool_path = "/tmp/x'<y>&".into();
        s.nodes[0].serial_log = "/tmp/it's".into();
        let x = pool_xml(&s) + &install_domain_xml(&s, &s.nodes[0]);
        assert!(x.contains("/tmp/x&apos;&lt;y&gt;&amp;"), "{x}");
        assert!(x.contains("/tmp/it&apos;s"), "{x}");
        assert!(!x.contains("x'<"));
    }
}
