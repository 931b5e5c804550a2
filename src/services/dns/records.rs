//! Pure conversion of the plan's zones ([`crate::plan::Zone`]) into hickory
//! records, plus the RFC 4592 wildcard rule used to work around hickory's
//! wildcard-NXDOMAIN bug. No I/O; the zone content itself is derived only in
//! `plan.rs`.

use std::collections::BTreeSet;

use hickory_proto::rr::rdata::{A, AAAA, CNAME, NS, PTR, SOA, SRV, TXT};
use hickory_proto::rr::{LowerName, Name, RData, Record};

use crate::plan::{self, Zone};

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConvertError {
    #[error("zone {zone}: name {name:?} is not a valid absolute DNS name: {reason}")]
    BadName {
        zone: String,
        name: String,
        reason: String,
    },
    #[error("zone {zone}: the first record must be the SOA")]
    NoSoa { zone: String },
    #[error("zone {zone}: record {name} is outside the zone")]
    OutOfZone { zone: String, name: String },
}

/// One zone ready for hickory: origin, SOA serial and every record.
#[derive(Debug, Clone)]
pub struct HickoryZone {
    pub origin: Name,
    pub serial: u32,
    pub records: Vec<Record>,
    /// Parents of wildcard owners (`apps.x.` for `*.apps.x.`), lower case.
    pub wildcard_parents: Vec<LowerName>,
    /// Every owner name in the zone, lower case (for the wildcard rule).
    pub names: BTreeSet<LowerName>,
}

fn name(zone: &str, s: &str) -> Result<Name, ConvertError> {
    let bad = |reason: String| ConvertError::BadName {
        zone: zone.to_string(),
        name: s.to_string(),
        reason,
    };
    if !s.ends_with('.') {
        return Err(bad("missing the trailing dot".into()));
    }
    let n = Name::from_ascii(s).map_err(|e| bad(e.to_string()))?;
    if !n.is_fqdn() {
        return Err(bad("not fully qualified".into()));
    }
    Ok(n)
}

