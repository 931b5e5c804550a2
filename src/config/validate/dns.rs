//! `dns`: listeners, TTLs, forwarding, and the user records (syntax and
//! zone membership here; conflicts with generated records are checked on
//! the built zones, `config::plan_of`).

use std::net::{IpAddr, SocketAddr};

use super::{Errs, NetParts, sock};
use crate::config::raw;
use crate::model::cluster::{DnsCfg, IpCidr, Ipv4Net, SoaTimers};
use crate::model::ipv6::Ipv6Net;
use crate::model::names::{RData, Record, absolute, is_label, reverse_zones};

pub(crate) fn build(d: &raw::Dns, net: &NetParts, domain: &str, e: &mut Errs) -> Option<DnsCfg> {
    let listen: Vec<SocketAddr> = match &d.listen {
        Some(l) => {
            if l.is_empty() && d.enabled {
                e.push(
                    "dns.listen",
                    "needs at least one address when DNS is enabled",
                );
            }
            l.iter()
                .enumerate()
                .filter_map(|(i, s)| sock(e, &format!("dns.listen[{i}]"), s, Some(53)))
                .collect()
        }
        // Both families of the appliance on a dual-stack network.
        None => net
            .appliance_ip
            .map(IpAddr::from)
            .into_iter()
            .chain(
                net.v6
                    .as_ref()
                    .and_then(|v6| v6.appliance_ip)
                    .map(IpAddr::from),
            )
            .map(|ip| SocketAddr::new(ip, 53))
            .collect(),
    };
    let ttl = secs_u32(e, "dns.ttl", d.ttl);
    let negative_ttl = secs_u32(e, "dns.negativeTtl", d.negative_ttl);
    if d.forward_timeout.get().is_zero() {
        e.push("dns.forwardTimeout", "must be greater than zero");
    }
    for (i, u) in net.upstream_dns.iter().enumerate() {
        if listen
            .iter()
            .any(|l| l.port() == u.port() && (l.ip() == u.ip() || l.ip().is_unspecified()))
        {
            e.push(
                format!("network.upstreamDNS[{i}]"),
                format!("{u} is this appliance's own DNS listener (forwarding loop)"),
            );
        }
    }
    let mut reverse = net.cidr.map(reverse_zones).unwrap_or_default();
    if let Some(c) = net.v6.as_ref().and_then(|v6| v6.cidr) {
        reverse.push(c.reverse_zone());
    }
    let mut records = Vec::new();
    for (i, r) in d.records.iter().enumerate() {
        match extra_record(r, domain, &reverse, ttl) {
            Ok(rec) => records.push(rec),
            Err(err) => e.push(format!("dns.records[{i}]"), err.to_string()),
        }
    }
    let transfer = transfer_acl(&d.transfer, e);
    let notify = notify_targets(&d.notify, &transfer, e);
    let soa = soa_timers(d.soa.as_ref(), !transfer.is_empty(), negative_ttl, e);
    Some(DnsCfg {
        enabled: d.enabled,
        listen,
        ttl,
        negative_ttl: soa.minimum,
        forward_timeout: d.forward_timeout.get(),
        records,
        transfer,
        notify,
        soa,
    })
}

/// `dns.transfer`: IPv4 or IPv6 CIDRs, or single addresses; never `/0`.
fn transfer_acl(list: &[String], e: &mut Errs) -> Vec<IpCidr> {
    let mut out = Vec::new();
    for (i, text) in list.iter().enumerate() {
        let path = format!("dns.transfer[{i}]");
        let t = text.trim();
        let net = match t.parse::<IpAddr>() {
            Ok(IpAddr::V4(a)) => Ipv4Net::new(a, 32).map(IpCidr::V4),
            Ok(IpAddr::V6(a)) => Ipv6Net::new(a, 128).map(IpCidr::V6),
            Err(_) if t.contains(':') => e.parse::<Ipv6Net>(&path, t, "IPv6 CIDR").map(IpCidr::V6),
            Err(_) => e
                .parse::<Ipv4Net>(&path, t, "CIDR (a.b.c.d/prefix or an IPv6 prefix)")
                .map(IpCidr::V4),
        };
        let Some(net) = net else { continue };
        let prefix = match net {
            IpCidr::V4(n) => n.prefix(),
            IpCidr::V6(n) => n.prefix(),
        };
        if prefix == 0 {
            e.push(
                path,
                format!("{text:?} would let every address copy the zones; list the secondaries' addresses or networks"),
            );
            continue;
        }
        out.push(net);
    }
    out
}

