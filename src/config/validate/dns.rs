//! `dns`: listeners, TTLs, forwarding, and the user records (syntax and
//! zone membership here; conflicts with generated records are checked on
//! the built zones, `config::plan_of`).

use std::net::{IpAddr, SocketAddr};

use super::{Errs, NetParts, sock};
use crate::config::raw;
use crate::model::cluster::DnsCfg;
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
            Err(m) => e.push(format!("dns.records[{i}]"), m),
        }
    }
    Some(DnsCfg {
        enabled: d.enabled,
        listen,
        ttl,
        negative_ttl,
        forward_timeout: d.forward_timeout.get(),
        records,
    })
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

/// Turn one extra record into a [`Record`] inside the cluster or a reverse zone.
fn extra_record(
    r: &raw::ExtraRecord,
    domain: &str,
    reverse: &[String],
    default_ttl: u32,
) -> Result<Record, String> {
    let name = absolute(&r.name.to_ascii_lowercase(), domain);
    let owner = name.trim_end_matches('.');
    let labels_ok = owner.split('.').enumerate().all(|(i, l)| {
        is_label(l) || (l == "*" && i == 0) || (l.starts_with('_') && is_label(&l[1..]))
    });
    if !labels_ok {
        return Err(format!("name {:?} is not a valid domain name", r.name));
    }
    let in_zone = |z: &str| owner == z || owner.ends_with(&format!(".{z}"));
    if !in_zone(domain) && !reverse.iter().any(|z| in_zone(z.trim_end_matches('.'))) {
        return Err(format!(
            "name {name} is outside the zones served ({domain} and its reverse zones)"
        ));
    }
    let ttl = match r.ttl {
        Some(t) => u32::try_from(t.as_secs()).map_err(|_| "ttl is too large".to_string())?,
        None => default_ttl,
    };
    let v = r.value.trim();
    let target = |v: &str| -> Result<String, String> {
        let t = absolute(&v.to_ascii_lowercase(), domain);
        if t == "."
            || t.trim_end_matches('.')
                .split('.')
                .all(|l| is_label(l) || l.starts_with('_'))
        {
            Ok(t)
        } else {
            Err(format!("{v:?} is not a valid domain name"))
        }
    };
    let data = match r.rtype.to_ascii_uppercase().as_str() {
        "A" => RData::A(
            v.parse()
                .map_err(|_| format!("A value {v:?} is not an IPv4 address"))?,
        ),
        "AAAA" => RData::Aaaa(
            v.parse()
                .map_err(|_| format!("AAAA value {v:?} is not an IPv6 address"))?,
        ),
        "CNAME" => {
            if !owner.starts_with('*') && in_zone(domain) && owner == domain {
                return Err("a CNAME cannot be at the zone apex".into());
            }
            RData::Cname(target(v)?)
        }
        "PTR" => RData::Ptr(target(v)?),
        "TXT" => {
            if v.len() > 255 {
                return Err("TXT value longer than 255 characters".into());
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
                _ => {
                    return Err(format!(
                        "SRV value {v:?} must be \"priority weight port target\""
                    ));
                }
            }
        }
        other => {
            return Err(format!(
                "type {other:?} is not supported (A, AAAA, CNAME, PTR, SRV, TXT)"
            ));
        }
    };
    Ok(Record { name, ttl, data })
}
