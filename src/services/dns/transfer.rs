//! Zone transfers to the site's secondaries (`dns.transfer`) and the
//! serials they follow. Pure: messages in, messages out; no sockets.
//!
//! - [`Serials`] turns the plan's content serials (a hash: the same zone,
//!   the same serial) into served serials that only grow: a new or changed
//!   zone gets `max(previous + 1, now)` in seconds since the epoch (Knot's
//!   `serial-policy: unixtime`), an unchanged zone keeps its serial. So a
//!   secondary sees the serial move forward (RFC 1982 arithmetic) after a
//!   reload and after a restart, which a hash could not promise.
//! - [`answer`] builds AXFR (RFC 5936) and IXFR (RFC 1995) answers from a
//!   zone: SOA, every other record, SOA again, split into messages that
//!   each fit a TCP frame. An IXFR from a secondary that has the current
//!   serial gets the SOA alone; one that is behind gets the whole zone
//!   (RFC 1995 4 allows an AXFR-style answer: we keep no history), and
//!   over UDP the SOA alone tells it to come back over TCP (RFC 1995 2).
//!
//! Why not hickory's AXFR: hickory 0.26's catalog answers AXFR in one
//! message (its issue #351: a zone over 64 KiB fails) and has no IXFR at
//! all (the query is looked up as a type and gets NODATA); both transfer
//! kinds are answered here the same way instead.
//!
//! Invariant: a message that cannot be decoded, or a zone whose first
//! record is not its SOA, gets no transfer (an empty list).

use std::collections::HashMap;

use hickory_proto::op::{Message, MessageType, Metadata, OpCode, Query, ResponseCode};
use hickory_proto::rr::{RData, Record, RecordType};
use hickory_proto::serialize::binary::BinEncodable;

use hickory_proto::rr::LowerName;
use hickory_server::net::xfer::Protocol;
use hickory_server::server::Request;
use tracing::debug;

use super::handler::{Core, Route};
use super::records::HickoryZone;
use crate::plan::{RData as PlanData, Zone};

/// Encoded size after which a transfer starts its next message (well
/// below the 65535-byte TCP frame; names are compressed on top of that).
const MESSAGE_BUDGET: usize = 16 * 1024;

/// RFC 1982 serial arithmetic: is `a` after `b`?
pub fn serial_after(a: u32, b: u32) -> bool {
    a != b && a.wrapping_sub(b) < 0x8000_0000
}

/// The served serial of every zone, by origin, with the content serial it
/// was given for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Serials {
    by_origin: HashMap<String, (u32, u32)>,
}

impl Serials {
    /// Replace the SOA serial of each of `zones` with the one to serve at
    /// `now` (seconds since the epoch); the new state and the origins whose
    /// served serial moved (new zones included).
    pub fn assign(&self, zones: &mut [Zone], now: u32) -> (Serials, Vec<String>) {
        let mut next = Serials::default();
        let mut moved = Vec::new();
        for z in zones.iter_mut() {
            let Some(PlanData::Soa { serial, .. }) = z.records.first_mut().map(|r| &mut r.data)
            else {
                continue;
            };
            let content = *serial;
            let served = match self.by_origin.get(&z.origin) {
                Some(&(c, s)) if c == content => s,
                prev => {
                    moved.push(z.origin.clone());
                    match prev {
                        Some(&(_, s)) if !serial_after(now, s) => s.wrapping_add(1).max(1),
                        _ => now.max(1),
                    }
                }
            };
            *serial = served;
            next.by_origin.insert(z.origin.clone(), (content, served));
        }
        (next, moved)
    }

    /// The served serial of `origin`.
    pub fn get(&self, origin: &str) -> Option<u32> {
        self.by_origin.get(origin).map(|&(_, s)| s)
    }
}

/// The SOA record a zone starts with.
pub fn soa_of(zone: &HickoryZone) -> Option<&Record> {
    zone.records
        .first()
        .filter(|r| r.record_type() == RecordType::SOA)
}