/// `dns.notify`: `ip` (port 53) or `ip:port`, each inside `dns.transfer`
/// (a secondary told of a change must be allowed to copy it).
fn notify_targets(list: &[String], transfer: &[IpCidr], e: &mut Errs) -> Vec<SocketAddr> {
    let mut out = Vec::new();
    for (i, text) in list.iter().enumerate() {
        let path = format!("dns.notify[{i}]");
        let Some(to) = sock(e, &path, text, Some(53)) else {
            continue;
        };
        if to.ip().is_unspecified() || to.ip().is_multicast() || to.port() == 0 {
            e.push(
                path,
                format!("{text:?} is not a secondary's unicast address"),
            );
            continue;
        }
        if !transfer.iter().any(|n| n.contains(to.ip())) {
            e.push(
                path,
                format!("{} is not allowed to copy the zones: add it to dns.transfer (or remove it here)", to.ip()),
            );
            continue;
        }
        out.push(to);
    }
    out
}

/// RFC 1912 2.2: refresh 20 min to 2 h (1 h here: NOTIFY does the rest),
/// retry a fraction of refresh, expire 2 to 4 weeks.
pub(crate) const SOA_TRANSFER: SoaTimers = SoaTimers {
    refresh: 3600,
    retry: 600,
    expire: 14 * 86_400,
    minimum: 0,
};
/// Without secondaries the timers only describe the zone: a day's expire.
pub(crate) const SOA_LAB: SoaTimers = SoaTimers {
    refresh: 3600,
    retry: 600,
    expire: 86_400,
    minimum: 0,
};

/// `dns.soa`: the timers given, else the defaults ([`SOA_TRANSFER`] with
/// secondaries, [`SOA_LAB`] without); `minimum` defaults to `negativeTtl`.
/// Retry below refresh, expire above refresh + retry and minimum (RFC 1912:
/// a secondary must not drop the zone before it could have retried).
fn soa_timers(
    soa: Option<&raw::Soa>,
    transfer: bool,
    negative_ttl: u32,
    e: &mut Errs,
) -> SoaTimers {
    let base = if transfer { SOA_TRANSFER } else { SOA_LAB };
    let soa = soa.cloned().unwrap_or_default();
    let secs = |e: &mut Errs, field: &str, v: Option<crate::config::Dur>, default: u32| match v {
        None => default,
        Some(d) => match u32::try_from(d.get().as_secs()) {
            Ok(s) if (1..=i32::MAX as u32).contains(&s) => s,
            _ => {
                e.push(
                    format!("dns.soa.{field}"),
                    "must be between 1s and 68 years (2^31-1 seconds)",
                );
                default
            }
        },
    };
    let t = SoaTimers {
        refresh: secs(e, "refresh", soa.refresh, base.refresh),
        retry: secs(e, "retry", soa.retry, base.retry),
        expire: secs(e, "expire", soa.expire, base.expire),
        minimum: match soa.minimum {
            Some(m) => secs_u32(e, "dns.soa.minimum", m),
            None => negative_ttl,
        },
    };
    if t.retry >= t.refresh {
        e.push(
            "dns.soa.retry",
            format!(
                "{}s must be shorter than dns.soa.refresh ({}s)",
                t.retry, t.refresh
            ),
        );
    }
    if u64::from(t.expire) <= u64::from(t.refresh) + u64::from(t.retry) || t.expire <= t.minimum {
        e.push(
            "dns.soa.expire",
            format!(
                "{}s must be longer than refresh + retry ({}s) and minimum ({}s): secondaries would drop the zone before retrying",
                t.expire,
                u64::from(t.refresh) + u64::from(t.retry),
                t.minimum
            ),
        );
    }
    t
}

