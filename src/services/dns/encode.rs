//! Wire-level rules for DNS answers, shared by the authoritative and the
//! forwarded path: the UDP size limit, truncation, and small error replies
//! built straight from the query bytes.
//!
//! RFCs: 1035 4.1 (message layout), 2181 9 (TC only when the answer or
//! authority does not fit; additional records may be dropped), 6891 6.1.1
//! and 7 (a truncated answer still carries the OPT record, and a query with
//! two OPT records is a FORMERR), DNS Flag Day 2020 (at most 1232 bytes of
//! UDP payload whatever buffer the client advertises).
//!
//! Invariants:
//! - [`fit`] never returns more than `max` bytes (for `max >= 12`) and never
//!   leaves bytes after the last record: a TC answer is exactly header,
//!   question and OPT, as Knot sends it.
//! - The raw walkers ([`question_end`], [`opt_count`]) are bounds-checked
//!   and return `None` on anything malformed; nothing here panics on
//!   network input.

use hickory_proto::op::{Message, ResponseCode};

/// Largest UDP answer sent, whatever the client's EDNS buffer (DNS Flag
/// Day 2020: no IP fragmentation on common paths).
pub const UDP_MAX: u16 = 1232;

/// The UDP answer limit for a query: 512 without EDNS (RFC 1035 4.2.1),
/// else the client's buffer clamped to 512..=[`UDP_MAX`].
pub fn udp_limit(edns_payload: Option<u16>) -> usize {
    match edns_payload {
        None => 512,
        Some(p) => usize::from(p.clamp(512, UDP_MAX)),
    }
}

const TC: u8 = 0x02;
const QR: u8 = 0x80;

/// Make an encoded answer fit in `max` bytes: unchanged when it fits; else
/// without its additional records (OPT kept, no TC: RFC 2181 9); else the
/// RFC 6891 TC form: header with TC, the question, the OPT, nothing else.
pub fn fit(resp: Vec<u8>, max: usize) -> Vec<u8> {
    if resp.len() <= max {
        return resp;
    }
    let Ok(mut m) = Message::from_vec(&resp) else {
        return bare_tc(&resp);
    };
    if !m.additionals.is_empty() {
        m.additionals.clear();
        if let Ok(b) = m.to_vec()
            && b.len() <= max
        {
            return b;
        }
    }
    match m.truncate().to_vec() {
        Ok(b) if b.len() <= max => b,
        _ => bare_tc(&resp),
    }
}

/// Last resort: the 12-byte header with TC and every count zero.
fn bare_tc(resp: &[u8]) -> Vec<u8> {
    let mut h = resp
        .get(..12)
        .map(<[u8]>::to_vec)
        .unwrap_or_else(|| vec![0; 12]);
    h[2] |= QR | TC;
    h[4..12].fill(0);
    h
}

/// Offset just past the name starting at `pos` (a compression pointer ends it).
fn skip_name(msg: &[u8], mut pos: usize) -> Option<usize> {
    loop {
        let len = *msg.get(pos)?;
        match len & 0xc0 {
            0x00 if len == 0 => return Some(pos + 1),
            0x00 => pos += 1 + usize::from(len),
            0xc0 => {
                msg.get(pos + 1)?;
                return Some(pos + 2);
            }
            _ => return None,
        }
    }
}

fn count(msg: &[u8], at: usize) -> Option<usize> {
    Some(usize::from(u16::from_be_bytes([
        *msg.get(at)?,
        *msg.get(at + 1)?,
    ])))
}

/// Offset just past the question section.
pub fn question_end(msg: &[u8]) -> Option<usize> {
    let mut pos = 12;
    for _ in 0..count(msg, 4)? {
        pos = skip_name(msg, pos)? + 4;
    }
    (pos <= msg.len()).then_some(pos)
}

/// Number of OPT records in the additional section; `None` if the message
/// cannot be walked.
pub fn opt_count(msg: &[u8]) -> Option<usize> {
    let mut pos = question_end(msg)?;
    let (an, ns, ar) = (count(msg, 6)?, count(msg, 8)?, count(msg, 10)?);
    let mut opts = 0;
    for i in 0..an + ns + ar {
        let (_, rtype, end) = record_at(msg, pos)?;
        pos = end;
        if i >= an + ns && rtype == 41 {
            opts += 1;
        }
    }
    Some(opts)
}

/// The resource record starting at `pos`: where its owner name ends, its
/// type, and where the record ends; `None` when it runs past the message.
fn record_at(msg: &[u8], pos: usize) -> Option<(usize, usize, usize)> {
    let owner_end = skip_name(msg, pos)?;
    let end = owner_end + 10 + count(msg, owner_end + 8)?;
    (end <= msg.len()).then_some((owner_end, count(msg, owner_end)?, end))
}