/// The serial an IXFR query says the secondary has (its authority SOA).
fn ixfr_serial(query: &Message) -> Option<u32> {
    query.authorities.iter().find_map(|r| match &r.data {
        RData::SOA(soa) => Some(soa.serial),
        _ => None,
    })
}

fn response(query: &Message, q: Option<&Query>, answers: &[Record]) -> Option<Vec<u8>> {
    let mut meta = Metadata::new(query.metadata.id, MessageType::Response, OpCode::Query);
    meta.authoritative = true;
    meta.response_code = ResponseCode::NoError;
    let mut m = Message::new(query.metadata.id, MessageType::Response, OpCode::Query);
    m.metadata = meta;
    if let Some(q) = q {
        m.add_query(q.clone());
    }
    m.answers.extend(answers.iter().cloned());
    m.to_vec().ok()
}

/// The transfer answer to `query` (AXFR or IXFR for `zone`'s origin):
/// one or more messages, or none when it cannot be built. `tcp` false
/// (an IXFR over UDP) answers the SOA alone.
pub fn answer(query: &[u8], zone: &HickoryZone, tcp: bool) -> Vec<Vec<u8>> {
    let Ok(msg) = Message::from_vec(query) else {
        return Vec::new();
    };
    let (Some(q), Some(soa)) = (msg.queries.first(), soa_of(zone)) else {
        return Vec::new();
    };
    let ours = match &soa.data {
        RData::SOA(s) => s.serial,
        _ => return Vec::new(),
    };
    let up_to_date = q.query_type() == RecordType::IXFR
        && ixfr_serial(&msg).is_some_and(|theirs| !serial_after(ours, theirs));
    if !tcp || up_to_date {
        return response(&msg, Some(q), std::slice::from_ref(soa))
            .into_iter()
            .collect();
    }
    let mut out = Vec::new();
    let mut batch = vec![soa.clone()];
    let mut size = 0;
    for r in zone.records.iter().skip(1).chain(std::iter::once(soa)) {
        let len = r.to_bytes().map(|b| b.len()).unwrap_or(MESSAGE_BUDGET);
        if size + len > MESSAGE_BUDGET && !batch.is_empty() {
            let question = out.is_empty().then_some(q);
            match response(&msg, question, &batch) {
                Some(m) => out.push(m),
                None => return Vec::new(),
            }
            batch.clear();
            size = 0;
        }
        size += len;
        batch.push(r.clone());
    }
    match response(&msg, out.is_empty().then_some(q), &batch) {
        Some(m) => out.push(m),
        None => return Vec::new(),
    }
    out
}

impl Core {
    /// A zone transfer: allowed to `dns.transfer` clients for a zone's
    /// origin, AXFR over TCP only (RFC 5936 4.2); REFUSED otherwise.
    pub(super) fn transfer_route(&self, req: &Request) -> Route {
        let Some(q) = req.queries.queries().first() else {
            return Route::Error(ResponseCode::Refused);
        };
        let ip = req.src().ip();
        let allowed = self.transfer_acl.iter().any(|n| n.contains(ip))
            && (req.protocol() == Protocol::Tcp || q.query_type() == RecordType::IXFR);
        let zone = self
            .transfer_zones
            .iter()
            .position(|z| LowerName::new(&z.origin) == *q.name());
        match zone {
            Some(i) if allowed => Route::Transfer(i),
            _ => {
                debug!(src = %req.src(), zone = %q.name(), "zone transfer refused");
                Route::Error(ResponseCode::Refused)
            }
        }
    }