fn secs_u32(e: &mut Errs, path: &str, d: crate::config::Dur) -> u32 {
    match u32::try_from(d.get().as_secs()) {
        Ok(v) if v <= 7 * 86_400 => v,
        _ => {
            e.push(path, "must be at most 7d");
            0
        }
    }
}

/// Why a `dns.records[i]` entry is refused (the text after its path).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum RecordError {
    /// The owner name (as written) has a label that is not one.
    #[error("name {0:?} is not a valid domain name")]
    BadName(String),
    /// The owner (absolute) is in neither the cluster's zone nor a
    /// reverse zone served.
    #[error("name {name} is outside the zones served ({domain} and its reverse zones)")]
    OutsideZones { name: String, domain: String },
    /// `ttl` over 2^32-1 seconds.
    #[error("ttl is too large")]
    TtlTooLarge,
    /// A CNAME, PTR or SRV target that is not a domain name.
    #[error("{0:?} is not a valid domain name")]
    BadTarget(String),
    #[error("A value {0:?} is not an IPv4 address")]
    NotIpv4(String),
    #[error("AAAA value {0:?} is not an IPv6 address")]
    NotIpv6(String),
    #[error("a CNAME cannot be at the zone apex")]
    CnameAtApex,
    #[error("TXT value longer than 255 characters")]
    TxtTooLong,
    #[error("SRV value {0:?} must be \"priority weight port target\"")]
    BadSrv(String),
    #[error("type {0:?} is not supported (A, AAAA, CNAME, PTR, SRV, TXT)")]
    UnsupportedType(String),
}

/// Turn one extra record into a [`Record`] inside the cluster or a reverse zone.
fn extra_record(
    r: &raw::ExtraRecord,
    domain: &str,
    reverse: &[String],
    default_ttl: u32,
) -> Result<Record, RecordError> {
    let name = absolute(&r.name.to_ascii_lowercase(), domain);
    let owner = name.trim_end_matches('.');
    let labels_ok = owner.split('.').enumerate().all(|(i, l)| {
        is_label(l) || (l == "*" && i == 0) || (l.starts_with('_') && is_label(&l[1..]))
    });
    if !labels_ok {
        return Err(RecordError::BadName(r.name.clone()));
    }
    let in_zone = |z: &str| owner == z || owner.ends_with(&format!(".{z}"));
    if !in_zone(domain) && !reverse.iter().any(|z| in_zone(z.trim_end_matches('.'))) {
        return Err(RecordError::OutsideZones {
            name,
            domain: domain.into(),
        });
    }
    let ttl = match r.ttl {
        Some(t) => u32::try_from(t.as_secs()).map_err(|_| RecordError::TtlTooLarge)?,
        None => default_ttl,
    };
    let v = r.value.trim();
    let target = |v: &str| -> Result<String, RecordError> {
        let t = absolute(&v.to_ascii_lowercase(), domain);
        if t == "."
            || t.trim_end_matches('.')
                .split('.')
                .all(|l| is_label(l) || l.starts_with('_'))
        {
            Ok(t)
        } else {
            Err(RecordError::BadTarget(v.into()))
        }
    };
    let data = match r.rtype.to_ascii_uppercase().as_str() {
        "A" => RData::A(v.parse().map_err(|_| RecordError::NotIpv4(v.into()))?),
        "AAAA" => RData::Aaaa(v.parse().map_err(|_| RecordError::NotIpv6(v.into()))?),
        "CNAME" => {
            if !owner.starts_with('*') && in_zone(domain) && owner == domain {
                return Err(RecordError::CnameAtApex);
            }
            RData::Cname(target(v)?)
        }
        "PTR" => RData::Ptr(target(v)?),
        "TXT" => {
            if v.len() > 255 {
                return Err(RecordError::TxtTooLong);
            }
            RData::Txt(v.to_string())
        }
        "SRV" => {
            let f: Vec<&str> = v.split_whitespace().collect();
            let num = |s: &str| s.parse::<u16>().ok();
            match f.as_slice() {
                [p, w, port, t] if num(p).is_some() && num(w).is_some() && num(port).is_some() => {
                    RData::Srv {
                        priority: num(p).unwrap_or_default(),
                        weight: num(w).unwrap_or_default(),
                        port: num(port).unwrap_or_default(),
                        target: target(t)?,
                    }
                }
                _ => return Err(RecordError::BadSrv(v.into())),
            }
        }
        other => return Err(RecordError::UnsupportedType(other.into())),
    };
    Ok(Record { name, ttl, data })
}

