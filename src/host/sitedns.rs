//! `render site-dns bind|unbound|dnsmasq|windows`: the stanza that makes
//! the site's own resolver send the cluster zone and its reverse zones
//! (IPv4 and, dual-stack, IPv6) to the appliance, for laptops and bastions
//! that resolve through the site's DNS rather than the appliance's.
//!
//! Pure: plan → text. Every stanza names exactly the zones the appliance
//! serves ([`crate::plan::Plan::zones`]) and the appliance's DNS addresses
//! (its non-loopback listeners, a wildcard meaning the appliance IP of
//! that family; loopback ones only when there is nothing else), with the
//! port when it is not 53. Each also turns off what would stop the
//! resolver from using the answers: DNSSEC validation of these unsigned
//! zones (BIND `validate-except`, Unbound `domain-insecure`), Unbound's
//! default local zones of private reverse ranges (`local-zone …
//! transparent`; named skips its empty zones above a forward zone), and
//! DNS-rebinding filters of private answers (dnsmasq `rebind-domain-ok`).

use std::fmt::Write as _;
use std::net::{IpAddr, SocketAddr};

use crate::plan::Plan;

/// The site resolvers `render site-dns` writes for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SiteResolver {
    /// ISC BIND 9 (`named.conf`).
    Bind,
    /// Unbound (`unbound.conf`).
    Unbound,
    /// dnsmasq (`dnsmasq.conf` or a file in `/etc/dnsmasq.d`).
    Dnsmasq,
    /// Windows Server DNS (PowerShell).
    Windows,
}

/// The appliance's DNS addresses for the site's resolver.
pub fn targets(plan: &Plan) -> Vec<SocketAddr> {
    let c = &plan.cluster;
    let resolve = |a: &SocketAddr| -> Option<SocketAddr> {
        let ip = match a.ip() {
            IpAddr::V4(v) if v.is_unspecified() => IpAddr::V4(c.network.appliance_ip),
            IpAddr::V6(v) if v.is_unspecified() => IpAddr::V6(c.ipv6()?.appliance_ip),
            ip => ip,
        };
        Some(SocketAddr::new(ip, a.port()))
    };
    let all: Vec<SocketAddr> = c.dns.listen.iter().filter_map(resolve).collect();
    let mut out: Vec<SocketAddr> = all
        .iter()
        .copied()
        .filter(|a| !a.ip().is_loopback())
        .collect();
    if out.is_empty() {
        out = all;
    }
    out.dedup();
    out
}

/// The zones to send to the appliance, without the trailing dot.
fn zones(plan: &Plan) -> Vec<&str> {
    plan.zones
        .iter()
        .map(|z| z.origin.trim_end_matches('.'))
        .collect()
}

/// Is `zone` a reverse zone (an empty zone or default local zone in the
/// resolver shadows it)?
fn is_reverse(zone: &str) -> bool {
    zone.ends_with(".in-addr.arpa") || zone.ends_with(".ip6.arpa")
}

/// The stanza for `resolver`.
pub fn render(plan: &Plan, resolver: SiteResolver) -> String {
    let ts = targets(plan);
    if !plan.cluster.dns.enabled || ts.is_empty() {
        return "# dns is disabled in this cluster file: nothing to forward to\n".into();
    }
    let zs = zones(plan);
    match resolver {
        SiteResolver::Bind => bind(plan, &zs, &ts),
        SiteResolver::Unbound => unbound(plan, &zs, &ts),
        SiteResolver::Dnsmasq => dnsmasq(plan, &zs, &ts),
        SiteResolver::Windows => windows(plan, &zs, &ts),
    }
}

fn bind(plan: &Plan, zs: &[&str], ts: &[SocketAddr]) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "// crc-appliance: send {} and its reverse zones to the appliance.\n\
         // 1. Inside the options {{ }} block of named.conf, this statement (the\n\
         // zones are not signed: a validating named would answer SERVFAIL):\n\
         //    validate-except {{ {}}};",
        plan.cluster.domain,
        zs.iter().map(|z| format!("\"{z}\"; ")).collect::<String>()
    );
    let fwd: String = ts
        .iter()
        .map(|a| match a.port() {
            53 => format!("{}; ", a.ip()),
            p => format!("{} port {p}; ", a.ip()),
        })
        .collect();
    let _ = writeln!(o, "// 2. At the top level of named.conf, these zones:");
    for z in zs {
        let _ = writeln!(
            o,
            "zone \"{z}\" {{\n    type forward;\n    forward only;\n    forwarders {{ {fwd}}};\n}};"
        );
    }
    let _ = writeln!(o, "// then: rndc reconfig (or systemctl reload named)");
    o
}