    /// The messages answering a transfer ([`Route::Transfer`]), counted.
    pub fn transfer(&self, req: &Request, zone: usize) -> Vec<Vec<u8>> {
        let Some(z) = self.transfer_zones.get(zone) else {
            return Vec::new();
        };
        let out = answer(req.as_slice(), z, req.protocol() == Protocol::Tcp);
        for m in &out {
            self.stats.count_response(m);
        }
        debug!(src = %req.src(), zone = %z.origin, messages = out.len(), "zone transfer");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Plan;

    fn plan(extra: &str) -> Plan {
        let text = format!(
            "name: c\nbaseDomain: example.com\nnetwork: {{ cidr: 10.0.0.0/24, gateway: 10.0.0.1, applianceIP: 10.0.0.2, ingressVIP: 10.0.0.7 }}\nnodes:\n  - {{ name: m0, role: master, mac: '52:54:00:00:00:01', ip: 10.0.0.10 }}\n{extra}"
        );
        crate::config::from_str(&text, std::path::Path::new("/"), std::path::Path::new("t"))
            .unwrap()
    }

    fn serial(z: &Zone) -> u32 {
        match &z.records[0].data {
            PlanData::Soa { serial, .. } => *serial,
            _ => panic!("no SOA"),
        }
    }

    #[test]
    fn serials_start_at_now_stay_when_unchanged_and_grow_on_change() {
        let mut zones = plan("").zones;
        let (s1, moved) = Serials::default().assign(&mut zones, 1_000);
        assert_eq!(moved.len(), zones.len());
        assert!(zones.iter().all(|z| serial(z) == 1_000));
        // Same content a second later: same serials, nothing moved.
        let mut again = plan("").zones;
        let (s2, moved) = s1.assign(&mut again, 1_001);
        assert!(moved.is_empty());
        assert_eq!(s2, s1);
        // A changed forward zone, in the same second: previous + 1.
        let mut changed =
            plan("dns:\n  records:\n    - { name: x, type: A, value: 10.0.0.9 }\n").zones;
        let (s3, moved) = s2.assign(&mut changed, 1_000);
        assert_eq!(moved, vec!["c.example.com.".to_string()]);
        assert_eq!(serial(&changed[0]), 1_001);
        assert_eq!(s3.get("c.example.com."), Some(1_001));
        // Later in time: now wins.
        let mut back = plan("").zones;
        let (_, moved) = s3.assign(&mut back, 5_000);
        assert_eq!(moved.len(), 1);
        assert_eq!(serial(&back[0]), 5_000);
        assert!(serial_after(5_000, 1_001));
        assert!(serial_after(1, u32::MAX));
        assert!(!serial_after(7, 7));
    }

    fn query(qtype: RecordType, their_serial: Option<u32>) -> Vec<u8> {
        let mut m = Message::new(42, MessageType::Query, OpCode::Query);
        let name = hickory_proto::rr::Name::from_ascii("c.example.com.").unwrap();
        m.add_query(Query::query(name.clone(), qtype));
        if let Some(s) = their_serial {
            let soa = hickory_proto::rr::rdata::SOA::new(name.clone(), name.clone(), s, 1, 1, 1, 1);
            m.authorities
                .push(Record::from_rdata(name, 0, RData::SOA(soa)));
        }
        m.to_vec().unwrap()
    }

    fn records(msgs: &[Vec<u8>]) -> Vec<Record> {
        msgs.iter()
            .flat_map(|b| Message::from_vec(b).unwrap().answers)
            .collect()
    }

    #[test]
    fn axfr_is_soa_records_soa_and_ixfr_is_soa_alone_when_current() {
        let p = plan("");
        let z = crate::services::dns::records::zone(&p.zones[0]).unwrap();
        let ours = match &z.records[0].data {
            RData::SOA(s) => s.serial,
            _ => panic!(),
        };
        let axfr = answer(&query(RecordType::AXFR, None), &z, true);
        let rs = records(&axfr);
        assert_eq!(rs.len(), z.records.len() + 1);
        assert_eq!(rs.first().unwrap().record_type(), RecordType::SOA);
        assert_eq!(rs.last().unwrap().record_type(), RecordType::SOA);
        let m = Message::from_vec(&axfr[0]).unwrap();
        assert!(m.metadata.authoritative);
        assert_eq!(m.metadata.id, 42);
        assert_eq!(m.queries[0].query_type(), RecordType::AXFR);
        let current = answer(&query(RecordType::IXFR, Some(ours)), &z, true);
        assert_eq!(records(&current).len(), 1);
        let behind = answer(
            &query(RecordType::IXFR, Some(ours.wrapping_sub(5))),
            &z,
            true,
        );
        assert_eq!(records(&behind).len(), z.records.len() + 1);
        let udp = answer(
            &query(RecordType::IXFR, Some(ours.wrapping_sub(5))),
            &z,
            false,
        );
        assert_eq!(records(&udp).len(), 1);
        assert!(answer(b"\x00\x01garbage", &z, true).is_empty());
    }

    #[tokio::test]
    async fn transfers_go_to_the_acl_for_a_zone_origin_and_axfr_over_tcp_only() {
        let p = plan("dns:\n  transfer: [10.0.0.5]\n");
        let core = crate::services::dns::handler::build(&p).unwrap();
        let at = |s: &str| s.parse::<std::net::SocketAddr>().unwrap();
        let rcode = |b: &[u8]| b[3] & 0x0f;
        let answers = |b: &[u8]| Message::from_vec(b).unwrap().answers.len();
        let axfr = query(RecordType::AXFR, None);
        let ok = core
            .handle(&axfr, at("10.0.0.5:999"), Protocol::Tcp)
            .await
            .unwrap();
        assert_eq!((rcode(&ok), answers(&ok) > 5), (0, true));
        let other = core
            .handle(&axfr, at("10.0.0.6:999"), Protocol::Tcp)
            .await
            .unwrap();
        assert_eq!((rcode(&other), answers(&other)), (5, 0));
        let udp = core
            .handle(&axfr, at("10.0.0.5:999"), Protocol::Udp)
            .await
            .unwrap();
        assert_eq!(rcode(&udp), 5);
        let ixfr = query(RecordType::IXFR, Some(1));
        let udp = core
            .handle(&ixfr, at("10.0.0.5:999"), Protocol::Udp)
            .await
            .unwrap();
        assert_eq!((rcode(&udp), answers(&udp)), (0, 1));
        let udp = core
            .handle(&ixfr, at("10.0.0.6:999"), Protocol::Udp)
            .await
            .unwrap();
        assert_eq!(rcode(&udp), 5);
        // Below an origin: no transfer.
        let mut m = Message::from_vec(&axfr).unwrap();
        m.queries[0].set_name(hickory_proto::rr::Name::from_ascii("api.c.example.com.").unwrap());
        let api = core
            .handle(&m.to_vec().unwrap(), at("10.0.0.5:999"), Protocol::Tcp)
            .await;
        assert_eq!(rcode(&api.unwrap()), 5);
        // Without dns.transfer: REFUSED to everyone.
        let core = crate::services::dns::handler::build(&plan("")).unwrap();
        let no = core
            .handle(&axfr, at("10.0.0.5:999"), Protocol::Tcp)
            .await
            .unwrap();
        assert_eq!(rcode(&no), 5);
    }

    #[test]
    fn a_large_zone_is_split_into_messages_that_fit_a_tcp_frame() {
        let mut extra = String::from("dns:\n  records:\n");
        for i in 0..400 {
            extra.push_str(&format!(
                "    - {{ name: t{i}, type: TXT, value: '{}' }}\n",
                "x".repeat(200)
            ));
        }
        let p = plan(&extra);
        let z = crate::services::dns::records::zone(&p.zones[0]).unwrap();
        let msgs = answer(&query(RecordType::AXFR, None), &z, true);
        assert!(msgs.len() > 1, "{} messages", msgs.len());
        assert!(msgs.iter().all(|m| m.len() < 65_535));
        assert_eq!(records(&msgs).len(), z.records.len() + 1);
        assert_eq!(Message::from_vec(&msgs[1]).unwrap().queries.len(), 0);
    }
}