#[cfg(test)]
mod tests {
    use super::RecordError;
    use crate::config::ConfigError;
    use crate::plan::{Plan, RData};

    fn load(dns: &str) -> Result<Plan, ConfigError> {
        load_with("", dns)
    }

    fn load_with(net: &str, dns: &str) -> Result<Plan, ConfigError> {
        let text = format!(
            "name: c\nbaseDomain: example.com\nnetwork: {{ cidr: 10.0.0.0/24, gateway: 10.0.0.1, applianceIP: 10.0.0.2, ingressVIP: 10.0.0.7{net} }}\nnodes:\n  - {{ name: m0, role: master, mac: '52:54:00:00:00:01', ip: 10.0.0.10 }}\ndns:\n{dns}"
        );
        crate::config::from_str(&text, std::path::Path::new("/"), std::path::Path::new("t"))
    }

    fn timers(p: &Plan) -> (u32, u32, u32, u32) {
        match &p.zones[0].records[0].data {
            RData::Soa {
                refresh,
                retry,
                expire,
                minimum,
                ..
            } => (*refresh, *retry, *expire, *minimum),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn soa_follows_rfc1912_with_transfer_and_dns_soa_overrides() {
        let lab = load("  negativeTtl: 45s\n").unwrap();
        assert_eq!(timers(&lab), (3600, 600, 86_400, 45));
        let t = load("  transfer: [10.0.0.0/24]\n").unwrap();
        assert_eq!(timers(&t), (3600, 600, 1_209_600, 30));
        let own = load(
            "  transfer: [10.0.0.5]\n  soa: { refresh: 2h, retry: 20m, expire: 21d, minimum: 1h }\n",
        )
        .unwrap();
        assert_eq!(timers(&own), (7200, 1200, 21 * 86_400, 3600));
        assert_eq!(own.cluster.dns.negative_ttl, 3600);
    }

    #[test]
    fn transfer_notify_and_soa_mistakes_are_each_named() {
        let e = load(
            "  transfer: [0.0.0.0/0, 10.0.0.1/8, nonsense, 'fd00::/64']\n  notify: [10.9.9.9, '0.0.0.0', 'x:y']\n  soa: { refresh: 10m, retry: 10m, expire: 15m, bogus: 1 }\n",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("bogus"), "{e}");
        let e = load(
            "  transfer: [0.0.0.0/0, 10.0.0.1/8, nonsense, 'fd00::/64']\n  notify: [10.9.9.9, '0.0.0.0', 'x:y']\n  soa: { refresh: 10m, retry: 10m, expire: 15m }\n",
        )
        .unwrap_err()
        .to_string();
        for want in [
            "dns.transfer[0]",
            "dns.transfer[1]",
            "dns.transfer[2]",
            "dns.notify[0]: 10.9.9.9 is not allowed to copy the zones",
            "dns.notify[1]",
            "dns.notify[2]",
            "dns.soa.retry",
            "dns.soa.expire",
        ] {
            assert!(e.contains(want), "missing {want:?} in:\n{e}");
        }
        assert!(!e.contains("dns.transfer[3]"), "{e}");
        let ok = load(
            "  transfer: ['10.0.0.0/24', 'fd00::/64']\n  notify: ['10.0.0.9', '10.0.0.8:5353']\n",
        )
        .unwrap();
        assert_eq!(ok.cluster.dns.transfer.len(), 2);
        assert_eq!(ok.cluster.dns.notify[0].port(), 53);
        assert_eq!(ok.cluster.dns.notify[1].port(), 5353);
    }

    /// Every `dns.records[i]` mistake, with the text after its path.
    #[test]
    fn each_record_mistake_says_what_is_wrong() {
        let record = |name: &str, rtype: &str, value: &str, ttl: Option<u64>| {
            let r = crate::config::raw::ExtraRecord {
                name: name.into(),
                rtype: rtype.into(),
                value: value.into(),
                ttl: ttl.map(crate::config::Dur::secs),
            };
            let reverse = ["0.0.10.in-addr.arpa.".to_string()];
            super::extra_record(&r, "c.example.com", &reverse, 30).unwrap_err()
        };
        let long = "x".repeat(256);
        let cases = [
            (
                record("a..b", "A", "10.0.0.5", None),
                RecordError::BadName("a..b".into()),
                "name \"a..b\" is not a valid domain name",
            ),
            (
                record("www.example.org.", "A", "10.0.0.5", None),
                RecordError::OutsideZones {
                    name: "www.example.org.".into(),
                    domain: "c.example.com".into(),
                },
                "name www.example.org. is outside the zones served (c.example.com and its reverse zones)",
            ),
            (
                record("x", "A", "10.0.0.5", Some(1 << 32)),
                RecordError::TtlTooLarge,
                "ttl is too large",
            ),
            (
                record("x", "CNAME", "a..b", None),
                RecordError::BadTarget("a..b".into()),
                "\"a..b\" is not a valid domain name",
            ),
            (
                record("x", "A", "fd00::1", None),
                RecordError::NotIpv4("fd00::1".into()),
                "A value \"fd00::1\" is not an IPv4 address",
            ),
            (
                record("x", "aaaa", "10.0.0.5", None),
                RecordError::NotIpv6("10.0.0.5".into()),
                "AAAA value \"10.0.0.5\" is not an IPv6 address",
            ),
            (
                record("c.example.com.", "CNAME", "y", None),
                RecordError::CnameAtApex,
                "a CNAME cannot be at the zone apex",
            ),
            (
                record("x", "TXT", &long, None),
                RecordError::TxtTooLong,
                "TXT value longer than 255 characters",
            ),
            (
                record("_s._tcp", "SRV", "0 10 host.", None),
                RecordError::BadSrv("0 10 host.".into()),
                "SRV value \"0 10 host.\" must be \"priority weight port target\"",
            ),
            (
                record("x", "MX", "10 mail.", None),
                RecordError::UnsupportedType("MX".into()),
                "type \"MX\" is not supported (A, AAAA, CNAME, PTR, SRV, TXT)",
            ),
        ];
        for (got, want, text) in cases {
            assert_eq!(got, want);
            assert_eq!(got.to_string(), text);
        }
    }

    #[test]
    fn the_name_servers_own_address_has_its_ptr() {
        let ptrs = |p: &Plan| -> Vec<String> {
            p.zones[1]
                .records
                .iter()
                .filter(|r| r.name == "2.0.0.10.in-addr.arpa.")
                .map(|r| r.data.to_string())
                .collect()
        };
        // api elsewhere: the appliance's address names the name server.
        let p = load_with(", apiVIP: 10.0.0.3", "  ttl: 30s\n").unwrap();
        assert_eq!(ptrs(&p), ["ns1.c.example.com."], "{}", p.zones[1].to_bind());
        // api on the appliance: its PTRs stand (no third name).
        let p = load("  ttl: 30s\n").unwrap();
        assert_eq!(ptrs(&p), ["api.c.example.com.", "api-int.c.example.com."]);
        // A user's PTR for the address stands too (and is no conflict).
        let p = load_with(
            ", apiVIP: 10.0.0.3",
            "  records:\n    - { name: 2.0.0.10.in-addr.arpa., type: PTR, value: gw.example.org. }\n",
        )
        .unwrap();
        assert_eq!(ptrs(&p), ["gw.example.org."]);
    }
}