/// Answer records whose owner repeats the question name byte for byte get
/// a pointer to it instead (RFC 1035 4.1.4), as Knot sends them. hickory
/// writes such an owner in full: it echoes the question's bytes and so has
/// no pointer to them. Only where shortening cannot displace a pointer:
/// one question, answers of A and AAAA records (their data holds no
/// name), no authority records, and only the OPT (root owner) in the
/// additional section. Anything else, or anything malformed, is returned
/// unchanged. Besides ~30 bytes per answer, it makes the answers to every
/// name under a wildcard the same bytes, which the packet cache stores
/// once.
pub fn point_at_question(resp: Vec<u8>) -> Vec<u8> {
    pointed(&resp).unwrap_or(resp)
}

fn pointed(msg: &[u8]) -> Option<Vec<u8>> {
    const A: usize = 1;
    const AAAA: usize = 28;
    const OPT: usize = 41;
    let (qd, an, ns, ar) = (
        count(msg, 4)?,
        count(msg, 6)?,
        count(msg, 8)?,
        count(msg, 10)?,
    );
    if qd != 1 || an == 0 || ns != 0 {
        return None;
    }
    let qname = msg.get(12..skip_name(msg, 12)?)?;
    if qname.len() <= 2 || qname.first().is_some_and(|b| b & 0xc0 != 0) {
        return None;
    }
    let mut pos = question_end(msg)?;
    let mut out = msg.get(..pos)?.to_vec();
    let mut changed = false;
    for i in 0..an + ar {
        let (owner_end, rtype, end) = record_at(msg, pos)?;
        let owner = &msg[pos..owner_end];
        if i < an {
            if rtype != A && rtype != AAAA {
                return None;
            }
            if owner == qname {
                out.extend_from_slice(&[0xc0, 12]);
                changed = true;
            } else if owner == [0xc0, 12] {
                out.extend_from_slice(owner);
            } else {
                return None;
            }
        } else if owner == [0] && rtype == OPT {
            out.extend_from_slice(owner);
        } else {
            return None;
        }
        out.extend_from_slice(&msg[owner_end..end]);
        pos = end;
    }
    (changed && pos == msg.len()).then_some(out)
}