/// The built-in empty zone (RFC 6303, and RFC 6598's shared range as
/// Unbound has it) a reverse zone falls under: `10.in-addr.arpa`,
/// `168.192.in-addr.arpa`, `16.172.in-addr.arpa`…, `127.in-addr.arpa`,
/// `d.f.ip6.arpa`…; `None` for a public range.
pub fn empty_zone_of(zone: &str) -> Option<String> {
    if let Some(pos) = zone.find(".in-addr.arpa") {
        let mut o: Vec<&str> = zone[..pos].split('.').collect();
        o.reverse(); // most significant octet first
        let n = |i: usize| o.get(i).and_then(|s| s.parse::<u8>().ok());
        let keep = match (n(0), n(1), n(2)) {
            (Some(0 | 10 | 127), _, _) => 1,
            (Some(192), Some(168), _) | (Some(169), Some(254), _) => 2,
            (Some(172), Some(16..=31), _) | (Some(100), Some(64..=127), _) => 2,
            (Some(192), Some(0), Some(2)) => 3,
            (Some(198), Some(51), Some(100)) | (Some(203), Some(0), Some(113)) => 3,
            _ => return None,
        };
        if o.len() < keep {
            return None;
        }
        let mut head: Vec<&str> = o[..keep].to_vec();
        head.reverse();
        return Some(format!("{}.in-addr.arpa", head.join(".")));
    }
    let nibbles = zone.strip_suffix(".ip6.arpa")?;
    let mut v: Vec<&str> = nibbles.split('.').collect();
    v.reverse();
    let top: String = v.iter().take(3).copied().collect();
    let keep = if top.starts_with("fd") {
        2
    } else if ["fe8", "fe9", "fea", "feb"].contains(&top.as_str()) {
        3
    } else {
        return None;
    };
    let mut head: Vec<&str> = v.get(..keep)?.to_vec();
    head.reverse();
    Some(format!("{}.ip6.arpa", head.join(".")))
}

fn unbound(plan: &Plan, zs: &[&str], ts: &[SocketAddr]) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "# crc-appliance: send {} and its reverse zones to the appliance.\n\
         # In unbound.conf (or a file in /etc/unbound/unbound.conf.d/).\n\
         server:",
        plan.cluster.domain
    );
    for z in zs {
        // Unsigned zones: without this a validating unbound answers SERVFAIL.
        let _ = writeln!(o, "    domain-insecure: \"{z}.\"");
    }
    for z in zs.iter().filter(|z| empty_zone_of(z).is_some()) {
        // Private reverse ranges are default local zones (no data):
        // this zone goes through the stub below instead.
        let _ = writeln!(o, "    local-zone: \"{z}.\" transparent");
    }
    let addr = |a: &SocketAddr| match a.port() {
        53 => a.ip().to_string(),
        p => format!("{}@{p}", a.ip()),
    };
    for z in zs {
        let kind = if is_reverse(z) { "stub" } else { "forward" };
        let _ = writeln!(o, "\n{kind}-zone:\n    name: \"{z}.\"");
        for a in ts {
            let _ = writeln!(o, "    {kind}-addr: {}", addr(a));
        }
    }
    let _ = writeln!(
        o,
        "# then: unbound-control reload (or systemctl restart unbound)"
    );
    o
}

fn dnsmasq(plan: &Plan, zs: &[&str], ts: &[SocketAddr]) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "# crc-appliance: send {} and its reverse zones to the appliance.\n\
         # In dnsmasq.conf or a file in /etc/dnsmasq.d/ (a server= line for a\n\
         # private reverse zone also lifts bogus-priv for it).",
        plan.cluster.domain
    );
    for z in zs {
        for a in ts {
            let port = match a.port() {
                53 => String::new(),
                p => format!("#{p}"),
            };
            let _ = writeln!(o, "server=/{z}/{}{port}", a.ip());
        }
    }
    for z in zs.iter().filter(|z| !is_reverse(z)) {
        // Private addresses in the answers: allowed under stop-dns-rebind.
        let _ = writeln!(o, "rebind-domain-ok=/{z}/");
    }
    let _ = writeln!(o, "# then: systemctl restart dnsmasq");
    o
}

fn windows(plan: &Plan, zs: &[&str], ts: &[SocketAddr]) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "# crc-appliance: send {} and its reverse zones to the appliance.\n\
         # PowerShell on the Windows DNS server (DnsServer module), as an administrator.",
        plan.cluster.domain
    );
    let masters: Vec<String> = ts.iter().map(|a| format!("\"{}\"", a.ip())).collect();
    for z in zs {
        let _ = writeln!(
            o,
            "Add-DnsServerConditionalForwarderZone -Name \"{z}\" -MasterServers {} -PassThru",
            masters.join(",")
        );
    }
    if let Some(a) = ts.iter().find(|a| a.port() != 53) {
        let _ = writeln!(
            o,
            "# note: Windows DNS forwards to port 53 only; the appliance's DNS listens on {a}:\n\
             # add a listener on port 53 (dns.listen) for this to work."
        );
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_zones_are_the_rfc6303_ones() {
        let e = |z: &str| empty_zone_of(z);
        assert_eq!(e("0.0.10.in-addr.arpa").unwrap(), "10.in-addr.arpa");
        assert_eq!(e("5.168.192.in-addr.arpa").unwrap(), "168.192.in-addr.arpa");
        assert_eq!(e("1.20.172.in-addr.arpa").unwrap(), "20.172.in-addr.arpa");
        assert_eq!(e("1.33.172.in-addr.arpa"), None);
        assert_eq!(e("2.0.203.in-addr.arpa"), None);
        assert_eq!(e("0.0.0.0.0.0.0.0.0.0.0.0.0.0.c.f.ip6.arpa"), None);
        assert_eq!(
            e("0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa").unwrap(),
            "d.f.ip6.arpa"
        );
        assert_eq!(e("c.example.com"), None);
        assert_eq!(e("20.0.127.in-addr.arpa").unwrap(), "127.in-addr.arpa");
        assert_eq!(e("5.0.192.in-addr.arpa"), None);
        assert_eq!(
            e("113.0.203.in-addr.arpa").unwrap(),
            "113.0.203.in-addr.arpa"
        );
        assert_eq!(e("0.8.e.f.ip6.arpa").unwrap(), "8.e.f.ip6.arpa");
        assert_eq!(e("8.b.d.0.1.0.0.2.ip6.arpa"), None);
    }
}
