//! Completing authoritative answers where hickory 0.26 falls short of Knot,
//! and the zone facts the request path needs for that and for routing.
//!
//! [`complete`] runs on every authoritative answer before it is truncated
//! and cached (so once per distinct query). RFCs: 2308 2.2 (NODATA after a
//! CNAME carries the SOA), 6604 (the RCODE of a CNAME chain is that of its
//! last name), 2782 (SRV target addresses in the additional section), 6891
//! (the OPT advertises the responder's own UDP limit).
//!
//! Invariant: it only adds records or changes the OPT size and RCODE; an
//! answer it cannot decode is returned unchanged.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;

use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::{LowerName, Name, RData, Record, RecordType};

use super::encode;
use super::records::{HickoryZone, NameClass};

/// The zone of `name` among `zones`.
pub fn zone_of<'a>(zones: &'a [ZoneData], name: &LowerName) -> Option<&'a ZoneData> {
    zones.iter().find(|z| z.origin.zone_of(name))
}

/// Complete an authoritative answer where hickory falls short of Knot:
/// - the OPT advertises our own UDP limit ([`encode::UDP_MAX`]);
/// - RFC 2308 2.2: when an in-zone CNAME chain ends at a name without
///   the type, the zone's SOA goes in the authority section (NXDOMAIN
///   when that name does not exist, RFC 6604);
/// - RFC 2782: the additional section holds the addresses of every SRV
///   target in the zones (hickory adds only the first).
pub fn complete(zones: &[ZoneData], b: Vec<u8>) -> Vec<u8> {
    let Ok(mut m) = Message::from_vec(&b) else {
        return b;
    };
    let mut changed = false;
    if let Some(e) = m.edns.as_mut()
        && e.max_payload() != encode::UDP_MAX
    {
        e.set_max_payload(encode::UDP_MAX);
        changed = true;
    }
    changed |= cname_negative(zones, &mut m);
    changed |= srv_additionals(zones, &mut m);
    if !changed {
        return b;
    }
    m.to_vec().unwrap_or(b)
}

fn cname_negative(zones: &[ZoneData], m: &mut Message) -> bool {
    let Some(qtype) = m.queries.first().map(|q| q.query_type()) else {
        return false;
    };
    let Some(RData::CNAME(target)) = m.answers.last().map(|r| &r.data) else {
        return false;
    };
    if m.metadata.response_code != ResponseCode::NoError
        || matches!(qtype, RecordType::CNAME | RecordType::ANY)
        || m.answers.iter().any(|r| r.record_type() == qtype)
        || m.authorities
            .iter()
            .any(|r| r.record_type() == RecordType::SOA)
    {
        return false;
    }
    let target = LowerName::new(&target.0);
    let Some(z) = zone_of(zones, &target) else {
        return false;
    };
    let Some(soa) = z.negative_soa.clone() else {
        return false;
    };
    if z.classify(&target) == NameClass::NxDomain {
        m.metadata.response_code = ResponseCode::NXDomain;
    }
    m.authorities.push(soa);
    true
}

fn srv_additionals(zones: &[ZoneData], m: &mut Message) -> bool {
    let mut want: Vec<Record> = Vec::new();
    for r in &m.answers {
        if let RData::SRV(srv) = &r.data {
            let t = LowerName::new(&srv.target);
            if let Some(z) = zone_of(zones, &t) {
                want.extend(z.addresses(&t).cloned());
            }
        }
    }
    want.retain(|r| !m.additionals.contains(r));
    if want.is_empty() {
        return false;
    }
    m.additionals.extend(want);
    true
}

/// What the answer fix-ups need of one zone.
pub struct ZoneData {
    origin: LowerName,
    zone: HickoryZone,
    pub names: BTreeSet<LowerName>,
    negative_soa: Option<Record>,
}

impl ZoneData {
    pub fn new(origin: LowerName, hz: &HickoryZone, negative_soa: Option<Record>) -> Self {
        ZoneData {
            origin,
            zone: hz.clone(),
            names: hz.names.clone(),
            negative_soa,
        }
    }
    fn classify(&self, name: &LowerName) -> NameClass {
        self.zone.classify(name)
    }
    /// The A and AAAA records owned by `name`.
    fn addresses<'a>(&'a self, name: &'a LowerName) -> impl Iterator<Item = &'a Record> + 'a {
        self.zone.records.iter().filter(move |r| {
            matches!(r.record_type(), RecordType::A | RecordType::AAAA)
                && LowerName::new(&r.name) == *name
        })
    }
}

/// The IPv4 address of `d.c.b.a.in-addr.arpa.`, if `name` is one.
pub fn reverse_addr(name: &LowerName) -> Option<Ipv4Addr> {
    let n = Name::from(name.clone());
    let labels: Vec<&[u8]> = n.iter().collect();
    let [d, c, b, a, in_addr, arpa] = labels.as_slice() else {
        return None;
    };
    if !in_addr.eq_ignore_ascii_case(b"in-addr") || !arpa.eq_ignore_ascii_case(b"arpa") {
        return None;
    }
    let octet = |l: &[u8]| std::str::from_utf8(l).ok()?.parse::<u8>().ok();
    Some(Ipv4Addr::new(octet(a)?, octet(b)?, octet(c)?, octet(d)?))
}