/// An error answer built from the query bytes: same ID, opcode and RD, QR
/// set, `rcode`, the question copied when there is exactly one, and an OPT
/// (buffer [`UDP_MAX`], version 0) when `with_opt`.
pub fn error_reply(query: &[u8], rcode: ResponseCode, with_opt: bool) -> Option<Vec<u8>> {
    let head = query.get(..12)?;
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(&head[..2]);
    out.push(QR | (head[2] & 0x79)); // opcode and RD
    out.push(rcode.low());
    let question = match (count(query, 4), question_end(query)) {
        (Some(1), Some(end)) => Some(&query[12..end]),
        _ => None,
    };
    out.extend_from_slice(&[0, u8::from(question.is_some()), 0, 0, 0, 0, 0]);
    out.push(u8::from(with_opt));
    if let Some(q) = question {
        out.extend_from_slice(q);
    }
    if with_opt {
        let [hi, lo] = UDP_MAX.to_be_bytes();
        out.extend_from_slice(&[0, 0, 41, hi, lo, 0, 0, 0, 0, 0, 0]);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::op::{Edns, MessageType, OpCode, Query};
    use hickory_proto::rr::{Name, RData, Record, rdata::TXT};

    fn big_answer(n: usize) -> Vec<u8> {
        let name = Name::from_ascii("big.example.").unwrap();
        let mut m = Message::new(7, MessageType::Response, OpCode::Query);
        m.add_query(Query::query(
            name.clone(),
            hickory_proto::rr::RecordType::TXT,
        ));
        for i in 0..n {
            m.add_answer(Record::from_rdata(
                name.clone(),
                30,
                RData::TXT(TXT::new(vec![format!("{i:03}{}", "x".repeat(197))])),
            ));
        }
        let mut e = Edns::new();
        e.set_max_payload(UDP_MAX);
        m.set_edns(e);
        m.to_vec().unwrap()
    }

    #[test]
    fn limit_is_512_without_edns_and_at_most_1232() {
        assert_eq!(udp_limit(None), 512);
        assert_eq!(udp_limit(Some(100)), 512);
        assert_eq!(udp_limit(Some(1000)), 1000);
        assert_eq!(udp_limit(Some(4096)), 1232);
    }

    #[test]
    fn truncated_answer_is_header_question_and_opt_only() {
        let full = big_answer(10);
        assert!(full.len() > 1232);
        let t = fit(full.clone(), 1232);
        let qend = question_end(&t).unwrap();
        // Header + question + an 11-byte OPT, nothing after it.
        assert_eq!(t.len(), qend + 11);
        assert_eq!(&t[..2], &full[..2]);
        assert!(t[2] & TC != 0);
        assert_eq!(&t[4..12], &[0, 1, 0, 0, 0, 0, 0, 1]);
        assert_eq!(opt_count(&t), Some(1));
        // What fits is left alone.
        let small = big_answer(2);
        assert_eq!(fit(small.clone(), 1232), small);
    }

    #[test]
    fn walkers_reject_junk_and_count_opts() {
        assert_eq!(question_end(&[0; 5]), None);
        assert_eq!(opt_count(&[0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0]), None);
        let mut q = vec![0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 2, 0, 0, 1, 0, 1];
        for _ in 0..2 {
            q.extend_from_slice(&[0, 0, 41, 4, 0xd0, 0, 0, 0, 0, 0, 0]);
        }
        assert_eq!(opt_count(&q), Some(2));
        let r = error_reply(&q, ResponseCode::FormErr, false).unwrap();
        assert_eq!(r, [0, 1, 0x80, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1]);
        assert!(error_reply(&q[..5], ResponseCode::FormErr, false).is_none());
    }

    /// A response to `name` A as hickory writes it for a wildcard: the
    /// question echoed, each answer's owner in full, then an OPT.
    fn owner_in_full(name: &str, answers: &[[u8; 4]], authority: bool) -> Vec<u8> {
        let ar = 1u8;
        let ns = u8::from(authority);
        let an = u8::try_from(answers.len()).unwrap();
        let mut m = vec![0x12, 0x34, 0x85, 0, 0, 1, 0, an, 0, ns, 0, ar];
        let mut qname = Vec::new();
        for l in name.split('.') {
            qname.push(u8::try_from(l.len()).unwrap());
            qname.extend_from_slice(l.as_bytes());
        }
        qname.push(0);
        m.extend_from_slice(&qname);
        m.extend_from_slice(&[0, 1, 0, 1]);
        for a in answers {
            m.extend_from_slice(&qname);
            m.extend_from_slice(&[0, 1, 0, 1, 0, 0, 1, 44, 0, 4]);
            m.extend_from_slice(a);
        }
        if authority {
            m.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1, 0, 0, 1, 44, 0, 4, 10, 0, 0, 1]);
        }
        m.extend_from_slice(&[0, 0, 41, 4, 0xd0, 0, 0, 0, 0, 0, 0]);
        m
    }

    #[test]
    fn owners_that_repeat_the_question_point_at_it() {
        let full = owner_in_full(
            "Abc.apps.c.example",
            &[[192, 0, 2, 5], [192, 0, 2, 6]],
            false,
        );
        let short = point_at_question(full.clone());
        assert_eq!(short.len(), full.len() - 2 * (20 - 2));
        let (a, b) = (
            Message::from_vec(&full).unwrap(),
            Message::from_vec(&short).unwrap(),
        );
        assert_eq!(a.answers, b.answers);
        assert_eq!(a.edns, b.edns);
        assert_eq!(a.queries, b.queries);
        // Every name under the wildcard now gets the same bytes after the
        // question.
        let other = point_at_question(owner_in_full(
            "x.apps.c.example",
            &[[192, 0, 2, 5], [192, 0, 2, 6]],
            false,
        ));
        let tail = |m: &[u8]| m[question_end(m).unwrap()..].to_vec();
        assert_eq!(tail(&short), tail(&other));
        // Pointed already: unchanged.
        assert_eq!(point_at_question(short.clone()), short);
    }

    #[test]
    fn other_shapes_and_junk_are_left_alone() {
        // An authority section: its names could point past the owner.
        let with_ns = owner_in_full("abc.apps.c.example", &[[192, 0, 2, 5]], true);
        assert_eq!(point_at_question(with_ns.clone()), with_ns);
        // A record type whose data may hold a name (CNAME).
        let mut cname = owner_in_full("abc.apps.c.example", &[[192, 0, 2, 5]], false);
        let t = question_end(&cname).unwrap() + 20 + 1;
        cname[t] = 5;
        assert_eq!(point_at_question(cname.clone()), cname);
        // Every truncation of a good answer: no panic, nothing invented.
        let good = owner_in_full("abc.apps.c.example", &[[192, 0, 2, 5]], false);
        for n in 0..good.len() {
            let cut = good[..n].to_vec();
            assert_eq!(point_at_question(cut.clone()), cut, "{n}");
        }
        // A trailing byte after the last record.
        let mut extra = good.clone();
        extra.push(0);
        assert_eq!(point_at_question(extra.clone()), extra);
    }
}
