//! `render host-dns`: how the hypervisor's own resolver reaches the
//! cluster's names (`oc` on the host must resolve `api.<cluster>`), as the
//! three recipes UPI labs use, filled in for this cluster: NetworkManager's
//! dnsmasq split DNS, systemd-resolved per-link DNS (`resolvectl`), and a
//! `<forwarder>` in libvirt's default network (for guests on that network).
//!
//! Pure: plan → text. Every recipe sends only the cluster zone and its
//! reverse zones to the appliance; everything else keeps the host's
//! resolver. The address is the first non-loopback DNS listener (the
//! appliance IP when DNS listens on a wildcard).

use std::fmt::Write as _;
use std::net::SocketAddr;

use crate::plan::Plan;

/// The DNS address the host should ask: a non-loopback listener, else the
/// first one; a wildcard listener means the appliance IP.
fn dns_target(plan: &Plan) -> Option<SocketAddr> {
    let c = &plan.cluster;
    let pick = c
        .dns
        .listen
        .iter()
        .find(|a| !a.ip().is_loopback())
        .or_else(|| c.dns.listen.first())?;
    let ip = if pick.ip().is_unspecified() {
        c.network.appliance_ip.into()
    } else {
        pick.ip()
    };
    Some(SocketAddr::new(ip, pick.port()))
}

/// The three recipes (or why there is nothing to point at).
pub fn render(plan: &Plan) -> String {
    let c = &plan.cluster;
    let Some(dns) = dns_target(plan) else {
        return "# dns is disabled in this cluster file: nothing on this host to point at\n".into();
    };
    let (ip, port) = (dns.ip(), dns.port());
    let zones: Vec<&str> = plan
        .zones
        .iter()
        .map(|z| z.origin.trim_end_matches('.'))
        .collect();
    let iface = c
        .network
        .interface
        .clone()
        .or_else(|| c.libvirt.as_ref().map(|l| l.bridge.clone()))
        .unwrap_or_else(|| "<bridge>".into());
    let name = &c.name;
    let mut o = String::new();
    let _ = writeln!(
        o,
        "# This host's resolver and the cluster {d}: send {d} and its reverse\n\
         # zones to the appliance at {dns}, everything else as before.\n\
         # Pick the recipe for the resolver this host runs.\n",
        d = c.domain
    );
    let hash_port = if port == 53 {
        String::new()
    } else {
        format!("#{port}")
    };
    let _ = writeln!(
        o,
        "## 1. NetworkManager with its dnsmasq plugin (Fedora/RHEL desktops, RHEL servers)\n\
         cat > /etc/NetworkManager/conf.d/crc-appliance-{name}.conf <<'EOF'\n[main]\ndns=dnsmasq\nEOF\n\
         cat > /etc/NetworkManager/dnsmasq.d/crc-appliance-{name}.conf <<'EOF'"
    );
    for z in &zones {
        let _ = writeln!(o, "server=/{z}/{ip}{hash_port}");
    }
    let _ = writeln!(o, "EOF\nsystemctl restart NetworkManager\n");
    let with_port = if port == 53 {
        ip.to_string()
    } else {
        dns.to_string()
    };
    let routed: Vec<String> = zones.iter().map(|z| format!("~{z}")).collect();
    let _ = writeln!(
        o,
        "## 2. systemd-resolved (Debian/Ubuntu, Fedora without dnsmasq), on the cluster bridge\n\
         resolvectl dns {iface} {with_port}\n\
         resolvectl domain {iface} {}\n\
         # resolvectl settings last until the link goes down; to keep them, set the same\n\
         # DNS= and Domains= in a systemd-networkd .network file for {iface}, or on its\n\
         # NetworkManager connection: nmcli connection modify <conn> ipv4.dns {ip} ipv4.dns-search \"{}\"\n",
        routed.join(" "),
        routed.join(",")
    );
    let _ = writeln!(
        o,
        "## 3. libvirt's default network forwards the cluster names (guests on 'default')\n\
         # virsh net-edit default, then inside <network>:"
    );
    let _ = writeln!(o, "{}", forwarder_xml(&zones, &ip.to_string()));
    if port != 53 {
        let _ = writeln!(
            o,
            "# note: libvirt's <forwarder> has no port; the appliance's DNS must listen on port 53\n\
             # for this recipe (it listens on {port})."
        );
    }
    let _ = writeln!(
        o,
        "# then: virsh net-destroy default && virsh net-start default"
    );
    o
}

/// The `<dns>` element with one forwarder per zone.
pub fn forwarder_xml(zones: &[&str], ip: &str) -> String {
    let mut x = String::from("<dns>\n");
    for z in zones {
        let _ = writeln!(x, "  <forwarder domain='{z}' addr='{ip}'/>");
    }
    x.push_str("</dns>");
    x
}