/// Split text into RFC 1035 character-strings of at most 255 bytes,
/// never inside a UTF-8 sequence.
fn txt_chunks(t: &str) -> Vec<String> {
    if t.is_empty() {
        return vec![String::new()];
    }
    let mut out = Vec::new();
    let mut cur = String::new();
    for c in t.chars() {
        if cur.len() + c.len_utf8() > 255 {
            out.push(std::mem::take(&mut cur));
        }
        cur.push(c);
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// Convert one plan record.
pub fn record(zone: &str, r: &plan::Record) -> Result<Record, ConvertError> {
    let owner = name(zone, &r.name)?;
    let n = |s: &str| name(zone, s);
    let data = match &r.data {
        plan::RData::A(ip) => RData::A(A(*ip)),
        plan::RData::Aaaa(ip) => RData::AAAA(AAAA(*ip)),
        plan::RData::Cname(t) => RData::CNAME(CNAME(n(t)?)),
        plan::RData::Ns(t) => RData::NS(NS(n(t)?)),
        plan::RData::Ptr(t) => RData::PTR(PTR(n(t)?)),
        plan::RData::Srv {
            priority,
            weight,
            port,
            target,
        } => RData::SRV(SRV::new(*priority, *weight, *port, n(target)?)),
        plan::RData::Txt(t) => RData::TXT(TXT::new(txt_chunks(t))),
        plan::RData::Soa {
            mname,
            rname,
            serial,
            refresh,
            retry,
            expire,
            minimum,
        } => RData::SOA(SOA::new(
            n(mname)?,
            n(rname)?,
            *serial,
            clamp_i32(*refresh),
            clamp_i32(*retry),
            clamp_i32(*expire),
            *minimum,
        )),
    };
    Ok(Record::from_rdata(owner, r.ttl, data))
}

fn clamp_i32(v: u32) -> i32 {
    i32::try_from(v).unwrap_or(i32::MAX)
}

/// Convert a whole plan zone (SOA first, as `plan.rs` guarantees).
pub fn zone(z: &Zone) -> Result<HickoryZone, ConvertError> {
    let origin = name(&z.origin, &z.origin)?;
    let serial = match z.records.first().map(|r| &r.data) {
        Some(plan::RData::Soa { serial, .. }) => *serial,
        _ => {
            return Err(ConvertError::NoSoa {
                zone: z.origin.clone(),
            });
        }
    };
    let mut records = Vec::with_capacity(z.records.len());
    let mut names = BTreeSet::new();
    for r in &z.records {
        let rec = record(&z.origin, r)?;
        if !origin.zone_of(&rec.name) {
            return Err(ConvertError::OutOfZone {
                zone: z.origin.clone(),
                name: r.name.clone(),
            });
        }
        names.insert(LowerName::new(&rec.name));
        records.push(rec);
    }
    let wildcard_parents = z
        .wildcard_parents()
        .iter()
        .map(|p| name(&z.origin, p).map(|n| LowerName::new(&n)))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(HickoryZone {
        origin,
        serial,
        records,
        wildcard_parents,
        names,
    })
}

/// How RFC 4592 classifies a query name that has no records of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameClass {
    /// The name owns records (or is outside the zone): answer from its data.
    Owner,
    /// An empty non-terminal: exists, no data for any type (NODATA).
    EmptyNonTerminal,
    /// Does not exist; its closest encloser has a wildcard child, which
    /// answers for it (a missing type is NODATA).
    Wildcard,
    /// Does not exist and no wildcard applies: NXDOMAIN.
    NxDomain,
}

impl HickoryZone {
    /// True when `n` exists: it owns records or has descendants that do.
    fn exists(&self, n: &LowerName) -> bool {
        self.names.iter().any(|x| n.zone_of(x))
    }

    /// Classify `qname` under RFC 4592 section 3.3.1: the closest encloser
    /// is its longest existing ancestor; a wildcard applies only when that
    /// encloser has a `*` child.
    pub fn classify(&self, qname: &LowerName) -> NameClass {
        let origin = LowerName::new(&self.origin);
        if self.names.contains(qname) || !origin.zone_of(qname) {
            return NameClass::Owner;
        }
        if self.exists(qname) {
            return NameClass::EmptyNonTerminal;
        }
        let mut anc = qname.base_name();
        while !self.exists(&anc) {
            if anc.is_root() {
                return NameClass::Owner;
            }
            anc = anc.base_name();
        }
        if self.wildcard_parents.contains(&anc) {
            NameClass::Wildcard
        } else {
            NameClass::NxDomain
        }
    }

    /// True when `qname` is answered by a wildcard of this zone.
    pub fn covered_by_wildcard(&self, qname: &LowerName) -> bool {
        self.classify(qname) == NameClass::Wildcard
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{Plan, RData as P};
    use hickory_proto::rr::RecordType;

    fn plan() -> Plan {
        let text = "name: c\nbaseDomain: example.com\nnetwork: { cidr: 10.0.0.0/24, gateway: 10.0.0.1, applianceIP: 10.0.0.1, ingressVIP: 10.0.0.7 }\nnodes:\n  - { name: m0, role: master, mac: '52:54:00:00:00:01', ip: 10.0.0.10 }\n  - { name: w0, role: worker, mac: '52:54:00:00:00:02', ip: 10.0.0.20 }\ndns:\n  records:\n    - { name: x.apps, type: A, value: 10.0.0.9 }\n    - { name: t, type: TXT, value: hello }\n";
        crate::config::from_str(text, std::path::Path::new("/"), std::path::Path::new("t")).unwrap()
    }

    #[test]
    fn converts_every_plan_record_in_order() {
        let p = plan();
        for z in &p.zones {
            let h = zone(z).unwrap();
            assert_eq!(h.records.len(), z.records.len());
            assert_eq!(h.origin.to_string(), z.origin);
            for (a, b) in h.records.iter().zip(&z.records) {
                assert_eq!(a.name.to_string(), b.name);
                assert_eq!(a.ttl, b.ttl);
                assert_eq!(a.record_type().to_string(), b.data.type_name());
                // Same presentation as the BIND rendering.
                let want = b.data.to_string();
                let got = a.data.to_string();
                match &b.data {
                    P::Txt(_) => assert_eq!(got.trim_matches('"'), want.trim_matches('"')),
                    _ => assert_eq!(got, want),
                }
            }
        }
        let fwd = zone(&p.zones[0]).unwrap();
        assert_eq!(fwd.records[0].record_type(), RecordType::SOA);
        assert_eq!(fwd.records[1].record_type(), RecordType::NS);
        assert_eq!(fwd.wildcard_parents.len(), 1);
        assert_eq!(fwd.wildcard_parents[0].to_string(), "apps.c.example.com.");
        let srv: Vec<_> = fwd
            .records
            .iter()
            .filter(|r| r.record_type() == RecordType::SRV)
            .map(|r| r.data.to_string())
            .collect();
        assert_eq!(srv, ["0 10 2380 etcd-0.c.example.com."]);
        let a_star = fwd
            .records
            .iter()
            .find(|r| r.name.to_string() == "*.apps.c.example.com.")
            .unwrap();
        assert_eq!(a_star.data.to_string(), "10.0.0.7");
    }

    #[test]
    fn serial_comes_from_the_soa() {
        let p = plan();
        let h = zone(&p.zones[1]).unwrap();
        match &p.zones[1].records[0].data {
            P::Soa { serial, .. } => assert_eq!(h.serial, *serial),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn rejects_relative_names_and_missing_soa() {
        let mut z = plan().zones[0].clone();
        z.records[2].name = "nodot.c.example.com".into();
        assert!(matches!(zone(&z), Err(ConvertError::BadName { .. })));
        let mut z = plan().zones[0].clone();
        z.records.remove(0);
        assert!(matches!(zone(&z), Err(ConvertError::NoSoa { .. })));
        let mut z = plan().zones[0].clone();
        z.records[3].name = "api.other.org.".into();
        assert!(matches!(zone(&z), Err(ConvertError::OutOfZone { .. })));
    }

    #[test]
    fn long_txt_is_split_into_character_strings() {
        let long = "é".repeat(200); // 400 bytes
        let chunks = txt_chunks(&long);
        assert!(chunks.iter().all(|c| c.len() <= 255));
        assert_eq!(chunks.concat(), long);
        assert_eq!(txt_chunks(""), vec![String::new()]);
    }

    #[test]
    fn wildcard_rule_follows_rfc4592_closest_encloser() {
        let h = zone(&plan().zones[0]).unwrap();
        let l = |s: &str| LowerName::new(&Name::from_ascii(s).unwrap());
        assert!(h.covered_by_wildcard(&l("foo.apps.c.example.com.")));
        assert!(h.covered_by_wildcard(&l("a.b.apps.c.example.com.")));
        // The parent itself is an empty non-terminal, not a wildcard match.
        assert!(!h.covered_by_wildcard(&l("apps.c.example.com.")));
        // Existing names are answered from their own data.
        assert!(!h.covered_by_wildcard(&l("x.apps.c.example.com.")));
        // Below an existing name the closest encloser is that name: NXDOMAIN.
        assert!(!h.covered_by_wildcard(&l("y.x.apps.c.example.com.")));
        assert!(!h.covered_by_wildcard(&l("nosuch.c.example.com.")));
        assert!(!h.covered_by_wildcard(&l("other.org.")));
        assert_eq!(
            h.classify(&l("apps.c.example.com.")),
            NameClass::EmptyNonTerminal
        );
        assert_eq!(
            h.classify(&l("y.x.apps.c.example.com.")),
            NameClass::NxDomain
        );
        assert_eq!(h.classify(&l("nosuch.c.example.com.")), NameClass::NxDomain);
        assert_eq!(h.classify(&l("x.apps.c.example.com.")), NameClass::Owner);
        assert_eq!(h.classify(&l("*.apps.c.example.com.")), NameClass::Owner);
        assert_eq!(h.classify(&l("API.c.example.com.")), NameClass::Owner);
        assert_eq!(h.classify(&l("other.org.")), NameClass::Owner);
    }
}
